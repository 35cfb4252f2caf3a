import Testing
@testable import SIPMessage

@Suite("Parsing start lines, headers and bodies")
struct ParserTests {
    static let invite = """
    INVITE sip:bob@biloxi.example.com SIP/2.0
    Via: SIP/2.0/UDP pc33.atlanta.example.com;branch=z9hG4bK776asdhds
    Max-Forwards: 70
    To: Bob <sip:bob@biloxi.example.com>
    From: Alice <sip:alice@atlanta.example.com>;tag=1928301774
    Call-ID: a84b4c76e66710@pc33.atlanta.example.com
    CSeq: 314159 INVITE
    Contact: <sip:alice@pc33.atlanta.example.com>
    Content-Type: application/sdp
    Content-Length: 4

    v=0

    """

    @Test func requestLineAndHeaders() throws {
        let m = try SIPMessage(bytes: crlf(Self.invite))
        #expect(m.isRequest)
        #expect(m.method == .invite)
        #expect(m.requestURIText == "sip:bob@biloxi.example.com")
        #expect(m.version == .sip20)
        #expect(m.headerCount == 9)
        #expect(m.callID == "a84b4c76e66710@pc33.atlanta.example.com")
        #expect(m[.maxForwards] == "70")
        #expect(m["max-forwards"] == "70")
        #expect(m["MAX-FORWARDS"] == "70")
        #expect(Array(m.body) == Array("v=0\r".utf8))
        #expect(m.contentLength == 4)
        #expect(m.topViaBranch == "z9hG4bK776asdhds")
        #expect(m.fromTag == "1928301774")
        #expect(m.toTag == nil)
        let cs = try m.cseq()
        #expect(cs == CSeq(314159, .invite))
    }

    @Test func statusLine() throws {
        let m = try SIPMessage(bytes: crlf("SIP/2.0 486 Busy Here\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\nContent-Length: 0\n\n"))
        #expect(!m.isRequest)
        #expect(m.statusCode == 486)
        #expect(m.reasonPhrase == "Busy Here")
        #expect(m.method == nil)
    }

    @Test func utf8AndEmptyReasonPhrases() throws {
        let m = try SIPMessage(bytes: crlf("SIP/2.0 200 Schön gut 😀\nContent-Length: 0\n\n"))
        #expect(m.reasonPhrase == "Schön gut 😀")
        let e = try SIPMessage(bytes: crlf("SIP/2.0 100 \nContent-Length: 0\n\n"))
        #expect(e.reasonPhrase == "")
        let n = try SIPMessage(bytes: crlf("SIP/2.0 100\nContent-Length: 0\n\n"))
        #expect(n.reasonPhrase == "")
        expectParseError(.reasonPhrase) { _ = try SIPMessage(bytes: Array("SIP/2.0 200 O".utf8) + [0xFF, 0x0D, 0x0A, 0x0D, 0x0A]) }
    }

    @Test func compactFormsEqualLongForms() throws {
        let m = try SIPMessage(bytes: fixture("compact-forms.sip"))
        #expect(m[.via] == m["v"])
        #expect(m.values(.via).count == 2)
        #expect(m.callID == "a84b4c76e66710")
        #expect(try m.from().tag == "1928301774")
        #expect(try m.supported() == ["timer", "100rel"])
        #expect(try m.contentType() == .sdp)
        #expect(m.contentLength == 0)
        #expect(m.contains(.contact))
        #expect(SIPHeaderName("m") == .contact)
        #expect(SIPHeaderName("CONTACT") == .contact)
        for h in KnownHeader.allCases {
            #expect(KnownHeader.lookup(h.canonicalName) == h)
            #expect(KnownHeader.lookup(h.canonicalName.uppercased()) == h)
            if let c = h.compactForm { #expect(KnownHeader.lookup(String(c)) == h) }
        }
        #expect(KnownHeader.lookup("X-Not-Known") == nil)
    }

    @Test func headerFoldingIsUnfolded() throws {
        let m = try SIPMessage(bytes: fixture("folded-headers.sip"))
        #expect(m[.init("Subject")] == "a subject that is folded over three lines")
        let vias = try m.via()
        #expect(vias.count == 2)
        #expect(vias[0].branch == "z9hG4bKfold1")
        #expect(vias[1].host == .domain("proxy.example.com"))
        // Serialization of the unmodified message is byte-exact, folding included.
        #expect(m.serialized() == (try fixture("folded-headers.sip")))
        #expect(String(decoding: m.body, as: UTF8.self) == "Grüße aus Köln\r\n")
    }

    @Test func multiValueHeadersSplitAroundQuotesAndBrackets() throws {
        let m = try SIPMessage(bytes: crlf("""
        REGISTER sip:r.example.com SIP/2.0
        Via: SIP/2.0/UDP a.example.com;branch=z9hG4bK1, SIP/2.0/UDP b.example.com;branch=z9hG4bK2
        Contact: "Doe, John" <sip:j,k@x.example.com;a=b>;q=0.5, <sip:k@y.example.com>;expires=60
        Contact: "Quote \\" , inside" <sip:l@z.example.com>
        From: <sip:j@r.example.com>;tag=1
        To: <sip:j@r.example.com>
        Call-ID: split
        CSeq: 1 REGISTER
        Content-Length: 0


        """))
        let contacts = try #require(try m.contact()).addresses
        #expect(contacts.count == 3)
        #expect(contacts[0].displayName == "Doe, John")
        #expect(contacts[0].q == 0.5)
        #expect(contacts[0].sipURI?.user == "j,k")
        #expect(contacts[1].expires == 60)
        #expect(contacts[2].displayName == "Quote \" , inside")
        #expect(try m.via().map(\.branch) == ["z9hG4bK1", "z9hG4bK2"])
        #expect(m.elements(.via).count == 2)
    }

    @Test func datagramTrailingBytesAreIgnored() throws {
        let bytes = crlf("OPTIONS sip:a@b SIP/2.0\nCall-ID: x\nContent-Length: 2\n\nhiINVITE sip:junk SIP/2.0\n")
        let m = try SIPMessage(bytes: bytes)
        #expect(Array(m.body) == Array("hi".utf8))
        #expect(m.serialized() == crlf("OPTIONS sip:a@b SIP/2.0\nCall-ID: x\nContent-Length: 2\n\nhi"))
    }

    @Test func datagramWithoutContentLengthRunsToTheEnd() throws {
        let m = try SIPMessage(bytes: crlf("MESSAGE sip:a@b SIP/2.0\nCall-ID: x\n\nhello"))
        #expect(Array(m.body) == Array("hello".utf8))
        #expect(m.contentLength == nil)
    }

    @Test func leadingCRLFsAreSkipped() throws {
        let m = try SIPMessage(bytes: crlf("\n\nOPTIONS sip:a@b SIP/2.0\nContent-Length: 0\n\n"))
        #expect(m.method == .options)
        #expect(m.serialized() == crlf("OPTIONS sip:a@b SIP/2.0\nContent-Length: 0\n\n"))
    }

    @Test func lfOnlyLineEndsAreAccepted() throws {
        let m = try SIPMessage(bytes: fixture("lf-line-ends.sip"))
        #expect(m.method == .bye)
        #expect(m.topViaBranch == "z9hG4bKlf")
        try m.validate()
    }

    @Test func extensionMethodsAndHeaders() throws {
        let m = try SIPMessage(bytes: crlf("FOO-BAR sip:a@b SIP/2.0\nX-Thing: 1\nx-thing: 2\nContent-Length: 0\n\n"))
        #expect(m.method == .extension("FOO-BAR"))
        #expect(m.values("X-THING") == ["1", "2"])
        #expect(m.count(of: "x-thing") == 2)
    }

    @Test func errorsNameOffsetAndRule() {
        let e1 = expectParseError(.headerColon) { _ = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nVia SIP/2.0/UDP x\n\n")) }
        #expect(e1?.offset == 29)
        let e2 = expectParseError(.headerName) { _ = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\n: empty\n\n")) }
        #expect(e2?.offset == 25)
        expectParseError(.headerName) { _ = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nVi@a: x\n\n")) }
        expectParseError(.headerName) { _ = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\n folded-first: x\n\n")) }
        expectParseError(.requestLine) { _ = try SIPMessage(bytes: crlf("OPTIONS\n\n")) }
        expectParseError(.method) { _ = try SIPMessage(bytes: crlf("OPT<IONS sip:a@b SIP/2.0\n\n")) }
        expectParseError(.sipVersion) { _ = try SIPMessage(bytes: crlf("OPTIONS sip:a@b HTTP/1.1\n\n")) }
        expectParseError(.sipVersion) { _ = try SIPMessage(bytes: crlf("SIP/2 200 OK\n\n")) }
        expectParseError(.statusCode) { _ = try SIPMessage(bytes: crlf("SIP/2.0 099 Low\n\n")) }
        expectParseError(.statusCode) { _ = try SIPMessage(bytes: crlf("SIP/2.0 700 High\n\n")) }
        expectParseError(.statusLine) { _ = try SIPMessage(bytes: crlf("SIP/2.0 OK\n\n")) }
        expectParseError(.emptyMessage) { _ = try SIPMessage(bytes: crlf("\n\n")) }
        expectParseError(.emptyMessage) { _ = try SIPMessage(bytes: []) }
        expectParseError(.incomplete) { _ = try SIPMessage(bytes: Array("OPTIONS sip:a@b SIP/2.0".utf8)) }
        expectParseError(.contentLength) { _ = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nContent-Length: -1\n\n")) }
        expectParseError(.contentLength) { _ = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nContent-Length: 1 2\n\n")) }
        expectParseError(.duplicateContentLength) { _ = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nContent-Length: 0\nl: 0\n\n")) }
        let e3 = expectParseError(.bodyTruncated) { _ = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nContent-Length: 10\n\nabc")) }
        #expect(e3?.suggestedStatusCode == 400)
        expectParseError(.headerValue) { _ = try SIPMessage(bytes: Array("OPTIONS sip:a@b SIP/2.0\r\n\rX: 1\r\n\r\n".utf8)) }
        let bare = expectParseError(.headerValue) { _ = try SIPMessage(bytes: Array("OPTIONS sip:a@b SIP/2.0\r\nTo: \rS\r\nX: 1\r\n\r\n".utf8)) }
        #expect(bare?.offset == 29)
        expectParseError(.headerValue) { _ = try SIPMessage(bytes: Array("OPTIONS sip:a@b SIP/2.0\r\nX: 1\r\r\n\r\n".utf8)) }
        expectParseError(.requestLine) { _ = try SIPMessage(bytes: Array("OPTIONS sip:a@b\r SIP/2.0\r\n\r\n".utf8)) }
    }

    @Test func limitsAreEnforced() {
        let small = SIPParserLimits(maxMessageSize: 200, maxHeaderCount: 3, maxLineLength: 64, maxBodySize: 10)
        let e = expectParseError(.tooManyHeaders) {
            _ = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nA: 1\nB: 2\nC: 3\nD: 4\n\n"), limits: small)
        }
        #expect(e?.offset == 43)
        expectParseError(.lineTooLong) {
            _ = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nA: " + String(repeating: "x", count: 100) + "\n\n"), limits: small)
        }
        expectParseError(.lineTooLong) {
            _ = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nA: 1\n " + String(repeating: "x", count: 70) + "\n\n"), limits: small)
        }
        expectParseError(.lineTooLong) {
            _ = try SIPMessage(bytes: crlf("OPTIONS sip:" + String(repeating: "a", count: 100) + " SIP/2.0\n\n"), limits: small)
        }
        expectParseError(.bodyTooLarge) {
            _ = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nContent-Length: 11\n\n0123456789a"), limits: small)
        }
        expectParseError(.bodyTooLarge) {
            _ = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nContent-Length: 99999999999999999999999\n\n"), limits: small)
        }
        expectParseError(.messageTooLarge) {
            _ = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\n" + String(repeating: "A: 1234567890\n", count: 20) + "\n"),
                               limits: SIPParserLimits(maxMessageSize: 200, maxHeaderCount: 100, maxLineLength: 64, maxBodySize: 10))
        }
        #expect(SIPParseError(offset: 0, rule: .messageTooLarge).suggestedStatusCode == 513)
    }

    @Test func hugeLimitsDoNotTrapAndAreClamped() throws {
        let huge = SIPParserLimits(maxMessageSize: .max, maxHeaderCount: .max, maxLineLength: .max, maxBodySize: .max)
        #expect(huge.maxMessageSize == SIPParserLimits.ceiling)
        for cl in ["9223372036854775808", "9223372036854775807", "10000000000000000000", "1073741825"] {
            expectParseError(.bodyTooLarge) { _ = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nContent-Length: \(cl)\n\n"), limits: huge) }
        }
        let m = try SIPMessage(bytes: crlf("\nOPTIONS sip:a@b SIP/2.0\nContent-Length: 0\n\n"), limits: huge)
        #expect(m.method == .options)
        let zero = SIPParserLimits(maxMessageSize: 0, maxHeaderCount: -5, maxLineLength: 0, maxBodySize: 0)
        #expect(zero.maxHeaderCount == 1)
        // Leading line breaks count against the size limit.
        expectParseError(.messageTooLarge) {
            _ = try SIPMessage(bytes: [UInt8](repeating: 0x0A, count: 300) + crlf("OPTIONS sip:a@b SIP/2.0\n\n"),
                               limits: SIPParserLimits(maxMessageSize: 200))
        }
    }

    @Test func foldedContentLengthIsRefused() {
        expectParseError(.contentLength) { _ = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nContent-Length: 1\n 0\n\n0123456789")) }
        // Folding elsewhere is fine, and white-space-only continuation of Content-Length too.
        let m = try? SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nContent-Length: 2\n   \nSubject: a\n b\n\nhi"))
        #expect(m.map { Array($0.body) } == Array("hi".utf8))
    }

    @Test func fastAccessorsAgreeWithDecoders() throws {
        let m = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nVia: SIP/2.0/UDP h;branch=\"z9hG4bK1\"\nTo: <sip:a@b>;tag\nFrom: <sip:c@d>;tag=x\n\n"))
        #expect(m.topViaBranch == "z9hG4bK1")
        #expect(try m.topVia().branch == "z9hG4bK1")
        #expect(m.toTagBytes == nil)
        #expect(m.fromTag == "x")
    }

    @Test func qvaluesFollowTheGrammar() throws {
        for (q, ok) in [("0", true), ("1", true), ("0.5", true), ("0.123", true), ("1.000", true), ("1.0", true),
                        ("0x0.8", false), ("1e0", false), (".5", false), ("1.5", false), ("0.1234", false), ("2", false), ("+1", false)] {
            let m = try SIPMessage(bytes: crlf("REGISTER sip:r SIP/2.0\nContact: <sip:a@b>;q=\(q)\n\n"))
            if ok { #expect(throws: Never.self) { _ = try m.contact() } } else { expectParseError(.parameter) { _ = try m.contact() } }
        }
        let plus = try SIPMessage(bytes: crlf("REGISTER sip:r SIP/2.0\nContact: <sip:a@b>;expires=+5\n\n"))
        expectParseError(.parameter) { _ = try plus.contact() }
        expectParseError(.via) { _ = try Via("SIP/2.0/UDP h;rport=+5") }
    }

    @Test("validation checks Contacts as contact() does, on the no-allocation path and the full one")
    func validationChecksContactsLikeTheDecoder() throws {
        let head = "INVITE sip:a@b SIP/2.0\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\nFrom: <sip:c@d>;tag=x\nTo: <sip:a@b>\nCall-ID: 1\nCSeq: 1 INVITE\n"
        let contacts: [(String, SIPParseError.Rule?)] = [
            ("<sip:sipp@127.0.0.1:5060>", nil),                        // no ';': decoded, not kept
            ("<sip:a@1.2.3.4;transport=udp>;+sip.instance=\"<urn:1>\"", nil), // ';' but no q or x byte
            ("<sip:a@example.com>;q=0.5;expires=60", nil),            // the full path
            ("<sip:a@example.com>;Q=2", .parameter),                  // names are case-insensitive
            ("<sip:a@b>;EXPIRES=+5", .parameter),
            ("<sip:a@b>;expires=5;expires=x", nil),                   // the first one counts
            ("<sip:a@b>;q", nil),                                      // a flag: no value to check
            ("sip:a@b;q=1.5", .parameter),                             // addr-spec: q is a header parameter
            ("<sip:a@1.2.3.4", .nameAddress),                         // broken on the fast path
            ("<sip:a@example.com;lr", .nameAddress),                  // broken on the full path
            ("*", nil),
            ("*, <sip:a@b>", .nameAddress),
        ]
        for (contact, rule) in contacts {
            let m = try SIPMessage(bytes: crlf(head + "Contact: \(contact)\n\n"))
            var decoded: SIPParseError.Rule? = nil
            do { _ = try m.contact() } catch { decoded = error.rule }
            var validated: SIPParseError.Rule? = nil
            do { try m.validate() } catch { validated = error.rule }
            #expect(decoded == rule, "contact() of \(contact)")
            #expect(validated == rule, "validate() of \(contact)")
        }
    }

    @Test func missingBlankLineAtDatagramEndIsTolerated() throws {
        let m = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nCall-ID: x\n"))
        #expect(m.callID == "x")
        #expect(m.body.isEmpty)
    }
}
