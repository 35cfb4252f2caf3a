import Testing
import Synchronization
import SIPDialog
import SDP
import SIPLoad
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

    @Test("the answer template: a repeated offer gets, byte for byte, the answer a fresh engine makes for the new session id")
    func answerTemplate() throws {
        let made = Mutex(0)
        let cache = AnswerTemplateCache { offer, id in
            made.withLock { $0 += 1 }
            return DialogServeCommand.answer(offer, capabilities: Self.capabilities, sessionID: id)
        }
        let pcmu = Self.sdp("0", "a=rtpmap:0 PCMU/8000\r\n")
        let pcma = Self.sdp("8", "a=rtpmap:8 PCMA/8000\r\n")
        for (i, id) in [UInt64(7), 1_234_567_890_123, 42, UInt64(Int64.max), 9].enumerated() {
            let offer = i == 3 ? pcma : pcmu
            let cached = try #require(cache.answer(offer, sessionID: id))
            let fresh = try #require(DialogServeCommand.answer(offer, capabilities: Self.capabilities, sessionID: id))
            #expect(cached == fresh, "call \(i)")
            let o = try SessionDescription.parse(cached.bytes).origin
            #expect(o.sessionID == id && o.sessionVersion == id)
        }
        // Made for the first PCMU offer, the PCMA one and the PCMU one after it; the rest reused.
        #expect(made.withLock { $0 } == 3)
        // Refused offers and offerless INVITEs go to the engine every time.
        #expect(cache.answer(Self.sdp("18", "a=rtpmap:18 G729/8000\r\n"), sessionID: 5) == nil)
        let ours = try #require(cache.answer(nil, sessionID: 11))
        #expect(ours == DialogServeCommand.answer(nil, capabilities: Self.capabilities, sessionID: 11))
        #expect(made.withLock { $0 } == 5)
    }

    @Test("session ids for the answers: in 1...Int64.max, distinct from call to call")
    func answerSessionIDs() throws {
        let cache = AnswerTemplateCache { offer, id in DialogServeCommand.answer(offer, capabilities: Self.capabilities, sessionID: id) }
        let offer = Self.sdp("0", "a=rtpmap:0 PCMU/8000\r\n")
        var seen = Set<UInt64>()
        for _ in 0..<1000 {
            let id = try SessionDescription.parse(try #require(cache.answer(offer)).bytes).origin.sessionID
            #expect((1...UInt64(Int64.max)).contains(id))
            seen.insert(id)
        }
        #expect(seen.count == 1000)
    }

    @Test("the answer template is not kept when the o= line does not carry the session id as id and version")
    func answerTemplateRefusesOtherOrigins() throws {
        let fixed = SessionBody.sdp("v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n")
        let made = Mutex(0)
        let cache = AnswerTemplateCache { _, _ in made.withLock { $0 += 1 }; return fixed }
        let offer = Self.sdp("0", "a=rtpmap:0 PCMU/8000\r\n")
        #expect(cache.answer(offer, sessionID: 3) == fixed)
        #expect(cache.answer(offer, sessionID: 3) == fixed)
        #expect(made.withLock { $0 } == 2)
    }
}
