/// The rules of one input format (``DTMFRule``, ``WAVRule``): each a case named by its raw value.
public protocol MediaFormatRule: RawRepresentable, Sendable, Hashable where RawValue == String {
    /// What an error's description starts with, before the offset: `WAV error at byte`.
    static var errorLabel: String { get }
}

/// Why an input (``DTMFError``, ``WAVError``) was refused: where, and which rule.
public struct MediaFormatError<R: MediaFormatRule>: Error, Sendable, Hashable, CustomStringConvertible {
    /// The format's rules.
    public typealias Rule = R

    /// Byte or character offset in the input where the problem was found.
    public var offset: Int
    /// The rule that failed.
    public var rule: Rule
    /// A short explanation.
    public var detail: String

    /// Creates an error.
    public init(offset: Int, rule: Rule, detail: String = "") {
        self.offset = offset
        self.rule = rule
        self.detail = detail
    }

    /// `<label> n: rule: detail`, for example `WAV error at byte 40: truncatedChunk: …`.
    public var description: String { "\(Rule.errorLabel) \(offset): \(rule.rawValue)\(detail.isEmpty ? "" : ": " + detail)" }
}
