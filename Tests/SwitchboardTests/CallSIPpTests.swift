import Foundation
import Testing
import SIPMessage
import SIPRuntime
import SIPDialog
import NetworkIO
@testable import Switchboard
import SwitchboardTestSupport

/// The call API's end reasons reached by real flows against SIPp on 127.0.0.1: a callee that
/// rings then refuses with each status (Fixtures/sipp/uas_final.xml), and SIPp's own uas, which
/// answers but never sends media (the no-media end); a callee that rings until we CANCEL, a caller
/// that CANCELs while we ring, and a 302 our phone does not follow.
@Suite("Call API against SIPp: every refusal's reason, and the no-media end",
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sipp") || TestPaths.isCI, "sipp is not installed"),
       .requires("sipp (Debian sip-tester)", { FileManager.default.isExecutableFile(atPath: "/usr/bin/sipp") }))
struct CallSIPpTests {
    @Test("SIPp rings, then refuses: each final status ends our call with its reason, after ringing", .timeLimit(.minutes(1)),
          arguments: [
              (486, CallEndReason.busy(status: 486)),
              (603, .rejected(by: .remote, status: 603)),
              (480, .timeout(.noAnswer)),
              (488, .mediaFailure(status: 488)),
              (404, .rejected(by: .remote, status: 404)),
          ])
    func refusals(status: Int, reason: CallEndReason) async throws {
        let alice = try CallTests.phone("alice")
        defer { alice.close() }
        // The scenario with this test's status written in (see the fixture's comment).
        let template = try String(contentsOfFile: TestPaths.repoRoot + "/Fixtures/sipp/uas_final.xml", encoding: .utf8)
        let scenario = NSTemporaryDirectory() + "sb-uas-final-\(status)-\(UUID().uuidString).xml"
        try template.replacingOccurrences(of: "FINAL_STATUS", with: String(status)).write(toFile: scenario, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: scenario) }
        let port = freeUDPPort()
        let run = Task {
            try await SIPpTransferTests.sipp(["-sf", scenario, "-i", "127.0.0.1", "-p", String(port), "-m", "1", "-timeout", "15", "-timeout_error"])
        }
        #expect(await SIPpTransferTests.listening(port), "sipp did not start")
        let call = await alice.dial(try SIPURI("sip:service@127.0.0.1:\(port)"))
        let states = call.states
        try await call.waitUntil(timeout: .seconds(10)) { $0.isEnded }
        #expect(call.state == .ended(reason))
        var seen: [CallState] = []
        for await s in states { seen.append(s) }
        #expect(seen.contains(.ringing(earlyMedia: false)), "\(seen)")
        let (exit, log) = try await run.value
        #expect(exit == 0, "sipp: \(log)")
    }

    @Test("SIPp's uas answers and sends no media: our call ends .noMedia with a BYE that SIPp takes", .timeLimit(.minutes(1)))
    func noMedia() async throws {
        let alice = try CallTests.mediaPhone("alice") { config in
            config.inactivityTimeout = .milliseconds(800)
            config.rtcpInterval = .seconds(1)
        }
        defer { alice.close() }
        let port = freeUDPPort()
        let run = Task {
            try await SIPpTransferTests.sipp(["-sn", "uas", "-i", "127.0.0.1", "-p", String(port), "-m", "1", "-timeout", "15", "-timeout_error"])
        }
        #expect(await SIPpTransferTests.listening(port), "sipp did not start")
        let call = await alice.dial(try SIPURI("sip:service@127.0.0.1:\(port)"))
        try await call.waitUntil(timeout: .seconds(10)) { $0.isEstablished }
        try await call.waitUntil(timeout: .seconds(10)) { $0.isEnded }
        #expect(call.state == .ended(.noMedia))
        let (exit, log) = try await run.value
        #expect(exit == 0, "sipp's uas got our BYE: \(log)")
    }

    @Test("we cancel SIPp while it rings (uas_ring_cancelled.xml): 200 to the CANCEL, 487 ACKed, our call ends cancelled by us",
          .timeLimit(.minutes(1)))
    func cancelledByUs() async throws {
        let alice = try CallTests.phone("alice")
        defer { alice.close() }
        let (port, run) = SIPpTransferTests.sippServer("uas_ring_cancelled.xml")
        #expect(await SIPpTransferTests.listening(port), "sipp did not start")
        let call = await alice.dial(try SIPURI("sip:service@127.0.0.1:\(port)"))
        try await call.waitUntil(timeout: .seconds(10)) { $0 == .ringing(earlyMedia: false) }
        await call.hangUp(timeout: .seconds(10))
        #expect(call.state == .ended(.cancelled(by: .local)))
        let (exit, log) = try await run.value
        #expect(exit == 0, "sipp saw CANCEL, sent 487 and got its ACK: \(log)")
    }

    @Test("SIPp calls and gives up while we ring (uac_cancel.xml): our incoming call ends cancelled by the remote party",
          .timeLimit(.minutes(1)))
    func cancelledByPeer() async throws {
        let bob = try CallTests.phone("bob")
        defer { bob.close() }
        let arrivals = bob.incomingCallStream
        let run = Task {
            try await SIPpTransferTests.sipp([
                "127.0.0.1:\(bob.agent.endpoint.localAddresses[0].address.port)", "-sf", TestPaths.repoRoot + "/Fixtures/sipp/uac_cancel.xml",
                "-s", "bob", "-i", "127.0.0.1", "-p", String(freeUDPPort()), "-m", "1", "-timeout", "15", "-timeout_error",
            ])
        }
        let call = try #require(await CallTests.nextIncoming(arrivals))
        try await call.ring()
        try await call.waitUntil(timeout: .seconds(10)) { $0.isEnded }
        #expect(call.state == .ended(.cancelled(by: .remote)))
        let (exit, log) = try await run.value
        #expect(exit == 0, "sipp got 200 to its CANCEL and 487 to its INVITE: \(log)")
    }

    @Test("SIPp answers 302 (uas_forwarder.xml) to a phone that does not follow redirections: our call ends redirected",
          .timeLimit(.minutes(1)))
    func redirectedNotFollowed() async throws {
        let alice = try CallTests.phone("alice", redirects: RedirectPolicy(mode: .fail))
        defer { alice.close() }
        let (port, run) = SIPpTransferTests.sippServer("uas_forwarder.xml", ["-key", "redirect_target", "sip:carol@127.0.0.1:9"])
        #expect(await SIPpTransferTests.listening(port), "sipp did not start")
        let call = await alice.dial(try SIPURI("sip:service@127.0.0.1:\(port)"))
        try await call.waitUntil(timeout: .seconds(10)) { $0.isEnded }
        #expect(call.state == .ended(.redirected(status: 302)))
        let (exit, log) = try await run.value
        #expect(exit == 0, "sipp got the ACK of its 302: \(log)")
    }
}
