import Foundation
import NetworkIO
import PacketCapture
import RTP
import SDP
import SRTP
import Testing

@testable import CaptureAnalysis

/// SRTP in ``RTPStreamAnalyzer``: packets protected here with our SRTP module (an outbound
/// session per sender), decrypted with the keys the senders announced or keys given.
struct SRTPCaptureTests {
    typealias T = RTPStreamAnalyzerTests
    static let a = T.a, b = T.b
    static let c = CaptureEndpoint(address: IPAddress("10.0.0.3")!, port: 8000)

    static func key(tag: UInt32 = 1, _ profile: SRTPProfile = .aesCM128HMACSHA1_80) -> CryptoAttribute {
        CryptoAttribute(tag: tag, profile: profile, keys: [.random(for: profile)])
    }

    static func media(_ at: CaptureEndpoint, crypto: [CryptoAttribute], secure: Bool = true) -> CaptureAnalyzer.MediaStream {
        var m = T.media(at, formats: [.staticFormat(0)!, RTPPayloadFormat(payloadType: 101, name: "telephone-event", clockRate: 8000)])
        m.crypto = crypto
        m.secure = secure
        return m
    }

    /// `n` 20 ms packets of µ-law silence (0xFF) from `from` to `to`, protected with `crypto`
    /// (plain when nil), the sixth an RFC 4733 event for digit 7 (end bit set).
    static func packets(_ n: Int, crypto: CryptoAttribute?, from: CaptureEndpoint = a, to: CaptureEndpoint = b,
                        ssrc: UInt32 = 0x1234_5678) throws -> [CapturedDatagram] {
        let session = try crypto.map { try SRTPSession(direction: .outbound, crypto: $0) }
        return try (0..<n).map { i in
            var p = T.P(seq: 100 &+ UInt16(i), ts: 1000 &+ UInt32(i) * 160, ms: Double(i) * 20, ssrc: ssrc,
                        payload: [UInt8](repeating: 0xFF, count: 160))
            if i == 5 { p.pt = 101; p.payload = [7, 0x80, 0x03, 0x20] }
            var bytes = T.bytes(p)
            try session?.protectRTP(&bytes)
            return T.datagram(bytes, ms: p.ms, from: from, to: to, frame: i + 1)
        }
    }

    static func run(_ datagrams: [CapturedDatagram], announce: [CaptureAnalyzer.MediaStream], options: SRTPCaptureOptions = .init(),
                    keep: Bool = false) -> RTPStreamAnalyzer {
        var r = RTPStreamAnalyzer(keepPayloads: keep, srtp: options)
        for m in announce { r.announce(m, callID: "c1") }
        for d in datagrams { r.add(d) }
        r.finish()
        return r
    }

    @Test("the sender's a=crypto key decrypts its stream: counts, digits, silence and kept payloads are the clear packets'")
    func sdpKey() throws {
        let ka = Self.key(), kb = Self.key()
        let r = Self.run(try Self.packets(20, crypto: ka), announce: [Self.media(Self.a, crypto: [ka]), Self.media(Self.b, crypto: [kb])], keep: true)
        let s = try #require(r.streams.first)
        #expect(r.streams.count == 1)
        #expect(s.packets == 20 && s.lost == 0 && s.sequenceErrors == 0)
        #expect(s.srtp == SRTPStreamStatus(suite: "AES_CM_128_HMAC_SHA1_80", keySource: .sdp, decrypted: 20, authenticationFailures: 0, replayed: 0))
        #expect(s.srtpFailures == 0 && s.srtp?.wrongKey == false)
        #expect(s.dtmf.map(\.digit) == ["7"])
        #expect(s.silent == true)
        #expect(s.payloadBytes == 19 * 160 + 4)
        #expect(r.payloads[0].count == 20 && r.payloads[0][0].payload == [UInt8](repeating: 0xFF, count: 160))
    }

    @Test("an offerer's several a=crypto lines: the one the answer chose decrypts (GCM when libsrtp has it)")
    func severalLines() throws {
        let second: SRTPProfile = SRTPProfile.aeadAES128GCM.isAvailable ? .aeadAES128GCM : .aesCM128HMACSHA1_32
        let lines = [Self.key(tag: 1), Self.key(tag: 2, second)]
        let r = Self.run(try Self.packets(10, crypto: lines[1]), announce: [Self.media(Self.a, crypto: lines)])
        let s = try #require(r.streams.first)
        #expect(s.srtp?.suite == second.rawValue && s.srtp?.decrypted == 10 && s.srtpFailures == 0)
        #expect(s.dtmf.count == 1)
    }

    @Test("a wrong key: every packet fails authentication, counted from its header, the stream flagged")
    func wrongKey() throws {
        let r = Self.run(try Self.packets(15, crypto: Self.key()), announce: [Self.media(Self.a, crypto: [Self.key()])], keep: true)
        let s = try #require(r.streams.first)
        #expect(s.packets == 15 && s.lost == 0)
        #expect(s.srtpFailures == 15 && s.srtp?.decrypted == 0 && s.srtp?.wrongKey == true)
        #expect(s.dtmf.isEmpty && s.silent == nil)
        #expect(r.payloads[0].isEmpty)
    }

    /// A stream found by the heuristic (no SDP): a packet it tried and dropped (the sequence
    /// jumped past it) was decrypted all the same, but it is no packet of the stream and does
    /// not count in the stream's SRTP status either (the fuzz harness saw outcomes > packets).
    @Test("SRTP outcomes count only the packets the stream counts: one the heuristic dropped does not")
    func droppedByTheHeuristicIsNotCounted() throws {
        let k = Self.key()
        let session = try SRTPSession(direction: .outbound, crypto: k)
        let sequences: [UInt16] = [100] + (0..<10).map { 1000 + $0 }
        let datagrams = try sequences.enumerated().map { i, seq in
            var bytes = T.bytes(T.P(seq: seq, ts: UInt32(seq) * 160, ms: Double(i) * 20, ssrc: 0x1234_5678, payload: [UInt8](repeating: 0xFF, count: 160)))
            try session.protectRTP(&bytes)
            return T.datagram(bytes, ms: Double(i) * 20, from: Self.a, to: Self.b, frame: i + 1)
        }
        let given = try SRTPCaptureKey(parsing: "AES_CM_128_HMAC_SHA1_80:\(k.keyParameters[0].keySalt)@10.0.0.1:4000")
        let r = Self.run(datagrams, announce: [], options: SRTPCaptureOptions(keys: [given]))
        let s = try #require(r.streams.first)
        #expect(r.streams.count == 1 && s.packets == 10, "\(r.streams)")
        #expect(s.srtp?.decrypted == 10 && s.srtpFailures == 0 && s.srtp?.replayed == 0, "\(String(describing: s.srtp))")
    }

    @Test("RTP/SAVP without a key: counted from headers, flagged no key")
    func noKey() throws {
        let r = Self.run(try Self.packets(5, crypto: Self.key()), announce: [Self.media(Self.b, crypto: [])])
        let s = try #require(r.streams.first)
        #expect(s.packets == 5 && s.srtp?.noKey == true && s.srtp?.wrongKey == false && s.srtpFailures == 0)
    }

    @Test("--srtp-key: for its sender (over the SDP's), or for every SRTP stream without one; plain streams untouched")
    func commandLineKeys() throws {
        let ka = Self.key(), kb = Self.key()
        let fromA = try Self.packets(10, crypto: ka)
        let fromB = try Self.packets(10, crypto: kb, from: Self.b, to: Self.a, ssrc: 0xB)
        let plain = try Self.packets(10, crypto: nil, from: Self.c, to: CaptureEndpoint(address: Self.c.address, port: 8002), ssrc: 0xC)
        let announced = [Self.media(Self.a, crypto: [Self.key()]), Self.media(Self.b, crypto: []), Self.media(Self.c, crypto: [], secure: false)]
        let both = [fromA, fromB, plain].flatMap { $0 }.sorted { $0.timestamp < $1.timestamp }
        let keyA = try SRTPCaptureKey(parsing: "AES_CM_128_HMAC_SHA1_80:\(ka.keyParameters[0].keySalt)@10.0.0.1:4000")
        let keyB = try SRTPCaptureKey(parsing: "AES_CM_128_HMAC_SHA1_80:inline:\(kb.keyParameters[0].keySalt)")
        #expect(keyA.source == Self.a && keyB.source == nil)
        let r = Self.run(both, announce: announced, options: SRTPCaptureOptions(keys: [keyA, keyB]))
        let sa = try #require(r.streams.first { $0.key.source == Self.a })
        let sb = try #require(r.streams.first { $0.key.source == Self.b })
        let sc = try #require(r.streams.first { $0.key.source == Self.c })
        #expect(sa.srtp?.keySource == .commandLine && sa.srtp?.decrypted == 10, "\(String(describing: sa.srtp))")
        #expect(sb.srtp?.keySource == .commandLine && sb.srtp?.decrypted == 10, "\(String(describing: sb.srtp))")
        #expect(sc.srtp == nil && sc.packets == 10 && sc.silent == true)
        // The SDP's keys withheld and no key for B: B's stream has none.
        let withheld = Self.run(both, announce: announced, options: SRTPCaptureOptions(keys: [keyA], useSDPKeys: false))
        #expect(withheld.streams.first { $0.key.source == Self.b }?.srtp?.noKey == true)
        #expect(withheld.streams.first { $0.key.source == Self.a }?.srtp?.decrypted == 10)
    }

    @Test("an answerer's packets before its answer's SDP are held and decrypted once its key is seen; never seen: no key")
    func heldUntilAnswer() throws {
        let ka = Self.key(), kb = Self.key()
        let fromB = try Self.packets(12, crypto: kb, from: Self.b, to: Self.a, ssrc: 0xB)
        var r = RTPStreamAnalyzer(keepPayloads: true)
        r.announce(Self.media(Self.a, crypto: [ka]), callID: "c1")
        for d in fromB[..<4] { r.add(d) }
        r.announce(Self.media(Self.b, crypto: [kb]), callID: "c1")
        for d in fromB[4...] { r.add(d) }
        r.finish()
        let s = try #require(r.streams.first)
        #expect(r.streams.count == 1 && s.packets == 12 && s.lost == 0 && s.sequenceErrors == 0)
        #expect(s.srtp?.decrypted == 12 && s.srtpFailures == 0 && s.dtmf.count == 1 && s.silent == true)
        #expect(r.payloads[0].map(\.sequence) == (100..<112).map(Int64.init))
        var never = RTPStreamAnalyzer()
        never.announce(Self.media(Self.a, crypto: [ka]), callID: "c1")
        for d in fromB { never.add(d) }
        never.finish()
        #expect(never.streams.first?.packets == 12 && never.streams.first?.srtp?.noKey == true)
    }

    @Test("a packet captured twice is a duplicate, not an authentication failure")
    func duplicate() throws {
        let ka = Self.key()
        var d = try Self.packets(8, crypto: ka)
        d.insert(d[3], at: 5)
        let r = Self.run(d, announce: [Self.media(Self.a, crypto: [ka])])
        let s = try #require(r.streams.first)
        #expect(s.packets == 9 && s.sequenceErrors >= 1 && s.srtpFailures == 0 && s.srtp?.replayed == 1 && s.srtp?.decrypted == 8)
    }

    @Test("SRTCP: decrypted with the reporter's key and matched to the stream; with a wrong key dropped")
    func srtcp() throws {
        let ka = Self.key(), kb = Self.key()
        var datagrams = try Self.packets(10, crypto: ka)
        let block = RTCPReportBlock(ssrc: 0x1234_5678, fractionLost: 0, cumulativeLost: 0, extendedHighestSequence: 109, jitter: 8,
                                    lastSR: 0, delaySinceLastSR: 0)
        var rr = try #require(RTCPCompoundPacket(packets: [.receiverReport(RTCPReceiverReport(ssrc: 0xB, reports: [block]))]).serialized())
        try SRTPSession(direction: .outbound, crypto: kb).protectRTCP(&rr)
        let from = CaptureEndpoint(address: Self.b.address, port: 6001), to = CaptureEndpoint(address: Self.a.address, port: 4001)
        datagrams.append(T.datagram(rr, ms: 250, from: from, to: to))
        let r = Self.run(datagrams, announce: [Self.media(Self.a, crypto: [ka]), Self.media(Self.b, crypto: [kb])])
        #expect(r.srtcpDecrypted == 1 && r.srtcpDropped == 0)
        #expect(r.streams.first?.reports.count == 1)
        let wrong = Self.run(datagrams, announce: [Self.media(Self.a, crypto: [ka]), Self.media(Self.b, crypto: [Self.key()])])
        #expect(wrong.srtcpDecrypted == 0 && wrong.srtcpDropped == 1 && wrong.streams.first?.reports.isEmpty == true)
    }

    @Test("SRTCP sent before the SDP with its key reached the capture is held and decrypted once the key is seen; never seen: dropped")
    func srtcpHeldUntilAnswer() throws {
        let ka = Self.key(), kb = Self.key()
        let block = RTCPReportBlock(ssrc: 0x1234_5678, fractionLost: 0, cumulativeLost: 0, extendedHighestSequence: 109, jitter: 8,
                                    lastSR: 0, delaySinceLastSR: 0)
        var rr = try #require(RTCPCompoundPacket(packets: [.receiverReport(RTCPReceiverReport(ssrc: 0xB, reports: [block]))]).serialized())
        try SRTPSession(direction: .outbound, crypto: kb).protectRTCP(&rr)
        let from = CaptureEndpoint(address: Self.b.address, port: 6001), to = CaptureEndpoint(address: Self.a.address, port: 4001)
        let fromA = try Self.packets(10, crypto: ka)
        // B (the answerer) reports before its answer's SDP is seen: held, then decrypted.
        var r = RTPStreamAnalyzer()
        r.announce(Self.media(Self.a, crypto: [ka]), callID: "c1")
        for d in fromA[..<5] { r.add(d) }
        r.add(T.datagram(rr, ms: 90, from: from, to: to))
        r.announce(Self.media(Self.b, crypto: [kb]), callID: "c1")
        for d in fromA[5...] { r.add(d) }
        r.finish()
        #expect(r.srtcpDecrypted == 1 && r.srtcpDropped == 0, "\(r.srtcpDecrypted) \(r.srtcpDropped)")
        #expect(r.streams.first?.reports.count == 1)
        // B's key never announced: the held report is dropped at the end, nothing analysed.
        var never = RTPStreamAnalyzer()
        never.announce(Self.media(Self.a, crypto: [ka]), callID: "c1")
        for d in fromA[..<5] { never.add(d) }
        never.add(T.datagram(rr, ms: 90, from: from, to: to))
        never.finish()
        #expect(never.srtcpDecrypted == 0 && never.srtcpDropped == 1 && never.streams.first?.reports.isEmpty == true)
    }

    @Test("no SRTP announced and no key: plain analysis, no SRTP status")
    func plainUntouched() throws {
        let r = Self.run(try Self.packets(6, crypto: nil), announce: [T.media(Self.b)])
        #expect(r.streams.first?.srtp == nil && r.streams.first?.packets == 6 && r.streams.first?.dtmf.count == 1)
    }

    @Test("--srtp-key arguments: forms accepted, errors say what is wrong", arguments: [
        ("AES_CM_128_HMAC_SHA1_80", true, nil as String?), ("NOCOLON", false, "expected SUITE:KEY"),
        ("AES_CM_128_HMAC_SHA1_80:@10.0.0.1:4000", false, "not a crypto suite"),
        ("AES_CM_128_HMAC_SHA1_80:KEY@10.0.0.1", false, "is not HOST:PORT"), ("AES_CM_128_HMAC_SHA1_80:KEY@host:5", false, "not an IP address"),
        ("AES_CM_128_HMAC_SHA1_80:KEY@[::1]:5004", true, nil), ("AES_CM_128_HMAC_SHA1_80:QUJD", true, "needs 30"),
        ("NO_SUCH_SUITE:KEY", true, "unsupported crypto suite"),
    ])
    func parsing(text: String, parses: Bool, message: String?) throws {
        let key30 = "WVNfVQ6s4N9hfrS2TuhaZxH8HTEh28cLxZ/iTAKm"  // 30 bytes
        let arg = text == "AES_CM_128_HMAC_SHA1_80" ? text + ":" + key30 : text.replacingOccurrences(of: "KEY", with: key30)
        do {
            let k = try SRTPCaptureKey(parsing: arg)
            #expect(parses, "\(arg) parsed")
            if let message { #expect(k.problem?.contains(message) == true, "\(String(describing: k.problem))") } else { #expect(k.problem == nil) }
            if arg.contains("[::1]") { #expect(k.source?.port == 5004) }
        } catch {
            #expect(!parses, "\(arg): \(error)")
            if let message { #expect(error.reason.contains(message), "\(error)") }
        }
    }
}
