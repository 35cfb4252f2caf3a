import SIPDialog

/// Why a step of the ``CallRedirectionManager`` was refused. Nothing changed when one is thrown.
public enum RedirectError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The call is not in a state this step allows (a transfer source that is not established,
    /// a forwarding source already answered, a call that ended…); its state.
    case wrongCallState(CallState)
    /// A redirection is in progress (``CallRedirectionManager/State/inProgress``): source,
    /// target and flow are frozen until its outcome is known.
    case busy
    /// The manager's state (and flow) does not allow this step: performing a blind transfer
    /// without a blind-transfer source, an attended transfer without a target…
    case wrongState(CallRedirectionManager.State, flow: CallRedirectionManager.Flow?)
    /// Source and target are the same call.
    case sameCall
    /// The call belongs to another phone.
    case unknownCall

    public var description: String {
        switch self {
        case .wrongCallState(let s): return "the call is \(s)"
        case .busy: return "a redirection is in progress"
        case .wrongState(let s, let flow): return "the redirection is \(s)" + (flow.map { " (\($0))" } ?? "")
        case .sameCall: return "source and target are the same call"
        case .unknownCall: return "the call belongs to another phone"
        }
    }
}

/// The redirection state machine of a ``CallRedirectionManager``, pure: it is fed the phone's
/// calls as they change (``observe(_:direction:state:)``), the application's steps (setters,
/// the start of each perform, cancel) and each action's result (``finish(_:)``), and it says
/// the redirection's state and each call's capabilities. Calls are named by their
/// ``Call/id``, so the machine is tested without sockets.
///
/// Every change is queued; ``takeChanges()`` hands them over in order (one step can make two:
/// `succeeded` then `inactive` when the calls already ended).
public struct RedirectionMachine: Sendable, Hashable {
    /// A call, by its ``Call/id``.
    public typealias CallID = UInt64
    /// The kind of redirection.
    public typealias Flow = CallRedirectionManager.Flow
    /// Where the redirection is.
    public typealias State = CallRedirectionManager.State

    /// The redirection at one moment, with calls named by id.
    public struct Snapshot: Sendable, Hashable, CustomStringConvertible {
        /// The kind, nil when inactive.
        public var flow: Flow?
        /// Where the redirection is.
        public var state: State
        /// The call redirected.
        public var source: CallID?
        /// The consultation call of an attended transfer.
        public var target: CallID?
        /// The REFER's outcome behind a finished transfer.
        public var transferOutcome: ReferOutcome?

        /// A snapshot; the defaults are the inactive manager.
        public init(flow: Flow? = nil, state: State = .inactive, source: CallID? = nil, target: CallID? = nil,
                    transferOutcome: ReferOutcome? = nil) {
            self.flow = flow
            self.state = state
            self.source = source
            self.target = target
            self.transferOutcome = transferOutcome
        }

        public var description: String {
            var s = "\(state)"
            if let flow { s += " \(flow)" }
            if let source { s += " source \(source)" }
            if let target { s += " target \(target)" }
            if let transferOutcome { s += " (\(transferOutcome))" }
            return s
        }
    }

    /// What can be done with one call, with calls named by id (see
    /// ``CallRedirectionManager/Capabilities``).
    public struct Capabilities: Sendable, Hashable {
        /// The call is established.
        public var blindTransfer: Bool
        /// The call is incoming and not answered.
        public var forward: Bool
        /// Which attended transfer the call allows.
        public var attendedTransfer: CallRedirectionManager.AttendedTransferCapability
        /// The other established calls, oldest (lowest id) first.
        public var attendedTransferTargets: [CallID]
    }

    /// How the action a perform started ended.
    public enum Result: Sendable, Hashable {
        /// The transfer's REFER ended with this outcome.
        case transfer(ReferOutcome)
        /// The forward's 3xx went out and the call ended forwarded.
        case forwarded
        /// The call refused the action, or ended before it completed.
        case callFailed(CallError)
    }

    private struct Tracked: Sendable, Hashable {
        var direction: CallDirection
        var state: CallState
    }

    /// The redirection now.
    public private(set) var current = Snapshot()
    /// The calls seen and not ended, plus the source and target whatever their state.
    private var calls: [CallID: Tracked] = [:]
    /// Outgoing calls placed since an attended-transfer source was assigned: the first to be
    /// established becomes the target (libSoftphone's `NewCall` path).
    private var dialed: Set<CallID> = []
    private var pending: [Snapshot] = []

    /// An inactive machine that has seen no call.
    public init() {}

    /// The changes since the last call, oldest first.
    public mutating func takeChanges() -> [Snapshot] {
        defer { pending = [] }
        return pending
    }

    /// The ids of the calls the machine follows (not ended, or part of the redirection).
    public var trackedCalls: Set<CallID> { Set(calls.keys) }

    /// How many calls the machine follows (``trackedCalls``'s count, without building the set).
    var trackedCount: Int { calls.count }

    /// Whether the machine follows `id` (is in ``trackedCalls``).
    func tracks(_ id: CallID) -> Bool { calls.index(forKey: id) != nil }

    /// The state of a followed call.
    public func state(of id: CallID) -> CallState? { calls[id]?.state }

    /// Whether a redirection can be started now: every state but ``CallRedirectionManager/State/inProgress``.
    public var canInitiateRedirect: Bool { current.state != .inProgress }

    // MARK: Calls

    /// A call of the phone was created or changed state.
    public mutating func observe(_ id: CallID, direction: CallDirection, state: CallState) {
        // By index: `calls[id] == nil` compared a copy of the tracked call with nil (Equatable).
        let isNew = calls.index(forKey: id) == nil
        if isNew && state.isEnded && !involves(id) { return }
        calls[id] = Tracked(direction: direction, state: state)
        if isNew, direction == .outgoing, current.flow == .attendedTransfer, current.state == .sourceAssigned, id != current.source {
            dialed.insert(id)
        }
        if state.isEnded {
            dialed.remove(id)
            if involves(id) {
                if current.state == .sourceAssigned || current.state == .targetAssigned {
                    // One of the calls disconnected before the redirection started.
                    move(to: .cancelled)
                }
                releaseIfDone()
            } else {
                calls[id] = nil
            }
        } else if state.isEstablished, dialed.contains(id), current.state == .sourceAssigned, current.flow == .attendedTransfer {
            // The call dialed to consult the target is up: it is the target.
            dialed = []
            current.target = id
            move(to: .targetAssigned)
        }
    }

    // MARK: Capabilities

    /// What `id` allows now. Nothing while a redirection is in progress.
    public func capabilities(of id: CallID) -> Capabilities {
        var c = Capabilities(blindTransfer: false, forward: false, attendedTransfer: .unavailable, attendedTransferTargets: [])
        guard canInitiateRedirect, let call = calls[id] else { return c }
        if call.direction == .incoming, case .incoming = call.state { c.forward = true }
        guard call.state.isEstablished else { return c }
        c.blindTransfer = true
        let others = calls.filter { $0.key != id && $0.value.state.isEstablished }.keys.sorted()
        switch others.count {
        case 0: c.attendedTransfer = .newCall
        case 1: c.attendedTransfer = .direct
        default: c.attendedTransfer = .pickAnotherCall
        }
        c.attendedTransferTargets = others
        return c
    }

    // MARK: Setters

    /// Assigns the source of a blind transfer: an established call.
    public mutating func setBlindTransferSource(_ id: CallID) throws(RedirectError) {
        try assignSource(id, flow: .blindTransfer) { $0.state.isEstablished }
    }

    /// Assigns the source of an attended transfer: an established call. A call dialed from now
    /// on becomes the target once established.
    public mutating func setAttendedTransferSource(_ id: CallID) throws(RedirectError) {
        try assignSource(id, flow: .attendedTransfer) { $0.state.isEstablished }
    }

    /// Assigns the source of a forward: an incoming call not answered yet.
    public mutating func setForwardingSource(_ id: CallID) throws(RedirectError) {
        try assignSource(id, flow: .forward) { c in
            if c.direction == .incoming, case .incoming = c.state { return true }
            return false
        }
    }

    /// Assigns the target of an attended transfer whose source is assigned: an established call.
    public mutating func setAttendedTransferTarget(_ id: CallID) throws(RedirectError) {
        guard current.state != .inProgress else { throw .busy }
        guard current.flow == .attendedTransfer, current.state == .sourceAssigned || current.state == .targetAssigned else {
            throw .wrongState(current.state, flow: current.flow)
        }
        guard id != current.source else { throw .sameCall }
        let call = try known(id)
        guard call.state.isEstablished else { throw .wrongCallState(call.state) }
        dialed = []
        current.target = id
        move(to: .targetAssigned, force: true)
        prune()
    }

    private mutating func assignSource(_ id: CallID, flow: Flow, _ allowed: (Tracked) -> Bool) throws(RedirectError) {
        guard current.state != .inProgress else { throw .busy }
        let call = try known(id)
        guard allowed(call) else { throw .wrongCallState(call.state) }
        dialed = []
        current = Snapshot(flow: flow, state: .sourceAssigned, source: id)
        pending.append(current)
        prune()
    }

    // MARK: Performing

    /// Starts the blind transfer of the assigned source; returns the call to transfer.
    public mutating func startBlindTransfer() throws(RedirectError) -> CallID {
        try start(.blindTransfer) { $0.state.isEstablished }
    }

    /// Starts the forward of the assigned source; returns the call to forward.
    public mutating func startForward() throws(RedirectError) -> CallID {
        try start(.forward) { c in
            if case .incoming = c.state { return true }
            return false
        }
    }

    /// Starts the attended transfer between the assigned source and target.
    public mutating func startAttendedTransfer() throws(RedirectError) -> (source: CallID, target: CallID) {
        guard current.state != .inProgress else { throw .busy }
        guard current.flow == .attendedTransfer, current.state == .targetAssigned, let s = current.source, let t = current.target else {
            throw .wrongState(current.state, flow: current.flow)
        }
        let source = try known(s), target = try known(t)
        guard source.state.isEstablished else { throw .wrongCallState(source.state) }
        guard target.state.isEstablished else { throw .wrongCallState(target.state) }
        move(to: .inProgress)
        return (s, t)
    }

    /// Starts an attended transfer between `source` (established) and `target` (established,
    /// or ringing: see ``Call/attendedTransfer(to:notifyTimeout:)``), in any state but in
    /// progress; whatever was tracked before is dropped.
    public mutating func startAttendedTransfer(between source: CallID, and target: CallID) throws(RedirectError) {
        guard current.state != .inProgress else { throw .busy }
        guard source != target else { throw .sameCall }
        let s = try known(source), t = try known(target)
        guard s.state.isEstablished else { throw .wrongCallState(s.state) }
        guard Self.canBeConsultation(t) else { throw .wrongCallState(t.state) }
        dialed = []
        current = Snapshot(flow: .attendedTransfer, state: .inProgress, source: source, target: target)
        pending.append(current)
        prune()
    }

    private static func canBeConsultation(_ c: Tracked) -> Bool {
        switch c.state {
        case .established: return true
        case .ringing: return c.direction == .outgoing
        case .incoming(.ringing): return c.direction == .incoming
        default: return false
        }
    }

    private mutating func start(_ flow: Flow, _ allowed: (Tracked) -> Bool) throws(RedirectError) -> CallID {
        guard current.state != .inProgress else { throw .busy }
        guard current.flow == flow, current.state == .sourceAssigned, let id = current.source else {
            throw .wrongState(current.state, flow: current.flow)
        }
        let call = try known(id)
        guard allowed(call) else { throw .wrongCallState(call.state) }
        move(to: .inProgress)
        return id
    }

    /// The action a perform started ended: `succeeded`, `failed`, or `cancelled` when a call of
    /// the redirection ended first; returns that state (the machine may already be inactive
    /// again, its calls having ended). Ignored unless in progress (returns the state now).
    @discardableResult
    public mutating func finish(_ result: Result) -> State {
        guard current.state == .inProgress else { return current.state }
        switch result {
        case .transfer(let outcome):
            current.transferOutcome = outcome
            if outcome.isSuccess {
                move(to: .succeeded)
            } else {
                move(to: callEnded(current.source) || callEnded(current.target) ? .cancelled : .failed)
            }
        case .forwarded:
            move(to: .succeeded)
        case .callFailed(.ended):
            move(to: .cancelled)
        case .callFailed:
            move(to: .failed)
        }
        let final = current.state
        releaseIfDone()
        return final
    }

    /// Cancels an assigned redirection (`cancelled`), or forgets a finished one (`inactive`);
    /// nothing while one is in progress or none is tracked.
    public mutating func cancel() {
        switch current.state {
        case .sourceAssigned, .targetAssigned:
            dialed = []
            move(to: .cancelled)
            releaseIfDone()
        case .succeeded, .failed, .cancelled:
            release()
        case .inactive, .inProgress:
            break
        }
    }

    // MARK: Helpers

    private func involves(_ id: CallID) -> Bool { id == current.source || id == current.target }

    private func callEnded(_ id: CallID?) -> Bool {
        guard let id else { return false }
        return calls[id]?.state.isEnded ?? true
    }

    private func known(_ id: CallID) throws(RedirectError) -> Tracked {
        guard let c = calls[id] else { throw .unknownCall }
        return c
    }

    private mutating func move(to state: State, force: Bool = false) {
        guard force || state != current.state else { return }
        current.state = state
        pending.append(current)
    }

    /// A finished redirection is dropped once its calls ended.
    private mutating func releaseIfDone() {
        switch current.state {
        case .succeeded, .failed, .cancelled:
            if (current.source == nil || callEnded(current.source)) && (current.target == nil || callEnded(current.target)) { release() }
        default:
            break
        }
    }

    private mutating func release() {
        dialed = []
        current = Snapshot()
        pending.append(current)
        prune()
    }

    /// Drops the ended calls that are no longer part of the redirection.
    private mutating func prune() {
        for (id, c) in calls where c.state.isEnded && !involves(id) { calls[id] = nil }
    }
}
