import NetworkIO
import SIPMessage
import SIPTransport

extension TransportKind {
    /// The transport a SIP URI names with its `transport` parameter (`udp`, `tcp`, `tls`), or
    /// `nil` when it names none (the caller's default then applies: TLS for a SIPS URI, §26.2).
    public init?(transportParameterOf uri: SIPURI) {
        switch uri.parameters["transport"]??.lowercased() {
        case "tcp"?: self = .tcp
        case "tls"?: self = .tls
        case "udp"?: self = .udp
        default: return nil
        }
    }
}

extension Via {
    /// Where a response to the request that carries this Via goes (RFC 3261 §18.2.2, RFC 3581):
    /// the `received` address, else the sent-by host; the `rport` value, else the sent-by port,
    /// else 5060. `nil` when the host is not an IP address.
    public var responseAddress: SocketAddress? {
        let host = parameters["received"].flatMap { $0 } ?? self.host.address
        let port = parameters["rport"].flatMap { $0 }.flatMap { UInt16($0) } ?? self.port ?? 5060
        return try? SocketAddress(ip: host, port: port)
    }
}

extension SocketAddress {
    /// This address as the host part of a SIP URI or Via (an IPv6 address is bracketed when written).
    public var sipHost: SIPHost { isIPv6 ? .ipv6(ipString) : .ipv4(ipString) }
}
