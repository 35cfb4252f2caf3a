import Testing
import SIPMessage
@testable import Conformance

/// The rules about subscriptions, REFER, Replaces and redirection (RFC 6665, RFC 3515, RFC 3891,
/// RFC 3261 §21.3) on hand-made exchanges: each row is an exchange and the rules it must yield.
struct TransferRuleCheckerTests {
    static func msg(_ text: String) -> SIPMessage { RuleCheckerTests.msg(text) }

    /// A NOTIFY of the DUT's in the call c1, with `lines` after the common ones and `body`.
    static func notify(_ lines: [String], body: String = "") -> SIPMessage {
        let head = """
            NOTIFY sip:conform@127.0.0.1:4000 SIP/2.0
            Via: SIP/2.0/UDP 127.0.0.1:5090;branch=z9hG4bK-n\(lines.count)\(body.count)
            Max-Forwards: 70
            From: <sip:dut@127.0.0.1:5090>;tag=tt
            To: <sip:conform@127.0.0.1:4000>;tag=ft
            Call-ID: c1
            CSeq: 7 NOTIFY
            """
        let text = ([head] + lines + ["Content-Length: \(body.utf8.count)"]).joined(separator: "\n")
        return try! SIPMessage(text.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\r\n") + "\r\n\r\n" + body)
    }

    /// A REFER of the runner's in the call c1 with these Refer-To lines.
    static func refer(_ referTo: [String], branch: String = "z9hG4bK-r1") -> SIPMessage {
        msg((["""
            REFER sip:dut@127.0.0.1:5090 SIP/2.0
            Via: SIP/2.0/UDP 127.0.0.1:4000;branch=\(branch)
            Max-Forwards: 70
            From: <sip:conform@127.0.0.1:4000>;tag=ft
            To: <sip:dut@127.0.0.1:5090>;tag=tt
            Call-ID: c1
            CSeq: 2 REFER
            """] + referTo.map { "Refer-To: \($0)" } + ["Content-Length: 0"]).joined(separator: "\n"))
    }

    /// An INVITE of the runner's (Call-ID `callID`, From tag `tag`) with these extra lines.
    static func invite(_ callID: String, tag: String, branch: String, extra: [String] = []) -> SIPMessage {
        msg((["""
            INVITE sip:dut@127.0.0.1:5090 SIP/2.0
            Via: SIP/2.0/UDP 127.0.0.1:4000;branch=\(branch)
            Max-Forwards: 70
            From: <sip:conform@127.0.0.1:4000>;tag=\(tag)
            To: <sip:dut@127.0.0.1:5090>
            Call-ID: \(callID)
            CSeq: 1 INVITE
            Contact: <sip:conform@127.0.0.1:4000>
            """] + extra + ["Content-Length: 0"]).joined(separator: "\n"))
    }

    static func ok(_ code: Int, _ request: SIPMessage, tag: String? = "tt") -> SIPMessage {
        RuleCheckerTests.response(code, to: request, tag: tag, extra: (200...299).contains(code) && request.method == .invite ? ["Contact: <sip:dut@127.0.0.1:5090>"] : [])
    }

    static let sipfrag = "Content-Type: message/sipfrag"
    static let active = "Subscription-State: active;expires=60"

    func rules(_ list: [(Bool, SIPMessage)], absent: Set<String> = []) -> [String] {
        var checker = RuleChecker(checks2xxRetransmissions: false, checksInviteRetransmissions: false)
        checker.absentDialogs = absent
        let records = list.enumerated().map { RuleChecker.Record(sent: $0.element.0, time: Double($0.offset) * 0.01, message: $0.element.1) }
        return checker.check(records, end: 1).map(\.rule.id).sorted()
    }

    static let notifyRows: [(String, SIPMessage, [String])] = [
        ("refer NOTIFY with a sipfrag status line", notify(["Event: refer", active, sipfrag], body: "SIP/2.0 100 Trying\r\n"), []),
        ("no Subscription-State", notify(["Event: refer", sipfrag], body: "SIP/2.0 200 OK\r\n"), ["notify-subscription-state"]),
        ("no Subscription-State, another package", notify(["Event: presence", "Content-Type: application/pidf+xml"], body: "<x/>"), ["notify-subscription-state"]),
        ("Subscription-State that does not parse", notify(["Event: refer", "Subscription-State: ;;", sipfrag], body: "SIP/2.0 200 OK\r\n"), ["notify-subscription-state"]),
        ("refer NOTIFY with text/plain", notify(["Event: refer", active, "Content-Type: text/plain"], body: "SIP/2.0 200 OK\r\n"), ["refer-notify-sipfrag"]),
        ("refer NOTIFY without body", notify(["Event: refer", active]), ["refer-notify-sipfrag"]),
        ("refer NOTIFY whose sipfrag is a request line", notify(["Event: refer;id=2", active, sipfrag], body: "INVITE sip:x@y SIP/2.0\r\n"), ["refer-notify-sipfrag"]),
        ("both broken", notify(["Event: refer", "Content-Type: text/plain"], body: "done"), ["notify-subscription-state", "refer-notify-sipfrag"]),
        ("presence NOTIFY: no sipfrag asked", notify(["Event: presence", active, "Content-Type: application/pidf+xml"], body: "<x/>"), []),
    ]

    @Test(arguments: notifyRows.indices)
    func aNotifyOfTheDUT(_ row: Int) {
        let (name, n, expected) = Self.notifyRows[row]
        #expect(rules([(false, n)]) == expected, "\(name)")
    }

    static let referRows: [(String, [String], Int, [String])] = [
        ("one Refer-To accepted", ["<sip:carol@127.0.0.1:4000>"], 202, []),
        ("none accepted", [], 202, ["refer-to-count"]),
        ("two lines accepted", ["<sip:carol@127.0.0.1:4000>", "<sip:dave@127.0.0.1:4000>"], 202, ["refer-to-count"]),
        ("two in one line accepted", ["<sip:carol@127.0.0.1:4000>, <sip:dave@127.0.0.1:4000>"], 200, ["refer-to-count"]),
        ("none refused 400", [], 400, []),
        ("two refused 400", ["<sip:carol@127.0.0.1:4000>", "<sip:dave@127.0.0.1:4000>"], 400, []),
    ]

    @Test(arguments: referRows.indices)
    func aReferAnswered(_ row: Int) {
        let (name, referTo, code, expected) = Self.referRows[row]
        let r = Self.refer(referTo)
        #expect(rules([(true, r), (false, Self.ok(code, r))]) == expected, "\(name)")
    }

    @Test func aReferOfTheDUTWithoutReferToIsNamed() {
        var r = Self.refer([])
        r = RuleCheckerTests.msg(String(decoding: r.serialized(), as: UTF8.self).replacingOccurrences(of: "\r\n\r\n", with: "")
            .replacingOccurrences(of: "\r\n", with: "\n"))
        #expect(rules([(false, r)]) == ["refer-to-count"])
    }

    @Test func aRedirectionWithoutContactIsNamedOnce() {
        let i = Self.invite("c9", tag: "a", branch: "z9hG4bK-i9")
        let bare = Self.ok(302, i)
        let ack = RuleCheckerTests.inDialog("ACK", callID: "c9", fromTag: "a", branch: "z9hG4bK-i9", cseq: 1)
        #expect(rules([(true, i), (false, bare), (false, bare), (true, ack)]) == ["contact-in-3xx"])
        let good = RuleCheckerTests.response(302, to: i, extra: ["Contact: <sip:else@127.0.0.1:5090>"])
        #expect(rules([(true, i), (false, good), (true, ack)]) == [])
        // 380 Alternative Service describes the service in its body: no Contact is due.
        #expect(rules([(true, i), (false, Self.ok(380, i)), (true, ack)]) == [])
    }

    /// Replaces (RFC 3891 §3), each row: the calls set up first, then an INVITE with this
    /// Replaces answered `code`.
    static let replacesRows: [(String, String, Int, Set<String>, [String])] = [
        // An established call c1 (our tag ft, the DUT's tt): replacing it is fine.
        ("confirmed dialog replaced", "c1;to-tag=tt;from-tag=ft", 200, [], []),
        ("unknown dialog declared absent, answered 2xx", "cx;to-tag=q;from-tag=r", 200, ["cx"], ["replaces-dialog"]),
        ("unknown dialog declared absent, answered 481", "cx;to-tag=q;from-tag=r", 481, ["cx"], []),
        ("unknown dialog, not declared: the exchange cannot tell", "cy;to-tag=q;from-tag=r", 200, [], []),
        ("early dialog we initiated, answered 2xx", "c2;to-tag=et;from-tag=f2", 200, [], ["replaces-dialog"]),
        ("early dialog we initiated, answered 481", "c2;to-tag=et;from-tag=f2", 481, [], []),
        ("early-only naming a confirmed dialog, 2xx", "c1;to-tag=tt;from-tag=ft;early-only", 200, [], ["replaces-dialog"]),
        ("early-only naming a confirmed dialog, 486", "c1;to-tag=tt;from-tag=ft;early-only", 486, [], []),
        ("ended dialog, 2xx", "c3;to-tag=t3;from-tag=f3", 200, [], ["replaces-dialog"]),
        ("ended dialog, 603", "c3;to-tag=t3;from-tag=f3", 603, [], []),
        ("tags swapped: not the dialog, not declared", "c1;to-tag=ft;from-tag=tt", 200, [], []),
    ]

    @Test(arguments: replacesRows.indices)
    func anInviteWithReplaces(_ row: Int) {
        let (name, replaces, code, absent, expected) = Self.replacesRows[row]
        // c1 confirmed, c2 ringing (180 with tag et), c3 answered then ended by BYE.
        let i1 = Self.invite("c1", tag: "ft", branch: "z9hG4bK-1")
        let i2 = Self.invite("c2", tag: "f2", branch: "z9hG4bK-2")
        let i3 = Self.invite("c3", tag: "f3", branch: "z9hG4bK-3")
        let bye3 = RuleCheckerTests.inDialog("BYE", callID: "c3", fromTag: "f3", toTag: "t3", branch: "z9hG4bK-b3", cseq: 2)
        let r = Self.invite("cr", tag: "fr", branch: "z9hG4bK-r", extra: ["Replaces: \(replaces)", "Require: replaces"])
        let exchange: [(Bool, SIPMessage)] = [
            (true, i1), (false, Self.ok(200, i1)), (true, i2), (false, Self.ok(180, i2, tag: "et")),
            (true, i3), (false, Self.ok(200, i3, tag: "t3")), (true, bye3), (false, Self.ok(200, bye3, tag: "t3")),
            (true, r), (false, Self.ok(code, r, tag: "rt")),
        ]
        // ACKs are left out: the checker's ACK rules look at the DUT's ACKs only.
        #expect(rules(exchange, absent: absent) == expected, "\(name)")
        // Without Require: replaces, a DUT that does not list it in Supported may not implement
        // RFC 3891 (it then ignores the header): its 2xx says nothing; one that lists it is bound.
        let plain = Self.invite("cr", tag: "fr", branch: "z9hG4bK-r", extra: ["Replaces: \(replaces)"])
        var silent = exchange.dropLast(2) + [(true, plain), (false, Self.ok(code, plain, tag: "rt"))]
        #expect(rules(Array(silent), absent: absent) == [], "\(name) without Require")
        var claiming = Self.ok(code, plain, tag: "rt")
        try! claiming.append(.supported, "replaces")
        silent = exchange.dropLast(2) + [(true, plain), (false, try! SIPMessage(bytes: claiming.serialized()))]
        #expect(rules(Array(silent), absent: absent) == expected, "\(name) with Supported: replaces")
    }
}

/// An attended transferor's Replaces (RFC 3891 §3, RFC 5589 §7): the DUT called the runner
/// (the consultation call k1: the DUT's tag dk, the runner's rk), then sends a REFER whose
/// Refer-To carries a Replaces; it must name k1 as the runner (the target) sees it.
struct TransferorReplacesRuleTests {
    static func msg(_ text: String) -> SIPMessage { RuleCheckerTests.msg(text) }

    /// The DUT's consultation INVITE (Call-ID k1, From tag dk).
    static let consultation = msg("""
        INVITE sip:consult@127.0.0.1:4000 SIP/2.0
        Via: SIP/2.0/UDP 127.0.0.1:5090;branch=z9hG4bK-k1
        Max-Forwards: 70
        From: <sip:dut@127.0.0.1:5090>;tag=dk
        To: <sip:consult@127.0.0.1:4000>
        Call-ID: k1
        CSeq: 1 INVITE
        Contact: <sip:dut@127.0.0.1:5090>
        Content-Length: 0
        """)

    /// The DUT's ACK of the runner's 200 to the consultation INVITE.
    static let ack = msg("""
        ACK sip:consult@127.0.0.1:4000 SIP/2.0
        Via: SIP/2.0/UDP 127.0.0.1:5090;branch=z9hG4bK-k1a
        Max-Forwards: 70
        From: <sip:dut@127.0.0.1:5090>;tag=dk
        To: <sip:consult@127.0.0.1:4000>;tag=rk
        Call-ID: k1
        CSeq: 1 ACK
        Content-Length: 0
        """)

    /// A REFER of the DUT's in its first call k0 with this Refer-To.
    static func refer(_ referTo: String) -> SIPMessage {
        msg("""
            REFER sip:conform@127.0.0.1:4000 SIP/2.0
            Via: SIP/2.0/UDP 127.0.0.1:5090;branch=z9hG4bK-rf
            Max-Forwards: 70
            From: <sip:dut@127.0.0.1:5090>;tag=d0
            To: <sip:conform@127.0.0.1:4000>;tag=r0
            Call-ID: k0
            CSeq: 3 REFER
            Refer-To: \(referTo)
            Content-Length: 0
            """)
    }

    static func target(_ replaces: String) -> String { "<sip:consult@127.0.0.1:4000?Replaces=\(replaces)>" }

    /// The findings of: the consultation call set up, then the REFER `refer` (sent twice when `copies`).
    func findings(_ refer: SIPMessage, copies: Int = 1) -> [ConformanceFinding] {
        let answer = RuleCheckerTests.response(200, to: Self.consultation, tag: "rk", extra: ["Contact: <sip:consult@127.0.0.1:4000>"])
        let list: [(Bool, SIPMessage)] = [(false, Self.consultation), (true, answer), (false, Self.ack)] + Array(repeating: (false, refer), count: copies)
        let records = list.enumerated().map { RuleChecker.Record(sent: $0.element.0, time: Double($0.offset) * 0.01, message: $0.element.1) }
        return RuleChecker(checks2xxRetransmissions: false, checksInviteRetransmissions: false).check(records, end: 1)
    }

    static let rows: [(String, String, [String])] = [
        ("the target's view: to-tag the runner's, from-tag the DUT's", target("k1%3Bto-tag%3Drk%3Bfrom-tag%3Ddk"), []),
        ("from-tag first", target("k1%3Bfrom-tag%3Ddk%3Bto-tag%3Drk"), []),
        ("tags swapped (the transferor's view)", target("k1%3Bto-tag%3Ddk%3Bfrom-tag%3Drk"), ["replaces-names-dialog"]),
        ("a to-tag of no dialog", target("k1%3Bto-tag%3Dzz%3Bfrom-tag%3Ddk"), ["replaces-names-dialog"]),
        ("a from-tag of no dialog", target("k1%3Bto-tag%3Drk%3Bfrom-tag%3Dzz"), ["replaces-names-dialog"]),
        ("a Call-ID the checker never saw: not judged", target("elsewhere%3Bto-tag%3Ddk%3Bfrom-tag%3Drk"), []),
        ("no Replaces (blind transfer)", "<sip:consult@127.0.0.1:4000>", []),
    ]

    @Test(arguments: rows.indices)
    func aTransferorsReplaces(_ row: Int) {
        let (name, referTo, expected) = Self.rows[row]
        let found = findings(Self.refer(referTo))
        #expect(found.map(\.rule.id) == expected, "\(name): \(found)")
        if !expected.isEmpty {
            #expect(found[0].messageIndex == 3, "\(name): the finding is on the REFER")
        }
    }

    @Test func aRetransmittedReferIsNamedOnce() {
        let found = findings(Self.refer(Self.target("k1%3Bto-tag%3Ddk%3Bfrom-tag%3Drk")), copies: 2)
        #expect(found.map(\.rule.id) == ["replaces-names-dialog"], "\(found)")
        #expect(found.first?.detail.contains("wrong way round") == true, "\(found)")
    }

    @Test func aDialogTheRunnerInitiatedIsNotJudged() {
        // The runner called the DUT (c1: the runner's tag ft, the DUT's tt); a Replaces naming it
        // either way is not this rule's (the DUT did not place that call to the target).
        let invite = TransferRuleCheckerTests.invite("c1", tag: "ft", branch: "z9hG4bK-1")
        let answer = TransferRuleCheckerTests.ok(200, invite)
        for replaces in ["c1%3Bto-tag%3Dft%3Bfrom-tag%3Dtt", "c1%3Bto-tag%3Dtt%3Bfrom-tag%3Dft"] {
            let list: [(Bool, SIPMessage)] = [(true, invite), (false, answer), (false, Self.refer(Self.target(replaces)))]
            let records = list.enumerated().map { RuleChecker.Record(sent: $0.element.0, time: Double($0.offset) * 0.01, message: $0.element.1) }
            let found = RuleChecker(checks2xxRetransmissions: false, checksInviteRetransmissions: false).check(records, end: 1)
            #expect(found.isEmpty, "\(replaces): \(found)")
        }
    }

    /// The fault `wrong-replaces-tags` swaps the tags of a right Replaces (escaped or not), and
    /// leaves every other message alone.
    @Test func theFaultSwapsTheTags() throws {
        let rewrite = Misbehaviour.wrongReplacesTags.rewriter()
        let right = Self.refer(Self.target("k1%3Bto-tag%3Drk%3Bfrom-tag%3Ddk"))
        let wrong = try #require(rewrite(right))
        let replaces = try #require(try wrong.referToReplaces())
        #expect(replaces.callID == "k1" && replaces.toTag == "dk" && replaces.fromTag == "rk", "\(wrong[.referTo] ?? "")")
        #expect(findings(wrong).map(\.rule.id) == [Misbehaviour.wrongReplacesTags.brokenRule.id])
        let lower = try #require(rewrite(Self.refer(Self.target("k1%3bfrom-tag%3ddk%3bto-tag%3drk"))))
        let swapped = try #require(try lower.referToReplaces())
        #expect(swapped.toTag == "dk" && swapped.fromTag == "rk", "\(lower[.referTo] ?? "")")
        let blind = Self.refer("<sip:consult@127.0.0.1:4000>")
        #expect(rewrite(blind)?.serialized() == blind.serialized())
        #expect(rewrite(Self.consultation)?.serialized() == Self.consultation.serialized())
    }
}
