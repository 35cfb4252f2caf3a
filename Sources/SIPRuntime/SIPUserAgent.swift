import Dispatch
import Synchronization
import Logging
import SIPMessage
import SIPTransaction
import SIPTransport
import SIPAuth
import SIPDialog
import NetworkIO

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A SIP user agent on real sockets: the ``SessionManager`` (INVITE sessions) and a
/// ``RegistrationClient`` driven by a ``SIPEndpoint`` and its timer thread.
///
/// Everything the machines do runs on one serial queue (the owner of the sessions), so nothing
/// is locked twice. The queue has no thread of its own (``InlineSerialQueue``): a message is
/// handled on the transport thread that read it, a timer on the timer thread, unless another
/// thread is already running the agent's work, which then runs it next, in order.
/// Events reach the application through ``events``; commands are `async`.
public final class SIPUserAgent: Sendable {
    public struct Configuration: Sendable {
        public var endpoint: SIPEndpoint.Configuration
        /// Our address of record: From of our calls, To/From of our REGISTER.
        public var identity: SIPURI
        public var displayName: String?
        /// Credentials for 401/407 challenges (REGISTER, INVITE, requests in dialogs).
        public var credentials: DigestClient?
        /// A proxy every call goes through (a loose-routing Route on the INVITE).
        public var outboundProxy: SIPURI?
        /// The transport for our Via and Contact and for requests whose URI names none.
        public var transport: TransportKind
        public var reliableProvisional: ReliableProvisionalPolicy
        public var sessionTimer: SessionTimerSettings?
        /// User-Agent and Server header value.
        public var userAgent: String?
        /// What our calls do with a 3xx: follow the targets (q order, each once, bounded) or end.
        public var redirects = RedirectPolicy()
        /// Whether a REFER outside any dialog is handed to the application
        /// (``Event/outOfDialogRefer(_:_:from:)``, to answer with
        /// ``respond(to:in:statusCode:headers:createsDialog:)``) instead of refused with 403, and
        /// `tdialog` (RFC 4538) listed in our Supported. `Phone` turns it on.
        public var handlesOutOfDialogRefer = false
        /// Where the agent (and its endpoint: this is ``SIPEndpoint/Configuration/logger``) logs:
        /// `info` for registration changes, `debug` for each call's state changes (with the
        /// Call-ID and local tag as metadata) and for requests refused, `trace` for every message.
        public var logger: Logger {
            get { endpoint.logger }
            set { endpoint.logger = newValue }
        }

        public init(endpoint: SIPEndpoint.Configuration, identity: SIPURI, displayName: String? = nil, credentials: DigestClient? = nil,
                    outboundProxy: SIPURI? = nil, transport: TransportKind = .udp,
                    reliableProvisional: ReliableProvisionalPolicy = .supported,
                    sessionTimer: SessionTimerSettings? = SessionTimerSettings(), userAgent: String? = "Switchboard") {
            self.endpoint = endpoint
            self.identity = identity
            self.displayName = displayName
            self.credentials = credentials
            self.outboundProxy = outboundProxy
            self.transport = transport
            self.reliableProvisional = reliableProvisional
            self.sessionTimer = sessionTimer
            self.userAgent = userAgent
        }
    }

    /// What the user agent tells the application.
    public enum Event: Sendable {
        /// A new call; the session is in `.incoming` (see ``SessionEvent`` for the offer).
        case incomingCall(SessionKey, SIPMessage)
        /// An event of one session.
        case session(SessionKey, SessionEvent)
        /// The registration of an address of record (``Configuration/identity`` or another one
        /// registered with ``SIPUserAgent/register(registrar:peer:expires:as:credentials:)``)
        /// changed state.
        case registration(RegistrationClient.State, aor: SIPURI)
        /// A request outside any dialog (MESSAGE, OPTIONS…); already answered: 200 for OPTIONS and
        /// MESSAGE, 481 for NOTIFY and for BYE/INFO/UPDATE/PRACK (no such dialog), 403 for REFER,
        /// 405 for SUBSCRIBE/PUBLISH/REGISTER, 501 for methods we do not know.
        case request(SIPMessage, from: SIPPeer)
        /// A message was sent (`outgoing`) or received, for ladders and logs.
        case trace(SIPMessage, outgoing: Bool, peer: SIPPeer)
        /// A REFER outside any dialog, when ``Configuration/handlesOutOfDialogRefer`` is on: not
        /// answered yet; the application answers it with
        /// ``SIPUserAgent/respond(to:in:statusCode:headers:createsDialog:)`` (a 2xx creating the
        /// subscription's dialog, RFC 3515 §2.4.4).
        case outOfDialogRefer(SIPMessage, TransactionID, from: SIPPeer)
        /// A request in a dialog the agent holds outside INVITE sessions (see
        /// ``openDialog()``: a NOTIFY of our REFER's subscription, or a request in the dialog a
        /// REFER we accepted created); the application answers it with
        /// ``SIPUserAgent/respond(to:in:statusCode:headers:createsDialog:)``.
        case dialogRequest(SessionKey, SIPMessage, TransactionID)
    }

    /// One address of record's registration: its machine, where it goes, its refresh timer.
    struct Registration {
        var client: RegistrationClient
        var registrar: SIPPeer
        var aor: SIPURI
        var timer: TimerService.Handle?
    }

    struct State: ~Copyable {
        /// Disarms a session's timer `t` (the session's entry goes with its last timer): its
        /// handle, if it was armed. One look-up of the key.
        mutating func takeTimer(_ key: SessionKey, _ t: SessionTimer) -> TimerService.Handle? {
            guard !timers.isEmpty, let i = timers.index(forKey: key) else { return nil }
            let h = timers.values[i].take(t)
            if h != nil, timers.values[i].isEmpty { timers.remove(at: i) }
            return h
        }

        /// ``takeTimer(_:_:)`` for several kinds at once.
        mutating func takeTimers(_ key: SessionKey, _ kinds: SessionTimerSet) -> SessionTimers {
            guard !timers.isEmpty, let i = timers.index(forKey: key) else { return SessionTimers() }
            let taken = timers.values[i].take(kinds)
            if !taken.isEmpty, timers.values[i].isEmpty { timers.remove(at: i) }
            return taken
        }

        var manager: SessionManager
        /// Our registrations, by address of record (``SIPUserAgent/registrationKey(_:)``).
        var registrations: [String: Registration] = [:]
        /// The sessions' armed timers, one entry per session with any (see ``SessionTimers``).
        var timers: [SessionKey: SessionTimers] = [:]
        /// The located targets of our calls placed with a list (RFC 3263), and the one in use.
        var targets: [SessionKey: Targets] = [:]
        /// Our initial INVITEs' client transactions, while they may still fail over.
        var invites: [TransactionID: (key: SessionKey, request: SIPMessage)] = [:]
        var closed = false
        /// Dialogs outside INVITE sessions (a REFER's subscription, RFC 3515 §2.4.4; RFC 6665):
        /// by Call-ID and our tag; the `Dialog` once one is made (our REFER's waits for its 2xx),
        /// used to send requests in it. Bounded by ``SIPUserAgent/maximumDialogs``.
        var dialogs: [SessionKey: Dialog?] = [:]
    }

    /// Dialogs the agent holds outside INVITE sessions at once (REFER subscriptions); one more
    /// is refused (``openDialog()`` returns nil, a REFER answered 503 by the application).
    public static let maximumDialogs = 256

    struct TimerKey: Hashable { var key: SessionKey; var timer: SessionTimer }

    /// One session's armed timers, by kind: a session's timers are started, cancelled and
    /// dropped together at its end under one look-up of its key (a table keyed by session and
    /// kind took one per kind, eight at each end).
    struct SessionTimers {
        /// By ``SessionTimer`` (its raw value); 0: not armed (handles are never 0).
        private var ids = InlineArray<8, UInt64>(repeating: 0)

        var isEmpty: Bool {
            for i in ids.indices where ids[i] != 0 { return false }
            return true
        }

        /// Arms `t` with `h`; the handle it replaces, if any.
        mutating func set(_ t: SessionTimer, _ h: TimerService.Handle) -> TimerService.Handle? {
            let old = ids[t.rawValue]
            ids[t.rawValue] = h.id
            return old == 0 ? nil : TimerService.Handle(id: old)
        }

        /// Disarms `t`: its handle, if it was armed.
        mutating func take(_ t: SessionTimer) -> TimerService.Handle? {
            let old = ids[t.rawValue]
            ids[t.rawValue] = 0
            return old == 0 ? nil : TimerService.Handle(id: old)
        }

        /// Disarms the timers of `kinds`: those that were armed, as timers of their own (a
        /// value, not an array: nothing is allocated).
        mutating func take(_ kinds: SessionTimerSet) -> SessionTimers {
            var taken = SessionTimers()
            for i in ids.indices where kinds.rawValue & (1 << i) != 0 && ids[i] != 0 {
                taken.ids[i] = ids[i]
                ids[i] = 0
            }
            return taken
        }

        /// Runs `body` with every armed handle.
        func forEachHandle(_ body: (TimerService.Handle) -> Void) {
            for i in ids.indices where ids[i] != 0 { body(TimerService.Handle(id: ids[i])) }
        }

        /// Every armed handle.
        var handles: [TimerService.Handle] {
            var all: [TimerService.Handle] = []
            forEachHandle { all.append($0) }
            return all
        }
    }

    /// RFC 3263 §4.3: the targets a call's initial INVITE may go to, in order; the next is tried
    /// when one fails (timeout or transport error) before any response came from it.
    struct Targets {
        var peers: [SIPPeer]
        var index = 0
        /// A response came: the target is alive, no more failing over.
        var answered = false
        var current: SIPPeer { peers[index] }
    }

    public let endpoint: SIPEndpoint
    public let configuration: Configuration
    /// The session configuration derived from ours and the bound address.
    /// What our sessions are made with (our Contact and Via among them); changed only by
    /// ``relocate(to:)``.
    public var sessionConfiguration: InviteSessionConfiguration { sessionSettings.withLock { $0 } }
    private let sessionSettings: Mutex<InviteSessionConfiguration>
    /// The application's view: every event, in order.
    public let events: AsyncStream<Event>
    /// Whether ``Event/trace(_:outgoing:peer:)`` events are produced.
    public let tracing: Bool

    private let continuation: AsyncStream<Event>.Continuation
    /// The owner's handler (``setEventHandler(_:)``), run on the agent's queue; events it
    /// raises while it runs wait in `pending`; `unconsumed` counts the events yielded to
    /// ``events`` that the owner has not finished (``eventConsumed()``).
    private struct Delivery {
        var handler: (@Sendable (Event) -> Bool)?
        var pending: [Event] = []
        var running = false
        var unconsumed = 0
    }
    private let delivery = Mutex(Delivery())
    /// How many dialogs the agent holds outside INVITE sessions (mirrors `State.dialogs.count`).
    private let heldDialogs = Atomic<Int>(0)
    private let queue = InlineSerialQueue()
    private let state: Mutex<State>
    private let resolver: @Sendable (SIPURI, TransportKind) -> SIPPeer?
    /// Whether the logger wants `debug` (read once; per-call metadata is built only then).
    private let debugs: Bool

    /// Binds the endpoint and starts taking calls.
    /// - Parameters:
    ///   - tracing: produce a ``Event/trace(_:outgoing:peer:)`` event for every message.
    ///   - resolve: maps a URI to the peer to send to; by default IP literals and `localhost`
    ///     (resolve names with `SIPResolver` first, or pass your own).
    public init(configuration: Configuration, tracing: Bool = false,
                resolve: (@Sendable (SIPURI, TransportKind) -> SIPPeer?)? = nil) throws(TransportError) {
        self.configuration = configuration
        self.tracing = tracing
        resolver = resolve ?? SIPUserAgent.literalPeer
        debugs = configuration.logger.logLevel <= .debug
        let (stream, cont) = AsyncStream<Event>.makeStream(bufferingPolicy: .unbounded)
        events = stream
        continuation = cont
        let box = WeakBox()
        endpoint = try SIPEndpoint(configuration: configuration.endpoint) { event in box.agent?.endpointEvent(event) }
        guard let local = endpoint.localAddress(configuration.transport) ?? endpoint.localAddresses.first else {
            endpoint.close()
            throw .invalidAddress("", reason: "the endpoint has no listen point")
        }
        let sentBy = local.address.description
        var contactURI = SIPURI(user: configuration.identity.user, host: local.address.sipHost, port: local.address.port)
        if configuration.transport != .udp { contactURI.parameters.set("transport", configuration.transport.viaToken.lowercased()) }
        var sc = InviteSessionConfiguration(
            localParty: NameAddress(displayName: configuration.displayName, uri: configuration.identity),
            contact: NameAddress(uri: contactURI), viaTransport: configuration.transport.viaToken, viaSentBy: sentBy,
            timers: configuration.endpoint.timers, reliableProvisional: configuration.reliableProvisional,
            sessionTimer: configuration.sessionTimer, userAgent: configuration.userAgent, redirects: configuration.redirects)
        sc.supportsTargetDialog = configuration.handlesOutOfDialogRefer
        if var proxy = configuration.outboundProxy {
            proxy.parameters.set("lr", nil)
            sc.outboundRoute = [NameAddress(uri: proxy)]
        }
        sessionSettings = Mutex(sc)
        state = Mutex(State(manager: SessionManager(configuration: sc, credentials: configuration.credentials, seed: BufferedSystemRandom.word())))
        box.agent = self
    }

    /// Stops: unregisters nothing (call ``unregister()`` first), closes the sockets, ends ``events``.
    public func close() {
        queue.sync { [self] in
            let handles = state.withLock { s -> [TimerService.Handle] in
                s.closed = true
                return s.timers.values.flatMap(\.handles) + s.registrations.values.compactMap(\.timer)
            }
            for h in handles { endpoint.timerService.cancel(h) }
        }
        endpoint.close()
        continuation.finish()
    }

    /// Where our Contact points (the bound address).
    public var contact: NameAddress { sessionConfiguration.contact }

    // MARK: Calls

    /// Calls `target` with `offer` (or none: the peer offers in its 2xx). `prepare` runs with
    /// the new session's key before the INVITE leaves, so the application can set up what the
    /// session's first events will need.
    /// - Parameter targets: where the INVITE (and a CANCEL of it) goes, in order, as RFC 3263
    ///   server location found them for the target or the outbound proxy: when one fails
    ///   (timeout or transport error) before any response, the INVITE goes again, with a new
    ///   branch, to the next (§4.3). Empty: the agent's resolver picks the one peer.
    /// - Parameter headers: added to the INVITE (a transferee's `Referred-By` and `Replaces`).
    /// - Parameter identity: who calls (From) when not ``Configuration/identity``, with
    ///   `contactUser` as the user part of our Contact (nil: the identity's) and `credentials`
    ///   for its challenges (nil: the configuration's).
    public func call(_ target: SIPURI, offer: SessionBody?, targets: [SIPPeer] = [], headers: [(SIPHeaderName, String)] = [],
                     as identity: NameAddress? = nil, contactUser: String? = nil, credentials: DigestClient? = nil,
                     prepare: (@Sendable (SessionKey) -> Void)? = nil) async -> SessionKey {
        var custom: InviteSessionConfiguration?
        if let identity {
            var c = sessionConfiguration
            c.localParty = identity
            c.contact = contact(user: contactUser ?? identity.sipURI?.user)
            custom = c
        }
        let override = custom
        return await onQueue {
            let (key, out) = self.state.withLock { s in
                let (key, out) = s.manager.call(NameAddress(uri: target), offer: offer, configuration: override,
                                                credentials: credentials, headers: headers)
                if !targets.isEmpty { s.targets[key] = Targets(peers: targets) }
                return (key, out)
            }
            prepare?(key)
            self.apply(out)
            return key
        }
    }

    /// Runs a command on a session (accept, reject, bye, reinvite, answer…).
    public func perform(_ key: SessionKey, _ command: @escaping @Sendable (inout InviteSession) throws(SessionError) -> [InviteSession.Action]) async throws(SessionError) {
        let result: Result<Void, SessionError> = await onQueue {
            let r = self.state.withLock { s -> Result<[SessionManager.Output], SessionError> in
                do throws(SessionError) {
                    return .success(try s.manager.perform(key, command))
                } catch {
                    return .failure(error)
                }
            }
            switch r {
            case .success(let out):
                self.apply(out)
                return .success(())
            case .failure(let e):
                return .failure(e)
            }
        }
        try result.get()
    }

    /// A copy of a session's current state.
    public func session(_ key: SessionKey) async -> InviteSession? {
        await onQueue { self.state.withLock { $0.manager[key] } }
    }

    /// A session's state (its ``InviteSession/state``), read in place without copying the
    /// session as ``session(_:)`` does; `nil` when there is no such session.
    public func sessionState(_ key: SessionKey) async -> SessionState? {
        await onQueue { self.state.withLock { $0.manager.state(of: key) } }
    }

    /// The number of live sessions.
    public var sessionCount: Int { state.withLock { $0.manager.count } }

    // MARK: Requests outside dialogs

    /// Sends a request outside any dialog (MESSAGE, OPTIONS, INFO…) to `target` and returns
    /// its final response, or `nil` when it timed out or could not be sent. A 401/407 is
    /// answered once with the configured credentials.
    public func sendRequest(_ method: SIPMethod, to target: SIPURI, body: SessionBody? = nil,
                            headers: [(SIPHeaderName, String)] = []) async -> SIPMessage? {
        let callID = String(BufferedSystemRandom.word(), radix: 36) + "@switchboard"
        let tag = String(BufferedSystemRandom.word(), radix: 36)
        return await sendOutOfDialog(method, to: target, callID: callID, tag: tag, body: body, headers: headers).response
    }

    /// Sends a request outside any dialog with the given Call-ID and From tag; its final response
    /// (nil: timed out or not sent) and the request as last sent (with credentials, if asked).
    private func sendOutOfDialog(_ method: SIPMethod, to target: SIPURI, callID: String, tag: String, body: SessionBody?,
                                 headers: [(SIPHeaderName, String)]) async -> (response: SIPMessage?, request: SIPMessage?) {
        var sentRequest: SIPMessage?
        var digest = configuration.credentials
        var authorization: [(SIPHeaderName, String)] = []
        for cseq in UInt32(1)...2 {
            guard let request = outOfDialogRequest(method, target: target, callID: callID, tag: tag, cseq: cseq, body: body,
                                                   headers: headers + authorization),
                  let peer = destination(of: request) else { return (nil, sentRequest) }
            sentRequest = request
            guard let r = await finalResponse(to: request, peer: peer) else { return (nil, sentRequest) }
            guard let code = r.statusCode, code == 401 || code == 407, cseq == 1, var d = digest else { return (r, sentRequest) }
            let challenges = (try? (code == 401 ? r.wwwAuthenticate() : r.proxyAuthenticate())) ?? []
            var g = SystemRandomNumberGenerator()
            guard let creds = try? d.authorize(challenges: challenges, method: method, requestURI: target.description,
                                               body: body?.bytes ?? [], using: &g) else { return (r, sentRequest) }
            digest = d
            let name: SIPHeaderName = code == 401 ? .authorization : .proxyAuthorization
            authorization = creds.map { (name, $0.description) }
        }
        return (nil, sentRequest)
    }

    // MARK: Dialogs outside INVITE sessions (REFER subscriptions)

    /// Opens a dialog of ours outside the INVITE sessions: a new Call-ID and our tag, under
    /// which the requests the peer sends in it are reported (``Event/dialogRequest(_:_:_:)``)
    /// until ``closeDialog(_:)``. Send its creating request with
    /// ``sendDialogCreatingRequest(_:_:to:headers:)``. Nil when ``maximumDialogs`` are open.
    public func openDialog() -> SessionKey? {
        let key = SessionKey(callID: String(BufferedSystemRandom.word(), radix: 36) + "@switchboard",
                             localTag: String(BufferedSystemRandom.word(), radix: 36))
        return state.withLock { s in
            guard s.dialogs.count < Self.maximumDialogs else { return nil }
            s.dialogs[key] = .some(nil)
            heldDialogs.store(s.dialogs.count, ordering: .relaxed)
            return key
        }
    }

    /// Sends the request that creates the dialog `key` (from ``openDialog()``): a REFER outside
    /// any dialog (RFC 3515 §2.4.4, with `Target-Dialog` per RFC 4538) to `target`, with our
    /// Contact. Returns its final response, nil when it timed out or could not be sent; a 2xx
    /// makes the dialog ours (requests in it may then be sent), anything else leaves the key
    /// open until ``closeDialog(_:)`` (a NOTIFY may still come first, RFC 6665 §4.1.2.4).
    public func sendDialogCreatingRequest(_ key: SessionKey, _ method: SIPMethod, to target: SIPURI,
                                          headers: [(SIPHeaderName, String)] = []) async -> SIPMessage? {
        let (response, request) = await sendOutOfDialog(method, to: target, callID: key.callID, tag: key.localTag, body: nil, headers: headers)
        if let response, let request, let code = response.statusCode, (200..<300).contains(code),
           let dialog = try? Dialog(uacRequest: request, response: response) {
            state.withLock { s in if s.dialogs[key] != nil { s.dialogs[key] = dialog } }
        }
        return response
    }

    /// Answers a request handed to the application (``Event/outOfDialogRefer(_:_:from:)``,
    /// ``Event/dialogRequest(_:_:_:)``). With `createsDialog`, a 2xx to a request outside any
    /// dialog gets our tag and Contact and makes a dialog the agent holds (the REFER's
    /// subscription), returned as its key; nil otherwise, or when that request cannot make one
    /// (no Contact: it is answered 400 instead; ``maximumDialogs`` open: 503).
    @discardableResult
    public func respond(to request: SIPMessage, in transaction: TransactionID, statusCode: Int,
                        headers: [(SIPHeaderName, String)] = [], createsDialog: Bool = false) -> SessionKey? {
        let tag = request.toTag == nil ? String(BufferedSystemRandom.word(), radix: 36) : nil
        var r = SIPMessage(responseTo: request, statusCode: statusCode, toTag: tag)
        for (n, v) in headers { try? r.append(n, v) }
        if let ua = sessionConfiguration.userAgent { try? r.append(.server, ua) }
        var key: SessionKey?
        if createsDialog, request.toTag == nil, (200..<300).contains(statusCode) {
            try? r.append(.contact, sessionConfiguration.contact)
            if configuration.handlesOutOfDialogRefer { try? r.append(.supported, "tdialog") }
            guard let dialog = try? Dialog(uasRequest: request, response: r) else {
                var refusal = SIPMessage(responseTo: request, statusCode: 400, toTag: tag)
                try? refusal.append(.warning, "399 switchboard \"no Contact in a request that creates a dialog\"")
                endpoint.respond(refusal, to: transaction)
                return nil
            }
            let k = SessionKey(callID: dialog.id.callID, localTag: dialog.id.localTag)
            let opened = state.withLock { s -> Bool in
                guard s.dialogs.count < Self.maximumDialogs else { return false }
                s.dialogs[k] = dialog
                heldDialogs.store(s.dialogs.count, ordering: .relaxed)
                return true
            }
            guard opened else {
                endpoint.respond(SIPMessage(responseTo: request, statusCode: 503, toTag: tag), to: transaction)
                return nil
            }
            key = k
        }
        endpoint.respond(r, to: transaction)
        if tracing, let peer = peerForResponse(r) { emitOnQueue(.trace(r, outgoing: true, peer: peer)) }
        return key
    }

    /// Sends a request in a dialog the agent holds outside INVITE sessions (a NOTIFY of a REFER
    /// we accepted), with our Contact; returns its final response, nil when it timed out, could
    /// not be sent, or the dialog is not ours (yet).
    public func sendInDialog(_ key: SessionKey, _ method: SIPMethod, body: SessionBody? = nil,
                             headers: [(SIPHeaderName, String)] = []) async -> SIPMessage? {
        let sc = sessionConfiguration
        let built = state.withLock { s -> SIPMessage? in
            guard let d = s.dialogs[key], var dialog = d else { return nil }
            let via = "SIP/2.0/\(sc.viaTransport) \(sc.viaSentBy);branch=\(TransactionLayer<SIPPeer>.newBranch());rport"
            guard let v = try? Via(via), var m = try? dialog.makeRequest(method, via: v, contact: sc.contact) else { return nil }
            s.dialogs[key] = dialog
            if let ua = sc.userAgent { try? m.append(.userAgent, ua) }
            return m
        }
        guard var request = built else { return nil }
        for (n, v) in headers { try? request.append(n, v) }
        if let b = body { request.setBody(b.bytes, contentType: b.contentType) }
        guard let peer = destination(of: request) else { return nil }
        let response = await finalResponse(to: request, peer: peer)
        return response
    }

    /// Whether the agent holds the dialog `key` outside its INVITE sessions.
    public func holdsDialog(_ key: SessionKey) -> Bool { state.withLock { $0.dialogs[key] != nil } }

    /// Forgets a dialog held outside INVITE sessions: later requests in it get 481.
    public func closeDialog(_ key: SessionKey) {
        state.withLock { s in
            s.dialogs.removeValue(forKey: key)
            heldDialogs.store(s.dialogs.count, ordering: .relaxed)
        }
    }

    private func outOfDialogRequest(_ method: SIPMethod, target: SIPURI, callID: String, tag: String, cseq: UInt32,
                                    body: SessionBody?, headers: [(SIPHeaderName, String)]) -> SIPMessage? {
        let sc = sessionConfiguration
        do {
            var m = try SIPMessage(method: method, uri: target)
            try m.append(.via, "SIP/2.0/\(sc.viaTransport) \(sc.viaSentBy);branch=\(TransactionLayer<SIPPeer>.newBranch());rport")
            try m.append(.maxForwards, "70")
            for r in sc.outboundRoute { try m.append(.route, r) }
            var from = sc.localParty
            from.parameters.set("tag", tag)
            try m.append(.from, from)
            try m.append(.to, NameAddress(uri: target))
            try m.append(.callID, callID)
            try m.append(.cseq, CSeq(cseq, method))
            // REFER and SUBSCRIBE create a dialog: the peer's requests in it come to the Contact.
            if method == .options || method == .refer || method == .subscribe { try m.append(.contact, sc.contact) }
            if let ua = sc.userAgent { try m.append(.userAgent, ua) }
            for (n, v) in headers { try m.append(n, v) }
            if let b = body { m.setBody(b.bytes, contentType: b.contentType) }
            return m
        } catch {
            return nil
        }
    }

    // MARK: Registration

    /// Registers an address of record with `registrar` (its URI is the REGISTER's Request-URI;
    /// it is sent to `peer`, or to the URI's address) and keeps the binding refreshed. The
    /// address is `identity` (nil: ``Configuration/identity``), answering challenges with
    /// `credentials` (nil: the configuration's); the binding's Contact is our address with
    /// `contactUser` as its user part (nil: the identity's), so requests for it come back naming
    /// it. Registering an address again replaces its registration. Its states come as
    /// ``Event/registration(_:aor:)``.
    public func register(registrar: SIPURI, peer: SIPPeer? = nil, expires: UInt32 = 3600,
                         as identity: SIPURI? = nil, contactUser: String? = nil, credentials: DigestClient? = nil) async {
        let aor = identity ?? configuration.identity
        let key = Self.registrationKey(aor)
        await onQueue {
            guard let p = peer ?? self.resolver(registrar, self.configuration.transport) else {
                self.emit(.registration(.failed(.transport), aor: aor))
                return
            }
            let sc = self.sessionConfiguration
            guard case .sip(let contact) = self.contact(user: contactUser ?? aor.user).uri else { return }
            let rc = RegistrationClient.Configuration(registrar: registrar, addressOfRecord: aor, contact: contact,
                                                      expires: expires, viaTransport: sc.viaTransport, viaSentBy: sc.viaSentBy)
            var client = RegistrationClient(configuration: rc, credentials: credentials ?? self.configuration.credentials ?? DigestClient(credentials: []),
                                            seed: BufferedSystemRandom.word())
            let actions = client.start()
            let old = self.state.withLock { s -> TimerService.Handle? in
                let old = s.registrations[key]?.timer
                s.registrations[key] = Registration(client: client, registrar: p, aor: aor)
                return old
            }
            if let old { self.endpoint.timerService.cancel(old) }
            self.applyRegistration(actions, key: key)
        }
    }

    /// Removes the binding of `identity` (nil: ``Configuration/identity``) with a REGISTER of
    /// expires 0; nothing when it is not registered.
    public func unregister(_ identity: SIPURI? = nil) async {
        let key = Self.registrationKey(identity ?? configuration.identity)
        await onQueue {
            let out = self.state.withLock { s -> [RegistrationClient.Action] in s.registrations[key]?.client.stop() ?? [] }
            self.applyRegistration(out, key: key)
        }
    }

    /// Our address changed (a network change, a new interface): listens at `address` (port 0:
    /// any) besides the old points, sends from it from now on, and moves everything that
    /// advertises our address there — the Contact and Via of new requests and of every
    /// session's (the peers learn it from the re-INVITE the application sends next, RFC 3261
    /// §12.2.1.2), and every registration's binding (one REGISTER adds the new Contact and
    /// removes the old). The old points keep listening until ``SIPEndpoint/removeListenPoint(_:)``,
    /// so answers already on their way still arrive. Returns the new point.
    /// - Throws: ``TransportError`` when the address cannot be bound.
    @discardableResult
    public func relocate(to address: SocketAddress) async throws(TransportError) -> SIPPeer {
        let point: SIPEndpoint.ListenPoint = switch configuration.transport {
        case .udp: .udp(address)
        case .tcp: .tcp(address)
        case .tls: .tls(address)
        }
        let peer = try endpoint.addListenPoint(point, preferred: true)
        let host = peer.address.sipHost, port = peer.address.port, sentBy = peer.address.description
        await onQueue {
            self.sessionSettings.withLock { $0.relocate(host: host, port: port, viaSentBy: sentBy) }
            let moves = self.state.withLock { s -> [(String, [RegistrationClient.Action])] in
                s.manager.relocate(host: host, port: port, viaSentBy: sentBy)
                var out: [(String, [RegistrationClient.Action])] = []
                for key in s.registrations.keys.sorted() {
                    guard var contact = s.registrations[key]?.client.configuration.contact else { continue }
                    contact.host = host
                    contact.port = port
                    out.append((key, s.registrations[key]!.client.move(contact: contact, viaSentBy: sentBy)))
                }
                return out
            }
            for (key, actions) in moves { self.applyRegistration(actions, key: key) }
        }
        endpoint.logger.info("relocated", metadata: ["sip.contact": "\(sessionConfiguration.contact)"])
        return peer
    }

    /// Our Contact with `user` as its user part (our address, transport and parameters as in ``contact``).
    public func contact(user: String?) -> NameAddress {
        var c = sessionConfiguration.contact
        guard case .sip(var uri) = c.uri, uri.user != user else { return c }
        uri.user = user
        c.uri = .sip(uri)
        return c
    }

    /// The key of an address of record among our registrations: user and lower-cased host
    /// (scheme, port and parameters do not make another registration).
    public static func registrationKey(_ aor: SIPURI) -> String { "\(aor.user ?? "")@\(aor.host.address.lowercased())" }

    /// Sends `request` in a new client transaction to `peer` and returns its final response
    /// (nil on a timeout or transport error), traced both ways when tracing.
    private func finalResponse(to request: SIPMessage, peer: SIPPeer) async -> SIPMessage? {
        if tracing { emitOnQueue(.trace(request, outgoing: true, peer: peer)) }
        let response: SIPMessage? = await withCheckedContinuation { (c: CheckedContinuation<SIPMessage?, Never>) in
            let once = Mutex(false)
            endpoint.sendRequest(request, to: peer) { event in
                let result: SIPMessage??
                switch event {
                case .provisional: result = nil
                case .final(let m): result = .some(m)
                case .timeout, .transportError: result = .some(nil)
                }
                guard let r = result, once.withLock({ done in defer { done = true }; return !done }) else { return }
                c.resume(returning: r)
            }
        }
        if tracing, let r = response { emitOnQueue(.trace(r, outgoing: false, peer: peer)) }
        return response
    }

    // MARK: The owner's synchronous path

    /// Hands every later event to `handler` on the agent's queue (the thread that read the
    /// message, or the timer's), in order: an owner that handles a message start to finish
    /// there (a `Phone`) pays no stream, task or thread hop per message. The handler returns
    /// false for an event it must handle asynchronously: that event goes to ``events``, and so
    /// does every later one until the owner has called ``eventConsumed()`` for each (order is
    /// kept). Events the handler raises itself (a command it runs with
    /// ``performOnQueue(_:_:)``) are handed to it after it returns. Set once, right after init;
    /// the owner reads ``events`` too (events raised before are there, and count).
    package func setEventHandler(_ handler: @escaping @Sendable (Event) -> Bool) {
        delivery.withLock { $0.handler = handler }
    }

    /// The owner of the ``setEventHandler(_:)`` handler has finished with an event it read from
    /// ``events``.
    package func eventConsumed() {
        delivery.withLock { $0.unconsumed -= 1 }
    }

    /// Runs `body` on the agent's queue and returns its result: where the ``setEventHandler(_:)``
    /// handler runs, and where ``performOnQueue(_:_:)`` and ``sessionOnQueue(_:)`` may be called.
    package func onQueue<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        // Unchecked: the queue runs every item exactly once (no allocation for the check).
        await withUnsafeContinuation { (c: UnsafeContinuation<T, Never>) in
            queue.async { c.resume(returning: body()) }
        }
    }

    /// ``perform(_:_:)`` from code already on the agent's queue (the event handler, an
    /// ``onQueue(_:)`` body): the command runs now; the events it raises follow the handler's.
    package func performOnQueue(_ key: SessionKey, _ command: (inout InviteSession) throws(SessionError) -> [InviteSession.Action]) throws(SessionError) {
        try runOnQueue(key, inPlace: false, command)
    }

    /// ``performOnQueue(_:_:)`` for one of the session's own commands that leave it unchanged
    /// when they throw (``InviteSession/provisional(_:body:)``, ``InviteSession/accept(body:)``,
    /// ``InviteSession/reject(_:reason:headers:)``): run on the stored session, without the
    /// copy (see `SessionManager.performInPlace(_:_:)`).
    package func performInPlaceOnQueue(_ key: SessionKey, _ command: (inout InviteSession) throws(SessionError) -> [InviteSession.Action]) throws(SessionError) {
        try runOnQueue(key, inPlace: true, command)
    }

    /// A session command run now, on a copy of the session or in place, and its outputs applied.
    private func runOnQueue(_ key: SessionKey, inPlace: Bool, _ command: (inout InviteSession) throws(SessionError) -> [InviteSession.Action]) throws(SessionError) {
        guard inPlace else {
            let r = state.withLock { s -> Result<[SessionManager.Output], SessionError> in
                do throws(SessionError) { return .success(try s.manager.perform(key, command)) } catch { return .failure(error) }
            }
            return apply(try r.get())
        }
        // In place: the session's actions as they are (all for `key`), not wrapped in outputs.
        let r = state.withLock { s -> Result<[InviteSession.Action], SessionError> in
            do throws(SessionError) { return .success(try s.manager.actionsInPlace(key, command)) } catch { return .failure(error) }
        }
        apply(key, actions: try r.get())
    }

    /// ``session(_:)`` from code already on the agent's queue.
    package func sessionOnQueue(_ key: SessionKey) -> InviteSession? { state.withLock { $0.manager[key] } }

    /// A session's ``SIPDialog/InviteSession/remoteBody`` from code already on the agent's
    /// queue (read in place: ``sessionOnQueue(_:)`` copies the whole session).
    package func remoteBodyOnQueue(_ key: SessionKey) -> SessionBody? { state.withLock { $0.manager.remoteBody(of: key) } }

    /// ``sessionState(_:)`` from code already on the agent's queue.
    package func sessionStateOnQueue(_ key: SessionKey) -> SessionState? { state.withLock { $0.manager.state(of: key) } }

    /// An event to the owner's handler (on the queue: callers are queue items) or to ``events``.
    private func emit(_ event: consuming Event) {
        enum Route { case stream, later, handler(@Sendable (Event) -> Bool) }
        // The event is moved along (into the pending list, the stream or the handler's loop),
        // never copied: a copy retains its message's buffers and the drop releases them again.
        var event: Event? = consume event
        let route = delivery.withLock { d -> Route in
            if d.running {
                d.pending.append(event.take()!)
                return .later
            }
            guard let h = d.handler, d.unconsumed == 0 else {
                d.unconsumed += 1
                return .stream
            }
            d.running = true
            return .handler(h)
        }
        switch route {
        case .stream:
            continuation.yield(event.take()!)
        case .later:
            break
        case .handler(let handler):
            // Each event goes to the handler while nothing waits in the stream, else after it.
            var direct = true
            while let e = event.take() {
                if !direct || !handler(e) {
                    if direct { delivery.withLock { $0.unconsumed += 1 } }
                    continuation.yield(e)
                }
                delivery.withLock { d in
                    guard !d.pending.isEmpty else {
                        d.running = false
                        return
                    }
                    event = d.pending.removeFirst()
                    direct = d.unconsumed == 0
                    if !direct { d.unconsumed += 1 }
                }
            }
        }
    }

    /// An event raised outside the queue (an application command's trace), handed over on it.
    private func emitOnQueue(_ event: Event) {
        queue.async { self.emit(event) }
    }

    // MARK: Internals

    private func endpointEvent(_ event: EndpointEvent) {
        queue.async { self.handleEndpointEvent(event) }
    }

    private func handleEndpointEvent(_ event: EndpointEvent) {
        switch event {
        case .request(let r):
            if tracing { emit(.trace(r.message, outgoing: false, peer: r.peer)) }
            // Looked for only while such dialogs exist: other requests pay one atomic load.
            if heldDialogs.load(ordering: .relaxed) > 0, let callID = r.message.callID, let toTag = r.message.toTag {
                // A request in a dialog held outside the INVITE sessions (a REFER subscription).
                let key = SessionKey(callID: callID, localTag: toTag)
                let held = state.withLock { s -> Bool? in
                    guard let d = s.dialogs[key] else { return nil }
                    guard var dialog = d else { return true }
                    do throws(DialogError) {
                        try dialog.receive(r.message)
                        s.dialogs[key] = dialog
                        return true
                    } catch {
                        return false
                    }
                }
                if let held {
                    if held {
                        emit(.dialogRequest(key, r.message, r.transaction))
                    } else {
                        // A CSeq going back, or tags that do not fit (RFC 3261 §12.2.2).
                        endpoint.respond(SIPMessage(responseTo: r.message, statusCode: 500), to: r.transaction)
                    }
                    return
                }
            }
            // A request in a session's dialog (a BYE), or an INVITE that makes one: the session's
            // actions as they are.
            if r.message.method == .invite {
                if let new = state.withLock({ $0.manager.newSessionActions(r.message, transaction: r.transaction) }) {
                    apply(new.key, actions: new.actions)
                    if new.incoming { incomingCall(new.key, r.message) }
                    return
                }
            } else if let (key, actions) = state.withLock({ $0.manager.inDialogActions(r.message, transaction: r.transaction) }) {
                return apply(key, actions: actions)
            }
            let out = state.withLock { $0.manager.request(r.message, transaction: r.transaction) }
            apply(out, peer: r.peer)
        case .cancel(let r, let invite):
            if tracing { emit(.trace(r.message, outgoing: false, peer: r.peer)) }
            apply(state.withLock { $0.manager.cancel(r.message, transaction: r.transaction, invite: invite) })
        case .ack(let m, let peer):
            if tracing { emit(.trace(m, outgoing: false, peer: peer)) }
            if let (key, actions) = state.withLock({ $0.manager.ackActions(m) }) { apply(key, actions: actions) }
        case .strayResponse(let m, let peer):
            if tracing { emit(.trace(m, outgoing: false, peer: peer)) }
            apply(state.withLock { $0.manager.response(m) })
        case .serverTransactionFailed(let id, let timer):
            apply(state.withLock { $0.manager.serverTransactionFailed(id, timeout: timer != nil) })
        case .malformed:
            break
        }
    }

    /// Cancels a session's timers of some kinds (those armed).
    private func cancelTimers(_ run: (key: SessionKey, kinds: SessionTimerSet)?) {
        guard let run else { return }
        state.withLock { $0.takeTimers(run.key, run.kinds) }.forEachHandle { endpoint.timerService.cancel($0) }
    }

    private func apply(_ outputs: consuming [SessionManager.Output], peer: SIPPeer? = nil) {
        // Each output moved out of the array, not copied (a copy retains its message's buffers
        // and the array's release gives them back): reversed in place, then popped in order.
        outputs.withUnsafeMutableBufferPointer { $0.reverse() }
        // A session cancels its timers in runs (an ACK: the 2xx's two and the refresh's two):
        // a run is gathered and cancelled under one look-up of its key, before the next output.
        var cancels: (key: SessionKey, kinds: SessionTimerSet)?
        defer { cancelTimers(cancels) }
        while let o = outputs.popLast() {
            // Any output but a cancel ends the run gathered so far (the test binds nothing: no
            // copy of the output).
            if cancels != nil, !o.cancelsTimer { cancelTimers(cancels.take()) }
            switch consume o {
            case .session(let key, let action):
                if case .cancelTimer(let t) = action {
                    if cancels?.key == key {
                        cancels!.kinds.insert(t)
                    } else {
                        cancelTimers(cancels)
                        cancels = (key, SessionTimerSet(t))
                    }
                    continue
                }
                apply(key, action)
            case .respond(let m, let tx):
                endpoint.respond(m, to: tx)
            case .incomingCall(let key, let m):
                incomingCall(key, m)
            case .request(let m, let tx):
                if m.method == .refer, configuration.handlesOutOfDialogRefer, let p = peer {
                    emit(.outOfDialogRefer(m, tx, from: p))
                    continue
                }
                let code: Int
                switch m.method {
                case .options?, .message?: code = 200
                // RFC 6665 §4.1.3: a NOTIFY that matches no subscription of ours.
                case .notify?: code = 481
                // RFC 3515: a REFER outside a dialog is not followed (a phone's policy; see ReferPolicy).
                case .refer?: code = 403
                // Requests that only exist inside a dialog, for a dialog we do not have (§12.2.2).
                case .bye?, .info?, .update?, .prack?: code = 481
                // Known methods a user agent does not serve outside dialogs.
                case .subscribe?, .publish?, .register?: code = 405
                // Methods we do not know at all (§8.2.1).
                default: code = 501
                }
                var random = BufferedSystemRandom()
                var r = SIPMessage(responseTo: m, statusCode: code, toTag: String(UInt32.random(in: 1...UInt32.max, using: &random), radix: 36))
                try? r.append(.allow, sessionConfiguration.allow.map(\.token).joined(separator: ", "))
                if m.method == .options {
                    var tags = sessionConfiguration.reliableProvisional != .unsupported ? ["100rel", "timer"] : ["timer"]
                    if configuration.handlesOutOfDialogRefer { tags.append("tdialog") }
                    try? r.append(.supported, tags.joined(separator: ", "))
                }
                endpoint.respond(r, to: tx)
                if code >= 300 {
                    endpoint.logger.debug("refused an out-of-dialog \(m.method?.token ?? "?") with \(code)",
                                          metadata: ["sip.call_id": "\(m.callID ?? "")", "sip.peer": "\(peer.map { "\($0)" } ?? "?")"])
                }
                if let p = peer { emit(.request(m, from: p)) }
            }
        }
    }

    /// A new call, told to the application (after its session's actions).
    private func incomingCall(_ key: SessionKey, _ m: SIPMessage) {
        if debugs { logger(for: key).debug("incoming call", metadata: ["sip.from": "\((try? m.from().uri.description) ?? "?")"]) }
        emit(.incomingCall(key, m))
    }

    /// The actions of one session (an in-place command's, an ACK's), applied as
    /// ``apply(_:peer:)`` applies outputs (a run of cancels under one look-up of the key),
    /// without an output made for each.
    private func apply(_ key: SessionKey, actions: consuming [InviteSession.Action]) {
        actions.withUnsafeMutableBufferPointer { $0.reverse() }
        var cancels: SessionTimerSet?
        defer { if let kinds = cancels { cancelTimers((key, kinds)) } }
        while let a = actions.popLast() {
            if case .cancelTimer(let t) = a {
                if cancels == nil { cancels = SessionTimerSet(t) } else { cancels!.insert(t) }
                continue
            }
            if let kinds = cancels.take() { cancelTimers((key, kinds)) }
            apply(key, a)
        }
    }

    private func apply(_ key: SessionKey, _ action: InviteSession.Action) {
        switch action {
        case .send(let m):
            // The located target for our initial INVITE (and its CANCEL), else the route or URI.
            let located = (m.method == .invite && m.toTag == nil) || m.method == .cancel ? state.withLock { $0.targets[key]?.current } : nil
            guard let peer = located ?? destination(of: m) else {
                // Nowhere to send: report it as a transport failure of that request.
                if let method = m.method, let seq = try? m.cseq().sequence {
                    let out = state.withLock { st -> [SessionManager.Output] in
                        (try? st.manager.perform(key) { s in s.handle(.requestFailed(method, cseq: seq, timeout: false)) }) ?? []
                    }
                    apply(out)
                }
                return
            }
            if tracing { emit(.trace(m, outgoing: true, peer: peer)) }
            if m.method == .ack {
                endpoint.sendStateless(m, to: peer)
                return
            }
            // The transaction's events are queued behind this block, so its ID is known by the
            // time they are handled.
            let idBox = Mutex<TransactionID?>(nil)
            let id = endpoint.sendRequest(m, to: peer) { [weak self] event in
                guard let self else { return }
                self.queue.async { self.clientEvent(event, transaction: idBox.withLock { $0 }, peer: peer) }
            }
            idBox.withLock { $0 = id }
            state.withLock { s in
                s.manager.clientTransactionStarted(id, for: key, request: m)
                if located != nil, m.method == .invite { s.invites[id] = (key, m) }
            }
        case .respond(let m, let tx):
            if tracing, let p = peerForResponse(m) { emit(.trace(m, outgoing: true, peer: p)) }
            endpoint.respond(m, to: tx)
        case .startTimer(let t, let after):
            let tk = TimerKey(key: key, timer: t)
            let h = endpoint.timerService.schedule(after: after) { [weak self] in
                guard let self else { return }
                self.queue.async { self.sessionTimerFired(tk) }
            }
            let old = state.withLock { s in s.timers[key, default: SessionTimers()].set(t, h) }
            if let o = old { endpoint.timerService.cancel(o) }
        case .cancelTimer(let t):
            if let h = state.withLock({ $0.takeTimer(key, t) }) { endpoint.timerService.cancel(h) }
        case .event(let e):
            if debugs, case .stateChanged(let st) = e { logger(for: key).debug("call state \(st)") }
            if case .redirected(let code, let target) = e {
                // The INVITE goes to a new Request-URI: targets located for the old one do not
                // apply — unless they were the outbound proxy's, which still carries the INVITE.
                if sessionConfiguration.outboundRoute.isEmpty { state.withLock { $0.targets[key] = nil } }
                logger(for: key).info("redirected (\(code)) to \(target)")
            }
            emit(.session(key, e))
            if case .stateChanged(.terminated) = e {
                let armed = state.withLock { s -> SessionTimers? in
                    s.targets[key] = nil
                    // Looked up by the session's key: the cost does not grow with the other
                    // calls' timers (a filter of them all did).
                    guard !s.timers.isEmpty else { return nil }
                    return s.timers.removeValue(forKey: key)
                }
                armed?.forEachHandle { endpoint.timerService.cancel($0) }
            }
        }
    }

    private func clientEvent(_ event: ClientTransactionEvent, transaction: TransactionID?, peer: SIPPeer) {
        switch event {
        case .provisional(let m), .final(let m):
            if tracing { emit(.trace(m, outgoing: false, peer: peer)) }
            // RFC 3263 §4.3: a 503 from a located target moves on to the next one, like a
            // timeout (its transaction has ACKed it); the session never sees it.
            if case .final = event, m.statusCode == 503, let id = transaction, failOver(id, peer: peer, timedOut: false, status: 503) { return }
            apply(state.withLock { s in
                if let id = transaction, let invite = s.invites[id] {
                    // 100 Trying is hop by hop and a 503 may still fail over: neither pins the target.
                    if m.statusCode != 100 && m.statusCode != 503 { s.targets[invite.key]?.answered = true }
                    if case .final = event { s.invites[id] = nil }
                }
                return s.manager.response(m)
            })
        case .timeout, .transportError:
            guard let id = transaction else { return }
            let timedOut: Bool
            if case .timeout = event { timedOut = true } else { timedOut = false }
            if failOver(id, peer: peer, timedOut: timedOut) { return }
            apply(state.withLock { $0.manager.clientTransactionFailed(id, timeout: timedOut) })
        }
    }

    /// RFC 3263 §4.3: our initial INVITE's transaction `id` failed before any response; when
    /// the call has another located target, the same INVITE with a new branch goes there (the
    /// session's CANCEL follows it). Returns whether it did.
    private func failOver(_ id: TransactionID, peer: SIPPeer, timedOut: Bool, status: Int? = nil) -> Bool {
        let next = state.withLock { s -> (SessionKey, SIPMessage, SIPPeer)? in
            guard let invite = s.invites.removeValue(forKey: id), var t = s.targets[invite.key], !t.answered,
                  t.index + 1 < t.peers.count,
                  // Cancelled before any response: nothing to try next (RFC 3261 §9.1).
                  s.manager[invite.key]?.isCancelRequested != true else { return nil }
            t.index += 1
            s.targets[invite.key] = t
            var request = invite.request
            guard let top = request.elementBytes(.via).first, var via = try? Via(bytes: top) else { return nil }
            via.parameters.set("branch", TransactionLayer<SIPPeer>.newBranch())
            request.replaceFirstElement(.via, with: via.description)
            s.manager.transactionTerminated(id)
            _ = try? s.manager.perform(invite.key) { session in
                session.inviteResent(request)
                return []
            }
            return (invite.key, request, t.current)
        }
        guard let (key, request, target) = next else { return false }
        let why = status.map { "\($0)" } ?? (timedOut ? "timeout" : "transport error")
        logger(for: key).info("target \(peer) failed (\(why)); trying \(target)")
        apply(key, .send(request))
        return true
    }

    private func sessionTimerFired(_ tk: TimerKey) {
        let out = state.withLock { s -> [SessionManager.Output] in
            guard s.takeTimer(tk.key, tk.timer) != nil, !s.closed else { return [] }
            return s.manager.timerFired(tk.key, tk.timer)
        }
        apply(out)
    }

    // MARK: Registration internals

    private func applyRegistration(_ actions: [RegistrationClient.Action], key: String) {
        for a in actions {
            switch a {
            case .send(let m):
                guard let peer = state.withLock({ $0.registrations[key]?.registrar }) else { continue }
                if tracing { emit(.trace(m, outgoing: true, peer: peer)) }
                endpoint.sendRequest(m, to: peer) { [weak self] event in
                    guard let self else { return }
                    self.queue.async { self.registrationEvent(event, peer: peer, key: key) }
                }
            case .startTimer(let d):
                let h = endpoint.timerService.schedule(after: d) { [weak self] in
                    guard let self else { return }
                    self.queue.async {
                        let out = self.state.withLock { s -> [RegistrationClient.Action] in
                            guard !s.closed, s.registrations[key]?.timer != nil else { return [] }
                            s.registrations[key]?.timer = nil
                            return s.registrations[key]?.client.handle(.timerFired) ?? []
                        }
                        self.applyRegistration(out, key: key)
                    }
                }
                let old = state.withLock { s -> TimerService.Handle? in
                    guard s.registrations[key] != nil else { return h }
                    let o = s.registrations[key]?.timer
                    s.registrations[key]?.timer = h
                    return o
                }
                if let old { endpoint.timerService.cancel(old) }
            case .cancelTimer:
                if let h = state.withLock({ s -> TimerService.Handle? in
                    let o = s.registrations[key]?.timer
                    s.registrations[key]?.timer = nil
                    return o
                }) { endpoint.timerService.cancel(h) }
            case .state(let st):
                guard let aor = state.withLock({ $0.registrations[key]?.aor }) else { continue }
                endpoint.logger.info("registration \(st)", metadata: ["sip.aor": "\(aor)"])
                emit(.registration(st, aor: aor))
            }
        }
    }

    private func registrationEvent(_ event: ClientTransactionEvent, peer: SIPPeer, key: String) {
        let input: RegistrationClient.Event
        switch event {
        case .provisional(let m):
            if tracing { emit(.trace(m, outgoing: false, peer: peer)) }
            return
        case .final(let m):
            if tracing { emit(.trace(m, outgoing: false, peer: peer)) }
            input = .response(m)
        case .timeout: input = .timeout
        case .transportError: input = .transportError
        }
        let out = state.withLock { $0.registrations[key]?.client.handle(input) ?? [] }
        applyRegistration(out, key: key)
    }

    // MARK: Addresses

    /// The peer a request goes to: its first Route when that is a loose router, else its
    /// Request-URI (RFC 3261 §8.1.2, §16.12 for strict routers).
    func destination(of m: SIPMessage) -> SIPPeer? {
        if let r = try? m.route().first, let u = r.sipURI {
            return resolver(u, transport(of: u))
        }
        guard let u = try? m.requestURI().sipURI else { return nil }
        return resolver(u, transport(of: u))
    }

    private func transport(of u: SIPURI) -> TransportKind {
        TransportKind(transportParameterOf: u) ?? (u.secure ? .tls : configuration.transport)
    }

    private func peerForResponse(_ m: SIPMessage) -> SIPPeer? {
        guard let a = (try? m.topVia())?.responseAddress else { return nil }
        return SIPPeer(transport: configuration.transport, address: a)
    }

    /// The endpoint's logger with a call's Call-ID and local tag as metadata.
    public func logger(for key: SessionKey) -> Logger {
        var l = endpoint.logger
        l[metadataKey: "sip.call_id"] = "\(key.callID)"
        l[metadataKey: "sip.local_tag"] = "\(key.localTag)"
        return l
    }

    /// IP literals and `localhost`; the port from the URI or the transport's default.
    @Sendable public static func literalPeer(_ u: SIPURI, _ kind: TransportKind) -> SIPPeer? {
        let host = u.host.address.lowercased() == "localhost" ? "127.0.0.1" : u.host.address
        let port = u.port ?? (kind == .tls ? 5061 : 5060)
        guard let a = try? SocketAddress(ip: host, port: port) else { return nil }
        return SIPPeer(transport: kind, address: a)
    }
}

/// Lets the endpoint's handler reach the agent that owns it without a retain cycle. Events
/// that arrive before the agent's init finishes find no agent and are dropped (the peer
/// retransmits).
private final class WeakBox: Sendable {
    private struct Ref: ~Copyable { weak var agent: SIPUserAgent? }
    private let ref = Mutex(Ref())
    var agent: SIPUserAgent? {
        get { ref.withLock { $0.agent } }
        set { ref.withLock { $0.agent = newValue } }
    }
}

/// Random words for tags, Call-IDs, seeds and SDP session ids, from the system's cryptographic
/// source (RFC 3261 §19.3 asks for at least 32 random bits in a tag), read 4 KiB at a time:
/// one read per 512 words instead of the `getrandom(2)` that `SystemRandomNumberGenerator`
/// makes for each. Where `/dev/urandom` cannot be read, every word comes from
/// `SystemRandomNumberGenerator`.
package struct BufferedSystemRandom: RandomNumberGenerator, Sendable {
    private struct Pool {
        var words = [UInt64](repeating: 0, count: 512)
        var used = 512
        /// The open `/dev/urandom`; -2 before the first refill, -1 when it cannot be read.
        var file: Int32 = -2
    }

    private static let pool = Mutex(Pool())

    package init() {}

    package mutating func next() -> UInt64 { Self.word() }

    /// The next random word.
    package static func word() -> UInt64 {
        let w = pool.withLock { p -> UInt64? in
            if p.used == p.words.count, !refill(&p) { return nil }
            defer { p.used += 1 }
            return p.words[p.used]
        }
        if let w { return w }
        var system = SystemRandomNumberGenerator()
        return system.next()
    }

    /// Fills the pool from `/dev/urandom`; false when it cannot be read.
    private static func refill(_ p: inout Pool) -> Bool {
        if p.file == -2 { p.file = open("/dev/urandom", O_RDONLY | O_CLOEXEC) }
        guard p.file >= 0 else { return false }
        let file = p.file
        let filled = p.words.withUnsafeMutableBytes { bytes -> Bool in
            var done = 0
            while done < bytes.count {
                let n = read(file, bytes.baseAddress! + done, bytes.count - done)
                if n > 0 { done += n } else if n < 0, errno == EINTR { continue } else { return false }
            }
            return true
        }
        guard filled else { close(file); p.file = -1; return false }
        p.used = 0
        return true
    }
}

private extension SessionManager.Output {
    /// Whether this is a session's ``SIPDialog/InviteSession/Action/cancelTimer(_:)``.
    var cancelsTimer: Bool {
        if case .session(_, .cancelTimer) = self { return true }
        return false
    }
}
