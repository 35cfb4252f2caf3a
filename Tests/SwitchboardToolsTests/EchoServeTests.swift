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
import SIPLoad
import Switchboard

/// `serve --echo` on 127.0.0.1: callers with media send a tone and must hear it back.
@Suite struct EchoServeTests {
    static func server(maxCalls: Int = 100, overLimit: Int = 503, mediaTimeout: Duration? = nil, srtp: SRTPPolicy = .optional,
                       codecs: [Codec] = [.opus, .pcmu, .pcma, .telephoneEvent]) throws -> EchoServer {
        let media = MediaSessionConfiguration(localAddress: "127.0.0.1", portRange: 10000...19999, codecs: codecs, srtpPolicy: srtp,
                                              rtcpInterval: .seconds(1))
        return try EchoServer(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))],
                                    options: .init(media: media, maxCalls: maxCalls, overLimitCode: overLimit, mediaTimeout: mediaTimeout))
    }

    static func caller(_ lines: ReportLines, tone: Double?, record: String?, srtp: SRTPPolicy = .off, codecs: [Codec] = [.pcmu, .telephoneEvent],
                       trace: (@Sendable (SIPMessage, Bool, SIPPeer) -> Void)? = nil) throws -> Phone {
        let config = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]),
                                                identity: try SIPURI("sip:caller@127.0.0.1"), sessionTimer: nil)
        let media = tone.map {
            PhoneMediaOptions(configuration: MediaSessionConfiguration(localAddress: "127.0.0.1", portRange: 10000...19999, srtpPolicy: srtp,
                                                                       rtcpInterval: .seconds(1)),
                              input: .tone(frequency: $0), recordPath: record)
        }
        return try Phone(name: "caller", configuration: config, codecs: codecs, media: media, report: { lines.append($0) }, trace: trace)
    }

    static func target(_ server: EchoServer) throws -> SIPURI {
        try SIPURI("sip:echo@127.0.0.1:\(server.server.endpoint.localAddresses[0].address.port)")
    }

    /// The recording (without its first half second and its last 0.3 s): `frequency` must
    /// dominate it, well above `other` (the other caller's tone).
    static func expectTone(_ path: String, _ frequency: Double, not other: Double, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let file = try WAVFile(path: path)
        guard case .pcm16(let samples) = file.samples else {
            Issue.record("recording is not PCM", sourceLocation: sourceLocation)
            return
        }
        try #require(samples.count >= file.sampleRate * 3 / 2, "\(path): \(samples.count) samples", sourceLocation: sourceLocation)
        let body = Array(samples[(file.sampleRate / 2)..<(samples.count - file.sampleRate * 3 / 10)])
        let dominant = ToneAnalysis.dominantFrequency(in: body, sampleRate: file.sampleRate, range: 100...3500)
        #expect(abs((dominant?.frequency ?? 0) - frequency) < 8, "\(path): dominant \(String(describing: dominant))", sourceLocation: sourceLocation)
        let own = ToneAnalysis.amplitude(of: frequency, in: body, sampleRate: file.sampleRate)
        let foreign = ToneAnalysis.amplitude(of: other, in: body, sampleRate: file.sampleRate)
        #expect(own > 0.02 && own > foreign * 10, "\(path): \(frequency) Hz at \(own), \(other) Hz at \(foreign)", sourceLocation: sourceLocation)
    }

    @Test("20 calls to serve --echo: each caller hears its own tone back (600 Hz on PCMU, 1000 Hz on PCMA with SRTP), then BYE",
          .timeLimit(.minutes(1)))
    func twentyCallsHearTheirTone() async throws {
        let server = try Self.server()
        defer { server.close() }
        let dir = NSTemporaryDirectory() + "sb-echo-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let lines = ReportLines()
        // Two callers, ten calls each, with different tones, codecs and SRTP: no call hears another's.
        // (G.711 keeps 40 sessions light enough for a debug build on a busy machine; Opus echo is
        // proven with baresip below.)
        let low = try Self.caller(lines, tone: 600, record: dir + "/low.wav")
        let high = try Self.caller(lines, tone: 1000, record: dir + "/high.wav", srtp: .mandatory, codecs: [.pcma, .telephoneEvent])
        defer {
            low.close()
            high.close()
        }
        let target = try Self.target(server)
        var calls: [(Phone, SessionKey)] = []
        for _ in 0..<10 {
            calls.append((low, await low.call(target)))
            calls.append((high, await high.call(target)))
        }
        for (phone, key) in calls {
            try #require(await phone.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)")
        }
        #expect(server.statistics.callsUp == 20)
        // Two seconds of echo on every call.
        for (phone, key) in calls {
            #expect(await phone.wait(timeout: .seconds(10)) { (phone.mediaStatistics(key)?.call.received.packets ?? 0) > 100 },
                    "\(String(describing: phone.mediaStatistics(key)))")
        }
        let during = server.tick()
        #expect(during.callsUp == 20 && during.peakCallsUp == 20 && during.answered == 20 && during.secureCalls == 10, "\(during)")
        #expect(during.packetsEchoed > 20 * 90 && during.packetsReceived > 20 * 90, "\(during)")
        for (phone, key) in calls {
            let stats = try #require(phone.mediaStatistics(key))
            #expect(stats.call.packetsLost == 0, "\(stats)")
            #expect(stats.call.codec.contains(phone === high ? "PCMA" : "PCMU") && stats.secure == (phone === high), "\(stats)")
            try await phone.agent.perform(key) { s throws(SessionError) in try s.bye() }
        }
        for (phone, key) in calls {
            #expect(await phone.wait(key, timeout: .seconds(10)) { $0 == .terminated(.localHangup) })
        }
        #expect(await low.wait(timeout: .seconds(5)) { server.statistics.callsUp == 0 })
        let after = server.tick()
        #expect(after.packetsEchoed >= during.packetsEchoed && after.packetsLost == 0, "\(after)")
        #expect(server.server.statistics.remoteHangups == 20)
        // Every recording (call 1 is low.wav, call n is low-n.wav) holds its caller's tone.
        for n in 1...10 {
            let suffix = n == 1 ? "" : "-\(n)"
            try Self.expectTone(dir + "/low\(suffix).wav", 600, not: 1000)
            try Self.expectTone(dir + "/high\(suffix).wav", 1000, not: 600)
        }
        #expect(server.summary().contains("answered=20 confirmed=20 remote-hangups=20"), "\(server.summary())")
    }

    @Test("over --max-calls the next call gets 503 with Retry-After (or 486), and a call ending frees its place", .timeLimit(.minutes(1)))
    func overLimit() async throws {
        for code in [503, 486] {
            let server = try Self.server(maxCalls: 2, overLimit: code)
            defer { server.close() }
            let lines = ReportLines()
            let refusals = ReportLines()
            let phone = try Self.caller(lines, tone: 440, record: nil, trace: { m, outgoing, _ in
                if !outgoing, let c = m.statusCode, c >= 400 { refusals.append("\(c) retry-after=\(m.values(.retryAfter).first ?? "none")") }
            })
            defer { phone.close() }
            let target = try Self.target(server)
            let first = await phone.call(target), second = await phone.call(target)
            for key in [first, second] { try #require(await phone.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)") }
            let third = await phone.call(target)
            #expect(await phone.wait(third, timeout: .seconds(10)) { $0 == .terminated(.rejected(code)) }, "\(lines.all)")
            #expect(refusals.all == [code == 503 ? "503 retry-after=5" : "486 retry-after=none"], "\(refusals.all)")
            #expect(server.statistics.overLimit == 1 && server.statistics.callsUp == 2)
            try await phone.agent.perform(first) { s throws(SessionError) in try s.bye() }
            #expect(await phone.wait(first, timeout: .seconds(10)) { $0.isTerminated })
            #expect(await phone.wait(timeout: .seconds(5)) { server.statistics.callsUp == 1 })
            let fourth = await phone.call(target)
            #expect(await phone.wait(fourth, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)")
        }
    }

    @Test("a hold (re-INVITE sendonly) is answered recvonly by the call's engine and the echo stops; resuming brings it back",
          .timeLimit(.minutes(1)))
    func holdAndResume() async throws {
        let server = try Self.server()
        defer { server.close() }
        let lines = ReportLines()
        let phone = try Self.caller(lines, tone: 700, record: nil)
        defer { phone.close() }
        let key = await phone.call(try Self.target(server))
        try #require(await phone.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)")
        try #require(await phone.wait(timeout: .seconds(10)) { (phone.mediaStatistics(key)?.call.received.packets ?? 0) > 20 })
        try await phone.hold(key, true)
        #expect(await phone.wait(timeout: .seconds(10)) { lines.count("caller: peer answers recvonly") == 1 }, "\(lines.all)")
        // The echo stops: the packets still in flight arrive, then the count settles (no packet
        // for 300 ms of measured time, within 10 s) rather than being read once after a nominal
        // 300 ms sleep, which a loaded machine's late echo ticks outlast.
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(10)
        var held = phone.mediaStatistics(key)?.call.received.packets ?? 0
        var quietSince = clock.now
        while clock.now - quietSince < .milliseconds(300) && clock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            let n = phone.mediaStatistics(key)?.call.received.packets ?? 0
            if n != held { held = n; quietSince = clock.now }
        }
        let settled = held
        #expect(clock.now - quietSince >= .milliseconds(300), "the echo goes on while held: \(settled) packets")
        try await Task.sleep(for: .milliseconds(500))
        #expect(phone.mediaStatistics(key)?.call.received.packets == settled, "the echo goes on while held")
        try await phone.hold(key, false)
        #expect(await phone.wait(timeout: .seconds(10)) { lines.count("caller: peer answers sendrecv") == 2 }, "\(lines.all)")
        #expect(await phone.wait(timeout: .seconds(5)) { (phone.mediaStatistics(key)?.call.received.packets ?? 0) > settled + 20 })
        #expect(server.statistics.callsUp == 1 && server.statistics.answered == 1)
        try await phone.agent.perform(key) { s throws(SessionError) in try s.bye() }
        #expect(await phone.wait(key, timeout: .seconds(10)) { $0 == .terminated(.localHangup) })
    }

    @Test("an INVITE without an offer gets our offer in the 200; the answer in the ACK starts the echo", .timeLimit(.minutes(1)))
    func offerlessInvite() async throws {
        let server = try Self.server()
        defer { server.close() }
        let lines = ReportLines()
        let phone = try Self.caller(lines, tone: 900, record: nil)
        defer { phone.close() }
        // The phone answers the 2xx's offer (its media session is made then) in the ACK.
        let key = await phone.agent.call(try Self.target(server), offer: nil)
        try #require(await phone.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)")
        #expect(lines.count("caller: peer offers sendrecv in INVITE") == 1, "\(lines.all)")
        #expect(await phone.wait(timeout: .seconds(10)) { (phone.mediaStatistics(key)?.call.received.packets ?? 0) > 50 }, "\(lines.all)")
        #expect(server.tick().packetsReceived > 30)
        try await phone.agent.perform(key) { s throws(SessionError) in try s.bye() }
        #expect(await phone.wait(key, timeout: .seconds(10)) { $0 == .terminated(.localHangup) })
    }

    @Test("a call whose media carries nothing is ended with BYE after the media timeout; an offer without a common codec gets 488",
          .timeLimit(.minutes(1)))
    func mediaTimeoutAndRefusedOffer() async throws {
        let server = try Self.server(mediaTimeout: .seconds(1), codecs: [.pcma])
        defer { server.close() }
        let lines = ReportLines()
        // No media: the SDP names a placeholder port and nothing is sent.
        let silent = try Self.caller(lines, tone: nil, record: nil, codecs: [.pcma])
        defer { silent.close() }
        let key = await silent.call(try Self.target(server))
        try #require(await silent.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)")
        let ticker = Task {
            while !Task.isCancelled {
                server.tick()
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
        defer { ticker.cancel() }
        #expect(await silent.wait(key, timeout: .seconds(10)) { $0 == .terminated(.remoteHangup) }, "\(lines.all)")
        #expect(server.statistics.mediaTimeouts == 1)
        let pcmu = try Self.caller(lines, tone: nil, record: nil, codecs: [.pcmu])
        defer { pcmu.close() }
        let refused = await pcmu.call(try Self.target(server))
        #expect(await pcmu.wait(refused, timeout: .seconds(10)) { $0 == .terminated(.rejected(488)) }, "\(lines.all)")
        #expect(server.statistics.refusedOffers == 1 && server.statistics.callsUp == 0)
    }
}

/// SIPp's `uac_pcap` (A-law and an RFC 2833 digit replayed from Debian's sip-tester pcaps, the
/// same sequence numbers in every call) against `serve --echo`. Skipped without sipp, except under CI.
@Suite("serve --echo with SIPp uac_pcap", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sipp") || TestPaths.isCI, "sipp is not installed: SIPp echo skipped"),
       .requires("sipp", { FileManager.default.isExecutableFile(atPath: "/usr/bin/sipp") }))
struct SIPpEchoTests {
    @Test("10 SIPp uac_pcap calls at once: every call succeeds, each one's packets are received and echoed, none lost", .timeLimit(.minutes(1)))
    func sippCallsTheEchoLine() async throws {
        let server = try EchoServeTests.server(srtp: .off)
        defer { server.close() }
        let dir = NSTemporaryDirectory() + "sb-sipp-echo-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createSymbolicLink(atPath: dir + "/pcap", withDestinationPath: "/usr/share/sip-tester")
        let port = server.server.endpoint.localAddresses[0].address.port
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/sipp")
        p.arguments = ["127.0.0.1:\(port)", "-sn", "uac_pcap", "-i", "127.0.0.1", "-p", String(try SIPpPort.free()), "-mp", String(try SIPpPort.free()),
                       "-m", "10", "-r", "20", "-l", "10", "-nostdin", "-timeout", "40"]
        p.currentDirectoryURL = URL(fileURLWithPath: dir)
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        defer {
            if p.isRunning {
                p.terminate()
                p.waitUntilExit()
            }
        }
        var peak = 0
        let clock = ContinuousClock(), deadline = clock.now + .seconds(45)
        while p.isRunning && clock.now < deadline {
            peak = max(peak, server.tick().callsUp)
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(!p.isRunning && p.terminationStatus == 0, "sipp: \(p.isRunning ? "still running" : "exit \(p.terminationStatus)")")
        #expect(await Phone.waitUntil(timeout: .seconds(5)) { server.statistics.callsUp == 0 })
        let s = server.tick()
        #expect(peak == 10 && s.answered == 10 && server.server.statistics.remoteHangups == 10, "\(s)")
        // 8 s of 30 ms A-law and a digit per call: 246 packets each; the echo sends one every 20 ms.
        #expect(s.packetsReceived >= 10 * 240 && s.packetsEchoed >= 10 * 400 && s.packetsLost == 0, "\(s)")
    }
}

/// baresip calls `serve --echo`: its RTCP reports show that it receives our echo.
@Suite("serve --echo with baresip", .enabled(if: Baresip.available || TestPaths.isCI, "baresip is not installed: baresip echo interop skipped"),
       .requires("baresip", { Baresip.available }))
struct BaresipEchoTests {
    @Test("baresip (Opus, SDES-SRTP) calls serve --echo and receives its packets back", .timeLimit(.minutes(1)))
    func baresipHearsTheEcho() async throws {
        let server = try EchoServeTests.server(srtp: .optional)
        defer { server.close() }
        let b = try await Baresip.start(options: "answermode=auto;audio_codecs=opus/48000/2,pcmu;mediaenc=srtp")
        defer { Baresip.stop(b) }
        let port = server.server.endpoint.localAddresses[0].address.port
        let ctl = try await Baresip.ctl(b, ["dial sip:echo@127.0.0.1:\(port)", "sleep 4", "callstat"], wait: 4)
        let reports = BaresipMediaTests.rtcpReceived(ctl)
        #expect(reports.contains { $0.received > 50 }, "\(ctl)\n\(Baresip.log(b.rundir))")
        let during = server.tick()
        #expect(during.callsUp == 1 && during.secureCalls == 1 && during.packetsEchoed > 100, "\(during)")
        try await Baresip.ctl(b, ["hangup"])
        #expect(await Phone.waitUntil(timeout: .seconds(10)) { server.statistics.callsUp == 0 })
        #expect(server.server.statistics.remoteHangups == 1)
    }
}

extension Phone {
    /// Waits (bounded) for a condition that needs no phone.
    static func waitUntil(timeout: Duration, _ condition: @Sendable () -> Bool) async -> Bool {
        let clock = ContinuousClock(), deadline = clock.now + timeout
        while clock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }
}
