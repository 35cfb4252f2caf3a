#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a codec degrades the E-model's rating: the equipment impairment factor `Ie` and the
/// packet-loss robustness factor `Bpl` (ITU-T G.107 §7.5, values from G.113 Appendix I).
public struct CodecImpairment: Sendable, Hashable {
    /// The equipment impairment factor without loss.
    public var ie: Double
    /// The packet-loss robustness factor.
    public var bpl: Double

    /// Custom values.
    public init(ie: Double, bpl: Double) {
        self.ie = ie
        self.bpl = bpl
    }

    /// G.711 with packet-loss concealment (G.711 Appendix I): Ie 0, Bpl 25.1 (G.113 Table I.3).
    public static let g711WithPLC = CodecImpairment(ie: 0, bpl: 25.1)
    /// G.711 without concealment, random loss: Ie 0, Bpl 4.3 (G.113 Table I.3).
    public static let g711 = CodecImpairment(ie: 0, bpl: 4.3)

    /// Opus, for which G.113 gives no values (the project's choice, on the narrowband R scale
    /// this model uses): from 16 kbit/s on Ie 0, since Opus at those rates is rated at least
    /// equal to G.711 in listening tests and the narrowband scale tops out at G.711; below
    /// 16 kbit/s Ie 10, about the level G.113 gives other 8–12 kbit/s CELP codecs (G.729A: 11).
    /// Bpl 25.1, as G.711 with its Appendix I PLC: Opus's concealment is at least that good.
    /// In-band FEC is not a factor here: frames it recovers must not be counted as lost in the
    /// loss passed to the model.
    public static func opus(bitrate: Int) -> CodecImpairment {
        CodecImpairment(ie: bitrate >= 16000 ? 0 : 10, bpl: 25.1)
    }
}

/// The ITU-T G.107 E-model, simplified for VoIP monitoring: the default values of every
/// parameter except the one-way delay (Idd), the codec (Ie) and the packet loss (Ppl, BurstR).
///
/// `R = 93.2 − Idd(Ta) − Ie,eff + A`, where 93.2 is `Ro − Is − Id` with G.107's default values
/// (no delay, default echo and noise), `Idd` the G.107 §7.4 delay impairment for a mouth-to-ear
/// delay Ta above 100 ms, and `Ie,eff = Ie + (95 − Ie) · Ppl / (Ppl / BurstR + Bpl)` (§7.5).
/// MOS from R by G.107 Annex B: 1 below R = 0, 4.5 above R = 100, else
/// `1 + 0.035 R + R (R − 60)(100 − R) · 7·10⁻⁶`, held at 1 where that polynomial dips under 1
/// (R below about 6.5), so MOS never decreases as R grows.
public enum EModel {
    /// The rating with every parameter at its G.107 default.
    public static let defaultRating = 93.2

    /// The delay impairment Idd for a one-way (mouth-to-ear) delay (G.107 §7.4, mT = 100 ms).
    public static func delayImpairment(oneWayDelay: Duration) -> Double {
        let ta = JitterBuffer.seconds(oneWayDelay) * 1000
        guard ta > 100 else { return 0 }
        let x = log10(ta / 100) / log10(2)
        return 25 * (pow(1 + pow(x, 6), 1.0 / 6) - 3 * pow(1 + pow(x / 3, 6), 1.0 / 6) + 2)
    }

    /// The effective equipment impairment for a packet loss in percent (0–100) and a burst
    /// ratio (1 for random loss, above 1 for bursty loss).
    public static func effectiveEquipmentImpairment(codec: CodecImpairment, packetLossPercent: Double, burstRatio: Double = 1) -> Double {
        let ppl = min(max(packetLossPercent, 0), 100)
        let burst = max(burstRatio, 1)
        guard ppl > 0 else { return codec.ie }
        return codec.ie + (95 - codec.ie) * ppl / (ppl / burst + codec.bpl)
    }

    /// The transmission rating R.
    public static func rating(oneWayDelay: Duration, codec: CodecImpairment, packetLossPercent: Double, burstRatio: Double = 1,
                              advantage: Double = 0) -> Double {
        defaultRating - delayImpairment(oneWayDelay: oneWayDelay)
            - effectiveEquipmentImpairment(codec: codec, packetLossPercent: packetLossPercent, burstRatio: burstRatio) + advantage
    }

    /// MOS (conversational quality, 1–4.5) from R (G.107 Annex B).
    public static func mos(rating r: Double) -> Double {
        if r <= 0 { return 1 }
        if r >= 100 { return 4.5 }
        return max(1, 1 + 0.035 * r + r * (r - 60) * (100 - r) * 7e-6)
    }

    /// MOS for the given conditions.
    public static func mos(oneWayDelay: Duration, codec: CodecImpairment, packetLossPercent: Double, burstRatio: Double = 1) -> Double {
        mos(rating: rating(oneWayDelay: oneWayDelay, codec: codec, packetLossPercent: packetLossPercent, burstRatio: burstRatio))
    }

    /// The burst ratio of a two-state (Gilbert) loss model: `p` the probability of losing a
    /// packet after a received one, `q` of receiving one after a lost one (G.107 §7.5:
    /// BurstR = 1 / (p + q)); 1 when either is 0.
    public static func burstRatio(p: Double, q: Double) -> Double {
        guard p > 0, q > 0 else { return 1 }
        return max(1, 1 / (p + q))
    }

    /// The burst ratio estimated from a loss pattern (`true` = lost), by counting the Gilbert
    /// model's transitions.
    public static func burstRatio(lossPattern: [Bool]) -> Double {
        var received = 0, receivedThenLost = 0, lost = 0, lostThenReceived = 0
        for (a, b) in zip(lossPattern, lossPattern.dropFirst()) {
            if a { lost += 1; if !b { lostThenReceived += 1 } } else { received += 1; if b { receivedThenLost += 1 } }
        }
        guard received > 0, lost > 0 else { return 1 }
        return burstRatio(p: Double(receivedThenLost) / Double(received), q: Double(lostThenReceived) / Double(lost))
    }

    /// A mouth-to-ear delay estimate: half the round trip (network), the jitter buffer's
    /// delay, one packet of packetization, and the codec's look-ahead.
    public static func oneWayDelay(roundTrip: Duration, jitterBuffer: Duration, packetization: Duration, codecLookahead: Duration = .zero) -> Duration {
        roundTrip / 2 + jitterBuffer + packetization + codecLookahead
    }
}

/// A snapshot of one call's media statistics, as `stats()` returns it.
public struct CallStatistics: Sendable, Hashable {
    /// Packet and byte counts of one direction.
    public struct Direction: Sendable, Hashable {
        /// RTP packets.
        public var packets: UInt64
        /// RTP payload bytes.
        public var bytes: UInt64
        /// Counts.
        public init(packets: UInt64 = 0, bytes: UInt64 = 0) {
            self.packets = packets
            self.bytes = bytes
        }
    }

    /// What was sent.
    public var sent: Direction
    /// What was received.
    public var received: Direction
    /// Packets lost on the way in (RFC 3550 cumulative count; duplicates can make it negative).
    public var packetsLost: Int64
    /// The fraction lost on the way in over the last interval (0–1).
    public var fractionLost: Double
    /// The fraction the peer reports lost on the way out (0–1), from its last report.
    public var remoteFractionLost: Double?
    /// Interarrival jitter of the incoming stream (RFC 3550 §6.4.1).
    public var jitter: Duration
    /// The round-trip time from RTCP (RFC 3550 §6.4.1), when known.
    public var roundTripTime: Duration?
    /// The codec in use, as in SDP (`PCMU/8000`, `opus/48000/2`).
    public var codec: String
    /// The estimated MOS (G.107), when computed.
    public var mos: Double?
    /// The jitter buffer's counters, when there is one.
    public var jitterBuffer: JitterBufferStatistics?

    /// A snapshot.
    public init(sent: Direction = Direction(), received: Direction = Direction(), packetsLost: Int64 = 0, fractionLost: Double = 0,
                remoteFractionLost: Double? = nil, jitter: Duration = .zero, roundTripTime: Duration? = nil, codec: String = "",
                mos: Double? = nil, jitterBuffer: JitterBufferStatistics? = nil) {
        self.sent = sent
        self.received = received
        self.packetsLost = packetsLost
        self.fractionLost = fractionLost
        self.remoteFractionLost = remoteFractionLost
        self.jitter = jitter
        self.roundTripTime = roundTripTime
        self.codec = codec
        self.mos = mos
        self.jitterBuffer = jitterBuffer
    }

    /// The MOS for these figures: loss is the larger of the interval's fraction lost and the
    /// jitter buffer's late-and-lost share; delay is half the RTT (0 when unknown) plus the
    /// jitter buffer's current delay and one `packetization` interval.
    public func estimatedMOS(codec impairment: CodecImpairment, packetization: Duration = .milliseconds(20), burstRatio: Double = 1) -> Double {
        var loss = fractionLost
        if let jb = jitterBuffer, jb.received > 0 {
            loss = max(loss, Double(jb.late + jb.lost) / Double(jb.received + jb.lost))
        }
        let delay = EModel.oneWayDelay(roundTrip: roundTripTime ?? .zero, jitterBuffer: jitterBuffer?.currentDelay ?? .zero, packetization: packetization)
        return EModel.mos(oneWayDelay: delay, codec: impairment, packetLossPercent: loss * 100, burstRatio: burstRatio)
    }
}

extension QualitySample {
    /// The sample for the interval between two snapshots of the same call: loss is the share of
    /// the packets expected in the interval that did not arrive (`Δlost / (Δreceived + Δlost)`,
    /// 0 when nothing was expected), jitter and RTT are the current snapshot's, MOS its
    /// ``CallStatistics/estimatedMOS(codec:packetization:burstRatio:)`` with that interval loss.
    public init(from previous: CallStatistics, to current: CallStatistics, codec: CodecImpairment, packetization: Duration = .milliseconds(20),
                audioInputLevel: Double? = nil, muted: Bool = false) {
        let lost = max(0, current.packetsLost - previous.packetsLost)
        let received = current.received.packets >= previous.received.packets ? Int64(current.received.packets - previous.received.packets) : 0
        let expected = received + lost
        let loss = expected > 0 ? Double(lost) / Double(expected) : 0
        var interval = current
        interval.fractionLost = loss
        interval.jitterBuffer = nil
        self.init(jitter: current.jitter, roundTripTime: current.roundTripTime, packetLoss: loss,
                  mos: interval.estimatedMOS(codec: codec, packetization: packetization), audioInputLevel: audioInputLevel, muted: muted)
    }
}

/// Call-quality warnings, as the mobile voice SDKs raise them.
public enum QualityWarning: String, Sendable, Hashable, CaseIterable {
    /// Jitter over the threshold (30 ms) in 3 of the last 5 samples.
    case highJitter
    /// MOS under the threshold (3.5) in 3 of the last 5 samples.
    case lowMOS
    /// Packet loss averaging over 3% across the last 7 samples (cleared at or below 1%).
    case highPacketLoss
    /// Round-trip time over the threshold (400 ms) in 3 of the last 5 samples.
    case highRTT
    /// The audio input level has stayed constant while not muted (a dead or stuck microphone).
    case constantAudioInputLevel
}

/// A change of a warning's state.
public enum QualityEvent: Sendable, Hashable {
    /// The warning starts.
    case raised(QualityWarning)
    /// The warning ends.
    case cleared(QualityWarning)
}

/// One measurement interval (typically one second). A `nil` field was not measured in this
/// interval and leaves that warning's history unchanged.
public struct QualitySample: Sendable, Hashable {
    /// Interarrival jitter.
    public var jitter: Duration?
    /// Round-trip time.
    public var roundTripTime: Duration?
    /// Packet loss in the interval, as a fraction (0–1).
    public var packetLoss: Double?
    /// Estimated MOS.
    public var mos: Double?
    /// The microphone's level over the interval, in dBFS (`-infinity` for digital silence).
    public var audioInputLevel: Double?
    /// Whether the microphone is muted.
    public var muted: Bool

    /// A sample.
    public init(jitter: Duration? = nil, roundTripTime: Duration? = nil, packetLoss: Double? = nil, mos: Double? = nil,
                audioInputLevel: Double? = nil, muted: Bool = false) {
        self.jitter = jitter
        self.roundTripTime = roundTripTime
        self.packetLoss = packetLoss
        self.mos = mos
        self.audioInputLevel = audioInputLevel
        self.muted = muted
    }
}

/// Raises and clears ``QualityWarning``s from one ``QualitySample`` per interval, each
/// transition reported exactly once.
///
/// Rules (thresholds in ``Thresholds``):
/// - jitter, MOS, RTT: raised when 3 of the last 5 measured samples are bad; cleared when at
///   most 1 of the last 5 is (four good in five), so that an alternating pattern does not flap;
/// - packet loss: the mean of the last 7 measured samples; raised above 3% (only once 7
///   samples exist, so a single bad first second does not raise it), cleared at or below 1%;
/// - constant input level: raised when the last 10 unmuted samples all lie within 1 dB of each
///   other (levels below −120 dBFS count as −120); cleared when the last 10 spread over more
///   than 3 dB; muting clears it and restarts the history.
///
/// ``Thresholds/twilio`` gives Twilio Voice's published rules instead: a jitter, MOS or RTT
/// warning clears only when all of the last 5 samples are good (strictly below 30 ms, above 3.5,
/// below 400 ms), and the constant-level rule takes the standard deviation of the last 10
/// input levels on the linear 0…32767 scale (raised at or below 1 % of full scale, cleared
/// above 3 %).
public struct QualityMonitor: Sendable {
    /// The thresholds in force.
    public struct Thresholds: Sendable, Hashable {
        /// Jitter above this is bad.
        public var jitter: Duration = .milliseconds(30)
        /// MOS below this is bad.
        public var mos: Double = 3.5
        /// RTT above this is bad.
        public var roundTripTime: Duration = .milliseconds(400)
        /// Mean loss above this raises the loss warning.
        public var lossRaise: Double = 0.03
        /// Mean loss at or below this clears it.
        public var lossClear: Double = 0.01
        /// Samples looked at by the 3-of-5 rules.
        public var window = 5
        /// Bad samples in the window that raise.
        public var raiseCount = 3
        /// Bad samples in the window at or below which the warning clears.
        public var clearCount = 1
        /// Samples averaged by the loss rule.
        public var lossWindow = 7
        /// Unmuted samples looked at by the constant-level rule.
        public var levelWindow = 10
        /// A level spread at or below this (dB) over the window raises.
        public var constantLevelSpread = 1.0
        /// A level spread above this (dB) over the window clears.
        public var varyingLevelSpread = 3.0
        /// How a jitter, MOS or RTT warning clears.
        public var clearing = Clearing.fewBad
        /// How the constant-level rule measures the input level's variation.
        public var levelRule = LevelRule.spreadDecibels
        /// The defaults above.
        public init() {}

        /// How a jitter, MOS or RTT warning clears.
        public enum Clearing: Sendable, Hashable {
            /// At most ``clearCount`` bad samples in the window (anti-flap).
            case fewBad
            /// The window is full and every sample in it is good, strictly on the good side of
            /// the threshold (Twilio's rule).
            case allGood
        }

        /// How the constant-level rule measures variation over ``levelWindow`` samples.
        public enum LevelRule: Sendable, Hashable {
            /// The spread in dB against ``constantLevelSpread`` and ``varyingLevelSpread``.
            case spreadDecibels
            /// The standard deviation of the levels on the linear 0…32767 scale: raised at or
            /// below `raise`, cleared above `clear`.
            case linearStandardDeviation(raise: Double, clear: Double)
        }

        /// Twilio Voice's rules: jitter > 30 ms, MOS < 3.5 or RTT > 400 ms in 3 of the last 5
        /// samples raises, all 5 good clears; mean loss over the last 7 above 3 % raises, at or
        /// below 1 % clears; the input level's standard deviation over the last 10 at or below
        /// 1 % of 32767 raises (unmuted), above 3 % clears.
        public static var twilio: Thresholds {
            var t = Thresholds()
            t.clearing = .allGood
            t.levelRule = .linearStandardDeviation(raise: 327.67, clear: 983.01)
            return t
        }
    }

    /// The thresholds in force.
    public let thresholds: Thresholds
    /// The warnings currently raised.
    public private(set) var active: Set<QualityWarning> = []
    /// Per rule, the last samples: bad (past the threshold) and good (strictly inside it).
    private var jitterBad: [(bad: Bool, good: Bool)] = []
    private var mosBad: [(bad: Bool, good: Bool)] = []
    private var rttBad: [(bad: Bool, good: Bool)] = []
    private var losses: [Double] = []
    private var levels: [Double] = []

    /// A monitor with the given thresholds.
    public init(thresholds: Thresholds = Thresholds()) {
        self.thresholds = thresholds
    }

    /// Takes one interval's sample; returns the warnings raised and cleared by it.
    public mutating func add(_ sample: QualitySample) -> [QualityEvent] {
        let t = thresholds
        var events: [QualityEvent] = []
        /// The rule's verdict after this sample: true raises, false clears, nil leaves it.
        func push(_ history: inout [(bad: Bool, good: Bool)], _ sample: (bad: Bool, good: Bool)?) -> Bool? {
            guard let sample else { return nil }
            history.append(sample)
            if history.count > t.window { history.removeFirst(history.count - t.window) }
            if history.count(where: \.bad) >= t.raiseCount { return true }
            switch t.clearing {
            case .fewBad: return history.count(where: \.bad) <= t.clearCount ? false : nil
            case .allGood: return history.count == t.window && history.allSatisfy(\.good) ? false : nil
            }
        }
        let verdicts: [(Bool?, QualityWarning)] = [
            (push(&jitterBad, sample.jitter.map { ($0 > t.jitter, $0 < t.jitter) }), .highJitter),
            (push(&mosBad, sample.mos.map { ($0 < t.mos, $0 > t.mos) }), .lowMOS),
            (push(&rttBad, sample.roundTripTime.map { ($0 > t.roundTripTime, $0 < t.roundTripTime) }), .highRTT),
        ]
        for case let (raise?, warning) in verdicts { set(warning, raise, &events) }

        if let loss = sample.packetLoss {
            losses.append(min(max(loss, 0), 1))
            if losses.count > t.lossWindow { losses.removeFirst(losses.count - t.lossWindow) }
            let mean = losses.reduce(0, +) / Double(losses.count)
            if losses.count >= t.lossWindow && mean > t.lossRaise { set(.highPacketLoss, true, &events) } else if mean <= t.lossClear { set(.highPacketLoss, false, &events) }
        }

        if sample.muted {
            levels.removeAll()
            set(.constantAudioInputLevel, false, &events)
        } else if let level = sample.audioInputLevel {
            levels.append(max(level, -120))
            if levels.count > t.levelWindow { levels.removeFirst(levels.count - t.levelWindow) }
            if levels.count == t.levelWindow {
                switch t.levelRule {
                case .spreadDecibels:
                    let spread = levels.max()! - levels.min()!
                    if spread <= t.constantLevelSpread { set(.constantAudioInputLevel, true, &events) } else if spread > t.varyingLevelSpread { set(.constantAudioInputLevel, false, &events) }
                case .linearStandardDeviation(let raise, let clear):
                    let linear = levels.map { 32767 * pow(10, $0 / 20) }
                    let mean = linear.reduce(0, +) / Double(linear.count)
                    let deviation = (linear.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(linear.count)).squareRoot()
                    if deviation <= raise { set(.constantAudioInputLevel, true, &events) } else if deviation > clear { set(.constantAudioInputLevel, false, &events) }
                }
            }
        }
        return events
    }

    private mutating func set(_ warning: QualityWarning, _ on: Bool, _ events: inout [QualityEvent]) {
        if on, !active.contains(warning) {
            active.insert(warning)
            events.append(.raised(warning))
        } else if !on, active.contains(warning) {
            active.remove(warning)
            events.append(.cleared(warning))
        }
    }
}
