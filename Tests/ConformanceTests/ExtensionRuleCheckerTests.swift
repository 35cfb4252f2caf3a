import Testing
import SIPMessage
@testable import Conformance

/// The extensions' rules of the checker on hand-made exchanges (RFC 3261 §8.2.2.3 and §14.2,
/// RFC 3262, RFC 4028): each fires on the message that breaks it, and not on a conforming one.
struct ExtensionRuleCheckerTests {
    typealias R = RuleCheckerTests

    /// An INVITE of ours with `headers`, CSeq `cseq`, To tag `toTag`, branch `branch`.
    static func invite(_ headers: [String] = [], cseq: UInt32 = 1, toTag: String? = nil, branch: String = "z9hG4bK-1") -> SIPMessage {
        R.msg(([
            "INVITE sip:dut@127.0.0.1:5090 SIP/2.0",
            "Via: SIP/2.0/UDP 127.0.0.1:4000;branch=\(branch)",
            "Max-Forwards: 70",
            "From: <sip:conform@127.0.0.1:4000>;tag=ft",
            "To: <sip:dut@127.0.0.1:5090>" + (toTag.map { ";tag=\($0)" } ?? ""),
            "Call-ID: c1",
            "CSeq: \(cseq) INVITE",
            "Contact: <sip:conform@127.0.0.1:4000>",
        ] + headers + ["Content-Length: 0"]).joined(separator: "\n"))
    }

    func check(_ list: [(Bool, SIPMessage)]) -> [ConformanceFinding] {
        RuleChecker().check(list.enumerated().map { RuleChecker.Record(sent: $0.element.0, time: Double($0.offset) * 0.01, message: $0.element.1) }, end: 0.1)
    }

    @Test func a420MustListTheUnsupportedTag() {
        let inv = Self.invite(["Require: x-foo"])
        #expect(check([(true, inv), (false, R.response(420, to: inv, extra: ["Unsupported: x-foo"]))]).isEmpty)
        let bare = check([(true, inv), (false, R.response(420, to: inv))])
        #expect(bare.map(\.rule) == [.unsupportedIn420] && bare.first?.messageIndex == 1)
        #expect(check([(true, inv), (false, R.response(420, to: inv, extra: ["Unsupported: x-bar"]))]).map(\.rule) == [.unsupportedIn420])
    }

    @Test func a422MustGiveAMinSEAboveTheRequest() {
        let inv = Self.invite(["Session-Expires: 30"])
        #expect(check([(true, inv), (false, R.response(422, to: inv, extra: ["Min-SE: 90"]))]).isEmpty)
        #expect(check([(true, inv), (false, R.response(422, to: inv))]).map(\.rule) == [.minSEIn422])
        #expect(check([(true, inv), (false, R.response(422, to: inv, extra: ["Min-SE: 30"]))]).map(\.rule) == [.minSEIn422])
    }

    @Test func a500ToAnINVITEWhileAnotherIsPendingNeedsRetryAfter() {
        let first = Self.invite(), second = Self.invite(cseq: 2, toTag: "tt", branch: "z9hG4bK-2")
        let ok = R.response(500, to: second, tag: nil, extra: ["Retry-After: 4"])
        #expect(check([(true, first), (true, second), (false, ok)]).isEmpty)
        let bare = check([(true, first), (true, second), (false, R.response(500, to: second, tag: nil))])
        #expect(bare.map(\.rule) == [.retryAfterIn500] && bare.first?.messageIndex == 2)
        #expect(check([(true, first), (true, second), (false, R.response(500, to: second, tag: nil, extra: ["Retry-After: 60"]))]).map(\.rule) == [.retryAfterIn500])
        // Once the first INVITE had its final response, a 500 is just a 500.
        let done = R.response(486, to: first)
        #expect(check([(true, first), (false, done), (true, second), (false, R.response(500, to: second, tag: nil))]).isEmpty)
    }

    @Test func aProvisionalToAnINVITERequiring100relIsReliable() {
        let inv = Self.invite(["Require: 100rel"])
        #expect(check([(true, inv), (false, R.response(180, to: inv, extra: ["Require: 100rel", "RSeq: 7"]))]).isEmpty)
        #expect(check([(true, inv), (false, R.response(180, to: inv))]).map(\.rule) == [.reliableProvisional])
        #expect(check([(true, inv), (false, R.response(180, to: inv, extra: ["Require: 100rel"]))]).map(\.rule) == [.reliableProvisional])
        // Without 100rel asked, an unreliable 180 is fine.
        let plain = Self.invite()
        #expect(check([(true, plain), (false, R.response(180, to: plain))]).isEmpty)
    }

    @Test func sessionExpiresInA2xxNamesItsRefresher() {
        let inv = Self.invite(["Supported: timer", "Session-Expires: 1800"])
        func ok(_ extra: [String]) -> SIPMessage { R.response(200, to: inv, extra: ["Contact: <sip:dut@127.0.0.1:5090>"] + extra) }
        let ack = R.ack()
        #expect(check([(true, inv), (false, ok(["Session-Expires: 1800;refresher=uas"])), (true, ack)]).isEmpty)
        #expect(check([(true, inv), (false, ok(["Session-Expires: 1800;refresher=uac", "Require: timer"])), (true, ack)]).isEmpty)
        #expect(check([(true, inv), (false, ok(["Session-Expires: 1800"])), (true, ack)]).map(\.rule) == [.sessionExpiresRefresher])
        #expect(check([(true, inv), (false, ok(["Session-Expires: 1800;refresher=uac"])), (true, ack)]).map(\.rule) == [.sessionExpiresRefresher])
        // refresher=uac to a UAC that did not say it supports timers.
        let plain = Self.invite()
        let toPlain = R.response(200, to: plain, extra: ["Contact: <sip:dut@127.0.0.1:5090>", "Session-Expires: 1800;refresher=uac", "Require: timer"])
        #expect(check([(true, plain), (false, toPlain), (true, ack)]).map(\.rule) == [.sessionExpiresRefresher])
    }

    /// The DUT as UAC: its INVITE, our reliable 183, its PRACK.
    @Test func aPRACKMustNameAReliableProvisionalSent() {
        let inv = Self.invite(["Supported: 100rel"])
        let reliable = R.response(183, to: inv, extra: ["Require: 100rel", "RSeq: 42", "Contact: <sip:conform@127.0.0.1:4000>"])
        func prack(_ rack: String?) -> SIPMessage {
            R.msg(([
                "PRACK sip:conform@127.0.0.1:4000 SIP/2.0", "Via: SIP/2.0/UDP 127.0.0.1:5090;branch=z9hG4bK-p", "Max-Forwards: 70",
                "From: <sip:conform@127.0.0.1:4000>;tag=ft", "To: <sip:dut@127.0.0.1:5090>;tag=tt", "Call-ID: c1", "CSeq: 2 PRACK",
            ] + (rack.map { ["RAck: \($0)"] } ?? []) + ["Content-Length: 0"]).joined(separator: "\n"))
        }
        #expect(check([(false, inv), (true, reliable), (false, prack("42 1 INVITE"))]).filter { $0.rule == .prackRAck }.isEmpty)
        #expect(check([(false, inv), (true, reliable), (false, prack("43 1 INVITE"))]).filter { $0.rule == .prackRAck }.count == 1)
        #expect(check([(false, inv), (true, reliable), (false, prack(nil))]).filter { $0.rule == .prackRAck }.count == 1)
    }

    /// The DUT as UAC retrying after our 422.
    @Test func aRetryAfter422AsksAtLeastTheMinSE() {
        let inv = Self.invite(["Session-Expires: 1800", "Min-SE: 90"])
        let refused = R.response(422, to: inv, extra: ["Min-SE: 3600"])
        func retry(_ se: String, _ minSE: String) -> SIPMessage { Self.invite(["Session-Expires: \(se)", "Min-SE: \(minSE)"], cseq: 2, branch: "z9hG4bK-r") }
        func rule(_ m: SIPMessage) -> [ConformanceFinding] { check([(false, inv), (true, refused), (false, m)]).filter { $0.rule == .sessionExpiresAfter422 } }
        #expect(rule(retry("3600", "3600")).isEmpty)
        #expect(rule(retry("1800", "3600")).count == 1)
        #expect(rule(retry("3600", "90")).count == 1)
    }
}
