import COpenSSL
import CSocket
import Glibc
import NetworkIO

/// OpenSSL's per-thread error queue, as text for ``TransportError/tls(_:)``.
enum OpenSSLErrors {
    /// Empties the queue and returns its errors joined with "; " (empty when there were none).
    static func drain() -> String {
        var buffer = [CChar](repeating: 0, count: 2048)
        _ = buffer.withUnsafeMutableBufferPointer { cs_tls_error_text($0.baseAddress, $0.count) }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `what`, followed by the queued errors when there are any.
    static func describe(_ what: String) -> String {
        let text = drain()
        return text.isEmpty ? what : "\(what): \(text)"
    }

    /// Checks the result of an OpenSSL call that returns 1 on success; any other result throws
    /// ``TransportError/tls(_:)`` with `what` and the queued errors.
    static func check(_ result: Int32, _ what: @autoclosure () -> String) throws(TransportError) {
        guard result == 1 else { throw .tls(describe(what())) }
    }
}

/// The OpenSSL contexts (SSL_CTX) of one ``TLSTransport``: one for accepting, with our
/// certificate, and one for connecting. Built once; SSL_CTX is safe to share between threads
/// once set up, which is why this is `@unchecked Sendable`.
final class TLSContext: @unchecked Sendable {
    let configuration: TLSConfiguration
    /// For inbound connections; `nil` when no certificate is configured.
    private let server: OpaquePointer?
    /// For outbound connections.
    private let client: OpaquePointer

    init(_ configuration: TLSConfiguration) throws(TransportError) {
        self.configuration = configuration
        var server: OpaquePointer? = nil
        if let chain = configuration.certificateChain {
            guard let key = configuration.privateKey else { throw .tls("a certificate chain was given without its private key") }
            server = try Self.makeContext(certificate: chain, key: key, isServer: true, configuration)
        } else if configuration.privateKey != nil {
            throw .tls("a private key was given without its certificate chain")
        }
        var clientChain = configuration.certificateChain, clientKey = configuration.privateKey
        if configuration.clientCertificateChain != nil || configuration.clientPrivateKey != nil {
            guard let chain = configuration.clientCertificateChain, let key = configuration.clientPrivateKey else {
                if let server { SSL_CTX_free(server) }
                throw .tls("the client certificate chain and its private key must be given together")
            }
            clientChain = chain
            clientKey = key
        }
        do throws(TransportError) {
            client = try Self.makeContext(certificate: clientChain, key: clientKey, isServer: false, configuration)
        } catch {
            if let server { SSL_CTX_free(server) }
            throw error
        }
        self.server = server
    }

    deinit {
        if let server { SSL_CTX_free(server) }
        SSL_CTX_free(client)
    }

    /// Whether inbound connections can be served (a certificate is configured).
    var canAccept: Bool { server != nil }

    /// A session for a connection we accepted.
    func makeServerSession() throws(TransportError) -> TLSSession {
        guard let server else { throw .tls("no certificate is configured for accepting TLS connections") }
        let mode: Int32
        switch configuration.clientCertificates {
        case .none: mode = SSL_VERIFY_NONE
        case .optional: mode = SSL_VERIFY_PEER
        case .required: mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
        }
        return try TLSSession(context: server, role: .server, verifyMode: mode)
    }

    /// A session for a connection we opened to `remote`; the server is checked against
    /// `serverName` (sent in SNI) or, without one, against `remote`'s address.
    func makeClientSession(remote: SocketAddress, serverName: String?) throws(TransportError) -> TLSSession {
        var expected: TLSSession.ExpectedPeer?
        if configuration.verifyPeer {
            if let serverName, !serverName.isEmpty {
                if let address = try? SocketAddress(ip: serverName, port: remote.port) {
                    expected = .address(address)
                } else {
                    expected = .domain(serverName)
                }
            } else {
                expected = .address(remote)
            }
        }
        let sni = serverName.flatMap { name in (try? SocketAddress(ip: name, port: 0)) == nil && !name.isEmpty ? name : nil }
        return try TLSSession(context: client, role: .client(expected: expected, serverName: sni),
                              verifyMode: configuration.verifyPeer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE)
    }

    // MARK: Building a context

    private static func makeContext(certificate: PEMSource?, key: PEMSource?, isServer: Bool, _ configuration: TLSConfiguration) throws(TransportError) -> OpaquePointer {
        ERR_clear_error()
        guard let ctx = SSL_CTX_new(TLS_method()) else { throw .tls(OpenSSLErrors.describe("SSL_CTX_new failed")) }
        do throws(TransportError) {
            cs_tls_ctx_set_defaults(ctx)
            // Never prompt for a passphrase on the terminal: encrypted keys fail to load.
            SSL_CTX_set_default_passwd_cb(ctx, { _, _, _, _ in 0 })
            try OpenSSLErrors.check(cs_tls_ctx_set_min_version(ctx, Int32(max(configuration.minimumVersion, .tls12).rawValue)), "cannot set the minimum protocol version")
            if isServer { _ = SSL_CTX_set_num_tickets(ctx, 0) }  // no resumption: send no tickets
            if let certificate, let key {
                try useCertificateChain(certificate, ctx)
                try usePrivateKey(key, ctx)
                try OpenSSLErrors.check(SSL_CTX_check_private_key(ctx), "the private key does not match the certificate")
            }
            if configuration.trustedCertificates.isEmpty {
                try OpenSSLErrors.check(SSL_CTX_set_default_verify_paths(ctx), "cannot load the system's trusted certificates")
            }
            for source in configuration.trustedCertificates { try trust(source, ctx) }
            return ctx
        } catch {
            SSL_CTX_free(ctx)
            throw error
        }
    }

    private static func useCertificateChain(_ source: PEMSource, _ ctx: OpaquePointer) throws(TransportError) {
        switch source {
        case .file(let path):
            try OpenSSLErrors.check(SSL_CTX_use_certificate_chain_file(ctx, path), "cannot load the certificate chain from \(path)")
        case .bytes(let bytes):
            let certificates = try readCertificates(bytes, what: "certificate chain")
            defer { certificates.forEach { X509_free($0) } }
            try OpenSSLErrors.check(SSL_CTX_use_certificate(ctx, certificates[0]), "cannot use the certificate")
            for intermediate in certificates.dropFirst() {
                try OpenSSLErrors.check(cs_tls_ctx_add_chain_cert(ctx, intermediate), "cannot add an intermediate certificate")
            }
        }
    }

    private static func usePrivateKey(_ source: PEMSource, _ ctx: OpaquePointer) throws(TransportError) {
        switch source {
        case .file(let path):
            try OpenSSLErrors.check(SSL_CTX_use_PrivateKey_file(ctx, path, SSL_FILETYPE_PEM), "cannot load the private key from \(path)")
        case .bytes(let bytes):
            let key: OpaquePointer? = withMemoryBIO(bytes) { bio in PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil) }
            guard let key else { throw .tls(OpenSSLErrors.describe("cannot read the private key")) }
            defer { EVP_PKEY_free(key) }
            try OpenSSLErrors.check(SSL_CTX_use_PrivateKey(ctx, key), "cannot use the private key")
        }
    }

    private static func trust(_ source: PEMSource, _ ctx: OpaquePointer) throws(TransportError) {
        switch source {
        case .file(let path):
            try OpenSSLErrors.check(SSL_CTX_load_verify_locations(ctx, path, nil), "cannot load trusted certificates from \(path)")
        case .bytes(let bytes):
            let certificates = try readCertificates(bytes, what: "trusted certificates")
            defer { certificates.forEach { X509_free($0) } }
            let store = SSL_CTX_get_cert_store(ctx)
            for certificate in certificates {
                try OpenSSLErrors.check(X509_STORE_add_cert(store, certificate), "cannot add a trusted certificate")
            }
        }
    }

    /// Every certificate in PEM bytes (at least one), each owned by the caller.
    private static func readCertificates(_ bytes: [UInt8], what: String) throws(TransportError) -> [OpaquePointer] {
        let certificates: [OpaquePointer] = withMemoryBIO(bytes) { bio in
            var found: [OpaquePointer] = []
            while let certificate = PEM_read_bio_X509(bio, nil, { _, _, _, _ in 0 }, nil) { found.append(certificate) }
            return found
        } ?? []
        // The read that ends the loop leaves "no start line" in the queue.
        let errors = OpenSSLErrors.drain()
        guard !certificates.isEmpty else {
            throw .tls(errors.isEmpty ? "no certificate in the \(what)" : "no certificate in the \(what): \(errors)")
        }
        return certificates
    }

    private static func withMemoryBIO<T>(_ bytes: [UInt8], _ body: (OpaquePointer) -> T?) -> T? {
        bytes.withUnsafeBytes { raw -> T? in
            guard let base = raw.baseAddress, let bio = BIO_new_mem_buf(base, Int32(clamping: raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return body(bio)
        }
    }
}

/// One connection's TLS state: an OpenSSL session (SSL) whose records go through two memory
/// BIOs, so that the connection's socket I/O stays the transport's own (non-blocking reads
/// into the incoming BIO, records from the outgoing BIO into the connection's send queue).
///
/// Not thread-safe: a session is used by one thread at a time (the thread connecting until
/// the connection is handed to the I/O thread, then the I/O thread alone), which is what
/// makes the `@unchecked Sendable` sound.
final class TLSSession: @unchecked Sendable {
    /// Who the server must be, for a client session that verifies it.
    enum ExpectedPeer {
        case domain(String)
        case address(SocketAddress)
    }

    enum Role {
        case server
        case client(expected: ExpectedPeer?, serverName: String?)
    }

    enum Progress {
        case pending
        case complete
        case failed(String)
    }

    enum ReadResult {
        case data(Int)
        case wantMore
        /// The peer sent close_notify.
        case closed
        case failed(String)
    }

    private let ssl: OpaquePointer
    private let incoming: OpaquePointer
    private let outgoing: OpaquePointer
    private let role: Role
    private(set) var isHandshakeComplete = false
    /// Set when the handshake completes.
    private(set) var info: TLSSessionInfo?

    init(context: OpaquePointer, role: Role, verifyMode: Int32) throws(TransportError) {
        ERR_clear_error()
        guard let ssl = SSL_new(context) else { throw .tls(OpenSSLErrors.describe("SSL_new failed")) }
        guard let incoming = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw .tls(OpenSSLErrors.describe("BIO_new failed"))
        }
        guard let outgoing = BIO_new(BIO_s_mem()) else {
            BIO_free(incoming)
            SSL_free(ssl)
            throw .tls(OpenSSLErrors.describe("BIO_new failed"))
        }
        // An empty incoming BIO means "wait for more" (SSL_ERROR_WANT_READ), not end of stream.
        cs_bio_set_mem_eof_return(incoming, -1)
        cs_bio_set_mem_eof_return(outgoing, -1)
        SSL_set_bio(ssl, incoming, outgoing)  // the SSL owns both BIOs from here
        self.ssl = ssl
        self.incoming = incoming
        self.outgoing = outgoing
        self.role = role
        SSL_set_verify(ssl, verifyMode, nil)
        switch role {
        case .server:
            SSL_set_accept_state(ssl)
        case .client(_, let serverName):
            if let serverName, cs_tls_set_server_name(ssl, serverName) != 1 {
                throw .tls(OpenSSLErrors.describe("cannot set the server name \(serverName)"))
            }
            SSL_set_connect_state(ssl)
        }
    }

    deinit {
        SSL_free(ssl)
    }

    /// Adds bytes read from the socket.
    func feed(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        var offset = 0
        while offset < bytes.count {
            let n = BIO_write(incoming, base + offset, Int32(clamping: bytes.count - offset))
            if n <= 0 { break }  // only on allocation failure; the handshake or read then fails
            offset += Int(n)
        }
    }

    /// Whether bytes fed in are still waiting to be decrypted (after a handshake run on
    /// another thread read past its end).
    var hasBufferedInput: Bool {
        BIO_ctrl_pending(incoming) > 0 || SSL_has_pending(ssl) == 1
    }

    /// Moves the records waiting to be written to the end of `out`; returns their size.
    @discardableResult
    func takeOutput(into out: inout [UInt8]) -> Int {
        let pending = Int(BIO_ctrl_pending(outgoing))
        guard pending > 0 else { return 0 }
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: pending))
        let n = out.withUnsafeMutableBufferPointer { BIO_read(outgoing, $0.baseAddress! + start, Int32(clamping: pending)) }
        let got = max(0, Int(n))
        if got < pending { out.removeLast(pending - got) }
        return got
    }

    /// Advances the handshake with the bytes fed so far. On completion a client checks the
    /// server's identity (RFC 5922) and fails when it does not match.
    func handshake() -> Progress {
        guard !isHandshakeComplete else { return .complete }
        ERR_clear_error()
        let rc = SSL_do_handshake(ssl)
        guard rc == 1 else {
            let error = SSL_get_error(ssl, rc)
            if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { return .pending }
            return .failed(failureText(error, during: "handshake"))
        }
        let certificate = peerCertificate()
        let verified = certificate != nil && SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER != 0 && SSL_get_verify_result(ssl) == X509_V_OK
        var serverName: String?
        if case .client(let expected, let sni) = role {
            serverName = sni
            if let expected {
                if let problem = Self.identityProblem(expected: expected, certificate: certificate, verified: verified) {
                    return .failed(problem)
                }
                if case .domain(let name) = expected { serverName = name }
            }
        } else if let name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name) {
            serverName = String(cString: name)
        }
        let cipher = SSL_get_current_cipher(ssl).flatMap { SSL_CIPHER_get_name($0) }.map { String(cString: $0) } ?? "unknown"
        info = TLSSessionInfo(protocolVersion: String(cString: SSL_get_version(ssl)), cipherSuite: cipher,
                              peerCertificate: certificate, peerVerified: verified, serverName: serverName)
        isHandshakeComplete = true
        return .complete
    }

    /// Decrypts the next bytes of application data into `buffer`.
    func read(into buffer: UnsafeMutablePointer<UInt8>, capacity: Int) -> ReadResult {
        ERR_clear_error()
        let rc = SSL_read(ssl, buffer, Int32(clamping: capacity))
        if rc > 0 { return .data(Int(rc)) }
        let error = SSL_get_error(ssl, rc)
        if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { return .wantMore }
        if error == SSL_ERROR_ZERO_RETURN { return .closed }
        return .failed(failureText(error, during: "read"))
    }

    /// Encrypts application data; the records are then taken with ``takeOutput(into:)``.
    /// Returns the error text when the session cannot write.
    func write(_ bytes: [UInt8]) -> String? {
        bytes.withUnsafeBytes { raw -> String? in
            guard let base = raw.baseAddress else { return nil }
            var offset = 0
            while offset < raw.count {
                ERR_clear_error()
                let rc = SSL_write(ssl, base + offset, Int32(clamping: min(raw.count - offset, 1 << 30)))
                if rc > 0 {
                    offset += Int(rc)
                    continue
                }
                return failureText(SSL_get_error(ssl, rc), during: "write")
            }
            return nil
        }
    }

    /// Queues a close_notify alert (taken with ``takeOutput(into:)``).
    func shutdown() {
        guard isHandshakeComplete else { return }
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    private func failureText(_ error: Int32, during step: String) -> String {
        var text = OpenSSLErrors.drain()
        if text.isEmpty {
            switch error {
            case SSL_ERROR_ZERO_RETURN: text = "the peer closed the TLS session"
            case SSL_ERROR_SYSCALL: text = "unexpected end of the TLS stream"
            default: text = "TLS \(step) failed (SSL_get_error \(error))"
            }
        }
        let verify = SSL_get_verify_result(ssl)
        if !isHandshakeComplete, verify != X509_V_OK, let reason = X509_verify_cert_error_string(verify) {
            text += " (\(String(cString: reason)))"
        }
        return text
    }

    private func peerCertificate() -> TLSPeerCertificate? {
        guard let cert = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(cert) }
        var buffer = [CChar](repeating: 0, count: 1024)
        func text() -> String { String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        var names = TLSPeerCertificate()
        let count = cs_x509_san_count(cert)
        names.hasSubjectAltName = count >= 0
        for index in 0..<max(0, count) {
            let type = buffer.withUnsafeMutableBufferPointer { cs_x509_san_entry(cert, Int32(index), $0.baseAddress, $0.count) }
            switch type {
            case CS_SAN_DNS: names.dnsNames.append(text())
            case CS_SAN_URI: names.uris.append(text())
            case CS_SAN_IP: names.ipAddresses.append(text())
            default: break
            }
        }
        var index: Int32 = 0
        while buffer.withUnsafeMutableBufferPointer({ cs_x509_common_name(cert, index, $0.baseAddress, $0.count) }) >= 0 {
            names.commonNames.append(text())
            index += 1
        }
        return names
    }

    /// Why the server's certificate does not identify the peer we wanted, or `nil` when it does.
    static func identityProblem(expected: ExpectedPeer, certificate: TLSPeerCertificate?, verified: Bool) -> String? {
        guard let certificate else { return "the server sent no certificate" }
        guard verified else { return "the server's certificate was not verified" }
        switch expected {
        case .domain(let name):
            if certificate.identifies(domain: name) { return nil }
            return "the server's certificate does not identify \(name) (RFC 5922; it names \(certificate.summary))"
        case .address(let address):
            if certificate.identifies(address: address) { return nil }
            return "the server's certificate does not name the address \(address.ipString) (it names \(certificate.summary))"
        }
    }
}

extension TLSSession {
    /// Runs the whole handshake on the calling thread over a connected non-blocking socket,
    /// waiting with poll(2) until `deadline`. Input read past the handshake's end stays in the
    /// session (see ``hasBufferedInput``).
    /// - Throws: ``TransportError/tls(_:)`` when the handshake fails, is refused or times out,
    ///   ``TransportError/system(_:)`` when the socket fails.
    func handshake(on fd: Int32, remote: SocketAddress, deadline: MonotonicClock.Instant) throws(TransportError) {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let progress = handshake()
            var output: [UInt8] = []
            takeOutput(into: &output)
            if case .failed(let reason) = progress {
                try? Self.write(output, to: fd, deadline: .now)  // the alert, if the socket takes it
                throw .tls(reason)
            }
            try Self.write(output, to: fd, deadline: deadline)
            if case .complete = progress { return }
            guard try Self.wait(for: Int16(POLLIN), on: fd, until: deadline) else {
                throw .tls("the TLS handshake with \(remote) did not complete in time")
            }
            var n: Int
            repeat { n = buffer.withUnsafeMutableBufferPointer { cs_recv_stream(fd, $0.baseAddress, $0.count) } } while n < 0 && cs_errno() == EINTR
            if n == 0 { throw .tls("\(remote) closed the connection during the TLS handshake") }
            if n < 0 {
                let e = cs_errno()
                if e == EAGAIN || e == EWOULDBLOCK { continue }
                throw .system(SystemCallError(call: "recv", code: e))
            }
            buffer.withUnsafeBytes { feed(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
        }
    }

    /// Writes all of `bytes` to a non-blocking socket, waiting for it to drain until `deadline`.
    private static func write(_ bytes: [UInt8], to fd: Int32, deadline: MonotonicClock.Instant) throws(TransportError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBufferPointer { cs_send_stream(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n > 0 {
                offset += n
                continue
            }
            let e = cs_errno()
            if n < 0 && e == EINTR { continue }
            guard n < 0 && (e == EAGAIN || e == EWOULDBLOCK) else { throw .system(SystemCallError(call: "send", code: n < 0 ? e : EPIPE)) }
            guard try wait(for: Int16(POLLOUT), on: fd, until: deadline) else { throw .tls("the TLS handshake did not complete in time") }
        }
    }

    /// Polls one descriptor; false when the deadline passed first.
    private static func wait(for events: Int16, on fd: Int32, until deadline: MonotonicClock.Instant) throws(TransportError) -> Bool {
        var pfd = pollfd(fd: fd, events: events, revents: 0)
        while true {
            let rc = poll(&pfd, 1, Posix.pollTimeout(until: deadline, now: .now))
            if rc > 0 { return true }
            if rc == 0 { return false }
            if cs_errno() != EINTR { throw .system(.current("poll")) }
        }
    }
}
