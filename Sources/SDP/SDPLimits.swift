/// Upper bounds the parser enforces so that hostile input cannot make it use
/// unbounded memory or time. Exceeding any of them makes parsing fail with
/// ``SDPParseError/Rule/limitExceeded``.
public struct SDPLimits: Sendable, Hashable {
    /// Maximum size of the whole input in bytes. Default 64 KiB.
    public var maxTotalBytes: Int
    /// Maximum number of lines (trailing empty lines are not counted). Default 1024.
    public var maxLines: Int
    /// Maximum length of one line in bytes, excluding its line ending. Default 4096.
    public var maxLineLength: Int
    /// Maximum number of `m=` sections. Default 32.
    public var maxMediaSections: Int
    /// Maximum number of `a=` lines at session level or in any one media section. Default 256.
    public var maxAttributesPerSection: Int

    /// Creates a set of limits; every parameter defaults to the value in ``default``.
    public init(
        maxTotalBytes: Int = 64 * 1024,
        maxLines: Int = 1024,
        maxLineLength: Int = 4096,
        maxMediaSections: Int = 32,
        maxAttributesPerSection: Int = 256
    ) {
        self.maxTotalBytes = maxTotalBytes
        self.maxLines = maxLines
        self.maxLineLength = maxLineLength
        self.maxMediaSections = maxMediaSections
        self.maxAttributesPerSection = maxAttributesPerSection
    }

    /// 64 KiB, 1024 lines, 4096 bytes per line, 32 media sections, 256 attributes per section.
    public static let `default` = SDPLimits()
}
