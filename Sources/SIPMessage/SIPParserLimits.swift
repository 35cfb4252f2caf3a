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

    /// The largest value any limit may take: messages are indexed with 32-bit offsets, and
    /// arithmetic on limits must not overflow.
    public static let ceiling = 1 << 30

    /// Creates limits; each is clamped to 1…``ceiling``.
    public init(maxMessageSize: Int = 65_535, maxHeaderCount: Int = 256, maxLineLength: Int = 16_384, maxBodySize: Int = 60_000) {
        func clamp(_ v: Int) -> Int { min(max(v, 1), SIPParserLimits.ceiling) }
        self.maxMessageSize = clamp(maxMessageSize)
        self.maxHeaderCount = clamp(maxHeaderCount)
        self.maxLineLength = clamp(maxLineLength)
        self.maxBodySize = clamp(maxBodySize)
    }

    /// Defaults fit every message a UDP datagram can carry (64 KiB), with up to 256 headers.
    public static let `default` = SIPParserLimits()
}
