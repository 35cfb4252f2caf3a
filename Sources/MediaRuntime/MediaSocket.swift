import CSocket
import Glibc
import NetworkIO

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
