/// The checks RFC 3261 §8.2 and §16.3 ask of a received message before any processing, done
/// once by the transaction layer (parsing alone indexes but does not decode headers).
extension SIPMessage {
    /// Decodes and checks everything the stack relies on:
    /// - the version is SIP/2.0 (else rule `unsupportedVersion`, answered 505);
    /// - a request's Request-URI is a well-formed URI, and a SIP Request-URI has no headers
    ///   (except in a request inside a dialog — its To has a tag —, which is matched by Call-ID
    ///   and tags: an odd Request-URI there is tolerated);
    /// - Via, From, To, Call-ID and CSeq are present, and From, To, Call-ID, CSeq,
    ///   Max-Forwards and Content-Type appear at most once;
    /// - every Via, From, To, Contact, Route, Record-Route, CSeq, Max-Forwards, Expires and
    ///   Content-Type value decodes; CSeq's number fits 32 bits and its method matches the
    ///   request's.
    ///
    /// Max-Forwards, the From tag and the branch cookie are not required, so RFC 2543 peers
    /// still interoperate (RFC 4475 §3.4.1).
    /// - Throws: ``SIPParseError``; its ``SIPParseError/suggestedStatusCode`` is the response.
    public func validate() throws(SIPParseError) {
        if version != .sip20 {
            throw SIPParseError(offset: pristineRange?.lowerBound ?? 0, rule: .unsupportedVersion, detail: "\(version) is not supported")
        }
        // A plain SIP Request-URI (the usual case) passes the quick scan; anything else is
        // decoded, and refused with the decoder's error.
        if let b = requestURIBytes, !FastCheck.on(b, FastCheck.sipURI) {
            do throws(SIPParseError) {
                // Checked, not kept: a SIP URI's headers are what follows a '?' after its user
                // part (which runs to the first '@'; host, port and parameters hold no '?').
                let uri = try URI.parse(b, keep: false)
                let afterUser = b.firstIndex(of: UInt8(ascii: "@")).map { $0 + 1 } ?? b.startIndex
                if case .sip = uri, b[afterUser...].contains(UInt8(ascii: "?")) {
                    throw SIPParseError(offset: b.startIndex, rule: .uri, detail: "a Request-URI cannot carry headers (RFC 3261 §19.1.5)")
                }
            } catch {
                // Tolerant in what we accept: a request inside a dialog (its To has a tag) is
                // matched by Call-ID and tags, never by its Request-URI, and deployed equipment
                // writes odd hosts there (`sip:a@host_name`); its BYE, re-INVITE or REFER is
                // still handled. Outside a dialog the Request-URI is what we act on: refused.
                guard toTagBytes == nil else { return try validateHeaders() }
                throw error
            }
        }
        if headersPassQuickly() { return }
        try validateHeaders()
    }

    /// ``validateHeaders()``'s quick accept, in one pass over the header index on the buffers
    /// (no slices, no retains, no pass per header): every line of a header validation checks
    /// goes through its ``FastCheck`` scanner, or a digits-only reading for Max-Forwards and
    /// Expires, ``CSeq/quick(_:)`` for CSeq and `application/sdp` for Content-Type. `true` only
    /// when ``validateHeaders()`` accepts the message too: each reading accepts a subset of what
    /// the full check does, a line the quick scanners accept whole holds one element, and the
    /// required headers are present, the single ones once. Anything else answers `false`, and
    /// ``validateHeaders()`` decides, with its errors.
    func headersPassQuickly() -> Bool {
        let method = head.isRequest ? head.low : -1
        return storage.withUnsafeBufferPointer { p in
            entries.withUnsafeBufferPointer { es in
                // A bit per header of `checkedOnce` seen (Via may repeat).
                var seen: UInt8 = 0
                for e in es {
                    let lo = Int(e.valueStart), hi = Int(e.valueEnd)
                    let bit: UInt8
                    switch e.known {
                    case KnownHeader.via.rawValue:
                        guard SIPMessage.viaLinePassesQuickly(p, lo, hi) else { return false }
                        seen |= 1
                        continue
                    case KnownHeader.from.rawValue:
                        guard FastCheck.nameAddress(p, lo, hi) else { return false }
                        bit = 2
                    case KnownHeader.to.rawValue:
                        guard FastCheck.nameAddress(p, lo, hi) else { return false }
                        bit = 4
                    case KnownHeader.callID.rawValue:
                        guard FastCheck.callID(p, lo, hi) else { return false }
                        bit = 8
                    case KnownHeader.cseq.rawValue:
                        // A known method only (an extension method is read by the full check).
                        guard let cs = CSeq.quick(UnsafeBufferPointer(rebasing: p[lo..<hi])),
                              method < 0 || Int(cs.method.code) == method else { return false }
                        bit = 16
                    case KnownHeader.maxForwards.rawValue:
                        guard SIPMessage.digitsOnly(p, lo, hi, max: 255) else { return false }
                        bit = 32
                    case KnownHeader.contentType.rawValue:
                        guard equalsLowercased(UnsafeBufferPointer(rebasing: p[lo..<hi]), "application/sdp") else { return false }
                        bit = 64
                    case KnownHeader.expires.rawValue:
                        guard SIPMessage.digitsOnly(p, lo, hi, max: UInt64(UInt32.max)) else { return false }
                        bit = 128
                    case KnownHeader.contact.rawValue:
                        guard FastCheck.contact(p, lo, hi) else { return false }
                        continue
                    case KnownHeader.route.rawValue, KnownHeader.recordRoute.rawValue:
                        guard FastCheck.nameAddress(p, lo, hi) else { return false }
                        continue
                    default:
                        continue
                    }
                    guard seen & bit == 0 else { return false }
                    seen |= bit
                }
                return seen & 0b1_1111 == 0b1_1111
            }
        }
    }

    /// A Via line the quick scan accepts: one Via, or a list of them (SIPp's responses write
    /// every Via on one line). A list is split at each comma only when the line holds no quote
    /// and no angle bracket, so at the commas where ``forEachListElement(_:_:)`` splits it,
    /// each element trimmed of white space as it trims them.
    @inline(__always)
    static func viaLinePassesQuickly(_ p: UnsafeBufferPointer<UInt8>, _ lo: Int, _ hi: Int) -> Bool {
        guard var comma = memchrIndex(p, UInt8(ascii: ","), lo, hi) else { return FastCheck.via(p, lo, hi) }
        for k in lo..<hi where p[k] == UInt8(ascii: "\"") || p[k] == UInt8(ascii: "<") { return false }
        var start = lo
        while true {
            var a = start, b = comma
            while a < b, isWS(p[a]) { a &+= 1 }
            while b > a, isWS(p[b &- 1]) { b &-= 1 }
            guard FastCheck.via(p, a, b) else { return false }
            if comma == hi { return true }
            start = comma &+ 1
            comma = memchrIndex(p, UInt8(ascii: ","), start, hi) ?? hi
        }
    }

    /// One or more decimal digits and nothing else, at most `max`: what a cursor's `number`
    /// followed by `requireEnd` accepts on a trimmed value, in its simplest shape.
    @inline(__always)
    static func digitsOnly(_ p: UnsafeBufferPointer<UInt8>, _ lo: Int, _ hi: Int, max: UInt64) -> Bool {
        guard hi > lo, hi - lo <= 10 else { return false }
        var v: UInt64 = 0
        for k in lo..<hi {
            let c = p[k]
            guard isDigit(c) else { return false }
            v = v &* 10 &+ UInt64(c &- 0x30)
        }
        return v <= max
    }

    /// The headers validation counts: the first five must be present, the last seven at most once.
    private static let checkedOnce: [KnownHeader] = [.via, .from, .to, .callID, .cseq, .maxForwards, .contentType, .expires]

    func validateHeaders() throws(SIPParseError) {
        // One pass over the header index for the presence and uniqueness checks (instead of one
        // scan per header); the errors are the same, in the same order: the first missing
        // header, else the first repeated one at its second line.
        let order = SIPMessage.checkedOnce
        var lines = InlineArray<8, UInt8>(repeating: 0)
        var second = InlineArray<8, UInt32>(repeating: 0)
        for e in entries {
            let slot: Int
            switch e.known {
            case KnownHeader.via.rawValue: slot = 0
            case KnownHeader.from.rawValue: slot = 1
            case KnownHeader.to.rawValue: slot = 2
            case KnownHeader.callID.rawValue: slot = 3
            case KnownHeader.cseq.rawValue: slot = 4
            case KnownHeader.maxForwards.rawValue: slot = 5
            case KnownHeader.contentType.rawValue: slot = 6
            case KnownHeader.expires.rawValue: slot = 7
            default: continue
            }
            if lines[slot] == 1 { second[slot] = e.nameStart }
            if lines[slot] < 2 { lines[slot] += 1 }
        }
        for slot in 0..<5 where lines[slot] == 0 { throw missing(order[slot]) }
        for slot in 1..<8 where lines[slot] > 1 {
            throw SIPParseError(offset: Int(second[slot]), rule: .duplicateHeader, detail: "\(order[slot].canonicalName) appears more than once")
        }
        // Every Via, From and To checked, none kept (no allocation; the usual shapes by a
        // quick scan, see FastCheck).
        var vias = 0
        for e in entries where e.known == KnownHeader.via.rawValue {
            // A line the quick scan accepts whole holds one Via (no comma outside its quoted
            // values): no need to split it.
            let line = storage[e.valueRange]
            if FastCheck.on(line, FastCheck.via) { vias += 1; continue }
            try forEachListElement(line) { (el: ArraySlice<UInt8>) throws(SIPParseError) -> Bool in
                try Via.check(el)
                vias += 1
                return true
            }
        }
        if vias == 0 { throw missing(.via) }
        // From then To (a literal list here would be an array built per message).
        guard let from = try single(.from) else { throw missing(.from) }
        try NameAddress.check(from)
        guard let to = try single(.to) else { throw missing(.to) }
        try NameAddress.check(to)
        if let id = callIDBytes, !FastCheck.on(id, FastCheck.callID) { try SIPMessage.checkCallID(id) }
        let cs = try cseq()
        if let m = method, cs.method != m {
            let at = firstValueBytes(.cseq)?.startIndex ?? 0
            throw SIPParseError(offset: at, rule: .cseqMethodMismatch, detail: "CSeq method \(cs.method) does not match \(m)")
        }
        _ = try maxForwards()
        _ = try expires()
        try checkContacts()
        try checkAddresses(.route)
        try checkAddresses(.recordRoute)
        if let v = try single(.contentType) { try MediaType.check(v) }
    }
}

extension SIPMessage {
    /// `word [ "@" word ]`, checked in place (no array of the parts).
    static func checkCallID(_ id: ArraySlice<UInt8>) throws(SIPParseError) {
        func check(_ p: ArraySlice<UInt8>) throws(SIPParseError) {
            guard !p.isEmpty else { throw SIPParseError(offset: id.startIndex, rule: .headerStructure, detail: "empty word in Call-ID") }
            if let bad = p.firstIndex(where: { !ByteClass.test($0, ByteClass.word) }) {
                throw SIPParseError(offset: bad, rule: .headerStructure, detail: "byte 0x\(String(id[bad], radix: 16)) is not allowed in Call-ID")
            }
        }
        if let at = id.firstIndex(of: UInt8(ascii: "@")) {
            try check(id[..<at])
            try check(id[(at + 1)...])
        } else {
            try check(id)
        }
    }
}

/// One part of a multipart body (RFC 2046 §5.1).
public struct MultipartPart: Sendable, Hashable {
    /// The part's headers (name as written, value trimmed).
    public var headers: [SIPParameter]
    /// The part's body bytes.
    public var body: [UInt8]

    /// The part's Content-Type.
    public var contentType: MediaType? {
        guard let v = headers.first(where: { $0.name.lowercased() == "content-type" })?.value else { return nil }
        return try? MediaType(v)
    }
}

extension SIPMessage {
    /// Splits a `multipart/*` body at its boundary; `nil` when the body is not multipart.
    public func multipartParts() throws(SIPParseError) -> [MultipartPart]? {
        guard let ct = try contentType(), ct.type == "multipart" else { return nil }
        guard let boundary = ct.parameters["boundary"] ?? nil, !boundary.isEmpty else {
            throw SIPParseError(offset: bodyRange.lowerBound, rule: .multipart, detail: "multipart Content-Type without boundary")
        }
        return try MultipartPart.split(body, boundary: boundary)
    }
}

extension MultipartPart {
    /// Splits a body at `--boundary` delimiter lines.
    public static func split(_ body: ArraySlice<UInt8>, boundary: String) throws(SIPParseError) -> [MultipartPart] {
        let delim = Array("--\(boundary)".utf8)
        func find(_ from: Int) -> Int? {
            var i = from
            while i + delim.count <= body.endIndex {
                // A delimiter starts the body or follows a line break.
                if body[i] == delim[0], i == body.startIndex || body[i - 1] == 0x0A, body[i..<(i + delim.count)].elementsEqual(delim) { return i }
                i += 1
            }
            return nil
        }
        guard var at = find(body.startIndex) else { throw SIPParseError(offset: body.startIndex, rule: .multipart, detail: "no --\(boundary) delimiter") }
        var parts: [MultipartPart] = []
        while true {
            var i = at + delim.count
            if i + 1 < body.endIndex, body[i] == UInt8(ascii: "-"), body[i + 1] == UInt8(ascii: "-") { return parts }
            // Skip transport padding to the line end.
            while i < body.endIndex, body[i] != 0x0A { i += 1 }
            guard i < body.endIndex else { throw SIPParseError(offset: i, rule: .multipart, detail: "delimiter line does not end") }
            i += 1
            guard let next = find(i) else { throw SIPParseError(offset: i, rule: .multipart, detail: "no closing --\(boundary)-- delimiter") }
            // The line break before the next delimiter belongs to the delimiter.
            var partEnd = next
            if partEnd > i, body[partEnd - 1] == 0x0A { partEnd -= 1 }
            if partEnd > i, body[partEnd - 1] == 0x0D { partEnd -= 1 }
            var headers: [SIPParameter] = []
            var j = i
            while j < partEnd {
                var le = j
                while le < partEnd, body[le] != 0x0A { le += 1 }
                var ce = le
                if ce > j, body[ce - 1] == 0x0D { ce -= 1 }
                if ce == j { j = min(le + 1, partEnd); break }
                guard let colon = body[j..<ce].firstIndex(of: UInt8(ascii: ":")) else {
                    throw SIPParseError(offset: j, rule: .multipart, detail: "part header without colon")
                }
                var vs = colon + 1
                while vs < ce, isWS(body[vs]) { vs += 1 }
                headers.append(SIPParameter(name: String(sipBytes: body[j..<colon]).trimmingCharacters(), value: String(sipBytes: body[vs..<ce])))
                j = le + 1
            }
            parts.append(MultipartPart(headers: headers, body: j < partEnd ? Array(body[j..<partEnd]) : []))
            at = next
        }
    }
}

extension String {
    func trimmingCharacters() -> String { Substring(self).trimmingSpaces() }
}
