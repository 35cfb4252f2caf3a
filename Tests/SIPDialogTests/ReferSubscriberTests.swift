import Testing
import SIPMessage
@testable import SIPDialog

/// The transferor's side of a REFER subscription, table-driven from RFC 3515, 6665, 4488 and
/// RFC 7647, and from the mistakes deployed stacks made (a transfer reported on the 202,
/// `Refer-Sub: false` reported as success, a NOTIFY without body or reason phrase dropped).
@Suite("REFER subscription: the transferor")
struct ReferSubscriberTests {
    static func refer(cseq: UInt32 = 7, noSub: Bool = false) throws -> SIPMessage {
        var m = try SIPMessage(method: .refer, uri: try SIPURI("sip:bob@192.0.2.2"))
        try m.append(.via, "SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKr\(cseq)")
        try m.append(.from, "<sip:alice@a.example>;tag=a1")
        try m.append(.to, "<sip:bob@b.example>;tag=b1")
        try m.append(.callID, "c1@a")
        try m.append(.cseq, "\(cseq) REFER")
        try m.append(.referTo, "<sip:carol@c.example>")
        if noSub { try m.append(SIPHeaderName("Refer-Sub"), "false") }
        return m
    }

    static func response(_ code: Int, to request: SIPMessage, referSub: String? = nil) throws -> SIPMessage {
        var r = SIPMessage(responseTo: request, statusCode: code, toTag: nil)
        if let referSub { try r.append(SIPHeaderName("Refer-Sub"), referSub) }
        return r
    }

    static func notify(_ frag: String?, state: String, event: String = "refer", contentType: String = "message/sipfrag") throws -> SIPMessage {
        var m = try SIPMessage(method: .notify, uri: try SIPURI("sip:alice@192.0.2.1"))
        try m.append(.via, "SIP/2.0/UDP 192.0.2.2;branch=z9hG4bKn\(Int.random(in: 1...1_000_000))")
        try m.append(.from, "<sip:bob@b.example>;tag=b1")
        try m.append(.to, "<sip:alice@a.example>;tag=a1")
        try m.append(.callID, "c1@a")
        try m.append(.cseq, "\(Int.random(in: 1...1000)) NOTIFY")
        try m.append(.event, event)
        try m.append(.subscriptionState, state)
        if let frag { m.setBody(Array(frag.utf8), contentType: try MediaType(contentType)) }
        return m
    }

    static func outcomes(_ actions: [ReferSubscriber.Action]) -> [ReferOutcome] {
        actions.compactMap { if case .finished(let o) = $0 { return o } else { return nil } }
    }

    static func responses(_ actions: [ReferSubscriber.Action]) -> [Int] {
        actions.compactMap { if case .respond(let c) = $0 { return c } else { return nil } }
    }

    @Test("202 is not success: the outcome waits for the final NOTIFY's sipfrag")
    func successOnlyOnFinalNotify() throws {
        let refer = try Self.refer()
        var s = ReferSubscriber(referCSeq: 7)
        let a1 = s.handleReferResponse(try Self.response(202, to: refer))
        #expect(Self.outcomes(a1).isEmpty)
        #expect(a1.contains(.startTimer(.seconds(32))))
        #expect(s.state == .active)
        let a2 = s.handleNotify(try Self.notify("SIP/2.0 100 Trying\r\n", state: "active;expires=60"))
        #expect(Self.responses(a2) == [200])
        #expect(a2.contains(.progress(SIPFragStatus(statusCode: 100, reasonPhrase: "Trying"))))
        #expect(Self.outcomes(a2).isEmpty)
        let a3 = s.handleNotify(try Self.notify("SIP/2.0 180 Ringing\r\n", state: "active;expires=58"))
        #expect(a3.contains(.progress(SIPFragStatus(statusCode: 180, reasonPhrase: "Ringing"))))
        let a4 = s.handleNotify(try Self.notify("SIP/2.0 200 OK\r\n", state: "terminated;reason=noresource"))
        #expect(Self.outcomes(a4) == [.succeeded(200)])
        #expect(a4.contains(.cancelTimer))
        #expect(s.state == .closed(.succeeded(200)))
        // A NOTIFY after the subscription ended: 481.
        #expect(Self.responses(s.handleNotify(try Self.notify("SIP/2.0 200 OK", state: "terminated"))) == [481])
    }

    @Test("200 and 202 to the REFER are alike (RFC 7647)", arguments: [200, 202])
    func twoHundredAndTwoHundredTwo(_ code: Int) throws {
        var s = ReferSubscriber(referCSeq: 7)
        _ = s.handleReferResponse(try Self.response(code, to: try Self.refer()))
        #expect(s.state == .active)
    }

    @Test("the final status and the end of the subscription may come in separate NOTIFYs")
    func finalThenTerminated() throws {
        var s = ReferSubscriber(referCSeq: 7)
        _ = s.handleReferResponse(try Self.response(202, to: try Self.refer()))
        let a = s.handleNotify(try Self.notify("SIP/2.0 486 Busy Here", state: "active;expires=30"))
        #expect(Self.outcomes(a) == [.failed(486)])
        #expect(s.state == .finished(.failed(486)))
        let b = s.handleNotify(try Self.notify("SIP/2.0 486 Busy Here", state: "terminated;reason=noresource"))
        #expect(Self.responses(b) == [200])
        #expect(Self.outcomes(b).isEmpty, "the outcome is reported once")
        #expect(s.state == .closed(.failed(486)))
    }

    @Test("refusals of the REFER itself", arguments: [403, 405, 481, 501, 603])
    func referRefused(_ code: Int) throws {
        var s = ReferSubscriber(referCSeq: 7)
        #expect(Self.outcomes(s.handleReferResponse(try Self.response(code, to: try Self.refer()))) == [.refused(code)])
    }

    @Test("no answer to the REFER: refused with 408")
    func referTimedOut() {
        var s = ReferSubscriber(referCSeq: 7)
        #expect(Self.outcomes(s.handleReferFailure(timeout: true)) == [.refused(408)])
        #expect(Self.outcomes(s.handleReferFailure(timeout: true)).isEmpty)
    }

    @Test("Refer-Sub: false granted is an unknown outcome, never a success (RFC 4488)")
    func noSubscription() throws {
        var s = ReferSubscriber(referCSeq: 7, configuration: .init(requestedNoSubscription: true))
        let a = s.handleReferResponse(try Self.response(202, to: try Self.refer(noSub: true), referSub: "false"))
        #expect(Self.outcomes(a) == [.unknown(.noSubscription)])
        #expect(!ReferOutcome.unknown(.noSubscription).isSuccess)
    }

    @Test("Refer-Sub: false asked but not granted: a subscription exists (RFC 4488 §4)")
    func noSubscriptionNotGranted() throws {
        var s = ReferSubscriber(referCSeq: 7, configuration: .init(requestedNoSubscription: true))
        let a = s.handleReferResponse(try Self.response(202, to: try Self.refer(noSub: true)))
        #expect(Self.outcomes(a).isEmpty)
        #expect(s.state == .active)
    }

    @Test("a NOTIFY without body, or whose status line has no reason phrase, is taken")
    func tolerantNotify() throws {
        var s = ReferSubscriber(referCSeq: 7)
        _ = s.handleReferResponse(try Self.response(202, to: try Self.refer()))
        let a = s.handleNotify(try Self.notify(nil, state: "active;expires=60"))
        #expect(Self.responses(a) == [200])
        #expect(Self.outcomes(a).isEmpty)
        let b = s.handleNotify(try Self.notify("SIP/2.0 200", state: "terminated"))
        #expect(Self.outcomes(b) == [.succeeded(200)])
    }

    @Test("a NOTIFY before the REFER's 2xx (they crossed) counts")
    func notifyBeforeAccept() throws {
        var s = ReferSubscriber(referCSeq: 7)
        let a = s.handleNotify(try Self.notify("SIP/2.0 100 Trying", state: "active;expires=60"))
        #expect(Self.responses(a) == [200])
        #expect(s.state == .active)
        _ = s.handleReferResponse(try Self.response(202, to: try Self.refer()))
        #expect(s.state == .active)
    }

    @Test("terminated without a final status: unknown, with the reason")
    func terminatedEarly() throws {
        var s = ReferSubscriber(referCSeq: 7)
        _ = s.handleReferResponse(try Self.response(202, to: try Self.refer()))
        let a = s.handleNotify(try Self.notify("SIP/2.0 180 Ringing", state: "terminated;reason=timeout"))
        #expect(Self.outcomes(a) == [.unknown(.terminatedWithoutFinalStatus(reason: "timeout"))])
    }

    @Test("no NOTIFY in time: unknown, so the transferor can take its call back")
    func noNotify() throws {
        var s = ReferSubscriber(referCSeq: 7, configuration: .init(notifyTimeout: .seconds(5)))
        #expect(s.handleReferResponse(try Self.response(202, to: try Self.refer())).contains(.startTimer(.seconds(5))))
        #expect(Self.outcomes(s.timerFired()) == [.unknown(.noNotify)])
        #expect(s.timerFired().isEmpty)
    }

    @Test("bad NOTIFYs get the RFC's answers and change nothing", arguments: [
        ("SIP/2.0 200 OK", "active", "presence", "message/sipfrag", 489),
        ("SIP/2.0 200 OK", "", "refer", "message/sipfrag", 400),
        ("hello", "active", "refer", "message/sipfrag", 400),
        ("SIP/2.0 200 OK", "active", "refer", "text/plain", 415),
    ])
    func badNotify(_ frag: String, _ state: String, _ event: String, _ type: String, _ code: Int) throws {
        var s = ReferSubscriber(referCSeq: 7)
        _ = s.handleReferResponse(try Self.response(202, to: try Self.refer()))
        var n = try Self.notify(frag, state: state.isEmpty ? "active" : state, event: event, contentType: type)
        if state.isEmpty { n.remove(.subscriptionState) }
        let a = s.handleNotify(n)
        #expect(Self.responses(a) == [code])
        #expect(Self.outcomes(a).isEmpty)
        #expect(s.state == .active)
    }

    @Test("a Subscription-State whose parameters do not parse still counts by its state (linphonec: reason=reason=noresource)")
    func lenientSubscriptionState() throws {
        var s = ReferSubscriber(referCSeq: 7)
        _ = s.handleReferResponse(try Self.response(202, to: try Self.refer()))
        let a = s.handleNotify(try Self.notify("SIP/2.0 200 Ok\r\n", state: "terminated;reason=reason=noresource"))
        #expect(Self.responses(a) == [200])
        #expect(Self.outcomes(a) == [.succeeded(200)])
        #expect(s.state == .closed(.succeeded(200)))
        // Still a 400 when the state itself is no token.
        var t = ReferSubscriber(referCSeq: 7)
        _ = t.handleReferResponse(try Self.response(202, to: try Self.refer()))
        #expect(Self.responses(t.handleNotify(try Self.notify("SIP/2.0 200 OK", state: "term inated;reason=x"))) == [400])
        #expect(Self.responses(t.handleNotify(try Self.notify("SIP/2.0 200 OK", state: ";reason=noresource"))) == [400])
    }

    @Test("silence while active lasts until the subscription's expiry (plus slack), not the fixed bound")
    func waitsOutExpiry() throws {
        var s = ReferSubscriber(referCSeq: 7, configuration: .init(notifyTimeout: .seconds(32)))
        _ = s.handleReferResponse(try Self.response(202, to: try Self.refer()))
        #expect(s.handleNotify(try Self.notify("SIP/2.0 180 Ringing", state: "active;expires=120")).contains(.startTimer(.seconds(125))))
        #expect(s.handleNotify(try Self.notify("SIP/2.0 180 Ringing", state: "active;expires=10")).contains(.startTimer(.seconds(32))))
    }

    @Test("a REFER sent again with credentials: the NOTIFYs' id is its new CSeq")
    func challengedRefer() throws {
        var s = ReferSubscriber(referCSeq: 7)
        let again = try Self.refer(cseq: 8)
        _ = s.handleReferResponse(try Self.response(202, to: again))
        #expect(s.referCSeq == 8)
        #expect(s.matches(try Self.notify("SIP/2.0 100 Trying", state: "active", event: "refer;id=8")))
    }

    @Test("NOTIFYs match by Event id = the REFER's CSeq, or without id")
    func matching() throws {
        let s = ReferSubscriber(referCSeq: 7)
        #expect(s.matches(try Self.notify("SIP/2.0 100 Trying", state: "active", event: "refer")))
        #expect(s.matches(try Self.notify("SIP/2.0 100 Trying", state: "active", event: "refer;id=7")))
        #expect(!s.matches(try Self.notify("SIP/2.0 100 Trying", state: "active", event: "refer;id=8")))
        #expect(!s.matches(try Self.notify("SIP/2.0 100 Trying", state: "active", event: "dialog")))
    }
}
