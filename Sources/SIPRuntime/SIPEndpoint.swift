import Synchronization
import Logging
import NetworkIO
import SIPMessage
import SIPTransaction
import SIPTransport

/// Where a message came from or goes to: a transport, an address and, for connections, which
/// connection.
public struct SIPPeer: Hashable, Sendable, CustomStringConvertible {
    // Six words: the address's three (its ``SocketAddress/meta`` word also holds the transport
    // and whether there is a connection), the connection's number and the server name. Peers
    // ride in every event and output of the runtime, and a struct of more than six scalars is
    // copied and destroyed through its value witnesses in other modules.
    private var high: UInt64
    private var low: UInt64
    /// ``SocketAddress/meta``, the transport in bits 48-55 and bit 56 set when `connectionNumber`
    /// names a connection.
    private var meta: UInt64
    private var connectionNumber: UInt64
    /// For TLS: the name to send as SNI and to verify the certificate against (RFC 5922); the
    /// address is verified when it is `nil`.
    public var serverName: String?

    private static let transportShift: UInt64 = 48
    private static let connectionBit: UInt64 = 1 << 56

    public init(transport: TransportKind, address: SocketAddress, connection: ConnectionID? = nil, serverName: String? = nil) {
        high = address.high
        low = address.low
        meta = address.meta | SIPPeer.code(transport) << SIPPeer.transportShift | (connection == nil ? 0 : SIPPeer.connectionBit)
        connectionNumber = connection?.rawValue ?? 0
        self.serverName = serverName
    }

    private static func code(_ t: TransportKind) -> UInt64 {
        switch t {
        case .udp: return 0
        case .tcp: return 1
        case .tls: return 2
        }
    }

    public var transport: TransportKind {
        get {
            switch (meta >> SIPPeer.transportShift) & 0xFF {
            case 0: return .udp
            case 1: return .tcp
            default: return .tls
            }
        }
        set { meta = meta & ~(0xFF << SIPPeer.transportShift) | SIPPeer.code(newValue) << SIPPeer.transportShift }
    }

    public var address: SocketAddress {
        get { SocketAddress(high: high, low: low, meta: meta) }
        set {
            high = newValue.high
            low = newValue.low
            meta = meta & ~SocketAddress.metaMask | newValue.meta
        }
    }

    public var connection: ConnectionID? {
        get { meta & SIPPeer.connectionBit != 0 ? ConnectionID(rawValue: connectionNumber) : nil }
        set {
            connectionNumber = newValue?.rawValue ?? 0
            meta = newValue == nil ? meta & ~SIPPeer.connectionBit : meta | SIPPeer.connectionBit
        }
    }

    public var description: String { "\(transport.viaToken.lowercased()):\(address)" + (connection.map { " \($0)" } ?? "") }
}

/// A request received in a new server transaction. Answer it with ``SIPEndpoint/respond(_:to:)``.
public struct IncomingRequest: Sendable {
    public let message: SIPMessage
    public let peer: SIPPeer
    public let transaction: TransactionID
}

/// What the endpoint tells its transaction user.
public enum EndpointEvent: Sendable {
    /// A new request (not ACK, not CANCEL).
    case request(IncomingRequest)
    /// A CANCEL for the INVITE server transaction `invite`; answer the CANCEL with 200 and
    /// the INVITE with 487.
    case cancel(IncomingRequest, invite: TransactionID)
    /// An ACK that matched no transaction: the ACK for a 2xx.
    case ack(SIPMessage, from: SIPPeer)
    /// A response that matched no client transaction (a retransmitted 2xx, another fork).
    case strayResponse(SIPMessage, from: SIPPeer)
    /// A server transaction timed out (Timer H: no ACK) or its transport failed.
    case serverTransactionFailed(TransactionID, TransactionTimer?)
    /// A datagram or stream message that could not be parsed.
    case malformed(source: SocketAddress, error: SIPParseError)
}

/// What a client transaction reports to the request's sender.
public enum ClientTransactionEvent: Sendable {
    case provisional(SIPMessage)
    case final(SIPMessage)
    /// Timer B or F fired without a final response.
    case timeout
    case transportError
}

/// Counters for the `serve` statistics line and for benchmarks.
public struct EndpointStatistics: Sendable, Hashable {
    public var requestsReceived = 0
    public var responsesReceived = 0
    public var messagesSent = 0
    public var retransmissionsSent = 0
    public var retransmissionsReceived = 0
    public var sendErrors = 0
    public var malformed = 0
    /// Requests that parsed but failed RFC 3261 validation, answered statelessly (400/505/…).
    public var rejected = 0
    /// Requests moved from UDP to TCP because of their size (RFC 3261 §18.1.1).
    public var switchedToTCP = 0
    public var timeouts = 0
    public var liveTransactions = 0

    /// All zero.
    public init() {}
}

/// The live runtime: real sockets, the wall clock, and the pure ``TransactionLayer`` under one
/// lock. Transport threads and the timer thread feed events in; the layer's outputs are carried
/// out after the lock is released (sends, TU callbacks), so a callback may call back in.
public final class SIPEndpoint: Sendable, TimerTarget {
    /// Where to listen.
    public enum ListenPoint: Sendable, Hashable {
        case udp(SocketAddress)
        case tcp(SocketAddress)
        /// TLS; certificates and trust come from ``Configuration/tls``.
        case tls(SocketAddress)
    }

    public struct Configuration: Sendable {
        public var listen: [ListenPoint]
        public var timers: TransactionTimers
        public var udp: UDPTransportConfiguration
        public var tcp: TCPTransportConfiguration
        public var tls: TLSConfiguration
        /// When set, every message sent or received (and every malformed datagram received) is
        /// mirrored to it, e.g. to record a pcapng capture of the endpoint's own traffic. Over
        /// TLS the records hold the plaintext.
        public var capture: (any SIPTrafficSink)?
        /// Where the endpoint and its transports log: `info` for listening and closing, `debug`
        /// for every message dropped or refused and every transaction that timed out or failed,
        /// `trace` for every message sent and received (with the peer and Call-ID as metadata).
        /// The level is read once, when the endpoint starts. Silent by default.
        public var logger: Logger
        /// A fault-injection hook for conformance testing (`switchboard answer --misbehave`):
        /// when set, every message is passed through it just before it is written to a socket,
        /// and what it returns is sent instead (`nil`: nothing is sent). It sees retransmissions
        /// too. Leave it `nil` (the default) for a conforming endpoint.
        public var outboundRewrite: (@Sendable (SIPMessage) -> SIPMessage?)?
        public init(listen: [ListenPoint], timers: TransactionTimers = .rfc3261, udp: UDPTransportConfiguration = .init(),
                    tcp: TCPTransportConfiguration = .init(), tls: TLSConfiguration = .init(), capture: (any SIPTrafficSink)? = nil,
                    logger: Logger = .disabled) {
            self.logger = logger
            self.listen = listen
            self.timers = timers
            self.udp = udp
            self.tcp = tcp
            self.tls = tls
            self.capture = capture
        }
    }

    struct Core {
        var layer: TransactionLayer<SIPPeer>
        var clientHandlers: [TransactionID: ClientHandler] = [:]
        /// The running timers of each transaction that has any (one entry per transaction, so
        /// ending it is one removal).
        /// The running timers of each transaction, in the slot the layer gave it.
        var timers = SlotTable<RunningTimers>()
        var stats = EndpointStatistics()
        /// Client transactions waiting on a connection being opened in the background, so a
        /// failed connect fails them (RFC 3261 §8.1.3.1).
        var connecting: [ConnectionID: Set<TransactionID>] = [:]
        /// Connections whose background connect failed before any transaction was noted as
        /// waiting on them (the failure can be delivered before `send(to:)` returns its id),
        /// oldest first, at most ``recentFailureLimit``.
        var recentlyFailed: Set<ConnectionID> = []
        var recentlyFailedOrder: [ConnectionID] = []
        /// The last client transactions sent over UDP and where (a ring of
        /// ``udpSentLimit``), so an ICMP error for a destination fails those still waiting on it.
        var udpSent: [(address: SocketAddress, id: TransactionID)] = []
        var udpSentNext = 0

        /// Forgets a transaction's timer (and the transaction's entry with its last one);
        /// returns its handle, nil when it was not running.
        mutating func forgetTimer(_ id: TransactionID, _ t: TransactionTimer) -> TimerService.Handle? {
            let s = id.slot
            var empty = false
            let h = timers.modify(s) { r -> TimerService.Handle? in
                guard r.owner == id else { return nil }
                let h = r.remove(t)
                empty = r.isEmpty
                return h
            } ?? nil
            if empty { timers.take(s) }
            return h
        }
    }

    /// Client transactions over UDP remembered for ICMP errors (older ones wait for their timer).
    static let udpSentLimit = 1024

    struct TimerKey: Hashable { var id: TransactionID; var timer: TransactionTimer }

    /// What to carry out after the lock is released: the layer's outputs as they came (the
    /// array is kept, not copied element by element into another: a copy of an output goes
    /// through the generic enum's value witness), with the timers already started or cancelled
    /// under the lock. Client-transaction events carry their handler, looked up under the lock
    /// (a transaction may terminate — Timer K is 0 s on TCP — on the timer thread before this
    /// thread delivers its response); each replaces the output at its index.
    struct Work {
        var outputs: [TransactionLayer<SIPPeer>.Output] = []
        /// In increasing index order; empty (no allocation) unless a client transaction reports.
        var client: [(index: Int, handler: ClientHandler, event: ClientTransactionEvent)] = []
        /// A new INVITE server transaction's 100 Trying timer, not started yet: it is started
        /// after the TU has seen the request, and only if the TU has not answered by then (a TU
        /// that answers at once — the usual server — costs no timer to start and cancel).
        var trying: (id: TransactionID, after: Duration)?

        static var none: Work { Work() }

        /// Appends another batch after this one.
        mutating func append(_ other: Work) {
            let offset = outputs.count
            outputs.append(contentsOf: other.outputs)
            for e in other.client { client.append((e.index + offset, e.handler, e.event)) }
        }
    }

    private let core: Mutex<Core>
    private let handler: EventHandler
    private let udp: Mutex<[UDPTransport]>
    private let tcp: Mutex<[TCPTransport]>
    private let tls: Mutex<[TLSTransport]>
    /// The transports' settings, for listen points added later.
    private let transportConfiguration: (UDPTransportConfiguration, TCPTransportConfiguration, TLSConfiguration)
    /// The capture sink, and what it needs to know of connections (see ``CaptureTracker``).
    private let capture: (any SIPTrafficSink)?
    /// Whether ``capture`` is set: tested per message instead of the optional existential,
    /// whose test copies (and retains) it (~10k instructions a call in `serve --dialogs`).
    private let capturing: Bool
    private let tracker = Mutex(CaptureTracker())
    /// The configuration's logger, and whether it wants `trace` (read once: the per-message
    /// check costs nothing when tracing is off).
    public let logger: Logger
    private let traces: Bool
    /// The configuration's fault-injection hook (see ``Configuration/outboundRewrite``).
    private let outboundRewrite: (@Sendable (SIPMessage) -> SIPMessage?)?
    /// The timer thread (also available to the TU for its own timers, e.g. 2xx retransmission).
    public let timerService = TimerService()

    /// Binds every listen point. Events go to `handler` from transport and timer threads.
    public init(configuration: Configuration, handler: @escaping @Sendable (EndpointEvent) -> Void) throws(TransportError) {
        core = Mutex(Core(layer: TransactionLayer(timers: configuration.timers)))
        self.handler = EventHandler(handler)
        capture = configuration.capture
        capturing = configuration.capture != nil
        logger = configuration.logger
        traces = configuration.logger.logLevel <= .trace
        outboundRewrite = configuration.outboundRewrite
        udp = Mutex([])
        tcp = Mutex([])
        tls = Mutex([])
        transportConfiguration = (configuration.udp, configuration.tcp, configuration.tls)
        var bound: [UDPTransport] = []
        var listening: [TCPTransport] = []
        var secure: [TLSTransport] = []
        for point in configuration.listen {
            do {
                switch try openTransport(point) {
                case .udp(let t): bound.append(t)
                case .tcp(let t): listening.append(t)
                case .tls(let t): secure.append(t)
                }
            } catch {
                for b in bound { b.close() }
                for l in listening { l.close() }
                for t in secure { t.close() }
                timerService.shutdown()
                logger.error("cannot listen on \(point): \(error)")
                throw error
            }
        }
        udp.withLock { $0 = bound }
        tcp.withLock { $0 = listening }
        tls.withLock { $0 = secure }
        logger.info("listening", metadata: ["sip.listen": .array(localAddresses.map { .string($0.description) })])
    }

    private enum Opened {
        case udp(UDPTransport)
        case tcp(TCPTransport)
        case tls(TLSTransport)
    }

    private func openTransport(_ point: ListenPoint) throws(TransportError) -> Opened {
        let (udp, tcp, tls) = transportConfiguration
        switch point {
        case .udp(let address):
            return .udp(try UDPTransport(bindingTo: address, configuration: udp, logger: logger) { [weak self] event in
                self?.transportEvent(event, kind: .udp)
            })
        case .tcp(let address):
            return .tcp(try TCPTransport(listeningOn: address, configuration: tcp, logger: logger) { [weak self] event in
                self?.transportEvent(event, kind: .tcp)
            })
        case .tls(let address):
            return .tls(try TLSTransport(listeningOn: address, configuration: tls, logger: logger) { [weak self] event in
                self?.transportEvent(event, kind: .tls)
            })
        }
    }

    /// Starts listening on another point while running (a new local address after a network
    /// change). With `preferred`, it comes first among its transport's points: requests and
    /// stateless messages leave from it from now on (responses to requests that came in on
    /// another point still leave from the first of that family). Returns the bound address.
    @discardableResult
    public func addListenPoint(_ point: ListenPoint, preferred: Bool = true) throws(TransportError) -> SIPPeer {
        let opened = try openTransport(point)
        func place<T>(_ t: T, in list: inout [T]) { if preferred { list.insert(t, at: 0) } else { list.append(t) } }
        let peer: SIPPeer
        switch opened {
        case .udp(let t):
            udp.withLock { place(t, in: &$0) }
            peer = SIPPeer(transport: .udp, address: t.localAddress)
        case .tcp(let t):
            tcp.withLock { place(t, in: &$0) }
            peer = SIPPeer(transport: .tcp, address: t.localAddress)
        case .tls(let t):
            tls.withLock { place(t, in: &$0) }
            peer = SIPPeer(transport: .tls, address: t.localAddress)
        }
        logger.info("listening", metadata: ["sip.listen": .string(peer.description)])
        return peer
    }

    /// Stops listening on the point bound to `peer` (its socket closes; TCP/TLS connections on
    /// it close too). Nothing when there is none. The endpoint keeps at least its last point.
    public func removeListenPoint(_ peer: SIPPeer) {
        switch peer.transport {
        case .udp:
            let gone = udp.withLock { list -> UDPTransport? in
                guard list.count > 1, let i = list.firstIndex(where: { $0.localAddress == peer.address }) else { return nil }
                return list.remove(at: i)
            }
            gone?.close()
        case .tcp:
            let gone = tcp.withLock { list -> TCPTransport? in
                guard list.count > 1, let i = list.firstIndex(where: { $0.localAddress == peer.address }) else { return nil }
                return list.remove(at: i)
            }
            gone?.close()
        case .tls:
            let gone = tls.withLock { list -> TLSTransport? in
                guard list.count > 1, let i = list.firstIndex(where: { $0.localAddress == peer.address }) else { return nil }
                return list.remove(at: i)
            }
            gone?.close()
        }
        logger.info("stopped listening", metadata: ["sip.listen": .string(peer.description)])
    }

    /// The addresses actually bound (ephemeral ports resolved).
    public var localAddresses: [SIPPeer] {
        udp.withLock { $0.map { SIPPeer(transport: .udp, address: $0.localAddress) } }
            + tcp.withLock { $0.map { SIPPeer(transport: .tcp, address: $0.localAddress) } }
            + tls.withLock { $0.map { SIPPeer(transport: .tls, address: $0.localAddress) } }
    }

    /// The first bound address of a transport.
    public func localAddress(_ kind: TransportKind) -> SIPPeer? {
        // The kind's own list only (building every address to pick one cost a call ~1k instructions).
        let address: SocketAddress? = switch kind {
        case .udp: udp.withLock { $0.first?.localAddress }
        case .tcp: tcp.withLock { $0.first?.localAddress }
        case .tls: tls.withLock { $0.first?.localAddress }
        }
        return address.map { SIPPeer(transport: kind, address: $0) }
    }

    /// The first of ``localAddresses`` (UDP, then TCP, then TLS), found without building the list.
    public var firstLocalAddress: SIPPeer? {
        localAddress(.udp) ?? localAddress(.tcp) ?? localAddress(.tls)
    }

    public var statistics: EndpointStatistics {
        core.withLock { c in
            var s = c.stats
            s.liveTransactions = c.layer.count
            return s
        }
    }

    /// The UDP sockets' own counters (datagrams, malformed, kernel buffer sizes…).
    public var udpStatistics: [UDPTransportStatistics] { udp.withLock { $0.map(\.statistics) } }

    /// The TCP transports' own counters (connections, framing errors, queued bytes…).
    public var tcpStatistics: [TCPTransportStatistics] { tcp.withLock { $0.map(\.statistics) } }

    /// The TLS transports' own counters (handshakes, failures, connections…).
    public var tlsStatistics: [TLSTransportStatistics] { tls.withLock { $0.map(\.statistics) } }

    /// Closes the sockets and stops the timers. Idempotent.
    public func close() {
        let transports = udp.withLock { t -> [UDPTransport] in defer { t = [] }; return t }
        for t in transports { t.close() }
        let streams = tcp.withLock { t -> [TCPTransport] in defer { t = [] }; return t }
        for t in streams { t.close() }
        let secure = tls.withLock { t -> [TLSTransport] in defer { t = [] }; return t }
        for t in secure { t.close() }
        timerService.shutdown()
        if handler.active.exchange(false, ordering: .acquiringAndReleasing) { logger.info("closed") }
    }

    // MARK: TU commands

    /// Sends a request in a new client transaction; `onEvent` receives its responses.
    /// The request's top Via must carry a branch (see ``TransactionLayer/newBranch()``).
    @discardableResult
    public func sendRequest(_ request: SIPMessage, to peer: SIPPeer, onEvent: @escaping @Sendable (ClientTransactionEvent) -> Void) -> TransactionID {
        let (request, peer) = routeBySize(request, to: peer)
        let (id, outputs) = core.withLock { c -> (TransactionID, Work) in
            let (id, out) = c.layer.sendRequest(request, to: peer, reliable: peer.transport.isReliable)
            if request.method != .ack { c.clientHandlers[id] = ClientHandler(onEvent) }
            if peer.transport == .udp && request.method != .ack {
                if c.udpSent.count < SIPEndpoint.udpSentLimit {
                    c.udpSent.append((peer.address, id))
                } else {
                    c.udpSent[c.udpSentNext] = (peer.address, id)
                    c.udpSentNext = (c.udpSentNext + 1) % SIPEndpoint.udpSentLimit
                }
            }
            return (id, scheduleTimers(out, &c))
        }
        execute(outputs)
        return id
    }

    /// Answers a request in its server transaction.
    public func respond(_ response: SIPMessage, to transaction: TransactionID) {
        let outputs = core.withLock { c in scheduleTimers(c.layer.respond(response, in: transaction), &c) }
        execute(outputs)
    }

    /// Sends a message outside any transaction (the ACK for a 2xx, a 2xx retransmission).
    public func sendStateless(_ message: SIPMessage, to peer: SIPPeer) {
        if send(message, to: peer, transaction: nil) { core.withLock { $0.stats.messagesSent += 1 } }
    }

    // MARK: Inputs

    private func transportEvent(_ event: TransportEvent, kind: TransportKind) {
        switch event {
        case .message(let inbound):
            if capturing { mirrorReceived(inbound) }
            let peer = SIPPeer(transport: inbound.transport, address: inbound.source, connection: inbound.connection)
            if traces { trace("received", inbound.message, peer) }
            var message = inbound.message
            do {
                try message.validate()
            } catch {
                rejectInvalid(message, error: error, from: peer)
                return
            }
            let topVia = message.isRequest ? SIPEndpoint.stampVia(&message, source: inbound.source) : nil
            let outputs = core.withLock { c -> Work in
                if message.isRequest { c.stats.requestsReceived += 1 } else { c.stats.responsesReceived += 1 }
                let before = c.layer.counters.retransmissionsAbsorbed
                let out = c.layer.receive(message, from: peer, reliable: peer.transport.isReliable, topVia: topVia)
                if c.layer.counters.retransmissionsAbsorbed != before { c.stats.retransmissionsReceived += 1 }
                return scheduleTimers(out, &c, deferTrying: true)
            }
            execute(outputs)
            if let t = outputs.trying { armTrying(t.id, after: t.after) }
        case .malformed(let bytes, let source, let error):
            if let capture, let local = localAddress(kind)?.address {
                capture.record(SIPTrafficRecord(direction: .received, transport: kind, local: local, remote: source, bytes: bytes,
                                                time: SIPTrafficRecord.now()))
            }
            core.withLock { $0.stats.malformed += 1 }
            logger.debug("dropped a malformed message (no answer can be addressed)",
                         metadata: ["sip.peer": "\(kind.viaToken.lowercased()):\(source)", "sip.error": "\(error)"])
            notify(.malformed(source: source, error: error))
        case .connectionOpened(let info):
            if capturing { mirrorOpened(info) }
        case .connectionClosed(let info, let reason):
            if let capture {
                tracker.withLock { $0.closed(info.id) }
                capture.connectionClosed(info)
            }
            guard case .failed(let why) = reason else {
                core.withLock { _ = $0.connecting.removeValue(forKey: info.id) }
                return
            }
            logger.debug("connection failed", metadata: ["sip.peer": "\(info.transport.viaToken.lowercased()):\(info.remote)", "sip.error": "\(why)"])
            let outputs = core.withLock { c -> Work in
                let ids = c.connecting.removeValue(forKey: info.id) ?? []
                if ids.isEmpty {
                    c.recentlyFailed.insert(info.id)
                    c.recentlyFailedOrder.append(info.id)
                    if c.recentlyFailedOrder.count > SIPEndpoint.recentFailureLimit {
                        c.recentlyFailed.remove(c.recentlyFailedOrder.removeFirst())
                    }
                }
                var out = Work.none
                for id in ids.sorted(by: { $0.rawValue < $1.rawValue }) { out.append(scheduleTimers(c.layer.transportFailed(id), &c)) }
                return out
            }
            execute(outputs)
        case .unreachable(let destination, _, let error):
            // RFC 3261 §8.1.3.1: a transport failure (ICMP port/host unreachable) is a failure
            // of the request at once, not at Timer B/F; the TU sees it as a 503.
            let outputs = core.withLock { c -> Work in
                var out = Work.none
                for i in c.udpSent.indices where c.udpSent[i].address == destination {
                    out.append(scheduleTimers(c.layer.transportFailed(c.udpSent[i].id), &c))
                }
                return out
            }
            logger.debug("destination unreachable (ICMP)", metadata: ["sip.peer": "udp:\(destination)", "errno": "\(error)"])
            execute(outputs)
        default:
            break
        }
    }

    /// RFC 3261 §8.2: a request that does not validate gets a stateless error response (400,
    /// or 505 for another version, 513 when too large) with a Warning naming the rule; an
    /// invalid ACK or response is dropped. Both are counted.
    private func rejectInvalid(_ message: SIPMessage, error: SIPParseError, from peer: SIPPeer) {
        core.withLock { $0.stats.rejected += 1 }
        let metadata: Logger.Metadata = ["sip.peer": "\(peer)", "sip.rule": "\(error.rule.rawValue)", "sip.offset": "\(error.offset)"]
        guard message.isRequest, message.method != .ack, message.firstValueBytes(.via) != nil else {
            logger.debug("dropped an invalid \(message.isRequest ? "request" : "response") (no answer can be addressed)", metadata: metadata)
            return
        }
        logger.debug("refused an invalid request with \(error.suggestedStatusCode)", metadata: metadata)
        var response = SIPMessage(responseTo: message, statusCode: error.suggestedStatusCode,
                                  toTag: String(UInt64.random(in: 1...UInt64.max), radix: 36))
        try? response.append(.warning, "399 switchboard \"\(error.rule.rawValue) at byte \(error.offset)\"")
        _ = send(response, to: peer, transaction: nil)
    }

    /// RFC 3261 §18.1.1: a request larger than 1300 bytes goes over TCP when the endpoint has
    /// it (the top Via is rewritten to say so); otherwise it stays on UDP.
    private func routeBySize(_ request: SIPMessage, to peer: SIPPeer) -> (SIPMessage, SIPPeer) {
        guard peer.transport == .udp, request.method != .ack, request.serialized().count > 1300,
              let tcpLocal = tcp.withLock({ $0.first { $0.localAddress.isIPv6 == peer.address.isIPv6 }?.localAddress }),
              let top = request.elementBytes(.via).first, var via = try? Via(bytes: top) else { return (request, peer) }
        via.transport = "TCP"
        via.host = tcpLocal.sipHost
        via.port = tcpLocal.port
        var moved = request
        moved.replaceFirstElement(.via, with: via.description)
        core.withLock { $0.stats.switchedToTCP += 1 }
        return (moved, SIPPeer(transport: .tcp, address: peer.address))
    }

    /// RFC 3261 §18.2.1 and RFC 3581: note where a request really came from in its top Via.
    /// Returns the top Via's parts, read in one scan, when the message is left as it was (the
    /// transaction key reads them too); nil otherwise.
    @discardableResult
    static func stampVia(_ message: inout SIPMessage, source: SocketAddress) -> SIPMessage.TopViaParts? {
        // The common case, read from the bytes: no rport asked for, and the sent-by host is
        // the source's IPv4 address (as a phone on the same network writes it).
        let parts = message.topViaParts
        if case .v4(let ip) = source.ip, let top = parts, !top.rport, IPv4Address.parse(top.host(in: message)) == ip.value {
            return top
        }
        guard let top = message.elementBytes(.via).first, var v = try? Via(bytes: top) else { return parts }
        let rportFlag = findFlag(top, "rport")
        let sourceIP = source.ipString
        // Nothing to note when the sent-by host is the source and no rport value is wanted.
        guard v.host.address != sourceIP || rportFlag else { return parts }
        v.parameters.set("received", sourceIP)
        if rportFlag { v.parameters.set("rport", String(source.port)) }
        message.replaceFirstElement(.via, with: v.description)
        return nil
    }

    static func findFlag(_ via: ArraySlice<UInt8>, _ name: StaticString) -> Bool {
        guard let v = SIPBytes.parameter(name, in: via) else { return false }
        return v.isEmpty
    }

    /// A transaction timer is due (see ``TimerService/schedule(after:target:_:_:)``).
    package func timerFired(_ a: UInt64, _ b: UInt64) {
        guard let t = SIPEndpoint.timer(code: b) else { return }
        timerFired(TimerKey(id: TransactionID(rawValue: a), timer: t))
    }

    /// A transaction timer as a number for the timer service, and back.
    static func code(of t: TransactionTimer) -> UInt64 {
        switch t {
        case .A: 0
        case .B: 1
        case .D: 2
        case .E: 3
        case .F: 4
        case .G: 5
        case .H: 6
        case .I: 7
        case .J: 8
        case .K: 9
        case .L: 10
        case .M: 11
        case .trying: 12
        }
    }

    static func timer(code: UInt64) -> TransactionTimer? {
        switch code {
        case 0: .A
        case 1: .B
        case 2: .D
        case 3: .E
        case 4: .F
        case 5: .G
        case 6: .H
        case 7: .I
        case 8: .J
        case 9: .K
        case 10: .L
        case 11: .M
        case 12: .trying
        default: nil
        }
    }

    private func timerFired(_ key: TimerKey) {
        let outputs = core.withLock { c -> Work in
            guard c.forgetTimer(key.id, key.timer) != nil else { return .none }
            let out = c.layer.timerFired(key.id, key.timer)
            if key.timer == .A || key.timer == .E || key.timer == .G {
                c.stats.retransmissionsSent += out.reduce(0) { if case .send = $1 { return $0 + 1 } else { return $0 } }
            }
            return scheduleTimers(out, &c)
        }
        execute(outputs)
    }

    // MARK: Carrying out outputs

    /// Starts and cancels timers while the lock is held, and finds the handlers of client
    /// transactions that report; the outputs are handed on as they are.
    /// `deferTrying`: a 100 Trying timer is noted in the work, not started (see ``Work/trying``).
    private func scheduleTimers(_ outputs: consuming [TransactionLayer<SIPPeer>.Output], _ c: inout Core, deferTrying: Bool = false) -> Work {
        var work = Work(outputs: outputs)
        for i in work.outputs.indices {
            switch work.outputs[i] {
            case .startTimer(let id, .trying, let d) where deferTrying && work.trying == nil:
                work.trying = (id, d)
            case .startTimer(let id, let t, let d):
                startTimer(t, of: id, after: d, &c)
            case .cancelTimer(let id, let t):
                if let h = c.forgetTimer(id, t) { timerService.cancel(h) }
            case .terminated(let id):
                if !c.connecting.isEmpty {
                    for (conn, var ids) in c.connecting where ids.contains(id) {
                        ids.remove(id)
                        c.connecting[conn] = ids.isEmpty ? nil : ids
                    }
                }
                if c.timers.modify(id.slot, { $0.owner == id }) == true { c.timers.take(id.slot)?.forEach { timerService.cancel($0) } }
                c.clientHandlers[id] = nil
            case .timeout(let id, let timer):
                c.stats.timeouts += 1
                logger.debug("transaction timed out", metadata: ["sip.transaction": "\(id.rawValue)", "sip.timer": "\(timer)"])
                if let h = c.clientHandlers[id] { work.client.append((i, h, .timeout)) }
            case .transportError(let id):
                if let h = c.clientHandlers[id] { work.client.append((i, h, .transportError)) }
            case .response(let m, let id):
                if let h = c.clientHandlers[id] { work.client.append((i, h, (m.statusCode ?? 0) < 200 ? .provisional(m) : .final(m))) }
            case .send:
                c.stats.messagesSent += 1
            default:
                break
            }
        }
        return work
    }

    /// Starts (or restarts) a transaction's timer. No callback: the timer service calls back
    /// `timerFired(_:_:)` with the transaction and the timer's code (nothing allocated per timer).
    private func startTimer(_ t: TransactionTimer, of id: TransactionID, after delay: Duration, _ c: inout Core) {
        let h = timerService.schedule(after: delay, target: self, id.rawValue, SIPEndpoint.code(of: t))
        let s = id.slot
        var mine = false
        let old = c.timers.modify(s) { r -> TimerService.Handle? in
            guard r.owner == id else { return nil }
            mine = true
            return r.set(t, h)
        } ?? nil
        if let old { timerService.cancel(old) }
        if !mine {
            // The slot is vacant (or still holds an ended transaction's timers: cancelled).
            c.timers.take(s)?.forEach { timerService.cancel($0) }
            var r = RunningTimers(owner: id)
            _ = r.set(t, h)
            c.timers.put(r, at: s)
        }
    }

    /// Starts a deferred 100 Trying timer if the INVITE is still unanswered.
    private func armTrying(_ id: TransactionID, after delay: Duration) {
        core.withLock { c in
            if c.layer.awaitsTrying(id) { startTimer(.trying, of: id, after: delay, &c) }
        }
    }

    private func execute(_ work: borrowing Work) {
        var next = 0
        for i in work.outputs.indices {
            if next < work.client.count && work.client[next].index == i {
                work.client[next].handler.call(work.client[next].event)
                next += 1
                continue
            }
            switch work.outputs[i] {
            case .send(let m, let peer, let id):
                if !send(m, to: peer, transaction: id) {
                    let more = core.withLock { c in scheduleTimers(c.layer.transportFailed(id), &c) }
                    execute(more)
                }
            case .request(let m, let from, let id):
                notify(.request(IncomingRequest(message: m, peer: from, transaction: id)))
            case .cancel(let m, let from, let id, let invite):
                notify(.cancel(IncomingRequest(message: m, peer: from, transaction: id), invite: invite))
            case .ack(let m, let from):
                notify(.ack(m, from: from))
            case .strayResponse(let m, let from):
                notify(.strayResponse(m, from: from))
            case .timeout(let id, let t):
                notify(.serverTransactionFailed(id, t))
            case .transportError(let id):
                notify(.serverTransactionFailed(id, nil))
            case .response, .startTimer, .cancelTimer, .terminated:
                // A response no client transaction's handler takes any more is dropped.
                break
            }
        }
    }

    /// One `trace` line per message: its first line, with the peer and Call-ID as metadata.
    private func trace(_ what: String, _ m: SIPMessage, _ peer: SIPPeer) {
        let line = m.isRequest ? "\(m.method?.token ?? "?") \(m.requestURIText ?? "")" : "\(m.statusCode ?? 0) \((try? m.cseq().method.token) ?? "")"
        logger.trace("\(what) \(line)", metadata: ["sip.peer": "\(peer)", "sip.call_id": "\(m.callID ?? "")"])
    }

    private func notify(_ e: EndpointEvent) {
        if handler.active.load(ordering: .acquiring) { handler.call(e) }
    }

    /// Sends over the matching transport. Responses over UDP follow RFC 3261 §18.2.2 and
    /// RFC 3581: to the source address and port of the request (the layer's peer), unless the
    /// top Via has no `rport` and names another port, in which case to that port.
    private func send(_ original: SIPMessage, to peer: SIPPeer, transaction: TransactionID?) -> Bool {
        if let rewrite = outboundRewrite {
            guard let changed = rewrite(original) else { return true }
            return sendAsIs(changed, to: peer, transaction: transaction)
        }
        return sendAsIs(original, to: peer, transaction: transaction)
    }

    /// ``send(_:to:transaction:)`` after the rewrite (no copy of the message when there is none).
    private func sendAsIs(_ m: SIPMessage, to peer: SIPPeer, transaction: TransactionID?) -> Bool {
        if traces { trace("sent", m, peer) }
        if peer.transport == .tcp { return sendStream(m, to: peer, transaction: transaction) }
        if peer.transport == .tls { return sendSecure(m, to: peer, transaction: transaction) }
        var destination = peer.address
        if !m.isRequest {
            // The sent-by port read from the bytes (an IPv6 sent-by is decoded); the rport
            // parameter is looked for only when that port is not where the request came from.
            if let port = m.topViaPort, port != destination.port, let top = m.firstValueBytes(.via), SIPBytes.parameter("rport", in: top) == nil {
                destination = destination.withPort(port)
            }
        }
        // The transport is picked under the lock (copying the list out retained and released it).
        let picked = udp.withLock { list in list.first(where: { $0.localAddress.isIPv6 == destination.isIPv6 }) ?? list.first }
        guard let t = picked else {
            core.withLock { $0.stats.sendErrors += 1 }
            return false
        }
        do {
            let bytes = m.serialized()
            // The time is taken before sending: the answer may be recorded (by the receiving
            // thread) before this thread records the request, but its time is never earlier.
            let time = capturing ? SIPTrafficRecord.now() : .zero
            try t.send(bytes, to: destination)
            if capturing, let capture {
                capture.record(SIPTrafficRecord(direction: .sent, transport: .udp, local: t.localAddress, remote: destination, bytes: bytes,
                                                time: time))
            }
            return true
        } catch {
            core.withLock { $0.stats.sendErrors += 1 }
            return false
        }
    }

    fileprivate func tlsTransport(for address: SocketAddress) -> TLSTransport? {
        tls.withLock { $0.first(where: { $0.localAddress.isIPv6 == address.isIPv6 }) ?? $0.first }
    }

    fileprivate func countSendError() { core.withLock { $0.stats.sendErrors += 1 } }

    /// How many failed connection ids are remembered for transactions noted late.
    static let recentFailureLimit = 1024

    /// Notes that transaction `id` waits on connection `conn` (a client transaction's request or a
    /// server transaction's response sent on a new connection); if that connection's connect
    /// already failed, the transaction fails now instead of waiting for Timer B or for nothing.
    fileprivate func noteConnecting(_ conn: ConnectionID, _ id: TransactionID) {
        let outputs = core.withLock { c -> Work in
            if c.recentlyFailed.contains(conn) { return scheduleTimers(c.layer.transportFailed(id), &c) }
            c.connecting[conn, default: []].insert(id)
            return .none
        }
        execute(outputs)
    }

    /// Over TCP: on the peer's connection when known (responses go back on the request's
    /// connection), else on a reused or new connection to its address.
    private func sendStream(_ m: SIPMessage, to peer: SIPPeer, transaction: TransactionID?) -> Bool {
        guard let t = tcp.withLock({ $0.first(where: { $0.localAddress.isIPv6 == peer.address.isIPv6 }) ?? $0.first }) else {
            core.withLock { $0.stats.sendErrors += 1 }
            return false
        }
        let bytes = m.serialized()
        let time = capturing ? SIPTrafficRecord.now() : .zero
        do {
            if let c = peer.connection {
                do {
                    try t.send(bytes, on: c)
                    mirrorSent(bytes, .tcp, on: c, to: peer.address, time: time)
                    return true
                } catch {
                    // The connection is gone; a request may open a new one (§18.2.2 for responses
                    // says: to the Via's sent-by, which the source address stands for here).
                }
            }
            let c = try t.send(bytes, to: peer.address)
            mirrorSent(bytes, .tcp, on: c, to: peer.address, time: time)
            // A request's client transaction, or a response's server transaction (§18.2.2: the
            // response went on a new connection; if that connect fails, the transaction does).
            if let id = transaction { noteConnecting(c, id) }
            return true
        } catch {
            core.withLock { $0.stats.sendErrors += 1 }
            return false
        }
    }
}

extension SIPEndpoint {
    /// Over TLS: like TCP, with the peer's server name for SNI and certificate verification.
    fileprivate func sendSecure(_ m: SIPMessage, to peer: SIPPeer, transaction: TransactionID?) -> Bool {
        guard let t = tlsTransport(for: peer.address) else {
            countSendError()
            return false
        }
        let bytes = m.serialized()
        let time = capturing ? SIPTrafficRecord.now() : .zero
        if let c = peer.connection, (try? t.send(bytes, on: c)) != nil {
            mirrorSent(bytes, .tls, on: c, to: peer.address, time: time)
            return true
        }
        do {
            let c = try t.send(bytes, to: peer.address, serverName: peer.serverName)
            mirrorSent(bytes, .tls, on: c, to: peer.address, time: time)
            if let id = transaction { noteConnecting(c, id) }
            return true
        } catch {
            countSendError()
            return false
        }
    }
}

/// The timer-service handles of one transaction's running timers, inline: at most three run at
/// once (an INVITE server's 100 Trying, G and H), so arming one allocates nothing; more would
/// go to `more`.
struct RunningTimers {
    struct Entry { var timer: TransactionTimer; var handle: TimerService.Handle }
    /// The transaction whose timers these are (its slot may be taken by another one later).
    let owner: TransactionID
    var slots = InlineArray<4, Entry?>(repeating: nil)
    var more: [Entry] = []

    init(owner: TransactionID) { self.owner = owner }

    var isEmpty: Bool {
        for i in slots.indices where slots[i] != nil { return false }
        return more.isEmpty
    }

    /// Notes `handle` for `timer`; returns the handle it replaces.
    mutating func set(_ timer: TransactionTimer, _ handle: TimerService.Handle) -> TimerService.Handle? {
        var free: Int?
        for i in slots.indices {
            if let e = slots[i] {
                if e.timer == timer {
                    slots[i] = Entry(timer: timer, handle: handle)
                    return e.handle
                }
            } else if free == nil {
                free = i
            }
        }
        if let j = more.firstIndex(where: { $0.timer == timer }) {
            defer { more[j].handle = handle }
            return more[j].handle
        }
        if let i = free { slots[i] = Entry(timer: timer, handle: handle) } else { more.append(Entry(timer: timer, handle: handle)) }
        return nil
    }

    /// Forgets `timer`; returns its handle, nil when it was not running.
    mutating func remove(_ timer: TransactionTimer) -> TimerService.Handle? {
        for i in slots.indices {
            if let e = slots[i], e.timer == timer {
                slots[i] = nil
                return e.handle
            }
        }
        if let j = more.firstIndex(where: { $0.timer == timer }) { return more.remove(at: j).handle }
        return nil
    }

    /// Every handle.
    func forEach(_ body: (TimerService.Handle) -> Void) {
        for i in slots.indices { if let e = slots[i] { body(e.handle) } }
        for e in more { body(e.handle) }
    }
}

/// The TU's event handler, held as an immutable `let` rather than inside a `Mutex`: reading a
/// closure out of generic storage with `withLock { $0 }` can wrap it in a new reabstraction
/// thunk each time, so a handler read per event grew a chain of thunks, costing time per call
/// and finally the stack (seen at 4,000 calls/s).
final class EventHandler: Sendable {
    let call: @Sendable (EndpointEvent) -> Void
    let active = Atomic<Bool>(true)
    init(_ call: @escaping @Sendable (EndpointEvent) -> Void) { self.call = call }
}

/// A client transaction's handler, boxed so the dictionary holds references, not closures
/// (see ``EventHandler``).
final class ClientHandler: Sendable {
    let call: @Sendable (ClientTransactionEvent) -> Void
    init(_ call: @escaping @Sendable (ClientTransactionEvent) -> Void) { self.call = call }
}

// MARK: Capture mirroring

/// What the capture mirror knows of connections: their local addresses (from
/// `connectionOpened`), and records sent on a connection before it was reported open (a
/// connect runs in the background), held until it is (at most 64 per connection).
struct CaptureTracker {
    var locals: [ConnectionID: SocketAddress] = [:]
    var waiting: [ConnectionID: [SIPTrafficRecord]] = [:]
    static let maxWaiting = 64

    mutating func closed(_ id: ConnectionID) {
        locals[id] = nil
        waiting[id] = nil
    }
}

extension SIPEndpoint {
    fileprivate func mirrorReceived(_ inbound: InboundMessage) {
        guard capturing, let capture else { return }
        var local = inbound.local
        if let c = inbound.connection, let known = tracker.withLock({ $0.locals[c] }) { local = known }
        capture.record(SIPTrafficRecord(direction: .received, transport: inbound.transport, local: local, remote: inbound.source,
                                        bytes: inbound.message.serialized(), connection: inbound.connection, time: SIPTrafficRecord.now()))
    }

    fileprivate func mirrorOpened(_ info: ConnectionInfo) {
        guard capturing, let capture else { return }
        let held = tracker.withLock { t -> [SIPTrafficRecord] in
            t.locals[info.id] = info.local
            return t.waiting.removeValue(forKey: info.id) ?? []
        }
        for var r in held {
            r.local = info.local
            capture.record(r)
        }
    }

    fileprivate func mirrorSent(_ bytes: [UInt8], _ kind: TransportKind, on connection: ConnectionID, to remote: SocketAddress, time: Duration) {
        guard capturing, let capture else { return }
        let record = SIPTrafficRecord(direction: .sent, transport: kind, local: remote, remote: remote, bytes: bytes,
                                      connection: connection, time: time)
        let local = tracker.withLock { t -> SocketAddress? in
            if let l = t.locals[connection] { return l }
            if t.waiting[connection, default: []].count < CaptureTracker.maxWaiting { t.waiting[connection, default: []].append(record) }
            return nil
        }
        guard let local else { return }
        var r = record
        r.local = local
        capture.record(r)
    }
}
