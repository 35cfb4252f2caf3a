import Foundation
import Logging
import NetworkIO
import SIPAuth
import SIPMessage
import SIPTransport
import Synchronization

/// The outcome of a run: SIPp's counters and its exit code.
public struct SIPpRunSummary: Sendable {
    /// Calls started.
    public var created = 0
    /// Calls that reached the end of the scenario.
    public var successful = 0
    /// Calls that failed (unexpected message, timeout, retransmissions exhausted, a failed
    /// `check_it`).
    public var failed = 0
    /// The first ``maxFailuresKept`` failed calls with why, in the order they failed.
    public var failures: [(call: Int, reason: String)] = []
    /// How many failures keep their reason (the count goes on).
    public static let maxFailuresKept = 1000
    /// Whether the global `-timeout` was reached.
    public var timedOut = false
    /// Calls still running when `-timeout_error` stopped the run (neither passed nor failed).
    public var abandoned = 0
    /// Whether `-timeout_error` makes the timeout a failure.
    public var timeoutIsError = false
    /// Whether `<exec int_cmd="stop_now"/>` ended the run (SIPp exits 97 then).
    public var stoppedNow = false
    /// Whether `<exec int_cmd="stop_gracefully"/>` stopped new calls.
    public var stoppedGracefully = false
    /// Response times per counter (`rtd`): how many were measured and their sum, in milliseconds.
    public var responseTimes: [String: (count: Int, totalMilliseconds: Double)] = [:]

    /// SIPp's exit code: 0 when every call succeeded, 1 when at least one failed, 255 when
    /// the global timeout was reached with `-timeout_error`, 97 when it was reached before any
    /// call started.
    public var exitCode: Int32 {
        if stoppedNow { return 97 }
        if timedOut && timeoutIsError { return 255 }
        if failed > 0 { return 1 }
        return timedOut && created == 0 ? 97 : 0
    }
    /// The final statistics line.
    public var statisticsLine: String {
        "calls created: \(created), successful: \(successful), failed: \(failed)" + (abandoned > 0 ? ", abandoned: \(abandoned)" : "")
            + (timedOut ? " (global timeout reached)" : "") + (stoppedNow ? " (stop_now)" : "")
    }
}

/// Why a run could not start.
public struct SIPpRunError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public var message: String
    /// The message.
    public var description: String { message }
}

/// A value held by a scenario variable.
enum SIPpValue: Sendable {
    case double(Double)
    case string(String)
    case bool(Bool)

    /// As SIPp prints it: numbers with six decimals (`%lf`), booleans as true/false.
    var text: String {
        switch self {
        case .string(let s): return s
        case .bool(let b): return b ? "true" : "false"
        case .double(let d): return formatDouble(d)
        }
    }

    var number: Double {
        switch self {
        case .double(let d): return d
        case .bool(let b): return b ? 1 : 0
        case .string(let s): return Double(s.trimmingSpaces) ?? 0
        }
    }

    var isTrue: Bool {
        switch self {
        case .bool(let b): return b
        case .double(let d): return d != 0
        case .string(let s): return !s.isEmpty
        }
    }
}

func formatDouble(_ d: Double) -> String {
    guard d.isFinite else { return d.isNaN ? "nan" : (d < 0 ? "-inf" : "inf") }
    let negative = d < 0
    let scaled = (abs(d) * 1_000_000).rounded()
    guard scaled < 9e18 else { return "\(d)" }
    let n = UInt64(scaled)
    let whole = n / 1_000_000, frac = n % 1_000_000
    let f = String(frac)
    return (negative && n != 0 ? "-" : "") + "\(whole)." + String(repeating: "0", count: 6 - f.count) + f
}

/// Runs a scenario over UDP against a remote host (a UAC scenario) or for the calls that arrive
/// (a UAS scenario), as SIPp does: per call, its commands in order, keywords substituted,
/// messages retransmitted over UDP, received messages matched to the expected ones, actions
/// executed. The verdict per call is SIPp's: a call succeeds when it reaches the scenario's end.
public final class SIPpRunner: Sendable {
    /// The scenario.
    public let scenario: SIPpScenario
    /// The options.
    public let options: SIPpOptions
    /// The scenario's name for trace files (`<name>_<pid>_errors.log`).
    public let traceName: String
    private let injection: SIPpInjection?
    private let state: Mutex<RunState>
    private let transport: Mutex<SIPpLink?> = Mutex(nil)
    private let logger: Logger
    private let pid = Int(getpid())
    private let shell = SIPpShell()

    /// Prepares a run: reads nothing from the network until ``run()``.
    /// - Parameters:
    ///   - traceName: the base of trace file names (SIPp uses the scenario file's name).
    ///   - injection: the `-inf` file's contents, parsed.
    public init(scenario: SIPpScenario, options: SIPpOptions, traceName: String, injection: SIPpInjection? = nil, logger: Logger = .disabled) {
        self.scenario = scenario
        self.options = options
        self.traceName = traceName
        self.injection = injection
        self.logger = logger
        self.state = Mutex(RunState(globals: options.globals.mapValues { .string($0) },
                                    random: SIPpRandom(seed: options.seed ?? UInt64.random(in: 0...UInt64.max))))
    }

    /// The address the runner is bound to, once ``run()`` has started (for tests).
    public var localAddress: SocketAddress? { transport.withLock { $0?.localAddress } }

    /// Runs until the calls are done (`-m`), the global timeout, or cancellation.
    public func run() async throws(SIPpRunError) -> SIPpRunSummary {
        if scenario.startsBySending && options.remote == nil {
            throw SIPpRunError(message: "this scenario starts by sending: a remote host:port is needed")
        }
        let ip: SocketAddress
        do { ip = try SocketAddress(ip: options.localIP, port: options.localPort ?? 5060) } catch {
            throw SIPpRunError(message: "-i \(options.localIP): \(error)")
        }
        let tls = try tlsConfiguration()
        let t: SIPpLink
        do { t = try open(ip, tls: tls) } catch {
            guard options.localPort == nil else { throw SIPpRunError(message: "cannot bind \(ip): \(error)") }
            do { t = try open(ip.withPort(0), tls: tls) } catch {
                throw SIPpRunError(message: "cannot bind \(ip.withPort(0)): \(error)")
            }
        }
        transport.withLock { $0 = t }
        defer {
            // Per-call sockets and connections still open (a run stopped by -timeout_error).
            let left = state.withLock { s -> [SIPpVia] in
                let v = s.closing + s.calls.values.map(\.via)
                s.closing.removeAll()
                return v
            }
            for v in left { if case .socket(let u) = v { u.close() } }
            // What a stream transport still has queued (the last call's final response, say)
            // goes out before it closes, which would drop it: at most a second.
            t.drain(within: .seconds(1))
            t.close()
            transport.withLock { $0 = nil }
        }
        let clock = ContinuousClock()
        let start = clock.now
        state.withLock { $0.start = start; $0.local = t.localAddress }
        let deadline = options.timeout.map { start + .milliseconds(Int64($0 * 1000)) }
        while !Task.isCancelled {
            let now = clock.now
            if let deadline, now >= deadline, !state.withLock({ $0.summary.timedOut }) {
                // SIPp's -timeout: no new calls; the calls running end by themselves (their
                // own timeouts and retransmissions). With -timeout_error the run stops here.
                let stop = options.timeoutIsError
                state.withLock { s in
                    s.summary.timedOut = true
                    if stop { s.summary.abandoned = s.calls.count }
                }
                if stop { break }
            }
            let (done, commands) = state.withLock { s -> (Bool, [String]) in
                var out: [Outgoing] = []
                tick(&s, now: now, &out)
                send(out, &s)
                let c = s.shellCommands
                s.shellCommands.removeAll()
                if s.summary.stoppedNow { s.summary.abandoned = s.calls.count }
                return (isDone(s) || s.summary.stoppedNow, c)
            }
            shell.start(commands)
            closeFinished(t)
            if done { break }
            try? await Task.sleep(for: .milliseconds(2))
        }
        state.withLock { s in send([], &s) }
        shell.start(state.withLock { s in
            defer { s.shellCommands.removeAll() }
            return s.shellCommands
        })
        await shell.finish(within: .seconds(2))
        return state.withLock { s in
            var summary = s.summary
            summary.timeoutIsError = options.timeoutIsError
            return summary
        }
    }

    /// The listener (and main socket) of the run, for `-t`.
    private func open(_ address: SocketAddress, tls: TLSConfiguration?) throws(TransportError) -> SIPpLink {
        let handler: @Sendable (TransportEvent) -> Void = { [weak self] event in self?.received(event) }
        switch options.transport {
        case .udpOne, .udpPerCall:
            let config = UDPTransportConfiguration(receiveBufferSize: options.bufferSize, sendBufferSize: options.bufferSize)
            return .udp(try UDPTransport(bindingTo: address, configuration: config, logger: logger, handler: handler))
        case .tcpOne, .tcpPerCall:
            let config = TCPTransportConfiguration(idleTimeout: nil, maxConnections: options.maxSockets)
            return .tcp(try TCPTransport(listeningOn: address, configuration: config, logger: logger, handler: handler))
        case .tlsOne, .tlsPerCall:
            return .tls(try TLSTransport(listeningOn: address, configuration: tls ?? TLSConfiguration(), logger: logger, handler: handler))
        }
    }

    /// For `-t l1`/`ln`: `-tls_cert` and `-tls_key`, or a self-signed pair made for the run.
    /// Peers are not verified (SIPp does not verify them either).
    private func tlsConfiguration() throws(SIPpRunError) -> TLSConfiguration? {
        guard options.transport == .tlsOne || options.transport == .tlsPerCall else { return nil }
        let cert: PEMSource, key: PEMSource
        switch (options.tlsCertificate, options.tlsKey) {
        case (let c?, let k?):
            cert = .file(c)
            key = .file(k)
        case (nil, nil):
            do {
                let pair = try SelfSignedCertificate.generate(commonName: options.localIP)
                cert = .bytes(pair.certificate)
                key = .bytes(pair.key)
            } catch {
                throw SIPpRunError(message: "cannot generate a self-signed certificate: \(error)")
            }
        default:
            throw SIPpRunError(message: "-tls_cert and -tls_key go together")
        }
        return TLSConfiguration(certificateChain: cert, privateKey: key, verifyPeer: false, idleTimeout: nil, maxConnections: options.maxSockets)
    }

    /// Closes the sockets and connections of the calls that ended (outside the state lock and
    /// off the transports' own threads).
    private func closeFinished(_ link: SIPpLink) {
        let closing = state.withLock { s -> [SIPpVia] in
            let c = s.closing
            s.closing.removeAll()
            return c
        }
        for v in closing {
            switch v {
            case .main: break
            case .socket(let u): u.close()
            case .connection(let id): link.close(connection: id)
            }
        }
    }

    // MARK: State

    struct Retransmission {
        var bytes: [UInt8]
        var interval: Int
        var due: ContinuousClock.Instant
        var count: Int
        var isInvite: Bool
    }

    struct Call {
        let number: Int
        var callID: String
        var peer: SocketAddress
        var index = 0
        var vars: [String: SIPpValue] = [:]
        var last: SIPMessage?
        var pauseUntil: ContinuousClock.Instant?
        var recvDeadline: ContinuousClock.Instant?
        var retransmission: Retransmission?
        /// Per recv command index: what to send again when a copy of its message comes back.
        var replies: [Int: [UInt8]] = [:]
        var lastRecvIndex: Int?
        var lastRecvWasRequest = false
        var requests = 0
        var rtdStarts: [String: ContinuousClock.Instant] = [:]
        var fieldLine: Int
        /// Kept by `recv rrs="true"`: the route set (in the order to use) and the Contact URI.
        var routeSet: [String] = []
        var nextURL: String?
        /// How the call's messages go out: the main socket, its own UDP socket (`un`) or its
        /// connection (`tn`, `ln`, and every callee's over TCP or TLS).
        var via: SIPpVia = .main
        /// Whether the call opened `via` itself (closed when it ends).
        var ownsVia = false
        /// The local port of its own socket (`un`).
        var localPort: UInt16?
        /// The 401/407 of the last `recv auth="true"`, for `[authentication]`.
        var challenge: SIPMessage?
    }

    struct RunState {
        var globals: [String: SIPpValue]
        var start: ContinuousClock.Instant?
        var local: SocketAddress?
        var calls: [String: Call] = [:]
        /// Per call with a timer running, its earliest (retransmission, pause end, recv
        /// timeout): the loop scans these, not the calls.
        var wakes: [String: ContinuousClock.Instant] = [:]
        var nextNumber = 1
        /// The Call-IDs of the last 8192 calls over (their late messages are ignored, not taken
        /// for new calls), in a ring.
        var finished: Set<String> = []
        var finishedRing: [String] = []
        var finishedNext = 0
        var summary = SIPpRunSummary()
        /// `<exec command>` lines to start (outside the lock).
        var shellCommands: [String] = []
        /// For `chance`, `<pause distribution>`, `<sample>` and RANDOM injection lines.
        var random = SIPpRandom(seed: 0)
        /// Sockets and connections of calls over, to close outside the lock.
        var closing: [SIPpVia] = []
        var traceLines: [(file: String, text: String)] = []
    }

    struct Outgoing {
        var bytes: [UInt8]
        var to: SocketAddress
        var via: SIPpVia
    }

    func isDone(_ s: RunState) -> Bool {
        guard s.calls.isEmpty else { return false }
        return s.summary.timedOut || s.summary.stoppedGracefully || s.summary.created >= (options.maxCalls ?? Int.max)
    }

    /// Sends, and writes the trace lines, while the state is still locked: the run cannot see
    /// its last call over and close the socket before that call's last message is out, and two
    /// threads never write (or create) a trace file at once, nor out of order.
    private func send(_ out: [Outgoing], _ s: inout RunState) {
        if !out.isEmpty, let t = transport.withLock({ $0 }) {
            for o in out { try? t.send(o.bytes, to: o.to, via: o.via) }
        }
        if !s.traceLines.isEmpty {
            writeTraces(s.traceLines)
            s.traceLines.removeAll()
        }
    }

    private func writeTraces(_ lines: [(file: String, text: String)]) {
        guard !lines.isEmpty else { return }
        var byFile: [String: String] = [:]
        for l in lines { byFile[l.file, default: ""] += l.text }
        for (file, text) in byFile {
            if let h = FileHandle(forWritingAtPath: file) ?? (FileManager.default.createFile(atPath: file, contents: nil) ? FileHandle(forWritingAtPath: file) : nil) {
                h.seekToEndOfFile()
                h.write(Data(text.utf8))
                h.closeFile()
            }
        }
    }

    private func traceFile(_ kind: String) -> String { (options.traceDirectory.map { $0 + "/" } ?? "") + "\(traceName)_\(pid)_\(kind).log" }

    private func timestamp() -> String {
        let d = Date()
        return "\(d.timeIntervalSince1970)"
    }

    private func trace(_ s: inout RunState, sent: Bool, _ bytes: [UInt8], _ peer: SocketAddress) {
        guard options.traceMessages else { return }
        let text = "----------------------------------------------- \(timestamp())\n\(options.transport.keyword) message \(sent ? "sent" : "received") (\(bytes.count) bytes) \(sent ? "to" : "from") \(peer):\n\n" + String(decoding: bytes, as: UTF8.self) + "\n\n"
        s.traceLines.append((traceFile("messages"), text))
    }

    // MARK: Driving calls

    private func tick(_ s: inout RunState, now: ContinuousClock.Instant, _ out: inout [Outgoing]) {
        placeCalls(&s, now: now, &out)
        let due = s.wakes.compactMap { $0.value <= now ? $0.key : nil }
        for id in due {
            guard var call = s.calls[id] else { continue }
            if var r = call.retransmission, now >= r.due {
                let max = options.maxRetransmissions ?? (r.isInvite ? 5 : 7)
                if r.count >= max {
                    fail(&s, id, "no answer after \(r.count) retransmissions (max_retrans)", &out)
                    continue
                }
                out.append(Outgoing(bytes: r.bytes, to: call.peer, via: call.via))
                trace(&s, sent: true, r.bytes, call.peer)
                r.count += 1
                r.interval = r.isInvite ? min(r.interval * 2, 86_400_000) : min(r.interval * 2, 4000)
                r.due = now + .milliseconds(r.interval)
                call.retransmission = r
                store(&s, id, call)
            }
            if let p = call.pauseUntil, now >= p {
                call.pauseUntil = nil
                let c = scenario.commands[call.index]
                call.index = nextIndex(after: c, call.index, call, &s)
                store(&s, id, call)
                step(&s, id, now: now, &out)
                continue
            }
            if let d = call.recvDeadline, now >= d {
                call.recvDeadline = nil
                let c = scenario.commands[call.index]
                if case .recv(let r) = c.kind, let label = r.onTimeout, let target = scenario.labels[label] {
                    call.index = target
                    store(&s, id, call)
                    step(&s, id, now: now, &out)
                } else {
                    store(&s, id, call)
                    fail(&s, id, "timeout waiting for the message of line \(c.line) (\(describe(c)))", &out)
                }
            }
        }
    }

    /// A caller's new calls: those due at `-r`/`-rp` within `-l` and `-m`. Called by the
    /// loop, and as soon as a message has been handled (so that with `-l` the next call starts
    /// when one ends, not at the next tick).
    private func placeCalls(_ s: inout RunState, now: ContinuousClock.Instant, _ out: inout [Outgoing]) {
        guard scenario.startsBySending, let start = s.start, let remote = options.remote else { return }
        let elapsed = Double((now - start).components.seconds) * 1000 + Double((now - start).components.attoseconds) / 1e15
        let due = options.rate <= 0 ? 0 : Int(elapsed * options.rate / options.ratePeriod) + 1
        while !s.summary.timedOut, !s.summary.stoppedGracefully, !s.summary.stoppedNow, s.summary.created < due, s.summary.created < (options.maxCalls ?? Int.max), s.calls.count < (options.limit ?? Int.max) {
            let n = s.nextNumber
            s.nextNumber += 1
            s.summary.created += 1
            let id = "pending-\(n)"
            var call = Call(number: n, callID: id, peer: remote, fieldLine: fieldLine(for: n, &s.random))
            if options.transport.perCall {
                do {
                    try openPerCall(&call, remote)
                } catch {
                    store(&s, id, call)
                    fail(&s, id, "cannot reach \(remote) over \(options.transport.keyword): \(error)", &out)
                    continue
                }
            }
            store(&s, id, call)
            startRTDs(&s, id, now)
            step(&s, id, now: now, &out)
        }
    }

    /// A caller's own socket (`un`) or connection (`tn`, `ln`).
    private func openPerCall(_ call: inout Call, _ remote: SocketAddress) throws(TransportError) {
        guard let link = transport.withLock({ $0 }) else { throw .transportClosed }
        switch link {
        case .udp(let main):
            let config = UDPTransportConfiguration(receiveBufferSize: 1 << 16, sendBufferSize: 1 << 16)
            let handler: @Sendable (TransportEvent) -> Void = { [weak self] event in self?.received(event) }
            let u = try UDPTransport(bindingTo: main.localAddress.withPort(0), configuration: config, logger: logger, handler: handler)
            call.via = .socket(u)
            call.localPort = u.localAddress.port
        case .tcp, .tls:
            call.via = .connection(try link.connect(to: remote).id)
        }
        call.ownsVia = true
    }

    private func describe(_ c: SIPpCommand) -> String {
        if case .recv(let r) = c.kind { return r.request.map { "request \($0)" } ?? "response \(r.response ?? 0)" }
        return "command"
    }

    private func fieldLine(for call: Int, _ random: inout SIPpRandom) -> Int {
        guard let injection, !injection.lines.isEmpty else { return 0 }
        switch injection.order {
        case .sequential, .user: return (call - 1) % injection.lines.count
        case .random: return Int.random(in: 0..<injection.lines.count, using: &random)
        }
    }

    private func startRTDs(_ s: inout RunState, _ id: String, _ now: ContinuousClock.Instant) {
        // Response-time counters without start_rtd start with the call, as in SIPp.
        for c in scenario.commands {
            if let r = c.rtd, !scenario.commands.contains(where: { $0.startRTD == r }) { s.calls[id]?.rtdStarts[r] = now }
        }
    }

    private func nextIndex(after c: SIPpCommand, _ index: Int, _ call: Call, _ s: inout RunState) -> Int {
        if let next = c.next, let target = scenario.labels[next] {
            if let t = c.test, !(call.vars[t] ?? .bool(false)).isTrue { return index + 1 }
            if let chance = c.chance, Double.random(in: 0..<1, using: &s.random) >= chance { return index + 1 }
            return target
        }
        return index + 1
    }

    private func finish(_ s: inout RunState, _ id: String) {
        guard let call = s.calls.removeValue(forKey: id) else { return }
        s.wakes.removeValue(forKey: id)
        if call.ownsVia { s.closing.append(call.via) }
        s.finished.insert(call.callID)
        if s.finishedRing.count < 8192 {
            s.finishedRing.append(call.callID)
        } else {
            s.finished.remove(s.finishedRing[s.finishedNext])
            s.finishedRing[s.finishedNext] = call.callID
            s.finishedNext = (s.finishedNext + 1) % 8192
        }
    }

    /// Stores a call and its earliest timer.
    private func store(_ s: inout RunState, _ id: String, _ call: Call) {
        s.calls[id] = call
        if let wake = [call.retransmission?.due, call.pauseUntil, call.recvDeadline].compactMap({ $0 }).min() {
            s.wakes[id] = wake
        } else {
            s.wakes.removeValue(forKey: id)
        }
    }

    private func fail(_ s: inout RunState, _ id: String, _ reason: String, _ out: inout [Outgoing]) {
        guard let call = s.calls[id] else { return }
        s.summary.failed += 1
        if s.summary.failures.count < SIPpRunSummary.maxFailuresKept { s.summary.failures.append((call.number, reason)) }
        if options.traceErrors {
            s.traceLines.append((traceFile("errors"), "\(timestamp()) call \(call.number) (Call-ID \(call.callID)): \(reason)\n"))
        }
        finish(&s, id)
    }

    /// After a command (a nop or a send, or the recv at `index` that matched `message`): its
    /// response-time measure, its actions, then the next command; false when an action failed
    /// or stopped the call.
    private func afterCommand(_ c: SIPpCommand, at index: Int, received message: SIPMessage? = nil, _ call: inout Call, id: String,
                              now: ContinuousClock.Instant, _ s: inout RunState, _ out: inout [Outgoing]) -> Bool {
        rtd(&call, c, now, &s)
        var jumped: Int?
        var stop: SIPpInternalCommand?
        if let why = execute(c.actions, &call, &s, message: message, jump: &jumped, stop: &stop) {
            store(&s, id, call)
            fail(&s, id, why, &out)
            return false
        }
        if stopped(stop, &call, id: id, onReceive: message != nil, &s, &out) { return false }
        call.index = jumped ?? nextIndex(after: c, index, call, &s)
        store(&s, id, call)
        return true
    }

    /// Runs the call's commands from its index until it must wait (a recv, a pause) or ends.
    private func step(_ s: inout RunState, _ startID: String, now: ContinuousClock.Instant, _ out: inout [Outgoing]) {
        var id = startID
        var guardCount = 0
        while var call = s.calls[id] {
            guardCount += 1
            if guardCount > 10_000 {
                fail(&s, id, "more than 10000 commands without waiting (a loop in the scenario?)", &out)
                return
            }
            guard call.index >= 0, call.index < scenario.commands.count else {
                if call.index >= scenario.commands.count { s.summary.successful += 1; finish(&s, id) } else { fail(&s, id, "jump to command \(call.index)", &out) }
                return
            }
            let c = scenario.commands[call.index]
            switch c.kind {
            case .recv(let r):
                if call.recvDeadline == nil, let ms = r.timeout ?? options.recvTimeout { call.recvDeadline = now + .milliseconds(ms) }
                store(&s, id, call)
                return
            case .pause(let duration):
                let d: Int
                switch duration {
                case .fixed(let ms): d = ms ?? options.defaultPause
                case .random(let distribution): d = Self.milliseconds(distribution.sample(using: &s.random))
                case .variable(let v): d = Self.milliseconds((call.vars[v] ?? s.globals[v])?.number ?? 0)
                }
                if d > 0 {
                    call.pauseUntil = now + .milliseconds(d)
                    store(&s, id, call)
                    return
                }
                call.index = nextIndex(after: c, call.index, call, &s)
                store(&s, id, call)
            case .nop:
                guard afterCommand(c, at: call.index, &call, id: id, now: now, &s, &out) else { return }
            case .send(let template, let retransmit):
                let method = template.method
                if let method, method != "ACK", method != "CANCEL" { call.requests += 1 }
                let bytes = render(template, call, s, index: call.index)
                out.append(Outgoing(bytes: bytes, to: call.peer, via: call.via))
                trace(&s, sent: true, bytes, call.peer)
                if let recv = call.lastRecvIndex {
                    // What a copy of the last message received gets again: the latest response
                    // to a request, the first request (the ACK) after a response.
                    if call.lastRecvWasRequest ? method == nil : (method != nil && call.replies[recv] == nil) { call.replies[recv] = bytes }
                }
                if let ms = retransmit, !options.transport.isReliable {
                    call.retransmission = Retransmission(bytes: bytes, interval: ms, due: now + .milliseconds(ms), count: 0, isInvite: method == "INVITE")
                }
                if call.number > 0, call.callID.hasPrefix("pending-"), let cid = SIPpRunner.callID(in: bytes) {
                    // A UAC call is known by the Call-ID its first message carries.
                    s.calls.removeValue(forKey: id)
                    s.wakes.removeValue(forKey: id)
                    call.callID = cid
                    id = cid
                }
                guard afterCommand(c, at: call.index, &call, id: id, now: now, &s, &out) else { return }
            }
        }
    }

    private func rtd(_ call: inout Call, _ c: SIPpCommand, _ now: ContinuousClock.Instant, _ s: inout RunState) {
        if let r = c.rtd, let started = call.rtdStarts.removeValue(forKey: r) {
            let d = now - started
            let ms = Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
            let old = s.summary.responseTimes[r] ?? (0, 0)
            s.summary.responseTimes[r] = (old.count + 1, old.totalMilliseconds + ms)
        }
        if let r = c.startRTD { call.rtdStarts[r] = now }
    }

    static func callID(in bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        for line in text.split(separator: "\r\n", omittingEmptySubsequences: false) {
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingSpaces.lowercased()
            if name == "call-id" || name == "i" { return line[line.index(after: colon)...].trimmingSpaces }
        }
        return nil
    }

    // MARK: Receiving

    private func received(_ event: TransportEvent) {
        switch event {
        case .message(let inbound):
            let now = ContinuousClock.now
            state.withLock { s in
                var out: [Outgoing] = []
                handle(&s, inbound.message, from: inbound.source, connection: inbound.connection, now: now, &out)
                placeCalls(&s, now: now, &out)
                send(out, &s)
            }
        case .connectionClosed(let info, let reason):
            if case .closedLocally = reason { return }
            if case .transportClosed = reason { return }
            // The calls on a connection the peer closed (or that failed) fail, as in SIPp.
            state.withLock { s in
                var out: [Outgoing] = []
                for (id, call) in s.calls {
                    let onIt: Bool
                    switch call.via {
                    case .connection(let c): onIt = c == info.id
                    // t1/l1 callers share the connection to the remote host.
                    case .main: onIt = info.direction == .outbound && call.peer == info.remote
                    case .socket: onIt = false
                    }
                    if onIt { fail(&s, id, "connection to \(info.remote) closed (\(reason))", &out) }
                }
                send(out, &s)
            }
        default:
            return
        }
    }

    private func matches(_ r: SIPpReceive, _ m: SIPMessage) -> Bool {
        if let method = r.request {
            guard m.isRequest, let mm = m.method else { return false }
            return "\(mm)" == method
        }
        guard let code = m.statusCode, code == r.response else { return false }
        if let method = r.responseMethod, let cseq = m[.cseq] {
            let cseqMethod = cseq.split(whereSeparator: { $0 == " " || $0 == "\t" }).last.map(String.init) ?? ""
            return cseqMethod == method
        }
        return true
    }

    func handle(_ s: inout RunState, _ m: SIPMessage, from source: SocketAddress, connection: ConnectionID? = nil, now: ContinuousClock.Instant, _ out: inout [Outgoing]) {
        guard let callID = m.callID else { return }
        if options.traceMessages { trace(&s, sent: false, m.serialized(), source) }
        var id = callID
        if s.calls[id] == nil {
            guard !scenario.startsBySending, !s.summary.timedOut, !s.summary.stoppedGracefully, !s.summary.stoppedNow, !s.finished.contains(callID),
                  case .recv(let first) = scenario.commands[0].kind, matches(first, m),
                  s.summary.created < (options.maxCalls ?? Int.max), s.calls.count < (options.limit ?? Int.max) else { return }
            let n = s.nextNumber
            s.nextNumber += 1
            s.summary.created += 1
            var call = Call(number: n, callID: callID, peer: source, fieldLine: fieldLine(for: n, &s.random))
            // A callee answers on the connection the call came on (RFC 3261 §18.2.2).
            if let connection { call.via = .connection(connection) }
            store(&s, callID, call)
            startRTDs(&s, callID, now)
            id = callID
        }
        guard var call = s.calls[id] else { return }
        // Forward: the current recv and the optional ones after it.
        var j = call.index
        var found: Int?
        while j < scenario.commands.count, case .recv(let r) = scenario.commands[j].kind {
            if matches(r, m) { found = j; break }
            if !r.optional { break }
            j += 1
        }
        guard let k = found else {
            // Backward: a copy of a message received before gets what was sent after it again.
            var b = call.index - 1
            while b >= 0 {
                if case .recv(let r) = scenario.commands[b].kind, matches(r, m) {
                    if let reply = call.replies[b] {
                        out.append(Outgoing(bytes: reply, to: call.peer, via: call.via))
                        trace(&s, sent: true, reply, call.peer)
                    }
                    return
                }
                b -= 1
            }
            let what = m.isRequest ? "request \(m.method.map { "\($0)" } ?? "?")" : "response \(m.statusCode ?? 0)"
            fail(&s, id, "unexpected \(what) at line \(scenario.commands[min(call.index, scenario.commands.count - 1)].line)", &out)
            return
        }
        let c = scenario.commands[k]
        call.retransmission = nil
        call.recvDeadline = nil
        call.last = m
        if case .recv(let r) = c.kind, r.authentication, let code = m.statusCode, code == 401 || code == 407 { call.challenge = m }
        call.lastRecvIndex = k
        call.lastRecvWasRequest = m.isRequest
        if case .recv(let r) = c.kind, r.recordRoutes {
            // RFC 3261 §12.1.1/§12.1.2: a UAS keeps the Record-Route values in order, a UAC in reverse.
            let rr = m.elements(.recordRoute).map { $0.trimmingSpaces }
            call.routeSet = m.isRequest ? rr : rr.reversed()
            call.nextURL = m.elements(.contact).first.map { c -> String in
                let v = c.trimmingSpaces
                if let open = v.firstIndex(of: "<"), let close = v[open...].firstIndex(of: ">") { return String(v[v.index(after: open)..<close]) }
                return String(v.prefix { $0 != ";" })
            }
        }
        guard afterCommand(c, at: k, received: m, &call, id: id, now: now, &s, &out) else { return }
        step(&s, id, now: now, &out)
    }

    // MARK: Actions

    /// What an `int_cmd` asks for once the step's actions are done; true when the call is over.
    /// As SIPp 3.6: `stop_call` ends (and fails) the call on a `recv` and is ignored on a
    /// `send` or `nop`; `stop_now` leaves the call abandoned with the run.
    private func stopped(_ stop: SIPpInternalCommand?, _ call: inout Call, id: String, onReceive: Bool, _ s: inout RunState, _ out: inout [Outgoing]) -> Bool {
        switch stop {
        case nil: return false
        case .stopGracefully?:
            s.summary.stoppedGracefully = true
            return false
        case .stopCall?:
            guard onReceive else { return false }
            store(&s, id, call)
            fail(&s, id, "stopped by <exec int_cmd=\"stop_call\"/> at line \(scenario.commands[call.index].line)", &out)
            return true
        case .stopNow?:
            s.summary.stoppedNow = true
            call.retransmission = nil
            call.pauseUntil = nil
            call.recvDeadline = nil
            store(&s, id, call)
            return true
        }
    }

    /// A drawn or variable duration in whole milliseconds, 0…a day.
    static func milliseconds(_ d: Double) -> Int {
        guard d.isFinite, d > 0 else { return 0 }
        return Int(min(d, 86_400_000).rounded())
    }

    /// Executes actions; returns why the call fails, if it does.
    private func execute(_ actions: [SIPpAction], _ call: inout Call, _ s: inout RunState, message: SIPMessage?, jump: inout Int?,
                         stop: inout SIPpInternalCommand?) -> String? {
        func value(_ name: String) -> SIPpValue { call.vars[name] ?? s.globals[name] ?? .string("") }
        func operand(_ o: SIPpOperand) -> Double {
            switch o {
            case .number(let d): return d
            case .variable(let v): return value(v).number
            }
        }
        for a in actions {
            switch a {
            case .ereg(let pattern, let searchIn, let checkIt, let checkItInverse, let caseIndependent, let assignTo, let line):
                let m = message ?? call.last
                let subject: String
                switch searchIn {
                case .message: subject = m.map { String(decoding: $0.serialized(), as: UTF8.self) } ?? ""
                case .body: subject = m.map { String(decoding: $0.body, as: UTF8.self) } ?? ""
                case .header(let h): subject = m?.values(SIPHeaderName(h)).joined(separator: ", ") ?? ""
                }
                guard var regex = try? Regex(pattern) else { return "regexp \"\(pattern)\" (line \(line)) does not compile" }
                if caseIndependent { regex = regex.ignoresCase() }
                let match = try? regex.firstMatch(in: subject)
                if match == nil && checkIt { return "regexp \"\(pattern)\" (line \(line)) did not match (check_it)" }
                if match != nil && checkItInverse { return "regexp \"\(pattern)\" (line \(line)) matched (check_it_inverse)" }
                for (i, name) in assignTo.enumerated() {
                    if let match, i < match.output.count {
                        call.vars[name] = .string(match.output[i].substring.map(String.init) ?? "")
                    } else {
                        call.vars[name] = .string("")
                    }
                }
            case .assign(let v, let o):
                call.vars[v] = .double(operand(o))
            case .assignString(let v, let t):
                call.vars[v] = .string(String(decoding: render(t, call, s, index: call.index, message: false), as: UTF8.self))
            case .arithmetic(let op, let v, let o):
                let x = value(v).number, y = operand(o)
                switch op {
                case .add: call.vars[v] = .double(x + y)
                case .multiply: call.vars[v] = .double(x * y)
                case .divide:
                    guard y != 0 else { return "division of $\(v) by zero" }
                    call.vars[v] = .double(x / y)
                }
            case .test(let assignTo, let v, let compare, let o):
                let x = value(v).number, y = operand(o)
                let r: Bool
                switch compare {
                case .equal: r = x == y
                case .notEqual: r = x != y
                case .greaterThan: r = x > y
                case .lessThan: r = x < y
                case .greaterThanEqual: r = x >= y
                case .lessThanEqual: r = x <= y
                }
                call.vars[assignTo] = .bool(r)
            case .strcmp(let assignTo, let v, let o):
                let x = value(v).text
                let y: String
                switch o {
                case .string(let str): y = str
                case .variable(let w): y = value(w).text
                }
                let r: Double = x == y ? 0 : (Array(x.utf8).lexicographicallyPrecedes(Array(y.utf8)) ? -1 : 1)
                call.vars[assignTo] = .double(r)
            case .jump(let o):
                let value = operand(o)
                guard value.isFinite, value >= 0, value <= Double(scenario.commands.count) else { return "jump to command \(formatDouble(value)), outside the scenario" }
                jump = Int(value)
            case .log(let t):
                if options.traceLogs {
                    s.traceLines.append((traceFile("logs"), String(decoding: render(t, call, s, index: call.index, message: false), as: UTF8.self) + "\n"))
                }
            case .sample(let v, let distribution):
                call.vars[v] = .double(distribution.sample(using: &s.random))
            case .execCommand(let t):
                s.shellCommands.append(String(decoding: render(t, call, s, index: call.index, message: false), as: UTF8.self))
            case .execInternal(let command):
                // SIPp acts on the first one and skips the step's other actions.
                stop = command
                return nil
            }
        }
        return nil
    }

    // MARK: Keywords

    /// Marks where a `[last_*]` keyword expanded to nothing: a header line left empty by it is
    /// dropped (as SIPp does), so that a missing header does not end the header section.
    private static let emptyMark: Character = "\u{1}"

    /// `[timestamp]` as SIPp writes it: `2026-11-26<TAB>04:37:07.064697<TAB>1795667827.064697`.
    static func sippTimestamp() -> String {
        var tv = timeval()
        gettimeofday(&tv, nil)
        var t = time_t(tv.tv_sec)
        var tm = tm()
        localtime_r(&t, &tm)
        func pad(_ n: Int, _ width: Int) -> String {
            let d = String(n)
            return String(repeating: "0", count: max(0, width - d.count)) + d
        }
        let micro = pad(Int(tv.tv_usec), 6)
        return "\(pad(Int(tm.tm_year) + 1900, 4))-\(pad(Int(tm.tm_mon) + 1, 2))-\(pad(Int(tm.tm_mday), 2))\t"
            + "\(pad(Int(tm.tm_hour), 2)):\(pad(Int(tm.tm_min), 2)):\(pad(Int(tm.tm_sec), 2)).\(micro)\t\(tv.tv_sec).\(micro)"
    }

    /// The header answering `challenge` (a 401: `Authorization`, a 407: `Proxy-Authorization`)
    /// for the request whose line starts `requestLine` (its method and Request-URI); empty
    /// when there is no challenge or it cannot be answered (MD5 or SHA-256 digest only).
    func authorization(_ challenge: SIPMessage?, username: String, password: String, requestLine: String) -> String {
        guard let challenge, let code = challenge.statusCode else { return "" }
        let header: SIPHeaderName = code == 407 ? .proxyAuthenticate : .wwwAuthenticate
        let words = requestLine.prefix { $0 != "\r" && $0 != "\n" }.split(separator: " ")
        guard words.count >= 2 else { return "" }
        for value in challenge.values(header) {
            guard let c = try? AuthenticationHeader(value), c.scheme.lowercased() == "digest" else { continue }
            let cnonce = String(UInt64.random(in: 0...UInt64.max), radix: 16)
            guard let answer = try? DigestClient.answer(challenge: c, username: username, password: password, method: String(words[0]),
                                                       uri: String(words[1]), cnonce: cnonce, nonceCount: 1) else { continue }
            return (code == 407 ? "Proxy-Authorization: " : "Authorization: ") + answer.description
        }
        return ""
    }

    func render(_ t: SIPpTemplate, _ call: Call, _ s: RunState, index: Int, message: Bool = true) -> [UInt8] {
        var text = ""
        var hasLen = false
        let localPort = call.localPort ?? s.local?.port ?? 0
        for seg in t.segments {
            switch seg {
            case .text(let x): text += x
            case .keyword(let k):
                switch k {
                case .service: text += options.service
                case .remoteIP: text += call.peer.ipString
                case .remotePort: text += "\(call.peer.port)"
                case .localIP: text += options.localIP
                case .localPort: text += "\(localPort)"
                case .transport: text += options.transport.keyword
                case .mediaIP: text += options.mediaIP ?? options.localIP
                case .mediaPort: text += "\(options.mediaPort)"
                case .mediaIPType: text += (options.mediaIP ?? options.localIP).contains(":") ? "6" : "4"
                case .localIPType: text += options.localIP.contains(":") ? "6" : "4"
                case .pid: text += "\(pid)"
                case .branch(let offset): text += "z9hG4bK-\(pid)-\(call.number)-\(index + offset)"
                case .callID: text += call.callID.hasPrefix("pending-") ? "\(call.number)-\(pid)@\(options.localIP)" : call.callID
                case .callNumber: text += "\(call.number)"
                case .cseq(let offset): text += "\(options.baseCSeq + max(call.requests - 1, 0) + offset)"
                case .len:
                    hasLen = true
                    text += "\u{2}"
                case .last(let header):
                    let values = call.last?.values(SIPHeaderName(header)) ?? []
                    if values.isEmpty { text.append(Self.emptyMark) } else { text += values.map { "\(header): \($0)" }.joined(separator: "\r\n") }
                case .peerTagParam:
                    let tag: String? = call.last.flatMap { $0.isRequest ? $0.fromTag : $0.toTag }
                    text += tag.map { ";tag=\($0)" } ?? ""
                case .variable(let v): text += (call.vars[v] ?? s.globals[v])?.text ?? ""
                case .field(let n):
                    if let injection, call.fieldLine < injection.lines.count, n < injection.lines[call.fieldLine].count {
                        text += injection.lines[call.fieldLine][n]
                    }
                case .key(let k): text += options.keys[k] ?? ""
                case .routes:
                    if call.routeSet.isEmpty { text.append(Self.emptyMark) } else { text += "Route: " + call.routeSet.joined(separator: ", ") }
                case .nextURL: text += call.nextURL ?? ""
                case .lastRequestURI:
                    // SIPp takes it from the To header of the last message received.
                    if let to = call.last?[.to] {
                        let v = to.trimmingSpaces
                        if let open = v.firstIndex(of: "<"), let close = v[open...].firstIndex(of: ">") { text += v[v.index(after: open)..<close] } else { text += v.prefix { $0 != ";" } }
                    }
                case .clockTick:
                    if let start = s.start {
                        let d = ContinuousClock.now - start
                        text += "\(d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000)"
                    } else {
                        text += "0"
                    }
                case .timestamp: text += Self.sippTimestamp()
                case .users: text += "-1"
                case .userID: text += "0"
                case .authentication(let username, let password):
                    // Nothing to answer: the line is dropped, as a missing [last_*] header's.
                    let header = authorization(call.challenge, username: username, password: password, requestLine: text)
                    if header.isEmpty { text.append(Self.emptyMark) } else { text += header }
                }
            }
        }
        guard message else { return Array(text.filter { $0 != Self.emptyMark && $0 != "\u{2}" }.utf8) }
        // Drop header lines a missing [last_*] left empty; then fill in [len]. The marks are
        // one byte each (0x01 empty, 0x02 [len]).
        let bytes = Array(text.utf8)
        var head: [UInt8] = []
        var body: ArraySlice<UInt8> = []
        var lineStart = 0
        while lineStart <= bytes.count {
            var j = lineStart
            while j + 1 < bytes.count, !(bytes[j] == 0x0D && bytes[j + 1] == 0x0A) { j += 1 }
            let end = j + 1 < bytes.count ? j : bytes.count
            let line = bytes[lineStart..<end]
            if line.isEmpty && end < bytes.count {
                body = bytes[(end + 2)...]
                break
            }
            if !line.allSatisfy({ $0 == 0x01 || $0 == 0x20 || $0 == 0x09 }) {
                if !head.isEmpty { head += [0x0D, 0x0A] }
                head += line.lazy.filter { $0 != 0x01 }
            }
            if end >= bytes.count { break }
            lineStart = end + 2
        }
        let bodyBytes = body.filter { $0 != 0x01 }
        var full = head + [0x0D, 0x0A, 0x0D, 0x0A] + bodyBytes
        if hasLen {
            let length = Array(String(bodyBytes.lazy.filter { $0 != 0x02 }.count).utf8)
            var filled: [UInt8] = []
            filled.reserveCapacity(full.count + 8)
            for b in full { if b == 0x02 { filled += length } else { filled.append(b) } }
            full = filled
        }
        return full
    }
}

extension SIPpTemplate {
    /// The request method when the template is a request; nil for a response.
    var method: String? {
        guard case .text(let t)? = segments.first else { return nil }
        let word = t.prefix { !$0.isWhitespace }
        return word.hasPrefix("SIP/") || word.isEmpty ? nil : String(word)
    }
}

/// How a call's messages go out.
enum SIPpVia: Sendable {
    /// The run's socket (UDP: to the call's peer; TCP/TLS: over the connection to it).
    case main
    /// The call's own UDP socket (`-t un`).
    case socket(UDPTransport)
    /// A connection (`-t tn`/`ln`, or the one a callee's call came on).
    case connection(ConnectionID)
}

/// The run's transport (`-t`).
enum SIPpLink: Sendable {
    case udp(UDPTransport)
    case tcp(TCPTransport)
    case tls(TLSTransport)

    var localAddress: SocketAddress {
        switch self {
        case .udp(let t): return t.localAddress
        case .tcp(let t): return t.localAddress
        case .tls(let t): return t.localAddress
        }
    }

    func close() {
        switch self {
        case .udp(let t): t.close()
        case .tcp(let t): t.close()
        case .tls(let t): t.close()
        }
    }

    /// Waits, up to `limit`, until a stream transport has written everything it queued (UDP
    /// queues nothing).
    func drain(within limit: Duration) {
        let clock = ContinuousClock(), deadline = clock.now + limit
        while clock.now < deadline {
            let queued: Int = switch self {
            case .udp: 0
            case .tcp(let t): t.queuedBytes
            case .tls(let t): t.queuedBytes
            }
            guard queued > 0 else { return }
            usleep(2_000)
        }
    }

    func close(connection: ConnectionID) {
        switch self {
        case .udp: break
        case .tcp(let t): t.close(connection: connection)
        case .tls(let t): t.close(connection: connection)
        }
    }

    func connect(to remote: SocketAddress) throws(TransportError) -> ConnectionInfo {
        switch self {
        case .udp: throw .transportClosed
        case .tcp(let t): return try t.connect(to: remote)
        case .tls(let t): return try t.connect(to: remote)
        }
    }

    func send(_ bytes: [UInt8], to remote: SocketAddress, via: SIPpVia) throws(TransportError) {
        switch (self, via) {
        case (_, .socket(let u)): try u.send(bytes, to: remote)
        case (.udp(let t), _): try t.send(bytes, to: remote)
        case (.tcp(let t), .connection(let id)): try t.send(bytes, on: id)
        case (.tcp(let t), .main): _ = try t.send(bytes, to: remote)
        case (.tls(let t), .connection(let id)): try t.send(bytes, on: id)
        case (.tls(let t), .main): _ = try t.send(bytes, to: remote)
        }
    }
}

/// An `-inf` injection file: its order and its lines of `;`-separated fields.
public struct SIPpInjection: Sendable {
    /// How lines are given to calls.
    public enum Order: String, Sendable {
        /// Line after line, call after call.
        case sequential = "SEQUENTIAL"
        /// A random line per call.
        case random = "RANDOM"
        /// One line per user; without `-users`, each call is a user, so line after line.
        case user = "USER"
    }
    /// The order.
    public var order: Order
    /// The fields of each line.
    public var lines: [[String]]

    /// Parses the file: the first line names the order; then one line per entry, fields
    /// separated by `;`; empty lines are skipped.
    public init(parsing text: String, file: String) throws(SIPpUsageError) {
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }).map { $0.hasSuffix("\r") ? String($0.dropLast()) : String($0) }
        guard let first = lines.first, let order = Order(rawValue: first.trimmingSpaces) else {
            throw SIPpUsageError("\(file) line 1: SEQUENTIAL, RANDOM or USER expected")
        }
        lines.removeFirst()
        self.order = order
        self.lines = lines.filter { !$0.isEmpty }.map { $0.split(separator: ";", omittingEmptySubsequences: false).map(String.init) }
        guard !self.lines.isEmpty else { throw SIPpUsageError("\(file): no data lines") }
    }
}

/// A small seeded generator (SplitMix64): `SIPpOptions.seed` makes a run's random choices
/// (`chance`, distributions, RANDOM injection lines) repeatable.
struct SIPpRandom: RandomNumberGenerator, Sendable {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Runs `<exec command>` lines through `/bin/sh -c` without waiting for them (as SIPp forks
/// them), at most ``maxRunning`` at once (beyond, a command is dropped and counted), and at the
/// end of a run waits a bounded time for them, then kills those still running.
final class SIPpShell: Sendable {
    static let maxRunning = 64
    private let running = Mutex<[Process]>([])
    /// Commands not started because ``maxRunning`` were running.
    let dropped = Atomic<Int>(0)

    func start(_ commands: [String]) {
        guard !commands.isEmpty else { return }
        running.withLock { r in
            r.removeAll { !$0.isRunning }
            for c in commands {
                guard r.count < Self.maxRunning else {
                    dropped.add(1, ordering: .relaxed)
                    continue
                }
                let p = Process()
                p.executableURL = URL(fileURLWithPath: "/bin/sh")
                p.arguments = ["-c", c]
                p.standardInput = FileHandle.nullDevice
                if (try? p.run()) != nil { r.append(p) }
            }
        }
    }

    func finish(within limit: Duration) async {
        let clock = ContinuousClock(), deadline = clock.now + limit
        while clock.now < deadline, running.withLock({ r in r.contains { $0.isRunning } }) {
            try? await Task.sleep(for: .milliseconds(10))
        }
        running.withLock { r in
            for p in r where p.isRunning { kill(p.processIdentifier, SIGKILL) }
            r.removeAll()
        }
    }
}
