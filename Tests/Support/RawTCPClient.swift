#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NetworkIO

/// A plain blocking TCP client socket, to poke a ``TCPTransport`` from outside.
public final class RawTCPClient {
    public let fd: Int32

    public init?(connectingTo address: SocketAddress) {
        let family = address.isIPv6 ? AF_INET6 : AF_INET
        fd = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var rc: Int32
        if address.isIPv6 {
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = address.port.bigEndian
            _ = inet_pton(AF_INET6, address.ipString, &sin6.sin6_addr)
            rc = withUnsafePointer(to: &sin6) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        } else {
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = address.port.bigEndian
            _ = inet_pton(AF_INET, address.ipString, &sin.sin_addr)
            rc = withUnsafePointer(to: &sin) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        guard rc == 0 else {
            close(fd)
            return nil
        }
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { close(fd) }

    /// The client's own address, as the server sees it.
    public var localAddress: SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard rc == 0 else { return nil }
        var text = [CChar](repeating: 0, count: 64)
        var port: UInt16 = 0
        withUnsafePointer(to: &storage) { p in
            if Int32(p.pointee.ss_family) == AF_INET6 {
                p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { s in
                    var a = s.pointee.sin6_addr
                    _ = inet_ntop(AF_INET6, &a, &text, 64)
                    port = UInt16(bigEndian: s.pointee.sin6_port)
                }
            } else {
                p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { s in
                    var a = s.pointee.sin_addr
                    _ = inet_ntop(AF_INET, &a, &text, 64)
                    port = UInt16(bigEndian: s.pointee.sin_port)
                }
            }
        }
        let ip = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return try? SocketAddress(ip: ip, port: port)
    }

    public func write(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBufferPointer { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            offset += n
        }
    }

    public func write(_ text: String) { write(Array(text.utf8)) }

    /// Reads what arrives within `timeout`: bytes, `[]` at end of stream, `nil` when nothing came.
    public func read(timeout: Duration = .milliseconds(1500)) -> [UInt8]? {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ms = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        guard poll(&pfd, 1, ms) > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let n = buffer.withUnsafeMutableBufferPointer { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { return [] }
        return Array(buffer[..<n])
    }

    /// Whether the peer closes the connection within `timeout` (bytes before the end are skipped).
    public func seesEndOfStream(timeout: Duration = .milliseconds(1500)) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard let bytes = read(timeout: ContinuousClock.now.duration(to: deadline)) else { return false }
            if bytes.isEmpty { return true }
        }
        return false
    }
}

/// A TCP port of 127.0.0.1 free right now (bound, read, released): an address where nothing
/// accepts connections.
public func freeTCPPort() -> UInt16 { freeLoopbackPort(Int32(SOCK_STREAM.rawValue)) }
