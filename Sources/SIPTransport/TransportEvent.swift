import NetworkIO
import SIPMessage
import Synchronization

/// Identifies one connection of a connection-oriented transport, unique within the process.
public struct ConnectionID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The identifier's number; numbers are handed out in increasing order.
    public let rawValue: UInt64

    /// Creates an identifier from its number.
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    private static let counter = Atomic<UInt64>(0)

    static func next() -> ConnectionID {
        ConnectionID(rawValue: counter.wrappingAdd(1, ordering: .relaxed).newValue)
    }

    public static func < (a: ConnectionID, b: ConnectionID) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "#\(rawValue)" }
}

/// One connection of a connection-oriented transport.
public struct ConnectionInfo: Sendable, Hashable, CustomStringConvertible {
    /// Which side opened the connection.
    public enum Direction: Sendable, Hashable {
        /// Accepted by our listener.
        case inbound
        /// Opened by us.
        case outbound
    }

    /// The connection's identifier.
    public let id: ConnectionID
    /// The peer's address.
    public let remote: SocketAddress
    /// Our end's address.
    public let local: SocketAddress
    /// Which side opened it.
    public let direction: Direction
    /// The transport it belongs to.
    public let transport: TransportKind

    /// Creates a description of a connection.
    public init(id: ConnectionID, remote: SocketAddress, local: SocketAddress, direction: Direction, transport: TransportKind) {
        self.id = id
        self.remote = remote
        self.local = local
        self.direction = direction
        self.transport = transport
    }

    public var description: String {
        "\(transport) \(id) \(local) \(direction == .inbound ? "<-" : "->") \(remote)"
    }
}

/// Why a connection was closed.
public enum ConnectionCloseReason: Sendable, Hashable {
    /// The peer closed it (end of stream).
    case remoteClosed
    /// ``TCPTransport/close(connection:)`` was called.
    case closedLocally
    /// The transport was closed.
    case transportClosed
    /// Nothing was received or sent for the configured idle timeout.
    case idleTimeout
    /// An error: a framing error (``TransportError/framing(_:)``), a failed or timed-out connect,
    /// a failed read or write (``TransportError/system(_:)``), or a failed TLS handshake or
    /// session (``TransportError/tls(_:)``).
    case failed(TransportError)
}

/// A SIP message received from the network.
public struct InboundMessage: Sendable {
    /// The parsed message (framed, not yet validated: the transaction layer calls
    /// ``SIPMessage/validate()``).
    public var message: SIPMessage
    /// Where it came from.
    public var source: SocketAddress
    /// The local address it arrived on (the bound address; the wildcard when bound to one).
    public var local: SocketAddress
    /// The transport it arrived over.
    public var transport: TransportKind
    /// The connection it arrived on, for connection-oriented transports: responses to it go
    /// back over the same connection (RFC 3261 §18.2.2).
    public var connection: ConnectionID?
    /// When it was read from the socket (monotonic clock).
    public var receivedAt: MonotonicClock.Instant

    /// Creates an inbound message.
    public init(message: SIPMessage, source: SocketAddress, local: SocketAddress, transport: TransportKind, connection: ConnectionID?, receivedAt: MonotonicClock.Instant) {
        self.message = message
        self.source = source
        self.local = local
        self.transport = transport
        self.connection = connection
        self.receivedAt = receivedAt
    }
}

/// What a transport reports to the layer above, through the handler given when it is created.
///
/// Handlers are called on the transport's own I/O thread, one event at a time and in order;
/// they should hand the event on quickly (to an actor, a queue, an `AsyncStream`) and not block.
public enum TransportEvent: Sendable {
    /// A message was received.
    case message(InboundMessage)
    /// A datagram that is not a SIP message arrived: its bytes, its source and the parse error
    /// (whose ``SIPParseError/suggestedStatusCode`` says what to answer when the request line was readable).
    case malformed(bytes: [UInt8], source: SocketAddress, error: SIPParseError)
    /// A connection was accepted or established.
    case connectionOpened(ConnectionInfo)
    /// A connection was closed; bytes still queued for it were dropped. A connection that failed
    /// before it was open (a connect started by `send(_:to:)`, a TLS handshake) is reported
    /// closed without having been reported open.
    case connectionClosed(ConnectionInfo, reason: ConnectionCloseReason)
    /// A CRLFCRLF keep-alive ping arrived on a connection and was answered with CRLF
    /// (RFC 5626 §4.4.1).
    case keepAlivePing(ConnectionID)
    /// A CRLF keep-alive pong arrived on a connection (the answer to our ping).
    case keepAlivePong(ConnectionID)
    /// A datagram we sent to `destination` came back as an ICMP error (Linux IP_RECVERR):
    /// `error` is the errno it stands for (ECONNREFUSED: port unreachable, EHOSTUNREACH,
    /// ENETUNREACH…). Nobody receives there: what waits on an answer from it can fail now.
    case unreachable(destination: SocketAddress, transport: TransportKind, error: Int32)
}
