import Testing
import SIPMessage
import SIPTransaction
@testable import SIPDialog

/// The INVITE session machine on its own: crafted messages in, actions out.
@Suite("InviteSession machine")
struct InviteSessionTests {
    static let config = InviteSessionConfiguration(
        localParty: try! NameAddress("<sip:alice@a.example>"), contact: try! NameAddress("<sip:alice@192.0.2.1:5060>"),
        viaSentBy: "192.0.2.1:5060", sessionTimer: nil)
    static let offer = SessionBody.sdp("v=0\r\ns=offer\r\n")
    static let answer = SessionBody.sdp("v=0\r\ns=answer\r\n")

    static func sent(_ actions: [InviteSession.Action]) -> [SIPMessage] {
        actions.compactMap { if case .send(let m) = $0 { return m } else { return nil } }
    }

    static func responses(_ actions: [InviteSession.Action]) -> [SIPMessage] {
        actions.compactMap { if case .respond(let m, _) = $0 { return m } else { return nil } }
    }

    static func events(_ actions: [InviteSession.Action]) -> [SessionEvent] {
        actions.compactMap { if case .event(let e) = $0 { return e } else { return nil } }
    }

    /// A response from the callee side to our INVITE.
    static func reply(_ request: SIPMessage, _ code: Int, tag: String?, contact: String? = "<sip:bob@192.0.2.2>",
                      headers: [(SIPHeaderName, String)] = [], body: SessionBody? = nil) -> SIPMessage {
        var r = SIPMessage(responseTo: request, statusCode: code, toTag: tag)
        if let c = contact { try! r.append(.contact, c) }
        for (n, v) in headers { try! r.append(n, v) }
        if let b = body { r.setBody(b.bytes, contentType: b.contentType) }
        return (try! SIPMessage(bytes: r.serialized()))
    }

    static func startCall(_ reliable: ReliableProvisionalPolicy = .supported) -> (InviteSession, SIPMessage) {
        var c = config
        c.reliableProvisional = reliable
        var s = InviteSession(calling: try! NameAddress("<sip:bob@b.example>"), configuration: c, offer: offer, seed: 1)
        let invite = sent(s.start())[0]
        return (s, invite)
    }

    @Test("the INVITE carries the offer, our tag, Contact, Allow and Supported")
    func inviteShape() throws {
        let (s, invite) = Self.startCall()
        #expect(invite.method == .invite)
        #expect(invite.fromTag == s.localTag && invite.toTag == nil && invite.callID == s.callID)
        #expect(try invite.cseq() == CSeq(1, .invite))
        #expect(try invite.supported().contains("100rel"))
        #expect(Array(invite.body) == Self.offer.bytes)
        #expect(try invite.contact()?.addresses.first?.sipURI?.host == .ipv4("192.0.2.1"))
        #expect(s.state == .calling)
    }

    @Test("RFC 3263 failover: after the INVITE is resent with a new branch, a CANCEL carries that branch")
    func cancelFollowsTheResentInvite() throws {
        var (s, invite) = Self.startCall()
        var resent = invite
        var via = try Via(bytes: resent.elementBytes(.via)[0])
        let oldBranch = via.parameters["branch"]
        via.parameters.set("branch", "z9hG4bKfailover")
        resent.replaceFirstElement(.via, with: via.description)
        s.inviteResent(resent)
        _ = s.handle(.response(Self.reply(resent, 100, tag: nil, contact: nil)))
        let cancel = Self.sent(try s.cancel())
        #expect(cancel.count == 1)
        #expect(cancel.first?.method == .cancel)
        let branch = try Via(bytes: cancel[0].elementBytes(.via)[0]).parameters["branch"]
        #expect(branch == "z9hG4bKfailover")
        #expect(branch != oldBranch)
        // A request other than our INVITE (another CSeq) is not taken.
        var (t, first) = Self.startCall()
        var other = first
        other.replaceFirstElement(.cseq, with: "99 INVITE")
        other.replaceFirstElement(.via, with: "SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bKother")
        t.inviteResent(other)
        _ = t.handle(.response(Self.reply(first, 100, tag: nil, contact: nil)))
        let kept = Self.sent(try t.cancel())
        #expect(try Via(bytes: kept[0].elementBytes(.via)[0]).parameters["branch"] == Via(bytes: first.elementBytes(.via)[0]).parameters["branch"])
    }

    @Test("forking: two early dialogs, the first 2xx confirms, the second 2xx is ACKed and sent BYE")
    func forking() throws {
        var (s, invite) = Self.startCall(.unsupported)
        var out = s.handle(.response(Self.reply(invite, 180, tag: "f1")))
        out += s.handle(.response(Self.reply(invite, 180, tag: "f2")))
        #expect(s.state == .proceeding(180))
        out = s.handle(.response(Self.reply(invite, 200, tag: "f2", body: Self.answer)))
        #expect(s.state == .confirmed)
        #expect(s.dialogID?.remoteTag == "f2")
        let ack = try #require(Self.sent(out).first)
        #expect(ack.method == .ack && ack.toTag == "f2")
        #expect(Self.events(out).contains { if case .remoteAnswer(let b) = $0 { return b == Self.answer } else { return false } })

        // A retransmission of the same 2xx gets the same ACK again.
        let again = s.handle(.response(Self.reply(invite, 200, tag: "f2", body: Self.answer)))
        #expect(Self.sent(again).map { $0.serialized() } == [ack.serialized()])

        // The other fork answers too: ACK and BYE on its dialog, the call stays with f2.
        let extra = s.handle(.response(Self.reply(invite, 200, tag: "f1", contact: "<sip:bob@192.0.2.3>", body: Self.answer)))
        let msgs = Self.sent(extra)
        #expect(msgs.map(\.method) == [.ack, .bye])
        #expect(msgs.allSatisfy { $0.toTag == "f1" })
        #expect(try msgs[1].requestURI().sipURI?.host == .ipv4("192.0.2.3"))
        #expect(Self.events(extra).contains { if case .extraForkEnded("f1") = $0 { return true } else { return false } })
        #expect(s.state == .confirmed && s.dialogID?.remoteTag == "f2")
    }

    @Test("a 180 without Contact (linphonec 5.1) still makes an early dialog, its target our Request-URI until the 2xx's Contact; a 2xx without one still fails")
    func provisionalWithoutContact() throws {
        var (s, invite) = Self.startCall(.unsupported)
        _ = s.handle(.response(Self.reply(invite, 180, tag: "l1", contact: nil)))
        #expect(s.state == .proceeding(180))
        let early = try #require(s.earlyDialogList.first)
        #expect(early.id.remoteTag == "l1" && early.state == .early && !early.targetFromContact)
        #expect(early.remoteTarget == (try invite.requestURI()))
        // Its CANCEL goes as usual; a 2xx with a Contact confirms it with that target.
        _ = s.handle(.response(Self.reply(invite, 200, tag: "l1", contact: "<sip:lin@192.0.2.9:5070>", body: Self.answer)))
        #expect(s.state == .confirmed)
        #expect(s.dialog?.remoteTarget.sipURI?.host == .ipv4("192.0.2.9") && s.dialog?.targetFromContact == true)

        var (t, second) = Self.startCall(.unsupported)
        _ = t.handle(.response(Self.reply(second, 180, tag: "l2", contact: nil)))
        _ = t.handle(.response(Self.reply(second, 200, tag: "l2", contact: nil, body: Self.answer)))
        #expect(t.state == .terminated(.rejected(200)), "a 2xx must bring the Contact the 1xx lacked")
        #expect(throws: DialogError.self) { try Dialog(uacRequest: second, provisionalWithoutContact: Self.reply(second, 180, tag: "x", contact: "<sip:x@192.0.2.4>")) }
    }

    @Test("reliable provisionals: PRACK with RAck, retransmissions and out-of-order RSeq are not presented")
    func prackOrdering() throws {
        var (s, invite) = Self.startCall()
        let h: [(SIPHeaderName, String)] = [(.require, "100rel"), (.rseq, "7")]
        var out = s.handle(.response(Self.reply(invite, 183, tag: "t", headers: h, body: Self.answer)))
        let prack = try #require(Self.sent(out).first)
        #expect(prack.method == .prack)
        #expect(try prack.rack() == RAck(rseq: 7, cseq: 1, method: .invite))
        #expect(try prack.cseq().sequence == 2)
        #expect(Self.events(out).contains { if case .remoteAnswer = $0 { return true } else { return false } })
        // The same 183 again: nothing.
        out = s.handle(.response(Self.reply(invite, 183, tag: "t", headers: h, body: Self.answer)))
        #expect(out.isEmpty)
        // RSeq 9 skips 8: not presented.
        out = s.handle(.response(Self.reply(invite, 180, tag: "t", headers: [(.require, "100rel"), (.rseq, "9")])))
        #expect(out.isEmpty)
        out = s.handle(.response(Self.reply(invite, 180, tag: "t", headers: [(.require, "100rel"), (.rseq, "8")])))
        #expect(Self.sent(out).first?.method == .prack)
    }

    static func incomingInvite(_ headers: [(SIPHeaderName, String)] = [], body: SessionBody? = offer) -> SIPMessage {
        var m = try! SIPMessage(method: .invite, uri: try! SIPURI("sip:alice@192.0.2.1"))
        try! m.append(.via, "SIP/2.0/UDP 192.0.2.2;branch=z9hG4bKabc")
        try! m.append(.from, "<sip:bob@b.example>;tag=bt")
        try! m.append(.to, "<sip:alice@a.example>")
        try! m.append(.callID, "c1@b")
        try! m.append(.cseq, "10 INVITE")
        try! m.append(.contact, "<sip:bob@192.0.2.2>")
        try! m.append(.maxForwards, "70")
        for (n, v) in headers { try! m.append(n, v) }
        if let b = body { m.setBody(b.bytes, contentType: b.contentType) }
        return (try! SIPMessage(bytes: m.serialized()))
    }

    static func inDialog(_ method: SIPMethod, cseq: UInt32, toTag: String, body: SessionBody? = nil, headers: [(SIPHeaderName, String)] = []) -> SIPMessage {
        var m = try! SIPMessage(method: method, uri: try! SIPURI("sip:alice@192.0.2.1"))
        try! m.append(.via, "SIP/2.0/UDP 192.0.2.2;branch=z9hG4bK\(method.token)\(cseq)")
        try! m.append(.from, "<sip:bob@b.example>;tag=bt")
        try! m.append(.to, "<sip:alice@a.example>;tag=\(toTag)")
        try! m.append(.callID, "c1@b")
        try! m.append(.cseq, CSeq(cseq, method))
        try! m.append(.contact, "<sip:bob@192.0.2.2>")
        for (n, v) in headers { try! m.append(n, v) }
        if let b = body { m.setBody(b.bytes, contentType: b.contentType) }
        return (try! SIPMessage(bytes: m.serialized()))
    }

    static let tx = TransactionID(rawValue: 1)

    @Test("an INVITE requiring an unknown extension gets 420 with Unsupported")
    func badExtension() throws {
        var s = InviteSession(incoming: Self.incomingInvite([(.require, "foo, 100rel")]), transaction: Self.tx, configuration: Self.config, seed: 2)
        let out = s.start()
        let r = try #require(Self.responses(out).first)
        #expect(r.statusCode == 420)
        #expect(try r.unsupported() == ["foo"])
        #expect(s.state == .terminated(.declined(420)))
    }

    @Test("requiring 100rel of a caller that lacks it gets 421; a short session interval gets 422")
    func extensionRequiredAndIntervalTooSmall() throws {
        var c = Self.config
        c.reliableProvisional = .required
        var s = InviteSession(incoming: Self.incomingInvite(), transaction: Self.tx, configuration: c, seed: 3)
        var r = try #require(Self.responses(s.start()).first)
        #expect(r.statusCode == 421)
        #expect(try r.require() == ["100rel"])

        c = Self.config
        c.sessionTimer = SessionTimerSettings(interval: 1800, minimum: 600)
        s = InviteSession(incoming: Self.incomingInvite([(.sessionExpires, "90")]), transaction: Self.tx, configuration: c, seed: 3)
        r = try #require(Self.responses(s.start()).first)
        #expect(r.statusCode == 422)
        #expect(try r.minSE() == 600)
    }

    @Test("a PRACK timeout after the 2xx went (the reliable 180 had no body) refuses nothing: the ACK timeout ends the call with BYE")
    func prackTimeoutAfterAnswer() throws {
        var s = InviteSession(incoming: Self.incomingInvite([(.supported, "100rel")]), transaction: Self.tx, configuration: Self.config, seed: 5)
        _ = s.start()
        let ringing = try #require(Self.responses(try s.provisional(180)).first)
        #expect(try ringing.require().contains("100rel"))
        // Answered without waiting for the PRACK (the 180 carried no session description).
        let ok = try #require(Self.responses(try s.accept(body: Self.answer)).first)
        #expect(ok.statusCode == 200 && s.state == .connecting)
        // Neither PRACK nor ACK comes: 64·T1 after the 180, the PRACK wait ends first.
        let out = s.handle(.timerFired(.prackTimeout))
        #expect(Self.responses(out).isEmpty, "no 500 after the 2xx")
        #expect(s.state == .connecting)
        #expect(!out.contains { if case .cancelTimer(.retransmit2xx) = $0 { return true } else { return false } })
        // The 2xx is still retransmitted, and its ACK timeout ends the call the RFC 3261 way.
        #expect(Self.responses(s.handle(.timerFired(.retransmit2xx))).first?.statusCode == 200)
        let end = s.handle(.timerFired(.ackTimeout))
        #expect(Self.sent(end).map(\.method) == [.bye])
        #expect(s.state == .terminated(.noAck))
    }

    @Test("an INVITE server transaction that fails before the answer ends the call (transportError), not left ringing")
    func unansweredInviteTransportFailure() throws {
        var s = InviteSession(incoming: Self.incomingInvite(), transaction: Self.tx, configuration: Self.config, seed: 6)
        _ = s.start()
        _ = try s.provisional(180)
        #expect(s.state == .early)
        // Another transaction's failure is not ours.
        #expect(s.handle(.serverTransactionFailed(TransactionID(rawValue: 99), timeout: false)).isEmpty)
        #expect(s.state == .early)
        let out = s.handle(.serverTransactionFailed(Self.tx, timeout: false))
        #expect(s.state == .terminated(.transportError))
        #expect(Self.responses(out).isEmpty && Self.sent(out).isEmpty, "nothing can be sent for an INVITE whose transaction is gone")
        #expect(Self.events(out).contains { if case .stateChanged(.terminated(.transportError)) = $0 { return true } else { return false } })
        // The application's answer that comes afterwards is refused, not sent.
        #expect(throws: SessionError.self) { _ = try s.accept(body: Self.answer) }
    }

    @Test("a 2xx whose transaction fails before the ACK: the session ends with BYE; after Timer H nothing changes")
    func answeredInviteTransportFailure() throws {
        var s = InviteSession(incoming: Self.incomingInvite(), transaction: Self.tx, configuration: Self.config, seed: 7)
        _ = s.start()
        _ = try s.accept(body: Self.answer)
        #expect(s.state == .connecting)
        let out = s.handle(.serverTransactionFailed(Self.tx, timeout: false))
        #expect(Self.sent(out).map(\.method) == [.bye])
        #expect(out.contains { if case .cancelTimer(.retransmit2xx) = $0 { return true } else { return false } })
        #expect(s.state == .terminated(.transportError))
        // A refused INVITE (non-2xx, already over) is not touched again by Timer H.
        var r = InviteSession(incoming: Self.incomingInvite(), transaction: Self.tx, configuration: Self.config, seed: 8)
        _ = r.start()
        _ = try r.reject(486)
        let before = r.state
        #expect(r.handle(.serverTransactionFailed(Self.tx, timeout: true)).isEmpty)
        #expect(r.state == before)
    }

    /// A UAS session answered and ACKed.
    static func confirmedUAS() -> InviteSession {
        var s = InviteSession(incoming: incomingInvite(), transaction: tx, configuration: config, seed: 4)
        _ = s.start()
        _ = try! s.accept(body: answer)
        var ack = inDialog(.ack, cseq: 10, toTag: s.localTag)
        ack = (try! SIPMessage(bytes: ack.serialized()))
        _ = s.handle(.ack(ack))
        return s
    }

    /// The timers a set of actions starts and cancels, in order.
    static func timerActions(_ out: [InviteSession.Action]) -> [String] {
        out.compactMap {
            switch $0 {
            case .startTimer(let t, _): "start \(t)"
            case .cancelTimer(let t): "cancel \(t)"
            default: nil
            }
        }
    }

    @Test("a session cancels the timers it runs, and no others: the ACK stops the 2xx's two, a BYE after it cancels nothing")
    func onlyRunningTimersAreCancelled() throws {
        var s = InviteSession(incoming: Self.incomingInvite(), transaction: Self.tx, configuration: Self.config, seed: 4)
        _ = s.start()
        #expect(Self.timerActions(try s.accept(body: Self.answer)) == ["start retransmit2xx", "start ackTimeout"])
        let ack = try SIPMessage(bytes: Self.inDialog(.ack, cseq: 10, toTag: s.localTag).serialized())
        #expect(Self.timerActions(s.handle(.ack(ack))) == ["cancel retransmit2xx", "cancel ackTimeout"])
        let bye = s.handle(.request(Self.inDialog(.bye, cseq: 11, toTag: s.localTag), transaction: TransactionID(rawValue: 7)))
        #expect(s.state == .terminated(.remoteHangup))
        #expect(Self.timerActions(bye).isEmpty)

        // With a session interval the refresh timer runs after the ACK, and the BYE stops it.
        var c = Self.config
        c.sessionTimer = SessionTimerSettings(interval: 1800, minimum: 90)
        var t = InviteSession(incoming: Self.incomingInvite(), transaction: Self.tx, configuration: c, seed: 4)
        _ = t.start()
        _ = try t.accept(body: Self.answer)
        let ack2 = try SIPMessage(bytes: Self.inDialog(.ack, cseq: 10, toTag: t.localTag).serialized())
        let acked = Self.timerActions(t.handle(.ack(ack2)))
        #expect(acked.contains("start sessionRefresh"))
        let bye2 = t.handle(.request(Self.inDialog(.bye, cseq: 11, toTag: t.localTag), transaction: TransactionID(rawValue: 7)))
        #expect(Self.timerActions(bye2) == ["cancel sessionRefresh"])
    }

    @Test("offer overlap: a re-INVITE while ours is pending gets 491; a second INVITE while one is open gets 500 with Retry-After")
    func overlaps() throws {
        var s = Self.confirmedUAS()
        #expect(s.state == .confirmed)
        let out = try s.reinvite(body: Self.offer)
        let ours = try #require(Self.sent(out).first)
        #expect(ours.method == .invite && ours.toTag == "bt")
        #expect(throws: SessionError.offerInProgress) { _ = try s.reinvite(body: Self.offer) }
        var r = Self.responses(s.handle(.request(Self.inDialog(.invite, cseq: 11, toTag: s.localTag, body: Self.offer), transaction: TransactionID(rawValue: 2))))
        #expect(r.first?.statusCode == 491)

        var t = Self.confirmedUAS()
        _ = t.handle(.request(Self.inDialog(.invite, cseq: 11, toTag: t.localTag, body: Self.offer), transaction: TransactionID(rawValue: 2)))
        r = Self.responses(t.handle(.request(Self.inDialog(.invite, cseq: 12, toTag: t.localTag, body: Self.offer), transaction: TransactionID(rawValue: 3))))
        #expect(r.first?.statusCode == 500)
        #expect(r.first.map { (try? $0.retryAfter()) != nil } == true)
    }

    @Test("a request with a lower CSeq gets 500; BYE in the early dialog gets 200 and the INVITE 487")
    func cseqAndEarlyBye() throws {
        var s = Self.confirmedUAS()
        _ = s.handle(.request(Self.inDialog(.info, cseq: 20, toTag: s.localTag), transaction: TransactionID(rawValue: 5)))
        let r = Self.responses(s.handle(.request(Self.inDialog(.info, cseq: 19, toTag: s.localTag), transaction: TransactionID(rawValue: 6))))
        #expect(r.first?.statusCode == 500)

        var e = InviteSession(incoming: Self.incomingInvite(), transaction: Self.tx, configuration: Self.config, seed: 5)
        _ = e.start()
        _ = try e.provisional(180)
        let out = e.handle(.request(Self.inDialog(.bye, cseq: 11, toTag: e.localTag), transaction: TransactionID(rawValue: 7)))
        #expect(Self.responses(out).map(\.statusCode) == [200, 487])
        #expect(e.state == .terminated(.remoteHangup))
    }

    @Test("the session manager answers requests for unknown dialogs with 481 and routes CANCEL by the INVITE's transaction")
    func managerRouting() throws {
        var m = SessionManager(configuration: Self.config, seed: 9)
        let out = m.request(Self.inDialog(.bye, cseq: 3, toTag: "nobody"), transaction: TransactionID(rawValue: 1))
        guard case .respond(let r, _)? = out.first else { Issue.record("no response"); return }
        #expect(r.statusCode == 481)

        let inv = Self.incomingInvite()
        let o2 = m.request(inv, transaction: TransactionID(rawValue: 2))
        #expect(o2.contains { if case .incomingCall = $0 { return true } else { return false } })
        #expect(m.count == 1)
        // The state read in place is the session's.
        let key = try #require(m.keys.first)
        #expect(m.state(of: key) == .incoming)
        #expect(m.state(of: key) == m[key]?.state)
        #expect(m.state(of: SessionKey(callID: "other", localTag: "x")) == nil)
        var cancel = try SIPMessage(method: .cancel, uri: try SIPURI("sip:alice@192.0.2.1"))
        try cancel.append(.via, "SIP/2.0/UDP 192.0.2.2;branch=z9hG4bKabc")
        try cancel.append(.from, "<sip:bob@b.example>;tag=bt")
        try cancel.append(.to, "<sip:alice@a.example>")
        try cancel.append(.callID, "c1@b")
        try cancel.append(.cseq, "10 CANCEL")
        let o3 = m.cancel(cancel, transaction: TransactionID(rawValue: 3), invite: TransactionID(rawValue: 2))
        let codes = o3.compactMap { o -> Int? in
            if case .session(_, .respond(let r, _)) = o { return r.statusCode } else { return nil }
        }
        #expect(codes == [200, 487])
        #expect(m.count == 0)
    }

    @Test("once the call is up the INVITE is trimmed, yet a retransmitted 2xx still gets the same ACK and a late fork is ACKed and sent BYE")
    func confirmedUACAfterTrimming() throws {
        var (s, invite) = Self.startCall(.unsupported)
        let ok = Self.reply(invite, 200, tag: "f1", body: Self.answer)
        let first = Self.sent(s.handle(.response(ok)))
        let ack = try #require(first.first)
        #expect(ack.method == .ack && s.state == .confirmed)

        // What the session keeps of its INVITE: no body, no Contact, but the dialog-forming fields.
        let kept = InviteSession.skeleton(of: invite)
        #expect(try kept.body.isEmpty && kept.contact() == nil)
        #expect(kept.requestURIText == invite.requestURIText && kept.fromTag == s.localTag && kept.callID == s.callID)
        #expect(try kept.cseq() == CSeq(1, .invite))

        for _ in 0..<3 {
            #expect(Self.sent(s.handle(.response(ok))).map { $0.serialized() } == [ack.serialized()])
        }
        let late = Self.sent(s.handle(.response(Self.reply(invite, 200, tag: "f2", contact: "<sip:bob@192.0.2.9>", body: Self.answer))))
        #expect(late.map(\.method) == [.ack, .bye])
        #expect(late.allSatisfy { $0.toTag == "f2" && $0.fromTag == s.localTag && $0.callID == s.callID })
        #expect(try late[0].cseq() == CSeq(1, .ack))
        #expect(try late[1].requestURI().sipURI?.host == .ipv4("192.0.2.9"))
        // The localBody still holds the offer the INVITE carried.
        #expect(s.localBody == Self.offer && s.state == .confirmed && s.dialogID?.remoteTag == "f1")
    }

    @Test("a copy of a session manager is independent: confirming a call in one leaves the other waiting for its ACK")
    func managerCopiesAreIndependent() throws {
        var a = SessionManager(configuration: Self.config, seed: 5)
        let o = a.request(Self.incomingInvite(), transaction: TransactionID(rawValue: 2))
        let key = try #require(o.compactMap { if case .incomingCall(let k, _) = $0 { return k } else { return nil } }.first)
        let accepted = try a.perform(key) { s throws(SessionError) in try s.accept(body: Self.answer) }
        #expect(accepted.contains { if case .session(_, .respond(let r, _)) = $0 { return r.statusCode == 200 } else { return false } })
        var b = a
        _ = b.ack(Self.inDialog(.ack, cseq: 10, toTag: key.localTag))
        #expect(b[key]?.state == .confirmed)
        #expect(a[key]?.state == .connecting)
        // The original still takes its own ACK, and a BYE in the copy does not touch it.
        _ = b.request(Self.inDialog(.bye, cseq: 11, toTag: key.localTag), transaction: TransactionID(rawValue: 3))
        #expect(b.count == 0 && a.count == 1)
        _ = a.ack(Self.inDialog(.ack, cseq: 10, toTag: key.localTag))
        #expect(a[key]?.state == .confirmed)
        #expect(a[key]?.configuration.viaSentBy == Self.config.viaSentBy)
    }
}

/// ``InviteSession/init(adopting:role:configuration:localBody:remoteBody:)``: a session on a
/// dialog made elsewhere (a captured one), its own side replayed as sent, the peer's handled.
@Suite("InviteSession adopting a dialog")
struct InviteSessionAdoptionTests {
    typealias T = InviteSessionTests

    /// Our side as UAS of the dialog of ``InviteSessionTests/incomingInvite(_:body:)``, with tag `at`.
    static func adopted() throws -> InviteSession {
        let invite = T.incomingInvite()
        let ok = T.reply(invite, 200, tag: "at", contact: "<sip:alice@192.0.2.1>")
        let dialog = try Dialog(uasRequest: invite, response: ok)
        return InviteSession(adopting: dialog, role: .uas, configuration: T.config, localBody: T.answer, remoteBody: T.offer)
    }

    /// Our re-INVITE as a capture shows it: CSeq `cseq`, our tag, the peer's.
    static func ours(_ method: SIPMethod, cseq: UInt32, body: SessionBody?) throws -> SIPMessage {
        var m = try SIPMessage(method: method, uri: try SIPURI("sip:bob@192.0.2.2"))
        try m.append(.via, "SIP/2.0/UDP 192.0.2.1;branch=z9hG4bK-ours\(cseq)")
        try m.append(.from, "<sip:alice@a.example>;tag=at")
        try m.append(.to, "<sip:bob@b.example>;tag=bt")
        try m.append(.callID, "c1@b")
        try m.append(.cseq, CSeq(cseq, method))
        try m.append(.contact, "<sip:alice@192.0.2.1>")
        if let body { m.setBody(body.bytes, contentType: body.contentType) }
        return try SIPMessage(bytes: m.serialized())
    }

    @Test("the adopted session keeps the dialog's Call-ID, tags and CSeq, and is up with no offer outstanding")
    func adoption() throws {
        var s = try Self.adopted()
        #expect(s.callID == "c1@b" && s.localTag == "at" && s.dialogID?.remoteTag == "bt")
        #expect(s.state == .confirmed && s.canOffer && s.outstandingOffer == nil)
        #expect(s.localBody == T.answer && s.remoteBody == T.offer)
        // A captured request of ours moves our CSeq: the next one we build goes above it.
        s.replaySent(try Self.ours(.info, cseq: 7, body: nil))
        let next = try #require(T.sent(try s.reinvite(body: T.offer)).first)
        #expect(try next.cseq().sequence == 8 && next.toTag == "bt" && next.fromTag == "at")
    }

    @Test("our replayed offer is outstanding: the peer's UPDATE with an offer gets 491, its 2xx with the answer closes it")
    func replayedOffer() throws {
        var s = try Self.adopted()
        let reinvite = try Self.ours(.invite, cseq: 3, body: T.offer)
        s.replaySent(reinvite)
        #expect(s.outstandingOffer?.byUs == true && s.outstandingOffer?.method == .invite)
        let update = T.inDialog(.update, cseq: 11, toTag: "at", body: T.offer)
        #expect(T.responses(s.handle(.request(update, transaction: TransactionID(rawValue: 2)))).first?.statusCode == 491)
        let out = s.handle(.response(T.reply(reinvite, 200, tag: "bt", body: T.answer)))
        #expect(T.events(out).contains { if case .remoteAnswer = $0 { return true } else { return false } })
        #expect(T.sent(out).first?.method == .ack)
        #expect(s.outstandingOffer == nil && s.canOffer)
    }

    @Test("our replayed 2xx to the peer's offerless re-INVITE makes our offer, its ACK answers it; a refused re-INVITE leaves none")
    func replayedResponses() throws {
        var s = try Self.adopted()
        let reinvite = T.inDialog(.invite, cseq: 11, toTag: "at")
        let asked = s.handle(.request(reinvite, transaction: TransactionID(rawValue: 2)))
        #expect(T.events(asked).contains { if case .offerRequested = $0 { return true } else { return false } })
        var ok = SIPMessage(responseTo: reinvite, statusCode: 200, toTag: "at")
        ok.setBody(T.offer.bytes, contentType: T.offer.contentType)
        s.replayResponded(ok)
        #expect(s.outstandingOffer?.byUs == true)
        // A second re-INVITE before the ACK: the first is answered, so not 500, but our offer is out: 491.
        let second = T.inDialog(.invite, cseq: 12, toTag: "at", body: T.offer)
        #expect(T.responses(s.handle(.request(second, transaction: TransactionID(rawValue: 3)))).first?.statusCode == 491)
        let acked = s.handle(.ack(T.inDialog(.ack, cseq: 11, toTag: "at", body: T.answer)))
        #expect(T.events(acked).contains { if case .remoteAnswer = $0 { return true } else { return false } })
        #expect(s.outstandingOffer == nil)

        let offered = T.inDialog(.invite, cseq: 13, toTag: "at", body: T.offer)
        _ = s.handle(.request(offered, transaction: TransactionID(rawValue: 4)))
        #expect(s.outstandingOffer?.byUs == false)
        s.replayResponded(SIPMessage(responseTo: offered, statusCode: 488, toTag: "at"))
        #expect(s.outstandingOffer == nil && s.canOffer)
    }
}
