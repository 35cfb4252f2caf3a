import Testing
import Logging
import ServiceLifecycle
import SIPMessage
import SIPRuntime
import NetworkIO
@testable import Switchboard

/// A phone run by a swift-service-lifecycle `ServiceGroup`: a graceful shutdown ends its calls
/// with BYE (or a decline while unanswered) before the group returns.
@Suite("Phone as a Service")
struct PhoneServiceTests {
    @Test("graceful shutdown: the established call gets a BYE, the ringing one a 480, then run() returns and the phone is closed",
          .timeLimit(.minutes(1)))
    func gracefulShutdown() async throws {
        let alice = try CallTests.phone("alice"), bob = try CallTests.phone("bob")
        defer { alice.close() }
        let group = ServiceGroup(configuration: .init(services: [bob], logger: Logger(label: "test")))
        let running = Task { try await group.run() }
        let arrivals = bob.incomingCallStream
        let first = await alice.dial(try CallTests.uri(bob, "bob"))
        let answered = try #require(await CallTests.nextIncoming(arrivals))
        try await answered.answer(timeout: .seconds(5))
        try await first.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        let second = await alice.dial(try CallTests.uri(bob, "bob"))
        let ringing = try #require(await CallTests.nextIncoming(arrivals))
        #expect(ringing.state == .incoming(.trying))

        await group.triggerGracefulShutdown()
        try await running.value
        #expect(answered.state == .ended(.hungUp(by: .local)))
        #expect(ringing.state == .ended(.rejected(by: .local, status: 480)))
        try await first.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(first.state == .ended(.hungUp(by: .remote)))
        try await second.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(second.state == .ended(.timeout(.noAnswer)))
        #expect(bob.calls.isEmpty)
    }
}
