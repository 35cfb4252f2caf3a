import Testing
@testable import SIPMessage

@Suite("Serialization and building")
struct SerializationTests {
    static let fixtureNames = listDirectory(Paths.fixtures).filter { $0.hasSuffix(".sip") }

    @Test func fixturesExist() {
        #expect(Self.fixtureNames.count >= 15)
    }

    @Test(arguments: fixtureNames)
    func unmodifiedMessagesSerializeByteForByte(_ name: String) throws {
        let bytes = try fixture(name)
        let m = try SIPMessage(bytes: bytes)
        try m.validate()
        #expect(m.isPristine)
        #expect(m.serialized() == bytes)
    }

    /// A prepared header appends exactly what the checked append does, and refuses what it
    /// refuses, with the same error.
    @Test func preparedHeadersAppendWhatTheCheckedAppendDoes() throws {
        let headers: [(SIPHeaderName, String)] = [
            (.init(.contact), "<sip:alice@192.0.2.1:5060;transport=udp>"), (.init(.allow), "INVITE, ACK, BYE, CANCEL"),
            (.init(.supported), "timer"), (SIPHeaderName("X-Trace"), "a b"), (.init(.server), "Switchboard"),
        ]
        var checked = SIPMessage(statusCode: 200), prepared = SIPMessage(statusCode: 200)
        for (n, v) in headers {
            try checked.append(n, v)
            let h = try PreparedHeader(n, v)
            #expect(h.value == v)
            prepared.append(h)
        }
        #expect(prepared.serialized() == checked.serialized())
        #expect(prepared.headerFields.map(\.name) == checked.headerFields.map(\.name))
        #expect(prepared.headerFields.map(\.value) == checked.headerFields.map(\.value))
        for bad in ["a\r\nInjected: 1", " leading", "trailing "] {
            var probe = SIPMessage(statusCode: 200)
            let expected = #expect(throws: SIPParseError.self) { try probe.append(.init(.subject), bad) }
            let got = #expect(throws: SIPParseError.self) { try PreparedHeader(.init(.subject), bad) }
            #expect(got?.rule == expected?.rule)
            #expect(got?.offset == expected?.offset)
        }
    }

    @Test(arguments: fixtureNames)
    func canonicalFormIsAFixedPoint(_ name: String) throws {
        let m = try SIPMessage(bytes: try fixture(name))
        let canonical = m.serializedCanonically()
        let again = try SIPMessage(bytes: canonical)
        #expect(again.serialized() == canonical)
        #expect(again.serializedCanonically() == canonical)
        #expect(again.startLine == m.startLine)
        #expect(Array(again.body) == Array(m.body))
        #expect(again.headerFields.map(\.value) == m.headerFields.map(\.value))
        #expect(again.headerFields.map(\.known) == m.headerFields.map(\.known))
        try again.validate()
    }

    @Test func canonicalFormUsesLongNamesAndColonSpace() throws {
        let m = try SIPMessage(bytes: try fixture("compact-forms.sip"))
        let text = String(decoding: m.serializedCanonically(), as: UTF8.self)
        #expect(text.hasPrefix("OPTIONS sip:carol@chicago.example.com SIP/2.0\r\nVia: SIP/2.0/UDP pc33"))
        #expect(text.contains("\r\nFrom: Alice <sip:alice@atlanta.example.com>;tag=1928301774\r\n"))
        #expect(text.contains("\r\nCall-ID: a84b4c76e66710\r\n"))
        #expect(text.contains("\r\nContent-Length: 0\r\n"))
        #expect(text.hasSuffix("\r\n\r\n"))
    }

    @Test func buildingARequest() throws {
        var m = try SIPMessage(method: .invite, uri: try SIPURI("sip:bob@biloxi.example.com"))
        try m.append(.via, Via(transport: "UDP", host: .domain("pc33.atlanta.example.com"), port: 5060, parameters: [SIPParameter(name: "branch", value: "z9hG4bK776asdhds")]))
        try m.append(.maxForwards, "70")
        try m.append(.to, NameAddress(displayName: "Bob", uri: try SIPURI("sip:bob@biloxi.example.com")))
        try m.append(.from, NameAddress(displayName: "Alice", uri: try SIPURI("sip:alice@atlanta.example.com"), parameters: [SIPParameter(name: "tag", value: "1928301774")]))
        try m.append(.callID, "a84b4c76e66710@pc33.atlanta.example.com")
        try m.append(.cseq, CSeq(314159, .invite))
        m.setBody(Array("v=0\r\n".utf8), contentType: .sdp)
        let expected = crlf("""
        INVITE sip:bob@biloxi.example.com SIP/2.0
        Via: SIP/2.0/UDP pc33.atlanta.example.com:5060;branch=z9hG4bK776asdhds
        Max-Forwards: 70
        To: "Bob" <sip:bob@biloxi.example.com>
        From: "Alice" <sip:alice@atlanta.example.com>;tag=1928301774
        Call-ID: a84b4c76e66710@pc33.atlanta.example.com
        CSeq: 314159 INVITE
        Content-Type: application/sdp
        Content-Length: 5

        v=0

        """)
        #expect(m.serialized() == expected)
        let parsed = try SIPMessage(bytes: m.serialized())
        try parsed.validate()
        #expect(parsed.serialized() == expected)
        #expect(try parsed.from().tag == "1928301774")
    }

    @Test func buildingAResponseAndEditingHeaders() throws {
        let req = try SIPMessage(bytes: try fixture("compact-forms.sip"))
        var r = SIPMessage(statusCode: 200)
        for v in req.values(.via) { try r.append(.via, v) }
        try r.append(.from, req[.from]!)
        try r.append(.to, req[.to]! + ";tag=xyz")
        try r.append(.callID, req.callID!)
        try r.append(.cseq, req[.cseq]!)
        #expect(r.reasonPhrase == "OK")
        let parsed = try SIPMessage(bytes: r.serialized())
        #expect(parsed.statusCode == 200)
        #expect(parsed.toTag == "xyz")
        #expect(try parsed.via().count == 2)
        try parsed.validate()

        var fwd = req
        try fwd.prepend(.via, "SIP/2.0/UDP proxy.example.com;branch=z9hG4bKproxy")
        #expect(!fwd.isPristine)
        #expect(fwd.topViaBranch == "z9hG4bKproxy")
        #expect(try fwd.via().count == 3)
        fwd.removeFirstElement(.via)
        #expect(fwd.topViaBranch == "z9hG4bKhjhs8ass877")
        try fwd.set(.maxForwards, "69")
        #expect(try fwd.maxForwards() == 69)
        fwd.remove(.supported)
        #expect(!fwd.contains(.supported))
        let reparsed = try SIPMessage(bytes: fwd.serialized())
        #expect(try reparsed.maxForwards() == 69)
        #expect(try reparsed.via().count == 2)
    }

    /// A response copies Via, From, To, Call-ID and CSeq in order and adds the tag to the To:
    /// to every To line of an invalid request that has two (it is still answered), to none of
    /// a request whose To already has one; a tag's non-token bytes are dropped.
    @Test func aResponseCopiesTheLinesAndTagsEveryToLine() throws {
        let twoTos = try SIPMessage(bytes: Array(("INVITE sip:bob@example.com SIP/2.0\r\nVia: SIP/2.0/UDP a.example.com;branch=z9hG4bK1\r\n"
            + "Via: SIP/2.0/UDP b.example.com;branch=z9hG4bK2\r\nTo: <sip:bob@example.com>\r\nFrom: <sip:a@example.com>;tag=9\r\n"
            + "To: <sip:carol@example.com>\r\nCall-ID: c1\r\nCSeq: 4 INVITE\r\nTimestamp: 54\r\nContact: <sip:a@a.example.com>\r\n"
            + "Content-Length: 0\r\n\r\n").utf8))
        let r = SIPMessage(responseTo: twoTos, statusCode: 400, toTag: "a b\"c")
        #expect(r.headerFields.map(\.known) == [.via, .via, .to, .from, .to, .callID, .cseq])
        #expect(r.values(.to) == ["<sip:bob@example.com>;tag=abc", "<sip:carol@example.com>;tag=abc"])
        let again = try SIPMessage(bytes: r.serialized())
        #expect(again.statusCode == 400 && again.values(.to) == r.values(.to) && again.callID == "c1")
        // 100 Trying keeps the Timestamp; a To with a tag keeps its own.
        let trying = SIPMessage(responseTo: twoTos, statusCode: 100)
        #expect(trying.headerFields.map(\.known).last == .timestamp && trying.toTag == nil)
        let tagged = try SIPMessage(bytes: Array(("BYE sip:a@example.com SIP/2.0\r\nVia: SIP/2.0/UDP a.example.com;branch=z9hG4bK3\r\n"
            + "To: <sip:bob@example.com>;tag=old\r\nFrom: <sip:a@example.com>;tag=9\r\nCall-ID: c2\r\nCSeq: 5 BYE\r\n\r\n").utf8))
        #expect(SIPMessage(responseTo: tagged, statusCode: 200, toTag: "new").toTag == "old")
    }

    @Test func headerInjectionIsRefused() throws {
        var m = try SIPMessage(method: .options, uri: .other(scheme: "urn", text: "urn:x"))
        expectParseError(.headerValue) { try m.append(.subject, "hi\r\nVia: evil") }
        expectParseError(.headerValue) { try m.append(.subject, " padded ") }
        expectParseError(.headerName) { try m.append("Bad Name", "x") }
        expectParseError(.headerName) { try m.append(SIPHeaderName("X-A: 1\r\nVia: SIP/2.0/UDP evil\r\nX-B"), CSeq(1, .invite)) }
        // A display name is quoted, with line breaks and control bytes dropped.
        try m.append(.subject, NameAddress(displayName: "a\r\nb\u{1}", uri: .other(scheme: "urn", text: "urn:x")))
        #expect(m[.subject] == "\"ab\" <urn:x>")
        // The start line: hosts, URIs and methods built from unchecked text are refused.
        expectParseError(.requestLine) { _ = try SIPMessage(method: .invite, uri: SIPURI(host: .domain("a.example SIP/2.0\r\nVia: evil\r\nX: y"))) }
        expectParseError(.requestLine) { _ = try SIPMessage(method: .invite, uri: .other(scheme: "urn", text: "urn:x SIP/2.0\r\nVia: evil")) }
        expectParseError(.method) { _ = try SIPMessage(method: .extension("FOO sip:x SIP/2.0\r\nVia: evil\r\nX:"), requestURI: "sip:x") }
        // Parameter values that are not tokens are quoted: no extra list element or parameter.
        var via = try Via("SIP/2.0/UDP h;branch=z9hG4bK1")
        via.branch = "z9hG4bK1, SIP/2.0/UDP evil.example.com;branch=z9hG4bKevil"
        try m.append(.via, via)
        let again = try SIPMessage(bytes: m.serialized())
        #expect(try again.via().count == 1)
        #expect(try again.topVia().branch == "z9hG4bK1, SIP/2.0/UDP evil.example.com;branch=z9hG4bKevil")
        // A To tag is a token; the rest is dropped.
        let req = try SIPMessage(bytes: try fixture("prack.sip"))
        var bare = req
        bare.remove(.to)
        try bare.append(.to, "<sips:bob@example.net>")
        let resp = SIPMessage(responseTo: bare, statusCode: 180, toTag: "abc;tag=evil>, <sip:x")
        #expect(resp.toTag == "abctagevilsipx")
        #expect(try SIPMessage(bytes: resp.serialized()).to().parameters.count == 1)
        // Reason phrases lose control bytes.
        let r = SIPMessage(statusCode: 200, reasonPhrase: "bad\u{1}reason")
        #expect(try SIPMessage(bytes: r.serialized()).reasonPhrase == "badreason")
    }

    @Test func builtMessageWritesEachPieceOnceWithTheBodyLength() throws {
        // An extension header keeps its spelling, the first Content-Length line is written
        // where it stands with the body's real length, a second one is dropped.
        var r = SIPMessage(statusCode: 486, reasonPhrase: "Busy Here")
        try r.append("X-Long-Extension-Name", "a b")
        try r.append(.contentLength, "99")
        try r.append(.subject, "s")
        try r.append(.contentLength, "7")
        #expect(String(decoding: r.serialized(), as: UTF8.self) == "SIP/2.0 486 Busy Here\r\nX-Long-Extension-Name: a b\r\nContent-Length: 0\r\nSubject: s\r\n\r\n")
        r.setBody(Array(repeating: UInt8(ascii: "x"), count: 1234))
        let text = String(decoding: r.serialized(), as: UTF8.self)
        #expect(text.hasPrefix("SIP/2.0 486 Busy Here\r\nX-Long-Extension-Name: a b\r\nContent-Length: 1234\r\nSubject: s\r\n"))
        #expect(text.hasSuffix("\r\n\r\n" + String(repeating: "x", count: 1234)))
        #expect(try SIPMessage(bytes: r.serialized()).contentLength == 1234)
        // A message without Content-Length gets one at the end of its headers.
        var m = try SIPMessage(method: .options, uri: try SIPURI("sip:a@b.example"))
        try m.append(.callID, "x")
        #expect(String(decoding: m.serialized(), as: UTF8.self) == "OPTIONS sip:a@b.example SIP/2.0\r\nCall-ID: x\r\nContent-Length: 0\r\n\r\n")
    }

    @Test func headerValueCheckNamesTheOffendingByte() throws {
        var m = SIPMessage(statusCode: 200)
        for (value, offset) in [("abc\u{0}", 3), ("\r", 0), ("é\nx", 2)] {
            do {
                try m.append(.subject, value)
                Issue.record("\(value.debugDescription) was accepted")
            } catch {
                #expect(error.rule == .headerValue)
                #expect(error.offset == offset)
            }
        }
        try m.append(.subject, "tab\tand é are fine")
        #expect(m[.subject] == "tab\tand é are fine")
    }

    @Test func bodyChangeUpdatesContentLength() throws {
        var m = try SIPMessage(bytes: try fixture("notify-sipfrag.sip"))
        m.setBody(Array("SIP/2.0 180 Ringing\r\n".utf8))
        let p = try SIPMessage(bytes: m.serialized())
        #expect(p.contentLength == 21)
        #expect(p.count(of: .contentLength) == 1)
        #expect(String(decoding: p.body, as: UTF8.self) == "SIP/2.0 180 Ringing\r\n")
    }
}
