import Synchronization
import SIPTransaction
import NetworkIO

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Something a timer can call without a callback: ``TimerService/schedule(after:target:_:_:)``
/// stores a weak reference to it and two numbers instead of a closure, so arming a timer
/// allocates nothing (the runtime's transaction and session timers, several a call).
package protocol TimerTarget: AnyObject, Sendable {
    /// The timer armed with `a` and `b` is due (on the timer thread).
    func timerFired(_ a: UInt64, _ b: UInt64)
}

/// Runs callbacks at future times on one thread, from a ``TimerQueue`` (a first-in, first-out
/// lane per delay, and a heap for the rest): cheap enough for the hundred thousand transaction
/// timers a busy server keeps. The queue holds only deadlines and ids (plain integers, nothing
/// to retain while it is reordered); the callbacks sit in a table by id, so cancelling is one
/// removal that also frees the callback at once, and a cancelled id is skipped when it comes up
/// (and never sets the thread's wake-up time: cancelled ids in front of the queue are dropped
/// before the thread goes to sleep). The runtime's own timers are not callbacks but a weak
/// ``TimerTarget`` and two numbers, held in the table as they are (no allocation per timer).
///
/// Timers are batched: the thread sleeps until the earliest deadline rounded up to the next
/// ``resolution`` step, then runs everything due, so timers that fall due close together cost
/// one wake-up (under load, thousands a second would otherwise each wake the thread). A timer
/// therefore fires up to one step late; SIP's shortest timer (T1, 500 ms) does not notice.
///
/// It runs on ``MonotonicClock`` (the simulation has its own virtual-time loop); deadlines in
/// the queue are durations since that clock's origin. Call
/// ``shutdown()`` when done: the thread keeps the service alive until then.
public final class TimerService: Sendable {
    public struct Handle: Hashable, Sendable {
        /// The timer's number: unique for the service's lifetime, never 0.
        package let id: UInt64
        package init(id: UInt64) { self.id = id }

        public static func == (a: Handle, b: Handle) -> Bool { a.id == b.id }
        public func hash(into hasher: inout Hasher) { hasher.combine(id) }

        /// The service's table looks a timer up by handle on every arm, cancel and firing;
        /// handles are the service's own numbers, in sequence (see `sequentialHash`).
        public func _rawHashValue(seed: Int) -> Int { sequentialHash(id, seed: seed) }
    }

    /// What a timer runs.
    enum Action: Sendable {
        case callback(@Sendable () -> Void)
        case target(WeakTimerTarget, UInt64, UInt64)

        func run() {
            switch self {
            case .callback(let f): f()
            case .target(let t, let a, let b): t.target?.timerFired(a, b)
            }
        }
    }

    struct State {
        var queue = TimerQueue()
        /// The armed timers' actions, under their handles' ids (see ``SlotMap``: no table to
        /// rehash, nothing moved, as a server's timers grow to tens of thousands).
        var actions = SlotMap<Action>()
        var running = true
        /// How many times the thread has looked at the queue (a wake-up each, but for the first).
        var passes = 0
    }

    /// How late a timer may fire so that neighbours share a wake-up.
    public let resolution: Duration
    /// ``resolution`` in nanoseconds (0: no batching).
    private let step: Int64
    private let state = Mutex(State())
    private let condition = MonotonicCondition()
    private let thread = Mutex<IOThread?>(nil)

    /// Starts the timer thread ("sip-timers"). The process cannot run SIP without it: failing to
    /// create a thread stops the process.
    /// - Parameter resolution: timers due within one step of each other fire together (default
    ///   4 ms; `.zero` wakes for every deadline).
    public init(resolution: Duration = .milliseconds(4)) {
        self.resolution = max(resolution, .zero)
        step = self.resolution.components.seconds * 1_000_000_000 + self.resolution.components.attoseconds / 1_000_000_000
        do {
            let t = try IOThread(name: "sip-timers") { [self] in loop() }
            thread.withLock { $0 = t }
        } catch {
            fatalError("TimerService: \(error)")
        }
    }

    /// The number of timers that have not fired or been cancelled.
    public var pendingCount: Int { state.withLock { $0.actions.count } }

    /// How many times the thread has woken to look at the queue (for tests).
    package var passes: Int { state.withLock { $0.passes } }

    /// Runs `action` after `delay` on the timer thread.
    @discardableResult
    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> Handle {
        insert(.callback(action), after: delay)
    }

    /// Calls `target.timerFired(a, b)` after `delay` on the timer thread, unless the target is
    /// gone by then (it is held weakly). Nothing is allocated for the timer.
    @discardableResult
    package func schedule(after delay: Duration, target: any TimerTarget, _ a: UInt64, _ b: UInt64) -> Handle {
        insert(after: delay) { _ in .target(WeakTimerTarget(target), a, b) }
    }

    /// Calls `target.timerFired(a, id)` after `delay` on the timer thread, where `id` is the
    /// returned handle's ``Handle/id``: the owner keeps only that number per timer and knows a
    /// callback that lost a race with a restart or cancel by it. Nothing is allocated.
    @discardableResult
    package func schedule(after delay: Duration, target: any TimerTarget, _ a: UInt64) -> Handle {
        insert(after: delay) { id in .target(WeakTimerTarget(target), a, id) }
    }

    private func insert(_ action: Action, after delay: Duration) -> Handle {
        insert(after: delay) { _ in action }
    }

    /// Arms the action `make` builds from the timer's id.
    private func insert(after delay: Duration, _ make: (UInt64) -> Action) -> Handle {
        let deadline = MonotonicClock.now.sinceOrigin + max(delay, .zero)
        let (id, first) = state.withLock { s -> (UInt64, Bool) in
            let id = s.actions.insert(make)
            let first = s.queue.push(id, at: deadline, delay: delay)
            return (id, first)
        }
        if first { signal() }
        return Handle(id: id)
    }

    /// Cancels a timer; nothing happens if it already fired.
    public func cancel(_ h: Handle) {
        // The callback comes out of the lock and is released here, outside it (it may hold the
        // last reference to something whose deinit takes other locks).
        _ = state.withLock { $0.actions.remove(h.id) }
    }

    /// Stops the thread; pending timers never fire.
    public func shutdown() {
        // The callbacks come out of the lock and are released outside it (as in cancel).
        let (wasRunning, _) = state.withLock { s -> (Bool, SlotMap<Action>) in
            defer { s.running = false; s.queue.removeAll(); s.actions = SlotMap() }
            return (s.running, s.actions)
        }
        guard wasRunning else { return }
        signal()
        // From a timer callback this detaches the thread instead of waiting for itself.
        thread.withLock { t -> IOThread? in defer { t = nil }; return t }?.join()
    }

    private func signal() { condition.signal() }

    /// The wake-up time for the earliest deadline: rounded up to the next resolution step.
    private func wakeTime(_ deadline: Duration?) -> Duration? {
        guard let d = deadline, step > 0 else { return deadline }
        let ns = d.components.seconds * 1_000_000_000 + d.components.attoseconds / 1_000_000_000
        return .nanoseconds((ns + step - 1) / step * step)
    }

    private func loop() {
        var due: [Action] = []
        while true {
            let (running, next) = state.withLock { s -> (Bool, Duration?) in
                guard s.running else { return (false, nil) }
                s.passes += 1
                let now = MonotonicClock.now.sinceOrigin
                while let id = s.queue.pop(dueBy: now) {
                    if let a = s.actions.remove(id) { due.append(a) }
                }
                // Cancelled timers stay in the queue until they come up. Those in front go now,
                // so the thread sleeps until the earliest timer still armed: a 2xx
                // retransmission timer its ACK cancelled (one per call) does not wake it.
                while let id = s.queue.firstItem, !s.actions.contains(id) { _ = s.queue.popFirst() }
                return (true, s.queue.nextDeadline)
            }
            guard running else { return }
            if !due.isEmpty {
                for a in due { a.run() }
                due.removeAll(keepingCapacity: true)
                continue
            }
            condition.wait(until: wakeTime(next)) {
                // Re-checked under the condition's lock, so a schedule() in between is not missed.
                let now = state.withLock { s -> (Bool, Duration?) in (s.running, s.queue.nextDeadline) }
                return now.0 && now.1 == next
            }
        }
    }
}

/// A weak reference to a ``TimerTarget``, for a timer's entry.
struct WeakTimerTarget: Sendable {
    weak var target: (any TimerTarget)?
    init(_ target: any TimerTarget) { self.target = target }
}

/// A pthread mutex and a condition variable on CLOCK_MONOTONIC. pthread objects are made for
/// use across threads; they live at a fixed address for the object's lifetime, which is why
/// this is a class and `@unchecked Sendable` is sound.
final class MonotonicCondition: @unchecked Sendable {
    private let lock: UnsafeMutablePointer<pthread_mutex_t>
    private let cond: UnsafeMutablePointer<pthread_cond_t>

    init() {
        lock = .allocate(capacity: 1)
        pthread_mutex_init(lock, nil)
        cond = .allocate(capacity: 1)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attr)
        pthread_condattr_destroy(&attr)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(lock)
        cond.deallocate()
        lock.deallocate()
    }

    func signal() {
        pthread_mutex_lock(lock)
        pthread_cond_signal(cond)
        pthread_mutex_unlock(lock)
    }

    /// Waits (if `shouldWait()` holds under the lock) until signalled or until the monotonic
    /// `deadline`; forever when it is `nil`.
    func wait(until deadline: Duration?, shouldWait: () -> Bool) {
        pthread_mutex_lock(lock)
        if shouldWait() {
            if let d = deadline {
                var ts = MonotonicClock.Instant(sinceOrigin: d).timespec
                _ = pthread_cond_timedwait(cond, lock, &ts)
            } else {
                pthread_cond_wait(cond, lock)
            }
        }
        pthread_mutex_unlock(lock)
    }
}
