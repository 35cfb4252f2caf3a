import Foundation
import Glibc
import Synchronization

/// A socket call of the relay failed.
public struct RelayError: Error, CustomStringConvertible {
    public var what: String
    public var errno: Int32
    public var description: String { "relay: \(what) failed (errno \(errno))" }
}

/// A UDP relay on 127.0.0.1 between two media sessions: each side is told (in the SDP) that the
/// other is at the relay's socket facing it. RTP from B to A can be dropped (every `n`th packet)
/// or delayed (every other packet by `delay`); RTCP always passes. One thread, bounded queue,
/// stopped by ``stop()``.
public final class ImpairingRelay: @unchecked Sendable {
    /// What happens to RTP from B to A.
    public enum Impairment: Sendable, Equatable {
        case none
        case dropEvery(Int)
        case delayEveryOther(Duration)
    }

    /// The socket A sends to, and the one B sends to.
    public let portForA: UInt16
    public let portForB: UInt16
    private let fdA: Int32
    private let fdB: Int32
    private let impairment = Mutex(Impairment.none)
    private let running = Atomic<Bool>(true)
    private let counters = Mutex((forwarded: 0, dropped: 0, delayed: 0))
    private var thread: Thread?

    /// Binds the two sockets on 127.0.0.1.
    public init() throws {
        func bound() throws -> (Int32, UInt16) {
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            guard fd >= 0 else { throw RelayError(what: "socket", errno: errno) }
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_addr.s_addr = inet_addr("127.0.0.1")
            a.sin_port = 0
            let r = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            guard r == 0 else { close(fd); throw RelayError(what: "bind", errno: errno) }
            var len = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
            return (fd, UInt16(bigEndian: a.sin_port))
        }
        (fdA, portForA) = try bound()
        (fdB, portForB) = try bound()
    }

    /// Changes the impairment from now on.
    public func set(_ i: Impairment) { impairment.withLock { $0 = i } }
    /// Packets forwarded, dropped and delayed so far.
    public var stats: (forwarded: Int, dropped: Int, delayed: Int) { counters.withLock { $0 } }

    /// Starts relaying between the sessions' real RTP ports (RTCP is multiplexed on them).
    public func start(a: UInt16, b: UInt16) {
        let t = Thread { [self] in run(a: a, b: b) }
        thread = t
        t.start()
    }

    /// Stops the thread and closes the sockets.
    public func stop() {
        running.store(false, ordering: .sequentiallyConsistent)
        // The thread polls every millisecond: give it time to leave before closing.
        usleep(20_000)
        close(fdA)
        close(fdB)
    }

    private func run(a: UInt16, b: UInt16) {
        func address(_ port: UInt16) -> sockaddr_in {
            var s = sockaddr_in()
            s.sin_family = sa_family_t(AF_INET)
            s.sin_addr.s_addr = inet_addr("127.0.0.1")
            s.sin_port = port.bigEndian
            return s
        }
        let toA = address(a), toB = address(b)
        func send(_ bytes: [UInt8], from fd: Int32, to target: sockaddr_in) {
            var t = target
            _ = bytes.withUnsafeBytes { buf in
                withUnsafePointer(to: &t) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, buf.baseAddress, buf.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                } }
            }
        }
        var fds = [pollfd(fd: fdA, events: Int16(POLLIN), revents: 0), pollfd(fd: fdB, events: Int16(POLLIN), revents: 0)]
        var buffer = [UInt8](repeating: 0, count: 2048)
        var held: [(due: ContinuousClock.Instant, bytes: [UInt8])] = []
        var rtpFromB = 0
        let clock = ContinuousClock()
        while running.load(ordering: .relaxed) {
            _ = poll(&fds, 2, 1)
            let now = clock.now
            while let first = held.first, first.due <= now {
                send(first.bytes, from: fdA, to: toA)
                held.removeFirst()
            }
            for (index, fd) in [fdA, fdB].enumerated() where fds[index].revents != 0 {
                fds[index].revents = 0
                while true {
                    let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                    guard n > 0 else { break }
                    let bytes = Array(buffer[..<n])
                    if index == 0 {
                        // From A: on to B as it is.
                        send(bytes, from: fdB, to: toB)
                        counters.withLock { $0.forwarded += 1 }
                        continue
                    }
                    // From B: RTCP (payload types 200–204 in the second byte) passes; RTP is impaired.
                    let isRTCP = bytes.count > 1 && (200...204).contains(bytes[1])
                    guard !isRTCP else {
                        send(bytes, from: fdA, to: toA)
                        continue
                    }
                    rtpFromB += 1
                    switch impairment.withLock({ $0 }) {
                    case .none:
                        send(bytes, from: fdA, to: toA)
                        counters.withLock { $0.forwarded += 1 }
                    case .dropEvery(let k):
                        if rtpFromB % k == 0 {
                            counters.withLock { $0.dropped += 1 }
                        } else {
                            send(bytes, from: fdA, to: toA)
                            counters.withLock { $0.forwarded += 1 }
                        }
                    case .delayEveryOther(let d):
                        if rtpFromB % 2 == 0, held.count < 1000 {
                            held.append((now + d, bytes))
                            counters.withLock { $0.delayed += 1 }
                        } else {
                            send(bytes, from: fdA, to: toA)
                            counters.withLock { $0.forwarded += 1 }
                        }
                    }
                }
            }
        }
    }
}
