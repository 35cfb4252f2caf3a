import NetworkIO
import SIPMessage
import Logging

/// Settings of a ``TCPTransport``.
public struct TCPTransportConfiguration: Sendable, Hashable {
    /// Connections with nothing received or sent for this long are closed
    /// (``ConnectionCloseReason/idleTimeout``); `nil` keeps them open until the peer closes.
    public var idleTimeout: Duration?
    /// The most connections open at once, inbound and outbound together. Connections accepted
    /// beyond it are closed at once (counted in ``TCPTransportStatistics/connectionsRejected``);
    /// outbound ones are refused with ``TransportError/connectionLimitReached(limit:)``.
    public var maxConnections: Int
    /// The limits each connection's framer works under; they bound the bytes buffered per
    /// connection (one message).
    public var limits: SIPParserLimits
    /// How long an outbound connection may take to be established.
    public var connectTimeout: Duration
    /// The most bytes that may wait to be written on one connection (when the peer reads slower
    /// than we send); a send beyond it throws ``TransportError/sendQueueFull(_:limit:)``.
    public var maxQueuedBytesPerConnection: Int
    /// The listen(2) backlog.
    public var listenBacklog: Int

    /// Creates a configuration.
    public init(idleTimeout: Duration? = .seconds(32), maxConnections: Int = 1024, limits: SIPParserLimits = .default, connectTimeout: Duration = .seconds(5), maxQueuedBytesPerConnection: Int = 1 << 20, listenBacklog: Int = 128) {
        self.idleTimeout = idleTimeout
        self.maxConnections = maxConnections
        self.limits = limits
        self.connectTimeout = connectTimeout
        self.maxQueuedBytesPerConnection = maxQueuedBytesPerConnection
        self.listenBacklog = listenBacklog
    }
}

/// Counters of a ``TCPTransport`` since it was created.
public struct TCPTransportStatistics: Sendable, Hashable {
    /// Connections accepted by the listener (not counting rejected ones).
    public var connectionsAccepted = 0
    /// Outbound connections established.
    public var connectionsEstablished = 0
    /// Connections accepted and closed at once because ``TCPTransportConfiguration/maxConnections``
    /// was reached.
    public var connectionsRejected = 0
    /// Outbound connections that failed or timed out before being established.
    public var connectFailures = 0
    /// Connections closed (for any reason, after being reported open or while connecting).
    public var connectionsClosed = 0
    /// Connections closed for being idle.
    public var idleTimeouts = 0
    /// Connections closed because their byte stream could not be framed.
    public var framingErrors = 0
    /// Connections open or being established now.
    public var currentConnections = 0
    /// The most connections open at once.
    public var peakConnections = 0
    /// Messages framed and delivered.
    public var messagesReceived = 0
    /// Bytes read from connections.
    public var bytesReceived = 0
    /// Messages (calls to `send`) accepted for sending.
    public var messagesSent = 0
    /// Bytes written to connections.
    public var bytesSent = 0
    /// Sends refused (queue full, write error).
    public var sendErrors = 0
    /// CRLFCRLF pings received and answered with CRLF.
    public var keepAlivePingsAnswered = 0
    /// CRLF pongs received.
    public var keepAlivePongsReceived = 0
    /// Failed accept(2) calls (descriptor exhaustion and the like).
    public var acceptErrors = 0

    /// Creates zeroed counters.
    public init() {}
}

/// A SIP transport over TCP (RFC 3261 §18.3): a listener and any number of connections, each
/// framed by Content-Length with a strict ``SIPStreamFramer``.
///
/// One I/O thread runs `poll(2)` over the listener and every connection: it accepts, reads,
/// frames, answers keep-alive pings (RFC 5626 §4.4.1), writes what could not be written at
/// once, completes outbound connects and closes idle connections. Events go to the handler on
/// that thread. Sends may come from any thread; they write directly when the socket can take
/// the bytes and queue the rest, so they never block.
///
/// Responses go back over the connection the request came on (``send(_:on:)`` with
/// ``InboundMessage/connection``); requests go to an address (``send(_:to:)``), reusing a
/// connection to it when one exists.
public final class TCPTransport: Sendable {
    private let core: TCPCore

    /// The address the listener is bound to (with the kernel's port when port 0 was asked for).
    public var localAddress: SocketAddress { core.local }
    /// The transport kind, always ``TransportKind/tcp``.
    public var kind: TransportKind { .tcp }
    /// The configuration it was created with.
    public var configuration: TCPTransportConfiguration { core.configuration }
    /// A snapshot of the counters.
    public var statistics: TCPTransportStatistics { core.state.withLock { $0.statistics } }
    /// The connections open or being established, in the order they were created.
    public var connections: [ConnectionInfo] { core.connectionSnapshot() }
    /// The bytes queued on every connection and not yet written: ``close()`` drops them, so a
    /// caller that wants its last messages out waits for this to reach 0 first.
    package var queuedBytes: Int { core.queuedBytes() }
    /// Whether ``close()`` has been called.
    public var isClosed: Bool { core.state.withLock { $0.closed } }

    /// Binds a listening socket to `address` (port 0 for an ephemeral port; IPv6 listeners are
    /// IPv6-only), and starts the I/O thread; every event goes to `handler`, on that thread.
    /// Socket errors the transport recovers from by itself and refused connections are logged
    /// to `logger` (`warning`, `debug`).
    /// - Throws: ``TransportError/system(_:)`` when a socket call fails.
    public init(listeningOn address: SocketAddress, configuration: TCPTransportConfiguration = .init(), logger: Logger = .disabled,
                handler: @escaping @Sendable (TransportEvent) -> Void) throws(TransportError) {
        core = try TCPCore(address: address, configuration: configuration, logger: logger, handler: handler)
        try core.start()
    }

    deinit {
        core.close()
    }

    /// Opens a new connection to `remote`, waiting at most
    /// ``TCPTransportConfiguration/connectTimeout`` for it to be established. The
    /// ``TransportEvent/connectionOpened(_:)`` event follows on the I/O thread.
    /// - Throws: ``TransportError/connectTimeout(_:)``, ``TransportError/connectionLimitReached(limit:)``,
    ///   ``TransportError/system(_:)`` (`connect` with `ECONNREFUSED`, …), ``TransportError/transportClosed``.
    @discardableResult
    public func connect(to remote: SocketAddress) throws(TransportError) -> ConnectionInfo {
        try core.connect(to: remote)
    }

    /// Sends bytes (one serialized message) on a connection: written at once when the socket
    /// takes them, otherwise queued for the I/O thread.
    /// - Throws: ``TransportError/connectionClosed(_:)`` for a connection that is closed or
    ///   unknown, ``TransportError/sendQueueFull(_:limit:)``, ``TransportError/system(_:)`` when the
    ///   write fails (the connection is then closed and reported), ``TransportError/transportClosed``.
    public func send(_ bytes: [UInt8], on connection: ConnectionID) throws(TransportError) {
        try core.send(bytes, on: connection, isMessage: true)
    }

    /// Sends bytes to `remote` over an existing connection to that address, or over a new
    /// one. A new connection is established in the background: the bytes wait in its queue, and
    /// if it fails, ``TransportEvent/connectionClosed(_:reason:)`` reports it with the returned
    /// identifier (treat that as a transport error for the messages sent on it).
    /// - Returns: the connection used.
    /// - Throws: ``TransportError/connectionLimitReached(limit:)``, ``TransportError/system(_:)``
    ///   when the socket cannot be created or the connect fails at once, and the errors of
    ///   ``send(_:on:)``.
    @discardableResult
    public func send(_ bytes: [UInt8], to remote: SocketAddress) throws(TransportError) -> ConnectionID {
        try core.send(bytes, to: remote)
    }

    /// Sends an RFC 5626 §4.4.1 keep-alive ping (CRLFCRLF) on a connection; the peer's CRLF
    /// answer arrives as ``TransportEvent/keepAlivePong(_:)``.
    public func sendKeepAlivePing(on connection: ConnectionID) throws(TransportError) {
        try core.send(Array("\r\n\r\n".utf8), on: connection, isMessage: false)
    }

    /// The connection to `remote` that ``send(_:to:)`` would use, if there is one.
    public func connection(to remote: SocketAddress) -> ConnectionID? {
        core.connectionID(to: remote, serverName: nil)
    }

    /// Closes a connection (bytes still queued are dropped); the
    /// ``TransportEvent/connectionClosed(_:reason:)`` event follows with
    /// ``ConnectionCloseReason/closedLocally``. Unknown connections are ignored.
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
