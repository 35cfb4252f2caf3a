/// Typed, on-demand decoding of the headers the stack uses. Each accessor decodes the stored
/// bytes when called; errors carry offsets into the message.
extension SIPMessage {
    // MARK: Fast paths (no decoding beyond what is asked, no allocation)

    /// The Call-ID's bytes.
    @inlinable public var callIDBytes: ArraySlice<UInt8>? { firstValueBytes(.callID) }

    /// The Call-ID.
    public var callID: String? { callIDBytes.map { String(sipBytes: $0) } }

    /// The top Via's `branch` parameter, found without decoding the Via.
    public var topViaBranchBytes: ArraySlice<UInt8>? { firstValueBytes(.via).flatMap(SIPMessage.branchParameter) }

    /// The `branch` parameter of the first Via value in a Via line's bytes.
    static func branchParameter(_ v: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        guard let b = findParameter(v, from: v.startIndex, name: "branch"), !b.isEmpty else { return nil }
        return b
    }

    /// The top Via's sent-by (host bytes as written and port), read without decoding the Via:
    /// for the runtime's per-message work (transaction keys, the `received` check) on a message
    /// that ``validate()`` has already checked. `nil` when the value does not scan simply (an
    /// IPv6 reference among them): decode it with ``topVia()`` then.
    package var topViaSentBy: (host: ArraySlice<UInt8>, port: UInt16?)? {
        guard let v = firstValueBytes(.via) else { return nil }
        // On the buffer (a Cursor's closures and bounds checks cost more than the scan).
        guard let (r, port, _) = v.withUnsafeBufferPointer({ SIPMessage.scanSentBy($0) }) else { return nil }
        return (v[(v.startIndex + r.lowerBound)..<(v.startIndex + r.upperBound)], port)
    }

    /// The top Via's sent-by port: read from the bytes as ``topViaSentBy`` reads it (no slice
    /// made), from the decoded Via when the value does not scan simply; nil when none is written.
    package var topViaPort: UInt16? {
        guard let v = firstValueBytes(.via) else { return nil }
        if let (_, port, _) = v.withUnsafeBufferPointer({ SIPMessage.scanSentBy($0) }) { return port }
        return (try? topVia())?.port
    }

    /// What the runtime reads of a received request's top Via, in one scan: the sent-by (as
    /// ``topViaSentBy``), the `branch` value (nil when absent or empty) and whether `rport`
    /// is there without a value (RFC 3581: the client asks for it). `nil` when the value does
    /// not scan simply (an IPv6 reference, a quoted parameter value): read it piece by piece
    /// then.
    @usableFromInline package var topViaParts: TopViaParts? {
        guard let v = firstValueBytes(.via) else { return nil }
        let found: (Range<Int>, UInt16?, Range<Int>?, Bool)? = v.withUnsafeBufferPointer { p in
            guard let (host, port, after) = SIPMessage.scanSentBy(p) else { return nil }
            let end = p.count
            var i = after, branch: Range<Int>? = nil, rport = false
            while true {
                FastCheck.skipSpaces(p, &i, end)
                // The end of the value, or of its first element (a comma): the parameters are read.
                if i == end || p[i] == UInt8(ascii: ",") { return (host, port, branch, rport) }
                guard p[i] == UInt8(ascii: ";") else { return nil }
                i &+= 1
                FastCheck.skipSpaces(p, &i, end)
                let ns = i
                while i < end, isTokenByte(p[i]) { i &+= 1 }
                let name = ns..<i
                FastCheck.skipSpaces(p, &i, end)
                var value: Range<Int>? = nil
                if i < end, p[i] == UInt8(ascii: "=") {
                    i &+= 1
                    FastCheck.skipSpaces(p, &i, end)
                    guard i < end, p[i] != UInt8(ascii: "\""), p[i] != UInt8(ascii: "[") else { return nil }
                    let vs = i
                    i = parameterValueEnd(p, i, end)
                    value = vs..<i
                }
                if name.count == 6, FastCheck.nameIs(p, name, "branch") {
                    branch = value.flatMap { $0.isEmpty ? nil : $0 }
                } else if name.count == 5, FastCheck.nameIs(p, name, "rport") {
                    rport = value == nil
                }
            }
        }
        guard let (h, port, b, rport) = found else { return nil }
        let o = v.startIndex
        return TopViaParts(hostSpan: PackedRange((o + h.lowerBound)..<(o + h.upperBound)),
                           branchSpan: b.map { PackedRange((o + $0.lowerBound)..<(o + $0.upperBound)) } ?? .none,
                           portWord: (port.map { UInt32($0) | TopViaParts.hasPort } ?? 0) | (rport ? TopViaParts.rportBit : 0))
    }

    /// A top Via read in one scan (see ``topViaParts``), as offsets into the message's storage:
    /// three words, so that handing it on copies them inline (a slice and optional ranges
    /// went through the type's value witnesses, and a tuple of slices cost ~380 instructions a
    /// copy). It reads the message it was taken from, while that is unchanged.
    @usableFromInline package struct TopViaParts: Sendable, BitwiseCopyable {
        @usableFromInline let hostSpan: PackedRange
        /// ``PackedRange/none`` when there is no branch, or an empty one.
        @usableFromInline let branchSpan: PackedRange
        /// The port in the low 16 bits, then ``hasPort`` and ``rportBit``.
        @usableFromInline let portWord: UInt32

        @usableFromInline static let hasPort: UInt32 = 1 << 16
        @usableFromInline static let rportBit: UInt32 = 1 << 17

        @usableFromInline init(hostSpan: PackedRange, branchSpan: PackedRange, portWord: UInt32) {
            self.hostSpan = hostSpan
            self.branchSpan = branchSpan
            self.portWord = portWord
        }

        /// The sent-by port, when written.
        @inlinable package var port: UInt16? { portWord & TopViaParts.hasPort != 0 ? UInt16(truncatingIfNeeded: portWord) : nil }
        /// Whether `rport` is there without a value.
        @inlinable package var rport: Bool { portWord & TopViaParts.rportBit != 0 }
        /// The sent-by host, as written in `message` (the one these parts were read from).
        @inlinable package func host(in message: SIPMessage) -> ArraySlice<UInt8> { message.storage[hostSpan.range] }
        /// The `branch` value in `message` (nil when absent or empty).
        @inlinable package func branch(in message: SIPMessage) -> ArraySlice<UInt8>? {
            branchSpan == .none ? nil : message.storage[branchSpan.range]
        }
    }

    /// The sent-by of a Via value's bytes: the host's range, the port, and where the scan
    /// stopped (the parameters start there); nil when it does not scan simply.
    static func scanSentBy(_ p: UnsafeBufferPointer<UInt8>) -> (Range<Int>, UInt16?, Int)? {
        let end = p.count
        var i = 0
        func skipLWS() { while i < end, isWS(p[i]) || p[i] == 0x0D || p[i] == 0x0A { i &+= 1 } }
        skipLWS()
        // SIP / 2.0 / transport; "SIP/2.0/" as written by nearly everyone, read as one
        // little-endian word (0x2F302E322F504953).
        var first = 0
        if end &- i > 8, let base = p.baseAddress,
           UInt64(littleEndian: UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)) == 0x2F30_2E32_2F50_4953 {
            i &+= 8
            FastCheck.skipSpaces(p, &i, end)
            first = 2
        }
        for k in first..<3 {
            let s = i
            while i < end, isTokenByte(p[i]) { i &+= 1 }
            guard i > s else { return nil }
            if k < 2 {
                var j = i
                FastCheck.skipSpaces(p, &j, end)
                guard j < end, p[j] == UInt8(ascii: "/") else { return nil }
                j &+= 1
                FastCheck.skipSpaces(p, &j, end)
                i = j
            }
        }
        let ws = i
        skipLWS()
        guard i > ws else { return nil }
        let hs = i
        while i < end, ASCIIClass.test(p[i], ASCIIClass.alnum)
            || p[i] == UInt8(ascii: "-") || p[i] == UInt8(ascii: ".") || p[i] == UInt8(ascii: "_") { i &+= 1 }
        guard i > hs, i == end || p[i] != UInt8(ascii: "[") else { return nil }
        let host = hs..<i
        var j = i
        FastCheck.skipSpaces(p, &j, end)
        guard j < end, p[j] == UInt8(ascii: ":") else { return (host, nil, i) }
        j &+= 1
        FastCheck.skipSpaces(p, &j, end)
        let ps = j
        var n = 0
        while j < end, isDigit(p[j]) {
            n = n &* 10 &+ Int(p[j] &- 0x30)
            if n > 65535 { return nil }
            j &+= 1
        }
        guard j > ps else { return nil }
        return (host, UInt16(n), j)
    }

    /// The From tag, found without decoding the whole From header.
    public var fromTagBytes: ArraySlice<UInt8>? { tagBytes(.from) }

    /// The To tag, found without decoding the whole To header.
    public var toTagBytes: ArraySlice<UInt8>? { tagBytes(.to) }

    func tagBytes(_ h: KnownHeader) -> ArraySlice<UInt8>? { firstValueBytes(h).flatMap(SIPMessage.tagParameter) }

    /// The `tag` parameter in a From or To value's bytes.
    static func tagParameter(_ v: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        guard let r = v.withUnsafeBufferPointer({ tagParameter($0) }) else { return nil }
        return v[(v.startIndex + r.lowerBound)..<(v.startIndex + r.upperBound)]
    }

    /// The `tag` parameter's range in a From or To value's bytes (`nil` when absent or empty).
    static func tagParameter(_ p: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        // The header's parameters start after the first '>' outside quoted strings (at 0
        // when there is none). Fast path: a '>' with no quote before it.
        var from = 0
        if let gt = memchrIndex(p, 0x3E, 0, p.count) {
            if memchrIndex(p, 0x22, 0, gt) == nil {
                from = gt &+ 1
            } else {
                var i = 0, inQ = false
                while i < p.count {
                    let b = p[i]
                    if inQ {
                        if b == 0x5C { i &+= 1 } else if b == 0x22 { inQ = false }
                    } else if b == 0x22 {
                        inQ = true
                    } else if b == 0x3E {
                        from = i &+ 1
                        break
                    }
                    i &+= 1
                }
            }
        }
        guard let t = findParameter(p, from: from, name: "tag"), !t.isEmpty else { return nil }
        return t
    }

    public var fromTag: String? { fromTagBytes.map { String(sipBytes: $0) } }
    public var toTag: String? { toTagBytes.map { String(sipBytes: $0) } }
    public var topViaBranch: String? { topViaBranchBytes.map { String(sipBytes: $0) } }

    /// The CSeq (no allocation for well-known methods).
    public func cseq() throws(SIPParseError) -> CSeq {
        guard let v = firstValueBytes(.cseq) else { throw missing(.cseq) }
        return try CSeq.parse(v)
    }

    // MARK: Decoded headers

    func missing(_ h: KnownHeader) -> SIPParseError {
        SIPParseError(offset: pristineRange?.lowerBound ?? 0, rule: .missingHeader, detail: "no \(h.canonicalName) header")
    }

    func single(_ h: KnownHeader) throws(SIPParseError) -> ArraySlice<UInt8>? {
        var found: ArraySlice<UInt8>? = nil
        for e in entries where e.known == h.rawValue {
            if found != nil { throw SIPParseError(offset: Int(e.nameStart), rule: .duplicateHeader, detail: "\(h.canonicalName) appears more than once") }
            found = storage[e.valueRange]
        }
        return found
    }

    func listElements(_ h: KnownHeader) -> [ArraySlice<UInt8>] {
        var out: [ArraySlice<UInt8>] = []
        for e in entries where e.known == h.rawValue { out.append(contentsOf: splitHeaderList(storage[e.valueRange])) }
        return out
    }

    /// Calls `body` with each list element of every `h` line, in order, without collecting
    /// them; `body` returns false to stop.
    func forEachElement<E: Error>(_ h: KnownHeader, _ body: (ArraySlice<UInt8>) throws(E) -> Bool) throws(E) {
        for e in entries where e.known == h.rawValue {
            guard try forEachListElement(storage[e.valueRange], body) else { return }
        }
    }

    /// The first list element of the first `h` line.
    func firstElement(_ h: KnownHeader) -> ArraySlice<UInt8>? {
        var first: ArraySlice<UInt8>? = nil
        forEachElement(h) { (el: ArraySlice<UInt8>) -> Bool in
            first = el
            return false
        }
        return first
    }

    /// The Request-URI, decoded.
    public func requestURI() throws(SIPParseError) -> URI {
        guard let b = requestURIBytes else { throw SIPParseError(offset: 0, rule: .requestLine, detail: "a response has no Request-URI") }
        return try URI.parse(b)
    }

    /// Whether the Request-URI's scheme is `sips` (a secure dialog, RFC 3261 §12.1): read on the
    /// bytes when the quick scan accepts a plain SIP URI, else decoded (throwing what
    /// ``requestURI()`` throws).
    package func requestURIIsSIPS() throws(SIPParseError) -> Bool {
        if let b = requestURIBytes, FastCheck.on(b, FastCheck.sipURI) {
            return lowerASCII(b[b.startIndex + 3]) == UInt8(ascii: "s")
        }
        return try requestURI().scheme == "sips"
    }

    /// Every Via value, top first.
    public func via() throws(SIPParseError) -> [Via] {
        var out: [Via] = []
        try forEachElement(.via) { (el: ArraySlice<UInt8>) throws(SIPParseError) -> Bool in
            out.append(try Via.parse(el))
            return true
        }
        return out
    }

    /// The top Via.
    public func topVia() throws(SIPParseError) -> Via {
        guard let first = firstElement(.via) else { throw missing(.via) }
        return try Via.parse(first)
    }

    /// The From header.
    public func from() throws(SIPParseError) -> NameAddress {
        guard let v = try single(.from) else { throw missing(.from) }
        return try NameAddress.parse(v)
    }

    /// The To header.
    public func to() throws(SIPParseError) -> NameAddress {
        guard let v = try single(.to) else { throw missing(.to) }
        return try NameAddress.parse(v)
    }

    /// Max-Forwards (0-255), `nil` when absent.
    public func maxForwards() throws(SIPParseError) -> Int? {
        guard let v = try single(.maxForwards) else { return nil }
        var c = Cursor(v)
        let n = try c.number(max: 255, .number, "Max-Forwards")
        try c.requireEnd(.number, "in Max-Forwards")
        return Int(n)
    }

    /// Content-Length as framed by the parser, `nil` when absent.
    public var contentLength: Int? {
        guard let v = firstValueBytes(.contentLength) else { return nil }
        return Int(String(sipBytes: v))
    }

    /// The Expires header (delta-seconds), `nil` when absent.
    public func expires() throws(SIPParseError) -> UInt32? {
        try deltaSeconds(.expires)
    }

    /// The Min-Expires header, `nil` when absent.
    public func minExpires() throws(SIPParseError) -> UInt32? {
        try deltaSeconds(.minExpires)
    }

    func deltaSeconds(_ h: KnownHeader) throws(SIPParseError) -> UInt32? {
        guard let v = try single(h) else { return nil }
        var c = Cursor(v)
        c.skipWS()
        let n = try c.number(max: UInt64(UInt32.max), .number, h.canonicalName)
        try c.requireEnd(.number, "in \(h.canonicalName)")
        return UInt32(n)
    }

    /// The Contact header(s): the wildcard, or every address in order; `nil` when absent.
    public func contact() throws(SIPParseError) -> ContactValue? {
        var out: [NameAddress] = []
        return try scanContacts { out.append($0) }.map { $0 ? .wildcard : .addresses(out) }
    }

    /// Decodes and checks every Contact, giving each address to `each`: `nil` when there is
    /// none, `true` for the wildcard alone, `false` for addresses (validation keeps none).
    func scanContacts(_ each: (NameAddress) -> Void) throws(SIPParseError) -> Bool? {
        var count = 0
        var wildcard: Int? = nil
        try forEachElement(.contact) { (el: ArraySlice<UInt8>) throws(SIPParseError) -> Bool in
            count += 1
            if el.count == 1, el.first == UInt8(ascii: "*") {
                wildcard = el.startIndex
                return true
            }
            let na = try NameAddress.parse(el)
            try SIPMessage.checkContactParameters(na, at: el.startIndex)
            each(na)
            return true
        }
        guard count > 0 else { return nil }
        if let at = wildcard {
            guard count == 1 else { throw SIPParseError(offset: at, rule: .nameAddress, detail: "'*' must be the only Contact") }
            return true
        }
        return false
    }

    /// Whether the message carries Contact addresses (not the wildcard) that all decode: what
    /// `(try? contact()?.addresses.first) != nil` tells, without building the addresses (an
    /// INVITE session's check of a dialog-creating request).
    package var hasContactAddresses: Bool { (try? checkContacts()) == false }

    /// Validation's Contact check: what ``scanContacts(_:)`` checks, keeping nothing. An address
    /// that cannot carry a `q` or `expires` parameter (no ';', or no byte of "q" or "x" in either
    /// case) is only decoded, without allocating (a phone's or SIPp's Contact, per message);
    /// others go through the full decoding and the parameter checks. Returns what
    /// ``scanContacts(_:)`` does: `nil` for none, `true` for the wildcard alone, `false` for
    /// addresses.
    @discardableResult
    func checkContacts() throws(SIPParseError) -> Bool? {
        var count = 0
        var wildcard: Int? = nil
        for e in entries where e.known == KnownHeader.contact.rawValue {
            // A line the quick scan accepts whole holds one address (no comma outside its
            // brackets and quoted strings): no need to split it.
            let line = storage[e.valueRange]
            if FastCheck.on(line, FastCheck.contact) { count += 1; continue }
            try forEachListElement(line) { (el: ArraySlice<UInt8>) throws(SIPParseError) -> Bool in
                count += 1
                if el.count == 1, el.first == UInt8(ascii: "*") {
                    wildcard = el.startIndex
                    return true
                }
                if FastCheck.on(el, FastCheck.contact) { return true }
                let plain = !el.contains(UInt8(ascii: ";"))
                    || !el.contains { $0 | 0x20 == UInt8(ascii: "q") || $0 | 0x20 == UInt8(ascii: "x") }
                if plain {
                    try NameAddress.check(el)
                } else {
                    try SIPMessage.checkContactParameters(NameAddress.parse(el), at: el.startIndex)
                }
                return true
            }
        }
        guard count > 0 else { return nil }
        if let at = wildcard {
            guard count == 1 else { throw SIPParseError(offset: at, rule: .nameAddress, detail: "'*' must be the only Contact") }
            return true
        }
        return false
    }

    /// A Contact's q is a qvalue and its expires delta-seconds.
    static func checkContactParameters(_ na: NameAddress, at offset: Int) throws(SIPParseError) {
        if let q = na.parameters["q"] ?? nil, !SIPMessage.isQValue(q) {
            throw SIPParseError(offset: offset, rule: .parameter, detail: "q must be a qvalue (0 to 1, at most three decimals)")
        }
        if let e = na.parameters["expires"] ?? nil, e.isEmpty || !e.utf8.allSatisfy(isDigit) || UInt32(e) == nil {
            throw SIPParseError(offset: offset, rule: .parameter, detail: "Contact expires must be delta-seconds")
        }
    }

    /// qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ) (RFC 3261 §25.1).
    static func isQValue(_ s: String) -> Bool {
        let b = Array(s.utf8)
        guard let first = b.first, first == UInt8(ascii: "0") || first == UInt8(ascii: "1") else { return false }
        if b.count == 1 { return true }
        guard b[1] == UInt8(ascii: "."), b.count <= 5 else { return false }
        let decimals = b[2...]
        return first == UInt8(ascii: "0") ? decimals.allSatisfy(isDigit) : decimals.allSatisfy { $0 == UInt8(ascii: "0") }
    }

    func addresses(_ h: KnownHeader) throws(SIPParseError) -> [NameAddress] {
        var out: [NameAddress] = []
        try forEachElement(h) { (el: ArraySlice<UInt8>) throws(SIPParseError) -> Bool in
            out.append(try NameAddress.parse(el))
            return true
        }
        return out
    }

    /// Decodes every address of `h` and keeps none (validation).
    func checkAddresses(_ h: KnownHeader) throws(SIPParseError) {
        try forEachElement(h) { (el: ArraySlice<UInt8>) throws(SIPParseError) -> Bool in
            try NameAddress.check(el)
            return true
        }
    }

    /// The Route set, top first.
    public func route() throws(SIPParseError) -> [NameAddress] { try addresses(.route) }
    /// The Record-Route set, top first.
    public func recordRoute() throws(SIPParseError) -> [NameAddress] { try addresses(.recordRoute) }
    /// Path (RFC 3327).
    public func path() throws(SIPParseError) -> [NameAddress] { try addresses(.path) }
    /// Diversion (RFC 5806) entries, most recent first.
    public func diversion() throws(SIPParseError) -> [NameAddress] { try addresses(.diversion) }
    /// P-Asserted-Identity (RFC 3325).
    public func pAssertedIdentity() throws(SIPParseError) -> [NameAddress] { try addresses(.pAssertedIdentity) }

    /// Refer-To (RFC 3515); its URI may embed a Replaces header (see ``referToReplaces()``).
    public func referTo() throws(SIPParseError) -> NameAddress? {
        guard let v = try single(.referTo) else { return nil }
        return try NameAddress.parse(v)
    }

    /// The Replaces embedded in the Refer-To URI (`?Replaces=…`), for attended transfer.
    public func referToReplaces() throws(SIPParseError) -> Replaces? {
        guard let r = try referTo(), let u = r.sipURI, let text = u.header("Replaces") else { return nil }
        return try Replaces.parse(ArraySlice(text.utf8))
    }

    /// Referred-By (RFC 3892).
    public func referredBy() throws(SIPParseError) -> NameAddress? {
        guard let v = try single(.referredBy) else { return nil }
        return try NameAddress.parse(v)
    }

    /// Replaces (RFC 3891).
    public func replaces() throws(SIPParseError) -> Replaces? {
        guard let v = try single(.replaces) else { return nil }
        return try Replaces.parse(v)
    }

    /// Content-Type, `nil` when absent.
    public func contentType() throws(SIPParseError) -> MediaType? {
        guard let v = try single(.contentType) else { return nil }
        return try MediaType.parse(v)
    }

    func tokens(_ h: KnownHeader) throws(SIPParseError) -> [String] {
        var out: [String] = []
        for el in listElements(h) {
            if el.isEmpty { continue }
            guard el.allSatisfy(isTokenByte) else { throw SIPParseError(offset: el.startIndex, rule: .token, detail: "\(h.canonicalName) holds a non-token") }
            out.append(String(sipBytes: el))
        }
        return out
    }

    /// Allow: the methods, in order.
    public func allow() throws(SIPParseError) -> [SIPMethod] {
        try tokens(.allow).compactMap { SIPMethod($0) }
    }
    /// Supported option tags.
    public func supported() throws(SIPParseError) -> [String] { try tokens(.supported) }
    /// Require option tags.
    public func require() throws(SIPParseError) -> [String] { try tokens(.require) }
    /// Proxy-Require option tags.
    public func proxyRequire() throws(SIPParseError) -> [String] { try tokens(.proxyRequire) }
    /// Unsupported option tags.
    public func unsupported() throws(SIPParseError) -> [String] { try tokens(.unsupported) }
    /// Allow-Events packages.
    public func allowEvents() throws(SIPParseError) -> [String] { try tokens(.allowEvents) }

    /// Event (RFC 6665).
    public func event() throws(SIPParseError) -> EventHeader? {
        guard let v = try single(.event) else { return nil }
        let t = try ParameterizedToken.parse(v, rule: .headerStructure, what: "an event package")
        return EventHeader(package: t.value, parameters: t.parameters)
    }

    /// Subscription-State (RFC 6665).
    public func subscriptionState() throws(SIPParseError) -> SubscriptionState? {
        guard let v = try single(.subscriptionState) else { return nil }
        let t = try ParameterizedToken.parse(v, rule: .headerStructure, what: "a subscription state")
        return SubscriptionState(state: t.value.lowercased(), parameters: t.parameters)
    }

    /// Reason (RFC 3326) values.
    public func reason() throws(SIPParseError) -> [ReasonHeader] {
        var out: [ReasonHeader] = []
        for el in listElements(.reason) {
            let t = try ParameterizedToken.parse(el, rule: .headerStructure, what: "a reason protocol")
            var r = ReasonHeader(protocolName: t.value)
            r.parameters = t.parameters
            out.append(r)
        }
        return out
    }

    /// Retry-After.
    public func retryAfter() throws(SIPParseError) -> RetryAfter? {
        guard let v = try single(.retryAfter) else { return nil }
        var c = Cursor(v)
        c.skipWS()
        let n = try c.number(max: UInt64(UInt32.max), .number, "Retry-After")
        c.skipWS()
        var comment: String? = nil
        if c.peek == UInt8(ascii: "(") {
            let s = c.i + 1
            var depth = 0
            while !c.atEnd {
                if v[c.i] == UInt8(ascii: "(") { depth += 1 } else if v[c.i] == UInt8(ascii: ")") { depth -= 1; if depth == 0 { break } }
                c.i += 1
            }
            guard depth == 0, !c.atEnd else { throw c.error(.headerStructure, "unterminated comment in Retry-After") }
            comment = String(sipBytes: v[s..<c.i])
            c.i += 1
        }
        let p = try c.parameters(.headerStructure)
        try c.requireEnd(.headerStructure, "in Retry-After")
        return RetryAfter(seconds: UInt32(n), comment: comment, parameters: p)
    }

    /// Session-Expires (RFC 4028).
    public func sessionExpires() throws(SIPParseError) -> SessionExpires? {
        guard let v = try single(.sessionExpires) else { return nil }
        let t = try ParameterizedToken.parse(v, rule: .headerStructure, what: "a Session-Expires interval")
        guard let s = UInt32(t.value) else { throw SIPParseError(offset: v.startIndex, rule: .number, detail: "Session-Expires must be delta-seconds") }
        var se = SessionExpires(seconds: s)
        se.parameters = t.parameters
        se.refresher = (t.parameters["refresher"] ?? nil)?.lowercased()
        return se
    }

    /// Min-SE (RFC 4028).
    public func minSE() throws(SIPParseError) -> UInt32? {
        guard let v = try single(.minSE) else { return nil }
        let t = try ParameterizedToken.parse(v, rule: .number, what: "Min-SE")
        guard let s = UInt32(t.value) else { throw SIPParseError(offset: v.startIndex, rule: .number, detail: "Min-SE must be delta-seconds") }
        return s
    }

    /// RSeq (RFC 3262).
    public func rseq() throws(SIPParseError) -> UInt32? {
        guard let v = try single(.rseq) else { return nil }
        return try SIPMessage.parseRSeq(v)
    }

    static func parseRSeq(_ v: ArraySlice<UInt8>) throws(SIPParseError) -> UInt32 {
        var c = Cursor(v)
        c.skipWS()
        let n = try c.number(max: UInt64(UInt32.max), .number, "RSeq")
        try c.requireEnd(.number, "in RSeq")
        return UInt32(n)
    }

    /// RAck (RFC 3262).
    public func rack() throws(SIPParseError) -> RAck? {
        guard let v = try single(.rack) else { return nil }
        var c = Cursor(v)
        c.skipWS()
        let r = try c.number(max: UInt64(UInt32.max), .number, "the RAck response number")
        c.skipWS()
        let n = try c.number(max: UInt64(UInt32.max), .number, "the RAck CSeq number")
        c.skipWS()
        let t = c.token()
        guard let m = t.withUnsafeBytes({ SIPMethod(bytes: $0) }) else { throw c.error(.headerStructure, "expected the RAck method") }
        try c.requireEnd(.headerStructure, "in RAck")
        return RAck(rseq: UInt32(r), cseq: UInt32(n), method: m)
    }

    func authHeaders(_ h: KnownHeader) throws(SIPParseError) -> [AuthenticationHeader] {
        var out: [AuthenticationHeader] = []
        for e in entries where e.known == h.rawValue { out.append(try AuthenticationHeader.parse(storage[e.valueRange])) }
        return out
    }

    /// WWW-Authenticate challenges (one per header line).
    public func wwwAuthenticate() throws(SIPParseError) -> [AuthenticationHeader] { try authHeaders(.wwwAuthenticate) }
    /// Proxy-Authenticate challenges.
    public func proxyAuthenticate() throws(SIPParseError) -> [AuthenticationHeader] { try authHeaders(.proxyAuthenticate) }
    /// Authorization credentials.
    public func authorization() throws(SIPParseError) -> [AuthenticationHeader] { try authHeaders(.authorization) }
    /// Proxy-Authorization credentials.
    public func proxyAuthorization() throws(SIPParseError) -> [AuthenticationHeader] { try authHeaders(.proxyAuthorization) }
}
