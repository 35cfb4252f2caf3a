import Foundation
import Testing
import SIPMessage
import SDP
import SwitchboardTestSupport
@testable import SwitchboardTools

/// RFC 5118 messages whose bodies carry IPv6 in SDP: the SIP and SDP layers together.
@Suite("RFC 5118 SDP bodies", .enabled(if: TestPaths.corporaHas("rfc5118/valid") || TestPaths.isCI,
                                       "../shared/corpora is absent: corpus tests skipped"),
       .requiresCorpus("rfc5118/valid"))
struct SIPWithSDPCorpusTests {
    /// These two corpus files carry a Content-Length computed before their line ends became
    /// CRLF (241 announced, 251 present): RFC 3261 framing keeps the announced bytes, so the
    /// SDP is read from everything after the blank line, as a lenient receiver of such a
    /// datagram would.
    func session(_ name: String) throws -> SessionDescription {
        let data = Array(try #require(FileManager.default.contents(atPath: TestPaths.corpus("rfc5118/valid/" + name)), "missing \(name)"))
        let m = try SIPMessage(bytes: data)
        try m.validate()
        #expect(try m.contentType()?.essence == "application/sdp")
        let cl = try #require(m.contentLength)
        #expect(m.body.count == cl)
        let rest = Array(data[m.body.startIndex...])
        #expect(rest.count > cl, "the corpus's Content-Length undercounts the CRLF body")
        // The framed (truncated) body does not parse; the whole remainder does.
        #expect(throws: SDPParseError.self) { try SessionDescription.parse(Array(m.body)) }
        return try SessionDescription.parse(rest)
    }

    @Test func ipv6InSDP() throws {
        let s = try session("ipv6-in-sdp")
        #expect(s.origin.address == "2001:db8::20")
        #expect(s.connection?.address == "2001:db8::20")
        #expect(s.connection?.addressType.rawValue == "IP6")
        #expect(s.media.map(\.port) == [6000, 6024])
        #expect(s.media[1].codec(forPayloadType: 107)?.encodingName == "H263-1998")
    }

    @Test func mixedIPv4AndIPv6InSDP() throws {
        let s = try session("mult-ip-in-sdp")
        #expect(s.connection == nil)
        #expect(s.connection(for: s.media[0])?.address == "192.0.2.1")
        #expect(s.connection(for: s.media[1])?.address == "2001:db8::1")
        #expect(s.connection(for: s.media[1])?.addressType.rawValue == "IP6")
        #expect(s.media[0].codec(forPayloadType: 0)?.encodingName == "PCMU")
    }
}
