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

/// The classes the quick scanners test per byte, as one flag byte per ASCII byte in a
/// constant table: one load and one test per byte, where two 64-bit maps took two range
/// checks and a shift. Bytes of 128 and above are in no class.
@usableFromInline
enum ASCIIClass {
    static let token: UInt8 = 1   // token
    static let user: UInt8 = 2    // unreserved / user-unreserved
    static let param: UInt8 = 4   // unreserved / param-unreserved
    static let word: UInt8 = 8    // word (Call-ID)
    static let alnum: UInt8 = 16  // alphanum

    /// Bytes 0-127, sixteen per line (generated from the RFC 3261 classes; the tests compare
    /// it with ``ByteClass``).
    static let flags: StaticString = """
        \u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\
        \u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\u{00}\
        \u{00}\u{0F}\u{08}\u{00}\u{06}\u{09}\u{06}\u{0F}\u{0E}\u{0E}\u{0F}\u{0F}\u{02}\u{0F}\u{0F}\u{0E}\
        \u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{0C}\u{02}\u{08}\u{02}\u{08}\u{0A}\
        \u{00}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\
        \u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{0C}\u{08}\u{0C}\u{00}\u{0F}\
        \u{09}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\
        \u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{1F}\u{08}\u{00}\u{08}\u{0F}\u{00}
        """

    @inline(__always) static func test(_ b: UInt8, _ mask: UInt8) -> Bool {
        b < 128 && flags.utf8Start[Int(b)] & mask != 0
    }
}

/// token = 1*(alphanum / "-" / "." / "!" / "%" / "*" / "_" / "+" / "`" / "'" / "~").
@inline(__always) func isTokenByte(_ b: UInt8) -> Bool { ASCIIClass.test(b, ASCIIClass.token) }

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

/// Whether every UTF-8 byte of `s` passes `test`, read from its contiguous bytes (iterating the
/// `utf8` view cost ~20 instructions a byte, on every response built).
@inline(__always) func allUTF8(_ s: String, _ test: (UInt8) -> Bool) -> Bool {
    var s = s
    return s.withUTF8 { b in
        for c in b where !test(c) { return false }
        return true
    }
}
