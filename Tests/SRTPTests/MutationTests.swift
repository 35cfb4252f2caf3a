import SwitchboardTestSupport
import Testing

@testable import SRTP

/// Seeded garbage and mutations of real packets: every call returns or throws a typed error,
/// nothing forged is delivered, and the counters add up.
@Suite struct SRTPMutationTests {
    @Test(arguments: SRTPProfile.available)
    func mutatedPacketsAreRejectedAndCounted(profile: SRTPProfile) throws {
        var random = TestRandom(seed: 0x5EED_0000 + UInt64(profile.libraryProfile))
        let key = SRTPMasterKey.random(for: profile)
        let sender = try SRTPSession(direction: .outbound, profile: profile, keys: [key])
        let receiver = try SRTPSession(direction: .inbound, profile: profile, keys: [key])
        var attempts: UInt64 = 0, accepted: UInt64 = 0
        for i in 0..<2000 {
            let rtcp = i % 4 == 0
            var packet = rtcp ? Packets.rtcp(tag: UInt8(i % 200)) : Packets.rtp(seq: UInt16(i), payloadSize: Int(random.next() % 200))
            if rtcp { try sender.protectRTCP(&packet) } else { try sender.protectRTP(&packet) }
            let original = packet
            switch random.next() % 4 {
            case 0:  // flip bits
                for _ in 0..<(1 + random.next() % 4) { packet[Int(random.next() % UInt64(packet.count))] ^= UInt8(1 << (random.next() % 8)) }
            case 1:  // truncate
                packet.removeLast(1 + Int(random.next() % UInt64(packet.count)))
            case 2:  // pure garbage of a random length
                packet = (0..<Int(random.next() % 300)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            default:  // append bytes
                packet += (0..<(1 + Int(random.next() % 20))).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            }
            // Two flips of the same bit give the packet back: not a mutation.
            if packet == original { continue }
            attempts += 1
            do {
                if rtcp { try receiver.unprotectRTCP(&packet) } else { try receiver.unprotectRTP(&packet) }
                accepted += 1
            } catch {
                // Every failure is one of the drop reasons.
                switch error {
                case .authenticationFailed, .replayed, .malformedPacket, .unknownMKI: break
                default: Issue.record("unexpected error \(error)")
                }
            }
        }
        let stats = receiver.statistics
        #expect(accepted == 0, "a mutated packet was accepted")
        #expect(stats.rtp.packets + stats.rtcp.packets == accepted)
        #expect(stats.rtp.dropped + stats.rtcp.dropped == attempts - accepted)
        #expect(stats.rtp.authenticationFailures > 0 && stats.rtp.malformed > 0)
    }
}
