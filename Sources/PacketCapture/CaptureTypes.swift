/// A capture timestamp: seconds since the Unix epoch and nanoseconds within the second.
public struct CaptureTimestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Whole seconds since 1970-01-01 00:00:00 UTC.
    public var seconds: Int64
    /// Nanoseconds within the second, 0 ..< 1_000_000_000.
    public var nanoseconds: Int32

    /// A timestamp from seconds and nanoseconds (the nanoseconds are normalized into range).
    public init(seconds: Int64, nanoseconds: Int64) {
        let carry = nanoseconds >= 0 ? nanoseconds / 1_000_000_000 : (nanoseconds - 999_999_999) / 1_000_000_000
        self.seconds = seconds + carry
        self.nanoseconds = Int32(nanoseconds - carry * 1_000_000_000)
    }

    /// The timestamp as nanoseconds since the epoch (saturating).
    public var totalNanoseconds: Int64 {
        let (m, o1) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (s, o2) = m.addingReportingOverflow(Int64(nanoseconds))
        return (o1 || o2) ? (seconds < 0 ? .min : .max) : s
    }

    /// Earlier timestamps sort first.
    public static func < (a: Self, b: Self) -> Bool {
        (a.seconds, a.nanoseconds) < (b.seconds, b.nanoseconds)
    }

    /// `seconds.nanoseconds`, nine fraction digits.
    public var description: String {
        let n = String(nanoseconds)
        return "\(seconds).\(String(repeating: "0", count: 9 - n.count))\(n)"
    }
}

/// A link-layer header type (the LINKTYPE_ registry values used by pcap and pcapng).
public struct LinkType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The LINKTYPE_ number.
    public var rawValue: UInt32
    /// The link type with this LINKTYPE_ number.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// BSD loopback: a 4-byte address family in the capturing host's byte order (0).
    public static let null = LinkType(rawValue: 0)
    /// Ethernet II, possibly with 802.1Q / 802.1ad VLAN tags (1).
    public static let ethernet = LinkType(rawValue: 1)
    /// Raw IP, version taken from the first nibble (101).
    public static let raw = LinkType(rawValue: 101)
    /// OpenBSD loopback: a 4-byte address family in network byte order (108).
    public static let loop = LinkType(rawValue: 108)
    /// Linux cooked capture v1 (113).
    public static let linuxSLL = LinkType(rawValue: 113)
    /// Raw IPv4 (228).
    public static let ipv4 = LinkType(rawValue: 228)
    /// Raw IPv6 (229).
    public static let ipv6 = LinkType(rawValue: 229)
    /// Linux cooked capture v2 (276).
    public static let linuxSLL2 = LinkType(rawValue: 276)

    /// The link types ``CaptureDecoder`` understands.
    public static let supported: Set<LinkType> = [.null, .ethernet, .raw, .loop, .linuxSLL, .ipv4, .ipv6, .linuxSLL2]

    /// `LINKTYPE n`.
    public var description: String { "LINKTYPE \(rawValue)" }
}

/// One captured frame as read from a file: link-layer bytes with their capture metadata.
public struct CaptureFrame: Sendable, Hashable {
    /// 1-based position of the frame among the file's packets (as Wireshark numbers them).
    public var number: Int
    /// When the frame was captured.
    public var timestamp: CaptureTimestamp
    /// The link-layer header type of ``data``.
    public var linkType: LinkType
    /// The pcapng interface index (0 for classic pcap).
    public var interfaceIndex: Int
    /// The frame's length on the wire (may exceed `data.count` when the capture was truncated).
    public var originalLength: Int
    /// The captured bytes, starting with the link-layer header.
    public var data: [UInt8]

    /// A frame; for synthetic input and tests as much as for file readers.
    public init(number: Int, timestamp: CaptureTimestamp, linkType: LinkType, interfaceIndex: Int = 0, originalLength: Int? = nil, data: [UInt8]) {
        self.number = number
        self.timestamp = timestamp
        self.linkType = linkType
        self.interfaceIndex = interfaceIndex
        self.originalLength = originalLength ?? data.count
        self.data = data
    }
}

/// Why a capture file could not be read further. Every frame before the failure has been
/// delivered; ``offset`` and ``record`` say where the file went wrong and ``rule`` what rule it broke.
public struct CaptureFileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The format rule that failed.
    public enum Rule: String, Sendable, Hashable, CaseIterable {
        /// The file could not be opened or read.
        case io
        /// The file is shorter than its header (pcap global header, pcapng section header).
        case truncatedHeader
        /// The first bytes are no known capture magic number.
        case unknownFormat
        /// A Microsoft Network Monitor capture ("GMBU"), which is not read.
        case netMonFormat
        /// A pcap version other than 2.x.
        case unsupportedVersion
        /// A classic pcap file whose link type is not supported.
        case unsupportedLinkType
        /// A record or block ends past the end of the file.
        case truncatedRecord
        /// A record's captured length exceeds the snapshot length or the reader's limit.
        case recordTooLong
        /// A pcapng block length that is not a multiple of 4, is too small, too large, or
        /// differs from the trailing copy.
        case badBlockLength
        /// A pcapng section header whose byte-order magic is wrong or whose major version is not 1.
        case badSectionHeader
        /// A pcapng packet block naming an interface that was not described.
        case unknownInterface
        /// A packet block whose captured length does not fit the block.
        case badCapturedLength
        /// An option value the reader cannot use (e.g. a timestamp resolution finer than 10⁻¹⁹ s).
        case badOption
    }

    /// Byte offset in the file where the failing header, record or block starts (or the failing field).
    public var offset: Int64
    /// 1-based number of the record (pcap) or block (pcapng) that failed; 0 for the file header.
    public var record: Int
    /// The rule that failed.
    public var rule: Rule
    /// Human-readable detail.
    public var detail: String

    /// An error at `offset` in `record`.
    public init(offset: Int64, record: Int, rule: Rule, detail: String) {
        self.offset = offset
        self.record = record
        self.rule = rule
        self.detail = detail
    }

    /// One line: offset, record, rule and detail.
    public var description: String { "capture file error at byte \(offset) (record \(record)): \(rule.rawValue): \(detail)" }
}
