/// Reception statistics for one synchronization source (RFC 3550 A.1, A.3, A.8).
///
/// Feed every packet of the source to `update(sequence:)` and, for packets that count,
/// `updateJitter(timestamp:arrival:)`. Times are passed in, never read.
public struct SourceState: Sendable, Hashable {
    /// RFC 3550 A.1 `MAX_DROPOUT`.
    public static let maxDropout: UInt16 = 3000
    /// RFC 3550 A.1 `MAX_MISORDER`.
    public static let maxMisorder: UInt16 = 100
    /// RFC 3550 A.1 `MIN_SEQUENTIAL`: packets in sequence before a new source is valid.
    public static let defaultMinSequential = 2

    private static let seqMod: UInt32 = 1 << 16

    /// The source's SSRC.
    public let ssrc: UInt32
    /// Highest sequence number seen (A.1 `max_seq`).
    public private(set) var maxSeq: UInt16
    /// Number of sequence number wrap-arounds (A.1 `cycles` divided by 2^16).
    public private(set) var cycles: UInt32
    /// The first sequence number counted (A.1 `base_seq`).
    public private(set) var baseSeq: UInt32
    /// The last "bad" sequence number plus one (A.1 `bad_seq`); 2^16 + 1 when none.
    public private(set) var badSeq: UInt32
    /// Sequential packets still needed before the source is valid (A.1 `probation`).
    public private(set) var probation: Int
    /// Packets received and counted (A.1 `received`).
    public private(set) var received: UInt32
    private var expectedPrior: UInt32
    private var receivedPrior: UInt32
    private var transit: Int32?
    private let minSequential: Int
    /// Interarrival jitter scaled by 16, in timestamp units (A.8 integer form).
    public private(set) var scaledJitter: UInt32

    /// Starts tracking a source first heard with `sequence` (A.1: `init_seq`, `max_seq = seq - 1`,
    /// `probation = MIN_SEQUENTIAL`). Call `update(sequence:)` for that first packet too.
    public init(ssrc: UInt32, firstSequence sequence: UInt16, minSequential: Int = SourceState.defaultMinSequential) {
        self.ssrc = ssrc
        maxSeq = sequence
        cycles = 0
        baseSeq = UInt32(sequence)
        badSeq = Self.seqMod + 1
        probation = max(0, minSequential)
        received = 0
        expectedPrior = 0
        receivedPrior = 0
        transit = nil
        scaledJitter = 0
        self.minSequential = max(1, minSequential)
        maxSeq = sequence &- 1
    }

    private mutating func initSeq(_ seq: UInt16) {
        baseSeq = UInt32(seq)
        maxSeq = seq
        badSeq = Self.seqMod + 1
        cycles = 0
        received = 0
        receivedPrior = 0
        expectedPrior = 0
    }

    /// Whether the source is out of probation.
    public var isValid: Bool { probation == 0 }

    /// RFC 3550 A.1 `update_seq`: returns true when the packet counts (valid source, in range).
    /// A false return during probation or after a large jump means "do not use this packet";
    /// two sequential packets after a large jump restart the statistics (the source restarted).
    @discardableResult
    public mutating func update(sequence seq: UInt16) -> Bool {
        let udelta = seq &- maxSeq
        if probation > 0 {
            if seq == maxSeq &+ 1 {
                probation -= 1
                maxSeq = seq
                if probation == 0 {
                    initSeq(seq)
                    received += 1
                    return true
                }
            } else {
                probation = minSequential - 1
                maxSeq = seq
            }
            return false
        } else if udelta < Self.maxDropout {
            if seq < maxSeq { cycles &+= 1 }
            maxSeq = seq
        } else if UInt32(udelta) <= Self.seqMod - UInt32(Self.maxMisorder) {
            if UInt32(seq) == badSeq {
                initSeq(seq)
            } else {
                badSeq = (UInt32(seq) + 1) & (Self.seqMod - 1)
                return false
            }
        } else {
            // duplicate or reordered packet
        }
        received &+= 1
        return true
    }

    /// The extended highest sequence number received (cycles · 2^16 + max_seq).
    public var extendedHighestSequence: UInt32 { cycles &<< 16 &+ UInt32(maxSeq) }

    /// Packets expected since the base sequence (A.3).
    public var expected: UInt32 { extendedHighestSequence &- baseSeq &+ 1 }

    /// Cumulative packets lost (A.3), clamped to the 24-bit signed range of a report block.
    public var cumulativeLost: Int32 {
        let lost = Int64(expected) - Int64(received)
        return Int32(Swift.min(Swift.max(lost, -0x80_0000), 0x7F_FFFF))
    }

    /// Interarrival jitter in timestamp units, as reported (A.8 `jitter >> 4`).
    public var jitter: UInt32 { scaledJitter >> 4 }

    /// Fraction lost since the previous call (A.3), as the 8-bit fixed-point value of a report
    /// block, and starts a new interval.
    public mutating func closeInterval() -> UInt8 {
        let exp = expected
        let expectedInterval = exp &- expectedPrior
        expectedPrior = exp
        let receivedInterval = received &- receivedPrior
        receivedPrior = received
        let lostInterval = Int64(expectedInterval) - Int64(receivedInterval)
        guard expectedInterval != 0, lostInterval > 0 else { return 0 }
        return UInt8(truncatingIfNeeded: (lostInterval << 8) / Int64(expectedInterval))
    }

    /// Builds a report block for this source and closes the interval (see `closeInterval()`).
    /// `lastSR` is the middle 32 bits of the NTP timestamp of the last SR from this source (0 if
    /// none), and `delaySinceLastSR` the delay since it arrived, in 1/65536 s (0 if none).
    public mutating func makeReportBlock(lastSR: UInt32 = 0, delaySinceLastSR: UInt32 = 0) -> RTCPReportBlock {
        let fraction = closeInterval()
        return RTCPReportBlock(
            ssrc: ssrc, fractionLost: fraction, cumulativeLost: cumulativeLost,
            extendedHighestSequence: extendedHighestSequence, jitter: jitter,
            lastSR: lastSR, delaySinceLastSR: delaySinceLastSR)
    }

    /// RFC 3550 §6.4.1 / A.8: updates the jitter with a packet's RTP `timestamp` and its
    /// `arrival` time expressed in the same clock units (wrapping 32-bit arithmetic).
    /// The first call only records the transit time.
    public mutating func updateJitter(timestamp: UInt32, arrival: UInt32) {
        let t = Int32(bitPattern: arrival &- timestamp)
        guard let previous = transit else {
            transit = t
            return
        }
        transit = t
        let d = (t &- previous).magnitude
        scaledJitter = scaledJitter &+ d &- ((scaledJitter &+ 8) >> 4)
    }

    /// Like `updateJitter(timestamp:arrival:)`, with the arrival time as a duration since any
    /// fixed origin, converted to timestamp units at `clockRate` Hz.
    public mutating func updateJitter(timestamp: UInt32, arrival: Duration, clockRate: Int) {
        updateJitter(timestamp: timestamp, arrival: Self.timestampUnits(arrival, clockRate: clockRate))
    }

    /// Converts a duration to RTP timestamp units at `clockRate` Hz (truncated, wrapping mod 2^32).
    public static func timestampUnits(_ d: Duration, clockRate: Int) -> UInt32 {
        let c = d.components
        let rate = Int64(clockRate)
        let whole = c.seconds &* rate
        let nanos = c.attoseconds / 1_000_000_000
        let part = nanos * rate / 1_000_000_000
        return UInt32(truncatingIfNeeded: whole &+ part)
    }
}

/// What `SSRCTable.observe(ssrc:from:)` found about a packet's source.
public enum SSRCObservation<Address: Hashable & Sendable>: Sendable, Hashable {
    /// A source not seen before.
    case new
    /// A known source from its usual address.
    case known
    /// A known source from a different address: a third-party collision or a loop (RFC 3550 §8.2).
    case addressChanged(previous: Address)
    /// A packet carrying our own SSRC from another address: a collision with us (§8.2).
    case collisionWithOwnSSRC
}

/// Remembers which transport address each SSRC comes from, to detect SSRC collisions and
/// changes (RFC 3550 §8.2). Generic over the caller's address type; no I/O.
public struct SSRCTable<Address: Hashable & Sendable>: Sendable {
    /// Our own SSRCs (sending), with the address we send from.
    public var ownSSRCs: [UInt32: Address]
    private var sources: [UInt32: Address] = [:]

    /// Creates a table knowing our own SSRCs.
    public init(ownSSRCs: [UInt32: Address] = [:]) {
        self.ownSSRCs = ownSSRCs
    }

    /// Records a packet from `ssrc` arriving from `address` and classifies it. A changed address
    /// is reported but not adopted; call `forget(ssrc:)` to accept the new address.
    public mutating func observe(ssrc: UInt32, from address: Address) -> SSRCObservation<Address> {
        if let own = ownSSRCs[ssrc], own != address { return .collisionWithOwnSSRC }
        if let known = sources[ssrc] {
            return known == address ? .known : .addressChanged(previous: known)
        }
        sources[ssrc] = address
        return .new
    }

    /// Forgets a source (after BYE, timeout, or to accept its new address).
    public mutating func forget(ssrc: UInt32) {
        sources[ssrc] = nil
    }

    /// The number of sources heard.
    public var count: Int { sources.count }
}
