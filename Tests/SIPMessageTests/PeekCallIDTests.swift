import Testing
@testable import SIPMessage

@Suite struct PeekCallIDTests {
    private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

    @Test func findsTheLongAndCompactForms() {
        let long = bytes("INVITE sip:b@h SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nCALL-ID:  abc@host \r\nCSeq: 1 INVITE\r\n\r\n")
        #expect(SIPMessage.peekCallID(in: long) == "abc@host")
        let compact = bytes("SIP/2.0 200 OK\r\nv: SIP/2.0/UDP h\r\nI : x1\r\n\r\n")
        #expect(SIPMessage.peekCallID(in: compact) == "x1")
        let bareLF = bytes("OPTIONS sip:h SIP/2.0\nf: <sip:a@h>\ni: lf-only\n\n")
        #expect(SIPMessage.peekCallID(in: bareLF) == "lf-only")
    }

    @Test func agreesWithTheParser() throws {
        let text = "BYE sip:b@h SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK2\r\nTo: <sip:b@h>;tag=1\r\nFrom: <sip:a@h>;tag=2\r\nCall-ID: 8f2c1@10.0.0.1\r\nCSeq: 2 BYE\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
        let parsed = try SIPMessage(bytes: bytes(text))
        #expect(SIPMessage.peekCallID(in: bytes(text)) == parsed.callID)
    }

    @Test func ignoresLookalikesAndTheBody() {
        // Headers whose names only start like Call-ID, a Call-ID in the body, none in the headers.
        let text = "MESSAGE sip:b@h SIP/2.0\r\nCall-Info: <http://x>\r\nCall\rID: no\r\nid: no\r\nContent-Length: 12\r\n\r\nCall-ID: body"
        #expect(SIPMessage.peekCallID(in: bytes(text)) == nil)
        #expect(SIPMessage.peekCallID(in: bytes("Call-ID:   \r\n\r\n")) == nil)
        #expect(SIPMessage.peekCallID(in: []) == nil)
        #expect(SIPMessage.peekCallID(in: bytes("garbage without newline")) == nil)
    }

    @Test func stopsAtTheLimit() {
        let text = "OPTIONS sip:h SIP/2.0\r\n" + String(repeating: "X-Pad: 0123456789\r\n", count: 100) + "Call-ID: far\r\n\r\n"
        #expect(SIPMessage.peekCallID(in: bytes(text)) == "far")
        #expect(SIPMessage.peekCallID(in: bytes(text), limit: 200) == nil)
    }
}
