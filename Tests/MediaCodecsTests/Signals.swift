import Foundation

/// Test signals.
enum Signals {
    /// A sine tone, `count` samples (per channel; interleaved copies when `channels` is 2).
    static func tone(_ frequency: Double, sampleRate: Int, count: Int, amplitude: Double = 8000, channels: Int = 1, phase: Int = 0) -> [Int16] {
        var out: [Int16] = []
        out.reserveCapacity(count * channels)
        for i in 0..<count {
            let t = Double(i + phase) / Double(sampleRate)
            let value = Int16(amplitude * sin(2 * Double.pi * frequency * t))
            for _ in 0..<channels { out.append(value) }
        }
        return out
    }

    /// A speech-like test signal: two tones with a slow amplitude envelope and a little noise.
    static func speechLike(sampleRate: Int, count: Int, channels: Int = 1, seed: UInt64 = 1) -> [Int16] {
        var state = seed
        var out: [Int16] = []
        out.reserveCapacity(count * channels)
        for i in 0..<count {
            let t = Double(i) / Double(sampleRate)
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let noise = Double(Int64(bitPattern: state) >> 40) / Double(1 << 23)
            let envelope = 0.5 + 0.5 * sin(2 * Double.pi * 3 * t)
            let v = envelope * (6000 * sin(2 * Double.pi * 220 * t) + 3000 * sin(2 * Double.pi * 1330 * t)) + 300 * noise
            for c in 0..<channels { out.append(Int16(clamping: Int(c == 0 ? v : v * 0.7))) }
        }
        return out
    }

    /// Signal-to-noise ratio in dB of `test` against `reference` (same length), after finding
    /// the best alignment within `maxLag` samples (codecs add delay).
    static func snr(reference: [Int16], test: [Int16], maxLag: Int = 0) -> (snr: Double, lag: Int) {
        snr(reference: reference, test: test, lags: 0...maxLag)
    }

    /// The same over the given lags.
    static func snr(reference: [Int16], test: [Int16], lags: ClosedRange<Int>) -> (snr: Double, lag: Int) {
        var best = (-Double.infinity, 0)
        for lag in lags {
            var signal = 0.0, noise = 0.0
            let n = min(reference.count, test.count - lag)
            guard n > 0 else { continue }
            for i in 0..<n {
                let r = Double(reference[i]), t = Double(test[i + lag])
                signal += r * r
                noise += (r - t) * (r - t)
            }
            let value = noise == 0 ? Double.infinity : 10 * log10(signal / noise)
            if value > best.0 { best = (value, lag) }
        }
        return best
    }

    /// The power of `frequency` in `samples` (Goertzel), normalized by length.
    static func goertzel(_ samples: [Int16], frequency: Double, sampleRate: Int) -> Double {
        let k = 2 * cos(2 * Double.pi * frequency / Double(sampleRate))
        var s1 = 0.0, s2 = 0.0
        for x in samples {
            let s = Double(x) + k * s1 - s2
            s2 = s1
            s1 = s
        }
        return (s1 * s1 + s2 * s2 - k * s1 * s2) / Double(samples.count * samples.count)
    }
}
