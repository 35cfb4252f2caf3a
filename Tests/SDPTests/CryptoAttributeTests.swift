import SDP
import Testing

@Suite("RFC 4568 crypto attribute")
struct CryptoAttributeTests {
    static let key30 = "WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz"

    @Test func rfc4568Example() throws {
        let crypto = try #require(CryptoAttribute(
            attributeValue: "1 AES_CM_128_HMAC_SHA1_80 inline:PS1uQCVeeCFCanVmcjkpPywjNWhcYD0mXXtxaVBR|2^20|1:4"))
        #expect(crypto.tag == 1)
        #expect(crypto.suite == .aesCM128HMACSHA1_80)
        let key = try #require(crypto.keyParameters.first)
        #expect(key.isInline)
        #expect(key.keySaltBytes?.count == 30)
        #expect(key.lifetime == .powerOfTwo(20))
        #expect(key.lifetime?.packetCount == 1_048_576)
        #expect(key.mki?.value == 1)
        #expect(key.mki?.length == 4)
        #expect(crypto.attributeValue == "1 AES_CM_128_HMAC_SHA1_80 inline:PS1uQCVeeCFCanVmcjkpPywjNWhcYD0mXXtxaVBR|2^20|1:4")
    }

    @Test func decodedKeyMaterialMatchesKnownBytes() throws {
        // The key is the base64 of the 30 ASCII bytes below.
        let crypto = try #require(CryptoAttribute(attributeValue: "1 AES_CM_128_HMAC_SHA1_32 inline:\(Self.key30)"))
        let bytes = try #require(crypto.keySaltBytes)
        #expect(bytes == Array("YS___semctl () {\t220;}\n}\nunles".utf8))
        #expect(crypto.keyParameters[0].masterKey(for: crypto.suite) == Array(bytes[0..<16]))
        #expect(crypto.keyParameters[0].masterSalt(for: crypto.suite) == Array(bytes[16...]))
        #expect(crypto.keyParameters[0].masterKey(for: .aes256CMHMACSHA1_80) == nil)
        #expect(crypto.keyParameters[0].masterKey(for: "UNKNOWN_SUITE") == nil)
        #expect(crypto.keyParameters[0].lifetime == nil)
        #expect(crypto.keyParameters[0].mki == nil)
    }

    @Test func multipleKeysSessionParametersAndTabs() throws {
        let value = "7\tAES_CM_128_HMAC_SHA1_80  inline:\(Self.key30)|2^20|1:4;inline:\(Self.key30)|2^20|2:4 KDR=24 UNENCRYPTED_SRTP UNAUTHENTICATED_SRTP FEC_ORDER=SRTP_FEC FEC_KEY=inline:\(Self.key30)|2^20 WSH=64 -X_EXT=1"
        let crypto = try #require(CryptoAttribute(attributeValue: value))
        #expect(crypto.tag == 7)
        #expect(crypto.keyParameters.map(\.mki) == [.init(value: 1, length: 4), .init(value: 2, length: 4)])
        #expect(crypto.sessionParameters == [
            .keyDerivationRate(24), .unencryptedSRTP, .unauthenticatedSRTP, .fecOrder("SRTP_FEC"),
            .fecKey([.init(keySalt: Self.key30, lifetime: .powerOfTwo(20))]), .windowSizeHint(64), .other("-X_EXT=1"),
        ])
        // Canonical form uses single spaces; it parses back to the same value.
        let canonical = crypto.attributeValue
        #expect(canonical.hasPrefix("7 AES_CM_128_HMAC_SHA1_80 inline:"))
        #expect(CryptoAttribute(attributeValue: canonical) == crypto)
    }

    @Test func otherKeyMethodsAreKeptVerbatim() throws {
        let crypto = try #require(CryptoAttribute(attributeValue: "2 SOME_SUITE uri:https://example.com/key|x"))
        #expect(crypto.suite.rawValue == "SOME_SUITE")
        #expect(crypto.suite.keySaltLength == nil)
        #expect(crypto.keyParameters == [.init(method: "uri", keySalt: "https://example.com/key|x")])
        #expect(crypto.keySaltBytes == nil)
        #expect(crypto.attributeValue == "2 SOME_SUITE uri:https://example.com/key|x")
    }

    @Test func paddedAndUnpaddedBase64() throws {
        let padded = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGw=="
        let withPadding = try #require(CryptoAttribute(attributeValue: "1 AEAD_AES_128_GCM inline:\(padded)"))
        #expect(withPadding.keySaltBytes == Array(0..<28))
        #expect(CryptoSuite.aeadAES128GCM.keySaltLength == 28)
        let withoutPadding = try #require(CryptoAttribute(attributeValue: "1 AEAD_AES_128_GCM inline:\(padded.dropLast(2))"))
        #expect(withoutPadding.keySaltBytes == Array(0..<28))
        #expect(CryptoAttribute(attributeValue: "1 AEAD_AES_128_GCM inline:AA=A") == nil)
        #expect(CryptoAttribute(attributeValue: "1 AEAD_AES_128_GCM inline:AAA===") == nil)
        #expect(CryptoAttribute(attributeValue: "1 AEAD_AES_128_GCM inline:A") == nil)
    }

    @Test func buildingEncodesKeysAndRoundTrips() throws {
        #expect(CryptoAttribute.KeyParameter(keySaltBytes: Array("Man".utf8)).keySalt == "TWFu")
        #expect(CryptoAttribute.KeyParameter(keySaltBytes: Array("Ma".utf8)).keySalt == "TWE=")
        #expect(CryptoAttribute.KeyParameter(keySaltBytes: Array("M".utf8)).keySalt == "TQ==")
        #expect(CryptoAttribute.KeyParameter(keySaltBytes: []).keySalt == "")

        let material = (0..<30).map { UInt8($0 * 7 + 3) }
        let crypto = CryptoAttribute(
            tag: 1, suite: .aesCM128HMACSHA1_80,
            keyParameters: [.init(keySaltBytes: material, lifetime: .powerOfTwo(31), mki: .init(value: 1, length: 4))],
            sessionParameters: [.unencryptedSRTCP])
        let value = crypto.attributeValue
        #expect(value.hasPrefix("1 AES_CM_128_HMAC_SHA1_80 inline:"))
        #expect(value.hasSuffix("|2^31|1:4 UNENCRYPTED_SRTCP"))
        let parsed = try #require(CryptoAttribute(attributeValue: value))
        #expect(parsed == crypto)
        #expect(parsed.keySaltBytes == material)
    }

    @Test func lifetimeForms() {
        #expect(CryptoAttribute.Lifetime.powerOfTwo(0).packetCount == 1)
        #expect(CryptoAttribute.Lifetime.powerOfTwo(48).packetCount == 281_474_976_710_656)
        #expect(CryptoAttribute.Lifetime.powerOfTwo(63).packetCount == 1 << 63)
        #expect(CryptoAttribute.Lifetime.powerOfTwo(200).packetCount == .max)
        #expect(CryptoAttribute.Lifetime.powerOfTwo(20).description == "2^20")
        #expect(CryptoAttribute.Lifetime.packets(1000).description == "1000")
        #expect(CryptoAttribute(attributeValue: "1 AES_CM_128_HMAC_SHA1_80 inline:\(Self.key30)|2^63")?.keyParameters[0].lifetime == .powerOfTwo(63))
        #expect(CryptoAttribute(attributeValue: "1 AES_CM_128_HMAC_SHA1_80 inline:\(Self.key30)|18446744073709551616") == nil)
        #expect(CryptoAttribute(attributeValue: "1 AES_CM_128_HMAC_SHA1_80 inline:\(Self.key30)|2^") == nil)
        #expect(CryptoAttribute(attributeValue: "1 AES_CM_128_HMAC_SHA1_80 inline:\(Self.key30)|1:4|2^20") == nil)
    }

    @Test func tagLimits() {
        #expect(CryptoAttribute(attributeValue: "999999999 AES_CM_128_HMAC_SHA1_80 inline:\(Self.key30)")?.tag == 999_999_999)
        #expect(CryptoAttribute(attributeValue: "1000000000 AES_CM_128_HMAC_SHA1_80 inline:\(Self.key30)") == nil)
    }

    @Test func suiteKeyLengths() {
        #expect(CryptoSuite.aesCM128HMACSHA1_80.masterKeyLength == 16)
        #expect(CryptoSuite.aesCM128HMACSHA1_80.masterSaltLength == 14)
        #expect(CryptoSuite.aes192CMHMACSHA1_32.keySaltLength == 38)
        #expect(CryptoSuite.aes256CMHMACSHA1_32.keySaltLength == 46)
        #expect(CryptoSuite.f8_128HMACSHA1_80.keySaltLength == 30)
        #expect(CryptoSuite.aeadAES256GCM.keySaltLength == 44)
        #expect(CryptoSuite("NULL_HMAC").masterSaltLength == nil)
    }

    @Test func mediaLevelAccessorAndBuilder() throws {
        var media = MediaDescription(media: .audio, port: 4000, proto: .rtpSAVP, payloadTypes: [0])
        media.addAttribute(CryptoAttribute(
            tag: 1, suite: .aesCM128HMACSHA1_80, keyParameters: [.init(keySalt: Self.key30, lifetime: .powerOfTwo(20), mki: .init(value: 1, length: 4))]))
        #expect(media.attributes.last?.description == "crypto:1 AES_CM_128_HMAC_SHA1_80 inline:\(Self.key30)|2^20|1:4")
        #expect(media.cryptos.count == 1)
        #expect(media.cryptos[0].keySaltBytes?.count == 30)
    }
}
