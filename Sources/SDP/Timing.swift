/// A time description: one `t=` line and the `r=` lines that follow it
/// (RFC 8866 sections 5.9 and 5.10).
///
/// Sessions negotiated with SIP use `t=0 0`, which is the default here.
public struct Timing: Hashable, Sendable, CustomStringConvertible {
    /// Start time in NTP seconds, or 0 for an unbounded session.
    public var start: UInt64
    /// Stop time in NTP seconds, or 0 for an unbounded session.
    public var stop: UInt64
    /// The values of the `r=` lines belonging to this `t=` line, kept verbatim.
    public var repeats: [String]

    /// Creates a time description; `t=0 0` by default.
    public init(start: UInt64 = 0, stop: UInt64 = 0, repeats: [String] = []) {
        self.start = start
        self.stop = stop
        self.repeats = repeats
    }

    /// The value written after `t=`, for example `0 0`.
    public var description: String { "\(start) \(stop)" }

    /// Parses the value of a `t=` line.
    static func parse(_ value: ArraySlice<UInt8>) throws(FieldError) -> Timing {
        let fields = Syntax.fields(value)
        guard fields.count == 2 else {
            throw FieldError(.timing, "expected <start-time> <stop-time>, found \(fields.count) fields")
        }
        let start: UInt64 = try Syntax.number(fields[0], "start time", rule: .timing)
        let stop: UInt64 = try Syntax.number(fields[1], "stop time", rule: .timing)
        return Timing(start: start, stop: stop)
    }

    /// Checks an `r=` value: `<repeat interval> <active duration> <offsets>...`,
    /// each a number optionally followed by a unit letter `d`, `h`, `m` or `s`.
    static func validateRepeat(_ value: ArraySlice<UInt8>) throws(FieldError) {
        let fields = Syntax.fields(value)
        guard fields.count >= 3 else {
            throw FieldError(.repeatTimes, "expected interval, duration and at least one offset")
        }
        for field in fields where !isTypedTime(field, allowNegative: false) {
            throw FieldError(.repeatTimes, "invalid time \"\(Syntax.string(field))\"", at: field.startIndex)
        }
    }

    /// Checks a `z=` value: pairs of `<adjustment time> <offset>`.
    static func validateZones(_ value: ArraySlice<UInt8>) throws(FieldError) {
        let fields = Syntax.fields(value)
        guard !fields.isEmpty, fields.count % 2 == 0 else {
            throw FieldError(.timeZones, "expected pairs of <adjustment time> <offset>")
        }
        for (index, field) in fields.enumerated() {
            let ok = index % 2 == 0 ? Syntax.isAllDigits(field) : isTypedTime(field, allowNegative: true)
            guard ok else {
                throw FieldError(.timeZones, "invalid time \"\(Syntax.string(field))\"", at: field.startIndex)
            }
        }
    }

    private static func isTypedTime(_ field: ArraySlice<UInt8>, allowNegative: Bool) -> Bool {
        var digits = field
        if allowNegative, digits.first == ASCII.dash { digits = digits.dropFirst() }
        if let last = digits.last, last == 0x64 || last == 0x68 || last == 0x6D || last == 0x73 {
            digits = digits.dropLast()
        }
        return Syntax.isAllDigits(digits) && digits.count <= 20
    }
}
