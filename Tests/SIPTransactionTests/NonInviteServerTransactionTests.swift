import Testing
import SIPMessage
@testable import SIPTransaction

@Suite("Non-INVITE server transaction (RFC 3261 §17.2.2)")
struct NonInviteServerTransactionTests {
    typealias Step = (event: NonInviteServerTransaction.Event, actions: [String], state: NonInviteServerTransaction.State)
    static let bye = request("BYE", toTag: "t1")

    static func run(reliable: Bool, _ steps: [Step], sourceLocation: SourceLocation = #_sourceLocation) {
        var t = NonInviteServerTransaction(request: bye, reliable: reliable)
        #expect(describe(t.start()) == ["deliver BYE"], sourceLocation: sourceLocation)
        for (k, s) in steps.enumerated() {
            #expect(describe(t.handle(s.event)) == s.actions, "step \(k)", sourceLocation: sourceLocation)
            #expect(t.state == s.state, "step \(k)", sourceLocation: sourceLocation)
        }
    }

    @Test func tryingAbsorbsThenFinalIsRepeated() {
        Self.run(reliable: false, [
            (.request(Self.bye), [], .trying),
            (.send(response(200, to: Self.bye)), ["send 200", "start J 32000ms"], .completed),
            (.request(Self.bye), ["send 200"], .completed),
            (.send(response(500, to: Self.bye)), [], .completed),
            (.timer(.J), ["terminated"], .terminated),
        ])
    }

    @Test func provisionalIsRepeatedInProceeding() {
        Self.run(reliable: true, [
            (.send(response(100, to: Self.bye)), ["send 100"], .proceeding),
            (.request(Self.bye), ["send 100"], .proceeding),
            (.send(response(180, to: Self.bye)), ["send 180"], .proceeding),
            (.send(response(200, to: Self.bye)), ["send 200", "start J 0ms"], .completed),
            (.timer(.J), ["terminated"], .terminated),
        ])
    }

    @Test func transportError() {
        Self.run(reliable: false, [
            (.send(response(200, to: Self.bye)), ["send 200", "start J 32000ms"], .completed),
            (.transportError, ["cancel J", "transport error", "terminated"], .terminated),
        ])
    }
}
