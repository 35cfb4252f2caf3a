#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif
import Synchronization
import Logging
import NetworkIO
import SIPMessage
import SIPRuntime
import SIPTransaction
import SIPTransport
import SIPAuth
import SIPDialog

/// A registrar with a transaction-stateful proxy in front of its location service (RFC 3261
/// §10.3 and §16), on a ``SIPEndpoint``: REGISTER for the domain is answered by
/// ``Registrar`` (digest-authenticated); other requests for a registered address of record are
/// forwarded to its contact, requests carrying a Route or a foreign Request-URI are forwarded
/// there. It adds its Via, decrements Max-Forwards, can Record-Route, relays responses, turns
/// a CANCEL into a CANCEL downstream, and forwards ACKs for 2xx statelessly. An INVITE for an
/// address of record with several bindings is forked to all of them in parallel (RFC 3261
/// §16.6–16.7): provisional responses are relayed, every 2xx is relayed at once and cancels
/// the branches still pending, and when no branch answered 2xx the best final response goes
/// back (a 6xx at once, else the lowest class) once every branch has answered.
///
/// Not a full proxy: other requests go to the newest binding only, no DNS (targets are IP
/// literals), no authentication of non-REGISTER requests, no Max-Breadth (RFC 5393).
public final class ProxyServer: Sendable {
    public struct Configuration: Sendable {
        /// The domain of the registrar (REGISTER Request-URI, address-of-record hosts).
        public var domain: String
        /// Username → password for digest authentication of REGISTER.
        public var users: [String: String]
        /// Whether dialog-creating requests get our Record-Route (so in-dialog requests pass us).
        public var recordRoute: Bool
        public var minExpires: UInt32
        /// The digest algorithms challenged with, one challenge each, in this order (RFC 8760:
        /// strongest first). Some clients (SIPp 3.6) read only the first challenge and know only
        /// MD5: offer `[.md5]` to them.
        public var algorithms: [DigestAlgorithm]
        /// Where the proxy logs: `info` for bindings added or removed, `debug` for every request
        /// refused or answered on the far side's behalf (with the Call-ID). Silent by default.
        public var logger: Logger
        public init(domain: String, users: [String: String], recordRoute: Bool = true, minExpires: UInt32 = 60,
                    algorithms: [DigestAlgorithm] = [.sha256, .md5], logger: Logger = .disabled) {
            self.logger = logger
            self.domain = domain
            self.users = users
            self.recordRoute = recordRoute
            self.minExpires = minExpires
            self.algorithms = algorithms
        }
    }

    /// Counters for logs and tests.
    public struct Statistics: Sendable, Hashable {
        public var registers = 0
        public var forwarded = 0
        public var notFound = 0
        public var relayedResponses = 0
        public var cancels = 0
        public var acks = 0
    }

    struct State {
        var registrar: Registrar
        var rng = BufferedSystemRandom()
        /// INVITE server transaction → its response context: the branches forwarding it.
        var forwards: [TransactionID: ResponseContext] = [:]
        var stats = Statistics()
        /// Request-URIs the location service resolved to a single binding, by their bytes:
        /// emptied whenever a REGISTER is answered (bindings may have changed), an entry
        /// unused once its binding expires.
        var located: [LocatedKey: Located] = [:]
        /// The proxy as the callbacks of its client transactions hold it, made at the first one.
        var weakSelf: WeakProxy?

        /// The proxy's ``WeakProxy`` (made once).
        mutating func weakProxy(_ proxy: ProxyServer) -> WeakProxy {
            if let w = weakSelf { return w }
            let w = WeakProxy(proxy)
            weakSelf = w
            return w
        }
    }

    /// The proxy held weakly (a client transaction may outlive it) by one object every callback
    /// shares, rather than by a weak reference boxed per forwarded request (an allocation each).
    final class WeakProxy: Sendable {
        weak let proxy: ProxyServer?
        init(_ proxy: ProxyServer) { self.proxy = proxy }
    }

    /// How many resolved Request-URIs are kept (all are dropped when one more comes).
    static let locatedLimit = 1024

    /// A Request-URI as written, hashed once (FNV-1a over its bytes).
    struct LocatedKey: Hashable {
        let bytes: ArraySlice<UInt8>
        let hash: Int
        init(_ bytes: ArraySlice<UInt8>) {
            self.bytes = bytes
            hash = Int(truncatingIfNeeded: ProxyServer.fnv1a(bytes))
        }
        func hash(into hasher: inout Hasher) { hasher.combine(hash) }
        /// The hashes, then the bytes in one block comparison (not element by element).
        static func == (a: LocatedKey, b: LocatedKey) -> Bool {
            guard a.hash == b.hash, a.bytes.count == b.bytes.count else { return false }
            return a.bytes.withUnsafeBytes { x in b.bytes.withUnsafeBytes { y in
                x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0
            } }
        }
    }

    /// Where a Request-URI in our domain went: its only live binding's contact, the text the
    /// Request-URI becomes, and the next hop's address for the transport the request came over.
    /// A class: a hit costs one retain, not a copy of every field.
    final class Located: Sendable {
        let contact: SIPURI
        let uriText: String
        /// The binding's `expiresAt` on the monotonic clock (compared without converting the time).
        let expiresAt: Duration
        let arrivedOver: TransportKind
        let peer: SIPPeer?
        /// `binding` (whose contact is `contact`) as found for a request that arrived over `kind`.
        init(_ binding: Registrar.Binding, contact: SIPURI, arrivedOver kind: TransportKind, peer: SIPPeer?) {
            (self.contact, uriText, expiresAt) = (contact, binding.uriText, .seconds(binding.expiresAt))
            (arrivedOver, self.peer) = (kind, peer)
        }
    }

    /// One forwarded copy of an INVITE (RFC 3261 §16.6) and what became of it.
    struct Branch {
        var request: SIPMessage
        var peer: SIPPeer
        /// A provisional response came (a CANCEL may be sent, §9.1).
        var provisional = false
        /// The branch's final status (a synthesized 408/503 when it timed out or failed).
        var final: Int?
        /// Its CANCEL was sent.
        var cancelSent = false
    }

    /// The response context of a forwarded INVITE (§16.7): its branches, the best final
    /// response so far, whether a final response went upstream, whether the branches are to be cancelled.
    struct ResponseContext {
        var branches: [Branch]
        var best: SIPMessage?
        var finalSent = false
        var cancelling = false
        var done: Bool { branches.allSatisfy { $0.final != nil } }
    }

    public let configuration: Configuration
    private let state: Mutex<State>
    private let endpointBox = Mutex<SIPEndpoint?>(nil)
    /// The attached endpoint's bound addresses, read once at ``attach(_:)`` (they are fixed once
    /// bound) rather than formatted again for every request: as a URI writes them (IP text,
    /// port) for `isUs`, and by transport as the start of our Via up to its branch value
    /// (`SIP/2.0/UDP host:port;branch=`) and as our Record-Route value, both written once here.
    private let localPoints = Mutex<(points: [(host: String, port: UInt16)], sentBy: [LocalPoint])>(([], []))

    /// A bound address's Via prefix and Record-Route value, formatted once at ``attach(_:)``.
    struct LocalPoint {
        var kind: TransportKind
        var viaPrefix: String
        var recordRoute: String
        init(kind: TransportKind, hostPort: String) {
            self.kind = kind
            viaPrefix = "SIP/2.0/\(kind.viaToken) \(hostPort);branch="
            recordRoute = kind == .udp ? "<sip:\(hostPort);lr>" : "<sip:\(hostPort);lr;transport=\(kind.viaToken.lowercased())>"
        }
    }

    public init(configuration: Configuration) {
        self.configuration = configuration
        let auth = DigestServer(configuration: .init(realm: configuration.domain, key: Array(UInt64.random(in: 0...UInt64.max).description.utf8), nonceLifetime: 300,
                                                    algorithms: configuration.algorithms),
                                store: DigestPasswordTable(configuration.users))
        state = Mutex(State(registrar: Registrar(configuration: .init(domain: configuration.domain, minExpires: configuration.minExpires),
                                                 authentication: auth)))
    }

    /// Connects the proxy to its endpoint (whose handler calls ``handle(_:)``).
    public func attach(_ endpoint: SIPEndpoint) {
        let locals = endpoint.localAddresses
        let points = locals.map { (host: $0.address.ipString, port: $0.address.port) }
        let sentBy = locals.map { LocalPoint(kind: $0.transport, hostPort: $0.address.description) }
        localPoints.withLock { $0 = (points, sentBy) }
        endpointBox.withLock { $0 = endpoint }
        state.withLock { $0.located.removeAll() }
    }

    /// Disconnects the proxy from its endpoint: later events are ignored, and the proxy no
    /// longer holds the endpoint (one whose handler holds the proxy can then be freed).
    public func detach() {
        endpointBox.withLock { $0 = nil }
    }

    public var statistics: Statistics { state.withLock { $0.stats } }

    /// The live bindings of an address of record.
    public func bindings(of aor: SIPURI) -> [Registrar.Binding] {
        let now = seconds()
        return state.withLock { $0.registrar.lookup(aor, now: now) }
    }

    private func seconds() -> Int64 { MonotonicClock.now.sinceOrigin.components.seconds }

    /// Handles one endpoint event.
    public func handle(_ event: EndpointEvent) {
        guard let endpoint = endpointBox.withLock({ $0 }) else { return }
        switch event {
        case .request(let r):
            request(r, endpoint)
        case .cancel(let c, let invite):
            endpoint.respond(SIPMessage(responseTo: c.message, statusCode: 200), to: c.transaction)
            cancel(invite: invite, endpoint)
        case .ack(let m, _):
            forwardStateless(m, endpoint)
        case .strayResponse(let m, _):
            relayStateless(m, endpoint)
        case .serverTransactionFailed, .malformed:
            break
        }
    }

    // MARK: Requests

    /// Logs a request the proxy answers itself with an error (`debug`; a 401/407 challenge too).
    private func refused(_ m: SIPMessage, _ code: Int, _ peer: SIPPeer) {
        configuration.logger.debug("\(m.method?.token ?? "?") answered \(code)", metadata: ["sip.call_id": "\(m.callID ?? "")", "sip.peer": "\(peer)"])
    }

    private func request(_ r: IncomingRequest, _ endpoint: SIPEndpoint) {
        var m = r.message
        if m.method == .register, isOurDomain(m) {
            let now = seconds()
            // A REGISTER sent to our address rather than our domain registers in the domain.
            let resp = state.withLock { s in
                s.stats.registers += 1
                s.located.removeAll(keepingCapacity: true)
                return s.registrar.handle(m, now: now, requestURIChecked: true, using: &s.rng)
            }
            if resp.statusCode == 200 {
                configuration.logger.info("REGISTER accepted", metadata: ["sip.to": "\((try? m.to().uri.description) ?? "?")", "sip.peer": "\(r.peer)"])
            } else {
                refused(m, resp.statusCode ?? 0, r.peer)
            }
            endpoint.respond(resp, to: r.transaction)
            return
        }
        let maxForwards = (try? m.maxForwards()) ?? nil
        if let mf = maxForwards, mf <= 0 {
            refused(m, 483, r.peer)
            endpoint.respond(SIPMessage(responseTo: m, statusCode: 483), to: r.transaction)
            return
        }
        let next: Next
        var edits = SIPMessage.ProxyEdits()
        switch route(m, arrivedOver: r.peer.transport, endpoint, edits: &edits) {
        case .forward(let n):
            next = n
        case .fork(let contacts):
            fork(m, to: contacts, edits: edits, maxForwards: maxForwards, r, endpoint)
            return
        case .refuse(let code):
            if code == 404 || code == 481 { state.withLock { $0.stats.notFound += 1 } }
            refused(m, code, r.peer)
            endpoint.respond(SIPMessage(responseTo: m, statusCode: code), to: r.transaction)
            return
        }
        guard let peer = peer(of: next, arrivedOver: r.peer.transport) else {
            refused(m, 502, r.peer)
            endpoint.respond(SIPMessage(responseTo: m, statusCode: 502), to: r.transaction)
            return
        }
        decorate(&edits, m, transport: peer.transport, maxForwards: maxForwards, dialogCreating: Self.createsDialog(m.method) && m.toTagBytes == nil)
        guard let forwarded = m.forwarded(edits) else {
            refused(m, 500, r.peer)
            endpoint.respond(SIPMessage(responseTo: m, statusCode: 500), to: r.transaction)
            return
        }
        m = forwarded
        let serverTx = r.transaction
        let method = m.method
        // Noted before sending: the response may come back before sendRequest returns.
        let weakSelf = state.withLock { s in
            s.stats.forwarded += 1
            if method == .invite { s.forwards[serverTx] = ResponseContext(branches: [Branch(request: m, peer: peer)]) }
            return s.weakProxy(self)
        }
        endpoint.sendRequest(m, to: peer) { event in
            weakSelf.proxy?.clientEvent(event, server: serverTx, branch: 0, method: method)
        }
    }

    /// Forwards an INVITE to every contact in parallel (§16.6: a copy per target, each with a
    /// branch of its own), under one response context.
    private func fork(_ m: SIPMessage, to contacts: [SIPURI], edits: SIPMessage.ProxyEdits, maxForwards: Int?, _ r: IncomingRequest,
                      _ endpoint: SIPEndpoint) {
        var branches: [Branch] = []
        for contact in contacts {
            guard let peer = SIPUserAgent.literalPeer(contact, transportOf(contact, default: r.peer.transport)) else { continue }
            var e = edits
            e.requestURI = contact.description
            decorate(&e, m, transport: peer.transport, maxForwards: maxForwards, dialogCreating: true)
            guard let copy = m.forwarded(e) else { continue }
            branches.append(Branch(request: copy, peer: peer))
        }
        guard !branches.isEmpty else {
            refused(m, 502, r.peer)
            endpoint.respond(SIPMessage(responseTo: m, statusCode: 502), to: r.transaction)
            return
        }
        let serverTx = r.transaction
        let weakSelf = state.withLock { s in
            s.stats.forwarded += branches.count
            s.forwards[serverTx] = ResponseContext(branches: branches)
            return s.weakProxy(self)
        }
        for (k, b) in branches.enumerated() {
            endpoint.sendRequest(b.request, to: b.peer) { event in
                weakSelf.proxy?.clientEvent(event, server: serverTx, branch: k, method: .invite)
            }
        }
    }

    /// INVITE, SUBSCRIBE and REFER create dialogs (they get our Record-Route).
    private static func createsDialog(_ method: SIPMethod?) -> Bool {
        switch method {
        case .invite?, .subscribe?, .refer?: return true
        default: return false
        }
    }

    /// Where a request goes (the edits that routing makes are written into the caller's).
    enum Routing { case forward(Next), fork([SIPURI]), refuse(Int) }

    /// The next hop of a forwarded request: a URI, or a binding the location service gave
    /// (with the address for the transport the request arrived over; never us).
    enum Next {
        case uri(SIPURI)
        case located(Located)
    }

    /// The address of `next` (an IP literal; `nil` otherwise).
    private func peer(of next: Next, arrivedOver kind: TransportKind) -> SIPPeer? {
        switch next {
        case .uri(let u):
            return SIPUserAgent.literalPeer(u, transportOf(u, default: kind))
        case .located(let l):
            return l.arrivedOver == kind ? l.peer : SIPUserAgent.literalPeer(l.contact, transportOf(l.contact, default: kind))
        }
    }

    /// Where a request goes (§16.4–16.6): a Route naming us is removed; the next Route, else a
    /// Request-URI in our domain (or naming us) looked up in the location service (the
    /// Request-URI becomes the newest registered contact), else the Request-URI. The edits
    /// that routing makes (the Route removed, the new Request-URI) go into `edits`, before the
    /// forwarded copy gets our Via (written in place: no copy of the edits per request).
    private func route(_ m: SIPMessage, arrivedOver kind: TransportKind, _ endpoint: SIPEndpoint,
                       edits: inout SIPMessage.ProxyEdits) -> Routing {
        // The Route set is parsed once: when its first entry names us it is removed and the
        // next one (if any) is where the request goes.
        if m.firstValueBytes(.route) != nil, let routes = try? m.route(), let first = routes.first {
            var next: SIPURI? = first.sipURI
            if let u = next, isUs(u, endpoint) {
                edits.dropFirstElement = .route
                next = routes.count > 1 ? routes[1].sipURI : nil
            }
            if let u = next { return .forward(.uri(u)) }
        }
        // A Request-URI resolved before to a binding still live: no parsing, no lookup.
        let key = m.requestURIBytes.map(LocatedKey.init)
        if let key, let hit = state.withLock({ $0.located[key] }), MonotonicClock.now.sinceOrigin < hit.expiresAt {
            edits.requestURI = hit.uriText
            return .forward(.located(hit))
        }
        guard let ruri = try? m.requestURI().sipURI else { return .refuse(416) }
        guard isOurDomainOrAddress(ruri, endpoint) else { return .forward(.uri(ruri)) }
        var aor = ruri
        aor.host = .domain(configuration.domain)
        aor.port = nil
        aor.parameters = []
        let now = seconds()
        // An address of record registered under our address (a REGISTER whose To names it
        // rather than our domain) is found under that address.
        var named = ruri
        named.port = nil
        named.parameters = []
        var bindings = state.withLock { s in
            let inDomain = s.registrar.lookup(aor, now: now)
            return inDomain.isEmpty && !isDomain(ruri.host.address) ? s.registrar.lookup(named, now: now) : inDomain
        }
        if bindings.count > 1 { bindings.sort { $0.expiresAt > $1.expiresAt } }
        guard let binding = bindings.first, let contact = binding.contact.sipURI else {
            return .refuse(m.toTagBytes == nil ? 404 : 481)
        }
        // A contact that names us again would loop.
        if isUs(contact, endpoint) { return .refuse(482) }
        // A new INVITE for several bindings is forked to them all, newest first.
        if bindings.count > 1, m.method == .invite, m.toTagBytes == nil {
            let contacts = bindings.compactMap { $0.contact.sipURI }.filter { !isUs($0, endpoint) }
            if contacts.count > 1 { return .fork(contacts) }
        }
        edits.requestURI = binding.uriText
        let peer = SIPUserAgent.literalPeer(contact, transportOf(contact, default: kind))
        let entry = Located(binding, contact: contact, arrivedOver: kind, peer: peer)
        if bindings.count == 1, let key {
            // The key keeps its own copy of the bytes, not the request's storage.
            state.withLock { s in
                if s.located.count >= Self.locatedLimit { s.located.removeAll(keepingCapacity: true) }
                s.located[LocatedKey(ArraySlice(Array(key.bytes)))] = entry
            }
        }
        return .forward(.located(entry))
    }

    /// What the response context makes of a branch's response (§16.7): relay it or not, and
    /// the branches to CANCEL now.
    private struct Disposition {
        var relay: SIPMessage?
        var cancel: [Branch] = []
    }

    private func clientEvent(_ event: ClientTransactionEvent, server: TransactionID, branch k: Int, method: SIPMethod?) {
        guard let endpoint = endpointBox.withLock({ $0 }) else { return }
        let response: SIPMessage
        switch event {
        case .provisional(let resp), .final(let resp):
            guard let code = resp.statusCode, code != 100, let out = resp.forwarded(Self.popVia) else { return }
            response = out
        case .timeout, .transportError:
            guard let req = state.withLock({ $0.forwards[server]?.branches[k].request }) else { return }
            var r = SIPMessage(responseTo: req, statusCode: event.isTimeout ? 408 : 503)
            configuration.logger.debug("no answer from the next hop: \(event.isTimeout ? 408 : 503) on its behalf",
                                       metadata: ["sip.call_id": "\(req.callID ?? "")"])
            r.removeFirstElement(.via)
            response = r
        }
        // Only an INVITE has a response context (is forked, cancelled): another request's
        // response goes up as it is, without the context's look-up.
        guard method == .invite else {
            state.withLock { $0.stats.relayedResponses += 1 }
            endpoint.respond(response, to: server)
            return
        }
        // One lock for the disposition, the count and the end of a context all answered.
        let d = state.withLock { s in
            let d = Self.dispose(response, branch: k, in: &s.forwards[server])
            if d.relay != nil { s.stats.relayedResponses += 1 }
            return d
        }
        if let relay = d.relay { endpoint.respond(relay, to: server) }
        for b in d.cancel { sendCancel(b, endpoint) }
    }

    /// §16.7 steps 5, 6 and 10 for one response of branch `k` in `context` (`nil`: an INVITE
    /// without one, or a 2xx retransmitted after the context ended: relayed);
    /// the context ends (becomes `nil`) once every branch has answered.
    private static func dispose(_ r: SIPMessage, branch k: Int, in context: inout ResponseContext?) -> Disposition {
        guard context?.branches.indices.contains(k) == true else {
            if context?.done == true { context = nil }
            return Disposition(relay: r)
        }
        // The context changes where it is stored (no copy of it, its branches change in
        // place), and ends unless a branch has not answered (one dictionary access for it all).
        defer { if context?.done == true { context = nil } }
        return dispose(r, branch: k, in: &context!)
    }

    /// ``dispose(_:branch:in:)`` for a context that has branch `k`.
    private static func dispose(_ r: SIPMessage, branch k: Int, in c: inout ResponseContext) -> Disposition {
        let code = r.statusCode ?? 0
        if code < 200 {
            c.branches[k].provisional = true
            var d = Disposition(relay: c.finalSent ? nil : r)
            // A branch to cancel that had not answered yet may be cancelled now (§9.1).
            if c.cancelling, c.branches[k].final == nil, !c.branches[k].cancelSent {
                c.branches[k].cancelSent = true
                d.cancel.append(c.branches[k])
            }
            return d
        }
        let firstFinal = c.branches[k].final == nil
        if firstFinal { c.branches[k].final = code }
        // Step 5: a 2xx goes up at once (every one: each is a dialog), a 6xx too when nothing
        // final went before; step 10: then the other branches are cancelled.
        if (200...299).contains(code) || (code >= 600 && !c.finalSent) {
            c.finalSent = true
            return Disposition(relay: r, cancel: firstFinal ? cancelling(&c) : [])
        }
        guard firstFinal, !c.finalSent else { return Disposition(relay: nil) }
        // Step 6: the best response so far (lowest class; the first of its class).
        if c.best.map({ ($0.statusCode ?? 0) / 100 > code / 100 }) ?? true { c.best = r }
        guard c.done else { return Disposition(relay: nil) }
        c.finalSent = true
        return Disposition(relay: c.best)
    }

    /// Marks the context as cancelling and returns the pending branches that may be cancelled now
    /// (those with a provisional response; the others when theirs comes).
    private static func cancelling(_ c: inout ResponseContext) -> [Branch] {
        c.cancelling = true
        var out: [Branch] = []
        for i in c.branches.indices where c.branches[i].final == nil && c.branches[i].provisional && !c.branches[i].cancelSent {
            c.branches[i].cancelSent = true
            out.append(c.branches[i])
        }
        return out
    }

    private func cancel(invite: TransactionID, _ endpoint: SIPEndpoint) {
        let pending = state.withLock { s -> [Branch] in
            s.stats.cancels += 1
            guard s.forwards[invite] != nil else { return [] }
            // A CANCEL goes now on every branch that answered provisionally; the others get
            // theirs with their first provisional response (§9.1, §16.10).
            return Self.cancelling(&s.forwards[invite]!)
        }
        for b in pending { sendCancel(b, endpoint) }
    }

    /// §16.10: CANCELs the forwarded INVITE `b` with its own top Via (our branch).
    private func sendCancel(_ b: Branch, _ endpoint: SIPEndpoint) {
        guard var c = try? SIPMessage(method: .cancel, requestURI: b.request.requestURIText ?? "") else { return }
        do {
            try c.append(.via, b.request.topVia())
            try c.append(.maxForwards, "70")
            for r in try b.request.route() { try c.append(.route, r) }
            try c.append(.from, b.request.from())
            try c.append(.to, b.request.to())
            try c.append(.callID, b.request.callID ?? "")
            try c.append(.cseq, CSeq(b.request.cseq().sequence, .cancel))
        } catch {
            return
        }
        endpoint.sendRequest(c, to: b.peer) { _ in }
    }

    /// An ACK for a 2xx passes statelessly (§16.11), with our Via.
    private func forwardStateless(_ ack: SIPMessage, _ endpoint: SIPEndpoint) {
        let maxForwards = (try? ack.maxForwards()) ?? nil
        if let mf = maxForwards, mf <= 0 { return }
        var edits = SIPMessage.ProxyEdits()
        guard case .forward(let next) = route(ack, arrivedOver: .udp, endpoint, edits: &edits), !isUs(next, endpoint),
              let peer = peer(of: next, arrivedOver: .udp) else { return }
        decorate(&edits, ack, transport: peer.transport, maxForwards: maxForwards, dialogCreating: false)
        guard let m = ack.forwarded(edits) else { return }
        state.withLock { $0.stats.acks += 1 }
        endpoint.sendStateless(m, to: peer)
    }

    /// A response that matched no transaction (a 2xx retransmitted after ours ended): pop our
    /// Via and send it to the next one.
    private func relayStateless(_ resp: SIPMessage, _ endpoint: SIPEndpoint) {
        guard let vias = try? resp.via(), vias.count >= 2, let out = resp.forwarded(Self.popVia) else { return }
        let next = vias[1]
        guard let a = next.responseAddress else { return }
        let kind: TransportKind = switch next.transport.uppercased() { case "TCP": .tcp; case "TLS": .tls; default: .udp }
        endpoint.sendStateless(out, to: SIPPeer(transport: kind, address: a))
    }

    // MARK: Helpers

    /// A response relayed upstream loses our Via (§16.7 step 3).
    private static let popVia: SIPMessage.ProxyEdits = {
        var e = SIPMessage.ProxyEdits()
        e.dropFirstElement = .via
        return e
    }()

    /// Adds to `edits` what every forwarded request gets (§16.6): Max-Forwards one less than
    /// `maxForwards` (the request's, 70 when it has none), our Record-Route on a
    /// dialog-creating request, our Via with a new branch (one derived from the incoming
    /// branch for a stateless ACK).
    private func decorate(_ edits: inout SIPMessage.ProxyEdits, _ m: SIPMessage, transport: TransportKind, maxForwards: Int?,
                          dialogCreating: Bool) {
        // The first bound address of the transport, else the first of all.
        guard let local = localPoints.withLock({ l in l.sentBy.first { $0.kind == transport } ?? l.sentBy.first }) else { return }
        edits.maxForwards = max(0, (maxForwards ?? 70) - 1)
        if dialogCreating && configuration.recordRoute {
            edits.recordRoute = local.recordRoute
        }
        if m.method == .ack {
            // Stateless forwarding: a branch derived from the incoming one (§16.11), marked `a`:
            // the same incoming branch gives the same branch.
            edits.via = .init(prefix: local.viaPrefix, tag: "a", branch: Self.fnv1a(m.topViaBranchBytes ?? []), suffix: ";rport")
        } else {
            // A random branch, as TransactionLayer.newBranch() writes it (written in place), from
            // the runtime's buffered system random source (no system call per request).
            edits.via = .init(prefix: local.viaPrefix, branch: BufferedSystemRandom.word(), suffix: ";rport")
        }
    }

    /// The 64-bit FNV-1a hash of `bytes`.
    static func fnv1a(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.withUnsafeBufferPointer { p in
            var h: UInt64 = 0xCBF2_9CE4_8422_2325
            for b in p { h = (h ^ UInt64(b)) &* 0x100_0000_01B3 }
            return h
        }
    }

    /// The transport a URI names (`;transport=`, or TLS for a `sips:` URI), else the one the
    /// request came over. TLS is used as named: the endpoint connects as a TLS client (with its
    /// ``SIPEndpoint/Configuration/tls`` trust) when it has a TLS listen point; without one the
    /// send fails and the request is answered 503.
    private func transportOf(_ u: SIPURI, default kind: TransportKind) -> TransportKind {
        TransportKind(transportParameterOf: u) ?? (u.secure ? .tls : kind)
    }

    private func isOurDomain(_ m: SIPMessage) -> Bool {
        guard let u = try? m.requestURI().sipURI else { return false }
        return isDomain(u.host.address) || (endpointBox.withLock { $0 }.map { isUs(u, $0) } ?? false)
    }

    private func isOurDomainOrAddress(_ u: SIPURI, _ endpoint: SIPEndpoint) -> Bool {
        isDomain(u.host.address) || isUs(u, endpoint)
    }

    /// Whether `host` is our domain (case-insensitive; compared on the bytes when both are ASCII).
    private func isDomain(_ host: String) -> Bool {
        let a = host.utf8, b = configuration.domain.utf8
        guard a.count == b.count else { return false }
        var ascii = true
        for (x, y) in zip(a, b) {
            if x >= 0x80 || y >= 0x80 { ascii = false; break }
            let lx = x &- 0x41 < 26 ? x | 0x20 : x, ly = y &- 0x41 < 26 ? y | 0x20 : y
            if lx != ly { return false }
        }
        return ascii || host.lowercased() == configuration.domain.lowercased()
    }

    /// A located binding never names us (that is refused with 482 before it is kept).
    private func isUs(_ next: Next, _ endpoint: SIPEndpoint) -> Bool {
        if case .uri(let u) = next { return isUs(u, endpoint) }
        return false
    }

    private func isUs(_ u: SIPURI, _ endpoint: SIPEndpoint) -> Bool {
        if u.port == nil && isDomain(u.host.address) { return true }
        let port = u.port ?? 5060
        return localPoints.withLock { l in l.points.contains { $0.port == port && $0.host == u.host.address } }
    }
}

extension ClientTransactionEvent {
    var isTimeout: Bool {
        if case .timeout = self { return true }
        return false
    }
}
