import SDP

/// The `a=fmtp` parameters of Opus (RFC 7587 §6.1), typed.
///
/// Each side's fmtp describes what *it* wants to receive (`maxplaybackrate`, `stereo`,
/// `maxaveragebitrate`, `cbr`, `useinbandfec`, `usedtx`, `ptime`/`maxptime`/`minptime`) and
/// what it is likely to send (`sprop-maxcapturerate`, `sprop-stereo`). ``encoderConfiguration(for:base:)``
/// turns the peer's into encoder settings (RFC 7587 §7), ``decoderChannels(for:)`` picks the
/// decoder's layout. Unknown parameters are kept in ``otherParameters`` and written back.
///
/// Parsing is strict for the parameters the RFC defines: a value outside the RFC's range is a
/// ``OpusParameterError`` naming the parameter (parameter names are compared ignoring case).
public struct OpusParameters: Hashable, Sendable, CustomStringConvertible {
    /// `maxplaybackrate`: the highest sample rate the receiver can play, 8000–48000 Hz.
    public var maxPlaybackRate: Int?
    /// `sprop-maxcapturerate`: the highest sample rate the sender will capture at, 8000–48000 Hz.
    public var spropMaxCaptureRate: Int?
    /// `maxaveragebitrate`: the receiver's limit on the average bitrate, 6000–510000 bits/s.
    public var maxAverageBitrate: Int?
    /// `stereo`: the receiver prefers stereo (true) or mono (false; the default when absent).
    public var stereo: Bool?
    /// `sprop-stereo`: the sender is likely to send stereo.
    public var spropStereo: Bool?
    /// `cbr`: the receiver asks for constant bitrate.
    public var cbr: Bool?
    /// `useinbandfec`: the receiver can use in-band FEC (and asks for it when true).
    public var useInbandFEC: Bool?
    /// `usedtx`: the receiver prefers discontinuous transmission.
    public var useDTX: Bool?
    /// `ptime`: the preferred packet duration in ms (3–120; RFC 7587 also allows the SDP attribute).
    public var ptime: Int?
    /// `maxptime`: the longest packet duration the receiver accepts, in ms (3–120).
    public var maxptime: Int?
    /// `minptime`: the shortest packet duration the receiver wants, in ms (3–120).
    public var minptime: Int?
    /// Parameters this type does not know, in order, kept verbatim.
    public var otherParameters: [FormatParameters.Parameter]

    /// Creates parameters; every field absent by default.
    public init(
        maxPlaybackRate: Int? = nil, spropMaxCaptureRate: Int? = nil, maxAverageBitrate: Int? = nil, stereo: Bool? = nil,
        spropStereo: Bool? = nil, cbr: Bool? = nil, useInbandFEC: Bool? = nil, useDTX: Bool? = nil, ptime: Int? = nil,
        maxptime: Int? = nil, minptime: Int? = nil, otherParameters: [FormatParameters.Parameter] = []
    ) {
        self.maxPlaybackRate = maxPlaybackRate
        self.spropMaxCaptureRate = spropMaxCaptureRate
        self.maxAverageBitrate = maxAverageBitrate
        self.stereo = stereo
        self.spropStereo = spropStereo
        self.cbr = cbr
        self.useInbandFEC = useInbandFEC
        self.useDTX = useDTX
        self.ptime = ptime
        self.maxptime = maxptime
        self.minptime = minptime
        self.otherParameters = otherParameters
    }

    /// Parses the parameter part of an fmtp line (`minptime=10;useinbandfec=1`).
    public init(fmtp parameters: String) throws(OpusParameterError) {
        self.init()
        try apply(FormatParameters(format: "0", parameters: parameters).parsedParameters)
    }

    /// Parses an `a=fmtp` attribute's parameters.
    public init(_ formatParameters: FormatParameters) throws(OpusParameterError) {
        self.init()
        try apply(formatParameters.parsedParameters)
    }

    private mutating func apply(_ items: [FormatParameters.Parameter]) throws(OpusParameterError) {
        for item in items {
            let name = item.name.lowercased()
            func number(_ range: ClosedRange<Int>) throws(OpusParameterError) -> Int {
                guard let text = item.value, !text.isEmpty, text.count <= 7, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                    let value = Int(text), range.contains(value)
                else {
                    throw OpusParameterError(parameter: item.name, value: item.value, rule: "an integer from \(range.lowerBound) to \(range.upperBound)")
                }
                return value
            }
            func flag() throws(OpusParameterError) -> Bool {
                switch item.value {
                case "0": return false
                case "1": return true
                default: throw OpusParameterError(parameter: item.name, value: item.value, rule: "0 or 1")
                }
            }
            switch name {
            case "maxplaybackrate": maxPlaybackRate = try number(8000...48000)
            case "sprop-maxcapturerate": spropMaxCaptureRate = try number(8000...48000)
            case "maxaveragebitrate": maxAverageBitrate = try number(6000...510_000)
            case "stereo": stereo = try flag()
            case "sprop-stereo": spropStereo = try flag()
            case "cbr": cbr = try flag()
            case "useinbandfec": useInbandFEC = try flag()
            case "usedtx": useDTX = try flag()
            case "ptime": ptime = try number(3...120)
            case "maxptime": maxptime = try number(3...120)
            case "minptime": minptime = try number(3...120)
            default: otherParameters.append(item)
            }
        }
    }

    /// The parameters as an fmtp parameter string, in RFC 7587 §6.1 order, then the others.
    public var fmtpParameters: String {
        var items: [String] = []
        func add(_ name: String, _ value: Int?) { if let value { items.append("\(name)=\(value)") } }
        func add(_ name: String, _ value: Bool?) { if let value { items.append("\(name)=\(value ? 1 : 0)") } }
        add("maxplaybackrate", maxPlaybackRate)
        add("sprop-maxcapturerate", spropMaxCaptureRate)
        add("maxptime", maxptime)
        add("ptime", ptime)
        add("minptime", minptime)
        add("maxaveragebitrate", maxAverageBitrate)
        add("stereo", stereo)
        add("sprop-stereo", spropStereo)
        add("cbr", cbr)
        add("useinbandfec", useInbandFEC)
        add("usedtx", useDTX)
        items += otherParameters.map(\.description)
        return items.joined(separator: ";")
    }

    /// The `a=fmtp` attribute for `payloadType`.
    public func formatParameters(payloadType: UInt8) -> FormatParameters {
        FormatParameters(payloadType: payloadType, parameters: fmtpParameters)
    }

    /// Same as ``fmtpParameters``.
    public var description: String { fmtpParameters }

    /// What we should announce for receiving with `decoder`: its rate as `maxplaybackrate`,
    /// `stereo` for a stereo decoder, and FEC/DTX/bitrate wishes as given.
    public static func forReceiving(
        sampleRate: Int = 48000, channels: Int = 1, useInbandFEC: Bool = true, useDTX: Bool = false,
        maxAverageBitrate: Int? = nil, ptime: Int? = nil
    ) -> OpusParameters {
        OpusParameters(
            maxPlaybackRate: sampleRate < 48000 ? sampleRate : nil, maxAverageBitrate: maxAverageBitrate,
            stereo: channels == 2 ? true : nil, spropStereo: channels == 2 ? true : nil,
            useInbandFEC: useInbandFEC ? true : nil, useDTX: useDTX ? true : nil, ptime: ptime)
    }

    /// Encoder settings honouring the peer's fmtp (RFC 7587 §7.1), starting from `base` (our
    /// source format and preferences):
    /// - `maxplaybackrate` limits the encoded bandwidth (``OpusBandwidth/init(maxPlaybackRate:)``);
    /// - `maxaveragebitrate` caps the bitrate (set to it when `base` has none);
    /// - `stereo` absent or 0 makes a stereo source encode as mono (`forceMono`);
    /// - `cbr=1` turns VBR off;
    /// - `useinbandfec=1` turns FEC on (and assumes 10% loss when `base` expects none, since
    ///   libopus spends nothing on FEC at 0%); `useinbandfec=0` turns it off;
    /// - `usedtx=1` turns DTX on;
    /// - `ptime` (else `base`'s duration) bounded by `maxptime` and `minptime` picks the frame duration.
    public func encoderConfiguration(
        for peer: OpusParameters? = nil, base: OpusEncoder.Configuration = OpusEncoder.Configuration()
    ) -> OpusEncoder.Configuration {
        let peer = peer ?? self
        var c = base
        if let rate = peer.maxPlaybackRate {
            let limit = OpusBandwidth(maxPlaybackRate: rate)
            c.maxBandwidth = min(base.maxBandwidth ?? .fullband, limit)
        }
        if let limit = peer.maxAverageBitrate { c.bitrate = min(base.bitrate ?? limit, limit) }
        if c.channels == 2 && peer.stereo != true { c.forceMono = true }
        if peer.cbr == true { c.variableBitrate = false }
        switch peer.useInbandFEC {
        case true?:
            c.inbandFEC = true
            if c.expectedPacketLossPercent == 0 { c.expectedPacketLossPercent = 10 }
        case false?: c.inbandFEC = false
        case nil: break
        }
        if peer.useDTX == true { c.discontinuousTransmission = true }
        var ms = peer.ptime ?? base.frameDuration.rawValue / 10
        if let maxptime = peer.maxptime { ms = min(ms, maxptime) }
        var duration = OpusFrameDuration.atMost(milliseconds: ms)
        if let minptime = peer.minptime, duration.rawValue < minptime * 10,
            let longer = OpusFrameDuration.allCases.first(where: { $0.rawValue >= minptime * 10 && $0.rawValue <= (peer.maxptime ?? 120) * 10 })
        {
            duration = longer
        }
        c.frameDuration = duration
        return c
    }

    /// Decoder channels for the peer's stream: 2 when it announces `sprop-stereo=1`, else 1.
    public static func decoderChannels(for peer: OpusParameters) -> Int { peer.spropStereo == true ? 2 : 1 }
}

/// An Opus fmtp parameter with a value outside RFC 7587's range.
public struct OpusParameterError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The parameter name as written.
    public var parameter: String
    /// Its value as written (nil when it had no `=`).
    public var value: String?
    /// What RFC 7587 §6.1 requires of it.
    public var rule: String

    /// Creates an error.
    public init(parameter: String, value: String?, rule: String) {
        self.parameter = parameter
        self.value = value
        self.rule = rule
    }

    /// For example `fmtp parameter useinbandfec=2: must be 0 or 1 (RFC 7587 §6.1)`.
    public var description: String {
        "fmtp parameter \(parameter)\(value.map { "=\($0)" } ?? ""): must be \(rule) (RFC 7587 §6.1)"
    }
}
