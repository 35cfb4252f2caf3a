/// ITU-T G.711 companding, µ-law and A-law, computed from the segment structure of the
/// Recommendation (no tables are copied; tables generated at first use from these rules serve the
/// buffer paths: 256 entries per law to decode, 16,384 (µ-law) and 8,192 (A-law) to encode).
///
/// Linear samples are 16-bit. The µ-law quantizer works on the 14 most significant bits and the
/// A-law one on the 13 most significant bits, as G.711 defines them; the low bits are dropped
/// by an arithmetic shift (rounding towards −∞) before the magnitude is taken, which is the
/// behaviour of the classic reference implementations (and of Python's `audioop`).
public enum G711 {
    /// The two laws.
    public enum Law: Hashable, Sendable {
        /// µ-law (North America, Japan), RTP `PCMU`.
        case muLaw
        /// A-law (elsewhere), RTP `PCMA`.
        case aLaw

        /// `PCMU/8000` or `PCMA/8000`.
        public var codecDescription: AudioCodecDescription { self == .muLaw ? .pcmu : .pcma }
    }

    // MARK: µ-law

    /// Encodes one linear sample to a µ-law code.
    ///
    /// The 14-bit magnitude plus the bias 33 is placed in one of eight segments (the segment is
    /// the position of its highest set bit, minus 5); the four bits below that bit are the
    /// step within the segment. The code is sent inverted (G.711 §4: all bits complemented).
    @inlinable
    public static func muLawEncode(_ sample: Int16) -> UInt8 {
        var value = Int32(sample) >> 2
        let mask: UInt8
        if value < 0 {
            value = -value
            mask = 0x7F
        } else {
            mask = 0xFF
        }
        value = min(value, 8159) + 33  // 8159 + 33 = 0x2000 - 0: the top of segment 7
        // value is in 33...8192; its highest bit is bit 5 (segment 0) … bit 12 (segment 7),
        // and 8192 (bit 13) only for the clipped maximum.
        let highest = 31 - Int32(UInt32(value).leadingZeroBitCount)
        let segment = highest - 5
        if segment >= 8 { return 0x7F ^ mask }
        let step = (value >> (segment + 1)) & 0x0F
        return UInt8(truncatingIfNeeded: (segment << 4) | step) ^ mask
    }

    /// Decodes one µ-law code to a linear sample (range ±32124).
    @inlinable
    public static func muLawDecode(_ code: UInt8) -> Int16 { muLawTable[Int(code)] }

    /// The µ-law decoder: the midpoint of each code's interval, scaled to 16 bits.
    @usableFromInline
    nonisolated(unsafe) static let muLawTable = table(256) { muLawDecodeComputed(UInt8($0)) }

    /// The decoding rule itself: (2·step + 33) · 2^segment − 33 in 14-bit units, times 4.
    static func muLawDecodeComputed(_ code: UInt8) -> Int16 {
        let bits = ~code
        let segment = Int32((bits >> 4) & 0x07)
        let step = Int32(bits & 0x0F)
        let magnitude = (((step << 1) + 33) << segment) - 33  // 14-bit units
        let linear = magnitude << 2
        return Int16(bits & 0x80 != 0 ? -linear : linear)
    }

    // MARK: A-law

    /// Encodes one linear sample to an A-law code.
    ///
    /// The 13-bit magnitude is placed in one of eight segments: segment 0 and 1 share the step
    /// size of 2 (16 steps each over 0–31 and 32–63), segment s ≥ 1 covers 2^(s+4)…2^(s+5)−1.
    /// Even bits are inverted on the line (G.711 §3: XOR 0x55); the sign bit is 1 for positive.
    @inlinable
    public static func aLawEncode(_ sample: Int16) -> UInt8 {
        var value = Int32(sample) >> 3
        let mask: UInt8
        if value >= 0 {
            mask = 0xD5
        } else {
            mask = 0x55
            value = -value - 1
        }
        if value > 0xFFF { return 0x7F ^ mask }
        let segment: Int32
        let step: Int32
        if value < 32 {
            segment = 0
            step = (value >> 1) & 0x0F
        } else {
            let highest = 31 - Int32(UInt32(value).leadingZeroBitCount)  // 5...11
            segment = highest - 4
            step = (value >> segment) & 0x0F
        }
        return UInt8(truncatingIfNeeded: (segment << 4) | step) ^ mask
    }

    /// Decodes one A-law code to a linear sample (range ±32256).
    @inlinable
    public static func aLawDecode(_ code: UInt8) -> Int16 { aLawTable[Int(code)] }

    @usableFromInline
    nonisolated(unsafe) static let aLawTable = table(256) { aLawDecodeComputed(UInt8($0)) }

    /// The decoding rule: the midpoint of the code's interval, in 13-bit units times 8.
    static func aLawDecodeComputed(_ code: UInt8) -> Int16 {
        let bits = code ^ 0x55
        let segment = Int32((bits >> 4) & 0x07)
        let step = Int32(bits & 0x0F)
        var magnitude = (step << 4) + 8  // 16-bit units: step·16 + half a step
        if segment >= 1 { magnitude = (magnitude + 0x100) << (segment - 1) }
        return Int16(bits & 0x80 != 0 ? magnitude : -magnitude)
    }

    // MARK: Buffers

    /// Encodes `pcm` into `codes`, as many samples as both hold; returns that count.
    @inlinable
    @discardableResult
    public static func encode(_ law: Law, _ pcm: UnsafeBufferPointer<Int16>, into codes: UnsafeMutableRawBufferPointer) -> Int {
        let count = min(pcm.count, codes.count)
        // A code depends only on the sample's top 14 (µ-law) or 13 (A-law) bits: one table
        // load per sample instead of the segment search.
        let shift = law == .muLaw ? 2 : 3
        let table = law == .muLaw ? muLawEncodeTable : aLawEncodeTable
        let offset = law == .muLaw ? 8192 : 4096
        for i in 0..<count { codes[i] = table[(Int(pcm[i]) >> shift) + offset] }
        return count
    }

    /// µ-law codes of every 14-bit sample value (the sample's top 14 bits + 8192).
    @usableFromInline
    nonisolated(unsafe) static let muLawEncodeTable = table(16384) { muLawEncode(Int16(truncatingIfNeeded: ($0 - 8192) << 2)) }

    /// A-law codes of every 13-bit sample value (the sample's top 13 bits + 4096).
    @usableFromInline
    nonisolated(unsafe) static let aLawEncodeTable = table(8192) { aLawEncode(Int16(truncatingIfNeeded: ($0 - 4096) << 3)) }

    /// A table filled once and never freed or written again. A plain pointer, not an array: an
    /// array read from a static is retained, and two media threads retaining one array contend
    /// for its reference count's cache line on every frame.
    static func table<T>(_ count: Int, _ value: (Int) -> T) -> UnsafePointer<T> {
        let p = UnsafeMutablePointer<T>.allocate(capacity: count)
        for i in 0..<count { (p + i).initialize(to: value(i)) }
        return UnsafePointer(p)
    }

    /// The samples in a frame of `milliseconds` at 8 kHz, for an encoder or a decoder; throws
    /// ``AudioCodecError/invalidConfiguration(_:)`` outside 1…120 ms.
    static func samplesPerFrame(milliseconds: Int) throws(AudioCodecError) -> Int {
        guard (1...120).contains(milliseconds) else {
            throw .invalidConfiguration("G.711 frame of \(milliseconds) ms (1 to 120 allowed)")
        }
        return milliseconds * 8
    }

    /// Decodes `codes` into `pcm`, as many as both hold; returns that count.
    @inlinable
    @discardableResult
    public static func decode(_ law: Law, _ codes: UnsafeRawBufferPointer, into pcm: UnsafeMutableBufferPointer<Int16>) -> Int {
        let count = min(pcm.count, codes.count)
        let table = law == .muLaw ? muLawTable : aLawTable
        for i in 0..<count { pcm[i] = table[Int(codes[i])] }
        return count
    }
}

/// A G.711 encoder (`PCMU` or `PCMA`): 8 kHz mono, one code per sample. A plain value.
public struct G711Encoder: AudioEncoder, Sendable {
    /// µ-law or A-law.
    public let law: G711.Law
    /// Samples per frame; 160 (20 ms) by default. Any multiple of 8 (1 ms) from 8 to 960 (120 ms).
    public let samplesPerFrame: Int

    /// Creates an encoder for frames of `frameMilliseconds` (1 to 120).
    public init(law: G711.Law, frameMilliseconds: Int = 20) throws(AudioCodecError) {
        self.law = law
        self.samplesPerFrame = try G711.samplesPerFrame(milliseconds: frameMilliseconds)
    }

    /// `PCMU/8000` or `PCMA/8000`.
    public var codecDescription: AudioCodecDescription { law.codecDescription }
    /// 8000.
    public var sampleRate: Int { 8000 }
    /// 1.
    public var channels: Int { 1 }
    /// One byte per sample.
    public var maximumPayloadSize: Int { samplesPerFrame }

    /// Encodes any number of samples (G.711 has no frame structure), one byte each.
    public mutating func encode(_ pcm: UnsafeBufferPointer<Int16>, into payload: UnsafeMutableRawBufferPointer) throws(AudioCodecError) -> Int {
        guard payload.count >= pcm.count else { throw .bufferTooSmall(needed: pcm.count, available: payload.count) }
        G711.encode(law, pcm, into: payload)
        return pcm.count
    }
}

/// A G.711 decoder (`PCMU` or `PCMA`) with the simple concealment of ``G711Concealer``.
public struct G711Decoder: AudioDecoder, Sendable {
    /// µ-law or A-law.
    public let law: G711.Law
    /// Samples per frame, used for concealment; 160 (20 ms) by default.
    public let samplesPerFrame: Int
    /// The concealment state (the last frames decoded).
    public var concealer: G711Concealer

    /// Creates a decoder; `frameMilliseconds` is the expected packet duration.
    public init(law: G711.Law, frameMilliseconds: Int = 20) throws(AudioCodecError) {
        self.law = law
        self.samplesPerFrame = try G711.samplesPerFrame(milliseconds: frameMilliseconds)
        self.concealer = G711Concealer(sampleRate: 8000)
    }

    /// `PCMU/8000` or `PCMA/8000`.
    public var codecDescription: AudioCodecDescription { law.codecDescription }
    /// 8000.
    public var sampleRate: Int { 8000 }
    /// 1.
    public var channels: Int { 1 }
    /// 1500: a payload never exceeds an Ethernet MTU in practice; longer payloads are refused.
    public var maximumSamplesPerPayload: Int { 1500 }

    /// Decodes every byte of the payload to one sample.
    public mutating func decode(_ payload: UnsafeRawBufferPointer, into pcm: UnsafeMutableBufferPointer<Int16>) throws(AudioCodecError) -> Int {
        guard pcm.count >= payload.count else { throw .bufferTooSmall(needed: payload.count, available: pcm.count) }
        G711.decode(law, payload, into: pcm)
        concealer.record(UnsafeMutableBufferPointer(rebasing: pcm[0..<payload.count]))
        return payload.count
    }

    /// Fills `samplesPerChannel` samples with ``G711Concealer``'s concealment.
    public mutating func concealLoss(samplesPerChannel: Int, into pcm: UnsafeMutableBufferPointer<Int16>) throws(AudioCodecError) -> Int {
        guard pcm.count >= samplesPerChannel else { throw .bufferTooSmall(needed: samplesPerChannel, available: pcm.count) }
        concealer.conceal(into: UnsafeMutableBufferPointer(rebasing: pcm[0..<samplesPerChannel]))
        return samplesPerChannel
    }
}

/// A simple packet-loss concealment for codecs without their own (G.711): a lost stretch is
/// filled by repeating the last pitch-sized period of good signal, faded out linearly over
/// ``fadeMilliseconds`` (silence after that), and the first good samples after a loss are
/// cross-faded with the continued repetition so that no click is heard. Far simpler than
/// G.711 Appendix I, and enough for short losses.
public struct G711Concealer: Sendable {
    /// The sample rate of the signal.
    public let sampleRate: Int
    /// How long the repetition lasts before silence (60 ms by default).
    public var fadeMilliseconds: Int = 60
    /// The samples concealed since the last good ones.
    public private(set) var concealedSamples: Int = 0

    private var history: [Int16]
    private var historyCount = 0
    private var position = 0
    private let period: Int

    /// Creates a concealer; the repetition period is 10 ms (covers pitch periods up to 100 Hz
    /// at whole multiples).
    public init(sampleRate: Int) {
        self.sampleRate = sampleRate
        self.period = max(1, sampleRate / 100)
        self.history = [Int16](repeating: 0, count: max(1, sampleRate / 100))
    }

    /// Records good decoded samples (call for every decoded frame). After a loss, the first
    /// 2 ms of `samples` are cross-faded in place with the continued repetition.
    public mutating func record(_ samples: UnsafeMutableBufferPointer<Int16>) {
        guard !samples.isEmpty else { return }
        if concealedSamples > 0 {
            let fade = min(samples.count, max(1, sampleRate / 500))
            for i in 0..<fade {
                let repeated = Double(nextRepeated())
                let weight = Double(i + 1) / Double(fade + 1)
                samples[i] = Int16(clamping: Int((1 - weight) * repeated + weight * Double(samples[i])))
            }
            concealedSamples = 0
        }
        // Keep the last `period` samples as the repetition source.
        let take = min(samples.count, period)
        let keep = period - take
        for i in 0..<keep { history[i] = history[i + take] }
        for i in 0..<take { history[keep + i] = samples[samples.count - take + i] }
        historyCount = min(period, historyCount + take)
        position = 0
    }

    /// Fills `output` with concealment for lost samples.
    public mutating func conceal(into output: UnsafeMutableBufferPointer<Int16>) {
        let fadeSamples = max(1, fadeMilliseconds * sampleRate / 1000)
        for i in 0..<output.count {
            let done = concealedSamples + i
            if historyCount < period || done >= fadeSamples {
                output[i] = 0
                _ = nextRepeated()
            } else {
                let gain = 1 - Double(done) / Double(fadeSamples)
                output[i] = Int16(clamping: Int(Double(nextRepeated()) * gain))
            }
        }
        concealedSamples += output.count
    }

    private mutating func nextRepeated() -> Int16 {
        let value = history[position]
        position = (position + 1) % period
        return value
    }
}
