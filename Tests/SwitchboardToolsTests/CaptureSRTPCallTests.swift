import Foundation
import Media
import MediaRuntime
import PacketCapture
import SwitchboardTestSupport
import Testing

@testable import CaptureAnalysis
@testable import SwitchboardTools

/// An SDES-SRTP call between two of our phones, captured on loopback (dumpcap), analysed by
/// `capture --rtp` and `--audio`: with the keys of its own SDP, with them withheld and given as
/// `--srtp-key`, and with a wrong key.
@Suite("SRTP call captured and decrypted", .enabled(if: Tshark.available || TestPaths.isCI, "tshark is not installed: SRTP capture skipped"),
       .requires("tshark", { Tshark.available }))
struct CaptureSRTPCallTests {
    /// The dominant frequency between 0.5 s and 1.5 s of a WAV (before the digits).
    static func tone(_ path: String) throws -> Double? {
        let wav = try WAVFile(path: path)
        guard case .pcm16(let samples) = wav.samples, samples.count >= wav.sampleRate * 3 / 2 else { return nil }
        return ToneAnalysis.dominantFrequency(in: samples[(wav.sampleRate / 2)..<(wav.sampleRate * 3 / 2)], sampleRate: wav.sampleRate,
                                              range: 100...3500)?.frequency
    }

    /// Each stream's WAV carries its sender's tone (440 Hz from the caller, 1000 Hz back).
    static func checkAudio(_ file: String, dir: String, base: Int, srtp: SRTPCaptureOptions, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let audio = CaptureCommand.run(path: file, view: .audio(dir), srtp: srtp)
        let streams = try #require(audio.analysis.rtp?.streams, sourceLocation: sourceLocation)
        let files = audio.audioFiles.filter { $0.kind.hasPrefix("stream") }
        #expect(files.count == 2 && audio.audioFiles.allSatisfy { $0.error == nil }, "\(audio.audioFiles)", sourceLocation: sourceLocation)
        for f in files {
            let want = streams[f.streams[0]].key.source.port < UInt16(base + 10) ? 440.0 : 1000.0
            let found = try tone(f.path)
            #expect(abs((found ?? 0) - want) < 5, "\(f.path): \(String(describing: found))", sourceLocation: sourceLocation)
        }
    }

    @Test("SDP keys, --srtp-key, wrong key: figures as tshark's from the headers, digits, RTCP, WAV tones", .timeLimit(.minutes(1)))
    func srtpCall() async throws {
        let base = 33000 + Int.random(in: 0..<100) * 20
        let dir = NSTemporaryDirectory() + "sb-capture-srtp-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/call.pcapng"
        try await CaptureRTPTests.recordCall(to: file, base: base, srtp: true)

        // (1) The keys of the capture's own SDP.
        let report = CaptureCommand.run(path: file, view: .rtp)
        #expect(report.error == nil)
        let rtp = try #require(report.analysis.rtp)
        let streams = rtp.streams
        #expect(streams.count == 2, "\(streams.map(\.key))")
        // The packet figures tshark finds from the clear headers are ours after decryption.
        let theirs = try await CaptureRTPTests.tsharkStreams(file)
        for s in streams {
            let t = theirs.first { $0.source == "\(s.key.source.address):\(s.key.source.port)" || $0.key.hasPrefix("\(s.key.source)") }
            #expect(t?.packets == s.packets && t?.lost == s.lost, "tshark \(String(describing: t)) ours \(s.packets) \(s.lost)")
            #expect(s.srtp?.keySource == .sdp && s.srtp?.decrypted == s.packets && s.srtpFailures == 0, "\(String(describing: s.srtp))")
            #expect(s.packets > 100 && s.lost == 0 && s.sequenceErrors == 0 && s.silent == false && (s.mos ?? 0) > 4.0)
            #expect(!s.reports.isEmpty, "SRTCP reports on \(s.key)")
        }
        let fromA = try #require(streams.first { $0.key.source.port < UInt16(base + 10) })
        #expect(String(fromA.dtmf.map(\.digit)) == "159#", "\(fromA.dtmf)")
        #expect(rtp.srtcpDecrypted > 0 && rtp.srtcpDropped == 0)
        #expect(report.text.contains("SRTP AES_CM_128_HMAC_SHA1_80 (key from SDP)") && !report.text.contains("wrong key"), "\(report.text)")
        try Self.checkAudio(file, dir: dir + "/wav-sdp", base: base, srtp: .init())

        // (2) The SDP's keys withheld: none known, then given as --srtp-key SUITE:KEY@HOST:PORT.
        let none = CaptureCommand.run(path: file, view: .rtp, srtp: SRTPCaptureOptions(useSDPKeys: false))
        #expect(none.analysis.rtp?.streams.allSatisfy { $0.srtp?.noKey == true } == true)
        #expect(none.text.contains("SRTP, no key"))
        let media = CaptureCommand.run(path: file, view: .calls).analysis.calls.flatMap(\.media)
        let arguments = media.flatMap { m in m.crypto.map { "\($0.suite):\($0.keyParameters[0].keySalt)@\(m.address):\(m.port)" } }
        #expect(arguments.count >= 3, "\(arguments.count) a=crypto lines")  // the offer's two suites, the answer's one
        let given = try CaptureCommand.srtpOptions(keys: arguments, ignoreSDP: true)
        let withKeys = CaptureCommand.run(path: file, view: .rtp, srtp: given)
        let decrypted = try #require(withKeys.analysis.rtp?.streams)
        #expect(decrypted.count == 2)
        for (x, y) in zip(streams, decrypted) {
            #expect(x.key == y.key && x.packets == y.packets && x.lost == y.lost && x.sequenceErrors == y.sequenceErrors)
            #expect(x.dtmf.map(\.digit) == y.dtmf.map(\.digit) && x.reports.count == y.reports.count)
            #expect(y.srtp?.keySource == .commandLine && y.srtp?.decrypted == y.packets && y.srtpFailures == 0)
        }
        try Self.checkAudio(file, dir: dir + "/wav-given", base: base, srtp: given)

        // (3) A wrong key for every SRTP stream: every packet an authentication failure.
        let wrongKey = [UInt8](repeating: 0x5A, count: 30)
        let wrong = try CaptureCommand.srtpOptions(keys: ["AES_CM_128_HMAC_SHA1_80:" + Data(wrongKey).base64EncodedString()], ignoreSDP: true)
        let bad = CaptureCommand.run(path: file, view: .rtp, srtp: wrong)
        let failed = try #require(bad.analysis.rtp?.streams)
        #expect(failed.count == 2)
        for (x, y) in zip(streams, failed) {
            #expect(y.packets == x.packets && y.lost == x.lost && y.srtpFailures == y.packets && y.srtp?.wrongKey == true)
            #expect(y.dtmf.isEmpty && y.silent == nil)
        }
        #expect(bad.analysis.rtp?.srtcpDecrypted == 0 && (bad.analysis.rtp?.srtcpDropped ?? 0) > 0)
        #expect(bad.text.contains("SRTP, wrong key") && bad.text.contains("wrong key, all"))
        #expect(bad.json.contains("\"wrongKey\":true") || bad.json.contains("\"wrongKey\": true"), "\(bad.json.prefix(2000))")
    }
}
