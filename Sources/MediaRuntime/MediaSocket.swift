import CSocket
import Glibc
import NetworkIO
import Synchronization

/// A bound, non-blocking UDP socket owned by a media session.
final class MediaSocket: Sendable {
    let fd: Int32
    let port: UInt16
    /// Whether the kernel stamps received datagrams with their arrival time (SO_TIMESTAMPNS).
    let stamped: Bool

    private init(fd: Int32, port: UInt16, stamped: Bool) {
        self.fd = fd
        self.port = port
        self.stamped = stamped
    }

    /// Binds a socket to `ip:port`; `nil` when the port is taken (or the bind fails otherwise).
    static func bind(ip: String, port: UInt16) throws(MediaSessionError) -> MediaSocket? {
        guard let endpoint = try? SocketAddress(ip: ip, port: port) else { throw .invalidAddress(ip) }
        let fd = cs_socket(endpoint.family, CS_KIND_UDP, 1)
        guard fd >= 0 else { throw .system("socket", errno: cs_errno()) }
        if endpoint.family == AF_INET6 { _ = cs_set_v6only(fd, 1) }
        var (storage, length) = endpoint.sockaddr
        guard cs_bind(fd, &storage, length) == 0 else {
            let code = cs_errno()
            _ = Glibc.close(fd)
            if code == EADDRINUSE || code == EACCES { return nil }
            throw .system("bind", errno: code)
        }
        _ = cs_set_buffer_size(fd, 0, 256 * 1024)
        // Arrival times come from the kernel: the engine reads a session's RTP socket when it
        // ticks (or, where the kernel cannot stamp datagrams, as they come).
        let stamped = cs_enable_receive_timestamps(fd) == 0
        return MediaSocket(fd: fd, port: port, stamped: stamped)
    }

    /// Sends one datagram (best effort: a full buffer or an ICMP error drops it).
    @discardableResult
    func send(_ bytes: [UInt8], to endpoint: SocketAddress) -> Bool {
        var (storage, length) = endpoint.sockaddr
        return bytes.withUnsafeBufferPointer { buffer in
            cs_sendto(fd, buffer.baseAddress, buffer.count, 0, &storage, length) == buffer.count
        }
    }

    func close() { _ = Glibc.close(fd) }
}

enum MonotonicClock {
    /// CLOCK_MONOTONIC as a duration.
    static func now() -> Duration {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return .seconds(ts.tv_sec) + .nanoseconds(ts.tv_nsec)
    }

    /// CLOCK_MONOTONIC in nanoseconds.
    static func nanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// Wall-clock time since the Unix epoch (for RTCP NTP timestamps).
    static func wallClock() -> Duration {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return .seconds(ts.tv_sec) + .nanoseconds(ts.tv_nsec)
    }

    /// Sleeps until the monotonic time `deadline` (absolute, so ticks do not drift).
    static func sleep(until deadline: Duration) {
        let (seconds, attoseconds) = deadline.components
        var ts = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
    }
}
