import Testing
import SIPMessage
@testable import SIPDialog

/// Following 3xx (RFC 3261 §8.1.3.4): the targets' order and bounds, and the INVITE session's retry.
@Suite("Redirection")
struct RedirectTests {
    static func redirect(_ contacts: [String], code: Int = 302, extra: [(SIPHeaderName, String)] = [], to invite: SIPMessage? = nil) throws -> SIPMessage {
        let request: SIPMessage
        if let invite { request = invite } else {
            var m = try SIPMessage(method: .invite, uri: try SIPURI("sip:bob@b.example"))
            try m.append(.via, "SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKx")
            try m.append(.from, "<sip:alice@a.example>;tag=a1")
            try m.append(.to, "<sip:bob@b.example>")
            try m.append(.callID, "c@a")
            try m.append(.cseq, "1 INVITE")
            request = m
        }
        var r = SIPMessage(responseTo: request, statusCode: code, toTag: "r1")
        if !contacts.isEmpty { try r.append(.contact, contacts.joined(separator: ", ")) }
        for (n, v) in extra { try r.append(n, v) }
        return try SIPMessage(bytes: r.serialized())
    }

    static let us = [try! SIPURI("sip:alice@192.0.2.1:5060")]

    @Test("targets in q order, equal q in the order given, expired ones skipped")
    func order() throws {
        var t = RedirectTargets(original: try SIPURI("sip:bob@b.example"), policy: .init(mode: .follow))
        let r = try Self.redirect(["<sip:c@192.0.2.3>;q=0.5", "<sip:d@192.0.2.4>;q=0.9", "<sip:e@192.0.2.5>;q=0.9", "<sip:f@192.0.2.6>;expires=0", "<sip:g@192.0.2.7>"])
        #expect(try t.next(after: r, ours: Self.us).get().description == "sip:g@192.0.2.7")
        #expect(t.pending.map(\.description) == ["sip:d@192.0.2.4", "sip:e@192.0.2.5", "sip:c@192.0.2.3"])
    }

    @Test("no target twice; a loop between two forwarders ends with .loop")
    func loop() throws {
        var t = RedirectTargets(original: try SIPURI("sip:bob@192.0.2.2"), policy: .init(mode: .follow))
        #expect(try t.next(after: try Self.redirect(["<sip:carol@192.0.2.3>"]), ours: Self.us).get().description == "sip:carol@192.0.2.3")
        // Carol sends us back to Bob, whom we already tried: a loop.
        #expect(t.next(after: try Self.redirect(["<sip:bob@192.0.2.2>"]), ours: Self.us) == .failure(.loop))
    }

    @Test("a Contact pointing back at us is skipped")
    func pointsAtUs() throws {
        var t = RedirectTargets(original: try SIPURI("sip:bob@b.example"), policy: .init(mode: .follow))
        #expect(t.next(after: try Self.redirect(["<sip:me@192.0.2.1>"]), ours: Self.us) == .failure(.loop))
    }

    @Test("no Contact, odd schemes, too many hops")
    func failures() throws {
        var a = RedirectTargets(original: try SIPURI("sip:bob@b.example"), policy: .init(mode: .follow))
        #expect(a.next(after: try Self.redirect([]), ours: Self.us) == .failure(.noContact))
        var b = RedirectTargets(original: try SIPURI("sip:bob@b.example"), policy: .init(mode: .follow))
        #expect(b.next(after: try Self.redirect(["<mailto:bob@b.example>", "<http://b.example/>"]), ours: Self.us) == .failure(.unsupportedScheme))
        var c = RedirectTargets(original: try SIPURI("sip:bob@b.example"), policy: .init(mode: .follow, maximumRedirects: 2))
        _ = c.next(after: try Self.redirect(["<sip:x1@192.0.2.11>"]), ours: Self.us)
        _ = c.next(after: try Self.redirect(["<sip:x2@192.0.2.12>"]), ours: Self.us)
        #expect(c.next(after: try Self.redirect(["<sip:x3@192.0.2.13>"]), ours: Self.us) == .failure(.hopLimit))
    }

    static func session(_ policy: RedirectPolicy) -> (InviteSession, SIPMessage) {
        var c = InviteSessionTests.config
        c.redirects = policy
        var s = InviteSession(calling: try! NameAddress("<sip:bob@b.example>"), configuration: c, offer: InviteSessionTests.offer, seed: 1)
        let invite = InviteSessionTests.sent(s.start())[0]
        return (s, invite)
    }

    @Test("a 302 is followed: same Call-ID and From tag, the next CSeq, the new Request-URI, To unchanged, Diversion kept")
    func sessionFollows() throws {
        var (s, invite) = Self.session(.init(mode: .follow))
        let out = s.handle(.response(try Self.redirect(["<sip:carol@192.0.2.3:5070>"], extra: [(.diversion, "<sip:bob@b.example>;reason=unconditional")], to: invite)))
        let redirected = InviteSessionTests.events(out).contains { if case .redirected(302, let t) = $0 { return t.description == "sip:carol@192.0.2.3:5070" } else { return false } }
        #expect(redirected)
        let again = try #require(InviteSessionTests.sent(out).first)
        #expect(again.requestURIText == "sip:carol@192.0.2.3:5070")
        #expect(again.callID == invite.callID && again.fromTag == invite.fromTag)
        #expect(try again.cseq() == CSeq(2, .invite))
        #expect(try again.to().uri.description == "sip:bob@b.example")
        #expect(again.values(.diversion) == ["<sip:bob@b.example>;reason=unconditional"])
        #expect(s.state == .calling)
        // The second target answers: the call is up.
        _ = s.handle(.response(InviteSessionTests.reply(again, 200, tag: "c1", body: InviteSessionTests.answer)))
        #expect(s.state == .confirmed)
    }

    @Test("a 183 with an early answer, then a 302: the new target's answer is the one taken, the call is 'calling' again")
    func earlyAnswerThenRedirect() throws {
        var (s, invite) = Self.session(.init(mode: .follow))
        let early = InviteSessionTests.reply(invite, 183, tag: "b1", headers: [(.require, "100rel"), (.rseq, "1")], body: InviteSessionTests.answer)
        _ = s.handle(.response(early))
        #expect(s.remoteBody != nil)
        let out = s.handle(.response(try Self.redirect(["<sip:carol@192.0.2.3>"], to: invite)))
        #expect(s.state == .calling)
        #expect(s.remoteBody == nil)
        let again = try #require(InviteSessionTests.sent(out).first { $0.method == .invite })
        let carolAnswer = SessionBody.sdp("v=0\r\ns=carol\r\n")
        let done = s.handle(.response(InviteSessionTests.reply(again, 200, tag: "c1", body: carolAnswer)))
        let answered = InviteSessionTests.events(done).contains { if case .remoteAnswer(let b) = $0 { return b == carolAnswer } else { return false } }
        #expect(answered, "the 2xx's answer from the new target is reported")
        #expect(s.state == .confirmed)
    }

    @Test("305 and 380 are not followed like 302", arguments: [305, 380])
    func notFollowedCodes(_ code: Int) throws {
        var (s, invite) = Self.session(.init(mode: .follow))
        _ = s.handle(.response(try Self.redirect(["<sip:carol@192.0.2.3>"], code: code, to: invite)))
        #expect(s.state == .terminated(.rejected(code)))
    }

    @Test("with redirects not followed, a 3xx ends the call as rejected")
    func sessionFails() throws {
        var (s, invite) = Self.session(.init(mode: .fail))
        _ = s.handle(.response(try Self.redirect(["<sip:carol@192.0.2.3>"], to: invite)))
        #expect(s.state == .terminated(.rejected(302)))
    }

    @Test("a redirect loop ends the call with a clear reason")
    func sessionLoop() throws {
        var (s, invite) = Self.session(.init(mode: .follow))
        let out = s.handle(.response(try Self.redirect(["<sip:carol@192.0.2.3>"], to: invite)))
        let again = try #require(InviteSessionTests.sent(out).first)
        _ = s.handle(.response(try Self.redirect(["<sip:bob@b.example>"], code: 301, to: again)))
        #expect(s.state == .terminated(.redirectFailed(301, .loop)))
    }

    /// The targets offered so far by `actions`.
    static func offered(_ actions: [InviteSession.Action]) -> [String] {
        InviteSessionTests.events(actions).compactMap { if case .redirectOffered(_, let t) = $0 { return t.description } else { return nil } }
    }

    @Test("ask: each target is offered in q order; skipping offers the next; following sends the INVITE there")
    func askTargetByTarget() throws {
        var (s, invite) = Self.session(.init(mode: .ask))
        let out = s.handle(.response(try Self.redirect(["<sip:carol@192.0.2.3>;q=0.5", "<sip:dave@192.0.2.4>;q=0.9"], to: invite)))
        #expect(Self.offered(out) == ["sip:dave@192.0.2.4"])
        #expect(InviteSessionTests.sent(out).isEmpty, "nothing is sent until the application decides")
        #expect(s.isRedirectOffered && s.state == .calling)
        let skipped = try s.skipRedirect()
        #expect(Self.offered(skipped) == ["sip:carol@192.0.2.3"])
        let followed = try s.followRedirect()
        let again = try #require(InviteSessionTests.sent(followed).first)
        #expect(again.requestURIText == "sip:carol@192.0.2.3")
        #expect(try again.cseq() == CSeq(2, .invite))
        #expect(!s.isRedirectOffered)
        _ = s.handle(.response(InviteSessionTests.reply(again, 200, tag: "c1", body: InviteSessionTests.answer)))
        #expect(s.state == .confirmed)
        // Nothing left to decide.
        #expect(throws: SessionError.self) { _ = try s.followRedirect() }
    }

    @Test("ask: skipping the last target or stopping ends the call as declined; hanging up ends it as cancelled, without a CANCEL")
    func askEnds() throws {
        var (a, inviteA) = Self.session(.init(mode: .ask))
        _ = a.handle(.response(try Self.redirect(["<sip:carol@192.0.2.3>"], to: inviteA)))
        _ = try a.skipRedirect()
        #expect(a.state == .terminated(.redirectFailed(302, .declined)))

        var (b, inviteB) = Self.session(.init(mode: .ask))
        _ = b.handle(.response(try Self.redirect(["<sip:carol@192.0.2.3>", "<sip:dave@192.0.2.4>"], code: 301, to: inviteB)))
        _ = try b.stopRedirect()
        #expect(b.state == .terminated(.redirectFailed(301, .declined)))

        var (c, inviteC) = Self.session(.init(mode: .ask))
        _ = c.handle(.response(InviteSessionTests.reply(inviteC, 180, tag: "b1")))
        _ = c.handle(.response(try Self.redirect(["<sip:carol@192.0.2.3>"], to: inviteC)))
        let hangUp = c.hangUp()
        #expect(InviteSessionTests.sent(hangUp).isEmpty, "the INVITE is over: no CANCEL")
        #expect(c.state == .terminated(.cancelled))
    }

    @Test("a forward's 3xx: Contacts in a q ladder, Diversion, History-Info entries below the INVITE's own with RFC 4458 causes")
    func forwardHeaders() throws {
        var invite = try SIPMessage(method: .invite, uri: try SIPURI("sip:bob@b.example"))
        try invite.append(.from, "<sip:alice@a.example>;tag=a1")
        let us = try SIPURI("sip:bob@b.example")
        let targets = [try SIPURI("sip:carol@192.0.2.3"), try SIPURI("sip:dave@192.0.2.4:5070")]
        let both = ForwardHeaders.headers(forwarding: invite, to: targets, by: us, reason: "user-busy", expires: 60, history: .both)
        #expect(both.map(\.0) == [.contact, .diversion, SIPHeaderName(.historyInfo)])
        #expect(both[0].1 == "<sip:carol@192.0.2.3>;q=1.0;expires=60, <sip:dave@192.0.2.4:5070>;q=0.9;expires=60")
        #expect(both[1].1 == "<sip:bob@b.example>;reason=user-busy;counter=1")
        #expect(both[2].1 == "<sip:bob@b.example>;index=1, <sip:carol@192.0.2.3;cause=486>;index=1.1;mp=1, <sip:dave@192.0.2.4:5070;cause=486>;index=1.2;mp=1")
        // Each entry parses as a name-addr with its index.
        for entry in both[2].1.split(separator: ",") {
            let na = try NameAddress(String(entry).trimmed)
            #expect((na.parameters["index"] ?? nil) != nil)
        }
        // The INVITE already carries history (it was retargeted before): ours goes below its last entry.
        try invite.append(SIPHeaderName(.historyInfo), "<sip:desk@b.example>;index=1, <sip:bob@b.example>;index=1.1;rc=1")
        let below = ForwardHeaders.headers(forwarding: invite, to: [targets[0]], by: us, history: .historyInfo)
        #expect(below.map(\.0) == [.contact, SIPHeaderName(.historyInfo)])
        #expect(below[1].1 == "<sip:desk@b.example>;index=1, <sip:bob@b.example>;index=1.1;rc=1, <sip:carol@192.0.2.3;cause=302>;index=1.1.1;mp=1.1")
        // Diversion only (the default), and at most ten targets.
        let many = (1...12).map { try! SIPURI("sip:t\($0)@192.0.2.9") }
        let plain = ForwardHeaders.headers(forwarding: invite, to: many, by: us)
        #expect(plain.map(\.0) == [.contact, .diversion])
        #expect(plain[0].1.split(separator: ",").count == 10)
        #expect(ForwardHeaders.cause(forReason: "no-answer") == 408 && ForwardHeaders.cause(forReason: "unconditional") == 302)
    }

    @Test("the History-Info a 3xx carries goes with the followed INVITE")
    func historyInfoFollows() throws {
        var (s, invite) = Self.session(.init(mode: .follow))
        let hi = "<sip:bob@b.example>;index=1, <sip:carol@192.0.2.3;cause=302>;index=1.1;mp=1"
        let out = s.handle(.response(try Self.redirect(["<sip:carol@192.0.2.3>"], extra: [(SIPHeaderName(.historyInfo), hi)], to: invite)))
        let again = try #require(InviteSessionTests.sent(out).first)
        #expect(again.values(SIPHeaderName(.historyInfo)) == [hi])
    }

    @Test("a redirection's next target is tried when one refuses (486) or does not answer; a 6xx ends the search")
    func nextTargetAfterAFailure() throws {
        var (s, invite) = Self.session(.init(mode: .follow))
        let out = s.handle(.response(try Self.redirect(["<sip:carol@192.0.2.3>;q=1.0", "<sip:dave@192.0.2.4>;q=0.9", "<sip:erin@192.0.2.5>;q=0.8"], to: invite)))
        let toCarol = try #require(InviteSessionTests.sent(out).first)
        #expect(toCarol.requestURIText == "sip:carol@192.0.2.3")
        // Carol is busy: Dave next (a new CSeq, same Call-ID and tag).
        let afterBusy = s.handle(.response(InviteSessionTests.reply(toCarol, 486, tag: "c1")))
        let toDave = try #require(InviteSessionTests.sent(afterBusy).first { $0.method == .invite })
        #expect(toDave.requestURIText == "sip:dave@192.0.2.4")
        #expect(try toDave.cseq() == CSeq(3, .invite))
        #expect(toDave.callID == invite.callID && toDave.fromTag == invite.fromTag)
        // Dave never answers (Timer B): Erin next.
        let afterTimeout = s.handle(.requestFailed(.invite, cseq: 3, timeout: true))
        let toErin = try #require(InviteSessionTests.sent(afterTimeout).first { $0.method == .invite })
        #expect(toErin.requestURIText == "sip:erin@192.0.2.5")
        _ = s.handle(.response(InviteSessionTests.reply(toErin, 200, tag: "e1", body: InviteSessionTests.answer)))
        #expect(s.state == .confirmed)

        // A 6xx from the first target: no other is tried.
        var (g, inviteG) = Self.session(.init(mode: .follow))
        let outG = g.handle(.response(try Self.redirect(["<sip:carol@192.0.2.3>", "<sip:dave@192.0.2.4>;q=0.5"], to: inviteG)))
        let toCarolG = try #require(InviteSessionTests.sent(outG).first)
        let declined = g.handle(.response(InviteSessionTests.reply(toCarolG, 603, tag: "c1")))
        #expect(InviteSessionTests.sent(declined).allSatisfy { $0.method != .invite })
        #expect(g.state == .terminated(.rejected(603)))

        // The last target refuses too: the call ends with its answer.
        var (l, inviteL) = Self.session(.init(mode: .follow))
        let outL = l.handle(.response(try Self.redirect(["<sip:carol@192.0.2.3>"], to: inviteL)))
        let only = try #require(InviteSessionTests.sent(outL).first)
        _ = l.handle(.response(InviteSessionTests.reply(only, 480, tag: "c1")))
        #expect(l.state == .terminated(.rejected(480)))
    }

    @Test("a 3xx after our CANCEL ends the call as cancelled, not followed")
    func afterCancel() throws {
        var (s, invite) = Self.session(.init(mode: .follow))
        _ = s.handle(.response(InviteSessionTests.reply(invite, 180, tag: "b1")))
        _ = try s.cancel()
        let out = s.handle(.response(try Self.redirect(["<sip:carol@192.0.2.3>"], to: invite)))
        #expect(InviteSessionTests.sent(out).allSatisfy { $0.method != .invite })
        #expect(s.state == .terminated(.cancelled))
    }
}
