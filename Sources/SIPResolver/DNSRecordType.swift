/// A resource record TYPE (RFC 1035 §3.2.2), open to values this module does not decode.
public struct DNSRecordType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The 16-bit TYPE value.
    public var rawValue: UInt16

    /// Creates a type from its value.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// An IPv4 host address (RFC 1035).
    public static let a = DNSRecordType(rawValue: 1)
    /// An authoritative name server (RFC 1035).
    public static let ns = DNSRecordType(rawValue: 2)
    /// The canonical name for an alias (RFC 1035).
    public static let cname = DNSRecordType(rawValue: 5)
    /// The start of a zone of authority (RFC 1035).
    public static let soa = DNSRecordType(rawValue: 6)
    /// A domain name pointer (RFC 1035).
    public static let ptr = DNSRecordType(rawValue: 12)
    /// Text strings (RFC 1035).
    public static let txt = DNSRecordType(rawValue: 16)
    /// An IPv6 host address (RFC 3596).
    public static let aaaa = DNSRecordType(rawValue: 28)
    /// A service location (RFC 2782).
    public static let srv = DNSRecordType(rawValue: 33)
    /// A naming authority pointer (RFC 3403).
    public static let naptr = DNSRecordType(rawValue: 35)
    /// The EDNS(0) pseudo-record (RFC 6891).
    public static let opt = DNSRecordType(rawValue: 41)

    /// The mnemonic (`A`, `AAAA`, `SRV`, …), or `TYPEn` for others (RFC 3597 §5).
    public var description: String {
        switch rawValue {
        case 1: return "A"
        case 2: return "NS"
        case 5: return "CNAME"
        case 6: return "SOA"
        case 12: return "PTR"
        case 16: return "TXT"
        case 28: return "AAAA"
        case 33: return "SRV"
        case 35: return "NAPTR"
        case 41: return "OPT"
        default: return "TYPE\(rawValue)"
        }
    }
}

/// A resource record CLASS (RFC 1035 §3.2.4).
public struct DNSClass: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The 16-bit CLASS value.
    public var rawValue: UInt16

    /// Creates a class from its value.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// The Internet class, the only one this module decodes record data for.
    public static let internet = DNSClass(rawValue: 1)

    /// `IN`, or `CLASSn` for others.
    public var description: String { rawValue == 1 ? "IN" : "CLASS\(rawValue)" }
}

/// The RCODE of a DNS header (RFC 1035 §4.1.1), four bits.
public struct DNSResponseCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The RCODE value, 0–15.
    public var rawValue: UInt8

    /// Creates a response code; only the low four bits are kept.
    public init(rawValue: UInt8) { self.rawValue = rawValue & 0x0F }

    /// No error.
    public static let noError = DNSResponseCode(rawValue: 0)
    /// The server could not interpret the query.
    public static let formatError = DNSResponseCode(rawValue: 1)
    /// The server failed to process the query.
    public static let serverFailure = DNSResponseCode(rawValue: 2)
    /// The queried name does not exist (NXDOMAIN).
    public static let nameError = DNSResponseCode(rawValue: 3)
    /// The server does not support this kind of query.
    public static let notImplemented = DNSResponseCode(rawValue: 4)
    /// The server refuses to answer.
    public static let refused = DNSResponseCode(rawValue: 5)

    /// The mnemonic (`NOERROR`, `NXDOMAIN`, …), or `RCODEn`.
    public var description: String {
        switch rawValue {
        case 0: return "NOERROR"
        case 1: return "FORMERR"
        case 2: return "SERVFAIL"
        case 3: return "NXDOMAIN"
        case 4: return "NOTIMP"
        case 5: return "REFUSED"
        default: return "RCODE\(rawValue)"
        }
    }
}
