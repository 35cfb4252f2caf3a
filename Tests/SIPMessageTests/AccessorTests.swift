import Testing
@testable import SIPMessage

/// The byte-level accessors (tags, branch, CSeq) agree with the full decoders over odd but
/// accepted shapes: quoted display names holding '>' or ';tag=', escaped quotes, commas, upper
/// case names, white space around '=', values longer than a word.
@Suite("Fast header accessors")
struct AccessorTests {
    static let nameAddresses = [
        "<sip:a@b>;tag=abc",
        "<sip:a@b>;tag=0123456789abcdefghij0123456789",
        "<sip:a@b>;tag=abcdefgh;x=1",
        "<sip:a@b>;tag=abcdefg;x=1",
        "<sip:a@b>;tag=abcdefghi ;x=1",
        "<sip:a@b>;tag=a1b2c3d4e5f6g7h8\t;x=1",
        "\"A > B\" <sip:a@b>;tag=1",
        "\"x;tag=evil\" <sip:a@b>;tag=good",
        "\"esc \\\" > ;tag=no\" <sip:a@b>;tag=yes",
        "\"a,b\" <sip:a@b>;tag=c",
        "\"a,b;tag=q\" <sip:a@b;tag=inuri>;x=\"y;tag=z\";tag=last-one-here",
        "<sip:a@b>;TAG=Up",
        "<sip:a@b>;Tag=MiXed",
        "<sip:a@b> ; tag = spaced",
        "<sip:a@b>;tag= spaced-long-value-here",
        "<sip:a@b;tag=inuri>;tag=outer",
        "<sip:a@b;tag=inuri>",
        "sip:a@b;tag=bare",
        "sip:a@b;tag=barelongervalue;x=1",
        "<sip:a@b>;foo=bar;tag=second",
        "<sip:a@b>;tagx=1;xtag=2;tag=3",
        "<sip:a@b>;tag",
        "<sip:a@b>;tag;x=1",
        "<sip:a@b>",
        "Bob <sip:a@b>;tag=x-y.z!%*_+`'~",
    ]

    static let vias = [
        "SIP/2.0/UDP h;branch=z9hG4bK1",
        "SIP/2.0/UDP h:5060;BRANCH = z9hG4bK-long-value-over-sixteen",
        "SIP/2.0/UDP h;rport;branch=z9hG4bK2;received=1.2.3.4",
        "SIP/2.0/UDP h;branch=\"z9hG4bKq\"",
        "SIP/2.0/UDP h;x=\"a;branch=no\";branch=yes",
        "SIP/2.0/UDP h;branch=b1, SIP/2.0/UDP k;branch=b2",
        "SIP/2.0/UDP h;branch=z9hG4bK12345678,SIP/2.0/UDP k;branch=b2",
        "SIP/2.0/UDP h;x=1,SIP/2.0/UDP k;branch=b2",
        "SIP/2.0/UDP h;rport;received=10.0.0.1",
        "SIP/2.0/UDP [::1]:5060;branch=z9hG4bK-v6-abcdefgh",
        "SIP / 2.0 / UDP h ; branch = z9hG4bKspaced\t;rport",
    ]

    /// A From and To value, or a Via value.
    enum Header: Sendable, CustomTestStringConvertible {
        case nameAddress(String), via(String)
        var testDescription: String {
            switch self {
            case .nameAddress(let v): "From/To: \(v)"
            case .via(let v): "Via: \(v)"
            }
        }
    }

    @Test(arguments: nameAddresses.map(Header.nameAddress) + vias.map(Header.via))
    func fastAccessorsAgreeWithTheDecoder(_ header: Header) throws {
        func nonEmpty(_ s: String?) -> String? { s.flatMap { $0.isEmpty ? nil : $0 } }
        switch header {
        case .nameAddress(let value):
            let m = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nFrom: \(value)\nTo: \(value)\nCall-ID: c\nCSeq: 1 OPTIONS\n\n"))
            let expected = nonEmpty(try m.from().tag)
            #expect(m.fromTag == expected)
            #expect(m.toTag == nonEmpty(try m.to().tag))
            #expect(m.fromTagBytes.map(Array.init) == expected.map { Array($0.utf8) })
        case .via(let value):
            let m = try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nVia: \(value)\n\n"))
            #expect(m.topViaBranch == nonEmpty(try m.topVia().branch))
        }
    }

    @Test func tagsOfKnownShapes() throws {
        func tag(_ v: String) throws -> String? {
            try SIPMessage(bytes: crlf("OPTIONS sip:a@b SIP/2.0\nFrom: \(v)\n\n")).fromTag
        }
        #expect(try tag("\"x;tag=evil\" <sip:a@b>;tag=good") == "good")
        #expect(try tag("\"esc \\\" > ;tag=no\" <sip:a@b>;tag=yes") == "yes")
        #expect(try tag("<sip:a@b;tag=inuri>") == nil)
        #expect(try tag("<sip:a@b> ; TAG = spaced") == "spaced")
        #expect(try tag("<sip:a@b>;tag=0123456789abcdefghij0123456789") == "0123456789abcdefghij0123456789")
        #expect(try tag("<sip:a@b>;tag=abcdefgh;x=1") == "abcdefgh")
        #expect(try tag("<sip:a@b>;tag=abcdefghi\t;x=1") == "abcdefghi")
        #expect(try tag("<sip:a@b>;tag=abcdefghijklmnop,<sip:c@d>") == "abcdefghijklmnop")
        #expect(try tag("<sip:a@b>;x=1,<sip:c@d>;tag=next") == nil)
    }

    static let cseqs = [
        "1 INVITE", "4294967295 BYE", "4294967296 BYE", "99999999999999999999 BYE", "1\tACK", "1   OPTIONS",
        "1 \t REGISTER", "0 CANCEL", "01 INVITE", "1 FOO", "1 invite", "1 INVITEX", "1INVITE", "1 INVITE x",
        "1 INV;ITE", "1 ", "1", "", " 1 INVITE", "1 INVITE ", "1 SUBSCRIBE", "1 PRACK", "x INVITE", "1 INVITE\r\n",
    ]

    @Test(arguments: cseqs)
    func cseqAgreesWithTheCursor(_ value: String) {
        let bytes = ArraySlice(Array(value.utf8))
        let fast = Result { () throws(SIPParseError) -> CSeq in try CSeq.parse(bytes) }
        let slow = Result { () throws(SIPParseError) -> CSeq in try CSeq.decode(bytes) }
        #expect(fast == slow, "CSeq: \(value)")
        if let q = bytes.withUnsafeBufferPointer(CSeq.quick) { #expect(.success(q) == slow, "CSeq: \(value)") }
    }

    @Test func cseqQuickPathTakesTheUsualShapes() {
        for (v, c) in [("1 INVITE", CSeq(1, .invite)), ("4294967295\tBYE", CSeq(4_294_967_295, .bye)), ("20  ACK", CSeq(20, .ack))] {
            #expect(Array(v.utf8).withUnsafeBufferPointer(CSeq.quick) == c)
        }
        for v in ["4294967296 BYE", "1 FOO", "1INVITE", "1 INVITE x", " 1 INVITE"] {
            #expect(Array(v.utf8).withUnsafeBufferPointer(CSeq.quick) == nil)
        }
    }

    @Test func parameterValueEndStopsWhereTheByteLoopDoes() {
        let stops: [UInt8] = [0x3B, 0x2C, 0x20, 0x09]
        let filler = Array("abcdefghijklmnopqrstuvwxyz0123456789-._!".utf8)
        for length in 0..<40 {
            for stop in stops + [0] {
                for at in 0...length {
                    var bytes = Array(filler.prefix(length))
                    if stop != 0, at < length { bytes[at] = stop }
                    // After a stop byte, the byte a borrowing word test would also mark.
                    if at + 1 < length { bytes[at + 1] = stop == 0 ? 0x3A : stop ^ 1 }
                    let expected = bytes.firstIndex(where: stops.contains) ?? bytes.count
                    for from in Set([0, min(3, bytes.count), min(9, bytes.count)]) {
                        let got = bytes.withUnsafeBufferPointer { parameterValueEnd($0, from, $0.count) }
                        #expect(got == (bytes[from...].firstIndex(where: stops.contains) ?? bytes.count), "\(bytes) from \(from)")
                        if from == 0 { #expect(got == expected) }
                    }
                }
            }
        }
    }
}
