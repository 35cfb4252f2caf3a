import Foundation
import Testing
import SIPMessage
import SwitchboardTestSupport
import Conformance

/// The conformance runner's `uas` suite against baresip answering by itself (started by
/// scripts/peers/baresip-start on 127.0.0.1, killed by its process group at the end).
@Suite("Conformance against baresip", .enabled(if: Baresip.available || TestPaths.isCI, "baresip is not installed: skipped"),
       .requires("baresip", { Baresip.available }))
struct ConformanceBaresipTests {
    @Test(.timeLimit(.minutes(1)))
    func theUASSuiteAgainstBaresip() async throws {
        #expect(Baresip.available, "baresip must be installed under CI (scripts/test installs it)")
        let b = try await Baresip.start()
        defer { Baresip.stop(b) }
        let runner = ConformanceRunner(target: try SIPURI("sip:b@127.0.0.1:\(b.sipPort)"), responseTimeout: .seconds(2))
        let report = try await runner.run(suite: "uas")
        let describe = report.results.map { "\($0.name): \($0.verdict) \($0.reason ?? "")" + $0.findings.map { "\n   \($0)" }.joined() }
            .joined(separator: "\n")
        let verdicts = Dictionary(uniqueKeysWithValues: report.results.map { ($0.name, $0.verdict) })
        var expected = Dictionary(uniqueKeysWithValues: ConformanceSuites.uas.map { ($0.name, ConformanceVerdict.pass) })
        // It answers at once (answermode=auto): nothing to cancel.
        expected["cancel-ringing"] = .inconclusive
        // baresip 1.0 answers an OPTIONS without Call-ID with 200 (and no Call-ID: it had none to copy).
        expected["missing-call-id"] = .fail
        #expect(verdicts == expected, "\(describe)")
        #expect(report.results.first { $0.name == "missing-call-id" }?.reason == "a request without Call-ID was answered 200, 400 expected")
        #expect(report.results.allSatisfy { $0.findings.isEmpty }, "\(describe)")
    }
}
