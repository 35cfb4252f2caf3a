import NetworkIO
import PacketCapture
import MediaCodecs
import RTP
import Testing
import SwitchboardTestSupport

@testable import CaptureAnalysis

/// Hand-built RTP and RTCP datagrams through ``RTPStreamAnalyzer``. The expected, lost and
/// problem figures of the sequence cases are those `tshark -z rtp,streams` gives for the same
/// packets (checked with pcaps of these sequences).
struct RTPStreamAnalyzerTests {
    static let a = CaptureEndpoint(address: IPAddress("10.0.0.1")!, port: 4000)
    static let b = CaptureEndpoint(address: IPAddress("10.0.0.2")!, port: 6000)

    /// One RTP packet: sequence number, RTP timestamp, arrival (ms from 0), payload type,
    /// marker, SSRC, payload.
    struct P {
        var seq: UInt16
        var ts: UInt32
        var ms: Double
        var pt: UInt8 = 0
        var marker = false
        var ssrc: UInt32 = 0x1234_5678
        var payload: [UInt8] = [UInt8](repeating: 0x00, count: 160)  // µ-law 0x00: loud
    }

    static func bytes(_ p: P) -> [UInt8] {
        var out: [UInt8] = [0x80, (p.marker ? 0x80 : 0) | p.pt, UInt8(p.seq >> 8), UInt8(p.seq & 0xFF)]
        for v in [p.ts, p.ssrc] { out += [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }
        return out + p.payload
    }

    static func datagram(_ bytes: [UInt8], ms: Double, from: CaptureEndpoint = a, to: CaptureEndpoint = b, frame: Int = 1) -> CapturedDatagram {
        let ns = Int64(ms * 1_000_000)
        return CapturedDatagram(timestamp: CaptureTimestamp(seconds: 1_700_000_000, nanoseconds: ns), source: from, destination: to,
                                frameNumber: frame, length: bytes.count, kind: CapturedDatagram.classify(bytes[...]), payload: bytes[...])
    }

    static func media(_ at: CaptureEndpoint, formats: [RTPPayloadFormat] = [.staticFormat(0)!]) -> CaptureAnalyzer.MediaStream {
        .init(media: "audio", address: "\(at.address)", port: at.port, rtcpAddress: "\(at.address)", rtcpPort: at.port + 1, rtcpMux: false,
              announcedBy: at, rtpPackets: 0, rtcpPackets: 0, formats: formats)
    }

    /// Runs packets from a to b (announced) and returns the one stream.
    static func analyze(_ packets: [P], announce: Bool = true, keep: Bool = false) -> RTPStreamAnalyzer {
        var r = RTPStreamAnalyzer(keepPayloads: keep)
        if announce { r.announce(media(b, formats: [.staticFormat(0)!, RTPPayloadFormat(payloadType: 101, name: "telephone-event", clockRate: 8000)]), callID: "c1") }
        for (i, p) in packets.enumerated() { r.add(datagram(bytes(p), ms: p.ms, frame: i + 1)) }
        r.finish()
        return r
    }

    /// A regular 20 ms stream of `n` packets from `seq`.
    static func regular(_ n: Int, seq: UInt16 = 100, ts: UInt32 = 1000) -> [P] {
        (0..<n).map { P(seq: seq &+ UInt16($0), ts: ts &+ UInt32($0) * 160, ms: Double($0) * 20) }
    }

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var packets: [P]
        var expected: Int, lost: Int, errors: Int
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "in order", packets: regular(50), expected: 50, lost: 0, errors: 0),
        Case(name: "sequence wraps", packets: regular(12, seq: 65530), expected: 12, lost: 0, errors: 0),
        Case(name: "three lost", packets: regular(10).enumerated().filter { ![3, 4, 5].contains($0.offset) }.map(\.element), expected: 10, lost: 3, errors: 1),
        Case(name: "lost across the wrap", packets: regular(10, seq: 65533).enumerated().filter { $0.offset != 3 }.map(\.element), expected: 10, lost: 1, errors: 1),
        Case(name: "reordered pair", packets: { var p = regular(10); p.swapAt(4, 5); p[4].ms = 80; p[5].ms = 100; return p }(),
             expected: 10, lost: 0, errors: 2),
        Case(name: "duplicate", packets: { var p = regular(10); p.insert(p[6], at: 7); return p }(), expected: 10, lost: -1, errors: 1),
        Case(name: "a late packet ends the stream", packets: { var p = regular(10); let x = p.remove(at: 8); p.append(x); return p }(),
             expected: 9, lost: -1, errors: 2),
        Case(name: "reordered across the wrap", packets: { var p = regular(10, seq: 65530); p.swapAt(4, 5); return p }(),
             expected: 10, lost: 0, errors: 2),
        Case(name: "a jump forward", packets: regular(10) + regular(5, seq: 1100, ts: 2600), expected: 1005, lost: 990, errors: 1),
    ]

    @Test("packets, expected, lost and sequence errors", arguments: cases)
    func counts(_ c: Case) throws {
        let r = Self.analyze(c.packets)
        let s = try #require(r.streams.first)
        #expect(r.streams.count == 1)
        #expect(s.packets == c.packets.count)
        #expect(s.expected == c.expected)
        #expect(s.lost == c.lost)
        #expect(s.sequenceErrors == c.errors)
        #expect(s.problem == (c.errors > 0))
    }

    @Test("jitter per RFC 3550 A.8 over regular packets; deltas; marker packets left out")
    func jitterAndDeltas() throws {
        // Arrivals 0, 20, 45, 65 ms with 160-sample (20 ms) steps: D = 0, 5, 0.
        var p = Self.regular(4)
        p[2].ms = 45
        p[3].ms = 65
        var s = try #require(Self.analyze(p).streams.first)
        let j2 = 0.0, j3 = 5.0 / 16, j4 = j3 * 15 / 16
        #expect(abs(s.maxJitter! - j3) < 1e-9)
        #expect(abs(s.minJitter! - j2) < 1e-9)
        #expect(abs(s.meanJitter! - (j2 + j3 + j4) / 3) < 1e-9)
        #expect(abs(s.maxDelta! - 25) < 1e-9 && abs(s.minDelta! - 20) < 1e-9)
        #expect(s.maxDeltaFrame == 3)
        // A talk spurt after 2 s of silence, marked: its delta is not the max.
        p = Self.regular(10)
        for i in 5..<10 { p[i].ms += 2000; p[i].ts &+= 16000 }
        p[5].marker = true
        s = try #require(Self.analyze(p).streams.first)
        #expect(abs(s.maxDelta! - 20) < 1e-9)
        #expect(s.maxJitter! < 1e-9)
        #expect(s.markers == 1)
        // The same gap unmarked counts as a delta; the timestamp jump matches the clock: no jitter.
        p[5].marker = false
        s = try #require(Self.analyze(p).streams.first)
        #expect(abs(s.maxDelta! - 2020) < 1e-9)
        #expect(s.maxJitter! < 1e-9)
        // A timestamp jump the clock does not follow is jitter.
        p = Self.regular(3)
        p[2].ts &+= 8000
        s = try #require(Self.analyze(p).streams.first)
        #expect(abs(s.maxJitter! - 1000.0 / 16) < 1e-9)
    }

    @Test("streams are (source, destination, SSRC): an SSRC change is a new stream")
    func ssrcChange() {
        var p = Self.regular(20)
        for i in 10..<20 { p[i].ssrc = 0xCAFE }
        let r = Self.analyze(p)
        #expect(r.streams.map(\.key.ssrc) == [0x1234_5678, 0xCAFE])
        #expect(r.streams.map(\.packets) == [10, 10])
        #expect(r.streams.allSatisfy { $0.lost == 0 && $0.callID == "c1" && $0.announced })
    }

    @Test("the heuristic takes an unannounced flow after three consistent packets, counting all three")
    func heuristic() {
        #expect(Self.analyze(Self.regular(2), announce: false).streams.isEmpty)
        let r = Self.analyze(Self.regular(3), announce: false)
        #expect(r.streams.count == 1 && r.streams[0].packets == 3 && !r.streams[0].announced)
        #expect(r.streams[0].first.nanoseconds == 0)
        // SSRC flapping never makes a stream.
        var p = Self.regular(10)
        for i in p.indices where i % 2 == 1 { p[i].ssrc = UInt32(i) }
        #expect(Self.analyze(p, announce: false).streams.isEmpty)
        // Sequence numbers jumping around neither.
        p = Self.regular(10)
        for i in p.indices { p[i].seq = UInt16(i * 7919 % 65536) }
        #expect(Self.analyze(p, announce: false).streams.isEmpty)
    }

    @Test("malformed headers are not counted and do not trap", arguments: [
        [0x80, 0x00, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0xAA] as [UInt8],  // fine: counted
        [0x8F, 0x00, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1],  // 15 CSRCs announced, none present
        [0x90, 0x00, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0xBE, 0xDE, 0xFF, 0xFF],  // extension longer than the packet
        [0xA0, 0x00, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0x00],  // padding count 0
        [0xA0, 0x00, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0x40],  // padding longer than the packet
        [0x80, 0x00, 0, 1],  // short
    ])
    func malformed(_ bytes: [UInt8]) {
        var r = RTPStreamAnalyzer()
        r.announce(Self.media(Self.b), callID: nil)
        let counted = r.add(Self.datagram(bytes, ms: 0)) != nil
        r.finish()
        #expect(counted == (bytes.count == 13 && bytes[0] == 0x80))
        #expect(r.streams.count == (counted ? 1 : 0))
    }

    @Test("RFC 4733 digits: one per event however many packets and end retransmissions, with their times")
    func digits() throws {
        var p = Self.regular(5)
        func event(_ code: UInt8, end: Bool, duration: UInt16) -> [UInt8] { [code, end ? 0x8A : 0x0A, UInt8(duration >> 8), UInt8(duration & 0xFF)] }
        var seq: UInt16 = 105, ms = 100.0
        for (code, ts) in [(UInt8(1), UInt32(1800)), (11, 3000)] {
            for k in 0..<6 {
                let end = k >= 3
                p.append(P(seq: seq, ts: ts, ms: ms, pt: 101, marker: k == 0, payload: event(code, end: end, duration: UInt16(min(k, 3) * 160 + 160))))
                seq &+= 1
                ms += end ? 1 : 20
            }
        }
        let s = try #require(Self.analyze(p).streams.first)
        #expect(s.dtmf.map(\.digit) == ["1", "#"])
        #expect(s.dtmf.map(\.duration) == [640, 640])
        #expect(s.dtmf.allSatisfy { $0.ended })
        #expect(s.dtmf[0].time.nanoseconds == 100_000_000)
        #expect(s.payloadNames == "g711U, telephone-event")
        #expect(s.lost == 0)
    }

    @Test("silence: a G.711 stream of near-zero samples is silent, a loud one is not")
    func silence() throws {
        var quiet = Self.regular(10)
        for i in quiet.indices { quiet[i].payload = [UInt8](repeating: 0xFF, count: 160) }  // µ-law 0xFF = 0
        #expect(try #require(Self.analyze(quiet).streams.first).silent == true)
        quiet[7].payload[3] = 0x10
        #expect(try #require(Self.analyze(quiet).streams.first).silent == false)
    }

    @Test("MOS falls with loss (E-model)")
    func mos() throws {
        let clean = try #require(Self.analyze(Self.regular(100)).streams.first?.mos)
        let lossy = try #require(Self.analyze(Self.regular(100).enumerated().filter { $0.offset % 10 != 5 }.map(\.element)).streams.first?.mos)
        #expect(clean > 4.3 && clean <= 4.5)
        #expect(lossy < clean - 0.3)
    }

    @Test("RTCP receiver reports attach to the stream they describe; one-way calls")
    func rtcpAndOneWay() throws {
        var r = RTPStreamAnalyzer()
        r.announce(Self.media(Self.b), callID: "c1")
        r.announce(Self.media(Self.a), callID: "c1")
        for p in Self.regular(10) { r.add(Self.datagram(Self.bytes(p), ms: p.ms)) }
        let block = RTCPReportBlock(ssrc: 0x1234_5678, fractionLost: 64, cumulativeLost: 3, extendedHighestSequence: 109, jitter: 80,
                                    lastSR: 0, delaySinceLastSR: 0)
        let rr = RTCPCompoundPacket(packets: [.receiverReport(RTCPReceiverReport(ssrc: 0x9999, reports: [block]))]).serialized()!
        let from = CaptureEndpoint(address: Self.b.address, port: 6001), to = CaptureEndpoint(address: Self.a.address, port: 4001)
        r.add(Self.datagram(rr, ms: 250, from: from, to: to))
        r.finish()
        let s = try #require(r.streams.first)
        let report = try #require(s.reports.first)
        #expect(report.fractionLost == 0.25 && report.cumulativeLost == 3 && report.reporter == from)
        #expect(report.jitterMilliseconds == 10)
        #expect(r.rtcpPackets == 1 && r.unmatchedReportBlocks == 0)
        #expect(r.calls.count == 1 && r.calls[0].oneWay)
    }

    @Test("audio: lost packets and timestamp gaps become silence of their length; reordering is undone")
    func audioGaps() throws {
        var p = Self.regular(6)
        for i in p.indices { p[i].payload = [UInt8](repeating: 0x80, count: 160) }  // µ-law 0x80: loud positive
        p.remove(at: 2)  // a lost packet
        p.swapAt(2, 3)  // and two swapped
        let r = Self.analyze(p, keep: true)
        let track = try #require(RTPAudioExport.decode(r.streams[0], packets: r.payloads[0]))
        #expect(track.sampleRate == 8000)
        #expect(track.samples.count == 6 * 160)
        #expect(track.samples[320..<480].allSatisfy { $0 == 0 })
        #expect(track.samples[0..<320].allSatisfy { $0 > 8000 } && track.samples[480...].allSatisfy { $0 > 8000 })
    }
}

/// Mutated RTP and RTCP datagrams (seeded): the analyzer and the audio export take anything
/// without trapping, and what they report stays consistent.
struct RTPStreamAnalyzerRobustnessTests {

    @Test("2,000 mutated datagrams on announced and unannounced flows", arguments: [1, 2, 3] as [UInt64])
    func mutated(seed: UInt64) throws {
        var rng = TestRandom(seed: seed)
        var r = RTPStreamAnalyzer(keepPayloads: true)
        let a = RTPStreamAnalyzerTests.a, b = RTPStreamAnalyzerTests.b
        let c = CaptureEndpoint(address: IPAddress("10.0.0.3")!, port: 7000)
        r.announce(RTPStreamAnalyzerTests.media(b, formats: [.staticFormat(0)!, .staticFormat(8)!,
                                                              RTPPayloadFormat(payloadType: 101, name: "telephone-event", clockRate: 8000),
                                                              RTPPayloadFormat(payloadType: 111, name: "opus", clockRate: 48000, channels: 2)]),
                   callID: "fuzz")
        let block = RTCPReportBlock(ssrc: 7, fractionLost: 1, cumulativeLost: -2, extendedHighestSequence: 9, jitter: 3, lastSR: 0, delaySinceLastSR: 0)
        let rtcp = RTCPCompoundPacket(packets: [.receiverReport(RTCPReceiverReport(ssrc: 9, reports: [block, block]))]).serialized()!
        var taken = 0
        for i in 0..<2000 {
            var p: [UInt8]
            if rng.next() % 8 == 0 {
                p = rtcp
            } else {
                let pt: UInt8 = [0, 8, 101, 111, 13, 96][Int(rng.next() % 6)]
                p = RTPStreamAnalyzerTests.bytes(.init(seq: UInt16(truncatingIfNeeded: i + Int(rng.next() % 5)), ts: UInt32(truncatingIfNeeded: i * 160),
                                                       ms: 0, pt: pt, marker: rng.next() % 10 == 0, ssrc: UInt32(rng.next() % 3) + 5,
                                                       payload: (0..<Int(rng.next() % 200)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }))
            }
            for _ in 0..<Int(rng.next() % 4) where !p.isEmpty {
                switch rng.next() % 4 {
                case 0: p[Int(rng.next() % UInt64(p.count))] = UInt8(truncatingIfNeeded: rng.next())
                case 1: p.removeLast(Int(rng.next() % UInt64(p.count)))
                case 2: p[0] = 0x80 | UInt8(rng.next() % 0x40)  // padding, extension, CSRC bits
                default: p.append(UInt8(truncatingIfNeeded: rng.next()))
                }
            }
            let ends = [a, b, c]
            let from = ends[Int(rng.next() % 3)], to = ends[Int(rng.next() % 3)]
            let ms = Double(i) * 20 + Double(rng.next() % 1000) / 100 - (rng.next() % 50 == 0 ? 5000 : 0)
            if r.add(RTPStreamAnalyzerTests.datagram(p, ms: ms, from: from, to: to, frame: i + 1)) != nil { taken += 1 }
        }
        r.finish()
        // Streams found by the heuristic also count the packets held before they were taken.
        let held = r.streams.filter { !$0.announced }.count * (r.heuristicPackets - 1)
        #expect(r.streams.reduce(0) { $0 + $1.packets } == taken + held)
        #expect(r.payloads.map(\.count) == r.streams.map(\.packets))
        for (i, s) in r.streams.enumerated() {
            #expect(s.packets > 0 && s.sequenceErrors <= s.packets)
            for v in [s.minDelta, s.meanDelta, s.maxDelta, s.minJitter, s.meanJitter, s.maxJitter, s.mos] { #expect(v.map { $0.isFinite } ?? true) }
            if let m = s.mos { #expect((1...4.5).contains(m)) }
            if let t = RTPAudioExport.decode(s, packets: r.payloads[i]) {
                // Bounded by the export's cap (4 hours) plus one payload.
                #expect(t.samples.count <= t.sampleRate * 4 * 3600 + 48000 * 120 / 1000)
            }
        }
    }
}

/// The analysis's own G.711 expansion (used for silence) against MediaCodecs' tables.
@Test("G.711 expansion for silence detection equals the codec's, for all 256 codes of both laws")
func g711ExpansionMatchesCodec() {
    for c in 0...255 {
        #expect(StreamState.muLaw(UInt8(c)) == G711.muLawDecode(UInt8(c)))
        #expect(StreamState.aLaw(UInt8(c)) == G711.aLawDecode(UInt8(c)))
    }
}
