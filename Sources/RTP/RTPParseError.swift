/// Why an RTP or RTCP packet could not be parsed.
///
/// `offset` counts bytes from the first byte handed to the parser (for an RTCP compound packet,
/// the first byte of the datagram).
public struct RTPParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The rule of RFC 3550, 3611 or 8285 that the input breaks.
    public enum Rule: String, Sendable, Hashable, CaseIterable {
        /// Fewer bytes than the fixed header (12 bytes for RTP, 4 for an RTCP packet header).
        case truncatedHeader
        /// The version field is not 2.
        case version
        /// The CSRC list runs past the end of the packet.
        case csrcCount
        /// The extension header (profile and length) runs past the end of the packet.
        case extensionHeader
        /// The extension length runs past the end of the packet.
        case extensionLength
        /// An RFC 8285 element runs past the end of the extension block, or uses a reserved id.
        case extensionElement
        /// The padding count is zero or larger than the bytes after the header (RTP or RTCP), or, in
        /// RTCP, not a multiple of 4.
        case padding
        /// An RTCP length field does not fit the datagram.
        case rtcpLength
        /// Padding on an RTCP packet that is not the last of the compound packet.
        case rtcpPaddingNotLast
        /// The first packet of a compound packet is not an SR or an RR (RFC 3550 A.2).
        case compoundFirstPacket
        /// An SR or RR whose report count does not fit its length.
        case reportCount
        /// A malformed SDES chunk or item.
        case sdes
        /// A malformed BYE packet.
        case bye
        /// A malformed APP packet.
        case app
        /// A malformed XR packet or report block.
        case extendedReport
        /// An empty datagram where an RTCP packet was expected.
        case empty
    }

    /// Byte offset of the failure from the start of the input.
    public let offset: Int
    /// The rule that failed.
    public let rule: Rule

    /// Creates an error.
    public init(offset: Int, rule: Rule) {
        self.offset = offset
        self.rule = rule
    }

    /// A short human-readable form, `rule at offset N`.
    public var description: String { "\(rule.rawValue) at offset \(offset)" }
}

// MARK: - Big-endian helpers (internal)

extension ArraySlice where Element == UInt8 {
    @inline(__always)
    func be16(_ i: Int) -> UInt16 {
        UInt16(self[i]) << 8 | UInt16(self[i + 1])
    }

    @inline(__always)
    func be32(_ i: Int) -> UInt32 {
        UInt32(self[i]) << 24 | UInt32(self[i + 1]) << 16 | UInt32(self[i + 2]) << 8 | UInt32(self[i + 3])
    }
}

extension Array where Element == UInt8 {
    @inline(__always)
    mutating func appendBE16(_ v: UInt16) {
        append(UInt8(truncatingIfNeeded: v >> 8))
        append(UInt8(truncatingIfNeeded: v))
    }

    @inline(__always)
    mutating func appendBE32(_ v: UInt32) {
        append(UInt8(truncatingIfNeeded: v >> 24))
        append(UInt8(truncatingIfNeeded: v >> 16))
        append(UInt8(truncatingIfNeeded: v >> 8))
        append(UInt8(truncatingIfNeeded: v))
    }

    @inline(__always)
    mutating func setBE16(_ v: UInt16, at i: Int) {
        self[i] = UInt8(truncatingIfNeeded: v >> 8)
        self[i + 1] = UInt8(truncatingIfNeeded: v)
    }
}
