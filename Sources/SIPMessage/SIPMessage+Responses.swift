/// Building the messages RFC 3261 derives from a request: responses (§8.2.6) and the ACK for a
/// non-2xx final response (§17.1.1.3).
extension SIPMessage {
    /// Creates a request whose Request-URI is given as text (as received, or as built).
    /// - Throws: ``SIPParseError`` (`requestLine`) when the text is empty or holds white space
    ///   or control bytes.
    public init(method: SIPMethod, requestURI text: String) throws(SIPParseError) {
        guard !method.token.isEmpty, allUTF8(method.token, isTokenByte) else {
            throw SIPParseError(offset: 0, rule: .method, detail: "the method must be a token")
        }
        guard !text.isEmpty else { throw SIPParseError(offset: 0, rule: .requestLine, detail: "empty Request-URI") }
        // One pass over the contiguous UTF-8 (an enumerated `utf8` view cost ~70 instructions a byte).
        var t = text
        if let k = t.withUTF8({ p in p.firstIndex { $0 <= 0x20 || $0 == 0x7F } }) {
            throw SIPParseError(offset: k, rule: .requestLine, detail: "white space or control byte inside the Request-URI")
        }
        self.init(method: method, uriText: text)
    }

    /// Creates a response to `request` (RFC 3261 §8.2.6.2): the Via headers in order, From,
    /// To (with `toTag` added when the request's To has none), Call-ID, CSeq and, for
    /// 100 Trying, the Timestamp.
    public init(responseTo request: SIPMessage, statusCode: Int, reasonPhrase: String? = nil, toTag: String? = nil) {
        precondition((100...699).contains(statusCode), "status code must be 100-699")
        let reason = SIPMessage.oneLine(reasonPhrase ?? SIPMessage.defaultReasonPhrase(statusCode))
        // A tag is a token: anything else could inject parameters or elements. The usual tag
        // is all token bytes and is written as given; otherwise its token bytes only.
        var tag: String? = nil
        if let t = toTag, request.toTagBytes == nil {
            if allUTF8(t, isTokenByte) {
                if !t.isEmpty { tag = t }
            } else if t.utf8.contains(where: isTokenByte) {
                tag = String(decoding: t.utf8.filter(isTokenByte), as: UTF8.self)
            }
        }
        let timestamp = statusCode == 100 ? KnownHeader.timestamp.rawValue : 0
        @inline(__always) func copied(_ k: UInt8) -> Bool {
            k == KnownHeader.via.rawValue || k == KnownHeader.from.rawValue || k == KnownHeader.to.rawValue
                || k == KnownHeader.callID.rawValue || k == KnownHeader.cseq.rawValue || (k == timestamp && k != 0)
        }
        // The stored form (see ``appendRaw(_:_:)``: name then value, no separators), counted,
        // then written into one buffer and appended at once (a line appended at a time cost
        // ~350 instructions).
        let names = CanonicalNames.table
        let reasonCount = reason.utf8.count
        let tagCount = tag.map { 5 + $0.utf8.count } ?? 0
        // (Every To line gets the tag, as each did when lines were appended one by one: an
        // invalid request with two To lines is still answered.)
        var total = reasonCount
        for e in request.entries where copied(e.known) {
            total += names.length(e.known) + Int(e.valueEnd &- e.valueStart)
            if e.known == KnownHeader.to.rawValue { total += tagCount }
        }
        var entries: [HeaderEntry] = []
        entries.reserveCapacity(request.entries.count + 4)
        var bytes: [UInt8] = []
        // The caller's additions (Contact, a body) usually fit in the slack.
        bytes.reserveCapacity(max(total, reasonCount + request.bodyRange.lowerBound) + 256)
        request.storage.withUnsafeBufferPointer { src in
            names.bytes.withUnsafeBufferPointer { nb in
                withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(total, 1)) { buffer in
                    var w = ByteWriter(buffer.baseAddress!)
                    w.put(reason)
                    for e in request.entries where copied(e.known) {
                        let ns = w.count
                        w.put(nb, names.range(e.known))
                        let vs = w.count
                        w.put(src, e.valueRange)
                        if e.known == KnownHeader.to.rawValue, let tag {
                            w.put(UInt8(ascii: ";")); w.put(UInt8(ascii: "t")); w.put(UInt8(ascii: "a"))
                            w.put(UInt8(ascii: "g")); w.put(UInt8(ascii: "="))
                            w.put(tag)
                        }
                        entries.append(HeaderEntry(known: e.known, nameStart: UInt32(ns), nameEnd: UInt32(vs), valueStart: UInt32(vs),
                                                   valueEnd: UInt32(w.count)))
                    }
                    precondition(w.count == total, "response length")
                    bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[..<w.count]))
                }
            }
        }
        self.init(storage: bytes, entries: entries, startIndex: .response(version: .sip20, code: statusCode, reason: 0..<reasonCount),
                  bodyRange: bytes.count..<bytes.count, pristineRange: nil)
    }

    /// Creates the ACK for a non-2xx final `response` to `invite` (RFC 3261 §17.1.1.3): same
    /// Request-URI, Call-ID, From and CSeq number, the To of the response, only the top Via of
    /// the INVITE, and the INVITE's Route headers.
    public init(ackFor invite: SIPMessage, response: SIPMessage) {
        let uri = invite.requestURIText ?? ""
        self.init(method: .ack, uriText: uri)
        if let v = invite.listElements(.via).first { appendRaw(.via, v) }
        try? append(.maxForwards, "70")
        if let f = invite.firstValueBytes(.from) { appendRaw(.from, f) }
        if let t = response.firstValueBytes(.to) { appendRaw(.to, t) }
        if let c = invite.firstValueBytes(.callID) { appendRaw(.callID, c) }
        let seq = (try? invite.cseq().sequence) ?? 0
        appendUnchecked(.cseq, CSeq(seq, .ack).description)
        for r in invite.valueBytes(.route) { appendRaw(.route, r) }
    }

    mutating func appendRaw(_ k: KnownHeader, _ value: ArraySlice<UInt8>) {
        let ns = storage.count
        let names = CanonicalNames.table
        storage.append(contentsOf: names.bytes[names.range(k.rawValue)])
        let vs = storage.count
        storage.append(contentsOf: value)
        entries.append(HeaderEntry(known: k.rawValue, nameStart: UInt32(ns), nameEnd: UInt32(vs), valueStart: UInt32(vs), valueEnd: UInt32(storage.count)))
        pristineRange = nil
    }
}

extension SIPMessage {
    /// A copy of this request with another Request-URI (a proxy retargeting it, RFC 3261
    /// §16.6 step 2): every header line and the body kept, in order.
    /// - Throws: ``SIPParseError`` (`requestLine`) when `text` holds white space or control
    ///   bytes, or when this is a response.
    public func replacingRequestURI(_ text: String) throws(SIPParseError) -> SIPMessage {
        guard let method else { throw SIPParseError(offset: 0, rule: .requestLine, detail: "a response has no Request-URI") }
        // The same checks as a request built from text (and the same errors), then one copy:
        // the header index, the unfolded values and the body stay where they are in the
        // storage, the new start line's method and Request-URI go after them (no per-line
        // copying): the checked request's storage is exactly `METHOD SP Request-URI`.
        let checked = try SIPMessage(method: method, requestURI: text)
        let line = checked.storage
        var m = self
        let old = storage.count
        var bytes: [UInt8] = []
        bytes.reserveCapacity(old + line.count)
        bytes.append(contentsOf: storage)
        bytes.append(contentsOf: line)
        m.storage = bytes
        m.head = StartWord(request: method.code, version: .sip20)
        m.lineSpan = PackedRange(old..<(old + line.count))
        m.pristineRange = nil
        return m
    }
}
