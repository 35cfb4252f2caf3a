import RTP

/// One media packet as the jitter buffer sees it: the RTP fields it needs and the payload.
public struct JitterBufferPacket: Sendable, Hashable {
    /// The RTP sequence number.
    public var sequenceNumber: UInt16
    /// The RTP timestamp (clock units of the codec).
    public var timestamp: UInt32
    /// The synchronization source.
    public var ssrc: UInt32
    /// The marker bit (first packet of a talkspurt for audio).
    public var marker: Bool
    /// The payload type.
    public var payloadType: UInt8
    /// The encoded frame.
    public var payload: [UInt8]

    /// Creates a packet.
    public init(sequenceNumber: UInt16, timestamp: UInt32, ssrc: UInt32 = 0, marker: Bool = false, payloadType: UInt8 = 0, payload: [UInt8]) {
        self.sequenceNumber = sequenceNumber
        self.timestamp = timestamp
        self.ssrc = ssrc
        self.marker = marker
        self.payloadType = payloadType
        self.payload = payload
    }

    /// The fields of a parsed RTP packet (the payload is copied out of the datagram).
    public init(_ packet: RTPPacket) {
        self.init(sequenceNumber: packet.sequenceNumber, timestamp: packet.timestamp, ssrc: packet.ssrc,
                  marker: packet.marker, payloadType: packet.payloadType, payload: Array(packet.payload))
    }
}

/// A frame the buffer could not deliver: the decoder conceals it (PLC), or rebuilds it from the
/// in-band FEC of ``next`` when that packet is already buffered (Opus).
public struct MissingFrame: Sendable, Hashable {
    /// Why the frame is missing.
    public enum Reason: Sendable, Hashable {
        /// A later packet is buffered but this one is not: lost (or so late it will be dropped).
        case lost
        /// The buffer ran dry in the middle of a talkspurt (a network stall or a delay spike).
        case underrun
    }

    /// The sequence number of the missing packet (estimated for an underrun).
    public var sequenceNumber: UInt16
    /// The RTP timestamp of the missing frame.
    public var timestamp: UInt32
    /// The packet that follows the missing one, when it is already buffered; its FEC data
    /// (Opus LBRR) describes the missing frame.
    public var next: JitterBufferPacket?
    /// Why the frame is missing.
    public var reason: Reason

    /// Creates a description of a missing frame.
    public init(sequenceNumber: UInt16, timestamp: UInt32, next: JitterBufferPacket?, reason: Reason) {
        self.sequenceNumber = sequenceNumber
        self.timestamp = timestamp
        self.next = next
        self.reason = reason
    }
}

/// What the buffer hands out for one playout tick (one frame duration).
public enum JitterBufferFrame: Sendable, Hashable {
    /// The packet due now: decode it.
    case audio(JitterBufferPacket)
    /// The packet due now is missing: conceal it (PLC, or FEC from `next`).
    case missing(MissingFrame)
    /// One extra frame inserted to grow the delay (the buffer is running too short for the
    /// measured jitter, or the sender's clock is slow): produce one concealment frame without
    /// consuming a packet.
    case stretch
    /// The stream is running but no audio is due (a silence/DTX gap, prebuffering, or a stall
    /// longer than the concealment limit): play silence or comfort noise.
    case silence
    /// No stream: nothing received yet, or since the last reset.
    case empty
}

/// Tuning of a ``JitterBuffer``.
public struct JitterBufferConfiguration: Sendable, Hashable {
    /// The RTP clock rate of the codec (8000 for G.711, 48000 for Opus).
    public var clockRate: Int
    /// The duration of one frame (the ptime): one packet holds one frame, and ``JitterBuffer/pull(at:)``
    /// is called once per frame duration.
    public var frameDuration: Duration
    /// The smallest target delay.
    public var minDelay: Duration
    /// The largest target delay; jitter beyond it shows up as late packets.
    public var maxDelay: Duration
    /// The target delay until enough arrivals have been measured (``minimumHistory``).
    public var initialDelay: Duration
    /// The fraction of packets the target delay aims to have on time (0.5–1).
    public var jitterQuantile: Double
    /// How many recent arrivals the jitter estimate looks at.
    public var historySize: Int
    /// Arrivals needed before the measured jitter replaces ``initialDelay``.
    public var minimumHistory: Int
    /// How long an empty buffer is concealed (``JitterBufferFrame/missing(_:)``) in a talkspurt
    /// before the buffer reports silence.
    public var maxConcealment: Duration
    /// Frames between two delay adjustments (stretch or drop) while audio plays continuously;
    /// 10 allows following up to ±10% of clock difference.
    public var adjustmentInterval: Int
    /// Most packets held; beyond it the oldest is dropped.
    public var capacity: Int
    /// A timestamp jump back, or a transit shortened, by more than this is taken as a timestamp
    /// discontinuity (the sender restarted its clock): the playout restarts.
    public var discontinuityThreshold: Duration

    /// A configuration; defaults suit 20 ms G.711 frames.
    public init(clockRate: Int = 8000, frameDuration: Duration = .milliseconds(20), minDelay: Duration = .milliseconds(20),
                maxDelay: Duration = .milliseconds(200), initialDelay: Duration = .milliseconds(60), jitterQuantile: Double = 0.97,
                historySize: Int = 100, minimumHistory: Int = 50, maxConcealment: Duration = .milliseconds(100),
                adjustmentInterval: Int = 10, capacity: Int = 64, discontinuityThreshold: Duration = .seconds(2)) {
        self.clockRate = clockRate
        self.frameDuration = frameDuration
        self.minDelay = minDelay
        self.maxDelay = maxDelay
        self.initialDelay = initialDelay
        self.jitterQuantile = jitterQuantile
        self.historySize = historySize
        self.minimumHistory = minimumHistory
        self.maxConcealment = maxConcealment
        self.adjustmentInterval = adjustmentInterval
        self.capacity = capacity
        self.discontinuityThreshold = discontinuityThreshold
    }
}

/// Counters and delays of a ``JitterBuffer``.
public struct JitterBufferStatistics: Sendable, Hashable {
    /// Packets handed to ``JitterBuffer/insert(_:arrival:)`` (duplicates and late ones included,
    /// packets of a previous SSRC excluded).
    public var received = 0
    /// Packets already received (buffered or played).
    public var duplicates = 0
    /// Packets that arrived after their playout time (dropped).
    public var late = 0
    /// Sequence numbers passed at playout without ever having been received; a packet that
    /// arrives afterwards counts as late instead.
    public var lost = 0
    /// Frames handed out as ``JitterBufferFrame/missing(_:)``. This includes the underrun frames
    /// at the end of each talkspurt of a sender that stops sending in silence: until the next
    /// packet comes, the buffer cannot tell that silence from a stall.
    public var concealed = 0
    /// Frames inserted to grow the delay (``JitterBufferFrame/stretch``).
    public var stretched = 0
    /// Packets dropped to shrink the delay while audio played continuously.
    public var dropped = 0
    /// Packets dropped because the buffer was full.
    public var overflowed = 0
    /// Restarts on an SSRC change or a sequence number jump.
    public var resets = 0
    /// Packets of the previous SSRC arriving after a change (dropped).
    public var foreign = 0
    /// The delay of the latest frame played: how long the fastest recent packets wait.
    public var currentDelay: Duration = .zero
    /// The delay the buffer aims at, from the measured jitter, within the configured bounds.
    public var targetDelay: Duration = .zero
    /// The largest ``currentDelay`` seen.
    public var maxDelay: Duration = .zero
    /// Packets held now.
    public var buffered = 0
    /// The packet duration seen on the wire (the timestamp step between consecutive sequence
    /// numbers, once three in a row agree), in clock units; `nil` until then. When it differs
    /// from the configured frame duration, the session should rebuild the buffer with it (a peer
    /// sending 60 ms Opus packets though the SDP said nothing, for instance).
    public var observedFrameSamples: Int?
    /// The estimated clock difference: how fast transit times grow (+0.005: the sender's clock
    /// runs 0.5% slow against the playout's; negative: fast).
    public var clockDrift = 0.0

    /// All zero.
    public init() {}
}

/// An adaptive jitter buffer for one audio stream, driven by explicit times: packets go in with
/// their arrival time (``insert(_:arrival:)``), and the playout calls ``pull(at:)`` once per frame
/// duration. No clock is read and nothing is shared, so the same code serves the live session,
/// simulations and tests.
///
/// ## Policy
/// - **Delay**: each arrival's transit `arrival − timestamp/rate` is kept for the last
///   ``JitterBufferConfiguration/historySize`` packets. The target delay is the spread between the
///   smallest transit and the ``JitterBufferConfiguration/jitterQuantile`` quantile, clamped to
///   `minDelay…maxDelay`. The current delay is how long the fastest recent packet waits:
///   `now − playoutTimestamp/rate − minimum transit`.
/// - **Adapting in silence**: while no audio is due (start, DTX/silence gaps, after a stall) the
///   playout point is re-anchored freely so that the current delay equals the target; this is
///   where most adaptation happens, inaudibly. Packets whose time is already past the new playout
///   point are dropped as late (after a long stall, the stale burst is skipped, not played).
/// - **Drift**: the trend of the transits (the sender's clock running faster or slower than the
///   playout's) is estimated from the window's minima and removed before the minimum and the
///   quantile are taken, so the delay estimate does not lag behind a drifting clock.
/// - **Adapting in speech** (continuous audio, e.g. G.711 without VAD, or clock drift): when the
///   current delay exceeds the target by more than 1¼ frames, one packet is dropped; when it is
///   short of the target (by a tenth of a frame), one ``JitterBufferFrame/stretch`` frame is inserted (the band is wider
///   than a frame so that one adjustment never triggers the opposite one). At most one
///   adjustment per ``JitterBufferConfiguration/adjustmentInterval`` frames. A sender clock ±0.5%
///   off thus costs one drop or stretch every 200 frames (4 s at 20 ms), and the buffer neither
///   grows nor starves.
/// - **Loss**: a packet is declared missing when its frame is due and a later packet is buffered
///   (``MissingFrame/next`` carries the following packet for FEC). An empty buffer in a talkspurt
///   is concealed for ``JitterBufferConfiguration/maxConcealment``, then reported as silence.
/// - **Late**: a packet whose sequence number has already been passed, or whose frame lies
///   entirely before the playout point, is dropped and counted late.
/// - **Wrap-around**: sequence numbers and timestamps are extended to 64 bits against the highest
///   seen, so wrap-around is invisible.
/// - **SSRC change**: a new SSRC resets the stream (buffer, history, playout point; counters are
///   kept). Packets from the previous SSRC arriving afterwards are dropped as ``JitterBufferStatistics/foreign``.
///   A sequence number jump of more than 3000 (RFC 3550's `MAX_DROPOUT`) also resets.
/// - **Timestamp jumps**: a newer sequence number whose timestamp is more than
///   ``JitterBufferConfiguration/discontinuityThreshold`` older than the highest seen, or whose
///   transit is that much shorter than the previous packet's (a jump forward further than time
///   passed), means the sender restarted its clock: the buffered packets are dropped, the jitter
///   history is cleared and the playout restarts from that packet (counted in
///   ``JitterBufferStatistics/resets``). Transits that grow (a network stall) are never a restart.
public struct JitterBuffer: Sendable {
    /// What ``insert(_:arrival:)`` did with a packet.
    public enum InsertResult: Sendable, Hashable {
        /// Buffered for playout.
        case accepted
        /// Buffered, after restarting the stream (new SSRC or sequence jump).
        case restarted
        /// Already received.
        case duplicate
        /// Arrived after its playout time; dropped.
        case late
        /// From the SSRC that was replaced; dropped.
        case foreign
    }

    private struct Entry: Sendable {
        var seq: Int64
        var ts: Int64
        var packet: JitterBufferPacket
    }

    /// The configuration in force.
    public let configuration: JitterBufferConfiguration
    /// Counters and delays.
    public private(set) var statistics = JitterBufferStatistics()

    private let rate: Double
    private let frame: Int64
    private var entries: [Entry] = []
    private var ssrc: UInt32?
    private var previousSSRC: UInt32?
    private var highestSeq: Int64?
    private var highestTs: Int64?
    private var recent: [Int64]
    private var started = false
    private var talkspurt = false
    private var playedAnything = false
    private var nextSeq: Int64 = 0
    private var firstSeq: Int64 = 0
    private var playout: Int64 = 0
    private var playedEnd: Int64 = .min
    private var emptyRun = 0
    private var framesSinceAdjustment = 0
    private var transits: [Double]
    private var arrivals: [Double]
    private var transitCount = 0
    private var transitIndex = 0
    private var lastTransit: Double?
    private var minTransit: Double = 0
    private var top: [Double]
    private var targetSamples: Double
    private var pullsSinceEstimate = 0
    private var lastStep: Int64 = 0
    private var stepRun = 0
    private var estimated = false

    /// A buffer with the given configuration.
    public init(configuration: JitterBufferConfiguration = JitterBufferConfiguration()) {
        self.configuration = configuration
        rate = Double(max(1, configuration.clockRate))
        frame = max(1, Self.samples(configuration.frameDuration, rate: Double(max(1, configuration.clockRate))))
        recent = [Int64](repeating: -1, count: 1024)
        transits = [Double](repeating: 0, count: max(4, configuration.historySize))
        arrivals = transits
        top = transits
        targetSamples = Double(Self.samples(configuration.initialDelay, rate: Double(max(1, configuration.clockRate))))
        targetSamples = min(max(targetSamples, Self.seconds(configuration.minDelay) * rate), Self.seconds(configuration.maxDelay) * rate)
        statistics.targetDelay = duration(samples: targetSamples)
    }

    /// The packet with the next sequence number to play, if it is buffered.
    public var nextPacket: JitterBufferPacket? {
        guard let first = entries.first, !started || first.seq == nextSeq else { return nil }
        return first.packet
    }

    /// Forgets the stream (buffer, history, playout point); counters are kept.
    public mutating func reset() {
        entries.removeAll(keepingCapacity: true)
        highestSeq = nil
        highestTs = nil
        for i in recent.indices { recent[i] = -1 }
        started = false
        talkspurt = false
        playedAnything = false
        emptyRun = 0
        framesSinceAdjustment = 0
        lastStep = 0
        stepRun = 0
        clearHistory()
        statistics.buffered = 0
    }

    // MARK: insert

    /// Hands in one packet received at `arrival` (any monotonic time base, the same as ``pull(at:)``'s).
    @discardableResult
    public mutating func insert(_ packet: JitterBufferPacket, arrival: Duration) -> InsertResult {
        var restarted = false
        if packet.ssrc != ssrc {
            if let current = ssrc {
                if packet.ssrc == previousSSRC {
                    statistics.foreign += 1
                    return .foreign
                }
                previousSSRC = current
                reset()
                statistics.resets += 1
                restarted = true
            }
            ssrc = packet.ssrc
        }
        statistics.received += 1

        var seq: Int64
        var ts: Int64
        if let hs = highestSeq, let ht = highestTs {
            let ds = Int64(Int16(bitPattern: packet.sequenceNumber &- UInt16(truncatingIfNeeded: hs)))
            if abs(ds) > 3000 {
                reset()
                statistics.resets += 1
                restarted = true
                seq = Int64(packet.sequenceNumber) + (1 << 20)
                ts = Int64(packet.timestamp) + (1 << 36)
            } else {
                seq = hs + ds
                ts = ht + Int64(Int32(bitPattern: packet.timestamp &- UInt32(truncatingIfNeeded: ht)))
            }
        } else {
            seq = Int64(packet.sequenceNumber) + (1 << 20)
            ts = Int64(packet.timestamp) + (1 << 36)
        }

        if recent[Int(seq & 1023)] == seq {
            statistics.duplicates += 1
            return .duplicate
        }
        recent[Int(seq & 1023)] = seq
        let threshold = Self.seconds(configuration.discontinuityThreshold) * rate
        let arrivalSamples = Self.seconds(arrival) * rate
        let transit = arrivalSamples - Double(ts)
        if let hs = highestSeq, let ht = highestTs, seq > hs,
           Double(ht - ts) > threshold || (lastTransit.map { $0 - transit > threshold } ?? false) {
            // A newer packet whose timestamp jumped back, or forward further than time passed:
            // the sender restarted its clock. The old timeline's packets cannot be placed
            // against the new one: drop them and start the playout again from this packet.
            // (A long network stall only makes transits grow: it is not a restart.)
            statistics.dropped += entries.count
            entries.removeAll(keepingCapacity: true)
            started = false
            talkspurt = false
            emptyRun = 0
            clearHistory()
            statistics.resets += 1
            restarted = true
            highestTs = ts
        }
        let newest = seq > (highestSeq ?? .min)
        if newest, let hs = highestSeq, let ht = highestTs, seq == hs + 1 {
            let step = ts - ht
            if step > 0 && step == lastStep {
                stepRun += 1
                if stepRun >= 2 { statistics.observedFrameSamples = Int(step) }
            } else {
                stepRun = 0
            }
            lastStep = step
        }
        if newest { highestSeq = seq }
        if ts > (highestTs ?? .min) { highestTs = ts }
        recordTransit(transit, at: arrivalSamples)
        // The restart test compares with the newest packet's transit only: a single straggler
        // arriving seconds late must not make the next packet look like a clock jump.
        if newest { lastTransit = transit }

        if started {
            if seq < nextSeq {
                statistics.late += 1
                if seq >= firstSeq && seq >= nextSeq - 1024 { statistics.lost -= 1 }
                return .late
            }
            if talkspurt && ts + frame <= playout {
                statistics.late += 1
                advanceNextSequence(to: seq + 1)
                return .late
            }
        }
        // After the last entry with a lower number (the end, for a packet in order).
        var position = entries.count
        while position > 0 && entries[position - 1].seq >= seq { position -= 1 }
        if position == entries.count {
            entries.append(Entry(seq: seq, ts: ts, packet: packet))
        } else {
            entries.insert(Entry(seq: seq, ts: ts, packet: packet), at: position)
        }
        if entries.count > max(1, configuration.capacity) {
            let dropped = entries.removeFirst()
            statistics.overflowed += 1
            if started && dropped.seq >= nextSeq { advanceNextSequence(to: dropped.seq + 1) }
        }
        statistics.buffered = entries.count
        return restarted ? .restarted : .accepted
    }

    // MARK: pull

    /// The frame to play at `now`; call once per frame duration.
    public mutating func pull(at now: Duration) -> JitterBufferFrame {
        let nowSamples = Self.seconds(now) * rate
        pullsSinceEstimate += 1
        // Every pull while the history fills (or after it was cleared), then every fifth.
        if transitCount < transits.count || pullsSinceEstimate >= 5 || !estimated { estimate(now: nowSamples) }
        framesSinceAdjustment += 1
        defer { statistics.buffered = entries.count }

        if !started {
            guard let first = entries.first else { return .empty }
            started = true
            talkspurt = false
            nextSeq = first.seq
            firstSeq = first.seq
            playout = first.ts
            playedEnd = .min
        }

        if !talkspurt {
            // Silence: re-anchor the playout point so that the delay matches the target.
            if let newest = entries.max(by: { $0.ts < $1.ts }) {
                let anchored = Self.clamped((nowSamples - targetSamples - minTransit).rounded(.down))
                playout = max(min(anchored, newest.ts), playedEnd)
                while let e = entries.first, e.ts + frame <= playout {
                    entries.removeFirst()
                    statistics.late += 1
                    advanceNextSequence(to: e.seq + 1)
                }
                if let e = entries.first, e.seq > nextSeq { advanceNextSequence(to: e.seq) }
            }
        }

        // Sequence numbers whose frames lie entirely in the past (concealed during an underrun).
        while let e = entries.first {
            if e.seq < nextSeq { entries.removeFirst(); continue }
            let gap = e.seq - nextSeq
            if gap > 0 && e.ts - gap * frame + frame <= playout {
                advanceNextSequence(to: nextSeq + 1)
                continue
            }
            if e.ts + frame <= playout {
                entries.removeFirst()
                statistics.late += 1
                advanceNextSequence(to: e.seq + 1)
                continue
            }
            break
        }

        guard var e = entries.first else {
            if talkspurt && Int64(emptyRun + 1) * frame <= Self.samples(configuration.maxConcealment, rate: rate) {
                let missing = MissingFrame(sequenceNumber: UInt16(truncatingIfNeeded: nextSeq + Int64(emptyRun)),
                                           timestamp: UInt32(truncatingIfNeeded: playout), next: nil, reason: .underrun)
                emptyRun += 1
                return conceal(missing)
            }
            talkspurt = false
            playout += frame
            return playedAnything ? .silence : .empty
        }

        let gap = e.seq - nextSeq
        if gap == 0 {
            // In a talkspurt the playout point sits on the packets' grid; in silence it comes from
            // the re-anchoring, and the packet waits until the point reaches it (never early).
            guard talkspurt ? e.ts < playout + frame : e.ts <= playout else {
                // A timestamp gap without a sequence gap: silence (DTX) until the packet is due.
                talkspurt = false
                playout += frame
                return .silence
            }
            if talkspurt && framesSinceAdjustment >= configuration.adjustmentInterval {
                let delay = nowSamples - Double(e.ts) - minTransit
                let f = Double(frame)
                if delay > targetSamples + f * 1.25, entries.count > 1, entries[1].seq == e.seq + 1, entries[1].ts <= e.ts + frame {
                    entries.removeFirst()
                    statistics.dropped += 1
                    nextSeq = e.seq + 1
                    e = entries[0]
                    framesSinceAdjustment = 0
                } else if delay < targetSamples - f / 10 {
                    statistics.stretched += 1
                    framesSinceAdjustment = 0
                    return .stretch
                }
            }
            entries.removeFirst()
            nextSeq = e.seq + 1
            playout = e.ts + frame
            playedEnd = playout
            talkspurt = true
            playedAnything = true
            emptyRun = 0
            let delay = duration(samples: max(0, nowSamples - Double(e.ts) - minTransit))
            statistics.currentDelay = delay
            if delay > statistics.maxDelay { statistics.maxDelay = delay }
            return .audio(e.packet)
        }

        // gap > 0 (only in a talkspurt: silence skipped the gap above).
        let expected = e.ts - gap * frame
        if expected < playout + frame {
            let missing = MissingFrame(sequenceNumber: UInt16(truncatingIfNeeded: nextSeq), timestamp: UInt32(truncatingIfNeeded: expected),
                                       next: gap == 1 ? e.packet : nil, reason: .lost)
            advanceNextSequence(to: nextSeq + 1)
            return conceal(missing)
        }
        talkspurt = false
        playout += frame
        return .silence
    }

    // MARK: internals

    /// Plays a missing frame in place of the one due (underrun or loss): counts it as
    /// concealed and moves the playout point one frame on.
    private mutating func conceal(_ missing: MissingFrame) -> JitterBufferFrame {
        statistics.concealed += 1
        playout += frame
        playedEnd = playout
        return .missing(missing)
    }

    private mutating func advanceNextSequence(to target: Int64) {
        guard target > nextSeq else { return }
        let span = target - nextSeq
        if span > 1024 {
            statistics.lost += Int(span)
        } else {
            var s = nextSeq
            while s < target {
                if recent[Int(s & 1023)] != s { statistics.lost += 1 }
                s += 1
            }
        }
        nextSeq = target
    }

    private mutating func clearHistory() {
        transitCount = 0
        transitIndex = 0
        lastTransit = nil
        pullsSinceEstimate = 0
        estimated = false
    }

    private mutating func recordTransit(_ d: Double, at time: Double) {
        transits[transitIndex] = d
        arrivals[transitIndex] = time
        transitIndex = (transitIndex + 1) % transits.count
        transitCount = min(transitCount + 1, transits.count)
        if transitCount == 1 { minTransit = d }
    }

    /// Recomputes the minimum transit and the target delay from the history. Clock drift makes
    /// transits trend; the trend is the slope between the minima of the window's older and newer
    /// halves (robust to delay spikes, which only add), clamped to ±3%, and transits are projected
    /// to the newest arrival before the minimum and the quantile are taken.
    private mutating func estimate(now: Double) {
        pullsSinceEstimate = 0
        estimated = true
        guard transitCount > 0 else { return }
        let n = transitCount
        let capacity = transits.count
        let start = n < capacity ? 0 : transitIndex  // the oldest entry
        // The window in age order is at most two contiguous runs of the ring (no modulo per entry).
        let first = n < capacity ? 0..<n : start..<capacity, second = n < capacity ? 0..<0 : 0..<start
        var slope = 0.0
        let q = configuration.jitterQuantile.isNaN ? 0.97 : min(max(configuration.jitterQuantile, 0), 1)
        let index = Int((Double(n - 1) * q).rounded(.up))
        let m = min(n - index, top.count)
        var count = 0
        var smallest = Double.infinity
        transits.withUnsafeBufferPointer { transits in
            arrivals.withUnsafeBufferPointer { arrivals in
                if n >= 20 {
                    var min1 = Double.infinity, min2 = Double.infinity, t1 = 0.0, t2 = 0.0
                    var k = 0
                    for r in 0..<2 {
                        for i in r == 0 ? first : second {
                            if k < n / 2 { min1 = min(min1, transits[i]); t1 += arrivals[i] } else { min2 = min(min2, transits[i]); t2 += arrivals[i] }
                            k += 1
                        }
                    }
                    t1 /= Double(n / 2)
                    t2 /= Double(n - n / 2)
                    if t2 - t1 > rate / 10 { slope = min(max((min2 - min1) / (t2 - t1), -0.03), 0.03) }
                }
                // The minimum and the quantile of the projected transits. The quantile is the
                // m-th largest value (m small for the usual quantiles): kept in a small sorted
                // array in one pass, without sorting the window or allocating.
                top.withUnsafeMutableBufferPointer { top in
                    for r in 0..<2 {
                        for i in r == 0 ? first : second {
                            let v = transits[i] + slope * (now - arrivals[i])
                            smallest = min(smallest, v)
                            if count < m {
                                var j = count
                                while j > 0 && top[j - 1] > v { top[j] = top[j - 1]; j -= 1 }
                                top[j] = v
                                count += 1
                            } else if v > top[0] {
                                var j = 0
                                while j + 1 < m && top[j + 1] < v { top[j] = top[j + 1]; j += 1 }
                                top[j] = v
                            }
                        }
                    }
                }
            }
        }
        statistics.clockDrift = slope
        minTransit = smallest
        let low = Self.seconds(configuration.minDelay) * rate
        let high = max(low, Self.seconds(configuration.maxDelay) * rate)
        if transitCount >= configuration.minimumHistory {
            // top[0] is the m-th largest: the value at `index` in sorted order.
            let spread = top[0] - minTransit
            targetSamples = min(max(spread, low), high)
        } else {
            targetSamples = min(max(Self.seconds(configuration.initialDelay) * rate, low), high)
        }
        statistics.targetDelay = duration(samples: targetSamples)
    }

    private func duration(samples: Double) -> Duration {
        .nanoseconds(Self.clamped((samples / rate * 1e9).rounded()))
    }

    /// A whole number as Int64, saturating instead of trapping (absurd times stay harmless).
    static func clamped(_ x: Double) -> Int64 {
        if x.isNaN { return 0 }
        return x >= 9.2e18 ? Int64(9.2e18) : x <= -9.2e18 ? Int64(-9.2e18) : Int64(x)
    }

    static func seconds(_ d: Duration) -> Double {
        let c = d.components
        return Double(c.seconds) + Double(c.attoseconds) * 1e-18
    }

    static func samples(_ d: Duration, rate: Double) -> Int64 {
        clamped((seconds(d) * rate).rounded())
    }
}
