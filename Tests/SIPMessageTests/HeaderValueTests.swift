import Testing
@testable import SIPMessage

@Suite("Typed header values")
struct HeaderValueTests {
    @Test func via() throws {
        let v = try Via("SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bK776;received=198.51.100.1;rport=33333;maddr=224.2.0.1;ttl=16")
        #expect(v.transport == "UDP")
        #expect(v.host == .ipv4("192.0.2.1"))
        #expect(v.port == 5060)
        #expect(v.branch == "z9hG4bK776")
        #expect(v.hasRFC3261Branch)
        #expect(v.received == "198.51.100.1")
        #expect(v.rport == .some(33333))
        #expect(v.maddr == "224.2.0.1")
        #expect(v.ttl == 16)
        #expect(try Via(v.description) == v)
        let flag = try Via("SIP/2.0/TCP host.example.com ; rport ; branch = z9hG4bKx")
        #expect(flag.rport == .some(nil))
        #expect(flag.branch == "z9hG4bKx")
        #expect(try Via("SIP / 2.0 / UDP h").transport == "UDP")
        let v6 = try Via("SIP/2.0/UDP [2001:db8::9:1];received=2001:db8::9:255;branch=z9hG4bK1")
        #expect(v6.host == .ipv6("2001:db8::9:1"))
        #expect(v6.received == "2001:db8::9:255")
        #expect(try Via("SIP/2.0/UDP [2001:db8::9:1];received=[2001:db8::9:255]").received == "[2001:db8::9:255]")
        expectParseError(.parameter) { _ = try Via("SIP/2.0/UDP 192.0.2.15;;") }
        expectParseError(.via) { _ = try Via("SIP/2.0/UDP") }
        expectParseError(.via) { _ = try Via("SIP/2.0 UDP host") }
        expectParseError(.via) { _ = try Via("SIP/2.0/UDP host;ttl=300") }
        expectParseError(.via) { _ = try Via("SIP/2.0/UDP host;received=not an address") }
        expectParseError(.port) { _ = try Via("SIP/2.0/UDP host:99999") }
    }

    @Test func nameAddressForms() throws {
        let a = try NameAddress("\"J Rosenberg \\\\\\\"\" <sip:jdrosen@example.com>;tag=98asjd8")
        #expect(a.displayName == "J Rosenberg \\\"")
        #expect(a.tag == "98asjd8")
        let b = try NameAddress("sip:alice@atlanta.com;tag=88sja8x")
        #expect(b.displayName == nil)
        #expect(b.tag == "88sja8x")
        #expect(b.sipURI?.parameters.isEmpty == true)  // the parameter belongs to the header
        let c = try NameAddress("Bob Smith <sip:bob@example.com;transport=tcp>;expires=60")
        #expect(c.displayName == "Bob Smith")
        #expect(c.sipURI?.transport == "tcp")
        #expect(c.expires == 60)
        let d = try NameAddress("caller<sip:caller@example.com>")
        #expect(d.displayName == "caller")
        #expect(c.description == "\"Bob Smith\" <sip:bob@example.com;transport=tcp>;expires=60")
        #expect(try NameAddress(c.description) == c)
        expectParseError(.quotedString) { _ = try NameAddress("\"Mr. J. User <sip:j.user@example.com>") }
        expectParseError(.nameAddress) { _ = try NameAddress("Bell, Alexander <sip:a.g.bell@example.com>") }
        expectParseError(.nameAddress) { _ = try NameAddress("< sip:t.watson@example.org >") }
        expectParseError(.nameAddress) { _ = try NameAddress("sip:user@example.com?Route=%3Csip:sip.example.com%3E") }
        expectParseError(.nameAddress) { _ = try NameAddress("<sip:a@b") }
        expectParseError(.nameAddress) { _ = try NameAddress("") }
        expectParseError(.nameAddress) { _ = try NameAddress("<sip:a@b> junk") }
    }

    @Test func cseq() throws {
        let m = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nCSeq: 4294967295 OPTIONS\n\n"))
        #expect(try m.cseq() == CSeq(4294967295, .options))
        let big = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nCSeq: 4294967296 OPTIONS\n\n"))
        expectParseError(.cseq) { _ = try big.cseq() }
        let noMethod = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nCSeq: 1\n\n"))
        expectParseError(.cseq) { _ = try noMethod.cseq() }
        let none = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\n\n"))
        expectParseError(.missingHeader) { _ = try none.cseq() }
    }

    @Test func authentication() throws {
        let m = try SIPMessage(bytes: fixture("kamailio-401-challenge.sip"))
        let ch = try m.wwwAuthenticate()
        #expect(ch.count == 2)
        #expect(ch[0].scheme == "Digest")
        #expect(ch[0].realm == "127.0.0.1")
        #expect(ch[0].algorithm == "MD5")
        #expect(ch[0].qopOptions.isEmpty)
        #expect(ch[1].algorithm == "SHA-256")
        #expect(ch[1].qopOptions == ["auth", "auth-int"])
        #expect(ch[1].opaque == "5ccc069c403ebaf9f0171e9517f40e41")
        #expect(!ch[1].stale)
        let r = try SIPMessage(bytes: fixture("register-digest.sip"))
        let cred = try #require(try r.authorization().first)
        #expect(cred.username == "bob")
        #expect(cred.uri == "sip:registrar.example.com")
        #expect(cred.nonceCount == "00000001")
        #expect(cred["QOP"] == "auth")
        #expect(try AuthenticationHeader(cred.description) == cred)
        #expect(try AuthenticationHeader("NoOneKnowsThisScheme opaque-data=here").scheme == "NoOneKnowsThisScheme")
        expectParseError(.authentication) { _ = try AuthenticationHeader("Digest realm=\"x\" nonce=\"y\"") }
        expectParseError(.quotedString) { _ = try AuthenticationHeader("Digest realm=\"x") }
    }

    @Test func contactWildcardAndParameters() throws {
        let star = try SIPMessage(bytes: crlf("REGISTER sip:r SIP/2.0\nContact: *\nExpires: 0\n\n"))
        #expect(try star.contact() == .wildcard)
        #expect(try star.expires() == 0)
        let r = try SIPMessage(bytes: fixture("register-digest.sip"))
        let c = try #require(try r.contact()?.addresses.first)
        #expect(c.sipURI?.host == .ipv6("2001:db8::5"))
        #expect(c.sipURI?.parameters.contains("ob") == true)
        #expect(c.parameters["+sip.instance"] == .some("<urn:uuid:00000000-0000-1000-8000-AABBCCDDEEFF>"))
        #expect(c.parameters["reg-id"] == .some("1"))
        #expect(c.expires == 3600)
        let bad = try SIPMessage(bytes: crlf("REGISTER sip:r SIP/2.0\nContact: <sip:a@b>;q=2\n\n"))
        expectParseError(.parameter) { _ = try bad.contact() }
        let mixed = try SIPMessage(bytes: crlf("REGISTER sip:r SIP/2.0\nContact: *, <sip:a@b>\n\n"))
        expectParseError(.nameAddress) { _ = try mixed.contact() }
    }

    @Test func referToWithEmbeddedReplaces() throws {
        let m = try SIPMessage(bytes: fixture("refer-attended.sip"))
        let to = try #require(try m.referTo())
        #expect(to.sipURI?.user == "carol")
        let rep = try #require(try m.referToReplaces())
        #expect(rep.callID == "12345601@chicago.example.com")
        #expect(rep.fromTag == "54321")
        #expect(rep.toTag == "12345")
        #expect(!rep.earlyOnly)
        #expect(to.sipURI?.header("Require") == "replaces")
        #expect(try m.referredBy()?.displayName == "Alice")
        #expect(try m.event()?.package == "refer")
        let r2 = try Replaces("425928@bobster.example.org;to-tag=7743;from-tag=6472;early-only")
        #expect(r2.earlyOnly)
        #expect(try Replaces(r2.description) == r2)
        expectParseError(.headerStructure) { _ = try Replaces("abc;to-tag=1") }
    }

    @Test func mediaTypesInAnyCaseWithAndWithoutParameters() throws {
        #expect(try MediaType("Application/SDP") == .sdp)
        #expect(try MediaType("application/sdp") == .sdp)
        let p = try MediaType("application/sdp;charset=utf-8")
        #expect(p.essence == "application/sdp" && p.parameters["charset"] == .some("utf-8") && p != .sdp)
        #expect(try MediaType("application/sdpx").subtype == "sdpx")
        expectParseError(.headerStructure) { _ = try MediaType("application/sdp/") }
    }

    @Test func notifyEventAndSubscriptionState() throws {
        let m = try SIPMessage(bytes: fixture("notify-sipfrag.sip"))
        #expect(try m.event()?.id == "314160")
        let s = try #require(try m.subscriptionState())
        #expect(s.state == "terminated")
        #expect(s.reason == "noresource")
        #expect(try m.contentType()?.parameters["version"] == .some("2.0"))
        #expect(try m.contentType()?.essence == "message/sipfrag")
        let sub = try SIPMessage(bytes: fixture("subscribe-presence.sip"))
        #expect(try sub.allowEvents() == ["presence", "dialog", "refer"])
        #expect(try sub.topVia().transport == "WSS")
    }

    @Test func redirectionDiversionRetryAfter() throws {
        let m = try SIPMessage(bytes: fixture("redirect-302-diversion.sip"))
        let contacts = try #require(try m.contact()).addresses
        #expect(contacts.count == 2)
        #expect(contacts[0].q == 0.7)
        #expect(contacts[0].sipURI?.userParameter == "phone")
        guard case .tel(let t) = contacts[1].uri else { Issue.record("expected tel"); return }
        #expect(t.number == "+1-415-555-0124")
        let d = try #require(try m.diversion().first)
        #expect(d.parameters["reason"] == .some("unconditional"))
        #expect(d.parameters["counter"] == .some("1"))
        let ra = try #require(try m.retryAfter())
        #expect(ra.seconds == 120)
        #expect(ra.comment == "in a meeting")
        #expect(ra.duration == 3600)
    }

    @Test func prackSessionTimerReason() throws {
        let p = try SIPMessage(bytes: fixture("183-100rel-session-timer.sip"))
        #expect(try p.rseq() == 988789)
        #expect(try p.require() == ["100rel"])
        #expect(try p.sessionExpires() == SessionExpires(seconds: 1800, refresher: "uac"))
        #expect(try p.minSE() == 90)
        #expect(try p.topVia().transport == "TLS")
        let pr = try SIPMessage(bytes: fixture("prack.sip"))
        #expect(try pr.rack() == RAck(rseq: 988789, cseq: 10, method: .invite))
        let bye = try SIPMessage(bytes: fixture("bye-reason.sip"))
        let reasons = try bye.reason()
        #expect(reasons.count == 2)
        #expect(reasons[0].protocolName == "Q.850")
        #expect(reasons[0].cause == 16)
        #expect(reasons[1].text == "Call completed elsewhere")
        #expect(try bye.route().map { $0.sipURI?.host } == [.domain("proxy1.example.com"), .domain("proxy2.example.com")])
        let ok = try SIPMessage(bytes: fixture("asterisk-200-ok.sip"))
        #expect(try ok.recordRoute().count == 2)
        #expect(try ok.recordRoute()[0].sipURI?.isLooseRouting == true)
        #expect(try ok.allow().contains(.refer))
        #expect(try ok.topVia().received == "198.51.100.7")
        #expect(try ok.topVia().rport == .some(5060))
    }

    @Test func telAndExtensionHeaders() throws {
        let m = try SIPMessage(bytes: fixture("options-tel-uri.sip"))
        guard case .tel = try m.requestURI() else { Issue.record("expected tel Request-URI"); return }
        let pai = try m.pAssertedIdentity()
        #expect(pai.count == 2)
        #expect(pai[0].displayName == "Operator")
        #expect(m["x-custom-header"] == "some value; with=params")
        try m.validate()
    }

    @Test func multipartBodies() throws {
        let m = try SIPMessage(bytes: fixture("multipart-sdp-isup.sip"))
        let parts = try #require(try m.multipartParts())
        #expect(parts.count == 2)
        #expect(parts[0].contentType == .sdp)
        #expect(String(decoding: parts[0].body, as: UTF8.self).hasPrefix("v=0\r\n"))
        #expect(String(decoding: parts[0].body, as: UTF8.self).hasSuffix("RTP/AVP 0"))
        #expect(parts[1].contentType?.essence == "application/isup")
        #expect(parts[1].headers.count == 2)
        #expect(String(decoding: parts[1].body, as: UTF8.self) == "ISUP-IAM-PLACEHOLDER")
        let noBoundary = try SIPMessage(bytes: crlf("MESSAGE sip:a@b SIP/2.0\nContent-Type: multipart/mixed\nContent-Length: 0\n\n"))
        expectParseError(.multipart) { _ = try noBoundary.multipartParts() }
        expectParseError(.multipart) { _ = try MultipartPart.split(ArraySlice(Array("--b\r\nno end".utf8)), boundary: "b") }
    }

    @Test func validationCatchesWhatTheRFCRequires() throws {
        func v(_ s: String) throws { try SIPMessage(bytes: crlf(s)).validate() }
        let base = "Via: SIP/2.0/UDP h;branch=z9hG4bK1\nFrom: <sip:a@b>;tag=1\nTo: <sip:c@d>\nCall-ID: x@y\n"
        try v("OPTIONS sip:c@d SIP/2.0\n" + base + "CSeq: 1 OPTIONS\n\n")
        expectParseError(.cseqMethodMismatch) { try v("OPTIONS sip:c@d SIP/2.0\n" + base + "CSeq: 1 INVITE\n\n") }
        expectParseError(.missingHeader) { try v("OPTIONS sip:c@d SIP/2.0\n" + base + "\n") }
        expectParseError(.duplicateHeader) { try v("OPTIONS sip:c@d SIP/2.0\n" + base + "Call-ID: z\nCSeq: 1 OPTIONS\n\n") }
        expectParseError(.number) { try v("OPTIONS sip:c@d SIP/2.0\n" + base + "CSeq: 1 OPTIONS\nMax-Forwards: 256\n\n") }
        expectParseError(.unsupportedVersion) { try v("OPTIONS sip:c@d SIP/3.0\n" + base + "CSeq: 1 OPTIONS\n\n") }
        expectParseError(.uri) { try v("OPTIONS sip:c@d?Route=x SIP/2.0\n" + base + "CSeq: 1 OPTIONS\n\n") }
        expectParseError(.headerStructure) { try v("OPTIONS sip:c@d SIP/2.0\n" + base.replacingOccurrences("Call-ID: x@y", "Call-ID: x@y@z") + "CSeq: 1 OPTIONS\n\n") }
        let e = expectParseError(.unsupportedVersion) { try v("OPTIONS sip:c@d SIP/3.0\n\n") }
        #expect(e?.suggestedStatusCode == 505)
    }

    /// Presence and uniqueness are checked in one pass: still the first missing header in the
    /// order Via, From, To, Call-ID, CSeq, before any repeated one; else the first repeated
    /// header in the order From, To, Call-ID, CSeq, Max-Forwards, Content-Type, Expires, at the
    /// offset of its second line.
    @Test func validationReportsTheFirstMissingThenTheFirstRepeatedHeader() throws {
        func v(_ s: String) throws { try SIPMessage(bytes: crlf(s)).validate() }
        let via = "Via: SIP/2.0/UDP h;branch=z9hG4bK1\n", from = "From: <sip:a@b>;tag=1\n", to = "To: <sip:c@d>\n"
        let id = "Call-ID: x@y\n", cseq = "CSeq: 1 OPTIONS\n"
        // Missing To and CSeq, repeated Expires: the missing To wins.
        var e = expectParseError(.missingHeader) { try v("OPTIONS sip:c@d SIP/2.0\n" + via + from + id + "Expires: 1\nExpires: 2\n\n") }
        #expect(e?.detail.contains("To") == true)
        // Repeated Expires (first in the message) and CSeq: CSeq comes first in the order.
        let text = "OPTIONS sip:c@d SIP/2.0\n" + "Expires: 1\nExpires: 2\n" + via + from + to + id + cseq + "CSeq: 2 OPTIONS\n\n"
        e = expectParseError(.duplicateHeader) { try v(text) }
        #expect(e?.detail.contains("CSeq") == true)
        let bytes = crlf(text), needle = Array("CSeq: 2".utf8)
        let second = try #require((0...(bytes.count - needle.count)).first { Array(bytes[$0..<($0 + needle.count)]) == needle })
        #expect(e?.offset == second)
        // Three Max-Forwards lines: reported at the second.
        e = expectParseError(.duplicateHeader) { try v("OPTIONS sip:c@d SIP/2.0\n" + via + from + to + id + cseq + "Max-Forwards: 1\nMax-Forwards: 2\nMax-Forwards: 3\n\n") }
        #expect(e?.detail.contains("Max-Forwards") == true)
        // Two Vias are fine.
        try v("OPTIONS sip:c@d SIP/2.0\n" + via + via + from + to + id + cseq + "\n")
    }
}
