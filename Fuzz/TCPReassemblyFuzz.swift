// libFuzzer entry point for TCP stream reassembly: the input is a program of TCP segments (raw
// IPv4 frames) over up to four directions, fed to CaptureDecoder.
// Built by scripts/fuzz tcp-reassembly (SIPMessage as its own module, then PacketCapture with this file).
//
// Two modes, chosen by the first byte's low bit:
// - free: each segment's flags, sequence offset, length and payload come from the input
//   (retransmissions, overlaps, holes, SYN/FIN/RST anywhere, garbage). Checked: no crash, no
//   hang, the counters are consistent, and every message emitted is a parsed SIP message.
// - clean: a known stream of SIP messages is cut into segments at input-chosen points and sent
//   in an input-chosen order with duplicates. Whatever the order, reassembly must give back
//   exactly the messages of the stream, in order, with no gap reported.
import SIPMessage

private let streamText: [UInt8] = Array((
    "INVITE sip:bob@example.com SIP/2.0\r\nVia: SIP/2.0/TCP 192.0.2.1:5060;branch=z9hG4bK1\r\n" +
    "From: <sip:alice@example.com>;tag=a\r\nTo: <sip:bob@example.com>\r\nCall-ID: c1\r\nCSeq: 1 INVITE\r\n" +
    "Content-Length: 4\r\n\r\nv=0\n" +
    "SIP/2.0 180 Ringing\r\nVia: SIP/2.0/TCP 192.0.2.1:5060;branch=z9hG4bK1\r\n" +
    "From: <sip:alice@example.com>;tag=a\r\nTo: <sip:bob@example.com>;tag=b\r\nCall-ID: c1\r\nCSeq: 1 INVITE\r\n" +
    "Content-Length: 0\r\n\r\n" +
    "BYE sip:bob@example.com SIP/2.0\r\nVia: SIP/2.0/TCP 192.0.2.1:5060;branch=z9hG4bK2\r\n" +
    "From: <sip:alice@example.com>;tag=a\r\nTo: <sip:bob@example.com>;tag=b\r\nCall-ID: c1\r\nCSeq: 2 BYE\r\n" +
    "Content-Length: 0\r\n\r\n").utf8)
private let streamMessages = 3

private func be16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
private func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }

/// A raw IPv4 frame carrying one TCP segment from 10.0.0.(1+flow) port 5060+flow to 10.0.0.9:5060.
private func segment(flow: Int, seq: UInt32, flags: UInt8, payload: ArraySlice<UInt8>, number: Int) -> CaptureFrame {
    let tcp = be16(5060 + flow) + be16(5060) + be32(seq) + be32(0) + [0x50, flags] + be16(65535) + [0, 0, 0, 0] + Array(payload)
    let ip: [UInt8] = [0x45, 0] + be16(20 + tcp.count) + be16(number & 0xFFFF) + [0x40, 0, 64, 6, 0, 0]
        + [10, 0, 0, UInt8(1 + flow)] + [10, 0, 0, 9] + tcp
    return CaptureFrame(number: number, timestamp: CaptureTimestamp(seconds: 1_700_000_000, nanoseconds: Int64(number) * 1000),
                        linkType: .raw, data: ip)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTCPReassembly(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    guard let mode = input.first else { return 0 }
    var limits = CaptureDecoder.Limits()
    limits.maxBufferedBytesPerFlow = 1 << 12 // small, so the budget overflow path is reached
    var decoder = CaptureDecoder(limits: limits)
    var events: [CaptureEvent] = []
    var number = 0
    var i = 1
    func byte() -> Int? {
        guard i < input.count else { return nil }
        defer { i += 1 }
        return Int(input[i])
    }
    if mode & 1 == 0 {
        // Free mode.
        let isn: [UInt32] = [1000, 0xFFFF_FF00, 77, 0x8000_0000] // one flow wraps around 2^32
        while let op = byte(), let hi = byte(), let lo = byte(), let n = byte() {
            let flow = op & 3
            let flags = UInt8((op >> 2) & 0x3F) | 0x10
            let offset = Int(Int16(bitPattern: UInt16(hi << 8 | lo)))
            let start = i
            let payload: ArraySlice<UInt8>
            if op & 0x80 != 0 {
                // Raw bytes from the input.
                let end = min(input.count, start + n)
                payload = input[start..<end]
                i = end
            } else {
                // Consistent stream bytes at that offset (so retransmissions agree).
                let s = ((offset % streamText.count) + streamText.count) % streamText.count
                payload = streamText[s..<min(streamText.count, s + n)]
            }
            number += 1
            events += decoder.decode(segment(flow: flow, seq: isn[flow] &+ UInt32(bitPattern: Int32(offset)), flags: flags, payload: payload, number: number))
        }
        events += decoder.finish()
        let c = decoder.counters
        if c.tcpSegments != number { fatalError("\(c.tcpSegments) TCP segments counted for \(number) fed") }
        let messages = events.filter { if case .message = $0 { return true } else { return false } }.count
        if messages != c.sipMessages { fatalError("\(messages) messages emitted, \(c.sipMessages) counted") }
        if c.anomalies != events.count - messages { fatalError("anomaly count \(c.anomalies) vs \(events.count - messages) emitted") }
        return 0
    }
    // Clean mode: cut points then an order (with duplicates) of the pieces.
    var cuts: [Int] = [0]
    while let b = byte(), b != 0, cuts.count < 64 {
        let next = cuts.last! + b
        if next >= streamText.count { break }
        cuts.append(next)
    }
    cuts.append(streamText.count)
    let pieces = (0..<(cuts.count - 1)).map { (cuts[$0], cuts[$0 + 1]) }
    var order: [Int] = []
    while let b = byte(), order.count < 256 { order.append(b % pieces.count) }
    // Every piece at least once: the missing ones go at the end.
    for p in pieces.indices where !order.contains(p) { order.append(p) }
    let isn: UInt32 = mode & 2 == 0 ? 5000 : 0xFFFF_FE00
    number += 1
    events += decoder.decode(segment(flow: 0, seq: isn, flags: 0x02, payload: [], number: number)) // SYN
    for p in order {
        let (a, b) = pieces[p]
        number += 1
        events += decoder.decode(segment(flow: 0, seq: isn &+ 1 &+ UInt32(a), flags: 0x18, payload: streamText[a..<b], number: number))
    }
    events += decoder.finish()
    var got: [SIPMessage] = []
    for e in events {
        switch e {
        case .message(let m): got.append(m.message)
        case .anomaly(let a): fatalError("clean stream reported \(a)")
        case .digest, .datagram: fatalError("a plain decoder reported a digest or a datagram")
        }
    }
    if got.count != streamMessages { fatalError("clean stream gave \(got.count) messages, wanted \(streamMessages)") }
    if got.map({ $0.callID ?? "" }) != ["c1", "c1", "c1"] || got[0].method != .invite || got[1].statusCode != 180 || got[2].method != .bye {
        fatalError("clean stream gave the wrong messages: \(got.map { String(decoding: $0.serialized(), as: UTF8.self) })")
    }
    if got.reduce(0, { $0 + $1.serialized().count }) != streamText.count { fatalError("clean stream bytes differ") }
    return 0
}
