import Testing
import PacketCapture
import SIPMessage
import NetworkIO

/// The pcapng encoder, read back by our own reader.
@Suite struct WriterTests {
    static let a4 = CaptureEndpoint(address: IPAddress(bytes: [127, 0, 0, 1])!, port: 5060)
    static let b4 = CaptureEndpoint(address: IPAddress(bytes: [127, 0, 0, 2])!, port: 40000)
    static let a6 = CaptureEndpoint(address: IPAddress(bytes: [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [1])!, port: 5060)
    static let b6 = CaptureEndpoint(address: IPAddress(bytes: [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [2])!, port: 5070)

    static func t(_ ms: Int64) -> CaptureTimestamp { CaptureTimestamp(seconds: 1_700_000_000, nanoseconds: ms * 1_000_000 + 123) }

    /// The Internet checksum of `b` (RFC 1071): 0 when the stored checksum in `b` is right.
    static func ones(_ b: ArraySlice<UInt8>) -> UInt16 {
        var s: UInt32 = 0
        var i = b.startIndex
        while i + 1 < b.endIndex { s += UInt32(b[i]) << 8 | UInt32(b[i + 1]); i += 2 }
        if i < b.endIndex { s += UInt32(b[i]) << 8 }
        while s > 0xFFFF { s = (s & 0xFFFF) + (s >> 16) }
        return ~UInt16(s)
    }

    @Test func udpAndTCPOverIPv4AndIPv6RoundTrip() throws {
        var e = PcapngEncoder()
        var file = e.header()
        let invite = Array(Build.sipInvite)
        // Two 40 KB MESSAGEs in one payload: over one segment's 65,000 bytes, so cut in two.
        func message(_ n: Int) -> [UInt8] {
            Array(("MESSAGE sip:b@example.com SIP/2.0\r\nVia: SIP/2.0/TCP 127.0.0.1;branch=z9hG4bKbig\(n)\r\nFrom: <sip:a@x>;tag=1\r\n" +
                   "To: <sip:b@x>\r\nCall-ID: big\r\nCSeq: \(n) MESSAGE\r\nContent-Type: text/plain\r\nContent-Length: 40000\r\n\r\n").utf8)
                + Array(repeating: UInt8(ascii: "x"), count: 40_000)
        }
        let big = message(1) + message(2)
        let u4 = e.udp(from: Self.a4, to: Self.b4, payload: invite, time: Self.t(1))
        let u6 = e.udp(from: Self.a6, to: Self.b6, payload: invite, time: Self.t(2))
        file += try #require(u4) + (try #require(u6))
        file += e.tcp(from: Self.b4, to: Self.a4, payload: invite, time: Self.t(3))
        file += e.tcp(from: Self.a4, to: Self.b4, payload: Build.sipResponse(200), time: Self.t(4))
        file += e.tcp(from: Self.b6, to: Self.a6, payload: big, time: Self.t(5))
        #expect(e.udp(from: Self.a4, to: Self.b6, payload: invite, time: Self.t(6)) == nil)  // mixed families
        #expect(e.udp(from: Self.a4, to: Self.b4, payload: Array(repeating: 0, count: 65_508), time: Self.t(6)) == nil)

        let s = try CaptureSummary(bytes: file)
        #expect(s.fileError == nil)
        #expect(s.anomalies.isEmpty, "\(s.anomalies)")
        // 2 UDP; TCP v4: 3 handshake + 2 data; TCP v6: 3 handshake + 2 data (80 KB: two segments).
        #expect(s.counters.frames == 12)
        #expect(s.counters.tcpRetransmissions == 0 && s.counters.tcpGaps == 0)
        try #require(s.messages.map(\.transport) == [.udp, .udp, .tcp, .tcp, .tcp, .tcp])
        #expect(big.count > PcapngEncoder.maxSegmentPayload)
        #expect(s.messages[0].source == Self.a4 && s.messages[0].destination == Self.b4)
        #expect(s.messages[1].source == Self.a6 && s.messages[1].destination == Self.b6)
        #expect(s.messages[2].source == Self.b4 && s.messages[3].source == Self.a4)
        #expect(s.messages[0].timestamp == Self.t(1) && s.messages[4].timestamp == Self.t(5))
        #expect(s.messages[0].message.serialized() == invite && s.messages[2].message.serialized() == invite)
        #expect(s.messages[4].message.serialized() + s.messages[5].message.serialized() == big)

        // Every IPv4 header checksum, and every UDP/TCP checksum over its pseudo-header, verifies.
        let r = try CaptureFileReader(bytes: file)
        var checked = 0
        while let f = try r.nextFrame() {
            #expect(f.linkType == .raw)
            let p = f.data
            let v6 = p[0] >> 4 == 6
            let header = v6 ? 40 : 20
            let proto = v6 ? p[6] : p[9]
            if !v6 { #expect(Self.ones(p[0..<20]) == 0) }
            let segment = p[header...]
            var pseudo = v6 ? Array(p[8..<40]) : Array(p[12..<20])
            pseudo += v6 ? [UInt8(segment.count >> 24), UInt8(segment.count >> 16 & 0xFF), UInt8(segment.count >> 8 & 0xFF), UInt8(segment.count & 0xFF), 0, 0, 0, proto]
                         : [0, proto, UInt8(segment.count >> 8), UInt8(segment.count & 0xFF)]
            #expect(Self.ones((pseudo + segment)[...]) == 0, "frame \(f.number)")
            checked += 1
        }
        #expect(checked == 12)
    }

    @Test func tcpSequenceNumbersFollowThePayload() throws {
        var e = PcapngEncoder()
        var file = e.header()
        for i in 0..<5 { file += e.tcp(from: Self.b4, to: Self.a4, payload: Build.sipResponse(100 + i), time: Self.t(Int64(i))) }
        let r = try CaptureFileReader(bytes: file)
        var seqs: [UInt32] = [], lengths: [Int] = [], flags: [UInt8] = []
        while let f = try r.nextFrame() {
            let tcp = f.data[20...]
            let s = tcp.startIndex
            seqs.append(UInt32(tcp[s + 4]) << 24 | UInt32(tcp[s + 5]) << 16 | UInt32(tcp[s + 6]) << 8 | UInt32(tcp[s + 7]))
            flags.append(tcp[s + 13])
            lengths.append(tcp.count - 20)
        }
        #expect(flags == [0x02, 0x12, 0x10, 0x18, 0x18, 0x18, 0x18, 0x18])
        for i in 3..<7 { #expect(seqs[i] &+ UInt32(lengths[i]) == seqs[i + 1]) }
        #expect(seqs[0] &+ 1 == seqs[3])
        // Forgetting the connection starts a new handshake.
        e.forgetTCP(Self.a4, Self.b4)
        let again = e.tcp(from: Self.a4, to: Self.b4, payload: Build.sipInvite, time: Self.t(9))
        let s = try CaptureSummary(bytes: e.header() + again)
        #expect(s.counters.frames == 4 && s.messages.count == 1)
    }
}
