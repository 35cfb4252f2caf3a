import SDP

/// How an audio codec appears in SDP and RTP: the `a=rtpmap` encoding name, the RTP clock rate,
/// the channel count written in the rtpmap, and the static payload type if RFC 3551 assigns one.
public struct AudioCodecDescription: Hashable, Sendable, CustomStringConvertible {
    /// The encoding name, for example `PCMU` or `opus` (compared ignoring ASCII case).
    public var encodingName: String
    /// The RTP timestamp clock rate in Hz (8000 for G.711, always 48000 for Opus, RFC 7587 §4.1).
    public var clockRate: UInt32
    /// The encoding parameters of the rtpmap (`2` for `opus/48000/2`), nil when omitted.
    public var rtpMapChannels: UInt8?
    /// The static RTP/AVP payload type (0 for PCMU, 8 for PCMA), nil for dynamic ones.
    public var staticPayloadType: UInt8?

    /// Creates a description.
    public init(encodingName: String, clockRate: UInt32, rtpMapChannels: UInt8? = nil, staticPayloadType: UInt8? = nil) {
        self.encodingName = encodingName
        self.clockRate = clockRate
        self.rtpMapChannels = rtpMapChannels
        self.staticPayloadType = staticPayloadType
    }

    /// G.711 µ-law, `PCMU/8000`, static payload type 0.
    public static let pcmu = AudioCodecDescription(encodingName: "PCMU", clockRate: 8000, staticPayloadType: 0)
    /// G.711 A-law, `PCMA/8000`, static payload type 8.
    public static let pcma = AudioCodecDescription(encodingName: "PCMA", clockRate: 8000, staticPayloadType: 8)
    /// Opus, `opus/48000/2`, a dynamic payload type (RFC 7587 §7: the rtpmap always says 48000/2,
    /// whatever is actually sent).
    public static let opus = AudioCodecDescription(encodingName: "opus", clockRate: 48000, rtpMapChannels: 2)

    /// The codecs this module implements.
    public static let supported: [AudioCodecDescription] = [.opus, .pcmu, .pcma]

    /// The `a=rtpmap` for this codec under `payloadType` (the static one when nil and there is one).
    public func rtpMap(payloadType: UInt8? = nil) -> RTPMap? {
        guard let pt = payloadType ?? staticPayloadType else { return nil }
        return RTPMap(payloadType: pt, encodingName: encodingName, clockRate: clockRate, channels: rtpMapChannels)
    }

    /// The supported codec an rtpmap names (encoding name ignoring case, clock rate, channels), or nil.
    public init?(rtpMap: RTPMap) {
        guard let match = Self.supported.first(where: { $0.matches(rtpMap) }) else { return nil }
        self = match
    }

    /// The supported codec a payload type stands for: the matching rtpmap when the media
    /// description has one for it, else the RFC 3551 static assignment.
    public init?(payloadType: UInt8, rtpMaps: [RTPMap]) {
        if let map = rtpMaps.first(where: { $0.payloadType == payloadType }) {
            self.init(rtpMap: map)
        } else if let map = RTPMap.staticPayloadType(payloadType) {
            self.init(rtpMap: map)
        } else {
            return nil
        }
    }

    /// True when the rtpmap describes this codec.
    public func matches(_ rtpMap: RTPMap) -> Bool {
        rtpMap.encodingName.lowercased() == encodingName.lowercased() && rtpMap.clockRate == clockRate
            && (rtpMap.channels ?? 1) == (rtpMapChannels ?? 1)
    }

    /// For example `opus/48000/2`.
    public var description: String {
        var text = "\(encodingName)/\(clockRate)"
        if let rtpMapChannels { text += "/\(rtpMapChannels)" }
        return text
    }
}

/// What codec objects have in common: the SDP/RTP description, the PCM format, the frame size.
///
/// Threading: encoders and decoders hold per-stream state (Opus prediction, concealment
/// history) and are meant to be owned by one stream and used by one thread at a time. The G.711
/// ones are plain values; the Opus ones are classes that are `Sendable` so that a media session
/// can hand them to its send or receive thread, and they serialize calls internally, but calling
/// one stream's encoder from two threads would interleave two signals into one state: don't.
public protocol AudioCodec {
    /// The codec as seen in SDP and RTP.
    var codecDescription: AudioCodecDescription { get }
    /// The PCM sample rate in Hz.
    var sampleRate: Int { get }
    /// PCM channels (interleaved when 2).
    var channels: Int { get }
    /// Samples per channel in one frame (one RTP packet's worth), e.g. 160 for 20 ms at 8 kHz.
    var samplesPerFrame: Int { get }
}

extension AudioCodec {
    /// The frame duration in milliseconds.
    public var frameMilliseconds: Double { Double(samplesPerFrame) * 1000 / Double(sampleRate) }
    /// How far the RTP timestamp advances per frame (clock rate × frame duration).
    public var rtpTimestampIncrement: UInt32 {
        UInt32(Int(codecDescription.clockRate) * samplesPerFrame / sampleRate)
    }
}

/// Turns PCM frames into RTP payloads.
public protocol AudioEncoder: AudioCodec {
    /// The largest payload `encode` may produce; size the output buffer with it.
    var maximumPayloadSize: Int { get }
    /// Encodes one frame: `pcm` holds `samplesPerFrame × channels` interleaved samples; the
    /// payload goes to the start of `payload`. Returns the payload length in bytes.
    mutating func encode(_ pcm: UnsafeBufferPointer<Int16>, into payload: UnsafeMutableRawBufferPointer) throws(AudioCodecError) -> Int
}

/// Turns RTP payloads into PCM.
public protocol AudioDecoder: AudioCodec {
    /// The largest number of samples per channel one payload can decode to; size the PCM
    /// buffer with it (times ``AudioCodec/channels``).
    var maximumSamplesPerPayload: Int { get }
    /// Decodes one payload into `pcm` (interleaved); returns the samples per channel written.
    mutating func decode(_ payload: UnsafeRawBufferPointer, into pcm: UnsafeMutableBufferPointer<Int16>) throws(AudioCodecError) -> Int
    /// Produces `samplesPerChannel` samples of concealment for a lost packet; returns the
    /// samples per channel written.
    mutating func concealLoss(samplesPerChannel: Int, into pcm: UnsafeMutableBufferPointer<Int16>) throws(AudioCodecError) -> Int
}

/// Why an encoder or decoder call failed.
public enum AudioCodecError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The output buffer cannot hold the result.
    case bufferTooSmall(needed: Int, available: Int)
    /// The PCM input does not hold a whole number of frames the codec accepts.
    case invalidFrameSize(samples: Int, detail: String)
    /// A configuration value is out of range (which one and why).
    case invalidConfiguration(String)
    /// libopus refused: the operation (`opus_encode`, `opus_decoder_create`, …), its error
    /// code (`OPUS_BAD_ARG` = -1, `OPUS_BUFFER_TOO_SMALL` = -2, `OPUS_INVALID_PACKET` = -4, …)
    /// and libopus's text for it.
    case opus(operation: String, code: Int32, message: String)

    /// A one-line explanation.
    public var description: String {
        switch self {
        case .bufferTooSmall(let needed, let available): return "output buffer too small: \(needed) needed, \(available) available"
        case .invalidFrameSize(let samples, let detail): return "invalid frame of \(samples) samples: \(detail)"
        case .invalidConfiguration(let detail): return "invalid configuration: \(detail)"
        case .opus(let operation, let code, let message): return "\(operation) failed: \(message) (\(code))"
        }
    }
}

// The array conveniences, for value codecs (`var`) and reference codecs (`let`) alike.
extension AudioEncoder {
    /// Encodes one frame held in an array (convenience; allocates the result).
    public mutating func encode(_ pcm: [Int16]) throws(AudioCodecError) -> [UInt8] { try encodeArray(&self, pcm) }
}

extension AudioDecoder {
    /// Decodes one payload held in an array (convenience; allocates the result).
    public mutating func decode(_ payload: [UInt8]) throws(AudioCodecError) -> [Int16] { try decodeArray(&self, payload) }

    /// Conceals one lost frame of `samplesPerChannel` samples (convenience; allocates the result).
    public mutating func concealLoss(samplesPerChannel: Int) throws(AudioCodecError) -> [Int16] {
        try concealArray(&self, samplesPerChannel)
    }
}

extension AudioEncoder where Self: AnyObject {
    /// Encodes one frame held in an array (convenience; allocates the result).
    public func encode(_ pcm: [Int16]) throws(AudioCodecError) -> [UInt8] {
        var codec = self
        return try encodeArray(&codec, pcm)
    }
}

extension AudioDecoder where Self: AnyObject {
    /// Decodes one payload held in an array (convenience; allocates the result).
    public func decode(_ payload: [UInt8]) throws(AudioCodecError) -> [Int16] {
        var codec = self
        return try decodeArray(&codec, payload)
    }

    /// Conceals one lost frame of `samplesPerChannel` samples (convenience; allocates the result).
    public func concealLoss(samplesPerChannel: Int) throws(AudioCodecError) -> [Int16] {
        var codec = self
        return try concealArray(&codec, samplesPerChannel)
    }
}

private func encodeArray<E: AudioEncoder>(_ encoder: inout E, _ pcm: [Int16]) throws(AudioCodecError) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: encoder.maximumPayloadSize)
    var result: Result<Int, AudioCodecError> = .success(0)
    pcm.withUnsafeBufferPointer { input in
        out.withUnsafeMutableBytes { output in
            result = Result { () throws(AudioCodecError) in try encoder.encode(input, into: output) }
        }
    }
    out.removeSubrange(try result.get()...)
    return out
}

private func decodeArray<D: AudioDecoder>(_ decoder: inout D, _ payload: [UInt8]) throws(AudioCodecError) -> [Int16] {
    let channels = decoder.channels
    var out = [Int16](repeating: 0, count: decoder.maximumSamplesPerPayload * channels)
    var result: Result<Int, AudioCodecError> = .success(0)
    payload.withUnsafeBytes { input in
        out.withUnsafeMutableBufferPointer { output in
            result = Result { () throws(AudioCodecError) in try decoder.decode(input, into: output) }
        }
    }
    out.removeSubrange((try result.get() * channels)...)
    return out
}

private func concealArray<D: AudioDecoder>(_ decoder: inout D, _ samplesPerChannel: Int) throws(AudioCodecError) -> [Int16] {
    let channels = decoder.channels
    var out = [Int16](repeating: 0, count: samplesPerChannel * channels)
    var result: Result<Int, AudioCodecError> = .success(0)
    out.withUnsafeMutableBufferPointer { output in
        result = Result { () throws(AudioCodecError) in try decoder.concealLoss(samplesPerChannel: samplesPerChannel, into: output) }
    }
    out.removeSubrange((try result.get() * channels)...)
    return out
}
