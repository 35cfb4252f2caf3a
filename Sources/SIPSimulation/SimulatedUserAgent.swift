import SIPMessage
import SIPTransaction
import SIPDialog
import SIPAuth

/// A user agent on the simulated network: a ``SessionManager`` driven by a ``SimulatedNode``'s
/// transaction layer and the simulation's clock. Requests go to the node named by the host of
/// their first Route, else of their Request-URI (`sip:bob@bob` goes to node `bob`).
public final class SimulatedUserAgent {
    public let node: SimulatedNode
    public private(set) var manager: SessionManager
    unowned let simulation: Simulation

    /// One entry per session event, in order.
    public struct LogEntry {
        public var time: Duration
        public var key: SessionKey
        public var event: SessionEvent
    }
    public private(set) var log: [LogEntry] = []
    /// Called for each new incoming call (after the session checked the INVITE).
    public var onIncomingCall: ((SimulatedUserAgent, SessionKey, SIPMessage) -> Void)?
    /// Called for each session event, after it is logged.
    public var onEvent: ((SimulatedUserAgent, SessionKey, SessionEvent) -> Void)?
    /// Requests outside dialogs other than INVITE: answered with this code.
    public var outOfDialogStatus = 200

    private var timerGenerations: [TimerKey: UInt64] = [:]
    private var generation: UInt64 = 0
    private struct TimerKey: Hashable { var key: SessionKey; var timer: SessionTimer }

    public init(_ simulation: Simulation, name: String, configuration: InviteSessionConfiguration,
                credentials: DigestClient? = nil, timers: TransactionTimers = .rfc3261) {
        self.simulation = simulation
        node = simulation.addNode(name, timers: timers)
        manager = SessionManager(configuration: configuration, credentials: credentials, seed: UInt64(simulation.random(in: 0...1) * 1e15))
        node.onEvent = { [unowned self] _, event in self.nodeEvent(event) }
    }

    /// A configuration for a user agent named `name` on the simulated network.
    public static func configuration(_ name: String, timers: TransactionTimers = .rfc3261,
                                     reliableProvisional: ReliableProvisionalPolicy = .supported,
                                     sessionTimer: SessionTimerSettings? = nil) -> InviteSessionConfiguration {
        let uri = SIPURI(user: name, host: .domain(name))
        return InviteSessionConfiguration(localParty: NameAddress(uri: uri), contact: NameAddress(uri: uri), viaSentBy: name,
                                          timers: timers, reliableProvisional: reliableProvisional, sessionTimer: sessionTimer)
    }

    /// The session with this key, while it lives.
    public subscript(key: SessionKey) -> InviteSession? { manager[key] }

    /// Calls `user@host` (host = a node name).
    @discardableResult
    public func call(_ target: String, offer: SessionBody?, credentials: DigestClient? = nil) -> SessionKey {
        let parts = target.split(separator: "@", maxSplits: 1).map(String.init)
        let uri = SIPURI(user: parts.first, host: .domain(parts.count > 1 ? parts[1] : parts[0]))
        return call(uri: uri, offer: offer, credentials: credentials)
    }

    /// Calls `uri` (its host names a node) with extra headers on the INVITE, such as a
    /// transferee's `Referred-By` and `Replaces`.
    @discardableResult
    public func call(uri: SIPURI, offer: SessionBody?, credentials: DigestClient? = nil, headers: [(SIPHeaderName, String)] = []) -> SessionKey {
        let (key, out) = manager.call(NameAddress(uri: uri), offer: offer, credentials: credentials, headers: headers)
        apply(out)
        return key
    }

    /// Runs a command on a session and carries out its actions.
    public func perform(_ key: SessionKey, _ body: (inout InviteSession) throws(SessionError) -> [InviteSession.Action]) throws(SessionError) {
        apply(try manager.perform(key, body))
    }

    /// The events of one session, in order.
    public func events(_ key: SessionKey) -> [SessionEvent] { log.filter { $0.key == key }.map(\.event) }

    /// The states one session went through.
    public func states(_ key: SessionKey) -> [SessionState] {
        events(key).compactMap { if case .stateChanged(let s) = $0 { return s } else { return nil } }
    }

    private func nodeEvent(_ e: SimulatedNode.Event) {
        switch e {
        case .request(let m, _, let tx): apply(manager.request(m, transaction: tx))
        case .cancel(let m, let tx, let invite): apply(manager.cancel(m, transaction: tx, invite: invite))
        case .ack(let m): apply(manager.ack(m))
        case .response(let m, _, _): apply(manager.response(m))
        case .strayResponse(let m): apply(manager.response(m))
        case .timeout(let tx, _, _): apply(manager.clientTransactionFailed(tx, timeout: true))
        case .transportError(let tx): apply(manager.clientTransactionFailed(tx, timeout: false))
        case .terminated(let tx, _): manager.transactionTerminated(tx)
        case .malformed: break
        }
    }

    func apply(_ outputs: [SessionManager.Output]) {
        for o in outputs {
            switch o {
            case .session(let key, let action): apply(key, action)
            case .respond(let m, let tx): node.respond(m, in: tx)
            case .incomingCall(let key, let m): onIncomingCall?(self, key, m)
            case .request(let m, let tx): node.respond(SIPMessage(responseTo: m, statusCode: outOfDialogStatus, toTag: "ood"), in: tx)
            }
        }
    }

    private func apply(_ key: SessionKey, _ action: InviteSession.Action) {
        switch action {
        case .send(let m):
            let id = node.sendRequest(m, to: Self.destination(of: m))
            manager.clientTransactionStarted(id, for: key, request: m)
        case .respond(let m, let tx):
            node.respond(m, in: tx)
        case .startTimer(let t, let after):
            generation += 1
            let g = generation
            let tk = TimerKey(key: key, timer: t)
            timerGenerations[tk] = g
            simulation.schedule(after: after) { [weak self] in
                guard let self, self.timerGenerations[tk] == g else { return }
                self.timerGenerations[tk] = nil
                self.apply(self.manager.timerFired(key, t))
            }
        case .cancelTimer(let t):
            timerGenerations[TimerKey(key: key, timer: t)] = nil
        case .event(let e):
            log.append(LogEntry(time: simulation.now, key: key, event: e))
            onEvent?(self, key, e)
        }
    }

    /// The node a request goes to: the host of its first Route, else of its Request-URI.
    static func destination(of m: SIPMessage) -> String {
        if let r = try? m.route().first, let u = r.sipURI { return u.host.description }
        if let u = try? m.requestURI().sipURI { return u.host.description }
        return "?"
    }
}
