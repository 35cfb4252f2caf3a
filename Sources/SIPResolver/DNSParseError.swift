/// Why bytes are not a DNS message this module accepts. ``offset`` is the byte (from the start
/// of the message) where the problem was found.
public struct DNSParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kinds of failure.
    public enum Reason: Sendable, Hashable {
        /// The message ends inside the header, a name, a record or its data.
        case truncated
        /// A compression pointer points at or past the end of the message.
        case pointerOutOfBounds
        /// Compression pointers lead back to a place already visited.
        case pointerLoop
        /// A name follows more compression pointers than ``DNSParserLimits/maxCompressionPointers``.
        case tooManyPointers
        /// A label length byte has the reserved top bits `01` or `10` (RFC 1035 §4.1.4, RFC 6891 §5).
        case reservedLabelType
        /// A name is longer than 255 octets once decompressed (RFC 1035 §2.3.4).
        case nameTooLong
        /// The header announces more entries than ``DNSParserLimits`` allow.
        case tooManyRecords
        /// A record's RDLENGTH does not match the data it must hold (an A record not 4 octets,
        /// a name running past RDLENGTH, bytes left over after an SRV target, …).
        case recordDataLength
        /// The message is larger than ``DNSParserLimits/maxMessageSize``.
        case messageTooLarge
    }

    /// The byte offset of the failure, from the start of the message.
    public var offset: Int
    /// What failed.
    public var reason: Reason

    /// Creates an error.
    public init(offset: Int, reason: Reason) {
        self.offset = offset
        self.reason = reason
    }

    public var description: String {
        let what: String
        switch reason {
        case .truncated: what = "message truncated"
        case .pointerOutOfBounds: what = "compression pointer out of bounds"
        case .pointerLoop: what = "compression pointer loop"
        case .tooManyPointers: what = "too many compression pointers in one name"
        case .reservedLabelType: what = "reserved label type"
        case .nameTooLong: what = "name longer than 255 octets"
        case .tooManyRecords: what = "too many records"
        case .recordDataLength: what = "record data length mismatch"
        case .messageTooLarge: what = "message too large"
        }
        return "\(what) at offset \(offset)"
    }
}

/// Bounds applied while parsing a DNS message, so no input makes the parser allocate or loop
/// without limit.
public struct DNSParserLimits: Sendable, Hashable {
    /// The largest message accepted, in bytes (65,535 is the most TCP framing can carry).
    public var maxMessageSize: Int
    /// The most questions accepted.
    public var maxQuestions: Int
    /// The most records accepted in the answer, authority and additional sections together.
    public var maxRecords: Int
    /// The most compression pointers followed while reading one name.
    public var maxCompressionPointers: Int

    /// Creates limits.
    public init(maxMessageSize: Int = 65_535, maxQuestions: Int = 4, maxRecords: Int = 1024, maxCompressionPointers: Int = 32) {
        self.maxMessageSize = maxMessageSize
        self.maxQuestions = maxQuestions
        self.maxRecords = maxRecords
        self.maxCompressionPointers = maxCompressionPointers
    }

    /// The default limits: 64 KiB, 4 questions, 1,024 records, 32 pointers per name.
    public static let `default` = DNSParserLimits()
}

/// Why a ``DNSMessage`` cannot be encoded.
public enum DNSEncodingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A section holds more than 65,535 entries.
    case tooManyRecords
    /// A character-string (NAPTR flags, services or regexp, a TXT string) is over 255 octets.
    case characterStringTooLong
    /// A record's data is over 65,535 octets.
    case recordDataTooLong
    /// The whole message is over 65,535 octets.
    case messageTooLarge

    public var description: String {
        switch self {
        case .tooManyRecords: return "a section holds more than 65535 entries"
        case .characterStringTooLong: return "character-string longer than 255 octets"
        case .recordDataTooLong: return "record data longer than 65535 octets"
        case .messageTooLarge: return "message longer than 65535 octets"
        }
    }
}
