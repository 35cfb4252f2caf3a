import Testing
import SIPMessage
@testable import SIPDialog

/// The transferee's side of a REFER subscription (RFC 3515 §2.4.4–2.4.7, RFC 6665).
@Suite("REFER subscription: the transferee")
struct ReferNotifierTests {
    static func sent(_ a: [ReferNotifier.Action]) -> [ReferNotifier.Notify] {
        a.compactMap { if case .send(let n) = $0 { return n } else { return nil } }
    }
    static let trying = SIPFragStatus(statusCode: 100, reasonPhrase: "Trying")
    static let ringing = SIPFragStatus(statusCode: 180, reasonPhrase: "Ringing")
    static let ok = SIPFragStatus(statusCode: 200, reasonPhrase: "OK")

    @Test("100 Trying at once, progress, the final status terminates with reason=noresource")
    func basicFlow() {
        var n = ReferNotifier(referCSeq: 3)
        let a = n.accepted()
        #expect(a.contains(.startTimer(.seconds(180))))
        let first = Self.sent(a)
        #expect(first.count == 1)
        #expect(first.first?.status == Self.trying)
        #expect(first.first?.subscriptionState == "active;expires=180")
        #expect(first.first?.event == "refer")
        #expect(first.first?.body.contentType.essence == "message/sipfrag")
        #expect(String(decoding: first.first?.body.bytes ?? [], as: UTF8.self) == "SIP/2.0 100 Trying\r\n")
        #expect(n.notifyCompleted(statusCode: 200).isEmpty)
        #expect(Self.sent(n.progress(Self.ringing)).map(\.status) == [Self.ringing])
        _ = n.notifyCompleted(statusCode: 200)
        let fin = n.progress(Self.ok)
        #expect(fin.contains(.cancelTimer))
        #expect(Self.sent(fin).map(\.subscriptionState) == ["terminated;reason=noresource"])
        #expect(n.notifyCompleted(statusCode: 200) == [.cancelTimer, .terminated])
        #expect(n.isTerminated)
        #expect(n.progress(Self.ringing).isEmpty)
    }

    @Test("one NOTIFY outstanding at a time; a newer status replaces a waiting one, the final one is never lost")
    func oneOutstanding() {
        var n = ReferNotifier(referCSeq: 3)
        _ = n.accepted()
        #expect(Self.sent(n.progress(Self.ringing)).isEmpty, "100 Trying is still in flight")
        #expect(Self.sent(n.progress(SIPFragStatus(statusCode: 183, reasonPhrase: "Session Progress"))).isEmpty)
        let busy = SIPFragStatus(statusCode: 486, reasonPhrase: "Busy Here")
        #expect(Self.sent(n.progress(busy)).isEmpty)
        // The 100's answer releases the newest waiting one: the final status.
        let next = Self.sent(n.notifyCompleted(statusCode: 200))
        #expect(next.map(\.status) == [busy])
        #expect(next.first?.subscriptionState == "terminated;reason=noresource")
    }

    @Test("a lost final NOTIFY is sent again, then the subscription ends")
    func finalRetried() {
        var n = ReferNotifier(referCSeq: 3, configuration: .init(finalAttempts: 2))
        _ = n.accepted()
        _ = n.notifyCompleted(statusCode: 200)
        let fin = Self.sent(n.progress(Self.ok))
        #expect(fin.count == 1)
        #expect(Self.sent(n.notifyCompleted(statusCode: nil)) == fin, "a timeout: the same NOTIFY again")
        #expect(n.notifyCompleted(statusCode: nil) == [.cancelTimer, .terminated])
    }

    @Test("481 to a NOTIFY ends the subscription at once")
    func gone() {
        var n = ReferNotifier(referCSeq: 3)
        _ = n.accepted()
        #expect(n.notifyCompleted(statusCode: 481) == [.cancelTimer, .terminated])
        #expect(n.progress(Self.ok).isEmpty)
    }

    @Test("a lost provisional NOTIFY does not end the subscription")
    func lostProvisional() {
        var n = ReferNotifier(referCSeq: 3)
        _ = n.accepted()
        #expect(n.notifyCompleted(statusCode: nil).isEmpty)
        #expect(!n.isTerminated)
        #expect(Self.sent(n.progress(Self.ringing)).count == 1)
    }

    @Test("expiry before the referred request ends: terminated;reason=timeout with the last status")
    func expiry() {
        var n = ReferNotifier(referCSeq: 3, configuration: .init(expires: 30))
        #expect(n.accepted().contains(.startTimer(.seconds(30))))
        _ = n.notifyCompleted(statusCode: 200)
        _ = n.progress(Self.ringing)
        _ = n.notifyCompleted(statusCode: 200)
        let t = Self.sent(n.timerFired())
        #expect(t.map(\.subscriptionState) == ["terminated;reason=timeout"])
        #expect(t.map(\.status) == [Self.ringing])
        #expect(n.timerFired().isEmpty)
    }

    @Test("Event carries id=CSeq when the dialog carried another REFER")
    func eventID() {
        var n = ReferNotifier(referCSeq: 9, writesEventID: true)
        #expect(Self.sent(n.accepted()).first?.event == "refer;id=9")
    }

    @Test("the same provisional status is not sent twice")
    func noRepeats() {
        var n = ReferNotifier(referCSeq: 3)
        _ = n.accepted()
        _ = n.notifyCompleted(statusCode: 200)
        #expect(Self.sent(n.progress(Self.trying)).isEmpty)
        #expect(Self.sent(n.progress(Self.ringing)).count == 1)
        _ = n.notifyCompleted(statusCode: 200)
        #expect(Self.sent(n.progress(Self.ringing)).isEmpty)
    }

    @Test("what a transferor is told of the new call's states: provisional, 200, and the status an unanswered end came with")
    func referProgressOfTheNewCall() {
        #expect(SessionState.proceeding(180).referProgress?.statusCode == 180)
        #expect(SessionState.confirmed.referProgress?.statusCode == 200)
        let ends: [(SessionEndReason, Int?)] = [
            (.rejected(486), 486), (.declined(603), 603), (.dialogGone(481), 481), (.timeout, 408), (.cancelled, 487),
            (.remoteCancelled, 487), (.transportError, 503), (.authenticationFailed("x"), 403), (.redirectFailed(302, .loop), 480), (.localHangup, nil),
            (.remoteHangup, nil), (.noAck, nil), (.sessionExpired, nil),
        ]
        for (reason, code) in ends { #expect(SessionState.terminated(reason).referProgress?.statusCode == code, "\(reason)") }
        for state: SessionState in [.idle, .calling, .incoming, .early, .connecting, .terminating] { #expect(state.referProgress == nil) }
    }

}
