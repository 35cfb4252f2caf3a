import Media
import MediaCodecs
import NetworkIO
import RTP
import SDP
import SRTP
import Logging

/// Why a media session could not do what was asked.
public enum MediaSessionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The local address is not a numeric IP address.
    case invalidAddress(String)
    /// No even port pair of the range could be bound.
    case noFreePort(ClosedRange<UInt16>)
    /// A system call failed with `errno`.
    case system(String, errno: Int32)
    /// The negotiated send codec has no implementation here.
    case unsupportedCodec(String)
    /// The codec could not be set up.
    case codec(AudioCodecError)
    /// The negotiated SRTP keys could not be used.
    case srtp(SRTPError)
    /// The sink's WAV file could not be written, or the source's read.
    case wav(WAVError)
    /// Digits asked for while no telephone-event was negotiated, or not sending.
    case dtmfUnavailable(String)
    /// Digits that are not DTMF.
    case dtmf(DTMFError)
    /// The session is stopped, or no media was applied yet.
    case notStarted

    /// A one-line explanation.
    public var description: String {
        switch self {
        case .invalidAddress(let ip): return "media: \(ip) is not a numeric IP address"
        case .noFreePort(let range): return "media: no free even RTP/RTCP port pair in \(range)"
        case .system(let call, let code): return "media: \(call) failed (errno \(code))"
        case .unsupportedCodec(let name): return "media: no codec implementation for \(name)"
        case .codec(let e): return "media: \(e)"
        case .srtp(let e): return "media: SRTP: \(e)"
        case .wav(let e): return "media: \(e)"
        case .dtmfUnavailable(let why): return "media: cannot send DTMF: \(why)"
        case .dtmf(let e): return "media: \(e)"
        case .notStarted: return "media: the session has no negotiated media"
        }
    }
}

/// Where a session's outgoing audio comes from.
public enum MediaAudioInput: Sendable {
    /// Digital silence.
    case silence
    /// A sine tone at `frequency` Hz, amplitude relative to full scale.
    case tone(frequency: Double, amplitude: Double = 0.3)
    /// A PCM WAV file (mixed down to mono), played once (then silence) or looping.
    case wav(path: String, loops: Bool = false)
    /// Any source (frames are resampled to the codec's rate).
    case source(any AudioSource)
    /// What the peer sends, sent back (after decoding, jitter buffering and re-encoding; at most
    /// one second is kept, so the echo delay is bounded).
    case echo
}

/// Where a session's decoded incoming audio goes.
public enum MediaAudioOutput: Sendable {
    /// Nowhere.
    case discard
    /// A 16-bit mono WAV file at `sampleRate`, written as the call goes (closed at ``MediaSession/stop()``).
    case wav(path: String, sampleRate: Int = 8000)
    /// A closure called on the media thread with each played frame (mono, at `sampleRate`);
    /// it must return quickly.
    case callback(sampleRate: Int, @Sendable ([Int16]) -> Void)
}

/// What a media session reports as it runs (delivered on an engine worker thread — the
/// session's own, or one running its late tick — one at a time and in order).
public enum MediaSessionEvent: Sendable, Hashable {
    /// An RFC 4733 event began.
    case dtmfBegan(ReceivedDTMF)
    /// An RFC 4733 event ended (reported exactly once per event).
    case dtmf(ReceivedDTMF)
    /// Symmetric RTP latched onto the peer's actual source address.
    case latched(SocketAddress)
    /// A call-quality warning was raised or cleared.
    case quality(QualityEvent)
    /// The peer sent an RTCP BYE.
    case bye
    /// Nothing (no RTP, no RTCP) came from the peer for this long while the negotiated
    /// direction says it sends (``MediaSessionConfiguration/inactivityTimeout``); reported
    /// once until packets come again.
    case inactive(silentFor: Duration)
    /// Packets came again after ``inactive(silentFor:)``.
    case resumed
}

/// Settings of a media session chosen before the offer/answer.
public struct MediaSessionConfiguration: Sendable {
    /// The numeric local IP address the sockets bind to (and that goes into the SDP).
    public var localAddress: String
    /// Ports to pick from: an even RTP port `p` with RTCP on `p + 1`.
    public var portRange: ClosedRange<UInt16>
    /// Codecs to offer or accept, in preference order (telephone-event included for DTMF).
    public var codecs: [Codec]
    /// Packetization time in milliseconds (used until the peer's `a=ptime` says otherwise).
    public var ptime: UInt32
    /// Whether to offer RTCP multiplexed on the RTP port (RFC 5761).
    public var rtcpMux: Bool
    /// SDES-SRTP policy; keys are generated per session.
    public var srtpPolicy: SRTPPolicy
    /// SRTP suites offered or accepted, in preference order.
    public var srtpProfiles: [SRTPProfile]
    /// Interval between RTCP reports (RFC 3550 suggests 5 s).
    public var rtcpInterval: Duration
    /// Jitter-buffer delay limits.
    public var minJitterDelay: Duration
    /// Largest jitter-buffer delay.
    public var maxJitterDelay: Duration
    /// Opus encoder complexity 0–10 (nil: libopus's default, 10); lower trades quality for CPU.
    public var opusComplexity: Int?
    /// Opus target bitrate in bit/s, 6,000–510,000 (nil: libopus's automatic choice, about 54
    /// kbit/s for 48 kHz mono at 20 ms). The peer's `maxaveragebitrate` still caps it. A server
    /// carrying many calls trades a little quality for CPU here: at complexity 0, 32 kbit/s
    /// (SILK wideband instead of hybrid fullband) encodes for about 0.8× and decodes for about
    /// 0.6× the automatic bitrate's cost.
    public var opusBitrate: Int?
    /// The threads that run the session (``MediaEngine/shared`` unless given).
    public var engine: MediaEngine
    /// Where the session logs (`debug`: started or updated with the codec and peer, stopped with
    /// its counters). A phone gives each call's session a logger carrying the Call-ID. Silent by
    /// default.
    public var logger: Logger
    /// The rules that raise and clear quality warnings (``MediaEvent/quality(_:)``): the
    /// anti-flap defaults, or `QualityMonitor.Thresholds.twilio` for Twilio Voice's rules.
    public var qualityThresholds = QualityMonitor.Thresholds()
    /// How long the peer may send nothing (no RTP, no RTCP) while the negotiated direction says
    /// it sends, before ``MediaSessionEvent/inactive(silentFor:)`` (a dead peer, a NAT binding
    /// gone, a network change); nil never reports. Not counted while the peer holds us
    /// (`sendonly`/`inactive` from its side). A phone ends such a call (``CallEndReason``'s
    /// no-media end); 30 s is what softphones commonly wait.
    public var inactivityTimeout: Duration? = nil

    /// A configuration; defaults: Opus, PCMU, PCMA and telephone-event at 20 ms, no SRTP.
    public init(
        localAddress: String = "127.0.0.1", portRange: ClosedRange<UInt16> = 20000...29999,
        codecs: [Codec] = [.opus, .pcmu, .pcma, .telephoneEvent], ptime: UInt32 = 20, rtcpMux: Bool = false,
        srtpPolicy: SRTPPolicy = .off, srtpProfiles: [SRTPProfile] = [.aesCM128HMACSHA1_80, .aesCM128HMACSHA1_32],
        rtcpInterval: Duration = .seconds(5), minJitterDelay: Duration = .milliseconds(20), maxJitterDelay: Duration = .milliseconds(200),
        opusComplexity: Int? = nil, opusBitrate: Int? = nil, engine: MediaEngine = .shared, logger: Logger = .disabled
    ) {
        self.logger = logger
        self.opusComplexity = opusComplexity
        self.opusBitrate = opusBitrate
        self.engine = engine
        self.localAddress = localAddress
        self.portRange = portRange
        self.codecs = codecs
        self.ptime = ptime
        self.rtcpMux = rtcpMux
        self.srtpPolicy = srtpPolicy
        self.srtpProfiles = srtpProfiles
        self.rtcpInterval = rtcpInterval
        self.minJitterDelay = minJitterDelay
        self.maxJitterDelay = maxJitterDelay
    }
}

/// A media session's counters: the call statistics plus SRTP and DTMF figures.
public struct MediaSessionStatistics: Sendable, Hashable, CustomStringConvertible {
    /// Packets and bytes each way, loss, jitter, RTT, codec, MOS and jitter-buffer counters.
    public var call: CallStatistics
    /// RTP packets refused (wrong payload type, another source while latched, undecodable).
    public var refused: UInt64
    /// SRTP packets dropped (authentication, replay, malformed).
    public var srtpDropped: UInt64
    /// Whether SRTP is in use.
    public var secure: Bool
    /// RTCP packets sent and received.
    public var rtcpSent: UInt64
    /// RTCP packets received.
    public var rtcpReceived: UInt64
    /// DTMF events received.
    public var digitsReceived: String
    /// The 99th percentile of how late the media thread woke for its ptime ticks (0.1 ms
    /// resolution; nil before the first tick).
    public var sendLatenessP99: Duration?
    /// The latest wake-up.
    public var sendLatenessMax: Duration

    /// The statistics of a call whose media moved to a new session (a network change): this
    /// session's figures continuing `earlier`'s. Counts add up (packets and bytes each way,
    /// packets lost, refused, SRTP drops, RTCP, the digits in order) and the latest wake-up is
    /// the later of the two; what describes the present (codec, fraction lost, jitter, RTT,
    /// MOS, jitter buffer, lateness percentile, SRTP in use) is this session's.
    public func continuing(_ earlier: MediaSessionStatistics) -> MediaSessionStatistics {
        var s = self
        s.call.sent.packets += earlier.call.sent.packets
        s.call.sent.bytes += earlier.call.sent.bytes
        s.call.received.packets += earlier.call.received.packets
        s.call.received.bytes += earlier.call.received.bytes
        s.call.packetsLost += earlier.call.packetsLost
        s.refused += earlier.refused
        s.srtpDropped += earlier.srtpDropped
        s.rtcpSent += earlier.rtcpSent
        s.rtcpReceived += earlier.rtcpReceived
        s.digitsReceived = earlier.digitsReceived + digitsReceived
        s.sendLatenessMax = max(earlier.sendLatenessMax, sendLatenessMax)
        return s
    }

    /// One line for logs: codec, packets and bytes each way, loss, jitter, RTT, MOS, jitter buffer, RTCP.
    public var description: String {
        let c = call
        var text = "codec \(c.codec)\(secure ? " (SRTP)" : ""): sent \(c.sent.packets) packets/\(c.sent.bytes) bytes, "
            + "received \(c.received.packets) packets/\(c.received.bytes) bytes, lost \(c.packetsLost), "
            + "jitter \(Self.msText(c.jitter)) ms"
        if let rtt = c.roundTripTime { text += ", RTT \(Self.msText(rtt)) ms" }
        if let mos = c.mos { text += ", MOS " + String(Double(Int(mos * 100)) / 100) }
        if let jb = c.jitterBuffer {
            text += ", jitter buffer \(Self.msText(jb.currentDelay)) ms (late \(jb.late), lost \(jb.lost), concealed \(jb.concealed), dropped \(jb.dropped))"
        }
        text += ", RTCP \(rtcpSent) sent/\(rtcpReceived) received"
        if refused > 0 { text += ", \(refused) refused" }
        if srtpDropped > 0 { text += ", \(srtpDropped) SRTP dropped" }
        if !digitsReceived.isEmpty { text += ", DTMF received \"\(digitsReceived)\"" }
        return text
    }

    /// Milliseconds with one decimal, as in ``description``.
    public static func msText(_ d: Duration) -> String {
        let value = Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
        return String(Double(Int(value * 10)) / 10)
    }
}
