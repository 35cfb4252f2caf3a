import Testing
import Synchronization
import SIPMessage
import SIPTransaction
import SIPTransport
import SIPDialog
import SIPRuntime
import NetworkIO
@testable import Switchboard

/// The call redirection manager and the `Call` transfer/forward actions between three of our
/// phones on 127.0.0.1 (real sockets, no media, fast transaction timers).
@Suite("CallRedirectionManager: transfers and forwards between three phones")
struct RedirectionTests {
    typealias State = CallRedirectionManager.State

    static func phone(_ user: String, autoAnswer: Duration? = nil, follow: Bool = false, lines: TransferTests.Lines) throws -> Phone {
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: CallTests.fast),
                                           identity: try SIPURI("sip:\(user)@127.0.0.1"))
        c.sessionTimer = nil
        c.redirects = RedirectPolicy(mode: follow ? .follow : .fail)
        return try Phone(name: user, configuration: c, autoAnswer: autoAnswer, report: { lines.add($0) })
    }

    static func uri(_ p: Phone, _ user: String) throws -> SIPURI { try CallTests.uri(p, user) }

    /// Every state a manager publishes, from subscription on.
    final class Recorder: Sendable {
        private final class Seen: Sendable {
            let all = Mutex<[State]>([])
        }
        private let seen = Seen()
        private let task: Task<Void, Never>

        init(_ manager: CallRedirectionManager) {
            let stream = manager.changes
            let seen = self.seen
            task = Task { for await r in stream { seen.all.withLock { $0.append(r.state) } } }
        }

        deinit { task.cancel() }

        var states: [State] { seen.all.withLock { $0 } }

        /// Waits (bounded) until the states seen end with `suffix`.
        func wait(endingWith suffix: [State], timeout: Duration = .seconds(5)) async -> Bool {
            let clock = ContinuousClock(), deadline = clock.now + timeout
            while clock.now < deadline {
                if states.suffix(suffix.count) == suffix[...] { return true }
                try? await Task.sleep(for: .milliseconds(5))
            }
            return states.suffix(suffix.count) == suffix[...]
        }
    }

    /// Alice calls `to` (which answers by itself) and waits until the call is up.
    static func established(_ from: Phone, to: Phone, _ user: String) async throws -> Call {
        let call = await from.dial(try uri(to, user))
        try await call.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        return call
    }

    @Test("blind transfer via the manager: capabilities, source, REFER, succeeded; the source ends transferred, the manager goes back to inactive",
          .timeLimit(.minutes(1)))
    func blind() async throws {
        let lines = TransferTests.Lines()
        let alice = try Self.phone("alice", lines: lines)
        let bob = try Self.phone("bob", autoAnswer: .milliseconds(10), lines: lines)
        let carol = try Self.phone("carol", autoAnswer: .milliseconds(10), lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let manager = alice.redirection
        let recorder = Recorder(manager)
        let ab = try await Self.established(alice, to: bob, "bob")
        let caps = manager.capabilities(of: ab)
        #expect(caps.blindTransfer && !caps.forward && caps.attendedTransfer == .newCall && caps.attendedTransferTargets.isEmpty)
        try manager.setBlindTransferSource(ab)
        #expect(manager.current.state == .sourceAssigned && manager.current.flow == .blindTransfer && manager.current.source === ab)
        let final = try await manager.performBlindTransfer(to: try Self.uri(carol, "carol"), notifyTimeout: .seconds(5))
        #expect(final == .succeeded, "lines: \(lines.text)")
        try await ab.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        if case .ended(.transferred) = ab.state {} else { Issue.record("ended \(ab.state)") }
        #expect(await recorder.wait(endingWith: [.inactive]))
        #expect(recorder.states == [.inactive, .sourceAssigned, .inProgress, .succeeded, .inactive], "\(recorder.states)")
        // Bob's new call reached Carol.
        #expect(await carol.wait(timeout: .seconds(5)) { carol.calls.contains { $0.state.isEstablished } }, "lines: \(lines.text)")
    }

    @Test("attended transfer, Direct: two established calls, performAttendedTransfer(between:) with the one target; both calls end",
          .timeLimit(.minutes(1)))
    func attendedDirect() async throws {
        let lines = TransferTests.Lines()
        let alice = try Self.phone("alice", lines: lines)
        let bob = try Self.phone("bob", autoAnswer: .milliseconds(10), lines: lines)
        let carol = try Self.phone("carol", autoAnswer: .milliseconds(10), lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let manager = alice.redirection
        let recorder = Recorder(manager)
        let ab = try await Self.established(alice, to: bob, "bob")
        try await ab.setHeld(true, timeout: .seconds(5))
        let ac = try await Self.established(alice, to: carol, "carol")
        let caps = manager.capabilities(of: ab)
        #expect(caps.attendedTransfer == .direct && caps.attendedTransferTargets.map(\.id) == [ac.id])
        #expect(manager.capabilities(of: ac).attendedTransferTargets.map(\.id) == [ab.id])
        let target = try #require(caps.attendedTransferTargets.first)
        let final = try await manager.performAttendedTransfer(between: ab, and: target, notifyTimeout: .seconds(5))
        #expect(final == .succeeded, "lines: \(lines.text)")
        #expect(manager.current.transferOutcome == .succeeded(200) || manager.current.state == .inactive)
        // Carol ends the consultation call (replaced), we end the transferred one.
        try await ac.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        try await ab.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(ac.state == .ended(.hungUp(by: .remote)))
        #expect(await recorder.wait(endingWith: [.succeeded, .inactive]), "\(recorder.states)")
        #expect(recorder.states == [.inactive, .inProgress, .succeeded, .inactive], "\(recorder.states)")
        #expect(lines.contains("carol: call replaces \(ac.sipCallID)"), "lines: \(lines.text)")
    }

    @Test("attended transfer, NewCall: source assigned, the call dialed next becomes the target once established, then the transfer",
          .timeLimit(.minutes(1)))
    func attendedNewCall() async throws {
        let lines = TransferTests.Lines()
        let alice = try Self.phone("alice", lines: lines)
        let bob = try Self.phone("bob", autoAnswer: .milliseconds(10), lines: lines)
        let carol = try Self.phone("carol", autoAnswer: .milliseconds(200), lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let manager = alice.redirection
        let recorder = Recorder(manager)
        let ab = try await Self.established(alice, to: bob, "bob")
        #expect(manager.capabilities(of: ab).attendedTransfer == .newCall)
        try manager.setAttendedTransferSource(ab)
        // Not yet: a perform needs the target.
        await #expect(throws: RedirectError.wrongState(.sourceAssigned, flow: .attendedTransfer)) {
            _ = try await manager.performAttendedTransfer()
        }
        let ac = await alice.dial(try Self.uri(carol, "carol"))
        #expect(await recorder.wait(endingWith: [.targetAssigned]), "\(recorder.states)")
        #expect(ac.state.isEstablished, "the target is assigned once established")
        #expect(manager.current.target === ac && manager.current.source === ab)
        let final = try await manager.performAttendedTransfer(notifyTimeout: .seconds(5))
        #expect(final == .succeeded, "lines: \(lines.text)")
        try await ac.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        try await ab.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(await recorder.wait(endingWith: [.inactive]))
        #expect(recorder.states == [.inactive, .sourceAssigned, .targetAssigned, .inProgress, .succeeded, .inactive], "\(recorder.states)")
    }

    @Test("forward via the manager: an unanswered incoming call, 302, the call ends forwarded and the caller reaches the target",
          .timeLimit(.minutes(1)))
    func forward() async throws {
        let lines = TransferTests.Lines()
        let alice = try Self.phone("alice", follow: true, lines: lines)
        let bob = try Self.phone("bob", lines: lines)
        let carol = try Self.phone("carol", autoAnswer: .milliseconds(10), lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let manager = bob.redirection
        let recorder = Recorder(manager)
        let arrivals = bob.incomingCallStream
        let out = await alice.dial(try Self.uri(bob, "bob"))
        let inc = try #require(await CallTests.nextIncoming(arrivals))
        let caps = manager.capabilities(of: inc)
        #expect(caps.forward && !caps.blindTransfer && caps.attendedTransfer == .unavailable)
        #expect(throws: RedirectError.wrongCallState(.incoming(.trying))) { try manager.setBlindTransferSource(inc) }
        try manager.setForwardingSource(inc)
        // Not the flow assigned.
        await #expect(throws: RedirectError.wrongState(.sourceAssigned, flow: .forward)) {
            _ = try await manager.performBlindTransfer(to: try Self.uri(carol, "carol"))
        }
        let target = try Self.uri(carol, "carol")
        let final = try await manager.performForward(to: target)
        #expect(final == .succeeded, "lines: \(lines.text)")
        #expect(inc.state == .ended(.forwarded(to: [target])))
        try await out.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        #expect(await recorder.wait(endingWith: [.inactive]))
        #expect(recorder.states == [.inactive, .sourceAssigned, .inProgress, .succeeded, .inactive], "\(recorder.states)")
        await out.hangUp(timeout: .seconds(5))
    }

    @Test("a failed transfer (the target never answers): failed with 408, busy meanwhile, the call stays; inactive once it ends",
          .timeLimit(.minutes(1)))
    func failed() async throws {
        let lines = TransferTests.Lines()
        let alice = try Self.phone("alice", lines: lines)
        let bob = try Self.phone("bob", autoAnswer: .milliseconds(10), lines: lines)
        defer { alice.close(); bob.close() }
        let nobody = try UDPTransport(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0)) { _ in }
        defer { nobody.close() }
        let silent = try SIPURI("sip:nobody@127.0.0.1:\(nobody.localAddress.port)")
        let manager = alice.redirection
        let recorder = Recorder(manager)
        let ab = try await Self.established(alice, to: bob, "bob")
        try manager.setBlindTransferSource(ab)
        async let final = manager.performBlindTransfer(to: silent, notifyTimeout: .seconds(5))
        #expect(await recorder.wait(endingWith: [.inProgress]))
        // In progress: frozen, and cancel has no effect.
        #expect(!manager.canInitiateRedirect)
        #expect(throws: RedirectError.busy) { try manager.setAttendedTransferSource(ab) }
        manager.cancelRedirect()
        #expect(manager.current.state == .inProgress)
        #expect(try await final == .failed, "lines: \(lines.text)")
        #expect(manager.current.state == .failed && manager.current.transferOutcome == .failed(408))
        #expect(ab.state.isEstablished, "the call is still ours")
        #expect(manager.canInitiateRedirect && manager.capabilities(of: ab).blindTransfer)
        await ab.hangUp(timeout: .seconds(5))
        #expect(await recorder.wait(endingWith: [.failed, .inactive]), "\(recorder.states)")
        #expect(recorder.states == [.inactive, .sourceAssigned, .inProgress, .failed, .inactive], "\(recorder.states)")
    }

    @Test("cancel: by cancelRedirect, and when the target call ends (kept cancelled until the source ends too)", .timeLimit(.minutes(1)))
    func cancelled() async throws {
        let lines = TransferTests.Lines()
        let alice = try Self.phone("alice", lines: lines)
        let bob = try Self.phone("bob", autoAnswer: .milliseconds(10), lines: lines)
        let carol = try Self.phone("carol", autoAnswer: .milliseconds(10), lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let manager = alice.redirection
        let recorder = Recorder(manager)
        let ab = try await Self.established(alice, to: bob, "bob")
        let ac = try await Self.established(alice, to: carol, "carol")
        try manager.setBlindTransferSource(ab)
        manager.cancelRedirect()
        #expect(manager.current.state == .cancelled && manager.current.source === ab)
        try manager.setAttendedTransferSource(ab)
        try manager.setAttendedTransferTarget(ac)
        #expect(manager.current.state == .targetAssigned && manager.current.target === ac)
        // Carol hangs up the consultation call.
        let carolCall = try #require(carol.calls.first)
        await carolCall.hangUp(timeout: .seconds(5))
        #expect(await recorder.wait(endingWith: [.cancelled]), "\(recorder.states)")
        #expect(manager.current.source === ab && manager.current.target === ac, "readable after the end")
        await ab.hangUp(timeout: .seconds(5))
        #expect(await recorder.wait(endingWith: [.cancelled, .inactive]), "\(recorder.states)")
        #expect(recorder.states == [.inactive, .sourceAssigned, .cancelled, .sourceAssigned, .targetAssigned, .cancelled, .inactive],
                "\(recorder.states)")
        #expect(manager.current == .init(flow: nil, state: .inactive))
    }

    @Test("Call actions refuse wrong states; the manager refuses another phone's calls; a consultation ringing at our target is refused there (481)",
          .timeLimit(.minutes(1)))
    func refusals() async throws {
        let lines = TransferTests.Lines()
        let alice = try Self.phone("alice", lines: lines)
        let bob = try Self.phone("bob", autoAnswer: .milliseconds(10), lines: lines)
        let carol = try Self.phone("carol", lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let ab = try await Self.established(alice, to: bob, "bob")
        let carolArrivals = carol.incomingCallStream
        let ac = await alice.dial(try Self.uri(carol, "carol"))
        let atCarol = try #require(await CallTests.nextIncoming(carolArrivals))
        // Not established, not incoming, not this phone's.
        await #expect(throws: CallError.self) { _ = try await ac.transfer(to: try Self.uri(bob, "bob")) }
        await #expect(throws: CallError.invalidState(action: "forward", state: ab.state)) { try await ab.forward(to: [try Self.uri(carol, "carol")]) }
        await #expect(throws: CallError.invalidArgument("a forward needs at least one target")) { try await atCarol.forward(to: []) }
        await #expect(throws: CallError.self) { _ = try await ab.attendedTransfer(to: ab) }
        await #expect(throws: CallError.self) { _ = try await ab.attendedTransfer(to: atCarol) }
        await #expect(throws: CallError.invalidState(action: "transfer to a consultation call", state: ac.state)) {
            _ = try await ab.attendedTransfer(to: ac)
        }
        #expect(throws: RedirectError.unknownCall) { try alice.redirection.setForwardingSource(atCarol) }
        #expect(throws: RedirectError.wrongCallState(ab.state)) { try alice.redirection.setForwardingSource(ab) }
        // Carol rings: the consultation has an early dialog, and the REFER goes; Carol (RFC 3891)
        // refuses to let Bob replace an early dialog she did not place.
        try await carol.agent.perform(atCarol.key) { s throws(SessionError) in try s.provisional(180) }
        try await ac.waitUntil(timeout: .seconds(5)) { $0 == .ringing(earlyMedia: false) }
        let outcome = try await ab.attendedTransfer(to: ac, notifyTimeout: .seconds(5))
        #expect(outcome == .failed(481), "lines: \(lines.text)")
        #expect(ab.state.isEstablished)
        await ac.hangUp(timeout: .seconds(5))
        await ab.hangUp(timeout: .seconds(5))
    }
}
