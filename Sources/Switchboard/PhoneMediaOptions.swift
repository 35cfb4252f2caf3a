import Synchronization
import SIPMessage
import SDP
import SIPTransaction
import SIPTransport
import SIPAuth
import SIPDialog
import SIPRuntime
import MediaRuntime
import Media

/// What a ``Phone`` does with media: each call gets a ``MediaSession`` (bound before the offer,
/// its port in the SDP) that plays `input` and records to `recordPath`.
public struct PhoneMediaOptions: Sendable {
    /// Address, port range, SRTP policy, RTCP interval (the codecs are the phone's).
    public var configuration: MediaSessionConfiguration
    /// What each call sends.
    public var input: MediaAudioInput
    /// A WAV file recording what each call receives (the second call's gets `-2` before the
    /// extension, and so on); nil records nothing.
    public var recordPath: String?
    /// The recording's sample rate.
    public var recordRate: Int
    /// Answering: send early media for this long before the 200 (a 183 Session Progress with the
    /// SDP answer instead of 180; reliable when the caller supports 100rel); nil rings as usual,
    /// and so does a call whose INVITE has no offer.
    public var earlyMedia: Duration?
    /// Answering with ``earlyMedia``: what to send before the 200 (a ringback tone, an
    /// announcement), after which ``input`` takes over in the same stream; nil sends ``input``
    /// throughout. Not with ``MediaAudioInput/echo`` as ``input``.
    public var earlyInput: MediaAudioInput?

    /// The session defaults (127.0.0.1, ports 20000–29999, no SRTP) with Twilio Voice's quality
    /// warning rules (`QualityMonitor.Thresholds.twilio`), what users of the voice SDKs expect,
    /// and a 30 s media inactivity timeout (a call whose peer sends nothing that long while it
    /// should ends with ``CallEndReason/noMedia``).
    public static var defaultConfiguration: MediaSessionConfiguration {
        var c = MediaSessionConfiguration()
        c.qualityThresholds = .twilio
        c.inactivityTimeout = .seconds(30)
        return c
    }

    /// Options: a 440 Hz tone, no recording, ``defaultConfiguration``.
    public init(configuration: MediaSessionConfiguration = PhoneMediaOptions.defaultConfiguration, input: MediaAudioInput = .tone(frequency: 440),
                recordPath: String? = nil, recordRate: Int = 8000, earlyMedia: Duration? = nil, earlyInput: MediaAudioInput? = nil) {
        self.configuration = configuration
        self.input = input
        self.recordPath = recordPath
        self.recordRate = recordRate
        self.earlyMedia = earlyMedia
        self.earlyInput = earlyInput
    }

    /// The audio source of an input (for a switch in a running session); nil for
    /// ``MediaAudioInput/echo``, which only a new session can do.
    static func source(_ input: MediaAudioInput) throws(WAVError) -> (any AudioSource)? {
        switch input {
        case .silence: return SilenceSource(sampleRate: 8000)
        case .tone(let f, let a): return ToneGenerator(frequency: f, amplitude: a, sampleRate: 48000)
        case .wav(let path, let loops):
            let file = try WAVFile(path: path)
            return try SamplesSource(file, sampleRate: file.sampleRate, loops: loops)
        case .source(let s): return s
        case .echo: return nil
        }
    }

    func recordPath(forCall index: Int) -> String? {
        guard let path = recordPath else { return nil }
        guard index > 1 else { return path }
        if let dot = path.lastIndex(of: "."), !path[dot...].contains("/") {
            return String(path[..<dot]) + "-\(index)" + String(path[dot...])
        }
        return path + "-\(index)"
    }
}
