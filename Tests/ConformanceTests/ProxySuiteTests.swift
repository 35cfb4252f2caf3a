import Testing
import Synchronization
import SIPMessage
import SIPRuntime
import SIPProxy
import SIPAuth
import NetworkIO
@testable import Conformance

/// The `proxy` suite over UDP on 127.0.0.1 against our own proxy (what `switchboard proxy`
/// runs: ``ProxyServer``), record-routing or not, and against a proxy that forgets to
/// decrement Max-Forwards.
@Suite("Conformance proxy suite", .serialized)
struct ProxySuiteTests {
    /// The registrar user the fork test registers as (the runner's credentials).
    static let alice = DigestCredentials(username: "alice", password: "alicepw")

    /// Our proxy on a free port (its registrar knows ``alice``), its outgoing messages passed through `rewrite`.
    static func proxy(recordRoute: Bool = true, tcp: Bool = false, _ rewrite: (@Sendable (SIPMessage) -> SIPMessage?)? = nil) throws -> (SIPEndpoint, ProxyServer) {
        let box = Mutex<ProxyServer?>(nil)
        let any = try SocketAddress(ip: "127.0.0.1", port: 0)
        var config = SIPEndpoint.Configuration(listen: [tcp ? .tcp(any) : .udp(any)])
        config.outboundRewrite = rewrite
        let endpoint = try SIPEndpoint(configuration: config) { e in box.withLock { $0 }?.handle(e) }
        let proxy = ProxyServer(configuration: .init(domain: "switchboard.test", users: [alice.username: alice.password], recordRoute: recordRoute))
        proxy.attach(endpoint)
        box.withLock { $0 = proxy }
        return (endpoint, proxy)
    }

    static func run(_ endpoint: SIPEndpoint, only: Set<String>? = nil, transport: ConformanceTransport = .udp,
                    credentials: DigestCredentials? = alice) async throws -> ConformanceReport {
        let port = endpoint.localAddresses[0].address.port
        let runner = ConformanceRunner(target: try SIPURI("sip:proxy@127.0.0.1:\(port)"), transport: transport, responseTimeout: .seconds(2),
                                       credentials: credentials)
        return try await runner.run(suite: "proxy", only: only)
    }

    static func describe(_ report: ConformanceReport) -> String {
        report.results.map { r in "\(r.name): \(r.verdict) \(r.reason ?? "")" + r.findings.map { "\n   \($0)" }.joined() }.joined(separator: "\n")
    }

    @Test(.timeLimit(.minutes(1)))
    func theSuitePassesAgainstOurProxy() async throws {
        let (endpoint, proxy) = try Self.proxy()
        defer { endpoint.close() }
        let report = try await Self.run(endpoint)
        #expect(report.results.map(\.name) == ["forward-4xx", "forward-6xx", "max-forwards-zero", "record-route", "loop", "cancel", "fork"])
        #expect(report.allPassed, "\(Self.describe(report))")
        #expect(report.results.allSatisfy { $0.findings.isEmpty }, "\(Self.describe(report))")
        #expect(proxy.statistics.cancels == 1)
        // The fork test unregistered its two contacts.
        #expect(proxy.bindings(of: try SIPURI("sip:alice@127.0.0.1")).isEmpty)
    }

    /// The fork test: our proxy forks the INVITE to alice's two contacts at once (each copy to
    /// one contact, a branch of its own), relays the 200 of the first, CANCELs the second on
    /// its branch after its 180, and keeps its 487 to itself.
    @Test(.timeLimit(.minutes(1)))
    func ourProxyForksInParallelAndCancelsTheOtherBranch() async throws {
        let (endpoint, proxy) = try Self.proxy()
        defer { endpoint.close() }
        let report = try await Self.run(endpoint, only: ["fork"])
        let result = try #require(report.results.first)
        #expect(result.verdict == .pass, "\(Self.describe(report))")
        let received = result.messages.filter { $0.direction == .received }
        let invites = received.filter { $0.summary.hasPrefix("INVITE sip:fork-") }
        #expect(invites.count == 2, "\(result.messages.map(\.summary))")
        #expect(received.filter { $0.summary.hasPrefix("CANCEL sip:fork-") }.count == 1, "\(result.messages.map(\.summary))")
        #expect(proxy.statistics.cancels == 0)
        #expect(proxy.statistics.relayedResponses >= 2)
    }

    /// Our proxy's response context beyond the fork test: alice's two contacts registered,
    /// an INVITE to her forked to both; when both refuse (486, then 404) the caller gets one
    /// final response only after the last, the lowest class's first (486); when one declines
    /// 603 while the other rings, the 603 goes back at once and the ringing branch is
    /// CANCELled (RFC 3261 §16.7 steps 5, 6 and 10).
    @Test(.timeLimit(.minutes(1)))
    func ourForkingProxyChoosesTheBestFinalResponse() async throws {
        let (endpoint, _) = try Self.proxy()
        defer { endpoint.close() }
        let port = endpoint.localAddresses[0].address.port
        let s = try ConformanceSession(target: try SocketAddress(ip: "127.0.0.1", port: port), targetURI: try SIPURI("sip:proxy@127.0.0.1:\(port)"),
                                       responseTimeout: .seconds(2), credentials: Self.alice, role: .proxy)
        defer { s.close() }
        var reg = RunnerRegistration(s)
        reg.addressOfRecord = "sip:alice@127.0.0.1"
        let users = ["fa-" + s.token(), "fb-" + s.token()]
        let bound = try await reg.register(users.map { reg.contact($0) }, expires: 120)
        #expect(bound.statusCode == 200)
        for (first, second, expected) in [(486, 404, 486), (603, 0, 603)] {
            var call = ProxyCall(s)
            call.inviteBranch = s.branch()
            var d = call.draft("INVITE", branch: call.inviteBranch, uri: "sip:alice@127.0.0.1:\(port)")
            d.to = "sip:alice@127.0.0.1"
            s.send(d.text(s))
            let mark = s.entries.count
            func forwarded(_ user: String) async -> (SIPMessage, Int)? {
                await s.waitFor(after: mark, timeout: .seconds(2)) { $0.method == .invite && $0.callID == call.callID && ($0.requestURIText ?? "").contains(user) }
            }
            let a = try #require(await forwarded(users[0]))
            let b = try #require(await forwarded(users[1]))
            let hop = try #require(s.entries[a.1].source)
            call.answer(b.0, from: hop, code: 180, tag: "tb")
            call.answer(a.0, from: hop, code: first, tag: "ta")
            if second != 0 {
                // Nothing final goes up while a branch is still pending.
                #expect(await s.finalResponse(branch: call.inviteBranch, method: .invite, timeout: .milliseconds(300)) == nil)
                call.answer(b.0, from: hop, code: second, tag: "tb")
            } else {
                // The 603 ends the search: the ringing branch is cancelled.
                let cancel = try #require(await s.waitFor(after: mark, timeout: .seconds(2)) { $0.method == .cancel && $0.callID == call.callID })
                #expect(cancel.0.topViaBranch == b.0.topViaBranch)
                call.answer(cancel.0, from: hop, code: 200, tag: "tb")
                call.answer(b.0, from: hop, code: 487, tag: "tb")
            }
            let final = try #require(await s.finalResponse(branch: call.inviteBranch, method: .invite))
            #expect(final.statusCode == expected)
            call.ackFailure(final)
            try await Task.sleep(for: .milliseconds(200))
            let finals = s.entries.filter { e in
                e.direction == .received && e.message.map { !$0.isRequest && ($0.statusCode ?? 0) >= 200 && $0.topViaBranch == call.inviteBranch } == true
            }
            #expect(finals.count == 1, "\(finals.compactMap { $0.message?.statusCode })")
        }
        _ = try await reg.register(users.map { reg.contact($0) }, expires: 0)
    }

    /// Without credentials the runner cannot register at a registrar that challenges: the fork
    /// test is inconclusive, naming why.
    @Test(.timeLimit(.minutes(1)))
    func theForkTestWithoutCredentialsIsInconclusive() async throws {
        let (endpoint, _) = try Self.proxy()
        defer { endpoint.close() }
        let report = try await Self.run(endpoint, only: ["fork"], credentials: nil)
        let result = try #require(report.results.first)
        #expect(result.verdict == .inconclusive, "\(Self.describe(report))")
        #expect(result.reason?.contains("no credentials") == true, "\(Self.describe(report))")
    }

    /// A forking proxy that never sends CANCELs on leaves the other branch ringing: the fork
    /// test fails naming §16.7 step 10.
    @Test(.timeLimit(.minutes(1)))
    func aForkingProxyThatDoesNotCancelTheOtherBranchFails() async throws {
        let (endpoint, _) = try Self.proxy { m in m.method == .cancel ? nil : m }
        defer { endpoint.close() }
        let report = try await Self.run(endpoint, only: ["fork"])
        let result = try #require(report.results.first)
        #expect(result.verdict == .fail, "\(Self.describe(report))")
        #expect(result.reason?.contains("§16.7 step 10") == true, "\(Self.describe(report))")
    }

    /// Over TCP: the runner's caller side connects to the proxy, the proxy connects to the
    /// runner's callee side (its listening port), and each side answers on the connection the
    /// request came on.
    @Test(.timeLimit(.minutes(1)))
    func theSuitePassesAgainstOurProxyOverTCP() async throws {
        let (endpoint, proxy) = try Self.proxy(tcp: true)
        defer { endpoint.close() }
        let report = try await Self.run(endpoint, transport: .tcp)
        #expect(report.allPassed, "\(Self.describe(report))")
        #expect(report.results.allSatisfy { $0.findings.isEmpty }, "\(Self.describe(report))")
        #expect(proxy.statistics.cancels == 1)
        // Every request the proxy forwarded came over TCP, with its TCP Via on top.
        let forwarded = report.results.flatMap(\.messages).filter { $0.direction == .received && $0.summary.hasPrefix("INVITE") }
        #expect(!forwarded.isEmpty && forwarded.allSatisfy { $0.text.uppercased().contains("VIA: SIP/2.0/TCP") }, "\(forwarded.map(\.text))")
    }

    /// Over TLS the runner's callee side listens for the proxy's connections: without a
    /// certificate of its own the run is refused up front, naming the options. (The suite over
    /// TLS: `ConformanceTLSTests.theProxySuitePassesOverTLSAgainstOurProxy`.)
    @Test func theProxySuiteOverTLSNeedsACertificate() async throws {
        let runner = ConformanceRunner(target: try SIPURI("sip:proxy@127.0.0.1:5999"), transport: .tls)
        await #expect(throws: ConformanceError.certificateMissing) { try await runner.run(suite: "proxy") }
        #expect(ConformanceError.certificateMissing.description.contains("proxy"))
    }

    /// Without Record-Route the in-dialog test cannot say anything: inconclusive, naming why.
    @Test(.timeLimit(.minutes(1)))
    func aProxyThatDoesNotRecordRouteIsInconclusiveThere() async throws {
        let (endpoint, _) = try Self.proxy(recordRoute: false)
        defer { endpoint.close() }
        let report = try await Self.run(endpoint, only: ["record-route", "forward-4xx"])
        let byName = Dictionary(uniqueKeysWithValues: report.results.map { ($0.name, $0) })
        #expect(byName["forward-4xx"]?.verdict == .pass, "\(Self.describe(report))")
        #expect(byName["record-route"]?.verdict == .inconclusive, "\(Self.describe(report))")
        #expect(byName["record-route"]?.reason?.contains("does not record-route") == true, "\(Self.describe(report))")
    }

    /// A proxy whose forwarded requests keep the Max-Forwards they came with fails, naming §16.6 item 3.
    @Test(.timeLimit(.minutes(1)))
    func aProxyThatKeepsMaxForwardsFails() async throws {
        let (endpoint, _) = try Self.proxy { m in
            guard m.isRequest, m.method != .ack, let mf = (try? m.maxForwards()) ?? nil else { return m }
            var out = m
            try? out.set(.maxForwards, String(mf + 1))
            return out
        }
        defer { endpoint.close() }
        let report = try await Self.run(endpoint, only: ["forward-4xx"])
        let result = try #require(report.results.first)
        #expect(result.verdict == .fail)
        #expect(result.reason?.contains("§16.6 item 3") == true, "\(Self.describe(report))")
    }

    /// A proxy that leaves its own Via on the responses it relays fails, naming §16.7 item 3.
    @Test(.timeLimit(.minutes(1)))
    func aProxyThatKeepsItsViaOnResponsesFails() async throws {
        let (endpoint, _) = try Self.proxy { m in
            guard !m.isRequest else { return m }
            var out = m
            try? out.prepend(.via, "SIP/2.0/UDP 127.0.0.1:9;branch=z9hG4bK-left-behind;rport")
            return out
        }
        defer { endpoint.close() }
        let report = try await Self.run(endpoint, only: ["forward-6xx"])
        let result = try #require(report.results.first)
        #expect(result.verdict == .fail)
        #expect(result.reason?.contains("§16.7 item 3") == true, "\(Self.describe(report))")
    }

    /// A proxy that answers CANCEL but does not send it on fails, naming §16.10.
    @Test(.timeLimit(.minutes(1)))
    func aProxyThatDoesNotForwardCancelFails() async throws {
        let (endpoint, _) = try Self.proxy { m in m.method == .cancel ? nil : m }
        defer { endpoint.close() }
        let report = try await Self.run(endpoint, only: ["cancel"])
        let result = try #require(report.results.first)
        #expect(result.verdict == .fail)
        #expect(result.reason?.contains("§16.10") == true, "\(Self.describe(report))")
    }
}
