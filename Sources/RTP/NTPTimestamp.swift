/// A 64-bit NTP timestamp (seconds since 1900-01-01 and a 32-bit binary fraction), as carried
/// in RTCP sender reports (RFC 3550 §4).
public struct NTPTimestamp: Sendable, Hashable, Comparable {
    /// Seconds since 1900-01-01 00:00 UTC (wrapping in 2036).
    public var seconds: UInt32
    /// Fraction of a second, in units of 2^-32 s.
    public var fraction: UInt32

    /// Seconds between the NTP epoch (1900) and the Unix epoch (1970).
    public static let unixEpochOffset: Int64 = 2_208_988_800

    /// Creates a timestamp from its two halves.
    public init(seconds: UInt32, fraction: UInt32) {
        self.seconds = seconds
        self.fraction = fraction
    }

    /// Creates a timestamp from its 64-bit wire value.
    public init(rawValue: UInt64) {
        seconds = UInt32(truncatingIfNeeded: rawValue >> 32)
        fraction = UInt32(truncatingIfNeeded: rawValue)
    }

    /// Creates a timestamp from a time since the Unix epoch (as a wall clock gives it).
    public init(sinceUnixEpoch d: Duration) {
        let c = d.components
        seconds = UInt32(truncatingIfNeeded: c.seconds &+ Self.unixEpochOffset)
        // nanoseconds · 2^32 / 10^9 fits in 64 bits (nanoseconds < 2^30).
        let nanos = UInt64(c.attoseconds / 1_000_000_000)
        fraction = UInt32(truncatingIfNeeded: (nanos << 32) / 1_000_000_000)
    }

    /// The 64-bit wire value.
    public var rawValue: UInt64 { UInt64(seconds) << 32 | UInt64(fraction) }

    /// The middle 32 bits (16 bits of seconds, 16 of fraction): the LSR field of report blocks.
    public var middle32: UInt32 { seconds << 16 | fraction >> 16 }

    /// The time since the Unix epoch this timestamp denotes (in the 1900–2036 era).
    public var sinceUnixEpoch: Duration {
        let nanos = (UInt64(fraction) * 1_000_000_000) >> 32
        return .seconds(Int64(seconds) - Self.unixEpochOffset) + .nanoseconds(Int64(nanos))
    }

    /// Orders by the 64-bit value.
    public static func < (a: NTPTimestamp, b: NTPTimestamp) -> Bool { a.rawValue < b.rawValue }
}

/// Round-trip time and delay helpers on the compact NTP format (1/65536 s, RFC 3550 §6.4.1).
public enum RTCPTiming {
    /// Converts a duration to compact NTP units (1/65536 s), saturating at 2^32 − 1 (0 for a
    /// negative duration).
    public static func compactUnits(_ d: Duration) -> UInt32 {
        let c = d.components
        // A negative duration under a second has seconds == 0 and negative attoseconds.
        guard c.seconds >= 0, c.attoseconds >= 0 else { return 0 }
        guard c.seconds < 65536 else { return .max }
        let nanos = UInt64(c.attoseconds / 1_000_000_000)
        return UInt32(c.seconds) << 16 | UInt32((nanos << 16) / 1_000_000_000)
    }

    /// Converts compact NTP units (1/65536 s) to a duration.
    public static func duration(compactUnits u: UInt32) -> Duration {
        .seconds(Int64(u >> 16)) + .nanoseconds(Int64((UInt64(u & 0xFFFF) * 1_000_000_000) >> 16))
    }

    /// RFC 3550 §6.4.1: the round-trip time `A − LSR − DLSR` in 1/65536 s, where `arrival` is
    /// the middle 32 bits of the NTP time the report block arrived. Nil when `lastSR` is 0 (no
    /// SR received yet) or the result would be negative (clocks or fields inconsistent).
    public static func roundTripUnits(arrival: UInt32, lastSR: UInt32, delaySinceLastSR: UInt32) -> UInt32? {
        guard lastSR != 0 else { return nil }
        let rtt = arrival &- lastSR &- delaySinceLastSR
        guard Int32(bitPattern: rtt) >= 0 else { return nil }
        return rtt
    }

    /// The round-trip time as a duration; see `roundTripUnits(arrival:lastSR:delaySinceLastSR:)`.
    public static func roundTripTime(arrival: NTPTimestamp, lastSR: UInt32, delaySinceLastSR: UInt32) -> Duration? {
        roundTripUnits(arrival: arrival.middle32, lastSR: lastSR, delaySinceLastSR: delaySinceLastSR)
            .map { duration(compactUnits: $0) }
    }
}
