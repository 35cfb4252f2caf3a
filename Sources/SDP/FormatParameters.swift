/// `a=fmtp:<format> <format specific parameters>` (RFC 8866 section 6.15).
///
/// The parameters are kept as written in ``parameters``; ``parsedParameters``
/// offers the common `name=value;name=value` reading of them.
public struct FormatParameters: SDPTypedAttribute, CustomStringConvertible {
    /// `fmtp`
    public static let attributeName = SDPAttributeName.fmtp

    /// One `name=value` (or bare `name`) item of the parameters.
    public struct Parameter: Hashable, Sendable, CustomStringConvertible {
        /// The parameter name, for example `useinbandfec`.
        public var name: String
        /// The value after `=`, or nil for an item without `=` (such as `0-16` for telephone-event).
        public var value: String?

        /// Creates a parameter.
        public init(name: String, value: String? = nil) {
            self.name = name
            self.value = value
        }

        /// `name=value`, or `name` alone.
        public var description: String { value.map { "\(name)=\($0)" } ?? name }
    }

    /// The format the parameters apply to: an RTP payload type for RTP media.
    public var format: String
    /// The format specific parameters, verbatim (possibly empty).
    public var parameters: String

    /// Creates format parameters from a format and a raw parameter string.
    public init(format: String, parameters: String) {
        self.format = format
        self.parameters = parameters
    }

    /// Creates format parameters for an RTP payload type from a raw parameter string.
    public init(payloadType: UInt8, parameters: String) {
        self.init(format: String(payloadType), parameters: parameters)
    }

    /// Creates format parameters for an RTP payload type from items, joined with `;`.
    public init(payloadType: UInt8, parameters: [Parameter]) {
        self.init(format: String(payloadType), parameters: parameters.map(\.description).joined(separator: ";"))
    }

    /// Parses the value of an `a=fmtp` line; nil when malformed.
    public init?(attributeValue: String) {
        guard let parsed = try? Self.parse(ArraySlice(attributeValue.utf8)) else { return nil }
        self = parsed
    }

    /// For example `111 minptime=10;useinbandfec=1`.
    public var attributeValue: String { parameters.isEmpty ? format : "\(format) \(parameters)" }

    /// The same as ``attributeValue``.
    public var description: String { attributeValue }

    /// The payload type when ``format`` is a number from 0 to 127.
    public var payloadType: UInt8? {
        guard let pt = Syntax.decimal(ArraySlice(format.utf8), as: UInt8.self), pt <= 127 else { return nil }
        return pt
    }

    /// ``parameters`` split on `;`, each item split at its first `=`, with
    /// surrounding whitespace removed and empty items skipped.
    public var parsedParameters: [Parameter] {
        let bytes = ArraySlice(parameters.utf8)
        var result: [Parameter] = []
        for item in Syntax.split(bytes, on: ASCII.semicolon) {
            let trimmedItem = Syntax.trimmed(item)
            if trimmedItem.isEmpty { continue }
            let (name, value) = Syntax.splitOnce(trimmedItem, on: ASCII.equals)
            result.append(
                Parameter(
                    name: Syntax.string(Syntax.trimmed(name)),
                    value: value.map { Syntax.string(Syntax.trimmed($0)) }))
        }
        return result
    }

    /// The value of the first parameter called `name` (compared ignoring ASCII case).
    /// Returns nil when absent; a parameter without `=` has no value and also gives nil.
    public func value(forParameter name: String) -> String? {
        let wanted = name.lowercased()
        return parsedParameters.first { $0.name.lowercased() == wanted }?.value
    }

    static func parse(_ value: ArraySlice<UInt8>) throws(FieldError) -> FormatParameters {
        let trimmedValue = Syntax.trailingTrimmed(value)
        var end = trimmedValue.startIndex
        while end < trimmedValue.endIndex, !ASCII.isWhitespace(trimmedValue[end]) { end += 1 }
        let format = trimmedValue[trimmedValue.startIndex..<end]
        guard !format.isEmpty else { throw FieldError(.fmtp, "missing format", at: value.startIndex) }
        guard Syntax.isToken(format) else { throw FieldError(.fmtp, "invalid format", at: format.startIndex) }
        let parameters = Syntax.trimmed(trimmedValue[end..<trimmedValue.endIndex])
        return FormatParameters(format: Syntax.string(format), parameters: Syntax.string(parameters))
    }
}
