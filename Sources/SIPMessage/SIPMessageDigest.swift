/// Bytes compared and hashed by content, held inline up to 48 bytes (a heap array beyond), so
/// that a Call-ID can key a dictionary without an allocation per message.
public struct SIPByteKey: Sendable, Hashable {
    private var w0: UInt64 = 0, w1: UInt64 = 0, w2: UInt64 = 0, w3: UInt64 = 0, w4: UInt64 = 0, w5: UInt64 = 0
    private var length: Int = 0
    /// A hash of the bytes, computed once (dictionary lookups then hash one word).
    private var mixed: UInt64 = 0
    private var spill: [UInt8]?

    /// The bytes held inline at most.
    public static let inlineCapacity = 48

    /// The empty key.
    public init() { self.init(UnsafeRawBufferPointer(start: nil, count: 0)) }

    /// A key holding a copy of `bytes`.
    public init(_ bytes: ArraySlice<UInt8>) {
        self = bytes.withUnsafeBytes { SIPByteKey($0) }
    }

    /// A key holding a copy of `bytes`.
    public init(_ bytes: UnsafeRawBufferPointer) {
        length = bytes.count
        mixed = SIPMessageDigest.hash64(bytes)
        guard length <= Self.inlineCapacity else {
            spill = Array(bytes)
            return
        }
        var words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &words) { dst in
            if let s = bytes.baseAddress, length > 0 { dst.baseAddress!.copyMemory(from: s, byteCount: length) }
        }
        (w0, w1, w2, w3, w4, w5) = words
    }

    /// Equal bytes.
    public static func == (a: Self, b: Self) -> Bool {
        a.mixed == b.mixed && a.length == b.length && a.w0 == b.w0 && a.w1 == b.w1 && a.w2 == b.w2 && a.w3 == b.w3 && a.w4 == b.w4
            && a.w5 == b.w5 && a.spill == b.spill
    }

    /// Hashes the bytes (through their precomputed hash).
    public func hash(into hasher: inout Hasher) { hasher.combine(mixed) }

    /// The bytes' ``SIPMessageDigest/hash64(_:)``, computed once (for tables that hash by it).
    public var hashWord: UInt64 { mixed }

    /// The number of bytes.
    public var count: Int { length }

    /// The bytes.
    public var bytes: [UInt8] {
        if let spill { return spill }
        let words = (w0, w1, w2, w3, w4, w5)
        return withUnsafeBytes(of: words) { Array($0.prefix(length)) }
    }

    /// The bytes as text (invalid UTF-8 replaced).
    public var string: String { String(decoding: bytes, as: UTF8.self) }
}

/// What a capture summary counts about one SIP message: its start line, Call-ID, CSeq, and the
/// top Via branch, To tag and RSeq that tell a retransmission from a new message.
///
/// ``SIPDigestScanner`` makes one straight from a datagram's bytes — the same parse as
/// ``SIPMessage/init(bytes:limits:)``, so the same datagrams are accepted or refused with the
/// same error, but reading the header index in place instead of building a message (no copy of
/// the bytes, no allocation once its buffers have grown). ``init(_:reasonPhrase:)`` makes the
/// same digest from a parsed message; both extract the fields with the same code.
public struct SIPMessageDigest: Sendable, Hashable {
    /// The request method, or `nil` for a response.
    public var method: SIPMethod?
    /// The status code, or `nil` for a request.
    public var statusCode: Int?
    /// The reason phrase of a response, when it was asked for.
    public var reasonPhrase: String?
    /// The first Call-ID line's bytes, or `nil` without Call-ID.
    public var callID: SIPByteKey?
    /// The CSeq, or `nil` when it is missing or does not parse (as ``SIPMessage/cseq()``).
    public var cseq: CSeq?
    /// ``hash64(_:)`` of the top Via's branch bytes (``SIPMessage/topViaBranchBytes``); 0 without.
    public var branchHash: UInt64
    /// ``hash64(_:)`` of the To tag's bytes (``SIPMessage/toTagBytes``); 0 without.
    public var toTagHash: UInt64
    /// Whether the To header carries a tag.
    public var hasToTag: Bool
    /// The RSeq of a provisional response (0 when absent, repeated or malformed, and for other messages).
    public var rseq: UInt32

    /// The digest of a parsed message; `reasonPhrase` says whether to copy the reason phrase.
    public init(_ m: SIPMessage, reasonPhrase: Bool = true) {
        self = m.storage.withUnsafeBufferPointer { p in
            SIPMessageDigest(p, entries: m.entries, start: m.startIndex, reasonPhrase: { _ in reasonPhrase })
        }
    }

    /// The fields, read from the bytes `p` whose header index is `entries`. The same rules as
    /// ``SIPMessage``'s accessors: the first Call-ID, CSeq, Via and To lines; the CSeq as
    /// ``SIPMessage/cseq()`` reads it; the branch and tag as ``SIPMessage/topViaBranchBytes``
    /// and ``SIPMessage/toTagBytes`` find them; RSeq as ``SIPMessage/rseq()`` (a single line).
    init(_ p: UnsafeBufferPointer<UInt8>, entries: [HeaderEntry], start: StartLineIndex, reasonPhrase wanted: (Int) -> Bool) {
        let method: SIPMethod?, statusCode: Int?, reason: String?
        switch start {
        case .request(let m, _, _): method = m; statusCode = nil; reason = nil
        case .response(_, let code, let r):
            method = nil
            statusCode = code
            reason = wanted(code) ? String(sipBytes: UnsafeBufferPointer(rebasing: p[r])) : nil
        }
        var f = HeaderRanges()
        let provisional = statusCode.map { (100...199).contains($0) } ?? false
        for e in entries { f.note(e.known, e.valueRange, provisional: provisional) }
        self.init(p, method: method, statusCode: statusCode, reasonPhrase: reason, fields: f)
    }

    /// The fields from the value ranges of the headers that matter.
    init(_ p: UnsafeBufferPointer<UInt8>, method: SIPMethod?, statusCode: Int?, reasonPhrase: String?, fields f: HeaderRanges) {
        self.method = method
        self.statusCode = statusCode
        self.reasonPhrase = reasonPhrase
        let callIDValue = f.callID, cseqValue = f.cseq, viaValue = f.via, toValue = f.to, rseqValue = f.rseq, rseqLines = f.rseqLines
        callID = callIDValue.map { SIPByteKey(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: p[$0]))) }
        cseq = cseqValue.flatMap { Self.parseCSeq(UnsafeBufferPointer(rebasing: p[$0])) }
        branchHash = 0
        if let v = viaValue {
            let via = UnsafeBufferPointer(rebasing: p[v])
            if let b = findParameter(via, from: 0, name: "branch"), !b.isEmpty {
                branchHash = Self.hash64(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: via[b])))
            }
        }
        toTagHash = 0
        hasToTag = false
        if let v = toValue {
            let to = UnsafeBufferPointer(rebasing: p[v])
            if let t = SIPMessage.tagParameter(to) {
                toTagHash = Self.hash64(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: to[t])))
                hasToTag = true
            }
        }
        rseq = rseqLines == 1 ? rseqValue.flatMap { Self.parseNumber(UnsafeBufferPointer(rebasing: p[$0]), 0, $0.count, allowTrailing: false)?.0 } ?? 0 : 0
    }

    /// White space as ``Cursor/skipWS()`` skips it (SP, HTAB, CR, LF).
    @inline(__always) private static func isSkippable(_ b: UInt8) -> Bool { isWS(b) || b == 0x0D || b == 0x0A }

    /// `*WS 1*DIGIT` up to 2³²−1 from `i`, then (unless `allowTrailing`) `*WS` to the end, as
    /// ``Cursor`` reads RSeq: the value and the index after the digits; `nil` where it throws.
    private static func parseNumber(_ p: UnsafeBufferPointer<UInt8>, _ from: Int, _ end: Int, allowTrailing: Bool) -> (UInt32, Int)? {
        var i = from
        while i < end, isSkippable(p[i]) { i += 1 }
        let s = i
        var v: UInt64 = 0
        while i < end, isDigit(p[i]) {
            v = v * 10 + UInt64(p[i] - 0x30)
            if v > UInt64(UInt32.max) { return nil }
            i += 1
        }
        guard i > s else { return nil }
        if !allowTrailing {
            var k = i
            while k < end, isSkippable(p[k]) { k += 1 }
            guard k == end else { return nil }
        }
        return (UInt32(v), i)
    }

    /// The CSeq as `CSeq.parse` reads it (number, white space, method token, nothing after);
    /// `nil` where that throws.
    private static func parseCSeq(_ p: UnsafeBufferPointer<UInt8>) -> CSeq? {
        guard let (n, afterDigits) = parseNumber(p, 0, p.count, allowTrailing: true) else { return nil }
        var i = afterDigits
        while i < p.count, isSkippable(p[i]) { i += 1 }
        guard i > afterDigits else { return nil }
        let t = i
        while i < p.count, isTokenByte(p[i]) { i += 1 }
        guard i > t, let m = SIPMethod(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: p[t..<i]))) else { return nil }
        while i < p.count, isSkippable(p[i]) { i += 1 }
        guard i == p.count else { return nil }
        return CSeq(n, m)
    }

    /// A 64-bit hash of the bytes, eight at a time (multiply and xor-shift per word; the length
    /// mixed in last). Not cryptographic: the digest compares branches and tags by this hash,
    /// where two different values colliding is a 2⁻⁶⁴ event.
    public static func hash64(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        @inline(__always) func mix(_ h: UInt64, _ w: UInt64) -> UInt64 {
            let x = (h ^ w) &* 0x9E37_79B9_7F4A_7C15
            return x ^ (x >> 29)
        }
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        let n = bytes.count
        var k = 0
        if let base = bytes.baseAddress {
            while n - k >= 8 {
                h = mix(h, base.loadUnaligned(fromByteOffset: k, as: UInt64.self))
                k &+= 8
            }
            if k < n {
                var tail: UInt64 = 0
                for t in 0..<(n - k) { tail |= UInt64(base.load(fromByteOffset: k + t, as: UInt8.self)) << (8 * UInt64(t)) }
                h = mix(h, tail)
            }
        }
        return mix(h, UInt64(n))
    }

    /// ``hash64(_:)`` of the bytes; 0 for `nil`.
    public static func hash64(_ bytes: ArraySlice<UInt8>?) -> UInt64 {
        guard let bytes else { return 0 }
        return bytes.withUnsafeBytes { hash64($0) }
    }
}

/// Where the values of the headers a digest reads sit: the first Call-ID, CSeq, Via and To
/// lines, and the RSeq lines of a provisional response.
struct HeaderRanges {
    var callID: Range<Int>?, cseq: Range<Int>?, via: Range<Int>?, to: Range<Int>?
    var rseq: Range<Int>?, rseqLines = 0

    @inline(__always) mutating func note(_ known: UInt8, _ value: Range<Int>, provisional: Bool) {
        switch known {
        case KnownHeader.callID.rawValue where callID == nil: callID = value
        case KnownHeader.cseq.rawValue where cseq == nil: cseq = value
        case KnownHeader.via.rawValue where via == nil: via = value
        case KnownHeader.to.rawValue where to == nil: to = value
        case KnownHeader.rseq.rawValue where provisional:
            rseqLines += 1
            rseq = value
        default: break
        }
    }
}

/// Makes ``SIPMessageDigest``s from datagrams, reusing its buffers from one to the next.
public struct SIPDigestScanner: Sendable {
    private var entries: [HeaderEntry] = []
    private var folded: [Int] = []
    /// The parser limits (those of ``SIPMessage/init(bytes:limits:)``).
    public let limits: SIPParserLimits

    /// A scanner.
    public init(limits: SIPParserLimits = .default) {
        self.limits = limits
        entries.reserveCapacity(32)
    }

    /// The digest of the SIP message in a datagram's bytes. `reasonPhrase` is asked, for a
    /// response, whether to copy its reason phrase: once, and only for a message that is
    /// returned (so a caller may note the codes it was asked for).
    /// - Throws: the ``SIPParseError`` that ``SIPMessage/init(bytes:limits:)`` throws for the same bytes.
    public mutating func digest(datagram bytes: ArraySlice<UInt8>, reasonPhrase: (Int) -> Bool) throws(SIPParseError) -> SIPMessageDigest {
        let limits = self.limits
        if let quick = bytes.withUnsafeBufferPointer({ Self.quickDigest($0, limits: limits, reasonPhrase: reasonPhrase) }) { return quick }
        entries.removeAll(keepingCapacity: true)
        folded.removeAll(keepingCapacity: true)
        let result: Result<LayoutStep, SIPParseError> = bytes.withUnsafeBufferPointer { p in
            do throws(SIPParseError) {
                return .success(try SIPMessage.parseLayout(p, from: 0, mode: .datagram, limits: limits, entries: &entries, folded: &folded))
            } catch {
                return .failure(error)
            }
        }
        guard case .complete(let layout) = try result.get() else {
            throw SIPParseError(offset: bytes.count, rule: .incomplete, detail: "no blank line ends the headers")
        }
        // Folded lines are unfolded into a copy by the message; rare enough to take that path.
        if !folded.isEmpty {
            let m = try SIPMessage(bytes: Array(bytes), limits: limits)
            return m.storage.withUnsafeBufferPointer { SIPMessageDigest($0, entries: m.entries, start: m.startIndex, reasonPhrase: reasonPhrase) }
        }
        return bytes.withUnsafeBufferPointer { SIPMessageDigest($0, entries: entries, start: layout.start, reasonPhrase: reasonPhrase) }
    }

    /// The common case read in one pass, without a header index: a datagram within every
    /// parser limit, CRLF line ends, no folding, no leading line breaks, a blank line ending the
    /// headers, at most one Content-Length whose body is present. Whatever this accepts the full
    /// parse accepts, with the same fields (the same start-line, Content-Length and bare-CR
    /// checks; header names recognized long or compact, in any case, as ``KnownHeader`` does);
    /// anything else returns `nil` and takes the full parse, which decides.
    static func quickDigest(_ p: UnsafeBufferPointer<UInt8>, limits: SIPParserLimits, reasonPhrase wanted: (Int) -> Bool) -> SIPMessageDigest? {
        let end = p.count
        guard end > 0, end <= limits.maxLineLength, end <= limits.maxMessageSize, end <= limits.maxBodySize,
              p[0] != 0x0D, p[0] != 0x0A, let firstLF = SIPMessage.findLF(p, 0, end), firstLF > 0, p[firstLF - 1] == 0x0D,
              let start = try? SIPMessage.parseStartLine(p, 0..<(firstLF - 1)) else { return nil }
        let method: SIPMethod?, statusCode: Int?
        switch start {
        case .request(let m, _, _): method = m; statusCode = nil
        case .response(_, let code, _): method = nil; statusCode = code
        }
        let provisional = statusCode.map { (100...199).contains($0) } ?? false
        var f = HeaderRanges()
        var i = firstLF + 1, lines = 0, lineEndCRs = 1, headerEnd = 0
        var contentLength: Int?
        while true {
            guard i < end else { return nil }
            let first = p[i]
            if first == 0x0D {
                guard i + 1 < end, p[i + 1] == 0x0A else { return nil }
                headerEnd = i + 2
                lineEndCRs += 1
                break
            }
            guard first != 0x0A, !isWS(first), let lf = SIPMessage.findLF(p, i, end), p[lf - 1] == 0x0D else { return nil }
            lineEndCRs += 1
            var cEnd = lf - 1
            while cEnd > i, isWS(p[cEnd - 1]) { cEnd -= 1 }
            var j = i
            while j < cEnd, isTokenByte(p[j]) { j += 1 }
            let nameEnd = j
            guard nameEnd > i else { return nil }
            while j < cEnd, isWS(p[j]) { j += 1 }
            guard j < cEnd, p[j] == UInt8(ascii: ":") else { return nil }
            j += 1
            while j < cEnd, isWS(p[j]) { j += 1 }
            lines += 1
            guard lines <= limits.maxHeaderCount else { return nil }
            let known = Self.interesting(p, i, nameEnd)
            if known == KnownHeader.contentLength.rawValue {
                guard contentLength == nil, let cl = try? SIPMessage.parseContentLength(p, j..<cEnd, limits: limits) else { return nil }
                contentLength = cl
            } else if known != 0 {
                f.note(known, j..<cEnd, provisional: provisional)
            }
            i = lf + 1
        }
        guard SIPMessage.countCR(p, 0, headerEnd) == lineEndCRs else { return nil }
        if let cl = contentLength {
            guard cl <= limits.maxBodySize, headerEnd + cl <= end, headerEnd + cl <= limits.maxMessageSize else { return nil }
        }
        // Asked only now that the message is taken (the caller may note that it was asked).
        var reason: String?
        if case .response(_, let code, let r) = start, wanted(code) { reason = String(sipBytes: UnsafeBufferPointer(rebasing: p[r])) }
        return SIPMessageDigest(p, method: method, statusCode: statusCode, reasonPhrase: reason, fields: f)
    }

    /// The ``KnownHeader`` raw value of a header name when it is one the digest reads
    /// (Call-ID, CSeq, Via, To, RSeq) or Content-Length; 0 for any other name.
    @inline(__always)
    static func interesting(_ p: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int) -> UInt8 {
        @inline(__always) func named(_ s: StaticString) -> Bool {
            guard to - from == s.utf8CodeUnitCount else { return false }
            let q = s.utf8Start
            for k in 0..<(to - from) where lowerASCII(p[from + k]) != q[k] { return false }
            return true
        }
        switch to - from {
        case 1:
            switch lowerASCII(p[from]) {
            case UInt8(ascii: "i"): return KnownHeader.callID.rawValue
            case UInt8(ascii: "v"): return KnownHeader.via.rawValue
            case UInt8(ascii: "t"): return KnownHeader.to.rawValue
            case UInt8(ascii: "l"): return KnownHeader.contentLength.rawValue
            default: return 0
            }
        case 2: return named("to") ? KnownHeader.to.rawValue : 0
        case 3: return named("via") ? KnownHeader.via.rawValue : 0
        case 4: return named("cseq") ? KnownHeader.cseq.rawValue : named("rseq") ? KnownHeader.rseq.rawValue : 0
        case 7: return named("call-id") ? KnownHeader.callID.rawValue : 0
        case 14: return named("content-length") ? KnownHeader.contentLength.rawValue : 0
        default: return 0
        }
    }
}
