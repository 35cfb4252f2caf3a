import COpus
import Synchronization

/// Opus frame durations an encoder can produce (RFC 6716 §2.1.4). One RTP packet carries one
/// Opus packet (RFC 7587 §4.2), so this is also the packet duration.
public enum OpusFrameDuration: Int, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    /// 2.5 ms
    case ms2_5 = 25
    /// 5 ms
    case ms5 = 50
    /// 10 ms
    case ms10 = 100
    /// 20 ms (the usual VoIP packet).
    case ms20 = 200
    /// 40 ms
    case ms40 = 400
    /// 60 ms
    case ms60 = 600

    /// The duration in tenths of a millisecond (25 for 2.5 ms).
    public var tenthsOfMillisecond: Int { rawValue }

    /// Samples per channel at `sampleRate`.
    public func samples(atSampleRate sampleRate: Int) -> Int { sampleRate * rawValue / 10_000 }

    /// The longest duration not above `milliseconds` (at least 2.5 ms).
    public static func atMost(milliseconds: Int) -> OpusFrameDuration {
        Self.allCases.last { $0.rawValue <= milliseconds * 10 } ?? .ms2_5
    }

    /// For example `20 ms`.
    public var description: String { rawValue % 10 == 0 ? "\(rawValue / 10) ms" : "\(Double(rawValue) / 10) ms" }
}

/// The audio bandwidths of Opus, narrowest first (RFC 6716 §2).
public enum OpusBandwidth: Int32, CaseIterable, Hashable, Sendable, Comparable {
    /// 4 kHz audio bandwidth (8 kHz sampling).
    case narrowband = 1101
    /// 6 kHz (12 kHz sampling).
    case mediumband = 1102
    /// 8 kHz (16 kHz sampling).
    case wideband = 1103
    /// 12 kHz (24 kHz sampling).
    case superWideband = 1104
    /// 20 kHz (48 kHz sampling).
    case fullband = 1105

    /// The widest bandwidth a decoder playing at `rate` Hz can use (RFC 7587 §7.1: the
    /// encoder should not send more than the receiver's `maxplaybackrate` can play).
    public init(maxPlaybackRate rate: Int) {
        switch rate {
        case ..<12_000: self = .narrowband
        case ..<16_000: self = .mediumband
        case ..<24_000: self = .wideband
        case ..<48_000: self = .superWideband
        default: self = .fullband
        }
    }

    /// Orders by width.
    public static func < (a: OpusBandwidth, b: OpusBandwidth) -> Bool { a.rawValue < b.rawValue }
}

/// An Opus encoder (libopus) producing RFC 7587 RTP payloads, one Opus packet per frame.
///
/// `Sendable`: calls are serialized by an internal lock, so the encoder may be created on one
/// thread and used on another; it is still one stream's state (see ``AudioCodec``).
public final class OpusEncoder: AudioEncoder, Sendable {
    /// What libopus is asked for. `nil` fields keep libopus's default.
    public struct Configuration: Hashable, Sendable {
        /// The intended use (libopus `OPUS_APPLICATION_*`).
        public enum Application: Int32, Hashable, Sendable {
            /// Speech intelligibility first (`OPUS_APPLICATION_VOIP`).
            case voip = 2048
            /// Fidelity first (`OPUS_APPLICATION_AUDIO`).
            case audio = 2049
            /// Lowest delay, CELT only (`OPUS_APPLICATION_RESTRICTED_LOWDELAY`).
            case restrictedLowDelay = 2051
        }

        /// A hint about the signal (libopus `OPUS_SIGNAL_*`).
        public enum Signal: Int32, Hashable, Sendable {
            /// Speech: favours the SILK layer (where in-band FEC lives).
            case voice = 3001
            /// Music: favours the CELT layer.
            case music = 3002
        }

        /// PCM sample rate: 8000, 12000, 16000, 24000 or 48000.
        public var sampleRate: Int
        /// PCM channels, 1 or 2 (interleaved).
        public var channels: Int
        /// The application.
        public var application: Application
        /// The frame (= packet) duration.
        public var frameDuration: OpusFrameDuration
        /// Target bitrate in bits/s (500 to 512000); nil: libopus chooses from rate and channels.
        public var bitrate: Int?
        /// Variable bitrate (libopus default); false for CBR (the peer's `cbr=1`).
        public var variableBitrate: Bool
        /// The widest audio bandwidth to encode (from the peer's `maxplaybackrate`).
        public var maxBandwidth: OpusBandwidth?
        /// In-band forward error correction (LBRR) for the previous frame (the peer's `useinbandfec=1`).
        public var inbandFEC: Bool
        /// Expected packet loss in percent (0–100); FEC is only spent when this is above 0.
        public var expectedPacketLossPercent: Int
        /// Discontinuous transmission: tiny packets during silence (the peer's `usedtx=1`).
        public var discontinuousTransmission: Bool
        /// 0 (fastest) to 10 (best); nil keeps libopus's default.
        public var complexity: Int?
        /// Encode a stereo input as mono (when the peer did not ask for stereo, RFC 7587 §7.1).
        public var forceMono: Bool
        /// Signal type hint; nil lets libopus detect it.
        public var signal: Signal?

        /// A configuration: 48 kHz mono VoIP, 20 ms, libopus defaults for everything else.
        public init(
            sampleRate: Int = 48000, channels: Int = 1, application: Application = .voip,
            frameDuration: OpusFrameDuration = .ms20, bitrate: Int? = nil, variableBitrate: Bool = true,
            maxBandwidth: OpusBandwidth? = nil, inbandFEC: Bool = false, expectedPacketLossPercent: Int = 0,
            discontinuousTransmission: Bool = false, complexity: Int? = nil, forceMono: Bool = false,
            signal: Signal? = nil
        ) {
            self.sampleRate = sampleRate
            self.channels = channels
            self.application = application
            self.frameDuration = frameDuration
            self.bitrate = bitrate
            self.variableBitrate = variableBitrate
            self.maxBandwidth = maxBandwidth
            self.inbandFEC = inbandFEC
            self.expectedPacketLossPercent = expectedPacketLossPercent
            self.discontinuousTransmission = discontinuousTransmission
            self.complexity = complexity
            self.forceMono = forceMono
            self.signal = signal
        }

        func validate() throws(AudioCodecError) {
            try Opus.validateFormat(sampleRate: sampleRate, channels: channels)
            if let bitrate, !(500...512_000).contains(bitrate) {
                throw .invalidConfiguration("Opus bitrate \(bitrate) (500 to 512000)")
            }
            guard (0...100).contains(expectedPacketLossPercent) else {
                throw .invalidConfiguration("expected packet loss \(expectedPacketLossPercent)% (0 to 100)")
            }
            if let complexity, !(0...10).contains(complexity) {
                throw .invalidConfiguration("Opus complexity \(complexity) (0 to 10)")
            }
        }
    }

    /// The configuration the encoder was created or last reconfigured with.
    public var configuration: Configuration { state.withLock { $0.configuration } }

    private struct State {
        var configuration: Configuration
        var frameSamples: Int
    }

    /// The libopus encoder; only touched while `state` is locked.
    private nonisolated(unsafe) let encoder: OpaquePointer
    private let state: Mutex<State>
    /// PCM sample rate.
    public let sampleRate: Int
    /// PCM channels.
    public let channels: Int

    /// Creates an encoder; throws ``AudioCodecError/invalidConfiguration(_:)`` or
    /// ``AudioCodecError/opus(operation:code:message:)``.
    public init(_ configuration: Configuration = Configuration()) throws(AudioCodecError) {
        try configuration.validate()
        var error: Int32 = 0
        guard let encoder = opus_encoder_create(
            Int32(configuration.sampleRate), Int32(configuration.channels), Int32(configuration.application.rawValue), &error)
        else {
            throw Opus.error("opus_encoder_create", error)
        }
        try Self.apply(configuration, to: encoder)
        self.sampleRate = configuration.sampleRate
        self.channels = configuration.channels
        self.encoder = encoder
        self.state = Mutex(State(configuration: configuration, frameSamples: configuration.frameDuration.samples(atSampleRate: configuration.sampleRate)))
    }

    deinit { opus_encoder_destroy(encoder) }

    private static func apply(_ c: Configuration, to encoder: OpaquePointer) throws(AudioCodecError) {
        func set(_ request: Int32, _ value: Int32, _ name: String) throws(AudioCodecError) {
            let status = copus_encoder_set(encoder, request, value)
            if status != OPUS_OK { throw Opus.error("opus_encoder_ctl(\(name))", status) }
        }
        try set(OPUS_SET_BITRATE_REQUEST, c.bitrate.map(Int32.init) ?? OPUS_AUTO, "OPUS_SET_BITRATE")
        try set(OPUS_SET_VBR_REQUEST, c.variableBitrate ? 1 : 0, "OPUS_SET_VBR")
        try set(OPUS_SET_MAX_BANDWIDTH_REQUEST, (c.maxBandwidth ?? .fullband).rawValue, "OPUS_SET_MAX_BANDWIDTH")
        try set(OPUS_SET_INBAND_FEC_REQUEST, c.inbandFEC ? 1 : 0, "OPUS_SET_INBAND_FEC")
        try set(OPUS_SET_PACKET_LOSS_PERC_REQUEST, Int32(c.expectedPacketLossPercent), "OPUS_SET_PACKET_LOSS_PERC")
        try set(OPUS_SET_DTX_REQUEST, c.discontinuousTransmission ? 1 : 0, "OPUS_SET_DTX")
        try set(OPUS_SET_FORCE_CHANNELS_REQUEST, c.forceMono ? 1 : OPUS_AUTO, "OPUS_SET_FORCE_CHANNELS")
        try set(OPUS_SET_SIGNAL_REQUEST, c.signal?.rawValue ?? OPUS_AUTO, "OPUS_SET_SIGNAL")
        if let complexity = c.complexity { try set(OPUS_SET_COMPLEXITY_REQUEST, Int32(complexity), "OPUS_SET_COMPLEXITY") }
    }

    /// Changes the settings that libopus can change on a running encoder (everything except
    /// sample rate, channels and application, which must stay as created).
    public func reconfigure(_ configuration: Configuration) throws(AudioCodecError) {
        try configuration.validate()
        guard configuration.sampleRate == sampleRate, configuration.channels == channels else {
            throw .invalidConfiguration("sample rate and channels cannot change on a running encoder")
        }
        try state.withLock { (s: inout State) throws(AudioCodecError) in
            guard configuration.application == s.configuration.application else {
                throw .invalidConfiguration("the application cannot change on a running encoder")
            }
            try Self.apply(configuration, to: encoder)
            s.configuration = configuration
            s.frameSamples = configuration.frameDuration.samples(atSampleRate: sampleRate)
        }
    }

    /// `opus/48000/2`.
    public var codecDescription: AudioCodecDescription { .opus }
    /// Samples per channel in one frame of the configured duration.
    public var samplesPerFrame: Int { state.withLock { $0.frameSamples } }
    /// 1275 bytes: the largest single-frame Opus packet (RFC 6716 §3.2.1); 60 ms frames may be
    /// up to three times that, so this reports 4000, libopus's recommended buffer.
    public var maximumPayloadSize: Int { 4000 }

    /// The encoder's algorithmic delay (lookahead) in samples per channel.
    public var lookahead: Int {
        state.withLock { _ in
            var value: Int32 = 0
            _ = copus_encoder_get(encoder, OPUS_GET_LOOKAHEAD_REQUEST, &value)
            return Int(value)
        }
    }

    /// The bitrate libopus is using (bits/s).
    public var currentBitrate: Int {
        state.withLock { _ in
            var value: Int32 = 0
            _ = copus_encoder_get(encoder, OPUS_GET_BITRATE_REQUEST, &value)
            return Int(value)
        }
    }

    /// Encodes one frame: `pcm` holds one frame of any Opus duration (2.5 to 60 ms) times
    /// ``channels`` interleaved samples. Returns the payload length (1 or 2 bytes during DTX
    /// silence: send them, or not, as RFC 7587 §3.2 allows).
    public func encode(_ pcm: UnsafeBufferPointer<Int16>, into payload: UnsafeMutableRawBufferPointer) throws(AudioCodecError) -> Int {
        guard pcm.count % channels == 0, let base = pcm.baseAddress,
            OpusFrameDuration.allCases.contains(where: { $0.samples(atSampleRate: sampleRate) == pcm.count / channels })
        else {
            throw .invalidFrameSize(samples: pcm.count, detail: "Opus needs 2.5, 5, 10, 20, 40 or 60 ms × \(channels) channel(s) at \(sampleRate) Hz")
        }
        guard let out = payload.baseAddress, payload.count > 0 else { throw .bufferTooSmall(needed: 1, available: 0) }
        let capacity = Int32(clamping: payload.count)
        let frame = Int32(pcm.count / channels)
        // The caller's buffers are only used during this call, under the lock.
        nonisolated(unsafe) let input = base
        nonisolated(unsafe) let output = out.assumingMemoryBound(to: UInt8.self)
        let result = state.withLock { _ in opus_encode(encoder, input, frame, output, capacity) }
        if result < 0 { throw Opus.error("opus_encode", result) }
        return Int(result)
    }

    /// Resets the encoder's state (as for a new stream), keeping its settings.
    public func reset() {
        state.withLock { _ in _ = copus_encoder_reset(encoder) }
    }
}

/// An Opus decoder (libopus) for RFC 7587 payloads, with in-band FEC recovery and PLC.
///
/// `Sendable` with internally serialized calls, like ``OpusEncoder``.
public final class OpusDecoder: AudioDecoder, Sendable {
    /// The libopus decoder; only touched while `lock` is held.
    private nonisolated(unsafe) let decoder: OpaquePointer
    private let lock = Mutex(())
    /// Output sample rate (any of 8000, 12000, 16000, 24000, 48000, whatever the sender used).
    public let sampleRate: Int
    /// Output channels: 1, or 2 when the peer sends stereo (`sprop-stereo=1`); a mono decoder
    /// down-mixes stereo packets and a stereo one duplicates mono ones.
    public let channels: Int
    /// The expected packet duration, for concealment when nothing else is known.
    public let samplesPerFrame: Int

    /// Creates a decoder.
    public init(sampleRate: Int = 48000, channels: Int = 1, frameDuration: OpusFrameDuration = .ms20) throws(AudioCodecError) {
        try Opus.validateFormat(sampleRate: sampleRate, channels: channels)
        var error: Int32 = 0
        guard let decoder = opus_decoder_create(Int32(sampleRate), Int32(channels), &error) else {
            throw Opus.error("opus_decoder_create", error)
        }
        self.decoder = decoder
        self.sampleRate = sampleRate
        self.channels = channels
        self.samplesPerFrame = frameDuration.samples(atSampleRate: sampleRate)
    }

    deinit { opus_decoder_destroy(decoder) }

    /// `opus/48000/2`.
    public var codecDescription: AudioCodecDescription { .opus }
    /// 120 ms: the longest Opus packet (RFC 6716 §3.2.5).
    public var maximumSamplesPerPayload: Int { sampleRate * 120 / 1000 }

    /// Decodes one payload; returns samples per channel. An empty payload is concealed
    /// (as RFC 7587 allows a zero-length payload to stand for a lost frame in DTX).
    public func decode(_ payload: UnsafeRawBufferPointer, into pcm: UnsafeMutableBufferPointer<Int16>) throws(AudioCodecError) -> Int {
        try run(payload.isEmpty ? nil : payload, frameSize: pcm.count / channels, fec: false, into: pcm, operation: "opus_decode")
    }

    /// Recovers a lost frame from the in-band FEC data of the *next* packet (`following`):
    /// `samplesPerChannel` is the lost duration (a multiple of 2.5 ms). When `following` carries
    /// no FEC, libopus conceals instead (as ``concealLoss(samplesPerChannel:into:)``). Then
    /// decode `following` itself normally.
    public func decodeFEC(
        from following: UnsafeRawBufferPointer, samplesPerChannel: Int, into pcm: UnsafeMutableBufferPointer<Int16>
    ) throws(AudioCodecError) -> Int {
        try run(following.isEmpty ? nil : following, frameSize: samplesPerChannel, fec: true, into: pcm, operation: "opus_decode(fec)")
    }

    /// Packet-loss concealment: `samplesPerChannel` samples extrapolated from the past
    /// (a multiple of 2.5 ms; libopus decodes with no packet).
    public func concealLoss(samplesPerChannel: Int, into pcm: UnsafeMutableBufferPointer<Int16>) throws(AudioCodecError) -> Int {
        try run(nil, frameSize: samplesPerChannel, fec: false, into: pcm, operation: "opus_decode(plc)")
    }

    /// Decodes (or, without a payload, conceals) `frameSize` samples per channel into `pcm`,
    /// which must hold them all.
    private func run(
        _ payload: UnsafeRawBufferPointer?, frameSize: Int, fec: Bool, into pcm: UnsafeMutableBufferPointer<Int16>, operation: String
    ) throws(AudioCodecError) -> Int {
        guard pcm.count >= frameSize * channels else {
            throw .bufferTooSmall(needed: frameSize * channels, available: pcm.count)
        }
        guard let out = pcm.baseAddress, frameSize > 0 else { throw .bufferTooSmall(needed: channels, available: pcm.count) }
        if let payload, payload.count > Int(Int32.max) { throw .invalidFrameSize(samples: 0, detail: "payload too large") }
        nonisolated(unsafe) let input = payload?.baseAddress?.assumingMemoryBound(to: UInt8.self)
        nonisolated(unsafe) let output = out
        let length = Int32(payload?.count ?? 0), frame = Int32(clamping: frameSize), decodeFEC: Int32 = fec ? 1 : 0
        let result = lock.withLock { _ in opus_decode(decoder, input, length, output, frame, decodeFEC) }
        if result < 0 { throw Opus.error(operation, result) }
        return Int(result)
    }

    /// The duration of the last packet decoded or concealed, in samples per channel.
    public var lastPacketDuration: Int {
        lock.withLock { _ in
            var value: Int32 = 0
            _ = copus_decoder_get(decoder, OPUS_GET_LAST_PACKET_DURATION_REQUEST, &value)
            return Int(value)
        }
    }

    /// Resets the decoder's state (as for a new stream).
    public func reset() {
        lock.withLock { _ in _ = copus_decoder_reset(decoder) }
    }

    /// Recovers a lost frame from the next payload held in an array (convenience).
    public func decodeFEC(from following: [UInt8], samplesPerChannel: Int) throws(AudioCodecError) -> [Int16] {
        var out = [Int16](repeating: 0, count: samplesPerChannel * channels)
        var result: Result<Int, AudioCodecError> = .success(0)
        following.withUnsafeBytes { input in
            out.withUnsafeMutableBufferPointer { output in
                result = Result { () throws(AudioCodecError) in try decodeFEC(from: input, samplesPerChannel: samplesPerChannel, into: output) }
            }
        }
        out.removeSubrange((try result.get() * channels)...)
        return out
    }
}

/// Facts about Opus packets and the library.
public enum Opus {
    /// The sample rates libopus encodes and decodes at.
    public static let sampleRates: Set<Int> = [8000, 12000, 16000, 24000, 48000]

    /// The libopus version string, for example `libopus 1.3.1`.
    public static var libraryVersion: String { String(cString: opus_get_version_string()) }

    /// Samples per channel in a packet when decoded at `sampleRate`, read from its TOC byte
    /// and frame count (RFC 6716 §3.1); nil for a malformed packet.
    public static func samplesPerChannel(inPacket payload: [UInt8], sampleRate: Int = 48000) -> Int? {
        guard !payload.isEmpty else { return nil }
        let n = payload.withUnsafeBufferPointer { p -> Int32 in
            guard let base = p.baseAddress else { return -1 }
            return opus_packet_get_nb_samples(base, Int32(clamping: p.count), Int32(sampleRate))
        }
        return n > 0 ? Int(n) : nil
    }

    /// The number of channels a packet is coded with (its TOC's stereo flag); nil when empty.
    public static func channels(inPacket payload: [UInt8]) -> Int? {
        guard let toc = payload.first else { return nil }
        return toc & 0x04 != 0 ? 2 : 1
    }

    /// Throws ``AudioCodecError/invalidConfiguration(_:)`` unless `sampleRate` is one of
    /// ``sampleRates`` and there are one or two channels: what an encoder and a decoder both need.
    static func validateFormat(sampleRate: Int, channels: Int) throws(AudioCodecError) {
        guard sampleRates.contains(sampleRate) else {
            throw .invalidConfiguration("Opus sample rate \(sampleRate) (8000, 12000, 16000, 24000 or 48000)")
        }
        guard channels == 1 || channels == 2 else { throw .invalidConfiguration("Opus channels \(channels) (1 or 2)") }
    }

    static func error(_ operation: String, _ code: Int32) -> AudioCodecError {
        .opus(operation: operation, code: code, message: String(cString: opus_strerror(code)))
    }
}
