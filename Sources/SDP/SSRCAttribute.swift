/// `a=ssrc:<ssrc-id> <attribute>[:<value>]` (RFC 5576 section 4.1): a
/// source-level attribute such as `cname`.
public struct SSRCAttribute: SDPTypedAttribute, CustomStringConvertible {
    /// `ssrc`
    public static let attributeName = SDPAttributeName.ssrc

    /// The synchronization source identifier.
    public var ssrc: UInt32
    /// The source attribute's name, for example `cname`.
    public var name: String
    /// The source attribute's value, if any (it may contain spaces).
    public var value: String?

    /// Creates a source-level attribute.
    public init(ssrc: UInt32, name: String, value: String? = nil) {
        self.ssrc = ssrc
        self.name = name
        self.value = value
    }

    /// Parses the value of an `a=ssrc` line; nil when malformed.
    public init?(attributeValue: String) {
        guard let parsed = try? Self.parse(ArraySlice(attributeValue.utf8)) else { return nil }
        self = parsed
    }

    /// For example `3735928559 cname:alice@example.com`.
    public var attributeValue: String {
        guard let value else { return "\(ssrc) \(name)" }
        return "\(ssrc) \(name):\(value)"
    }

    /// The same as ``attributeValue``.
    public var description: String { attributeValue }

    static func parse(_ value: ArraySlice<UInt8>) throws(FieldError) -> SSRCAttribute {
        let trimmedValue = Syntax.trimmed(value)
        let (id, rest) = Syntax.splitOnce(trimmedValue, on: ASCII.space)
        let ssrc: UInt32 = try Syntax.number(id, "ssrc-id", rule: .ssrc)
        guard let rest else { throw FieldError(.ssrc, "missing source attribute", at: id.endIndex) }
        let attribute = Syntax.trimmed(rest)
        let (name, attributeValue) = Syntax.splitOnce(attribute, on: ASCII.colon)
        guard Syntax.isToken(name) else {
            throw FieldError(.ssrc, "invalid source attribute name", at: attribute.startIndex)
        }
        return SSRCAttribute(ssrc: ssrc, name: Syntax.string(name), value: attributeValue.map(Syntax.string))
    }
}
