/// The transport protocol a SIP message travels over.
public enum TransportKind: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// UDP (RFC 3261 §18.1.1): unreliable, one message per datagram.
    case udp
    /// TCP (RFC 3261 §18.3): reliable, messages framed by Content-Length.
    case tcp
    /// TLS over TCP: reliable and secure, framed like TCP.
    case tls

    /// The transport token written in a Via header's sent-protocol (`SIP/2.0/UDP`).
    public var viaToken: String {
        switch self {
        case .udp: return "UDP"
        case .tcp: return "TCP"
        case .tls: return "TLS"
        }
    }

    /// Whether the transport delivers reliably; RFC 3261 §17 retransmits only over unreliable ones.
    public var isReliable: Bool { self != .udp }

    /// The default port: 5060, or 5061 for TLS (RFC 3261 §19.1.2).
    public var defaultPort: UInt16 { self == .tls ? 5061 : 5060 }

    /// Same as ``viaToken``.
    public var description: String { viaToken }
}
