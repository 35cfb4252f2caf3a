import SDP
import Testing

/// `OfferAnswer.problems(answer:offer:)`: an answer judged by a third party. What our engine
/// answers passes; each broken answer names its problem.
struct OfferAnswerProblemsTests {
    static func sdp(_ media: [String], connection: Bool = true) -> SessionDescription {
        var lines = ["v=0", "o=- 1 1 IN IP4 192.0.2.1", "s=-"]
        if connection { lines.append("c=IN IP4 192.0.2.1") }
        lines.append("t=0 0")
        lines += media
        return try! SessionDescription.parse(Array((lines.joined(separator: "\r\n") + "\r\n").utf8))
    }

    static let offer = sdp(["m=audio 4000 RTP/AVP 0 8 96 101", "a=rtpmap:96 opus/48000/2", "a=rtpmap:101 telephone-event/8000",
                            "m=video 0 RTP/AVP 97", "a=rtpmap:97 H264/90000"])

    @Test func ourEngineAnswersPass() throws {
        var caller = Local.engine(), callee = Local.engine(address: "192.0.2.20", sessionID: 7000)
        let offer = try caller.makeOffer()
        let answer = try callee.receiveOffer(offer).sdp
        #expect(OfferAnswer.problems(answer: answer, offer: offer).isEmpty)
        // An answer that declines the offered video with port 0 is fine, as is a codec of the
        // offer under another payload number.
        let good = Self.sdp(["m=audio 6000 RTP/AVP 100 101", "a=rtpmap:100 opus/48000/2", "a=rtpmap:101 telephone-event/8000", "m=video 0 RTP/AVP 97"])
        #expect(OfferAnswer.problems(answer: good, offer: Self.offer).isEmpty)
    }

    @Test(arguments: [
        (["m=audio 6000 RTP/AVP 0"], OfferAnswerError.Reason.mediaLineCount(expected: 2, found: 1)),
        (["m=video 6000 RTP/AVP 97", "m=video 0 RTP/AVP 97"], .mediaTypeMismatch(media: 0)),
        (["m=audio 6000 RTP/SAVP 0", "m=video 0 RTP/AVP 97"], .transportMismatch(media: 0)),
        (["m=audio 6000 RTP/AVP 18", "a=rtpmap:18 G729/8000", "m=video 0 RTP/AVP 97"], .noCommonCodec(media: 0)),
        (["m=audio 6000 RTP/AVP 96", "a=rtpmap:96 G722/8000", "m=video 0 RTP/AVP 97"], .payloadTypeMismatch(media: 0, payloadType: 96)),
        (["m=audio 6000 RTP/AVP 101", "a=rtpmap:101 telephone-event/8000", "m=video 0 RTP/AVP 97"], .onlyAuxiliaryCodecsInCommon(media: 0)),
    ])
    func brokenAnswersAreNamed(_ media: [String], _ reason: OfferAnswerError.Reason) {
        #expect(OfferAnswer.problems(answer: Self.sdp(media), offer: Self.offer) == [reason])
    }

    @Test func anAcceptedStreamWithoutConnectionIsNamed() {
        let answer = Self.sdp(["m=audio 6000 RTP/AVP 0", "m=video 0 RTP/AVP 97"], connection: false)
        #expect(OfferAnswer.problems(answer: answer, offer: Self.offer) == [.missingConnection(media: 0)])
    }
}
