/// The header fields the stack knows by name. Compact forms (RFC 3261 §7.3.3 and later RFCs)
/// map to the same case as their long names.
public enum KnownHeader: UInt8, Sendable, Hashable, CaseIterable {
    case accept = 1, acceptContact, acceptEncoding, acceptLanguage, alertInfo, allow, allowEvents
    case authenticationInfo, authorization, callID, callInfo, contact, contentDisposition
    case contentEncoding, contentLanguage, contentLength, contentType, cseq, date, diversion
    case errorInfo, event, expires, from, historyInfo, identity, inReplyTo, maxForwards
    case minExpires, minSE, mimeVersion, organization, pAssertedIdentity, pPreferredIdentity
    case path, priority, privacy, proxyAuthenticate, proxyAuthorization, proxyRequire, rack
    case reason, recordRoute, referTo, referredBy, rejectContact, replaces, replyTo
    case requestDisposition, require, retryAfter, route, rseq, server, serviceRoute
    case sessionExpires, sipETag, sipIfMatch, subject, subscriptionState, supported, timestamp
    case to, unsupported, userAgent, via, warning, wwwAuthenticate

    /// The canonical spelling used when the stack writes the header.
    public var canonicalName: String {
        switch self {
        case .accept: return "Accept"
        case .acceptContact: return "Accept-Contact"
        case .acceptEncoding: return "Accept-Encoding"
        case .acceptLanguage: return "Accept-Language"
        case .alertInfo: return "Alert-Info"
        case .allow: return "Allow"
        case .allowEvents: return "Allow-Events"
        case .authenticationInfo: return "Authentication-Info"
        case .authorization: return "Authorization"
        case .callID: return "Call-ID"
        case .callInfo: return "Call-Info"
        case .contact: return "Contact"
        case .contentDisposition: return "Content-Disposition"
        case .contentEncoding: return "Content-Encoding"
        case .contentLanguage: return "Content-Language"
        case .contentLength: return "Content-Length"
        case .contentType: return "Content-Type"
        case .cseq: return "CSeq"
        case .date: return "Date"
        case .diversion: return "Diversion"
        case .errorInfo: return "Error-Info"
        case .event: return "Event"
        case .expires: return "Expires"
        case .from: return "From"
        case .historyInfo: return "History-Info"
        case .identity: return "Identity"
        case .inReplyTo: return "In-Reply-To"
        case .maxForwards: return "Max-Forwards"
        case .minExpires: return "Min-Expires"
        case .minSE: return "Min-SE"
        case .mimeVersion: return "MIME-Version"
        case .organization: return "Organization"
        case .pAssertedIdentity: return "P-Asserted-Identity"
        case .pPreferredIdentity: return "P-Preferred-Identity"
        case .path: return "Path"
        case .priority: return "Priority"
        case .privacy: return "Privacy"
        case .proxyAuthenticate: return "Proxy-Authenticate"
        case .proxyAuthorization: return "Proxy-Authorization"
        case .proxyRequire: return "Proxy-Require"
        case .rack: return "RAck"
        case .reason: return "Reason"
        case .recordRoute: return "Record-Route"
        case .referTo: return "Refer-To"
        case .referredBy: return "Referred-By"
        case .rejectContact: return "Reject-Contact"
        case .replaces: return "Replaces"
        case .replyTo: return "Reply-To"
        case .requestDisposition: return "Request-Disposition"
        case .require: return "Require"
        case .retryAfter: return "Retry-After"
        case .route: return "Route"
        case .rseq: return "RSeq"
        case .server: return "Server"
        case .serviceRoute: return "Service-Route"
        case .sessionExpires: return "Session-Expires"
        case .sipETag: return "SIP-ETag"
        case .sipIfMatch: return "SIP-If-Match"
        case .subject: return "Subject"
        case .subscriptionState: return "Subscription-State"
        case .supported: return "Supported"
        case .timestamp: return "Timestamp"
        case .to: return "To"
        case .unsupported: return "Unsupported"
        case .userAgent: return "User-Agent"
        case .via: return "Via"
        case .warning: return "Warning"
        case .wwwAuthenticate: return "WWW-Authenticate"
        }
    }

    /// The compact form, where one is registered.
    public var compactForm: Character? {
        switch self {
        case .acceptContact: return "a"
        case .referredBy: return "b"
        case .contentType: return "c"
        case .requestDisposition: return "d"
        case .contentEncoding: return "e"
        case .from: return "f"
        case .callID: return "i"
        case .rejectContact: return "j"
        case .supported: return "k"
        case .contentLength: return "l"
        case .contact: return "m"
        case .event: return "o"
        case .referTo: return "r"
        case .subject: return "s"
        case .to: return "t"
        case .allowEvents: return "u"
        case .via: return "v"
        case .sessionExpires: return "x"
        case .identity: return "y"
        default: return nil
        }
    }

    /// Whether the header's grammar is a comma-separated list (`#element`), so that several
    /// values may share one line.
    public var isList: Bool {
        switch self {
        case .accept, .acceptContact, .acceptEncoding, .acceptLanguage, .alertInfo, .allow, .allowEvents,
             .callInfo, .contact, .contentEncoding, .contentLanguage, .errorInfo, .historyInfo, .inReplyTo,
             .pAssertedIdentity, .pPreferredIdentity, .path, .privacy, .proxyRequire, .reason, .recordRoute,
             .rejectContact, .requestDisposition, .require, .route, .serviceRoute, .supported, .unsupported,
             .via, .warning, .diversion:
            return true
        default:
            return false
        }
    }

    // MARK: Lookup from bytes

    private static let lowercasedNames: [[UInt8]] = {
        var names = [[UInt8]](repeating: [], count: 256)
        for h in KnownHeader.allCases { names[Int(h.rawValue)] = Array(h.canonicalName.lowercased().utf8) }
        return names
    }()

    /// Buckets keyed by (length, first letter); each holds up to four candidate ids.
    private static let buckets: [UInt8] = {
        var b = [UInt8](repeating: 0, count: 64 * 32 * 4)
        func insert(_ key: Int, _ id: UInt8) {
            for slot in 0..<4 where b[key * 4 + slot] == 0 { b[key * 4 + slot] = id; return }
            fatalError("header-name bucket overflow")  // a programming error in the table above
        }
        for h in KnownHeader.allCases {
            let n = Array(h.canonicalName.lowercased().utf8)
            insert(bucketKey(length: n.count, first: n[0]), h.rawValue)
        }
        return b
    }()

    @inline(__always) private static func bucketKey(length: Int, first: UInt8) -> Int {
        (length & 63) * 32 + Int(lowerASCII(first) & 31)
    }

    /// Finds the known header named by `bytes` (long or compact form, any case).
    @inlinable
    public static func lookup(_ bytes: UnsafeRawBufferPointer) -> KnownHeader? {
        lookupBytes(bytes)
    }

    @usableFromInline
    static func lookupBytes(_ bytes: UnsafeRawBufferPointer) -> KnownHeader? {
        let n = bytes.count
        if n == 1 { return compact(bytes[0]) }
        guard n >= 2, n < 64 else { return nil }
        let key = bucketKey(length: n, first: bytes[0]) * 4
        return buckets.withUnsafeBufferPointer { b in
            for slot in 0..<4 {
                let id = b[key + slot]
                if id == 0 { return nil }
                let match = lowercasedNames[Int(id)].withUnsafeBufferPointer { cand -> Bool in
                    for i in 0..<n where lowerASCII(bytes[i]) != cand[i] { return false }
                    return true
                }
                if match { return KnownHeader(rawValue: id) }
            }
            return nil
        }
    }

    /// Finds the known header named by a string (long or compact form, any case).
    public static func lookup(_ name: String) -> KnownHeader? {
        var s = name
        return s.withUTF8 { lookupBytes(UnsafeRawBufferPointer($0)) }
    }

    @inline(__always) static func compact(_ c: UInt8) -> KnownHeader? {
        switch lowerASCII(c) {
        case UInt8(ascii: "a"): return .acceptContact
        case UInt8(ascii: "b"): return .referredBy
        case UInt8(ascii: "c"): return .contentType
        case UInt8(ascii: "d"): return .requestDisposition
        case UInt8(ascii: "e"): return .contentEncoding
        case UInt8(ascii: "f"): return .from
        case UInt8(ascii: "i"): return .callID
        case UInt8(ascii: "j"): return .rejectContact
        case UInt8(ascii: "k"): return .supported
        case UInt8(ascii: "l"): return .contentLength
        case UInt8(ascii: "m"): return .contact
        case UInt8(ascii: "o"): return .event
        case UInt8(ascii: "r"): return .referTo
        case UInt8(ascii: "s"): return .subject
        case UInt8(ascii: "t"): return .to
        case UInt8(ascii: "u"): return .allowEvents
        case UInt8(ascii: "v"): return .via
        case UInt8(ascii: "x"): return .sessionExpires
        case UInt8(ascii: "y"): return .identity
        default: return nil
        }
    }
}

/// A header field name: one of the ``KnownHeader`` cases (matched in long or compact form,
/// any case) or an extension header compared case-insensitively.
public struct SIPHeaderName: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The known header, or `nil` for an extension header.
    public let known: KnownHeader?
    /// The extension header's name in lower case (empty for known headers).
    let extensionLowercased: String
    /// The spelling used when writing the header.
    public let spelling: String

    /// Names a header; known names (long or compact, any case) become their ``KnownHeader``.
    public init(_ name: String) {
        if let k = KnownHeader.lookup(name) {
            self.init(k)
        } else {
            self.init(extension: name)
        }
    }

    private init(extension name: String) {
        known = nil
        extensionLowercased = name.lowercased()
        spelling = name
    }

    /// Names a known header.
    public init(_ known: KnownHeader) {
        self.known = known
        extensionLowercased = ""
        spelling = known.canonicalName
    }

    public init(stringLiteral value: String) { self.init(value) }

    public var description: String { spelling }

    public static func == (a: SIPHeaderName, b: SIPHeaderName) -> Bool {
        a.known == b.known && a.extensionLowercased == b.extensionLowercased
    }

    public func hash(into h: inout Hasher) {
        h.combine(known)
        h.combine(extensionLowercased)
    }

    public static let via = SIPHeaderName(.via)
    public static let from = SIPHeaderName(.from)
    public static let to = SIPHeaderName(.to)
    public static let callID = SIPHeaderName(.callID)
    public static let cseq = SIPHeaderName(.cseq)
    public static let contact = SIPHeaderName(.contact)
    public static let maxForwards = SIPHeaderName(.maxForwards)
    public static let contentType = SIPHeaderName(.contentType)
    public static let contentLength = SIPHeaderName(.contentLength)
    public static let route = SIPHeaderName(.route)
    public static let recordRoute = SIPHeaderName(.recordRoute)
    public static let expires = SIPHeaderName(.expires)
    public static let allow = SIPHeaderName(.allow)
    public static let supported = SIPHeaderName(.supported)
    public static let require = SIPHeaderName(.require)
    public static let unsupported = SIPHeaderName(.unsupported)
    public static let event = SIPHeaderName(.event)
    public static let subscriptionState = SIPHeaderName(.subscriptionState)
    public static let referTo = SIPHeaderName(.referTo)
    public static let referredBy = SIPHeaderName(.referredBy)
    public static let replaces = SIPHeaderName(.replaces)
    public static let diversion = SIPHeaderName(.diversion)
    public static let wwwAuthenticate = SIPHeaderName(.wwwAuthenticate)
    public static let authorization = SIPHeaderName(.authorization)
    public static let proxyAuthenticate = SIPHeaderName(.proxyAuthenticate)
    public static let proxyAuthorization = SIPHeaderName(.proxyAuthorization)
    public static let reason = SIPHeaderName(.reason)
    public static let retryAfter = SIPHeaderName(.retryAfter)
    public static let sessionExpires = SIPHeaderName(.sessionExpires)
    public static let rseq = SIPHeaderName(.rseq)
    public static let rack = SIPHeaderName(.rack)
    public static let userAgent = SIPHeaderName(.userAgent)
    public static let subject = SIPHeaderName(.subject)
    public static let minExpires = SIPHeaderName(.minExpires)
    public static let server = SIPHeaderName(.server)
    public static let path = SIPHeaderName(.path)
    public static let accept = SIPHeaderName(.accept)
}
