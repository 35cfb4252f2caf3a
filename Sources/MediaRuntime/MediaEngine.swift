import CSocket
import Dispatch
import Glibc
import NetworkIO
import Synchronization
import Logging

/// The threads that run media sessions: a fixed set of workers (by default one per CPU), each
/// owning many sessions.
///
/// A worker waits in one `epoll` set on a `timerfd` armed for the earliest ptime tick due, an
/// `eventfd` for commands and its sessions' RTCP sockets. It runs each session's tick on
/// absolute monotonic deadlines kept in a heap: read what the RTP socket holds (`recvmmsg`;
/// each datagram's arrival time is the kernel's `SO_TIMESTAMPNS` stamp, so reading once per
/// ptime loses no timing), play one frame from the jitter buffer, encode and send one frame,
/// RTCP. Reading at the tick costs one wake-up and one visit of the session's state per ptime
/// instead of two.
/// Sessions are spread over the workers (the least loaded takes the next one) and their ticks
/// over the ptime period (each session is given the least loaded of ``phases`` phase slots), so
/// that a burst of calls set up together does not put all their encoding on the same instant.
///
/// A worker that wakes with time to spare runs other workers' ticks that are over 1 ms late
/// (``sharesLateTicks``), so that a backlog on one core is drained by all of them.
///
/// A session's event callback runs on a worker (its own, or one helping with its late ticks): it
/// must return quickly, since the worker's other sessions wait meanwhile.
public final class MediaEngine: Sendable {
    /// The engine used by sessions that do not name one: one worker per online CPU (1 to 16),
    /// started when the first session starts.
    public static let shared = MediaEngine(threads: MediaEngine.onlineProcessors)

    /// The number of online processors (1 to 16).
    public static var onlineProcessors: Int { max(1, min(16, sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    /// The number of worker threads.
    public let threadCount: Int
    /// Phase slots per 20 ms period over which sessions' ticks are spread.
    public let phases: Int
    /// How the workers are scheduled.
    public let scheduling: Scheduling
    /// Whether workers share late ticks (the default): a worker that wakes with time to spare
    /// runs another worker's ticks that are over 1 ms late (at most 8 per wake-up, and only
    /// while none of its own is due); a worker over 1 ms
    /// behind wakes the others, and a worker going to sleep while another is behind also wakes
    /// for that one's late tick. Sessions stay with their worker; a backlog (a worker stalled by
    /// the machine, a burst of expensive frames) is drained by all the cores instead of one.
    /// Events of a tick run for another worker are delivered on the helping worker's thread
    /// (a session's events still come one at a time and in order).
    public let sharesLateTicks: Bool

    /// How the worker threads are scheduled by the kernel.
    public enum Scheduling: Sendable, Hashable {
        /// Like any other thread (the default): other busy processes on the machine delay ticks.
        case normal
        /// `SCHED_FIFO` at `priority` (1–99), as audio engines do, so that ticks preempt
        /// ordinary work; needs CAP_SYS_NICE or an RLIMIT_RTPRIO allowance, and falls back to
        /// normal scheduling (see ``MediaEngineStatistics/realtimeThreads``) when refused. The
        /// kernel's real-time throttling (sched_rt_runtime_us) still leaves the rest of the
        /// system a share of each CPU.
        case realtime(priority: Int32)
    }

    private let workers: Mutex<[MediaWorker]?> = Mutex(nil)
    let logger: Logger

    /// An engine with `threads` workers (started with its first session).
    /// - Parameters:
    ///   - threads: worker threads, at least 1.
    ///   - phases: slots of the 20 ms period that session ticks are spread over (1 to 200).
    ///   - scheduling: normal, or real-time priority for the workers.
    ///   - sharesLateTicks: whether a worker runs another worker's ticks that are over 1 ms late
    ///     (see ``sharesLateTicks``).
    ///   - logger: where the engine logs (`info` when its workers start and stop, `warning` when
    ///     real-time priority was asked for and refused). Silent by default.
    public init(threads: Int, phases: Int = 40, scheduling: Scheduling = .normal, sharesLateTicks: Bool = true, logger: Logger = .disabled) {
        self.logger = logger
        threadCount = max(1, threads)
        self.phases = max(1, min(200, phases))
        self.scheduling = scheduling
        self.sharesLateTicks = sharesLateTicks
    }

    /// Raises the process's soft limit of open descriptors to its hard limit (each session
    /// holds two sockets; the usual soft limit of 1,024 stops at about 500 sessions). Returns
    /// the soft limit in force afterwards. For programs that carry many calls; a library
    /// embedding Switchboard decides this itself.
    @discardableResult
    public static func raiseDescriptorLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }

    /// What the workers did so far, summed over all of them.
    public func statistics() -> MediaEngineStatistics {
        let current = workers.withLock { $0 } ?? []
        var total = MediaEngineStatistics(threads: threadCount)
        for worker in current {
            let s = worker.snapshot()
            total.merge(s)
            if total.phaseLoad.count < s.phaseLoad.count { total.phaseLoad += [Int](repeating: 0, count: s.phaseLoad.count - total.phaseLoad.count) }
            for (i, n) in s.phaseLoad.enumerated() { total.phaseLoad[i] += n }
        }
        return total
    }

    /// Stops the workers now, whether or not sessions are attached (their media stops; stopping
    /// them afterwards closes their sockets at once). Sessions started later start new
    /// workers. May be called from an event callback. The shared engine need not be shut down.
    public func shutdown() {
        let current = workers.withLock { w -> [MediaWorker] in
            defer { w = nil }
            return w ?? []
        }
        for worker in current { worker.shutdown() }
        if !current.isEmpty { logger.info("media workers stopped") }
    }

    /// The worker with the fewest sessions (workers are started on first use).
    func worker() throws(MediaSessionError) -> MediaWorker {
        try workers.withLock { w throws(MediaSessionError) -> MediaWorker in
            if w == nil {
                var started: [MediaWorker] = []
                for index in 0..<threadCount {
                    do throws(MediaSessionError) {
                        started.append(try MediaWorker(index: index, phases: phases, scheduling: scheduling, logger: logger))
                    } catch {
                        for s in started { s.shutdown() }
                        logger.error("media workers not started: \(error)")
                        throw error
                    }
                }
                w = started
                logger.info("media workers started", metadata: ["media.threads": "\(threadCount)", "media.scheduling": "\(scheduling)"])
                if sharesLateTicks { for worker in started { worker.setPeers(started) } }
            }
            let all = w!
            return all.min { $0.load.load(ordering: .relaxed) < $1.load.load(ordering: .relaxed) }!
        }
    }
}

/// Counters of an engine's workers.
public struct MediaEngineStatistics: Sendable, Hashable, CustomStringConvertible {
    /// Worker threads.
    public var threads: Int
    /// Sessions attached now.
    public var sessions = 0
    /// Ticks run (one per session per ptime).
    public var ticks: UInt64 = 0
    /// Of those, ticks a worker ran for another worker whose ticks were overdue.
    public var helpedTicks: UInt64 = 0
    /// Datagrams received.
    public var datagrams: UInt64 = 0
    /// Tick lateness in 0.1 ms buckets (the last one: 20 ms or more).
    public var latenessHistogram = [UInt64](repeating: 0, count: 201)
    /// The latest tick.
    public var maxLateness: Duration = .zero
    /// Time the workers spent working (not waiting), summed.
    public var busy: Duration = .zero
    /// Time since the workers started, summed.
    public var elapsed: Duration = .zero
    /// Workers running with real-time priority (see ``MediaEngine/Scheduling/realtime(priority:)``).
    public var realtimeThreads = 0
    /// Sessions per phase slot of the 20 ms period, summed over the workers (as of the
    /// workers' last report, at most 100 ms old).
    public var phaseLoad: [Int] = []

    /// The `q` quantile of tick lateness (bucket upper bound), nil before any tick.
    public func latenessQuantile(_ q: Double) -> Duration? {
        let total = latenessHistogram.reduce(0, +)
        guard total > 0 else { return nil }
        let rank = UInt64((Double(total) * q).rounded(.up))
        var seen: UInt64 = 0
        for (i, n) in latenessHistogram.enumerated() {
            seen += n
            if seen >= rank { return i == latenessHistogram.count - 1 ? maxLateness : .microseconds(100 * (i + 1)) }
        }
        return maxLateness
    }

    /// The share of the workers' time spent working, 0 to 1.
    public var utilization: Double {
        let e = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        guard e > 0 else { return 0 }
        return (Double(busy.components.seconds) + Double(busy.components.attoseconds) / 1e18) / e
    }

    mutating func merge(_ other: MediaEngineStatistics) {
        sessions += other.sessions
        ticks += other.ticks
        helpedTicks += other.helpedTicks
        datagrams += other.datagrams
        for i in latenessHistogram.indices { latenessHistogram[i] += other.latenessHistogram[i] }
        maxLateness = max(maxLateness, other.maxLateness)
        busy += other.busy
        elapsed += other.elapsed
        realtimeThreads += other.realtimeThreads
    }

    /// One line: sessions, ticks, p99 and worst lateness, utilization.
    public var description: String {
        let p99 = latenessQuantile(0.99).map { MediaSessionStatistics.msText($0) } ?? "-"
        return "\(threads) media threads: \(sessions) sessions, \(ticks) ticks (\(helpedTicks) helped), \(datagrams) datagrams, "
            + "tick lateness p99 \(p99) ms max \(MediaSessionStatistics.msText(maxLateness)) ms, "
            + "busy \(Int((utilization * 1000).rounded()) / 10)%"
    }
}

/// A min-heap of tick deadlines (nanoseconds of CLOCK_MONOTONIC) and session identifiers.
struct TickHeap {
    private(set) var items: [(deadline: Int64, id: UInt64)] = []

    var first: (deadline: Int64, id: UInt64)? { items.first }
    var count: Int { items.count }

    mutating func push(_ deadline: Int64, _ id: UInt64) {
        items.append((deadline, id))
        var i = items.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard items[parent].deadline > items[i].deadline else { break }
            items.swapAt(parent, i)
            i = parent
        }
    }

    mutating func pop() -> (deadline: Int64, id: UInt64)? {
        guard !items.isEmpty else { return nil }
        let top = items[0]
        let last = items.removeLast()
        guard !items.isEmpty else { return top }
        items[0] = last
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < items.count && items[l].deadline < items[m].deadline { m = l }
            if r < items.count && items[r].deadline < items[m].deadline { m = r }
            guard m != i else { break }
            items.swapAt(i, m)
            i = m
        }
        return top
    }
}

/// Buffers a worker lends to the session it is receiving for.
final class ReceiveScratch {
    static let slot = 2048
    static let batch = 8
    var buffer = [UInt8](repeating: 0, count: ReceiveScratch.slot * ReceiveScratch.batch)
    var addresses = [sockaddr_storage](repeating: sockaddr_storage(), count: ReceiveScratch.batch)
    var lengths = [socklen_t](repeating: 0, count: ReceiveScratch.batch)
    var sizes = [Int](repeating: 0, count: ReceiveScratch.batch)
    var stamps = [Int64](repeating: 0, count: ReceiveScratch.batch)
    /// The wall clock minus the monotonic clock at the worker's last batch (a step shows as a jump).
    var clockOffset: Duration?
}

/// One media thread and the sessions it runs. Fields marked "worker" are touched only on the
/// worker's thread; the rest are locks and atomics. The tick heap and the session table sit
/// behind one lock (`shared`) because another worker may run this one's overdue ticks (see
/// `help()`).
final class MediaWorker: @unchecked Sendable {
    enum Command {
        case add(MediaSession, id: UInt64)
        case remove(id: UInt64, done: DispatchSemaphore?, close: [Int32])
    }

    struct Entry {
        let session: MediaSession
        let phase: Int
        /// The RTP socket is read at each tick (the kernel stamps arrivals), not through epoll.
        let readsAtTick: Bool
        /// recvmmsg batches (of 8) read per tick: about two datagrams per ms of ptime (2,000 a
        /// second), so a peer's 10 ms packets and its DTMF fit many times over while a flood
        /// costs a bounded amount per tick.
        var batches = 5

        static func batches(forPtime nanoseconds: Int64) -> Int { max(2, min(32, Int(nanoseconds / 4_000_000))) }
    }

    /// A removal that arrived while a tick or a read of the session was running: the thread
    /// that finishes the last of them closes the sockets and wakes the waiter.
    struct Removal {
        var close: [Int32] = []
        var done: [DispatchSemaphore] = []
    }

    /// Ticks and reads of one session running now (on this worker or a helping one).
    struct Busy {
        var count = 0
        var removal: Removal?
    }

    /// What other workers may touch: the tick heap and the sessions, and what is running.
    struct Shared {
        var heap = TickHeap()
        var entries: [UInt64: Entry] = [:]
        /// Sessions with a tick or a read running now; a removal meanwhile waits here, so that
        /// no socket is closed under a running tick.
        var busy: [UInt64: Busy] = [:]
    }

    /// A tick taken from the heap: the session to run and its deadline.
    struct Job {
        let id: UInt64
        let deadline: Int64
        let entry: Entry
    }

    private static let wakeTag = UInt64.max
    private static let timerTag = UInt64.max - 1
    private static let period: Int64 = 20_000_000
    private static let nextID = Atomic<UInt64>(1)
    /// Another worker runs this one's ticks once they are this late (and it has time).
    static let helpThreshold: Int64 = 1_000_000
    /// At most this many of another worker's ticks per wake-up, and none while one of the
    /// helper's own is due, so that helping delays its own sessions by about one (borrowed) tick.
    static let helpBudget = 8

    let index: Int
    /// Sessions attached (added and not yet removed), for load balancing.
    let load = Atomic<Int>(0)
    private let epoll: Int32
    private let timer: Int32
    private let wake: Int32
    private let phases: Int
    private let inbox = Mutex<[Command]>([])
    /// Set under `inbox`'s lock when the worker has stopped and drained its commands.
    private nonisolated(unsafe) var inboxClosed = false
    let stopping = Atomic<Bool>(false)
    private let stats: Mutex<MediaEngineStatistics>
    /// Kept after shutdown (joining twice does nothing), for ``snapshot()``'s real-time count.
    private let thread = Mutex<IOThread?>(nil)
    private let epoch: Int64
    private let logger: Logger
    /// The SCHED_FIFO priority asked for (nil: normal scheduling).
    private let requestedPriority: Int32?
    private let shared = Mutex(Shared())
    /// The earliest deadline in the heap (Int64.max when empty), kept under `shared`'s lock
    /// whenever the heap changes, so that other workers look without taking the lock.
    private let earliest = Atomic<Int64>(Int64.max)
    /// The engine's other workers, whose overdue ticks this one runs when it has time.
    private let peerList = Mutex<[MediaWorker]>([])
    private let peersVersion = Atomic<Int>(0)
    /// Set when `shutdown()` ran on this worker's own thread: the loop closes its descriptors.
    private let closesOwnDescriptors = Atomic<Bool>(false)

    // worker
    private var phaseLoad: [Int]
    private var armed: Int64 = -1
    private var local = MediaEngineStatistics(threads: 0)
    private var lastPublished: Int64 = 0
    private let scratch = ReceiveScratch()
    private var peers: [MediaWorker] = []
    private var knownPeersVersion = 0
    private var lastNudge: Int64 = 0

    init(index: Int, phases: Int, scheduling: MediaEngine.Scheduling, logger: Logger) throws(MediaSessionError) {
        self.logger = logger
        if case .realtime(let priority) = scheduling { requestedPriority = priority } else { requestedPriority = nil }
        self.index = index
        self.phases = phases
        phaseLoad = [Int](repeating: 0, count: phases)
        stats = Mutex(MediaEngineStatistics(threads: 0))
        epoch = MonotonicClock.now.nanoseconds
        lastPublished = epoch
        epoll = cs_epoll_create()
        guard epoll >= 0 else { throw .system("epoll_create1", errno: cs_errno()) }
        timer = cs_timerfd_create()
        wake = cs_eventfd()
        guard timer >= 0, wake >= 0, cs_epoll_add(epoll, timer, Self.timerTag) == 0, cs_epoll_add(epoll, wake, Self.wakeTag) == 0 else {
            let code = cs_errno()
            for fd in [epoll, timer, wake] where fd >= 0 { _ = Glibc.close(fd) }
            throw .system("timerfd/eventfd", errno: code)
        }
        do {
            let t = try IOThread(name: "media-\(index)", realtimePriority: requestedPriority) { [self] in run() }
            thread.withLock { $0 = t }
        } catch {
            throw .system(error.call, errno: error.code)
        }
    }

    /// The workers whose overdue ticks this one may run (the engine's others).
    func setPeers(_ workers: [MediaWorker]) {
        peerList.withLock { $0 = workers.filter { $0 !== self } }
        peersVersion.add(1, ordering: .releasing)
    }

    /// Attaches a session; its ticks start at its phase slot's next instant.
    func attach(_ session: MediaSession) -> UInt64 {
        let id = Self.nextID.add(1, ordering: .relaxed).oldValue
        load.add(1, ordering: .relaxed)
        post(.add(session, id: id))
        return id
    }

    /// Detaches a session and closes its sockets `fds` once no tick or read of it is running
    /// (when the last one running ends, if any: the session's own tick when stopped from its
    /// own event). On a thread that is not a media worker, the call waits for that moment; on a
    /// worker's thread (a session stopped from another session's event) it does not wait (two
    /// workers waiting for each other would never wake), and the sockets are closed when the
    /// worker gets to the command.
    func detach(_ id: UInt64, closing fds: [Int32]) {
        if stopping.load(ordering: .sequentiallyConsistent) {
            // A shut-down worker runs nothing any more; a helper may still hold a tick.
            let done = Self.onWorkerThread ? nil : DispatchSemaphore(value: 0)
            if remove(id, closing: fds, done: done) { done?.wait() }
            return
        }
        if isCurrentThread {
            _ = remove(id, closing: fds, done: nil)
            return
        }
        if Self.onWorkerThread {
            post(.remove(id: id, done: nil, close: fds))
            return
        }
        let done = DispatchSemaphore(value: 0)
        post(.remove(id: id, done: done, close: fds))
        done.wait()
    }

    /// Whether the caller runs on this worker's thread.
    var isCurrentThread: Bool { Self.current == Unmanaged.passUnretained(self).toOpaque() }

    /// Whether the caller runs on any media worker thread.
    static var onWorkerThread: Bool { current != nil }

    func snapshot() -> MediaEngineStatistics {
        var s = stats.withLock { $0 }
        s.sessions = load.load(ordering: .relaxed)
        s.realtimeThreads = thread.withLock { $0?.isRealtime ?? false } ? 1 : 0
        return s
    }

    func shutdown() {
        // From the worker's own thread (an event callback shutting the engine down) the loop is
        // still running: it closes its descriptors itself when it ends.
        let own = isCurrentThread
        if own { closesOwnDescriptors.store(true, ordering: .sequentiallyConsistent) }
        stopping.store(true, ordering: .sequentiallyConsistent)
        nudge()
        thread.withLock { $0 }?.join()
        if !own { for fd in [epoll, timer, wake] { _ = Glibc.close(fd) } }
        setPeers([])
    }

    /// Queues a command for the worker. Once the worker has stopped (and drained its queue) a
    /// removal is carried out here instead and an addition is dropped.
    private func post(_ command: Command) {
        let queued = inbox.withLock { c -> Bool in
            guard !inboxClosed else { return false }
            c.append(command)
            // Under the lock: the worker closes the queue under it before `wake` is closed.
            _ = cs_eventfd_signal(wake)
            return true
        }
        if !queued { carryOutAfterStop(command) }
    }

    /// A command the stopped worker will not get to: a removal is done by the caller, an
    /// addition dropped.
    private func carryOutAfterStop(_ command: Command) {
        switch command {
        case .add: load.add(-1, ordering: .relaxed)
        case .remove(let id, let done, let fds): remove(id, closing: fds, done: done)
        }
    }

    /// Wakes the worker (a peer is behind, or it is to stop) unless it has stopped already.
    func nudge() {
        inbox.withLock { _ in if !inboxClosed { _ = cs_eventfd_signal(wake) } }
    }

    // MARK: lending ticks (any worker's thread)

    /// Takes the earliest tick if it is due by `before`, marking the session busy. A helper
    /// (`helping`) leaves the tick of a session being read right now (the owner's thread is in
    /// it: waiting for its work lock would stall two workers on one session).
    private func take(dueBy before: Int64, helping: Bool = false) -> Job? {
        shared.withLock { s -> Job? in
            defer { noteEarliest(s.heap) }
            while let top = s.heap.first, top.deadline <= before {
                if helping, s.busy[top.id] != nil { return nil }
                _ = s.heap.pop()
                // A removed session's deadlines are dropped as they come up.
                guard let entry = s.entries[top.id] else { continue }
                s.busy[top.id, default: Busy()].count += 1
                return Job(id: top.id, deadline: top.deadline, entry: entry)
            }
            return nil
        }
    }

    /// Mirrors the heap's earliest deadline into ``earliest`` (called under `shared`'s lock
    /// after each change of the heap).
    private func noteEarliest(_ heap: TickHeap) {
        earliest.store(heap.first?.deadline ?? Int64.max, ordering: .relaxed)
    }

    /// The session of RTCP (or unstamped RTP) tag `id`, marked busy while it is read.
    private func borrow(_ id: UInt64) -> MediaSession? {
        shared.withLock { s -> MediaSession? in
            guard let entry = s.entries[id] else { return nil }
            s.busy[id, default: Busy()].count += 1
            return entry.session
        }
    }

    /// Ends a tick or read of session `id`: with `next`, puts its next deadline back (and its
    /// new read budget). The last one to end after a removal finishes the removal.
    private func release(_ id: UInt64, next: (deadline: Int64, batches: Int, previous: Int)? = nil) {
        let byHelper = next != nil && !isCurrentThread
        let (removal, first) = shared.withLock { s -> (Removal?, Bool) in
            var removal: Removal?
            if var b = s.busy[id] {
                b.count -= 1
                if b.count <= 0 {
                    s.busy[id] = nil
                    removal = b.removal
                } else {
                    s.busy[id] = b
                }
            }
            var first = false
            if let next, s.entries[id] != nil {
                if next.batches != next.previous { s.entries[id]?.batches = next.batches }
                s.heap.push(next.deadline, id)
                noteEarliest(s.heap)
                first = s.heap.first?.id == id
            }
            return (removal, first)
        }
        // A helper handed back a tick that is now this worker's earliest: its timer may be
        // armed later than that (or not at all), so wake it to re-arm.
        if byHelper && first { nudge() }
        if let removal {
            for fd in removal.close { _ = Glibc.close(fd) }
            for d in removal.done { d.signal() }
        }
    }

    /// Removes a session. Returns true when a tick or read of it is running: the thread that
    /// ends the last of them closes `fds` and signals `done`; else the caller's thread closes
    /// them now (and signals `done`) and false is returned.
    @discardableResult
    private func remove(_ id: UInt64, closing fds: [Int32], done: DispatchSemaphore?) -> Bool {
        let (entry, deferred) = shared.withLock { s -> (Entry?, Bool) in
            let entry = s.entries.removeValue(forKey: id)
            guard var b = s.busy[id] else { return (entry, false) }
            var removal = b.removal ?? Removal()
            removal.close += fds
            if let done { removal.done.append(done) }
            b.removal = removal
            s.busy[id] = b
            return (entry, true)
        }
        if let entry {
            // (A shut-down worker's epoll set is closed, and its number may be in use again.)
            if isCurrentThread {
                let sockets = entry.session.socketDescriptors
                if !entry.readsAtTick { _ = cs_epoll_remove(epoll, sockets.rtp) }
                _ = cs_epoll_remove(epoll, sockets.rtcp)
                if phases > 1 { phaseLoad[entry.phase] -= 1 }
            }
            load.add(-1, ordering: .relaxed)
        }
        if !deferred {
            for fd in fds { _ = Glibc.close(fd) }
            done?.signal()
        }
        return deferred
    }

    // MARK: the worker's thread

    private static let currentKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    private static var current: UnsafeMutableRawPointer? { pthread_getspecific(currentKey) }

    private func run() {
        pthread_setspecific(Self.currentKey, Unmanaged.passUnretained(self).toOpaque())
        // The thread asked for SCHED_FIFO before this body ran (IOThread); say so when refused.
        if let priority = requestedPriority, sched_getscheduler(0) != SCHED_FIFO {
            logger.warning("media worker \(index): real-time priority \(priority) refused (needs CAP_SYS_NICE); normal scheduling")
        }
        var tags = [UInt64](repeating: 0, count: 256)
        var expirations: UInt64 = 0
        var start = MonotonicClock.now.nanoseconds
        while !stopping.load(ordering: .relaxed) {
            let version = peersVersion.load(ordering: .acquiring)
            if version != knownPeersVersion {
                peers = peerList.withLock { $0 }
                knownPeersVersion = version
            }
            processCommands()
            runDueTicks()
            let more = help()
            arm()
            local.busy += .nanoseconds(MonotonicClock.now.nanoseconds - start)
            let n = tags.withUnsafeMutableBufferPointer { cs_epoll_wait(epoll, $0.baseAddress, Int32($0.count), more ? 0 : 1000) }
            start = MonotonicClock.now.nanoseconds
            if n > 0 {
                for i in 0..<Int(n) {
                    switch tags[i] {
                    case Self.wakeTag: _ = cs_eventfd_drain(wake)
                    case Self.timerTag:
                        _ = withUnsafeMutableBytes(of: &expirations) { Glibc.read(timer, $0.baseAddress, 8) }
                        armed = -1
                    default:
                        let tag = tags[i]
                        if let session = borrow(tag >> 1) {
                            local.datagrams &+= UInt64(session.receive(onRTCPSocket: tag & 1 == 1, scratch: scratch))
                            release(tag >> 1)
                        }
                        // Ticks come first: a long burst of datagrams does not delay them (a
                        // bounded number, so that an overloaded worker still reads its sockets).
                        if i & 15 == 15 { runDueTicks(limit: 64) }
                    }
                }
            }
        }
        // Stopped: commands still queued are carried out (removals close their sockets and wake
        // their waiters), and later ones are carried out by whoever posts them.
        let leftover = inbox.withLock { c -> [Command] in
            inboxClosed = true
            defer { c.removeAll() }
            return c
        }
        for command in leftover { carryOutAfterStop(command) }
        peers = []
        if closesOwnDescriptors.load(ordering: .sequentiallyConsistent) {
            for fd in [epoll, timer, wake] { _ = Glibc.close(fd) }
        }
    }

    private func processCommands() {
        let commands = inbox.withLock { c -> [Command] in
            defer { c.removeAll(keepingCapacity: true) }
            return c
        }
        for command in commands {
            switch command {
            case .add(let session, let id):
                guard session.isRunning else {
                    // Stopped before the worker got to it (from this very thread).
                    load.add(-1, ordering: .relaxed)
                    continue
                }
                var phase = 0
                for p in 1..<max(1, phases) where phaseLoad[p] < phaseLoad[phase] { phase = p }
                if phases > 1 { phaseLoad[phase] += 1 }
                let readsAtTick = session.rtpStamped
                let fds = session.socketDescriptors
                // The RTP socket is read at each tick (datagrams carry the kernel's arrival
                // time), not through epoll: one wake-up and one visit of the session's state per
                // ptime instead of two. Without the kernel's stamps it is polled like the RTCP
                // port (a packet every few seconds), so arrival times stay true.
                if !readsAtTick { _ = cs_epoll_add(epoll, fds.rtp, id << 1) }
                _ = cs_epoll_add(epoll, fds.rtcp, id << 1 | 1)
                // The first tick: the next instant of the phase slot at least 1 ms away.
                let now = MonotonicClock.now.nanoseconds
                let offset = Self.period * Int64(phase) / Int64(phases)
                let fromEpoch = now + 1_000_000 - epoch - offset
                let periods = (fromEpoch + Self.period - 1) / Self.period
                let entry = Entry(session: session, phase: phase, readsAtTick: readsAtTick)
                shared.withLock {
                    $0.entries[id] = entry
                    $0.heap.push(epoch + offset + max(0, periods) * Self.period, id)
                    noteEarliest($0.heap)
                }
            case .remove(let id, let done, let fds):
                remove(id, closing: fds, done: done)
            }
        }
        if !commands.isEmpty { publish(MonotonicClock.now.nanoseconds) }
    }

    private func runDueTicks(limit: Int = .max) {
        // Deadlines within 50 µs are run now rather than after another wake-up.
        var now = MonotonicClock.now.nanoseconds
        var ran = 0
        while ran < limit, let job = take(dueBy: now + 50_000) {
            ran += 1
            // Over a millisecond behind: wake the other workers, which run our late ticks
            // when they have time (at most once a millisecond).
            if now - job.deadline > Self.helpThreshold, now - lastNudge > 1_000_000 {
                lastNudge = now
                for peer in peers where !peer.stopping.load(ordering: .relaxed) { peer.nudge() }
            }
            now = runTick(job, now: now, owner: self)
        }
        if now - lastPublished > 100_000_000 { publish(now) }
    }

    /// Runs one tick of `owner`'s (this worker's, or a peer's it helps); returns the time after it.
    private func runTick(_ job: Job, now start: Int64, owner: MediaWorker) -> Int64 {
        var now = start
        let late = max(0, now - job.deadline)
        recordLateness(late)
        let session = job.entry.session
        if job.entry.readsAtTick {
            local.datagrams &+= UInt64(session.receive(onRTCPSocket: false, scratch: scratch, batches: job.entry.batches))
            // The tick's time follows the reads: no datagram arrived after the frame it feeds.
            now = MonotonicClock.now.nanoseconds
        }
        let ptime = session.tick(at: .nanoseconds(now), lateness: late)
        let step = max(Int64(1_000_000), Int64(ptime.components.seconds) * 1_000_000_000 + Int64(ptime.components.attoseconds / 1_000_000_000))
        var next = job.deadline + step
        // After a long stall (a suspended process), skip the missed ticks instead of bursting.
        if now - next > 200_000_000 { next = now + step }
        owner.release(job.id, next: (next, Entry.batches(forPtime: step), job.entry.batches))
        local.ticks &+= 1
        if owner !== self { local.helpedTicks &+= 1 }
        return MonotonicClock.now.nanoseconds
    }

    /// Runs other workers' ticks that are over ``helpThreshold`` late (a worker stalled by the
    /// machine or briefly overloaded), while none of this worker's own is due and at most
    /// ``helpBudget`` per wake-up: the engine's cores share a backlog instead of one core
    /// draining it alone. Sessions stay with their worker; only the late ticks move.
    private func help() -> Bool {
        guard !peers.isEmpty else { return false }
        var now = MonotonicClock.now.nanoseconds
        var budget = Self.helpBudget
        // Each worker starts with a different peer, so that helpers do not all crowd one.
        for k in 0..<peers.count where budget > 0 {
            let peer = peers[(index + k) % peers.count]
            guard !peer.stopping.load(ordering: .relaxed) else { continue }
            while budget > 0 {
                // Our own sessions first: none of theirs while one of ours is due. (Waiting for
                // more room, e.g. two ticks' time, stopped all helping at 200 calls, where a
                // worker has a tick due every 0.2 ms: a late peer tick may delay our next one by
                // its own cost, which is the point of sharing.)
                if earliest.load(ordering: .relaxed) <= now + 50_000 { return false }
                // (A look without the lock first: a peer on time costs nothing.)
                guard peer.earliest.load(ordering: .relaxed) <= now - Self.helpThreshold,
                      let job = peer.take(dueBy: now - Self.helpThreshold, helping: true) else { break }
                budget -= 1
                now = runTick(job, now: now, owner: peer)
            }
        }
        // Out of budget with late ticks maybe left: look again at once (after any own tick).
        return budget == 0
    }

    private func recordLateness(_ nanoseconds: Int64) {
        let bucket = min(Int(nanoseconds / 100_000), local.latenessHistogram.count - 1)
        local.latenessHistogram[bucket] &+= 1
        if nanoseconds > 0 { local.maxLateness = max(local.maxLateness, .nanoseconds(nanoseconds)) }
    }

    /// Folds the thread's counters into the shared statistics (every 100 ms).
    private func publish(_ now: Int64) {
        local.elapsed = .nanoseconds(now - lastPublished)
        let delta = local
        let phases = phaseLoad
        stats.withLock {
            $0.merge(delta)
            $0.phaseLoad = phases
        }
        local = MediaEngineStatistics(threads: 0)
        lastPublished = now
    }

    /// Arms the timer for this worker's next deadline, or earlier when a peer is behind now:
    /// for the moment its overdue tick becomes ours to run, if it has not run it by then.
    private func arm() {
        var deadline = earliest.load(ordering: .relaxed)
        if !peers.isEmpty {
            let now = MonotonicClock.now.nanoseconds
            for peer in peers where !peer.stopping.load(ordering: .relaxed) {
                // A moment already past was looked at by help() just now (which declined for
                // want of time, or left the rest for the next pass): arming for it would spin.
                let behind = peer.earliest.load(ordering: .relaxed)
                if behind < now, behind + Self.helpThreshold > now { deadline = min(deadline, behind + Self.helpThreshold) }
            }
        }
        guard deadline != Int64.max, deadline != armed else { return }
        armed = deadline
        _ = cs_timerfd_arm(timer, deadline / 1_000_000_000, deadline % 1_000_000_000)
    }
}
