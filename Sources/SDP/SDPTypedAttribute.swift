/// An attribute with a typed representation, such as ``RTPMap`` or
/// ``CryptoAttribute``.
///
/// A typed attribute converts to and from the value part of its `a=` line.
/// Session and media sections store plain ``SDPAttribute`` values; use the
/// accessors on ``SDPAttributeContainer`` to read typed views and its
/// `add` methods to append typed attributes.
public protocol SDPTypedAttribute: Hashable, Sendable {
    /// The attribute name, for example `rtpmap`.
    static var attributeName: String { get }
    /// Parses the value part of the attribute line (after `a=<name>:`);
    /// returns nil when it is malformed.
    init?(attributeValue: String)
    /// The value part of the attribute line, in canonical form.
    var attributeValue: String { get }
}
