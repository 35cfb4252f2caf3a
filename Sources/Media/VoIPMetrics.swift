import RTP

/// Burst and gap statistics of a stream's losses as RFC 3611 §4.7.2 defines them, fed one packet
/// outcome at a time in sequence order.
///
/// A burst is a longest run of packets bounded by lost or discarded packets in which fewer than
/// `gmin` consecutive packets were received; gaps are the periods between bursts. A single loss
/// with at least `gmin` received packets on both sides belongs to its gap. As the RFC assumes,
/// the stream is taken to be preceded and followed by `gmin` received packets, so a burst still
/// open at the end is counted as closed.
public struct BurstGapMetrics: Sendable, Hashable {
    /// What became of one packet.
    public enum Outcome: Sendable, Hashable {
        /// Received and played.
        case received
        /// Never received.
        case lost
        /// Received but discarded (too late or too early for the jitter buffer).
        case discarded
    }

    /// The gap threshold (RFC 3611 recommends 16).
    public let gmin: Int
    /// Packets recorded.
    public private(set) var packets = 0
    /// Packets lost.
    public private(set) var lost = 0
    /// Packets discarded.
    public private(set) var discarded = 0
    /// Bursts closed so far.
    public private(set) var bursts = 0
    private var burstPackets = 0
    private var burstLosses = 0
    private var gapPackets = 0
    private var gapLosses = 0
    // The burst candidate still open: packets from its first loss to its last, losses in it.
    private var openPackets = 0
    private var openLosses = 0
    private var received = 0  // received since the last loss

    /// A tracker with the given gap threshold.
    public init(gmin: Int = 16) {
        self.gmin = max(1, gmin)
    }

    /// Records the next packet.
    public mutating func record(_ outcome: Outcome) {
        packets += 1
        switch outcome {
        case .received:
            received += 1
            if openLosses > 0 && received == gmin { closeCandidate() }
            return
        case .lost: lost += 1
        case .discarded: discarded += 1
        }
        if openLosses > 0 && received < gmin {
            // Fewer than gmin received since the last loss: the burst goes on.
            openPackets += received + 1
            openLosses += 1
        } else {
            // The received packets before this loss belong to a gap; a new candidate starts.
            if openLosses > 0 { closeCandidate() }
            gapPackets += received
            openPackets = 1
            openLosses = 1
        }
        received = 0
    }

    private mutating func closeCandidate() {
        if openLosses == 1 {
            gapPackets += 1
            gapLosses += 1
        } else {
            bursts += 1
            burstPackets += openPackets
            burstLosses += openLosses
        }
        openPackets = 0
        openLosses = 0
        // The `received` run that closed it is counted as gap when the next loss comes (or at the end).
        gapPackets += received
        received = 0
    }

    /// The totals with the open candidate closed, as at the end of the stream.
    private var closed: (bursts: Int, burstPackets: Int, burstLosses: Int, gapPackets: Int, gapLosses: Int) {
        var copy = self
        if copy.openLosses > 0 { copy.closeCandidate() }
        return (copy.bursts, copy.burstPackets, copy.burstLosses, copy.gapPackets + copy.received, copy.gapLosses)
    }

    /// The fraction of packets lost or discarded within bursts (0 without bursts).
    public var burstDensity: Double {
        let c = closed
        return c.burstPackets > 0 ? Double(c.burstLosses) / Double(c.burstPackets) : 0
    }

    /// The fraction of packets lost or discarded within gaps.
    public var gapDensity: Double {
        let c = closed
        return c.gapPackets > 0 ? Double(c.gapLosses) / Double(c.gapPackets) : 0
    }

    /// The number of bursts, counting one still open.
    public var burstCount: Int { closed.bursts }

    /// Mean packets per burst (0 without bursts).
    public var meanBurstPackets: Double {
        let c = closed
        return c.bursts > 0 ? Double(c.burstPackets) / Double(c.bursts) : 0
    }

    /// Mean packets per gap: the gap packets over bursts + 1 gaps (before, between and after).
    public var meanGapPackets: Double {
        let c = closed
        return Double(c.gapPackets) / Double(c.bursts + 1)
    }
}

extension XRVoIPMetrics {
    /// Packet-loss concealment of the receiver configuration byte (RFC 3611 §4.7.6).
    public enum Concealment: UInt8, Sendable, Hashable {
        /// Not specified.
        case unspecified = 0
        /// Disabled.
        case disabled = 1
        /// Enhanced (e.g. Opus PLC, G.711 Appendix I).
        case enhanced = 2
        /// Standard (silence insertion or repetition).
        case standard = 3
    }

    /// A VoIP Metrics block from what the receiver measured. Rates and densities are in 1/256,
    /// durations in ms (saturated to the field); values not known are sent as "unavailable"
    /// (127 for levels, R and MOS; RERL too); Gmin from `burstGap`. The jitter-buffer fields say
    /// adaptive (JBA 3) with the current delay as nominal, the maximum seen as maximum and the
    /// configured maximum as absolute maximum.
    public init(ssrc: UInt32, burstGap: BurstGapMetrics, frameDuration: Duration, roundTripDelay: Duration?, endSystemDelay: Duration?,
                rating: Double?, mosListening: Double?, mosConversational: Double?, jitterBuffer: JitterBufferStatistics?,
                jitterBufferLimit: Duration?, concealment: Concealment = .enhanced) {
        func fraction(_ x: Double) -> UInt8 { UInt8(min(255, max(0, (x * 256).rounded(.down)))) }
        func ms(_ d: Duration) -> Double { JitterBuffer.seconds(d) * 1000 }
        func ms16(_ d: Duration?) -> UInt16 { d.map { UInt16(min(65535, max(0, ms($0).rounded()))) } ?? 0 }
        func score(_ x: Double?, _ scale: Double, _ range: ClosedRange<Double>) -> UInt8 {
            guard let x, !x.isNaN else { return 127 }
            return UInt8(min(range.upperBound, max(range.lowerBound, (x * scale).rounded())))
        }
        let total = Double(max(1, burstGap.packets))
        let frame = ms(frameDuration)
        self.init(ssrc: ssrc,
                  lossRate: fraction(Double(burstGap.lost) / total),
                  discardRate: fraction(Double(burstGap.discarded) / total),
                  burstDensity: fraction(burstGap.burstDensity),
                  gapDensity: fraction(burstGap.gapDensity),
                  burstDuration: UInt16(min(65535, (burstGap.meanBurstPackets * frame).rounded())),
                  gapDuration: UInt16(min(65535, (burstGap.meanGapPackets * frame).rounded())),
                  roundTripDelay: ms16(roundTripDelay),
                  endSystemDelay: ms16(endSystemDelay),
                  signalLevel: 127, noiseLevel: 127, residualEchoReturnLoss: 127,
                  gmin: UInt8(min(255, burstGap.gmin)),
                  rFactor: score(rating, 1, 0...100),
                  externalRFactor: 127,
                  mosLQ: score(mosListening, 10, 10...50),
                  mosCQ: score(mosConversational, 10, 10...50),
                  receiverConfiguration: concealment.rawValue << 6 | (jitterBuffer == nil ? 0 : 3 << 4),
                  jitterBufferNominal: ms16(jitterBuffer?.currentDelay),
                  jitterBufferMaximum: ms16(jitterBuffer?.maxDelay),
                  jitterBufferAbsoluteMaximum: ms16(jitterBufferLimit))
    }
}
