import Testing
import SIPMessage
@testable import SIPTransaction

@Suite("Non-INVITE client transaction (RFC 3261 §17.1.2)")
struct NonInviteClientTransactionTests {
    typealias Step = (event: NonInviteClientTransaction.Event, actions: [String], state: NonInviteClientTransaction.State)
    static let options = request("OPTIONS")

    static func run(reliable: Bool, _ steps: [Step], sourceLocation: SourceLocation = #_sourceLocation) {
        var t = NonInviteClientTransaction(request: options, reliable: reliable)
        #expect(describe(t.start()) == (reliable ? ["send OPTIONS", "start F 32000ms"] : ["send OPTIONS", "start E 500ms", "start F 32000ms"]), sourceLocation: sourceLocation)
        for (k, s) in steps.enumerated() {
            #expect(describe(t.handle(s.event)) == s.actions, "step \(k)", sourceLocation: sourceLocation)
            #expect(t.state == s.state, "step \(k)", sourceLocation: sourceLocation)
        }
    }

    @Test func timerEDoublesUpToT2ThenFTimesOut() {
        Self.run(reliable: false, [
            (.timer(.E), ["send OPTIONS", "start E 1000ms"], .trying),
            (.timer(.E), ["send OPTIONS", "start E 2000ms"], .trying),
            (.timer(.E), ["send OPTIONS", "start E 4000ms"], .trying),
            (.timer(.E), ["send OPTIONS", "start E 4000ms"], .trying),
            (.timer(.F), ["cancel E", "timeout F", "terminated"], .terminated),
        ])
    }

    @Test func provisionalMakesTimerEUseT2() {
        Self.run(reliable: false, [
            (.response(response(100, to: Self.options)), ["deliver 100"], .proceeding),
            (.timer(.E), ["send OPTIONS", "start E 4000ms"], .proceeding),
            (.response(response(180, to: Self.options)), ["deliver 180"], .proceeding),
            (.response(response(200, to: Self.options)), ["cancel E", "cancel F", "deliver 200", "start K 5000ms"], .completed),
            (.response(response(200, to: Self.options)), [], .completed),
            (.timer(.E), [], .completed),
            (.timer(.K), ["terminated"], .terminated),
        ])
    }

    @Test func finalInTryingAndReliableTimerK() {
        Self.run(reliable: true, [
            (.response(response(404, to: Self.options)), ["cancel E", "cancel F", "deliver 404", "start K 0ms"], .completed),
            (.timer(.K), ["terminated"], .terminated),
        ])
    }

    @Test func transportErrorAndTimeoutInProceeding() {
        Self.run(reliable: false, [
            (.transportError, ["cancel E", "cancel F", "transport error", "terminated"], .terminated),
        ])
        Self.run(reliable: false, [
            (.response(response(100, to: Self.options)), ["deliver 100"], .proceeding),
            (.timer(.F), ["cancel E", "timeout F", "terminated"], .terminated),
        ])
    }
}
