import Foundation
import Testing
import SIPMessage
import SIPTransaction
import SIPTransport
import SIPDialog
import SIPRuntime
import NetworkIO
@testable import Switchboard
import SwitchboardTestSupport

/// SIPp scenarios written in the project (Fixtures/sipp) for the roles of transfer and
/// forwarding, against our phones on 127.0.0.1: SIPp as transferor (we are transferee), as
/// transferee (we transfer it, blind and attended), as transfer target (our transferee calls
/// it), as redirected caller (we forward), as forwarder (we follow its 302).
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
        do {
            while p.isRunning && clock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        } catch {
            // Cancelled (the test ended early): SIPp never outlives its test.
            if p.isRunning { p.terminate(); p.waitUntilExit() }
            throw error
        }
        var status: Int32? = p.terminationStatus
        if p.isRunning { p.terminate(); p.waitUntilExit(); status = nil }
        let logs = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        // The scenario's own log lines (`<log>`) first and whole; the error and screen logs after.
        let rank = { (name: String) in name.hasSuffix("_logs.log") ? 0 : 1 }
        let ordered = logs.filter { $0.hasSuffix(".log") }.sorted { rank($0) < rank($1) }
        let text = ordered.compactMap { try? String(contentsOfFile: dir + "/" + $0, encoding: .utf8) }.joined(separator: "\n")
        return (status, String(text.prefix(8000)))
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

    @Test("SIPp transfers us by a REFER outside the call (uac_transferor_tdialog.xml): 403 without Target-Dialog, 202 and NOTIFYs with it",
          .timeLimit(.minutes(1)))
    func sippAsOutOfDialogTransferor() async throws {
        let lines = TransferTests.Lines()
        let bob = try Self.phone("bob", lines: lines), carol = try Self.phone("carol", lines: lines)
        defer { bob.close(); carol.close() }
        let (status, log) = try await Self.sipp([
            "127.0.0.1:\(Self.port(bob))", "-sf", TestPaths.repoRoot + "/Fixtures/sipp/uac_transferor_tdialog.xml", "-s", "bob",
            "-key", "transfer_target", "sip:carol@127.0.0.1:\(Self.port(carol))", "-i", "127.0.0.1", "-p", String(freeUDPPort()),
            "-m", "1", "-timeout", "15", "-timeout_error",
        ])
        #expect(status == 0, "sipp: \(log)\n\(lines.text)")
        #expect(log.contains("without Target-Dialog: 403"), "\(log)")
        #expect(log.contains("with Target-Dialog: 202"), "\(log)")
        #expect(log.contains("final sipfrag: SIP/2.0 200"), "\(log)")
        #expect(carol.incomingCalls.count == 1)
        #expect(lines.contains("bob: out-of-dialog REFER refused: 403: REFER outside a dialog"), "\(lines.text)")
        #expect(lines.contains("bob: out-of-dialog REFER accepted (Target-Dialog: call "), "\(lines.text)")
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

    /// SIPp on a free port running `scenario` (as a UAS) with `arguments`, in the background.
    static func sippServer(_ scenario: String, _ arguments: [String] = [], calls: Int = 1) -> (UInt16, Task<(Int32?, String), any Error>) {
        let port = freeUDPPort()
        let task = Task {
            try await Self.sipp(["-sf", TestPaths.repoRoot + "/Fixtures/sipp/" + scenario] + arguments + [
                "-i", "127.0.0.1", "-p", String(port), "-m", String(calls), "-timeout", "15", "-timeout_error",
            ])
        }
        return (port, task)
    }

    /// Waits (bounded) until a socket is bound to 127.0.0.1:`port` over UDP (SIPp is up), read
    /// from /proc/net/udp: binding the port to find out would race SIPp for it.
    static func listening(_ port: UInt16) async -> Bool {
        for _ in 0..<150 {
            if udpPortIsBound(port) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// Every call a phone took part in.
    static func calls(_ p: Phone) -> [SessionKey] { p.callStates.withLock { Array($0.keys) } }

    @Test("we transfer SIPp blind (uas_transferee.xml): it sees our Refer-To and Referred-By, its NOTIFYs 100 and 200 make the outcome, we hang up",
          .timeLimit(.minutes(1)))
    func sippAsTransferee() async throws {
        let lines = TransferTests.Lines()
        let alice = try Self.phone("alice", lines: lines)
        defer { alice.close() }
        let (port, run) = Self.sippServer("uas_transferee.xml")
        defer { run.cancel() }
        try #require(await Self.listening(port))
        let key = await alice.call(try SIPURI("sip:bob@127.0.0.1:\(port)"))
        try #require(await alice.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.text)")
        let outcome = await alice.transfer(key, to: try SIPURI("sip:carol@127.0.0.1:5999"), notifyTimeout: .seconds(10))
        #expect(outcome == .succeeded(200), "\(lines.text)")
        #expect(lines.text.contains("alice: transfer progress: SIP/2.0 100 Trying"), "\(lines.text)")
        #expect(lines.text.contains("alice: transfer progress: SIP/2.0 200 OK"), "\(lines.text)")
        #expect(await alice.wait(key, timeout: .seconds(5)) { $0 == .terminated(.localHangup) })
        let (status, log) = try await run.value
        #expect(status == 0, "sipp: \(log)\n\(lines.text)")
        #expect(log.contains("REFER to sip:carol@127.0.0.1:5999 referred by sip:alice@127.0.0.1"), "\(log)")
    }

    @Test("we transfer SIPp attended (uas_transferee.xml): its Refer-To is our consultation's Contact with the escaped Replaces of our side of it",
          .timeLimit(.minutes(1)))
    func sippAsAttendedTransferee() async throws {
        let lines = TransferTests.Lines()
        let alice = try Self.phone("alice", lines: lines), carol = try Self.phone("carol", lines: lines)
        defer { alice.close(); carol.close() }
        let (port, run) = Self.sippServer("uas_transferee.xml")
        defer { run.cancel() }
        try #require(await Self.listening(port))
        let key = await alice.call(try SIPURI("sip:bob@127.0.0.1:\(port)"))
        try #require(await alice.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.text)")
        let ac = await alice.call(try SIPURI("sip:carol@127.0.0.1:\(Self.port(carol))"))
        try #require(await alice.wait(ac, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.text)")
        let carolTag = try #require(await alice.agent.session(ac)?.dialog?.id.remoteTag)
        let outcome = await alice.transfer(key, replacing: ac, notifyTimeout: .seconds(10))
        #expect(outcome == .succeeded(200), "\(lines.text)")
        let (status, log) = try await run.value
        #expect(status == 0, "sipp: \(log)\n\(lines.text)")
        // Replaces escaped in the URI (RFC 3891 §5: ';' and '=' as %3B, %3D); from-tag is ours.
        let replaces = "Replaces=\(ac.callID.replacingOccurrences(of: "@", with: "%40"))%3Bto-tag%3D\(carolTag)%3Bfrom-tag%3D\(ac.localTag)"
        #expect(log.contains("REFER to sip:carol@127.0.0.1:\(Self.port(carol))?\(replaces) referred by sip:alice@127.0.0.1"), "\(log)")
        try await alice.agent.perform(ac) { s throws(SessionError) in try s.bye() }
    }

    @Test("SIPp as the target of our blind transfer (uas_transfer_target.xml): bob's INVITE carries alice's Referred-By",
          .timeLimit(.minutes(1)))
    func sippAsBlindTarget() async throws {
        let lines = TransferTests.Lines()
        let alice = try Self.phone("alice", lines: lines), bob = try Self.phone("bob", lines: lines)
        defer { alice.close(); bob.close() }
        let (port, run) = Self.sippServer("uas_transfer_target.xml", ["-key", "referred", "1"])
        defer { run.cancel() }
        try #require(await Self.listening(port))
        let ab = await alice.call(try SIPURI("sip:bob@127.0.0.1:\(Self.port(bob))"))
        try #require(await alice.wait(ab, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.text)")
        let outcome = await alice.transfer(ab, to: try SIPURI("sip:dave@127.0.0.1:\(port)"), notifyTimeout: .seconds(10))
        #expect(outcome == .succeeded(200), "\(lines.text)")
        // Bob's call to SIPp is up; he hangs it up, which ends SIPp's scenario.
        let bd = try #require(Self.calls(bob).first { $0.callID != ab.callID }, "\(lines.text)")
        #expect(await bob.wait(bd, timeout: .seconds(5)) { $0 == .confirmed })
        try await bob.agent.perform(bd) { s throws(SessionError) in try s.bye() }
        let (status, log) = try await run.value
        #expect(status == 0, "sipp: \(log)\n\(lines.text)")
        #expect(log.contains("INVITE call-id=\(bd.callID) replaces= referred-by=sip:alice@127.0.0.1"), "\(log)")
    }

    @Test("SIPp as the target of our attended transfer (uas_transfer_target.xml): bob's INVITE replaces alice's consultation, by its Call-ID and tags",
          .timeLimit(.minutes(1)))
    func sippAsAttendedTarget() async throws {
        let lines = TransferTests.Lines()
        let alice = try Self.phone("alice", lines: lines), bob = try Self.phone("bob", lines: lines)
        defer { alice.close(); bob.close() }
        let (port, run) = Self.sippServer("uas_transfer_target.xml", ["-key", "referred", "0"], calls: 2)
        defer { run.cancel() }
        try #require(await Self.listening(port))
        let ab = await alice.call(try SIPURI("sip:bob@127.0.0.1:\(Self.port(bob))"))
        try #require(await alice.wait(ab, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.text)")
        let ad = await alice.call(try SIPURI("sip:dave@127.0.0.1:\(port)"))
        try #require(await alice.wait(ad, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.text)")
        let daveTag = try #require(await alice.agent.session(ad)?.dialog?.id.remoteTag)
        let outcome = await alice.transfer(ab, replacing: ad, notifyTimeout: .seconds(10))
        #expect(outcome == .succeeded(200), "\(lines.text)")
        #expect(await alice.wait(ab, timeout: .seconds(5)) { $0 == .terminated(.localHangup) })
        // SIPp cannot end the replaced call (another scenario instance): alice does; bob hangs up.
        let bd = try #require(Self.calls(bob).first { $0.callID != ab.callID }, "\(lines.text)")
        #expect(await bob.wait(bd, timeout: .seconds(5)) { $0 == .confirmed })
        try await alice.agent.perform(ad) { s throws(SessionError) in try s.bye() }
        try await bob.agent.perform(bd) { s throws(SessionError) in try s.bye() }
        let (status, log) = try await run.value
        #expect(status == 0, "sipp: \(log)\n\(lines.text)")
        #expect(log.contains("INVITE call-id=\(bd.callID) replaces=\(ad.callID);to-tag=\(daveTag);from-tag=\(ad.localTag) referred-by=sip:alice@127.0.0.1"),
                "\(log)")
    }

    @Test("uas_transfer_target.xml fails a call without Referred-By when told every call is referred (-key referred 1)",
          .timeLimit(.minutes(1)))
    func sippTargetRefusesAnUnreferredCall() async throws {
        let lines = TransferTests.Lines()
        let alice = try Self.phone("alice", lines: lines)
        defer { alice.close() }
        let (port, run) = Self.sippServer("uas_transfer_target.xml", ["-key", "referred", "1"])
        defer { run.cancel() }
        try #require(await Self.listening(port))
        let key = await alice.call(try SIPURI("sip:dave@127.0.0.1:\(port)"))
        #expect(await alice.wait(key, timeout: .seconds(10)) { $0 == .terminated(.rejected(400)) }, "\(lines.text)")
        let (status, _) = try await run.value
        #expect(status == 1, "the scenario counts the call as failed")
    }
}
