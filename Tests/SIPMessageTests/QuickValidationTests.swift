import Testing
@testable import SIPMessage

/// ``SIPMessage/headersPassQuickly()`` lets a message skip the full header check, so it may
/// only pass what ``SIPMessage/validateHeaders()`` accepts: checked over every message made by
/// changing, inserting or removing one byte of the header lines of typical messages, and by
/// repeating or dropping one line.
@Suite("Validation's quick pass over the headers")
struct QuickValidationTests {
    static let seeds = [
        // SIPp's INVITE, with a body.
        "INVITE sip:service@127.0.0.1:5060 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5061;branch=z9hG4bK-1-0\r\n"
            + "From: sipp <sip:sipp@127.0.0.1:5061>;tag=1\r\nTo: service <sip:service@127.0.0.1:5060>\r\n"
            + "Call-ID: 1-4242@127.0.0.1\r\nCSeq: 1 INVITE\r\nContact: sip:sipp@127.0.0.1:5061\r\nMax-Forwards: 70\r\n"
            + "Subject: Performance Test\r\nContent-Type: application/sdp\r\nContent-Length: 4\r\n\r\nv=0\n",
        // A proxied 180: two Vias, Record-Route, a tagged To.
        "SIP/2.0 180 Ringing\r\nVia: SIP/2.0/UDP 192.0.2.7:5060;branch=z9hG4bKfd1;rport=5060;received=192.0.2.7\r\n"
            + "Via: SIP/2.0/UDP 127.0.0.1:5061;branch=z9hG4bK-1-0\r\nRecord-Route: <sip:192.0.2.7:5060;lr>\r\n"
            + "From: <sip:a@h>;tag=1\r\nTo: <sip:b@h>;tag=2\r\nCall-ID: x\r\nCSeq: 7 INVITE\r\nContact: <sip:b@192.0.2.9>\r\n\r\n",
        // SIPp's uas answering through a proxy: both Vias on one line.
        "SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 127.0.0.1:16600;branch=z9hG4bK1a92;rport, SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bK-17487-1-0\r\n"
            + "From: sipp <sip:sipp@127.0.0.1:5060>;tag=17487SIPpTag001\r\nTo: alice <sip:alice@127.0.0.1:16600>;tag=17481SIPpTag011\r\n"
            + "Call-ID: 1-17487@127.0.0.1\r\nCSeq: 1 INVITE\r\nContact: <sip:127.0.0.1:16601;transport=UDP>\r\nContent-Length: 0\r\n\r\n",
        // A BYE with Route, a REGISTER with Expires.
        "BYE sip:b@192.0.2.9 SIP/2.0\r\nv: SIP/2.0/TCP h.example.com;branch=z9hG4bK9\r\nRoute: <sip:192.0.2.7;lr>\r\n"
            + "f: <sip:a@h>;tag=1\r\nt: <sip:b@h>;tag=2\r\ni: y@h\r\nCSeq: 8 BYE\r\nMax-Forwards: 69\r\n\r\n",
        "REGISTER sip:h SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK3\r\nFrom: <sip:a@h>;tag=3\r\nTo: <sip:a@h>\r\n"
            + "Call-ID: r\r\nCSeq: 2 REGISTER\r\nContact: <sip:a@192.0.2.3;transport=udp>\r\nExpires: 3600\r\n\r\n",
    ]

    /// The seed's variants: one header-section byte changed, inserted or removed, and each
    /// header line repeated or dropped.
    static func variants(_ seed: String) -> [[UInt8]] {
        let b = Array(seed.utf8)
        let headersStart = b.firstIndex(of: 0x0A)! + 1
        let headersEnd = (headersStart..<b.count).first { b[$0 - 2] == 0x0A && b[$0 - 1] == 0x0D && b[$0] == 0x0A }! - 1
        let probes: [UInt8] = Array(" \t;:@<>\",=/*.0179aZ".utf8) + [0x7F]
        var out = FastCheckTests.mutations(b, at: headersStart..<headersEnd, probes: probes)
        var lineStarts = [headersStart]
        for k in headersStart..<headersEnd where b[k] == 0x0A { lineStarts.append(k + 1) }
        for (i, s) in lineStarts.dropLast().enumerated() {
            let line = Array(b[s..<lineStarts[i + 1]])
            var dropped = b
            dropped.removeSubrange(s..<lineStarts[i + 1])
            out.append(dropped)
            var repeated = b
            repeated.insert(contentsOf: line, at: s)
            out.append(repeated)
        }
        return out
    }

    @Test func whatPassesQuicklyTheFullCheckAccepts() throws {
        var quick = 0, total = 0
        for seed in Self.seeds {
            let m = try SIPMessage(bytes: Array(seed.utf8))
            #expect(m.headersPassQuickly(), "the seed itself takes the quick path: \(seed.prefix(20))")
            for v in Self.variants(seed) {
                guard let m = try? SIPMessage(bytes: v) else { continue }
                total += 1
                guard m.headersPassQuickly() else { continue }
                quick += 1
                #expect(throws: Never.self, "\(String(decoding: v, as: UTF8.self))") { try m.validateHeaders() }
            }
        }
        // Many variants still pass (a changed tag, digit or letter), many do not.
        #expect(quick > 1000 && quick < total / 2, "\(quick) of \(total) passed quickly")
    }

    @Test func theQuickPassSendsTheseToTheFullCheck() throws {
        func passes(_ headers: String, _ start: String = "OPTIONS sip:h SIP/2.0") throws -> Bool {
            try SIPMessage(bytes: Array((start + "\r\n" + headers + "\r\n").utf8)).headersPassQuickly()
        }
        let base = "Via: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: <sip:a@h>;tag=1\r\nTo: <sip:b@h>\r\nCall-ID: c\r\n"
        #expect(try passes(base + "CSeq: 1 OPTIONS\r\n"))
        #expect(try !passes(base + "CSeq: 1 INVITE\r\n"), "a CSeq method that does not match")
        #expect(try !passes(base + "CSeq: 1 PING\r\n", "PING sip:h SIP/2.0"), "an extension method")
        #expect(try passes(base + "CSeq: 1 INVITE\r\n", "SIP/2.0 200 OK"), "a response's CSeq names the request's method")
        #expect(try !passes(base), "no CSeq")
        #expect(try !passes(base + "CSeq: 1 OPTIONS\r\nCall-ID: d\r\n"), "two Call-IDs")
        #expect(try !passes(base + "CSeq: 1 OPTIONS\r\nMax-Forwards: 256\r\n"))
        #expect(try !passes(base + "CSeq: 1 OPTIONS\r\nExpires: 4294967296\r\n"))
        #expect(try passes(base + "CSeq: 1 OPTIONS\r\nExpires: 4294967295\r\nMax-Forwards: 255\r\n"))
        #expect(try !passes(base + "CSeq: 1 OPTIONS\r\nContact: *\r\n"), "the wildcard")
        #expect(try !passes(base + "CSeq: 1 OPTIONS\r\nContact: <sip:a@h>;q=0.5\r\n"), "a q parameter")
        #expect(try !passes(base + "CSeq: 1 OPTIONS\r\nRoute: <sip:p1;lr>, <sip:p2;lr>\r\n"), "a list")
        let two = "CSeq: 1 OPTIONS\r\nFrom: <sip:a@h>;tag=1\r\nTo: <sip:b@h>\r\nCall-ID: c\r\n"
        #expect(try passes(two + "Via: SIP/2.0/UDP h;branch=z9hG4bK1 ,\tSIP/2.0/TCP g:5;branch=z9hG4bK2\r\n"), "a list of Vias")
        #expect(try !passes(two + "Via: SIP/2.0/UDP h;branch=z9hG4bK1,\r\n"), "an empty element")
        #expect(try !passes(two + "Via: SIP/2.0/UDP h;branch=z9hG4bK1, SIP/2.0/UDP g;x=\"a,b\"\r\n"), "a quoted comma")
        #expect(try !passes(base + "CSeq: 1 OPTIONS\r\nContent-Type: text/plain\r\n"))
        #expect(try passes(base + "CSeq: 1 OPTIONS\r\nContent-Type: Application/SDP\r\n"))
    }
}
