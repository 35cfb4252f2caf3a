/// The error thrown when a session description cannot be parsed.
///
/// Every error points at the place in the input where parsing stopped:
/// ``offset`` is a byte offset into the input and ``line`` is the 1-based
/// line number. ``rule`` names what failed and ``detail`` explains it for a
/// human reader.
///
/// ```swift
/// do {
///     _ = try SessionDescription.parse(bytes)
/// } catch {
///     // "SDP line 6 (offset 123): rtpmap: missing clock rate"
///     log(error.description)
/// }
/// ```
public struct SDPParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What part of the grammar, or which limit, the input violated.
    public enum Rule: Sendable, Hashable, CustomStringConvertible {
        /// One of the ``SDPLimits`` was exceeded.
        case limitExceeded
        /// The input is not valid UTF-8.
        case invalidUTF8
        /// A byte that may not appear in a session description (NUL, or a
        /// carriage return that does not end a line).
        case invalidCharacter
        /// A line is not of the form `<type>=<value>` with a lowercase type
        /// letter, or an empty line appears before the end of the input.
        case lineSyntax
        /// A known line appears in the wrong place: out of the order that
        /// RFC 8866 section 5 requires, duplicated where only one is allowed,
        /// or a session-only line inside a media section.
        case unexpectedLine
        /// A required line (`v=`, `o=`, `s=` or `t=`) is missing; the
        /// associated value is the line's type letter.
        case missingLine(Character)
        /// The `v=` line is not `v=0`.
        case version
        /// The `o=` line is malformed.
        case origin
        /// A `c=` line is malformed.
        case connection
        /// A `b=` line is malformed.
        case bandwidth
        /// A `t=` line is malformed.
        case timing
        /// An `r=` line is malformed.
        case repeatTimes
        /// The `z=` line is malformed.
        case timeZones
        /// An `m=` line is malformed.
        case media
        /// An `a=` line is malformed; the associated value is the attribute
        /// name (empty if the name itself is missing). Attributes with their
        /// own rule below use that rule instead.
        case attribute(String)
        /// An `a=rtpmap` attribute is malformed.
        case rtpmap
        /// An `a=fmtp` attribute is malformed.
        case fmtp
        /// An `a=crypto` attribute (RFC 4568) is malformed.
        case crypto
        /// An `a=rtcp` attribute (RFC 3605) is malformed.
        case rtcp
        /// An `a=ssrc` attribute (RFC 5576) is malformed.
        case ssrc

        /// A short name for the rule, used in ``SDPParseError/description``.
        public var description: String {
            switch self {
            case .limitExceeded: return "limit exceeded"
            case .invalidUTF8: return "invalid UTF-8"
            case .invalidCharacter: return "invalid character"
            case .lineSyntax: return "line syntax"
            case .unexpectedLine: return "unexpected line"
            case .missingLine(let type): return "missing \(type)= line"
            case .version: return "version"
            case .origin: return "origin"
            case .connection: return "connection"
            case .bandwidth: return "bandwidth"
            case .timing: return "timing"
            case .repeatTimes: return "repeat times"
            case .timeZones: return "time zones"
            case .media: return "media"
            case .attribute(let name): return name.isEmpty ? "attribute" : name
            case .rtpmap: return "rtpmap"
            case .fmtp: return "fmtp"
            case .crypto: return "crypto"
            case .rtcp: return "rtcp"
            case .ssrc: return "ssrc"
            }
        }
    }

    /// Byte offset into the input where the problem was found. For errors
    /// about a whole line this is the offset of the line's first byte; for
    /// errors about one field or one byte it points at that field or byte.
    public var offset: Int
    /// 1-based number of the line where the problem was found.
    public var line: Int
    /// What failed.
    public var rule: Rule
    /// A human-readable explanation.
    public var detail: String

    /// Creates an error.
    public init(offset: Int, line: Int, rule: Rule, detail: String) {
        self.offset = offset
        self.line = line
        self.rule = rule
        self.detail = detail
    }

    /// For example `SDP line 6 (offset 123): rtpmap: missing clock rate`.
    public var description: String {
        "SDP line \(line) (offset \(offset)): \(rule): \(detail)"
    }
}
