import Synchronization
import SIPMessage
import SIPRuntime
import SIPTransaction
import SIPTransport
import SIPDialog

/// A user agent server on the dialog layer, for load: every INVITE becomes an ``InviteSession``
/// in one ``SessionManager``, is answered (180 Ringing when asked, then 200 with the answer the
/// `answer` closure makes from the offer), waits for its ACK (retransmitting the 2xx, sending
/// BYE when none comes) and ends with the caller's BYE (or CANCEL before the answer). Offers in
/// re-INVITE and UPDATE are answered by the same closure (488 when it returns `nil`), and other
/// requests inside a dialog (INFO, MESSAGE, OPTIONS…) get 200.
///
/// Unlike ``SIPUserAgent`` there is no queue hop and no event stream: each endpoint event and
/// each timer is processed on the thread that delivers it, under one lock that holds the
/// manager and the session timers (timers are started and cancelled under that lock, so a
/// cancel can never overtake its start); messages are sent after the lock is released.
public final class DialogServer: Sendable {
    /// Makes the answer to an offer (`nil` for an INVITE without one: return our offer, the
    /// answer comes in the ACK). Returning `nil` refuses the call with 488.
    public typealias Answerer = @Sendable (SessionBody?) -> SessionBody?

    /// What to do with a new call (see ``Handlers/incoming``).
    public enum CallDecision: Sendable {
        /// Answer with `body` (the answer to the INVITE's offer, or our offer when it had none);
        /// `then` runs once the server's lock is released, before the 200 leaves (start the
        /// call's media there: it may take longer than the SIP work should hold the lock).
        case accept(SessionBody, then: (@Sendable () -> Void)? = nil)
        /// Refuse with a final status code (3xx–6xx) and extra headers (e.g. Retry-After).
        case refuse(Int, headers: [(SIPHeaderName, String)] = [])
    }

    /// Per-call hooks for a server that keeps state per call (media, offer/answer engines).
    /// `incoming`, `offer` and `answer` run under the server's lock (keep them short, O(1), and
    /// never call back into the server); `ended` runs after it.
    public struct Handlers: Sendable {
        /// A new call: its key and the INVITE's offer (`nil` when it has none).
        public var incoming: @Sendable (SessionKey, SessionBody?) -> CallDecision
        /// An offer in a re-INVITE or UPDATE (`nil`: a re-INVITE without a body asks for our
        /// offer); `nil` refuses it with 488 and the session goes on as it was.
        public var offer: @Sendable (SessionKey, SessionBody?) -> SessionBody?
        /// The peer's answer to an offer of ours (in the ACK of an offerless INVITE's 2xx).
        public var answer: @Sendable (SessionKey, SessionBody) -> Void
        /// The call is over (every call `incoming` saw ends here exactly once, unless the server
        /// is closed first).
        public var ended: @Sendable (SessionKey, SessionEndReason) -> Void

        /// Hooks; the defaults refuse in-dialog offers and ignore answers and ends.
        public init(incoming: @escaping @Sendable (SessionKey, SessionBody?) -> CallDecision,
                    offer: @escaping @Sendable (SessionKey, SessionBody?) -> SessionBody? = { _, _ in nil },
                    answer: @escaping @Sendable (SessionKey, SessionBody) -> Void = { _, _ in },
                    ended: @escaping @Sendable (SessionKey, SessionEndReason) -> Void = { _, _ in }) {
            self.incoming = incoming
            self.offer = offer
            self.answer = answer
            self.ended = ended
        }
    }

    public struct Statistics: Sendable, Hashable {
        /// New calls (INVITEs that made a session).
        public var invites = 0
        /// Calls answered with 2xx.
        public var answered = 0
        /// Calls whose 2xx was ACKed.
        public var confirmed = 0
        /// Calls the caller ended with BYE.
        public var remoteHangups = 0
        /// Calls cancelled before the answer.
        public var cancelled = 0
        /// Calls refused (no acceptable offer, or refused by the session: 420, 421, 422, 400).
        public var refused = 0
        /// 2xx answers never ACKed (the session sent BYE).
        public var ackTimeouts = 0
        /// Calls ended otherwise (BYE of ours failing, session expiry…).
        public var otherEnds = 0
        /// Requests outside dialogs that are not INVITE (OPTIONS gets 200, others 405).
        public var otherRequests = 0
        /// Sessions alive now, and the most alive at once.
        public var liveDialogs = 0
        public var peakLiveDialogs = 0
    }

    struct State: ~Copyable {
        var manager: SessionManager
        /// The sessions with timers running, one entry each (a session without any has none:
        /// an established call costs nothing here).
        var timers: [SessionKey: SessionTimerSlots] = [:]
        /// Whose timers an entry's number (in a timer's callback) names.
        var timerOwners: [UInt64: SessionKey] = [:]
        var lastTimerOwner: UInt64 = 0
        /// A session known to have no entry in `timers`: the cancels a session sends in a row
        /// (all of its timers when it ends) cost no look-up after the first.
        var withoutTimers: SessionKey?
        var stats = Statistics()
        var closed = false
    }

    /// What to carry out once the lock is released.
    enum Work {
        case respond(SIPMessage, TransactionID)
        case send(SIPMessage, SessionKey)
        case run(@Sendable () -> Void)
    }

    public let endpoint: SIPEndpoint
    /// The configuration of every session (Contact and Via from the bound address).
    public let sessionConfiguration: InviteSessionConfiguration
    /// Whether 180 Ringing goes before the 200.
    public let ringing: Bool
    private let handlers: Handlers
    private let state: Mutex<State>

    /// Binds the endpoint and starts answering.
    /// - Parameters:
    ///   - user: the user part of our Contact and To.
    ///   - transport: the transport for Via and Contact.
    ///   - ringing: send 180 Ringing before the 200.
    ///   - sessionTimer: RFC 4028 settings; `nil` (the default) asks for none, but a caller's
    ///     Session-Expires is still honoured.
    ///   - answer: makes the SDP answer (see ``Answerer``).
    public convenience init(configuration: SIPEndpoint.Configuration, user: String = "switchboard", transport: TransportKind = .udp,
                            ringing: Bool = true, sessionTimer: SessionTimerSettings? = nil, userAgent: String? = nil,
                            answer: @escaping Answerer) throws(TransportError) {
        let handlers = Handlers(incoming: { _, offer in
            guard let body = answer(offer) else { return .refuse(488) }
            return .accept(body)
        }, offer: { _, offer in answer(offer) })
        try self.init(configuration: configuration, user: user, transport: transport, ringing: ringing, sessionTimer: sessionTimer,
                      userAgent: userAgent, handlers: handlers)
    }

    /// Binds the endpoint and starts answering, with per-call ``Handlers``.
    public init(configuration: SIPEndpoint.Configuration, user: String = "switchboard", transport: TransportKind = .udp,
                ringing: Bool = true, sessionTimer: SessionTimerSettings? = nil, userAgent: String? = nil,
                handlers: Handlers) throws(TransportError) {
        let box = ServerBox()
        endpoint = try SIPEndpoint(configuration: configuration) { event in box.server?.handle(event) }
        guard let local = endpoint.localAddress(transport) ?? endpoint.localAddresses.first else {
            endpoint.close()
            throw .invalidAddress("", reason: "the endpoint has no listen point")
        }
        let host = local.address.sipHost
        var contact = SIPURI(user: user, host: host, port: local.address.port)
        if transport != .udp { contact.parameters.set("transport", transport.viaToken.lowercased()) }
        sessionConfiguration = InviteSessionConfiguration(
            localParty: NameAddress(uri: SIPURI(user: user, host: host)), contact: NameAddress(uri: contact),
            viaTransport: transport.viaToken, viaSentBy: local.address.description, timers: configuration.timers,
            reliableProvisional: .supported, sessionTimer: sessionTimer, userAgent: userAgent)
        self.ringing = ringing
        self.handlers = handlers
        state = Mutex(State(manager: SessionManager(configuration: sessionConfiguration, seed: UInt64.random(in: 0...UInt64.max))))
        box.server = self
    }

    public var statistics: Statistics { state.withLock { $0.stats } }

    /// The number of session timers running (for tests: a call that ended leaves none).
    package var runningTimers: Int { state.withLock { s in s.timers.values.reduce(0) { $0 + $1.running } } }

    /// Ends a call: BYE when it is up, 603 (or `code`) while it is unanswered. Returns whether
    /// the call was known and had something to end.
    @discardableResult
    public func hangUp(_ key: SessionKey, declineWith code: Int = 603) -> Bool {
        let work = state.withLock { s -> [Work]? in
            guard !s.closed, s.manager[key] != nil else { return nil }
            var work: [Work] = []
            let out = (try? s.manager.perform(key) { x throws(SessionError) in x.hangUp(declineWith: code) }) ?? []
            guard !out.isEmpty else { return nil }
            process(out, &s, &work)
            return work
        }
        guard let work else { return false }
        carryOut(work)
        return true
    }

    /// Stops the timers and closes the sockets.
    public func close() {
        let entries = state.withLock { s -> [SessionTimerSlots] in
            s.closed = true
            defer { s.timers.removeAll(); s.timerOwners.removeAll() }
            return Array(s.timers.values)
        }
        for e in entries { e.cancelAll(endpoint.timerService) }
        endpoint.close()
    }

    // MARK: Events

    func handle(_ event: EndpointEvent) {
        let work = state.withLock { s -> [Work] in
            guard !s.closed else { return [] }
            var work: [Work] = []
            switch event {
            case .request(let r):
                // A new INVITE leaves 180, 200 and the handler's run; a BYE its 200 and the end:
                // room for them at once, not by growing 1, 2, 4.
                work.reserveCapacity(4)
                if let (key, actions) = s.manager.inDialogActions(r.message, transaction: r.transaction) {
                    process(key, actions, &s, &work)
                } else {
                    process(s.manager.request(r.message, transaction: r.transaction), &s, &work)
                }
            case .cancel(let r, let invite):
                process(s.manager.cancel(r.message, transaction: r.transaction, invite: invite), &s, &work)
            case .ack(let m, _):
                if let (key, actions) = s.manager.ackActions(m) { process(key, actions, &s, &work) }
            case .strayResponse(let m, _):
                process(s.manager.response(m), &s, &work)
            case .serverTransactionFailed, .malformed:
                break
            }
            return work
        }
        carryOut(work)
    }

    /// A response to a request a session sent (routed by Call-ID and tag, like a stray one);
    /// a final one ends the transaction's entry in the manager.
    private func responseArrived(_ m: SIPMessage, finalOf id: TransactionID?) {
        let work = state.withLock { s -> [Work] in
            guard !s.closed else { return [] }
            var work: [Work] = []
            process(s.manager.response(m), &s, &work)
            if let id { s.manager.transactionTerminated(id) }
            return work
        }
        carryOut(work)
    }

    private func clientFailed(_ id: TransactionID, timeout: Bool) {
        let work = state.withLock { s -> [Work] in
            guard !s.closed else { return [] }
            var work: [Work] = []
            process(s.manager.clientTransactionFailed(id, timeout: timeout), &s, &work)
            return work
        }
        carryOut(work)
    }

    /// A session timer is due: `a` is its entry's number and slot, `id` the timer's handle
    /// (an older timer of the slot, restarted or cancelled since, is ignored).
    package func timerFired(_ a: UInt64, _ id: UInt64) {
        let number = a >> SessionTimerSlots.slotBits
        let slot = Int(truncatingIfNeeded: a & SessionTimerSlots.slotMask)
        let work = state.withLock { s -> [Work] in
            guard !s.closed, let key = s.timerOwners[number], let i = s.timers.index(forKey: key),
                  s.timers.values[i][slot] == id else { return [] }
            s.timers.values[i][slot] = 0
            if s.timers.values[i].isIdle {
                s.timers.remove(at: i)
                s.timerOwners[number] = nil
            }
            var work: [Work] = []
            process(s.manager.timerFired(key, SessionTimerSlots.timer(at: slot)), &s, &work)
            return work
        }
        carryOut(work)
    }

    private func startTimer(_ key: SessionKey, _ t: SessionTimer, after: Duration, _ s: inout State) {
        let slot = SessionTimerSlots.slot(of: t)
        let timers = endpoint.timerService
        if let i = s.timers.index(forKey: key) {
            let number = s.timers.values[i].number
            let old = s.timers.values[i][slot]
            if old != 0 { timers.cancel(TimerService.Handle(id: old)) }
            s.timers.values[i][slot] = timers.schedule(after: after, target: self, number << SessionTimerSlots.slotBits | UInt64(slot)).id
        } else {
            s.lastTimerOwner &+= 1
            let number = s.lastTimerOwner
            var e = SessionTimerSlots(number: number)
            e[slot] = timers.schedule(after: after, target: self, number << SessionTimerSlots.slotBits | UInt64(slot)).id
            s.timers[key] = e
            s.timerOwners[number] = key
            if s.withoutTimers == key { s.withoutTimers = nil }
        }
    }

    private func cancelTimer(_ key: SessionKey, _ t: SessionTimer, _ s: inout State) {
        // No session has a timer running (a call between its ACK and its BYE, at any rate
        // short of the ACKs overlapping): nothing to look up or compare.
        if s.timers.isEmpty { return }
        if s.withoutTimers == key { return }
        guard let i = s.timers.index(forKey: key) else {
            s.withoutTimers = key
            return
        }
        let slot = SessionTimerSlots.slot(of: t)
        let id = s.timers.values[i][slot]
        guard id != 0 else { return }
        endpoint.timerService.cancel(TimerService.Handle(id: id))
        s.timers.values[i][slot] = 0
        if s.timers.values[i].isIdle {
            s.timerOwners[s.timers.values[i].number] = nil
            s.timers.remove(at: i)
            s.withoutTimers = key
        }
    }

    /// The session ended: whatever it left running is cancelled.
    private func cancelTimers(_ key: SessionKey, _ s: inout State) {
        if s.timers.isEmpty || s.withoutTimers == key { return }
        guard let e = s.timers.removeValue(forKey: key) else { return }
        s.timerOwners[e.number] = nil
        e.cancelAll(endpoint.timerService)
    }

    // MARK: Under the lock

    private func process(_ outputs: consuming [SessionManager.Output], _ s: inout State, _ work: inout [Work]) {
        defer { s.stats.liveDialogs = s.manager.count }
        // Each output is moved out of the array and its message on into `work`: iterating would
        // copy every output (retaining its message's buffers) and the array release them again.
        // Reversed in place through the buffer (bitwise swaps; the array's own reverse() swaps
        // through copies), then popped from the end.
        var outputs = outputs
        outputs.withUnsafeMutableBufferPointer { $0.reverse() }
        while let o = outputs.popLast() {
            switch consume o {
            case .session(let key, let action):
                apply(key, action, &s, &work)
            case .respond(let m, let tx):
                work.append(.respond(m, tx))
            case .incomingCall(let key, let invite):
                s.stats.invites += 1
                s.stats.peakLiveDialogs = max(s.stats.peakLiveDialogs, s.manager.count)
                answerCall(key, offer: SessionBody(of: invite), &s, &work)
            case .request(let m, let tx):
                s.stats.otherRequests += 1
                var r = SIPMessage(responseTo: m, statusCode: m.method == .options ? 200 : 405,
                                   toTag: String(UInt32.random(in: 1...UInt32.max), radix: 36))
                try? r.append(.allow, sessionConfiguration.allow.map(\.token).joined(separator: ", "))
                work.append(.respond(r, tx))
            }
        }
    }

    /// The actions of one session (as ``SessionManager/actionsInPlace(_:_:)`` gives them),
    /// each moved out as ``process(_:_:_:)`` moves outputs.
    private func process(_ key: SessionKey, _ actions: consuming [InviteSession.Action], _ s: inout State, _ work: inout [Work]) {
        defer { s.stats.liveDialogs = s.manager.count }
        var actions = actions
        actions.withUnsafeMutableBufferPointer { $0.reverse() }
        while let a = actions.popLast() { apply(key, a, &s, &work) }
    }

    private func answerCall(_ key: SessionKey, offer: SessionBody?, _ s: inout State, _ work: inout [Work]) {
        let answer: SessionBody
        switch handlers.incoming(key, offer) {
        case .refuse(let code, let headers):
            let out = (try? s.manager.actionsInPlace(key) { x throws(SessionError) in try x.reject(code, headers: headers) }) ?? []
            process(key, out, &s, &work)
            return
        case .accept(let body, let then):
            answer = body
            if let then { work.append(.run(then)) }
        }
        if ringing {
            process(key, (try? s.manager.actionsInPlace(key) { x throws(SessionError) in try x.provisional(180) }) ?? [], &s, &work)
        }
        let out = (try? s.manager.actionsInPlace(key) { x throws(SessionError) in try x.accept(body: answer) }) ?? []
        if !out.isEmpty { s.stats.answered += 1 }
        process(key, out, &s, &work)
    }

    /// Answers a re-INVITE or UPDATE (or makes the offer a body-less re-INVITE asks for); an
    /// offer the answerer refuses gets 488 and the session goes on as it was.
    private func answerInDialog(_ key: SessionKey, _ offer: SessionBody?, _ s: inout State, _ work: inout [Work]) {
        let out: [SessionManager.Output]?
        if let answer = handlers.offer(key, offer) {
            out = try? s.manager.perform(key) { x throws(SessionError) in try x.answer(answer) }
        } else {
            out = try? s.manager.perform(key) { x throws(SessionError) in try x.rejectOffer(488) }
        }
        process(out ?? [], &s, &work)
    }

    private func apply(_ key: SessionKey, _ action: consuming InviteSession.Action, _ s: inout State, _ work: inout [Work]) {
        switch consume action {
        case .send(let m):
            work.append(.send(m, key))
        case .respond(let m, let tx):
            work.append(.respond(m, tx))
        case .startTimer(let t, let after):
            startTimer(key, t, after: after, &s)
        case .cancelTimer(let t):
            cancelTimer(key, t, &s)
        case .event(let e):
            switch e {
            case .stateChanged(.confirmed):
                s.stats.confirmed += 1
            case .stateChanged(.terminated(let reason)):
                switch reason {
                case .remoteHangup: s.stats.remoteHangups += 1
                case .remoteCancelled: s.stats.cancelled += 1
                case .declined: s.stats.refused += 1
                case .noAck: s.stats.ackTimeouts += 1
                default: s.stats.otherEnds += 1
                }
                cancelTimers(key, &s)
                let ended = handlers.ended
                work.append(.run { ended(key, reason) })
            case .remoteAnswer(let body):
                handlers.answer(key, body)
            case .remoteOffer(let offer, _) where s.manager.state(of: key) == .confirmed:
                // A re-INVITE or UPDATE with an offer (the initial one is answered by answerCall).
                answerInDialog(key, offer, &s, &work)
            case .offerRequested:
                answerInDialog(key, nil, &s, &work)
            case .request(let m, let tx):
                // INFO, MESSAGE, OPTIONS… inside the dialog: accepted.
                let out = (try? s.manager.perform(key) { x throws(SessionError) in x.respond(to: m, in: tx, statusCode: 200) }) ?? []
                process(out, &s, &work)
            default:
                break
            }
        }
    }

    // MARK: After the lock

    private func carryOut(_ work: consuming [Work]) {
        // Moved out of the array, as in `process`.
        var work = work
        work.withUnsafeMutableBufferPointer { $0.reverse() }
        while let w = work.popLast() {
            switch consume w {
            case .respond(let m, let tx):
                endpoint.respond(m, to: tx)
            case .run(let body):
                body()
            case .send(let m, let key):
                guard let peer = destination(of: m) else { continue }
                if m.method == .ack {
                    endpoint.sendStateless(m, to: peer)
                    continue
                }
                // A failure may be reported before `sendRequest` returns the ID (synchronously,
                // or on another thread): it is parked in the box and fed once the ID is known.
                let box = Mutex<(id: TransactionID?, early: Bool?)>((nil, nil))
                let id = endpoint.sendRequest(m, to: peer) { [weak self] event in
                    guard let self else { return }
                    switch event {
                    case .provisional(let r):
                        self.responseArrived(r, finalOf: nil)
                    case .final(let r):
                        self.responseArrived(r, finalOf: box.withLock { $0.id })
                    case .timeout, .transportError:
                        let timedOut: Bool
                        if case .timeout = event { timedOut = true } else { timedOut = false }
                        let known = box.withLock { b -> TransactionID? in
                            if b.id == nil { b.early = timedOut }
                            return b.id
                        }
                        if let id = known { self.clientFailed(id, timeout: timedOut) }
                    }
                }
                let more = box.withLock { b -> [Work] in
                    b.id = id
                    let early = b.early
                    return state.withLock { s -> [Work] in
                        s.manager.clientTransactionStarted(id, for: key, request: m)
                        guard let t = early, !s.closed else { return [] }
                        var work: [Work] = []
                        process(s.manager.clientTransactionFailed(id, timeout: t), &s, &work)
                        return work
                    }
                }
                carryOut(more)
            }
        }
    }

    /// Requests go to the first Route when it is a loose router, else to the Request-URI; IP
    /// literals and `localhost` only (the peer is whoever called us).
    private func destination(of m: SIPMessage) -> SIPPeer? {
        let kind = endpoint.localAddresses.first?.transport ?? .udp
        if let r = try? m.route().first, let u = r.sipURI { return SIPUserAgent.literalPeer(u, kind) }
        guard let u = try? m.requestURI().sipURI else { return nil }
        return SIPUserAgent.literalPeer(u, kind)
    }
}

extension DialogServer: TimerTarget {}

/// The session timers running for one session in a ``DialogServer``: the timer service's handle
/// number per ``SessionTimer`` (0: not running), inline (no allocation), and the entry's number
/// that the timers' callbacks carry (with the slot) to find the session again.
struct SessionTimerSlots: Sendable {
    static let slotBits: UInt64 = 3
    static let slotMask: UInt64 = 1 << slotBits - 1

    let number: UInt64
    private var ids: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)

    init(number: UInt64) { self.number = number }

    subscript(slot: Int) -> UInt64 {
        get { withUnsafeBytes(of: ids) { $0.load(fromByteOffset: slot * 8, as: UInt64.self) } }
        set { withUnsafeMutableBytes(of: &ids) { $0.storeBytes(of: newValue, toByteOffset: slot * 8, as: UInt64.self) } }
    }

    /// Whether no slot holds a timer.
    var isIdle: Bool { ids.0 | ids.1 | ids.2 | ids.3 | ids.4 | ids.5 | ids.6 | ids.7 == 0 }

    /// How many of the slots hold a timer.
    var running: Int { (0..<8).reduce(0) { self[$1] != 0 ? $0 + 1 : $0 } }

    func cancelAll(_ service: TimerService) {
        for slot in 0..<8 where self[slot] != 0 { service.cancel(TimerService.Handle(id: self[slot])) }
    }

    static func slot(of t: SessionTimer) -> Int {
        switch t {
        case .retransmit2xx: 0
        case .ackTimeout: 1
        case .retransmitProvisional: 2
        case .prackTimeout: 3
        case .glareRetry: 4
        case .cancelGuard: 5
        case .sessionRefresh: 6
        case .sessionExpiry: 7
        }
    }

    static func timer(at slot: Int) -> SessionTimer {
        switch slot {
        case 0: .retransmit2xx
        case 1: .ackTimeout
        case 2: .retransmitProvisional
        case 3: .prackTimeout
        case 4: .glareRetry
        case 5: .cancelGuard
        case 6: .sessionRefresh
        default: .sessionExpiry
        }
    }
}

/// Lets the endpoint's handler reach the server that owns it without a retain cycle.
private final class ServerBox: Sendable {
    private struct Ref: ~Copyable { weak var server: DialogServer? }
    private let ref = Mutex(Ref())
    var server: DialogServer? {
        get { ref.withLock { $0.server } }
        set { ref.withLock { $0.server = newValue } }
    }
}
