import Synchronization
import SIPMessage
import SIPDialog
import MediaRuntime
import Media

/// What a call action can fail with. Ending a call that is already over is not an error.
public enum CallError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The action needs another state (answering an outgoing call, holding a ringing one…).
    case invalidState(action: String, state: CallState)
    /// The call ended before the action completed, for this reason.
    case ended(CallEndReason)
    /// The action did not complete within its deadline.
    case timedOut(action: String)
    /// The peer refused a request the action sent (a re-INVITE for hold: 488, 491…), or it
    /// never answered it.
    case refused(action: String, status: Int)
    /// The session layer refused the action (an offer/answer exchange already in progress…).
    case session(SessionError)
    /// Digits could not be sent (a character outside 0-9 * # A-D w W , !, or no way to send).
    case digits(String)
    /// An argument the action cannot take (a forward without a target, a consultation call of
    /// another phone…), and why.
    case invalidArgument(String)
    /// A transfer did not succeed (``Phone/perform(_:)``'s transfer actions; the `Call` methods
    /// return the outcome instead).
    case transferFailed(ReferOutcome)

    public var description: String {
        switch self {
        case .invalidState(let action, let state): return "cannot \(action) a call in state \(state)"
        case .ended(let reason): return "the call ended (\(reason))"
        case .timedOut(let action): return "\(action) did not complete in time"
        case .refused(let action, let status): return "\(action) was refused with \(status)"
        case .session(let e): return "\(e)"
        case .digits(let why): return "digits not sent: \(why)"
        case .invalidArgument(let why): return "invalid argument: \(why)"
        case .transferFailed(let outcome): return "the transfer did not succeed: \(outcome)"
        }
    }
}

/// What happens on a call besides its state changes, in order (``Call/events``).
public enum CallEvent: Sendable, Hashable {
    /// The call's state changed (the same values as ``Call/states``).
    case state(CallState)
    /// A call-quality warning was raised or cleared (rules: the phone's media configuration,
    /// Twilio's by default).
    case quality(QualityEvent)
    /// The peer sent a DTMF digit: RFC 4733 in the media, or SIP INFO.
    case digit(Character, via: Phone.DigitTransport)
    /// The call's media started (`true`, after an offer/answer) or stopped (`false`).
    case mediaActive(Bool)
    /// The peer sent key-value data during the call (``Call/send(data:timeout:)`` on its side).
    case data(CallData)
    /// The peer asked us to transfer (REFER, in this call's dialog or naming it by
    /// Target-Dialog), and whether the phone's `referDecision` accepted: when it did, the call to
    /// the target follows as a new ``Call``.
    case transferRequested(ReferRequest, accepted: Bool)
    /// Our transfer of this call progressed: the status line of the peer's NOTIFY (100 Trying,
    /// 180 Ringing…).
    case transferProgress(SIPFragStatus)
    /// Our transfer of this call has its outcome (success only on a final 2xx NOTIFY).
    case transferResult(ReferOutcome)
}

/// One call of a ``Phone``, incoming or outgoing: its state as it changes (``states``, an
/// `AsyncSequence` that any number of tasks may read), and the actions on it (answer, reject,
/// hang up, hold, mute, digits), each completing when the network says it did, or throwing a
/// ``CallError``.
///
/// A `Call` is a handle: it stays valid after the call ended (its state is then `.ended` with
/// the reason), and actions on an ended call either do nothing (hanging up) or throw
/// ``CallError/invalidState(action:state:)``.
public final class Call: Sendable, Identifiable, CustomStringConvertible {
    /// Unique within its phone, in creation order.
    public let id: UInt64
    /// The session behind the call (Call-ID and our tag): the key of the `Phone`'s lower-level
    /// methods and of ``SIPUserAgent``.
    public let key: SessionKey
    public let direction: CallDirection
    /// The other party: the target we called, or the caller (From) of an incoming call.
    public let remote: URI?
    /// The SIP Call-ID.
    public var sipCallID: String { key.callID }
    /// An incoming call's caller as the call directory names it (``CallDirectoryEntry/identified(label:)``),
    /// when the caller sent no display name.
    public let label: String?
    /// The key-value data the caller attached to an incoming call (``Phone/dial(_:options:)``);
    /// empty for our own calls and for callers that attached none.
    public let attachedData: CallData
    /// The application's own label for a call it placed (``CallOptions/tag``: Diyalog's
    /// transaction code); never sent.
    public let tag: String?
    /// The account the call belongs to: the one that placed it, or for an incoming call the one
    /// its Request-URI names (``Phone/addAccount(_:)``); the phone's own otherwise.
    public let account: Account

    let phone: Phone
    private let tracker: Mutex<CallStateTracker>
    private let broadcast: Broadcast<CallState>
    private let eventFanOut = EventFanOut<CallEvent>()
    private let replacedBy = Mutex<Call?>(nil)
    private let warnings = Mutex<Set<QualityWarning>>([])
    /// Set once an answer was started, so answering twice answers once.
    private let answering = Atomic<Bool>(false)
    private let muted = Atomic<Bool>(false)
    /// Whether `.mediaActive(true)` was the last media event published (re-INVITEs that update
    /// running media publish nothing).
    private let mediaOn = Atomic<Bool>(false)
    /// For ``times`` and the setup and duration metrics.
    private let createdAt = ContinuousClock.now
    private let establishedAt = Mutex<ContinuousClock.Instant?>(nil)
    private let endedAt = Mutex<ContinuousClock.Instant?>(nil)

    init(id: UInt64, key: SessionKey, direction: CallDirection, remote: URI?, phone: Phone, account: Account, label: String? = nil,
         attachedData: CallData = [:], tag: String? = nil) {
        self.id = id
        self.account = account
        self.tag = tag
        self.attachedData = attachedData
        self.label = label
        self.key = key
        self.direction = direction
        self.remote = remote
        self.phone = phone
        let t = CallStateTracker(direction: direction)
        tracker = Mutex(t)
        broadcast = Broadcast(t.state)
        phone.metrics?.callCreated(direction)
    }

    public var description: String { "call \(id) (\(direction), \(key.callID))" }

    /// The state now.
    public var state: CallState { broadcast.current }

    /// The states from now on: the current one first, then every change, in order; the
    /// sequence finishes after `.ended`. Each access makes a new, independent sequence.
    public var states: AsyncStream<CallState> { broadcast.subscribe() }

    /// Everything that happens on the call from now on: state changes, quality warnings,
    /// digits received, media starting and stopping. Each access makes a new sequence; it
    /// finishes after the call ended.
    public var events: AsyncStream<CallEvent> { eventFanOut.subscribe() }

    /// The call that replaced this one (an INVITE with Replaces we accepted, RFC 3891): the
    /// conversation goes on there once this call ends `.replaced`.
    public var replacement: Call? { replacedBy.withLock { $0 } }

    func replaced(by call: Call) {
        replacedBy.withLock { $0 = call }
    }

    /// The quality warnings raised and not yet cleared.
    public var qualityWarnings: Set<QualityWarning> { warnings.withLock { $0 } }

    /// Who holds the call (`.active` unless it is established and held).
    public var hold: HoldState {
        if case .established(let h) = state { return h }
        return .active
    }

    /// Whether our microphone is muted (we keep sending silence, RTP keeps flowing).
    public var isMuted: Bool { muted.load(ordering: .relaxed) }

    // MARK: Fed by the phone

    func feed(_ event: SessionEvent) {
        update { $0.feed(event) }
    }

    func noteHold(local: Bool? = nil, remote: Bool? = nil) {
        update { $0.hold(local: local, remote: remote) }
    }

    func noteReconnecting(_ started: Bool) {
        update { $0.reconnect(started) }
    }

    func willEnd(_ reason: CallEndReason?) {
        tracker.withLock { $0.willEnd(reason) }
    }

    private func update(_ body: (inout CallStateTracker) -> CallState?) {
        // Published under the tracker's lock, so concurrent feeders never reorder states. The
        // redirection manager learns a state before anyone else can see it, so its
        // capabilities and its NewCall target are never behind the call.
        let changed = tracker.withLock { t -> (state: CallState, firstEstablished: Bool)? in
            guard let next = body(&t) else { return nil }
            // Times first: whoever sees the state sees its time.
            let first = noteTimes(next)
            phone.redirection.callChanged(self, next)
            broadcast.publish(next, final: next.isEnded)
            eventFanOut.publish(.state(next))
            return (next, first)
        }
        guard let changed else { return }
        // Only the establishment and the end are measured (the states between cost nothing here).
        if changed.firstEstablished || changed.state.isEnded, let metrics = phone.metrics {
            measure(changed.state, metrics, firstEstablished: changed.firstEstablished)
        }
        if changed.state.isEnded {
            eventFanOut.finish()
            phone.callEnded(self)
        }
    }

    private func measure(_ state: CallState, _ metrics: PhoneMetrics, firstEstablished: Bool) {
        // Only the establishment and the end are measured: the times are not read for the rest.
        if firstEstablished, let up = establishedAt.withLock({ $0 }) { metrics.callEstablished(direction, after: up - createdAt) }
        if case .ended(let reason) = state {
            let t = times
            if let end = t.ended { metrics.callEnded(direction, reason, established: t.established.map { end - $0 }) }
        }
    }

    /// When the call was created, established and ended (CallKit's started-connecting,
    /// connected and ended dates), on the continuous clock.
    public var times: CallTimes {
        CallTimes(created: createdAt, established: establishedAt.withLock { $0 }, ended: endedAt.withLock { $0 })
    }

    /// Records when the call was established and ended; returns whether it just got established.
    private func noteTimes(_ state: CallState) -> Bool {
        switch state {
        case .established:
            let now = ContinuousClock.now
            return establishedAt.withLock { at -> Bool in
                guard at == nil else { return false }
                at = now
                return true
            }
        case .ended:
            let now = ContinuousClock.now
            endedAt.withLock { if $0 == nil { $0 = now } }
            return false
        default:
            return false
        }
    }

    /// An event of the call's media session (or a digit by INFO).
    func note(_ event: CallEvent) {
        if case .mediaActive(let on) = event, mediaOn.exchange(on, ordering: .relaxed) == on { return }
        if case .quality(let q) = event {
            warnings.withLock { w in
                switch q {
                case .raised(let x): w.insert(x)
                case .cleared(let x): w.remove(x)
                }
            }
        }
        eventFanOut.publish(event)
    }

    // MARK: Actions

    /// Waits until the state satisfies `done` (returns it), the call ends (throws
    /// ``CallError/ended(_:)`` unless `done` accepts the end), or `timeout` passes.
    @discardableResult
    public func waitUntil(_ action: String = "wait", timeout: Duration, _ done: @escaping @Sendable (CallState) -> Bool) async throws(CallError) -> CallState {
        let stream = states
        // The stream ends with `.ended`, which stops the loop: nil is the deadline.
        let result: CallState? = await within(timeout) {
            for await s in stream where done(s) || s.isEnded { return s }
            return nil
        }
        guard let s = result else { throw .timedOut(action: action) }
        if done(s) { return s }
        if case .ended(let reason) = s { throw .ended(reason) }
        throw .timedOut(action: action)
    }

    /// Answers an incoming call (200 with our SDP answer) and returns once the call is up
    /// (the caller's ACK came) — or throws when it ended first or `timeout` passed. Answering
    /// a call that is being answered or is up returns at once.
    public func answer(timeout: Duration = .seconds(32)) async throws(CallError) {
        guard direction == .incoming else { throw .invalidState(action: "answer", state: state) }
        switch state {
        case .incoming:
            if !answering.exchange(true, ordering: .acquiringAndReleasing) {
                await phone.answerIncoming(key, after: .zero, ring: false)
            }
        case .connecting, .established:
            return
        default:
            throw .invalidState(action: "answer", state: state)
        }
        try await waitUntil("answer", timeout: timeout) { $0.isEstablished }
    }

    /// Ignores an incoming call that is not answered yet (libSoftphone's `IncomingIgnored`):
    /// its state becomes `.incoming(.ignored)`, nothing is sent; it can still be answered,
    /// rejected or forwarded.
    public func ignore() throws(CallError) {
        guard direction == .incoming, case .incoming = state else { throw .invalidState(action: "ignore", state: state) }
        update { $0.ignore() }
    }

    /// Refuses an incoming call that is not answered yet with `status` (486 Busy Here by
    /// default; 603 Decline, 480…).
    public func reject(_ status: Int = 486, reason: String? = nil) async throws(CallError) {
        guard direction == .incoming, case .incoming = state else { throw .invalidState(action: "reject", state: state) }
        guard (300...699).contains(status) else { throw .invalidState(action: "reject with \(status)", state: state) }
        do {
            try await phone.agent.perform(key) { s throws(SessionError) in try s.reject(status, reason: reason) }
        } catch {
            if state.isEnded { return }
            throw .session(error)
        }
    }

    /// Ends the call whatever its state: CANCEL while ours rings, 603 Decline (or
    /// `declineWith`) while an incoming one is not answered, BYE once answered. Returns when
    /// it has ended (or after `timeout`); ending an ended call does nothing.
    public func hangUp(declineWith status: Int = 603, timeout: Duration = .seconds(32)) async {
        guard !state.isEnded else { return }
        try? await phone.agent.perform(key) { s throws(SessionError) in s.hangUp(declineWith: status) }
        _ = try? await waitUntil("hang up", timeout: timeout) { $0.isEnded }
    }

    /// Holds the call (re-INVITE with `sendonly`, or `inactive` when the peer holds us too) or
    /// takes it off hold; returns when the peer accepted, or throws ``CallError/refused(action:status:)``.
    public func setHeld(_ held: Bool, timeout: Duration = .seconds(32)) async throws(CallError) {
        guard state.isEstablished else { throw .invalidState(action: held ? "hold" : "resume", state: state) }
        if hold.isLocal == held { return }
        let action = held ? "hold" : "resume"
        let status: Int?
        do throws(SessionError) {
            status = try await phone.reinviteForHold(key, held, timeout: timeout)
        } catch {
            throw .session(error)
        }
        guard let status else { throw .timedOut(action: action) }
        guard (200..<300).contains(status) else {
            if case .ended(let reason) = state { throw .ended(reason) }
            throw .refused(action: action, status: status)
        }
    }

    /// Mutes or unmutes our audio: silence is sent instead, RTP and its SSRC keep flowing
    /// (the peer sees no change). Local only; nothing is signalled.
    public func setMuted(_ muted: Bool) {
        self.muted.store(muted, ordering: .relaxed)
        phone.media(key)?.setMuted(muted)
    }

    /// Rings: sends 180 Ringing for an incoming call not answered yet (the state becomes
    /// ``IncomingPhase/ringing``), so the caller hears ringback while the application decides.
    /// A phone with `autoAnswer` rings by itself; ringing a ringing call does nothing.
    public func ring() async throws(CallError) {
        guard direction == .incoming, case .incoming(let phase) = state else { throw .invalidState(action: "ring", state: state) }
        if phase == .ringing { return }
        do throws(SessionError) {
            try await phone.agent.perform(key) { s throws(SessionError) in try s.provisional(180) }
        } catch {
            throw .session(error)
        }
        _ = try await waitUntil("ring", timeout: .seconds(5)) { $0 != .incoming(.trying) }
    }

    /// Sends key-value data to the peer during the call (a SIP INFO with a form-encoded body;
    /// the peer's ``Call/events`` get ``CallEvent/data(_:)``). Returns when the peer accepted
    /// it (2xx); throws ``CallError/refused(action:status:)`` with its status otherwise (a peer
    /// that does not take such INFOs answers 415 or 469), ``CallError/timedOut(action:)``, or
    /// ``CallError/invalidArgument(_:)`` for data over ``CallData/maximumEncodedSize``. Only on
    /// an established call.
    public func send(data: CallData, timeout: Duration = .seconds(32)) async throws(CallError) {
        guard state.isEstablished else { throw .invalidState(action: "send data", state: state) }
        let text = data.encoded
        guard text.utf8.count <= CallData.maximumEncodedSize else { throw .invalidArgument("\(CallDataError.tooLarge(text.utf8.count))") }
        let status: Int?
        do throws(SessionError) {
            status = try await phone.sendInfo(key, SessionBody(contentType: CallData.contentType, bytes: Array(text.utf8)), timeout: timeout)
        } catch {
            throw .session(error)
        }
        guard let status else { throw .timedOut(action: "send data") }
        guard (200..<300).contains(status) else { throw .refused(action: "send data", status: status) }
    }

    /// Sends digits: RFC 4733 telephone-events in the media when negotiated, else SIP INFO
    /// (`application/dtmf-relay`). `w`, `W` and `,` pause 500 ms. Only on an established call.
    @discardableResult
    public func sendDigits(_ digits: String) async throws(CallError) -> Phone.DigitTransport {
        guard state.isEstablished else { throw .invalidState(action: "send digits", state: state) }
        do {
            return try await phone.sendDigits(key, digits)
        } catch {
            throw .digits("\(error)")
        }
    }

    /// The media statistics now (packets, loss, jitter, RTT, MOS…), or the final ones once the
    /// call's media stopped; nil without media.
    public func statistics() -> MediaSessionStatistics? { phone.mediaStatistics(key) }
}
