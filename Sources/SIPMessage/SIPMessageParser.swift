#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// How a message's end is found.
@usableFromInline
enum FramingMode: Sendable {
    /// A datagram: without Content-Length the body runs to the end; trailing bytes after a
    /// Content-Length-framed body are ignored.
    case datagram
    /// A byte stream: Content-Length is mandatory; missing bytes mean "wait for more".
    case stream
}

@usableFromInline
struct ParsedLayout {
    var entries: [HeaderEntry]
    var start: StartLineIndex
    var messageStart: Int
    var headerEnd: Int      // first byte of the body
    var bodyEnd: Int
    var foldedEntries: [Int]
}

/// Parsing outcome used by the stream framer: either a complete layout or a need for more bytes.
@usableFromInline
enum ParseStep {
    case complete(ParsedLayout)
    /// More bytes are needed; when the headers are complete, the total length (from the
    /// parse's start) the buffer must reach.
    case needMore(until: Int?)
}

/// A parsed layout without its header index (which ``SIPMessage/parseLayout(_:from:mode:limits:entries:folded:)`` fills apart).
struct LayoutCore {
    var start: StartLineIndex
    var messageStart: Int
    var headerEnd: Int
    var bodyEnd: Int
}

enum LayoutStep {
    case complete(LayoutCore)
    case needMore(until: Int?)
}

extension SIPMessage {
    /// Parses one message from a datagram's bytes.
    ///
    /// Leading CRLFs are skipped. The body is framed by Content-Length; bytes after it are
    /// ignored (RFC 3261 §18.3). Without Content-Length the body is the rest of the datagram.
    /// - Throws: ``SIPParseError`` naming the byte offset and the rule that failed.
    public init(bytes: [UInt8], limits: SIPParserLimits = .default) throws(SIPParseError) {
        let step = try SIPMessage.parseLayout(bytes, from: 0, mode: .datagram, limits: limits)
        guard case .complete(let layout) = step else {
            throw SIPParseError(offset: bytes.count, rule: .incomplete, detail: "no blank line ends the headers")
        }
        self.init(storage: bytes, layout: layout)
    }

    /// Parses one message from any collection of bytes (copied once into the message's storage).
    public init<C: Collection>(parsing bytes: C, limits: SIPParserLimits = .default) throws(SIPParseError) where C.Element == UInt8 {
        try self.init(bytes: Array(bytes), limits: limits)
    }

    /// Parses one message from text (its UTF-8 bytes).
    public init(_ text: String, limits: SIPParserLimits = .default) throws(SIPParseError) {
        try self.init(bytes: Array(text.utf8), limits: limits)
    }

    @usableFromInline
    init(storage: [UInt8], layout: ParsedLayout) {
        self.init(storage: storage, entries: layout.entries, startIndex: layout.start,
                  bodyRange: layout.headerEnd..<layout.bodyEnd, pristineRange: layout.messageStart..<layout.bodyEnd)
        if !layout.foldedEntries.isEmpty { unfold(layout.foldedEntries) }
    }

    /// Replaces each folded value's range by an unfolded copy appended after the message.
    private mutating func unfold(_ indices: [Int]) {
        for i in indices {
            let r = entries[i].valueRange
            var out: [UInt8] = []
            out.reserveCapacity(r.count)
            var j = r.lowerBound
            while j < r.upperBound {
                let b = storage[j]
                if b == 0x0D || b == 0x0A {
                    // CRLF followed by white space: the whole run becomes one SP.
                    while j < r.upperBound, storage[j] == 0x0D || storage[j] == 0x0A || isWS(storage[j]) { j += 1 }
                    while let last = out.last, isWS(last) { out.removeLast() }
                    out.append(0x20)
                    continue
                }
                out.append(b)
                j += 1
            }
            let start = storage.count
            storage.append(contentsOf: out)
            entries[i].valueStart = UInt32(start)
            entries[i].valueEnd = UInt32(storage.count)
        }
    }

    @usableFromInline
    static func parseLayout(_ bytes: [UInt8], from offset: Int, mode: FramingMode, limits: SIPParserLimits) throws(SIPParseError) -> ParseStep {
        let result: Result<ParseStep, SIPParseError> = bytes.withUnsafeBufferPointer { p in
            do throws(SIPParseError) {
                return .success(try parseLayout(p, from: offset, mode: mode, limits: limits))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    @inline(__always)
    static func findLF(_ p: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int) -> Int? {
        guard from < to, let base = p.baseAddress else { return nil }
        guard let hit = memchr(base + from, 0x0A, to - from) else { return nil }
        return base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
    }

    @usableFromInline
    static func parseLayout(_ p: UnsafeBufferPointer<UInt8>, from offset: Int, mode: FramingMode, limits: SIPParserLimits) throws(SIPParseError) -> ParseStep {
        var entries: [HeaderEntry] = []
        entries.reserveCapacity(24)
        var folded: [Int] = []
        switch try parseLayout(p, from: offset, mode: mode, limits: limits, entries: &entries, folded: &folded) {
        case .complete(let c):
            return .complete(ParsedLayout(entries: entries, start: c.start, messageStart: c.messageStart, headerEnd: c.headerEnd,
                                          bodyEnd: c.bodyEnd, foldedEntries: folded))
        case .needMore(let until):
            return .needMore(until: until)
        }
    }

    /// The parse itself, filling `entries` and `folded` (which the caller hands in empty, so a
    /// scanner can reuse its buffers from message to message).
    static func parseLayout(_ p: UnsafeBufferPointer<UInt8>, from offset: Int, mode: FramingMode, limits: SIPParserLimits,
                            entries: inout [HeaderEntry], folded: inout [Int]) throws(SIPParseError) -> LayoutStep {
        let end = p.count
        var i = offset
        // RFC 3261 §7.5: CRLFs before the start line are ignored (within the size limit).
        let crlfLimit = min(end, offset &+ limits.maxMessageSize)
        while i < crlfLimit, p[i] == 0x0D || p[i] == 0x0A { i += 1 }
        if i == crlfLimit, crlfLimit < end {
            throw SIPParseError(offset: i, rule: .messageTooLarge, detail: "more than \(limits.maxMessageSize) bytes of line breaks before a start line")
        }
        guard i < end else {
            if mode == .stream { return .needMore(until: nil) }
            throw SIPParseError(offset: i, rule: .emptyMessage, detail: "no start line")
        }
        let messageStart = i
        let scanLimit = min(end, messageStart &+ limits.maxMessageSize)

        // Start line.
        guard let lineEnd = findLF(p, i, min(scanLimit, i &+ limits.maxLineLength &+ 1)) else {
            if end - i > limits.maxLineLength { throw SIPParseError(offset: i, rule: .lineTooLong, detail: "start line longer than \(limits.maxLineLength) bytes") }
            if end - messageStart > limits.maxMessageSize { throw SIPParseError(offset: i, rule: .messageTooLarge, detail: "more than \(limits.maxMessageSize) bytes") }
            if mode == .stream { return .needMore(until: nil) }
            throw SIPParseError(offset: end, rule: .incomplete, detail: "start line has no line end")
        }
        let contentEnd = lineEnd > i && p[lineEnd - 1] == 0x0D ? lineEnd - 1 : lineEnd
        var lineEndCRs = contentEnd < lineEnd ? 1 : 0
        let start = try parseStartLine(p, i..<contentEnd)
        i = lineEnd + 1

        var contentLength: Int? = nil
        var headerEnd = -1
        while true {
            guard i < scanLimit else {
                if end - messageStart > limits.maxMessageSize { throw SIPParseError(offset: scanLimit, rule: .messageTooLarge, detail: "headers exceed \(limits.maxMessageSize) bytes") }
                if mode == .stream { return .needMore(until: nil) }
                // A datagram that ends right after a header line: the blank line is missing,
                // but the datagram's end bounds the message (robustness, RFC 3261 §18.3).
                headerEnd = end
                break
            }
            let first = p[i]
            if first == 0x0A { headerEnd = i + 1; break }
            if first == 0x0D {
                if i + 1 < end, p[i + 1] == 0x0A { headerEnd = i + 2; lineEndCRs += 1; break }
                if i + 1 == end {
                    if mode == .stream { return .needMore(until: nil) }
                    throw SIPParseError(offset: end, rule: .incomplete, detail: "no blank line ends the headers")
                }
                throw SIPParseError(offset: i, rule: .headerValue, detail: "bare CR")
            }
            guard let lf = findLF(p, i, min(scanLimit, i &+ limits.maxLineLength &+ 1)) else {
                if scanLimit < end, scanLimit <= i &+ limits.maxLineLength { throw SIPParseError(offset: scanLimit, rule: .messageTooLarge, detail: "headers exceed \(limits.maxMessageSize) bytes") }
                if end - i > limits.maxLineLength { throw SIPParseError(offset: i, rule: .lineTooLong, detail: "header line longer than \(limits.maxLineLength) bytes") }
                if mode == .stream { return .needMore(until: nil) }
                throw SIPParseError(offset: end, rule: .incomplete, detail: "header line has no line end")
            }
            var cEnd = lf > i && p[lf - 1] == 0x0D ? lf - 1 : lf
            if cEnd < lf { lineEndCRs += 1 }
            while cEnd > i, isWS(p[cEnd - 1]) { cEnd -= 1 }

            if isWS(first) {
                // Folded continuation of the previous header (RFC 3261 §7.3.1).
                guard !entries.isEmpty else { throw SIPParseError(offset: i, rule: .headerName, detail: "white space before the first header name") }
                let last = entries.count - 1
                if entries[last].known == KnownHeader.contentLength.rawValue {
                    // Framing must not depend on how a continuation is read: refuse it.
                    var k = i
                    while k < cEnd, isWS(p[k]) { k += 1 }
                    if k < cEnd { throw SIPParseError(offset: i, rule: .contentLength, detail: "Content-Length must not be folded") }
                }
                if cEnd > i {
                    // Skip lines that are only white space: they add nothing to the value.
                    var k = i
                    while k < cEnd, isWS(p[k]) { k += 1 }
                    if k < cEnd {
                        if entries[last].valueStart == entries[last].valueEnd { entries[last].valueStart = UInt32(k) }
                        entries[last].valueEnd = UInt32(cEnd)
                        if folded.last != last { folded.append(last) }
                        if Int(entries[last].valueEnd) - Int(entries[last].nameStart) > limits.maxLineLength {
                            throw SIPParseError(offset: i, rule: .lineTooLong, detail: "folded header longer than \(limits.maxLineLength) bytes")
                        }
                    }
                }
                i = lf + 1
                continue
            }

            var j = i
            while j < cEnd, isTokenByte(p[j]) { j += 1 }
            let nameEnd = j
            guard nameEnd > i else { throw SIPParseError(offset: i, rule: .headerName, detail: "header line does not start with a token") }
            while j < cEnd, isWS(p[j]) { j += 1 }
            guard j < cEnd, p[j] == UInt8(ascii: ":") else {
                if j < cEnd, !isWS(p[j]), nameEnd == j { throw SIPParseError(offset: j, rule: .headerName, detail: "byte 0x\(String(p[j], radix: 16)) is not allowed in a header name") }
                throw SIPParseError(offset: j, rule: .headerColon, detail: "no colon after the header name")
            }
            j += 1
            while j < cEnd, isWS(p[j]) { j += 1 }
            guard entries.count < limits.maxHeaderCount else {
                throw SIPParseError(offset: i, rule: .tooManyHeaders, detail: "more than \(limits.maxHeaderCount) headers")
            }
            let known = KnownHeader.lookupBytes(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: p[i..<nameEnd])))
            if known == .contentLength {
                guard contentLength == nil else {
                    throw SIPParseError(offset: i, rule: .duplicateContentLength, detail: "Content-Length appears twice")
                }
                contentLength = try parseContentLength(p, j..<cEnd, limits: limits)
            }
            entries.append(HeaderEntry(known: known?.rawValue ?? 0, nameStart: UInt32(truncatingIfNeeded: i), nameEnd: UInt32(truncatingIfNeeded: nameEnd),
                                       valueStart: UInt32(truncatingIfNeeded: j), valueEnd: UInt32(truncatingIfNeeded: cEnd)))
            i = lf + 1
        }

        // A CR that does not end a line is not allowed in the header section: counting CRs is
        // one vectorizable pass, cheaper than looking for them line by line.
        if countCR(p, messageStart, headerEnd) != lineEndCRs {
            var k = messageStart
            while k < headerEnd, !(p[k] == 0x0D && (k + 1 == headerEnd || p[k + 1] != 0x0A)) { k += 1 }
            throw SIPParseError(offset: k, rule: .headerValue, detail: "a bare CR (not followed by LF) in the header section")
        }

        let bodyEnd: Int
        if let cl = contentLength {
            guard cl <= limits.maxBodySize else { throw SIPParseError(offset: headerEnd, rule: .bodyTooLarge, detail: "Content-Length \(cl) exceeds \(limits.maxBodySize)") }
            guard headerEnd - messageStart + cl <= limits.maxMessageSize else {
                throw SIPParseError(offset: headerEnd, rule: .messageTooLarge, detail: "message of \(headerEnd - messageStart + cl) bytes exceeds \(limits.maxMessageSize)")
            }
            if headerEnd + cl > end {
                if mode == .stream { return .needMore(until: headerEnd + cl) }
                throw SIPParseError(offset: end, rule: .bodyTruncated, detail: "Content-Length \(cl) but \(end - headerEnd) body bytes present")
            }
            bodyEnd = headerEnd + cl
        } else {
            guard mode == .datagram else {
                throw SIPParseError(offset: messageStart, rule: .missingContentLength, detail: "a stream-framed message must carry Content-Length")
            }
            guard end - headerEnd <= limits.maxBodySize else { throw SIPParseError(offset: headerEnd, rule: .bodyTooLarge, detail: "body exceeds \(limits.maxBodySize) bytes") }
            guard end - messageStart <= limits.maxMessageSize else { throw SIPParseError(offset: messageStart, rule: .messageTooLarge, detail: "more than \(limits.maxMessageSize) bytes") }
            bodyEnd = end
        }
        return .complete(LayoutCore(start: start, messageStart: messageStart, headerEnd: headerEnd, bodyEnd: bodyEnd))
    }

    /// Counts CR bytes, sixteen at a time.
    @inline(__always)
    static func countCR(_ p: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int) -> Int {
        guard let base = p.baseAddress, from < to else { return 0 }
        let raw = UnsafeRawPointer(base)
        let cr = SIMD16<UInt8>(repeating: 0x0D), one = SIMD16<UInt8>(repeating: 1), zero = SIMD16<UInt8>()
        var n = 0
        var k = from
        while to - k >= 16 {
            var acc = SIMD16<UInt8>()
            var rounds = 0
            // At most 255 rounds before a lane of the UInt8 accumulator could wrap.
            while to - k >= 16, rounds < 255 {
                let v = raw.loadUnaligned(fromByteOffset: k, as: SIMD16<UInt8>.self)
                acc &+= zero.replacing(with: one, where: v .== cr)
                k &+= 16
                rounds &+= 1
            }
            n &+= Int(SIMD16<UInt16>(truncatingIfNeeded: acc).wrappedSum())
        }
        while k < to {
            n &+= p[k] == 0x0D ? 1 : 0
            k &+= 1
        }
        return n
    }

    static func parseContentLength(_ p: UnsafeBufferPointer<UInt8>, _ r: Range<Int>, limits: SIPParserLimits) throws(SIPParseError) -> Int {
        guard !r.isEmpty else { throw SIPParseError(offset: r.lowerBound, rule: .contentLength, detail: "empty Content-Length") }
        var v = 0
        for k in r {
            let b = p[k]
            guard isDigit(b) else { throw SIPParseError(offset: k, rule: .contentLength, detail: "Content-Length must be decimal digits") }
            v = v * 10 + Int(b &- 0x30)  // cannot overflow: v ≤ ceiling (2^30) before this step
            if v > limits.maxMessageSize { throw SIPParseError(offset: r.lowerBound, rule: .bodyTooLarge, detail: "Content-Length exceeds \(limits.maxBodySize)") }
        }
        return v
    }

    static func parseStartLine(_ p: UnsafeBufferPointer<UInt8>, _ r: Range<Int>) throws(SIPParseError) -> StartLineIndex {
        let lo = r.lowerBound, hi = r.upperBound
        // A status line starts with "SIP/".
        if hi - lo >= 4, lowerASCII(p[lo]) == UInt8(ascii: "s"), lowerASCII(p[lo + 1]) == UInt8(ascii: "i"),
           lowerASCII(p[lo + 2]) == UInt8(ascii: "p"), p[lo + 3] == UInt8(ascii: "/") {
            var sp = lo
            while sp < hi, p[sp] != 0x20 { sp += 1 }
            guard let version = SIPVersion.parse(p, lo..<sp) else {
                throw SIPParseError(offset: lo, rule: .sipVersion, detail: "expected SIP/<digits>.<digits>")
            }
            var k = sp + 1
            while k < hi, isDigit(p[k]) { k += 1 }
            guard sp < hi, k > sp + 1 else {
                throw SIPParseError(offset: min(sp + 1, hi), rule: .statusLine, detail: "expected a three-digit status code")
            }
            guard k == sp + 4 else {
                throw SIPParseError(offset: sp + 1, rule: .statusCode, detail: "the status code must have three digits")
            }
            let code = Int(p[sp + 1] - 0x30) * 100 + Int(p[sp + 2] - 0x30) * 10 + Int(p[sp + 3] - 0x30)
            guard (100...699).contains(code) else {
                throw SIPParseError(offset: sp + 1, rule: .statusCode, detail: "status code \(code) is outside 100-699")
            }
            var reasonStart = sp + 4
            if reasonStart < hi {
                guard p[reasonStart] == 0x20 else { throw SIPParseError(offset: reasonStart, rule: .statusLine, detail: "expected SP after the status code") }
                reasonStart += 1
            }
            try checkText(p, reasonStart..<hi, rule: .reasonPhrase)
            return .response(version: version, code: code, reason: reasonStart..<hi)
        }
        var sp1 = lo
        while sp1 < hi, p[sp1] != 0x20 { sp1 += 1 }
        guard sp1 < hi, sp1 > lo else { throw SIPParseError(offset: lo, rule: .requestLine, detail: "expected Method SP Request-URI SP SIP-Version") }
        guard let method = SIPMethod(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: p[lo..<sp1]))) else {
            var k = lo
            while k < sp1, isTokenByte(p[k]) { k += 1 }
            throw SIPParseError(offset: k, rule: .method, detail: "the method must be a token")
        }
        var sp2 = hi
        while sp2 > sp1, p[sp2 - 1] != 0x20 { sp2 -= 1 }
        sp2 -= 1  // index of the last SP
        guard sp2 > sp1 + 1 else { throw SIPParseError(offset: sp1 + 1, rule: .requestLine, detail: "expected Method SP Request-URI SP SIP-Version") }
        let uri = (sp1 + 1)..<sp2
        for k in uri {
            let b = p[k]
            if b <= 0x20 || b == 0x7F { throw SIPParseError(offset: k, rule: .requestLine, detail: "white space or control byte inside the Request-URI") }
        }
        guard let version = SIPVersion.parse(p, (sp2 + 1)..<hi) else {
            throw SIPParseError(offset: sp2 + 1, rule: .sipVersion, detail: "expected SIP/<digits>.<digits> at the end of the request line")
        }
        return .request(method: method, uri: uri, version: version)
    }

    /// Checks that bytes are UTF-8 text without control bytes other than HTAB.
    static func checkText(_ p: UnsafeBufferPointer<UInt8>, _ r: Range<Int>, rule: SIPParseError.Rule) throws(SIPParseError) {
        var ascii = true
        for k in r {
            let b = p[k]
            if b >= 0x80 { ascii = false; continue }
            if b < 0x20 && b != 0x09 || b == 0x7F { throw SIPParseError(offset: k, rule: rule, detail: "control byte 0x\(String(b, radix: 16))") }
        }
        if !ascii {
            var it = UnsafeBufferPointer(rebasing: p[r]).makeIterator()
            var decoder = UTF8()
            var pos = r.lowerBound
            loop: while true {
                switch decoder.decode(&it) {
                case .scalarValue(let s): pos += UTF8.width(s)
                case .emptyInput: break loop
                case .error: throw SIPParseError(offset: pos, rule: rule, detail: "not UTF-8")
                }
            }
        }
    }
}
