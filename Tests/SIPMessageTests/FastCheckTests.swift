import Testing
@testable import SIPMessage

/// Validation's quick scanners (FastCheck) may only accept what the full decoders accept: a
/// value they pass skips the decoder, so any disagreement would let a malformed message in
/// (or change which error a message gets).
@Suite("Validation quick scan")
struct FastCheckTests {
    static let uris = [
        "sip:alice@example.com", "sips:bob@192.0.2.4:5061", "SIP:Carol@Host.Example.COM;transport=TCP;lr",
        "sip:service@127.0.0.1:5060", "sip:[2001:db8::1]:5060", "sip:alice:pw@host", "sip:a%41@host",
        "sip:host;maddr=239.255.255.1;ttl=15", "sip:host?Subject=x", "tel:+1-201-555-0123", "sip:a@host.",
        "sip:a@-host", "sip:a@1.2.3.256", "sip:a@host:65536", "sip:a@host;=x", "sip:a@host;x=", "sip:a@h_o-st.x",
        "sip:a@1234.example.com:5060", "sip:1.2.3", "sip:10.0.0.1.;lr", "sip:a@a..b", "sip:a@a-.b", "sip:0001.2.3.4",
    ]
    static let addresses = [
        "\"Alice\" <sip:alice@example.com>;tag=1928301774", "<sip:bob@example.com>", "sipp <sip:sipp@127.0.0.1:5061>;tag=1",
        "sip:bob@example.com;tag=abc", "Bob Smith <sip:bob@h>;q=0.5;expires=60", "<sip:proxy.example.com;lr>",
        "\"A \\\"B\\\"\" <sip:a@h>", "<sip:a@h>;x=\"quoted value\"", "<sip:a@h>;received=[2001:db8::1]",
        "<sip:a@h?Replaces=x>", "sip:a@h?x=y", "<tel:+123>", "<sip:a@h", "<sip:a@h> junk", " <sip:a@h> ;tag = 5 ",
    ]
    static let vias = [
        "SIP/2.0/UDP 127.0.0.1:5061;branch=z9hG4bK-1-0", "SIP/2.0/TCP host.example.com;branch=z9hG4bK77;rport",
        "SIP / 2.0 / UDP host : 5060 ; branch = z9hG4bKx ; received=192.0.2.1;rport=5060",
        "SIP/2.0/UDP [2001:db8::9]:5060;branch=z9hG4bK1", "SIP/2.0/UDP h;ttl=300", "SIP/2.0/UDP h;branch",
        "SIP/2.0/UDP h;received=2001:db8::1", "SIP/2.0/UDP h;rport=70000", "SIP/2.0/UDPh", "SIP/2.0/UDP h:99999",
    ]

    /// Every value, and every value with one byte replaced by (or with inserted) one of the
    /// bytes the grammars care about, or with one byte removed.
    static func variants(_ seeds: [String]) -> [[UInt8]] {
        let probes: [UInt8] = Array(" \t\r\n;:@<>\"?%,=[]\\-._!&/+~*()'`#$".utf8) + [0x00, 0x7F, 0x80, 0xC3]
        var out: [[UInt8]] = []
        for s in seeds {
            let b = Array(s.utf8)
            out.append(b)
            out += mutations(b, at: b.indices, probes: probes)
        }
        return out
    }

    /// `b` with one byte at each offset in `offsets` removed, replaced by each probe, or with
    /// each probe inserted before it.
    static func mutations(_ b: [UInt8], at offsets: Range<Int>, probes: [UInt8]) -> [[UInt8]] {
        var out: [[UInt8]] = []
        for k in offsets {
            var removed = b
            removed.remove(at: k)
            out.append(removed)
            for p in probes {
                var changed = b
                changed[k] = p
                out.append(changed)
                var inserted = b
                inserted.insert(p, at: k)
                out.append(inserted)
            }
        }
        return out
    }

    static func fast(_ bytes: [UInt8], _ scan: (FastCheck.Bytes, Int, Int) -> Bool) -> Bool {
        FastCheck.on(ArraySlice(bytes), scan)
    }

    @Test("the byte table holds the RFC 3261 classes of ByteClass")
    func byteMaps() {
        for b in 0...255 {
            let c = UInt8(b)
            #expect(ASCIIClass.test(c, ASCIIClass.user) == PercentEscaping.isUserChar(c), "user \(b)")
            #expect(ASCIIClass.test(c, ASCIIClass.param) == PercentEscaping.isParamChar(c), "param \(b)")
            #expect(ASCIIClass.test(c, ASCIIClass.word) == ByteClass.test(c, ByteClass.word), "word \(b)")
            #expect(ASCIIClass.test(c, ASCIIClass.alnum) == ByteClass.test(c, ByteClass.alpha | ByteClass.digit), "alnum \(b)")
            #expect(isTokenByte(c) == ByteClass.test(c, ByteClass.token), "token \(b)")
        }
    }

    /// Every variant of `seeds` that `scan` accepts, `decode` accepts too; returns how many
    /// the scan accepted (so a scan that accepts nothing cannot pass).
    static func agree(_ seeds: [String], _ scan: (FastCheck.Bytes, Int, Int) -> Bool,
                      _ decode: (ArraySlice<UInt8>) throws(SIPParseError) -> Void) -> Int {
        var accepted = 0
        for v in variants(seeds) where fast(v, scan) {
            accepted += 1
            #expect(throws: Never.self, "\(String(decoding: v, as: UTF8.self))") { try decode(ArraySlice(v)) }
        }
        return accepted
    }

    @Test("a URI the scan accepts, the decoder accepts")
    func uris() {
        let n = FastCheckTests.agree(FastCheckTests.uris, FastCheck.sipURI) { (v) throws(SIPParseError) in _ = try URI.parse(v, keep: false) }
        #expect(n > 100)
    }

    @Test("an address the scan accepts, the decoder accepts")
    func addresses() {
        let n = FastCheckTests.agree(FastCheckTests.addresses, FastCheck.nameAddress) { (v) throws(SIPParseError) in _ = try NameAddress.parse(v, keep: false) }
        #expect(n > 100)
    }

    @Test("a Contact the scan accepts, the Contact check accepts")
    func contacts() {
        let seeds = FastCheckTests.addresses + ["<sip:a@h>;q=0.7;expires=3600", "<sip:a@h>;Q=2", "<sip:a@h>;EXPIRES=x;+sip.instance=\"<urn:uuid:1>\""]
        let n = FastCheckTests.agree(seeds, FastCheck.contact) { (v) throws(SIPParseError) in
            try SIPMessage.checkContactParameters(NameAddress.parse(v), at: 0)
        }
        #expect(n > 100)
        #expect(!FastCheckTests.fast(Array("<sip:a@h>;Q=2".utf8), FastCheck.contact))
    }

    @Test("a Via the scan accepts, the decoder accepts")
    func vias() {
        let n = FastCheckTests.agree(FastCheckTests.vias, FastCheck.via) { (v) throws(SIPParseError) in _ = try Via.parse(v, keep: false) }
        #expect(n > 100)
    }

    @Test("a Call-ID the scan accepts, the full check accepts")
    func callIDs() {
        let seeds = ["a84b4c76e66710@pc33.atlanta.com", "1-19330@127.0.0.1", "x{y}<z>"]
        let n = FastCheckTests.agree(seeds, FastCheck.callID) { (v) throws(SIPParseError) in try SIPMessage.checkCallID(v) }
        #expect(n > 100)
    }

    @Test("the usual shapes take the quick path")
    func usualShapes() {
        for s in ["sip:alice@example.com", "sips:bob@192.0.2.4:5061", "SIP:Carol@Host.Example.COM;transport=TCP;lr"] {
            #expect(FastCheckTests.fast(Array(s.utf8), FastCheck.sipURI), "\(s)")
        }
        for s in FastCheckTests.addresses.prefix(6) {
            #expect(FastCheckTests.fast(Array(s.utf8), FastCheck.nameAddress), "\(s)")
        }
        #expect(FastCheckTests.fast(Array("1-19330@127.0.0.1".utf8), FastCheck.callID))
        for s in FastCheckTests.vias.prefix(3) {
            #expect(FastCheckTests.fast(Array(s.utf8), FastCheck.via), "\(s)")
        }
    }

    /// The validation error of a request with these Via lines (and other header lines), or nil
    /// when it validates.
    static func viaError(_ vias: [String], _ others: [String] = []) throws -> SIPParseError? {
        let text = "INVITE sip:bob@h SIP/2.0\r\n" + vias.map { "Via: \($0)\r\n" }.joined()
            + "From: <sip:a@h>;tag=1\r\nTo: <sip:b@h>\r\nCall-ID: c1\r\nCSeq: 1 INVITE\r\n" + others.map { "\($0)\r\n" }.joined()
            + "Content-Length: 0\r\n\r\n"
        let m = try SIPMessage(bytes: Array(text.utf8))
        do {
            try m.validate()
            return nil
        } catch {
            return error
        }
    }

    @Test("Contact lines: one address passes whole, a list is split and checked element by element")
    func contactLines() throws {
        let via = ["SIP/2.0/UDP h;branch=z9hG4bK0"]
        #expect(try FastCheckTests.viaError(via, ["Contact: <sip:a@h>;expires=60, \"B, C\" <sip:b@h>"]) == nil)
        let q = try #require(try FastCheckTests.viaError(via, ["Contact: <sip:a@h>", "Contact: <sip:a@h>, <sip:b@h>;q=2"]))
        #expect(q.rule == .parameter)
        let star = try #require(try FastCheckTests.viaError(via, ["Contact: <sip:a@h>", "Contact: *"]))
        #expect(star.detail == "'*' must be the only Contact")
    }

    @Test("values the scan passes on are refused with the decoder's error")
    func refusedByDecoder() throws {
        let one = try #require(try FastCheckTests.viaError(["SIP/2.0/UDP h;rport=70000"]))
        #expect(one.rule == .via)
        #expect(one.detail == "rport must be a port")
        // A line of two Vias is split; the bad second one is found, at its own offset.
        let line = "SIP/2.0/UDP a;branch=z9hG4bK1, SIP/2.0/UDP b;ttl=256"
        let two = try #require(try FastCheckTests.viaError(["SIP/2.0/UDP h;branch=z9hG4bK0", line]))
        #expect(two.rule == .via)
        #expect(two.detail == "ttl must be 0-255")
        let text = "INVITE sip:bob@h SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK0\r\nVia: " + line
        #expect(two.offset == text.utf8.count - "ttl=256".utf8.count)
        #expect(try FastCheckTests.viaError(["SIP/2.0/UDP a;branch=z9hG4bK1;x=\"p,q\", SIP/2.0/UDP b;ttl=1"]) == nil)
    }
}
