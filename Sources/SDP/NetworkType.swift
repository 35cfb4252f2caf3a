/// The `<nettype>` field of `o=`, `c=` and `a=rtcp` lines. RFC 8866 defines
/// only `IN` (Internet); other tokens are kept as written.
public struct NetworkType: SDPToken {
    /// The token as it appears on the wire, for example `IN`.
    public var rawValue: String

    /// Wraps a network type token.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// `IN`: the Internet.
    public static let internet = NetworkType(rawValue: "IN")
}
