/// The host part of a URI or Via: a domain name, an IPv4 address or an IPv6 address.
public enum SIPHost: Sendable, Hashable, CustomStringConvertible {
    /// A domain name, kept as written (compare with ``isEquivalent(to:)`` for case-insensitivity).
    case domain(String)
    /// A dotted-quad IPv4 address.
    case ipv4(String)
    /// An IPv6 address, without the brackets of an IPv6 reference.
    case ipv6(String)

    /// The host as written in a URI: IPv6 addresses inside brackets.
    public var description: String {
        switch self {
        case .domain(let s), .ipv4(let s): return s
        case .ipv6(let s): return "[\(s)]"
        }
    }

    /// The address or name without brackets.
    public var address: String {
        switch self {
        case .domain(let s), .ipv4(let s), .ipv6(let s): return s
        }
    }

    /// Case-insensitive comparison (RFC 3261 §19.1.4).
    public func isEquivalent(to other: SIPHost) -> Bool {
        switch (self, other) {
        case (.domain(let a), .domain(let b)): return a.lowercased() == b.lowercased()
        case (.ipv4(let a), .ipv4(let b)): return a == b
        case (.ipv6(let a), .ipv6(let b)): return a.lowercased() == b.lowercased()
        default: return false
        }
    }

    /// Parses a host as written in a URI or Via (`example.com`, `192.0.2.1`, `[2001:db8::1]`).
    /// A bare IPv6 address (no brackets) is accepted only when `allowBareIPv6` is set (the Via
    /// `received` parameter, RFC 5118 §4.5).
    public static func parse(_ text: String, allowBareIPv6: Bool = false) throws(SIPParseError) -> SIPHost {
        try parse(ArraySlice(text.utf8), allowBareIPv6: allowBareIPv6)
    }

    /// With `keep` false the host is only checked (the case is right, its text empty: no allocation).
    static func parse(_ b: ArraySlice<UInt8>, allowBareIPv6: Bool = false, keep: Bool = true) throws(SIPParseError) -> SIPHost {
        guard let first = b.first else { throw SIPParseError(offset: b.startIndex, rule: .host, detail: "empty host") }
        if first == UInt8(ascii: "[") {
            guard b.count >= 3, b.last == UInt8(ascii: "]") else {
                throw SIPParseError(offset: b.startIndex, rule: .host, detail: "unterminated IPv6 reference")
            }
            let inner = b.dropFirst().dropLast()
            try validateIPv6(inner)
            return .ipv6(keep ? String(sipBytes: inner) : "")
        }
        if allowBareIPv6, b.contains(UInt8(ascii: ":")) {
            try validateIPv6(b)
            return .ipv6(keep ? String(sipBytes: b) : "")
        }
        if b.allSatisfy({ isDigit($0) || $0 == UInt8(ascii: ".") }) {
            guard isIPv4(b) else { throw SIPParseError(offset: b.startIndex, rule: .host, detail: "malformed IPv4 address") }
            return .ipv4(keep ? String(sipBytes: b) : "")
        }
        // hostname = *( domainlabel "." ) toplabel [ "." ]; labels are alphanum with inner "-".
        var labelStart = b.startIndex
        var k = b.startIndex
        while k <= b.endIndex {
            if k == b.endIndex || b[k] == UInt8(ascii: ".") {
                let label = b[labelStart..<k]
                if label.isEmpty {
                    // Only a single trailing dot may end the name.
                    guard k == b.endIndex, k > b.startIndex else { throw SIPParseError(offset: k, rule: .host, detail: "empty label in host name") }
                } else if label.first == UInt8(ascii: "-") || label.last == UInt8(ascii: "-") {
                    throw SIPParseError(offset: labelStart, rule: .host, detail: "a host label cannot start or end with '-'")
                }
                labelStart = k + 1
            } else if !(ByteClass.test(b[k], ByteClass.hostChar) || b[k] == UInt8(ascii: "_")) {
                throw SIPParseError(offset: k, rule: .host, detail: "byte 0x\(String(b[k], radix: 16)) is not allowed in a host name")
            }
            k += 1
        }
        return .domain(keep ? String(sipBytes: b) : "")
    }

    static func isIPv4(_ b: ArraySlice<UInt8>) -> Bool {
        var parts = 0, value = 0, digits = 0
        for c in b {
            if c == UInt8(ascii: ".") {
                guard digits > 0 else { return false }
                parts += 1; value = 0; digits = 0
            } else {
                guard isDigit(c), digits < 3 else { return false }
                value = value * 10 + Int(c - 0x30); digits += 1
                if value > 255 { return false }
            }
        }
        return parts == 3 && digits > 0
    }

    /// IPv6 text (RFC 4291 §2.2). The RFC 3261 ABNF bug form with three colons before an IPv4
    /// tail (`2001:db8:::192.0.2.1`, RFC 5118 §4.10) is tolerated.
    static func validateIPv6(_ b: ArraySlice<UInt8>) throws(SIPParseError) {
        let fail = SIPParseError(offset: b.startIndex, rule: .host, detail: "malformed IPv6 address")
        var groups = 0, doubleColon = false
        var i = b.startIndex
        let end = b.endIndex
        guard !b.isEmpty, b.count <= 64 else { throw fail }
        if b[i] == UInt8(ascii: ":") {
            guard i + 1 < end, b[i + 1] == UInt8(ascii: ":") else { throw fail }
            doubleColon = true
            i += 2
            if i == end { return }
        }
        while i < end {
            // A group: hex digits, or an IPv4 tail.
            var j = i
            while j < end, ByteClass.test(b[j], ByteClass.hex) { j += 1 }
            if j < end, b[j] == UInt8(ascii: ".") {
                guard isIPv4(b[i..<end]) else { throw fail }
                groups += 2
                i = end
                break
            }
            guard j > i, j - i <= 4 else { throw fail }
            groups += 1
            i = j
            if i == end { break }
            guard b[i] == UInt8(ascii: ":") else { throw fail }
            i += 1
            if i < end, b[i] == UInt8(ascii: ":") {
                guard !doubleColon else { throw fail }
                doubleColon = true
                i += 1
                // Tolerate the ABNF-bug third colon only before an IPv4 tail.
                if i < end, b[i] == UInt8(ascii: ":") {
                    guard b[(i + 1)...].contains(UInt8(ascii: ".")) else { throw fail }
                    i += 1
                }
                if i == end { break }
            } else if i == end {
                throw fail
            }
        }
        guard doubleColon ? groups < 8 : groups == 8 else { throw fail }
    }
}
