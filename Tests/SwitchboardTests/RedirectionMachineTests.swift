import Testing
import SIPDialog
@testable import Switchboard

/// The redirection manager's state machine alone: every transition and every refusal, fed by
/// hand (call ids, call states, action results), without sockets.
@Suite("RedirectionMachine: states, capabilities, refusals")
struct RedirectionMachineTests {
    typealias M = RedirectionMachine
    typealias Snapshot = RedirectionMachine.Snapshot

    static let up = CallState.established(.active)
    static let hungUp = CallState.ended(.hungUp(by: .remote))

    /// A machine that saw these calls: (id, direction, state).
    static func machine(_ calls: [(UInt64, CallDirection, CallState)]) -> M {
        var m = M()
        for (id, d, s) in calls { m.observe(id, direction: d, state: s) }
        _ = m.takeChanges()
        return m
    }

    static func states(_ m: inout M) -> [CallRedirectionManager.State] { m.takeChanges().map(\.state) }

    // MARK: Capabilities

    @Test("capabilities: established → blind + attended newCall/direct/pickAnotherCall with the targets; unanswered incoming → forward")
    func capabilities() {
        var m = Self.machine([(1, .outgoing, Self.up)])
        var c = m.capabilities(of: 1)
        #expect(c.blindTransfer && !c.forward && c.attendedTransfer == .newCall && c.attendedTransferTargets.isEmpty)
        m.observe(2, direction: .incoming, state: .established(.localHold))
        c = m.capabilities(of: 1)
        #expect(c.attendedTransfer == .direct && c.attendedTransferTargets == [2])
        m.observe(3, direction: .outgoing, state: Self.up)
        m.observe(4, direction: .outgoing, state: .ringing(earlyMedia: false))
        c = m.capabilities(of: 2)
        #expect(c.attendedTransfer == .pickAnotherCall && c.attendedTransferTargets == [1, 3], "ringing calls are no targets")
        // Capabilities follow the calls: 3 ends, 4 is answered.
        m.observe(3, direction: .outgoing, state: Self.hungUp)
        m.observe(4, direction: .outgoing, state: Self.up)
        #expect(m.capabilities(of: 2).attendedTransferTargets == [1, 4])
        m.observe(5, direction: .incoming, state: .incoming(.ringing))
        c = m.capabilities(of: 5)
        #expect(c.forward && !c.blindTransfer && c.attendedTransfer == .unavailable)
        c = m.capabilities(of: 4)
        #expect(!c.forward, "an outgoing call is never forwarded")
        #expect(m.capabilities(of: 99).attendedTransfer == .unavailable, "an unknown call allows nothing")
        #expect(m.capabilities(of: 3) == M.Capabilities(blindTransfer: false, forward: false, attendedTransfer: .unavailable,
                                                          attendedTransferTargets: []), "an ended call is forgotten")
    }

    @Test("nothing is available while a redirection is in progress; canInitiateRedirect says so")
    func nothingWhileInProgress() throws {
        var m = Self.machine([(1, .outgoing, Self.up), (2, .incoming, .incoming(.trying))])
        try m.setBlindTransferSource(1)
        #expect(m.canInitiateRedirect)
        _ = try m.startBlindTransfer()
        #expect(!m.canInitiateRedirect)
        #expect(m.capabilities(of: 1).attendedTransfer == .unavailable && !m.capabilities(of: 1).blindTransfer)
        #expect(!m.capabilities(of: 2).forward)
    }

    // MARK: Blind transfer

    @Test("blind: inactive → sourceAssigned → inProgress → succeeded → inactive once the source ended")
    func blindSuccess() throws {
        var m = Self.machine([(1, .outgoing, Self.up)])
        try m.setBlindTransferSource(1)
        #expect(m.takeChanges() == [Snapshot(flow: .blindTransfer, state: .sourceAssigned, source: 1)])
        #expect(try m.startBlindTransfer() == 1)
        #expect(Self.states(&m) == [.inProgress])
        // The source ends (our BYE) while in progress: no change.
        #expect(m.finish(.transfer(.succeeded(200))) == .succeeded)
        #expect(m.current == Snapshot(flow: .blindTransfer, state: .succeeded, source: 1, transferOutcome: .succeeded(200)))
        m.observe(1, direction: .outgoing, state: .ended(.transferred(to: nil)))
        #expect(m.takeChanges() == [Snapshot(flow: .blindTransfer, state: .succeeded, source: 1, transferOutcome: .succeeded(200)),
                                    Snapshot()])
        #expect(m.trackedCalls.isEmpty)
    }

    @Test("blind: the source already ended when the outcome comes → succeeded then inactive in one step")
    func blindSuccessAfterEnd() throws {
        var m = Self.machine([(1, .incoming, Self.up)])
        try m.setBlindTransferSource(1)
        _ = try m.startBlindTransfer()
        m.observe(1, direction: .incoming, state: .ended(.transferred(to: nil)))
        #expect(Self.states(&m) == [.sourceAssigned, .inProgress], "frozen while in progress")
        #expect(m.finish(.transfer(.succeeded(200))) == .succeeded)
        #expect(Self.states(&m) == [.succeeded, .inactive])
    }

    @Test("blind: a failed or unknown outcome is failed, the call stays; a source that ended first makes it cancelled")
    func blindFailures() throws {
        for outcome in [ReferOutcome.failed(408), .refused(603), .unknown(.noNotify)] {
            var m = Self.machine([(1, .outgoing, Self.up)])
            try m.setBlindTransferSource(1)
            _ = try m.startBlindTransfer()
            #expect(m.finish(.transfer(outcome)) == .failed)
            #expect(m.current.state == .failed && m.current.transferOutcome == outcome && m.current.source == 1)
            // Readable until the call ends.
            m.observe(1, direction: .outgoing, state: .established(.localHold))
            #expect(m.current.state == .failed)
            m.observe(1, direction: .outgoing, state: Self.hungUp)
            #expect(Self.states(&m).suffix(2) == [.failed, .inactive])
        }
        var m = Self.machine([(1, .outgoing, Self.up)])
        try m.setBlindTransferSource(1)
        _ = try m.startBlindTransfer()
        m.observe(1, direction: .outgoing, state: Self.hungUp)
        #expect(m.finish(.transfer(.unknown(.terminatedWithoutFinalStatus(reason: nil)))) == .cancelled)
        #expect(Self.states(&m).suffix(2) == [.cancelled, .inactive])
        // The call refused the action: failed; it ended first: cancelled.
        m = Self.machine([(1, .outgoing, Self.up)])
        try m.setBlindTransferSource(1)
        _ = try m.startBlindTransfer()
        #expect(m.finish(.callFailed(.invalidState(action: "transfer", state: .connecting))) == .failed)
        m = Self.machine([(1, .outgoing, Self.up)])
        try m.setBlindTransferSource(1)
        _ = try m.startBlindTransfer()
        #expect(m.finish(.callFailed(.ended(.hungUp(by: .remote)))) == .cancelled)
    }

    @Test("blind: refusals — source not established, perform without a blind source, perform with another flow's source")
    func blindRefusals() throws {
        var m = Self.machine([(1, .outgoing, .ringing(earlyMedia: false)), (2, .incoming, .incoming(.trying)), (3, .incoming, Self.up)])
        #expect(throws: RedirectError.wrongCallState(.ringing(earlyMedia: false))) { try m.setBlindTransferSource(1) }
        #expect(throws: RedirectError.wrongCallState(.incoming(.trying))) { try m.setBlindTransferSource(2) }
        #expect(throws: RedirectError.unknownCall) { try m.setBlindTransferSource(42) }
        #expect(throws: RedirectError.wrongState(.inactive, flow: nil)) { _ = try m.startBlindTransfer() }
        try m.setForwardingSource(2)
        #expect(throws: RedirectError.wrongState(.sourceAssigned, flow: .forward)) { _ = try m.startBlindTransfer() }
        try m.setAttendedTransferSource(3)
        #expect(throws: RedirectError.wrongState(.sourceAssigned, flow: .attendedTransfer)) { _ = try m.startBlindTransfer() }
        #expect(m.current == Snapshot(flow: .attendedTransfer, state: .sourceAssigned, source: 3), "refusals change nothing")
    }

    // MARK: Attended transfer

    @Test("attended NewCall: source assigned, the call dialed next is the target once established, then in progress and succeeded")
    func attendedNewCall() throws {
        var m = Self.machine([(1, .outgoing, Self.up), (2, .incoming, .incoming(.ringing))])
        try m.setAttendedTransferSource(1)
        // An incoming call, established meanwhile, is not the dialed target.
        m.observe(2, direction: .incoming, state: Self.up)
        #expect(m.current.state == .sourceAssigned)
        m.observe(3, direction: .outgoing, state: .starting)
        m.observe(3, direction: .outgoing, state: .calling)
        m.observe(3, direction: .outgoing, state: .ringing(earlyMedia: false))
        #expect(m.current.state == .sourceAssigned)
        m.observe(3, direction: .outgoing, state: Self.up)
        #expect(m.current == Snapshot(flow: .attendedTransfer, state: .targetAssigned, source: 1, target: 3))
        let pair = try m.startAttendedTransfer()
        #expect(pair.source == 1 && pair.target == 3)
        #expect(m.finish(.transfer(.succeeded(200))) == .succeeded)
        m.observe(3, direction: .outgoing, state: Self.hungUp)
        #expect(m.current.state == .succeeded, "until both calls ended")
        m.observe(1, direction: .outgoing, state: .ended(.transferred(to: nil)))
        #expect(Self.states(&m) == [.sourceAssigned, .targetAssigned, .inProgress, .succeeded, .inactive])
    }

    @Test("attended NewCall: a dialed call that fails does not cancel; the next one dialed is the target")
    func attendedNewCallRetry() throws {
        var m = Self.machine([(1, .outgoing, Self.up)])
        try m.setAttendedTransferSource(1)
        m.observe(2, direction: .outgoing, state: .starting)
        m.observe(2, direction: .outgoing, state: .ended(.busy(status: 486)))
        #expect(m.current.state == .sourceAssigned)
        m.observe(3, direction: .outgoing, state: .starting)
        m.observe(3, direction: .outgoing, state: Self.up)
        #expect(m.current.target == 3)
        // Calls dialed before the source was assigned do not count.
        var n = Self.machine([(1, .outgoing, Self.up), (2, .outgoing, .ringing(earlyMedia: false))])
        try n.setAttendedTransferSource(1)
        n.observe(2, direction: .outgoing, state: Self.up)
        #expect(n.current.state == .sourceAssigned)
    }

    @Test("attended with an explicit target; re-picking a target; performAttendedTransfer needs targetAssigned")
    func attendedExplicitTarget() throws {
        var m = Self.machine([(1, .outgoing, Self.up), (2, .incoming, Self.up), (3, .outgoing, Self.up), (4, .outgoing, .ringing(earlyMedia: true))])
        #expect(throws: RedirectError.wrongState(.inactive, flow: nil)) { try m.setAttendedTransferTarget(2) }
        try m.setBlindTransferSource(1)
        #expect(throws: RedirectError.wrongState(.sourceAssigned, flow: .blindTransfer)) { try m.setAttendedTransferTarget(2) }
        try m.setAttendedTransferSource(1)
        #expect(throws: RedirectError.wrongState(.sourceAssigned, flow: .attendedTransfer)) { _ = try m.startAttendedTransfer() }
        #expect(throws: RedirectError.sameCall) { try m.setAttendedTransferTarget(1) }
        #expect(throws: RedirectError.wrongCallState(.ringing(earlyMedia: true))) { try m.setAttendedTransferTarget(4) }
        try m.setAttendedTransferTarget(2)
        try m.setAttendedTransferTarget(3)
        #expect(m.takeChanges().map(\.target) == [nil, nil, 2, 3])
        // The target is put on hold, or resumed: still fine.
        m.observe(3, direction: .outgoing, state: .established(.remoteHold))
        let started = try m.startAttendedTransfer()
        #expect(started.source == 1 && started.target == 3)
        #expect(m.finish(.transfer(.failed(481))) == .failed)
        #expect(m.current.transferOutcome == .failed(481))
    }

    @Test("performAttendedTransfer(between:) from any state but inProgress; the target may ring; refusals")
    func attendedBetween() throws {
        for setup in 0..<4 {
            var m = Self.machine([(1, .outgoing, Self.up), (2, .incoming, Self.up), (3, .incoming, .incoming(.trying)), (4, .outgoing, .ringing(earlyMedia: false))])
            switch setup {
            case 1: try m.setForwardingSource(3)
            case 2: try m.setAttendedTransferSource(1); try m.setAttendedTransferTarget(2)
            case 3: try m.setBlindTransferSource(2); _ = try m.startBlindTransfer(); m.finish(.transfer(.failed(486)))
            default: break
            }
            _ = m.takeChanges()
            try m.startAttendedTransfer(between: 2, and: 1)
            #expect(m.takeChanges() == [Snapshot(flow: .attendedTransfer, state: .inProgress, source: 2, target: 1)], "setup \(setup)")
            #expect(throws: RedirectError.busy) { try m.startAttendedTransfer(between: 1, and: 2) }
        }
        var m = Self.machine([(1, .outgoing, Self.up), (2, .incoming, .incoming(.trying)), (3, .incoming, .incoming(.ringing)),
                              (4, .outgoing, .ringing(earlyMedia: false)), (5, .outgoing, .calling)])
        #expect(throws: RedirectError.sameCall) { try m.startAttendedTransfer(between: 1, and: 1) }
        #expect(throws: RedirectError.wrongCallState(.incoming(.ringing))) { try m.startAttendedTransfer(between: 3, and: 1) }
        #expect(throws: RedirectError.wrongCallState(.incoming(.trying))) { try m.startAttendedTransfer(between: 1, and: 2) }
        #expect(throws: RedirectError.wrongCallState(.calling)) { try m.startAttendedTransfer(between: 1, and: 5) }
        #expect(throws: RedirectError.unknownCall) { try m.startAttendedTransfer(between: 1, and: 9) }
        // Ringing consultations: ours at the target, or theirs here after our 180.
        try m.startAttendedTransfer(between: 1, and: 4)
        m.finish(.transfer(.failed(481)))
        m.cancel()
        try m.startAttendedTransfer(between: 1, and: 3)
        #expect(m.current.state == .inProgress)
    }

    // MARK: Forward

    @Test("forward: sourceAssigned → inProgress → succeeded → inactive (the call ended forwarded); refusals")
    func forward() throws {
        var m = Self.machine([(1, .incoming, .incoming(.trying)), (2, .incoming, Self.up), (3, .outgoing, .ringing(earlyMedia: false)),
                              (4, .incoming, .connecting)])
        #expect(throws: RedirectError.wrongCallState(Self.up)) { try m.setForwardingSource(2) }
        #expect(throws: RedirectError.wrongCallState(.ringing(earlyMedia: false))) { try m.setForwardingSource(3) }
        #expect(throws: RedirectError.wrongCallState(.connecting)) { try m.setForwardingSource(4) }
        #expect(throws: RedirectError.wrongState(.inactive, flow: nil)) { _ = try m.startForward() }
        try m.setForwardingSource(1)
        m.observe(1, direction: .incoming, state: .incoming(.ringing))
        #expect(try m.startForward() == 1)
        m.observe(1, direction: .incoming, state: .ended(.forwarded(to: [])))
        #expect(m.finish(.forwarded) == .succeeded)
        #expect(Self.states(&m) == [.sourceAssigned, .inProgress, .succeeded, .inactive])
        // Answered meanwhile (before the perform): the forward is refused, nothing changes.
        m = Self.machine([(1, .incoming, .incoming(.ringing))])
        try m.setForwardingSource(1)
        m.observe(1, direction: .incoming, state: .connecting)
        #expect(throws: RedirectError.wrongCallState(.connecting)) { _ = try m.startForward() }
        #expect(m.current.state == .sourceAssigned)
        // The caller gave up during the forward: cancelled.
        m = Self.machine([(1, .incoming, .incoming(.ringing))])
        try m.setForwardingSource(1)
        _ = try m.startForward()
        m.observe(1, direction: .incoming, state: .ended(.cancelled(by: .remote)))
        #expect(m.finish(.callFailed(.ended(.cancelled(by: .remote)))) == .cancelled)
        #expect(Self.states(&m).suffix(2) == [.cancelled, .inactive])
    }

    // MARK: Cancel, busy, call ends

    @Test("cancelRedirect: assigned → cancelled (kept until the calls end); finished → inactive; no effect inactive or in progress")
    func cancel() throws {
        var m = Self.machine([(1, .outgoing, Self.up), (2, .outgoing, Self.up)])
        m.cancel()
        #expect(m.takeChanges().isEmpty)
        try m.setAttendedTransferSource(1)
        m.cancel()
        #expect(m.current == Snapshot(flow: .attendedTransfer, state: .cancelled, source: 1))
        m.cancel()
        #expect(m.current == Snapshot(), "a finished redirection is forgotten")
        try m.setAttendedTransferSource(1)
        try m.setAttendedTransferTarget(2)
        m.cancel()
        #expect(m.current.state == .cancelled && m.current.target == 2)
        // Cancelled, then the calls end: inactive once both ended.
        m.observe(1, direction: .outgoing, state: Self.hungUp)
        #expect(m.current.state == .cancelled)
        m.observe(2, direction: .outgoing, state: Self.hungUp)
        #expect(m.current.state == .inactive)
        // No effect while in progress.
        m = Self.machine([(1, .outgoing, Self.up)])
        try m.setBlindTransferSource(1)
        _ = try m.startBlindTransfer()
        m.cancel()
        #expect(m.current.state == .inProgress)
    }

    @Test("every setter and perform is refused while in progress; a new source after a finished one starts afresh")
    func busy() throws {
        var m = Self.machine([(1, .outgoing, Self.up), (2, .outgoing, Self.up), (3, .incoming, .incoming(.trying))])
        try m.setAttendedTransferSource(1)
        try m.setAttendedTransferTarget(2)
        _ = try m.startAttendedTransfer()
        #expect(throws: RedirectError.busy) { try m.setBlindTransferSource(2) }
        #expect(throws: RedirectError.busy) { try m.setAttendedTransferSource(2) }
        #expect(throws: RedirectError.busy) { try m.setForwardingSource(3) }
        #expect(throws: RedirectError.busy) { try m.setAttendedTransferTarget(2) }
        #expect(throws: RedirectError.busy) { _ = try m.startBlindTransfer() }
        #expect(throws: RedirectError.busy) { _ = try m.startForward() }
        #expect(throws: RedirectError.busy) { _ = try m.startAttendedTransfer() }
        #expect(throws: RedirectError.busy) { try m.startAttendedTransfer(between: 2, and: 1) }
        // A call of the redirection ends while in progress: frozen.
        m.observe(2, direction: .outgoing, state: Self.hungUp)
        #expect(m.current.state == .inProgress)
        m.finish(.transfer(.failed(503)))
        #expect(m.current.state == .cancelled, "the target ended before the failure came")
        // A new source replaces the finished redirection.
        try m.setForwardingSource(3)
        #expect(m.current == Snapshot(flow: .forward, state: .sourceAssigned, source: 3))
        #expect(m.trackedCalls == [1, 3], "the ended target is let go")
        // finish outside inProgress is ignored.
        #expect(m.finish(.forwarded) == .sourceAssigned)
    }

    @Test("an assigned redirection is cancelled when its source or target ends, not when another call does")
    func callEnds() throws {
        // Source ends while sourceAssigned (each flow).
        for flow in [CallRedirectionManager.Flow.blindTransfer, .attendedTransfer, .forward] {
            var m = Self.machine([(1, .incoming, flow == .forward ? .incoming(.trying) : Self.up), (2, .outgoing, Self.up)])
            switch flow {
            case .blindTransfer: try m.setBlindTransferSource(1)
            case .attendedTransfer: try m.setAttendedTransferSource(1)
            case .forward: try m.setForwardingSource(1)
            }
            m.observe(2, direction: .outgoing, state: Self.hungUp)
            #expect(m.current.state == .sourceAssigned)
            m.observe(1, direction: .incoming, state: .ended(.cancelled(by: .remote)))
            #expect(Self.states(&m) == [.sourceAssigned, .cancelled, .inactive], "\(flow)")
        }
        // Target ends while targetAssigned: cancelled, kept while the source lives.
        var m = Self.machine([(1, .outgoing, Self.up), (2, .outgoing, Self.up)])
        try m.setAttendedTransferSource(1)
        try m.setAttendedTransferTarget(2)
        m.observe(2, direction: .outgoing, state: Self.hungUp)
        #expect(m.current == Snapshot(flow: .attendedTransfer, state: .cancelled, source: 1, target: 2))
        #expect(m.state(of: 2) == Self.hungUp, "readable after the end")
        m.observe(1, direction: .outgoing, state: Self.hungUp)
        #expect(Self.states(&m) == [.sourceAssigned, .targetAssigned, .cancelled, .inactive])
    }

    @Test("setters re-validate: a source or target that ended is refused for its state")
    func endedCalls() throws {
        var m = Self.machine([(1, .outgoing, Self.up)])
        m.observe(1, direction: .outgoing, state: Self.hungUp)
        #expect(throws: RedirectError.unknownCall) { try m.setBlindTransferSource(1) }
        // Tracked because it was the source: refused for its state.
        m = Self.machine([(1, .outgoing, Self.up)])
        try m.setBlindTransferSource(1)
        _ = try m.startBlindTransfer()
        m.observe(1, direction: .outgoing, state: Self.hungUp)
        m.finish(.transfer(.succeeded(200)))
        #expect(m.current.state == .inactive)
        m = Self.machine([(1, .outgoing, Self.up), (2, .outgoing, Self.up)])
        try m.setBlindTransferSource(1)
        _ = try m.startBlindTransfer()
        m.finish(.transfer(.failed(486)))
        m.observe(2, direction: .outgoing, state: Self.hungUp)
        try m.setBlindTransferSource(1)
        m.observe(1, direction: .outgoing, state: Self.hungUp)
        #expect(throws: RedirectError.wrongState(.inactive, flow: nil)) { _ = try m.startBlindTransfer() }
    }
}
