import Testing
@testable import SIPMessage

/// A message keeps its start line in two words (``StartWord``, ``PackedRange``): the method's
/// code or the status code, the version, and the span of `METHOD SP Request-URI` or of the
/// reason phrase. Every way a message is made must read back the same start line.
@Suite("The start line in two words")
struct StartLineTests {
    /// Six scalars: more would make other modules copy messages through value witnesses.
    @Test func aMessageIsSixWords() {
        #expect(MemoryLayout<SIPMessage>.size == 6 * 8)
    }

    @Test func everyKnownMethodRoundTripsItsCode() throws {
        let all: [SIPMethod] = [.invite, .ack, .bye, .cancel, .register, .options, .info, .update, .prack,
                                .subscribe, .notify, .refer, .message, .publish]
        #expect(Set(all.map(\.code)).count == all.count && !all.map(\.code).contains(0))
        for m in all {
            #expect(SIPMethod(code: Int(m.code)) == m)
            #expect(SIPMethod.tokenLength(code: Int(m.code)) == m.token.utf8.count)
            let parsed = try SIPMessage(bytes: Array("\(m.token) sip:bob@example.com SIP/2.0\r\nContent-Length: 0\r\n\r\n".utf8))
            #expect(parsed.method == m)
            #expect(parsed.requestURIText == "sip:bob@example.com")
        }
        #expect(SIPMethod(code: 0) == nil && SIPMethod(code: 15) == nil)
        #expect(SIPMethod.tokenLength(code: 0) == 0)
    }

    /// An extension method's token is read back from storage, on every path that makes a request.
    @Test func anExtensionMethodIsReadFromStorage() throws {
        // Parsed, after leading blank lines (the start line is not at offset 0).
        let text = "\r\n\r\nPING sip:carol@example.com;transport=tcp SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nContent-Length: 0\r\n\r\n"
        let parsed = try SIPMessage(bytes: Array(text.utf8))
        #expect(parsed.method == .extension("PING"))
        #expect(parsed.requestURIText == "sip:carol@example.com;transport=tcp")
        #expect(parsed.startLine == .request(method: .extension("PING"), uri: "sip:carol@example.com;transport=tcp", version: .sip20))
        // Lower case is another method (methods are case-sensitive), not INVITE.
        let lower = try SIPMessage(bytes: Array("invite sip:a@b SIP/2.0\r\n\r\n".utf8))
        #expect(lower.method == .extension("invite"))
        // Built, then serialized and parsed again.
        var built = try SIPMessage(method: .extension("X-PROBE"), requestURI: "sip:dave@example.org")
        #expect(built.method == .extension("X-PROBE"))
        #expect(built.requestURIBytes.map(Array.init) == Array("sip:dave@example.org".utf8))
        try built.append(.callID, "c1")
        #expect(built.method == .extension("X-PROBE"))
        let again = try SIPMessage(bytes: built.serialized())
        #expect(again.method == .extension("X-PROBE"))
        #expect(again.requestURIText == "sip:dave@example.org")
        // Retargeted: the new line goes after the old storage.
        let moved = try parsed.replacingRequestURI("sip:carol@192.0.2.9:5070")
        #expect(moved.method == .extension("PING"))
        #expect(moved.requestURIText == "sip:carol@192.0.2.9:5070")
        #expect(String(decoding: moved.serialized(), as: UTF8.self).hasPrefix("PING sip:carol@192.0.2.9:5070 SIP/2.0\r\n"))
        // Forwarded in one pass.
        var edits = SIPMessage.ProxyEdits()
        edits.requestURI = "sip:carol@198.51.100.1"
        edits.maxForwards = 69
        let fwd = try #require(parsed.forwarded(edits))
        #expect(fwd.method == .extension("PING"))
        #expect(fwd.requestURIText == "sip:carol@198.51.100.1")
        #expect(try SIPMessage(bytes: fwd.serialized()).method == .extension("PING"))
    }

    @Test func versionsStatusCodesAndReasonsSurvive() throws {
        let odd = try SIPMessage(bytes: Array("OPTIONS sip:a@b SIP/12.345\r\n\r\n".utf8))
        #expect(odd.version == SIPVersion(major: 12, minor: 345))
        #expect(odd.method == .options && odd.statusCode == nil && odd.reasonPhrase == nil)
        let wide = try SIPMessage(bytes: Array("SIP/9999.9999 699 Way Out There\r\n\r\n".utf8))
        #expect(wide.version == SIPVersion(major: 9999, minor: 9999))
        #expect(wide.statusCode == 699 && wide.reasonPhrase == "Way Out There" && wide.method == nil && !wide.isRequest)
        for code in [100, 180, 200, 302, 486, 699] {
            let r = SIPMessage(statusCode: code, reasonPhrase: "R \(code)")
            #expect(r.statusCode == code && r.reasonPhrase == "R \(code)" && r.version == .sip20 && r.requestURIText == nil)
        }
        #expect(odd.isPristine && !SIPMessage(statusCode: 200).isPristine)
        #expect(Array(wide.body).isEmpty)
    }
}
