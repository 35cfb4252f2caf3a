/// `%HH` escaping of RFC 3261 §25.1 (`escaped = "%" HEXDIG HEXDIG`).
enum PercentEscaping {
    /// Decodes the `%HH` escapes of `b`, checking that every other byte is in `allowed` (with
    /// `keep` false, only checks and returns an empty string: no allocation).
    static func decode(_ b: ArraySlice<UInt8>, allowed: (UInt8) -> Bool, rule: SIPParseError.Rule = .uri, what: String,
                       keep: Bool = true) throws(SIPParseError) -> String {
        // Nothing escaped (the usual case): the text is the bytes, once checked.
        if !b.contains(UInt8(ascii: "%")) {
            if let bad = b.firstIndex(where: { !allowed($0) }) {
                throw SIPParseError(offset: bad, rule: rule, detail: "byte 0x\(String(b[bad], radix: 16)) is not allowed in \(what)")
            }
            return keep ? String(decoding: b, as: UTF8.self) : ""
        }
        var out: [UInt8] = []
        if keep { out.reserveCapacity(b.count) }
        var i = b.startIndex
        while i < b.endIndex {
            let c = b[i]
            if c == UInt8(ascii: "%") {
                guard i + 2 < b.endIndex, let h = hexValue(b[i + 1]), let l = hexValue(b[i + 2]) else {
                    throw SIPParseError(offset: i, rule: .escape, detail: "'%' must be followed by two hex digits in \(what)")
                }
                if keep { out.append(h << 4 | l) }
                i += 3
                continue
            }
            guard allowed(c) else {
                throw SIPParseError(offset: i, rule: rule, detail: "byte 0x\(String(c, radix: 16)) is not allowed in \(what)")
            }
            if keep { out.append(c) }
            i += 1
        }
        return keep ? String(decoding: out, as: UTF8.self) : ""
    }

    @inline(__always) static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - 0x30
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - 0x57
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - 0x37
        default: return nil
        }
    }

    /// Escapes every byte of `s` not in `allowed`.
    static func encode(_ s: String, allowed: (UInt8) -> Bool) -> String {
        // Nothing to escape (the usual case): the text as it is.
        if allUTF8(s, allowed) { return s }
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count + 8)
        append(s, allowed: allowed, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `s` to `out`, escaping every byte not in `allowed`.
    static func append(_ s: String, allowed: (UInt8) -> Bool, to out: inout [UInt8]) {
        func hex(_ v: UInt8) -> UInt8 { v < 10 ? 0x30 + v : 0x37 + v }
        var s = s
        s.withUTF8 { bytes in
            for c in bytes {
                if allowed(c) { out.append(c) } else { out.append(UInt8(ascii: "%")); out.append(hex(c >> 4)); out.append(hex(c & 15)) }
            }
        }
    }

    static func isUserChar(_ c: UInt8) -> Bool { ByteClass.test(c, ByteClass.unreserved | ByteClass.userExtra) }
    static func isPasswordChar(_ c: UInt8) -> Bool { ByteClass.test(c, ByteClass.unreserved | ByteClass.passwordExtra) }
    static func isParamChar(_ c: UInt8) -> Bool { ByteClass.test(c, ByteClass.unreserved | ByteClass.paramExtra) }
    static func isHeaderChar(_ c: UInt8) -> Bool { ByteClass.test(c, ByteClass.unreserved | ByteClass.headerExtra) }
}
