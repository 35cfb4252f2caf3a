/// Character classes of RFC 3261 §25.1, as a 256-entry bit table.
@usableFromInline
enum ByteClass {
    static let token: UInt16 = 1 << 0          // token
    static let unreserved: UInt16 = 1 << 1     // alphanum / mark
    static let userExtra: UInt16 = 1 << 2      // user-unreserved
    static let passwordExtra: UInt16 = 1 << 3  // "&" / "=" / "+" / "$" / ","
    static let paramExtra: UInt16 = 1 << 4     // param-unreserved
    static let headerExtra: UInt16 = 1 << 5    // hnv-unreserved
    static let word: UInt16 = 1 << 6           // word (Call-ID)
    static let hostChar: UInt16 = 1 << 7       // alphanum / "-" / "."
    static let digit: UInt16 = 1 << 8
    static let hex: UInt16 = 1 << 9
    static let alpha: UInt16 = 1 << 10
    static let telChar: UInt16 = 1 << 11       // characters of a tel: number and its parameters

    static let table: [UInt16] = {
        var t = [UInt16](repeating: 0, count: 256)
        func add(_ chars: String, _ bit: UInt16) { for c in chars.utf8 { t[Int(c)] |= bit } }
        let lower = "abcdefghijklmnopqrstuvwxyz", upper = lower.uppercased(), digits = "0123456789"
        let alnum = lower + upper + digits
        add(alnum + "-.!%*_+`'~", token)
        add(alnum + "-_.!~*'()", unreserved)
        add("&=+$,;?/", userExtra)
        add("&=+$,", passwordExtra)
        add("[]/:&+$", paramExtra)
        add("[]/?:+$", headerExtra)
        add(alnum + "-.!%*_+`'~()<>:\\\"/[]?{}", word)
        add(alnum + "-.", hostChar)
        add(digits, digit)
        add(digits + "abcdefABCDEF", hex)
        add(lower + upper, alpha)
        add(alnum + "-.()+*#;=%:/&$,?!~_'[]", telChar)
        return t
    }()

    @inline(__always) static func test(_ byte: UInt8, _ bits: UInt16) -> Bool { table[Int(byte)] & bits != 0 }
}

/// token = 1*(alphanum / "-" / "." / "!" / "%" / "*" / "_" / "+" / "`" / "'" / "~"), tested
/// against a 128-bit map.
@inline(__always) func isTokenByte(_ b: UInt8) -> Bool {
    // Bytes 0-63: digits and - . ! % * + ' ; bytes 64-127: letters and _ ` ~.
    let low: UInt64 = 0x03FF_6CA2_0000_0000   // '!'(33) '%'(37) '\''(39) '*'(42) '+'(43) '-'(45) '.'(46) '0'-'9'(48-57)
    let high: UInt64 = 0x47FF_FFFF_87FF_FFFE  // 'A'-'Z'(65-90) '_'(95) '`'(96) 'a'-'z'(97-122) '~'(126)
    if b < 64 { return (low >> UInt64(b)) & 1 != 0 }
    if b < 128 { return (high >> UInt64(b &- 64)) & 1 != 0 }
    return false
}

@inline(__always) func isWS(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 }
@inline(__always) func isDigit(_ b: UInt8) -> Bool { b &- 0x30 < 10 }
@inline(__always) func lowerASCII(_ b: UInt8) -> UInt8 { (b &- 0x41) < 26 ? b | 0x20 : b }

/// Case-insensitive comparison of bytes with an ASCII string given in lower case.
@inline(__always) func equalsLowercased<C: Collection>(_ bytes: C, _ lower: StaticString) -> Bool where C.Element == UInt8 {
    guard bytes.count == lower.utf8CodeUnitCount else { return false }
    var p = lower.utf8Start
    for b in bytes {
        if lowerASCII(b) != p.pointee { return false }
        p += 1
    }
    return true
}

extension String {
    /// Creates a string from bytes that must be UTF-8; invalid sequences are replaced.
    @inline(__always) init<C: Collection>(sipBytes: C) where C.Element == UInt8 {
        self = String(decoding: sipBytes, as: UTF8.self)
    }
}
