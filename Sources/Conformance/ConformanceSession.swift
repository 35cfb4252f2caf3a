import SIPMessage
import SIPTransport
import NetworkIO
import Synchronization
import PacketCapture
import SIPAuth

/// Errors of a conformance run that are not the DUT's findings.
public enum ConformanceError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The target is not a SIP URI with a numeric host (`sip:user@127.0.0.1:5060`).
    case badTarget(String)
    /// The transport is not implemented yet for this suite.
    case unsupportedTransport(ConformanceTransport)
    /// No suite of that name.
    case unknownSuite(String)
    /// The runner's socket could not be opened.
    case socket(String)
    /// The suite runs over other transports only (TLS: the `uas` and `uac` suites).
    case suiteTransport(suite: String, ConformanceTransport)
    /// The `uac` and `proxy` suites over TLS listen with a certificate of their own, which was not given.
    case certificateMissing
    /// The `parser` suite's messages (RFC 4475 and RFC 5118) are not in the corpus folder given.
    case corpusMissing(String)

    public var description: String {
        switch self {
        case .badTarget(let t): return "target \(t): a SIP URI with an IP address is needed (e.g. sip:dut@127.0.0.1:5060)"
        case .unsupportedTransport(let t): return "transport \(t.rawValue) is not supported yet (udp and tcp in this version; tls for the uas, uac and proxy suites)"
        case .unknownSuite(let s): return "no suite named \(s) (switchboard conform --list names them)"
        case .socket(let s): return "cannot open the runner's socket: \(s)"
        case .suiteTransport(let suite, let t):
            let takes = suite == "registrar" || suite == "auth" || suite == "forward-uas" ? "udp and tcp" : suite == "uas" || suite == "uac" || suite == "proxy" ? "udp, tcp and tls" : "udp only"
            return "the \(suite) suite does not run over \(t.rawValue) yet (\(takes) in this version)"
        case .certificateMissing:
            return "the uac and proxy suites over tls listen for the DUT's connections: give the runner a certificate and its key (--tls-cert FILE --tls-key FILE)"
        case .corpusMissing(let p): return "the parser suite reads the RFC 4475 and RFC 5118 messages from a corpus folder (rfc4475/…, rfc5118/…): \(p) is missing (give --corpus DIR)"
        }
    }
}

/// The runner's side of one test: a UDP socket facing the DUT, the record of every message
/// exchanged (for the rule checker and the report), raw sending for deliberately odd messages,
/// and the answers the runner owes the DUT (200 to its BYE or OPTIONS).
public final class ConformanceSession: Sendable {
    /// Where the DUT is.
    public let target: SocketAddress
    /// The DUT's URI (Request-URI and To of new requests).
    public let targetURI: SIPURI
    /// The runner's own address.
    public let local: SocketAddress
    /// RFC 3261 T1 and T2 the checker expects of the DUT.
    public let t1: Duration, t2: Duration
    /// How long a test waits for a final response before it concludes none is coming.
    public let responseTimeout: Duration
    /// The credentials answering a registrar's challenges (`--user`, `--password`), if given.
    public let credentials: DigestCredentials?
    /// The folder holding `rfc4475/…` and `rfc5118/…` (the `parser` suite's messages).
    public let corpus: String?

    struct Entry: Sendable {
        var direction: ExchangedMessage.Direction
        var time: Duration
        var bytes: [UInt8]
        var message: SIPMessage?
        var parseError: String?
        /// Where a received message came from.
        var source: SocketAddress? = nil
        /// False for a message the runner sent on purpose outside the rules (a torture
        /// message): the checker ignores it and the responses to it.
        var judged = true
    }

    private struct State: Sendable {
        var entries: [Entry] = []
        var counter: UInt64 = 0
        /// Over TCP and TLS: the connection each peer's latest message came on (what goes back
        /// to that peer goes on it, RFC 3261 §18.2.2).
        var connections: [SocketAddress: ConnectionID] = [:]
    }

    /// Where every datagram of the run is recorded (pcapng), when asked.
    private let capture: CaptureWriter?
    private let state = Mutex(State())
    private let scenarioOver = Atomic<Bool>(false)
    /// True once the test's scenario is over (the session only collects late copies then).
    var finished: Bool {
        get { scenarioOver.load(ordering: .acquiring) }
        set { scenarioOver.store(newValue, ordering: .releasing) }
    }
    /// The Call-ID of the first call the DUT opened in this test (an INVITE without To tag).
    var incomingCall: String? {
        state.withLock { $0.entries.first { $0.direction == .received && $0.message?.method == .invite && $0.message?.toTag == nil }?.message?.callID }
    }
    private let scenarioAnswersInvites = Atomic<Bool>(false)
    /// From now on the scenario answers the DUT's INVITEs (and CANCELs) itself, as a runner
    /// playing a transfer target does, instead of the session's plain 200.
    func answerInvitesInScenario() { scenarioAnswersInvites.store(true, ordering: .releasing) }
    private let absent = Mutex<Set<String>>([])
    /// Call-IDs the test made up: the DUT has no dialog of them (``RuleChecker/absentDialogs``).
    var absentDialogs: Set<String> { absent.withLock { $0 } }
    /// Records that `callID` names no dialog the DUT can have (the test made it up).
    func declareAbsent(callID: String) { absent.withLock { _ = $0.insert(callID) } }
    private let expectedUsers = Mutex<Set<String>>([])
    /// Makes a new call to `sip:user@…` (a retry at a Contact the test gave) part of this test.
    func expect(requestUser user: String) { expectedUsers.withLock { _ = $0.insert(user) } }
    private let expectedFromTags = Mutex<Set<String>>([])
    /// Makes a new call from the DUT with this From tag part of this test: a retry after a 3xx
    /// that keeps the redirected INVITE's From but takes a new Call-ID (RFC 3261 §8.1.3.4 allows it).
    func expect(fromTag tag: String) { expectedFromTags.withLock { _ = $0.insert(tag) } }
    /// Whether `m` is a request to a user this test expects (see ``expect(requestUser:)``), or
    /// one with a From tag it expects (``expect(fromTag:)``).
    func expects(_ m: SIPMessage) -> Bool {
        if let tag = m.fromTag, expectedFromTags.withLock({ $0.contains(tag) }) { return true }
        guard let uri = m.requestURIText else { return false }
        return expectedUsers.withLock { $0.contains { uri.hasPrefix("sip:\($0)@") } }
    }
    /// Whether a message of the call `callID` went either way in this test.
    func knows(callID: String) -> Bool { state.withLock { $0.entries.contains { $0.message?.callID == callID } } }
    /// The runner's socket: a UDP socket, or a TCP listener whose connections carry the test,
    /// or a TLS transport whose connection to the target does.
    enum Socket: Sendable {
        case udp(UDPTransport)
        case tcp(TCPTransport)
        case tls(TLSTransport)
        func close() {
            switch self {
            case .udp(let t): t.close()
            case .tcp(let t): t.close()
            case .tls(let t): t.close()
            }
        }
    }
    private let socket: Mutex<Socket?> = Mutex(nil)
    private let start: MonotonicClock.Instant
    private let nonce: UInt64
    /// The transport the test runs over.
    public let transport: ConformanceTransport
    /// The side the runner plays: as UAS it answers the DUT's INVITEs itself (the scenario does),
    /// and it listens on a socket shared by the whole run (the DUT calls one fixed address).
    public let role: ConformanceRole
    /// The run's shared listening socket, when the runner plays UAS (not closed with the session).
    private let listener: ConformanceListener?

    init(target: SocketAddress, targetURI: SIPURI, transport: ConformanceTransport = .udp, t1: Duration = .milliseconds(500), t2: Duration = .seconds(4),
         responseTimeout: Duration = .seconds(4), capture: CaptureWriter? = nil, credentials: DigestCredentials? = nil,
         corpus: String? = nil, role: ConformanceRole = .uac, tls: TLSConfiguration = .init()) throws(ConformanceError) {
        self.credentials = credentials
        self.corpus = corpus
        self.responseTimeout = responseTimeout
        self.capture = capture
        self.target = target
        self.targetURI = targetURI
        self.transport = transport
        self.t1 = t1
        self.t2 = t2
        self.role = role
        listener = nil
        start = .now
        nonce = UInt64.random(in: 0..<UInt64.max)
        let bind = target.isIPv6 ? SocketAddress.wildcard(ipv6: true) : (try? SocketAddress(ip: target.ipString.hasPrefix("127.") ? target.ipString : "0.0.0.0", port: 0))
        guard let bind else { throw .socket("no local address") }
        let holder = WeakSession()
        do {
            switch transport {
            case .udp:
                let t = try UDPTransport(bindingTo: bind) { event in holder.session.withLock { $0 }?.received(event) }
                local = t.localAddress
                socket.withLock { $0 = .udp(t) }
            case .tcp:
                let t = try TCPTransport(listeningOn: bind) { event in holder.session.withLock { $0 }?.received(event) }
                local = t.localAddress
                socket.withLock { $0 = .tcp(t) }
            case .tls:
                // A client of the DUT: without a certificate of its own the transport only connects.
                let t = try TLSTransport(listeningOn: bind, configuration: tls) { event in holder.session.withLock { $0 }?.received(event) }
                local = t.localAddress
                socket.withLock { $0 = .tls(t) }
            }
        } catch {
            throw .socket("\(error)")
        }
        holder.session.withLock { $0 = self }
    }

    /// A session of the runner as UAS, on the run's shared `listener` (the DUT's address is
    /// learnt from its first request; `target` is the listening address until then).
    init(listener: ConformanceListener, targetURI: SIPURI, t1: Duration = .milliseconds(500), t2: Duration = .seconds(4),
         responseTimeout: Duration = .seconds(4), capture: CaptureWriter? = nil) {
        credentials = nil
        corpus = nil
        self.responseTimeout = responseTimeout
        self.capture = capture
        self.targetURI = targetURI
        self.transport = listener.transport
        self.t1 = t1
        self.t2 = t2
        role = .uas
        self.listener = listener
        nonce = UInt64.random(in: 0..<UInt64.max)
        local = listener.localAddress
        target = local
        socket.withLock { $0 = listener.socket }
        // The test starts when the first message held for it arrived.
        start = min(listener.earliestHeld ?? .now, .now)
        for held in listener.attach(self) { received(held.event, at: held.at) }
    }

    /// Closes the socket (and its connections); a shared listener only stops feeding this session.
    func close() {
        let t = socket.withLock { s -> Socket? in defer { s = nil }; return s }
        if let listener {
            listener.detach(self)
        } else {
            t?.close()
        }
    }

    /// Where the DUT's first message of this test came from (the listening address until then).
    var dutAddress: SocketAddress { entries.first { $0.direction == .received && $0.source != nil }?.source ?? target }

    private var now: Duration { start.duration(to: .now) }

    /// The time since the test started (its first message, when one was held for it).
    var elapsed: Duration { now }

    /// The address written in Via and Contact.
    var hostPort: String { local.isIPv6 ? "[\(local.ipString)]:\(local.port)" : "\(local.ipString):\(local.port)" }

    /// The Via transport token.
    var viaTransport: String { transport.rawValue.uppercased() }

    /// The `;transport=` parameter of our URIs (none over UDP).
    var uriTransport: String { transport == .udp ? "" : ";transport=\(transport.rawValue)" }

    /// A fresh token (tags, branches, Call-IDs), unique in the run.
    func token() -> String {
        let n = state.withLock { s -> UInt64 in s.counter += 1; return s.counter }
        return String(nonce &+ n &* 0x9E37_79B9_7F4A_7C15, radix: 36)
    }

    /// A new RFC 3261 branch.
    func branch() -> String { "z9hG4bK-sbc-" + token() }

    // MARK: Sending

    /// Sends raw bytes to the DUT (deliberately odd messages go this way), recorded as sent; over
    /// TCP on `connection` when given (an answer to the DUT's request), else on the connection
    /// to the target (opened on first use).
    func sendRaw(_ bytes: [UInt8], on connection: ConnectionID? = nil, to peer: SocketAddress? = nil, judged: Bool = true) {
        var entry = Entry(direction: .sent, time: now, bytes: bytes, judged: judged)
        do { entry.message = try SIPMessage(bytes: bytes) } catch { entry.parseError = "\(error)" }
        state.withLock { $0.entries.append(entry) }
        record(bytes, from: local, to: peer ?? target)
        // Over TCP and TLS what goes to a peer goes on the connection its latest message came on,
        // else on a connection to it (opened, or the one open already).
        let known = connection ?? state.withLock { $0.connections[peer ?? target] }
        switch socket.withLock({ $0 }) {
        case .udp(let t): try? t.send(bytes, to: peer ?? target)
        case .tcp(let t):
            if let known, (try? t.send(bytes, on: known)) != nil { break }
            _ = try? t.send(bytes, to: peer ?? target)
        case .tls(let t):
            if let known, (try? t.send(bytes, on: known)) != nil { break }
            _ = try? t.send(bytes, to: peer ?? target)
        case nil: break
        }
    }

    /// Sends a message to the DUT.
    func send(_ m: SIPMessage) { sendRaw(m.serialized()) }

    /// Sends text (CRLF line ends expected) to the DUT.
    func send(_ text: String) { sendRaw(Array(text.utf8)) }

    // MARK: Receiving

    /// Everything that reaches the test's own socket is the DUT's (the socket is fresh per test).
    fileprivate func received(_ event: TransportEvent, at instant: MonotonicClock.Instant? = nil) {
        let now = instant.map { start.duration(to: $0) } ?? self.now
        switch event {
        case .message(let inbound):
            let m = inbound.message
            record(m.serialized(), from: inbound.source, to: local)
            state.withLock {
                $0.entries.append(Entry(direction: .received, time: now, bytes: m.serialized(), message: m, source: inbound.source))
                if let c = inbound.connection { $0.connections[inbound.source] = c }
            }
            if m.isRequest { answer(m, on: inbound.connection, from: inbound.source) }
        case .malformed(let bytes, let source, let error):
            record(bytes, from: source, to: local)
            state.withLock { $0.entries.append(Entry(direction: .received, time: now, bytes: bytes, parseError: "\(error)", source: source)) }
        default:
            break
        }
    }

    /// Writes a message to the capture, stamped with the wall clock.
    private func record(_ bytes: [UInt8], from: SocketAddress, to: SocketAddress) {
        guard let capture else { return }
        let now = WallTime.now()
        let a = CaptureEndpoint(address: from.ip, port: from.port), b = CaptureEndpoint(address: to.ip, port: to.port)
        let time = CaptureTimestamp(seconds: now.components.seconds, nanoseconds: now.components.attoseconds / 1_000_000_000)
        // Over TCP the runner's side is written with its listening address (the capture shows
        // the exchange, not the ephemeral ports of the connections).
        // Over TLS the capture holds the plaintext messages, written as TCP.
        if transport != .udp { capture.writeTCP(from: a, to: b, payload: bytes, time: time) } else { capture.writeUDP(from: a, to: b, payload: bytes, time: time) }
    }

    /// What the runner owes the DUT: 200 to its requests (BYE, OPTIONS, re-INVITE without
    /// media negotiation); nothing to ACK.
    private func answer(_ request: SIPMessage, on connection: ConnectionID?, from source: SocketAddress) {
        guard let method = request.method, method != .ack else { return }
        // As UAS (or as the callee behind a proxy) the scenario answers INVITEs (and CANCELs of them) itself.
        // A test playing a transfer target answers the DUT's new calls itself; a re-INVITE in a
        // call (a transferee holding it) still gets the session's 200.
        let scenarioAnswers = scenarioAnswersInvites.load(ordering: .acquiring) && (method == .cancel || request.toTag == nil)
        if role != .uac || scenarioAnswers, method == .invite || method == .cancel { return }
        // A REFER is accepted 202 (RFC 3515 §2.4.2); the scenario sends the NOTIFYs it owes.
        // A PRACK whose RAck names no reliable provisional the runner sent and has not had
        // acknowledged gets 481 (RFC 3262 §3); the rule checker still reports the RAck.
        let status = method == .refer ? 202 : method == .prack && !acknowledgesReliableProvisional(request) ? 481 : 200
        var r = SIPMessage(responseTo: request, statusCode: status, toTag: request.toTag == nil ? token() : nil)
        try? r.append(.contact, "<sip:conform@\(hostPort)\(uriTransport)>")
        // A re-INVITE's offer gets an answer (its first audio format), as offer/answer requires.
        if method == .invite, let sdp = ReceivedCall.answer(self, to: request) {
            r.setBody(Array(sdp.utf8), contentType: .sdp)
        } else {
            try? r.append(.contentLength, "0")
        }
        sendRaw(r.serialized(), on: connection, to: source)
    }

    /// Whether `prack` acknowledges a reliable provisional response the runner sent (RFC 3262
    /// §7.2: its RAck carries the response's RSeq and the CSeq number and method of the request
    /// it answered, in the same call) that no earlier PRACK (another transaction: another top
    /// Via branch) acknowledged already. A retransmitted PRACK is judged as its first copy was.
    func acknowledgesReliableProvisional(_ prack: SIPMessage) -> Bool {
        guard let rack = (try? prack.rack()) ?? nil, let callID = prack.callID else { return false }
        let list = entries
        func names(_ m: SIPMessage) -> Bool {
            guard !m.isRequest, let code = m.statusCode, (101...199).contains(code), m.callID == callID,
                  ((try? m.rseq()) ?? nil) == rack.rseq, let cseq = try? m.cseq() else { return false }
            return cseq.sequence == rack.cseq && cseq.method == rack.method
        }
        guard list.contains(where: { $0.direction == .sent && $0.message.map(names) == true }) else { return false }
        // A PRACK of another transaction with the same RAck, received before this one's first
        // copy, has used it up.
        let branch = prack.topViaBranch
        let first = list.firstIndex { $0.direction == .received && $0.message?.method == .prack && $0.message?.topViaBranch == branch } ?? list.count
        return !list[..<first].contains { e in
            guard e.direction == .received, let m = e.message, m.method == .prack, m.callID == callID, m.topViaBranch != branch else { return false }
            return ((try? m.rack()) ?? nil) == rack
        }
    }

    /// Every message exchanged so far.
    var entries: [Entry] { state.withLock { $0.entries } }

    /// Waits until a received message satisfies `predicate` (looking at messages received after
    /// index `after`), or `timeout` passes; returns the message and its index.
    func waitFor(after: Int = 0, timeout: Duration, _ predicate: (SIPMessage) -> Bool) async -> (SIPMessage, Int)? {
        let deadline = MonotonicClock.Instant.now + timeout
        var seen = after
        while true {
            let list = entries
            while seen < list.count {
                let e = list[seen]
                if e.direction == .received, let m = e.message, predicate(m) { return (m, seen) }
                seen += 1
            }
            if MonotonicClock.Instant.now >= deadline { return nil }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Waits for the final response to the request sent with `branch` and CSeq method `method`.
    func finalResponse(branch: String, method: SIPMethod, timeout: Duration? = nil) async -> SIPMessage? {
        await waitFor(timeout: timeout ?? responseTimeout) { m in
            !m.isRequest && (m.statusCode ?? 0) >= 200 && m.topViaBranch == branch && (try? m.cseq().method) == method
        }?.0
    }

    /// The final response to `branch`/`method` with its index in the exchange.
    func finalResponseAt(branch: String, method: SIPMethod, timeout: Duration? = nil) async -> (SIPMessage, Int)? {
        await waitFor(timeout: timeout ?? responseTimeout) { m in
            !m.isRequest && (m.statusCode ?? 0) >= 200 && m.topViaBranch == branch && (try? m.cseq().method) == method
        }
    }

    /// Waits for any response (provisional or final) to `branch`/`method` satisfying `predicate`.
    func response(branch: String, method: SIPMethod, timeout: Duration? = nil, _ predicate: @escaping (Int) -> Bool) async -> SIPMessage? {
        await waitFor(timeout: timeout ?? responseTimeout) { m in
            !m.isRequest && predicate(m.statusCode ?? 0) && m.topViaBranch == branch && (try? m.cseq().method) == method
        }?.0
    }

    /// Lets `duration` pass (messages keep being recorded and answered meanwhile).
    func pause(_ duration: Duration) async { try? await Task.sleep(for: duration) }

    /// The exchange as the report shows it.
    var exchanged: [ExchangedMessage] {
        entries.map { e in
            let summary: String
            if let m = e.message {
                if m.isRequest { summary = "\(m.method?.token ?? "?") \(m.requestURIText ?? "")" }
                else { summary = "\(m.statusCode ?? 0) \(m.reasonPhrase ?? "") (\((try? m.cseq().method.token) ?? "?"))" }
            } else {
                summary = "unparseable: \(e.parseError ?? "?")"
            }
            return ExchangedMessage(direction: e.direction, time: Double(e.time.components.seconds) + Double(e.time.components.attoseconds) / 1e18,
                                    summary: summary, text: String(decoding: e.bytes, as: UTF8.self))
        }
    }
}

/// The runner's listening socket for a run where it plays UAS: the DUT calls this one address
/// for every test, so it outlives the tests' sessions and feeds the current one. A test takes
/// one call: a new call (an INVITE without To tag of a Call-ID the test never saw) that comes
/// once the current test has its call, or once its scenario is over (its session only collects
/// late copies then), is held with what follows in it for the next test, with arrival times.
final class ConformanceListener: Sendable {
    let socket: ConformanceSession.Socket
    /// The transport it listens on.
    let transport: ConformanceTransport
    /// Where it listens.
    let localAddress: SocketAddress
    struct Held: Sendable {
        var event: TransportEvent
        var at: MonotonicClock.Instant
    }
    private struct State: Sendable {
        var current: ConformanceSession?
        var held: [Held] = []
        var heldCalls: Set<String> = []
    }
    private let state = Mutex(State())
    /// At most this many messages are held between two tests (a DUT cannot grow the list).
    static let holdLimit = 256

    /// Listens on `address` over `transport` (TLS: with the certificate in `tls`, which the
    /// DUT's connections are handshaken with).
    init(address: SocketAddress, transport: ConformanceTransport = .udp, tls: TLSConfiguration = .init()) throws(ConformanceError) {
        let holder = Mutex<ConformanceListener?>(nil)
        self.transport = transport
        let handler: @Sendable (TransportEvent) -> Void = { event in holder.withLock { $0 }?.dispatch(event) }
        do {
            switch transport {
            case .udp:
                let t = try UDPTransport(bindingTo: address, handler: handler)
                socket = .udp(t)
                localAddress = t.localAddress
            case .tcp:
                let t = try TCPTransport(listeningOn: address, handler: handler)
                socket = .tcp(t)
                localAddress = t.localAddress
            case .tls:
                let t = try TLSTransport(listeningOn: address, configuration: tls, handler: handler)
                socket = .tls(t)
                localAddress = t.localAddress
            }
        } catch {
            throw .socket("\(error)")
        }
        holder.withLock { $0 = self }
    }

    private func dispatch(_ event: TransportEvent) {
        let at = MonotonicClock.Instant.now
        let target = state.withLock { s -> ConformanceSession? in
            guard case .message(let inbound) = event, let callID = inbound.message.callID else { return s.current }
            // A call the current test did not take (it has one already, or its scenario is
            // over) waits for the next test; so does whatever follows in that call.
            let current = s.current
            let opens = inbound.message.method == .invite && inbound.message.toTag == nil && !(current?.knows(callID: callID) ?? false)
            let taken = current.map { $0.finished || ($0.incomingCall != nil && !$0.expects(inbound.message)) } ?? true
            if (opens && taken) || s.heldCalls.contains(callID) {
                if s.held.count < Self.holdLimit { s.held.append(Held(event: event, at: at)); s.heldCalls.insert(callID) }
                return nil
            }
            return s.current
        }
        target?.received(event, at: at)
    }

    /// When the earliest held message arrived.
    var earliestHeld: MonotonicClock.Instant? { state.withLock { $0.held.first?.at } }

    /// Makes `session` the current one and hands it the held messages.
    func attach(_ session: ConformanceSession) -> [Held] {
        state.withLock { s in
            s.current = session
            defer { s.held = []; s.heldCalls = [] }
            return s.held
        }
    }

    /// Stops feeding `session`.
    func detach(_ session: ConformanceSession) {
        state.withLock { if $0.current === session { $0.current = nil } }
    }

    func close() { socket.close() }
}

/// Lets the socket's handler reach the session once it is built (the cycle it makes ends when
/// ``ConformanceSession/close()`` drops the socket).
private final class WeakSession: Sendable {
    let session = Mutex<ConformanceSession?>(nil)
}
