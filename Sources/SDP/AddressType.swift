/// The `<addrtype>` field of `o=`, `c=` and `a=rtcp` lines: `IP4`, `IP6`, or
/// an extension token kept as written.
public struct AddressType: SDPToken {
    /// The token as it appears on the wire, for example `IP4`.
    public var rawValue: String

    /// Wraps an address type token.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// `IP4`: an IPv4 address or a fully qualified domain name.
    public static let ip4 = AddressType(rawValue: "IP4")
    /// `IP6`: an IPv6 address or a fully qualified domain name.
    public static let ip6 = AddressType(rawValue: "IP6")
}
