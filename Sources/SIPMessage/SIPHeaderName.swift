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

    /// Finds the known header named by `bytes` (long or compact form, any case).
    @inlinable
    public static func lookup(_ bytes: UnsafeRawBufferPointer) -> KnownHeader? {
        lookupBytes(bytes)
    }

    /// Generated from ``canonicalName``: a switch on (length, first letter), then a
    /// case-insensitive compare of the rest; no tables, so no lazy-global checks.
    @usableFromInline
    static func lookupBytes(_ b: UnsafeRawBufferPointer) -> KnownHeader? {
        let n = b.count
        if n == 1 { return compact(b[0]) }
        guard n >= 2 else { return nil }
        @inline(__always) func rest(_ s: StaticString) -> Bool {
            let p = s.utf8Start
            for i in 1..<n where lowerASCII(b[i]) != p[i] { return false }
            return true
        }
        switch (n, lowerASCII(b[0])) {
        case (2, UInt8(ascii: "t")): if rest("to") { return .to }
        case (3, UInt8(ascii: "v")): if rest("via") { return .via }
        case (4, UInt8(ascii: "c")): if rest("cseq") { return .cseq }
        case (4, UInt8(ascii: "d")): if rest("date") { return .date }
        case (4, UInt8(ascii: "f")): if rest("from") { return .from }
        case (4, UInt8(ascii: "p")): if rest("path") { return .path }
        case (4, UInt8(ascii: "r")): if rest("rack") { return .rack }; if rest("rseq") { return .rseq }
        case (5, UInt8(ascii: "a")): if rest("allow") { return .allow }
        case (5, UInt8(ascii: "e")): if rest("event") { return .event }
        case (5, UInt8(ascii: "r")): if rest("route") { return .route }
        case (6, UInt8(ascii: "a")): if rest("accept") { return .accept }
        case (6, UInt8(ascii: "m")): if rest("min-se") { return .minSE }
        case (6, UInt8(ascii: "r")): if rest("reason") { return .reason }
        case (6, UInt8(ascii: "s")): if rest("server") { return .server }
        case (7, UInt8(ascii: "c")): if rest("call-id") { return .callID }; if rest("contact") { return .contact }
        case (7, UInt8(ascii: "e")): if rest("expires") { return .expires }
        case (7, UInt8(ascii: "p")): if rest("privacy") { return .privacy }
        case (7, UInt8(ascii: "r")): if rest("require") { return .require }
        case (7, UInt8(ascii: "s")): if rest("subject") { return .subject }
        case (7, UInt8(ascii: "w")): if rest("warning") { return .warning }
        case (8, UInt8(ascii: "i")): if rest("identity") { return .identity }
        case (8, UInt8(ascii: "p")): if rest("priority") { return .priority }
        case (8, UInt8(ascii: "r")): if rest("refer-to") { return .referTo }; if rest("replaces") { return .replaces }; if rest("reply-to") { return .replyTo }
        case (8, UInt8(ascii: "s")): if rest("sip-etag") { return .sipETag }
        case (9, UInt8(ascii: "c")): if rest("call-info") { return .callInfo }
        case (9, UInt8(ascii: "d")): if rest("diversion") { return .diversion }
        case (9, UInt8(ascii: "s")): if rest("supported") { return .supported }
        case (9, UInt8(ascii: "t")): if rest("timestamp") { return .timestamp }
        case (10, UInt8(ascii: "a")): if rest("alert-info") { return .alertInfo }
        case (10, UInt8(ascii: "e")): if rest("error-info") { return .errorInfo }
        case (10, UInt8(ascii: "u")): if rest("user-agent") { return .userAgent }
        case (11, UInt8(ascii: "i")): if rest("in-reply-to") { return .inReplyTo }
        case (11, UInt8(ascii: "m")): if rest("min-expires") { return .minExpires }
        case (11, UInt8(ascii: "r")): if rest("referred-by") { return .referredBy }; if rest("retry-after") { return .retryAfter }
        case (11, UInt8(ascii: "u")): if rest("unsupported") { return .unsupported }
        case (12, UInt8(ascii: "a")): if rest("allow-events") { return .allowEvents }
        case (12, UInt8(ascii: "c")): if rest("content-type") { return .contentType }
        case (12, UInt8(ascii: "h")): if rest("history-info") { return .historyInfo }
        case (12, UInt8(ascii: "m")): if rest("max-forwards") { return .maxForwards }; if rest("mime-version") { return .mimeVersion }
        case (12, UInt8(ascii: "o")): if rest("organization") { return .organization }
        case (12, UInt8(ascii: "r")): if rest("record-route") { return .recordRoute }
        case (12, UInt8(ascii: "s")): if rest("sip-if-match") { return .sipIfMatch }
        case (13, UInt8(ascii: "a")): if rest("authorization") { return .authorization }
        case (13, UInt8(ascii: "p")): if rest("proxy-require") { return .proxyRequire }
        case (13, UInt8(ascii: "s")): if rest("service-route") { return .serviceRoute }
        case (14, UInt8(ascii: "a")): if rest("accept-contact") { return .acceptContact }
        case (14, UInt8(ascii: "c")): if rest("content-length") { return .contentLength }
        case (14, UInt8(ascii: "r")): if rest("reject-contact") { return .rejectContact }
        case (15, UInt8(ascii: "a")): if rest("accept-encoding") { return .acceptEncoding }; if rest("accept-language") { return .acceptLanguage }
        case (15, UInt8(ascii: "s")): if rest("session-expires") { return .sessionExpires }
        case (16, UInt8(ascii: "c")): if rest("content-encoding") { return .contentEncoding }; if rest("content-language") { return .contentLanguage }
        case (16, UInt8(ascii: "w")): if rest("www-authenticate") { return .wwwAuthenticate }
        case (18, UInt8(ascii: "p")): if rest("proxy-authenticate") { return .proxyAuthenticate }
        case (18, UInt8(ascii: "s")): if rest("subscription-state") { return .subscriptionState }
        case (19, UInt8(ascii: "a")): if rest("authentication-info") { return .authenticationInfo }
        case (19, UInt8(ascii: "c")): if rest("content-disposition") { return .contentDisposition }
        case (19, UInt8(ascii: "p")): if rest("p-asserted-identity") { return .pAssertedIdentity }; if rest("proxy-authorization") { return .proxyAuthorization }
        case (19, UInt8(ascii: "r")): if rest("request-disposition") { return .requestDisposition }
        case (20, UInt8(ascii: "p")): if rest("p-preferred-identity") { return .pPreferredIdentity }
        default: break
        }
        return nil
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
    public static let warning = SIPHeaderName(.warning)
    public static let timestamp = SIPHeaderName(.timestamp)
    public static let minSE = SIPHeaderName(.minSE)
    public static let allowEvents = SIPHeaderName(.allowEvents)
    public static let contentDisposition = SIPHeaderName(.contentDisposition)
}

/// The canonical names of the known headers in one buffer, with each name's place in it (a
/// class: one retain per message rather than one per array). The writers (``SIPMessage/serialized()``,
/// the response builder, forwarding) copy a known name with one `memcpy` from here instead of
/// making a `String` per header line.
final class CanonicalNames: Sendable {
    let bytes: [UInt8]
    /// By raw value: offset << 8 | length (0 for raw values no header has: an unknown header,
    /// written as spelled).
    let spans: [UInt32]

    func length(_ known: UInt8) -> Int { Int(spans[Int(known)] & 0xFF) }

    /// The name's range in ``bytes`` (empty when `known` names no known header).
    @inline(__always) func range(_ known: UInt8) -> Range<Int> {
        let span = Int(spans[Int(known)])
        return (span >> 8)..<((span >> 8) + (span & 0xFF))
    }

    private init() {
        var bytes: [UInt8] = []
        var spans = [UInt32](repeating: 0, count: 256)
        for k in KnownHeader.allCases {
            let name = Array(k.canonicalName.utf8)
            spans[Int(k.rawValue)] = UInt32(bytes.count) << 8 | UInt32(name.count)
            bytes += name
        }
        self.bytes = bytes
        self.spans = spans
    }

    static let table = CanonicalNames()
}
