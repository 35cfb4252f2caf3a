@_exported import SwitchboardTestSupport
import Testing
@testable import Media

/// One packet and the time it reaches the receiver.
struct Arrival {
    var packet: JitterBufferPacket
    var time: Duration
}

/// What a replay produced: one frame per pull, and the buffer at the end.
struct Replay {
    var frames: [(time: Duration, frame: JitterBufferFrame)] = []
    var buffer: JitterBuffer
    /// Current delay after each audio frame, in milliseconds.
    var delays: [Double] = []

    var played: [UInt16] { frames.compactMap { if case .audio(let p) = $0.frame { p.sequenceNumber } else { nil } } }
    var missing: [MissingFrame] { frames.compactMap { if case .missing(let m) = $0.frame { m } else { nil } } }
    /// Missing frames reported as lost (not the underrun at the end of the stream).
    var lostFrames: [MissingFrame] { missing.filter { $0.reason == .lost } }
    func count(_ test: (JitterBufferFrame) -> Bool) -> Int { frames.filter { test($0.frame) }.count }
    var stats: JitterBufferStatistics { buffer.statistics }
}

/// Feeds arrivals and pulls in time order (an arrival at the same instant as a pull goes first).
func replay(_ arrivals: [Arrival], configuration: JitterBufferConfiguration = JitterBufferConfiguration(),
            firstPull: Duration = .milliseconds(5), pulls: Int) -> Replay {
    let sorted = arrivals.enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
    var r = Replay(buffer: JitterBuffer(configuration: configuration))
    var i = 0
    for k in 0..<pulls {
        let t = firstPull + configuration.frameDuration * k
        while i < sorted.count, sorted[i].time <= t {
            r.buffer.insert(sorted[i].packet, arrival: sorted[i].time)
            i += 1
        }
        let f = r.buffer.pull(at: t)
        r.frames.append((t, f))
        if case .audio = f { r.delays.append(ms(r.buffer.statistics.currentDelay)) }
    }
    return r
}

func ms(_ d: Duration) -> Double { JitterBuffer.seconds(d) * 1000 }

/// A synthetic sender and network.
struct Pattern {
    var count = 500
    var clockRate = 8000
    var frameMs = 20
    var firstSequence: UInt16 = 1000
    var firstTimestamp: UInt32 = 5000
    var ssrc: UInt32 = 0x1234
    /// Sender clock error: +0.005 means the sender's media clock runs 0.5% fast (packets come
    /// 0.5% more often than the receiver's playout consumes them).
    var skew = 0.0
    var baseDelayMs = 30.0
    /// Extra delay drawn uniformly in 0…jitterMs.
    var jitterMs = 0.0
    /// Gilbert–Elliott loss: probability of entering the loss state, and of staying in it.
    var lossEnter = 0.0
    var lossStay = 0.0
    /// Packets (by index) sent during [start, start+duration) are held until its end.
    var stall: (start: Double, duration: Double)?
    /// Reordering: consecutive blocks of this many packets are held until the block's last one
    /// has arrived, then delivered together in a random order, 0.1 ms apart (1: no reordering).
    /// No packet arrives before it was sent; the first of a block waits up to window − 1 frames.
    var reorderWindow = 1
    var seed: UInt64 = 1

    func arrivals() -> [Arrival] {
        var rng = TestRandom(seed: seed)
        var out: [Arrival] = []
        var losing = false
        let samples = UInt32(clockRate * frameMs / 1000)
        for i in 0..<count {
            let send = Double(i) * Double(frameMs) / 1000 / (1 + skew)
            losing = losing ? Double.random(in: 0..<1, using: &rng) < lossStay : Double.random(in: 0..<1, using: &rng) < lossEnter
            if losing && i > 0 && i < count - 5 { continue }
            var arrive = send + (baseDelayMs + Double.random(in: 0...max(jitterMs, 0), using: &rng)) / 1000
            if let s = stall, send >= s.start, send < s.start + s.duration {
                arrive = max(arrive, s.start + s.duration + baseDelayMs / 1000)
            }
            let p = JitterBufferPacket(sequenceNumber: firstSequence &+ UInt16(truncatingIfNeeded: i),
                                       timestamp: firstTimestamp &+ UInt32(truncatingIfNeeded: i) &* samples,
                                       ssrc: ssrc, marker: i == 0, payloadType: 0, payload: [UInt8(truncatingIfNeeded: i)])
            out.append(Arrival(packet: p, time: .nanoseconds(Int64((arrive * 1e9).rounded()))))
        }
        if reorderWindow > 1 {
            for start in stride(from: 0, to: out.count, by: reorderWindow) {
                let block = start..<min(start + reorderWindow, out.count)
                let release = block.map { out[$0].time }.max()!
                let order = Array(block).shuffled(using: &rng)
                for (k, i) in order.enumerated() { out[i].time = release + .microseconds(100 * k) }
            }
        }
        return out
    }
}

/// Invariants every replay must satisfy: sequence numbers play in increasing order (modulo
/// 2¹⁶, from `first`) at most once, and every distinct packet is accounted for exactly once.
func checkInvariants(_ r: Replay, distinctSent: Int, first: UInt16, sourceLocation: SourceLocation = #_sourceLocation) {
    var previous: Int?
    for s in r.played {
        let offset = Int(s &- first)
        if let p = previous { #expect(offset > p, "sequence \(s) played out of order or twice", sourceLocation: sourceLocation) }
        previous = offset
    }
    let st = r.stats
    let accounted = r.played.count + st.dropped + st.late + st.lost + st.overflowed + st.buffered
    #expect(accounted == distinctSent, "played \(r.played.count) + dropped \(st.dropped) + late \(st.late) + lost \(st.lost) + overflowed \(st.overflowed) + buffered \(st.buffered) ≠ \(distinctSent)", sourceLocation: sourceLocation)
    #expect(st.concealed == r.missing.count, sourceLocation: sourceLocation)
    #expect(st.stretched == r.count { $0 == .stretch }, sourceLocation: sourceLocation)
    #expect(st.buffered <= r.buffer.configuration.capacity, sourceLocation: sourceLocation)
}
