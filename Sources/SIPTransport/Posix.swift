import CSocket
import Glibc
import NetworkIO

/// Small helpers shared by the transports.
enum Posix {
    /// Closes a descriptor, retrying nothing (close(2) must not be retried on Linux).
    static func close(_ fd: Int32) {
        if fd >= 0 { _ = Glibc.close(fd) }
    }

    /// Milliseconds to wait in poll(2) until `deadline` (rounded up; 0 when past; -1 for none).
    static func pollTimeout(until deadline: MonotonicClock.Instant?, now: MonotonicClock.Instant, cap: Duration? = nil) -> Int32 {
        var wait: Duration? = deadline.map { now.duration(to: $0) }
        if let cap { wait = wait.map { min($0, cap) } ?? cap }
        guard let wait else { return -1 }
        if wait <= .zero { return 0 }
        let (seconds, attoseconds) = wait.components
        let ms = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: ms)
    }

    /// Creates, configures and binds a socket; closes it and throws on any failure.
    static func boundSocket(kind: Int32, address: SocketAddress, nonblocking: Bool, reuseAddress: Bool) throws(TransportError) -> Int32 {
        let fd = cs_socket(address.family, kind, nonblocking ? 1 : 0)
        guard fd >= 0 else { throw .system(.current("socket")) }
        do throws(TransportError) {
            if reuseAddress, cs_set_reuseaddr(fd, 1) != 0 { throw .system(.current("setsockopt(SO_REUSEADDR)")) }
            if address.isIPv6, cs_set_v6only(fd, 1) != 0 { throw .system(.current("setsockopt(IPV6_V6ONLY)")) }
            var (storage, length) = address.sockaddr
            if cs_bind(fd, &storage, length) != 0 { throw .system(.current("bind")) }
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// An eventfd that wakes a poll(2) loop (see ``PolledLoopCore``).
    static func eventFD() throws(TransportError) -> Int32 {
        let fd = cs_eventfd()
        guard fd >= 0 else { throw .system(.current("eventfd")) }
        return fd
    }

    /// The address a socket is bound to.
    static func localAddress(of fd: Int32) throws(TransportError) -> SocketAddress {
        var storage = sockaddr_storage()
        var length = socklen_t(0)
        guard cs_getsockname(fd, &storage, &length) == 0 else { throw .system(.current("getsockname")) }
        guard let address = SocketAddress(storage: storage, length: length) else {
            throw .system(SystemCallError(call: "getsockname", code: EAFNOSUPPORT))
        }
        return address
    }

    /// Whether bytes are only CR and LF (a keep-alive, not a message); true for no bytes.
    static func isOnlyLineBreaks(_ bytes: UnsafeRawBufferPointer) -> Bool {
        for b in bytes where b != 0x0D && b != 0x0A { return false }
        return true
    }
}
