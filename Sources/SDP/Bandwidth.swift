/// A `b=<bwtype>:<bandwidth>` line (RFC 8866 section 5.8).
public struct Bandwidth: Hashable, Sendable, CustomStringConvertible {
    /// The bandwidth modifier, for example ``BandwidthType/applicationSpecific``.
    public var type: BandwidthType
    /// The value; its unit depends on ``type`` (kbit/s for `AS` and `CT`, bit/s for `TIAS`).
    public var value: UInt64

    /// Creates a bandwidth line.
    public init(type: BandwidthType, value: UInt64) {
        self.type = type
        self.value = value
    }

    /// The field value as written after `b=`, for example `AS:64`.
    public var description: String { "\(type.rawValue):\(value)" }

    /// Parses the value of a `b=` line.
    static func parse(_ value: ArraySlice<UInt8>) throws(FieldError) -> Bandwidth {
        let trimmed = Syntax.trimmed(value)
        let (name, number) = Syntax.splitOnce(trimmed, on: ASCII.colon)
        guard let number else { throw FieldError(.bandwidth, "expected <bwtype>:<bandwidth>") }
        guard Syntax.isToken(name) else {
            throw FieldError(.bandwidth, "invalid bandwidth type", at: name.startIndex)
        }
        let amount: UInt64 = try Syntax.number(number, "bandwidth", rule: .bandwidth)
        return Bandwidth(type: BandwidthType(rawValue: Syntax.string(name)), value: amount)
    }
}
