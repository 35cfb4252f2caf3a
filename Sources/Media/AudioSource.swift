/// Something that produces mono 16-bit audio frame by frame at a fixed rate: a tone, silence,
/// a file. The media session pulls one frame per ptime from it.
public protocol AudioSource: Sendable {
    /// Samples per second of the frames produced.
    var sampleRate: Int { get }
    /// The next `count` samples, or `nil` once the source has ended. The last frame before the
    /// end may be shorter than `count`.
    mutating func nextFrame(count: Int) -> [Int16]?
}

extension ToneGenerator: AudioSource {
    /// The next `count` samples of the tone (a tone never ends).
    public mutating func nextFrame(count: Int) -> [Int16]? { next(count) }
}

/// Digital silence that never ends.
public struct SilenceSource: AudioSource, Hashable {
    /// Samples per second.
    public let sampleRate: Int

    /// Silence at `sampleRate`.
    public init(sampleRate: Int) { self.sampleRate = sampleRate }

    /// `count` zero samples.
    public func nextFrame(count: Int) -> [Int16]? { AudioSamples.silence(count) }
}

/// A deterministic speech-band test signal in integer arithmetic, the benchmarks' input: a
/// ~24 Hz sawtooth, a ~110 Hz triangle in 100 ms envelope steps and LCG noise (48 kHz time
/// base). `Benchmarks/cmedia/cmedia.c`'s `sample_at` computes the same samples, so Swift and C
/// encode identical audio.
public struct SyntheticSignal: AudioSource, Hashable {
    /// Samples per second reported (the waveform itself counts samples, not seconds).
    public let sampleRate: Int
    /// The next sample's index.
    public private(set) var index: UInt64
    private var lcg: UInt64 = 1

    /// The signal from sample `offset` on (the noise sequence starts afresh).
    public init(sampleRate: Int = 48000, offset: UInt64 = 0) {
        self.sampleRate = sampleRate
        index = offset
    }

    /// Sample `i`, advancing the noise generator `lcg` (start it at 1).
    public static func sample(at i: UInt64, _ lcg: inout UInt64) -> Int16 {
        lcg = lcg &* 6364136223846793005 &+ 1442695040888963407
        let saw = Int64((i &* 523) % 2000) - 1000
        var tri = Int64((i &* 37) % 400)
        tri = tri < 200 ? tri - 100 : 300 - tri
        let envelope = Int64((i / 4800) % 10)
        let noise = Int64(lcg >> 54) - 512
        return Int16(clamping: saw * 6 + tri * 40 * envelope / 5 + noise)
    }

    /// The next `count` samples (the signal never ends).
    public mutating func nextFrame(count: Int) -> [Int16]? {
        var out = [Int16](repeating: 0, count: count)
        for k in 0..<count {
            out[k] = Self.sample(at: index, &lcg)
            index &+= 1
        }
        return out
    }
}

/// Plays mono samples held in memory, once or in a loop: the source behind `--play file.wav`.
public struct SamplesSource: AudioSource, Hashable {
    /// Samples per second.
    public let sampleRate: Int
    /// The audio.
    public let samples: [Int16]
    /// Whether playback starts again at the end.
    public let loops: Bool
    /// The next sample to play.
    public private(set) var position = 0

    /// Plays `samples` at `sampleRate`.
    public init(samples: [Int16], sampleRate: Int, loops: Bool = false) {
        self.samples = samples
        self.sampleRate = sampleRate
        self.loops = loops
    }

    /// Plays a 16-bit PCM WAV file at `sampleRate`: channels are mixed down to mono and the
    /// audio is resampled when the rates differ (``Resampler``, whose delay is compensated so
    /// that the audio starts on time). G.711 files must be decoded by the codec first:
    /// ``WAVRule/unsupportedFormat``; an unsupported rate ratio is ``WAVRule/badParameters``.
    public init(_ file: WAVFile, sampleRate: Int, loops: Bool = false) throws(WAVError) {
        guard case .pcm16(let interleaved) = file.samples else {
            throw WAVError(offset: 0, rule: .unsupportedFormat, detail: "G.711 audio must be decoded before it is played")
        }
        var mono: [Int16]
        switch file.channels {
        case 1: mono = interleaved
        case 2: mono = AudioSamples.stereoToMono(interleaved)
        default:
            mono = [Int16](repeating: 0, count: file.frameCount)
            for i in mono.indices {
                var sum = 0
                for c in 0..<file.channels { sum += Int(interleaved[i * file.channels + c]) }
                mono[i] = Int16(clamping: sum / file.channels)
            }
        }
        if file.sampleRate != sampleRate {
            guard var r = Resampler(from: file.sampleRate, to: sampleRate) else {
                throw WAVError(offset: 24, rule: .badParameters, detail: "cannot resample \(file.sampleRate) Hz to \(sampleRate) Hz")
            }
            let skip = Int(r.delay.rounded())
            let expected = Int((Double(mono.count) * Double(sampleRate) / Double(file.sampleRate)).rounded())
            // Flush the filter with silence, then drop its delay.
            var out = r.process(mono)
            out += r.process(AudioSamples.silence(Int((r.delay * 2 + 2) * Double(file.sampleRate) / Double(sampleRate)) + 1))
            mono = Array(out.dropFirst(skip).prefix(expected))
        }
        self.init(samples: mono, sampleRate: sampleRate, loops: loops)
    }

    /// The next `count` samples; `nil` at the end (never when looping a non-empty buffer).
    public mutating func nextFrame(count: Int) -> [Int16]? {
        guard count > 0 else { return [] }
        if position >= samples.count {
            guard loops, !samples.isEmpty else { return nil }
            position = 0
        }
        var out: [Int16] = []
        out.reserveCapacity(count)
        while out.count < count {
            let n = min(count - out.count, samples.count - position)
            out += samples[position..<position + n]
            position += n
            if position == samples.count {
                guard loops else { break }
                position = 0
            }
        }
        return out
    }
}
