import Synchronization
import Dispatch

/// A serial queue without a thread of its own: work runs one item at a time, in the order it
/// was submitted, on the thread that submits it when no other thread is running the queue's
/// work at that moment, and otherwise on the thread that is (after what it already has).
///
/// This is what a serial `DispatchQueue` gives its owner (no two items at once, order kept,
/// work submitted from inside an item runs after that item), without handing every item to a
/// pool thread: a message read by a transport thread is handled start to finish on that
/// thread, with no wake-up and no context switch, unless a timer or an application command is
/// being handled at the same time. Keep items short and never block in one: whoever submits
/// may be the one to run it.
package final class InlineSerialQueue: Sendable {
    struct State {
        var items: [@Sendable () -> Void] = []
        var head = 0
        var draining = false
    }

    private let state = Mutex(State())

    package init() {}

    /// Runs `work` now on this thread if the queue is idle, else after the queued items.
    package func async(_ work: @escaping @Sendable () -> Void) {
        let runHere = state.withLock { s -> Bool in
            if s.draining {
                s.items.append(work)
                return false
            }
            s.draining = true
            return true
        }
        guard runHere else { return }
        work()
        drain()
    }

    /// Runs `body` on the queue and waits for it. Never call it from inside an item.
    package func sync<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        async {
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }

    /// Runs what others queued while this thread held the queue, until there is nothing left.
    private func drain() {
        while true {
            let next = state.withLock { s -> (@Sendable () -> Void)? in
                guard s.head < s.items.count else {
                    s.items.removeAll(keepingCapacity: s.items.capacity <= 1024)
                    s.head = 0
                    s.draining = false
                    return nil
                }
                let item = s.items[s.head]
                s.head += 1
                // Under steady load the queue may never run dry: drop what has run so the
                // array holds only what waits.
                if s.head >= 64, s.head * 2 >= s.items.count {
                    s.items.removeFirst(s.head)
                    s.head = 0
                }
                return item
            }
            guard let next else { return }
            next()
        }
    }
}
