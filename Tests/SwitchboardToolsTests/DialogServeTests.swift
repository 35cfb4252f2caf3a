import Testing
import SIPDialog
import SDP
@testable import SwitchboardTools

/// The answers `switchboard serve --dialogs` puts in its 200s.
@Suite("switchboard serve --dialogs: SDP answers")
struct DialogServeTests {
    static let capabilities = MediaCapabilities(address: "127.0.0.1", streams: [
        StreamCapabilities(mediaType: .audio, port: 40_000, codecs: [.pcmu, .pcma, .telephoneEvent], ptime: 20),
    ])

    static func sdp(_ formats: String, _ rtpmaps: String) -> SessionBody {
        .sdp("v=0\r\no=user1 53655765 2353687637 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 6000 RTP/AVP \(formats)\r\n\(rtpmaps)")
    }

    @Test("SIPp's offer (PCMU) is answered with PCMU on our port; an offer without a common codec gets none (488)")
    func answers() throws {
        let a = try #require(DialogServeCommand.answer(Self.sdp("0", "a=rtpmap:0 PCMU/8000\r\n"), capabilities: Self.capabilities))
        let answer = try SessionDescription.parse(a.bytes)
        #expect(answer.media.count == 1)
        #expect(answer.media.first?.port == 40_000)
        #expect(answer.media.first?.formats == ["0"])
        #expect(DialogServeCommand.answer(Self.sdp("18", "a=rtpmap:18 G729/8000\r\n"), capabilities: Self.capabilities) == nil)
        // No offer: ours, with every codec we have.
        let ours = try #require(DialogServeCommand.answer(nil, capabilities: Self.capabilities))
        #expect(try SessionDescription.parse(ours.bytes).media.first?.formats == ["0", "8", "101"])
    }
}
