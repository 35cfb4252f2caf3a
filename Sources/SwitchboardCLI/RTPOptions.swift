import ArgumentParser
import CaptureAnalysis
import SwitchboardTools

/// `capture --rtp` and `--audio`, and the SRTP keys they decrypt with.
struct RTPOptions: ParsableArguments {
    @Flag(name: .long, help: "The RTP streams (as tshark -z rtp,streams, with MOS, RTCP reports, DTMF digits, silent streams, one-way calls).")
    var rtp = false

    @Option(name: .long, help: "Write each RTP stream (G.711, Opus) and each call (stereo) as WAV files into this directory; lists the streams as --rtp.")
    var audio: String?

    @Option(name: .long, help: "With --rtp or --audio: an SRTP key, SUITE:INLINE-KEY[@HOST:PORT] (the sender it protects; without, every SRTP stream the capture's SDP gives no key). Repeatable.")
    var srtpKey: [String] = []

    @Flag(name: .long, help: "With --rtp or --audio: do not use the a=crypto keys of the capture's SDP (only --srtp-key).")
    var srtpIgnoreSDP = false

    /// Whether the streams are asked for (`--rtp` or `--audio`).
    var wanted: Bool { rtp || audio != nil }

    func validate() throws {
        if (!srtpKey.isEmpty || srtpIgnoreSDP) && !wanted { throw ValidationError("--srtp-key and --srtp-ignore-sdp are only taken with --rtp or --audio") }
        _ = try srtpOptions()
    }

    func srtpOptions() throws -> SRTPCaptureOptions {
        do throws(SRTPCaptureKey.ParseError) {
            return try CaptureCommand.srtpOptions(keys: srtpKey, ignoreSDP: srtpIgnoreSDP)
        } catch {
            throw ValidationError(error.description)
        }
    }
}
