/// A token of a session description that is kept exactly as written, with well-known values
/// offered as static members: ``AddressType``, ``BandwidthType``, ``CryptoSuite``,
/// ``MediaType``, ``NetworkType`` and ``TransportProtocol``.
///
/// A conforming type stores the token in ``rawValue`` and provides ``init(rawValue:)``; the
/// protocol gives it the unlabelled initializer, string-literal construction and a
/// ``description`` equal to the token.
///
/// ```swift
/// let media: MediaType = "audio"          // the same as MediaType.audio
/// let proto = TransportProtocol("RTP/AVP")
/// print(proto)                            // RTP/AVP
/// ```
public protocol SDPToken: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral,
    CustomStringConvertible where RawValue == String
{
    /// The token as it appears on the wire.
    var rawValue: String { get }

    /// Wraps a token as it appears on the wire.
    init(rawValue: String)
}

extension SDPToken {
    /// Wraps a token as it appears on the wire.
    @inlinable
    public init(_ rawValue: String) { self.init(rawValue: rawValue) }

    /// Wraps a token given as a literal.
    @inlinable
    public init(stringLiteral value: String) { self.init(rawValue: value) }

    /// The token, as written on the wire.
    @inlinable
    public var description: String { rawValue }
}
