import Testing
import SwitchboardTestSupport
import PacketCapture

/// Mutated captures must end in frames, anomalies or a typed error: never a crash or a hang.
@Suite struct RobustnessTests {

    static func seedCaptures() -> [[UInt8]] {
        let u = Build.udp(5070, 5060, Build.sipInvite)
        let frames = [
            Build.ethernet(Build.ipv4(proto: 17, u)),
            Build.ethernet(Build.ipv4(proto: 17, Array(u[0..<128]), id: 3, fragment: (0, true))),
            Build.ethernet(Build.ipv4(proto: 17, Array(u[128...]), id: 3, fragment: (128, false))),
            DecoderTests.ipv6Fragment(Array(u[0..<200]), offset: 0, more: true),
            DecoderTests.ipv6Fragment(Array(u[200...]), offset: 200, more: false),
            Build.ethernet(Build.ipv4(proto: 6, Build.tcp(1, 5060, seq: 10, flags: 0x02))),
            Build.ethernet(Build.ipv4(proto: 6, Build.tcp(1, 5060, seq: 11, flags: 0x18, Build.sipInvite))),
        ]
        var ng = Build.shb(false) + Build.idb(linkType: 1, tsresol: 9, false)
        for (i, f) in frames.enumerated() { ng += Build.epb(interface: 0, ts: UInt64(i) * 1_000_000_000, f, false) }
        ng += Build.spb(frames[0], false)
        return [Build.pcap(frames), ng]
    }

    @Test func mutatedCapturesNeverCrash() {
        var rng = TestRandom(seed: 42)
        var outcomes = (errors: 0, clean: 0)
        for seed in Self.seedCaptures() {
            for _ in 0..<1500 {
                var b = seed
                for _ in 0..<(1 + Int(rng.next() % 4)) {
                    let i = Int(rng.next() % UInt64(b.count))
                    b[i] = UInt8(truncatingIfNeeded: rng.next())
                }
                if rng.next() % 8 == 0 { b.removeLast(Int(rng.next() % UInt64(b.count))) }
                do throws(CaptureFileError) {
                    let s = try CaptureSummary(bytes: b)
                    if s.fileError == nil { outcomes.clean += 1 } else { outcomes.errors += 1 }
                } catch {
                    outcomes.errors += 1
                }
            }
        }
        #expect(outcomes.errors + outcomes.clean == 3000)
    }
}
