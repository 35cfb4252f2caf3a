import SIPMessage
import NetworkIO
import PacketCapture
import SIPAuth
import SIPTransport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs a suite's tests one after the other against a DUT and gathers their results.
public struct ConformanceRunner: Sendable {
    /// The DUT's URI (`sip:user@127.0.0.1:5060`): its host must be an IP address.
    public var target: SIPURI
    /// The transport to the DUT (udp, tcp; tls for the uas, uac and proxy suites).
    public var transport: ConformanceTransport
    /// The longest a test may take (a DUT that never answers cannot stall the run).
    public var testTimeLimit: Duration
    /// How long a test waits for a final response before concluding that none is coming (a
    /// responsive device answers in milliseconds; RFC 3261's Timer F would be 32 s).
    public var responseTimeout: Duration
    /// When set, every datagram of the run, both ways, is written to it (pcapng).
    public var capture: CaptureWriter?
    /// Credentials for a DUT that challenges (the `registrar` suite): without them a challenged
    /// test is inconclusive.
    public var credentials: DigestCredentials?
    /// The folder holding the `parser` suite's messages, read in place: `rfc4475/<kind>/<name>.dat`
    /// and `rfc5118/{valid,invalid}/<name>` (the layout of the project's shared corpora).
    public var corpus: String?
    /// Over TLS: whom the runner trusts (``TLSConfiguration/trustedCertificates``; empty: the
    /// system's store), or ``TLSConfiguration/verifyPeer`` off for a self-signed DUT; for the
    /// `uac` and `proxy` suites also the runner's own certificate and key (``TLSConfiguration/certificateChain``,
    /// ``TLSConfiguration/privateKey``), which the DUT's connections are handshaken with.
    public var tls: TLSConfiguration

    /// A runner against `target`.
    public init(target: SIPURI, transport: ConformanceTransport = .udp, testTimeLimit: Duration = .seconds(30), responseTimeout: Duration = .seconds(4),
                capture: CaptureWriter? = nil, credentials: DigestCredentials? = nil, corpus: String? = nil, tls: TLSConfiguration = .init()) {
        self.tls = tls
        self.capture = capture
        self.credentials = credentials
        self.corpus = corpus
        self.responseTimeout = responseTimeout
        self.target = target
        self.transport = transport
        self.testTimeLimit = testTimeLimit
    }

    /// The tests of `suite`, in the order they run.
    public static func tests(of suite: String) throws(ConformanceError) -> [ConformanceTestCase] {
        guard let tests = ConformanceSuites.all[suite] else { throw .unknownSuite(suite) }
        return tests
    }

    /// Runs `suite` (only the tests whose name is in `only`, when given), calling `progress`
    /// with each result as it finishes (index from 1, count).
    public func run(suite: String, only: Set<String>? = nil,
                    progress: @Sendable (Int, Int, ConformanceTestResult) -> Void = { _, _, _ in }) async throws(ConformanceError) -> ConformanceReport {
        // Over TLS: the uas suite (the runner connects to the DUT), the uac suite (the DUT
        // connects to the runner, which needs a certificate) and the proxy suite (both: the
        // runner's caller side connects to the DUT, the DUT's forwards connect to its callee side).
        if transport == .tls, suite != "uas", suite != "uac", suite != "proxy" { throw .suiteTransport(suite: suite, transport) }
        if transport == .tls, suite == "proxy", tls.certificateChain == nil || tls.privateKey == nil { throw .certificateMissing }
        var tests = try Self.tests(of: suite)
        if let only { tests = tests.filter { only.contains($0.name) } }
        if suite == "parser" {
            guard transport == .udp else { throw .suiteTransport(suite: suite, transport) }
            // Every message is read before the first test, so a missing corpus stops the run up front.
            guard let corpus else { throw .corpusMissing("no corpus folder") }
            for t in tests {
                guard let path = ParserSuite.path(of: t.name), access(corpus + "/" + path, R_OK) == 0 else { throw .corpusMissing(corpus + "/" + (ParserSuite.path(of: t.name) ?? t.name)) }
            }
        }
        // The transfer target's answers go to the DUT's source address: UDP only in this version.
        if suite == "transfer", transport != .udp { throw .suiteTransport(suite: suite, transport) }
        let address: SocketAddress
        do { address = try SocketAddress(ip: target.host.address, port: target.port ?? 5060) } catch { throw .badTarget(target.description) }
        // When the runner plays UAS (the `uac` suite) the target is its own listening address:
        // the DUT calls it, one call per test, on one socket for the whole run.
        var listener: ConformanceListener?
        if tests.contains(where: { $0.role == .uas }) {
            if transport == .tls, tls.certificateChain == nil || tls.privateKey == nil { throw .certificateMissing }
            listener = try ConformanceListener(address: address, transport: transport, tls: tls)
        }
        defer { listener?.close() }
        var results: [ConformanceTestResult] = []
        for (i, test) in tests.enumerated() {
            let result = try await run(test, at: address, listener: listener)
            results.append(result)
            progress(i + 1, tests.count, result)
        }
        return ConformanceReport(suite: suite, target: target.description, transport: transport, results: results)
    }

    /// Runs one test on a session of its own and judges it: the scenario's own outcome, then
    /// the rule checker over every message exchanged.
    func run(_ test: ConformanceTestCase, at address: SocketAddress, listener: ConformanceListener? = nil) async throws(ConformanceError) -> ConformanceTestResult {
        let session: ConformanceSession
        if test.role == .uas, let listener {
            session = ConformanceSession(listener: listener, targetURI: target, responseTimeout: responseTimeout, capture: capture)
        } else {
            session = try ConformanceSession(target: address, targetURI: target, transport: transport, responseTimeout: responseTimeout, capture: capture,
                                             credentials: credentials, corpus: corpus, role: test.role == .proxy ? .proxy : .uac,
                                             tls: tls)
        }
        defer { session.close() }
        let clock = MonotonicClock(), started = clock.now
        let limit = testTimeLimit
        let outcome: ScenarioOutcome = await withTaskGroup(of: ScenarioOutcome?.self) { group in
            group.addTask {
                do { return try await test.run(session) } catch { return .failed("the scenario stopped: \(error)") }
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return Task.isCancelled ? nil : .failed("the test did not finish within \(limit)")
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .failed("the test was cancelled")
        }
        session.finished = true
        // Late copies (retransmissions the DUT still sends) belong to the exchange too.
        try? await Task.sleep(for: test.settle)
        // The session's clock: for a UAS test it starts with the first message held for it.
        let end = Self.seconds(max(session.elapsed, started.duration(to: clock.now)))
        let entries = session.entries
        // A message sent outside the rules on purpose (the parser suite's torture messages) is
        // not judged, nor is any response that answers none of the judged requests: they are
        // handed to the checker as blanks of ours (which it skips), keeping the indices.
        let unjudged = entries.contains { !$0.judged }
        let judgedRequests = Set(entries.compactMap { e -> String? in
            guard e.judged, e.direction == .sent, let m = e.message, m.isRequest else { return nil }
            return "\(m.topViaBranch ?? "")|\((try? m.cseq().method.token) ?? "")"
        })
        let records = entries.map { e in
            let answersJudged = e.message.map { m in m.isRequest || judgedRequests.contains("\(m.topViaBranch ?? "")|\((try? m.cseq().method.token) ?? "")") } ?? true
            if !e.judged || (unjudged && e.direction == .received && !answersJudged) {
                return RuleChecker.Record(sent: true, time: Self.seconds(e.time), message: nil)
            }
            return RuleChecker.Record(sent: e.direction == .sent, time: Self.seconds(e.time), message: e.message, parseError: e.parseError)
        }
        // 2xx retransmissions are end to end: a UAS sends them whatever its own transport (RFC 3261
        // §13.3.1.4: a hop behind it may be UDP), so they are checked over TCP too.
        var checker = RuleChecker(t1: Self.seconds(session.t1), t2: Self.seconds(session.t2), checks2xxRetransmissions: true)
        // Timer A runs over unreliable transports only (RFC 3261 §17.1.1.2).
        checker.checksInviteRetransmissions = transport == .udp
        checker.absentDialogs = session.absentDialogs
        let findings = checker.check(records, end: end)
        var verdict: ConformanceVerdict, reason: String?
        switch outcome {
        case .passed: verdict = .pass; reason = nil
        case .failed(let why): verdict = .fail; reason = why
        case .inconclusive(let why): verdict = .inconclusive; reason = why
        }
        if !findings.isEmpty {
            verdict = .fail
            if reason == nil { reason = "the DUT broke \(Set(findings.map(\.rule.reference)).sorted().joined(separator: ", "))" }
        }
        return ConformanceTestResult(name: test.name, etsiPurpose: test.etsiPurpose, reference: test.reference, verdict: verdict, reason: reason,
                                     findings: findings, messages: session.exchanged, duration: end,
                                     runnerAddress: session.local.description,
                                     dutAddress: test.role == .uas ? session.dutAddress.description : address.description)
    }

    static func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
}
