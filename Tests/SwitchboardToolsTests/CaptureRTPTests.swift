import Foundation
import Media
import MediaRuntime
import NetworkIO
import PacketCapture
import SIPMessage
import SIPRuntime
import SwitchboardTestSupport
import Testing

@testable import CaptureAnalysis
@testable import SwitchboardTools
import Switchboard

/// One row of `tshark -q -z rtp,streams`.
struct TsharkRTPStream: Equatable, CustomStringConvertible {
    var start: Double, end: Double
    var source: String, destination: String
    var ssrc: String
    var payload: String
    var packets: Int, lost: Int
    var deltas: [Double]  // min, mean, max (ms)
    var jitters: [Double]  // min, mean, max (ms)
    var problem: Bool
    /// Whether tshark's mean delta and mean jitter can be compared with ours: not on a stream
    /// carrying telephone events, and not the mean delta on one with marker bits after its first
    /// packet (silence suppression); see ``RTPStreamAnalyzer``.
    var meanDeltaComparable = true, meanJitterComparable = true
    var key: String { "\(source)->\(destination) \(ssrc)" }
    var description: String { "\(key) \(payload) \(start)-\(end) pkts=\(packets) lost=\(lost) delta=\(deltas) jitter=\(jitters) problem=\(problem)" }

    /// The table's rows (start, end, addresses and ports, SSRC, payload names that may hold
    /// spaces, packets, `lost (pct%)`, six figures, an optional `X`).
    static func parse(_ output: String) -> [TsharkRTPStream] {
        var rows: [TsharkRTPStream] = []
        for line in output.split(separator: "\n") {
            var t = line.split(separator: " ").map(String.init)
            guard t.count >= 17, Double(t[0]) != nil, t[6].hasPrefix("0x") else { continue }
            var problem = false
            if t.last == "X" { problem = true; t.removeLast() }
            let figures = t.suffix(6).compactMap(Double.init)
            t.removeLast(6)
            guard figures.count == 6, t.last?.hasSuffix("%)") == true else { continue }
            t.removeLast()
            guard let lost = Int(t.removeLast()), let packets = Int(t.removeLast()) else { continue }
            rows.append(TsharkRTPStream(start: Double(t[0])!, end: Double(t[1])!, source: "\(t[2]):\(t[3])", destination: "\(t[4]):\(t[5])",
                                        ssrc: t[6], payload: t[7...].joined(separator: " "), packets: packets, lost: lost,
                                        deltas: Array(figures[0..<3]), jitters: Array(figures[3..<6]), problem: problem))
        }
        return rows
    }

    /// Our stream as tshark would print it.
    init(_ s: RTPStreamAnalyzer.Stream, origin: CaptureTimestamp) {
        func rel(_ t: CaptureTimestamp) -> Double { Double(t.totalNanoseconds - origin.totalNanoseconds) / 1e9 }
        start = rel(s.first)
        end = rel(s.last)
        source = s.key.source.description
        destination = s.key.destination.description
        ssrc = RTPAudioExportName.hex(s.key.ssrc)
        payload = s.payloadNames
        packets = s.packets
        lost = s.lost
        deltas = [s.minDelta ?? -1, s.meanDelta ?? 0, s.maxDelta ?? 0]
        jitters = [s.minJitter ?? -1, s.meanJitter ?? 0, s.maxJitter ?? 0]
        problem = s.problem
        let events = s.formats.contains { $0.name == "telephone-event" || $0.name == "rtpevent" }
        meanJitterComparable = !events
        meanDeltaComparable = !events && s.markers <= 1
    }

    init(start: Double, end: Double, source: String, destination: String, ssrc: String, payload: String, packets: Int, lost: Int,
         deltas: [Double], jitters: [Double], problem: Bool) {
        (self.start, self.end, self.source, self.destination, self.ssrc, self.payload) = (start, end, source, destination, ssrc, payload)
        (self.packets, self.lost, self.deltas, self.jitters, self.problem) = (packets, lost, deltas, jitters, problem)
    }

    /// Equal as printed: times to the microsecond, figures to the thousandth (±1 for rounding);
    /// `self` is ours (see ``meanDeltaComparable``).
    func agrees(with o: TsharkRTPStream) -> Bool {
        let compared = [0, 2, 3, 5] + (meanDeltaComparable ? [1] : []) + (meanJitterComparable ? [4] : [])
        let a = deltas + jitters, b = o.deltas + o.jitters
        return key == o.key && payload == o.payload && packets == o.packets && lost == o.lost && problem == o.problem
            && abs(start - o.start) < 2e-6 && abs(end - o.end) < 2e-6
            && compared.allSatisfy { abs(a[$0] - b[$0]) < 0.0015 }
    }
}

/// Our own call, captured on loopback by tshark (dumpcap), analyzed by `capture --rtp` and by
/// `tshark -z rtp,streams`: every field of every stream agrees, on the capture as recorded and
/// on a copy with packets dropped, duplicated and reordered; the DTMF digits sent are found;
/// `--audio` writes WAVs whose tones are the ones each side sent.
@Suite("RTP streams of our own call against tshark", .enabled(if: Tshark.available || TestPaths.isCI, "tshark is not installed: RTP agreement skipped"),
       .requires("tshark", { Tshark.available }))
struct CaptureRTPTests {
    static func tsharkStreams(_ file: String) async throws -> [TsharkRTPStream] {
        let r = await ExternalTool.run(Tshark.path!, ["-n", "-r", file, "-q", "-o", "rtp.heuristic_rtp:TRUE", "-z", "rtp,streams"], timeout: 30)
        try #require(r.ok, "tshark failed: \(r.output)")
        return TsharkRTPStream.parse(r.output)
    }

    /// Waits until dumpcap records packets, not only until it has written the file's header:
    /// the capture filter can start a few hundred milliseconds after the header (a call whose
    /// INVITE went unrecorded left tshark without the offer, so it named the telephone-event
    /// type `rtpevent` while we, reading the answer, named it from the SDP). One-byte datagrams
    /// go to `probePort` (nobody listens; neither analysis takes them for RTP) until the file
    /// grows (dumpcap writes in bursts); bounded at 5 s.
    static func waitUntilRecording(_ file: String, probePort: Int) async throws {
        func size() -> Int { (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0 }
        for _ in 0..<100 where size() == 0 { try await Task.sleep(for: .milliseconds(50)) }
        let header = size()
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(fd) }
        var to = sockaddr_in()
        to.sin_family = sa_family_t(AF_INET)
        to.sin_port = in_port_t(UInt16(probePort).bigEndian)
        to.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        for _ in 0..<100 {
            var byte: UInt8 = 0
            _ = withUnsafePointer(to: &to) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, &byte, 1, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            try await Task.sleep(for: .milliseconds(50))
            if size() > header { return }
        }
    }

    /// Records a call between two phones (PCMU and telephone events; the caller sends 440 Hz
    /// and the digits `159#`, the callee 1000 Hz) on `lo`, ports `base ..< base + 22` only; with
    /// `srtp`, SDES-SRTP is mandatory (RTP/SAVP, each side's key in its `a=crypto`).
    static func recordCall(to file: String, base: Int, srtp: Bool = false) async throws {
        let tshark = Process()
        tshark.executableURL = URL(fileURLWithPath: Tshark.path!)
        tshark.arguments = ["-i", "lo", "-f", "udp portrange \(base)-\(base + 21)", "-B", "16", "-a", "duration:40", "-w", file, "-q"]
        tshark.standardOutput = FileHandle.nullDevice
        tshark.standardError = FileHandle.nullDevice
        try tshark.run()
        defer {
            if tshark.isRunning { kill(tshark.processIdentifier, SIGKILL) }
        }
        try await Self.waitUntilRecording(file, probePort: base + 20)
        func phone(_ name: String, sip: Int, media: ClosedRange<Int>, tone: Double, answer: Bool) throws -> Phone {
            let config = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: UInt16(sip)))]),
                                                    identity: try SIPURI("sip:\(name)@127.0.0.1"), sessionTimer: nil)
            let options = PhoneMediaOptions(configuration: MediaSessionConfiguration(localAddress: "127.0.0.1", portRange: UInt16(media.lowerBound)...UInt16(media.upperBound),
                                                                                     srtpPolicy: srtp ? .mandatory : .off, rtcpInterval: .seconds(1)),
                                            input: .tone(frequency: tone))
            return try Phone(name: name, configuration: config, autoAnswer: answer ? .milliseconds(50) : nil, codecs: [.pcmu, .telephoneEvent],
                             media: options)
        }
        let a = try phone("a", sip: base + 20, media: base...(base + 9), tone: 440, answer: false)
        defer { a.close() }
        let b = try phone("b", sip: base + 21, media: (base + 10)...(base + 19), tone: 1000, answer: true)
        defer { b.close() }
        let key = await a.call(try SIPURI("sip:b@127.0.0.1:\(base + 21)"))
        try #require(await a.wait(key, timeout: .seconds(10)) { $0 == .confirmed })
        try #require(await a.wait(timeout: .seconds(10)) { (a.mediaStatistics(key)?.call.received.packets ?? 0) > 100 })
        try a.media(key)?.sendDigits("159#")
        try await Task.sleep(for: .milliseconds(1800))
        await a.call(for: key)?.hangUp(timeout: .seconds(5))
        try await Task.sleep(for: .milliseconds(300))
        kill(tshark.processIdentifier, SIGINT)
        for _ in 0..<100 where tshark.isRunning { try await Task.sleep(for: .milliseconds(50)) }
    }

    /// A copy of `file` without every 25th RTP packet of each stream, with one packet sent
    /// twice and two swapped (late), as classic UDP records.
    static func impair(_ file: String, to out: String) throws {
        let reader = try SIPCaptureReader(path: file, datagrams: true, payloads: true)
        let writer = try CaptureWriter(path: out)
        var seen: [String: Int] = [:]
        var held: (CaptureEndpoint, CaptureEndpoint, [UInt8], CaptureTimestamp)?
        var events: [CaptureEvent] = []
        while try reader.nextEvents(into: &events) {
            for e in events {
                switch e {
                case .message(let m):
                    writer.writeUDP(from: m.source, to: m.destination, payload: m.message.serialized(), time: m.timestamp)
                case .datagram(let d):
                    let bytes = Array(d.payload)
                    guard d.kind == .rtp else {
                        writer.writeUDP(from: d.source, to: d.destination, payload: bytes, time: d.timestamp)
                        continue
                    }
                    let k = "\(d.source)>\(d.destination)"
                    let n = seen[k, default: 0] + 1
                    seen[k] = n
                    if n % 25 == 0 { continue }
                    if n == 40 { held = (d.source, d.destination, bytes, d.timestamp); continue }
                    writer.writeUDP(from: d.source, to: d.destination, payload: bytes, time: d.timestamp)
                    if n == 41, let h = held {
                        // The held packet comes late, with its own later capture time.
                        writer.writeUDP(from: h.0, to: h.1, payload: h.2, time: CaptureTimestamp(seconds: d.timestamp.seconds,
                                                                                                nanoseconds: Int64(d.timestamp.nanoseconds) + 1000))
                        held = nil
                    }
                    if n == 60 { writer.writeUDP(from: d.source, to: d.destination, payload: bytes, time: d.timestamp) }
                default: break
                }
            }
        }
        writer.close()
    }

    static func compare(_ file: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> CaptureCommand.Report {
        let report = CaptureCommand.run(path: file, view: .rtp)
        #expect(report.error == nil, sourceLocation: sourceLocation)
        let ours = try #require(report.analysis.rtp).streams.map { TsharkRTPStream($0, origin: report.firstFrame!) }
        let theirs = try await tsharkStreams(file)
        #expect(theirs.count == 2 && ours.count == 2, "tshark \(theirs)\nours \(ours)", sourceLocation: sourceLocation)
        for t in theirs {
            let o = ours.first { $0.key == t.key }
            #expect(o.map { $0.agrees(with: t) } == true, "tshark \(t)\nours   \(o.map(\.description) ?? "none")", sourceLocation: sourceLocation)
        }
        return report
    }

    @Test("every stream of every corpus capture agrees with tshark -z rtp,streams", .timeLimit(.minutes(2)))
    func corpus() async throws {
        guard TestPaths.requireCorpus("pcaps") else { return }
        let root = TestPaths.corpus("pcaps")
        let files = (FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? [])
            .filter { !$0.hasSuffix(".md") && !$0.hasSuffix(".tsv") }.map { root + "/" + $0 }
            .filter { var d: ObjCBool = false; return FileManager.default.fileExists(atPath: $0, isDirectory: &d) && !d.boolValue }
        #expect(files.count >= 10)
        var streams = 0
        for file in files.sorted() {
            let report = CaptureCommand.run(path: file, view: .rtp)
            guard let origin = report.firstFrame else { continue }
            let ours = try #require(report.analysis.rtp).streams.map { TsharkRTPStream($0, origin: origin) }
            let theirs = try await Self.tsharkStreams(file)
            #expect(Set(ours.map(\.key)) == Set(theirs.map(\.key)), "\(file)")
            for t in theirs {
                let o = ours.first { $0.key == t.key }
                #expect(o.map { $0.agrees(with: t) } == true, "\(file)\ntshark \(t)\nours   \(o.map(\.description) ?? "none")")
            }
            streams += theirs.count
        }
        #expect(streams >= 15)
    }

    @Test("every field agrees with tshark -z rtp,streams, as recorded and with loss; DTMF digits; WAV tones", .timeLimit(.minutes(1)))
    func ownCall() async throws {
        let base = 30000 + Int.random(in: 0..<130) * 20
        let dir = NSTemporaryDirectory() + "sb-capture-rtp-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/call.pcapng", lossy = dir + "/lossy.pcapng"
        try await Self.recordCall(to: file, base: base)

        let report = try await Self.compare(file)
        let streams = try #require(report.analysis.rtp).streams
        let fromA = try #require(streams.first { $0.key.source.port < UInt16(base + 10) })
        let fromB = try #require(streams.first { $0.key.source.port >= UInt16(base + 10) })
        #expect(String(fromA.dtmf.map(\.digit)) == "159#", "\(fromA.dtmf)")
        #expect(fromA.dtmf.allSatisfy { $0.ended })
        #expect(fromB.dtmf.isEmpty)
        #expect(fromA.payloadNames == "g711U, telephone-event")
        #expect(fromA.silent == false && fromB.silent == false)
        #expect((fromA.mos ?? 0) > 4.0 && (fromB.mos ?? 0) > 4.0)
        #expect(fromA.lost == 0 && fromA.sequenceErrors == 0)
        // RTCP: each side reported on the other's stream.
        #expect(!fromA.reports.isEmpty && !fromB.reports.isEmpty, "\(fromA.reports) \(fromB.reports)")
        #expect(fromA.reports.allSatisfy { $0.reporter.port >= UInt16(base + 10) && $0.cumulativeLost == 0 })
        #expect(report.analysis.rtp?.calls.count == 1 && report.analysis.rtp?.calls.first?.oneWay == false)

        try Self.impair(file, to: lossy)
        let impaired = try await Self.compare(lossy)
        let lossyA = try #require(impaired.analysis.rtp?.streams.first { $0.key.source.port < UInt16(base + 10) })
        #expect(lossyA.lost > 0 && lossyA.sequenceErrors > 0 && lossyA.problem)
        #expect((lossyA.mos ?? 5) < (fromA.mos ?? 0))

        // Audio: each stream's tone, and the call in stereo (caller left).
        let audio = CaptureCommand.run(path: file, view: .audio(dir + "/wav"))
        #expect(audio.audioFiles.count == 3 && audio.audioFiles.allSatisfy { $0.error == nil }, "\(audio.audioFiles)")
        func tone(_ path: String, channel: Int? = nil) throws -> Double? {
            let wav = try WAVFile(path: path)
            guard case .pcm16(var samples) = wav.samples else { return nil }
            if let channel { samples = AudioSamples.channel(channel, of: samples, channels: 2) }
            // 0.5 s to 1.5 s: before the digits (sent from 2 s on), which replace the caller's audio.
            guard samples.count >= wav.sampleRate * 3 / 2 else { return nil }
            return ToneAnalysis.dominantFrequency(in: samples[(wav.sampleRate / 2)..<(wav.sampleRate * 3 / 2)], sampleRate: wav.sampleRate,
                                                  range: 100...3500)?.frequency
        }
        for f in audio.audioFiles where f.kind.hasPrefix("stream") {
            let stream = streams[f.streams[0]]
            let want = stream.key.source.port < UInt16(base + 10) ? 440.0 : 1000.0
            let found = try tone(f.path)
            #expect(abs((found ?? 0) - want) < 5, "\(f.path): \(String(describing: found))")
            // Gaps are silence at the right length: the file spans the stream's RTP time.
            let span = Double(stream.last.totalNanoseconds - stream.first.totalNanoseconds) / 1e9
            #expect(abs(f.seconds - span) < 0.1, "\(f.path): \(f.seconds) s for \(span) s")
        }
        let call = try #require(audio.audioFiles.first { $0.kind.hasPrefix("call") })
        #expect(call.channels == 2)
        let left = try tone(call.path, channel: 0), right = try tone(call.path, channel: 1)
        #expect(abs((left ?? 0) - 440) < 5 && abs((right ?? 0) - 1000) < 5, "\(String(describing: left)) \(String(describing: right))")
        // The lossy copy decodes to the same length: lost packets became silence in place.
        let lossyAudio = CaptureCommand.run(path: lossy, view: .audio(dir + "/wav-lossy"))
        for (x, y) in zip(audio.audioFiles, lossyAudio.audioFiles) where x.kind.hasPrefix("stream") {
            #expect(abs(x.seconds - y.seconds) < 0.021, "\(x) \(y)")
        }
    }
}
