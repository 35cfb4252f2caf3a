#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A streaming rational-ratio resampler for 16-bit mono audio (8k ↔ 16k ↔ 48k and the like):
/// a polyphase FIR, i.e. upsampling by L, one Kaiser-windowed sinc low-pass, downsampling by M,
/// computing only the outputs kept.
///
/// The low-pass keeps 0…0.425 × the lower rate (3.4 kHz between 8 and 48 kHz) flat and
/// attenuates from 0.575 × the lower rate on by about 80 dB (Kaiser β = 8), so whatever aliases
/// into the passband is at least 80 dB down. State is kept between calls, so a stream cut into
/// 20 ms frames gives the same output as one call on the whole. The filter delays the signal
/// by ``delay`` output samples, a whole number.
public struct Resampler: Sendable {
    /// The input sample rate.
    public let inputRate: Int
    /// The output sample rate.
    public let outputRate: Int
    private let up: Int
    private let down: Int
    private let tapCount: Int
    /// The polyphase sub-filters, one per phase, each reversed and zero-padded at the front to
    /// ``phaseLength``, laid end to end: output = dot(phase filter, the last phaseLength inputs).
    private let phases: [Float]
    private let phaseLength: Int
    private var history: [Float]
    private var historyStart: Int  // absolute input index of history[0]
    private var consumed = 0  // inputs received
    private var produced = 0  // outputs produced

    /// A resampler between two rates whose ratio reduces to L/M with L, M ≤ 480 (any pair
    /// of the usual rates); `nil` otherwise.
    public init?(from inputRate: Int, to outputRate: Int) {
        guard inputRate > 0, outputRate > 0 else { return nil }
        func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }
        let g = gcd(inputRate, outputRate)
        up = outputRate / g
        down = inputRate / g
        guard up <= 480, down <= 480 else { return nil }
        self.inputRate = inputRate
        self.outputRate = outputRate
        // Design at the upsampled rate U = L × input.
        let u = Double(inputRate * up)
        let lower = Double(min(inputRate, outputRate))
        let cutoff = 0.5 * lower / u  // cycles per upsampled sample
        let transition = 0.15 * lower / u
        let beta = 8.0
        var n = Int((80 - 7.95) / (2.285 * 2 * Double.pi * transition)) + 1
        // An odd length whose half (the delay, in upsampled samples) is a whole number of
        // output samples, so that ``delay`` is an integer and can be compensated exactly.
        n = (max(n, 3) - 1 + 2 * down - 1) / (2 * down) * (2 * down) + 1
        func i0(_ x: Double) -> Double {
            var sum = 1.0, term = 1.0, k = 1.0
            while term > 1e-12 * sum {
                term *= (x / (2 * k)) * (x / (2 * k))
                sum += term
                k += 1
            }
            return sum
        }
        var h = [Float](repeating: 0, count: n)
        let mid = Double(n - 1) / 2
        for j in 0..<n {
            let t = Double(j) - mid
            let sinc = t == 0 ? 2 * cutoff : sin(2 * Double.pi * cutoff * t) / (Double.pi * t)
            let r = t / mid
            let window = i0(beta * (1 - r * r).squareRoot()) / i0(beta)
            h[j] = Float(sinc * window * Double(up))
        }
        tapCount = n
        let length = (n + up - 1) / up
        phaseLength = length
        var flat = [Float](repeating: 0, count: up * length)
        for phase in 0..<up {
            // Taps phase, phase + up, … multiply inputs m0, m0 − 1, …: reversed, they line up
            // with the inputs m0 − length + 1 … m0 in order.
            var i = 0
            while phase + up * i < n {
                flat[phase * length + length - 1 - i] = h[phase + up * i]
                i += 1
            }
        }
        phases = flat
        history = [Float](repeating: 0, count: length)  // silence before the stream
        historyStart = -length
    }

    /// The filter's delay in output samples.
    public var delay: Double { Double(tapCount - 1) / 2 / Double(down) }

    /// Resamples the next piece of the stream.
    public mutating func process(_ input: [Int16]) -> [Int16] {
        history.reserveCapacity(history.count + input.count)
        for s in input { history.append(Float(s)) }
        consumed += input.count
        // Outputs k whose newest input, k × down / up, has arrived.
        let total = consumed == 0 ? 0 : (consumed * up - 1) / down + 1
        let count = max(0, total - produced)
        var out = [Int16](repeating: 0, count: count)
        let length = phaseLength
        let base = historyStart
        var k = produced
        phases.withUnsafeBufferPointer { filters in
            history.withUnsafeBufferPointer { x in
                out.withUnsafeMutableBufferPointer { o in
                    for slot in 0..<count {
                        let t = k * down
                        let newest = t / up
                        let f = filters.baseAddress! + (t - newest * up) * length
                        let v = x.baseAddress! + (newest - length + 1 - base)
                        var a0: Float = 0, a1: Float = 0, a2: Float = 0, a3: Float = 0
                        var j = 0
                        while j + 4 <= length {
                            a0 += f[j] * v[j]
                            a1 += f[j + 1] * v[j + 1]
                            a2 += f[j + 2] * v[j + 2]
                            a3 += f[j + 3] * v[j + 3]
                            j += 4
                        }
                        while j < length {
                            a0 += f[j] * v[j]
                            j += 1
                        }
                        o[slot] = Int16(clamping: Int(((a0 + a1) + (a2 + a3)).rounded()))
                        k += 1
                    }
                }
            }
        }
        produced = k
        // Keep the inputs the next output can still need.
        let oldestNeeded = (produced * down) / up - length + 1
        let drop = min(max(0, oldestNeeded - historyStart), history.count)
        if drop > 0 {
            history.removeFirst(drop)
            historyStart += drop
        }
        return out
    }
}
