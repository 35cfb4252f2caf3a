import NetworkIO

/// One HEP version 3 packet (the Homer/EEP encapsulation collectors such as heplify-server
/// read): a copy of a captured SIP message or RTCP packet with the addresses, ports and time it
/// was seen, sent to a collector over UDP or TCP.
///
/// On the wire: `HEP3`, the total length (2 octets, network order), then chunks, each a vendor
/// (0: generic), a type, a length covering its own 6-octet header, and the value. The generic
/// chunks written here: IP family (1), IP protocol (2), IPv4 or IPv6 source and destination
/// (3/4, 5/6), source and destination port (7, 8), time in seconds and microseconds (9, 10),
/// the payload's protocol type (11: 1 SIP, 5 RTCP), the capture agent's id (12), an
/// authentication key (14), the payload (15) and a correlation id (17: the Call-ID). Decoding
/// skips chunks it does not know (other vendors', keep-alive timers, compressed payloads) and
/// rejects what breaks the framing, naming the offset.
public struct HEPPacket: Sendable, Hashable {
    /// What the payload is (the generic chunk 11's values).
    public enum PayloadType: Sendable, Hashable {
        case sip
        case rtp
        case rtcp
        /// Another protocol number.
        case other(UInt8)

        public init(code: UInt8) {
            switch code {
            case 1: self = .sip
            case 4: self = .rtp
            case 5: self = .rtcp
            default: self = .other(code)
            }
        }

        /// The protocol number on the wire.
        public var code: UInt8 {
            switch self {
            case .sip: return 1
            case .rtp: return 4
            case .rtcp: return 5
            case .other(let c): return c
            }
        }
    }

    /// The transport the payload was carried in.
    public enum IPProtocol: Sendable, Hashable {
        case udp
        case tcp
        /// Another IP protocol number.
        case other(UInt8)

        public init(code: UInt8) {
            switch code {
            case 17: self = .udp
            case 6: self = .tcp
            default: self = .other(code)
            }
        }

        /// The IP protocol number.
        public var code: UInt8 {
            switch self {
            case .udp: return 17
            case .tcp: return 6
            case .other(let c): return c
            }
        }
    }

    /// Where the payload came from.
    public var source: SocketAddress
    /// Where it went (both of the same family).
    public var destination: SocketAddress
    /// The transport it was carried in.
    public var ipProtocol: IPProtocol
    /// When it was seen: seconds since 1970 (UTC)…
    public var seconds: UInt32
    /// …and microseconds within that second.
    public var microseconds: UInt32
    /// What the payload is.
    public var payloadType: PayloadType
    /// The capture agent's id (which sensor sent it).
    public var agentID: UInt32
    /// A key the collector may check (sent in clear: HEP has no other authentication).
    public var authKey: String?
    /// A correlation id (the Call-ID of a SIP message; for RTCP, the call's Call-ID, so the
    /// collector files the reports with the call).
    public var correlationID: String?
    /// The captured bytes (a whole SIP message, or an RTCP compound packet).
    public var payload: [UInt8]

    /// The largest packet: the length field is 16 bits.
    public static let maximumSize = 65_535

    public init(source: SocketAddress, destination: SocketAddress, ipProtocol: IPProtocol = .udp, seconds: UInt32, microseconds: UInt32,
                payloadType: PayloadType, agentID: UInt32 = 0, authKey: String? = nil, correlationID: String? = nil, payload: [UInt8]) {
        self.source = source
        self.destination = destination
        self.ipProtocol = ipProtocol
        self.seconds = seconds
        self.microseconds = microseconds
        self.payloadType = payloadType
        self.agentID = agentID
        self.authKey = authKey
        self.correlationID = correlationID
        self.payload = payload
    }

    /// A packet stamped with `time` since 1970 (a capture record's or the runtime's wall time).
    public init(source: SocketAddress, destination: SocketAddress, ipProtocol: IPProtocol = .udp, time: Duration, payloadType: PayloadType,
                agentID: UInt32 = 0, authKey: String? = nil, correlationID: String? = nil, payload: [UInt8]) {
        let (s, attoseconds) = time.components
        self.init(source: source, destination: destination, ipProtocol: ipProtocol, seconds: UInt32(clamping: max(0, s)),
                  microseconds: UInt32(clamping: max(0, attoseconds / 1_000_000_000_000)), payloadType: payloadType, agentID: agentID,
                  authKey: authKey, correlationID: correlationID, payload: payload)
    }

    // MARK: Encoding

    /// The size of ``encoded()``'s bytes, without encoding.
    public var encodedSize: Int {
        let address = source.ip.isIPv6 ? 16 : 4
        // Header; family, protocol; two addresses; two ports; two times; type; agent id.
        var n = 6 + 7 + 7 + 2 * (6 + address) + 2 * 8 + 2 * 10 + 7 + 10
        if let authKey { n += 6 + authKey.utf8.count }
        if let correlationID { n += 6 + correlationID.utf8.count }
        return n + 6 + payload.count
    }

    /// The packet's bytes.
    /// - Throws: ``HEPError/tooLarge(_:)`` when it would be over ``maximumSize`` octets,
    ///   ``HEPError/mixedFamilies`` when the addresses are not of one family.
    public func encoded() throws(HEPError) -> [UInt8] {
        guard source.ip.isIPv6 == destination.ip.isIPv6 else { throw .mixedFamilies }
        let total = encodedSize
        guard total <= Self.maximumSize else { throw .tooLarge(total) }
        var out: [UInt8] = Array("HEP3".utf8) + [0, 0]
        out.reserveCapacity(total)
        func chunk(_ type: UInt16, _ value: [UInt8]) {
            let length = 6 + value.count
            out += [0, 0, UInt8(type >> 8), UInt8(type & 0xFF), UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)]
            out += value
        }
        func u16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }
        func u32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }
        let v6 = source.ip.isIPv6
        chunk(1, [v6 ? 10 : 2])
        chunk(2, [ipProtocol.code])
        chunk(v6 ? 5 : 3, source.ip.bytes)
        chunk(v6 ? 6 : 4, destination.ip.bytes)
        chunk(7, u16(source.port))
        chunk(8, u16(destination.port))
        chunk(9, u32(seconds))
        chunk(10, u32(microseconds))
        chunk(11, [payloadType.code])
        chunk(12, u32(agentID))
        if let authKey { chunk(14, Array(authKey.utf8)) }
        if let correlationID { chunk(17, Array(correlationID.utf8)) }
        chunk(15, payload)
        assert(out.count == total)
        out[4] = UInt8(total >> 8)
        out[5] = UInt8(total & 0xFF)
        return out
    }

    // MARK: Decoding

    /// Reads one HEP3 packet from `bytes` (exactly one: the length field must match).
    /// - Throws: ``HEPError`` naming the offset and what is wrong.
    public init(decoding bytes: [UInt8]) throws(HEPError) {
        guard bytes.count >= 6 else { throw .truncated(offset: bytes.count, needed: 6) }
        guard bytes[0] == 0x48, bytes[1] == 0x45, bytes[2] == 0x50, bytes[3] == 0x33 else { throw .notHEP3 }
        let total = Int(bytes[4]) << 8 | Int(bytes[5])
        guard total == bytes.count else { throw .lengthMismatch(declared: total, actual: bytes.count) }
        var family: UInt8?, proto: UInt8?
        var src: [UInt8]?, dst: [UInt8]?, sport: UInt16?, dport: UInt16?
        var seconds: UInt32?, micros: UInt32 = 0, type: UInt8?, agent: UInt32 = 0
        var auth: String?, correlation: String?, payload: [UInt8]?
        var at = 6
        while at < total {
            guard at + 6 <= total else { throw .truncated(offset: at, needed: 6) }
            let vendor = UInt16(bytes[at]) << 8 | UInt16(bytes[at + 1])
            let kind = UInt16(bytes[at + 2]) << 8 | UInt16(bytes[at + 3])
            let length = Int(bytes[at + 4]) << 8 | Int(bytes[at + 5])
            guard length >= 6 else { throw .badChunkLength(offset: at, length: length) }
            guard at + length <= total else { throw .truncated(offset: at, needed: length) }
            let value = Array(bytes[(at + 6)..<(at + length)])
            func fixed(_ n: Int) throws(HEPError) -> [UInt8] {
                guard value.count == n else { throw .badChunkLength(offset: at, length: length) }
                return value
            }
            func u16() throws(HEPError) -> UInt16 { let v = try fixed(2); return UInt16(v[0]) << 8 | UInt16(v[1]) }
            func u32() throws(HEPError) -> UInt32 {
                let v = try fixed(4)
                return UInt32(v[0]) << 24 | UInt32(v[1]) << 16 | UInt32(v[2]) << 8 | UInt32(v[3])
            }
            if vendor == 0 {
                switch kind {
                case 1: family = try fixed(1)[0]
                case 2: proto = try fixed(1)[0]
                case 3, 4: if kind == 3 { src = try fixed(4) } else { dst = try fixed(4) }
                case 5, 6: if kind == 5 { src = try fixed(16) } else { dst = try fixed(16) }
                case 7: sport = try u16()
                case 8: dport = try u16()
                case 9: seconds = try u32()
                case 10: micros = try u32()
                case 11: type = try fixed(1)[0]
                case 12: agent = try u32()
                case 14: auth = String(decoding: value, as: UTF8.self)
                case 15: payload = value
                case 17: correlation = String(decoding: value, as: UTF8.self)
                default: break
                }
            }
            at += length
        }
        guard let family else { throw .missingChunk(1) }
        guard let src else { throw .missingChunk(family == 10 ? 5 : 3) }
        guard let dst else { throw .missingChunk(family == 10 ? 6 : 4) }
        guard let sport else { throw .missingChunk(7) }
        guard let dport else { throw .missingChunk(8) }
        guard let seconds else { throw .missingChunk(9) }
        guard let type else { throw .missingChunk(11) }
        guard let payload else { throw .missingChunk(15) }
        guard (family == 2 && src.count == 4) || (family == 10 && src.count == 16), src.count == dst.count else {
            throw .familyMismatch(family: family)
        }
        func address(_ b: [UInt8], _ port: UInt16) -> SocketAddress {
            if b.count == 4 { return SocketAddress(.v4(IPv4Address(UInt32(b[0]) << 24 | UInt32(b[1]) << 16 | UInt32(b[2]) << 8 | UInt32(b[3]))), port: port) }
            return SocketAddress(.v6(IPv6Address(bytes: b)!), port: port)
        }
        self.init(source: address(src, sport), destination: address(dst, dport), ipProtocol: IPProtocol(code: proto ?? 17), seconds: seconds,
                  microseconds: micros, payloadType: PayloadType(code: type), agentID: agent, authKey: auth, correlationID: correlation,
                  payload: payload)
    }
}

/// Why a HEP packet could not be written or read.
public enum HEPError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The packet would be this many octets, over ``HEPPacket/maximumSize``.
    case tooLarge(Int)
    /// The source and destination are not both IPv4 or both IPv6.
    case mixedFamilies
    /// It does not start with `HEP3`.
    case notHEP3
    /// The length field says one size, the bytes are another.
    case lengthMismatch(declared: Int, actual: Int)
    /// A chunk (or the header) at `offset` needs `needed` octets that are not there.
    case truncated(offset: Int, needed: Int)
    /// The chunk at `offset` has a length its type does not allow (or under its 6-octet header).
    case badChunkLength(offset: Int, length: Int)
    /// A chunk the packet cannot be read without (by its generic type number) is missing.
    case missingChunk(UInt16)
    /// The address chunks do not match the IP family chunk.
    case familyMismatch(family: UInt8)

    public var description: String {
        switch self {
        case .tooLarge(let n): return "HEP packet of \(n) octets is over \(HEPPacket.maximumSize)"
        case .mixedFamilies: return "HEP packet: source and destination are of different IP families"
        case .notHEP3: return "not a HEP3 packet (no \"HEP3\" at offset 0)"
        case .lengthMismatch(let d, let a): return "HEP3 length field says \(d) octets, the packet has \(a)"
        case .truncated(let o, let n): return "HEP3 truncated at offset \(o): \(n) octets needed"
        case .badChunkLength(let o, let l): return "HEP3 chunk at offset \(o) has a bad length \(l)"
        case .missingChunk(let t): return "HEP3 packet without its chunk of type \(t)"
        case .familyMismatch(let f): return "HEP3 address chunks do not match IP family \(f)"
        }
    }
}
