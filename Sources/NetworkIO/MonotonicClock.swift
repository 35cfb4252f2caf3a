import Glibc

/// The stack's one monotonic clock: CLOCK_MONOTONIC, the clock of the media workers' timerfd,
/// the SIP timer thread's condition variable, SIP transport and DNS deadlines, and the arrival
/// times of SIP messages. It stops while the system is suspended (unlike `ContinuousClock`,
/// which is CLOCK_BOOTTIME on Linux), so every deadline of the stack is on one time line.
///
/// It has the surface of `ContinuousClock`: `MonotonicClock.now`, instants that add and subtract
/// `Duration`s, and `sleep(until:tolerance:)`.
public struct MonotonicClock: Clock, Sendable {
    /// A point in CLOCK_MONOTONIC time.
    public struct Instant: InstantProtocol, Sendable, Hashable, Comparable, CustomStringConvertible {
        /// The time since the clock's origin (an unspecified point, usually the boot).
        public let sinceOrigin: Duration

        /// The instant `sinceOrigin` after the clock's origin.
        public init(sinceOrigin: Duration) {
            self.sinceOrigin = sinceOrigin
        }

        /// The current instant.
        public static var now: Instant { MonotonicClock.now }

        /// The instant `duration` later (earlier when negative).
        public func advanced(by duration: Duration) -> Instant {
            Instant(sinceOrigin: sinceOrigin + duration)
        }

        /// The time from this instant to `other` (negative when `other` is earlier).
        public func duration(to other: Instant) -> Duration {
            other.sinceOrigin - sinceOrigin
        }

        /// Whether `lhs` comes before `rhs`.
        public static func < (lhs: Instant, rhs: Instant) -> Bool {
            lhs.sinceOrigin < rhs.sinceOrigin
        }

        /// The instant `rhs` after `lhs`.
        public static func + (lhs: Instant, rhs: Duration) -> Instant { lhs.advanced(by: rhs) }
        /// The instant `rhs` before `lhs`.
        public static func - (lhs: Instant, rhs: Duration) -> Instant { lhs.advanced(by: .zero - rhs) }
        /// The time from `rhs` to `lhs`.
        public static func - (lhs: Instant, rhs: Instant) -> Duration { rhs.duration(to: lhs) }
        /// Moves `lhs` `rhs` later.
        public static func += (lhs: inout Instant, rhs: Duration) { lhs = lhs + rhs }
        /// Moves `lhs` `rhs` earlier.
        public static func -= (lhs: inout Instant, rhs: Duration) { lhs = lhs - rhs }

        /// The time since the origin, for logs.
        public var description: String { "\(sinceOrigin) (monotonic)" }

        /// The time since the origin in nanoseconds (the media engine's unit).
        package var nanoseconds: Int64 {
            let (seconds, attoseconds) = sinceOrigin.components
            return seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000
        }

        /// The instant as a `timespec`, for `pthread_cond_timedwait`, `timerfd` or
        /// `clock_nanosleep` on CLOCK_MONOTONIC.
        package var timespec: Glibc.timespec {
            let (seconds, attoseconds) = sinceOrigin.components
            return Glibc.timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        }
    }

    /// The clock.
    public init() {}

    /// The current instant.
    public var now: Instant { Self.now }

    /// The current instant.
    public static var now: Instant {
        var ts = Glibc.timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Instant(sinceOrigin: .seconds(ts.tv_sec) + .nanoseconds(ts.tv_nsec))
    }

    /// The clock's resolution (`clock_getres`).
    public var minimumResolution: Duration {
        var ts = Glibc.timespec()
        clock_getres(CLOCK_MONOTONIC, &ts)
        return .seconds(ts.tv_sec) + .nanoseconds(ts.tv_nsec)
    }

    /// Suspends the task until `deadline` has passed on this clock (never earlier), or throws
    /// `CancellationError` when the task is cancelled first.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        // SuspendingClock also stops during suspend; the loop covers any early wake-up.
        while true {
            let remaining = Self.now.duration(to: deadline)
            if remaining <= .zero { return }
            try await Task.sleep(for: remaining, tolerance: tolerance, clock: .suspending)
        }
    }
}

/// Wall-clock time (CLOCK_REALTIME): for RTCP NTP timestamps, kernel receive stamps and capture
/// times, never for deadlines (it jumps when the system time is set).
public enum WallTime {
    /// The time since the Unix epoch (1970-01-01 00:00:00 UTC).
    public static func now() -> Duration {
        var ts = Glibc.timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return .seconds(ts.tv_sec) + .nanoseconds(ts.tv_nsec)
    }
}
