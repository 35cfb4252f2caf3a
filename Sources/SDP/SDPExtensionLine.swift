/// A line whose type letter this library does not know, such as `y=` or
/// `f=` lines some equipment adds.
///
/// RFC 8866 section 5 says a parser should ignore a session description that
/// contains an unknown type letter. This library instead keeps such lines
/// (in order, at the end of the section they appeared in) so that callers can
/// decide: check ``SessionDescription/hasExtensionLines`` to apply the strict
/// rule.
public struct SDPExtensionLine: Hashable, Sendable, CustomStringConvertible {
    /// The type letter, a lowercase ASCII letter.
    public var type: Character
    /// Everything after `=`, kept verbatim.
    public var value: String

    /// Creates an extension line.
    public init(type: Character, value: String) {
        self.type = type
        self.value = value
    }

    /// The line without its line ending, for example `y=0123456789`.
    public var description: String { "\(type)=\(value)" }
}
