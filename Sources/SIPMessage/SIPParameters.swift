/// One `;name=value` parameter of a URI or a header.
public struct SIPParameter: Sendable, Hashable {
    /// The name as written.
    public var name: String
    /// The value (unquoted and unescaped), or `nil` for a flag parameter such as `;lr`.
    public var value: String?
    /// Whether the value was (and will be written as) a quoted string.
    public var quoted: Bool

    /// Creates a parameter.
    public init(name: String, value: String? = nil, quoted: Bool = false) {
        self.name = name
        self.value = value
        self.quoted = quoted
    }

    /// The parameter as written: `name`, `name=value` or `name="value"`. A value that is not
    /// token or host text (`gen-value`, RFC 3261 §25.1) is quoted, so it cannot add parameters
    /// or list elements; a name with non-token bytes keeps only its token bytes.
    public var text: String {
        let n = allUTF8(name, isTokenByte) ? name : String(decoding: name.utf8.filter(isTokenByte), as: UTF8.self)
        guard let v = value else { return n }
        let plain = !v.isEmpty && allUTF8(v, { isTokenByte($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "[") || $0 == UInt8(ascii: "]") })
        return quoted || !plain ? "\(n)=\(quoteString(v))" : "\(n)=\(v)"
    }
}

/// An ordered list of parameters, looked up by case-insensitive name.
public struct SIPParameters: Sendable, Hashable, RandomAccessCollection, ExpressibleByArrayLiteral {
    public private(set) var items: [SIPParameter]

    public init() { items = [] }
    public init(_ items: [SIPParameter]) { self.items = items }
    public init(arrayLiteral elements: SIPParameter...) { items = elements }

    public var startIndex: Int { items.startIndex }
    public var endIndex: Int { items.endIndex }
    public subscript(position: Int) -> SIPParameter { items[position] }

    /// Whether a parameter of this name is present (with or without a value).
    public func contains(_ name: String) -> Bool { index(of: name) != nil }

    /// The value of the named parameter; `.some(nil)` for a flag parameter, `nil` when absent.
    public subscript(_ name: String) -> String?? {
        get { index(of: name).map { items[$0].value } }
    }

    /// Sets (replacing in place) or appends a parameter.
    public mutating func set(_ name: String, _ value: String?, quoted: Bool = false) {
        if let k = index(of: name) { items[k].value = value; items[k].quoted = quoted } else { items.append(SIPParameter(name: name, value: value, quoted: quoted)) }
    }

    /// Removes every parameter of this name.
    public mutating func remove(_ name: String) { items.removeAll { $0.name.lowercased() == name.lowercased() } }

    public mutating func append(_ p: SIPParameter) { items.append(p) }

    mutating func reserve(_ n: Int) { items.reserveCapacity(n) }

    func index(of name: String) -> Int? {
        let l = name.lowercased()
        return items.firstIndex { $0.name.count == name.count && $0.name.lowercased() == l }
    }

    /// The parameters as written: `;a=1;b`.
    public var text: String { items.map { ";" + $0.text }.joined() }
}

/// Quotes a string for a header: `"` and `\` are escaped.
public func quoteString(_ s: String) -> String {
    var out = "\""
    for c in s.unicodeScalars where c == "\t" || (c.value >= 0x20 && c.value != 0x7F) {
        if c == "\"" || c == "\\" { out.append("\\") }
        out.unicodeScalars.append(c)
    }
    out.append("\"")
    return out
}
