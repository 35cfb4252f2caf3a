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
        // baresip 1.0 refuses 100rel with 420 (Unsupported: 100rel) and UPDATE with 501, has no
        // session timers, and refuses an unknown Require with 420.
        try await Self.check(target: "sip:b@127.0.0.1:\(b.sipPort)", also: [
            "update-glare-491": .inconclusive, "100rel-prack": .inconclusive, "require-unknown-extension": .pass, "update-offer": .inconclusive,
        ], rules: [])
    }

    @Test(.timeLimit(.minutes(1)), .enabled(if: Linphone.available || TestPaths.isCI, "linphonec is not installed: skipped"),
          .requires("linphonec (Debian linphone-cli)", { Linphone.available }))
    func theUASSuiteAgainstLinphonec() async throws {
        let l = try await Linphone.start()
        defer { Linphone.stop(l) }
        // linphonec 5.1 ignores Require (100rel and an unknown tag: an unreliable 180, then 200),
        // accepts an UPDATE's offer crossing its own offer in a 2xx, answers UPDATE, and has no
        // session timers.
        try await Self.check(target: "sip:lin@127.0.0.1:\(l.sipPort)", also: [
            "update-glare-491": .fail, "100rel-prack": .fail, "require-unknown-extension": .fail, "update-offer": .pass,
        ], rules: [.reliableProvisional])
    }

    /// Both answer at once and both answer an OPTIONS without Call-ID with 200 (with no
    /// Call-ID: they had none to copy); RFC 3261's core tests pass with no finding; the
    /// extensions' tests end as `also` says, with the rules `rules` found.
    static func check(target: String, also: [String: ConformanceVerdict], rules: Set<ConformanceRule>) async throws {
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
        // Both answer the first INVITE at once: the second one was not sent while it was pending.
        expected["reinvite-while-pending"] = .inconclusive
        // Neither runs session timers (no Session-Expires in the 2xx).
        expected["session-timer-too-small"] = .inconclusive
        expected["session-timer-refresher"] = .inconclusive
        expected.merge(also) { $1 }
        #expect(verdicts == expected, "\(describe)")
        #expect(report.results.first { $0.name == "missing-call-id" }?.reason == "a request without Call-ID was answered 200, 400 expected")
        #expect(Set(report.results.flatMap(\.findings).map(\.rule)) == rules, "\(describe)")
    }
}
