import SDP
import Testing

// OfferAnswer.reissued(sessionID:): a first answer taken over by another session id must be
// exactly the exchange a fresh engine with that id would have made, now and afterwards.
@Suite struct ReissueTests {
    static let offer = remoteOffer(["m=audio 49170 RTP/AVP 0 8 101", "a=rtpmap:101 telephone-event/8000", "a=fmtp:101 0-15"])

    @Test func aReissuedFirstAnswerIsTheFreshEnginesAnswer() throws {
        var first = Local.engine(sessionID: 5000)
        _ = try answer(&first, Self.offer)
        var fresh = Local.engine(sessionID: 777)
        let direct = try answer(&fresh, Self.offer)
        var reissued = try #require(first.reissued(sessionID: 777))
        #expect(reissued.sessionID == 777)
        #expect(reissued.localDescription == direct.sdp)
        #expect(reissued.localDescription?.serialized() == direct.sdp.serialized())
        #expect(reissued.localDescription?.origin.sessionID == 777)
        #expect(reissued.localDescription?.origin.sessionVersion == 777)
        #expect(reissued.remoteDescription == fresh.remoteDescription)
        #expect(reissued.negotiated == direct.negotiated)
        #expect(reissued.state == .stable)
        // The next exchanges go on as they would have: a hold re-offer, then a re-INVITE's offer.
        reissued.setHold(true)
        fresh.setHold(true)
        #expect(try reissued.makeOffer() == fresh.makeOffer())
        let reAnswer = remoteOffer(["m=audio 49170 RTP/AVP 0", "a=recvonly"], version: 2)
        #expect(try reissued.receiveAnswer(bytes: Array(reAnswer.utf8)) == fresh.receiveAnswer(bytes: Array(reAnswer.utf8)))
        #expect(reissued.localDescription == fresh.localDescription)
    }

    @Test func onlyAFirstAnswerIsReissued() throws {
        // Nothing exchanged yet, an offer of ours, a second exchange, an explicit version: no.
        #expect(Local.engine().reissued(sessionID: 1) == nil)
        var offered = Local.engine()
        _ = try offered.makeOffer()
        #expect(offered.reissued(sessionID: 1) == nil)
        var twice = Local.engine()
        _ = try answer(&twice, Self.offer)
        _ = try answer(&twice, remoteOffer(["m=audio 49170 RTP/AVP 0"], version: 2))
        #expect(twice.reissued(sessionID: 1) == nil)
        var versioned = OfferAnswer(capabilities: MediaCapabilities(address: "192.0.2.10", streams: [Local.audio()]),
                                    sessionID: 5, sessionVersion: 9)
        _ = try answer(&versioned, Self.offer)
        #expect(versioned.reissued(sessionID: 1) == nil)
    }

    @Test func theSerializerWritesNumbersAndPortCounts() throws {
        var s = SessionDescription(origin: Origin(username: "u", sessionID: UInt64.max, sessionVersion: 0, address: "h"))
        s.timing = [Timing(start: 10, stop: 3_000_000_000)]
        var m = MediaDescription(media: .audio, port: 9, proto: .rtpAVP, formats: ["0", "101"])
        m.portCount = 2
        s.addMedia(m)
        s.addMedia(MediaDescription(media: .video, port: 65535, proto: .rtpAVP, formats: ["96"]))
        let text = String(decoding: s.serialized(), as: UTF8.self)
        #expect(text == sdp(["v=0", "o=u 18446744073709551615 0 IN IP4 h", "s=-", "t=10 3000000000",
                             "m=audio 9/2 RTP/AVP 0 101", "m=video 65535 RTP/AVP 96"]))
        #expect(try SessionDescription.parse(text) == s)
    }

    @Test func transportProtocolsAreReadByComponent() {
        #expect(TransportProtocol("UDP/TLS/RTP/SAVPF").isRTP)
        #expect(TransportProtocol("UDP/TLS/RTP/SAVPF").isSecureRTP)
        #expect(TransportProtocol("RTP/SAVP").isSecureRTP)
        #expect(!TransportProtocol("RTPX/AVP").isRTP)
        #expect(!TransportProtocol("XRTP").isRTP)
        #expect(!TransportProtocol("RTP/SAVPX").isSecureRTP)
        #expect(!TransportProtocol("TCP/SAVP").isSecureRTP)
        #expect(TransportProtocol("RTP").isRTP)
        #expect(TransportProtocol("A//RTP").isRTP)
    }
}
