import SIPMessage
import SIPTransaction

/// What the simulated network does to each datagram.
public struct NetworkConditions: Sendable, Hashable {
    /// Probability that a datagram is lost (0…1).
    public var loss: Double
    /// Probability that a datagram is delivered twice (0…1).
    public var duplication: Double
    /// The smallest one-way delay.
    public var minimumDelay: Duration
    /// The largest one-way delay; datagrams sent close together overtake each other when the
    /// spread is wider than their spacing.
    public var maximumDelay: Duration

    public init(loss: Double = 0, duplication: Double = 0, minimumDelay: Duration = .milliseconds(1), maximumDelay: Duration = .milliseconds(1)) {
        self.loss = loss
        self.duplication = duplication
        self.minimumDelay = minimumDelay
        self.maximumDelay = maximumDelay
    }

    /// A perfect network with 1 ms delay.
    public static let perfect = NetworkConditions()
}

/// A discrete-event simulation: a virtual clock, an in-memory datagram network with seeded
/// loss, duplication, delay and reordering, and nodes that run the real transaction layer.
///
/// Nothing sleeps: events run in time order as fast as the CPU allows, so a 32-second Timer B
/// takes microseconds, and the same seed gives the same run every time.
public final class Simulation {
    /// The virtual time since the simulation started.
    public private(set) var now: Duration = .zero
    /// Conditions applied to every datagram (override per link with ``setConditions(from:to:_:)``).
    public var conditions: NetworkConditions
    /// One line per delivered, lost or duplicated datagram and per node event, for assertions
    /// and for comparing runs.
    public private(set) var trace: [String] = []
    /// Whether to record ``trace`` (on by default).
    public var tracing = true
    /// Datagrams sent, lost and duplicated.
    public private(set) var sent = 0, lost = 0, duplicated = 0
    /// When the last datagram was sent: a run has gone quiet from then on, even while timers
    /// that were cancelled (and will do nothing) still wait in the queue.
    public private(set) var lastTransmission: Duration = .zero
    /// Drops the datagrams it returns true for (before the random loss, traced as `DROPPED`,
    /// counted in ``lost``): targeted faults, such as losing the first final NOTIFY, on top of
    /// the seeded conditions.
    public var dropFilter: ((_ message: SIPMessage, _ from: String, _ to: String) -> Bool)?

    private var rng: SplitMix64
    private var queue = DeadlineHeap<() -> Void>()
    private var nodes: [String: SimulatedNode] = [:]
    private var rawNodes: [String: (SIPMessage, String) -> Void] = [:]
    private var linkConditions: [String: NetworkConditions] = [:]

    public init(seed: UInt64, conditions: NetworkConditions = .perfect) {
        rng = SplitMix64(seed: seed)
        self.conditions = conditions
    }

    /// Adds a node with its own transaction layer, seeded from the simulation's seed.
    @discardableResult
    public func addNode(_ name: String, timers: TransactionTimers = .rfc3261) -> SimulatedNode {
        let node = SimulatedNode(name: name, simulation: self, layer: TransactionLayer(timers: timers, seed: rng.next()))
        nodes[name] = node
        return node
    }

    public func node(_ name: String) -> SimulatedNode? { nodes[name] }

    /// Adds a node without a transaction layer: every message that reaches it (parsed again
    /// from its bytes) goes to `receive` with the sender's name. For stateless elements in
    /// tests, such as a forking proxy; it sends with ``send(_:from:to:)``.
    public func addRawNode(_ name: String, receive: @escaping (SIPMessage, _ from: String) -> Void) {
        rawNodes[name] = receive
    }

    /// Sends a message from a raw node (subject to the network conditions like any other).
    public func send(_ message: SIPMessage, from: String, to: String) {
        transmit(message, from: from, to: to)
    }

    /// Conditions for datagrams from one node to another.
    public func setConditions(from: String, to: String, _ c: NetworkConditions) {
        linkConditions[from + ">" + to] = c
    }

    /// Runs `action` at `now + delay`.
    public func schedule(after delay: Duration, _ action: @escaping () -> Void) {
        queue.push(action, at: now + max(delay, .zero))
    }

    /// Events waiting (datagrams in flight, timers, and cancelled timers not yet due).
    public var pendingEvents: Int { queue.count }

    /// Runs events in time order until none is left or the clock would pass `limit`.
    /// Returns the number of events run.
    @discardableResult
    public func run(until limit: Duration = .seconds(3600)) -> Int {
        var count = 0
        while let next = queue.pop(dueBy: limit) {
            now = next.deadline
            next.item()
            count += 1
        }
        // Events remain beyond the limit: the clock stands at the limit.
        if !queue.isEmpty { now = max(now, limit) }
        return count
    }

    /// Random number for users of the simulation (TU behaviour), from the seeded generator.
    public func random(in range: ClosedRange<Double>) -> Double {
        let unit = Double(rng.next() >> 11) / Double(1 << 53)
        return range.lowerBound + unit * (range.upperBound - range.lowerBound)
    }

    func record(_ line: @autoclosure () -> String) {
        if tracing { trace.append("\(Simulation.format(now)) \(line())") }
    }

    static func format(_ d: Duration) -> String {
        let (s, a) = d.components
        let ms = a / 1_000_000_000_000_000
        return "\(s).\(ms < 10 ? "00" : ms < 100 ? "0" : "")\(ms)s"
    }

    /// Sends a message's bytes over the simulated network; the receiver parses them again.
    func transmit(_ message: SIPMessage, from: String, to: String) {
        sent += 1
        lastTransmission = now
        let c = linkConditions[from + ">" + to] ?? conditions
        let label = message.method?.token ?? String(message.statusCode ?? 0)
        if let dropFilter, dropFilter(message, from, to) {
            lost += 1
            record("\(from)->\(to) \(label) DROPPED")
            return
        }
        if random(in: 0...1) < c.loss {
            lost += 1
            record("\(from)->\(to) \(label) LOST")
            return
        }
        let bytes = message.serialized()
        var copies = 1
        if random(in: 0...1) < c.duplication { copies = 2; duplicated += 1 }
        for copy in 0..<copies {
            let spread = c.maximumDelay - c.minimumDelay
            let delay = c.minimumDelay + spread * random(in: 0...1)
            schedule(after: delay) { [weak self] in
                guard let self else { return }
                if let raw = self.rawNodes[to] {
                    self.record("\(from)->\(to) \(label)\(copy > 0 ? " (duplicate)" : "")")
                    if let m = try? SIPMessage(bytes: bytes) { raw(m, from) }
                    return
                }
                guard let node = self.nodes[to] else { return }
                self.record("\(from)->\(to) \(label)\(copy > 0 ? " (duplicate)" : "")")
                node.receive(bytes, from: from)
            }
        }
    }
}
