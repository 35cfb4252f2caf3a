/// The `<nettype>` field of `o=`, `c=` and `a=rtcp` lines. RFC 8866 defines
/// only `IN` (Internet); other tokens are kept as written.
public struct NetworkType: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    /// The token as it appears on the wire, for example `IN`.
    public var rawValue: String

    /// Wraps a network type token.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Wraps a network type token.
    public init(_ rawValue: String) { self.rawValue = rawValue }
    /// Wraps a network type token given as a literal.
    public init(stringLiteral value: String) { self.rawValue = value }

    /// `IN`: the Internet.
    public static let internet = NetworkType(rawValue: "IN")

    /// The token, as written on the wire.
    public var description: String { rawValue }
}
