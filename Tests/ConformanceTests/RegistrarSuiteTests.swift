import Foundation
import Testing
import Synchronization
import SIPMessage
import SIPRuntime
import SIPProxy
import SIPAuth
import SIPTransport
import NetworkIO
import SwitchboardTestSupport
@testable import Conformance

/// The `registrar` suite over UDP on 127.0.0.1 against our own registrar (what `switchboard
/// proxy` runs: ``ProxyServer`` with digest authentication), with and without credentials, and
/// with the registrar's `--misbehave` fault.
@Suite("Conformance registrar suite", .serialized)
struct RegistrarSuiteTests {
    /// Our registrar (alice/alicepw) on a free port, its outgoing messages passed through `rewrite`.
    static func registrar(_ rewrite: (@Sendable (SIPMessage) -> SIPMessage?)? = nil, algorithms: [DigestAlgorithm] = [.sha256, .md5],
                          transport: ConformanceTransport = .udp) throws -> (SIPEndpoint, ProxyServer) {
        let box = Mutex<ProxyServer?>(nil)
        let any = try SocketAddress(ip: "127.0.0.1", port: 0)
        var config = SIPEndpoint.Configuration(listen: [transport == .tcp ? .tcp(any) : .udp(any)])
        config.outboundRewrite = rewrite
        let endpoint = try SIPEndpoint(configuration: config) { e in box.withLock { $0 }?.handle(e) }
        let proxy = ProxyServer(configuration: .init(domain: "switchboard.test", users: ["alice": "alicepw"], algorithms: algorithms))
        proxy.attach(endpoint)
        box.withLock { $0 = proxy }
        return (endpoint, proxy)
    }

    static func run(_ port: UInt16, credentials: DigestCredentials? = DigestCredentials(username: "alice", password: "alicepw"),
                    only: Set<String>? = nil, suite: String = "registrar", transport: ConformanceTransport = .udp) async throws -> ConformanceReport {
        let runner = ConformanceRunner(target: try SIPURI("sip:alice@127.0.0.1:\(port)"), transport: transport, responseTimeout: .seconds(2), credentials: credentials)
        return try await runner.run(suite: suite, only: only)
    }

    static func describe(_ report: ConformanceReport) -> String {
        report.results.map { r in "\(r.name): \(r.verdict) \(r.reason ?? "")" + r.findings.map { "\n   \($0)" }.joined() }.joined(separator: "\n")
    }

    @Test(.timeLimit(.minutes(1)), arguments: [ConformanceTransport.udp, .tcp])
    func theSuitePassesAgainstOurRegistrar(_ transport: ConformanceTransport) async throws {
        let (endpoint, proxy) = try Self.registrar(transport: transport)
        defer { endpoint.close() }
        let port = endpoint.localAddresses[0].address.port
        let report = try await Self.run(port, transport: transport)
        #expect(report.transport == transport)
        #expect(report.results.map(\.name) == ConformanceSuites.registrar.map(\.name))
        #expect(report.allPassed, "\(Self.describe(report))")
        #expect(report.results.allSatisfy { $0.findings.isEmpty })
        // Every test removed what it bound.
        #expect(proxy.bindings(of: try SIPURI("sip:alice@switchboard.test")).isEmpty)
        // The tests did what they say: the first REGISTER of a test is challenged and answered,
        // the replayed Authorization of nonce-reuse is challenged again, min-expires got 423.
        let reuse = try #require(report.results.first { $0.name == "nonce-reuse" })
        let codes = reuse.messages.filter { $0.direction == .received }.map { $0.summary.prefix(3) }
        #expect(codes.prefix(3) == ["401", "200", "401"], "\(reuse.messages.map(\.summary))")
        let min = try #require(report.results.first { $0.name == "min-expires" })
        #expect(min.messages.contains { $0.direction == .received && $0.summary.hasPrefix("423") && $0.text.contains("Min-Expires: 60") })
        let order = try #require(report.results.first { $0.name == "cseq-order" })
        #expect(order.messages.contains { $0.direction == .sent && $0.text.contains("CSeq: 50 REGISTER") })
    }

    @Test(.timeLimit(.minutes(1)))
    func withoutCredentialsTheChallengedTestsAreInconclusive() async throws {
        let (endpoint, _) = try Self.registrar()
        defer { endpoint.close() }
        let report = try await Self.run(endpoint.localAddresses[0].address.port, credentials: nil)
        let verdicts = Dictionary(uniqueKeysWithValues: report.results.map { ($0.name, $0.verdict) })
        // A wrong password needs no credentials; every other test is stopped by the challenge.
        #expect(verdicts["auth-wrong-password"] == .pass, "\(Self.describe(report))")
        #expect(report.count(.inconclusive) == report.results.count - 1, "\(Self.describe(report))")
        #expect(report.count(.fail) == 0)
        let challenge = try #require(report.results.first { $0.name == "auth-challenge" })
        #expect(challenge.reason?.contains("no credentials") == true)
        #expect(!report.allPassed)
    }

    /// The tests that end with a 2xx listing a binding (the ones the fault touches).
    static let listingTests: Set<String> = Set(ConformanceSuites.registrar.map(\.name)).subtracting(["min-expires", "auth-wrong-password"])

    @Test(.timeLimit(.minutes(1)), arguments: Misbehaviour.allCases.filter { $0.suite == "registrar" })
    func theRegistrarsFaultIsNamedByItsRule(_ fault: Misbehaviour) async throws {
        let (endpoint, _) = try Self.registrar(fault.rewriter())
        defer { endpoint.close() }
        let report = try await Self.run(endpoint.localAddresses[0].address.port)
        let rules = Set(report.results.flatMap(\.findings).map(\.rule))
        #expect(rules == [fault.brokenRule], "\(Self.describe(report))")
        let failed = Set(report.results.filter { $0.verdict != .pass }.map(\.name))
        #expect(failed == Self.listingTests, "\(Self.describe(report))")
        for r in report.results where r.verdict == .fail {
            #expect(r.reason?.hasPrefix("the DUT broke RFC 3261 §10.3 step 8") == true, "\(r.name): \(r.reason ?? "")")
        }
        #expect(report.junitXML.contains(fault.brokenRule.reference))
    }

    @Test(.timeLimit(.minutes(1)))
    func theAuthSuiteAgainstOurRegistrar() async throws {
        let (endpoint, proxy) = try Self.registrar()
        defer { endpoint.close() }
        let report = try await Self.run(endpoint.localAddresses[0].address.port, suite: "auth")
        #expect(report.results.map(\.name) == ["md5", "sha-256", "qop-auth", "forged-nonce"])
        #expect(report.allPassed, "\(Self.describe(report))")
        #expect(report.results.allSatisfy { $0.findings.isEmpty })
        #expect(proxy.bindings(of: try SIPURI("sip:alice@switchboard.test")).isEmpty)
        // The answers used what each test names.
        let sha = try #require(report.results.first { $0.name == "sha-256" })
        #expect(sha.messages.contains { $0.direction == .sent && $0.text.contains("algorithm=SHA-256") })
        let forged = try #require(report.results.first { $0.name == "forged-nonce" })
        #expect(forged.messages.last { $0.direction == .received }.map { !$0.summary.hasPrefix("2") } == true)

        // Offering MD5 only, the SHA-256 test has nothing to check; without credentials nothing runs.
        let (md5Only, _) = try Self.registrar(algorithms: [.md5])
        defer { md5Only.close() }
        let partial = try await Self.run(md5Only.localAddresses[0].address.port, suite: "auth")
        let verdicts = Dictionary(uniqueKeysWithValues: partial.results.map { ($0.name, $0.verdict) })
        #expect(verdicts == ["md5": .pass, "sha-256": .inconclusive, "qop-auth": .pass, "forged-nonce": .pass], "\(Self.describe(partial))")
        let none = try await Self.run(md5Only.localAddresses[0].address.port, credentials: nil, suite: "auth")
        #expect(none.count(.inconclusive) == 4)
    }

    @Test func theSuitesAreListed() throws {
        #expect(Set(["registrar", "parser", "auth"]).isSubset(of: Set(ConformanceSuites.names)))
        #expect(!ConformanceSuites.summary("registrar").isEmpty && !ConformanceSuites.summary("parser").isEmpty)
        #expect(try ConformanceRunner.tests(of: "parser").count == 61)
        // Every test says which RFC text it checks.
        for t in ConformanceSuites.registrar + ConformanceSuites.auth + ConformanceSuites.all["parser", default: []] {
            #expect(t.reference.hasPrefix("RFC "), "\(t.name)")
        }
    }
}
