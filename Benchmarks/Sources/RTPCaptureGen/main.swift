// Writes a classic pcap (raw IPv4) of RTP calls for scripts/bench-rtp: CALLS calls, each an
// INVITE with SDP, a 200 with SDP and two PCMU streams (a 440 Hz tone) of 20 ms packets, every
// call starting 50 ms after the previous one, until PACKETS RTP packets are written. About
// 0.5% of the packets are dropped and 0.1% swapped with the next (seeded, so every run writes
// the same file); half of the calls' SDP is left out, so that their streams are found by the
// heuristic rather than by the SDP.
//
// usage: RTPCaptureGen FILE [PACKETS] [CALLS]
import Foundation

let args = CommandLine.arguments
guard args.count >= 2 else {
    FileHandle.standardError.write("usage: RTPCaptureGen FILE [PACKETS] [CALLS]\n".data(using: .utf8)!)
    exit(2)
}
let path = args[1]
let packets = args.count > 2 ? Int(args[2]) ?? 1_000_000 : 1_000_000
let calls = args.count > 3 ? Int(args[3]) ?? 50 : 50

var rng: UInt64 = 0x5EED
@MainActor func nextRandom() -> UInt64 {
    rng &+= 0x9E37_79B9_7F4A_7C15
    var z = rng
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
}

var out = [UInt8]()
out.reserveCapacity(64 << 20)
guard let file = fopen(path, "wb") else { fatalError("cannot open \(path)") }
@MainActor func flush() {
    _ = out.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
    out.removeAll(keepingCapacity: true)
}
@MainActor func le32(_ v: UInt32) { out += [UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF), UInt8((v >> 16) & 0xFF), UInt8(v >> 24)] }
func be16(_ v: Int, into b: inout [UInt8]) { b += [UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }
// Global header: magic, 2.4, zone 0, sigfigs 0, snaplen 65535, LINKTYPE_RAW (101).
le32(0xA1B2_C3D4); out += [2, 0, 4, 0]; le32(0); le32(0); le32(65535); le32(101)

/// One UDP datagram in an IPv4 packet at `t` nanoseconds.
@MainActor func udp(_ t: Int64, _ src: (UInt8, Int), _ dst: (UInt8, Int), _ payload: [UInt8]) {
    var ip: [UInt8] = [0x45, 0]
    be16(28 + payload.count, into: &ip)
    ip += [0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, src.0, 10, 0, 0, dst.0]
    be16(src.1, into: &ip); be16(dst.1, into: &ip); be16(8 + payload.count, into: &ip); ip += [0, 0]
    ip += payload
    le32(UInt32(t / 1_000_000_000)); le32(UInt32((t % 1_000_000_000) / 1000)); le32(UInt32(ip.count)); le32(UInt32(ip.count))
    out += ip
    if out.count > 60 << 20 { flush() }
}

// 160 µ-law samples of a 440 Hz tone (one 20 ms frame; the phase is not carried on).
func muLaw(_ x: Int16) -> UInt8 {
    var v = Int(x)
    let sign: UInt8 = v < 0 ? 0x00 : 0x80
    v = min(abs(v), 32635) + 0x84
    var exp = 7
    while exp > 0 && v & (0x4000 >> (7 - exp)) == 0 { exp -= 1 }
    let mant = (v >> (exp + 3)) & 0x0F
    return ~(sign | UInt8(exp << 4) | UInt8(mant))
}
let frame: [UInt8] = (0..<160).map { muLaw(Int16(8000 * sin(2 * Double.pi * 440 * Double($0) / 8000))) }

struct Stream { var src: (UInt8, Int); var dst: (UInt8, Int); var ssrc: UInt32; var seq: UInt16; var ts: UInt32 }
let start: Int64 = 1_764_000_000 * 1_000_000_000
// A little more than PACKETS / streams each, so that PACKETS remain after the 0.5% loss.
let perStream = (packets * 1006 / 1000 + 2 * calls - 1) / (2 * calls)
var streams: [Stream] = []
for c in 0..<calls {
    let a = UInt8(1 + c % 200), b = UInt8(201 + c % 50)
    let pa = 20000 + 2 * c, pb = 40000 + 2 * c
    let t = start + Int64(c) * 50_000_000
    if c % 2 == 0 {
        func sdp(_ host: UInt8, _ port: Int) -> String {
            "v=0\r\no=- 1 1 IN IP4 10.0.0.\(host)\r\ns=-\r\nc=IN IP4 10.0.0.\(host)\r\nt=0 0\r\nm=audio \(port) RTP/AVP 0 101\r\n"
                + "a=rtpmap:0 PCMU/8000\r\na=rtpmap:101 telephone-event/8000\r\n"
        }
        let id = "bench-\(c)@10.0.0.\(a)"
        let offer = sdp(a, pa), answer = sdp(b, pb)
        let invite = "INVITE sip:b@10.0.0.\(b) SIP/2.0\r\nVia: SIP/2.0/UDP 10.0.0.\(a):5060;branch=z9hG4bK\(c)\r\nMax-Forwards: 70\r\n"
            + "From: <sip:a@10.0.0.\(a)>;tag=a\(c)\r\nTo: <sip:b@10.0.0.\(b)>\r\nCall-ID: \(id)\r\nCSeq: 1 INVITE\r\n"
            + "Contact: <sip:a@10.0.0.\(a)>\r\nContent-Type: application/sdp\r\nContent-Length: \(offer.utf8.count)\r\n\r\n" + offer
        let ok = "SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 10.0.0.\(a):5060;branch=z9hG4bK\(c)\r\n"
            + "From: <sip:a@10.0.0.\(a)>;tag=a\(c)\r\nTo: <sip:b@10.0.0.\(b)>;tag=b\(c)\r\nCall-ID: \(id)\r\nCSeq: 1 INVITE\r\n"
            + "Contact: <sip:b@10.0.0.\(b)>\r\nContent-Type: application/sdp\r\nContent-Length: \(answer.utf8.count)\r\n\r\n" + answer
        udp(t - 20_000_000, (a, 5060), (b, 5060), Array(invite.utf8))
        udp(t - 10_000_000, (b, 5060), (a, 5060), Array(ok.utf8))
    }
    streams.append(Stream(src: (a, pa), dst: (b, pb), ssrc: UInt32(truncatingIfNeeded: nextRandom()), seq: UInt16(truncatingIfNeeded: nextRandom()),
                          ts: UInt32(truncatingIfNeeded: nextRandom())))
    streams.append(Stream(src: (b, pb), dst: (a, pa), ssrc: UInt32(truncatingIfNeeded: nextRandom()), seq: UInt16(truncatingIfNeeded: nextRandom()),
                          ts: UInt32(truncatingIfNeeded: nextRandom())))
}
// Packet k of every stream at 20 ms steps (the call's offset, a little jitter), interleaved in time order.
var written = 0
var held: (Int64, Int, [UInt8])?
for k in 0..<perStream {
    for (i, s) in streams.enumerated() {
        let c = i / 2
        let t = start + Int64(c) * 50_000_000 + Int64(k) * 20_000_000 + Int64(i % 2) * 1_000_000 + Int64(nextRandom() % 400_000)
        var p: [UInt8] = [0x80, k == 0 ? 0x80 : 0x00]
        be16(Int(s.seq), into: &p)
        p += [UInt8(s.ts >> 24), UInt8((s.ts >> 16) & 0xFF), UInt8((s.ts >> 8) & 0xFF), UInt8(s.ts & 0xFF)]
        p += [UInt8(s.ssrc >> 24), UInt8((s.ssrc >> 16) & 0xFF), UInt8((s.ssrc >> 8) & 0xFF), UInt8(s.ssrc & 0xFF)]
        p += frame
        streams[i].seq &+= 1
        streams[i].ts &+= 160
        let r = nextRandom() % 1000
        if r < 5 { continue }  // lost
        if r < 6, held == nil { held = (t, i, p); continue }  // sent after the next one
        udp(t, s.src, s.dst, p)
        written += 1
        if let h = held, h.1 == i {
            udp(t + 1000, s.src, s.dst, h.2)
            written += 1
            held = nil
        }
    }
}
flush()
fclose(file)
print("\(path): \(written) RTP packets, \(streams.count) streams, \(calls / 2 + calls % 2) calls with SDP")
