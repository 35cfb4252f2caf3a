import Foundation
import Testing
import SIPMessage
import SIPTransaction
import SIPTransport
import SIPDialog
import SIPRuntime
import NetworkIO
import Switchboard
import SwitchboardTestSupport

/// SIPp scenarios written in the project (Fixtures/sipp) for the roles of transfer and
/// forwarding, against our phones on 127.0.0.1: SIPp as transferor (we are transferee), as
/// redirected caller (we forward), as forwarder (we follow its 302).
@Suite("SIPp in the roles of transfer and forwarding",
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sipp") || TestPaths.isCI, "sipp is not installed"),
       .requires("sipp (Debian sip-tester)", { FileManager.default.isExecutableFile(atPath: "/usr/bin/sipp") }))
struct SIPpTransferTests {
    /// Runs sipp with `arguments` in a fresh folder; returns its exit status (nil when it had to
    /// be killed after `timeout`) and its log.
    static func sipp(_ arguments: [String], timeout: Duration = .seconds(20)) async throws -> (Int32?, String) {
        let dir = NSTemporaryDirectory() + "sb-sipp-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/out.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/sipp")
        p.arguments = arguments + ["-nostdin", "-trace_logs", "-trace_err"]
        p.currentDirectoryURL = URL(fileURLWithPath: dir)
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = FileHandle(forWritingAtPath: log)
        p.standardError = p.standardOutput
        try p.run()
        let clock = ContinuousClock(), deadline = clock.now + timeout
        while p.isRunning && clock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        var status: Int32? = p.terminationStatus
        if p.isRunning { p.terminate(); p.waitUntilExit(); status = nil }
        let logs = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        let text = logs.filter { $0.hasSuffix(".log") }.compactMap { try? String(contentsOfFile: dir + "/" + $0, encoding: .utf8) }.joined(separator: "\n")
        return (status, String(text.suffix(4000)))
    }

    static func phone(_ user: String, forwardTo: [SIPURI] = [], lines: TransferTests.Lines) throws -> Phone {
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]),
                                           identity: try SIPURI("sip:\(user)@127.0.0.1"))
        c.sessionTimer = nil
        c.redirects = RedirectPolicy(mode: .follow)
        return try Phone(name: user, configuration: c, autoAnswer: .milliseconds(50), forwardTo: forwardTo, report: { lines.add($0) })
    }

    static func port(_ p: Phone) -> UInt16 { p.agent.endpoint.localAddresses[0].address.port }

    @Test("SIPp transfers us (uac_transferor.xml): 202, NOTIFYs until terminated with a final SIP/2.0 200, then its BYE",
          .timeLimit(.minutes(1)))
    func sippAsTransferor() async throws {
        let lines = TransferTests.Lines()
        let bob = try Self.phone("bob", lines: lines), carol = try Self.phone("carol", lines: lines)
        defer { bob.close(); carol.close() }
        let (status, log) = try await Self.sipp([
            "127.0.0.1:\(Self.port(bob))", "-sf", TestPaths.repoRoot + "/Fixtures/sipp/uac_transferor.xml", "-s", "bob",
            "-key", "transfer_target", "sip:carol@127.0.0.1:\(Self.port(carol))", "-i", "127.0.0.1", "-p", String(freeUDPPort()),
            "-m", "1", "-timeout", "15", "-timeout_error",
        ])
        #expect(status == 0, "sipp: \(log)\n\(lines.text)")
        #expect(log.contains("final sipfrag: SIP/2.0 200"), "\(log)")
        #expect(carol.incomingCalls.count == 1)
        #expect(lines.contains("bob: transfer to sip:carol@127.0.0.1:\(Self.port(carol)) (Referred-By sip:sipp@127.0.0.1"))
    }

    @Test("we forward SIPp (uac_redirected.xml): a 302 naming carol with a Diversion reason", .timeLimit(.minutes(1)))
    func sippAsRedirectedCaller() async throws {
        let lines = TransferTests.Lines()
        let carol = try Self.phone("carol", lines: lines)
        let bob = try Self.phone("bob", forwardTo: [try SIPURI("sip:carol@127.0.0.1:\(Self.port(carol))")], lines: lines)
        defer { bob.close(); carol.close() }
        let (status, log) = try await Self.sipp([
            "127.0.0.1:\(Self.port(bob))", "-sf", TestPaths.repoRoot + "/Fixtures/sipp/uac_redirected.xml", "-s", "bob",
            "-i", "127.0.0.1", "-p", String(freeUDPPort()), "-m", "1", "-timeout", "10", "-timeout_error",
        ])
        #expect(status == 0, "sipp: \(log)\n\(lines.text)")
        #expect(log.contains("redirected to sip:carol@127.0.0.1:\(Self.port(carol)) with Diversion reason="), "\(log)")
    }

    @Test("SIPp forwards us (uas_forwarder.xml): we ACK its 302 and our call reaches the target", .timeLimit(.minutes(1)))
    func sippAsForwarder() async throws {
        let lines = TransferTests.Lines()
        let alice = try Self.phone("alice", lines: lines), carol = try Self.phone("carol", lines: lines)
        defer { alice.close(); carol.close() }
        let sippPort = freeUDPPort()
        async let run = Self.sipp([
            "-sf", TestPaths.repoRoot + "/Fixtures/sipp/uas_forwarder.xml", "-key", "redirect_target", "sip:carol@127.0.0.1:\(Self.port(carol))",
            "-i", "127.0.0.1", "-p", String(sippPort), "-m", "1", "-timeout", "10", "-timeout_error",
        ])
        try await Task.sleep(for: .milliseconds(400))
        let key = await alice.call(try SIPURI("sip:dave@127.0.0.1:\(sippPort)"))
        #expect(await alice.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.text)")
        #expect(lines.contains("alice: redirected (302) to sip:carol@127.0.0.1:\(Self.port(carol))"))
        let (status, log) = try await run
        #expect(status == 0, "sipp: \(log)")
        try await alice.agent.perform(key) { s throws(SessionError) in try s.bye() }
    }
}
