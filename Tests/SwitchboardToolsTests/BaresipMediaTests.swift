import Foundation
import Media
import MediaRuntime
import NetworkIO
import SDP
import SIPDialog
import SIPMessage
import SIPRuntime
import SIPTransport
import SwitchboardTestSupport
import Testing

@testable import SwitchboardTools
import Switchboard

/// Media with baresip (ausine sends 440 Hz, aubridge swallows what it receives): audio both
/// ways, SRTP, DTMF both ways. Skipped without baresip, except under CI, where that fails.
@Suite("Media with baresip", .enabled(if: Baresip.available || TestPaths.isCI, "baresip is not installed: baresip media interop skipped"),
       .requires("baresip", { Baresip.available }))
struct BaresipMediaTests {
    static func phone(_ lines: BaresipTests.Lines, srtp: SRTPPolicy, tone: Double, record: String,
                      codecs: [Codec] = [.opus, .pcmu, .pcma, .telephoneEvent]) throws -> Phone {
        let config = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]),
                                                identity: try SIPURI("sip:switchboard@127.0.0.1"), sessionTimer: nil)
        let media = PhoneMediaOptions(
            configuration: MediaSessionConfiguration(localAddress: "127.0.0.1", portRange: 10000...19999, srtpPolicy: srtp, rtcpInterval: .seconds(1)),
            input: .tone(frequency: tone), recordPath: record)
        return try Phone(name: "sb", configuration: config, autoAnswer: .milliseconds(100), codecs: codecs, media: media,
                         report: { lines.append($0) })
    }

    /// The last second of a recording, checked for `frequency` as the dominant tone.
    static func expectTone(_ path: String, _ frequency: Double, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let file = try WAVFile(path: path)
        guard case .pcm16(let samples) = file.samples else {
            Issue.record("recording is not PCM", sourceLocation: sourceLocation)
            return
        }
        #expect(samples.count >= file.sampleRate, "recording of \(samples.count) samples", sourceLocation: sourceLocation)
        let tail = Array(samples.suffix(file.sampleRate))
        let dominant = ToneAnalysis.dominantFrequency(in: tail, sampleRate: file.sampleRate, range: 100...3500)
        #expect(abs((dominant?.frequency ?? 0) - frequency) < 8, "dominant \(String(describing: dominant))", sourceLocation: sourceLocation)
        #expect(ToneAnalysis.amplitude(of: frequency, in: tail, sampleRate: file.sampleRate) > 0.02, sourceLocation: sourceLocation)
    }

    /// The CALL_RTCP events baresip reported: (packets it received from us, packets lost).
    static func rtcpReceived(_ ctlOutput: String) -> [(received: Int, lost: Int)] {
        ctlOutput.split(separator: "\n").compactMap { line in
            guard line.contains("\"CALL_RTCP\""), let data = line.data(using: .utf8),
                let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                let stats = json["rtcp_stats"] as? [String: Any], let rx = stats["rx"] as? [String: Any],
                let sent = rx["sent"] as? Int, let lost = rx["lost"] as? Int
            else { return nil }
            return (sent, lost)
        }
    }

    @Test("Opus over mandatory SRTP: baresip's 440 Hz reaches us, our 1000 Hz reaches it, DTMF both ways", .timeLimit(.minutes(1)))
    func opusSRTPAudioAndDigits() async throws {
        let b = try await Baresip.start(options: "answermode=auto;audio_codecs=opus/48000/2;mediaenc=srtp-mand")
        defer { Baresip.stop(b) }
        let record = NSTemporaryDirectory() + "sb-baresip-rec-\(UUID().uuidString).wav"
        defer { try? FileManager.default.removeItem(atPath: record) }
        let lines = BaresipTests.Lines()
        let phone = try Self.phone(lines, srtp: .mandatory, tone: 1000, record: record)
        defer { phone.close() }
        let key = await phone.call(try SIPURI("sip:b@127.0.0.1:\(b.sipPort)"))
        try #require(await phone.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)\n\(Baresip.log(b.rundir))")
        try #require(await phone.wait(timeout: .seconds(10)) { (phone.mediaStatistics(key)?.call.received.packets ?? 0) > 60 },
                     "\(lines.all)\n\(Baresip.log(b.rundir))")
        try phone.media(key)?.sendDigits("12#")
        // baresip's digits, and its RTCP reports of what it receives from us (sent every few seconds).
        let ctl = try await Baresip.ctl(b, ["sndcode 5", "sleep 0.4", "sndcode 7"], wait: 6)
        #expect(await phone.wait(timeout: .seconds(5)) { phone.media(key)?.receivedDigits == "57" }, "\(lines.all)")
        let reports = Self.rtcpReceived(ctl)
        #expect(!reports.isEmpty, "no CALL_RTCP event: \(ctl)")
        #expect(reports.contains { $0.received > 50 }, "\(reports)")
        #expect(reports.allSatisfy { $0.lost == 0 }, "\(reports)")
        // The round trip needs a report from baresip that echoes one of our SRs (LSR/DLSR).
        // baresip reports every 2.5-7.5 s (RFC 3550's randomized interval), and its first one
        // can precede our first SR (LSR 0: no round trip), so wait for its next one.
        #expect(await phone.wait(timeout: .seconds(10)) { phone.mediaStatistics(key)?.call.roundTripTime != nil },
                "\(phone.mediaStatistics(key).map { "\($0)" } ?? "no statistics")")
        let stats = try #require(phone.mediaStatistics(key))
        #expect(stats.secure && stats.call.codec.contains("opus"))
        #expect(stats.call.sent.packets > 50 && stats.call.packetsLost == 0, "\(stats)")
        try await phone.agent.perform(key) { s throws(SessionError) in try s.bye() }
        #expect(await phone.wait(key, timeout: .seconds(10)) { $0 == .terminated(.localHangup) })
        let log = Baresip.log(b.rundir)
        #expect(log.contains("SRTP is Enabled"))
        for digit in ["1", "2", "#"] {
            #expect(log.components(separatedBy: "received event: '\(digit)' (end=1)").count - 1 == 1, "digit \(digit): \(log)")
        }
        #expect(lines.count("sb: DTMF received 5") == 1 && lines.count("sb: DTMF received 7") == 1, "\(lines.all)")
        try Self.expectTone(record, 440)
    }

    @Test("baresip calls us with PCMA and no SRTP: its 440 Hz reaches our recording, and it hears us", .timeLimit(.minutes(1)))
    func pcmaIncoming() async throws {
        let b = try await Baresip.start(options: "answermode=auto;audio_codecs=pcma")
        defer { Baresip.stop(b) }
        let record = NSTemporaryDirectory() + "sb-baresip-rec-\(UUID().uuidString).wav"
        defer { try? FileManager.default.removeItem(atPath: record) }
        let lines = BaresipTests.Lines()
        let phone = try Self.phone(lines, srtp: .optional, tone: 700, record: record)
        defer { phone.close() }
        let port = phone.agent.endpoint.localAddresses[0].address.port
        try await Baresip.ctl(b, ["dial sip:switchboard@127.0.0.1:\(port)"])
        try #require(await phone.wait(timeout: .seconds(10)) { !phone.incomingCalls.isEmpty })
        let key = phone.incomingCalls[0]
        try #require(await phone.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)")
        try #require(await phone.wait(timeout: .seconds(10)) { (phone.mediaStatistics(key)?.call.received.packets ?? 0) > 75 }, "\(lines.all)")
        let ctl = try await Baresip.ctl(b, ["sleep 0.1"], wait: 6)
        let reports = Self.rtcpReceived(ctl)
        #expect(reports.contains { $0.received > 50 }, "\(ctl)")
        let stats = try #require(phone.mediaStatistics(key))
        #expect(!stats.secure && stats.call.codec.contains("PCMA"), "\(stats)")
        try await Baresip.ctl(b, ["hangup"])
        #expect(await phone.wait(key, timeout: .seconds(10)) { $0 == .terminated(.remoteHangup) }, "\(lines.all)")
        try Self.expectTone(record, 440)
    }
}

/// Two phones with media on 127.0.0.1 (no external peer).
@Suite struct PhoneMediaTests {
    @Test("a call between two phones carries each side's tone, DTMF and hold", .timeLimit(.minutes(1)))
    func phoneToPhone() async throws {
        let recA = NSTemporaryDirectory() + "sb-phone-a-\(UUID().uuidString).wav"
        let recB = NSTemporaryDirectory() + "sb-phone-b-\(UUID().uuidString).wav"
        defer {
            try? FileManager.default.removeItem(atPath: recA)
            try? FileManager.default.removeItem(atPath: recB)
        }
        let lines = BaresipTests.Lines()
        let alice = try BaresipMediaTests.phone(lines, srtp: .mandatory, tone: 440, record: recA)
        let bobLines = BaresipTests.Lines()
        let bob = try BaresipMediaTests.phone(bobLines, srtp: .mandatory, tone: 1000, record: recB)
        defer {
            alice.close()
            bob.close()
        }
        let port = bob.agent.endpoint.localAddresses[0].address.port
        let key = await alice.call(try SIPURI("sip:bob@127.0.0.1:\(port)"))
        try #require(await alice.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)")
        try #require(await alice.wait(timeout: .seconds(10)) { (alice.mediaStatistics(key)?.call.received.packets ?? 0) > 60 })
        try alice.media(key)?.sendDigits("9*")
        #expect(await bob.wait(timeout: .seconds(5)) { bob.incomingCalls.first.flatMap { bob.media($0)?.receivedDigits } == "9*" }, "\(bobLines.all)")
        // Hold: bob stops sending to alice.
        try await alice.hold(key, true)
        try #require(await alice.wait(timeout: .seconds(10)) { lines.count("sb: peer answers recvonly") > 0 }, "\(lines.all)")
        let bobKey = try #require(bob.incomingCalls.first)
        let bobSent = try #require(bob.mediaStatistics(bobKey)).call.sent.packets
        let aliceSent = try #require(alice.mediaStatistics(key)).call.sent.packets
        #expect(await alice.wait(timeout: .seconds(5)) { (alice.mediaStatistics(key)?.call.sent.packets ?? 0) > aliceSent + 20 })
        #expect(bob.mediaStatistics(bobKey)?.call.sent.packets == bobSent)
        try await alice.hold(key, false)
        #expect(await alice.wait(timeout: .seconds(5)) { (bob.mediaStatistics(bobKey)?.call.sent.packets ?? 0) > bobSent + 20 })
        try await alice.agent.perform(key) { s throws(SessionError) in try s.bye() }
        #expect(await alice.wait(key, timeout: .seconds(10)) { $0 == .terminated(.localHangup) })
        #expect(await bob.wait(bobKey, timeout: .seconds(10)) { $0 == .terminated(.remoteHangup) })
        #expect(lines.all.contains { $0.hasPrefix("sb: media codec 111 opus/48000/2 (SRTP)") }, "\(lines.all)")
        try BaresipMediaTests.expectTone(recA, 1000)
        try BaresipMediaTests.expectTone(recB, 440)
    }
}

extension PhoneMediaTests {
    @Test("without telephone-event, digits go as SIP INFO dtmf-relay and arrive once each", .timeLimit(.minutes(1)))
    func infoFallback() async throws {
        let rec = NSTemporaryDirectory() + "sb-phone-info-\(UUID().uuidString).wav"
        defer { try? FileManager.default.removeItem(atPath: rec) }
        let lines = BaresipTests.Lines()
        let bobLines = BaresipTests.Lines()
        let alice = try BaresipMediaTests.phone(lines, srtp: .off, tone: 440, record: rec, codecs: [.pcmu])
        let bob = try BaresipMediaTests.phone(bobLines, srtp: .off, tone: 1000, record: rec + "-bob.wav", codecs: [.pcmu])
        defer {
            alice.close()
            bob.close()
            try? FileManager.default.removeItem(atPath: rec + "-bob.wav")
        }
        let port = bob.agent.endpoint.localAddresses[0].address.port
        let key = await alice.call(try SIPURI("sip:bob@127.0.0.1:\(port)"))
        try #require(await alice.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)")
        #expect(try await alice.sendDigits(key, "4#") == .info)
        let bobKey = try #require(bob.incomingCalls.first)
        #expect(await bob.wait(timeout: .seconds(5)) { bob.digitsReceivedByInfo(bobKey) == "4#" }, "\(bobLines.all)")
        #expect(bobLines.count("sb: DTMF received 4 (INFO)") == 1 && bobLines.count("sb: DTMF received # (INFO)") == 1)
        #expect(lines.count("sb: INFO → 200") == 2, "\(lines.all)")
        try await alice.agent.perform(key) { s throws(SessionError) in try s.bye() }
        #expect(await alice.wait(key, timeout: .seconds(10)) { $0 == .terminated(.localHangup) })
    }
}

/// SIPp's `uac_pcap` (G.711 A-law RTP and an RFC 2833 '1' replayed from the pcaps of Debian's
/// sip-tester) against an answering phone. Skipped without sipp, except under CI.
@Suite("SIPp pcap play", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sipp") || TestPaths.isCI, "sipp is not installed: SIPp pcap play skipped"),
       .requires("sipp", { FileManager.default.isExecutableFile(atPath: "/usr/bin/sipp") }))
struct SIPpPcapMediaTests {
    @Test("SIPp plays G.711 A-law and a DTMF digit: we record non-silent audio and get the digit once", .timeLimit(.minutes(1)))
    func uacPcap() async throws {
        let dir = NSTemporaryDirectory() + "sb-sipp-pcap-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // uac_pcap reads "pcap/g711a.pcap" relative to its working directory.
        try FileManager.default.createSymbolicLink(atPath: dir + "/pcap", withDestinationPath: "/usr/share/sip-tester")
        let record = dir + "/rec.wav"
        let lines = BaresipTests.Lines()
        let phone = try BaresipMediaTests.phone(lines, srtp: .off, tone: 440, record: record)
        defer { phone.close() }
        let port = phone.agent.endpoint.localAddresses[0].address.port
        let sipPort = try SIPpPort.free()
        let mediaPort = try SIPpPort.free()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/sipp")
        p.arguments = ["127.0.0.1:\(port)", "-sn", "uac_pcap", "-i", "127.0.0.1", "-p", String(sipPort), "-mp", String(mediaPort),
                       "-m", "1", "-nostdin", "-timeout", "30"]
        p.currentDirectoryURL = URL(fileURLWithPath: dir)
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        let clock = ContinuousClock(), deadline = clock.now + .seconds(40)
        while p.isRunning && clock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        if p.isRunning {
            p.terminate()
            p.waitUntilExit()
            Issue.record("sipp did not finish: \(lines.all)")
            return
        }
        #expect(p.terminationStatus == 0, "\(lines.all)")
        let key = try #require(phone.incomingCalls.first)
        #expect(await phone.wait(key, timeout: .seconds(10)) { $0 == .terminated(.remoteHangup) }, "\(lines.all)")
        let stats = try #require(phone.mediaStatistics(key))
        #expect(stats.call.codec.contains("PCMA") && stats.call.received.packets > 200, "\(stats)")
        #expect(stats.digitsReceived == "1", "\(stats)")
        #expect(lines.count("sb: DTMF received 1") == 1, "\(lines.all)")
        let file = try WAVFile(path: record)
        guard case .pcm16(let samples) = file.samples else {
            Issue.record("recording is not PCM")
            return
        }
        #expect(samples.count > 8000 * 5, "\(samples.count) samples")
        #expect(AudioSamples.rmsLevel(samples) > -40, "level \(AudioSamples.rmsLevel(samples)) dBFS")
    }
}
