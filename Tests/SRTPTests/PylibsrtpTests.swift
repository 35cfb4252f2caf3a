import Foundation
import SDP
import SwitchboardTestSupport
import Testing

@testable import SRTP

/// pylibsrtp (its own build of libsrtp, with OpenSSL) on the same keys and packets.
@Suite(
    .enabled(
        if: PythonOracle.available(["pylibsrtp"]) || TestPaths.isCI,
        "the Python venv (scripts/py-oracles) is missing: pylibsrtp comparison skipped"),
    .requires("the Python oracle pylibsrtp (scripts/py-oracles)", { PythonOracle.available(["pylibsrtp"]) }))
struct PylibsrtpTests {
    struct Exchange: Codable {
        var profile: String
        var theirKey: String  // key||salt hex: pylibsrtp protects with it
        var ourKey: String  // key||salt hex: we protect with it, pylibsrtp unprotects
        var plainRTP: [String]
        var plainRTCP: [String]
        var ourRTP: [String]
        var ourRTCP: [String]
    }
    struct Answer: Codable {
        var theirRTP: [String]
        var theirRTCP: [String]
        var unprotectedRTP: [String]
        var unprotectedRTCP: [String]
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
    static func unhex(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = text.startIndex
        while i < text.endIndex {
            let j = text.index(i, offsetBy: 2)
            out.append(UInt8(text[i..<j], radix: 16)!)
            i = j
        }
        return out
    }

    static let script = """
        import sys, json
        from pylibsrtp import Policy, Session
        x = json.load(open(sys.argv[1]))
        profile = {
            'AES_CM_128_HMAC_SHA1_80': Policy.SRTP_PROFILE_AES128_CM_SHA1_80,
            'AES_CM_128_HMAC_SHA1_32': Policy.SRTP_PROFILE_AES128_CM_SHA1_32,
            'AEAD_AES_128_GCM': Policy.SRTP_PROFILE_AEAD_AES_128_GCM,
            'AEAD_AES_256_GCM': Policy.SRTP_PROFILE_AEAD_AES_256_GCM,
        }[x['profile']]
        tx = Session(policy=Policy(key=bytes.fromhex(x['theirKey']), ssrc_type=Policy.SSRC_ANY_OUTBOUND, srtp_profile=profile))
        rx = Session(policy=Policy(key=bytes.fromhex(x['ourKey']), ssrc_type=Policy.SSRC_ANY_INBOUND, srtp_profile=profile))
        out = {
            'theirRTP': [tx.protect(bytes.fromhex(p)).hex() for p in x['plainRTP']],
            'theirRTCP': [tx.protect_rtcp(bytes.fromhex(p)).hex() for p in x['plainRTCP']],
            'unprotectedRTP': [rx.unprotect(bytes.fromhex(p)).hex() for p in x['ourRTP']],
            'unprotectedRTCP': [rx.unprotect_rtcp(bytes.fromhex(p)).hex() for p in x['ourRTCP']],
        }
        json.dump(out, open(sys.argv[2], 'w'))
        """

    @Test(arguments: SRTPProfile.available)
    func packetsCrossBetweenPylibsrtpAndUs(profile: SRTPProfile) throws {
        let theirKey = SRTPMasterKey.random(for: profile), ourKey = SRTPMasterKey.random(for: profile)
        let plainRTP = (0..<20).map { Packets.rtp(seq: UInt16(truncatingIfNeeded: 65530 + $0), payloadSize: 20 + $0 * 7) }  // crosses a wrap
        let plainRTCP = (0..<5).map { Packets.rtcp(tag: UInt8($0)) }
        let sender = try SRTPSession(direction: .outbound, profile: profile, keys: [ourKey])
        var ourRTP: [[UInt8]] = [], ourRTCP: [[UInt8]] = []
        for p in plainRTP {
            var q = p
            try sender.protectRTP(&q)
            ourRTP.append(q)
        }
        for p in plainRTCP {
            var q = p
            try sender.protectRTCP(&q)
            ourRTCP.append(q)
        }
        let exchange = Exchange(
            profile: profile.rawValue, theirKey: Self.hex(theirKey.key + theirKey.salt), ourKey: Self.hex(ourKey.key + ourKey.salt),
            plainRTP: plainRTP.map(Self.hex), plainRTCP: plainRTCP.map(Self.hex), ourRTP: ourRTP.map(Self.hex),
            ourRTCP: ourRTCP.map(Self.hex))
        let output = try PythonOracle.run(Self.script, input: [UInt8](try JSONEncoder().encode(exchange)))
        let answer = try JSONDecoder().decode(Answer.self, from: Data(output))
        // pylibsrtp unprotected what we protected.
        #expect(answer.unprotectedRTP.map(Self.unhex) == plainRTP)
        #expect(answer.unprotectedRTCP.map(Self.unhex) == plainRTCP)
        // We unprotect what pylibsrtp protected; and, being deterministic with the same key,
        // index and SSRC, pylibsrtp's SRTP packets are byte for byte what ours would be.
        let receiver = try SRTPSession(direction: .inbound, profile: profile, keys: [theirKey])
        let mirror = try SRTPSession(direction: .outbound, profile: profile, keys: [theirKey])
        for (i, text) in answer.theirRTP.enumerated() {
            var packet = Self.unhex(text)
            var ours = plainRTP[i]
            try mirror.protectRTP(&ours)
            #expect(ours == packet)
            try receiver.unprotectRTP(&packet)
            #expect(packet == plainRTP[i])
        }
        for (i, text) in answer.theirRTCP.enumerated() {
            var packet = Self.unhex(text)
            try receiver.unprotectRTCP(&packet)
            #expect(packet == plainRTCP[i])
        }
        #expect(receiver.statistics.rtp.packets == 20 && receiver.statistics.rtcp.packets == 5)
        #expect(receiver.statistics.rtp.dropped == 0)
    }
}
