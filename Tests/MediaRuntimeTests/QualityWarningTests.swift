import Foundation
import Glibc
import Media
import SDP
import Synchronization
import Testing

@testable import MediaRuntime

/// A UDP relay on 127.0.0.1 between two media sessions: each side is told (in the SDP) that the
/// other is at the relay's socket facing it. RTP from B to A can be dropped (every `n`th packet)
/// or delayed (every other packet by `delay`); RTCP always passes. One thread, bounded queue,
/// stopped by ``stop()``.
final class ImpairingRelay: @unchecked Sendable {
    enum Impairment: Sendable, Equatable {
        case none
        case dropEvery(Int)
        case delayEveryOther(Duration)
    }

    /// The socket A sends to, and the one B sends to.
    let portForA: UInt16
    let portForB: UInt16
    private let fdA: Int32
    private let fdB: Int32
    private let impairment = Mutex(Impairment.none)
    private let running = Atomic<Bool>(true)
    private let counters = Mutex((forwarded: 0, dropped: 0, delayed: 0))
    private var thread: Thread?

    init() throws {
        func bound() throws -> (Int32, UInt16) {
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            try #require(fd >= 0)
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_addr.s_addr = inet_addr("127.0.0.1")
            a.sin_port = 0
            let r = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            try #require(r == 0)
            var len = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
            return (fd, UInt16(bigEndian: a.sin_port))
        }
        (fdA, portForA) = try bound()
        (fdB, portForB) = try bound()
    }

    func set(_ i: Impairment) { impairment.withLock { $0 = i } }
    var stats: (forwarded: Int, dropped: Int, delayed: Int) { counters.withLock { $0 } }

    /// Starts relaying between the sessions' real RTP ports (RTCP is multiplexed on them).
    func start(a: UInt16, b: UInt16) {
        let t = Thread { [self] in run(a: a, b: b) }
        thread = t
        t.start()
    }

    func stop() {
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

/// Quality warnings raised and cleared by real impairments between two sessions on sockets.
@Suite(.serialized) struct QualityWarningTests {
    /// Two PCMU sessions with RTCP every ~200 ms (a quality sample each), A's view of B through
    /// the relay.
    static func relayedCall(_ relay: ImpairingRelay) throws -> (MediaSession, MediaSession, Recorder) {
        let config = MediaSessionConfiguration(localAddress: "127.0.0.1", portRange: 10000...19999, codecs: [.pcmu], rtcpMux: true,
                                               rtcpInterval: .milliseconds(200))
        let recA = Recorder(rate: 8000)
        let a = try MediaSession(configuration: config, input: .tone(frequency: 440), output: recA.output, events: recA.sink)
        let b = try MediaSession(configuration: config, input: .tone(frequency: 1000))
        // Each side's SDP names the relay's socket facing the other side.
        var capsA = a.streamCapabilities()
        capsA.port = relay.portForB
        var capsB = b.streamCapabilities()
        capsB.port = relay.portForA
        var oaA = OfferAnswer(capabilities: MediaCapabilities(address: "127.0.0.1", streams: [capsA]), sessionID: 1)
        var oaB = OfferAnswer(capabilities: MediaCapabilities(address: "127.0.0.1", streams: [capsB]), sessionID: 2)
        let offer = try oaA.makeOffer()
        let answer = try oaB.receiveOffer(offer)
        let negotiatedA = try oaA.receiveAnswer(answer.sdp)
        relay.start(a: a.localPort, b: b.localPort)
        try b.apply(#require(answer.negotiated.audio))
        try a.apply(#require(negotiatedA.audio))
        return (a, b, recA)
    }

    static func qualityEvents(_ r: Recorder) -> [QualityEvent] {
        r.events.compactMap { if case .quality(let q) = $0 { return q } else { return nil } }
    }

    @Test("10% of the packets dropped raises the high-loss warning; without drops it clears", .timeLimit(.minutes(1)))
    func lossRaisedAndCleared() async throws {
        let relay = try ImpairingRelay()
        let (a, b, rec) = try Self.relayedCall(relay)
        defer {
            a.stop()
            b.stop()
            relay.stop()
        }
        // A clean second first: no loss warning.
        #expect(await waitUntil(seconds: 5) { a.stats().call.received.packets > 50 })
        try await Task.sleep(for: .milliseconds(1000))
        #expect(!Self.qualityEvents(rec).contains(.raised(.highPacketLoss)), "\(Self.qualityEvents(rec))")
        #expect(a.stats().call.packetsLost == 0)
        relay.set(.dropEvery(10))
        #expect(await waitUntil(seconds: 10) { Self.qualityEvents(rec).contains(.raised(.highPacketLoss)) }, "\(Self.qualityEvents(rec))")
        let lostWhileDropping = a.stats().call.packetsLost
        #expect(lostWhileDropping > 0 && Int(lostWhileDropping) <= relay.stats.dropped, "\(a.stats()) relay \(relay.stats)")
        #expect(!Self.qualityEvents(rec).contains(.cleared(.highPacketLoss)))
        relay.set(.none)
        #expect(await waitUntil(seconds: 10) { Self.qualityEvents(rec).contains(.cleared(.highPacketLoss)) }, "\(Self.qualityEvents(rec))")
        let events = Self.qualityEvents(rec)
        let raised = try #require(events.firstIndex(of: .raised(.highPacketLoss)))
        let cleared = try #require(events.firstIndex(of: .cleared(.highPacketLoss)))
        #expect(raised < cleared)
        #expect(events.filter { $0 == .raised(.highPacketLoss) }.count == 1, "no flapping: \(events)")
        // The loss A counted is what the relay dropped (a few may still be in flight).
        #expect(a.stats().call.packetsLost == Int64(relay.stats.dropped), "\(a.stats()) relay \(relay.stats)")
    }

    @Test("every other packet delayed by 80 ms raises the high-jitter warning; in time again it clears", .timeLimit(.minutes(1)))
    func jitterRaisedAndCleared() async throws {
        let relay = try ImpairingRelay()
        let (a, b, rec) = try Self.relayedCall(relay)
        defer {
            a.stop()
            b.stop()
            relay.stop()
        }
        #expect(await waitUntil(seconds: 5) { a.stats().call.received.packets > 50 })
        try await Task.sleep(for: .milliseconds(1000))
        #expect(!Self.qualityEvents(rec).contains(.raised(.highJitter)), "\(Self.qualityEvents(rec))")
        #expect(a.stats().call.jitter < .milliseconds(10), "\(a.stats())")
        relay.set(.delayEveryOther(.milliseconds(80)))
        #expect(await waitUntil(seconds: 10) { Self.qualityEvents(rec).contains(.raised(.highJitter)) }, "\(Self.qualityEvents(rec))")
        #expect(a.stats().call.jitter > .milliseconds(30), "\(a.stats())")
        #expect(!Self.qualityEvents(rec).contains(.cleared(.highJitter)))
        relay.set(.none)
        #expect(await waitUntil(seconds: 10) { Self.qualityEvents(rec).contains(.cleared(.highJitter)) }, "\(Self.qualityEvents(rec))")
        #expect(a.stats().call.jitter < .milliseconds(30), "\(a.stats())")
        #expect(relay.stats.delayed > 10, "\(relay.stats)")
    }
}
