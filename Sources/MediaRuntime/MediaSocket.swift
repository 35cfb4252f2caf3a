import CSocket
import Glibc
import Synchronization

/// A numeric IPv4 or IPv6 address and port where media comes from or goes to.
public struct MediaEndpoint: Sendable, Hashable, CustomStringConvertible {
    let family: Int32
    let high: UInt64
    let low: UInt64
    let scopeID: UInt32
    /// The port, in host byte order.
    public let port: UInt16

    /// An endpoint from a numeric address (`"192.0.2.1"`, `"::1"`) and a port; `nil` when the
    /// address is not numeric.
    public init?(ip: String, port: UInt16) {
        var storage = sockaddr_storage()
        var length = socklen_t(0)
        guard cs_sockaddr_from_text(ip, port, &storage, &length) >= 0 else { return nil }
        self.init(storage: storage, length: length)
    }

    init?(storage: sockaddr_storage, length: socklen_t) {
        var bytes = (UInt64(0), UInt64(0))
        var port: UInt16 = 0
        var scope: UInt32 = 0
        var storage = storage
        let family = withUnsafeMutableBytes(of: &bytes) { raw in
            cs_sockaddr_parts(&storage, length, raw.baseAddress!.assumingMemoryBound(to: UInt8.self), &port, &scope)
        }
        guard family == AF_INET || family == AF_INET6 else { return nil }
        self.family = family
        self.high = bytes.0
        self.low = family == AF_INET ? 0 : bytes.1
        self.scopeID = scope
        self.port = port
    }

    /// The same address with another port.
    public func withPort(_ port: UInt16) -> MediaEndpoint {
        var copy = self
        copy = MediaEndpoint(family: family, high: high, low: low, scopeID: scopeID, port: port)
        return copy
    }

    private init(family: Int32, high: UInt64, low: UInt64, scopeID: UInt32, port: UInt16) {
        self.family = family
        self.high = high
        self.low = low
        self.scopeID = scopeID
        self.port = port
    }

    var sockaddr: (sockaddr_storage, socklen_t) {
        var storage = sockaddr_storage()
        var length = socklen_t(0)
        let words = (high, low)
        withUnsafeBytes(of: words) { raw in
            _ = cs_sockaddr_make(family, raw.baseAddress!.assumingMemoryBound(to: UInt8.self), port, scopeID, &storage, &length)
        }
        return (storage, length)
    }

    /// The numeric address without the port.
    public var ip: String {
        var buffer = [CChar](repeating: 0, count: 64)
        let words = (high, low)
        withUnsafeBytes(of: words) { raw in
            _ = cs_address_to_text(family, raw.baseAddress!.assumingMemoryBound(to: UInt8.self), &buffer, buffer.count)
        }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `ip:port`, or `[ip]:port` for IPv6.
    public var description: String { family == AF_INET6 ? "[\(ip)]:\(port)" : "\(ip):\(port)" }
}

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
        guard let endpoint = MediaEndpoint(ip: ip, port: port) else { throw .invalidAddress(ip) }
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
    func send(_ bytes: [UInt8], to endpoint: MediaEndpoint) -> Bool {
        var (storage, length) = endpoint.sockaddr
        return bytes.withUnsafeBufferPointer { buffer in
            cs_sendto(fd, buffer.baseAddress, buffer.count, 0, &storage, length) == buffer.count
        }
    }

    func close() { _ = Glibc.close(fd) }
}

/// A joinable POSIX thread running one closure.
final class MediaThread: Sendable {
    private final class Start {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }

    private let threadID: Mutex<pthread_t?>

    init(name: String, body: @escaping @Sendable () -> Void) throws(MediaSessionError) {
        let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
        var tid = pthread_t()
        let rc = pthread_create(&tid, nil, { argument in
            let start = Unmanaged<Start>.fromOpaque(argument!).takeRetainedValue()
            cs_set_thread_name(start.name)
            start.body()
            return nil
        }, start)
        guard rc == 0 else {
            Unmanaged<Start>.fromOpaque(start).release()
            throw .system("pthread_create", errno: rc)
        }
        threadID = Mutex(tid)
    }

    /// Waits for the thread to end (once; detaches when called from the thread itself).
    func join() {
        guard let tid = threadID.withLock({ id -> pthread_t? in
            defer { id = nil }
            return id
        }) else { return }
        if pthread_equal(tid, pthread_self()) != 0 {
            pthread_detach(tid)
        } else {
            pthread_join(tid, nil)
        }
    }
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
