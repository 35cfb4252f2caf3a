import Foundation
import RTP
import SDP
import SwitchboardTestSupport
import Testing

@testable import SRTP

/// RTP and RTCP packets for the tests.
enum Packets {
    static func rtp(seq: UInt16, ssrc: UInt32 = 0x1234_5678, payloadSize: Int = 160, fill: UInt8 = 0xA5) -> [UInt8] {
        var payload = [UInt8](repeating: fill, count: payloadSize)
        for i in 0..<min(payloadSize, 2) { payload[i] = UInt8(truncatingIfNeeded: Int(seq) >> (8 * i)) }
        return RTPPacket(payloadType: 0, sequenceNumber: seq, timestamp: UInt32(seq) &* 160, ssrc: ssrc, payload: payload[...]).serialized()!
    }

    /// An RTCP receiver report with no report blocks, plus an SDES CNAME chunk.
    static func rtcp(ssrc: UInt32 = 0x1234_5678, tag: UInt8 = 0) -> [UInt8] {
        let s = [UInt8(ssrc >> 24), UInt8((ssrc >> 16) & 0xFF), UInt8((ssrc >> 8) & 0xFF), UInt8(ssrc & 0xFF)]
        let rr: [UInt8] = [0x80, 201, 0x00, 0x01] + s
        // SDES: one chunk, CNAME "sb-<tag>" (6 bytes) + end, padded to a word: 4 + 4 + 2 + 6 + 1 → 20 bytes.
        let cname: [UInt8] = Array("sb-\(tag)xx".utf8.prefix(6))
        let chunk: [UInt8] = s + [1, UInt8(cname.count)] + cname + [0, 0, 0, 0]
        let sdes: [UInt8] = [0x81, 202, 0x00, UInt8(chunk.count / 4)] + chunk
        return rr + sdes
    }
}

@Suite struct SRTPTests {
    static let profiles = SRTPProfile.available

    @Test func theMandatorySuitesAreAvailable() {
        #expect(SRTPProfile.available.contains(.aesCM128HMACSHA1_80))
        #expect(SRTPProfile.available.contains(.aesCM128HMACSHA1_32))
        #expect(SRTPLibrary.version.hasPrefix("libsrtp2"))
    }

    /// AES-CM and HMAC-SHA1 come from OpenSSL unless SWITCHBOARD_SRTP_CRYPTO=libsrtp asks for the
    /// library's own (scripts/test runs this suite both ways; pylibsrtp's byte-for-byte comparison
    /// covers each). The replacements passed libsrtp2's self-test, or they would not be in use.
    @Test func theCryptoInUseIsTheOneAskedFor() throws {
        let asked = ProcessInfo.processInfo.environment["SWITCHBOARD_SRTP_CRYPTO"]
        #expect(SRTPCrypto.current == (asked == "libsrtp" ? .library : .openSSL))
        // And it protects: a packet out and back (the first stream allocates the types in use).
        let key = SRTPMasterKey.random(for: .aesCM128HMACSHA1_80)
        let sender = try SRTPSession(direction: .outbound, profile: .aesCM128HMACSHA1_80, keys: [key])
        let receiver = try SRTPSession(direction: .inbound, profile: .aesCM128HMACSHA1_80, keys: [key])
        let plain = Packets.rtp(seq: 7)
        var packet = plain
        try sender.protectRTP(&packet)
        #expect(packet.count == plain.count + 10 && packet[12...] != plain[12...])
        try receiver.unprotectRTP(&packet)
        #expect(packet == plain)
    }

    @Test(arguments: SRTPProfile.available)
    func protectAndUnprotectRTPAndRTCP(profile: SRTPProfile) throws {
        let key = SRTPMasterKey.random(for: profile)
        let sender = try SRTPSession(direction: .outbound, profile: profile, keys: [key])
        let receiver = try SRTPSession(direction: .inbound, profile: profile, keys: [key])
        for seq in UInt16(100)..<120 {
            let plain = Packets.rtp(seq: seq)
            var packet = plain
            try sender.protectRTP(&packet)
            #expect(packet.count == plain.count + profile.rtpTagLength)
            #expect(packet[0..<12] == plain[0..<12], "the header stays in the clear")
            #expect(packet[12..<plain.count] != plain[12...], "the payload is encrypted")
            try receiver.unprotectRTP(&packet)
            #expect(packet == plain)
            let parsed = try RTPPacket(parsing: packet)
            #expect(parsed.sequenceNumber == seq)
        }
        let plainRTCP = Packets.rtcp()
        var rtcp = plainRTCP
        try sender.protectRTCP(&rtcp)
        #expect(rtcp.count == plainRTCP.count + 4 + profile.rtcpTagLength)
        // The E flag (encrypted) leads the SRTCP index: before the tag, or last with AEAD (RFC 7714 §9).
        #expect(rtcp[profile.isAEAD ? rtcp.count - 4 : rtcp.count - profile.rtcpTagLength - 4] & 0x80 != 0)
        try receiver.unprotectRTCP(&rtcp)
        #expect(rtcp == plainRTCP)
        #expect(sender.statistics.rtp.packets == 20 && receiver.statistics.rtp.packets == 20)
        #expect(receiver.statistics.rtcp.packets == 1 && receiver.statistics.rtp.bytes == UInt64(20 * (12 + 160)))
    }

    @Test(arguments: SRTPProfile.available)
    func forgeriesAndReplaysAreDroppedAndCounted(profile: SRTPProfile) throws {
        let key = SRTPMasterKey.random(for: profile)
        let sender = try SRTPSession(direction: .outbound, profile: profile, keys: [key])
        let receiver = try SRTPSession(direction: .inbound, profile: profile, keys: [key])
        var first = Packets.rtp(seq: 1)
        try sender.protectRTP(&first)
        var copy = first
        try receiver.unprotectRTP(&copy)
        // The same packet again: a replay.
        copy = first
        #expect(throws: SRTPError.replayed) { try receiver.unprotectRTP(&copy) }
        // One flipped bit in the payload, in the tag, in the header.
        for position in [20, first.count - 1, 3] {
            var packet = Packets.rtp(seq: UInt16(10 + position))
            try sender.protectRTP(&packet)
            packet[position] ^= 0x01
            #expect(throws: SRTPError.authenticationFailed) { try receiver.unprotectRTP(&packet) }
        }
        // The wrong key.
        let stranger = try SRTPSession(direction: .inbound, profile: profile, keys: [.random(for: profile)])
        var other = Packets.rtp(seq: 50)
        try sender.protectRTP(&other)
        #expect(throws: SRTPError.authenticationFailed) { try stranger.unprotectRTP(&other) }
        // A forged RTCP packet.
        var rtcp = Packets.rtcp()
        try sender.protectRTCP(&rtcp)
        rtcp[9] ^= 0x40
        #expect(throws: SRTPError.authenticationFailed) { try receiver.unprotectRTCP(&rtcp) }
        // Malformed input never reaches libsrtp.
        var short: [UInt8] = [0x80, 0x00, 0x00]
        #expect(throws: SRTPError.self) { try receiver.unprotectRTP(&short) }
        var headerOnly = Array(Packets.rtp(seq: 99)[0..<12])
        #expect(throws: SRTPError.self) { try receiver.unprotectRTP(&headerOnly) }
        var version1: [UInt8] = [0x40] + [UInt8](repeating: 0, count: 40)
        #expect(throws: SRTPError.self) { try receiver.unprotectRTP(&version1) }
        var csrcOverflow: [UInt8] = [0x8F] + [UInt8](repeating: 0, count: 40)  // 15 CSRCs = 72 bytes of header
        #expect(throws: SRTPError.self) { try receiver.unprotectRTP(&csrcOverflow) }
        let stats = receiver.statistics
        #expect(stats.rtp.replayed == 1)
        #expect(stats.rtp.authenticationFailures == 3)
        #expect(stats.rtcp.authenticationFailures == 1)
        #expect(stats.rtp.malformed == 4)
        #expect(stats.rtp.packets == 1)
        #expect(stranger.statistics.rtp.authenticationFailures == 1)
        // Directions are enforced.
        var p = Packets.rtp(seq: 200)
        #expect(throws: SRTPError.wrongDirection) { try receiver.protectRTP(&p) }
        #expect(throws: SRTPError.wrongDirection) { try sender.unprotectRTP(&p) }
        #expect(p == Packets.rtp(seq: 200), "a failed call leaves the packet as it was")
    }

    @Test func bufferAPIChecksRoomForTheTrailer() throws {
        let profile = SRTPProfile.aesCM128HMACSHA1_80
        let key = SRTPMasterKey.random(for: profile)
        let sender = try SRTPSession(direction: .outbound, profile: profile, keys: [key])
        let plain = Packets.rtp(seq: 7)
        var small = plain + [UInt8](repeating: 0, count: 20)
        #expect(throws: SRTPError.bufferTooSmall(needed: plain.count + SRTPSession.maximumTrailerLength, available: small.count)) {
            _ = try small.withUnsafeMutableBytes { try sender.protectRTP(buffer: $0, length: plain.count) }
        }
        var big = plain + [UInt8](repeating: 0, count: SRTPSession.maximumTrailerLength)
        let length = try big.withUnsafeMutableBytes { try sender.protectRTP(buffer: $0, length: plain.count) }
        #expect(length == plain.count + 10)
    }

    @Test func severalKeysWithMKIs() throws {
        let profile = SRTPProfile.aesCM128HMACSHA1_80
        let keys = [
            SRTPMasterKey.random(for: profile, mki: .init(value: 1, length: 4)),
            SRTPMasterKey.random(for: profile, mki: .init(value: 2, length: 4)),
        ]
        let sender = try SRTPSession(direction: .outbound, profile: profile, keys: keys)
        let receiver = try SRTPSession(direction: .inbound, profile: profile, keys: keys)
        for (seq, index) in [(UInt16(1), 0), (2, 1), (3, 0)] {
            let plain = Packets.rtp(seq: seq)
            var packet = plain
            try sender.protectRTP(&packet, mkiIndex: index)
            #expect(packet.count == plain.count + 4 + 10)
            // The MKI sits between the encrypted payload and the tag (RFC 3711 §3.1).
            #expect(Array(packet[plain.count..<plain.count + 4]) == keys[index].mkiBytes)
            try receiver.unprotectRTP(&packet)
            #expect(packet == plain)
        }
        // A receiver holding only the first key rejects the second key's packets.
        let partial = try SRTPSession(direction: .inbound, profile: profile, keys: [keys[0]])
        var packet = Packets.rtp(seq: 9)
        try sender.protectRTP(&packet, mkiIndex: 1)
        #expect(throws: SRTPError.self) { try partial.unprotectRTP(&packet) }
        #expect(partial.statistics.rtp.dropped == 1)
        // Key sets that cannot work.
        #expect(throws: SRTPError.self) { try SRTPSession(direction: .outbound, profile: profile, keys: [keys[0], .random(for: profile)]) }
        #expect(throws: SRTPError.self) { try SRTPSession(direction: .outbound, profile: profile, keys: [keys[0], keys[0]]) }
        #expect(throws: SRTPError.self) { try SRTPSession(direction: .outbound, profile: profile, keys: []) }
        #expect(throws: SRTPError.self) {
            try SRTPSession(direction: .outbound, profile: profile, keys: [SRTPMasterKey(key: [1, 2, 3], salt: [4])])
        }
        #expect(throws: SRTPError.self) { try SRTPSession(direction: .outbound, profile: profile, keys: [keys[0]], replayWindow: 10) }
    }

    @Test func keyLifetimeIsEnforcedOnSending() throws {
        let profile = SRTPProfile.aesCM128HMACSHA1_80
        let sender = try SRTPSession(direction: .outbound, profile: profile, keys: [.random(for: profile, lifetime: .packets(3))])
        for seq in UInt16(1)...3 {
            var p = Packets.rtp(seq: seq)
            try sender.protectRTP(&p)
        }
        var p = Packets.rtp(seq: 4)
        #expect(throws: SRTPError.keyLifetimeExhausted) { try sender.protectRTP(&p) }
        #expect(sender.statistics.rtp.otherFailures == 1)
        // A new key resets the count.
        try sender.rekey(keys: [.random(for: profile, lifetime: .powerOfTwo(20))])
        try sender.protectRTP(&p)
    }

    /// Re-keying keeps the rollover counter: after the sequence number wraps (ROC 1), both sides
    /// re-key and the stream goes on; a fresh receiver with the new key (ROC 0) cannot follow.
    @Test(arguments: SRTPProfile.available)
    func rekeyingKeepsTheRolloverCounter(profile: SRTPProfile) throws {
        let ssrc: UInt32 = 0xCAFE_F00D
        let first = SRTPMasterKey.random(for: profile)
        let sender = try SRTPSession(direction: .outbound, profile: profile, keys: [first])
        let receiver = try SRTPSession(direction: .inbound, profile: profile, keys: [first])
        var seq: UInt16 = 65000
        for _ in 0..<1000 {
            var p = Packets.rtp(seq: seq, ssrc: ssrc)
            try sender.protectRTP(&p)
            try receiver.unprotectRTP(&p)
            seq &+= 1
        }
        #expect(sender.rolloverCounter(ssrc: ssrc) == 1)
        #expect(receiver.rolloverCounter(ssrc: ssrc) == 1)
        #expect(receiver.rolloverCounter(ssrc: 42) == nil)
        let second = SRTPMasterKey.random(for: profile)
        try sender.rekey(keys: [second])
        try receiver.rekey(keys: [second])
        let fresh = try SRTPSession(direction: .inbound, profile: profile, keys: [second])
        for _ in 0..<10 {
            let plain = Packets.rtp(seq: seq, ssrc: ssrc)
            var p = plain
            try sender.protectRTP(&p)
            var q = p
            try receiver.unprotectRTP(&p)
            #expect(p == plain)
            #expect(throws: SRTPError.authenticationFailed) { try fresh.unprotectRTP(&q) }
            seq &+= 1
        }
        #expect(sender.rolloverCounter(ssrc: ssrc) == 1 && receiver.rolloverCounter(ssrc: ssrc) == 1)
        // Replays after the re-key are refused; packets captured before it carry the old key
        // and fail authentication (libsrtp restarts the window's bitmap at the re-key, keeping
        // its index).
        var again = Packets.rtp(seq: seq, ssrc: ssrc)
        try sender.protectRTP(&again)
        var replay = again
        try receiver.unprotectRTP(&again)
        #expect(throws: SRTPError.replayed) { try receiver.unprotectRTP(&replay) }
        seq &+= 1

        // Joining a stream whose ROC is known out of band: a receiver whose stream for the SSRC
        // was started at ROC 0 cannot follow the ROC-1 sender, until told the ROC (libsrtp
        // applies it to the next packet received).
        let late = try SRTPSession(direction: .inbound, profile: profile, keys: [second])
        let starter = try SRTPSession(direction: .outbound, profile: profile, keys: [second])
        var start = Packets.rtp(seq: seq &- 20, ssrc: ssrc)
        try starter.protectRTP(&start)
        try late.unprotectRTP(&start)
        #expect(late.rolloverCounter(ssrc: ssrc) == 0)
        var next = Packets.rtp(seq: seq, ssrc: ssrc)
        try sender.protectRTP(&next)
        var copy = next
        #expect(throws: SRTPError.authenticationFailed) { try late.unprotectRTP(&copy) }
        try late.setRolloverCounter(1, ssrc: ssrc)
        try late.unprotectRTP(&next)
        #expect(late.rolloverCounter(ssrc: ssrc) == 1)
        #expect(throws: SRTPError.self) { try late.setRolloverCounter(1, ssrc: 99) }
    }

    @Test func inlineKeysParseAndSerialize() throws {
        let line = "1 AES_CM_128_HMAC_SHA1_80 inline:PS1uQCVeeCFCanVmcjkpPywjNWhcYD0mXXtxaVBR|2^20|1:4"
        let crypto = try #require(CryptoAttribute(attributeValue: line))
        let parameters = try crypto.srtpParameters()
        #expect(parameters.profile == .aesCM128HMACSHA1_80)
        #expect(parameters.keys.count == 1 && parameters.replayWindow == nil)
        let key = parameters.keys[0]
        #expect(key.key.count == 16 && key.salt.count == 14)
        #expect(key.lifetime == .powerOfTwo(20) && key.mki == .init(value: 1, length: 4))
        #expect(key.mkiBytes == [0, 0, 0, 1])
        #expect(key.keyParameter.description == "inline:PS1uQCVeeCFCanVmcjkpPywjNWhcYD0mXXtxaVBR|2^20|1:4")
        #expect(CryptoAttribute(tag: 1, profile: .aesCM128HMACSHA1_80, keys: [key]).attributeValue == line)
        #expect(!key.description.contains("PS1u"), "descriptions never show the key")
        // A session from the line, with WSH as the replay window.
        let wsh = try #require(CryptoAttribute(attributeValue: line + " WSH=128 KDR=0"))
        #expect(try wsh.srtpParameters().replayWindow == 128)
        _ = try SRTPSession(direction: .inbound, crypto: wsh)
    }

    @Test func unusableCryptoLinesAreTypedErrors() throws {
        func parse(_ text: String) throws -> CryptoAttribute { try #require(CryptoAttribute(attributeValue: text)) }
        let good = "inline:PS1uQCVeeCFCanVmcjkpPywjNWhcYD0mXXtxaVBR"
        #expect(throws: SRTPError.unsupportedSuite("F8_128_HMAC_SHA1_80")) { try parse("1 F8_128_HMAC_SHA1_80 \(good)").srtpParameters() }
        #expect(throws: SRTPError.self) { try parse("1 AEAD_AES_128_GCM \(good)").srtpParameters() }  // 30 bytes, GCM needs 28
        #expect(throws: SRTPError.unsupportedSessionParameter("UNENCRYPTED_SRTP")) {
            try parse("1 AES_CM_128_HMAC_SHA1_80 \(good) UNENCRYPTED_SRTP").srtpParameters()
        }
        #expect(throws: SRTPError.unsupportedSessionParameter("KDR=4")) { try parse("1 AES_CM_128_HMAC_SHA1_80 \(good) KDR=4").srtpParameters() }
        #expect(throws: SRTPError.self) { try parse("1 AES_CM_128_HMAC_SHA1_80 \(good)|1:1;\(good)|1:1").srtpParameters() }  // repeated MKI
        #expect(throws: SRTPError.self) { try parse("1 AES_CM_128_HMAC_SHA1_80 \(good)|300:1").srtpParameters() }  // MKI too big
        #expect(throws: SRTPError.self) { try parse("1 AES_CM_128_HMAC_SHA1_80 \(good)|0").srtpParameters() }  // zero lifetime
        #expect(throws: SRTPError.self) { try parse("1 AES_CM_128_HMAC_SHA1_80 \(good)|2^50").srtpParameters() }
        #expect(throws: SRTPError.self) { try parse("1 AES_CM_128_HMAC_SHA1_80 uri:http://example.com/key").srtpParameters() }
        #expect(throws: SRTPError.self) { try parse("1 AES_CM_128_HMAC_SHA1_80 inline:QUJD").srtpParameters() }  // 3 bytes
    }

    @Test func randomKeysAreFreshAndTheRightSize() {
        for profile in SRTPProfile.allCases {
            let a = SRTPMasterKey.random(for: profile), b = SRTPMasterKey.random(for: profile)
            #expect(a.key.count == profile.keyLength && a.salt.count == profile.saltLength)
            #expect(a != b)
        }
        let bytes = SecureRandom.bytes(4096)
        // Every byte value appears in 4 KiB of random data with overwhelming probability.
        #expect(Set(bytes).count > 240)
    }

    @Test func sdesOfferAnswerGivesWorkingContexts() throws {
        let offer = SDES.offer()
        #expect(offer.first?.suite == .aesCM128HMACSHA1_80 && offer.first?.tag == 1)
        #expect(offer.count == SRTPProfile.available.count)
        // The answerer only takes the 32-bit tag suite.
        let (answerLine, chosen) = try SDES.answer(to: offer, profiles: [.aesCM128HMACSHA1_32])
        #expect(answerLine.suite == .aesCM128HMACSHA1_32 && answerLine.tag == chosen.tag)
        #expect(answerLine.keySaltBytes != chosen.keySaltBytes)
        let (ourLine, theirLine) = try SDES.accept(answer: answerLine, offered: offer)
        #expect(ourLine == chosen && theirLine == answerLine)
        let offerer = try SRTPContext(local: ourLine, remote: theirLine)
        let answerer = try SRTPContext(local: answerLine, remote: chosen)
        var p = Packets.rtp(seq: 5)
        try offerer.protectRTP(&p)
        try answerer.unprotectRTP(&p)
        #expect(p == Packets.rtp(seq: 5))
        var q = Packets.rtcp()
        try answerer.protectRTCP(&q)
        try offerer.unprotectRTCP(&q)
        #expect(q == Packets.rtcp())
        // Re-INVITE: the answerer changes its key only; the offerer's receiver follows.
        let newAnswer = CryptoAttribute(tag: answerLine.tag, profile: .aesCM128HMACSHA1_32, keys: [.random(for: .aesCM128HMACSHA1_32)])
        try answerer.rekey(local: newAnswer, remote: chosen, previousLocal: answerLine, previousRemote: chosen)
        try offerer.rekey(local: ourLine, remote: newAnswer, previousLocal: ourLine, previousRemote: answerLine)
        var r = Packets.rtp(seq: 6)
        try answerer.protectRTP(&r)
        try offerer.unprotectRTP(&r)
        #expect(r == Packets.rtp(seq: 6))
        // Nothing acceptable.
        #expect(throws: SRTPError.noAcceptableCrypto) { try SDES.answer(to: [], profiles: [.aesCM128HMACSHA1_80]) }
        #expect(throws: SRTPError.noAcceptableCrypto) { try SDES.accept(answer: newAnswer, offered: [offer[0]]) }
    }
}

/// A session is `Sendable`: several threads may protect through it at once (calls are
/// serialized inside), and every packet still unprotects.
@Suite struct SRTPConcurrencyTests {
    @Test func concurrentProtectOnOneSession() async throws {
        let profile = SRTPProfile.aesCM128HMACSHA1_80
        let key = SRTPMasterKey.random(for: profile)
        let sender = try SRTPSession(direction: .outbound, profile: profile, keys: [key])
        let receiver = try SRTPSession(direction: .inbound, profile: profile, keys: [key])
        // Four SSRCs, one task each, 200 packets per stream.
        let streams: [[UInt8]] = try await withThrowingTaskGroup(of: [[UInt8]].self) { group in
            for s in 0..<4 {
                group.addTask {
                    var out: [[UInt8]] = []
                    for seq in 0..<200 {
                        var p = Packets.rtp(seq: UInt16(seq), ssrc: UInt32(0x1000 + s))
                        try sender.protectRTP(&p)
                        out.append(p)
                    }
                    return out
                }
            }
            var all: [[UInt8]] = []
            for try await packets in group { all += packets }
            return all
        }
        #expect(streams.count == 800)
        for var packet in streams { try receiver.unprotectRTP(&packet) }
        #expect(sender.statistics.rtp.packets == 800 && receiver.statistics.rtp.packets == 800)
    }
}
