/// A reception report block (RFC 3550 §6.4.1), carried in SR and RR packets.
public struct RTCPReportBlock: Sendable, Hashable {
    /// The source this block reports on.
    public var ssrc: UInt32
    /// Fraction lost since the previous report, in 1/256.
    public var fractionLost: UInt8
    /// Cumulative packets lost (24-bit signed: −2^23 … 2^23 − 1).
    public var cumulativeLost: Int32
    /// Extended highest sequence number received.
    public var extendedHighestSequence: UInt32
    /// Interarrival jitter, in timestamp units.
    public var jitter: UInt32
    /// Middle 32 bits of the NTP timestamp of the last SR received from the source (0 if none).
    public var lastSR: UInt32
    /// Delay since that SR arrived, in 1/65536 s (0 if none).
    public var delaySinceLastSR: UInt32

    /// Creates a report block.
    public init(
        ssrc: UInt32, fractionLost: UInt8, cumulativeLost: Int32, extendedHighestSequence: UInt32,
        jitter: UInt32, lastSR: UInt32, delaySinceLastSR: UInt32
    ) {
        self.ssrc = ssrc
        self.fractionLost = fractionLost
        self.cumulativeLost = cumulativeLost
        self.extendedHighestSequence = extendedHighestSequence
        self.jitter = jitter
        self.lastSR = lastSR
        self.delaySinceLastSR = delaySinceLastSR
    }

    static let size = 24

    init(_ b: ArraySlice<UInt8>, at i: Int) {
        ssrc = b.be32(i)
        fractionLost = b[i + 4]
        let raw = UInt32(b[i + 5]) << 16 | UInt32(b[i + 6]) << 8 | UInt32(b[i + 7])
        cumulativeLost = Int32(bitPattern: raw << 8) >> 8  // sign-extend 24 bits
        extendedHighestSequence = b.be32(i + 8)
        jitter = b.be32(i + 12)
        lastSR = b.be32(i + 16)
        delaySinceLastSR = b.be32(i + 20)
    }

    func write(to out: inout [UInt8]) {
        out.appendBE32(ssrc)
        let lost = UInt32(bitPattern: Swift.min(Swift.max(cumulativeLost, -0x80_0000), 0x7F_FFFF))
        out.appendBE32(UInt32(fractionLost) << 24 | lost & 0xFF_FFFF)
        out.appendBE32(extendedHighestSequence)
        out.appendBE32(jitter)
        out.appendBE32(lastSR)
        out.appendBE32(delaySinceLastSR)
    }
}

/// A sender report (RFC 3550 §6.4.1, PT 200).
public struct RTCPSenderReport: Sendable, Hashable {
    /// The sender's SSRC.
    public var ssrc: UInt32
    /// Wall-clock time when the report was sent.
    public var ntpTimestamp: NTPTimestamp
    /// The RTP timestamp corresponding to `ntpTimestamp`.
    public var rtpTimestamp: UInt32
    /// Packets sent since the start of transmission.
    public var packetCount: UInt32
    /// Payload octets sent since the start of transmission.
    public var octetCount: UInt32
    /// Reception report blocks (at most 31).
    public var reports: [RTCPReportBlock]
    /// Profile-specific extension bytes after the report blocks (a multiple of 4 bytes).
    public var profileExtension: [UInt8]

    /// Creates a sender report.
    public init(
        ssrc: UInt32, ntpTimestamp: NTPTimestamp, rtpTimestamp: UInt32, packetCount: UInt32,
        octetCount: UInt32, reports: [RTCPReportBlock] = [], profileExtension: [UInt8] = []
    ) {
        self.ssrc = ssrc
        self.ntpTimestamp = ntpTimestamp
        self.rtpTimestamp = rtpTimestamp
        self.packetCount = packetCount
        self.octetCount = octetCount
        self.reports = reports
        self.profileExtension = profileExtension
    }
}

/// A receiver report (RFC 3550 §6.4.2, PT 201).
public struct RTCPReceiverReport: Sendable, Hashable {
    /// The reporter's SSRC.
    public var ssrc: UInt32
    /// Reception report blocks (at most 31).
    public var reports: [RTCPReportBlock]
    /// Profile-specific extension bytes after the report blocks (a multiple of 4 bytes).
    public var profileExtension: [UInt8]

    /// Creates a receiver report.
    public init(ssrc: UInt32, reports: [RTCPReportBlock] = [], profileExtension: [UInt8] = []) {
        self.ssrc = ssrc
        self.reports = reports
        self.profileExtension = profileExtension
    }
}

/// SDES item types (RFC 3550 §6.5).
public enum SDESItemType {
    /// End of the item list (written by the serializer, never stored).
    public static let end: UInt8 = 0
    /// Canonical end-point identifier.
    public static let cname: UInt8 = 1
    /// User name.
    public static let name: UInt8 = 2
    /// Electronic mail address.
    public static let email: UInt8 = 3
    /// Phone number.
    public static let phone: UInt8 = 4
    /// Geographic location.
    public static let location: UInt8 = 5
    /// Application or tool name.
    public static let tool: UInt8 = 6
    /// Notice or status.
    public static let note: UInt8 = 7
    /// Private extension (prefix length, prefix, value inside `value`).
    public static let priv: UInt8 = 8
}

/// One SDES item: a type and up to 255 bytes of value (UTF-8 text for the standard types).
public struct RTCPSDESItem: Sendable, Hashable {
    /// The item type (see `SDESItemType`); never 0.
    public var type: UInt8
    /// The value bytes.
    public var value: [UInt8]

    /// Creates an item from bytes.
    public init(type: UInt8, value: [UInt8]) {
        self.type = type
        self.value = value
    }

    /// Creates an item from text (UTF-8).
    public init(type: UInt8, text: String) {
        self.init(type: type, value: Array(text.utf8))
    }

    /// The value decoded as UTF-8, if valid.
    public var text: String? { utf8Text(value) }
}

/// One SDES chunk: a source and its items.
public struct RTCPSDESChunk: Sendable, Hashable {
    /// The source described.
    public var ssrc: UInt32
    /// Its items.
    public var items: [RTCPSDESItem]

    /// Creates a chunk.
    public init(ssrc: UInt32, items: [RTCPSDESItem]) {
        self.ssrc = ssrc
        self.items = items
    }

    /// The CNAME item as text, if present.
    public var cname: String? { items.first { $0.type == SDESItemType.cname }?.text }
}

/// A source description packet (RFC 3550 §6.5, PT 202).
public struct RTCPSourceDescription: Sendable, Hashable {
    /// The chunks (at most 31).
    public var chunks: [RTCPSDESChunk]

    /// Creates an SDES packet.
    public init(chunks: [RTCPSDESChunk]) {
        self.chunks = chunks
    }
}

/// A goodbye packet (RFC 3550 §6.6, PT 203).
public struct RTCPBye: Sendable, Hashable {
    /// The sources leaving (at most 31).
    public var ssrcs: [UInt32]
    /// The optional reason for leaving (at most 255 bytes, UTF-8).
    public var reason: [UInt8]?

    /// Creates a BYE packet.
    public init(ssrcs: [UInt32], reason: [UInt8]? = nil) {
        self.ssrcs = ssrcs
        self.reason = reason
    }

    /// Creates a BYE packet with a text reason.
    public init(ssrcs: [UInt32], reasonText: String) {
        self.init(ssrcs: ssrcs, reason: Array(reasonText.utf8))
    }

    /// The reason decoded as UTF-8, if present and valid.
    public var reasonText: String? { reason.flatMap(utf8Text) }
}

/// An application-defined packet (RFC 3550 §6.7, PT 204).
public struct RTCPApp: Sendable, Hashable {
    /// The 5-bit subtype.
    public var subtype: UInt8
    /// The sender's SSRC.
    public var ssrc: UInt32
    /// The four-character name, as four bytes.
    public var name: [UInt8]
    /// Application data (a multiple of 4 bytes on the wire).
    public var data: [UInt8]

    /// Creates an APP packet. `name` must be 4 bytes.
    public init(subtype: UInt8, ssrc: UInt32, name: [UInt8], data: [UInt8] = []) {
        self.subtype = subtype
        self.ssrc = ssrc
        self.name = name
        self.data = data
    }
}

/// An RTCP packet of a type this module does not decode, kept raw.
public struct RTCPUnknownPacket: Sendable, Hashable {
    /// The packet type.
    public var packetType: UInt8
    /// The 5-bit count/format field.
    public var count: UInt8
    /// The bytes after the 4-byte header, without padding.
    public var body: [UInt8]

    /// Creates a raw packet.
    public init(packetType: UInt8, count: UInt8, body: [UInt8]) {
        self.packetType = packetType
        self.count = count
        self.body = body
    }
}

/// One RTCP packet of a compound packet.
public enum RTCPPacket: Sendable, Hashable {
    /// SR, PT 200.
    case senderReport(RTCPSenderReport)
    /// RR, PT 201.
    case receiverReport(RTCPReceiverReport)
    /// SDES, PT 202.
    case sourceDescription(RTCPSourceDescription)
    /// BYE, PT 203.
    case bye(RTCPBye)
    /// APP, PT 204.
    case app(RTCPApp)
    /// XR, PT 207 (RFC 3611).
    case extendedReport(RTCPExtendedReport)
    /// Any other type (RTPFB, PSFB, …), kept raw.
    case unknown(RTCPUnknownPacket)

    /// RTCP packet type numbers.
    public enum PacketType {
        /// Sender report.
        public static let senderReport: UInt8 = 200
        /// Receiver report.
        public static let receiverReport: UInt8 = 201
        /// Source description.
        public static let sourceDescription: UInt8 = 202
        /// Goodbye.
        public static let bye: UInt8 = 203
        /// Application-defined.
        public static let app: UInt8 = 204
        /// Extended report (RFC 3611).
        public static let extendedReport: UInt8 = 207
    }

    /// This packet's type number.
    public var packetType: UInt8 {
        switch self {
        case .senderReport: return PacketType.senderReport
        case .receiverReport: return PacketType.receiverReport
        case .sourceDescription: return PacketType.sourceDescription
        case .bye: return PacketType.bye
        case .app: return PacketType.app
        case .extendedReport: return PacketType.extendedReport
        case .unknown(let u): return u.packetType
        }
    }
}

/// Decodes UTF-8, returning nil for invalid input.
func utf8Text(_ bytes: [UInt8]) -> String? {
    let s = String(decoding: bytes, as: UTF8.self)
    return s.utf8.elementsEqual(bytes) ? s : nil
}
