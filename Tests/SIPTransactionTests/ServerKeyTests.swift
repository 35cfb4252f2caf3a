import Testing
import SIPMessage
@testable import SIPTransaction

/// The server-transaction key read from the bytes (the common case) equals the one built from
/// the decoded Via, for every shape of top Via.
@Suite("Server transaction keys")
struct ServerKeyTests {
    static func request(via: String) throws -> SIPMessage {
        try SIPMessage(bytes: Array("""
        INVITE sip:bob@example.com SIP/2.0\r
        Via: \(via)\r
        Via: SIP/2.0/UDP 192.0.2.9;branch=z9hG4bKsecond\r
        From: <sip:a@example.com>;tag=1\r
        To: <sip:bob@example.com>\r
        Call-ID: k@x\r
        CSeq: 1 INVITE\r
        Max-Forwards: 70\r
        Content-Length: 0\r
        \r

        """.utf8))
    }

    /// The key as the decoded Via gives it.
    static func decoded(_ m: SIPMessage) throws -> ServerKey {
        let via = try m.topVia()
        return .rfc3261(branch: via.branch ?? "", sentBy: via.host.address.lowercased() + ":" + String(via.port ?? 0), method: .invite)
    }

    @Test(arguments: [
        "SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bK-1234-1-0",
        "SIP/2.0/UDP 127.0.0.1;branch=z9hG4bKnoport",
        "SIP/2.0/TCP PC33.Atlanta.EXAMPLE.com:5061;rport;branch=z9hG4bKcase",
        "SIP/2.0/UDP   host_name.example.com:5070 ;branch=z9hG4bKspaces",
        "sip / 2.0 / udp 192.0.2.1:5060;received=192.0.2.2;branch=z9hG4bKlws",
        "SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bKfirst, SIP/2.0/UDP 192.0.2.3;branch=z9hG4bKsame-line",
        // `SIP/2.0/` is read as one word when written so, token by token otherwise.
        "SIP/2.0/ UDP 192.0.2.1:5062;branch=z9hG4bKb",
        "SIP/2.0/\tTLS host.example.com;branch=z9hG4bKc",
        "SIP/2.0 /UDP 192.0.2.1:5062;branch=z9hG4bKd",
        "SIP/2.1/UDP 192.0.2.4:5064;branch=z9hG4bKe",
        "Sip/2.0/UDP 192.0.2.5;rport;branch=z9hG4bKf",
        "SIP/2.0/U 192.0.2.6:7;branch=z9hG4bKg",
        "SIP/2.0/UDP 192.0.2.7:5060;rport=5061;branch=z9hG4bKh",
        "SIP/2.0/UDP 192.0.2.8:5060;BRANCH=z9hG4bKi;RPort",
        "SIP/2.0/UDP 192.0.2.9:5060;x=\"quoted;value\";branch=z9hG4bKj",
    ])
    func bytePathMatchesTheDecodedVia(via: String) throws {
        let m = try Self.request(via: via)
        let sentBy = try #require(m.topViaSentBy)
        let decoded = try m.topVia()
        #expect(String(decoding: sentBy.host, as: UTF8.self) == decoded.host.address)
        #expect(sentBy.port == decoded.port)
        #expect(ServerKey(request: m) == (try Self.decoded(m)))
        // The one-scan reading agrees with the decoded Via, or declines (a quoted value).
        if let parts = m.topViaParts {
            #expect(Array(parts.host(in: m)) == Array(sentBy.host) && parts.port == sentBy.port)
            #expect(parts.branch(in: m).map { String(decoding: $0, as: UTF8.self) } == decoded.branch)
            #expect(parts.rport == (decoded.parameters.first { $0.name.lowercased() == "rport" }.map { $0.value == nil } ?? false))
        } else {
            #expect(via.contains("\""))
        }
    }

    @Test func ipv6SentByFallsBackToTheDecodedVia() throws {
        let m = try Self.request(via: "SIP/2.0/UDP [2001:DB8::1]:5060;branch=z9hG4bKv6")
        #expect(m.topViaSentBy == nil)
        #expect(ServerKey(request: m) == (try Self.decoded(m)))
    }

    @Test func sentByReadsHostAndPort() throws {
        let m = try Self.request(via: "SIP/2.0/UDP 198.51.100.7:5070;branch=z9hG4bKx")
        let s = try #require(m.topViaSentBy)
        #expect(Array(s.host) == Array("198.51.100.7".utf8))
        #expect(s.port == 5070)
    }

    /// Keys hash the branch only: keys that differ in sent-by or method are still distinct
    /// (a set holds all of them), and equal keys are found.
    @Test func keysDifferingBeyondTheBranchStayDistinct() throws {
        let a = ServerKey.rfc3261(branch: "z9hG4bKsame", sentBy: "192.0.2.1:5060", method: .invite)
        let b = ServerKey.rfc3261(branch: "z9hG4bKsame", sentBy: "192.0.2.2:5060", method: .invite)
        let c = ServerKey.rfc3261(branch: "z9hG4bKsame", sentBy: "192.0.2.1:5060", method: .bye)
        let set: Set<ServerKey> = [a, b, c]
        #expect(set.count == 3)
        #expect(set.contains(.rfc3261(branch: "z9hG4bKsame", sentBy: "192.0.2.2:5060", method: .invite)))
        #expect(!set.contains(.rfc3261(branch: "z9hG4bKsame", sentBy: "192.0.2.3:5060", method: .invite)))
    }

    /// The cookie written out in `hasMagicCookie` is ``Via/magicCookie``.
    @Test func writtenOutCookieIsTheViaCookie() {
        #expect(ServerKey.hasMagicCookie(ArraySlice(Via.magicCookie.utf8)))
        #expect(!ServerKey.hasMagicCookie(ArraySlice(Via.magicCookie.utf8.dropLast())))
    }

    /// The magic cookie is compared exactly, on the bytes: a branch that only resembles it
    /// (another case, or cut short) is keyed by the RFC 2543 rule.
    @Test(arguments: ["z9hG4bk-lower", "z9hG4b", "Z9hG4bK-upper"])
    func branchWithoutTheExactCookieUsesTheRFC2543Key(branch: String) throws {
        let m = try Self.request(via: "SIP/2.0/UDP 192.0.2.1:5060;branch=\(branch)")
        guard case .rfc2543 = try #require(ServerKey(request: m)).kind else {
            Issue.record("expected an RFC 2543 key for branch \(branch)")
            return
        }
    }
}
