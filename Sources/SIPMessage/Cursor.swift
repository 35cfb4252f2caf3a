#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// Splits a header value at commas outside quoted strings and angle brackets, trimming white
/// space around each element. Empty elements are kept so decoders can reject them.
func splitHeaderList(_ bytes: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
    var out: [ArraySlice<UInt8>] = []
    out.reserveCapacity(2)
    forEachListElement(bytes) { out.append($0); return true }
    return out
}

/// Calls `body` with each element of a header value (as ``splitHeaderList(_:)`` cuts them),
/// without collecting them; `body` returns false to stop. Returns false when it stopped early.
@discardableResult
func forEachListElement<E: Error>(_ bytes: ArraySlice<UInt8>, _ body: (ArraySlice<UInt8>) throws(E) -> Bool) throws(E) -> Bool {
    var start = bytes.startIndex
    var i = start
    var inQuotes = false, angle = 0
    func trimmed(_ r: Range<Int>) -> ArraySlice<UInt8> {
        var lo = r.lowerBound, hi = r.upperBound
        while lo < hi, isWS(bytes[lo]) { lo += 1 }
        while hi > lo, isWS(bytes[hi - 1]) { hi -= 1 }
        return bytes[lo..<hi]
    }
    while i < bytes.endIndex {
        let b = bytes[i]
        if inQuotes {
            if b == UInt8(ascii: "\\") { i += 2; continue }
            if b == UInt8(ascii: "\"") { inQuotes = false }
        } else {
            switch b {
            case UInt8(ascii: "\""): inQuotes = true
            case UInt8(ascii: "<"): angle += 1
            case UInt8(ascii: ">"): if angle > 0 { angle -= 1 }
            case UInt8(ascii: ","):
                if angle == 0 {
                    guard try body(trimmed(start..<i)) else { return false }
                    start = i + 1
                }
            default: break
            }
        }
        i += 1
    }
    return try body(trimmed(start..<min(i, bytes.endIndex)))
}

/// A read position over a slice of message bytes; offsets in its errors are the slice's
/// indices, which for message storage are offsets into the message.
struct Cursor {
    let bytes: ArraySlice<UInt8>
    var i: Int
    let end: Int

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        i = bytes.startIndex
        end = bytes.endIndex
    }

    var atEnd: Bool { i >= end }
    var peek: UInt8? { i < end ? bytes[i] : nil }

    func error(_ rule: SIPParseError.Rule, _ detail: String) -> SIPParseError {
        SIPParseError(offset: i, rule: rule, detail: detail)
    }

    mutating func skipWS() { while i < end, isWS(bytes[i]) || bytes[i] == 0x0D || bytes[i] == 0x0A { i += 1 } }

    /// Consumes `b` (with white space around it) when it is next.
    mutating func consume(_ b: UInt8) -> Bool {
        var j = i
        while j < end, isWS(bytes[j]) { j += 1 }
        guard j < end, bytes[j] == b else { return false }
        j += 1
        while j < end, isWS(bytes[j]) { j += 1 }
        i = j
        return true
    }

    mutating func expect(_ b: UInt8, _ rule: SIPParseError.Rule, _ what: String) throws(SIPParseError) {
        guard consume(b) else { throw error(rule, "expected \(what)") }
    }

    /// Consumes a run of bytes for which `pred` holds.
    mutating func take(while pred: (UInt8) -> Bool) -> ArraySlice<UInt8> {
        let s = i
        while i < end, pred(bytes[i]) { i += 1 }
        return bytes[s..<i]
    }

    mutating func token() -> ArraySlice<UInt8> { take(while: isTokenByte) }

    /// A token, as text (with `keep` false, only checked: an empty string comes back).
    mutating func requireToken(_ rule: SIPParseError.Rule, _ what: String, keep: Bool = true) throws(SIPParseError) -> String {
        let t = token()
        guard !t.isEmpty else { throw error(rule, "expected \(what)") }
        return keep ? String(sipBytes: t) : ""
    }

    /// Reads a quoted string (the cursor at its opening quote) and returns its unescaped text
    /// (with `keep` false, only checks it and returns an empty string: no allocation).
    mutating func quotedString(_ rule: SIPParseError.Rule = .quotedString, keep: Bool = true) throws(SIPParseError) -> String {
        guard peek == UInt8(ascii: "\"") else { throw error(rule, "expected a quoted string") }
        let open = i
        i += 1
        var out: [UInt8] = []
        while i < end {
            let b = bytes[i]
            if b == UInt8(ascii: "\\") {
                guard i + 1 < end, bytes[i + 1] <= 0x7F, bytes[i + 1] != 0x0A, bytes[i + 1] != 0x0D else {
                    throw SIPParseError(offset: i, rule: .quotedString, detail: "bad escape in quoted string")
                }
                if keep { out.append(bytes[i + 1]) }
                i += 2
                continue
            }
            if b == UInt8(ascii: "\"") {
                i += 1
                return keep ? String(sipBytes: out) : ""
            }
            if b < 0x20 && b != 0x09 && b != 0x0D && b != 0x0A || b == 0x7F {
                throw SIPParseError(offset: i, rule: .quotedString, detail: "control byte inside a quoted string")
            }
            if keep { out.append(b) }
            i += 1
        }
        throw SIPParseError(offset: open, rule: .quotedString, detail: "quoted string is not terminated")
    }

    /// Reads a decimal number of at most `max`.
    mutating func number(max: UInt64, _ rule: SIPParseError.Rule, _ what: String) throws(SIPParseError) -> UInt64 {
        let s = i
        var v: UInt64 = 0
        while i < end, isDigit(bytes[i]) {
            let (m, o1) = v.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(UInt64(bytes[i] - 0x30))
            if o1 || o2 || a > max { throw SIPParseError(offset: s, rule: rule, detail: "\(what) is larger than \(max)") }
            v = a
            i += 1
        }
        guard i > s else { throw SIPParseError(offset: s, rule: rule, detail: "expected \(what)") }
        return v
    }

    /// Reads `*( SEMI generic-param )` up to the end or up to a byte in `stop`.
    /// - Parameters:
    ///   - keep: false only checks the grammar and returns no parameters (no allocation).
    ///   - check: sees each parameter's name and value bytes (a quoted value without its
    ///     quotes, escapes as written; nil without `=`) and the offset of its name, to check
    ///     values on the bytes whether or not they are kept.
    mutating func parameters(_ rule: SIPParseError.Rule, keep: Bool = true,
                             check: ((ArraySlice<UInt8>, ArraySlice<UInt8>?, Int) throws(SIPParseError) -> Void)? = nil)
        throws(SIPParseError) -> SIPParameters
    {
        var params = SIPParameters()
        while consume(UInt8(ascii: ";")) {
            // One allocation of the right size (parsed parameters are kept in dialogs, so no
            // spare room): one slot per ';' left, quoted ones included.
            if keep, params.items.isEmpty { params.reserve(1 + bytes[i..<end].reduce(0) { $1 == UInt8(ascii: ";") ? $0 + 1 : $0 }) }
            let nameStart = i
            let name = token()
            guard !name.isEmpty else { throw SIPParseError(offset: nameStart, rule: .parameter, detail: "empty parameter name") }
            var value: String? = nil
            var raw: ArraySlice<UInt8>? = nil
            var quoted = false
            if consume(UInt8(ascii: "=")) {
                if peek == UInt8(ascii: "\"") {
                    let open = i
                    value = try quotedString(keep: keep)
                    raw = bytes[(open + 1)..<(i - 1)]
                    quoted = true
                } else if peek == UInt8(ascii: "[") {
                    // IPv6 reference (received=[2001:db8::9]).
                    let v = take { $0 != UInt8(ascii: "]") && $0 != UInt8(ascii: ";") && !isWS($0) && $0 != UInt8(ascii: ",") }
                    guard peek == UInt8(ascii: "]") else { throw error(.parameter, "unterminated IPv6 reference in parameter") }
                    i += 1
                    raw = bytes[v.startIndex..<i]
                    if keep { value = String(sipBytes: v) + "]" }
                } else {
                    let v = take { isTokenByte($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "[") || $0 == UInt8(ascii: "]") }
                    guard !v.isEmpty else { throw error(.parameter, "empty value for parameter \(String(sipBytes: name))") }
                    raw = v
                    if keep { value = String(sipBytes: v) }
                }
            }
            try check?(name, raw, nameStart)
            if keep { params.append(SIPParameter(name: String(sipBytes: name), value: value, quoted: quoted)) }
        }
        return params
    }

    mutating func requireEnd(_ rule: SIPParseError.Rule, _ what: String) throws(SIPParseError) {
        skipWS()
        guard atEnd else { throw error(rule, "unexpected byte 0x\(String(bytes[i], radix: 16)) \(what)") }
    }
}

/// Finds `;name=value` among the parameters that start at `from`, without allocating.
/// Returns an empty slice for a parameter without a value, `nil` when absent. The search stops
/// at a comma outside quotes (the next list element).
func findParameter(_ bytes: ArraySlice<UInt8>, from: Int, name: StaticString) -> ArraySlice<UInt8>? {
    let found: Range<Int>? = bytes.withUnsafeBufferPointer { p in findParameter(p, from: from - bytes.startIndex, name: name) }
    guard let r = found else { return nil }
    return bytes[(bytes.startIndex + r.lowerBound)..<(bytes.startIndex + r.upperBound)]
}

/// ``findParameter(_:from:name:)`` over a buffer: the value's range in `p`.
func findParameter(_ p: UnsafeBufferPointer<UInt8>, from: Int, name: StaticString) -> Range<Int>? {
    do {
        let end = p.count
        var i = from
        let nameLength = name.utf8CodeUnitCount
        let namePtr = name.utf8Start
        while i < end {
            // The next ';' outside quotes. Fast paths: already at one (the parameters after a
            // From/To's '>', or after a value); when no quote and no comma comes before the
            // next ';', jump straight to it.
            // With no ';' left there is no parameter left.
            if p[i] != 0x3B {
                guard let semi = memchrIndex(p, 0x3B, i, end) else { return nil }
                if memchrIndex(p, 0x22, i, semi) == nil {
                    if memchrIndex(p, 0x2C, i, semi) != nil { return nil }
                    i = semi
                }
            }
            var inQuotes = false
            while i < end {
                let b = p[i]
                if inQuotes {
                    if b == 0x5C { i &+= 1 } else if b == 0x22 { inQuotes = false }
                } else if b == 0x3B {
                    break
                } else if b == 0x22 {
                    inQuotes = true
                } else if b == 0x2C {
                    return nil
                }
                i &+= 1
            }
            guard i < end else { return nil }
            i &+= 1
            while i < end, isWS(p[i]) { i &+= 1 }
            let ns = i
            while i < end, isTokenByte(p[i]) { i &+= 1 }
            var matches = i - ns == nameLength
            if matches {
                for k in 0..<nameLength where lowerASCII(p[ns + k]) != namePtr[k] { matches = false; break }
            }
            while i < end, isWS(p[i]) { i &+= 1 }
            guard matches else { continue }
            guard i < end, p[i] == 0x3D else { return i..<i }
            i &+= 1
            while i < end, isWS(p[i]) { i &+= 1 }
            if i < end, p[i] == 0x22 {
                // A quoted value: return what is inside the quotes.
                let vs = i + 1
                i = vs
                while i < end, p[i] != 0x22 { if p[i] == 0x5C { i &+= 1 }; i &+= 1 }
                return vs..<min(i, end)
            }
            return i..<parameterValueEnd(p, i, end)
        }
        return nil
    }
}

/// The index of the first ';', ',', SP or HTAB in `p[from..<end]` (`end` when none): where an
/// unquoted parameter value stops. Eight bytes at a time; the last few by one load of the
/// eight bytes before `end` when there are that many (a tag or branch value, 10 to 40
/// bytes, usually ends the buffer).
@inline(__always)
func parameterValueEnd(_ p: UnsafeBufferPointer<UInt8>, _ from: Int, _ end: Int) -> Int {
    var i = from
    guard let base = p.baseAddress else { return i }
    let raw = UnsafeRawPointer(base)
    @inline(__always) func stops(_ at: Int) -> UInt64 {
        let w = UInt64(littleEndian: (raw + at).loadUnaligned(as: UInt64.self))
        return swarEqualBytes(w, 0x3B) | swarEqualBytes(w, 0x2C) | swarEqualBytes(w, 0x20) | swarEqualBytes(w, 0x09)
    }
    while end &- i >= 8 {
        let m = stops(i)
        if m != 0 { return i &+ (m.trailingZeroBitCount &>> 3) }
        i &+= 8
    }
    guard i < end else { return end }
    if end >= 8 {
        // The word ending at `end`, without the bytes before `i` (the marks are exact per byte).
        let m = stops(end &- 8) &>> UInt64((i &- (end &- 8)) &* 8)
        return m != 0 ? i &+ (m.trailingZeroBitCount &>> 3) : end
    }
    while i < end, p[i] != 0x3B, p[i] != 0x2C, !isWS(p[i]) { i &+= 1 }
    return i
}

/// The high bit of each byte of `w` that equals `b`, and of no other byte (no carry crosses
/// bytes): the first such byte of a little-endian word is `trailingZeroBitCount / 8`.
@inline(__always)
func swarEqualBytes(_ w: UInt64, _ b: UInt8) -> UInt64 {
    let x = w ^ (0x0101_0101_0101_0101 &* UInt64(b))
    let low = (x & 0x7F7F_7F7F_7F7F_7F7F) &+ 0x7F7F_7F7F_7F7F_7F7F
    return ~(low | x) & 0x8080_8080_8080_8080
}

/// Byte-level helpers for hot paths in the layers above.
public enum SIPBytes {
    /// The value of `;name=value` in one header element (`name` in lower case): an empty slice
    /// for a flag parameter, `nil` when absent. Parameters start after the first `;`, so call
    /// it on a Via or on the part of a From/To after `>`.
    public static func parameter(_ name: StaticString, in element: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        findParameter(element, from: element.startIndex, name: name)
    }
}

/// The index of the first `byte` in `p[from..<to]`, by `memchr`.
@inline(__always)
func memchrIndex(_ p: UnsafeBufferPointer<UInt8>, _ byte: UInt8, _ from: Int, _ to: Int) -> Int? {
    guard from < to, let base = p.baseAddress, let hit = memchr(base + from, Int32(byte), to - from) else { return nil }
    return base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
}
