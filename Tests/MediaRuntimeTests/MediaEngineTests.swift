import Glibc
import Media
import NetworkIO
import SDP
import Synchronization
import Testing

@testable import MediaRuntime

/// A call between two sessions of `engine`, negotiated and started.
private func startCall(engine: MediaEngine, codec: Codec = .pcmu, events: @escaping @Sendable (MediaSessionEvent) -> Void = { _ in })
    throws -> (MediaSession, MediaSession) {
    let config = MediaSessionConfiguration(portRange: 10000...19999, codecs: [codec, .telephoneEvent], engine: engine)
    let a = try MediaSession(configuration: config, input: .tone(frequency: 440), events: events)
    let b = try MediaSession(configuration: config, input: .tone(frequency: 1000))
    var oaA = OfferAnswer(capabilities: MediaCapabilities(address: "127.0.0.1", streams: [a.streamCapabilities()]), sessionID: 1)
    var oaB = OfferAnswer(capabilities: MediaCapabilities(address: "127.0.0.1", streams: [b.streamCapabilities()]), sessionID: 2)
    let answer = try oaB.receiveOffer(oaA.makeOffer())
    let negotiated = try oaA.receiveAnswer(answer.sdp)
    try b.apply(#require(answer.negotiated.audio))
    try a.apply(#require(negotiated.audio))
    return (a, b)
}

/// Whether `port` on 127.0.0.1 can be bound again (the session closed its socket).
private func portIsFree(_ port: UInt16) -> Bool {
    guard let socket = try? MediaSocket.bind(ip: "127.0.0.1", port: port) else { return false }
    socket.close()
    return true
}

@Suite(.serialized) struct MediaEngineTests {
    @Test func tickHeapPopsInDeadlineOrder() {
        var heap = TickHeap()
        var rng = SystemRandomNumberGenerator()
        var pushed: [Int64] = []
        for i in 0..<500 {
            let d = Int64.random(in: 0..<1_000_000, using: &rng)
            pushed.append(d)
            heap.push(d, UInt64(i))
        }
        var popped: [Int64] = []
        while let top = heap.pop() { popped.append(top.deadline) }
        #expect(popped == pushed.sorted())
        #expect(heap.pop() == nil)
    }

    @Test func sessionsSpreadOverWorkersAndPhaseSlots() async throws {
        let engine = MediaEngine(threads: 2, phases: 4)
        defer { engine.shutdown() }
        var sessions: [MediaSession] = []
        defer { sessions.forEach { $0.stop() } }
        for _ in 0..<4 {
            let (a, b) = try startCall(engine: engine)
            sessions += [a, b]
        }
        // Eight sessions, two workers of four phase slots: one session per slot per worker.
        #expect(await waitUntil { engine.statistics().phaseLoad == [2, 2, 2, 2] }, "\(engine.statistics().phaseLoad)")
        #expect(engine.statistics().sessions == 8)
        #expect(await waitUntil { sessions.allSatisfy { $0.stats().call.received.packets > 20 } })
        // The workers report their counters every 100 ms.
        #expect(await waitUntil { engine.statistics().ticks > 160 && engine.statistics().datagrams > 160 }, "\(engine.statistics())")
        #expect(engine.statistics().latenessQuantile(0.5) != nil)
        // Stopped sessions leave the workers and their slots.
        for s in sessions.prefix(4) { s.stop() }
        #expect(await waitUntil { engine.statistics().sessions == 4 && engine.statistics().phaseLoad.reduce(0, +) == 4 })
    }

    @Test func stopFromTheSessionsOwnEventCallbackClosesItsSockets() async throws {
        let engine = MediaEngine(threads: 1)
        defer { engine.shutdown() }
        // The session stops itself from its own worker thread when it latches onto the peer.
        let holder = Mutex<MediaSession?>(nil)
        let stopped = Atomic<Bool>(false)
        let (a, b) = try startCall(engine: engine, events: { event in
            guard case .latched = event, let session = holder.withLock({ $0 }) else { return }
            session.stop()
            stopped.store(true, ordering: .sequentiallyConsistent)
        })
        holder.withLock { $0 = a }
        defer { b.stop() }
        #expect(await waitUntil { stopped.load(ordering: .sequentiallyConsistent) })
        #expect(await waitUntil { portIsFree(a.localPort) && portIsFree(a.localPort + 1) })
        // The worker goes on running the other session.
        let before = b.stats().call.sent.packets
        #expect(await waitUntil { b.stats().call.sent.packets > before + 10 })
        #expect(engine.statistics().sessions == 1)
    }

    @Test func stopFromAnotherSessionsCallbackOnAnotherWorker() async throws {
        let engine = MediaEngine(threads: 2)
        defer { engine.shutdown() }
        let target = Mutex<MediaSession?>(nil)
        let done = Atomic<Bool>(false)
        // A's callback (on one worker) stops C, whose worker may be the other one.
        let (a, b) = try startCall(engine: engine, events: { event in
            guard case .latched = event, let victim = target.withLock({ v -> MediaSession? in defer { v = nil }; return v }) else { return }
            victim.stop()
            done.store(true, ordering: .sequentiallyConsistent)
        })
        let (c, d) = try startCall(engine: engine)
        target.withLock { $0 = c }
        defer { [a, b, c, d].forEach { $0.stop() } }
        #expect(await waitUntil { done.load(ordering: .sequentiallyConsistent) })
        #expect(await waitUntil { portIsFree(c.localPort) && portIsFree(c.localPort + 1) })
        #expect(await waitUntil { engine.statistics().sessions == 3 })
    }

    @Test("sessions stopped after their engine shut down under them return at once and free their ports")
    func stoppingAfterShutdownFreesThePorts() async throws {
        let engine = MediaEngine(threads: 2)
        var sessions: [MediaSession] = []
        for _ in 0..<3 {
            let (a, b) = try startCall(engine: engine)
            sessions += [a, b]
        }
        #expect(await waitUntil { sessions.allSatisfy { $0.stats().call.received.packets > 5 } })
        engine.shutdown()
        let ports = sessions.map(\.localPort)
        let started = ContinuousClock.now
        sessions.forEach { $0.stop() }
        #expect(ContinuousClock.now - started < .seconds(1))
        #expect(await waitUntil { ports.allSatisfy { portIsFree($0) && portIsFree($0 + 1) } })
        #expect(engine.statistics().sessions == 0)
    }

    @Test("an event callback may shut its own engine down; its sessions then stop and free their ports")
    func shutdownFromAnEventCallback() async throws {
        let engine = MediaEngine(threads: 2)
        let done = Atomic<Bool>(false)
        let (a, b) = try startCall(engine: engine, events: { event in
            guard case .latched = event, !done.exchange(true, ordering: .sequentiallyConsistent) else { return }
            engine.shutdown()  // on a worker's own thread: it cannot join itself
        })
        #expect(await waitUntil { done.load(ordering: .sequentiallyConsistent) })
        let ports = [a.localPort, b.localPort]
        let started = ContinuousClock.now
        a.stop()
        b.stop()
        #expect(ContinuousClock.now - started < .seconds(1))
        #expect(await waitUntil { ports.allSatisfy { portIsFree($0) && portIsFree($0 + 1) } })
        // The engine starts again for new sessions.
        let (c, d) = try startCall(engine: engine)
        defer {
            c.stop()
            d.stop()
            engine.shutdown()
        }
        #expect(await waitUntil { c.stats().call.received.packets > 5 && d.stats().call.received.packets > 5 })
    }

    @Test func shutDownEngineRestartsForNewSessions() async throws {
        let engine = MediaEngine(threads: 1)
        do {
            let (a, b) = try startCall(engine: engine)
            #expect(await waitUntil { a.stats().call.received.packets > 5 })
            a.stop()
            b.stop()
        }
        engine.shutdown()
        #expect(engine.statistics().sessions == 0)
        let (a, b) = try startCall(engine: engine, codec: .opus)
        defer {
            a.stop()
            b.stop()
            engine.shutdown()
        }
        #expect(await waitUntil { a.stats().call.received.packets > 10 && b.stats().call.received.packets > 10 })
    }

    @Test func thirtySessionsOnTwoWorkersCarryEveryPacket() async throws {
        let engine = MediaEngine(threads: 2)
        defer { engine.shutdown() }
        var sessions: [MediaSession] = []
        defer { sessions.forEach { $0.stop() } }
        for _ in 0..<15 {
            let (a, b) = try startCall(engine: engine)
            sessions += [a, b]
        }
        #expect(await waitUntil { sessions.allSatisfy { $0.stats().call.received.packets >= 50 } })
        // The window actually measured (a sleep of 500 ms may last longer on a loaded machine).
        let clock = ContinuousClock()
        let start = clock.now
        let before = sessions.map { $0.stats().call }
        try await Task.sleep(for: .milliseconds(500))
        let after = sessions.map { $0.stats().call }
        let window = clock.now - start
        let due = Int(window / .milliseconds(20))
        for (x, y) in zip(before, after) {
            // One packet is due every 20 ms of the window (25 in 500 ms); at least 60 % of them
            // were sent, and none is lost on loopback.
            #expect((y.sent.packets - x.sent.packets) * 5 >= due * 3, "\(due) due in \(window): \(y)")
            #expect(y.packetsLost == 0, "\(y)")
        }
        #expect(engine.statistics().sessions == 30)
    }
}

@Suite struct DescriptorLimitTests {
    @Test func raisingTheLimitReachesTheHardLimit() {
        let soft = MediaEngine.raiseDescriptorLimit()
        var limit = rlimit()
        #expect(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0)
        #expect(soft == Int(clamping: limit.rlim_cur))
        #expect(limit.rlim_cur == limit.rlim_max)
        // Idempotent.
        #expect(MediaEngine.raiseDescriptorLimit() == soft)
    }
}

extension MediaEngineTests {
    /// Late ticks move to a worker with time to spare. Two workers of four phase slots (5 ms
    /// apart), eight sessions: worker 0 has a session whose frames take 12 ms to produce (its
    /// audio source is slow) at slot 0, so without sharing its session at slot 1 runs ~7 ms late
    /// every period (one tick in eight: p95 lateness over 5 ms); with sharing, worker 1 runs it
    /// once it is 1 ms late.
    @Test(arguments: [true, false])
    func aWorkerRunsAnotherWorkersLateTicks(sharing: Bool) async throws {
        struct SlowSource: AudioSource {
            var tone = ToneGenerator(frequency: 440, amplitude: 0.3, sampleRate: 8000)
            var sampleRate: Int { 8000 }
            mutating func nextFrame(count: Int) -> [Int16]? {
                let until = MonotonicClock.now.nanoseconds + 12_000_000
                while MonotonicClock.now.nanoseconds < until {}
                return tone.next(count)
            }
        }
        let engine = MediaEngine(threads: 2, phases: 4, sharesLateTicks: sharing)
        defer { engine.shutdown() }
        let config = MediaSessionConfiguration(portRange: 10000...19999, codecs: [.pcmu], engine: engine)
        var sessions: [MediaSession] = []
        defer { sessions.forEach { $0.stop() } }
        for i in 0..<4 {
            // connect(a, b) starts b first: b goes to worker 0, a to worker 1, each at slot i.
            let a = try MediaSession(configuration: config, input: .tone(frequency: 1000))
            let b = try MediaSession(configuration: config, input: i == 0 ? .source(SlowSource()) : .tone(frequency: 600))
            try connect(a, b)
            sessions += [a, b]
        }
        #expect(await waitUntil { engine.statistics().phaseLoad == [2, 2, 2, 2] }, "\(engine.statistics().phaseLoad)")
        try await Task.sleep(for: .milliseconds(400))
        let before = engine.statistics()
        try await Task.sleep(for: .milliseconds(1600))
        let after = engine.statistics()
        var window = after
        for i in window.latenessHistogram.indices { window.latenessHistogram[i] -= before.latenessHistogram[i] }
        let ticks = window.latenessHistogram.reduce(0, +)
        let p95 = window.latenessQuantile(0.95) ?? .zero
        #expect(ticks > 400, "\(ticks) ticks")
        if sharing {
            // Worker 1 takes the late ticks (helped ticks). How much that lowers the lateness
            // (p95 under 3 ms on an idle machine, against ~7 ms unhelped) is
            // scripts/bench-media-session's to report: as a bound here it failed whenever the
            // 2-core machine was busy (13 ms p95 while two builds ran).
            #expect(after.helpedTicks - before.helpedTicks > 40, "p95 \(p95), \(after)")
        } else {
            #expect(p95 > .milliseconds(5), "p95 \(p95), \(after)")
            #expect(after.helpedTicks == 0)
        }
        // Every session keeps sending and receiving either way.
        #expect(sessions.allSatisfy { $0.stats().call.received.packets > 40 })
    }
}
