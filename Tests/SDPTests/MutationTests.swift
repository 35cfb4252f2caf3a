import SDP
import Testing

/// A tiny deterministic pseudo-random generator (64-bit LCG, Knuth's MMIX constants).
struct LCG {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return state >> 16
    }

    /// A value in `0..<bound` (bound > 0).
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}

@Suite("Deterministic mutations")
struct MutationTests {
    /// Bytes that tend to hit parser edge cases.
    static let interesting: [UInt8] = [
        0x00, 0x09, 0x0A, 0x0D, 0x20, 0x2F, 0x3A, 0x3B, 0x3D, 0x7C, 0x5E, 0x2D, 0x2E, 0x30, 0x39, 0x61, 0x6D,
        0x41, 0x7F, 0x80, 0xBF, 0xC0, 0xC3, 0xE2, 0xED, 0xF0, 0xF4, 0xFF,
    ]

    static func mutate(_ input: [UInt8], _ rng: inout LCG) -> [UInt8] {
        var bytes = input
        let rounds = 1 + rng.below(3)
        for _ in 0..<rounds {
            let position = bytes.isEmpty ? 0 : rng.below(bytes.count)
            let randomByte = rng.below(2) == 0
                ? interesting[rng.below(interesting.count)] : UInt8(truncatingIfNeeded: rng.next())
            switch rng.below(9) {
            case 0 where !bytes.isEmpty:  // overwrite a byte
                bytes[position] = randomByte
            case 1 where !bytes.isEmpty:  // flip one bit
                bytes[position] ^= UInt8(1) << UInt8(rng.below(8))
            case 2:  // truncate
                bytes.removeSubrange(position..<bytes.count)
            case 3:  // insert a byte
                bytes.insert(randomByte, at: position)
            case 4 where !bytes.isEmpty:  // delete a run of bytes
                bytes.removeSubrange(position..<min(bytes.count, position + 1 + rng.below(8)))
            case 5 where !bytes.isEmpty:  // duplicate a run of bytes
                let end = min(bytes.count, position + 1 + rng.below(40))
                bytes.insert(contentsOf: Array(bytes[position..<end]), at: position)
            case 6:  // insert a digit string (overflow hunting)
                bytes.insert(contentsOf: Array(repeating: UInt8(0x39), count: 1 + rng.below(25)), at: position)
            case 7:  // swap, duplicate or delete whole lines (order rules)
                var lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map { Array($0) }
                if lines.count > 1 {
                    let a = rng.below(lines.count)
                    let b = rng.below(lines.count)
                    switch rng.below(3) {
                    case 0: lines.swapAt(a, b)
                    case 1: lines.insert(lines[a], at: b)
                    default: lines.remove(at: a)
                    }
                    bytes = Array(lines.joined(separator: [0x0A]))
                }
            default:  // swap two bytes
                if bytes.count > 1 {
                    bytes.swapAt(position, rng.below(bytes.count))
                }
            }
        }
        return bytes
    }

    @Test func mutatedFixturesParseOrFailCleanly() throws {
        let fixtures = try Fixtures.names.map { try Fixtures.bytes($0) }
        try #require(fixtures.count >= 8)
        var rng = LCG(seed: 0x5D9_5EED)
        var accepted = 0
        var rejected = 0
        var rules: Set<String> = []
        for iteration in 0..<2000 {
            let input = Self.mutate(fixtures[rng.below(fixtures.count)], &rng)
            let session: SessionDescription
            do {
                session = try SessionDescription.parse(input)
            } catch {
                rejected += 1
                rules.insert(error.rule.description)
                #expect(error.offset >= 0 && error.offset <= input.count, "iteration \(iteration): \(error)")
                #expect(error.line >= 1, "iteration \(iteration): \(error)")
                continue
            }
            accepted += 1
            let first = session.serialized()
            do {
                let again = try SessionDescription.parse(first)
                #expect(again == session, "iteration \(iteration): parse∘serialize is not a fixed point")
                #expect(again.serialized() == first, "iteration \(iteration): serialization is not stable")
            } catch {
                Issue.record("iteration \(iteration): serialized output does not parse: \(error)")
            }
        }
        // Both outcomes must actually occur for the test to mean something.
        #expect(accepted > 100)
        #expect(rejected > 100)
        #expect(rules.count >= 8, "rules seen: \(rules.sorted())")
    }

    @Test func everyPrefixOfAFixtureParsesOrFailsCleanly() throws {
        let input = try Fixtures.bytes("baresip-opus-srtp-offer.sdp")
        for length in 0...input.count {
            let prefix = Array(input[0..<length])
            do {
                let session = try SessionDescription.parse(prefix)
                #expect(try SessionDescription.parse(session.serialized()) == session)
            } catch {
                #expect(error.offset <= length)
            }
        }
    }

    @Test func randomGarbageNeverCrashes() {
        var rng = LCG(seed: 42)
        for _ in 0..<300 {
            let length = rng.below(200)
            let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            #expect(parseError(bytes) != nil)
        }
    }
}
