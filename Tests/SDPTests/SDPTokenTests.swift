import SDP
import Testing

@Suite("SDPToken: the tokens kept as written")
struct SDPTokenTests {
    /// Every way of building a token gives the same value, and it prints as written.
    private func check<T: SDPToken>(_ token: String, known: T) {
        let literal = T(stringLiteral: token)
        #expect(T(token) == known)
        #expect(T(rawValue: token) == known)
        #expect(literal == known)
        #expect(known.rawValue == token)
        #expect(known.description == token)
        #expect("\(known)" == token)
    }

    @Test func wellKnownTokens() {
        check("IP6", known: AddressType.ip6)
        check("TIAS", known: BandwidthType.transportIndependent)
        check("AEAD_AES_256_GCM", known: CryptoSuite.aeadAES256GCM)
        check("image", known: MediaType.image)
        check("IN", known: NetworkType.internet)
        check("UDP/TLS/RTP/SAVPF", known: TransportProtocol.udpTLSRTPSAVPF)
    }

    @Test func unknownTokensAreKeptAsWritten() {
        let media: MediaType = "x-custom"
        #expect(media.rawValue == "x-custom")
        #expect(media != .audio)
        #expect(TransportProtocol("TCP/MRCPv2").description == "TCP/MRCPv2")
        #expect(CryptoSuite("NOT_A_SUITE").masterKeyLength == nil)
        // Tokens are case-sensitive: only the exact spelling is the well-known value.
        #expect(AddressType("ip4") != .ip4)
        #expect(Set([NetworkType("IN"), .internet, "IN"]).count == 1)
    }
}
