import Testing
import MetricsTestKit
import SIPMessage
import SIPTransaction
import SIPRuntime
import NetworkIO
@testable import Switchboard

/// The phone's swift-metrics figures, read from a test backend after real calls on 127.0.0.1.
@Suite("Phone metrics")
struct PhoneMetricsTests {
    static func phone(_ user: String, _ metrics: TestMetrics) throws -> Phone {
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: CallTests.fast),
                                           identity: try SIPURI("sip:\(user)@127.0.0.1"))
        c.sessionTimer = nil
        return try Phone(name: user, configuration: c,
                         metrics: PhoneMetrics.Configuration(factory: metrics, dimensions: [("phone", user)], interval: .milliseconds(50)))
    }

    @Test("an answered call and a busy one: calls created and ended by reason, setup and duration timed, SIP traffic counted",
          .timeLimit(.minutes(1)))
    func callsAndTraffic() async throws {
        let aliceMetrics = TestMetrics(), bobMetrics = TestMetrics()
        let alice = try Self.phone("alice", aliceMetrics), bob = try Self.phone("bob", bobMetrics)
        let arrivals = bob.incomingCallStream
        let out = await alice.dial(try CallTests.uri(bob, "bob"))
        let inc = try #require(await CallTests.nextIncoming(arrivals))
        #expect(try aliceMetrics.expectGauge("switchboard_calls_active", [("phone", "alice")]).lastValue == 1)
        try await inc.answer(timeout: .seconds(5))
        try await out.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        await out.hangUp(timeout: .seconds(5))
        try await inc.waitUntil(timeout: .seconds(5)) { $0.isEnded }

        let second = await alice.dial(try CallTests.uri(bob, "bob"))
        let refused = try #require(await CallTests.nextIncoming(arrivals))
        try await refused.reject(486)
        try await second.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(second.state == .ended(.busy(status: 486)))
        // The call ends for alice on the 486; her ACK of it may still be on its way to bob,
        // whose counters are read when he closes.
        _ = await bob.wait(timeout: .seconds(2)) { bob.agent.endpoint.statistics.requestsReceived >= 5 }
        alice.close()
        bob.close()

        let a = [("phone", "alice")], b = [("phone", "bob")]
        #expect(try aliceMetrics.expectCounter("switchboard_calls_total", a + [("direction", "outgoing")]).totalValue == 2)
        #expect(try bobMetrics.expectCounter("switchboard_calls_total", b + [("direction", "incoming")]).totalValue == 2)
        #expect(try aliceMetrics.expectCounter("switchboard_calls_ended_total",
                                               a + [("direction", "outgoing"), ("reason", "hung_up_local")]).totalValue == 1)
        #expect(try aliceMetrics.expectCounter("switchboard_calls_ended_total",
                                               a + [("direction", "outgoing"), ("reason", "busy")]).totalValue == 1)
        #expect(try bobMetrics.expectCounter("switchboard_calls_ended_total",
                                             b + [("direction", "incoming"), ("reason", "hung_up_remote")]).totalValue == 1)
        #expect(try bobMetrics.expectCounter("switchboard_calls_ended_total",
                                             b + [("direction", "incoming"), ("reason", "rejected")]).totalValue == 1)
        #expect(try aliceMetrics.expectGauge("switchboard_calls_active", a).lastValue == 0)
        // Only the answered call has a setup time and a duration.
        let setup = try aliceMetrics.expectTimer("switchboard_call_setup_seconds", a + [("direction", "outgoing")])
        #expect(setup.values.count == 1 && setup.values[0] > 0)
        #expect(try aliceMetrics.expectTimer("switchboard_call_duration_seconds", a + [("direction", "outgoing")]).values.count == 1)
        // Alice sent two INVITEs, the 2xx's ACK, a BYE and the 486's ACK, and received the
        // 200s to her INVITE and BYE and the 486 (bob answered at once: no 1xx); bob received
        // those five requests. Retransmissions would only add.
        #expect(try aliceMetrics.expectCounter("switchboard_sip_messages_sent_total", a).totalValue >= 5)
        #expect(try aliceMetrics.expectCounter("switchboard_sip_responses_received_total", a).totalValue >= 3)
        #expect(try bobMetrics.expectCounter("switchboard_sip_requests_received_total", b).totalValue >= 5)
        #expect(try aliceMetrics.expectGauge("switchboard_sip_transactions_active", a).lastValue != nil)
    }

    @Test("every end reason has its own metric label")
    func reasonLabels() {
        let reasons: [CallEndReason] = [
            .hungUp(by: .local), .hungUp(by: .remote), .cancelled(by: .local), .rejected(by: .remote, status: 603), .busy(status: 486),
            .timeout(.noAnswer), .mediaFailure(status: 488), .forwarded(to: []), .redirected(status: 302), .transferred(to: nil),
            .replaced, .noMedia, .failed(.transport),
        ]
        #expect(Set(reasons.map(\.metricLabel)).count == reasons.count)
    }
}
