import Synchronization
import SIPMessage
import SIPDialog

/// Leads an application through transferring and forwarding its phone's calls, in the manner of
/// libSoftphone's `CallRedirectionManager`: one redirection at a time, with a state the UI
/// follows (``changes``), the capabilities of each call (which transfers and forwards it allows
/// now), and the steps of the three flows. One per ``Phone`` (``Phone/redirection``).
///
/// - Blind transfer: ``capabilities(of:)`` → ``setBlindTransferSource(_:)`` →
///   ``performBlindTransfer(to:notifyTimeout:)``.
/// - Attended transfer with two or more established calls (``AttendedTransferCapability/direct``,
///   ``AttendedTransferCapability/pickAnotherCall``): ``performAttendedTransfer(between:and:notifyTimeout:)``
///   with a call of ``Capabilities/attendedTransferTargets``.
/// - Attended transfer with one established call (``AttendedTransferCapability/newCall``):
///   ``setAttendedTransferSource(_:)``, dial the target with ``Phone/dial(_:headers:)``; once
///   that call is established the manager makes it the target itself (``State/targetAssigned``);
///   then ``performAttendedTransfer(notifyTimeout:)``.
/// - Forward: ``setForwardingSource(_:)`` → ``performForward(to:)-(SIPURI)``.
///
/// States: ``State/inactive`` → ``State/sourceAssigned`` (a source is set) →
/// ``State/targetAssigned`` (attended only) → ``State/inProgress`` (the REFER or 3xx is out;
/// nothing can change or cancel it) → ``State/succeeded``, ``State/failed`` or
/// ``State/cancelled``. An assigned redirection is cancelled by ``cancelRedirect()`` or when its
/// source or target call ends. A finished one stays readable until its calls ended, then the
/// manager is inactive again.
///
/// The decisions are a pure ``RedirectionMachine``; this class feeds it the phone's calls as
/// they change and runs the actions on the calls (``Call/transfer(to:notifyTimeout:)``,
/// ``Call/attendedTransfer(to:notifyTimeout:)``, ``Call/forward(to:statusCode:timeout:)``).
///
/// Where the SDK document is inconsistent, this is what we chose:
/// - It says `performBlindTransferToTarget` needs a source set with `setForwardingSource`, a copy
///   error: ``performBlindTransfer(to:notifyTimeout:)`` needs ``setBlindTransferSource(_:)``.
/// - It names the state enum three ways (`RedirectionState`, `CallRedirectState`,
///   `RedirectState`): here it is ``State``.
/// - It gives no capability value for a call that allows no attended transfer: we add
///   ``AttendedTransferCapability/unavailable``.
/// - It makes the manager a singleton: here there is one per phone.
/// - Its blind flow has the app dial the target "as if it were a regular outgoing call" and the
///   manager turn that call into the REFER; here the app names the target in
///   ``performBlindTransfer(to:notifyTimeout:)`` and ``Phone/dial(_:headers:)`` always places a call.
public final class CallRedirectionManager: Sendable {
    /// The kind of redirection (libSoftphone's `CallRedirectType`).
    public enum Flow: Sendable, Hashable {
        /// REFER to a target we name (RFC 5589 §6).
        case blindTransfer
        /// REFER with Replaces naming a consultation call (RFC 5589 §7).
        case attendedTransfer
        /// A 3xx to an incoming call not answered yet.
        case forward

        /// Whether the flow is a transfer (libSoftphone's `isTransferType()`).
        public var isTransfer: Bool { self != .forward }
    }

    /// Where the redirection is (libSoftphone's `RedirectionState`).
    public enum State: Sendable, Hashable {
        /// No redirection is tracked.
        case inactive
        /// The source call is assigned; the UI should lead the user to pick a target.
        case sourceAssigned
        /// The target call is assigned (attended transfer only); the transfer can be performed.
        case targetAssigned
        /// The REFER or the 3xx is out. Source, target and flow are frozen; it cannot be cancelled.
        case inProgress
        /// The redirection succeeded.
        case succeeded
        /// The redirection failed (the REFER was refused, the target did not answer, no
        /// outcome came…).
        case failed
        /// Cancelled by the application, or because one of its calls ended.
        case cancelled

        /// Whether the redirection is over.
        public var isFinished: Bool { self == .succeeded || self == .failed || self == .cancelled }
    }

    /// Which attended transfer a call allows.
    public enum AttendedTransferCapability: Sendable, Hashable {
        /// None: the call is not established, or a redirection is in progress (the SDK document
        /// names no such value; it is ours).
        case unavailable
        /// Exactly two calls are established: the other one is the target
        /// (``CallRedirectionManager/performAttendedTransfer(between:and:notifyTimeout:)``).
        case direct
        /// Three or more are established: the user picks the target among
        /// ``Capabilities/attendedTransferTargets``.
        case pickAnotherCall
        /// Only this call is established: assign it as source and dial the target.
        case newCall
    }

    /// What one call allows now (libSoftphone's `RedirectCapabilities`).
    public struct Capabilities: Sendable {
        /// The call can be transferred blind: it is established.
        public var blindTransfer: Bool
        /// The call can be forwarded: it is incoming and not answered yet.
        public var forward: Bool
        /// Which attended transfer the call allows.
        public var attendedTransfer: AttendedTransferCapability
        /// The other established calls, oldest first: the targets an attended transfer may pick.
        public var attendedTransferTargets: [Call]
    }

    /// The tracked redirection at one moment.
    public struct Redirection: Sendable, Equatable, CustomStringConvertible {
        /// The kind, or nil when inactive (libSoftphone's `getCurrentRedirectFlow`).
        public var flow: Flow?
        /// Where the redirection is.
        public var state: State
        /// The call redirected: transferred, or forwarded.
        public var source: Call?
        /// The consultation call of an attended transfer.
        public var target: Call?
        /// The REFER's outcome behind a finished transfer (why it failed, for instance).
        public var transferOutcome: ReferOutcome?

        /// The same flow, state and outcome, with the same `Call` objects.
        public static func == (a: Redirection, b: Redirection) -> Bool {
            a.flow == b.flow && a.state == b.state && a.source === b.source && a.target === b.target && a.transferOutcome == b.transferOutcome
        }

        public var description: String {
            var s = "\(state)"
            if let flow { s += " \(flow)" }
            if let source { s += " source \(source.id)" }
            if let target { s += " target \(target.id)" }
            if let transferOutcome { s += " (\(transferOutcome))" }
            return s
        }
    }

    private struct Inner: ~Copyable {
        var machine = RedirectionMachine()
        /// The calls the machine follows, by id.
        var calls: [UInt64: Call] = [:]
        var closed = false
    }

    private let inner = Mutex(Inner())
    private let broadcast = Broadcast(Redirection(flow: nil, state: .inactive))

    init() {}

    // MARK: Reading

    /// The redirection now.
    public var current: Redirection { broadcast.current }

    /// The redirection from now on: the current value first, then every change in order. Each
    /// access makes a new, independent sequence; it finishes when the phone closes.
    public var changes: AsyncStream<Redirection> { broadcast.subscribe() }

    /// Whether a redirection can be started: in every state but ``State/inProgress``.
    public var canInitiateRedirect: Bool { inner.withLock { $0.machine.canInitiateRedirect } }

    /// What `call` allows now: a blind transfer and an attended one when it is established, a
    /// forward when it is incoming and not answered; nothing while a redirection is in progress.
    public func capabilities(of call: Call) -> Capabilities {
        inner.withLock { i in
            guard call.phone.redirection === self else {
                return Capabilities(blindTransfer: false, forward: false, attendedTransfer: .unavailable, attendedTransferTargets: [])
            }
            observe(call, &i)
            publish(&i)
            let c = i.machine.capabilities(of: call.id)
            return Capabilities(blindTransfer: c.blindTransfer, forward: c.forward, attendedTransfer: c.attendedTransfer,
                                attendedTransferTargets: c.attendedTransferTargets.compactMap { i.calls[$0] })
        }
    }

    // MARK: Setters

    /// Assigns the source of a blind transfer (→ ``State/sourceAssigned``); it must be
    /// established. Throws ``RedirectError/busy`` while a redirection is in progress.
    public func setBlindTransferSource(_ call: Call) throws(RedirectError) {
        try step(call) { m throws(RedirectError) in try m.setBlindTransferSource(call.id) }
    }

    /// Assigns the source of an attended transfer (→ ``State/sourceAssigned``); it must be
    /// established. The next call dialed on the phone becomes the target once established.
    public func setAttendedTransferSource(_ call: Call) throws(RedirectError) {
        try step(call) { m throws(RedirectError) in try m.setAttendedTransferSource(call.id) }
    }

    /// Assigns the source of a forward (→ ``State/sourceAssigned``); it must be incoming and
    /// not answered (``CallState/incoming(_:)``).
    public func setForwardingSource(_ call: Call) throws(RedirectError) {
        try step(call) { m throws(RedirectError) in try m.setForwardingSource(call.id) }
    }

    /// Assigns the target of an attended transfer (→ ``State/targetAssigned``): an established
    /// call other than the source, after ``setAttendedTransferSource(_:)``.
    public func setAttendedTransferTarget(_ call: Call) throws(RedirectError) {
        try step(call) { m throws(RedirectError) in try m.setAttendedTransferTarget(call.id) }
    }

    /// Cancels an assigned redirection (→ ``State/cancelled``), or forgets a finished one (→
    /// ``State/inactive``). No effect while in progress.
    public func cancelRedirect() {
        inner.withLock { i in
            i.machine.cancel()
            publish(&i)
        }
    }

    // MARK: Performing

    /// Transfers the blind-transfer source to `target` (REFER): needs ``State/sourceAssigned``
    /// after ``setBlindTransferSource(_:)``. Returns the final state once known: ``State/succeeded``
    /// (the source was hung up), ``State/failed`` (see ``Redirection/transferOutcome``) or
    /// ``State/cancelled`` (the source ended first).
    public func performBlindTransfer(to target: SIPURI, notifyTimeout: Duration = .seconds(32)) async throws(RedirectError) -> State {
        let source = try start { m throws(RedirectError) in try m.startBlindTransfer() }
        return await run {
            do throws(CallError) { return .transfer(try await source.transfer(to: target, notifyTimeout: notifyTimeout)) }
            catch { return .callFailed(error) }
        }
    }

    /// Forwards the forwarding source to `targets` (a 302, the first preferred): needs
    /// ``State/sourceAssigned`` after ``setForwardingSource(_:)``. Returns the final state once
    /// known: ``State/succeeded`` (the call ended forwarded), ``State/cancelled`` (the caller
    /// gave up first) or ``State/failed``.
    public func performForward(to targets: [SIPURI]) async throws(RedirectError) -> State {
        let source = try start { m throws(RedirectError) in try m.startForward() }
        return await run {
            do throws(CallError) {
                try await source.forward(to: targets)
                return .forwarded
            } catch {
                return .callFailed(error)
            }
        }
    }

    /// ``performForward(to:)-([SIPURI])`` to one target.
    public func performForward(to target: SIPURI) async throws(RedirectError) -> State {
        try await performForward(to: [target])
    }

    /// Transfers the attended-transfer source to the assigned target (REFER with Replaces):
    /// needs ``State/targetAssigned``. Returns the final state once known; on success the
    /// source was hung up and the target ends the consultation call.
    public func performAttendedTransfer(notifyTimeout: Duration = .seconds(32)) async throws(RedirectError) -> State {
        let (source, target) = try start { m throws(RedirectError) in
            let (s, t) = try m.startAttendedTransfer()
            return (s, t)
        }
        return await attended(source, target, notifyTimeout)
    }

    /// Transfers `source` (established) to the party of `target` (established, or ringing:
    /// see ``Call/attendedTransfer(to:notifyTimeout:)``) without assigning them first; in any
    /// state but ``State/inProgress`` (whatever was assigned is dropped).
    public func performAttendedTransfer(between source: Call, and target: Call,
                                        notifyTimeout: Duration = .seconds(32)) async throws(RedirectError) -> State {
        try inner.withLock { (i: inout Inner) throws(RedirectError) in
            guard source.phone.redirection === self, target.phone.redirection === self else { throw .unknownCall }
            observe(source, &i)
            observe(target, &i)
            do throws(RedirectError) {
                try i.machine.startAttendedTransfer(between: source.id, and: target.id)
            } catch {
                throw Self.refinedError(error, i.machine, [source, target])
            }
            publish(&i)
        }
        return await attended(source, target, notifyTimeout)
    }

    private func attended(_ source: Call, _ target: Call, _ notifyTimeout: Duration) async -> State {
        await run {
            do throws(CallError) { return .transfer(try await source.attendedTransfer(to: target, notifyTimeout: notifyTimeout)) }
            catch { return .callFailed(error) }
        }
    }

    // MARK: Fed by the phone

    /// A call of the phone was created.
    func callAdded(_ call: Call) {
        inner.withLock { i in
            observe(call, &i)
            publish(&i)
        }
    }

    /// A call of the phone changed state (called in order, for each change).
    func callChanged(_ call: Call, _ state: CallState) {
        inner.withLock { i in
            guard !i.closed else { return }
            if i.calls[call.id] == nil { i.calls[call.id] = call }
            i.machine.observe(call.id, direction: call.direction, state: state)
            // A call the machine let go at its end (every call of a phone that only answers)
            // leaves the table at once, without a filter of the others.
            if state.isEnded, !i.machine.tracks(call.id) { i.calls[call.id] = nil }
            publish(&i)
        }
    }

    /// The phone closed: the streams finish, the calls are let go.
    func close() {
        inner.withLock { i in
            i.closed = true
            i.calls = [:]
            broadcast.publish(broadcast.current, final: true)
        }
    }

    // MARK: Helpers

    /// Tells the machine about a call it does not follow (one it let go after its end); under
    /// the lock. A followed call needs nothing: each call feeds its states here before
    /// publishing them, so the machine is never behind `call.state` (and reading that here
    /// could only take it back to an older state).
    private func observe(_ call: Call, _ i: inout Inner) {
        guard !i.closed, i.calls[call.id] == nil else { return }
        i.calls[call.id] = call
        i.machine.observe(call.id, direction: call.direction, state: call.state)
    }

    /// Runs a setter on the machine for `call`, and publishes what changed.
    private func step(_ call: Call, _ body: (inout RedirectionMachine) throws(RedirectError) -> Void) throws(RedirectError) {
        try inner.withLock { (i: inout Inner) throws(RedirectError) in
            guard call.phone.redirection === self else { throw .unknownCall }
            observe(call, &i)
            do throws(RedirectError) {
                try body(&i.machine)
            } catch {
                throw Self.refinedError(error, i.machine, [call])
            }
            publish(&i)
        }
    }

    /// Starts a perform on the machine; returns the call it acts on.
    private func start(_ body: (inout RedirectionMachine) throws(RedirectError) -> UInt64) throws(RedirectError) -> Call {
        try inner.withLock { (i: inout Inner) throws(RedirectError) -> Call in
            let id = try body(&i.machine)
            publish(&i)
            guard let call = i.calls[id] else { throw .unknownCall }
            return call
        }
    }

    /// Starts a perform on the machine; returns the source and target it acts on.
    private func start(_ body: (inout RedirectionMachine) throws(RedirectError) -> (UInt64, UInt64)) throws(RedirectError) -> (Call, Call) {
        try inner.withLock { (i: inout Inner) throws(RedirectError) -> (Call, Call) in
            let (s, t) = try body(&i.machine)
            publish(&i)
            guard let source = i.calls[s], let target = i.calls[t] else { throw .unknownCall }
            return (source, target)
        }
    }

    /// Runs a perform's action, feeds its result to the machine, and returns the final state.
    private func run(_ action: () async -> RedirectionMachine.Result) async -> State {
        let result = await action()
        return inner.withLock { i in
            let final = i.machine.finish(result)
            publish(&i)
            return final
        }
    }

    /// An ended call the machine no longer follows is refused for its state, not as unknown.
    private static func refinedError(_ error: RedirectError, _ m: RedirectionMachine, _ calls: [Call]) -> RedirectError {
        guard error == .unknownCall, let ended = calls.first(where: { m.state(of: $0.id) == nil && $0.state.isEnded }) else { return error }
        return .wrongCallState(ended.state)
    }

    /// Publishes the machine's queued changes, with calls for ids; drops the calls it let go.
    private func publish(_ i: inout Inner) {
        let changes = i.machine.takeChanges()
        guard !i.closed else { return }
        for s in changes {
            broadcast.publish(Redirection(flow: s.flow, state: s.state, source: s.source.flatMap { i.calls[$0] },
                                          target: s.target.flatMap { i.calls[$0] }, transferOutcome: s.transferOutcome))
        }
        // Counted, not compared as sets: a state change of a followed call (every change of a
        // phone that only answers) builds nothing here.
        if i.calls.count != i.machine.trackedCount { i.calls = i.calls.filter { i.machine.tracks($0.key) } }
    }
}
