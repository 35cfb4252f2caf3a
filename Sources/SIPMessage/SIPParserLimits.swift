/// Explicit bounds on what the parser accepts, so hostile input cannot make it allocate or
/// scan without limit.
public struct SIPParserLimits: Sendable, Hashable {
    /// The largest message (start line, headers and body) accepted, in bytes.
    public var maxMessageSize: Int
    /// The largest number of header lines (folded continuation lines count as one header).
    public var maxHeaderCount: Int
    /// The longest single line (start line or header line, continuations included), in bytes.
    public var maxLineLength: Int
    /// The largest body accepted, in bytes.
    public var maxBodySize: Int

    /// Creates limits.
    public init(maxMessageSize: Int = 65_535, maxHeaderCount: Int = 256, maxLineLength: Int = 16_384, maxBodySize: Int = 60_000) {
        self.maxMessageSize = maxMessageSize
        self.maxHeaderCount = maxHeaderCount
        self.maxLineLength = maxLineLength
        self.maxBodySize = maxBodySize
    }

    /// Defaults fit every message a UDP datagram can carry (64 KiB), with up to 256 headers.
    public static let `default` = SIPParserLimits()
}
