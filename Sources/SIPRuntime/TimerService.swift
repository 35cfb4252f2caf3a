import Synchronization
import SIPTransaction
import NetworkIO

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs callbacks at future times on one thread, from a binary heap: cheap enough for the tens
/// of thousands of transaction timers a busy server keeps. Cancelling is O(1): a cancelled
/// entry stays in the heap and is skipped when it comes up.
///
/// It runs on ``MonotonicClock`` (the simulation has its own virtual-time loop); deadlines in
/// the heap are durations since that clock's origin. Call
/// ``shutdown()`` when done: the thread keeps the service alive until then.
public final class TimerService: Sendable {
    public struct Handle: Hashable, Sendable { let id: UInt64 }

    struct Entry {
        var id: UInt64
        var action: @Sendable () -> Void
    }

    struct State {
        var heap = DeadlineHeap<Entry>()
        var live: Set<UInt64> = []
        var nextID: UInt64 = 1
        var running = true
    }

    private let state = Mutex(State())
    private let condition = MonotonicCondition()
    private let thread = Mutex<IOThread?>(nil)

    /// Starts the timer thread ("sip-timers"). The process cannot run SIP without it: failing to
    /// create a thread stops the process.
    public init() {
        do {
            let t = try IOThread(name: "sip-timers") { [self] in loop() }
            thread.withLock { $0 = t }
        } catch {
            fatalError("TimerService: \(error)")
        }
    }

    /// The number of timers that have not fired or been cancelled.
    public var pendingCount: Int { state.withLock { $0.live.count } }

    /// Runs `action` after `delay` on the timer thread.
    @discardableResult
    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> Handle {
        let deadline = MonotonicClock.now.sinceOrigin + max(delay, .zero)
        let (id, first) = state.withLock { s -> (UInt64, Bool) in
            let id = s.nextID
            s.nextID += 1
            s.live.insert(id)
            let first = s.heap.push(Entry(id: id, action: action), at: deadline)
            return (id, first)
        }
        if first { signal() }
        return Handle(id: id)
    }

    /// Cancels a timer; nothing happens if it already fired.
    public func cancel(_ h: Handle) {
        state.withLock { _ = $0.live.remove(h.id) }
    }

    /// Stops the thread; pending timers never fire.
    public func shutdown() {
        let wasRunning = state.withLock { s -> Bool in
            defer { s.running = false; s.heap.removeAll(); s.live.removeAll() }
            return s.running
        }
        guard wasRunning else { return }
        signal()
        // From a timer callback this detaches the thread instead of waiting for itself.
        thread.withLock { t -> IOThread? in defer { t = nil }; return t }?.join()
    }

    private func signal() { condition.signal() }

    private func loop() {
        while true {
            var due: [Entry] = []
            let (running, next) = state.withLock { s -> (Bool, Duration?) in
                guard s.running else { return (false, nil) }
                let now = MonotonicClock.now.sinceOrigin
                while let (_, e) = s.heap.pop(dueBy: now) {
                    if s.live.remove(e.id) != nil { due.append(e) }
                }
                return (true, s.heap.nextDeadline)
            }
            guard running else { return }
            for e in due { e.action() }
            if !due.isEmpty { continue }
            condition.wait(until: next) {
                // Re-checked under the condition's lock, so a schedule() in between is not missed.
                let now = state.withLock { s -> (Bool, Duration?) in (s.running, s.heap.nextDeadline) }
                return now.0 && now.1 == next
            }
        }
    }
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
