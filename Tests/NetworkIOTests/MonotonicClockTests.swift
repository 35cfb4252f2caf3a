import Glibc
import Testing
@testable import NetworkIO

@Suite("MonotonicClock and WallTime")
struct MonotonicClockTests {
    @Test func neverGoesBack() {
        var previous = MonotonicClock.now
        for _ in 0..<10_000 {
            let now = MonotonicClock().now
            #expect(now >= previous)
            previous = now
        }
        #expect(MonotonicClock().minimumResolution > .zero)
    }

    @Test func isCLOCK_MONOTONIC() {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let before = MonotonicClock.Instant(sinceOrigin: .seconds(ts.tv_sec) + .nanoseconds(ts.tv_nsec))
        let now = MonotonicClock.now
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let after = MonotonicClock.Instant(sinceOrigin: .seconds(ts.tv_sec) + .nanoseconds(ts.tv_nsec))
        #expect(before <= now && now <= after)
        #expect(now.nanoseconds == Int64(now.sinceOrigin.components.seconds) * 1_000_000_000 + now.sinceOrigin.components.attoseconds / 1_000_000_000)
        let spec = now.timespec
        #expect(MonotonicClock.Instant(sinceOrigin: .seconds(spec.tv_sec) + .nanoseconds(spec.tv_nsec)) == now)
    }

    @Test func instantArithmetic() {
        let a = MonotonicClock.Instant(sinceOrigin: .seconds(10))
        #expect(a + .milliseconds(1500) == MonotonicClock.Instant(sinceOrigin: .milliseconds(11_500)))
        #expect(a - .seconds(3) == MonotonicClock.Instant(sinceOrigin: .seconds(7)))
        #expect((a + .seconds(2)) - a == .seconds(2))
        #expect(a.duration(to: a - .seconds(1)) == .seconds(-1))
        var b = a
        b += .seconds(1)
        b -= .milliseconds(250)
        #expect(b == MonotonicClock.Instant(sinceOrigin: .milliseconds(10_750)))
        #expect(a < b)
    }

    @Test func sleepUntilWakesNoEarlierThanTheDeadline() async throws {
        let clock = MonotonicClock()
        for milliseconds in [1, 20, 50] {
            let deadline = clock.now + .milliseconds(milliseconds)
            try await clock.sleep(until: deadline, tolerance: nil)
            #expect(clock.now >= deadline)
        }
        // A deadline in the past returns at once.
        let start = clock.now
        try await clock.sleep(until: start - .seconds(1), tolerance: nil)
        #expect(clock.now - start < .seconds(1))
        // Through the Clock protocol's sleep(for:).
        let before = clock.now
        try await clock.sleep(for: .milliseconds(10))
        #expect(clock.now - before >= .milliseconds(10))
    }

    @Test func sleepThrowsWhenCancelled() async {
        let task = Task { try await MonotonicClock().sleep(until: .now + .seconds(30), tolerance: nil) }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    @Test func wallTimeIsSinceTheUnixEpoch() {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let now = WallTime.now()
        // After 2020-01-01 and within a second of CLOCK_REALTIME.
        #expect(now > .seconds(1_577_836_800))
        #expect(now - (.seconds(ts.tv_sec) + .nanoseconds(ts.tv_nsec)) < .seconds(1))
    }
}
