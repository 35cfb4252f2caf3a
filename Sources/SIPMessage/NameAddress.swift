/// A `name-addr` or `addr-spec` with header parameters, as in From, To, Contact, Route,
/// Record-Route, Refer-To, Referred-By, Diversion, Reply-To and P-Asserted-Identity.
///
/// When the URI is not inside angle brackets, any `;param` after it belongs to the header,
/// not to the URI (RFC 3261 §20.10).
public struct NameAddress: Sendable, Hashable, CustomStringConvertible {
    /// The display name, unquoted; `nil` when absent.
    public var displayName: String?
    /// The address.
    public var uri: URI
    /// The header parameters (`tag`, `q`, `expires`, …), in order.
    public var parameters: SIPParameters

    /// Creates a name-addr.
    public init(displayName: String? = nil, uri: URI, parameters: SIPParameters = []) {
        self.displayName = displayName
        self.uri = uri
        self.parameters = parameters
    }

    /// Creates a name-addr for a SIP URI.
    public init(displayName: String? = nil, uri: SIPURI, parameters: SIPParameters = []) {
        self.init(displayName: displayName, uri: .sip(uri), parameters: parameters)
    }

    /// Parses `name-addr / addr-spec` followed by parameters.
    public init(_ text: String) throws(SIPParseError) {
        self = try NameAddress.parse(ArraySlice(text.utf8))
    }

    /// The `tag` parameter (From/To).
    public var tag: String? {
        get { parameters["tag"] ?? nil }
        set { if let t = newValue { parameters.set("tag", t) } else { parameters.remove("tag") } }
    }

    /// The `q` parameter of a Contact, from 0 to 1.
    public var q: Double? { (parameters["q"] ?? nil).flatMap(Double.init) }

    /// The `expires` parameter of a Contact, in seconds.
    public var expires: UInt32? { (parameters["expires"] ?? nil).flatMap { UInt32($0) } }

    /// The SIP URI, if the address is one.
    public var sipURI: SIPURI? { uri.sipURI }

    /// Canonical form: `"Display" <uri>;params` (angle brackets always).
    public var description: String {
        var s = ""
        if let d = displayName { s += quoteString(d) + " " }
        s += "<" + uri.description + ">" + parameters.text
        return s
    }

    /// With `keep` false the address is only checked: no display name, an unkept URI, no
    /// parameters (no allocation).
    static func parse(_ b: ArraySlice<UInt8>, keep: Bool = true) throws(SIPParseError) -> NameAddress {
        var c = Cursor(b)
        c.skipWS()
        guard !c.atEnd else { throw c.error(.nameAddress, "empty address") }
        var display: String? = nil
        var uriBytes: ArraySlice<UInt8>
        if c.peek == UInt8(ascii: "\"") {
            // A quoted display name must be followed by <addr-spec>.
            display = try c.quotedString(.quotedString, keep: keep)
            c.skipWS()
            guard c.peek == UInt8(ascii: "<") else { throw c.error(.nameAddress, "expected '<' after the display name") }
        }
        // Look for '<' outside quotes: then this is a name-addr.
        var laquot: Int? = nil
        do {
            var k = c.i, inQ = false
            while k < c.end {
                let x = b[k]
                if inQ {
                    if x == UInt8(ascii: "\\") { k += 1 } else if x == UInt8(ascii: "\"") { inQ = false }
                } else if x == UInt8(ascii: "\"") {
                    inQ = true
                } else if x == UInt8(ascii: "<") {
                    laquot = k; break
                } else if x == UInt8(ascii: ";") && c.peek != UInt8(ascii: "\"") && !b[c.i..<k].contains(where: isWS) {
                    break  // addr-spec followed by parameters
                }
                k += 1
            }
        }
        if let lq = laquot {
            if display != nil {
                guard c.i == lq else { throw c.error(.nameAddress, "unexpected text between the display name and '<'") }
            } else if lq > c.i {
                // display-name = *(token LWS): tokens separated by white space.
                var words: [String] = []
                while c.i < lq {
                    let t = c.token()
                    guard !t.isEmpty else { throw c.error(.nameAddress, "display name must be tokens or a quoted string") }
                    if keep { words.append(String(sipBytes: t)) }
                    c.skipWS()
                }
                display = keep ? words.joined(separator: " ") : ""
            }
            c.i = lq + 1
            guard let rq = b[c.i...].firstIndex(of: UInt8(ascii: ">")) else {
                throw SIPParseError(offset: lq, rule: .nameAddress, detail: "'<' without '>'")
            }
            uriBytes = b[c.i..<rq]
            if let ws = uriBytes.firstIndex(where: { $0 <= 0x20 }) {
                throw SIPParseError(offset: ws, rule: .nameAddress, detail: "white space inside <addr-spec>")
            }
            c.i = rq + 1
        } else {
            let s = c.i
            while c.i < c.end, b[c.i] != UInt8(ascii: ";"), !isWS(b[c.i]) { c.i += 1 }
            uriBytes = b[s..<c.i]
            if let bad = uriBytes.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: ">") }) {
                throw SIPParseError(offset: bad, rule: .nameAddress, detail: "a URI holding ',', '?' or ';' must be enclosed in <>")
            }
        }
        guard !uriBytes.isEmpty else { throw SIPParseError(offset: uriBytes.startIndex, rule: .nameAddress, detail: "empty URI") }
        let uri = try URI.parse(uriBytes, keep: keep)
        let params = try c.parameters(.nameAddress, keep: keep)
        try c.requireEnd(.nameAddress, "after the address")
        return NameAddress(displayName: display, uri: uri, parameters: params)
    }
}

/// A Contact header value: the `*` wildcard (REGISTER removal) or addresses.
public enum ContactValue: Sendable, Hashable {
    /// `Contact: *`.
    case wildcard
    /// One or more addresses.
    case addresses([NameAddress])

    /// The addresses, empty for the wildcard.
    public var addresses: [NameAddress] {
        if case .addresses(let a) = self { return a }
        return []
    }
}
