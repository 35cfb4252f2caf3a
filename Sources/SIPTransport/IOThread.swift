import CSocket
import Glibc
import Synchronization

/// A joinable POSIX thread running one closure: the I/O loop of a transport.
final class IOThread: Sendable {
    private final class Start {
        let name: String
        let body: @Sendable () -> Void
        let identity: IOThread
        init(name: String, body: @escaping @Sendable () -> Void, identity: IOThread) {
            self.name = name
            self.body = body
            self.identity = identity
        }
    }

    /// The thread's pthread_t, written by the thread itself first thing (so that ``isCurrent``
    /// holds from its first instruction) and by the creator.
    private let threadID = Atomic<UInt>(0)
    private let joined = Mutex(false)

    /// Starts a thread named `name` (at most 15 bytes are kept) running `body`.
    init(name: String, body: @escaping @Sendable () -> Void) throws(TransportError) {
        let start = Unmanaged.passRetained(Start(name: name, body: body, identity: self)).toOpaque()
        var tid = pthread_t()
        let rc = pthread_create(&tid, nil, { argument in
            let start = Unmanaged<Start>.fromOpaque(argument!).takeRetainedValue()
            start.identity.threadID.store(UInt(pthread_self()), ordering: .sequentiallyConsistent)
            cs_set_thread_name(start.name)
            start.body()
            return nil
        }, start)
        guard rc == 0 else {
            Unmanaged<Start>.fromOpaque(start).release()
            throw .system(SystemCallError(call: "pthread_create", code: rc))
        }
        threadID.store(UInt(tid), ordering: .sequentiallyConsistent)
    }

    /// Whether the caller is running on this thread.
    var isCurrent: Bool {
        UInt(pthread_self()) == threadID.load(ordering: .sequentiallyConsistent)
    }

    /// Waits for the thread to end. Only the first call joins; calling it from the thread itself
    /// does nothing (the thread is then detached so that its resources are freed when it ends).
    func join() {
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
