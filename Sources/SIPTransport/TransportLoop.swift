import CSocket
import NetworkIO
import Synchronization

/// The I/O thread of a transport core, once started.
final class LoopThread: Sendable {
    private let thread = Mutex<IOThread?>(nil)

    /// Starts `body` on a thread named `name`.
    func start(name: String, body: @escaping @Sendable () -> Void) throws(SystemCallError) {
        let t = try IOThread(name: name, body: body)
        thread.withLock { $0 = t }
    }

    /// Waits for the thread to end (at once when called from the thread itself, or when it
    /// never started).
    func join() {
        thread.withLock { $0 }?.join()
    }
}

/// What the UDP and the stream (TCP, TLS) cores share: one I/O thread, started once and
/// closed once.
protocol TransportLoopCore: AnyObject, Sendable {
    /// The I/O thread.
    var loopThread: LoopThread { get }
    /// Sets the core's `closed` flag under its lock; returns false when it was set already.
    func markClosed() -> Bool
}

extension TransportLoopCore {
    /// Starts `body` as the I/O thread named `name`. When no thread can be created, the core
    /// is marked closed, `release` closes its descriptors and the error is thrown.
    func startLoop(named name: String, release: () -> Void, body: @escaping @Sendable () -> Void) throws(TransportError) {
        do throws(SystemCallError) {
            try loopThread.start(name: name, body: body)
        } catch {
            _ = markClosed()
            release()
            throw .system(error)
        }
    }
}

/// A core whose I/O thread waits in poll(2) on its sockets and an eventfd that wakes it (the
/// stream cores; the UDP core's thread waits in recvmmsg(2), see ``UDPCore/close()``).
protocol PolledLoopCore: TransportLoopCore {
    /// The eventfd that wakes the I/O thread out of poll(2).
    var wakeFD: Int32 { get }
}

extension PolledLoopCore {
    /// Marks the core closed, wakes the I/O thread and waits for it to end. Idempotent; when
    /// called from the I/O thread itself it does not wait.
    func close() {
        if markClosed() { _ = cs_eventfd_signal(wakeFD) }
        loopThread.join()
    }
}
