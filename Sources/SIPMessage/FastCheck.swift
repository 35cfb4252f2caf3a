/// Validation's quick accept: byte scanners over the shapes that real traffic writes
/// (`"Alice" <sip:alice@host:5060;transport=udp>;tag=1`, `SIP/2.0/UDP host:port;branch=…`),
/// without building values, closures or copies. Each scanner answers `true` only for input
/// that the full decoder (``NameAddress/parse(_:keep:)``, ``Via/parse(_:keep:)``,
/// ``URI/parse(_:keep:)``) accepts too — its grammar is a subset of theirs —, and `false`
/// for anything else, which then goes through the full decoder: every error is still the
/// full decoder's, with its rule, offset and detail.
enum FastCheck {
    typealias Bytes = UnsafeBufferPointer<UInt8>

    @inline(__always) static func skipSpaces(_ p: Bytes, _ i: inout Int, _ end: Int) {
        while i < end, isWS(p[i]) { i &+= 1 }
    }

    /// Runs `check` over the slice's bytes.
    @inline(__always) static func on(_ b: ArraySlice<UInt8>, _ check: (Bytes, Int, Int) -> Bool) -> Bool {
        b.withUnsafeBufferPointer { p in check(p, 0, p.count) }
    }

    // MARK: Hosts

    /// A host name or IPv4 address as ``SIPHost/parse(_:allowBareIPv6:keep:)`` accepts it
    /// (IPv6 references are left to it), filling `p[lo..<hi]` exactly.
    static func host(_ p: Bytes, _ lo: Int, _ hi: Int) -> Bool {
        scanHost(p, lo, hi) == hi
    }

    /// Scans a host from `lo` to the first byte that no host holds (or `hi`), in one pass that
    /// reads it both as an IPv4 address and as a name (digits and dots only make it an
    /// address, which must then be a valid one); the end when what it scanned is a host
    /// ``SIPHost/parse(_:allowBareIPv6:keep:)`` accepts, nil otherwise.
    @inline(__always)
    static func scanHost(_ p: Bytes, _ lo: Int, _ hi: Int) -> Int? {
        var k = lo
        var numeric = true, addressOK = true, parts = 0, value = 0, digits = 0
        var labelStart = lo, labelsOK = true
        while k < hi {
            let c = p[k]
            if c == UInt8(ascii: ".") {
                if k == labelStart || p[labelStart] == UInt8(ascii: "-") || p[k &- 1] == UInt8(ascii: "-") { labelsOK = false }
                labelStart = k &+ 1
                if digits == 0 { addressOK = false }
                parts &+= 1
                value = 0
                digits = 0
            } else if isDigit(c) {
                value = value &* 10 &+ Int(c &- 0x30)
                digits &+= 1
                if digits > 3 || value > 255 { addressOK = false }
            } else if (c | 0x20) &- 0x61 < 26 || c == UInt8(ascii: "-") || c == UInt8(ascii: "_") {
                numeric = false
            } else {
                break
            }
            k &+= 1
        }
        guard k > lo else { return nil }
        if numeric { return addressOK && parts == 3 && digits > 0 ? k : nil }
        // The last label: empty only after a final dot ("example.com.").
        if k > labelStart, p[labelStart] == UInt8(ascii: "-") || p[k &- 1] == UInt8(ascii: "-") { return nil }
        return labelsOK ? k : nil
    }

    /// A decimal run of at least one digit, at most `max`, from `i` (moved past it).
    @inline(__always) static func number(_ p: Bytes, _ i: inout Int, _ end: Int, max: Int) -> Bool {
        let s = i
        var v = 0
        while i < end, isDigit(p[i]) {
            v = v &* 10 &+ Int(p[i] &- 0x30)
            if v > max { return false }
            i &+= 1
        }
        return i > s
    }

    // MARK: URIs

    /// A `sip:`/`sips:` URI without escapes, password, IPv6 reference or headers.
    static func sipURI(_ p: Bytes, _ lo: Int, _ hi: Int) -> Bool {
        var i = lo
        guard hi - lo >= 5, lowerASCII(p[i]) == UInt8(ascii: "s"), lowerASCII(p[i + 1]) == UInt8(ascii: "i"),
              lowerASCII(p[i + 2]) == UInt8(ascii: "p") else { return false }
        if p[i + 3] == UInt8(ascii: ":") {
            i += 4
        } else if lowerASCII(p[i + 3]) == UInt8(ascii: "s"), p[i + 4] == UInt8(ascii: ":") {
            i += 5
        } else {
            return false
        }
        // userinfo up to the first '@' (user characters only: no ':' password, no '%').
        if let at = memchrIndex(p, UInt8(ascii: "@"), i, hi) {
            guard at > i else { return false }
            for k in i..<at where !ASCIIClass.test(p[k], ASCIIClass.user) { return false }
            i = at &+ 1
        }
        // The host ends at the port, the parameters, the headers or the end (an IPv6
        // reference, '[', is left to the full decoder).
        guard let he = scanHost(p, i, hi), he == hi || p[he] == UInt8(ascii: ":") || p[he] == UInt8(ascii: ";") || p[he] == UInt8(ascii: "?") else { return false }
        i = he
        if i < hi, p[i] == UInt8(ascii: ":") {
            i &+= 1
            guard number(p, &i, hi, max: 65535) else { return false }
        }
        while i < hi, p[i] == UInt8(ascii: ";") {
            i &+= 1
            let s = i
            var eq = -1
            while i < hi, p[i] != UInt8(ascii: ";") {
                let c = p[i]
                if c == UInt8(ascii: "="), eq < 0 {
                    guard i > s else { return false }
                    eq = i
                } else if !ASCIIClass.test(c, ASCIIClass.param) {
                    return false  // '?', '%', a second '=', …: the full decoder says what it is
                }
                i &+= 1
            }
            guard i > s, eq != i &- 1 else { return false }
        }
        return i == hi
    }

    // MARK: Header values

    /// `word [ "@" word ]` (Call-ID).
    static func callID(_ p: Bytes, _ lo: Int, _ hi: Int) -> Bool {
        var at = -1
        for k in lo..<hi where !ASCIIClass.test(p[k], ASCIIClass.word) {
            guard p[k] == UInt8(ascii: "@"), at < 0 else { return false }
            at = k
        }
        return hi > lo && at != lo && at != hi &- 1
    }

    /// `*( SEMI token [ EQUAL ( token-ish / simple quoted-string ) ] )` to the end, as
    /// ``Cursor/parameters(_:keep:check:)`` followed by ``Cursor/requireEnd(_:_:)`` accept
    /// them; each parameter's name and value range go to `each`, which may refuse it.
    @inline(__always)
    static func parameters(_ p: Bytes, _ i: Int, _ end: Int, _ each: (_ name: Range<Int>, _ value: Range<Int>?) -> Bool) -> Bool {
        var i = i
        while true {
            skipSpaces(p, &i, end)
            if i == end { return true }
            guard p[i] == UInt8(ascii: ";") else { return false }
            i &+= 1
            skipSpaces(p, &i, end)
            let ns = i
            while i < end, isTokenByte(p[i]) { i &+= 1 }
            guard i > ns else { return false }
            let name = ns..<i
            skipSpaces(p, &i, end)
            var value: Range<Int>? = nil
            if i < end, p[i] == UInt8(ascii: "=") {
                i &+= 1
                skipSpaces(p, &i, end)
                guard i < end else { return false }
                if p[i] == UInt8(ascii: "\"") {
                    // A quoted string without escapes or control bytes.
                    i &+= 1
                    let vs = i
                    while i < end, p[i] != UInt8(ascii: "\"") {
                        let c = p[i]
                        guard c >= 0x20, c < 0x7F, c != UInt8(ascii: "\\") else { return false }
                        i &+= 1
                    }
                    guard i < end else { return false }
                    value = vs..<i
                    i &+= 1
                } else {
                    let vs = i
                    while i < end {
                        let c = p[i]
                        guard isTokenByte(c) || c == UInt8(ascii: ":") || c == UInt8(ascii: "]") else { break }
                        i &+= 1
                    }
                    // '[' (an IPv6 reference) is left to the full decoder.
                    guard i > vs, i == end || p[i] != UInt8(ascii: "[") else { return false }
                    value = vs..<i
                }
            }
            guard each(name, value) else { return false }
        }
    }

    /// A From, To, Contact, Route or Record-Route value: `[display] <sip-uri> *(;param)` or a
    /// bare SIP URI with parameters.
    static func nameAddress(_ p: Bytes, _ lo: Int, _ hi: Int) -> Bool {
        nameAddress(p, lo, hi) { _, _ in true }
    }

    /// A Contact address (no `q` or `expires` parameter, which the full check reads).
    static func contact(_ p: Bytes, _ lo: Int, _ hi: Int) -> Bool {
        nameAddress(p, lo, hi) { name, _ in
            !(name.count == 1 && lowerASCII(p[name.lowerBound]) == UInt8(ascii: "q")) && !(name.count == 7 && nameIs(p, name, "expires"))
        }
    }

    @inline(__always)
    static func nameAddress(_ p: Bytes, _ lo: Int, _ hi: Int, _ each: (_ name: Range<Int>, _ value: Range<Int>?) -> Bool) -> Bool {
        var i = lo
        skipSpaces(p, &i, hi)
        guard i < hi else { return false }
        let uriStart: Int, uriEnd: Int
        if p[i] == UInt8(ascii: "\"") {
            i &+= 1
            while i < hi, p[i] != UInt8(ascii: "\"") {
                let c = p[i]
                guard c >= 0x20, c < 0x7F, c != UInt8(ascii: "\\") else { return false }
                i &+= 1
            }
            guard i < hi else { return false }
            i &+= 1
            skipSpaces(p, &i, hi)
            guard i < hi, p[i] == UInt8(ascii: "<") else { return false }
        }
        if let lq = memchrIndex(p, UInt8(ascii: "<"), i, hi) {
            // An unquoted display name: tokens and white space only.
            for k in i..<lq where !(isTokenByte(p[k]) || isWS(p[k])) { return false }
            guard let rq = memchrIndex(p, UInt8(ascii: ">"), lq &+ 1, hi) else { return false }
            uriStart = lq &+ 1
            uriEnd = rq
            i = rq &+ 1
        } else {
            uriStart = i
            while i < hi, p[i] != UInt8(ascii: ";"), !isWS(p[i]) {
                let c = p[i]
                if c == UInt8(ascii: "?") || c == UInt8(ascii: ",") || c == UInt8(ascii: "\"") || c == UInt8(ascii: ">") { return false }
                i &+= 1
            }
            uriEnd = i
        }
        guard uriEnd > uriStart, sipURI(p, uriStart, uriEnd) else { return false }
        return parameters(p, i, hi, each)
    }

    /// One Via value: `SIP/2.0/transport host[:port]` and parameters, `branch` with a value,
    /// `rport` empty or a port, `received` a host name or IPv4 address (`ttl` is left to the
    /// full decoder).
    static func via(_ p: Bytes, _ lo: Int, _ hi: Int) -> Bool {
        var i = lo
        skipSpaces(p, &i, hi)
        for k in 0..<3 {
            let s = i
            while i < hi, isTokenByte(p[i]) { i &+= 1 }
            guard i > s else { return false }
            if k < 2 {
                skipSpaces(p, &i, hi)
                guard i < hi, p[i] == UInt8(ascii: "/") else { return false }
                i &+= 1
                skipSpaces(p, &i, hi)
            }
        }
        let ws = i
        skipSpaces(p, &i, hi)
        guard i > ws else { return false }
        guard let he = scanHost(p, i, hi), he == hi || p[he] != UInt8(ascii: "[") else { return false }
        i = he
        var j = i
        skipSpaces(p, &j, hi)
        if j < hi, p[j] == UInt8(ascii: ":") {
            j &+= 1
            skipSpaces(p, &j, hi)
            guard number(p, &j, hi, max: 65535) else { return false }
            i = j
        }
        return parameters(p, i, hi) { name, value in
            switch name.count {
            case 6 where nameIs(p, name, "branch"):
                return value.map { !$0.isEmpty } ?? false
            case 5 where nameIs(p, name, "rport"):
                guard let v = value else { return true }
                var k = v.lowerBound
                return number(p, &k, v.upperBound, max: 65535) && k == v.upperBound
            case 8 where nameIs(p, name, "received"):
                guard let v = value else { return false }
                return host(p, v.lowerBound, v.upperBound)
            case 3 where nameIs(p, name, "ttl"):
                return false
            default:
                return true
            }
        }
    }

    @inline(__always) static func nameIs(_ p: Bytes, _ r: Range<Int>, _ lower: StaticString) -> Bool {
        let s = lower.utf8Start
        for k in 0..<r.count where lowerASCII(p[r.lowerBound &+ k]) != s[k] { return false }
        return true
    }
}

extension NameAddress {
    /// Checks an address as ``parse(_:keep:)`` does, keeping nothing.
    static func check(_ b: ArraySlice<UInt8>) throws(SIPParseError) {
        if FastCheck.on(b, FastCheck.nameAddress) { return }
        _ = try parse(b, keep: false)
    }
}

extension Via {
    /// Checks a Via value as ``parse(_:keep:)`` does, keeping nothing.
    static func check(_ b: ArraySlice<UInt8>) throws(SIPParseError) {
        if FastCheck.on(b, FastCheck.via) { return }
        _ = try parse(b, keep: false)
    }
}
