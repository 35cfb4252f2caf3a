import Testing
import PacketCapture
import SwitchboardTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Little builders for synthetic captures (written here from the format specifications).
enum Build {
    static func be16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    static func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    static func u16(_ v: Int, _ big: Bool) -> [UInt8] { big ? be16(v) : be16(v).reversed() }
    static func u32(_ v: UInt32, _ big: Bool) -> [UInt8] { big ? be32(v) : be32(v).reversed() }

    static let sipInvite = Array((
        "INVITE sip:bob@example.com SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.1:5070;branch=z9hG4bKabc\r\n" +
        "Max-Forwards: 70\r\nFrom: <sip:alice@example.com>;tag=1\r\nTo: <sip:bob@example.com>\r\n" +
        "Call-ID: call-1@example.com\r\nCSeq: 1 INVITE\r\nContact: <sip:alice@192.0.2.1:5070>\r\nContent-Length: 0\r\n\r\n").utf8)
    static func sipResponse(_ code: Int, cseq: Int = 1) -> [UInt8] {
        Array(("SIP/2.0 \(code) Whatever\r\nVia: SIP/2.0/TCP 192.0.2.1:5070;branch=z9hG4bKabc\r\n" +
               "From: <sip:alice@example.com>;tag=1\r\nTo: <sip:bob@example.com>;tag=2\r\n" +
               "Call-ID: call-1@example.com\r\nCSeq: \(cseq) INVITE\r\nContent-Length: 0\r\n\r\n").utf8)
    }

    static let a4: [UInt8] = [192, 0, 2, 1], b4: [UInt8] = [192, 0, 2, 2]
    static let a6: [UInt8] = [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [1]
    static let b6: [UInt8] = [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [2]

    static func udp(_ sport: Int, _ dport: Int, _ payload: [UInt8]) -> [UInt8] {
        be16(sport) + be16(dport) + be16(8 + payload.count) + [0, 0] + payload
    }

    static func tcp(_ sport: Int, _ dport: Int, seq: UInt32, flags: UInt8, _ payload: [UInt8] = []) -> [UInt8] {
        be16(sport) + be16(dport) + be32(seq) + be32(0) + [0x50, flags] + be16(65535) + [0, 0, 0, 0] + payload
    }

    /// An IPv4 packet; `fragment` is (byte offset, more fragments).
    static func ipv4(proto: UInt8, _ payload: [UInt8], id: Int = 1, fragment: (Int, Bool)? = nil, src: [UInt8] = a4, dst: [UInt8] = b4) -> [UInt8] {
        var flags = 0x4000
        if let (off, more) = fragment { flags = off / 8 | (more ? 0x2000 : 0) }
        return [0x45, 0] + be16(20 + payload.count) + be16(id) + be16(flags) + [64, proto, 0, 0] + src + dst + payload
    }

    /// An IPv6 packet whose payload starts with the header `next` (extension headers included in `payload`).
    static func ipv6(next: UInt8, _ payload: [UInt8], src: [UInt8] = a6, dst: [UInt8] = b6) -> [UInt8] {
        [0x60, 0, 0, 0] + be16(payload.count) + [next, 64] + src + dst + payload
    }

    static func ethernet(_ ip: [UInt8], v6: Bool = false, vlans: [Int] = []) -> [UInt8] {
        var f: [UInt8] = [2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]
        for (i, v) in vlans.enumerated() { f += be16(i == 0 && vlans.count > 1 ? 0x88A8 : 0x8100) + be16(v) }
        return f + be16(v6 ? 0x86DD : 0x0800) + ip
    }

    /// A classic pcap file.
    static func pcap(_ frames: [[UInt8]], bigEndian: Bool = false, nanosecond: Bool = false, linkType: UInt32 = 1, snapLength: UInt32 = 65535,
                     times: [(UInt32, UInt32)]? = nil) -> [UInt8] {
        var out = u32(nanosecond ? 0xA1B2_3C4D : 0xA1B2_C3D4, bigEndian) + u16(2, bigEndian) + u16(4, bigEndian) + u32(0, bigEndian) + u32(0, bigEndian)
        out += u32(snapLength, bigEndian) + u32(linkType, bigEndian)
        for (i, f) in frames.enumerated() {
            let t = times?[i] ?? (1_700_000_000 + UInt32(i), 0)
            out += u32(t.0, bigEndian) + u32(t.1, bigEndian) + u32(UInt32(f.count), bigEndian) + u32(UInt32(f.count), bigEndian) + f
        }
        return out
    }

    static func pad4(_ b: [UInt8]) -> [UInt8] { b + Array(repeating: 0, count: (4 - b.count % 4) % 4) }

    static func block(_ type: UInt32, _ body: [UInt8], _ big: Bool) -> [UInt8] {
        let body = pad4(body)
        let len = UInt32(12 + body.count)
        return u32(type, big) + u32(len, big) + body + u32(len, big)
    }
    static func shb(_ big: Bool) -> [UInt8] {
        block(0x0A0D_0D0A, u32(0x1A2B_3C4D, big) + u16(1, big) + u16(0, big) + Array(repeating: 0xFF, count: 8), big)
    }
    static func idb(linkType: Int, tsresol: UInt8? = nil, _ big: Bool) -> [UInt8] {
        var body = u16(linkType, big) + [0, 0] + u32(0, big)
        if let r = tsresol { body += u16(9, big) + u16(1, big) + [r, 0, 0, 0] + [0, 0, 0, 0] }
        return block(1, body, big)
    }
    static func epb(interface: UInt32, ts: UInt64, _ data: [UInt8], _ big: Bool) -> [UInt8] {
        block(6, u32(interface, big) + u32(UInt32(ts >> 32), big) + u32(UInt32(ts & 0xFFFF_FFFF), big) + u32(UInt32(data.count), big) + u32(UInt32(data.count), big) + pad4(data), big)
    }
    static func spb(_ data: [UInt8], _ big: Bool) -> [UInt8] { block(3, u32(UInt32(data.count), big) + pad4(data), big) }

    static func frame(_ n: Int, _ data: [UInt8], link: LinkType = .ethernet, seconds: Int64 = 1_700_000_000) -> CaptureFrame {
        CaptureFrame(number: n, timestamp: CaptureTimestamp(seconds: seconds + Int64(n), nanoseconds: 0), linkType: link, data: data)
    }
}

/// Reads every frame until the end or an error.
func readAll(_ r: CaptureFileReader) -> ([CaptureFrame], CaptureFileError?) {
    var frames: [CaptureFrame] = []
    do throws(CaptureFileError) {
        while let f = try r.nextFrame() { frames.append(f) }
        return (frames, nil)
    } catch {
        return (frames, error)
    }
}

func decodeAll(_ frames: [CaptureFrame], limits: CaptureDecoder.Limits = .init()) -> (messages: [CapturedSIPMessage], anomalies: [CaptureAnomaly], counters: CaptureCounters) {
    var d = CaptureDecoder(limits: limits)
    var events: [CaptureEvent] = []
    for f in frames { events += d.decode(f) }
    events += d.finish()
    var m: [CapturedSIPMessage] = [], a: [CaptureAnomaly] = []
    for e in events {
        switch e {
        case .message(let x): m.append(x)
        case .anomaly(let x): a.append(x)
        case .digest, .datagram: Issue.record("a decoder made without digests or datagrams reported one")
        }
    }
    return (m, a, d.counters)
}

/// The captures of the shared corpora, found through `TestPaths` (so `$SWITCHBOARD_CORPORA` counts).
enum Corpus {
    static let root: String = TestPaths.corpus("pcaps")
    static var available: Bool { TestPaths.corporaHas("pcaps/sip-capture/sip-tcp.pcap") }
}
