import NetworkIO
import SIPMessage
import Logging

/// Counters of a ``TLSTransport`` since it was created: the connection counters of a TCP
/// transport (readable directly, `statistics.messagesReceived`) and the TLS handshakes.
///
/// Byte counts are bytes on the wire (TLS records); message counts are SIP messages.
/// ``TCPTransportStatistics/connectionsEstablished`` counts outbound connections whose
/// handshake completed; ``TCPTransportStatistics/connectFailures`` counts outbound connections
/// that failed before that, handshake failures included.
@dynamicMemberLookup
public struct TLSTransportStatistics: Sendable, Hashable {
    /// The connection counters.
    public var connections: TCPTransportStatistics
    /// Handshakes completed, inbound and outbound.
    public var handshakesCompleted: Int
    /// Handshakes that failed or timed out, inbound and outbound.
    public var handshakeFailures: Int

    /// Creates counters.
    public init(connections: TCPTransportStatistics = .init(), handshakesCompleted: Int = 0, handshakeFailures: Int = 0) {
        self.connections = connections
        self.handshakesCompleted = handshakesCompleted
        self.handshakeFailures = handshakeFailures
    }

    /// A connection counter (`statistics.messagesReceived`).
    public subscript<T>(dynamicMember keyPath: KeyPath<TCPTransportStatistics, T>) -> T {
        connections[keyPath: keyPath]
    }
}

/// A SIP transport over TLS (RFC 3261 §26.2.1, §18): a listener and any number of TLS
/// connections, each framed by Content-Length like TCP.
///
/// It runs the same core as ``TCPTransport`` (one I/O thread polling every connection,
/// keep-alive pings answered, idle connections closed, the same limits) with OpenSSL between
/// the socket and the framer. Connections are reported open
/// (``TransportEvent/connectionOpened(_:)``) once their handshake has completed; a handshake
/// that fails (an untrusted or mismatching certificate, a peer that does not speak TLS, a
/// timeout) closes the connection, reported as ``TransportEvent/connectionClosed(_:reason:)``
/// with ``ConnectionCloseReason/failed(_:)`` holding ``TransportError/tls(_:)`` and OpenSSL's
/// error text.
///
/// As a client it verifies servers by default: their chain against
/// ``TLSConfiguration/trustedCertificates`` and their identity against the server name given to
/// ``connect(to:serverName:)`` or ``send(_:to:serverName:)`` (sent as SNI; matched to the
/// certificate's SIP domain identities by RFC 5922 §7), or against the address connected to
/// when no name is given (the certificate must hold it as an iPAddress subjectAltName).
public final class TLSTransport: Sendable {
    private let core: TCPCore
    private let context: TLSContext

    /// The address the listener is bound to (with the kernel's port when port 0 was asked for).
    public var localAddress: SocketAddress { core.local }
    /// The transport kind, always ``TransportKind/tls``.
    public var kind: TransportKind { .tls }
    /// The configuration it was created with.
    public var configuration: TLSConfiguration { context.configuration }
    /// A snapshot of the counters.
    public var statistics: TLSTransportStatistics {
        core.state.withLock { s in
            TLSTransportStatistics(connections: s.statistics, handshakesCompleted: s.handshakesCompleted, handshakeFailures: s.handshakeFailures)
        }
    }
    /// The connections open, being established or handshaking, in the order they were created.
    public var connections: [ConnectionInfo] { core.connectionSnapshot() }
    /// The bytes queued on every connection and not yet written: ``close()`` drops them, so a
    /// caller that wants its last messages out waits for this to reach 0 first.
    package var queuedBytes: Int { core.queuedBytes() }
    /// Whether ``close()`` has been called.
    public var isClosed: Bool { core.state.withLock { $0.closed } }
    /// Whether the transport accepts inbound connections (it has a certificate); without one,
    /// connections to the listener are closed at once.
    public var acceptsConnections: Bool { context.canAccept }

    /// Loads the certificates and keys, binds a listening socket to `address` (port 0 for an
    /// ephemeral port; IPv6 listeners are IPv6-only) and starts the I/O thread; every event
    /// goes to `handler`, on that thread.
    /// - Throws: ``TransportError/tls(_:)`` when a certificate, key or trust store cannot be
    ///   loaded (or the key does not match the certificate), ``TransportError/system(_:)`` when a
    ///   socket call fails.
    /// Socket errors the transport recovers from by itself, refused connections and failed
    /// handshakes are logged to `logger` (`warning`, `debug`).
    public init(listeningOn address: SocketAddress, configuration: TLSConfiguration = .init(), logger: Logger = .disabled,
                handler: @escaping @Sendable (TransportEvent) -> Void) throws(TransportError) {
        context = try TLSContext(configuration)
        core = try TCPCore(address: address, configuration: configuration.connections, tls: context, logger: logger, handler: handler)
        try core.start()
    }

    deinit {
        core.close()
    }

    /// Opens a new connection to `remote` and runs the TLS handshake, waiting at most
    /// ``TCPTransportConfiguration/connectTimeout`` for the TCP connection and
    /// ``TLSConfiguration/handshakeTimeout`` for the handshake (on the calling thread). The
    /// ``TransportEvent/connectionOpened(_:)`` event follows on the I/O thread.
    /// - Parameter serverName: the SIP domain or host name the server must prove (sent in the
    ///   SNI extension); `nil` checks the certificate against `remote`'s IP address instead.
    /// - Throws: ``TransportError/tls(_:)`` when the handshake fails (with OpenSSL's error text,
    ///   e.g. `certificate verify failed`) or the certificate does not identify the server,
    ///   ``TransportError/connectTimeout(_:)``, ``TransportError/connectionLimitReached(limit:)``,
    ///   ``TransportError/system(_:)``, ``TransportError/transportClosed``.
    @discardableResult
    public func connect(to remote: SocketAddress, serverName: String? = nil) throws(TransportError) -> ConnectionInfo {
        try core.connect(to: remote, serverName: serverName)
    }

    /// Sends bytes (one serialized message) on a connection. They are queued, encrypted and
    /// written by the I/O thread (an open connection's TLS session is used by that thread
    /// alone), so this never blocks; on a connection still handshaking they wait for the
    /// handshake.
    /// - Throws: ``TransportError/connectionClosed(_:)`` for a connection that is closed or
    ///   unknown, ``TransportError/sendQueueFull(_:limit:)``, ``TransportError/transportClosed``.
    public func send(_ bytes: [UInt8], on connection: ConnectionID) throws(TransportError) {
        try core.send(bytes, on: connection, isMessage: true)
    }

    /// Sends bytes to `remote` over an existing connection to that address opened for the same
    /// `serverName` (inbound connections count as opened for no name), or over a new one. A
    /// new connection is established and handshaken in the background: the bytes wait in its
    /// queue, and if it fails, ``TransportEvent/connectionClosed(_:reason:)`` reports it with the
    /// returned identifier.
    /// - Parameter serverName: as for ``connect(to:serverName:)``.
    /// - Returns: the connection used.
    /// - Throws: ``TransportError/connectionLimitReached(limit:)``, ``TransportError/system(_:)``
    ///   when the socket cannot be created or the connect fails at once, ``TransportError/tls(_:)``
    ///   when no TLS session can be created, and the errors of ``send(_:on:)``.
    @discardableResult
    public func send(_ bytes: [UInt8], to remote: SocketAddress, serverName: String? = nil) throws(TransportError) -> ConnectionID {
        try core.send(bytes, to: remote, serverName: serverName)
    }

    /// Sends an RFC 5626 §4.4.1 keep-alive ping (CRLFCRLF) on a connection; the peer's CRLF
    /// answer arrives as ``TransportEvent/keepAlivePong(_:)``.
    public func sendKeepAlivePing(on connection: ConnectionID) throws(TransportError) {
        try core.send(Array("\r\n\r\n".utf8), on: connection, isMessage: false)
    }

    /// The connection to `remote` opened for `serverName` that ``send(_:to:serverName:)`` would
    /// use, if there is one.
    public func connection(to remote: SocketAddress, serverName: String? = nil) -> ConnectionID? {
        core.connectionID(to: remote, serverName: serverName)
    }

    /// What the handshake of a connection established (protocol, cipher suite, the peer's
    /// certificate names, whether they were verified); `nil` for a connection that is unknown,
    /// closed, or still handshaking. With mutual TLS, the layer above checks the client's
    /// identity here (RFC 5922 §7.3).
    public func sessionInfo(for connection: ConnectionID) -> TLSSessionInfo? {
        core.tlsInfo(of: connection)
    }

    /// Closes a connection (bytes still queued are dropped; a close_notify alert is sent when
    /// the socket takes it); the ``TransportEvent/connectionClosed(_:reason:)`` event follows
    /// with ``ConnectionCloseReason/closedLocally``. Unknown connections are ignored.
    public func close(connection: ConnectionID) {
        core.requestClose(connection, reason: .closedLocally)
    }

    /// Closes the listener and every connection (each reported with
    /// ``ConnectionCloseReason/transportClosed``), and waits for the I/O thread to end.
    /// Idempotent. When called from the handler, the rest happens as soon as it returns.
    public func close() {
        core.close()
    }
}
