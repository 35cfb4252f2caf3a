import SIPMessage

/// PEM-encoded data (certificates, a private key): a file to read, or the bytes themselves.
public enum PEMSource: Sendable, Hashable {
    /// A file holding PEM blocks, read when the transport is created.
    case file(String)
    /// PEM blocks in memory.
    case bytes([UInt8])

    /// PEM blocks given as text.
    public static func text(_ pem: String) -> PEMSource { .bytes(Array(pem.utf8)) }
}

/// Settings of a ``TLSTransport``: the certificates, what is verified, and the connection
/// settings of ``connections`` (which mean what they mean for a ``TCPTransport``, and are
/// read and set directly too: `configuration.idleTimeout`).
///
/// The defaults verify servers: a client checks the server's chain against
/// ``trustedCertificates`` (the system's trust store when empty) and the server's identity
/// against the name it connects to (RFC 5922; see ``TLSPeerCertificate``). Servers do not ask
/// clients for certificates unless ``clientCertificates`` says so (mutual TLS).
@dynamicMemberLookup
public struct TLSConfiguration: Sendable, Hashable {
    /// What a server asks of its clients' certificates.
    public enum ClientCertificates: Sendable, Hashable {
        /// No certificate is requested.
        case none
        /// A certificate is requested; when the client sends one it must verify against
        /// ``TLSConfiguration/trustedCertificates``, but a client without one is accepted.
        case optional
        /// A certificate is requested and must be sent and verify (mutual TLS).
        case required
    }

    /// A TLS protocol version.
    public enum ProtocolVersion: Int, Sendable, Hashable, Comparable {
        /// TLS 1.2 (RFC 5246).
        case tls12 = 0x0303
        /// TLS 1.3 (RFC 8446).
        case tls13 = 0x0304

        /// Whether `a` is an older version than `b`.
        public static func < (a: ProtocolVersion, b: ProtocolVersion) -> Bool { a.rawValue < b.rawValue }
    }

    /// Our certificate, leaf first, then the intermediates to send with it. Presented when
    /// accepting connections, and when connecting to a server that asks for a client
    /// certificate (unless ``clientCertificateChain`` is set). Without it, inbound connections
    /// are refused: the transport can only connect.
    public var certificateChain: PEMSource?
    /// The private key of ``certificateChain`` (unencrypted PEM: PKCS #8, RSA or EC).
    public var privateKey: PEMSource?
    /// A different certificate to present as a client, when servers ask for one; `nil` presents
    /// ``certificateChain``.
    public var clientCertificateChain: PEMSource?
    /// The private key of ``clientCertificateChain``.
    public var clientPrivateKey: PEMSource?
    /// The certificate authorities peers' certificates must chain to. Empty means the system's
    /// trust store (OpenSSL's default paths).
    public var trustedCertificates: [PEMSource]
    /// Whether, as a client, we verify the server: its chain against ``trustedCertificates``
    /// and its identity against the server name or address we connect to (RFC 5922 §7). Turn
    /// it off only for tests and diagnostics.
    public var verifyPeer: Bool
    /// Whether, as a server, we ask clients for certificates (mutual TLS).
    public var clientCertificates: ClientCertificates
    /// The oldest protocol version accepted; TLS 1.2 at least.
    public var minimumVersion: ProtocolVersion
    /// How long a TLS handshake may take (after the TCP connection is established).
    public var handshakeTimeout: Duration
    /// The settings of the connections under TLS, as a ``TCPTransport`` has them: idle
    /// timeout, connection limit, framer limits, connect timeout (the handshake has its own
    /// ``handshakeTimeout``), bytes queued per connection (plaintext waiting to be encrypted and
    /// records waiting to be written together), listen backlog.
    public var connections: TCPTransportConfiguration

    /// A setting of ``connections``, read or set directly, for example `configuration.idleTimeout`.
    public subscript<Value>(dynamicMember setting: WritableKeyPath<TCPTransportConfiguration, Value>) -> Value {
        get { connections[keyPath: setting] }
        set { connections[keyPath: setting] = newValue }
    }

    /// Creates a configuration.
    public init(
        certificateChain: PEMSource? = nil, privateKey: PEMSource? = nil,
        clientCertificateChain: PEMSource? = nil, clientPrivateKey: PEMSource? = nil,
        trustedCertificates: [PEMSource] = [], verifyPeer: Bool = true,
        clientCertificates: ClientCertificates = .none, minimumVersion: ProtocolVersion = .tls12,
        handshakeTimeout: Duration = .seconds(5), idleTimeout: Duration? = .seconds(32),
        maxConnections: Int = 1024, limits: SIPParserLimits = .default, connectTimeout: Duration = .seconds(5),
        maxQueuedBytesPerConnection: Int = 1 << 20, listenBacklog: Int = 128
    ) {
        self.certificateChain = certificateChain
        self.privateKey = privateKey
        self.clientCertificateChain = clientCertificateChain
        self.clientPrivateKey = clientPrivateKey
        self.trustedCertificates = trustedCertificates
        self.verifyPeer = verifyPeer
        self.clientCertificates = clientCertificates
        self.minimumVersion = minimumVersion
        self.handshakeTimeout = handshakeTimeout
        self.connections = TCPTransportConfiguration(
            idleTimeout: idleTimeout, maxConnections: maxConnections, limits: limits, connectTimeout: connectTimeout,
            maxQueuedBytesPerConnection: maxQueuedBytesPerConnection, listenBacklog: listenBacklog)
    }
}
