import Foundation
import Testing
import SIPMessage
import SwitchboardTestSupport
import Conformance

/// The conformance runner's `uas` suite against baresip and linphonec answering by themselves
/// (started by scripts/peers/baresip-start and linphone-start on 127.0.0.1, killed by their
/// process group at the end).
@Suite("Conformance against baresip and linphonec", .serialized)
struct ConformancePeerTests {
    @Test(.timeLimit(.minutes(1)), .enabled(if: Baresip.available || TestPaths.isCI, "baresip is not installed: skipped"),
          .requires("baresip", { Baresip.available }))
    func theUASSuiteAgainstBaresip() async throws {
        let b = try await Baresip.start()
        defer { Baresip.stop(b) }
        try await Self.check(target: "sip:b@127.0.0.1:\(b.sipPort)")
    }

    @Test(.timeLimit(.minutes(1)), .enabled(if: Linphone.available || TestPaths.isCI, "linphonec is not installed: skipped"),
          .requires("linphonec (Debian linphone-cli)", { Linphone.available }))
    func theUASSuiteAgainstLinphonec() async throws {
        let l = try await Linphone.start()
        defer { Linphone.stop(l) }
        try await Self.check(target: "sip:lin@127.0.0.1:\(l.sipPort)")
    }

    /// Both answer at once and both answer an OPTIONS without Call-ID with 200 (with no
    /// Call-ID: they had none to copy); everything else passes with no finding.
    static func check(target: String) async throws {
        let runner = ConformanceRunner(target: try SIPURI(target), responseTimeout: .seconds(2))
        let report = try await runner.run(suite: "uas")
        let describe = report.results.map { "\($0.name): \($0.verdict) \($0.reason ?? "")" + $0.findings.map { "\n   \($0)" }.joined() }
            .joined(separator: "\n")
        let verdicts = Dictionary(uniqueKeysWithValues: report.results.map { ($0.name, $0.verdict) })
        var expected = Dictionary(uniqueKeysWithValues: ConformanceSuites.uas.map { ($0.name, ConformanceVerdict.pass) })
        // It answers at once (auto-answer): nothing to cancel.
        expected["cancel-ringing"] = .inconclusive
        // It answers an OPTIONS without Call-ID with 200.
        expected["missing-call-id"] = .fail
        #expect(verdicts == expected, "\(describe)")
        #expect(report.results.first { $0.name == "missing-call-id" }?.reason == "a request without Call-ID was answered 200, 400 expected")
        #expect(report.results.allSatisfy { $0.findings.isEmpty }, "\(describe)")
    }
}
