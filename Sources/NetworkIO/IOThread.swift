import CSocket
import Glibc
import Synchronization

/// A joinable POSIX thread running one closure: the I/O loop of a SIP transport, a media
/// worker, the SIP timer thread.
package final class IOThread: Sendable {
    private final class Start {
        let name: String
        let realtimePriority: Int32?
        let body: @Sendable () -> Void
        let identity: IOThread
        init(name: String, realtimePriority: Int32?, body: @escaping @Sendable () -> Void, identity: IOThread) {
            self.name = name
            self.realtimePriority = realtimePriority
            self.body = body
            self.identity = identity
        }
    }

    /// The thread's pthread_t, written by the thread itself first thing (so that ``isCurrent``
    /// holds from its first instruction) and by the creator.
    private let threadID = Atomic<UInt>(0)
    private let joined = Mutex(false)
    private let realtime = Atomic<Bool>(false)

    /// Starts a thread named `name` (at most 15 bytes are kept) running `body`. With
    /// `realtimePriority`, the thread asks for SCHED_FIFO at that priority (clamped to 1–99)
    /// before `body` runs, and keeps normal scheduling when refused (see ``isRealtime``).
    package init(name: String, realtimePriority: Int32? = nil, body: @escaping @Sendable () -> Void) throws(SystemCallError) {
        let start = Unmanaged.passRetained(Start(name: name, realtimePriority: realtimePriority, body: body, identity: self)).toOpaque()
        var tid = pthread_t()
        let rc = pthread_create(&tid, nil, { argument in
            let start = Unmanaged<Start>.fromOpaque(argument!).takeRetainedValue()
            start.identity.threadID.store(UInt(pthread_self()), ordering: .sequentiallyConsistent)
            cs_set_thread_name(start.name)
            if let priority = start.realtimePriority {
                start.identity.realtime.store(cs_set_thread_realtime(max(1, min(99, priority))) == 0, ordering: .sequentiallyConsistent)
            }
            start.body()
            return nil
        }, start)
        guard rc == 0 else {
            Unmanaged<Start>.fromOpaque(start).release()
            throw SystemCallError(call: "pthread_create", code: rc)
        }
        threadID.store(UInt(tid), ordering: .sequentiallyConsistent)
    }

    /// Whether the caller is running on this thread.
    package var isCurrent: Bool {
        UInt(pthread_self()) == threadID.load(ordering: .sequentiallyConsistent)
    }

    /// Whether the thread got the real-time priority it asked for (set before its body runs;
    /// false without `realtimePriority`).
    package var isRealtime: Bool { realtime.load(ordering: .sequentiallyConsistent) }

    /// Waits for the thread to end. Only the first call joins; calling it from the thread itself
    /// does not wait (the thread is then detached so that its resources are freed when it ends).
    package func join() {
        let first = joined.withLock { done -> Bool in
            if done { return false }
            done = true
            return true
        }
        guard first else { return }
        let tid = pthread_t(threadID.load(ordering: .sequentiallyConsistent))
        if isCurrent {
            pthread_detach(tid)
        } else {
            pthread_join(tid, nil)
        }
    }
}
