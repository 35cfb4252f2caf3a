import SIPResolver
import SIPTransport

extension TransportKind {
    /// The transport that carries SIP to a target RFC 3263 located.
    public init(_ located: ResolvedTarget.Transport) {
        switch located {
        case .udp: self = .udp
        case .tcp: self = .tcp
        case .tls: self = .tls
        }
    }
}

extension ResolvedTarget.Transport {
    /// The RFC 3263 transport of a local listen point's kind.
    public init(_ kind: TransportKind) {
        switch kind {
        case .udp: self = .udp
        case .tcp: self = .tcp
        case .tls: self = .tls
        }
    }
}
