/// A media type with parameters (Content-Type, Accept elements, multipart parts).
public struct MediaType: Sendable, Hashable, CustomStringConvertible {
    /// The type, lower-cased (`application`).
    public var type: String
    /// The subtype, lower-cased (`sdp`).
    public var subtype: String
    /// Parameters (`boundary`, `charset`, …).
    public var parameters: SIPParameters

    public init(type: String, subtype: String, parameters: SIPParameters = []) {
        self.type = type.lowercased()
        self.subtype = subtype.lowercased()
        self.parameters = parameters
    }

    /// Parses `type/subtype;params`.
    public init(_ text: String) throws(SIPParseError) { self = try MediaType.parse(ArraySlice(text.utf8)) }

    public static let sdp = MediaType(type: "application", subtype: "sdp")

    /// `type/subtype` without parameters.
    public var essence: String { "\(type)/\(subtype)" }

    public var description: String { essence + parameters.text }

    static func parse(_ b: ArraySlice<UInt8>) throws(SIPParseError) -> MediaType {
        // The type nearly every body has, without building its strings again.
        if equalsLowercased(b, "application/sdp") { return .sdp }
        return try scan(b, keep: true)
    }

    /// Checks a media type as ``parse(_:)`` does, with the same errors, keeping nothing (no
    /// allocation: validation runs on every message that has a Content-Type).
    static func check(_ b: ArraySlice<UInt8>) throws(SIPParseError) {
        _ = try scan(b, keep: false)
    }

    private static func scan(_ b: ArraySlice<UInt8>, keep: Bool) throws(SIPParseError) -> MediaType {
        var c = Cursor(b)
        c.skipWS()
        let t = try c.requireToken(.headerStructure, "a media type", keep: keep)
        try c.expect(UInt8(ascii: "/"), .headerStructure, "'/' in the media type")
        let s = try c.requireToken(.headerStructure, "a media subtype", keep: keep)
        let p = try c.parameters(.headerStructure, keep: keep)
        try c.requireEnd(.headerStructure, "after the media type")
        return MediaType(type: t, subtype: s, parameters: p)
    }
}

/// A token with parameters: Event, Subscription-State, Content-Disposition, Session-Expires,
/// Retry-After's and Reason's shapes share it.
public struct ParameterizedToken: Sendable, Hashable, CustomStringConvertible {
    /// The leading token (an event package, a state, a disposition, a number…).
    public var value: String
    /// Its parameters.
    public var parameters: SIPParameters

    public init(value: String, parameters: SIPParameters = []) {
        self.value = value
        self.parameters = parameters
    }

    public var description: String { value + parameters.text }

    static func parse(_ b: ArraySlice<UInt8>, rule: SIPParseError.Rule, what: String) throws(SIPParseError) -> ParameterizedToken {
        var c = Cursor(b)
        c.skipWS()
        let v = try c.requireToken(rule, what)
        let p = try c.parameters(rule)
        try c.requireEnd(rule, "after \(what)")
        return ParameterizedToken(value: v, parameters: p)
    }
}

/// An Event header value (RFC 6665): a package, optional template, `id` parameter.
public struct EventHeader: Sendable, Hashable, CustomStringConvertible {
    /// The event package (`refer`, `presence`, `dialog`, `message-summary`).
    public var package: String
    /// The parameters (`id`, …).
    public var parameters: SIPParameters

    public init(package: String, parameters: SIPParameters = []) {
        self.package = package
        self.parameters = parameters
    }

    /// The `id` parameter.
    public var id: String? { parameters["id"] ?? nil }
    public var description: String { package + parameters.text }
}

/// A Subscription-State header value (RFC 6665 §8.2.3).
public struct SubscriptionState: Sendable, Hashable, CustomStringConvertible {
    /// `active`, `pending`, `terminated` or an extension.
    public var state: String
    public var parameters: SIPParameters

    public init(state: String, parameters: SIPParameters = []) {
        self.state = state
        self.parameters = parameters
    }

    /// The `expires` parameter.
    public var expires: UInt32? { (parameters["expires"] ?? nil).flatMap { UInt32($0) } }
    /// The `reason` parameter (`deactivated`, `noresource`, `timeout`, …).
    public var reason: String? { parameters["reason"] ?? nil }
    /// The `retry-after` parameter.
    public var retryAfter: UInt32? { (parameters["retry-after"] ?? nil).flatMap { UInt32($0) } }
    public var description: String { state + parameters.text }
}

/// A Replaces header value (RFC 3891), also found embedded in a Refer-To URI.
public struct Replaces: Sendable, Hashable, CustomStringConvertible {
    public var callID: String
    public var toTag: String
    public var fromTag: String
    /// The `early-only` flag.
    public var earlyOnly: Bool
    /// Other parameters.
    public var parameters: SIPParameters

    public init(callID: String, toTag: String, fromTag: String, earlyOnly: Bool = false, parameters: SIPParameters = []) {
        self.callID = callID
        self.toTag = toTag
        self.fromTag = fromTag
        self.earlyOnly = earlyOnly
        self.parameters = parameters
    }

    /// Parses `callid;to-tag=…;from-tag=…[;early-only]`.
    public init(_ text: String) throws(SIPParseError) { self = try Replaces.parse(ArraySlice(text.utf8)) }

    public var description: String {
        var p = SIPParameters([SIPParameter(name: "to-tag", value: toTag), SIPParameter(name: "from-tag", value: fromTag)])
        if earlyOnly { p.append(SIPParameter(name: "early-only")) }
        for x in parameters { p.append(x) }
        return callID + p.text
    }

    static func parse(_ b: ArraySlice<UInt8>) throws(SIPParseError) -> Replaces {
        var c = Cursor(b)
        c.skipWS()
        let id = c.take { ByteClass.test($0, ByteClass.word) || $0 == UInt8(ascii: "@") }
        guard !id.isEmpty else { throw c.error(.headerStructure, "expected a Call-ID in Replaces") }
        var params = try c.parameters(.headerStructure)
        try c.requireEnd(.headerStructure, "in Replaces")
        guard let to = params["to-tag"] ?? nil, let from = params["from-tag"] ?? nil else {
            throw SIPParseError(offset: b.startIndex, rule: .headerStructure, detail: "Replaces needs to-tag and from-tag")
        }
        let early = params.contains("early-only")
        params.remove("to-tag"); params.remove("from-tag"); params.remove("early-only")
        return Replaces(callID: String(sipBytes: id), toTag: to, fromTag: from, earlyOnly: early, parameters: params)
    }
}

/// A Reason header value (RFC 3326): `SIP;cause=200;text="Call completed elsewhere"`.
public struct ReasonHeader: Sendable, Hashable, CustomStringConvertible {
    /// `SIP`, `Q.850` or another protocol.
    public var protocolName: String
    public var parameters: SIPParameters

    public init(protocolName: String, cause: Int? = nil, text: String? = nil) {
        self.protocolName = protocolName
        parameters = []
        if let c = cause { parameters.set("cause", String(c)) }
        if let t = text { parameters.set("text", t, quoted: true) }
    }

    /// The `cause` parameter.
    public var cause: Int? { (parameters["cause"] ?? nil).flatMap { Int($0) } }
    /// The `text` parameter.
    public var text: String? { parameters["text"] ?? nil }
    public var description: String { protocolName + parameters.text }
}

/// A Retry-After header value: seconds, an optional comment and a `duration` parameter.
public struct RetryAfter: Sendable, Hashable {
    public var seconds: UInt32
    public var comment: String?
    public var parameters: SIPParameters
    /// The `duration` parameter.
    public var duration: UInt32? { (parameters["duration"] ?? nil).flatMap { UInt32($0) } }
}

/// A Session-Expires header value (RFC 4028): an interval and a `refresher`.
public struct SessionExpires: Sendable, Hashable, CustomStringConvertible {
    public var seconds: UInt32
    /// `uac` or `uas`.
    public var refresher: String?
    public var parameters: SIPParameters

    public init(seconds: UInt32, refresher: String? = nil) {
        self.seconds = seconds
        self.refresher = refresher
        parameters = []
        if let r = refresher { parameters.set("refresher", r) }
    }

    public var description: String { "\(seconds)" + parameters.text }
}

/// An RAck header value (RFC 3262): the RSeq being acknowledged and the CSeq of the request.
public struct RAck: Sendable, Hashable, CustomStringConvertible {
    public var rseq: UInt32
    public var cseq: UInt32
    public var method: SIPMethod
    public init(rseq: UInt32, cseq: UInt32, method: SIPMethod) {
        self.rseq = rseq
        self.cseq = cseq
        self.method = method
    }
    public var description: String { "\(rseq) \(cseq) \(method.token)" }
}

/// A challenge (WWW-Authenticate, Proxy-Authenticate) or credentials (Authorization,
/// Proxy-Authorization): a scheme and comma-separated `name=value` parameters.
public struct AuthenticationHeader: Sendable, Hashable, CustomStringConvertible {
    /// The scheme (`Digest`, or another for unknown schemes, which are kept).
    public var scheme: String
    /// The parameters in order; values unquoted.
    public var parameters: [SIPParameter]

    public init(scheme: String, parameters: [SIPParameter]) {
        self.scheme = scheme
        self.parameters = parameters
    }

    /// Parses `scheme name=value, name="value", …`.
    public init(_ text: String) throws(SIPParseError) { self = try AuthenticationHeader.parse(ArraySlice(text.utf8)) }

    /// A parameter's value by case-insensitive name.
    public subscript(_ name: String) -> String? {
        let l = name.lowercased()
        return parameters.first { $0.name.lowercased() == l }?.value
    }

    public var realm: String? { self["realm"] }
    public var nonce: String? { self["nonce"] }
    public var opaque: String? { self["opaque"] }
    /// The algorithm, `MD5` when absent (RFC 7616 §3.3).
    public var algorithm: String { self["algorithm"] ?? "MD5" }
    /// The qop options of a challenge (`auth`, `auth-int`), split at commas.
    public var qopOptions: [String] {
        (self["qop"] ?? "").split(separator: ",").map { $0.trimmingSpaces() }.filter { !$0.isEmpty }
    }
    /// The `stale` flag of a challenge.
    public var stale: Bool { self["stale"]?.lowercased() == "true" }
    public var username: String? { self["username"] }
    public var response: String? { self["response"] }
    public var uri: String? { self["uri"] }
    public var cnonce: String? { self["cnonce"] }
    public var nonceCount: String? { self["nc"] }

    /// Canonical form. Parameters that RFC 7616 writes unquoted (`algorithm`, `qop` in
    /// credentials, `nc`, `stale`) keep the quoting they were parsed or created with.
    public var description: String {
        scheme + " " + parameters.map { $0.text }.joined(separator: ", ")
    }

    static func parse(_ b: ArraySlice<UInt8>) throws(SIPParseError) -> AuthenticationHeader {
        var c = Cursor(b)
        c.skipWS()
        let scheme = try c.requireToken(.authentication, "an authentication scheme")
        var params: [SIPParameter] = []
        c.skipWS()
        while !c.atEnd {
            let n = c.token()
            guard !n.isEmpty else { throw c.error(.authentication, "expected a parameter name") }
            try c.expect(UInt8(ascii: "="), .authentication, "'=' after \(String(sipBytes: n))")
            if c.peek == UInt8(ascii: "\"") {
                params.append(SIPParameter(name: String(sipBytes: n), value: try c.quotedString(.authentication), quoted: true))
            } else {
                let v = c.token()
                guard !v.isEmpty else { throw c.error(.authentication, "expected a value for \(String(sipBytes: n))") }
                params.append(SIPParameter(name: String(sipBytes: n), value: String(sipBytes: v)))
            }
            c.skipWS()
            if c.atEnd { break }
            guard c.consume(UInt8(ascii: ",")) else { throw c.error(.authentication, "expected ',' between parameters") }
            c.skipWS()
        }
        return AuthenticationHeader(scheme: scheme, parameters: params)
    }
}

/// A Warning header value (RFC 3261 §20.43): code, agent, quoted text.
public struct WarningValue: Sendable, Hashable {
    public var code: Int
    public var agent: String
    public var text: String
}

extension Substring {
    func trimmingSpaces() -> String {
        var s = self[...]
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
