/// A proxy's changes to a message it forwards (RFC 3261 §16.6 steps 2, 3, 6, 8 for a request,
/// §16.7 step 3 for a response), made in one pass that writes the canonical form.
extension SIPMessage {
    /// What a proxy changes in a message it forwards. The texts are the proxy's own (its
    /// sent-by and branch, its Record-Route): they are written as given, unchecked.
    package struct ProxyEdits: Sendable {
        /// A Via line inserted before the first Via line (at the end when there is none),
        /// written as `prefix` (up to `branch=`), the magic cookie, `tag`, `branch` in 16
        /// lowercase hex digits, then `suffix` (no String is made for the branch).
        package var via: ViaPieces?
        /// A Record-Route line inserted before the first Record-Route line (else at the end).
        package var recordRoute: String?
        /// The new Request-URI (checked: no white space or control byte).
        package var requestURI: String?
        /// The Max-Forwards value: replaces every Max-Forwards line by one at the first one's place.
        package var maxForwards: Int?
        /// The header whose first element goes (the first line's first element, or the whole
        /// line when it holds one element): Route for a request, Via for a response.
        package var dropFirstElement: KnownHeader?

        package init() {}
    }

    /// The pieces of a proxy's Via (see ``ProxyEdits/via``).
    package struct ViaPieces: Sendable {
        package var prefix: String
        package var tag: String
        package var branch: UInt64
        package var suffix: String
        package init(prefix: String, tag: String = "", branch: UInt64, suffix: String) {
            self.prefix = prefix
            self.tag = tag
            self.branch = branch
            self.suffix = suffix
        }

        /// The written length.
        var count: Int { prefix.utf8.count + Via.magicCookie.utf8.count + tag.utf8.count + 16 + suffix.utf8.count }
    }

    /// This message with `edits` applied, written at once in the canonical form
    /// ``serialized()`` gives a modified message (so sending it copies its bytes instead of
    /// writing them line by line). `nil` when the new Request-URI is empty or holds white space
    /// or a control byte, or is given for a response.
    package func forwarded(_ edits: ProxyEdits) -> SIPMessage? {
        if let t = edits.requestURI {
            var text = t
            guard isRequest, !text.isEmpty, !text.withUTF8({ p in p.contains { $0 <= 0x20 || $0 == 0x7F } }) else { return nil }
        }
        // The line losing its first element, and where its second element starts (nil: the
        // line goes).
        var plan = ForwardingPlan(edits: edits, bodyCount: bodyRange.count)
        if let k = edits.dropFirstElement, let at = entries.firstIndex(where: { $0.known == k.rawValue }) {
            plan.dropAt = at
            plan.dropFrom = SIPMessage.secondElementStart(storage, entries[at].valueRange)
        }
        let names = CanonicalNames.table
        let versionText = version == .sip20 ? "SIP/2.0" : version.description
        // The exact length and line count first, then one pass writing both.
        var total: Int
        switch startIndex {
        case .request(let m, let uri, _):
            total = m.token.utf8.count + 1 + (edits.requestURI?.utf8.count ?? uri.count) + 1 + versionText.utf8.count
        case .response(_, let c, let reason):
            total = versionText.utf8.count + 1 + SIPMessage.decimalCount(c) + 1 + reason.count
        }
        total += 2 + 2 + plan.bodyCount
        var lines = 0
        var pass = plan
        let viaLength = edits.via?.count ?? 0
        let viaLine = names.length(ForwardingPlan.via) + 4 + viaLength
        let rrLine = names.length(ForwardingPlan.recordRoute) + 4 + (edits.recordRoute?.utf8.count ?? 0)
        for i in entries.indices {
            let e = entries[i]
            let v = pass.step(i, e)
            if v.before == ForwardingPlan.via { total += viaLine; lines += 1 }
            if v.before == ForwardingPlan.recordRoute { total += rrLine; lines += 1 }
            guard v.kind != .skip else { continue }
            total += (e.known != 0 ? names.length(e.known) : e.nameRange.count) + 4
            total += v.kind == .number ? SIPMessage.decimalCount(v.start) : v.end - v.start
            lines += 1
        }
        if !pass.wroteMF, let n = edits.maxForwards {
            total += names.length(ForwardingPlan.maxForwards) + 4 + SIPMessage.decimalCount(n)
            lines += 1
        }
        if !pass.wroteRR { total += rrLine; lines += 1 }
        if !pass.wroteVia { total += viaLine; lines += 1 }
        if !pass.wroteLength {
            total += names.length(ForwardingPlan.contentLength) + 4 + SIPMessage.decimalCount(plan.bodyCount)
            lines += 1
        }

        var newEntries: [HeaderEntry] = []
        var secondRange = 0..<0, newBody = 0..<0
        let bytes = storage.withUnsafeBufferPointer { src in
            names.bytes.withUnsafeBufferPointer { nb in
                makeArray(capacity: total) { buffer in
                    var w = ByteWriter(buffer.baseAddress!)
                    switch startIndex {
                    case .request(let m, let uri, _):
                        w.put(m.token); w.put(0x20)
                        let s = w.count
                        if let t = edits.requestURI { w.put(t) } else { w.put(src, uri) }
                        secondRange = s..<w.count
                        w.put(0x20); w.put(versionText)
                    case .response(_, let c, let reason):
                        w.put(versionText); w.put(0x20)
                        w.putDecimal(c); w.put(0x20)
                        let s = w.count
                        w.put(src, reason)
                        secondRange = s..<w.count
                    }
                    w.put(0x0D); w.put(0x0A)
                    newEntries = makeArray(capacity: lines) { eb in
                        var l = LineWriter(w: w, out: eb.baseAddress!, names: nb, spans: names.spans)
                        var pass = plan
                        for i in entries.indices {
                            let e = entries[i]
                            let v = pass.step(i, e)
                            if v.before == ForwardingPlan.via, let via = edits.via { l.via(via) }
                            if v.before == ForwardingPlan.recordRoute, let r = edits.recordRoute { l.text(ForwardingPlan.recordRoute, r) }
                            guard v.kind != .skip else { continue }
                            if e.known != 0 { l.name(e.known) } else { l.name(src, e.nameRange) }
                            if v.kind == .number { l.w.putDecimal(v.start) } else { l.w.put(src, v.start..<v.end) }
                            l.end(e.known)
                        }
                        if !pass.wroteMF, let n = edits.maxForwards {
                            l.name(ForwardingPlan.maxForwards); l.w.putDecimal(n); l.end(ForwardingPlan.maxForwards)
                        }
                        if !pass.wroteRR, let r = edits.recordRoute { l.text(ForwardingPlan.recordRoute, r) }
                        if !pass.wroteVia, let v = edits.via { l.via(v) }
                        if !pass.wroteLength {
                            l.name(ForwardingPlan.contentLength); l.w.putDecimal(plan.bodyCount); l.end(ForwardingPlan.contentLength)
                        }
                        w = l.w
                        return l.n
                    }
                    w.put(0x0D); w.put(0x0A)
                    let b = w.count
                    w.put(src, bodyRange)
                    newBody = b..<w.count
                    assert(w.count == total, "forwarded length")
                    return w.count
                }
            }
        }
        let start: StartLineIndex = switch startIndex {
        case .request(let m, _, let v): .request(method: m, uri: secondRange, version: v)
        case .response(let v, let c, _): .response(version: v, code: c, reason: secondRange)
        }
        return SIPMessage(storage: bytes, entries: newEntries, startIndex: start, bodyRange: newBody, pristineRange: 0..<bytes.count)
    }

    /// Where the second element of a comma-separated header value starts (after the white
    /// space following the first top-level comma), or `nil` when it holds one element.
    static func secondElementStart(_ storage: [UInt8], _ value: Range<Int>) -> Int? {
        // On the buffer: a Via value is scanned for every response relayed.
        storage.withUnsafeBufferPointer { p -> Int? in
            let end = value.upperBound
            // Most values hold one element (no comma at all) or a plain list (no quote or
            // angle bracket before the first comma): memchr calls, no walk.
            guard let comma = memchrIndex(p, UInt8(ascii: ","), value.lowerBound, end) else { return nil }
            let plain = memchrIndex(p, UInt8(ascii: "\""), value.lowerBound, comma) == nil
                && memchrIndex(p, UInt8(ascii: "<"), value.lowerBound, comma) == nil
            guard let at = plain ? comma : topLevelComma(p, value) else { return nil }
            var s = at + 1
            while s < end, isWS(p[s]) { s += 1 }
            return s
        }
    }

    /// The first comma of `p[value]` outside quotes and angle brackets.
    private static func topLevelComma(_ p: UnsafeBufferPointer<UInt8>, _ value: Range<Int>) -> Int? {
        var i = value.lowerBound, inQuotes = false, angle = 0
        while i < value.upperBound {
            let b = p[i]
            if inQuotes {
                if b == UInt8(ascii: "\\") { i += 2; continue }
                if b == UInt8(ascii: "\"") { inQuotes = false }
            } else if b == UInt8(ascii: ","), angle == 0 {
                return i
            } else if b == UInt8(ascii: "\"") {
                inQuotes = true
            } else if b == UInt8(ascii: "<") {
                angle += 1
            } else if b == UInt8(ascii: ">"), angle > 0 {
                angle -= 1
            }
            i += 1
        }
        return nil
    }
}

/// Which lines a forwarded copy keeps, changes, drops or gets before them
/// (``SIPMessage/forwarded(_:)``): one pass over the lines in order, run twice (to count, to write).
private struct ForwardingPlan {
    static let via = KnownHeader.via.rawValue, recordRoute = KnownHeader.recordRoute.rawValue
    static let maxForwards = KnownHeader.maxForwards.rawValue, contentLength = KnownHeader.contentLength.rawValue

    enum Kind { case skip, stored, number }

    let maxForwardsValue: Int?
    let bodyCount: Int
    var dropAt = -1, dropFrom: Int?
    /// Whether the new Via, the Record-Route, the Max-Forwards and the Content-Length are
    /// written (true from the start for an edit not asked for).
    var wroteVia: Bool, wroteRR: Bool, wroteMF = false, wroteLength = false

    init(edits: SIPMessage.ProxyEdits, bodyCount: Int) {
        maxForwardsValue = edits.maxForwards
        self.bodyCount = bodyCount
        wroteVia = edits.via == nil
        wroteRR = edits.recordRoute == nil
    }

    /// What becomes of line `i`: the line inserted before it (our Via before the first Via,
    /// our Record-Route before the first Record-Route; 0 for none), and its value: dropped,
    /// its bytes `start..<end`, or the number `start`.
    @inline(__always)
    mutating func step(_ i: Int, _ e: HeaderEntry) -> (before: UInt8, kind: Kind, start: Int, end: Int) {
        if i == dropAt, dropFrom == nil { return (0, .skip, 0, 0) }
        var before: UInt8 = 0
        if e.known == Self.via, !wroteVia { wroteVia = true; before = Self.via }
        if e.known == Self.recordRoute, !wroteRR { wroteRR = true; before = Self.recordRoute }
        if i == dropAt, let s = dropFrom { return (before, .stored, s, Int(e.valueEnd)) }
        if e.known == Self.maxForwards, let n = maxForwardsValue {
            if wroteMF { return (before, .skip, 0, 0) }
            wroteMF = true
            return (before, .number, n, 0)
        }
        if e.known == Self.contentLength {
            if wroteLength { return (before, .skip, 0, 0) }
            wroteLength = true
            return (before, .number, bodyCount, 0)
        }
        return (before, .stored, Int(e.valueStart), Int(e.valueEnd))
    }
}

/// Writes header lines and notes their entries.
private struct LineWriter {
    var w: ByteWriter
    let out: UnsafeMutablePointer<HeaderEntry>
    let names: UnsafeBufferPointer<UInt8>
    let spans: [UInt32]
    var n = 0
    var nameStart = 0, nameEnd = 0, valueStart = 0

    init(w: ByteWriter, out: UnsafeMutablePointer<HeaderEntry>, names: UnsafeBufferPointer<UInt8>, spans: [UInt32]) {
        self.w = w
        self.out = out
        self.names = names
        self.spans = spans
    }

    /// A known header's canonical name, then `": "`.
    mutating func name(_ known: UInt8) {
        let span = Int(spans[Int(known)])
        name(names, (span >> 8)..<((span >> 8) + (span & 0xFF)))
    }

    /// A name from `src`, then `": "`.
    mutating func name(_ src: UnsafeBufferPointer<UInt8>, _ r: Range<Int>) {
        nameStart = w.count
        w.put(src, r)
        nameEnd = w.count
        w.put(0x3A); w.put(0x20)
        valueStart = w.count
    }

    /// Ends the line begun by ``name(_:)``: notes its entry, writes CRLF.
    mutating func end(_ known: UInt8) {
        (out + n).initialize(to: HeaderEntry(known: known, nameStart: UInt32(nameStart), nameEnd: UInt32(nameEnd),
                                             valueStart: UInt32(valueStart), valueEnd: UInt32(w.count)))
        n += 1
        w.put(0x0D); w.put(0x0A)
    }

    mutating func text(_ known: UInt8, _ value: String) {
        name(known); w.put(value); end(known)
    }

    mutating func via(_ v: SIPMessage.ViaPieces) {
        name(KnownHeader.via.rawValue)
        w.put(v.prefix); w.put(Via.magicCookie); w.put(v.tag)
        var shift = 60
        while shift >= 0 {
            let d = UInt8(truncatingIfNeeded: v.branch >> UInt64(shift)) & 0xF
            w.put(d < 10 ? 0x30 + d : 0x57 + d)
            shift -= 4
        }
        w.put(v.suffix)
        end(KnownHeader.via.rawValue)
    }
}
