import SDP
import Testing

@Suite("Fixture round trips")
struct RoundTripTests {
    static let expectedFixtures = [
        "asterisk-g711-answer.sdp", "audio-video-offer.sdp", "baresip-opus-srtp-offer.sdp",
        "freeswitch-pcma-answer.sdp", "hold-sendonly-reoffer.sdp", "ipv6-offer.sdp", "lf-only-offer.sdp",
        "linphone-offer.sdp", "many-unknown-attributes.sdp",
    ]

    @Test func fixturesArePresent() {
        #expect(Fixtures.names == Self.expectedFixtures, "fixtures found in \(Fixtures.directory)")
    }

    @Test(arguments: expectedFixtures)
    func fixtureParsesAndReserializes(name: String) throws {
        let input = try Fixtures.bytes(name)
        let session = try SessionDescription.parse(input)
        let output = session.serialized()
        if Fixtures.isCRLF(input) {
            #expect(output == input, "canonical CRLF fixture must re-serialize byte for byte")
        } else {
            #expect(!Fixtures.isCRLF(input))
            #expect(output == Fixtures.toCRLF(input), "LF fixture must re-serialize to its CRLF form")
        }
        #expect(session.description == String(decoding: output, as: UTF8.self))
        let reparsed = try SessionDescription.parse(output)
        #expect(reparsed == session)
        #expect(reparsed.serialized() == output)
    }

    @Test func lfOnlyFixtureIsReallyLFOnly() throws {
        let input = try Fixtures.bytes("lf-only-offer.sdp")
        #expect(!input.contains(0x0D))
        #expect(input.contains(0x0A))
    }

    @Test(arguments: expectedFixtures)
    func fixtureParsesAsStringAndWithLFEndings(name: String) throws {
        let input = try Fixtures.bytes(name)
        let viaString = try SessionDescription.parse(String(decoding: input, as: UTF8.self))
        let lfOnly = input.filter { $0 != 0x0D }
        let viaLF = try SessionDescription.parse(lfOnly)
        #expect(viaString == viaLF)
        #expect(viaLF.serialized() == Fixtures.toCRLF(input))
    }

    @Test func missingFinalLineEndingAndTrailingBlankLinesAreTolerated() throws {
        let canonical = sdp(minimalLines)
        let base = try parseOK(canonical)
        // (Drop the UTF-8 bytes: "\r\n" is a single Character in Swift.)
        let noFinalEOL = String(decoding: canonical.utf8.dropLast(2), as: UTF8.self)
        #expect(noFinalEOL.hasSuffix("PCMU/8000"))
        #expect(try parseOK(noFinalEOL) == base)
        #expect(try parseOK(canonical + "\r\n") == base)
        #expect(try parseOK(canonical + "\r\n\r\n") == base)
        #expect(try parseOK(canonical.replacingCRLF() + "\n") == base)
        #expect(try parseOK(noFinalEOL + "\r") == base)
        #expect(base.serialized() == Array(canonical.utf8))
    }

    @Test func mixedLineEndingsAreAccepted() throws {
        let mixed = "v=0\no=- 1 1 IN IP4 192.0.2.1\r\ns=-\nc=IN IP4 192.0.2.1\r\nt=0 0\nm=audio 5000 RTP/AVP 0\r\n"
        let session = try parseOK(mixed)
        #expect(session.description == sdp(Array(minimalLines.prefix(6))))
    }

    @Test func nonCanonicalInputBecomesCanonicalFixedPoint() throws {
        let messy = sdp(
            "v=0 ",
            "o=-  01  002 IN IP4 192.0.2.1 ",
            "s=-",
            "c=IN IP4 192.0.2.1",
            "t=0  0",
            "m=audio  5000 RTP/AVP  0 8 ",
            "a=sendrecv  ",
            "y=AS:64"
        )
        let session = try parseOK(messy)
        let canonical = sdp(
            "v=0",
            "o=- 1 2 IN IP4 192.0.2.1",
            "s=-",
            "c=IN IP4 192.0.2.1",
            "t=0 0",
            "m=audio 5000 RTP/AVP 0 8",
            "a=sendrecv",
            "y=AS:64"
        )
        #expect(session.description == canonical)
        let again = try parseOK(session.description)
        #expect(again == session)
        #expect(again.description == canonical)
    }

    @Test func extensionLinesMoveAfterAttributesAndStayStable() throws {
        let text = sdp(
            "v=0", "o=- 1 1 IN IP4 192.0.2.1", "s=-", "y=0100000001", "c=IN IP4 192.0.2.1", "t=0 0",
            "a=tool:x", "m=video 5000 RTP/AVP 96", "f=v/2/4CIF", "a=rtpmap:96 H264/90000")
        let session = try parseOK(text)
        #expect(session.hasExtensionLines)
        #expect(session.extensionLines == [SDPExtensionLine(type: "y", value: "0100000001")])
        #expect(session.media[0].extensionLines == [SDPExtensionLine(type: "f", value: "v/2/4CIF")])
        let expected = sdp(
            "v=0", "o=- 1 1 IN IP4 192.0.2.1", "s=-", "c=IN IP4 192.0.2.1", "t=0 0", "a=tool:x", "y=0100000001",
            "m=video 5000 RTP/AVP 96", "a=rtpmap:96 H264/90000", "f=v/2/4CIF")
        #expect(session.description == expected)
        #expect(try parseOK(expected) == session)
    }
}

extension String {
    /// Replaces CRLF with LF.
    func replacingCRLF() -> String {
        String(decoding: Array(utf8).filter { $0 != 0x0D }, as: UTF8.self)
    }
}
