/// Why text or labels do not make a valid domain name.
public enum DNSNameError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A label is empty (`a..b`, or a leading dot).
    case emptyLabel
    /// A label is longer than 63 octets (RFC 1035 §2.3.4); carries its length.
    case labelTooLong(Int)
    /// The name takes more than 255 octets on the wire (RFC 1035 §2.3.4); carries that length.
    case nameTooLong(Int)
    /// A backslash escape is not `\X` or `\DDD` with DDD ≤ 255.
    case invalidEscape

    public var description: String {
        switch self {
        case .emptyLabel: return "empty label in domain name"
        case .labelTooLong(let n): return "label of \(n) octets (at most 63)"
        case .nameTooLong(let n): return "name of \(n) octets on the wire (at most 255)"
        case .invalidEscape: return "invalid backslash escape in domain name"
        }
    }
}

/// A domain name: a sequence of labels, each 1–63 octets, 255 octets at most on the wire
/// (RFC 1035 §2.3.4, §3.1).
///
/// Labels are kept as the octets received. Comparison and hashing ignore ASCII case
/// (RFC 1035 §2.3.3, RFC 4343), so `Example.COM` equals `example.com`.
public struct DNSName: Sendable, Hashable, CustomStringConvertible {
    /// The labels, most specific first, without the empty root label.
    public let labels: [[UInt8]]

    /// The root name (no labels), written `.`.
    public static let root = DNSName(unchecked: [])

    init(unchecked labels: [[UInt8]]) { self.labels = labels }

    /// Creates a name from labels, checking label and name lengths.
    public init(labels: [[UInt8]]) throws(DNSNameError) {
        var wire = 1
        for label in labels {
            guard !label.isEmpty else { throw .emptyLabel }
            guard label.count <= 63 else { throw .labelTooLong(label.count) }
            wire += label.count + 1
        }
        guard wire <= 255 else { throw .nameTooLong(wire) }
        self.labels = labels
    }

    /// Parses a name in presentation form (RFC 1035 §5.1): labels separated by dots, an
    /// optional final dot, `\X` for a literal character and `\DDD` for an octet in decimal.
    /// `"."` and `""` are the root.
    public init(_ text: String) throws(DNSNameError) {
        var labels = [[UInt8]]()
        var current = [UInt8]()
        let b = Array(text.utf8)
        if b == [UInt8(ascii: ".")] || b.isEmpty {
            self = .root
            return
        }
        var i = 0
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: ".") {
                guard !current.isEmpty else { throw .emptyLabel }
                labels.append(current)
                current = []
                i += 1
            } else if c == UInt8(ascii: "\\") {
                guard i + 1 < b.count else { throw .invalidEscape }
                let d = b[i + 1]
                if d >= 0x30, d <= 0x39 {
                    guard i + 3 < b.count, (0x30...0x39).contains(b[i + 2]), (0x30...0x39).contains(b[i + 3]) else { throw .invalidEscape }
                    let v = Int(d - 0x30) * 100 + Int(b[i + 2] - 0x30) * 10 + Int(b[i + 3] - 0x30)
                    guard v <= 255 else { throw .invalidEscape }
                    current.append(UInt8(v))
                    i += 4
                } else {
                    current.append(d)
                    i += 2
                }
            } else {
                current.append(c)
                i += 1
            }
            if current.count > 63 { throw .labelTooLong(current.count) }
        }
        if !current.isEmpty { labels.append(current) }
        try self.init(labels: labels)
    }

    /// The number of octets the name takes on the wire, uncompressed (root label included).
    public var wireLength: Int { labels.reduce(1) { $0 + $1.count + 1 } }

    /// Whether this is the root name.
    public var isRoot: Bool { labels.isEmpty }

    /// The name with `label` put in front (`_sip._udp` before `example.com`).
    public func prepending(_ label: String) throws(DNSNameError) -> DNSName {
        let prefix = try DNSName(label)
        return try DNSName(labels: prefix.labels + labels)
    }

    /// The presentation form without the final dot (`example.com`; the root is `.`). Dots and
    /// backslashes inside labels are escaped as `\.` and `\\`; other octets outside printable
    /// ASCII as `\DDD`.
    public var description: String {
        if labels.isEmpty { return "." }
        var out = [UInt8]()
        for (n, label) in labels.enumerated() {
            if n > 0 { out.append(UInt8(ascii: ".")) }
            for c in label {
                if c == UInt8(ascii: ".") || c == UInt8(ascii: "\\") {
                    out.append(UInt8(ascii: "\\")); out.append(c)
                } else if c <= 0x20 || c >= 0x7F {
                    out.append(UInt8(ascii: "\\"))
                    out.append(0x30 + c / 100); out.append(0x30 + (c / 10) % 10); out.append(0x30 + c % 10)
                } else {
                    out.append(c)
                }
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The labels with ASCII letters lower-cased, the form used for comparison and hashing.
    var canonicalLabels: [[UInt8]] {
        labels.map { $0.map(asciiLower) }
    }

    public static func == (a: DNSName, b: DNSName) -> Bool {
        guard a.labels.count == b.labels.count else { return false }
        for (x, y) in zip(a.labels, b.labels) {
            guard x.count == y.count else { return false }
            for (p, q) in zip(x, y) where asciiLower(p) != asciiLower(q) { return false }
        }
        return true
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(labels.count)
        for label in labels {
            hasher.combine(label.count)
            for c in label { hasher.combine(asciiLower(c)) }
        }
    }
}

@inline(__always)
func asciiLower(_ c: UInt8) -> UInt8 {
    c >= 0x41 && c <= 0x5A ? c | 0x20 : c
}
