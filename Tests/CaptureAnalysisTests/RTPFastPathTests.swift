import Foundation
import NetworkIO
import PacketCapture
import Testing

@testable import CaptureAnalysis

/// The RTP fast path (``SIPCaptureReader/nextEvents(into:rtp:)`` handing datagrams in place to
/// ``CaptureAnalyzer/add(_:)-(BorrowedDatagram)``) against the general path (every frame an
/// event, ``CaptureAnalyzer/add(_:)-(CapturedDatagram)``): on captures with SIP/SDP, loss,
/// reordering, a duplicate, marker bits, DTMF events, an SSRC change, silence, an unannounced
/// flow, IPv6, VLAN and QinQ tags, an IP-fragmented RTP packet, RTCP, TCP and other UDP, as
/// classic pcap (Ethernet, microseconds) and as pcapng (raw IP, nanoseconds), every field of
/// every stream, the calls, the RTCP counts and the decoder's counters are the same.
struct RTPFastPathTests {
    /// One datagram of the synthetic capture.
    struct Datagram {
        var ns: Int64
        var source: CaptureEndpoint
        var destination: CaptureEndpoint
        var payload: [UInt8]
        var vlans: [UInt16] = []
        var fragmented = false
        var tcp = false
    }

    static func ep(_ host: String, _ port: UInt16) -> CaptureEndpoint { CaptureEndpoint(address: IPAddress(host)!, port: port) }
    static let a = ep("10.0.0.1", 4000), b = ep("10.0.0.2", 6000)
    static let c = ep("10.0.0.3", 7000), d = ep("10.0.0.4", 8000)
    static let v6a = ep("2001:db8::1", 5004), v6b = ep("2001:db8::2", 5006)

    static func be16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    static func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    static func le32(_ v: UInt32) -> [UInt8] { be32(v).reversed() }

    static func rtp(seq: UInt16, ts: UInt32, ssrc: UInt32, pt: UInt8 = 0, marker: Bool = false, payload: [UInt8]) -> [UInt8] {
        [0x80, (marker ? 0x80 : 0) | pt] + be16(Int(seq)) + be32(ts) + be32(ssrc) + payload
    }

    static func sip(_ startLine: String, from: CaptureEndpoint, to: CaptureEndpoint, media: CaptureEndpoint) -> [UInt8] {
        let sdp = "v=0\r\no=- 1 1 IN IP4 \(media.address)\r\ns=-\r\nc=IN IP4 \(media.address)\r\nt=0 0\r\n"
            + "m=audio \(media.port) RTP/AVP 0 101\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:101 telephone-event/8000\r\n"
        let text = "\(startLine)\r\nVia: SIP/2.0/UDP 10.0.0.1:5060;branch=z9hG4bKfast\r\nFrom: <sip:a@10.0.0.1>;tag=a1\r\n"
            + "To: <sip:b@10.0.0.2>\(startLine.hasPrefix("SIP") ? ";tag=b1" : "")\r\nCall-ID: fast-path@10.0.0.1\r\nCSeq: 1 INVITE\r\n"
            + "Contact: <sip:x@\(from.address)>\r\nContent-Type: application/sdp\r\nContent-Length: \(sdp.utf8.count)\r\n\r\n" + sdp
        return Array(text.utf8)
    }

    /// The capture's datagrams in time order.
    static func datagrams() -> [Datagram] {
        var out: [Datagram] = []
        var rng: UInt64 = 0x1234_5678
        func jitter(_ maxMicroseconds: Int64) -> Int64 {
            rng = rng &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int64((rng >> 33) % UInt64(maxMicroseconds)) * 1000
        }
        let t0: Int64 = 1_700_000_000 * 1_000_000_000
        let sipA = ep("10.0.0.1", 5060), sipB = ep("10.0.0.2", 5060)
        out.append(Datagram(ns: t0, source: sipA, destination: sipB, payload: sip("INVITE sip:b@10.0.0.2 SIP/2.0", from: sipA, to: sipB, media: a)))
        out.append(Datagram(ns: t0 + 5_000_000, source: sipB, destination: sipA, payload: sip("SIP/2.0 200 OK", from: sipB, to: sipA, media: b)))
        let tone: [UInt8] = (0..<160).map { UInt8(truncatingIfNeeded: $0 &* 37) }
        let silence = [UInt8](repeating: 0xFF, count: 160)
        // S1: a → b, announced: loss (10, 11), a swap (20/21), a duplicate (30), markers, DTMF 60–65, VLAN tags, a fragmented packet.
        for k in 0..<120 where k != 10 && k != 11 {
            let ns = t0 + 20_000_000 + Int64(k) * 20_000_000 + jitter(900) + (k == 20 ? 21_000_000 : 0)
            var payload = tone, pt: UInt8 = 0, ts = UInt32(5000 + k * 160)
            if (60...65).contains(k) {
                pt = 101
                ts = UInt32(5000 + 60 * 160)
                payload = [5, k >= 63 ? 0x8A : 0x0A] + be16((k - 59) * 160)
            }
            var g = Datagram(ns: ns, source: a, destination: b, payload: rtp(seq: UInt16(truncatingIfNeeded: 65500 + k), ts: ts, ssrc: 0x1111, pt: pt,
                                                                          marker: k == 0 || k == 50 || k == 60, payload: payload))
            if k % 7 == 3 { g.vlans = [100] }
            if k == 40 { g.fragmented = true }
            out.append(g)
            if k == 30 { g.ns += 300_000; out.append(g) }
        }
        // S3: the same flow, a new SSRC after S1.
        for k in 0..<30 {
            out.append(Datagram(ns: t0 + 2_500_000_000 + Int64(k) * 20_000_000 + jitter(500), source: a, destination: b,
                                payload: rtp(seq: UInt16(7 + k), ts: UInt32(90_000 + k * 160), ssrc: 0x3333, payload: tone)))
        }
        // S2: b → a, announced, silent, QinQ tags on some.
        for k in 0..<100 {
            var g = Datagram(ns: t0 + 21_000_000 + Int64(k) * 20_000_000 + jitter(2000), source: b, destination: a,
                             payload: rtp(seq: UInt16(300 + k), ts: UInt32(k * 160), ssrc: 0x2222, marker: k == 0, payload: silence))
            if k % 5 == 1 { g.vlans = [200, 7] }
            out.append(g)
        }
        // S4: c → d, unannounced (the heuristic), PCMA, loss and heavy jitter.
        for k in 0..<80 where k % 17 != 9 {
            out.append(Datagram(ns: t0 + 33_000_000 + Int64(k) * 20_000_000 + jitter(8000), source: c, destination: d,
                                payload: rtp(seq: UInt16(1000 + k), ts: UInt32(k * 160), ssrc: 0x4444, pt: 8, payload: tone)))
        }
        // S5: IPv6, unannounced, a loss and a swap, VLAN-tagged.
        for k in 0..<60 where k != 25 {
            var g = Datagram(ns: t0 + 44_000_000 + Int64(k) * 20_000_000 + jitter(700) + (k == 40 ? 25_000_000 : 0), source: v6a, destination: v6b,
                             payload: rtp(seq: UInt16(k), ts: UInt32(k * 160), ssrc: 0x5555, payload: tone))
            g.vlans = [300]
            out.append(g)
        }
        // RTCP: an SR from a about S2 (with a's SSRC 0x1111), an RR from b about S1.
        let block = { (ssrc: UInt32) -> [UInt8] in be32(ssrc) + [12, 0, 0, 2] + be32(65_600) + be32(40) + be32(0) + be32(0) }
        let sr: [UInt8] = [0x81, 200] + be16(12) + be32(0x1111) + be32(1) + be32(2) + be32(3) + be32(100) + be32(16_000) + block(0x2222)
        let rr: [UInt8] = [0x81, 201] + be16(7) + be32(0x2222) + block(0x1111)
        out.append(Datagram(ns: t0 + 1_010_000_000, source: ep("10.0.0.1", 4001), destination: ep("10.0.0.2", 6001), payload: sr))
        out.append(Datagram(ns: t0 + 1_020_000_000, source: ep("10.0.0.2", 6001), destination: ep("10.0.0.1", 4001), payload: rr))
        // Other UDP (not RTP-looking, and too short to be RTP), and a TCP segment.
        out.append(Datagram(ns: t0 + 700_000_000, source: c, destination: a, payload: [0x17, 0xFE, 0xFD] + [UInt8](repeating: 1, count: 40)))
        out.append(Datagram(ns: t0 + 710_000_000, source: c, destination: a, payload: [0x80, 0x00, 0x01, 0x02, 0x03]))
        out.append(Datagram(ns: t0 + 720_000_000, source: ep("10.0.0.5", 40000), destination: ep("10.0.0.6", 80),
                            payload: Array("GET / HTTP/1.1\r\n\r\n".utf8), tcp: true))
        return out.enumerated().sorted { ($0.element.ns, $0.offset) < ($1.element.ns, $1.offset) }.map(\.element)
    }

    /// IPv4 or IPv6 packets (IPv4 split in two fragments when asked) carrying the datagram.
    static func ipPackets(_ g: Datagram) -> [[UInt8]] {
        let v6 = g.source.address.byteCount == 16
        let transport: [UInt8]
        let proto: UInt8
        if g.tcp {
            proto = 6
            transport = be16(Int(g.source.port)) + be16(Int(g.destination.port)) + be32(1000) + be32(0) + [0x50, 0x18] + be16(65535) + [0, 0, 0, 0] + g.payload
        } else {
            proto = 17
            transport = be16(Int(g.source.port)) + be16(Int(g.destination.port)) + be16(8 + g.payload.count) + [0, 0] + g.payload
        }
        if v6 {
            return [[0x60, 0, 0, 0] + be16(transport.count) + [proto, 64] + g.source.address.bytes + g.destination.address.bytes + transport]
        }
        func ipv4(_ body: ArraySlice<UInt8>, offset: Int, more: Bool) -> [UInt8] {
            [0x45, 0] + be16(20 + body.count) + be16(77) + be16((more ? 0x2000 : 0) | offset / 8) + [64, proto, 0, 0]
                + g.source.address.bytes + g.destination.address.bytes + body
        }
        guard g.fragmented else { return [ipv4(transport[...], offset: 0, more: false)] }
        return [ipv4(transport[0..<48], offset: 0, more: true), ipv4(transport[48...], offset: 48, more: false)]
    }

    /// Classic pcap, little-endian, microseconds, Ethernet with the datagrams' VLAN tags.
    static func pcap(_ gs: [Datagram]) -> [UInt8] {
        var out = le32(0xA1B2_C3D4) + [2, 0, 4, 0] + le32(0) + le32(0) + le32(65535) + le32(1)
        for g in gs {
            for ip in ipPackets(g) {
                var frame: [UInt8] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]
                for (n, v) in g.vlans.enumerated() { frame += be16(n == 0 && g.vlans.count > 1 ? 0x88A8 : 0x8100) + be16(Int(v)) }
                frame += be16(g.source.address.byteCount == 16 ? 0x86DD : 0x0800) + ip
                out += le32(UInt32(g.ns / 1_000_000_000)) + le32(UInt32(g.ns % 1_000_000_000 / 1000)) + le32(UInt32(frame.count)) + le32(UInt32(frame.count))
                out += frame
            }
        }
        return out
    }

    /// pcapng (raw IP, nanoseconds) from our own encoder; no VLAN tags nor fragments there.
    static func pcapng(_ gs: [Datagram]) -> [UInt8] {
        var e = PcapngEncoder()
        var out = e.header()
        for g in gs {
            let t = CaptureTimestamp(seconds: g.ns / 1_000_000_000, nanoseconds: g.ns % 1_000_000_000)
            if g.tcp {
                out += e.tcp(from: g.source, to: g.destination, payload: g.payload, time: t)
            } else if let bytes = e.udp(from: g.source, to: g.destination, payload: g.payload, time: t) {
                out += bytes
            }
        }
        return out
    }

    struct Outcome: Equatable {
        var streams: [String]
        var calls: [RTPStreamAnalyzer.CallMedia]
        var rtcpPackets: Int
        var unmatchedReportBlocks: Int
        var counters: CaptureCounters
        var sipMessages: Int
        var error: CaptureFileError?
        /// The kept payloads (audio export), as text.
        var payloads: [String]
    }

    /// Reads the capture at `path` as `capture --rtp` does, by the fast path or the general one;
    /// also returns the analysis and how many datagrams the fast path took.
    /// With `audio`, payloads and timelines are kept too (what `--audio` and `--html` ask for).
    static func analyze(_ path: String, fast: Bool, audio: Bool = false) throws -> (Outcome, RTPStreamAnalyzer, Int) {
        let reader = try SIPCaptureReader(path: path, datagrams: true, payloads: true)
        var analysis = CaptureAnalyzer(keepCalls: true, rtp: true, rtpPayloads: audio, rtpTimelines: audio)
        var events: [CaptureEvent] = []
        var lent = 0
        func take(_ e: CaptureEvent) {
            switch e {
            case .message(let m): analysis.add(m)
            case .digest(let d): analysis.add(d)
            case .datagram(let d): analysis.add(d)
            case .anomaly: analysis.noteAnomaly()
            }
        }
        var failure: CaptureFileError?
        do throws(CaptureFileError) {
            if fast {
                while try reader.nextEvents(into: &events, rtp: { lent += 1; analysis.add($0) }) { events.forEach(take) }
            } else {
                while try reader.nextEvents(into: &events) { events.forEach(take) }
            }
        } catch {
            var decoder = reader.decoder
            decoder.finish().forEach(take)
            failure = error
        }
        analysis.finish()
        let rtp = try #require(analysis.rtp)
        let outcome = Outcome(streams: rtp.streams.map { String(describing: $0) }, calls: rtp.calls, rtcpPackets: rtp.rtcpPackets,
                              unmatchedReportBlocks: rtp.unmatchedReportBlocks, counters: reader.counters, sipMessages: analysis.summary.messages,
                              error: failure, payloads: rtp.payloads.map { String(describing: $0) })
        return (outcome, rtp, lent)
    }

    static func write(_ bytes: [UInt8], _ name: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("rtp-fast-\(getpid())-\(name)").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("pcap: the fast path gives every figure the general path gives")
    func classicPcapAgrees() throws {
        let path = try Self.write(Self.pcap(Self.datagrams()), "classic.pcap")
        defer { unlink(path) }
        let (general, rtp, noneLent) = try Self.analyze(path, fast: false)
        let (fast, _, lent) = try Self.analyze(path, fast: true)
        #expect(noneLent == 0)
        #expect(lent > 350, "the fast path took \(lent) datagrams")
        #expect(fast == general)
        // The capture is what it is meant to be.
        #expect(general.error == nil && general.sipMessages == 2)
        #expect(rtp.streams.count == 5, "\(rtp.streams.map(\.key))")
        let s1 = try #require(rtp.streams.first { $0.key.ssrc == 0x1111 })
        #expect(s1.announced && s1.callID == "fast-path@10.0.0.1")
        #expect(s1.lost == 1 && s1.sequenceErrors == 4, "lost \(s1.lost), errors \(s1.sequenceErrors)")
        #expect(s1.dtmf.map(\.digit) == ["5"] && s1.packets == 119)
        #expect(!s1.reports.isEmpty)
        let s2 = try #require(rtp.streams.first { $0.key.ssrc == 0x2222 })
        #expect(s2.silent == true && s2.senderReports == 0 && !s2.reports.isEmpty)
        #expect(rtp.streams.contains { $0.key.ssrc == 0x3333 && $0.key.source == Self.a })
        let s4 = try #require(rtp.streams.first { $0.key.ssrc == 0x4444 })
        #expect(!s4.announced && s4.lost == 5 && s4.payloadNames == "g711A", "\(s4.lost) \(s4.payloadNames)")
        let s5 = try #require(rtp.streams.first { $0.key.ssrc == 0x5555 })
        #expect(s5.key.source == Self.v6a && s5.lost == 1 && s5.problem)
        #expect(general.counters.fragments == 2 && general.counters.datagramsReassembled == 1 && general.counters.tcpSegments == 1)
        #expect(general.counters.ipv6Packets == 59)
        #expect(rtp.rtcpPackets == 2)
        // Payloads kept and timelines drawn: the same again.
        let (generalAudio, withAudio, _) = try Self.analyze(path, fast: false, audio: true)
        let (fastAudio, _, _) = try Self.analyze(path, fast: true, audio: true)
        #expect(fastAudio == generalAudio)
        #expect(withAudio.payloads.map(\.count) == withAudio.streams.map(\.packets))
        #expect(withAudio.streams.allSatisfy { !$0.timeline.isEmpty })
    }

    @Test("pcapng: the fast path gives every figure the general path gives")
    func pcapngAgrees() throws {
        let path = try Self.write(Self.pcapng(Self.datagrams()), "capture.pcapng")
        defer { unlink(path) }
        let (general, rtp, _) = try Self.analyze(path, fast: false)
        let (fast, _, lent) = try Self.analyze(path, fast: true)
        #expect(lent > 350, "the fast path took \(lent) datagrams")
        #expect(fast == general)
        #expect(general.error == nil && rtp.streams.count == 5)
    }

    @Test("a capture cut short: the same frames, then the same error")
    func truncatedCaptureAgrees() throws {
        let whole = Self.pcap(Self.datagrams())
        for cut in [whole.count - 7, whole.count / 2 + 3, 24 + 10] {
            let path = try Self.write(Array(whole[..<cut]), "cut-\(cut).pcap")
            defer { unlink(path) }
            let (general, _, _) = try Self.analyze(path, fast: false)
            let (fast, _, _) = try Self.analyze(path, fast: true)
            #expect(fast == general, "cut at \(cut)")
            #expect(general.error?.rule == .truncatedRecord, "cut at \(cut)")
        }
    }
}
