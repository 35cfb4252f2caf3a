import Testing
import SIPMessage
@testable import SIPTransaction

@Suite("INVITE client transaction (RFC 3261 §17.1.1, RFC 6026)")
struct InviteClientTransactionTests {
    typealias Step = (event: InviteClientTransaction.Event, actions: [String], state: InviteClientTransaction.State)

    static let invite = request("INVITE")

    static func run(reliable: Bool, _ steps: [Step], sourceLocation: SourceLocation = #_sourceLocation) {
        var t = InviteClientTransaction(request: invite, reliable: reliable)
        let start = describe(t.start())
        #expect(start == (reliable ? ["send INVITE", "start B 32000ms"] : ["send INVITE", "start A 500ms", "start B 32000ms"]), sourceLocation: sourceLocation)
        #expect(t.state == .calling, sourceLocation: sourceLocation)
        for (k, s) in steps.enumerated() {
            let got = describe(t.handle(s.event))
            #expect(got == s.actions, "step \(k)", sourceLocation: sourceLocation)
            #expect(t.state == s.state, "step \(k)", sourceLocation: sourceLocation)
        }
    }

    @Test func timerARetransmitsWithDoublingIntervals() {
        Self.run(reliable: false, [
            (.timer(.A), ["send INVITE", "start A 1000ms"], .calling),
            (.timer(.A), ["send INVITE", "start A 2000ms"], .calling),
            (.timer(.A), ["send INVITE", "start A 4000ms"], .calling),
            (.timer(.A), ["send INVITE", "start A 8000ms"], .calling),
            (.timer(.B), ["cancel A", "timeout B", "terminated"], .terminated),
            (.timer(.A), [], .terminated),
        ])
    }

    @Test func provisionalThenSuccessEntersAccepted() {
        Self.run(reliable: false, [
            (.response(response(100, to: Self.invite)), ["cancel A", "cancel B", "deliver 100"], .proceeding),
            (.timer(.A), [], .proceeding),
            (.response(response(180, to: Self.invite)), ["deliver 180"], .proceeding),
            (.response(response(200, to: Self.invite)), ["cancel A", "cancel B", "deliver 200", "start M 32000ms"], .accepted),
            (.response(response(200, to: Self.invite)), ["deliver 200"], .accepted),
            (.response(response(200, to: Self.invite, toTag: "fork2")), ["deliver 200"], .accepted),
            (.response(response(486, to: Self.invite)), [], .accepted),
            (.timer(.M), ["terminated"], .terminated),
        ])
    }

    @Test func failureIsACKedAndRetransmissionsReACKed() {
        Self.run(reliable: false, [
            (.response(response(486, to: Self.invite)), ["cancel A", "cancel B", "send ACK", "deliver 486", "start D 32000ms"], .completed),
            (.response(response(486, to: Self.invite)), ["send ACK"], .completed),
            (.response(response(180, to: Self.invite)), [], .completed),
            (.timer(.D), ["terminated"], .terminated),
        ])
    }

    @Test func reliableTransportHasNoTimerAAndZeroTimerD() {
        Self.run(reliable: true, [
            (.response(response(503, to: Self.invite)), ["cancel A", "cancel B", "send ACK", "deliver 503", "start D 0ms"], .completed),
            (.timer(.D), ["terminated"], .terminated),
        ])
    }

    @Test func timerBInProceedingDoesNothing() {
        Self.run(reliable: false, [
            (.response(response(180, to: Self.invite)), ["cancel A", "cancel B", "deliver 180"], .proceeding),
            (.timer(.B), [], .proceeding),
            (.transportError, ["cancel A", "cancel B", "transport error", "terminated"], .terminated),
        ])
    }

    @Test func ackForFailureFollowsSection17113() throws {
        let inv = msg("""
        INVITE sip:bob@biloxi.example.com SIP/2.0
        Via: SIP/2.0/UDP pc33.example.com;branch=z9hG4bKnashds8
        Via: SIP/2.0/UDP proxy.example.com;branch=z9hG4bKprev
        Route: <sip:p1.example.com;lr>
        Route: <sip:p2.example.com;lr>
        Max-Forwards: 69
        From: Alice <sip:alice@atlanta.example.com>;tag=1928301774
        To: Bob <sip:bob@biloxi.example.com>
        Call-ID: a84b4c76e66710
        CSeq: 314159 INVITE
        Contact: <sip:alice@pc33.example.com>
        Content-Length: 0


        """)
        var t = InviteClientTransaction(request: inv, reliable: false)
        _ = t.start()
        let actions = t.handle(.response(response(404, to: inv, toTag: "xyz")))
        guard case .transmit(let ack) = actions[2] else { Issue.record("no ACK"); return }
        #expect(ack.method == .ack)
        #expect(ack.requestURIText == "sip:bob@biloxi.example.com")
        #expect(try ack.via().count == 1)
        #expect(ack.topViaBranch == "z9hG4bKnashds8")
        #expect(try ack.cseq() == CSeq(314159, .ack))
        #expect(ack.toTag == "xyz")
        #expect(ack.fromTag == "1928301774")
        #expect(ack.callID == "a84b4c76e66710")
        #expect(try ack.route().count == 2)
        #expect(!ack.contains(.contact))
        try ack.validate()
    }
}
