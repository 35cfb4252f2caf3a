import Foundation
import Testing
import SIPMessage
import SIPRuntime
import SIPTransport
import Switchboard
import NetworkIO
import SwitchboardTestSupport
import Conformance
import SIPProxy
import SIPAuth
import Synchronization

/// The `uas` suite over TLS against our answering phone listening on `tls:127.0.0.1` with a
/// certificate of the test CA (`TestPKI`, made with the openssl tool): the runner trusting that
/// CA, and not verifying at all (`--tls-insecure`); a runner trusting nothing the DUT shows
/// gets no answer.
@Suite("Conformance uas suite over TLS", .serialized,
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") || TestPaths.isCI, "the openssl tool is missing: TLS conformance tests skipped"),
       .requires("the openssl tool", { FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") }))
struct ConformanceTLSTests {
    static func phone(_ pki: TestPKI) throws -> Phone {
        let endpoint = SIPEndpoint.Configuration(listen: [.tls(try SocketAddress(ip: "127.0.0.1", port: 0))],
                                                 tls: TLSConfiguration(certificateChain: .file(pki.cert), privateKey: .file(pki.key)))
        let config = SIPUserAgent.Configuration(endpoint: endpoint, identity: try SIPURI("sip:dut@127.0.0.1"), transport: .tls)
        return try Phone(name: "dut", configuration: config, autoAnswer: .milliseconds(300))
    }

    static func describe(_ report: ConformanceReport) -> String {
        report.results.map { "\($0.name): \($0.verdict) \($0.reason ?? "")" + $0.findings.map { "\n   \($0)" }.joined() }.joined(separator: "\n")
    }

    @Test(.timeLimit(.minutes(1)))
    func theUASSuitePassesOverTLSTrustingTheCA() async throws {
        let pki = try TestPKI()
        defer { pki.remove() }
        let phone = try Self.phone(pki)
        defer { phone.close() }
        let port = phone.agent.endpoint.localAddresses[0].address.port
        let runner = ConformanceRunner(target: try SIPURI("sip:dut@127.0.0.1:\(port)"), transport: .tls, responseTimeout: .seconds(2),
                                       tls: TLSConfiguration(trustedCertificates: [.file(pki.ca)]))
        let report = try await runner.run(suite: "uas")
        #expect(report.transport == .tls)
        #expect(report.results.map(\.name) == ConformanceSuites.uas.map(\.name))
        let passed = report.allPassed
        #expect(passed, "\(Self.describe(report))")
        // The INVITEs went over TLS: their Via says so.
        let invite = try #require(report.results.first?.messages.first { $0.summary.hasPrefix("INVITE") })
        #expect(invite.text.contains("SIP/2.0/TLS "), "\(invite.text)")
    }

    @Test(.timeLimit(.minutes(1)))
    func insecureRunsAndAnUntrustedCertificateGetsNoAnswer() async throws {
        let pki = try TestPKI()
        defer { pki.remove() }
        let phone = try Self.phone(pki)
        defer { phone.close() }
        let port = phone.agent.endpoint.localAddresses[0].address.port
        let target = try SIPURI("sip:dut@127.0.0.1:\(port)")
        let insecure = ConformanceRunner(target: target, transport: .tls, responseTimeout: .seconds(2), tls: TLSConfiguration(verifyPeer: false))
        let ok = try await insecure.run(suite: "uas", only: ["basic-call", "options"])
        #expect(ok.allPassed, "\(Self.describe(ok))")
        // Trusting only the system's store, the handshake fails: nothing is answered.
        let strict = ConformanceRunner(target: target, transport: .tls, responseTimeout: .milliseconds(500))
        let refused = try await strict.run(suite: "uas", only: ["options"])
        #expect(refused.results.first?.verdict == .fail, "\(Self.describe(refused))")
        // Other suites do not run over TLS yet.
        await #expect(throws: ConformanceError.suiteTransport(suite: "registrar", .tls)) { try await insecure.run(suite: "registrar") }
    }

    /// The `uac` suite over TLS: the runner listens with the test CA's certificate for
    /// 127.0.0.1, our calling phone (trusting that CA) dials `sips:`… once per test; every
    /// test passes, and the INVITEs came over TLS.
    @Test(.timeLimit(.minutes(1)))
    func theUACSuitePassesOverTLSAgainstOurCallingPhone() async throws {
        let pki = try TestPKI()
        defer { pki.remove() }
        let endpoint = SIPEndpoint.Configuration(listen: [.tls(try SocketAddress(ip: "127.0.0.1", port: 0))],
                                                 tls: TLSConfiguration(certificateChain: .file(pki.cert), privateKey: .file(pki.key), trustedCertificates: [.file(pki.ca)]))
        var config = SIPUserAgent.Configuration(endpoint: endpoint, identity: try SIPURI("sip:dut@127.0.0.1"), transport: .tls)
        config.redirects.mode = .follow
        config.reliableProvisional = .required   // so that require-420-retry has a Require to refuse
        let phone = try Phone(name: "dut", configuration: config)
        defer { phone.close() }
        let probe = try TCPTransport(listeningOn: try SocketAddress(ip: "127.0.0.1", port: 0)) { _ in }
        let port = probe.localAddress.port
        probe.close()
        let runner = ConformanceRunner(target: try SIPURI("sip:conform@127.0.0.1:\(port)"), transport: .tls, responseTimeout: .seconds(3),
                                       tls: TLSConfiguration(certificateChain: .file(pki.cert), privateKey: .file(pki.key)))
        async let running = runner.run(suite: "uac")
        try await Task.sleep(for: .milliseconds(100))
        let target = try SIPURI("sip:conform@127.0.0.1:\(port);transport=tls")
        for _ in 0..<ConformanceSuites.uac.count {
            let call = await phone.dial(target)
            let state = try? await call.waitUntil("answer", timeout: .seconds(8)) { $0.isEstablished }
            if state?.isEstablished == true {
                try? await Task.sleep(for: .seconds(1))
                await call.hangUp(timeout: .seconds(4))
            } else {
                _ = try? await call.waitUntil("end", timeout: .seconds(8)) { $0.isEnded }
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        let report = try await running
        #expect(report.transport == .tls)
        #expect(report.allPassed, "\(Self.describe(report))")
        let invite = try #require(report.results.first?.messages.first { $0.summary.hasPrefix("INVITE") })
        #expect(invite.text.contains("SIP/2.0/TLS "), "\(invite.text)")
    }

    /// The `proxy` suite over TLS against our proxy (what `switchboard proxy --listen tls:…
    /// --cert --key --ca` runs): the runner's caller side connects to the proxy, the proxy
    /// connects (as a TLS client trusting the test CA) to the runner's callee side, which
    /// listens with the test CA's certificate for 127.0.0.1. Every test passes, with no finding,
    /// and every forwarded request came over TLS with the proxy's TLS Via on top. (The proxy
    /// used to treat `;transport=tls` as UDP, had no UDP listen point, and answered 503.)
    @Test(.timeLimit(.minutes(1)))
    func theProxySuitePassesOverTLSAgainstOurProxy() async throws {
        let pki = try TestPKI()
        defer { pki.remove() }
        let box = Mutex<ProxyServer?>(nil)
        let config = SIPEndpoint.Configuration(listen: [.tls(try SocketAddress(ip: "127.0.0.1", port: 0))],
                                               tls: TLSConfiguration(certificateChain: .file(pki.cert), privateKey: .file(pki.key), trustedCertificates: [.file(pki.ca)]))
        let endpoint = try SIPEndpoint(configuration: config) { e in box.withLock { $0 }?.handle(e) }
        defer { endpoint.close() }
        let proxy = ProxyServer(configuration: .init(domain: "switchboard.test", users: ["alice": "alicepw"]))
        proxy.attach(endpoint)
        box.withLock { $0 = proxy }
        let port = endpoint.localAddresses[0].address.port
        let runner = ConformanceRunner(target: try SIPURI("sip:proxy@127.0.0.1:\(port)"), transport: .tls, responseTimeout: .seconds(2),
                                       credentials: DigestCredentials(username: "alice", password: "alicepw"),
                                       tls: TLSConfiguration(certificateChain: .file(pki.cert), privateKey: .file(pki.key), trustedCertificates: [.file(pki.ca)]))
        let report = try await runner.run(suite: "proxy")
        #expect(report.transport == .tls)
        #expect(report.results.map(\.name) == (ConformanceSuites.all["proxy"] ?? []).map(\.name))
        #expect(report.allPassed, "\(Self.describe(report))")
        #expect(report.results.allSatisfy { $0.findings.isEmpty }, "\(Self.describe(report))")
        #expect(proxy.statistics.cancels == 1)
        let forwarded = report.results.flatMap(\.messages).filter { $0.direction == .received && $0.summary.hasPrefix("INVITE") }
        #expect(!forwarded.isEmpty && forwarded.allSatisfy { $0.text.uppercased().contains("VIA: SIP/2.0/TLS") }, "\(forwarded.map(\.text))")
        #expect(endpoint.statistics.sendErrors == 0)
    }
}
