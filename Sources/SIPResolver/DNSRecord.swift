import NetworkIO

/// A service location record (RFC 2782).
public struct DNSSRVRecord: Sendable, Hashable, CustomStringConvertible {
    /// Lower values are tried first.
    public var priority: UInt16
    /// The relative share of traffic among records of the same priority; 0 means "pick rarely".
    public var weight: UInt16
    /// The port the service listens on.
    public var port: UInt16
    /// The host offering the service; the root (`.`) means the service is not available.
    public var target: DNSName

    /// Creates an SRV record's data.
    public init(priority: UInt16, weight: UInt16, port: UInt16, target: DNSName) {
        self.priority = priority
        self.weight = weight
        self.port = port
        self.target = target
    }

    /// The zone-file form: `priority weight port target`.
    public var description: String { "\(priority) \(weight) \(port) \(target)" }
}

/// A naming authority pointer record (RFC 3403 §4.1).
///
/// The character-string fields are decoded as UTF-8 (they are ASCII in practice; invalid
/// sequences become U+FFFD).
public struct DNSNAPTRRecord: Sendable, Hashable, CustomStringConvertible {
    /// Records with lower order are processed first.
    public var order: UInt16
    /// Among records of equal order, lower preference is tried first.
    public var preference: UInt16
    /// The flags (`S` for "the next lookup is SRV").
    public var flags: String
    /// The service field (`SIP+D2U`, `SIP+D2T`, `SIPS+D2T`, …).
    public var services: String
    /// The substitution expression; empty when ``replacement`` is used.
    public var regexp: String
    /// The next name to look up; the root when ``regexp`` is used.
    public var replacement: DNSName

    /// Creates a NAPTR record's data.
    public init(order: UInt16, preference: UInt16, flags: String, services: String, regexp: String = "", replacement: DNSName) {
        self.order = order
        self.preference = preference
        self.flags = flags
        self.services = services
        self.regexp = regexp
        self.replacement = replacement
    }

    /// The zone-file form: `order preference "flags" "services" "regexp" replacement`.
    public var description: String { "\(order) \(preference) \"\(flags)\" \"\(services)\" \"\(regexp)\" \(replacement)" }
}

/// The start-of-authority record (RFC 1035 §3.3.13); its ``minimum`` bounds negative caching
/// (RFC 2308 §5).
public struct DNSSOARecord: Sendable, Hashable, CustomStringConvertible {
    /// The primary name server of the zone.
    public var primaryServer: DNSName
    /// The mailbox of the person responsible, as a name.
    public var responsibleMailbox: DNSName
    /// The zone's version number.
    public var serial: UInt32
    /// Seconds before secondaries refresh.
    public var refresh: UInt32
    /// Seconds before a failed refresh is retried.
    public var retry: UInt32
    /// Seconds after which secondaries stop answering without a refresh.
    public var expire: UInt32
    /// The TTL of negative answers from this zone (RFC 2308).
    public var minimum: UInt32

    /// Creates an SOA record's data.
    public init(primaryServer: DNSName, responsibleMailbox: DNSName, serial: UInt32, refresh: UInt32, retry: UInt32, expire: UInt32, minimum: UInt32) {
        self.primaryServer = primaryServer
        self.responsibleMailbox = responsibleMailbox
        self.serial = serial
        self.refresh = refresh
        self.retry = retry
        self.expire = expire
        self.minimum = minimum
    }

    /// The zone-file form.
    public var description: String { "\(primaryServer) \(responsibleMailbox) \(serial) \(refresh) \(retry) \(expire) \(minimum)" }
}

/// The RDATA of a resource record, decoded for the types SIP server location needs.
public enum DNSRecordData: Sendable, Hashable, CustomStringConvertible {
    /// An IPv4 address.
    case a(IPv4Address)
    /// An IPv6 address.
    case aaaa(IPv6Address)
    /// The canonical name of an alias.
    case cname(DNSName)
    /// A name server.
    case ns(DNSName)
    /// A pointer to another name.
    case ptr(DNSName)
    /// A zone's start of authority.
    case soa(DNSSOARecord)
    /// One or more character-strings, each at most 255 octets.
    case txt([[UInt8]])
    /// A service location.
    case srv(DNSSRVRecord)
    /// A naming authority pointer.
    case naptr(DNSNAPTRRecord)
    /// Any other type (or any type outside class IN), kept as raw RDATA octets.
    case unknown(type: DNSRecordType, data: [UInt8])

    /// The record type this data belongs to.
    public var type: DNSRecordType {
        switch self {
        case .a: return .a
        case .aaaa: return .aaaa
        case .cname: return .cname
        case .ns: return .ns
        case .ptr: return .ptr
        case .soa: return .soa
        case .txt: return .txt
        case .srv: return .srv
        case .naptr: return .naptr
        case .unknown(let t, _): return t
        }
    }

    /// The zone-file form of the data.
    public var description: String {
        switch self {
        case .a(let a): return a.description
        case .aaaa(let a): return a.description
        case .cname(let n), .ns(let n), .ptr(let n): return n.description
        case .soa(let s): return s.description
        case .txt(let strings): return strings.map { "\"" + String(decoding: $0, as: UTF8.self) + "\"" }.joined(separator: " ")
        case .srv(let s): return s.description
        case .naptr(let n): return n.description
        case .unknown(_, let d): return "\\# \(d.count)" + (d.isEmpty ? "" : " " + d.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined())
        }
    }
}

/// A resource record (RFC 1035 §4.1.3).
public struct DNSRecord: Sendable, Hashable, CustomStringConvertible {
    /// The owner name.
    public var name: DNSName
    /// The class; ``DNSClass/internet`` in practice (for OPT it carries the UDP payload size).
    public var recordClass: DNSClass
    /// Seconds the record may be cached.
    public var ttl: UInt32
    /// The decoded RDATA.
    public var data: DNSRecordData

    /// Creates a record.
    public init(name: DNSName, recordClass: DNSClass = .internet, ttl: UInt32, data: DNSRecordData) {
        self.name = name
        self.recordClass = recordClass
        self.ttl = ttl
        self.data = data
    }

    /// The record type (from ``data``).
    public var type: DNSRecordType { data.type }

    /// The zone-file form: `name ttl class type data`.
    public var description: String { "\(name) \(ttl) \(recordClass) \(type) \(data)" }
}

/// An entry of the question section (RFC 1035 §4.1.2).
public struct DNSQuestion: Sendable, Hashable, CustomStringConvertible {
    /// The name asked about.
    public var name: DNSName
    /// The type asked for.
    public var type: DNSRecordType
    /// The class asked for.
    public var questionClass: DNSClass

    /// Creates a question.
    public init(name: DNSName, type: DNSRecordType, questionClass: DNSClass = .internet) {
        self.name = name
        self.type = type
        self.questionClass = questionClass
    }

    /// `name class type`.
    public var description: String { "\(name) \(questionClass) \(type)" }
}
