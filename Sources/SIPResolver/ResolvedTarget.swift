/// One place to send a SIP request: a transport, an IP address and a port (RFC 3263 §4).
public struct ResolvedTarget: Sendable, Hashable, CustomStringConvertible {
    /// The transport protocols RFC 3263 locates.
    public enum Transport: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// SIP over UDP (NAPTR service `SIP+D2U`, SRV `_sip._udp`).
        case udp
        /// SIP over TCP (NAPTR service `SIP+D2T`, SRV `_sip._tcp`).
        case tcp
        /// SIP over TLS over TCP (NAPTR service `SIPS+D2T`, SRV `_sips._tcp`).
        case tls

        /// The port used when neither the URI nor DNS gives one: 5060, or 5061 for TLS.
        public var defaultPort: UInt16 { self == .tls ? 5061 : 5060 }

        /// `udp`, `tcp` or `tls`.
        public var description: String { rawValue }
    }

    /// The transport to use.
    public var transport: Transport
    /// The IP address: dotted quad, or IPv6 text without brackets.
    public var address: String
    /// The port.
    public var port: UInt16
    /// The domain name the address was located from (the URI's host, or its `maddr`), which a
    /// TLS client checks the server's certificate against (RFC 5922 §4); `nil` when the URI
    /// named an IP address.
    public var serverName: String?

    /// Creates a target.
    public init(transport: Transport, address: String, port: UInt16, serverName: String? = nil) {
        self.transport = transport
        self.address = address
        self.port = port
        self.serverName = serverName
    }

    /// `udp:192.0.2.1:5060`, or `tls:[2001:db8::1]:5061`.
    public var description: String {
        let host = address.contains(":") ? "[\(address)]" : address
        return "\(transport):\(host):\(port)"
    }
}
