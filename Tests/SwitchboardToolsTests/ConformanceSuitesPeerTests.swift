import Foundation
import Testing
import Synchronization
import SIPMessage
import SIPAuth
import SIPLoad
import SIPRuntime
import NetworkIO
import SwitchboardTestSupport
import Conformance

/// The `registrar` and `parser` suites against Kamailio (scripts/peers/kamailio-start, the
/// project's registrar configuration: alice/alicepw, MD5 without qop, min_expires 30) and the
/// `parser` suite against our transaction-level answering server (what `switchboard serve`
/// runs), all on 127.0.0.1.
@Suite("Conformance registrar and parser suites against peers", .serialized)
struct ConformanceSuitesPeerTests {
    static func describe(_ report: ConformanceReport) -> String {
        report.results.map { "\($0.name): \($0.verdict) \($0.reason ?? "")" + $0.findings.map { "\n   \($0)" }.joined() }.joined(separator: "\n")
    }

    @Test(.timeLimit(.minutes(1)), .enabled(if: Kamailio.available || TestPaths.isCI, "kamailio is not installed: skipped"),
          .requires("kamailio", { Kamailio.available }))
    func theRegistrarSuiteAgainstKamailio() async throws {
        let (pid, port, rundir) = try await Kamailio.start()
        defer { Kamailio.stop(pid) }
        let runner = ConformanceRunner(target: try SIPURI("sip:alice@127.0.0.1:\(port)"), responseTimeout: .seconds(2),
                                       credentials: DigestCredentials(username: "alice", password: "alicepw"))
        let report = try await runner.run(suite: "registrar")
        var expected = Dictionary(uniqueKeysWithValues: ConformanceSuites.registrar.map { ($0.name, ConformanceVerdict.pass) })
        // min_expires 30: Kamailio raises 1 s to 30 s rather than answering 423 (allowed).
        expected["min-expires"] = .inconclusive
        // Its challenge has no qop and its nonces may be used again within their lifetime.
        expected["nonce-reuse"] = .inconclusive
        let verdicts = Dictionary(uniqueKeysWithValues: report.results.map { ($0.name, $0.verdict) })
        #expect(verdicts == expected, "\(Self.describe(report))")
        #expect(report.results.first { $0.name == "min-expires" }?.reason?.contains("expires=30") == true, "\(Self.describe(report))")
        #expect(report.results.first { $0.name == "nonce-reuse" }?.reason?.contains("no qop") == true, "\(Self.describe(report))")
        #expect(report.results.allSatisfy { $0.findings.isEmpty }, "\(Self.describe(report))")
        // The auth suite: MD5 without qop only.
        let auth = try await runner.run(suite: "auth")
        let authVerdicts = Dictionary(uniqueKeysWithValues: auth.results.map { ($0.name, $0.verdict) })
        #expect(authVerdicts == ["md5": .pass, "sha-256": .inconclusive, "qop-auth": .inconclusive, "forged-nonce": .pass], "\(Self.describe(auth))")
        // The tests removed their bindings.
        #expect(!Kamailio.registeredUsers(rundir).contains("AoR: alice"))
    }

    @Test(.timeLimit(.minutes(1)), .enabled(if: Kamailio.available || TestPaths.isCI, "kamailio is not installed: skipped"),
          .requires("kamailio", { Kamailio.available }))
    func theParserSuiteAgainstKamailio() async throws {
        guard TestPaths.requireCorpus("rfc4475/EXPECTATIONS.tsv"), TestPaths.requireCorpus("rfc5118/EXPECTATIONS.tsv") else { return }
        let (pid, port, _) = try await Kamailio.start()
        defer { Kamailio.stop(pid) }
        // Kamailio answers OPTIONS 405 (its script routes INVITE and REGISTER only): an answer all the same.
        let runner = ConformanceRunner(target: try SIPURI("sip:alice@127.0.0.1:\(port)"), responseTimeout: .seconds(1), corpus: TestPaths.corpora)
        let report = try await runner.run(suite: "parser")
        #expect(report.results.count == 61)
        let passed = report.allPassed
        #expect(passed, "\(Self.describe(report))")
    }

    @Test(.timeLimit(.minutes(1)))
    func theParserSuiteAgainstOurAnsweringServer() async throws {
        guard TestPaths.requireCorpus("rfc4475/EXPECTATIONS.tsv"), TestPaths.requireCorpus("rfc5118/EXPECTATIONS.tsv") else { return }
        let box = Mutex<AnsweringServer?>(nil)
        let endpoint = try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { e in box.withLock { $0 }?.handle(e) }
        defer { endpoint.close() }
        let port = endpoint.localAddresses[0].address.port
        let server = AnsweringServer(answerCode: 200, contact: "sip:dut@127.0.0.1:\(port)")
        server.attach(endpoint)
        box.withLock { $0 = server }
        let runner = ConformanceRunner(target: try SIPURI("sip:dut@127.0.0.1:\(port)"), responseTimeout: .seconds(1), corpus: TestPaths.corpora)
        let report = try await runner.run(suite: "parser")
        #expect(report.results.count == 61)
        let passed = report.allPassed
        #expect(passed, "\(Self.describe(report))")
        // It answered the liveness OPTIONS of every test, before and after the message.
        #expect(server.statistics.otherRequests >= 2 * 61)
    }

    /// `serve` echoes the INVITE's Record-Route in its 2xx (RFC 3261 §12.1.1): the `uas`
    /// suite's `record-route` test passes with no finding (it once failed `record-route-echoed`).
    @Test(.timeLimit(.minutes(1)))
    func ourAnsweringServerEchoesRecordRoute() async throws {
        let box = Mutex<AnsweringServer?>(nil)
        let endpoint = try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { e in box.withLock { $0 }?.handle(e) }
        defer { endpoint.close() }
        let port = endpoint.localAddresses[0].address.port
        let server = AnsweringServer(answerCode: 200, contact: "sip:dut@127.0.0.1:\(port)")
        server.attach(endpoint)
        box.withLock { $0 = server }
        let runner = ConformanceRunner(target: try SIPURI("sip:dut@127.0.0.1:\(port)"), responseTimeout: .seconds(2))
        let report = try await runner.run(suite: "uas", only: ["record-route"])
        let result = try #require(report.results.first)
        #expect(result.verdict == .pass, "\(Self.describe(report))")
        #expect(result.findings.isEmpty, "\(Self.describe(report))")
        #expect(server.statistics.acks == 1 && server.statistics.byes == 1)
    }

    /// The `proxy` suite against Kamailio as a record-routing proxy (`record_route()` and
    /// `t_relay()` for a Request-URI not its own: the project's configuration with
    /// WITH_PROXY_FORWARD).
    /// Over UDP, and over TCP (the configuration listens on both; the runner's callee side
    /// is reached on a connection Kamailio opens to it).
    @Test(.timeLimit(.minutes(1)), .enabled(if: Kamailio.available || TestPaths.isCI, "kamailio is not installed: skipped"),
          .requires("kamailio", { Kamailio.available }), arguments: [ConformanceTransport.udp, .tcp])
    func theProxySuiteAgainstKamailio(_ transport: ConformanceTransport) async throws {
        let (pid, port, _) = try await Kamailio.start(define: "WITH_PROXY_FORWARD")
        defer { Kamailio.stop(pid) }
        // The fork test registers two contacts as alice (a user of the configuration).
        let runner = ConformanceRunner(target: try SIPURI("sip:proxy@127.0.0.1:\(port)"), transport: transport, responseTimeout: .seconds(2),
                                       credentials: DigestCredentials(username: "alice", password: "alicepw"))
        let report = try await runner.run(suite: "proxy")
        var expected = Dictionary(uniqueKeysWithValues: (ConformanceSuites.all["proxy"] ?? []).map { ($0.name, ConformanceVerdict.pass) })
        // Its configuration does not detect loops: the looped INVITE is forwarded again.
        expected["loop"] = .inconclusive
        let verdicts = Dictionary(uniqueKeysWithValues: report.results.map { ($0.name, $0.verdict) })
        #expect(verdicts == expected, "\(Self.describe(report))")
        #expect(report.results.allSatisfy { $0.findings.isEmpty }, "\(Self.describe(report))")
    }
}
