import Testing
import SIPMessage
@testable import SIPDialog

/// Reading a REFER as the transferee (RFC 3515 §2.4.2, RFC 3892, 4488, 4538) and deciding an
/// INVITE with Replaces (RFC 3891 §3).
@Suite("REFER requests and Replaces")
struct ReferRequestTests {
    static func refer(_ headers: [(SIPHeaderName, String)]) throws -> SIPMessage {
        var m = try SIPMessage(method: .refer, uri: try SIPURI("sip:bob@192.0.2.2"))
        try m.append(.via, "SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKr1")
        try m.append(.from, "<sip:alice@a.example>;tag=a1")
        try m.append(.to, "<sip:bob@b.example>;tag=b1")
        try m.append(.callID, "c1@a")
        try m.append(.cseq, "4 REFER")
        for (n, v) in headers { try m.append(n, v) }
        return try SIPMessage(bytes: m.serialized())
    }

    @Test("a blind transfer: target, Referred-By, the REFER's CSeq")
    func blind() throws {
        let m = try Self.refer([(.referTo, "<sip:carol@c.example>"), (.referredBy, "<sip:alice@a.example>")])
        let r = try ReferRequest.read(m, policy: ReferPolicy(), inDialog: true).get()
        #expect(r.target.description == "sip:carol@c.example")
        #expect(r.referredBy?.uri.description == "sip:alice@a.example")
        #expect(r.replaces == nil)
        #expect(r.cseq == 4)
        #expect(!r.asksNoSubscription)
    }

    @Test("an attended transfer: the escaped Replaces in Refer-To is read, and stripped from the target")
    func attended() throws {
        let m = try Self.refer([(.referTo, "<sip:carol@c.example?Replaces=x9%40c%3Bto-tag%3Dt2%3Bfrom-tag%3Df3>")])
        let r = try ReferRequest.read(m, policy: ReferPolicy(), inDialog: true).get()
        #expect(r.replaces == Replaces(callID: "x9@c", toTag: "t2", fromTag: "f3"))
        #expect(r.target.description == "sip:carol@c.example")
    }

    @Test("Refer-Sub: false is asked, and granted only when the policy grants it")
    func noSub() throws {
        let m = try Self.refer([(.referTo, "<sip:carol@c.example>"), (SIPHeaderName("Refer-Sub"), "false")])
        let r = try ReferRequest.read(m, policy: ReferPolicy(), inDialog: true).get()
        #expect(r.asksNoSubscription)
        #expect(r.grantsNoSubscription(ReferPolicy()))
        #expect(!r.grantsNoSubscription(ReferPolicy(grantsNoSubscription: false)))
    }

    @Test("refusals, each with the RFC's status", arguments: [
        ([(SIPHeaderName.referredBy, "<sip:alice@a.example>")], true, 400, "no Refer-To"),
        ([(.referTo, "<sip:carol@c.example>"), (.referTo, "<sip:dave@d.example>")], true, 400, "more than one Refer-To"),
        ([(.referTo, "<http://evil.example/x>")], true, 403, "Refer-To scheme http is not followed"),
        ([(.referTo, "<mailto:a@b>")], true, 403, "Refer-To scheme mailto is not followed"),
        ([(.referTo, "<sip:carol@c.example;method=BYE>")], true, 403, "Refer-To method BYE is not performed"),
        ([(.referTo, "<sip:carol@c.example>")], false, 403, "REFER outside a dialog"),
        ([(.referTo, "<sip:carol@c.example?Replaces=x9%40c%3Bto-tag%3Dt2>")], true, 400, ""),
    ] as [([(SIPHeaderName, String)], Bool, Int, String)])
    func refusals(_ headers: [(SIPHeaderName, String)], _ inDialog: Bool, _ code: Int, _ reason: String) throws {
        let m = try Self.refer(headers)
        guard case .failure(let refusal) = ReferRequest.read(m, policy: ReferPolicy(), inDialog: inDialog) else {
            Issue.record("accepted")
            return
        }
        #expect(refusal.statusCode == code)
        if !reason.isEmpty { #expect(refusal.reason == reason) }
    }

    @Test("bounds: REFERs per dialog (403) and subscriptions at once (503)")
    func bounds() throws {
        let m = try Self.refer([(.referTo, "<sip:carol@c.example>")])
        let policy = ReferPolicy(maximumPerDialog: 2, maximumSubscriptions: 3)
        #expect((try? ReferRequest.read(m, policy: policy, inDialog: true, refersInDialog: 1).get()) != nil)
        if case .failure(let r) = ReferRequest.read(m, policy: policy, inDialog: true, refersInDialog: 2) { #expect(r.statusCode == 403) } else { Issue.record("accepted") }
        if case .failure(let r) = ReferRequest.read(m, policy: policy, inDialog: true, openSubscriptions: 3) { #expect(r.statusCode == 503) } else { Issue.record("accepted") }
    }

    @Test("out of a dialog: allowed by policy, or by a Target-Dialog naming one of ours (RFC 4538)")
    func outOfDialog() throws {
        let plain = try Self.refer([(.referTo, "<sip:carol@c.example>")])
        #expect((try? ReferRequest.read(plain, policy: ReferPolicy(allowsOutOfDialog: true), inDialog: false).get()) != nil)
        let targeted = try Self.refer([(.referTo, "<sip:carol@c.example>"), (SIPHeaderName("Target-Dialog"), "d7@a;local-tag=l1;remote-tag=r1")])
        let r = ReferRequest.read(targeted, policy: ReferPolicy(), inDialog: false, targetDialogKnown: true)
        let accepted = try r.get()
        #expect(accepted.targetDialog?.callID == "d7@a")
        #expect(accepted.targetDialog?.localTag == "l1")
        #expect(accepted.targetDialog?.remoteTag == "r1")
        if case .failure(let f) = ReferRequest.read(targeted, policy: ReferPolicy(), inDialog: false, targetDialogKnown: false) {
            #expect(f.statusCode == 403)
        } else { Issue.record("accepted with an unknown Target-Dialog") }
    }

    @Test("the attended Refer-To: the consultation's Replaces, tags from our side of the dialog, escaped and read back")
    func attendedReferTo() throws {
        // We placed the consultation call: our tag is its From tag.
        let placed = ReferRequest.replaces(forConsultation: SessionKey(callID: "k1@a", localTag: "ours"), remoteTag: "targets")
        #expect(placed == Replaces(callID: "k1@a", toTag: "targets", fromTag: "ours"))
        // The target called us: our tag is the To tag of that INVITE, and still the from-tag here.
        let incoming = ReferRequest.replaces(forConsultation: SessionKey(callID: "k2@c", localTag: "ours2"), remoteTag: "theirs2", earlyOnly: true)
        #expect(incoming.fromTag == "ours2" && incoming.toTag == "theirs2" && incoming.earlyOnly)
        let contact = try SIPURI("sip:carol@192.0.2.3:5070;transport=tcp")
        let referTo = ReferRequest.referTo(contact: contact, replaces: placed)
        let m = try Self.refer([(.referTo, referTo.description)])
        let r = try ReferRequest.read(m, policy: ReferPolicy(), inDialog: true).get()
        #expect(r.replaces == placed)
        #expect(r.target.description == "sip:carol@192.0.2.3:5070;transport=tcp")
        #expect(referTo.description.contains("Replaces=k1%40a%3Bto-tag%3Dtargets%3Bfrom-tag%3Dours"))
    }

    // MARK: Replaces (RFC 3891 §3)

    static let confirmed = ReplaceableDialog(key: SessionKey(callID: "x9@c", localTag: "t2"), remoteTag: "f3", phase: .confirmed, placedByUs: false)
    static let earlyOurs = ReplaceableDialog(key: SessionKey(callID: "e1@c", localTag: "us"), remoteTag: "them", phase: .early, placedByUs: true)
    static let earlyTheirs = ReplaceableDialog(key: SessionKey(callID: "e2@c", localTag: "us"), remoteTag: "them", phase: .early, placedByUs: false)
    static let ended = ReplaceableDialog(key: SessionKey(callID: "d1@c", localTag: "us"), remoteTag: "them", phase: .terminated, placedByUs: true)
    static let subscription = ReplaceableDialog(key: SessionKey(callID: "s1@c", localTag: "us"), remoteTag: "them", phase: .confirmed,
                                                placedByUs: true, createdByInvite: false)
    static let all = [confirmed, earlyOurs, earlyTheirs, ended, subscription]

    @Test("Replaces decisions", arguments: [
        (Replaces(callID: "x9@c", toTag: "t2", fromTag: "f3"), ReplacesDecision.replace(SessionKey(callID: "x9@c", localTag: "t2"), endWith: .bye)),
        (Replaces(callID: "x9@c", toTag: "t2", fromTag: "f3", earlyOnly: true), .refuse(486)),
        (Replaces(callID: "x9@c", toTag: "f3", fromTag: "t2"), .refuse(481)),  // tags swapped: no match
        (Replaces(callID: "nope@c", toTag: "t2", fromTag: "f3"), .refuse(481)),
        (Replaces(callID: "e1@c", toTag: "us", fromTag: "them"), .replace(SessionKey(callID: "e1@c", localTag: "us"), endWith: .cancel)),
        (Replaces(callID: "e2@c", toTag: "us", fromTag: "them"), .refuse(481)),
        (Replaces(callID: "d1@c", toTag: "us", fromTag: "them"), .refuse(603)),
        (Replaces(callID: "s1@c", toTag: "us", fromTag: "them"), .refuse(481)),
    ])
    func replacesDecisions(_ r: Replaces, _ expected: ReplacesDecision) {
        #expect(ReplacesDecision.decide(r, among: Self.all) == expected)
    }

    @Test("an INVITE's Replaces header: none, one, several, unparsable, on another method")
    func replacesHeader() throws {
        func request(_ method: SIPMethod, _ values: [String]) throws -> SIPMessage {
            var m = try SIPMessage(method: method, uri: try SIPURI("sip:bob@192.0.2.2"))
            try m.append(.via, "SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKi1")
            try m.append(.from, "<sip:carol@c.example>;tag=c1")
            try m.append(.to, "<sip:bob@b.example>")
            try m.append(.callID, "n1@c")
            try m.append(.cseq, "1 \(method.token)")
            for v in values { try m.append(.replaces, v) }
            return try SIPMessage(bytes: m.serialized())
        }
        #expect(ReplacesDecision.decide(for: try request(.invite, []), among: Self.all) == nil)
        #expect(ReplacesDecision.decide(for: try request(.invite, ["x9@c;to-tag=t2;from-tag=f3"]), among: Self.all)
                == .replace(SessionKey(callID: "x9@c", localTag: "t2"), endWith: .bye))
        #expect(ReplacesDecision.decide(for: try request(.invite, ["x9@c;to-tag=t2;from-tag=f3", "e1@c;to-tag=us;from-tag=them"]), among: Self.all) == .refuse(400))
        #expect(ReplacesDecision.decide(for: try request(.invite, ["x9@c;to-tag=t2"]), among: Self.all) == .refuse(400))
        #expect(ReplacesDecision.decide(for: try request(.options, ["x9@c;to-tag=t2;from-tag=f3"]), among: Self.all) == .refuse(400))
    }
}
