import Foundation
import Testing
import SIPMessage
import SwitchboardTestSupport
import Conformance

/// The conformance runner's `transfer` suite against baresip and linphonec answering by
/// themselves (started by scripts/peers/baresip-start and linphone-start on 127.0.0.1, killed by
/// their process group at the end).
@Suite("Conformance transfer suite against baresip and linphonec", .serialized)
struct ConformanceTransferPeerTests {
    /// The `transfer` suite against the peer at `target`: the report, each test's verdict by
    /// name, and a description of the run for failure messages.
    static func run(_ target: String) async throws -> (ConformanceReport, [String: ConformanceVerdict], String) {
        let runner = ConformanceRunner(target: try SIPURI(target), testTimeLimit: .seconds(20), responseTimeout: .seconds(2))
        let report = try await runner.run(suite: "transfer")
        let describe = report.results.map { "\($0.name): \($0.verdict) \($0.reason ?? "")" + $0.findings.map { "\n   \($0)" }.joined() }
            .joined(separator: "\n")
        return (report, Dictionary(uniqueKeysWithValues: report.results.map { ($0.name, $0.verdict) }), describe)
    }

    /// baresip 1.0 as transferee calls the target without copying Referred-By (and, attended,
    /// without the Refer-To's Replaces), accepts a REFER with two Refer-To values, and does not
    /// implement Replaces (it answers such an INVITE as a new call, not listing replaces in
    /// Supported: inconclusive).
    @Test(.timeLimit(.minutes(1)), .enabled(if: Baresip.available || TestPaths.isCI, "baresip is not installed: skipped"),
          .requires("baresip", { Baresip.available }))
    func theTransferSuiteAgainstBaresip() async throws {
        let b = try await Baresip.start()
        defer { Baresip.stop(b) }
        let (report, verdicts, describe) = try await Self.run("sip:b@127.0.0.1:\(b.sipPort)")
        #expect(verdicts == ["blind-transferee": .fail, "attended-transferee": .fail, "refer-answered": .pass, "refer-without-refer-to": .pass,
                             "refer-two-refer-to": .fail, "replaces-confirmed": .inconclusive, "replaces-unknown-dialog": .inconclusive,
                             "replaces-early-dialog": .inconclusive], "\(describe)")
        let reason = { (name: String) in report.results.first { $0.name == name }?.reason ?? "" }
        #expect(reason("blind-transferee").contains("no Referred-By"), "\(describe)")
        #expect(reason("attended-transferee").contains("no Replaces"), "\(describe)")
        // The accepted two-Refer-To REFER is the only rule broken.
        #expect(Set(report.results.flatMap(\.findings).map(\.rule.id)) == ["refer-to-count"], "\(describe)")
    }

    /// linphonec 5.1 as transferee ends its REFER subscription with a Subscription-State that
    /// does not parse (`terminated;reason=reason=noresource`), accepts a REFER with two Refer-To
    /// values, and accepts (200, listing replaces in Supported) an INVITE whose Replaces names a
    /// dialog it does not have; it answers at once, so no early dialog can be named.
    @Test(.timeLimit(.minutes(1)), .enabled(if: Linphone.available || TestPaths.isCI, "linphonec is not installed: skipped"),
          .requires("linphonec (Debian linphone-cli)", { Linphone.available }))
    func theTransferSuiteAgainstLinphonec() async throws {
        let l = try await Linphone.start()
        defer { Linphone.stop(l) }
        let (report, verdicts, describe) = try await Self.run("sip:lin@127.0.0.1:\(l.sipPort)")
        #expect(verdicts == ["blind-transferee": .fail, "attended-transferee": .fail, "refer-answered": .pass, "refer-without-refer-to": .pass,
                             "refer-two-refer-to": .fail, "replaces-confirmed": .pass, "replaces-unknown-dialog": .fail,
                             "replaces-early-dialog": .inconclusive], "\(describe)")
        let rules = { (name: String) in Set(report.results.first { $0.name == name }?.findings.map(\.rule.id) ?? []) }
        #expect(rules("blind-transferee") == ["notify-subscription-state"], "\(describe)")
        #expect(rules("refer-two-refer-to") == ["refer-to-count"], "\(describe)")
        #expect(rules("replaces-unknown-dialog") == ["replaces-dialog"], "\(describe)")
    }
}
