/// The outcome of one completed offer/answer exchange: what the media layer
/// needs to run each stream.
public struct NegotiatedSession: Hashable, Sendable {
    /// The accepted streams, in `m=` line order.
    public var media: [NegotiatedMedia]
    /// The 0-based indices of the `m=` lines declined (port 0) in this exchange.
    public var declined: [Int]

    /// Creates a result.
    public init(media: [NegotiatedMedia], declined: [Int]) {
        self.media = media
        self.declined = declined
    }

    /// The first accepted audio stream.
    public var audio: NegotiatedMedia? { media.first { $0.mediaType == .audio } }
}

/// One codec as negotiated: a payload type number and what it stands for.
public struct NegotiatedCodec: Hashable, Sendable, CustomStringConvertible {
    /// The RTP payload type.
    public var payloadType: UInt8
    /// The encoding name as written in the SDP it came from.
    public var name: String
    /// The RTP clock rate.
    public var clockRate: UInt32
    /// The number of channels (1 when the SDP gave none).
    public var channels: UInt8
    /// The `a=fmtp` parameters that apply: for a send codec, the peer's
    /// (its receiver preferences, which the encoder honours); for a receive
    /// codec, ours. Nil when none were written.
    public var parameters: String?

    /// Creates a negotiated codec.
    public init(payloadType: UInt8, name: String, clockRate: UInt32, channels: UInt8 = 1, parameters: String? = nil) {
        self.payloadType = payloadType
        self.name = name
        self.clockRate = clockRate
        self.channels = channels
        self.parameters = parameters
    }

    /// True for `telephone-event`.
    public var isTelephoneEvent: Bool { name.lowercased() == "telephone-event" }

    /// For example `111 opus/48000/2`.
    public var description: String {
        "\(payloadType) \(name)/\(clockRate)" + (channels == 1 ? "" : "/\(channels)")
    }
}

/// The SRTP keying agreed for one stream (SDES, RFC 4568).
public struct NegotiatedSRTP: Hashable, Sendable {
    /// The suite both sides use.
    public var suite: CryptoSuite
    /// The `a=crypto` tag of the accepted line.
    public var tag: UInt32
    /// Our key parameters: we protect what we send with them.
    public var localKeys: [CryptoAttribute.KeyParameter]
    /// The peer's key parameters (with lifetime and MKI as written): we
    /// unprotect what we receive with them.
    public var remoteKeys: [CryptoAttribute.KeyParameter]

    /// Creates SRTP keying.
    public init(suite: CryptoSuite, tag: UInt32, localKeys: [CryptoAttribute.KeyParameter], remoteKeys: [CryptoAttribute.KeyParameter]) {
        self.suite = suite
        self.tag = tag
        self.localKeys = localKeys
        self.remoteKeys = remoteKeys
    }
}

/// One accepted media stream, seen from our side.
public struct NegotiatedMedia: Hashable, Sendable {
    /// The 0-based index of the `m=` line.
    public var index: Int
    /// The index of the ``StreamCapabilities`` in ``MediaCapabilities/streams`` this stream uses
    /// (and so of the local port the media layer bound).
    public var localStream: Int
    /// The media type.
    public var mediaType: MediaType
    /// The transport protocol of the `m=` line (`RTP/AVP` or `RTP/SAVP`).
    public var proto: TransportProtocol
    /// Where to send RTP: the media-level `c=`, else the session-level one.
    /// `0.0.0.0` (an RFC 2543 hold) is kept as written; ``sends`` is false then.
    public var remoteAddress: String
    /// The remote RTP port.
    public var remoteRTPPort: UInt16
    /// Where to send RTCP: the RTP address with rtcp-mux, else the address
    /// of `a=rtcp` when it has one, else the RTP address.
    public var remoteRTCPAddress: String
    /// The remote RTCP port: the RTP port with rtcp-mux, else `a=rtcp`, else RTP port + 1.
    public var remoteRTCPPort: UInt16
    /// True when both sides agreed to multiplex RTP and RTCP (RFC 5761).
    public var rtcpMux: Bool
    /// The codec to send with: the first codec in common in the peer's
    /// preference order, under the peer's payload type number.
    public var sendCodec: NegotiatedCodec
    /// The codecs we may receive, under the payload type numbers our own
    /// description gave them (telephone-event included).
    public var receiveCodecs: [NegotiatedCodec]
    /// The telephone-event format to send DTMF with: the peer's, at the
    /// clock rate of ``sendCodec`` when it offers that one, else its first.
    public var telephoneEvent: NegotiatedCodec?
    /// The packet time to send with, in milliseconds: the peer's `a=ptime`, else ours.
    public var ptime: Double?
    /// The direction from our side: whether we send and whether we receive.
    public var direction: MediaDirection
    /// True when the peer put the stream on hold: it declared `sendonly` or
    /// `inactive`, or gave `c=0.0.0.0` (RFC 2543 style).
    public var isHeldByRemote: Bool
    /// The SRTP keying, or nil for plain RTP.
    public var srtp: NegotiatedSRTP?

    /// Creates a negotiated stream.
    public init(
        index: Int, localStream: Int, mediaType: MediaType, proto: TransportProtocol, remoteAddress: String,
        remoteRTPPort: UInt16, remoteRTCPAddress: String, remoteRTCPPort: UInt16, rtcpMux: Bool,
        sendCodec: NegotiatedCodec, receiveCodecs: [NegotiatedCodec], telephoneEvent: NegotiatedCodec?,
        ptime: Double?, direction: MediaDirection, isHeldByRemote: Bool, srtp: NegotiatedSRTP?
    ) {
        self.index = index
        self.localStream = localStream
        self.mediaType = mediaType
        self.proto = proto
        self.remoteAddress = remoteAddress
        self.remoteRTPPort = remoteRTPPort
        self.remoteRTCPAddress = remoteRTCPAddress
        self.remoteRTCPPort = remoteRTCPPort
        self.rtcpMux = rtcpMux
        self.sendCodec = sendCodec
        self.receiveCodecs = receiveCodecs
        self.telephoneEvent = telephoneEvent
        self.ptime = ptime
        self.direction = direction
        self.isHeldByRemote = isHeldByRemote
        self.srtp = srtp
    }

    /// True when we send media on this stream.
    public var sends: Bool { direction.sends }
    /// True when we expect media on this stream.
    public var receives: Bool { direction.receives }

    /// The codec we receive under `payloadType`, if it is one we declared.
    public func receiveCodec(forPayloadType payloadType: UInt8) -> NegotiatedCodec? {
        receiveCodecs.first { $0.payloadType == payloadType }
    }
}

extension MediaDirection {
    /// The direction allowed by both: sends only when both send, receives
    /// only when both receive.
    func intersection(_ other: MediaDirection) -> MediaDirection {
        MediaDirection(sends: sends && other.sends, receives: receives && other.receives)
    }

    init(sends: Bool, receives: Bool) {
        switch (sends, receives) {
        case (true, true): self = .sendrecv
        case (true, false): self = .sendonly
        case (false, true): self = .recvonly
        case (false, false): self = .inactive
        }
    }
}
