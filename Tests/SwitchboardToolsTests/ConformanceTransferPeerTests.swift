import Foundation
import Testing
import SIPMessage
import SwitchboardTestSupport
import Conformance

/// The conformance runner's `transfer` suite against baresip answering by itself (started by
/// scripts/peers/baresip-start on 127.0.0.1, killed by its process group at the end).
@Suite("Conformance transfer suite against baresip", .serialized)
struct ConformanceTransferPeerTests {
    /// baresip 1.0 as transferee calls the target without copying Referred-By (and, attended,
    /// without the Refer-To's Replaces), accepts a REFER with two Refer-To values, and does not
    /// implement Replaces (it answers such an INVITE as a new call, not listing replaces in
    /// Supported: inconclusive).
    @Test(.timeLimit(.minutes(1)), .enabled(if: Baresip.available || TestPaths.isCI, "baresip is not installed: skipped"),
          .requires("baresip", { Baresip.available }))
    func theTransferSuiteAgainstBaresip() async throws {
        let b = try await Baresip.start()
        defer { Baresip.stop(b) }
        let runner = ConformanceRunner(target: try SIPURI("sip:b@127.0.0.1:\(b.sipPort)"), testTimeLimit: .seconds(20), responseTimeout: .seconds(2))
        let report = try await runner.run(suite: "transfer")
        let describe = report.results.map { "\($0.name): \($0.verdict) \($0.reason ?? "")" + $0.findings.map { "\n   \($0)" }.joined() }
            .joined(separator: "\n")
        let verdicts = Dictionary(uniqueKeysWithValues: report.results.map { ($0.name, $0.verdict) })
        #expect(verdicts == ["blind-transferee": .fail, "attended-transferee": .fail, "refer-answered": .pass, "refer-without-refer-to": .pass,
                             "refer-two-refer-to": .fail, "replaces-confirmed": .inconclusive, "replaces-unknown-dialog": .inconclusive,
                             "replaces-early-dialog": .inconclusive], "\(describe)")
        let reason = { (name: String) in report.results.first { $0.name == name }?.reason ?? "" }
        #expect(reason("blind-transferee").contains("no Referred-By"), "\(describe)")
        #expect(reason("attended-transferee").contains("no Replaces"), "\(describe)")
        // The accepted two-Refer-To REFER is the only rule broken.
        #expect(Set(report.results.flatMap(\.findings).map(\.rule.id)) == ["refer-to-count"], "\(describe)")
    }
}
