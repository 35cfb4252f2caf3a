/// One RFC 8285 header extension element: a local identifier and its data.
public struct RTPExtensionElement: Sendable, Hashable {
    /// The local identifier: 1–14 in the one-byte form, 1–255 in the two-byte form.
    public var id: UInt8
    /// The element's data: 1–16 bytes in the one-byte form, 0–255 in the two-byte form.
    public var data: [UInt8]

    /// Creates an element.
    public init(id: UInt8, data: [UInt8]) {
        self.id = id
        self.data = data
    }
}

/// The header extension of an RTP packet (RFC 3550 §5.3.1, RFC 8285).
public enum RTPHeaderExtension: Sendable, Hashable {
    /// RFC 8285 one-byte header form (profile `0xBEDE`).
    case oneByte([RTPExtensionElement])
    /// RFC 8285 two-byte header form (profile `0x100` followed by four application bits).
    case twoByte(appBits: UInt8, [RTPExtensionElement])
    /// Any other profile, kept opaque; `data` is a multiple of 4 bytes.
    case other(profile: UInt16, data: [UInt8])

    /// The profile value written in the extension header.
    public var profile: UInt16 {
        switch self {
        case .oneByte: return 0xBEDE
        case .twoByte(let bits, _): return 0x1000 | UInt16(bits & 0x0F)
        case .other(let profile, _): return profile
        }
    }

    /// The RFC 8285 elements (empty for `.other`).
    public var elements: [RTPExtensionElement] {
        switch self {
        case .oneByte(let e), .twoByte(_, let e): return e
        case .other: return []
        }
    }

    /// The data of the first element with this id, if any.
    public func element(id: UInt8) -> [UInt8]? {
        elements.first { $0.id == id }?.data
    }
}

/// An RTP data packet (RFC 3550 §5.1).
///
/// Parsing from an array or slice keeps `payload` as a slice of the input (no copy).
/// `RTPPacket(parsing:)` followed by `serialized()` reproduces the input byte for byte when the
/// input is canonical: RFC 8285 elements packed without inner padding, padding bytes zero
/// (except the final count) and the extension block's tail padded with zeros.
public struct RTPPacket: Sendable, Hashable {
    /// The marker bit.
    public var marker: Bool
    /// The payload type (0–127).
    public var payloadType: UInt8
    /// The sequence number.
    public var sequenceNumber: UInt16
    /// The RTP timestamp.
    public var timestamp: UInt32
    /// The synchronization source.
    public var ssrc: UInt32
    /// Contributing sources (at most 15).
    public var csrcs: [UInt32]
    /// The header extension, when the X bit is set.
    public var headerExtension: RTPHeaderExtension?
    /// The payload, without padding.
    public var payload: ArraySlice<UInt8>
    /// Number of padding bytes at the end, including the count byte itself (0 = no padding).
    public var paddingCount: UInt8

    /// Creates a packet.
    public init(
        marker: Bool = false, payloadType: UInt8, sequenceNumber: UInt16, timestamp: UInt32,
        ssrc: UInt32, csrcs: [UInt32] = [], headerExtension: RTPHeaderExtension? = nil,
        payload: ArraySlice<UInt8> = [], paddingCount: UInt8 = 0
    ) {
        self.marker = marker
        self.payloadType = payloadType
        self.sequenceNumber = sequenceNumber
        self.timestamp = timestamp
        self.ssrc = ssrc
        self.csrcs = csrcs
        self.headerExtension = headerExtension
        self.payload = payload
        self.paddingCount = paddingCount
    }

    /// Parses a packet from an array; the payload is a slice of `bytes`.
    public init(parsing bytes: [UInt8]) throws(RTPParseError) {
        try self.init(parsing: bytes[...])
    }

    /// Parses a packet from raw memory (the bytes are copied once).
    public init(parsing buffer: UnsafeRawBufferPointer) throws(RTPParseError) {
        try self.init(parsing: [UInt8](buffer)[...])
    }

    /// Parses a packet from a slice; offsets in errors count from `bytes.startIndex`.
    public init(parsing bytes: ArraySlice<UInt8>) throws(RTPParseError) {
        let s = bytes.startIndex
        let end = bytes.endIndex
        guard bytes.count >= 12 else { throw RTPParseError(offset: bytes.count, rule: .truncatedHeader) }
        let b0 = bytes[s], b1 = bytes[s + 1]
        guard b0 >> 6 == 2 else { throw RTPParseError(offset: 0, rule: .version) }
        let hasPadding = b0 & 0x20 != 0
        let hasExtension = b0 & 0x10 != 0
        let cc = Int(b0 & 0x0F)
        marker = b1 & 0x80 != 0
        payloadType = b1 & 0x7F
        sequenceNumber = bytes.be16(s + 2)
        timestamp = bytes.be32(s + 4)
        ssrc = bytes.be32(s + 8)
        var i = s + 12
        guard end - i >= cc * 4 else { throw RTPParseError(offset: 0, rule: .csrcCount) }
        var list: [UInt32] = []
        list.reserveCapacity(cc)
        for _ in 0..<cc {
            list.append(bytes.be32(i))
            i += 4
        }
        csrcs = list
        if hasExtension {
            guard end - i >= 4 else { throw RTPParseError(offset: i - s, rule: .extensionHeader) }
            let profile = bytes.be16(i)
            let words = Int(bytes.be16(i + 2))
            guard end - (i + 4) >= words * 4 else { throw RTPParseError(offset: i + 2 - s, rule: .extensionLength) }
            let block = bytes[(i + 4)..<(i + 4 + words * 4)]
            headerExtension = try Self.parseExtension(profile: profile, block: block, base: s)
            i += 4 + words * 4
        } else {
            headerExtension = nil
        }
        var payloadEnd = end
        if hasPadding {
            let count = bytes[end - 1]
            guard count > 0, Int(count) <= end - i else { throw RTPParseError(offset: end - 1 - s, rule: .padding) }
            payloadEnd = end - Int(count)
            paddingCount = count
        } else {
            paddingCount = 0
        }
        payload = bytes[i..<payloadEnd]
    }

    private static func parseExtension(
        profile: UInt16, block: ArraySlice<UInt8>, base: Int
    ) throws(RTPParseError) -> RTPHeaderExtension {
        if profile == 0xBEDE {
            var elements: [RTPExtensionElement] = []
            var i = block.startIndex
            while i < block.endIndex {
                let b = block[i]
                let id = b >> 4
                if id == 0 { i += 1; continue }  // padding byte
                if id == 15 { break }  // RFC 8285 §4.2: stop processing
                let len = Int(b & 0x0F) + 1
                guard block.endIndex - (i + 1) >= len else { throw RTPParseError(offset: i - base, rule: .extensionElement) }
                elements.append(RTPExtensionElement(id: id, data: Array(block[(i + 1)..<(i + 1 + len)])))
                i += 1 + len
            }
            return .oneByte(elements)
        }
        if profile & 0xFFF0 == 0x1000 {
            var elements: [RTPExtensionElement] = []
            var i = block.startIndex
            while i < block.endIndex {
                let id = block[i]
                if id == 0 { i += 1; continue }  // padding byte
                guard i + 1 < block.endIndex else { throw RTPParseError(offset: i - base, rule: .extensionElement) }
                let len = Int(block[i + 1])
                guard block.endIndex - (i + 2) >= len else { throw RTPParseError(offset: i - base, rule: .extensionElement) }
                elements.append(RTPExtensionElement(id: id, data: Array(block[(i + 2)..<(i + 2 + len)])))
                i += 2 + len
            }
            return .twoByte(appBits: UInt8(profile & 0x0F), elements)
        }
        return .other(profile: profile, data: Array(block))
    }

    /// Serializes the packet. Returns nil when a field cannot be encoded: more than 15 CSRCs, a
    /// payload type above 127, a one-byte element with an id outside 1–14 or data of 0 or more
    /// than 16 bytes, a two-byte element with id 0 or more than 255 bytes, opaque extension data
    /// not a multiple of 4 bytes, or an extension longer than 65535 words.
    public func serialized() -> [UInt8]? {
        guard csrcs.count <= 15, payloadType <= 127 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(12 + csrcs.count * 4 + payload.count + Int(paddingCount) + 32)
        var b0: UInt8 = 0x80 | UInt8(csrcs.count)
        if paddingCount > 0 { b0 |= 0x20 }
        if headerExtension != nil { b0 |= 0x10 }
        out.append(b0)
        out.append((marker ? 0x80 : 0) | payloadType)
        out.appendBE16(sequenceNumber)
        out.appendBE32(timestamp)
        out.appendBE32(ssrc)
        for c in csrcs { out.appendBE32(c) }
        if let ext = headerExtension {
            out.appendBE16(ext.profile)
            let lengthAt = out.count
            out.appendBE16(0)
            let start = out.count
            switch ext {
            case .oneByte(let elements):
                for e in elements {
                    guard (1...14).contains(e.id), (1...16).contains(e.data.count) else { return nil }
                    out.append(e.id << 4 | UInt8(e.data.count - 1))
                    out.append(contentsOf: e.data)
                }
            case .twoByte(_, let elements):
                for e in elements {
                    guard e.id != 0, e.data.count <= 255 else { return nil }
                    out.append(e.id)
                    out.append(UInt8(e.data.count))
                    out.append(contentsOf: e.data)
                }
            case .other(_, let data):
                guard data.count % 4 == 0 else { return nil }
                out.append(contentsOf: data)
            }
            while (out.count - start) % 4 != 0 { out.append(0) }
            let words = (out.count - start) / 4
            guard words <= 0xFFFF else { return nil }
            out.setBE16(UInt16(words), at: lengthAt)
        }
        out.append(contentsOf: payload)
        if paddingCount > 0 {
            out.append(contentsOf: repeatElement(0, count: Int(paddingCount) - 1))
            out.append(paddingCount)
        }
        return out
    }
}
