import Testing
@testable import RTP

/// Seeded mutations of every hand-built vector: parsing never traps, and whatever parses
/// serializes to bytes that parse to the same value.
@Suite struct MutationTests {
    static var seeds: [[UInt8]] {
        [
            hex("80 08 12 34 00 00 03 e8 de ad be ef 01 02 03"),
            hex("A2 E0 00 01 00 00 00 10 11 22 33 44 00 00 00 01 00 00 00 02 AA BB 00 00 03"),
            hex("90 60 00 05 00 00 00 00 00 00 00 01 BE DE 00 02 10 AB 21 CD EF 00 00 00 FF"),
            hex("90 60 00 06 00 00 00 00 00 00 00 01 10 03 00 02 05 00 07 03 01 02 03 00 42"),
            hex("90 00 00 07 00 00 00 00 00 00 00 01 12 34 00 01 DE AD BE EF"),
            hex(RTCPTests.srHex + RTCPTests.sdesHex + RTCPTests.xrHex + RTCPTests.byeHex),
            hex(RTCPTests.rrHex + RTCPTests.appHex + RTCPTests.fbHex),
            hex("80 C9 00 01 00 00 00 01 A1 CB 00 02 00 00 00 01 00 00 00 04"),
        ]
    }

    func check(_ bytes: [UInt8]) {
        if let p = try? RTPPacket(parsing: bytes) {
            guard let out = p.serialized() else {
                Issue.record("parsed RTP packet does not serialize: \(bytes)")
                return
            }
            #expect((try? RTPPacket(parsing: out)) == p)
        }
        for strict in [true, false] {
            if let c = try? RTCPCompoundPacket(parsing: bytes, requireLeadingReport: strict) {
                guard let out = c.serialized() else {
                    Issue.record("parsed RTCP does not serialize: \(bytes)")
                    return
                }
                #expect((try? RTCPCompoundPacket(parsing: out, requireLeadingReport: strict)) == c)
            }
        }
        _ = RTPDemultiplexer.classify(bytes)
    }

    @Test func mutatedInputsNeverTrap() {
        var rng = SplitMix64(seed: 0x5EED)
        var parsed = 0
        for seed in Self.seeds {
            for _ in 0..<3000 {
                var b = seed
                let edits = 1 + Int(rng.next() % 4)
                for _ in 0..<edits {
                    switch rng.next() % 5 {
                    case 0, 1:
                        if !b.isEmpty { b[Int(rng.next() % UInt64(b.count))] = UInt8(truncatingIfNeeded: rng.next()) }
                    case 2:
                        if !b.isEmpty { b.removeLast(Int(rng.next() % UInt64(b.count))) }
                    case 3:
                        b.insert(UInt8(truncatingIfNeeded: rng.next()), at: Int(rng.next() % UInt64(b.count + 1)))
                    default:
                        if !b.isEmpty { b[Int(rng.next() % UInt64(b.count))] ^= UInt8(1) << (rng.next() % 8) }
                    }
                }
                check(b)
                if (try? RTPPacket(parsing: b)) != nil || (try? RTCPCompoundPacket(parsing: b, requireLeadingReport: false)) != nil { parsed += 1 }
            }
        }
        #expect(parsed > 1000)  // the mutations exercise the success paths too
    }

    @Test func randomBytesNeverTrap() {
        var rng = SplitMix64(seed: 12345)
        for _ in 0..<20_000 {
            let n = Int(rng.next() % 80)
            var b = (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            if !b.isEmpty { b[0] = 0x80 | (b[0] & 0x3F) }  // mostly version 2
            check(b)
        }
    }
}
