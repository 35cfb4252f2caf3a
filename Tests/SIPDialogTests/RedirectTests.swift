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
