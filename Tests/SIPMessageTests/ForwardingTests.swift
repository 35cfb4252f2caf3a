import Testing
@testable import SIPMessage

/// ``SIPMessage/forwarded(_:)`` writes in one pass what the edit-by-edit operations write.
@Suite("Forwarding in one pass")
struct ForwardingTests {
    static let fixtureNames = listDirectory(Paths.fixtures).filter { $0.hasSuffix(".sip") }

    /// The same edits made one by one, in the order a proxy made them before.
    static func reference(_ m: SIPMessage, _ e: SIPMessage.ProxyEdits) throws -> SIPMessage {
        var r = m
        if let k = e.dropFirstElement { r.removeFirstElement(SIPHeaderName(k)) }
        if let u = e.requestURI { r = try r.replacingRequestURI(u) }
        if let n = e.maxForwards { try r.set(.maxForwards, String(n)) }
        if let rr = e.recordRoute { try r.prepend(.recordRoute, rr) }
        if let v = e.via { try r.prepend(.via, v.prefix + Via.magicCookie + v.tag + hex16(v.branch) + v.suffix) }
        return r
    }

    static func hex16(_ v: UInt64) -> String {
        let digits = String(v, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    static func requestEdits() -> [SIPMessage.ProxyEdits] {
        var all = SIPMessage.ProxyEdits()
        all.via = .init(prefix: "SIP/2.0/UDP 192.0.2.7:5060;branch=", branch: 0xFD1, suffix: ";rport")
        all.recordRoute = "<sip:192.0.2.7:5060;lr>"
        all.requestURI = "sip:bob@198.51.100.9:5070;transport=udp"
        all.maxForwards = 69
        all.dropFirstElement = .route
        var viaOnly = SIPMessage.ProxyEdits()
        viaOnly.via = .init(prefix: "SIP/2.0/TCP [2001:db8::7]:5060;branch=", tag: "a", branch: .max, suffix: "")
        viaOnly.maxForwards = 0
        return [all, viaOnly, SIPMessage.ProxyEdits()]
    }

    static func check(_ m: SIPMessage, _ e: SIPMessage.ProxyEdits) throws {
        let fwd = try #require(m.forwarded(e))
        let ref = try reference(m, e)
        // (An unedited reference stays pristine: its canonical form is what is compared.)
        #expect(String(decoding: fwd.serialized(), as: UTF8.self) == String(decoding: ref.serializedCanonically(), as: UTF8.self))
        // Its index matches its bytes: read again, the same lines, start line and body.
        #expect(fwd.isPristine)
        #expect(fwd.serializedCanonically() == fwd.serialized())
        let again = try SIPMessage(bytes: fwd.serialized())
        #expect(again.startLine == fwd.startLine)
        #expect(again.headerFields == fwd.headerFields)
        #expect(Array(again.body) == Array(fwd.body))
    }

    @Test(arguments: fixtureNames)
    func sameBytesAsEditingLineByLine(_ name: String) throws {
        let m = try SIPMessage(bytes: try fixture(name))
        if m.isRequest {
            for e in Self.requestEdits() { try Self.check(m, e) }
        } else {
            var pop = SIPMessage.ProxyEdits()
            pop.dropFirstElement = .via
            try Self.check(m, pop)
            pop.requestURI = "sip:x@example.com"
            #expect(m.forwarded(pop) == nil)
        }
    }

    @Test func routeListsViasAndRepeatedLines() throws {
        let text = "INVITE sip:alice@example.com SIP/2.0\r\n"
            + "v: SIP/2.0/UDP a.example.com;branch=z9hG4bK1, SIP/2.0/UDP b.example.com;branch=z9hG4bK2\r\n"
            + "Route: \"Proxy, Inc\" <sip:p1.example.com;lr>, <sip:p2.example.com;lr>\r\n"
            + "Route: <sip:p3.example.com;lr>\r\n"
            + "Max-Forwards: 10\r\nMax-Forwards: 11\r\n"
            + "Record-Route: <sip:rr.example.com;lr>\r\n"
            + "To: <sip:alice@example.com>\r\nf: <sip:bob@example.com>;tag=1\r\ni: abc\r\nCSeq: 1 INVITE\r\n"
            + "Subject: one,\r\n two\r\n"
            + "l: 4\r\n\r\nbody"
        let m = try SIPMessage(bytes: Array(text.utf8))
        for e in Self.requestEdits() { try Self.check(m, e) }
        let fwd = try #require(m.forwarded(Self.requestEdits()[0]))
        #expect(try fwd.route().count == 2)
        #expect(try fwd.maxForwards() == 69)
        #expect(fwd.topViaBranch == "z9hG4bK0000000000000fd1")
        #expect(try fwd.recordRoute().count == 2)
        // Lines the message did not have go at the end, Content-Length last.
        let bare = try SIPMessage(bytes: Array("OPTIONS sip:a@example.com SIP/2.0\r\nCall-ID: x\r\n\r\n".utf8))
        let added = try #require(bare.forwarded(Self.requestEdits()[0]))
        #expect(added.headerFields.map(\.known) == [.callID, .maxForwards, .recordRoute, .via, .contentLength])
        try Self.check(bare, Self.requestEdits()[0])
    }

    @Test func aRequestURIWithWhiteSpaceIsRefused() throws {
        let m = try SIPMessage(bytes: Array("OPTIONS sip:a@example.com SIP/2.0\r\nCall-ID: x\r\n\r\n".utf8))
        for bad in ["", "sip:a b@example.com", "sip:a@example.com\r\n"] {
            var e = SIPMessage.ProxyEdits()
            e.requestURI = bad
            #expect(m.forwarded(e) == nil)
        }
    }
}
