import CSocket
import NetworkIO
import SIPMessage

/// Why a transport operation failed.
public enum TransportError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A system call failed.
    case system(SystemCallError)
    /// Text that is not a numeric IP address (with a port where one is needed).
    case invalidAddress(String, reason: String)
    /// A datagram larger than UDP can carry over the socket's address family
    /// (65,507 bytes over IPv4, 65,527 over IPv6).
    case messageTooLarge(size: Int, limit: Int)
    /// The destination's address family (IPv4, IPv6) differs from the socket's.
    case addressFamilyMismatch(local: SocketAddress, remote: SocketAddress)
    /// A batch send stopped at the datagram with index `sent`: the ones before it were sent,
    /// that one and the ones after it were not.
    case batchInterrupted(sent: Int, error: SystemCallError)
    /// The transport has been closed.
    case transportClosed
    /// The connection is closed, closing, or was never known to this transport.
    case connectionClosed(ConnectionID)
    /// The transport already holds its maximum number of connections.
    case connectionLimitReached(limit: Int)
    /// A connection's queue of bytes waiting to be written would exceed its limit.
    case sendQueueFull(ConnectionID, limit: Int)
    /// An outbound connection was not established in time.
    case connectTimeout(SocketAddress)
    /// The byte stream of a connection could not be framed into SIP messages.
    case framing(SIPParseError)
    /// TLS failed: a certificate or key could not be loaded, or a handshake or the TLS session
    /// failed (untrusted or mismatching certificate, a peer speaking something else than TLS,
    /// an alert from the peer). The text is OpenSSL's error text, or says which check failed.
    case tls(String)

    public var description: String {
        switch self {
        case .system(let e): return e.description
        case .invalidAddress(let text, let reason): return "invalid address \"\(text)\": \(reason)"
        case .messageTooLarge(let size, let limit): return "message of \(size) bytes exceeds the UDP limit of \(limit) bytes"
        case .addressFamilyMismatch(let local, let remote): return "cannot send from \(local) to \(remote): address families differ"
        case .batchInterrupted(let sent, let error): return "batch send stopped after \(sent) datagrams: \(error)"
        case .transportClosed: return "the transport is closed"
        case .connectionClosed(let id): return "connection \(id) is closed"
        case .connectionLimitReached(let limit): return "connection limit (\(limit)) reached"
        case .sendQueueFull(let id, let limit): return "connection \(id): more than \(limit) bytes waiting to be sent"
        case .connectTimeout(let address): return "connecting to \(address) timed out"
        case .framing(let e): return "framing error: \(e)"
        case .tls(let reason): return "TLS: \(reason)"
        }
    }
}
