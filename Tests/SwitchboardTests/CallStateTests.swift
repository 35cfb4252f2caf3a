import Testing
import SIPMessage
import SIPDialog
@testable import Switchboard

/// The call state model without sockets: every session end reason, both directions' paths,
/// hold, and the phone's own end reasons.
@Suite("Call states: the mapping from INVITE sessions")
struct CallStateTests {
    @Test(arguments: [
        (SessionEndReason.localHangup, CallEndReason.hungUp(by: .local)),
        (.remoteHangup, .hungUp(by: .remote)),
        (.cancelled, .cancelled(by: .local)),
        (.remoteCancelled, .cancelled(by: .remote)),
        (.rejected(486), .busy(status: 486)),
        (.rejected(600), .busy(status: 600)),
        (.rejected(480), .timeout(.noAnswer)),
        (.rejected(408), .timeout(.noAnswer)),
        (.rejected(488), .mediaFailure(status: 488)),
        (.rejected(606), .mediaFailure(status: 606)),
        (.rejected(302), .redirected(status: 302)),
        (.rejected(603), .rejected(by: .remote, status: 603)),
        (.rejected(404), .rejected(by: .remote, status: 404)),
        (.declined(486), .rejected(by: .local, status: 486)),
        (.timeout, .timeout(.noResponse)),
        (.noAck, .timeout(.noAck)),
        (.sessionExpired, .timeout(.sessionExpired)),
        (.transportError, .failed(.transport)),
        (.dialogGone(481), .failed(.dialogGone(status: 481))),
        (.authenticationFailed("no credentials"), .failed(.authentication("no credentials"))),
        (.redirectFailed(302, .loop), .failed(.redirect(status: 302, .loop))),
    ] as [(SessionEndReason, CallEndReason)])
    func endReasons(session: SessionEndReason, call: CallEndReason) {
        #expect(CallEndReason(session) == call)
        var t = CallStateTracker(direction: .outgoing)
        #expect(t.feed(.stateChanged(.terminated(session))) == .ended(call))
    }

    /// Feeds events and returns the states reached, in order.
    static func run(_ t: inout CallStateTracker, _ events: [SessionEvent]) -> [CallState] {
        events.compactMap { t.feed($0) }
    }

    @Test("a network change: established → reconnecting → established; a failed re-INVITE ends networkChange, a BYE still hungUp")
    func reconnecting() {
        var t = CallStateTracker(direction: .outgoing)
        #expect(t.reconnect(true) == nil, "only an established call reconnects")
        _ = Self.run(&t, [.stateChanged(.calling), .stateChanged(.confirmed)])
        _ = t.hold(local: true)
        #expect(t.reconnect(true) == .reconnecting)
        #expect(Self.run(&t, [.stateChanged(.confirmed)]).isEmpty, "the session staying confirmed does not end the reconnection")
        #expect(t.hold(remote: true) == nil)
        #expect(t.reconnect(false) == .established(.bothHold))
        #expect(t.reconnect(false) == nil)
        var lost = CallStateTracker(direction: .incoming)
        _ = Self.run(&lost, [.stateChanged(.incoming), .stateChanged(.connecting), .stateChanged(.confirmed)])
        _ = lost.reconnect(true)
        #expect(Self.run(&lost, [.stateChanged(.terminated(.dialogGone(408)))]) == [.ended(.networkChange)])
        var bye = CallStateTracker(direction: .outgoing)
        _ = Self.run(&bye, [.stateChanged(.calling), .stateChanged(.confirmed)])
        _ = bye.reconnect(true)
        #expect(Self.run(&bye, [.stateChanged(.terminated(.remoteHangup))]) == [.ended(.hungUp(by: .remote))])
    }

    @Test("the answer of a 2xx is not early media; an answer in the first 18x is, even before any ringing")
    func answerInFinalOrFirstProvisional() {
        var t = CallStateTracker(direction: .outgoing)
        let direct = Self.run(&t, [
            .stateChanged(.calling),
            .provisional(code: 180, remoteTag: "b", body: nil),
            .stateChanged(.proceeding(180)),
            .remoteAnswer(.sdp(Array("v=0".utf8))),
            .stateChanged(.confirmed),
        ])
        #expect(direct == [.calling, .ringing(earlyMedia: false), .established(.active)])
        var u = CallStateTracker(direction: .outgoing)
        let early = Self.run(&u, [
            .stateChanged(.calling),
            .remoteAnswer(.sdp(Array("v=0".utf8))),
            .stateChanged(.proceeding(183)),
            .provisional(code: 183, remoteTag: "b", body: nil),
        ])
        #expect(early == [.calling, .ringing(earlyMedia: true)])
    }

    @Test func outgoingWithEarlyMediaThenHoldThenHangUp() {
        var t = CallStateTracker(direction: .outgoing)
        #expect(t.state == .starting)
        let states = Self.run(&t, [
            .stateChanged(.calling),
            .stateChanged(.proceeding(100)),
            .provisional(code: 180, remoteTag: "b", body: nil),
            .stateChanged(.proceeding(180)),
            // A 183 with an answer: the session reports the answer, then the 183 (its body taken).
            .remoteAnswer(.sdp(Array("v=0".utf8))),
            .stateChanged(.proceeding(183)),
            .provisional(code: 183, remoteTag: "b", body: nil),
            .stateChanged(.confirmed),
        ])
        #expect(states == [.calling, .ringing(earlyMedia: false), .ringing(earlyMedia: true), .established(.active)])
        #expect(t.hold(local: true) == .established(.localHold))
        #expect(t.hold(remote: true) == .established(.bothHold))
        #expect(t.hold(local: false) == .established(.remoteHold))
        #expect(t.hold(remote: false) == .established(.active))
        #expect(t.hold(remote: false) == nil, "no change, no state")
        #expect(t.feed(.stateChanged(.terminating)) == nil)
        #expect(t.feed(.stateChanged(.terminated(.localHangup))) == .ended(.hungUp(by: .local)))
        #expect(t.feed(.stateChanged(.confirmed)) == nil, "nothing after the end")
    }

    @Test func queuedThenAnswered() {
        var t = CallStateTracker(direction: .outgoing)
        let states = Self.run(&t, [
            .stateChanged(.calling),
            .provisional(code: 182, remoteTag: "acd", body: nil),
            .stateChanged(.proceeding(182)),
            .provisional(code: 180, remoteTag: "agent", body: nil),
            .stateChanged(.proceeding(180)),
            .stateChanged(.confirmed),
        ])
        #expect(states == [.calling, .queued, .ringing(earlyMedia: false), .established(.active)])
    }

    @Test func aLateProvisionalNeverTakesAnAnsweredCallBack() {
        var t = CallStateTracker(direction: .outgoing)
        _ = Self.run(&t, [.stateChanged(.calling), .stateChanged(.confirmed)])
        #expect(t.feed(.provisional(code: 180, remoteTag: "late", body: nil)) == nil)
        #expect(t.state == .established(.active))
    }

    @Test func incomingRingsThenConnectsThenTheCallerHangsUp() {
        var t = CallStateTracker(direction: .incoming)
        #expect(t.state == .incoming(.trying))
        let states = Self.run(&t, [
            .stateChanged(.incoming),
            .stateChanged(.early),
            .stateChanged(.connecting),
            .stateChanged(.confirmed),
            .stateChanged(.terminated(.remoteHangup)),
        ])
        #expect(states == [.incoming(.ringing), .connecting, .established(.active), .ended(.hungUp(by: .remote))])
    }

    @Test func anIgnoredCallStaysIgnoredUntilAnsweredOrEnded() {
        var t = CallStateTracker(direction: .incoming)
        #expect(t.ignore() == .incoming(.ignored))
        #expect(t.feed(.stateChanged(.early)) == nil, "ringing does not undo ignoring")
        #expect(t.state == .incoming(.ignored))
        #expect(t.feed(.stateChanged(.connecting)) == .connecting)
        #expect(t.ignore() == nil, "an answered call cannot be ignored")
        var outgoing = CallStateTracker(direction: .outgoing)
        #expect(outgoing.ignore() == nil)
    }

    @Test func whatThePhoneKnowsNamesTheEnd() throws {
        var forwarded = CallStateTracker(direction: .incoming)
        let target = try SIPURI("sip:carol@192.0.2.7")
        forwarded.willEnd(.forwarded(to: [target]))
        #expect(forwarded.feed(.stateChanged(.terminated(.declined(302)))) == .ended(.forwarded(to: [target])))

        var transferred = CallStateTracker(direction: .outgoing)
        _ = Self.run(&transferred, [.stateChanged(.calling), .stateChanged(.confirmed)])
        transferred.willEnd(.transferred(to: .sip(target)))
        #expect(transferred.feed(.stateChanged(.terminated(.localHangup))) == .ended(.transferred(to: .sip(target))))

        // Withdrawn when the BYE could not be sent: the real reason shows.
        var withdrawn = CallStateTracker(direction: .outgoing)
        withdrawn.willEnd(.replaced)
        withdrawn.willEnd(nil)
        #expect(withdrawn.feed(.stateChanged(.terminated(.remoteHangup))) == .ended(.hungUp(by: .remote)))
    }
}

@Suite("Broadcast: the current value, then changes, to every subscriber")
struct BroadcastTests {
    @Test func subscribersSeeTheCurrentValueThenEveryChangeAndTheEnd() async {
        let b = Broadcast(0)
        let early = b.subscribe()
        b.publish(1)
        let late = b.subscribe()
        b.publish(2)
        b.publish(3, final: true)
        b.publish(4)
        var seenEarly: [Int] = [], seenLate: [Int] = []
        for await v in early { seenEarly.append(v) }
        for await v in late { seenLate.append(v) }
        #expect(seenEarly == [0, 1, 2, 3])
        #expect(seenLate == [1, 2, 3])
        // After the end: the final value, then the end.
        var after: [Int] = []
        for await v in b.subscribe() { after.append(v) }
        #expect(after == [3])
        #expect(b.current == 3)
    }

    @Test func aCancelledSubscriberIsDropped() async {
        let b = Broadcast("a")
        let task = Task {
            var n = 0
            for await _ in b.subscribe() { n += 1 }
            return n
        }
        try? await Task.sleep(for: .milliseconds(20))
        task.cancel()
        _ = await task.value
        b.publish("b", final: true)
        #expect(b.current == "b")
    }
}
