import Testing
@testable import SIPMessage

/// Seeded mutations of real messages: parsing either succeeds or throws a typed error, never
/// traps or hangs; whatever parses serializes to a message that parses again to the same bytes.
@Suite("Robustness under mutated input")
struct RobustnessTests {
    struct LCG {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return state >> 33
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(max(n, 1))) }
    }

    static let interesting: [UInt8] = Array(" \t\r\n:;,<>\"\\@[]%=?&/0123456789".utf8) + [0, 0x7F, 0x80, 0xFF, 0xC3]

    static func mutate(_ input: [UInt8], _ rng: inout LCG) -> [UInt8] {
        var b = input
        for _ in 0..<(1 + rng.below(4)) {
            guard !b.isEmpty else { break }
            switch rng.below(6) {
            case 0: b[rng.below(b.count)] = UInt8(truncatingIfNeeded: rng.next())
            case 1: b[rng.below(b.count)] = interesting[rng.below(interesting.count)]
            case 2: b.removeSubrange(rng.below(b.count)..<b.count)
            case 3: b.insert(interesting[rng.below(interesting.count)], at: rng.below(b.count))
            case 4:
                let s = rng.below(b.count), n = min(b.count - s, rng.below(40))
                b.insert(contentsOf: b[s..<(s + n)], at: rng.below(b.count))
            default:
                let s = rng.below(b.count)
                b.removeSubrange(s..<min(b.count, s + rng.below(20)))
            }
        }
        return b
    }

    @Test func mutatedFixturesNeverCrash() throws {
        let names = listDirectory(Paths.fixtures).filter { $0.hasSuffix(".sip") }
        let inputs = try names.map { try fixture($0) }
        var rng = LCG(state: 0x5EED)
        var parsed = 0, rejected = 0
        for k in 0..<6000 {
            let bytes = Self.mutate(inputs[k % inputs.count], &rng)
            do {
                let m = try SIPMessage(bytes: bytes)
                parsed += 1
                // Exercise every decoder; each must return or throw, never trap.
                _ = try? m.validate()
                _ = try? m.via(); _ = try? m.contact(); _ = try? m.wwwAuthenticate(); _ = try? m.multipartParts()
                _ = try? m.referToReplaces(); _ = try? m.retryAfter(); _ = try? m.rack(); _ = try? m.reason()
                _ = m.topViaBranchBytes; _ = m.fromTagBytes; _ = m.toTagBytes
                let again = try SIPMessage(bytes: m.serialized())
                #expect(again.serialized() == m.serialized())
                let canon = m.serializedCanonically()
                if let c = try? SIPMessage(bytes: canon) {
                    #expect(c.serializedCanonically() == canon)
                } else {
                    Issue.record("canonical form of a parsed message does not parse: \(String(decoding: canon, as: UTF8.self))")
                }
            } catch {
                rejected += 1
                #expect(error.offset >= 0 && error.offset <= bytes.count)
            }
        }
        #expect(parsed > 500 && rejected > 500)
    }

    @Test func mutatedStreamsNeverCrashTheFramer() throws {
        let names = listDirectory(Paths.fixtures).filter { $0.hasSuffix(".sip") }
        let inputs = try names.map { try fixture($0) }
        var rng = LCG(state: 42)
        for k in 0..<1500 {
            var stream: [UInt8] = []
            for j in 0..<3 { stream += Self.mutate(inputs[(k + j) % inputs.count], &rng) }
            for mode in [SIPStreamFramer.Mode.strict, .resynchronizing] {
                var f = SIPStreamFramer(mode: mode)
                var i = 0
                var events = 0
                while i < stream.count {
                    let j = min(stream.count, i + 1 + rng.below(300))
                    f.append(stream[i..<j])
                    i = j
                    do { while try f.next() != nil { events += 1; #expect(events < 10_000) } } catch { break }
                }
                #expect(f.bufferedByteCount <= stream.count)
            }
        }
    }
}
