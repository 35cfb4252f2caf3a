import SIPMessage
import SIPTransport
import NetworkIO
import Synchronization
import PacketCapture

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

    public var description: String {
        switch self {
        case .badTarget(let t): return "target \(t): a SIP URI with an IP address is needed (e.g. sip:dut@127.0.0.1:5060)"
        case .unsupportedTransport(let t): return "transport \(t.rawValue) is not supported yet (udp and tcp in this version)"
        case .unknownSuite(let s): return "no suite named \(s) (switchboard conform --list names them)"
        case .socket(let s): return "cannot open the runner's socket: \(s)"
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

    struct Entry: Sendable {
        var direction: ExchangedMessage.Direction
        var time: Duration
        var bytes: [UInt8]
        var message: SIPMessage?
        var parseError: String?
    }

    private struct State: Sendable {
        var entries: [Entry] = []
        var counter: UInt64 = 0
    }

    /// Where every datagram of the run is recorded (pcapng), when asked.
    private let capture: CaptureWriter?
    private let state = Mutex(State())
    /// The runner's socket: a UDP socket, or a TCP listener whose connections carry the test.
    enum Socket: Sendable {
        case udp(UDPTransport)
        case tcp(TCPTransport)
        func close() {
            switch self {
            case .udp(let t): t.close()
            case .tcp(let t): t.close()
            }
        }
    }
    private let socket: Mutex<Socket?> = Mutex(nil)
    private let start: MonotonicClock.Instant
    private let nonce: UInt64
    /// The transport the test runs over.
    public let transport: ConformanceTransport

    init(target: SocketAddress, targetURI: SIPURI, transport: ConformanceTransport = .udp, t1: Duration = .milliseconds(500), t2: Duration = .seconds(4),
         responseTimeout: Duration = .seconds(4), capture: CaptureWriter? = nil) throws(ConformanceError) {
        self.responseTimeout = responseTimeout
        self.capture = capture
        self.target = target
        self.targetURI = targetURI
        self.transport = transport
        self.t1 = t1
        self.t2 = t2
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
                throw ConformanceError.unsupportedTransport(.tls)
            }
        } catch let e as ConformanceError {
            throw e
        } catch {
            throw .socket("\(error)")
        }
        holder.session.withLock { $0 = self }
    }

    /// Closes the socket (and its connections).
    func close() {
        let t = socket.withLock { s -> Socket? in defer { s = nil }; return s }
        t?.close()
    }

    private var now: Duration { start.duration(to: .now) }

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
    func sendRaw(_ bytes: [UInt8], on connection: ConnectionID? = nil, to peer: SocketAddress? = nil) {
        var entry = Entry(direction: .sent, time: now, bytes: bytes)
        do { entry.message = try SIPMessage(bytes: bytes) } catch { entry.parseError = "\(error)" }
        state.withLock { $0.entries.append(entry) }
        record(bytes, from: local, to: peer ?? target)
        switch socket.withLock({ $0 }) {
        case .udp(let t): try? t.send(bytes, to: peer ?? target)
        case .tcp(let t):
            if let connection { try? t.send(bytes, on: connection) } else { _ = try? t.send(bytes, to: target) }
        case nil: break
        }
    }

    /// Sends a message to the DUT.
    func send(_ m: SIPMessage) { sendRaw(m.serialized()) }

    /// Sends text (CRLF line ends expected) to the DUT.
    func send(_ text: String) { sendRaw(Array(text.utf8)) }

    // MARK: Receiving

    /// Everything that reaches the test's own socket is the DUT's (the socket is fresh per test).
    private func received(_ event: TransportEvent) {
        switch event {
        case .message(let inbound):
            let m = inbound.message
            record(m.serialized(), from: inbound.source, to: local)
            state.withLock { $0.entries.append(Entry(direction: .received, time: now, bytes: m.serialized(), message: m)) }
            if m.isRequest { answer(m, on: inbound.connection, from: inbound.source) }
        case .malformed(let bytes, let source, let error):
            record(bytes, from: source, to: local)
            state.withLock { $0.entries.append(Entry(direction: .received, time: now, bytes: bytes, parseError: "\(error)")) }
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
        if transport == .tcp { capture.writeTCP(from: a, to: b, payload: bytes, time: time) } else { capture.writeUDP(from: a, to: b, payload: bytes, time: time) }
    }

    /// What the runner owes the DUT: 200 to its requests (BYE, OPTIONS, re-INVITE without
    /// media negotiation); nothing to ACK.
    private func answer(_ request: SIPMessage, on connection: ConnectionID?, from source: SocketAddress) {
        guard let method = request.method, method != .ack else { return }
        var r = SIPMessage(responseTo: request, statusCode: 200, toTag: request.toTag == nil ? token() : nil)
        try? r.append(.contact, "<sip:conform@\(hostPort)\(uriTransport)>")
        try? r.append(.contentLength, "0")
        sendRaw(r.serialized(), on: connection, to: source)
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

/// Lets the socket's handler reach the session once it is built (the cycle it makes ends when
/// ``ConformanceSession/close()`` drops the socket).
private final class WeakSession: Sendable {
    let session = Mutex<ConformanceSession?>(nil)
}
