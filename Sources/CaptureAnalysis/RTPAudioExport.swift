import PacketCapture
import Media
import MediaCodecs

/// Audio out of a capture's RTP streams (`switchboard capture FILE --audio DIR`): each stream
/// decoded to a mono WAV, and each call to a stereo WAV, one side per channel.
///
/// **Timeline.** A stream's samples are placed by RTP timestamp (relative to its first packet,
/// wraps unrolled), so a lost packet or a timestamp jump leaves silence of exactly the missing
/// length. When the timestamp spacing between two packets disagrees with their capture-time
/// spacing by over a second (a sender that restarted its timestamps), the position is taken
/// from the capture time instead, so that a bogus jump cannot make an hour of silence.
/// Packets are ordered by extended sequence number first (reordering), duplicates dropped.
/// Telephone events and comfort noise are not audio: they are skipped (the time they cover
/// stays silent).
///
/// **Codecs.** PCMU and PCMA (8 kHz) and Opus (decoded at 48 kHz, mono) through MediaCodecs; a
/// stream of another codec is not written. A call's file is at the highest rate of its streams
/// (the others resampled), each side placed at its first packet's capture time relative to
/// the call's first packet. The left channel is the caller's: every stream not sent to the RTP
/// address of the call's first SDP (the offer's, usually the caller's) is mixed into it, the
/// streams sent to that address into the right channel.
public enum RTPAudioExport {
    /// A file written (or not).
    public struct Output: Sendable, Hashable {
        /// The path.
        public var path: String
        /// `stream` or `call`.
        public var kind: String
        /// The stream positions (in ``RTPStreamAnalyzer/streams``) it holds.
        public var streams: [Int]
        /// Its sample rate.
        public var sampleRate: Int
        /// 1 or 2.
        public var channels: Int
        /// Its length in seconds.
        public var seconds: Double
        /// Why it could not be written.
        public var error: String?

        /// `stream 0x1234ABCD, 8000 Hz mono, 3.02 s`.
        public var description: String {
            "\(kind), \(sampleRate) Hz \(channels == 2 ? "stereo" : "mono"), \(CaptureAnalyzer.seconds(Int64(seconds * 1e9), digits: 2)) s"
        }
    }

    /// A stream's decoded audio.
    public struct Track: Sendable {
        /// Samples (mono).
        public var samples: [Int16]
        /// Their rate.
        public var sampleRate: Int
    }

    /// Decodes one stream (``RTPStreamAnalyzer/payloads``); `nil` when it carries no audio
    /// codec this knows.
    public static func decode(_ stream: RTPStreamAnalyzer.Stream, packets: [RTPStreamAnalyzer.PayloadPacket]) -> Track? {
        guard let audio = stream.formats.first(where: { !$0.isTelephoneEvent && !$0.isComfortNoise }) else { return nil }
        let name = audio.name.lowercased()
        let rate: Int
        var law: G711.Law?
        var opus: OpusDecoder?
        switch name {
        case "g711u", "pcmu": rate = 8000; law = .muLaw
        case "g711a", "pcma": rate = 8000; law = .aLaw
        case "opus":
            rate = 48000
            guard let d = try? OpusDecoder(sampleRate: 48000, channels: 1) else { return nil }
            opus = d
        default: return nil
        }
        let clock = audio.clockRate > 0 ? audio.clockRate : rate
        // Order by extended sequence number, drop duplicates.
        var order = packets.indices.filter { packets[$0].payloadType == audio.payloadType }
        order.sort { packets[$0].sequence < packets[$1].sequence }
        var out: [Int16] = []
        out.reserveCapacity(order.count * rate / 50)
        var buffer = [Int16](repeating: 0, count: opus?.maximumSamplesPerPayload ?? 8192)
        var lastSequence: Int64?
        var base: (ts: Int64, time: Int64)?
        var unrolled: Int64 = 0, previousTS: UInt32?
        var previousTime: Int64 = 0
        for i in order {
            let p = packets[i]
            if p.sequence == lastSequence { continue }
            lastSequence = p.sequence
            if let prev = previousTS { unrolled += Int64(Int32(bitPattern: p.timestamp &- prev)) } else { unrolled = 0 }
            previousTS = p.timestamp
            let t = p.time.totalNanoseconds
            if base == nil { base = (unrolled, t); previousTime = t }
            var position = (unrolled - base!.ts) * Int64(rate) / Int64(clock)
            let byTime = (t - base!.time) * Int64(rate) / 1_000_000_000
            // A timestamp jump that the capture time contradicts by over a second: trust the clock.
            let gapTS = position - Int64(out.count), gapTime = (t - previousTime) * Int64(rate) / 1_000_000_000
            if out.count > 0, abs(gapTS - gapTime) > Int64(rate) {
                position = max(Int64(out.count), byTime)
                base = (unrolled - position * Int64(clock) / Int64(rate), base!.time)
            }
            previousTime = t
            guard position >= 0, position < Int64(rate) * 4 * 3600 else { continue }
            var n = 0
            if let law {
                n = p.payload.count
                if buffer.count < n { buffer = [Int16](repeating: 0, count: n) }
                for (k, c) in p.payload.enumerated() { buffer[k] = law == .muLaw ? G711.muLawDecode(c) : G711.aLawDecode(c) }
            } else if opus != nil {
                n = p.payload.withUnsafeBytes { raw in
                    buffer.withUnsafeMutableBufferPointer { pcm in (try? opus!.decode(raw, into: pcm)) ?? 0 }
                }
            }
            let at = Int(position)
            if at > out.count { out.append(contentsOf: repeatElement(0, count: at - out.count)) }
            // Overlap (a late packet of a reordered stream is already ordered; this is a
            // timestamp overlap): later audio overwrites.
            for k in 0..<n {
                if at + k < out.count { out[at + k] = buffer[k] } else { out.append(buffer[k]) }
            }
        }
        return Track(samples: out, sampleRate: rate)
    }

    /// Writes every stream and every call of `analysis` into `directory` (created if missing).
    public static func write(_ analysis: RTPStreamAnalyzer, directory: String) -> [Output] {
        var outputs: [Output] = []
        mkdirs(directory)
        var tracks: [Int: Track] = [:]
        for (i, s) in analysis.streams.enumerated() where i < analysis.payloads.count {
            guard let t = decode(s, packets: analysis.payloads[i]), !t.samples.isEmpty else { continue }
            tracks[i] = t
            let name = "stream-\(i + 1)-\(hex(s.key.ssrc)).wav"
            outputs.append(save(WAVFile(sampleRate: t.sampleRate, channels: 1, samples: .pcm16(t.samples)), path: directory + "/" + name,
                                kind: "stream \(hex(s.key.ssrc)) \(s.key.source) -> \(s.key.destination)", streams: [i]))
        }
        for (n, c) in analysis.calls.enumerated() {
            let withAudio = c.streams.filter { tracks[$0] != nil }
            guard let firstStream = withAudio.min(by: { analysis.streams[$0].first < analysis.streams[$1].first }) else { continue }
            let rate = withAudio.map { tracks[$0]!.sampleRate }.max()!
            let start = analysis.streams[firstStream].first.totalNanoseconds
            // The caller's RTP address is the first the call's SDP announced (the offer's).
            let caller = c.announced.first
            var channels: [[Int32]] = [[], []]
            for i in withAudio {
                var t = tracks[i]!
                if t.sampleRate != rate, var r = Resampler(from: t.sampleRate, to: rate) {
                    t.samples = r.process(t.samples)
                    t.sampleRate = rate
                }
                let side = analysis.streams[i].key.destination == caller ? 1 : 0
                let offset = Int((analysis.streams[i].first.totalNanoseconds - start) * Int64(rate) / 1_000_000_000)
                let end = offset + t.samples.count
                if channels[side].count < end { channels[side].append(contentsOf: repeatElement(0, count: end - channels[side].count)) }
                for (k, v) in t.samples.enumerated() { channels[side][offset + k] += Int32(v) }
            }
            let frames = max(channels[0].count, channels[1].count)
            var interleaved = [Int16](repeating: 0, count: frames * 2)
            for ch in 0..<2 {
                for (k, v) in channels[ch].enumerated() { interleaved[k * 2 + ch] = Int16(clamping: v) }
            }
            let safe = String(c.callID.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "." ? $0 : "_" }.prefix(48))
            outputs.append(save(WAVFile(sampleRate: rate, channels: 2, samples: .pcm16(interleaved)),
                                path: directory + "/call-\(n + 1)-\(safe).wav", kind: "call \(c.callID)", streams: withAudio))
        }
        return outputs
    }

    static func save(_ wav: WAVFile, path: String, kind: String, streams: [Int]) -> Output {
        var o = Output(path: path, kind: kind, streams: streams, sampleRate: wav.sampleRate, channels: wav.channels,
                       seconds: Double(wav.frameCount) / Double(max(wav.sampleRate, 1)), error: nil)
        do { try wav.write(path: path) } catch { o.error = "\(error)" }
        return o
    }

    static func hex(_ v: UInt32) -> String {
        let h = String(v, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: 8 - h.count) + h
    }

    private static func mkdirs(_ path: String) {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for part in path.split(separator: "/") {
            prefix += part + "/"
            _ = mkdir(prefix, 0o755)
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
