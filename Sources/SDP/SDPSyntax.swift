// Internal byte-level helpers shared by the parser, the typed attribute
// parsers and the serializer. Everything here works on UTF-8 bytes so that
// splitting never depends on grapheme-cluster boundaries.

/// A syntax failure inside one field, before it is tied to a line and offset.
///
/// `at` is an index into the byte buffer being parsed when known. Typed
/// attribute parsers run on slices of the original input during parsing, so
/// their indices are absolute offsets into the input.
struct FieldError: Error, Sendable {
    var rule: SDPParseError.Rule
    var detail: String
    var at: Int?

    init(_ rule: SDPParseError.Rule, _ detail: String, at: Int? = nil) {
        self.rule = rule
        self.detail = detail
        self.at = at
    }
}

enum ASCII {
    static let nul: UInt8 = 0x00
    static let tab: UInt8 = 0x09
    static let lf: UInt8 = 0x0A
    static let cr: UInt8 = 0x0D
    static let space: UInt8 = 0x20
    static let slash: UInt8 = 0x2F
    static let colon: UInt8 = 0x3A
    static let semicolon: UInt8 = 0x3B
    static let equals: UInt8 = 0x3D
    static let dot: UInt8 = 0x2E
    static let dash: UInt8 = 0x2D
    static let underscore: UInt8 = 0x5F
    static let pipe: UInt8 = 0x7C
    static let caret: UInt8 = 0x5E

    @inline(__always) static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }
    @inline(__always) static func isAlpha(_ b: UInt8) -> Bool {
        (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
    }
    @inline(__always) static func isAlphanumeric(_ b: UInt8) -> Bool { isDigit(b) || isAlpha(b) }
    @inline(__always) static func isHexDigit(_ b: UInt8) -> Bool {
        isDigit(b) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66)
    }
    @inline(__always) static func isLowercaseLetter(_ b: UInt8) -> Bool { b >= 0x61 && b <= 0x7A }
    @inline(__always) static func isWhitespace(_ b: UInt8) -> Bool { b == space || b == tab }

    /// RFC 8866 `token-char`: visible US-ASCII except separators.
    @inline(__always) static func isTokenChar(_ b: UInt8) -> Bool {
        switch b {
        case 0x21, 0x23...0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x30...0x39, 0x41...0x5A, 0x5E...0x7E:
            return true
        default:
            return false
        }
    }
}

enum Syntax {
    /// Converts validated UTF-8 bytes into a `String`.
    @inline(__always) static func string(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    /// Splits on runs of spaces (and tabs when `tabs` is true), dropping empty pieces.
    static func fields(_ bytes: ArraySlice<UInt8>, tabs: Bool = false) -> [ArraySlice<UInt8>] {
        var result: [ArraySlice<UInt8>] = []
        // One allocation for the usual lines (o= has six fields, m= four or more): not one per
        // doubling.
        result.reserveCapacity(8)
        var start: Int? = nil
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let b = bytes[i]
            let isSeparator = b == ASCII.space || (tabs && b == ASCII.tab)
            if isSeparator {
                if let s = start {
                    result.append(bytes[s..<i])
                    start = nil
                }
            } else if start == nil {
                start = i
            }
            i += 1
        }
        if let s = start { result.append(bytes[s..<bytes.endIndex]) }
        return result
    }

    /// Splits on every occurrence of `separator`, keeping empty pieces.
    static func split(_ bytes: ArraySlice<UInt8>, on separator: UInt8) -> [ArraySlice<UInt8>] {
        var result: [ArraySlice<UInt8>] = []
        result.reserveCapacity(4)
        var start = bytes.startIndex
        var i = bytes.startIndex
        while i < bytes.endIndex {
            if bytes[i] == separator {
                result.append(bytes[start..<i])
                start = i + 1
            }
            i += 1
        }
        result.append(bytes[start..<bytes.endIndex])
        return result
    }

    /// Splits at the first occurrence of `separator`; the second part is nil if it is absent.
    static func splitOnce(
        _ bytes: ArraySlice<UInt8>, on separator: UInt8
    ) -> (ArraySlice<UInt8>, ArraySlice<UInt8>?) {
        guard let i = bytes.firstIndex(of: separator) else { return (bytes, nil) }
        return (bytes[bytes.startIndex..<i], bytes[(i + 1)..<bytes.endIndex])
    }

    /// Removes leading and trailing spaces and tabs.
    static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var lo = bytes.startIndex
        var hi = bytes.endIndex
        while lo < hi, ASCII.isWhitespace(bytes[lo]) { lo += 1 }
        while hi > lo, ASCII.isWhitespace(bytes[hi - 1]) { hi -= 1 }
        return bytes[lo..<hi]
    }

    /// Removes trailing spaces and tabs.
    static func trailingTrimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var hi = bytes.endIndex
        while hi > bytes.startIndex, ASCII.isWhitespace(bytes[hi - 1]) { hi -= 1 }
        return bytes[bytes.startIndex..<hi]
    }

    static func isToken(_ bytes: ArraySlice<UInt8>) -> Bool {
        !bytes.isEmpty && bytes.allSatisfy(ASCII.isTokenChar)
    }

    /// RFC 8866 `non-ws-string`: one or more visible characters or non-ASCII bytes.
    static func isNonWhitespaceString(_ bytes: ArraySlice<UInt8>) -> Bool {
        !bytes.isEmpty && bytes.allSatisfy { $0 > 0x20 && $0 != 0x7F }
    }

    static func isAllDigits(_ bytes: ArraySlice<UInt8>) -> Bool {
        !bytes.isEmpty && bytes.allSatisfy(ASCII.isDigit)
    }

    /// Parses an unsigned decimal number made only of ASCII digits, with overflow checks.
    /// Returns nil for an empty field, a non-digit, or a value that does not fit in `T`.
    static func decimal<T: FixedWidthInteger & UnsignedInteger>(
        _ bytes: ArraySlice<UInt8>, as type: T.Type = T.self
    ) -> T? {
        guard !bytes.isEmpty else { return nil }
        var value: T = 0
        for b in bytes {
            guard ASCII.isDigit(b) else { return nil }
            let (shifted, o1) = value.multipliedReportingOverflow(by: 10)
            if o1 { return nil }
            let (sum, o2) = shifted.addingReportingOverflow(T(b &- 0x30))
            if o2 { return nil }
            value = sum
        }
        return value
    }

    /// Parses a decimal number, throwing a `FieldError` that says whether the
    /// field was not a number or out of range.
    static func number<T: FixedWidthInteger & UnsignedInteger>(
        _ bytes: ArraySlice<UInt8>, _ what: String, rule: SDPParseError.Rule,
        max: T = T.max, as type: T.Type = T.self
    ) throws(FieldError) -> T {
        guard isAllDigits(bytes) else {
            throw FieldError(rule, "\(what) is not a decimal number: \"\(string(bytes))\"", at: bytes.startIndex)
        }
        guard let value = decimal(bytes, as: T.self), value <= max else {
            throw FieldError(rule, "\(what) is out of range: \(string(bytes))", at: bytes.startIndex)
        }
        return value
    }

    /// Returns the index of the first byte that starts an invalid UTF-8
    /// sequence (overlong forms, surrogates and code points above U+10FFFF are
    /// invalid), or nil when the bytes are valid UTF-8.
    static func firstInvalidUTF8(_ bytes: ArraySlice<UInt8>) -> Int? {
        var i = bytes.startIndex
        let end = bytes.endIndex
        while i < end {
            let lead = bytes[i]
            if lead < 0x80 {
                i += 1
                continue
            }
            let need: Int
            var scalar: UInt32
            let minimum: UInt32
            if lead & 0xE0 == 0xC0 {
                need = 1; scalar = UInt32(lead & 0x1F); minimum = 0x80
            } else if lead & 0xF0 == 0xE0 {
                need = 2; scalar = UInt32(lead & 0x0F); minimum = 0x800
            } else if lead & 0xF8 == 0xF0 {
                need = 3; scalar = UInt32(lead & 0x07); minimum = 0x10000
            } else {
                return i
            }
            guard end - i > need else { return i }
            for k in 1...need {
                let c = bytes[i + k]
                guard c & 0xC0 == 0x80 else { return i }
                scalar = (scalar << 6) | UInt32(c & 0x3F)
            }
            if scalar < minimum || scalar > 0x10FFFF || (scalar >= 0xD800 && scalar <= 0xDFFF) {
                return i
            }
            i += need + 1
        }
        return nil
    }

    /// Appends the UTF-8 bytes of `string` to `buffer`.
    @inline(__always) static func append(_ string: String, to buffer: inout [UInt8]) {
        buffer.append(contentsOf: string.utf8)
    }
}
