import Testing
import SIPMessage
@testable import SIPTransaction

@Suite("INVITE server transaction (RFC 3261 §17.2.1, RFC 6026)")
struct InviteServerTransactionTests {
    typealias Step = (event: InviteServerTransaction.Event, actions: [String], state: InviteServerTransaction.State)
    static let invite = request("INVITE")
    static let ack = request("ACK", toTag: "t1")

    static func run(reliable: Bool, _ steps: [Step], sourceLocation: SourceLocation = #_sourceLocation) {
        var t = InviteServerTransaction(request: invite, reliable: reliable)
        #expect(describe(t.start()) == ["deliver INVITE", "start trying 200ms"], sourceLocation: sourceLocation)
        #expect(t.state == .proceeding, sourceLocation: sourceLocation)
        for (k, s) in steps.enumerated() {
            #expect(describe(t.handle(s.event)) == s.actions, "step \(k)", sourceLocation: sourceLocation)
            #expect(t.state == s.state, "step \(k)", sourceLocation: sourceLocation)
        }
    }

    @Test func sends100TryingWhenTheTUIsSlow() {
        Self.run(reliable: false, [
            (.request(Self.invite), [], .proceeding),
            (.timer(.trying), ["send 100"], .proceeding),
            (.request(Self.invite), ["send 100"], .proceeding),
            (.send(response(180, to: Self.invite)), ["cancel trying", "send 180"], .proceeding),
            (.request(Self.invite), ["send 180"], .proceeding),
        ])
    }

    @Test func noTryingWhenTheTUAnsweredFirst() {
        Self.run(reliable: false, [
            (.send(response(180, to: Self.invite)), ["cancel trying", "send 180"], .proceeding),
            (.timer(.trying), [], .proceeding),
        ])
    }

    @Test func successEntersAcceptedAndPassesACKs() {
        Self.run(reliable: false, [
            (.send(response(200, to: Self.invite)), ["cancel trying", "send 200", "start L 32000ms"], .accepted),
            (.request(Self.invite), [], .accepted),
            (.send(response(200, to: Self.invite)), ["send 200"], .accepted),
            (.send(response(486, to: Self.invite)), [], .accepted),
            (.request(Self.ack), ["deliver ACK"], .accepted),
            (.timer(.L), ["terminated"], .terminated),
        ])
    }

    @Test func failureRetransmitsOnGUntilACK() {
        Self.run(reliable: false, [
            (.send(response(486, to: Self.invite)), ["cancel trying", "send 486", "start G 500ms", "start H 32000ms"], .completed),
            (.timer(.G), ["send 486", "start G 1000ms"], .completed),
            (.timer(.G), ["send 486", "start G 2000ms"], .completed),
            (.timer(.G), ["send 486", "start G 4000ms"], .completed),
            (.timer(.G), ["send 486", "start G 4000ms"], .completed),
            (.request(Self.invite), ["send 486"], .completed),
            (.request(Self.ack), ["cancel G", "cancel H", "start I 5000ms"], .confirmed),
            (.request(Self.ack), [], .confirmed),
            (.timer(.G), [], .confirmed),
            (.timer(.I), ["terminated"], .terminated),
        ])
    }

    @Test func timerHWithoutACKTimesOut() {
        Self.run(reliable: true, [
            (.send(response(603, to: Self.invite)), ["cancel trying", "send 603", "start H 32000ms"], .completed),
            (.timer(.H), ["cancel G", "timeout H", "terminated"], .terminated),
        ])
    }

    @Test func reliableConfirmedEndsAtOnce() {
        Self.run(reliable: true, [
            (.send(response(404, to: Self.invite)), ["cancel trying", "send 404", "start H 32000ms"], .completed),
            (.request(Self.ack), ["cancel G", "cancel H", "start I 0ms"], .confirmed),
            (.timer(.I), ["terminated"], .terminated),
        ])
    }

    @Test func hundredTryingCopiesTheRequestHeaders() throws {
        var t = InviteServerTransaction(request: Self.invite, reliable: false)
        _ = t.start()
        guard case .transmit(let trying) = t.handle(.timer(.trying)).first else { Issue.record("no 100"); return }
        #expect(trying.statusCode == 100)
        #expect(trying.toTag == nil)
        #expect(trying.topViaBranch == "z9hG4bKabc")
        #expect(trying.callID == "call-1")
        #expect(try trying.cseq() == CSeq(1, .invite))
        try trying.validate()
    }
}
