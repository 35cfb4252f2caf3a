import SwitchboardTestSupport
import Foundation
import Glibc
import NetworkIO
import SIPMessage
import SIPTransport
import Testing

/// A throw-away PKI made at test time with the `openssl` command-line tool (scripts/test
/// installs it): two certificate authorities and leaf certificates signed by them, read into
/// memory (the temporary directory is removed at once).
struct TestPKI: Sendable {
    /// PEM of a key and its certificate.
    struct Identity: Sendable {
        let certificate: [UInt8]
        let key: [UInt8]
        var chain: PEMSource { .bytes(certificate) }
        var privateKey: PEMSource { .bytes(key) }
    }

    let ca: [UInt8]
    let otherCA: [UInt8]
    /// subjectAltName DNS:sip.test, IP:127.0.0.1, IP:::1 (signed by `ca`).
    let server: Identity
    /// subjectAltName URI:sip:example.test only.
    let uriOnly: Identity
    /// subjectAltName DNS:*.wild.test, IP:127.0.0.1.
    let wildcard: Identity
    /// subjectAltName URI:sip:client.test, DNS:client.test (a client certificate).
    let client: Identity
    /// DNS:sip.test, IP:127.0.0.1 but signed by `otherCA`.
    let otherServer: Identity

    static let shared: Result<TestPKI, PKIError> = Result { () throws(PKIError) in try make() }

    struct PKIError: Error, CustomStringConvertible {
        let description: String
    }

    static func openssl() -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/openssl"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    private static func make() throws(PKIError) -> TestPKI {
        guard let tool = openssl() else {
            throw PKIError(description: "the openssl command-line tool is not installed (scripts/test installs the openssl package)")
        }
        guard let dir = makeTemporaryDirectory() else { throw PKIError(description: "cannot create a temporary directory") }
        defer { try? FileManager.default.removeItem(atPath: dir) }

        func run(_ arguments: [String]) throws(PKIError) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: tool)
            process.arguments = arguments
            process.currentDirectoryURL = URL(fileURLWithPath: dir)
            let errors = Pipe()
            process.standardError = errors
            process.standardOutput = FileHandle.nullDevice
            do { try process.run() } catch { throw PKIError(description: "cannot run openssl: \(error)") }
            let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                throw PKIError(description: "openssl \(arguments.joined(separator: " ")) failed: \(text)")
            }
        }
        func read(_ name: String) throws(PKIError) -> [UInt8] {
            guard let data = FileManager.default.contents(atPath: "\(dir)/\(name)") else { throw PKIError(description: "missing \(name)") }
            return Array(data)
        }
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        func makeCA(_ name: String) throws(PKIError) {
            try run(["req", "-x509"] + ec + ["-keyout", "\(name).key", "-out", "\(name).pem", "-days", "2",
                     "-subj", "/CN=Switchboard test \(name)",
                     "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        }
        func makeLeaf(_ name: String, cn: String, san: String, ca: String) throws(PKIError) -> Identity {
            try run(["req"] + ec + ["-keyout", "\(name).key", "-out", "\(name).csr", "-subj", "/CN=\(cn)"])
            let extensions = "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=\(san)\n"
            guard FileManager.default.createFile(atPath: "\(dir)/\(name).ext", contents: Data(extensions.utf8)) else {
                throw PKIError(description: "cannot write \(name).ext")
            }
            try run(["x509", "-req", "-in", "\(name).csr", "-CA", "\(ca).pem", "-CAkey", "\(ca).key", "-set_serial", "\(Int.random(in: 1...1_000_000))",
                     "-days", "2", "-out", "\(name).pem", "-extfile", "\(name).ext"])
            return Identity(certificate: try read("\(name).pem"), key: try read("\(name).key"))
        }
        try makeCA("ca")
        try makeCA("other-ca")
        return TestPKI(
            ca: try read("ca.pem"),
            otherCA: try read("other-ca.pem"),
            server: try makeLeaf("server", cn: "sip.test", san: "DNS:sip.test,IP:127.0.0.1,IP:::1", ca: "ca"),
            uriOnly: try makeLeaf("uri", cn: "example.test", san: "URI:sip:example.test", ca: "ca"),
            wildcard: try makeLeaf("wild", cn: "*.wild.test", san: "DNS:*.wild.test,IP:127.0.0.1", ca: "ca"),
            client: try makeLeaf("client", cn: "client.test", san: "URI:sip:client.test,DNS:client.test", ca: "ca"),
            otherServer: try makeLeaf("other", cn: "sip.test", san: "DNS:sip.test,IP:127.0.0.1", ca: "other-ca"))
    }
}

/// A new private directory under the system's temporary directory (mkdtemp).
func makeTemporaryDirectory() -> String? {
    var template = Array((NSTemporaryDirectory() + "/switchboard-tls-XXXXXX").utf8CString)
    return template.withUnsafeMutableBufferPointer { buffer in mkdtemp(buffer.baseAddress!).map { String(cString: $0) } }
}

@Suite("TLS transport (loopback)")
struct TLSTransportTests {
    static let loopback = try! SocketAddress("127.0.0.1:0")

    let pki: TestPKI

    init() throws {
        pki = try TestPKI.shared.get()
    }

    /// A server presenting `identity` (the `sip.test` certificate by default).
    func server(_ rec: EventRecorder, identity: TestPKI.Identity? = nil, _ adjust: (inout TLSConfiguration) -> Void = { _ in }) throws -> TLSTransport {
        let identity = identity ?? pki.server
        var configuration = TLSConfiguration(certificateChain: identity.chain, privateKey: identity.privateKey, trustedCertificates: [.bytes(pki.ca)])
        adjust(&configuration)
        return try TLSTransport(listeningOn: Self.loopback, configuration: configuration, handler: rec.handler)
    }

    /// A transport without a certificate of its own, trusting `ca` (the test CA by default).
    func client(_ rec: EventRecorder, trusting ca: [UInt8]? = nil, _ adjust: (inout TLSConfiguration) -> Void = { _ in }) throws -> TLSTransport {
        var configuration = TLSConfiguration(trustedCertificates: [.bytes(ca ?? pki.ca)])
        adjust(&configuration)
        return try TLSTransport(listeningOn: Self.loopback, configuration: configuration, handler: rec.handler)
    }

    static func tlsReason(_ reason: ConnectionCloseReason?) -> String? {
        if case .failed(.tls(let text))? = reason { return text }
        return nil
    }

    static func tlsReason(of error: TransportError) -> String? {
        if case .tls(let text) = error { return text }
        return nil
    }

    // MARK: Round trips

    @Test func roundTripBothWaysVerifyingTheServerByIPAddress() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try server(s)
        let client = try client(c)
        defer { server.close(); client.close() }
        #expect(server.kind == .tls)
        #expect(server.acceptsConnections)
        #expect(!client.acceptsConnections)

        // No server name: the certificate must name 127.0.0.1 (subjectAltName IP).
        let info = try client.connect(to: server.localAddress)
        #expect(info.transport == .tls)
        #expect(info.direction == .outbound)
        #expect(await c.wait { _ in c.opened.count == 1 })
        #expect(await s.wait { _ in s.opened.count == 1 })
        let inbound = try #require(s.opened.first)
        #expect(inbound.transport == .tls)
        #expect(inbound.remote == info.local)

        let clientSession = try #require(client.sessionInfo(for: info.id))
        #expect(clientSession.peerVerified)
        #expect(clientSession.protocolVersion == "TLSv1.3")
        #expect(clientSession.peerCertificate?.dnsNames == ["sip.test"])
        #expect(clientSession.peerCertificate?.ipAddresses == ["127.0.0.1", "::1"])
        let serverSession = try #require(server.sessionInfo(for: inbound.id))
        #expect(serverSession.peerCertificate == nil)
        #expect(!serverSession.peerVerified)

        // Client to server, and the response back on the same connection.
        let invite = Fixture.request("INVITE", callID: "tls@test", transport: "TLS", body: Fixture.sdp)
        try client.send(invite, on: info.id)
        let got = await s.waitForMessages(1)
        try #require(got.count == 1)
        #expect(got[0].message.serialized() == invite)
        #expect(got[0].transport == .tls)
        #expect(got[0].connection == inbound.id)
        #expect(got[0].source == info.local)
        try server.send(Fixture.response(to: got[0].message), on: inbound.id)
        let back = await c.waitForMessages(1)
        try #require(back.count == 1)
        #expect(back[0].message.statusCode == 200)
        #expect(back[0].connection == info.id)
        #expect(back[0].transport == .tls)

        // A request from the server to the client over the inbound connection, by address.
        let bye = Fixture.request("BYE", callID: "tls@test", cseq: 2, transport: "TLS")
        #expect(try server.send(bye, to: inbound.remote) == inbound.id)
        let more = await c.waitForMessages(2)
        #expect(more.last?.message.serialized() == bye)

        #expect(server.statistics.handshakesCompleted == 1)
        #expect(client.statistics.handshakesCompleted == 1)
        #expect(server.statistics.connectionsAccepted == 1)
        #expect(client.statistics.connectionsEstablished == 1)
        #expect(server.statistics.messagesReceived == 1)
        #expect(client.statistics.messagesReceived == 2)
        // Bytes are counted on the wire: records are larger than the messages they carry.
        #expect(server.statistics.bytesReceived > invite.count)
    }

    @Test func serverNameIsSentAsSNIAndChecked() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try server(s)
        let client = try client(c)
        defer { server.close(); client.close() }
        let info = try client.connect(to: server.localAddress, serverName: "SIP.Test")
        #expect(client.sessionInfo(for: info.id)?.serverName == "SIP.Test")
        #expect(await s.wait { _ in s.opened.count == 1 })
        let inbound = try #require(s.opened.first)
        #expect(server.sessionInfo(for: inbound.id)?.serverName == "SIP.Test")
        try client.send(Fixture.request(callID: "sni@test", transport: "TLS", host: "sip.test"), on: info.id)
        #expect(await s.waitForMessages(1).first?.message.callID == "sni@test")
    }

    @Test func sipURISubjectAltNameIdentifiesTheDomain() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try server(s, identity: pki.uriOnly)
        let client = try client(c)
        defer { server.close(); client.close() }
        // RFC 5922 §7.1: URI:sip:example.test is the SIP domain example.test.
        let info = try client.connect(to: server.localAddress, serverName: "example.test")
        #expect(client.sessionInfo(for: info.id)?.peerCertificate?.sipDomainIdentities == ["example.test"])
        // It names no IP address, so connecting by address alone fails.
        let error = try #require(throws: TransportError.self) { try client.connect(to: server.localAddress) }
        #expect(Self.tlsReason(of: error)?.contains("does not name the address 127.0.0.1") == true, "\(error)")
    }

    @Test func messageFramedAcrossOneByteRecords() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try server(s)
        let client = try client(c)
        defer { server.close(); client.close() }
        let id = try client.connect(to: server.localAddress).id
        #expect(await s.wait { _ in s.opened.count == 1 })
        let message = Fixture.request("MESSAGE", callID: "bytes@tls", transport: "TLS", body: "hello, one record per byte")
        let receivedBefore = server.statistics.bytesReceived
        for (k, byte) in message.enumerated() {
            let before = client.statistics.bytesSent
            try client.send([byte], on: id)
            // Wait for each byte to leave in its own record before queueing the next.
            let written = await eventually(timeout: .seconds(2)) { client.statistics.bytesSent > before }
            try #require(written, "byte \(k) was not written")
        }
        let got = await s.waitForMessages(1)
        try #require(got.count == 1)
        #expect(got[0].message.serialized() == message)
        // A TLS 1.3 record adds 22 bytes to its one byte of data.
        #expect(server.statistics.bytesReceived - receivedBefore >= message.count * 23)
    }

    @Test func severalMessagesInOneRecordAndOneMessageInSeveralRecords() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try server(s)
        let client = try client(c)
        defer { server.close(); client.close() }
        let id = try client.connect(to: server.localAddress).id
        let small = (0..<3).map { Fixture.request(callID: "small-\($0)@tls", cseq: $0 + 1, transport: "TLS") }
        try client.send(small.reduce([], +), on: id)
        // 40 KB: more than two 16 KiB records.
        let big = Fixture.request("MESSAGE", callID: "big@tls", transport: "TLS", body: String(repeating: "0123456789abcdef", count: 2_500))
        try client.send(big, on: id)
        let got = await s.waitForMessages(4)
        try #require(got.count == 4)
        #expect(got.map(\.message.callID) == ["small-0@tls", "small-1@tls", "small-2@tls", "big@tls"])
        #expect(got[3].message.serialized() == big)
    }

    @Test func keepAlivePingAndPongOverTLS() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try server(s)
        let client = try client(c)
        defer { server.close(); client.close() }
        let info = try client.connect(to: server.localAddress)
        try client.sendKeepAlivePing(on: info.id)
        #expect(await c.wait { $0.contains { if case .keepAlivePong(info.id) = $0 { return true } else { return false } } })
        #expect(s.all.contains { if case .keepAlivePing = $0 { return true } else { return false } })
        #expect(server.statistics.keepAlivePingsAnswered == 1)
        #expect(client.statistics.keepAlivePongsReceived == 1)
        // Messages still flow afterwards.
        try client.send(Fixture.request(transport: "TLS"), on: info.id)
        #expect(await s.waitForMessages(1).count == 1)
    }

    @Test func sendToAddressConnectsInTheBackgroundAndReusesTheConnection() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try server(s)
        let client = try client(c)
        defer { server.close(); client.close() }
        let id1 = try client.send(Fixture.request(callID: "reuse-1@tls", transport: "TLS"), to: server.localAddress, serverName: "sip.test")
        let id2 = try client.send(Fixture.request(callID: "reuse-2@tls", cseq: 2, transport: "TLS"), to: server.localAddress, serverName: "sip.test")
        #expect(id1 == id2)
        #expect(client.connection(to: server.localAddress, serverName: "sip.test") == id1)
        let got = await s.waitForMessages(2)
        try #require(got.count == 2)
        #expect(got.map(\.message.callID) == ["reuse-1@tls", "reuse-2@tls"])
        #expect(c.opened.map(\.id) == [id1])
        #expect(client.sessionInfo(for: id1)?.serverName == "sip.test")
        #expect(try client.send(Fixture.request(callID: "reuse-3@tls", cseq: 3, transport: "TLS"), to: server.localAddress, serverName: "sip.test") == id1)
        #expect(await s.waitForMessages(3).count == 3)
        // A connection opened for another name (here: none, checked by address) is a new one.
        let byAddress = try client.send(Fixture.request(callID: "by-address@tls", transport: "TLS"), to: server.localAddress)
        #expect(byAddress != id1)
        #expect(await s.waitForMessages(4).count == 4)
        #expect(server.statistics.connectionsAccepted == 2)
        #expect(client.statistics.connectionsEstablished == 2)
        // The server answers by address over the inbound connection.
        let inbound = try #require(got.first)
        #expect(try server.send(Fixture.response(to: inbound.message), to: inbound.source) == inbound.connection)
        #expect(await c.waitForMessages(1).first?.connection == id1)
    }

    @Test func interoperatesWithOpenSSLsClientOverTLS12() async throws {
        let tool = try #require(TestPKI.openssl())
        let dir = try #require(makeTemporaryDirectory())
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(FileManager.default.createFile(atPath: "\(dir)/ca.pem", contents: Data(pki.ca)))
        let s = EventRecorder()
        let server = try server(s)
        defer { server.close() }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = ["s_client", "-connect", "127.0.0.1:\(server.localAddress.port)", "-tls1_2", "-servername", "sip.test",
                             "-CAfile", "\(dir)/ca.pem", "-verify_return_error", "-quiet", "-no_ign_eof"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }

        let request = Fixture.request(callID: "s_client@tls12", transport: "TLS")
        input.fileHandleForWriting.write(Data(request))
        let got = await s.waitForMessages(1, timeout: .seconds(2))
        try #require(got.count == 1)
        #expect(got[0].message.serialized() == request)
        let inbound = try #require(got[0].connection)
        #expect(server.sessionInfo(for: inbound)?.protocolVersion == "TLSv1.2")
        #expect(server.sessionInfo(for: inbound)?.serverName == "sip.test")
        let response = Fixture.response(to: got[0].message)
        try server.send(response, on: inbound)
        // s_client prints what it decrypts; read until the whole response has arrived.
        var printed: [UInt8] = []
        let deadline = ContinuousClock.now + .seconds(2)
        while printed.count < response.count && ContinuousClock.now < deadline {
            var pfd = pollfd(fd: output.fileHandleForReading.fileDescriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 100) > 0 else { continue }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            printed += chunk
        }
        #expect(printed == response)
        try input.fileHandleForWriting.close()
        #expect(await s.wait(timeout: .seconds(2)) { _ in s.closed.count == 1 })
        #expect(s.closed.first?.1 == .remoteClosed)
    }

    // MARK: Failures

    @Test func aClientThatDoesNotTrustTheCAFails() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try server(s)
        let client = try client(c, trusting: pki.otherCA)
        defer { server.close(); client.close() }
        let error = try #require(throws: TransportError.self) { try client.connect(to: server.localAddress, serverName: "sip.test") }
        let reason = try #require(Self.tlsReason(of: error), "\(error)")
        #expect(reason.contains("certificate verify failed"), "\(reason)")
        #expect(client.connections.isEmpty)
        #expect(client.statistics.handshakeFailures == 1)
        #expect(client.statistics.connectFailures == 1)
        // The server sees the client's alert.
        #expect(await s.wait { _ in s.closed.count == 1 })
        let serverReason = try #require(Self.tlsReason(s.closed.first?.1), "\(s.closed)")
        #expect(serverReason.contains("unknown ca"), "\(serverReason)")
        #expect(s.opened.isEmpty)
        #expect(server.statistics.handshakeFailures == 1)

        // A background connect fails the same way, reported with the id send returned.
        let id = try client.send(Fixture.request(transport: "TLS"), to: server.localAddress, serverName: "sip.test")
        #expect(await c.wait { _ in c.closed.count == 1 })
        let (info, closeReason) = try #require(c.closed.first)
        #expect(info.id == id)
        #expect(Self.tlsReason(closeReason)?.contains("certificate verify failed") == true, "\(closeReason)")
        #expect(c.opened.isEmpty)
        #expect(s.messages.isEmpty)

        // Without verification the same client connects (tests and diagnostics only).
        let lax = try self.client(EventRecorder(), trusting: pki.otherCA) { $0.verifyPeer = false }
        defer { lax.close() }
        let laxInfo = try lax.connect(to: server.localAddress, serverName: "sip.test")
        #expect(lax.sessionInfo(for: laxInfo.id)?.peerVerified == false)
    }

    @Test func aServerCertificateFromAnotherCAFails() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try server(s, identity: pki.otherServer)
        let client = try client(c)
        defer { server.close(); client.close() }
        let error = try #require(throws: TransportError.self) { try client.connect(to: server.localAddress) }
        #expect(Self.tlsReason(of: error)?.contains("certificate verify failed") == true, "\(error)")
    }

    @Test func aWrongHostNameFails() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try server(s)
        let client = try client(c)
        defer { server.close(); client.close() }
        let error = try #require(throws: TransportError.self) { try client.connect(to: server.localAddress, serverName: "other.test") }
        let reason = try #require(Self.tlsReason(of: error), "\(error)")
        #expect(reason.contains("does not identify other.test"), "\(reason)")
        #expect(reason.contains("DNS:sip.test"), "\(reason)")
        #expect(client.connections.isEmpty)
        #expect(client.statistics.handshakeFailures == 1)
        // Suffixes do not match either.
        #expect(throws: TransportError.self) { try client.connect(to: server.localAddress, serverName: "test") }
        #expect(throws: TransportError.self) { try client.connect(to: server.localAddress, serverName: "x.sip.test") }
    }

    @Test func wildcardCertificatesDoNotIdentifyASIPDomain() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try server(s, identity: pki.wildcard)
        let client = try client(c)
        defer { server.close(); client.close() }
        // RFC 5922 §7.2: no wildcard matching.
        let error = try #require(throws: TransportError.self) { try client.connect(to: server.localAddress, serverName: "a.wild.test") }
        #expect(Self.tlsReason(of: error)?.contains("does not identify a.wild.test") == true, "\(error)")
        // The same certificate is fine by its IP address.
        try client.connect(to: server.localAddress)
    }

    @Test func plainTextToTheTLSPortFailsCleanly() async throws {
        let s = EventRecorder()
        let server = try server(s)
        defer { server.close() }
        let raw = try #require(RawTCPClient(connectingTo: server.localAddress))
        raw.write(Fixture.request(transport: "TCP"))
        #expect(raw.seesEndOfStream())
        #expect(await s.wait { _ in s.closed.count == 1 })
        let reason = try #require(Self.tlsReason(s.closed.first?.1), "\(s.closed)")
        #expect(!reason.isEmpty)
        #expect(s.opened.isEmpty)
        #expect(s.messages.isEmpty)
        #expect(server.statistics.handshakeFailures == 1)
        #expect(server.connections.isEmpty)
        // The listener keeps serving TLS clients.
        let client = try client(EventRecorder())
        defer { client.close() }
        try client.connect(to: server.localAddress)
        #expect(await s.wait { _ in s.opened.count == 1 })
    }

    @Test func aSilentPeerFailsTheHandshakeAtItsTimeout() async throws {
        let s = EventRecorder()
        let server = try server(s) { $0.handshakeTimeout = .milliseconds(200) }
        defer { server.close() }
        let raw = try #require(RawTCPClient(connectingTo: server.localAddress))
        #expect(raw.seesEndOfStream(timeout: .seconds(2)))
        #expect(await s.wait { _ in s.closed.count == 1 })
        #expect(Self.tlsReason(s.closed.first?.1)?.contains("did not complete in time") == true, "\(s.closed)")
    }

    @Test func withoutACertificateInboundConnectionsAreRefused() async throws {
        let c = EventRecorder()
        let client = try client(c)
        defer { client.close() }
        let raw = try #require(RawTCPClient(connectingTo: client.localAddress))
        #expect(raw.seesEndOfStream())
        #expect(await eventually { client.statistics.connectionsRejected == 1 })
        #expect(c.all.isEmpty)
    }

    // MARK: Mutual TLS

    @Test func mutualTLSAcceptsAVerifiedClientCertificate() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try server(s) { $0.clientCertificates = .required }
        let client = try client(c) {
            $0.certificateChain = pki.client.chain
            $0.privateKey = pki.client.privateKey
        }
        defer { server.close(); client.close() }
        let info = try client.connect(to: server.localAddress, serverName: "sip.test")
        #expect(await s.wait { _ in s.opened.count == 1 })
        let inbound = try #require(s.opened.first)
        let session = try #require(server.sessionInfo(for: inbound.id))
        #expect(session.peerVerified)
        #expect(session.peerCertificate?.sipDomainIdentities == ["client.test", "client.test"])
        #expect(session.peerCertificate?.identifies(domain: "client.test") == true)
        try client.send(Fixture.request(callID: "mtls@test", transport: "TLS"), on: info.id)
        #expect(await s.waitForMessages(1).first?.message.callID == "mtls@test")
    }

    @Test func mutualTLSRefusesAClientWithoutACertificate() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try server(s) { $0.clientCertificates = .required }
        let client = try client(c)
        defer { server.close(); client.close() }
        // Under TLS 1.3 the client's handshake ends before the server has judged it: the
        // failure comes either from connect or as the connection's close.
        do {
            try client.connect(to: server.localAddress, serverName: "sip.test")
            #expect(await c.wait { _ in c.closed.count == 1 })
            #expect(Self.tlsReason(c.closed.first?.1) != nil, "\(c.closed)")
        } catch {
            #expect(Self.tlsReason(of: error) != nil, "\(error)")
        }
        #expect(await s.wait { _ in s.closed.count == 1 })
        let reason = try #require(Self.tlsReason(s.closed.first?.1), "\(s.closed)")
        #expect(reason.contains("certificate"), "\(reason)")
        #expect(s.opened.isEmpty)
    }

    @Test func mutualTLSRefusesAClientCertificateFromAnUntrustedCA() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try server(s) { $0.clientCertificates = .optional }
        let client = try client(c) {
            $0.certificateChain = pki.otherServer.chain
            $0.privateKey = pki.otherServer.privateKey
        }
        defer { server.close(); client.close() }
        do {
            try client.connect(to: server.localAddress, serverName: "sip.test")
            #expect(await c.wait { _ in c.closed.count == 1 })
        } catch {
            #expect(Self.tlsReason(of: error) != nil, "\(error)")
        }
        #expect(await s.wait { _ in s.closed.count == 1 })
        #expect(Self.tlsReason(s.closed.first?.1)?.contains("certificate verify failed") == true, "\(s.closed)")
        // With `.optional`, a client without a certificate is accepted.
        let anonymous = try self.client(EventRecorder())
        defer { anonymous.close() }
        let info = try anonymous.connect(to: server.localAddress, serverName: "sip.test")
        try anonymous.send(Fixture.request(callID: "anonymous@test", transport: "TLS"), on: info.id)
        #expect(await s.waitForMessages(1).first?.message.callID == "anonymous@test")
    }

    // MARK: Closing

    @Test func idleConnectionsAreClosed() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try server(s) { $0.idleTimeout = .milliseconds(150) }
        let client = try client(c) { $0.idleTimeout = nil }
        defer { server.close(); client.close() }
        let start = ContinuousClock.now
        let info = try client.connect(to: server.localAddress)
        #expect(await s.wait(timeout: .seconds(2)) { _ in s.closed.count == 1 })
        #expect(start.duration(to: .now) >= .milliseconds(140))
        #expect(s.closed.first?.1 == .idleTimeout)
        #expect(server.statistics.idleTimeouts == 1)
        // The client sees the close_notify as the peer closing.
        #expect(await c.wait { _ in c.closed.count == 1 })
        #expect(c.closed.first?.0.id == info.id)
        #expect(c.closed.first?.1 == .remoteClosed)
    }

    @Test func closeOneConnectionAndTheTransport() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try server(s)
        let client = try client(c)
        defer { server.close(); client.close() }
        let first = try client.connect(to: server.localAddress)
        let second = try client.connect(to: server.localAddress, serverName: "sip.test")
        #expect(await s.wait { _ in s.opened.count == 2 })
        client.close(connection: first.id)
        #expect(await c.wait { _ in c.closed.count == 1 })
        #expect(c.closed.first?.1 == .closedLocally)
        #expect(throws: TransportError.connectionClosed(first.id)) { try client.send([0x41], on: first.id) }
        #expect(await s.wait { _ in s.closed.count == 1 })
        #expect(s.closed.first?.1 == .remoteClosed)
        // The other connection is untouched.
        try client.send(Fixture.request(callID: "still@tls", transport: "TLS"), on: second.id)
        #expect(await s.waitForMessages(1).first?.message.callID == "still@tls")
        server.close()
        #expect(s.closed.count == 2)
        #expect(s.closed.last?.1 == .transportClosed)
        #expect(await c.wait { _ in c.closed.count == 2 })
        #expect(c.closed.last?.1 == .remoteClosed)
        #expect(throws: TransportError.transportClosed) { try server.send([], to: client.localAddress) }
    }

    // MARK: Configuration

    @Test func certificatesAndKeysLoadFromFiles() async throws {
        let dir = try #require(makeTemporaryDirectory())
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for (name, bytes) in [("server.pem", pki.server.certificate), ("server.key", pki.server.key), ("ca.pem", pki.ca)] {
            #expect(FileManager.default.createFile(atPath: "\(dir)/\(name)", contents: Data(bytes)))
        }
        let s = EventRecorder()
        let server = try TLSTransport(listeningOn: Self.loopback, configuration: TLSConfiguration(
            certificateChain: .file("\(dir)/server.pem"), privateKey: .file("\(dir)/server.key")), handler: s.handler)
        let client = try TLSTransport(listeningOn: Self.loopback, configuration: TLSConfiguration(trustedCertificates: [.file("\(dir)/ca.pem")])) { _ in }
        defer { server.close(); client.close() }
        try client.connect(to: server.localAddress, serverName: "sip.test")
        #expect(await s.wait { _ in s.opened.count == 1 })
    }

    @Test func badCertificatesAndKeysAreReported() throws {
        func failure(_ configuration: TLSConfiguration) -> String? {
            do {
                let t = try TLSTransport(listeningOn: Self.loopback, configuration: configuration) { _ in }
                t.close()
                return nil
            } catch {
                return Self.tlsReason(of: error)
            }
        }
        let mismatched = failure(TLSConfiguration(certificateChain: pki.server.chain, privateKey: pki.client.privateKey))
        #expect(mismatched?.contains("mismatch") == true, "\(String(describing: mismatched))")
        let missing = failure(TLSConfiguration(certificateChain: .file("/nonexistent/cert.pem"), privateKey: pki.server.privateKey))
        #expect(missing?.contains("/nonexistent/cert.pem") == true, "\(String(describing: missing))")
        let garbage = failure(TLSConfiguration(trustedCertificates: [.text("not a certificate")]))
        #expect(garbage?.contains("no certificate") == true, "\(String(describing: garbage))")
        #expect(failure(TLSConfiguration(certificateChain: pki.server.chain)) != nil)
    }

    // MARK: RFC 5922 identity rules

    @Test func sipDomainIdentitiesFollowRFC5922() {
        let uris = TLSPeerCertificate(dnsNames: ["proxy.example.com"], uris: ["sip:example.com", "sip:alice@example.org", "sips:secure.example.net", "http://example.edu", "sip:Example.NET;transport=tls"], commonNames: ["ignored.example"])
        #expect(uris.sipDomainIdentities == ["example.com", "Example.NET", "proxy.example.com"])
        #expect(uris.identifies(domain: "EXAMPLE.com"))
        #expect(uris.identifies(domain: "example.net."))
        #expect(!uris.identifies(domain: "example.org"))  // a URI with a user part is no domain identity
        #expect(!uris.identifies(domain: "secure.example.net"))  // only the sip scheme
        #expect(!uris.identifies(domain: "ignored.example"))  // the CN counts only without subjectAltName
        #expect(!uris.identifies(domain: "www.example.com"))  // no suffix matching
        #expect(!uris.identifies(domain: "com"))

        let commonNameOnly = TLSPeerCertificate(commonNames: ["legacy.example.com"])
        #expect(commonNameOnly.identifies(domain: "legacy.example.com"))
        let emptySubjectAltName = TLSPeerCertificate(commonNames: ["legacy.example.com"], hasSubjectAltName: true)
        #expect(!emptySubjectAltName.identifies(domain: "legacy.example.com"))

        let wildcard = TLSPeerCertificate(dnsNames: ["*.example.com", ".example.org"])
        #expect(!wildcard.identifies(domain: "foo.example.com"))
        #expect(!wildcard.identifies(domain: "foo.example.org"))
        #expect(wildcard.identifies(domain: "*.example.com"))  // only the literal name

        let addresses = TLSPeerCertificate(ipAddresses: ["192.0.2.1", "2001:db8::1"])
        #expect(addresses.identifies(address: try! SocketAddress("192.0.2.1:5061")))
        #expect(addresses.identifies(address: try! SocketAddress("[2001:DB8:0::1]:5061")))
        #expect(!addresses.identifies(address: try! SocketAddress("192.0.2.2:5061")))
        #expect(!addresses.identifies(domain: "192.0.2.1"))
    }

    @Test(.enabled(if: ipv6LoopbackAvailable, "IPv6 loopback (::1) cannot be bound here: IPv6 TLS test skipped"))
    func ipv6() async throws {
        let s = EventRecorder(), c = EventRecorder()
        var configuration = TLSConfiguration(certificateChain: pki.server.chain, privateKey: pki.server.privateKey, trustedCertificates: [.bytes(pki.ca)])
        let server = try TLSTransport(listeningOn: try SocketAddress("[::1]:0"), configuration: configuration, handler: s.handler)
        configuration.certificateChain = nil
        configuration.privateKey = nil
        let client = try TLSTransport(listeningOn: try SocketAddress("[::1]:0"), configuration: configuration, handler: c.handler)
        defer { server.close(); client.close() }
        let id = try client.send(Fixture.request(transport: "TLS", host: "[::1]"), to: server.localAddress)
        let got = await s.waitForMessages(1)
        try #require(got.count == 1)
        #expect(got[0].source.ipString == "::1")
        #expect(client.sessionInfo(for: id)?.peerVerified == true)
    }
}
