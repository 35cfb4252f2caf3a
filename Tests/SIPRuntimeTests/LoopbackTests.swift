import Synchronization
import Testing
import SIPMessage
import SIPTransaction
import SIPTransport
@testable import SIPRuntime
import SIPLoad
import NetworkIO

@Suite("Live runtime on 127.0.0.1")
struct LoopbackTests {
    func server(answer: Int) throws -> (SIPEndpoint, AnsweringServer) {
        let box = Mutex<AnsweringServer?>(nil)
        let endpoint = try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { event in
            box.withLock { $0 }?.handle(event)
        }
        let address = endpoint.localAddresses[0].address
        let uas = AnsweringServer(answerCode: answer, contact: "sip:uas@127.0.0.1:\(address.port)")
        uas.attach(endpoint)
        box.withLock { $0 = uas }
        return (endpoint, uas)
    }

    func client() throws -> SIPEndpoint {
        try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { _ in }
    }

    /// Places `count` calls from a fresh UAC endpoint to `uas`.
    func call(_ uas: SIPEndpoint, count: Int, rate: Double) async throws -> CallGenerator.Result {
        let uacEndpoint = try client()
        defer { uacEndpoint.close() }
        let uasAddress = uas.localAddresses[0]
        let gen = CallGenerator(endpoint: uacEndpoint, target: try SIPURI("sip:uas@127.0.0.1:\(uasAddress.address.port)"),
                                peer: uasAddress, local: uacEndpoint.localAddresses[0])
        return await gen.run(count: count, rate: rate, timeout: .seconds(10))
    }

    @Test(.timeLimit(.minutes(1)))
    func callsOverUDPComplete() async throws {
        let (uasEndpoint, uas) = try server(answer: 200)
        defer { uasEndpoint.close() }
        let r = try await call(uasEndpoint, count: 200, rate: 2000)
        #expect(r.succeeded == 200, "failures: \(r.failures)")
        let s = uas.statistics
        #expect(s.invites == 200 && s.byes == 200)
        // Every 2xx was acknowledged, so its retransmission stopped.
        #expect(s.acks == 200)
        #expect(uasEndpoint.statistics.requestsReceived >= 600)
    }

    @Test(.timeLimit(.minutes(1)))
    func rejectedCallsAreACKedByTheTransaction() async throws {
        let (uasEndpoint, uas) = try server(answer: 486)
        defer { uasEndpoint.close() }
        let r = try await call(uasEndpoint, count: 20, rate: 1000)
        #expect(r.failed == 20)
        #expect(r.failures["INVITE 486"] == 20)
        #expect(uas.statistics.invites == 20)
        // The non-2xx ACKs were absorbed by the INVITE server transactions (no TU ACK events).
        #expect(uas.statistics.acks == 0)
        #expect(uasEndpoint.statistics.retransmissionsSent == 0)
    }

    @Test(.timeLimit(.minutes(1)))
    func receivedAndRportAreStamped() async throws {
        let got = Mutex<SIPMessage?>(nil)
        let server = try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { e in
            if case .request(let r) = e { got.withLock { $0 = r.message } }
        }
        defer { server.close() }
        let sender = try UDPTransport(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0)) { _ in }
        defer { sender.close() }
        let msg = "OPTIONS sip:x@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP client.invalid:5999;branch=z9hG4bKstamp;rport\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:x@127.0.0.1>\r\nCall-ID: stamp\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n"
        try sender.send(Array(msg.utf8), to: server.localAddresses[0].address)
        let clock = ContinuousClock(), deadline = clock.now + .seconds(2)
        while got.withLock({ $0 }) == nil && clock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        let via = try #require(try got.withLock { $0 }?.topVia())
        #expect(via.received == "127.0.0.1")
        #expect(via.rport == .some(sender.localAddress.port))
        #expect(via.branch == "z9hG4bKstamp")
    }

    /// RFC 3261 §18.2.1 without sockets: `received` only when the sent-by host is not the
    /// source address, `rport` filled when asked for, the message untouched otherwise.
    @Test(arguments: [
        ("SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bKa", nil, nil),
        ("SIP/2.0/UDP 127.0.0.2:5060;branch=z9hG4bKb", "127.0.0.1", nil),
        ("SIP/2.0/UDP 127.0.0.1:5060;rport;branch=z9hG4bKc", "127.0.0.1", "7000"),
        ("SIP/2.0/UDP phone.invalid;branch=z9hG4bKd", "127.0.0.1", nil),
        ("SIP/2.0/UDP [::1]:5060;branch=z9hG4bKe", "127.0.0.1", nil),
    ] as [(String, String?, String?)])
    func stampingFollowsTheSentBy(via: String, received: String?, rport: String?) throws {
        var m = try SIPMessage("OPTIONS sip:x@127.0.0.1 SIP/2.0\r\nVia: \(via)\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:x@127.0.0.1>\r\nCall-ID: s\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n")
        let before = m.serialized()
        SIPEndpoint.stampVia(&m, source: try SocketAddress(ip: "127.0.0.1", port: 7000))
        let top = try m.topVia()
        #expect(top.received == received)
        #expect(top.parameters["rport"] == (rport.map { .some($0) } ?? (via.contains("rport") ? .some(nil) : nil)))
        if received == nil { #expect(m.serialized() == before) }
    }

    @Test(.timeLimit(.minutes(1)))
    func timerServiceFiresInOrderAndCancels() async throws {
        let timers = TimerService()
        defer { timers.shutdown() }
        let fired = Mutex<[Int]>([])
        for (k, ms) in [30, 10, 20, 40].enumerated() {
            timers.schedule(after: .milliseconds(ms)) { fired.withLock { $0.append(k) } }
        }
        let cancelled = timers.schedule(after: .milliseconds(15)) { fired.withLock { $0.append(99) } }
        timers.cancel(cancelled)
        let clock = ContinuousClock(), deadline = clock.now + .seconds(2)
        while fired.withLock({ $0.count }) < 4 && clock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(fired.withLock { $0 } == [1, 2, 0, 3])
        #expect(timers.pendingCount == 0)
    }

    /// A cancelled timer never wakes the thread: one retransmission timer per call, cancelled by
    /// its ACK, would otherwise cost a wake-up per resolution step under load.
    @Test(.timeLimit(.minutes(1)))
    func cancelledTimersDoNotWakeTheThread() async throws {
        let timers = TimerService()
        defer { timers.shutdown() }
        let fired = Mutex(false)
        // The live timer first, so the cancelled ones come in front of it in the heap.
        timers.schedule(after: .milliseconds(300)) { fired.withLock { $0 = true } }
        let cancelled = (0..<50).map { k in timers.schedule(after: .milliseconds(20 + k)) { fired.withLock { _ in } } }
        cancelled.forEach(timers.cancel)
        let before = timers.passes
        try await Task.sleep(for: .milliseconds(150))
        // Each schedule that became the earliest may have woken it once (the first 20 ms
        // timer); the 50 cancelled deadlines (20-70 ms, 13 steps of 4 ms) must not.
        #expect(timers.passes - before <= 2)
        let clock = ContinuousClock(), deadline = clock.now + .seconds(2)
        while !fired.withLock({ $0 }) && clock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(fired.withLock { $0 })
    }

    @Test func batchedTimersNeverFireEarly() async throws {
        let timers = TimerService(resolution: .milliseconds(20))
        defer { timers.shutdown() }
        let start = MonotonicClock.now.sinceOrigin
        let lateness = Mutex<[Duration]>([])
        let delays: [Duration] = (0..<10).map { .milliseconds(30 + $0) }
        for d in delays {
            timers.schedule(after: d) { lateness.withLock { $0.append(MonotonicClock.now.sinceOrigin - start - d) } }
        }
        let clock = ContinuousClock(), deadline = clock.now + .seconds(2)
        while lateness.withLock({ $0.count }) < delays.count && clock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        let late = lateness.withLock { $0 }
        #expect(late.count == delays.count)
        // Never before the deadline.
        #expect(late.allSatisfy { $0 >= .zero })
    }

    @Test func cancellingReleasesTheCallbackAtOnce() {
        final class Token: Sendable {}
        let timers = TimerService()
        defer { timers.shutdown() }
        weak var weakToken: Token?
        let handle: TimerService.Handle
        do {
            let token = Token()
            weakToken = token
            handle = timers.schedule(after: .seconds(60)) { _ = token }
        }
        #expect(weakToken != nil)
        #expect(timers.pendingCount == 1)
        timers.cancel(handle)
        #expect(weakToken == nil)
        #expect(timers.pendingCount == 0)
    }

    /// A cancelled timer's slot is reused by the next one, under another handle: cancelling the
    /// old handle again (a late cancel) leaves the new timer armed.
    @Test func aStaleHandleDoesNotCancelTheTimerInItsSlot() {
        let timers = TimerService()
        defer { timers.shutdown() }
        let first = timers.schedule(after: .seconds(60)) {}
        timers.cancel(first)
        let second = timers.schedule(after: .seconds(60)) {}
        #expect(second != first)
        #expect(UInt32(truncatingIfNeeded: second.id) == UInt32(truncatingIfNeeded: first.id))
        timers.cancel(first)
        #expect(timers.pendingCount == 1)
        timers.cancel(second)
        #expect(timers.pendingCount == 0)
    }

    @Test(.timeLimit(.minutes(1)))
    func timerTargetsAreCalledWithTheirNumbersAndHeldWeakly() async throws {
        final class Target: TimerTarget {
            let fired = Mutex<[[UInt64]]>([])
            func timerFired(_ a: UInt64, _ b: UInt64) { fired.withLock { $0.append([a, b]) } }
        }
        let timers = TimerService()
        defer { timers.shutdown() }
        let target = Target()
        timers.schedule(after: .milliseconds(20), target: target, 7, 3)
        timers.schedule(after: .milliseconds(10), target: target, 1, 2)
        timers.cancel(timers.schedule(after: .milliseconds(15), target: target, 9, 9))
        // A target gone before its timer is due: the timer does nothing.
        weak var gone: Target?
        do {
            let other = Target()
            gone = other
            timers.schedule(after: .milliseconds(5), target: other, 5, 5)
        }
        #expect(gone == nil)
        let clock = ContinuousClock(), deadline = clock.now + .seconds(2)
        while (target.fired.withLock { $0.count } < 2 || timers.pendingCount > 0) && clock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(target.fired.withLock { $0 } == [[1, 2], [7, 3]])
        #expect(timers.pendingCount == 0)
    }

    @Test func transactionTimersRoundTripThroughTheirCodes() {
        var codes = Set<UInt64>()
        for t in TransactionTimer.allCases {
            let c = SIPEndpoint.code(of: t)
            codes.insert(c)
            #expect(SIPEndpoint.timer(code: c) == t)
        }
        #expect(codes.count == TransactionTimer.allCases.count)
        #expect(SIPEndpoint.timer(code: 1000) == nil)
    }

    @Test func runningTimersKeepOneHandlePerTimer() {
        let h = (0..<8).map { TimerService.Handle(id: UInt64($0)) }
        var r = RunningTimers(owner: TransactionID(rawValue: 1))
        #expect(r.isEmpty)
        #expect(r.set(.trying, h[0]) == nil)
        #expect(r.set(.G, h[1]) == nil)
        #expect(r.set(.H, h[2]) == nil)
        // Restarting a timer hands back the handle it replaces, in place.
        #expect(r.set(.G, h[3]) == h[1])
        #expect(r.remove(.trying) == h[0])
        #expect(r.remove(.trying) == nil)
        // More timers than the inline slots still keep each one.
        for (t, i) in [(TransactionTimer.A, 4), (.B, 5), (.D, 6), (.L, 7)] { #expect(r.set(t, h[i]) == nil) }
        var all: [UInt64] = []
        r.forEach { all.append($0.id) }
        #expect(all.sorted() == [2, 3, 4, 5, 6, 7])
        #expect(r.set(.L, h[0]) == h[7])
        for t in [TransactionTimer.G, .H, .A, .B, .D] { #expect(r.remove(t) != nil) }
        #expect(!r.isEmpty)
        #expect(r.remove(.L) == h[0])
        #expect(r.isEmpty)
    }
}
