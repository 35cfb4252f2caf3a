import Testing
@testable import SIPMessage

/// `message/sipfrag` status lines (RFC 3420) as REFER's NOTIFYs carry them (RFC 3515 §2.4.5).
@Suite("sipfrag status lines")
struct SIPFragStatusTests {
    @Test("status lines as peers write them", arguments: [
        ("SIP/2.0 100 Trying\r\n", 100, "Trying"),
        ("SIP/2.0 180 Ringing", 180, "Ringing"),
        ("SIP/2.0 200 OK\r\nContact: <sip:c@192.0.2.3>\r\n", 200, "OK"),
        ("\r\nSIP/2.0 486 Busy Here\n", 486, "Busy Here"),
        ("SIP/2.0 200", 200, ""),
        ("sip/2.0 603 Declined\r\n", 603, "Declined"),
        ("SIP/2.0 503\tService Unavailable", 503, "Service Unavailable"),
    ])
    func parses(_ text: String, _ code: Int, _ reason: String) throws {
        let s = try SIPFragStatus(parsing: Array(text.utf8))
        #expect(s.statusCode == code)
        #expect(s.reasonPhrase == reason)
        #expect(s.isFinal == (code >= 200))
    }

    @Test("what is not a status line is a typed error naming the byte and the rule", arguments: [
        ("", SIPParseError.Rule.emptyMessage, 0),
        ("\r\n\r\n", .emptyMessage, 4),
        ("INVITE sip:bob@b SIP/2.0\r\n", .statusLine, 0),
        ("SIP/2.0 2x0 OK", .statusCode, 9),
        ("SIP/2.0 099 Low", .statusCode, 8),
        ("SIP/2.0 700 High", .statusCode, 8),
        ("SIP/2.0 200OK", .statusLine, 11),
        ("SIP/3.0 200 OK", .statusLine, 0),
        ("hello", .statusLine, 0),
    ])
    func rejects(_ text: String, _ rule: SIPParseError.Rule, _ offset: Int) {
        #expect(throws: SIPParseError.self) { try SIPFragStatus(parsing: Array(text.utf8)) }
        do {
            _ = try SIPFragStatus(parsing: Array(text.utf8))
        } catch {
            #expect(error.rule == rule)
            #expect(error.offset == offset)
        }
    }

    @Test("a body over the limit is refused without being read")
    func bounded() {
        let big = Array("SIP/2.0 200 OK\r\n".utf8) + [UInt8](repeating: 65, count: SIPFragStatus.maximumLength)
        #expect(throws: SIPParseError.self) { try SIPFragStatus(parsing: big) }
    }

    @Test("serialized as a status line with CRLF, and read back")
    func roundTrip() throws {
        let s = SIPFragStatus(statusCode: 180, reasonPhrase: "Ringing")
        #expect(String(decoding: s.bytes, as: UTF8.self) == "SIP/2.0 180 Ringing\r\n")
        #expect(try SIPFragStatus(parsing: s.bytes) == s)
        #expect(SIPFragStatus(statusCode: 200, reasonPhrase: "").description == "SIP/2.0 200")
    }

    @Test("random bytes never crash the parser")
    func fuzzish() {
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array("SIP/2.0 123456789\r\n\t xyz".utf8)
        for _ in 0..<2000 {
            let n = Int.random(in: 0...40, using: &rng)
            let bytes = (0..<n).map { _ in alphabet.randomElement(using: &rng)! }
            _ = try? SIPFragStatus(parsing: bytes)
        }
    }
}
