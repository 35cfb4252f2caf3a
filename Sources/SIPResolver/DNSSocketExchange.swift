import Dispatch
import Glibc
import NetworkIO
import Synchronization

/// Set when the task waiting for a blocking exchange is cancelled; the exchange polls it.
final class CancellationFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    func cancel() { flag.store(true, ordering: .relaxed) }
    var isCancelled: Bool { flag.load(ordering: .relaxed) }
}

/// Why one exchange with one server failed.
enum DNSExchangeFailure: Error {
    case timedOut
    case cancelled
    case socket(String, Int32)
    case malformed(DNSParseError)
    /// A TCP answer did not match the query.
    case mismatch
}

/// Runs `body` on a thread of its own and waits for it without blocking the caller's
/// executor; cancelling the task sets the flag `body` polls.
///
/// Each call gets a new serial queue: such queues are "overcommit", so Dispatch gives the
/// blocking wait a thread at once instead of queueing it behind other waits.
func runBlocking<T: Sendable>(_ body: @escaping @Sendable (CancellationFlag) throws -> T) async throws -> T {
    let flag = CancellationFlag()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            DispatchQueue(label: "SIPResolver.dns").async {
                continuation.resume(with: Result { try body(flag) })
            }
        }
    } onCancel: {
        flag.cancel()
    }
}

/// Blocking DNS exchanges over UDP and TCP with one server, bounded by a deadline.
enum DNSSocketExchange {
    /// The longest single `poll` wait, so cancellation is noticed quickly.
    static let pollSlice = 50

    /// Whether `response` answers `query`: a response with the query's ID and question.
    static func matches(_ response: DNSMessage, id: UInt16, question: DNSQuestion) -> Bool {
        response.isResponse && response.id == id && response.questions.count == 1 && response.questions[0] == question
    }

    static func milliseconds(until deadline: MonotonicClock.Instant) -> Int {
        let (s, atto) = (deadline - .now).components
        if s < 0 || (s == 0 && atto <= 0) { return 0 }
        let ms = s * 1000 + atto / 1_000_000_000_000_000
        return Int(min(ms, Int64(Int32.max)))
    }

    /// Waits for `events` on `fd` until the deadline; false on timeout.
    static func wait(_ fd: Int32, events: Int32, deadline: MonotonicClock.Instant, cancel: CancellationFlag) throws(DNSExchangeFailure) -> Bool {
        while true {
            if cancel.isCancelled { throw .cancelled }
            let remaining = milliseconds(until: deadline)
            if remaining == 0 { return false }
            var pfd = pollfd(fd: fd, events: Int16(events), revents: 0)
            let n = poll(&pfd, 1, Int32(min(remaining, pollSlice)))
            if n < 0 {
                if errno == EINTR { continue }
                throw .socket("poll", errno)
            }
            if n > 0 { return true }
        }
    }

    /// Binds `fd` to a random port above 1023 of the wildcard address of the server's family
    /// (RFC 5452 §9.2); after eight ports in use, lets the kernel choose.
    static func bindRandomPort(_ fd: Int32, like server: SocketAddress) {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<8 {
            let port = UInt16.random(in: 1024...UInt16.max, using: &generator)
            let rc = SocketAddress.wildcard(ipv6: server.isIPv6, port: port).withSockaddr { bind(fd, $0, $1) }
            if rc == 0 { return }
        }
    }

    /// Sends `query` over UDP from a random port and waits for the matching answer. Datagrams
    /// that do not parse or do not match the ID and question are ignored (RFC 5452 §9.1).
    static func udp(_ query: [UInt8], id: UInt16, question: DNSQuestion, server: SocketAddress, timeout: Duration,
                    limits: DNSParserLimits, cancel: CancellationFlag) throws(DNSExchangeFailure) -> DNSMessage {
        let deadline = MonotonicClock.now + timeout
        let fd = socket(server.family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .socket("socket", errno) }
        defer { close(fd) }
        bindRandomPort(fd, like: server)
        // A connected socket only receives datagrams from the server, and reports ICMP errors.
        guard server.withSockaddr({ connect(fd, $0, $1) }) == 0 else { throw .socket("connect", errno) }
        let sent = query.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == query.count else { throw .socket("send", errno) }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var malformed: DNSParseError? = nil
        while true {
            guard try wait(fd, events: Int32(POLLIN), deadline: deadline, cancel: cancel) else {
                if let malformed { throw .malformed(malformed) }
                throw .timedOut
            }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK { continue }
                throw .socket("recv", errno)
            }
            let datagram = Array(buffer[0..<n])
            do {
                let response = try DNSMessage(bytes: datagram, limits: limits)
                if matches(response, id: id, question: question) { return response }
            } catch {
                // Remember a broken answer carrying our ID, in case nothing better arrives.
                if n >= 2, UInt16(datagram[0]) << 8 | UInt16(datagram[1]) == id { malformed = error }
            }
        }
    }

    /// Sends `query` over TCP (two-octet length prefix, RFC 1035 §4.2.2) and reads the answer.
    static func tcp(_ query: [UInt8], id: UInt16, question: DNSQuestion, server: SocketAddress, timeout: Duration,
                    limits: DNSParserLimits, cancel: CancellationFlag) throws(DNSExchangeFailure) -> DNSMessage {
        let deadline = MonotonicClock.now + timeout
        let fd = socket(server.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw .socket("socket", errno) }
        defer { close(fd) }
        if server.withSockaddr({ connect(fd, $0, $1) }) != 0 {
            guard errno == EINPROGRESS else { throw .socket("connect", errno) }
            guard try wait(fd, events: Int32(POLLOUT), deadline: deadline, cancel: cancel) else { throw .timedOut }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else { throw .socket("getsockopt", errno) }
            guard error == 0 else { throw .socket("connect", error) }
        }
        let framed = [UInt8(truncatingIfNeeded: query.count >> 8), UInt8(truncatingIfNeeded: query.count)] + query
        var offset = 0
        while offset < framed.count {
            let n = framed.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                guard errno == EAGAIN || errno == EWOULDBLOCK else { throw .socket("send", errno) }
                guard try wait(fd, events: Int32(POLLOUT), deadline: deadline, cancel: cancel) else { throw .timedOut }
                continue
            }
            offset += n
        }
        let prefix = try read(fd, count: 2, deadline: deadline, cancel: cancel)
        let length = Int(prefix[0]) << 8 | Int(prefix[1])
        let body = try read(fd, count: length, deadline: deadline, cancel: cancel)
        let response: DNSMessage
        do {
            response = try DNSMessage(bytes: body, limits: limits)
        } catch {
            throw .malformed(error)
        }
        guard matches(response, id: id, question: question) else { throw .mismatch }
        return response
    }

    /// Reads exactly `count` bytes from a non-blocking stream socket before the deadline.
    static func read(_ fd: Int32, count: Int, deadline: MonotonicClock.Instant, cancel: CancellationFlag) throws(DNSExchangeFailure) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = out.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + got, count - got, 0) }
            if n > 0 {
                got += n
                continue
            }
            if n == 0 { throw .socket("recv", ECONNRESET) }
            if errno == EINTR { continue }
            guard errno == EAGAIN || errno == EWOULDBLOCK else { throw .socket("recv", errno) }
            guard try wait(fd, events: Int32(POLLIN), deadline: deadline, cancel: cancel) else { throw .timedOut }
        }
        return out
    }
}
