// libFuzzer entry point for the SRTP/SRTCP paths of `capture --rtp`: the input is cut into
// datagrams as for rtp-analysis (a length byte, a route byte, the payload); when the route's
// high bit is set the payload is first protected as SRTP or SRTCP (by its look) with its
// sender's key, the one the analysis is given (AES_CM_128_HMAC_SHA1_80 for 10.0.0.1,
// AEAD_AES_128_GCM for the others), and the byte after it, when odd, flips one bit of the
// protected packet. The
// analyzer (keys given on the command line, payloads kept) must not crash, must report finite
// figures, and a stream's SRTP outcomes must not outnumber its packets (a datagram the
// heuristic tried and then dropped counts in neither). Built by scripts/fuzz
// srtp-analysis: rtp-analysis's modules plus CSRTP (libsrtp2) and SRTP.
import NetworkIO
import PacketCapture
import SRTP

private let keys = ["AES_CM_128_HMAC_SHA1_80:AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0e",
                    "AEAD_AES_128_GCM:AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHA=="].map { try! SRTPCaptureKey(parsing: $0) }

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSRTPAnalysis(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let ends = [CaptureEndpoint(address: IPAddress("10.0.0.1")!, port: 4000), CaptureEndpoint(address: IPAddress("10.0.0.2")!, port: 6000),
                CaptureEndpoint(address: IPAddress("2001:db8::1")!, port: 6001)]
    // Each sender's key: 10.0.0.1 the first suite, the others the second.
    let given = [SRTPCaptureKey(crypto: keys[0].crypto, source: ends[0]), SRTPCaptureKey(crypto: keys[1].crypto, source: ends[1]),
                 SRTPCaptureKey(crypto: keys[1].crypto, source: ends[2])]
    var r = RTPStreamAnalyzer(keepPayloads: true, srtp: SRTPCaptureOptions(keys: given, useSDPKeys: false))
    var senders: [SRTPContext] = []
    for k in given {
        do {
            senders.append(try SRTPContext(local: k.crypto, remote: k.crypto))
        } catch {
            fatalError("the test key \(k) does not make a context: \(error)")
        }
    }
    var i = 0, frame = 0
    var fed: [RTPStreamAnalyzer.StreamKey: Int] = [:]
    while i + 2 <= bytes.count {
        let n = Int(bytes[i]), route = Int(bytes[i + 1])
        i += 2
        var payload = Array(bytes[i..<min(i + n, bytes.count)])
        i += payload.count
        frame += 1
        let from = (route & 0x7F) % 3
        if route & 0x80 != 0 {
            switch CapturedDatagram.classify(payload[...]) {
            case .rtp: try? senders[from].protectRTP(&payload)
            case .rtcp: try? senders[from].protectRTCP(&payload)
            case .other: break
            }
            if i < bytes.count {
                let flip = bytes[i]
                i += 1
                if flip & 1 != 0, !payload.isEmpty { payload[Int(flip >> 1) % payload.count] ^= 1 << (flip % 8) }
            }
        }
        let t = CaptureTimestamp(seconds: 1_700_000_000 + Int64(route >> 6), nanoseconds: Int64(frame) * 20_000_000)
        let d = CapturedDatagram(timestamp: t, source: ends[from], destination: ends[((route & 0x7F) / 3) % 3], frameNumber: frame,
                                 length: payload.count, kind: CapturedDatagram.classify(payload[...]), payload: payload[...])
        if d.kind == .rtp {
            if payload.count >= 12 {
                let ssrc = UInt32(payload[8]) << 24 | UInt32(payload[9]) << 16 | UInt32(payload[10]) << 8 | UInt32(payload[11])
                fed[RTPStreamAnalyzer.StreamKey(source: d.source, destination: d.destination, ssrc: ssrc), default: 0] += 1
            }
            _ = payload.withUnsafeBytes { r.add(BorrowedDatagram(timestamp: t, source: d.source, destination: d.destination, frameNumber: frame, payload: $0)) }
        } else {
            r.add(d)
        }
    }
    r.finish()
    for s in r.streams {
        for v in [s.minDelta, s.meanDelta, s.maxDelta, s.minJitter, s.meanJitter, s.maxJitter, s.mos] where !(v?.isFinite ?? true) {
            fatalError("a figure is not finite: \(s)")
        }
        if let st = s.srtp, st.decrypted + st.authenticationFailures + st.replayed > min(s.packets, fed[s.key, default: 0]) {
            fatalError("more SRTP outcomes than packets: \(st) for \(s.packets) packets, \(fed[s.key, default: 0]) datagrams")
        }
        if s.dtmf.count > s.packets { fatalError("more digits than packets") }
    }
    if r.payloads.count != r.streams.count { fatalError("payloads for \(r.payloads.count) of \(r.streams.count) streams") }
    return 0
}
