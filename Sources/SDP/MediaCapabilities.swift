/// What the local endpoint can do, as input to ``OfferAnswer``: one
/// ``StreamCapabilities`` per media stream, plus the address written in `o=`
/// and the session-level `c=`.
///
/// Ports and addresses are supplied by the caller (the media layer binds the
/// sockets); so are SRTP keys (the media layer generates them), so this
/// module stays free of I/O and cryptography.
///
/// ```swift
/// var audio = StreamCapabilities(mediaType: .audio, port: 40000, codecs: [.opus, .pcmu, .pcma, .telephoneEvent])
/// audio.srtp = SRTPCapabilities(policy: .optional, keys: [SRTPKey(suite: .aesCM128HMACSHA1_80, keySaltBytes: key)])
/// let capabilities = MediaCapabilities(address: "192.0.2.10", streams: [audio])
/// ```
public struct MediaCapabilities: Sendable {
    /// The user name written in `o=`; `-` by default.
    public var username: String
    /// The local address: written in `o=` and in the session-level `c=`.
    public var address: String
    /// The address type of ``address``: ``AddressType/ip6`` when it holds a
    /// `:`, else ``AddressType/ip4``.
    public var addressType: AddressType
    /// The streams we offer, in `m=` line order, and the streams an answer may
    /// use: each offered `m=` line takes the first unused stream of its media type.
    public var streams: [StreamCapabilities]

    /// Creates capabilities.
    public init(username: String = "-", address: String, streams: [StreamCapabilities]) {
        self.username = username
        self.address = address
        self.addressType = address.contains(":") ? .ip6 : .ip4
        self.streams = streams
    }
}

/// The local side of one media stream: codecs, transport and security.
public struct StreamCapabilities: Sendable {
    /// The media type of the `m=` line (audio, video, …).
    public var mediaType: MediaType
    /// The local RTP port, bound by the media layer.
    public var port: UInt16
    /// The local address for this stream when it differs from
    /// ``MediaCapabilities/address`` (written as a media-level `c=`).
    public var address: String?
    /// The codecs we can send and receive, in preference order.
    public var codecs: [Codec]
    /// `a=ptime` to write, in milliseconds; nil writes none.
    public var ptime: UInt32?
    /// Whether we can multiplex RTP and RTCP on one port (RFC 5761): offered
    /// when true, and echoed in an answer only when the offer had it.
    public var rtcpMux: Bool
    /// The SRTP policy, accepted suites and our keys.
    public var srtp: SRTPCapabilities
    /// The local intent for the direction: `sendrecv` normally, `sendonly`
    /// (or `inactive`) to put the peer on hold, `recvonly` to only listen.
    /// Offers carry it as is; answers intersect it with the mirror of the
    /// offered direction.
    public var direction: MediaDirection

    /// Creates the capabilities of one stream.
    public init(
        mediaType: MediaType,
        port: UInt16,
        address: String? = nil,
        codecs: [Codec],
        ptime: UInt32? = nil,
        rtcpMux: Bool = false,
        srtp: SRTPCapabilities = .off,
        direction: MediaDirection = .sendrecv
    ) {
        self.mediaType = mediaType
        self.port = port
        self.address = address
        self.codecs = codecs
        self.ptime = ptime
        self.rtcpMux = rtcpMux
        self.srtp = srtp
        self.direction = direction
    }
}

/// One codec we support.
public struct Codec: Sendable, CustomStringConvertible {
    /// The encoding name, for example `opus`; compared ignoring ASCII case.
    public var name: String
    /// The RTP clock rate.
    public var clockRate: UInt32
    /// The number of channels; nil means one (and writes none in `a=rtpmap`).
    public var channels: UInt8?
    /// The payload type to use in our offers: a static one (0 for PCMU), or
    /// the dynamic one we prefer (96–127). A dynamic number already taken in
    /// the session gives way to the lowest free one. Answers always use the
    /// offerer's numbers (RFC 3264 section 6.1).
    public var payloadType: UInt8
    /// The `a=fmtp` parameters we declare (what we want to receive), or nil.
    public var parameters: String?
    /// Decides whether the peer's `a=fmtp` is compatible with ours.
    public var parameterRule: FormatParameterRule

    /// Creates a codec. The parameter rule defaults by name: ``FormatParameterRule/opus``,
    /// ``FormatParameterRule/telephoneEvent``, otherwise ``FormatParameterRule/any``.
    public init(
        name: String, clockRate: UInt32, channels: UInt8? = nil, payloadType: UInt8,
        parameters: String? = nil, parameterRule: FormatParameterRule? = nil
    ) {
        self.name = name
        self.clockRate = clockRate
        self.channels = channels
        self.payloadType = payloadType
        self.parameters = parameters
        switch name.lowercased() {
        case "opus": self.parameterRule = parameterRule ?? .opus
        case "telephone-event": self.parameterRule = parameterRule ?? .telephoneEvent
        default: self.parameterRule = parameterRule ?? .any
        }
    }

    /// `opus/48000/2`, preferred payload type 111, `useinbandfec=1`.
    public static let opus = Codec(name: "opus", clockRate: 48000, channels: 2, payloadType: 111, parameters: "useinbandfec=1")
    /// `PCMU/8000`, static payload type 0.
    public static let pcmu = Codec(name: "PCMU", clockRate: 8000, payloadType: 0)
    /// `PCMA/8000`, static payload type 8.
    public static let pcma = Codec(name: "PCMA", clockRate: 8000, payloadType: 8)
    /// `G722/8000` (the RTP clock rate of G.722 is 8000 by RFC 3551's erratum), static payload type 9.
    public static let g722 = Codec(name: "G722", clockRate: 8000, payloadType: 9)
    /// `telephone-event/8000` (RFC 4733), preferred payload type 101, events `0-16`.
    public static let telephoneEvent = Codec(name: "telephone-event", clockRate: 8000, payloadType: 101, parameters: "0-16")

    /// True for `telephone-event` and comfort noise (`CN`): formats that
    /// accompany a codec but cannot carry a call alone.
    public var isAuxiliary: Bool {
        let lower = name.lowercased()
        return lower == "telephone-event" || lower == "cn"
    }

    /// True for `telephone-event`.
    public var isTelephoneEvent: Bool { name.lowercased() == "telephone-event" }

    /// True when `rtpmap` names this codec: the same name ignoring case, clock
    /// rate and channel count (a missing count is one).
    public func matches(_ rtpmap: RTPMap) -> Bool {
        name.lowercased() == rtpmap.encodingName.lowercased() && clockRate == rtpmap.clockRate
            && (channels ?? 1) == (rtpmap.channels ?? 1)
    }

    /// The `a=rtpmap` for this codec under `payloadType`.
    public func rtpmap(payloadType: UInt8) -> RTPMap {
        RTPMap(payloadType: payloadType, encodingName: name, clockRate: clockRate, channels: channels)
    }

    /// For example `opus/48000/2`.
    public var description: String {
        "\(name)/\(clockRate)" + (channels.map { "/\($0)" } ?? "")
    }
}

/// The result of comparing the peer's `a=fmtp` with ours.
public enum FormatParameterMatch: Hashable, Sendable {
    /// The codec can be used; the answer carries `answerParameters` in its
    /// `a=fmtp` (none when nil).
    case compatible(answerParameters: String?)
    /// The parameters cannot be reconciled; the codec is left out.
    case incompatible
}

/// The hook that reconciles the peer's `a=fmtp` parameters with ours: called
/// with the peer's parameters (nil when it wrote no `a=fmtp`) and ours.
///
/// Built-in rules: ``any``, ``identical``, ``opus``, ``telephoneEvent``; build
/// others with ``init(_:)``.
public struct FormatParameterRule: Sendable {
    /// The reconciliation function: (remote parameters, local parameters) → match.
    public let reconcile: @Sendable (_ remote: String?, _ local: String?) -> FormatParameterMatch

    /// Creates a rule from a function.
    public init(_ reconcile: @escaping @Sendable (_ remote: String?, _ local: String?) -> FormatParameterMatch) {
        self.reconcile = reconcile
    }

    /// Any parameters are compatible; the answer declares ours.
    public static let any = FormatParameterRule { _, local in .compatible(answerParameters: local) }

    /// The peer's parameters must equal ours as sets of `name=value` items
    /// (order, space and name case aside); the answer declares ours.
    public static let identical = FormatParameterRule { remote, local in
        func items(_ text: String?) -> Set<String> {
            Set(FormatParameters(format: "0", parameters: text ?? "").parsedParameters.map {
                $0.name.lowercased() + "=" + ($0.value ?? "")
            })
        }
        return items(remote) == items(local) ? .compatible(answerParameters: local) : .incompatible
    }

    /// Opus (RFC 7587): every parameter declares a receiver preference
    /// (`stereo`, `useinbandfec`, `maxplaybackrate`, …), so any combination
    /// is compatible and the answer declares ours. The peer's parameters
    /// reach the encoder through ``NegotiatedCodec/parameters`` of the send
    /// codec; read them with ``OpusParameters``.
    public static let opus = FormatParameterRule { _, local in .compatible(answerParameters: local) }

    /// telephone-event (RFC 4733): the answer carries the events both sides
    /// support (a missing list means `0-15`); none in common is incompatible.
    public static let telephoneEvent = FormatParameterRule { remote, local in
        func events(_ text: String?) -> TelephoneEvents? {
            guard let text, text.contains(where: { $0 != " " && $0 != "\t" }) else { return TelephoneEvents("0-15") }
            return TelephoneEvents(text)
        }
        guard let theirs = events(remote), let ours = events(local) else {
            return .incompatible
        }
        let common = theirs.intersection(ours)
        return common.isEmpty ? .incompatible : .compatible(answerParameters: common.description)
    }
}

/// A set of RFC 4733 event codes, as written in a telephone-event `a=fmtp`
/// (`0-15`, `0-11,16`).
public struct TelephoneEvents: Hashable, Sendable, CustomStringConvertible {
    /// The event codes.
    public var events: Set<UInt8>

    /// Creates a set of events.
    public init(_ events: Set<UInt8>) { self.events = events }

    /// Parses a list of events and ranges; nil when malformed.
    public init?(_ text: String) {
        var events = Set<UInt8>()
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let part = item.trimmingSpaces
            let bounds = part.split(separator: "-", omittingEmptySubsequences: false)
            guard bounds.count <= 2, let low = UInt8(bounds[0].trimmingSpaces) else { return nil }
            let high = bounds.count == 2 ? UInt8(bounds[1].trimmingSpaces) : low
            guard let high, low <= high else { return nil }
            for event in low...high { events.insert(event) }
        }
        self.events = events
    }

    /// True when no event is in the set.
    public var isEmpty: Bool { events.isEmpty }

    /// The events in both sets.
    public func intersection(_ other: TelephoneEvents) -> TelephoneEvents {
        TelephoneEvents(events.intersection(other.events))
    }

    /// The canonical list: ascending ranges joined by commas, for example `0-11,16`.
    public var description: String {
        let sorted = events.sorted()
        var parts: [String] = []
        var index = 0
        while index < sorted.count {
            var end = index
            while end + 1 < sorted.count, sorted[end + 1] == sorted[end] + 1 { end += 1 }
            parts.append(end == index ? "\(sorted[index])" : "\(sorted[index])-\(sorted[end])")
            index = end + 1
        }
        return parts.joined(separator: ",")
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var text = self
        while text.first == " " || text.first == "\t" { text = text.dropFirst() }
        while text.last == " " || text.last == "\t" { text = text.dropLast() }
        return text
    }
}

/// The Opus `a=fmtp` parameters of RFC 7587 section 6.1 that matter to an
/// encoder, read from a parameter string (unknown ones are ignored).
public struct OpusParameters: Hashable, Sendable {
    /// `stereo=1`: the writer prefers to receive stereo.
    public var stereo: Bool
    /// `sprop-stereo=1`: the writer is likely to send stereo.
    public var spropStereo: Bool
    /// `useinbandfec=1`: the writer can use in-band FEC when decoding.
    public var useInbandFEC: Bool
    /// `usedtx=1`: the writer prefers discontinuous transmission.
    public var useDTX: Bool
    /// `cbr=1`: the writer prefers constant bit rate.
    public var constantBitrate: Bool
    /// `maxplaybackrate`: the highest sample rate the writer renders.
    public var maxPlaybackRate: UInt32?
    /// `maxaveragebitrate`: the highest average bit rate the writer wants.
    public var maxAverageBitrate: UInt32?

    /// Reads the parameters; nil or empty text gives the RFC 7587 defaults
    /// (mono, no FEC, no DTX, variable bit rate).
    public init(_ parameters: String?) {
        let fmtp = FormatParameters(format: "0", parameters: parameters ?? "")
        func flag(_ name: String) -> Bool { fmtp.value(forParameter: name) == "1" }
        stereo = flag("stereo")
        spropStereo = flag("sprop-stereo")
        useInbandFEC = flag("useinbandfec")
        useDTX = flag("usedtx")
        constantBitrate = flag("cbr")
        maxPlaybackRate = fmtp.value(forParameter: "maxplaybackrate").flatMap { UInt32($0) }
        maxAverageBitrate = fmtp.value(forParameter: "maxaveragebitrate").flatMap { UInt32($0) }
    }
}

/// Whether SRTP (SDES, RFC 4568 `a=crypto`) is used.
public enum SRTPPolicy: String, Hashable, Sendable {
    /// No SRTP: offers are `RTP/AVP` without `a=crypto`; `RTP/SAVP` offers are declined.
    case off
    /// Best-effort SRTP: offers are `RTP/AVP` with `a=crypto` (accepted by
    /// baresip, Asterisk, FreeSWITCH and most SDES endpoints; a peer without
    /// SRTP simply ignores the attribute). Answers use SRTP when the offer
    /// has an acceptable `a=crypto`, plain RTP otherwise.
    case optional
    /// SRTP or nothing: offers are `RTP/SAVP` with `a=crypto`; an offer
    /// without an acceptable `a=crypto` (in `RTP/SAVP` or `RTP/AVP`) is declined.
    case mandatory
}

/// One SRTP crypto suite we accept and the key we send with it.
public struct SRTPKey: Hashable, Sendable {
    /// The crypto suite.
    public var suite: CryptoSuite
    /// Our key parameters (`inline:<key||salt>[|lifetime][|MKI:length]`),
    /// one or more; generated by the media layer.
    public var keyParameters: [CryptoAttribute.KeyParameter]

    /// Creates a suite and key from key parameters.
    public init(suite: CryptoSuite, keyParameters: [CryptoAttribute.KeyParameter]) {
        self.suite = suite
        self.keyParameters = keyParameters
    }

    /// Creates a suite and key from the raw master key followed by the master salt.
    public init(suite: CryptoSuite, keySaltBytes: [UInt8], lifetime: CryptoAttribute.Lifetime? = nil, mki: CryptoAttribute.MKI? = nil) {
        self.init(suite: suite, keyParameters: [.init(keySaltBytes: keySaltBytes, lifetime: lifetime, mki: mki)])
    }

    /// Creates a suite and key from the base64 `key||salt` text of an inline key.
    public init(suite: CryptoSuite, inlineKey: String, lifetime: CryptoAttribute.Lifetime? = nil, mki: CryptoAttribute.MKI? = nil) {
        self.init(suite: suite, keyParameters: [.init(keySalt: inlineKey, lifetime: lifetime, mki: mki)])
    }
}

/// The SRTP side of a stream's capabilities.
public struct SRTPCapabilities: Hashable, Sendable {
    /// Off, optional or mandatory.
    public var policy: SRTPPolicy
    /// The suites we accept, in preference order, each with our key. Offers
    /// list them in this order with tags 1, 2, …
    public var keys: [SRTPKey]

    /// Creates SRTP capabilities.
    public init(policy: SRTPPolicy, keys: [SRTPKey] = []) {
        self.policy = policy
        self.keys = keys
    }

    /// No SRTP.
    public static let off = SRTPCapabilities(policy: .off)
}
