import Foundation
import Testing
import SIPMessage
import SIPRuntime
import NetworkIO
@testable import Switchboard
import SwitchboardTestSupport

/// The call API's end reasons reached by real flows against SIPp on 127.0.0.1: a callee that
/// rings then refuses with each status (Fixtures/sipp/uas_final.xml), and SIPp's own uas, which
/// answers but never sends media (the no-media end).
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
}
