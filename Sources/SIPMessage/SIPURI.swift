/// A `sip:` or `sips:` URI (RFC 3261 §19.1).
///
/// Components are held decoded (`%HH` escapes resolved); ``description`` writes them back with
/// the escaping each component requires, so parse ∘ serialize is a fixed point.
public struct SIPURI: Sendable, Hashable, CustomStringConvertible {
    /// Whether the URI is `sips:`.
    public var secure: Bool
    /// The user part, decoded; `nil` when there is no userinfo.
    public var user: String?
    /// The password, decoded (deprecated by RFC 3261 but parsed).
    public var password: String?
    /// The host.
    public var host: SIPHost
    /// The port, when written.
    public var port: UInt16?
    /// The URI parameters (`;transport=tcp;lr`), decoded, in order.
    public var parameters: SIPParameters
    /// The header components (`?Replaces=…&Subject=…`), decoded, in order.
    public var headers: [SIPParameter]

    /// Creates a URI.
    public init(secure: Bool = false, user: String? = nil, password: String? = nil, host: SIPHost, port: UInt16? = nil,
                parameters: SIPParameters = [], headers: [SIPParameter] = []) {
        self.secure = secure
        self.user = user
        self.password = password
        self.host = host
        self.port = port
        self.parameters = parameters
        self.headers = headers
    }

    /// Parses a SIP or SIPS URI.
    public init(_ text: String) throws(SIPParseError) {
        self = try SIPURI.parse(ArraySlice(text.utf8))
    }

    /// The `transport` parameter, lower-cased.
    public var transport: String? { parameters["transport"]??.lowercased() }
    /// Whether the `lr` parameter (loose routing) is present.
    public var isLooseRouting: Bool { parameters.contains("lr") }
    /// The `maddr` parameter.
    public var maddr: String? { parameters["maddr"] ?? nil }
    /// The `user` parameter (`phone`, `ip`, …).
    public var userParameter: String? { parameters["user"] ?? nil }
    /// The `method` parameter.
    public var methodParameter: String? { parameters["method"] ?? nil }

    /// The value of a header component, e.g. `Replaces`.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    public var description: String {
        // Written as bytes into one buffer (string concatenation per component cost several
        // times more); each component escaped as ``PercentEscaping/encode(_:allowed:)`` does.
        var out: [UInt8] = []
        out.reserveCapacity(64)
        out.append(contentsOf: secure ? "sips:".utf8 : "sip:".utf8)
        if let u = user {
            PercentEscaping.append(u, allowed: PercentEscaping.isUserChar, to: &out)
            if let p = password {
                out.append(UInt8(ascii: ":"))
                PercentEscaping.append(p, allowed: PercentEscaping.isPasswordChar, to: &out)
            }
            out.append(UInt8(ascii: "@"))
        }
        switch host {
        case .domain(let h), .ipv4(let h): out.append(contentsOf: h.utf8)
        case .ipv6(let h): out.append(UInt8(ascii: "[")); out.append(contentsOf: h.utf8); out.append(UInt8(ascii: "]"))
        }
        if let p = port { out.append(UInt8(ascii: ":")); out.append(contentsOf: String(p).utf8) }
        for p in parameters {
            out.append(UInt8(ascii: ";"))
            PercentEscaping.append(p.name, allowed: PercentEscaping.isParamChar, to: &out)
            if let v = p.value {
                out.append(UInt8(ascii: "="))
                PercentEscaping.append(v, allowed: PercentEscaping.isParamChar, to: &out)
            }
        }
        for (k, h) in headers.enumerated() {
            out.append(k == 0 ? UInt8(ascii: "?") : UInt8(ascii: "&"))
            PercentEscaping.append(h.name, allowed: PercentEscaping.isHeaderChar, to: &out)
            out.append(UInt8(ascii: "="))
            PercentEscaping.append(h.value ?? "", allowed: PercentEscaping.isHeaderChar, to: &out)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// URI comparison of RFC 3261 §19.1.4: scheme, user and password case-sensitive (after
    /// unescaping), host case-insensitive, ports equal, parameters present in both equal
    /// (case-insensitively), `user`, `ttl`, `method`, `maddr` and `transport` present in one
    /// only make them differ, headers equal.
    public func isEquivalent(to o: SIPURI) -> Bool {
        guard secure == o.secure, user == o.user, password == o.password, host.isEquivalent(to: o.host), port == o.port else { return false }
        for p in parameters {
            if let ov = o.parameters[p.name] {
                if ov?.lowercased() != p.value?.lowercased() { return false }
            } else if ["user", "ttl", "method", "maddr", "transport"].contains(p.name.lowercased()) {
                return false
            }
        }
        for p in o.parameters where !parameters.contains(p.name) && ["user", "ttl", "method", "maddr", "transport"].contains(p.name.lowercased()) {
            return false
        }
        guard headers.count == o.headers.count else { return false }
        for h in headers where o.header(h.name) != h.value { return false }
        return true
    }

    /// With `keep` false the URI is only checked: the result has the right shape but empty texts
    /// and no parameters or headers (no allocation).
    static func parse(_ b: ArraySlice<UInt8>, keep: Bool = true) throws(SIPParseError) -> SIPURI {
        var i = b.startIndex
        let end = b.endIndex
        let secure: Bool
        if b.count >= 5, equalsLowercased(b[i..<(i + 5)], "sips:") {
            secure = true; i += 5
        } else if b.count >= 4, equalsLowercased(b[i..<(i + 4)], "sip:") {
            secure = false; i += 4
        } else {
            throw SIPParseError(offset: i, rule: .uri, detail: "expected sip: or sips:")
        }
        // userinfo runs to the first '@' (raw '@' is legal nowhere else).
        var user: String? = nil, password: String? = nil
        if let at = b[i...].firstIndex(of: UInt8(ascii: "@")) {
            let info = b[i..<at]
            let colon = info.firstIndex(of: UInt8(ascii: ":"))
            let userBytes = info[..<(colon ?? info.endIndex)]
            guard !userBytes.isEmpty else { throw SIPParseError(offset: i, rule: .uri, detail: "empty user part") }
            user = try PercentEscaping.decode(userBytes, allowed: PercentEscaping.isUserChar, what: "the user part", keep: keep)
            if let c = colon {
                password = try PercentEscaping.decode(info[(c + 1)...], allowed: PercentEscaping.isPasswordChar, what: "the password", keep: keep)
            }
            i = at + 1
        }
        // host [":" port]
        let hostStart = i
        if i < end, b[i] == UInt8(ascii: "[") {
            guard let close = b[i...].firstIndex(of: UInt8(ascii: "]")) else { throw SIPParseError(offset: i, rule: .host, detail: "unterminated IPv6 reference") }
            i = close + 1
        } else {
            while i < end, b[i] != UInt8(ascii: ":"), b[i] != UInt8(ascii: ";"), b[i] != UInt8(ascii: "?") { i += 1 }
        }
        let host = try SIPHost.parse(b[hostStart..<i], keep: keep)
        var port: UInt16? = nil
        if i < end, b[i] == UInt8(ascii: ":") {
            i += 1
            let ps = i
            var v = 0
            while i < end, isDigit(b[i]) {
                v = v * 10 + Int(b[i] - 0x30)
                guard v <= 65535 else { throw SIPParseError(offset: ps, rule: .port, detail: "port larger than 65535") }
                i += 1
            }
            guard i > ps else { throw SIPParseError(offset: ps, rule: .port, detail: "expected a port number") }
            port = UInt16(v)
        }
        var params = SIPParameters()
        while i < end, b[i] == UInt8(ascii: ";") {
            i += 1
            let s = i
            while i < end, b[i] != UInt8(ascii: ";"), b[i] != UInt8(ascii: "?") { i += 1 }
            let raw = b[s..<i]
            let eq = raw.firstIndex(of: UInt8(ascii: "="))
            let nameBytes = raw[..<(eq ?? raw.endIndex)]
            guard !nameBytes.isEmpty else { throw SIPParseError(offset: s, rule: .parameter, detail: "empty URI parameter name") }
            let name = try PercentEscaping.decode(nameBytes, allowed: PercentEscaping.isParamChar, rule: .parameter, what: "a URI parameter", keep: keep)
            var value: String? = nil
            if let e = eq {
                let vb = raw[(e + 1)...]
                guard !vb.isEmpty else {
                    throw SIPParseError(offset: e, rule: .parameter, detail: "empty value for URI parameter \(String(sipBytes: nameBytes))")
                }
                value = try PercentEscaping.decode(vb, allowed: PercentEscaping.isParamChar, rule: .parameter, what: "a URI parameter", keep: keep)
            }
            if keep { params.append(SIPParameter(name: name, value: value)) }
        }
        var headers: [SIPParameter] = []
        if i < end, b[i] == UInt8(ascii: "?") {
            i += 1
            while true {
                let s = i
                while i < end, b[i] != UInt8(ascii: "&") { i += 1 }
                let raw = b[s..<i]
                guard let eq = raw.firstIndex(of: UInt8(ascii: "=")), eq > raw.startIndex else {
                    throw SIPParseError(offset: s, rule: .uri, detail: "a URI header must be name=value")
                }
                let name = try PercentEscaping.decode(raw[..<eq], allowed: PercentEscaping.isHeaderChar, what: "a URI header name", keep: keep)
                let value = try PercentEscaping.decode(raw[(eq + 1)...], allowed: PercentEscaping.isHeaderChar, what: "a URI header value", keep: keep)
                if keep { headers.append(SIPParameter(name: name, value: value)) }
                if i == end { break }
                i += 1
            }
        }
        guard i == end else { throw SIPParseError(offset: i, rule: .uri, detail: "unexpected byte 0x\(String(b[i], radix: 16)) in URI") }
        return SIPURI(secure: secure, user: user, password: password, host: host, port: port, parameters: params, headers: headers)
    }
}

/// A `tel:` URI (RFC 3966): a global (`+…`) or local number and its parameters.
public struct TelURI: Sendable, Hashable, CustomStringConvertible {
    /// The number as written, visual separators (`-`, `.`, `(`, `)`) included.
    public var number: String
    /// The parameters (`;phone-context=…;ext=…`).
    public var parameters: SIPParameters

    public init(number: String, parameters: SIPParameters = []) {
        self.number = number
        self.parameters = parameters
    }

    /// Whether the number is global (starts with `+`).
    public var isGlobal: Bool { number.hasPrefix("+") }
    /// The digits without visual separators.
    public var digits: String { String(number.filter { !"-.()".contains($0) }) }

    public var description: String {
        "tel:" + number + parameters.map { p in ";" + p.name + (p.value.map { "=" + $0 } ?? "") }.joined()
    }

    static func parse(_ b: ArraySlice<UInt8>) throws(SIPParseError) -> TelURI {
        guard b.count > 4, equalsLowercased(b.prefix(4), "tel:") else { throw SIPParseError(offset: b.startIndex, rule: .uri, detail: "expected tel:") }
        var i = b.startIndex + 4
        let s = i
        while i < b.endIndex, b[i] != UInt8(ascii: ";") {
            let c = b[i]
            guard ByteClass.test(c, ByteClass.hex) || "+-.()*#pPwW".utf8.contains(c) else {
                throw SIPParseError(offset: i, rule: .uri, detail: "byte 0x\(String(c, radix: 16)) is not allowed in a telephone number")
            }
            i += 1
        }
        guard i > s else { throw SIPParseError(offset: s, rule: .uri, detail: "empty telephone number") }
        let number = String(sipBytes: b[s..<i])
        var params = SIPParameters()
        while i < b.endIndex {
            i += 1
            let ps = i
            while i < b.endIndex, b[i] != UInt8(ascii: ";") {
                guard ByteClass.test(b[i], ByteClass.telChar) else { throw SIPParseError(offset: i, rule: .parameter, detail: "bad byte in tel: parameter") }
                i += 1
            }
            let raw = b[ps..<i]
            guard !raw.isEmpty else { throw SIPParseError(offset: ps, rule: .parameter, detail: "empty tel: parameter") }
            if let eq = raw.firstIndex(of: UInt8(ascii: "=")) {
                params.append(SIPParameter(name: String(sipBytes: raw[..<eq]), value: String(sipBytes: raw[(eq + 1)...])))
            } else {
                params.append(SIPParameter(name: String(sipBytes: raw)))
            }
        }
        return TelURI(number: number, parameters: params)
    }
}

/// Any URI a SIP header or Request-URI can carry.
public enum URI: Sendable, Hashable, CustomStringConvertible {
    /// `sip:` or `sips:`.
    case sip(SIPURI)
    /// `tel:`.
    case tel(TelURI)
    /// Any other absolute URI (RFC 3986 scheme), kept as written.
    case other(scheme: String, text: String)

    /// Parses a URI: SIP/SIPS and TEL are decoded, other absolute URIs are checked and kept.
    public init(_ text: String) throws(SIPParseError) {
        self = try URI.parse(ArraySlice(text.utf8))
    }

    /// The SIP URI, if this is one.
    public var sipURI: SIPURI? {
        if case .sip(let u) = self { return u }
        return nil
    }

    /// The scheme in lower case.
    public var scheme: String {
        switch self {
        case .sip(let u): return u.secure ? "sips" : "sip"
        case .tel: return "tel"
        case .other(let s, _): return s.lowercased()
        }
    }

    public var description: String {
        switch self {
        case .sip(let u): return u.description
        case .tel(let t): return t.description
        case .other(_, let text): return text
        }
    }

    /// With `keep` false a SIP URI is only checked (see ``SIPURI/parse(_:keep:)``).
    static func parse(_ b: ArraySlice<UInt8>, keep: Bool = true) throws(SIPParseError) -> URI {
        guard let colon = b.firstIndex(of: UInt8(ascii: ":")), colon > b.startIndex else {
            throw SIPParseError(offset: b.startIndex, rule: .uri, detail: "expected scheme:")
        }
        let scheme = b[..<colon]
        guard ByteClass.test(scheme.first!, ByteClass.alpha),
              scheme.allSatisfy({ ByteClass.test($0, ByteClass.alpha | ByteClass.digit) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }) else {
            throw SIPParseError(offset: b.startIndex, rule: .uri, detail: "malformed URI scheme")
        }
        if equalsLowercased(scheme, "sip") || equalsLowercased(scheme, "sips") { return .sip(try SIPURI.parse(b, keep: keep)) }
        if equalsLowercased(scheme, "tel") { return .tel(try TelURI.parse(b)) }
        for k in b.indices {
            let c = b[k]
            if c <= 0x20 || c >= 0x7F || c == UInt8(ascii: "<") || c == UInt8(ascii: ">") || c == UInt8(ascii: "\"") {
                throw SIPParseError(offset: k, rule: .uri, detail: "byte 0x\(String(c, radix: 16)) is not allowed in a URI")
            }
        }
        guard colon + 1 < b.endIndex else { throw SIPParseError(offset: colon, rule: .uri, detail: "empty URI after the scheme") }
        return .other(scheme: String(sipBytes: scheme), text: String(sipBytes: b))
    }
}
