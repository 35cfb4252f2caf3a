/// The VoIP Metrics report block of RFC 3611 §4.7 (block type 7), every field as on the wire.
///
/// Values 127 (signal/noise level) and 127 (R factors, MOS) or 0xFF mean "unavailable"
/// per RFC 3611; they are stored as received.
public struct XRVoIPMetrics: Sendable, Hashable {
    /// The block type number.
    public static let blockType: UInt8 = 7

    /// The RTP source reported on.
    public var ssrc: UInt32
    /// Fraction of packets lost since the start, in 1/256.
    public var lossRate: UInt8
    /// Fraction of packets discarded (late or early), in 1/256.
    public var discardRate: UInt8
    /// Fraction lost or discarded within bursts, in 1/256.
    public var burstDensity: UInt8
    /// Fraction lost or discarded within gaps, in 1/256.
    public var gapDensity: UInt8
    /// Mean burst duration, ms.
    public var burstDuration: UInt16
    /// Mean gap duration, ms.
    public var gapDuration: UInt16
    /// Most recent round-trip delay, ms.
    public var roundTripDelay: UInt16
    /// Most recent end-system delay, ms.
    public var endSystemDelay: UInt16
    /// Signal level, dBm0 (signed; 127 = unavailable).
    public var signalLevel: Int8
    /// Noise level, dBm0 (signed; 127 = unavailable).
    public var noiseLevel: Int8
    /// Residual echo return loss, dB (127 = unavailable).
    public var residualEchoReturnLoss: UInt8
    /// Gap threshold Gmin (RFC 3611 recommends 16).
    public var gmin: UInt8
    /// R factor, 0–100 (127 = unavailable).
    public var rFactor: UInt8
    /// External R factor, 0–100 (127 = unavailable).
    public var externalRFactor: UInt8
    /// MOS-LQ × 10, 10–50 (127 = unavailable).
    public var mosLQ: UInt8
    /// MOS-CQ × 10, 10–50 (127 = unavailable).
    public var mosCQ: UInt8
    /// Receiver configuration byte (PLC 2 bits, JBA 2 bits, JB rate 4 bits).
    public var receiverConfiguration: UInt8
    /// Jitter buffer nominal delay, ms.
    public var jitterBufferNominal: UInt16
    /// Jitter buffer maximum delay, ms.
    public var jitterBufferMaximum: UInt16
    /// Jitter buffer absolute maximum delay, ms.
    public var jitterBufferAbsoluteMaximum: UInt16

    /// Creates a block; every field defaults to zero.
    public init(
        ssrc: UInt32, lossRate: UInt8 = 0, discardRate: UInt8 = 0, burstDensity: UInt8 = 0,
        gapDensity: UInt8 = 0, burstDuration: UInt16 = 0, gapDuration: UInt16 = 0,
        roundTripDelay: UInt16 = 0, endSystemDelay: UInt16 = 0, signalLevel: Int8 = 0,
        noiseLevel: Int8 = 0, residualEchoReturnLoss: UInt8 = 0, gmin: UInt8 = 0, rFactor: UInt8 = 0,
        externalRFactor: UInt8 = 0, mosLQ: UInt8 = 0, mosCQ: UInt8 = 0, receiverConfiguration: UInt8 = 0,
        jitterBufferNominal: UInt16 = 0, jitterBufferMaximum: UInt16 = 0,
        jitterBufferAbsoluteMaximum: UInt16 = 0
    ) {
        self.ssrc = ssrc
        self.lossRate = lossRate
        self.discardRate = discardRate
        self.burstDensity = burstDensity
        self.gapDensity = gapDensity
        self.burstDuration = burstDuration
        self.gapDuration = gapDuration
        self.roundTripDelay = roundTripDelay
        self.endSystemDelay = endSystemDelay
        self.signalLevel = signalLevel
        self.noiseLevel = noiseLevel
        self.residualEchoReturnLoss = residualEchoReturnLoss
        self.gmin = gmin
        self.rFactor = rFactor
        self.externalRFactor = externalRFactor
        self.mosLQ = mosLQ
        self.mosCQ = mosCQ
        self.receiverConfiguration = receiverConfiguration
        self.jitterBufferNominal = jitterBufferNominal
        self.jitterBufferMaximum = jitterBufferMaximum
        self.jitterBufferAbsoluteMaximum = jitterBufferAbsoluteMaximum
    }

    /// Size of the block body after its 4-byte header.
    static let bodySize = 32

    init(_ b: ArraySlice<UInt8>, at i: Int) {
        ssrc = b.be32(i)
        lossRate = b[i + 4]
        discardRate = b[i + 5]
        burstDensity = b[i + 6]
        gapDensity = b[i + 7]
        burstDuration = b.be16(i + 8)
        gapDuration = b.be16(i + 10)
        roundTripDelay = b.be16(i + 12)
        endSystemDelay = b.be16(i + 14)
        signalLevel = Int8(bitPattern: b[i + 16])
        noiseLevel = Int8(bitPattern: b[i + 17])
        residualEchoReturnLoss = b[i + 18]
        gmin = b[i + 19]
        rFactor = b[i + 20]
        externalRFactor = b[i + 21]
        mosLQ = b[i + 22]
        mosCQ = b[i + 23]
        receiverConfiguration = b[i + 24]
        // b[i + 25] is reserved
        jitterBufferNominal = b.be16(i + 26)
        jitterBufferMaximum = b.be16(i + 28)
        jitterBufferAbsoluteMaximum = b.be16(i + 30)
    }

    func write(to out: inout [UInt8]) {
        out.appendBE32(ssrc)
        out += [lossRate, discardRate, burstDensity, gapDensity]
        out.appendBE16(burstDuration)
        out.appendBE16(gapDuration)
        out.appendBE16(roundTripDelay)
        out.appendBE16(endSystemDelay)
        out += [UInt8(bitPattern: signalLevel), UInt8(bitPattern: noiseLevel), residualEchoReturnLoss, gmin]
        out += [rFactor, externalRFactor, mosLQ, mosCQ]
        out += [receiverConfiguration, 0]
        out.appendBE16(jitterBufferNominal)
        out.appendBE16(jitterBufferMaximum)
        out.appendBE16(jitterBufferAbsoluteMaximum)
    }
}

/// One XR report block (RFC 3611 §3).
public enum XRBlock: Sendable, Hashable {
    /// VoIP Metrics (block type 7).
    case voipMetrics(XRVoIPMetrics)
    /// Any other block type, kept raw: the type-specific byte and the content after the header
    /// (a multiple of 4 bytes).
    case unknown(blockType: UInt8, typeSpecific: UInt8, content: [UInt8])
}

/// An extended report packet (RFC 3611, PT 207).
public struct RTCPExtendedReport: Sendable, Hashable {
    /// The reporter's SSRC.
    public var ssrc: UInt32
    /// The report blocks.
    public var blocks: [XRBlock]

    /// Creates an XR packet.
    public init(ssrc: UInt32, blocks: [XRBlock]) {
        self.ssrc = ssrc
        self.blocks = blocks
    }

    /// The first VoIP Metrics block, if any.
    public var voipMetrics: XRVoIPMetrics? {
        for case .voipMetrics(let m) in blocks { return m }
        return nil
    }
}
