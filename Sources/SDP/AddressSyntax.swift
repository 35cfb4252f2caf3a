/// Loose validation of unicast addresses in `o=`, `c=` and `a=rtcp`.
///
/// RFC 8866 allows an IP literal or a fully qualified domain name. The checks
/// here accept both but reject what is obviously not an address: empty
/// fields, whitespace or control characters, malformed IP literals, and
/// IPv6 literals under `IP4` (or IPv4 literals under `IP6`).
enum AddressSyntax {
    /// Returns a description of the problem, or nil when `bytes` is acceptable
    /// as an address of type `type`.
    static func problem(with bytes: ArraySlice<UInt8>, type: AddressType) -> String? {
        guard Syntax.isNonWhitespaceString(bytes) else {
            return bytes.isEmpty ? "empty address" : "address contains a control character"
        }
        // Only a problem is worth the text (the usual, valid address allocates nothing).
        var text: String { Syntax.string(bytes) }
        switch type {
        case .ip4:
            if isIPv4(bytes) || isDomainName(bytes) { return nil }
            if bytes.contains(ASCII.colon) { return "\"\(text)\" is not an IPv4 address" }
            return "\"\(text)\" is neither an IPv4 address nor a domain name"
        case .ip6:
            if bytes.contains(ASCII.colon) {
                return isIPv6(bytes) ? nil : "\"\(text)\" is not a valid IPv6 address"
            }
            if isDomainName(bytes) { return nil }
            return "\"\(text)\" is neither an IPv6 address nor a domain name"
        default:
            return nil
        }
    }

    /// Dotted-quad IPv4: four decimal parts of one to three digits, each at most 255.
    static func isIPv4(_ bytes: ArraySlice<UInt8>) -> Bool {
        var parts = 0
        var start = bytes.startIndex
        while true {
            let end = bytes[start...].firstIndex(of: ASCII.dot) ?? bytes.endIndex
            let part = bytes[start..<end]
            guard part.count <= 3, let value = Syntax.decimal(part, as: UInt16.self), value <= 255 else { return false }
            parts += 1
            guard end < bytes.endIndex else { break }
            start = end + 1
        }
        return parts == 4
    }

    /// RFC 4291 text form: eight groups of one to four hex digits, with at most
    /// one `::` standing for one or more zero groups, and optionally a dotted
    /// IPv4 address in place of the last two groups.
    static func isIPv6(_ bytes: ArraySlice<UInt8>) -> Bool {
        guard bytes.count >= 2, bytes.count <= 45 else { return false }
        var doubleColon: Int? = nil
        var i = bytes.startIndex
        while i + 1 < bytes.endIndex {
            if bytes[i] == ASCII.colon && bytes[i + 1] == ASCII.colon {
                if doubleColon != nil { return false }
                doubleColon = i
            }
            i += 1
        }
        if let dc = doubleColon {
            guard let head = groupCount(bytes[bytes.startIndex..<dc], allowIPv4Tail: false),
                let tail = groupCount(bytes[(dc + 2)..<bytes.endIndex], allowIPv4Tail: true)
            else { return false }
            return head + tail <= 7
        }
        return groupCount(bytes, allowIPv4Tail: true) == 8
    }

    /// Counts the 16-bit groups in a colon-separated run (an empty run has
    /// none), or returns nil when a group is malformed.
    private static func groupCount(_ bytes: ArraySlice<UInt8>, allowIPv4Tail: Bool) -> Int? {
        if bytes.isEmpty { return 0 }
        let groups = Syntax.split(bytes, on: ASCII.colon)
        var count = 0
        for (index, group) in groups.enumerated() {
            if allowIPv4Tail, index == groups.count - 1, group.contains(ASCII.dot) {
                guard isIPv4(group) else { return nil }
                count += 2
            } else {
                guard !group.isEmpty, group.count <= 4, group.allSatisfy(ASCII.isHexDigit) else { return nil }
                count += 1
            }
        }
        return count
    }

    /// A loose domain name check: labels of letters, digits, `-` and `_`
    /// (not starting or ending with `-`) separated by single dots (one
    /// trailing dot allowed), at most 253
    /// characters, and a last label that is not purely numeric (so that
    /// malformed dotted quads are not taken for names).
    static func isDomainName(_ bytes: ArraySlice<UInt8>) -> Bool {
        var name = bytes
        if name.last == ASCII.dot { name = name.dropLast() }
        guard !name.isEmpty, name.count <= 253 else { return false }
        let labels = Syntax.split(name, on: ASCII.dot)
        for label in labels {
            guard let first = label.first, let last = label.last, label.count <= 63,
                first != ASCII.dash, last != ASCII.dash,
                label.allSatisfy({ ASCII.isAlphanumeric($0) || $0 == ASCII.dash || $0 == ASCII.underscore })
            else { return false }
        }
        guard let last = labels.last, !last.allSatisfy(ASCII.isDigit) else { return false }
        return true
    }
}
