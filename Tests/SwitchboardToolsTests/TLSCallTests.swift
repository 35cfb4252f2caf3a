import Foundation
import SwitchboardTestSupport
import Testing
import SIPRuntime
import SIPTransport
@testable import SwitchboardTools

/// A test CA and a server certificate for 127.0.0.1, made with the `openssl` tool (installed
/// by scripts/test) in a temporary folder.
struct TestPKI {
    let dir: URL
    var ca: String { dir.appendingPathComponent("ca.pem").path }
    var cert: String { dir.appendingPathComponent("server.pem").path }
    var key: String { dir.appendingPathComponent("server.key").path }

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("sb-pki-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try TestPKI.openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
                             "-subj", "/CN=Switchboard Test CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"], in: dir)
        try TestPKI.openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=sip.test"], in: dir)
        try "subjectAltName=IP:127.0.0.1,DNS:sip.test\n".write(to: dir.appendingPathComponent("ext.cnf"), atomically: true, encoding: .utf8)
        try TestPKI.openssl(["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem",
                             "-days", "2", "-extfile", "ext.cnf"], in: dir)
    }

    static func openssl(_ args: [String], in dir: URL) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = args
        p.currentDirectoryURL = dir
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw ToolError("openssl \(args.first ?? "") failed") }
    }

    func remove() { try? FileManager.default.removeItem(at: dir) }
}

@Suite("Calls over TLS", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") || TestPaths.isCI,
                                  "the openssl tool is missing: TLS call tests skipped"),
       .requires("the openssl tool", { FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") }))
struct TLSCallTests {
    @Test(.timeLimit(.minutes(1)))
    func dialAgainstServeOverTLS() async throws {
        let pki = try TestPKI()
        defer { pki.remove() }
        let serve = try ServeCommand(listen: [try ListenSpec.parse("tls:127.0.0.1:0")], answer: 200,
                                     tls: TLSConfiguration(certificateChain: .file(pki.cert), privateKey: .file(pki.key)))
        defer { serve.endpoint.close() }
        let port = try #require(serve.endpoint.localAddress(.tls)).address.port
        let ok = try await DialCommand.run(target: "sips:test@127.0.0.1:\(port)", count: 30, rate: 300, listen: try ListenSpec.parse("tls:127.0.0.1:0"),
                                           timeout: .seconds(20), tls: TLSConfiguration(trustedCertificates: [.file(pki.ca)]))
        #expect(ok.succeeded == 30, "\(ok.failures)")
        #expect(serve.server.statistics.byes == 30)
        // The name on the certificate can be checked instead of the address.
        let named = try await DialCommand.run(target: "sips:test@127.0.0.1:\(port)", count: 5, rate: 100, listen: try ListenSpec.parse("tls:127.0.0.1:0"),
                                              timeout: .seconds(20), tls: TLSConfiguration(trustedCertificates: [.file(pki.ca)]), serverName: "sip.test")
        #expect(named.succeeded == 5, "\(named.failures)")
        // A client that does not trust the CA fails every call with a transport error.
        let refused = try await DialCommand.run(target: "sips:test@127.0.0.1:\(port)", count: 3, rate: 100, listen: try ListenSpec.parse("tls:127.0.0.1:0"),
                                                timeout: .seconds(10), tls: TLSConfiguration(trustedCertificates: [.file(pki.cert)]))
        #expect(refused.succeeded == 0)
        #expect(refused.failures["INVITE transport error"] == 3, "\(refused.failures)")
        // The wrong name fails too.
        let wrong = try await DialCommand.run(target: "sips:test@127.0.0.1:\(port)", count: 2, rate: 100, listen: try ListenSpec.parse("tls:127.0.0.1:0"),
                                              timeout: .seconds(10), tls: TLSConfiguration(trustedCertificates: [.file(pki.ca)]), serverName: "other.test")
        #expect(wrong.succeeded == 0)
    }
}
