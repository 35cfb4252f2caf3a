/// The protocol version on a start line (`SIP/2.0`).
public struct SIPVersion: Sendable, Hashable, CustomStringConvertible {
    public var major: UInt16
    public var minor: UInt16
    public init(major: UInt16, minor: UInt16) { self.major = major; self.minor = minor }
    /// SIP/2.0, the only version this stack speaks.
    public static let sip20 = SIPVersion(major: 2, minor: 0)
    public var description: String { "SIP/\(major).\(minor)" }

    /// Parses `SIP/d.d` (the literal `SIP` in any case, RFC 3261 §25.1 strings are case-insensitive).
    static func parse(_ p: UnsafeBufferPointer<UInt8>, _ r: Range<Int>) -> SIPVersion? {
        guard r.count >= 7 else { return nil }
        var i = r.lowerBound
        guard lowerASCII(p[i]) == UInt8(ascii: "s"), lowerASCII(p[i + 1]) == UInt8(ascii: "i"),
              lowerASCII(p[i + 2]) == UInt8(ascii: "p"), p[i + 3] == UInt8(ascii: "/") else { return nil }
        i += 4
        func number(_ i: inout Int) -> UInt16? {
            var v: UInt16 = 0, digits = 0
            while i < r.upperBound, isDigit(p[i]) {
                guard digits < 4 else { return nil }
                v = v * 10 + UInt16(p[i] - 0x30); digits += 1; i += 1
            }
            return digits == 0 ? nil : v
        }
        guard let major = number(&i), i < r.upperBound, p[i] == UInt8(ascii: "."), case let j = i + 1 else { return nil }
        i = j
        guard let minor = number(&i), i == r.upperBound else { return nil }
        return SIPVersion(major: major, minor: minor)
    }
}
