import Testing
@testable import SIPMessage

@Suite("SIP, SIPS and TEL URIs")
struct URITests {
    @Test func fullSIPURI() throws {
        let u = try SIPURI("sips:alice:secret@atlanta.example.com:5061;transport=tcp;lr;maddr=239.255.255.1?subject=project%20x&priority=urgent")
        #expect(u.secure)
        #expect(u.user == "alice")
        #expect(u.password == "secret")
        #expect(u.host == .domain("atlanta.example.com"))
        #expect(u.port == 5061)
        #expect(u.transport == "tcp")
        #expect(u.isLooseRouting)
        #expect(u.maddr == "239.255.255.1")
        #expect(u.header("Subject") == "project x")
        #expect(u.header("priority") == "urgent")
        #expect(u.description == "sips:alice:secret@atlanta.example.com:5061;transport=tcp;lr;maddr=239.255.255.1?subject=project%20x&priority=urgent")
    }

    @Test func escapingIsDecodedAndReencoded() throws {
        let u = try SIPURI("sip:%75se%72@example.com")
        #expect(u.user == "user")
        #expect(u.description == "sip:user@example.com")
        let n = try SIPURI("sip:null-%00-null@example.com")
        #expect(n.user == "null-\u{0}-null")
        #expect(n.user?.utf8.count == 11)
        #expect(n.description == "sip:null-%00-null@example.com")
        let s = try SIPURI("sip:user;par=u%40example.net@example.com")
        #expect(s.user == "user;par=u@example.net")
        #expect(s.host == .domain("example.com"))
        #expect(try SIPURI(s.description) == s)
        let e = try SIPURI("sip:sips%3Auser%40example.com@example.net")
        #expect(e.user == "sips:user@example.com")
    }

    @Test func ipv6References() throws {
        let a = try SIPURI("sip:[2001:db8::10:5070]")
        #expect(a.host == .ipv6("2001:db8::10:5070"))
        #expect(a.port == nil)
        let b = try SIPURI("sip:[2001:db8::10]:5070")
        #expect(b.host == .ipv6("2001:db8::10"))
        #expect(b.port == 5070)
        #expect(b.description == "sip:[2001:db8::10]:5070")
        let m = try SIPURI("sip:user@[::ffff:192.0.2.2]")
        #expect(m.host == .ipv6("::ffff:192.0.2.2"))
        // RFC 5118 §4.10: the RFC 3261 ABNF bug form is tolerated.
        #expect(try SIPURI("sip:user@[2001:db8:::192.0.2.1]").host == .ipv6("2001:db8:::192.0.2.1"))
        expectParseError(.host) { _ = try SIPURI("sip:user@[2001:db8:::1]") }
        expectParseError(.host) { _ = try SIPURI("sip:user@[1:2:3:4:5:6:7:8:9]") }
        expectParseError(.host) { _ = try SIPURI("sip:user@[12345::1]") }
        expectParseError(.host) { _ = try SIPURI("sip:user@[2001:db8::1") }
        expectParseError(.host) { _ = try SIPURI("sip:user@2001:db8::10") }
    }

    @Test func badURIsAreRejected() {
        expectParseError(.uri) { _ = try SIPURI("http://example.com") }
        expectParseError(.port) { _ = try SIPURI("sip:a@b:70000") }
        expectParseError(.port) { _ = try SIPURI("sip:a@b:") }
        expectParseError(.escape) { _ = try SIPURI("sip:a%zz@b") }
        expectParseError(.escape) { _ = try SIPURI("sip:a%4@b") }
        expectParseError(.host) { _ = try SIPURI("sip:a@") }
        expectParseError(.host) { _ = try SIPURI("sip:a@256.1.1.1") }
        expectParseError(.host) { _ = try SIPURI("sip:a@-bad.example.com") }
        expectParseError(.host) { _ = try SIPURI("sip:a@exa mple.com") }
        expectParseError(.parameter) { _ = try SIPURI("sip:a@b;;lr") }
        expectParseError(.parameter) { _ = try SIPURI("sip:a@b;x=") }
        expectParseError(.uri) { _ = try SIPURI("sip:a@b?noequals") }
        expectParseError(.uri) { _ = try SIPURI("sip:@b") }
    }

    @Test func telURIs() throws {
        let t = try URI("tel:+1-201-555-0123;phone-context=example.com")
        guard case .tel(let tel) = t else { Issue.record("not tel"); return }
        #expect(tel.isGlobal)
        #expect(tel.digits == "+12015550123")
        #expect(tel.parameters["phone-context"] == .some("example.com"))
        #expect(t.description == "tel:+1-201-555-0123;phone-context=example.com")
        expectParseError(.uri) { _ = try URI("tel:") }
        expectParseError(.uri) { _ = try URI("tel:12 34") }
    }

    @Test func otherSchemesAreKept() throws {
        let u = try URI("urn:service:sos")
        #expect(u.scheme == "urn")
        #expect(u.description == "urn:service:sos")
        expectParseError(.uri) { _ = try URI("1abc:x") }
        expectParseError(.uri) { _ = try URI("<sip:a@b>") }
        expectParseError(.uri) { _ = try URI("noscheme") }
    }

    @Test func equivalenceFollowsRFC3261() throws {
        #expect(try SIPURI("sip:%61lice@atlanta.com;transport=TCP").isEquivalent(to: SIPURI("sip:alice@AtLanTa.CoM;Transport=tcp")))
        #expect(try !SIPURI("sip:alice@atlanta.com").isEquivalent(to: SIPURI("sip:ALICE@atlanta.com")))
        #expect(try !SIPURI("sip:bob@biloxi.com").isEquivalent(to: SIPURI("sip:bob@biloxi.com:5060")))
        #expect(try !SIPURI("sip:bob@biloxi.com").isEquivalent(to: SIPURI("sip:bob@biloxi.com;transport=udp")))
        #expect(try SIPURI("sip:carol@chicago.com").isEquivalent(to: SIPURI("sip:carol@chicago.com;newparam=5")))
    }
}
