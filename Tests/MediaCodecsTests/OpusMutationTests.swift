import SwitchboardTestSupport
import Testing

@testable import MediaCodecs

/// Garbage and mutated Opus payloads decode or fail with a typed error; never a crash, never
/// more samples than the buffer.
@Suite struct OpusMutationTests {
    @Test func garbageNeverCrashesTheDecoder() throws {
        var random = TestRandom(seed: 7)
        let encoder = try OpusEncoder(.init(bitrate: 24000))
        let decoder = try OpusDecoder()
        let input = Signals.speechLike(sampleRate: 48000, count: 960 * 20)
        var packets: [[UInt8]] = []
        for f in 0..<20 { packets.append(try encoder.encode(Array(input[f * 960..<(f + 1) * 960]))) }
        var failures = 0, decoded = 0
        for i in 0..<3000 {
            var payload = packets[i % packets.count]
            switch random.next() % 3 {
            case 0: payload[Int(random.next() % UInt64(payload.count))] ^= UInt8(1 << (random.next() % 8))
            case 1: payload = (0..<Int(random.next() % 1500)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            default: payload.removeLast(Int(random.next() % UInt64(payload.count)))
            }
            do {
                let pcm = try decoder.decode(payload)
                #expect(pcm.count <= decoder.maximumSamplesPerPayload)
                decoded += 1
            } catch {
                guard case .opus(_, let code, _) = error else { Issue.record("unexpected \(error)"); continue }
                #expect(code < 0)
                failures += 1
            }
        }
        #expect(decoded + failures == 3000)
        #expect(failures > 0, "some garbage is refused by libopus")
        // The decoder still works afterwards.
        decoder.reset()
        #expect(try decoder.decode(packets[0]).count == 960)
    }
}
