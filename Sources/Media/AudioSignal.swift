#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A sine (or a sum of sines) generator with continuous phase across calls, producing 16-bit
/// samples: frames of 20 ms taken one after the other join without a click.
public struct ToneGenerator: Sendable, Hashable {
    /// The frequencies in Hz.
    public let frequencies: [Double]
    /// The peak amplitude of each component, as a fraction of full scale (0…1).
    public let amplitude: Double
    /// Samples per second.
    public let sampleRate: Int
    private var phases: [Double]
    /// Samples generated so far, modulo ``Self/block``: the sine is evaluated exactly at each
    /// block start of the absolute sample count (and at each call's first sample) and rotated in
    /// between (one multiply-add per sample instead of a `sin`); frames that are multiples of the
    /// block give exactly the samples of one long call.
    private var position = 0
    private static let block = 32

    /// A tone of one or more frequencies; each sine has the given peak `amplitude` (the sum is
    /// clipped to full scale).
    public init(frequencies: [Double], amplitude: Double = 0.5, sampleRate: Int) {
        self.frequencies = frequencies
        self.amplitude = min(max(amplitude, 0), 1)
        self.sampleRate = max(1, sampleRate)
        phases = [Double](repeating: 0, count: frequencies.count)
    }

    /// A single-frequency tone.
    public init(frequency: Double, amplitude: Double = 0.5, sampleRate: Int) {
        self.init(frequencies: [frequency], amplitude: amplitude, sampleRate: sampleRate)
    }

    /// The next `count` samples.
    public mutating func next(_ count: Int) -> [Int16] {
        let count = max(0, count)
        var out = [Int16](repeating: 0, count: count)
        guard count > 0 else { return out }
        let scale = amplitude * 32767
        out.withUnsafeMutableBufferPointer { out in
            for (k, f) in frequencies.enumerated() {
                let step = f / Double(sampleRate)
                let (rotationSin, rotationCos) = (sin(2 * Double.pi * step), cos(2 * Double.pi * step))
                var phase = phases[k]
                var at = position
                var (s, c) = (sin(2 * Double.pi * phase), cos(2 * Double.pi * phase))
                for n in 0..<count {
                    if at == 0 && n > 0 {
                        s = sin(2 * Double.pi * phase)
                        c = cos(2 * Double.pi * phase)
                    }
                    let v = Double(out[n]) + scale * s
                    // Rounded half away from zero, as `rounded()`.
                    out[n] = Int16(clamping: Int(v >= 0 ? v + 0.5 : v - 0.5))
                    (s, c) = (s * rotationCos + c * rotationSin, c * rotationCos - s * rotationSin)
                    phase += step
                    if phase >= 1 { phase -= phase.rounded(.down) }
                    at += 1
                    if at == Self.block { at = 0 }
                }
                phases[k] = phase
            }
        }
        position = (position + count) % Self.block
        return out
    }
}

/// Helpers on 16-bit sample buffers: silence, levels, channel layout.
public enum AudioSamples {
    /// `count` zero samples.
    public static func silence(_ count: Int) -> [Int16] { [Int16](repeating: 0, count: max(0, count)) }

    /// The RMS level in dBFS, relative to a full-scale square wave (so a full-scale sine is
    /// −3.01 dBFS); `-infinity` for digital silence or an empty buffer.
    @inlinable
    public static func rmsLevel(_ samples: some Collection<Int16>) -> Double {
        guard !samples.isEmpty else { return -.infinity }
        var sum = 0.0
        for s in samples { sum += Double(s) * Double(s) }
        let rms = (sum / Double(samples.count)).squareRoot()
        return rms > 0 ? 20 * log10(rms / 32768) : -.infinity
    }

    /// The peak level in dBFS (`-infinity` for silence).
    @inlinable
    public static func peakLevel(_ samples: some Collection<Int16>) -> Double {
        var peak = 0
        for s in samples { peak = max(peak, abs(Int(s))) }
        return peak > 0 ? 20 * log10(Double(peak) / 32768) : -.infinity
    }

    /// The mean of the channels of interleaved stereo, rounded.
    public static func stereoToMono(_ interleaved: [Int16]) -> [Int16] {
        var out = [Int16](repeating: 0, count: interleaved.count / 2)
        for i in out.indices {
            let sum = Int(interleaved[2 * i]) + Int(interleaved[2 * i + 1])
            out[i] = Int16(sum >= 0 ? (sum + 1) >> 1 : -((-sum + 1) >> 1))
        }
        return out
    }

    /// Mono copied to both channels, interleaved.
    public static func monoToStereo(_ mono: [Int16]) -> [Int16] {
        var out = [Int16](repeating: 0, count: mono.count * 2)
        for (i, s) in mono.enumerated() {
            out[2 * i] = s
            out[2 * i + 1] = s
        }
        return out
    }

    /// One channel of an interleaved buffer.
    public static func channel(_ index: Int, of interleaved: [Int16], channels: Int) -> [Int16] {
        guard channels > 0, (0..<channels).contains(index) else { return [] }
        return (0..<interleaved.count / channels).map { interleaved[$0 * channels + index] }
    }
}

/// Spectral measurements used to check audio: the Goertzel algorithm at one frequency, and an
/// FFT peak search for the dominant frequency.
public enum ToneAnalysis {
    /// The amplitude of the `frequency` component as a fraction of full scale (a full-scale sine
    /// at that frequency gives ≈ 1). Goertzel over a Hann window, normalized by the window's sum,
    /// so any frequency (not only bin centres) is measured, with little leakage from others.
    @inlinable
    public static func amplitude(of frequency: Double, in samples: some RandomAccessCollection<Int16>, sampleRate: Int) -> Double {
        let n = samples.count
        guard n > 1, sampleRate > 0 else { return 0 }
        let w = 2 * Double.pi * frequency / Double(sampleRate)
        let coefficient = 2 * cos(w)
        var s1 = 0.0, s2 = 0.0, windowSum = 0.0
        // The Hann window's cosine by rotation: (c, s) = (cos θk, sin θk), θ = 2π / (n − 1).
        let theta = 2 * Double.pi / Double(n - 1)
        let (ct, st) = (cos(theta), sin(theta))
        var c = 1.0, s = 0.0
        for sample in samples {
            let win = 0.5 - 0.5 * c
            windowSum += win
            let s0 = Double(sample) / 32768 * win + coefficient * s1 - s2
            s2 = s1
            s1 = s0
            (c, s) = (c * ct - s * st, c * st + s * ct)
        }
        let power = s1 * s1 + s2 * s2 - coefficient * s1 * s2
        return 2 * max(power, 0).squareRoot() / windowSum
    }

    /// ``amplitude(of:in:sampleRate:)`` in dB relative to a full-scale sine.
    @inlinable
    public static func level(of frequency: Double, in samples: some RandomAccessCollection<Int16>, sampleRate: Int) -> Double {
        let a = amplitude(of: frequency, in: samples, sampleRate: sampleRate)
        return a > 0 ? 20 * log10(a) : -.infinity
    }

    /// The strongest frequency in `range`: the peak of a Hann-windowed FFT over the first power
    /// of two of samples (at most 65536), refined by Gaussian interpolation between bins (a
    /// fraction of a bin: ≈ 0.1 Hz at 8 kHz with one second of audio). `nil` when there are fewer
    /// than 64 samples or nothing but silence in the range.
    public static func dominantFrequency(in samples: some RandomAccessCollection<Int16>, sampleRate: Int,
                                         range: ClosedRange<Double> = 20...20000) -> (frequency: Double, amplitude: Double)? {
        guard samples.count >= 64, sampleRate > 0 else { return nil }
        var n = 1
        while n * 2 <= min(samples.count, 65536) { n *= 2 }
        var re = [Double](repeating: 0, count: n)
        var im = [Double](repeating: 0, count: n)
        var k = 0
        for s in samples.prefix(n) {
            re[k] = Double(s) / 32768 * (0.5 - 0.5 * cos(2 * Double.pi * Double(k) / Double(n - 1)))
            k += 1
        }
        fft(&re, &im)
        let binWidth = Double(sampleRate) / Double(n)
        let lo = max(1, Int((range.lowerBound / binWidth).rounded(.up)))
        let hi = min(n / 2 - 2, Int((range.upperBound / binWidth).rounded(.down)))
        guard lo <= hi else { return nil }
        var best = lo
        var bestPower = -1.0
        for b in lo...hi {
            let p = re[b] * re[b] + im[b] * im[b]
            if p > bestPower { bestPower = p; best = b }
        }
        guard bestPower > 0 else { return nil }
        func logMag(_ b: Int) -> Double { 0.5 * log(max(re[b] * re[b] + im[b] * im[b], 1e-300)) }
        let (a, b0, c) = (logMag(best - 1), logMag(best), logMag(best + 1))
        let denominator = a - 2 * b0 + c
        let delta = denominator != 0 ? min(max(0.5 * (a - c) / denominator, -0.5), 0.5) : 0
        let frequency = (Double(best) + delta) * binWidth
        return (frequency, amplitude(of: frequency, in: samples.prefix(n), sampleRate: sampleRate))
    }

    /// In-place iterative radix-2 FFT; `re.count` must be a power of two.
    static func fft(_ re: inout [Double], _ im: inout [Double]) {
        let n = re.count
        var j = 0
        for i in 1..<n {
            var bit = n >> 1
            while j & bit != 0 { j ^= bit; bit >>= 1 }
            j |= bit
            if i < j { re.swapAt(i, j); im.swapAt(i, j) }
        }
        var length = 2
        while length <= n {
            let angle = -2 * Double.pi / Double(length)
            let (wr, wi) = (cos(angle), sin(angle))
            var start = 0
            while start < n {
                var (cr, ci) = (1.0, 0.0)
                for k in 0..<length / 2 {
                    let a = start + k, b = a + length / 2
                    let tr = re[b] * cr - im[b] * ci
                    let ti = re[b] * ci + im[b] * cr
                    re[b] = re[a] - tr; im[b] = im[a] - ti
                    re[a] += tr; im[a] += ti
                    (cr, ci) = (cr * wr - ci * wi, cr * wi + ci * wr)
                }
                start += length
            }
            length <<= 1
        }
    }
}
