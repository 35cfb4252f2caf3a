import NetworkIO
import SIPTransport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One SIP message (or datagram) an endpoint sent or received, as mirrored to a
/// ``SIPTrafficSink``.
public struct SIPTrafficRecord: Sendable {
    /// Whether the endpoint sent or received the bytes.
    public enum Direction: Sendable, Hashable {
        /// Sent by the endpoint (to ``SIPTrafficRecord/remote``).
        case sent
        /// Received by the endpoint (from ``SIPTrafficRecord/remote``).
        case received
    }

    /// Sent or received.
    public var direction: Direction
    /// The transport. For TLS the bytes are the plaintext inside the TLS session.
    public var transport: TransportKind
    /// Our address: the socket's bound address (for UDP bound to a wildcard address, the
    /// wildcard), or the connection's local address.
    public var local: SocketAddress
    /// The peer's address.
    public var remote: SocketAddress
    /// The bytes: one UDP datagram, or the next bytes of the connection's stream (one SIP message).
    public var bytes: [UInt8]
    /// The connection, for TCP and TLS.
    public var connection: ConnectionID?
    /// Wall-clock time since 1970-01-01 00:00:00 UTC.
    public var time: Duration

    /// A record.
    public init(direction: Direction, transport: TransportKind, local: SocketAddress, remote: SocketAddress, bytes: [UInt8],
                connection: ConnectionID? = nil, time: Duration) {
        self.direction = direction
        self.transport = transport
        self.local = local
        self.remote = remote
        self.bytes = bytes
        self.connection = connection
        self.time = time
    }

    /// The wall clock now (CLOCK_REALTIME), as stored in ``time``.
    public static func now() -> Duration { WallTime.now() }
}

/// Receives a copy of every message an ``SIPEndpoint`` sends or receives (set
/// ``SIPEndpoint/Configuration/capture``): for recording a capture of the endpoint's own traffic.
///
/// Called on transport, timer and caller threads, possibly at the same time; calls for one
/// connection come in the order the endpoint handled the bytes. Implementations must be quick
/// and must not call back into the endpoint.
public protocol SIPTrafficSink: Sendable {
    /// Takes one record.
    func record(_ record: SIPTrafficRecord)

    /// A TCP or TLS connection closed (the default does nothing).
    func connectionClosed(_ connection: ConnectionInfo)
}

extension SIPTrafficSink {
    /// Does nothing.
    public func connectionClosed(_ connection: ConnectionInfo) {}
}
