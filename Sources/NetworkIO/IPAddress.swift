/// An IPv4 address, as carried by an A record (RFC 1035 §3.4.1).
public struct IPv4Address: Sendable, Hashable, CustomStringConvertible {
    /// The address as a 32-bit number (the first octet in the most significant byte).
    public var value: UInt32

    /// Creates an address from its 32-bit value.
    public init(_ value: UInt32) { self.value = value }

    /// Creates an address from four octets in network order.
    public init(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) {
        value = UInt32(a) << 24 | UInt32(b) << 16 | UInt32(c) << 8 | UInt32(d)
    }

    /// Parses dotted-quad text (`192.0.2.1`): four decimal parts of at most three digits, each
    /// at most 255. Returns `nil` for anything else.
    public init?(_ text: String) {
        guard let v = IPv4Address.parse(ArraySlice(text.utf8)) else { return nil }
        value = v
    }

    /// The four octets in network order.
    public var bytes: [UInt8] {
        [UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
         UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
    }

    /// Dotted-quad text.
    public var description: String {
        bytes.map { String($0) }.joined(separator: ".")
    }

    package static func parse(_ b: ArraySlice<UInt8>) -> UInt32? {
        var result: UInt32 = 0
        var parts = 0, part = 0, digits = 0
        for c in b {
            if c == UInt8(ascii: ".") {
                guard digits > 0, parts < 3 else { return nil }
                result = result << 8 | UInt32(part)
                parts += 1; part = 0; digits = 0
            } else if c >= 0x30, c <= 0x39 {
                guard digits < 3 else { return nil }
                part = part * 10 + Int(c - 0x30); digits += 1
                guard part <= 255 else { return nil }
            } else {
                return nil
            }
        }
        guard parts == 3, digits > 0 else { return nil }
        return result << 8 | UInt32(part)
    }
}

/// An IPv6 address, as carried by an AAAA record (RFC 3596 §2.2).
public struct IPv6Address: Sendable, Hashable, CustomStringConvertible {
    /// The first 64 bits (the first octet in the most significant byte).
    public var high: UInt64
    /// The last 64 bits.
    public var low: UInt64

    /// Creates an address from its two halves.
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Creates an address from 16 octets in network order; `nil` when there are not 16.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 16 else { return nil }
        var h: UInt64 = 0, l: UInt64 = 0
        for (i, b) in bytes.enumerated() {
            if i < 8 { h = h << 8 | UInt64(b) } else { l = l << 8 | UInt64(b) }
        }
        high = h
        low = l
    }

    /// Parses IPv6 text (RFC 4291 §2.2): eight groups of one to four hex digits, one `::`
    /// standing for one or more zero groups, and an optional dotted-quad tail. Brackets and
    /// zone identifiers (`%eth0`) are not accepted.
    public init?(_ text: String) {
        guard let groups = IPv6Address.parse(ArraySlice(text.utf8)) else { return nil }
        var h: UInt64 = 0, l: UInt64 = 0
        for i in 0..<4 { h = h << 16 | UInt64(groups[i]) }
        for i in 4..<8 { l = l << 16 | UInt64(groups[i]) }
        high = h
        low = l
    }

    /// The 16 octets in network order.
    public var bytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(16)
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: high >> UInt64(shift))) }
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: low >> UInt64(shift))) }
        return out
    }

    /// The eight 16-bit groups.
    var groups: [UInt16] {
        var g = [UInt16]()
        g.reserveCapacity(8)
        for shift in stride(from: 48, through: 0, by: -16) { g.append(UInt16(truncatingIfNeeded: high >> UInt64(shift))) }
        for shift in stride(from: 48, through: 0, by: -16) { g.append(UInt16(truncatingIfNeeded: low >> UInt64(shift))) }
        return g
    }

    /// The canonical text form of RFC 5952: lower-case hex without leading zeros, the longest
    /// run of two or more zero groups (the first, on a tie) written `::`, and IPv4-mapped
    /// addresses written with a dotted-quad tail (`::ffff:192.0.2.1`).
    public var description: String {
        let g = groups
        if high == 0, low >> 32 == 0xFFFF {
            return "::ffff:" + IPv4Address(UInt32(truncatingIfNeeded: low)).description
        }
        var bestStart = -1, bestLength = 0
        var i = 0
        while i < 8 {
            if g[i] == 0 {
                var j = i
                while j < 8, g[j] == 0 { j += 1 }
                if j - i > bestLength, j - i >= 2 { bestStart = i; bestLength = j - i }
                i = j
            } else {
                i += 1
            }
        }
        var s = ""
        i = 0
        while i < 8 {
            if i == bestStart {
                s += "::"
                i += bestLength
                continue
            }
            if !s.isEmpty, !s.hasSuffix(":") { s += ":" }
            s += String(g[i], radix: 16)
            i += 1
        }
        return s
    }

    static func parse(_ b: ArraySlice<UInt8>) -> [UInt16]? {
        guard !b.isEmpty, b.count <= 45 else { return nil }
        var head = [UInt16](), tail = [UInt16]()
        var sawDoubleColon = false
        var i = b.startIndex
        let end = b.endIndex
        func hexValue(_ c: UInt8) -> UInt16? {
            switch c {
            case 0x30...0x39: return UInt16(c - 0x30)
            case 0x61...0x66: return UInt16(c - 0x61 + 10)
            case 0x41...0x46: return UInt16(c - 0x41 + 10)
            default: return nil
            }
        }
        if b[i] == UInt8(ascii: ":") {
            guard i + 1 < end, b[i + 1] == UInt8(ascii: ":") else { return nil }
            sawDoubleColon = true
            i += 2
        }
        while i < end {
            // One group: hex digits, or a dotted-quad tail taking two groups.
            var j = i
            var value: UInt16 = 0
            while j < end, j - i < 5, let h = hexValue(b[j]) { value = value << 4 | h; j += 1 }
            if j < end, b[j] == UInt8(ascii: ".") {
                guard let v4 = IPv4Address.parse(b[i..<end]) else { return nil }
                let hi = UInt16(truncatingIfNeeded: v4 >> 16), lo = UInt16(truncatingIfNeeded: v4)
                if sawDoubleColon { tail += [hi, lo] } else { head += [hi, lo] }
                i = end
                break
            }
            guard j > i, j - i <= 4 else { return nil }
            if sawDoubleColon { tail.append(value) } else { head.append(value) }
            guard head.count + tail.count <= 8 else { return nil }
            i = j
            if i == end { break }
            guard b[i] == UInt8(ascii: ":") else { return nil }
            i += 1
            if i < end, b[i] == UInt8(ascii: ":") {
                guard !sawDoubleColon else { return nil }
                sawDoubleColon = true
                i += 1
            } else if i == end {
                return nil
            }
        }
        let count = head.count + tail.count
        if sawDoubleColon {
            guard count <= 7 else { return nil }
            return head + [UInt16](repeating: 0, count: 8 - count) + tail
        }
        guard count == 8 else { return nil }
        return head
    }
}

/// An IPv4 or IPv6 address.
public enum IPAddress: Sendable, Hashable, CustomStringConvertible {
    /// An IPv4 address.
    case v4(IPv4Address)
    /// An IPv6 address.
    case v6(IPv6Address)

    /// Parses IPv4 or IPv6 text; IPv6 may be written inside brackets (`[2001:db8::1]`).
    public init?(_ text: String) {
        if let v4 = IPv4Address(text) {
            self = .v4(v4)
            return
        }
        var t = Substring(text)
        if t.hasPrefix("["), t.hasSuffix("]"), t.count >= 2 { t = t.dropFirst().dropLast() }
        guard let v6 = IPv6Address(String(t)) else { return nil }
        self = .v6(v6)
    }

    /// An address from its network-order bytes: 4 give IPv4, 16 give IPv6; `nil` for any
    /// other count.
    public init?(bytes: some Collection<UInt8>) {
        switch bytes.count {
        case 4:
            var value: UInt32 = 0
            for b in bytes { value = value << 8 | UInt32(b) }
            self = .v4(IPv4Address(value))
        case 16:
            guard let v6 = IPv6Address(bytes: bytes) else { return nil }
            self = .v6(v6)
        default:
            return nil
        }
    }

    /// The address in network byte order: 4 bytes for IPv4, 16 for IPv6.
    public var bytes: [UInt8] {
        switch self {
        case .v4(let a): return a.bytes
        case .v6(let a): return a.bytes
        }
    }

    /// The number of bytes: 4 for IPv4, 16 for IPv6.
    public var byteCount: Int { isIPv6 ? 16 : 4 }

    /// Whether this is an IPv6 address.
    public var isIPv6: Bool {
        if case .v6 = self { return true }
        return false
    }

    /// The address as two big-endian words (bytes 0–7 and 8–15, zero-filled) and its length in
    /// bytes, for hashing or comparing without an array.
    public var packed: (high: UInt64, low: UInt64, length: UInt8) {
        switch self {
        case .v4(let a): return (UInt64(a.value) << 32, 0, 4)
        case .v6(let a): return (a.high, a.low, 16)
        }
    }

    /// The address text: dotted quad, or RFC 5952 IPv6 text without brackets.
    public var description: String {
        switch self {
        case .v4(let a): return a.description
        case .v6(let a): return a.description
        }
    }
}
