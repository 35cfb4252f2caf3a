import SDP
import Testing

@Suite("Building offers and answers")
struct BuilderTests {
    @Test func buildOfferFromScratch() throws {
        var offer = SessionDescription(
            origin: Origin(sessionID: 8_811_234, sessionVersion: 8_811_234, address: "192.0.2.10"),
            connection: .ip4("192.0.2.10"))
        var audio = MediaDescription(media: .audio, port: 30000, proto: .rtpSAVP, formats: [])
        audio.addCodec(RTPMap(payloadType: 111, encodingName: "opus", clockRate: 48000, channels: 2), parameters: "useinbandfec=1")
        audio.addCodec(RTPMap(payloadType: 0, encodingName: "PCMU", clockRate: 8000))
        audio.addCodec(RTPMap(payloadType: 101, encodingName: "telephone-event", clockRate: 8000), parameters: "0-16")
        audio.addAttribute(CryptoAttribute(
            tag: 1, suite: .aesCM128HMACSHA1_80,
            keyParameters: [.init(keySaltBytes: Array(repeating: 0x11, count: 30), lifetime: .powerOfTwo(20), mki: .init(value: 1, length: 4))]))
        audio.setPtime(20)
        audio.setDirection(.sendrecv)
        audio.setRTCPMux(true)
        audio.addAttribute(SSRCAttribute(ssrc: 42, name: "cname", value: "me@example.com"))
        offer.addMedia(audio)

        let expected = sdp(
            "v=0",
            "o=- 8811234 8811234 IN IP4 192.0.2.10",
            "s=-",
            "c=IN IP4 192.0.2.10",
            "t=0 0",
            "m=audio 30000 RTP/SAVP 111 0 101",
            "a=rtpmap:111 opus/48000/2",
            "a=fmtp:111 useinbandfec=1",
            "a=rtpmap:0 PCMU/8000",
            "a=rtpmap:101 telephone-event/8000",
            "a=fmtp:101 0-16",
            "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:ERERERERERERERERERERERERERERERERERERERER|2^20|1:4",
            "a=ptime:20",
            "a=sendrecv",
            "a=rtcp-mux",
            "a=ssrc:42 cname:me@example.com"
        )
        #expect(offer.description == expected)
        #expect(offer.serialized() == Array(expected.utf8))
        let parsed = try parseOK(expected)
        #expect(parsed == offer)
        #expect(parsed.media[0].cryptos[0].keySaltBytes == Array(repeating: 0x11, count: 30))
    }

    @Test func answerRejectingVideoAndHolding() throws {
        let offer = try Fixtures.parse("linphone-offer.sdp")
        var answer = SessionDescription(
            origin: Origin(username: "pbx", sessionID: 99, sessionVersion: 1, address: "198.51.100.1"),
            sessionName: "pbx", connection: .ip4("198.51.100.1"))
        for offered in offer.media {
            var m = MediaDescription(media: offered.media, port: 40000, proto: offered.proto, formats: [])
            if offered.media == .audio {
                let pcmu = try #require(offered.codec(forPayloadType: 0))
                m.addCodec(pcmu)
                let event = try #require(offered.rtpmaps.first { $0.encodingName == "telephone-event" && $0.clockRate == 8000 })
                m.addCodec(event, parameters: "0-15")
                m.setDirection(offer.effectiveDirection(for: offered).reversed)
            } else {
                m.formats = offered.formats
                m.reject()
            }
            answer.addMedia(m)
        }
        #expect(answer.media.map(\.isRejected) == [false, true])
        #expect(answer.media[0].formats == ["0", "100"])
        #expect(answer.media[1].formats == ["96", "97"])
        let text = answer.description
        #expect(text.contains("m=video 0 RTP/AVP 96 97\r\n"))
        #expect(text.contains("m=audio 40000 RTP/AVP 0 100\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:100 telephone-event/8000\r\na=fmtp:100 0-15\r\na=sendrecv\r\n"))
        #expect(try parseOK(text) == answer)

        var hold = answer
        hold.incrementVersion()
        hold.media[0].setDirection(.sendonly)
        #expect(hold.origin.sessionVersion == 2)
        #expect(hold.description.contains("o=pbx 99 2 IN IP4 198.51.100.1\r\n"))
        #expect(hold.effectiveDirection(for: hold.media[0]) == .sendonly)
        #expect(try parseOK(hold.description) == hold)
    }

    @Test func versionIncrementWraps() {
        var s = SessionDescription(origin: Origin(sessionID: 1, sessionVersion: .max, address: "192.0.2.1"))
        s.incrementVersion()
        #expect(s.origin.sessionVersion == 0)
        #expect(s.version == 0)
    }

    @Test func removeFormatDropsItsAttributes() throws {
        var m = try #require(try Fixtures.parse("baresip-opus-srtp-offer.sdp").media.first)
        m.removeFormat("111")
        #expect(m.formats == ["9", "0", "8", "101"])
        #expect(m.rtpmap(forPayloadType: 111) == nil)
        #expect(m.fmtp(forPayloadType: 111) == nil)
        #expect(m.fmtp(forPayloadType: 101) != nil)
        #expect(m.codecs.count == 4)
    }

    @Test func everyOptionalFieldSerializesInRFCOrder() throws {
        var s = SessionDescription(
            origin: Origin(username: "u", sessionID: 1, sessionVersion: 2, addressType: .ip6, address: "2001:db8::9"),
            sessionName: "name", information: "info", uri: "http://example.com", emails: ["a@example.com"],
            phones: ["+1 555"], connection: .ip6("2001:db8::9"),
            bandwidths: [Bandwidth(type: .conferenceTotal, value: 100)],
            timing: [Timing(start: 1, stop: 2, repeats: ["1d 1h 0"]), Timing()], timeZones: "1 -1h", key: "prompt",
            attributes: [SDPAttribute(name: "recvonly")],
            extensionLines: [SDPExtensionLine(type: "y", value: "1")])
        s.addMedia(MediaDescription(
            media: .video, port: 5000, portCount: 2, proto: .rtpAVP, formats: ["31"], information: "cam",
            connections: [.ip6("2001:db8::a")], bandwidths: [Bandwidth(type: .applicationSpecific, value: 256)], key: "prompt",
            attributes: [SDPAttribute(name: "framerate", value: "15")],
            extensionLines: [SDPExtensionLine(type: "f", value: "2")]))
        let expected = sdp(
            "v=0", "o=u 1 2 IN IP6 2001:db8::9", "s=name", "i=info", "u=http://example.com", "e=a@example.com",
            "p=+1 555", "c=IN IP6 2001:db8::9", "b=CT:100", "t=1 2", "r=1d 1h 0", "t=0 0", "z=1 -1h", "k=prompt",
            "a=recvonly", "y=1", "m=video 5000/2 RTP/AVP 31", "i=cam", "c=IN IP6 2001:db8::a", "b=AS:256", "k=prompt",
            "a=framerate:15", "f=2")
        #expect(s.description == expected)
        #expect(try parseOK(expected) == s)
        #expect(s.media(ofType: .video).count == 1)
        #expect(s.media(ofType: .audio).isEmpty)
    }

    @Test func descriptionsOfSmallValues() {
        #expect(Origin(sessionID: 5, sessionVersion: 6, address: "h.example").description == "- 5 6 IN IP4 h.example")
        #expect(Bandwidth(type: .transportIndependent, value: 64000).description == "TIAS:64000")
        #expect(Timing().description == "0 0")
        #expect(SDPAttribute(name: "a", value: "b").description == "a:b")
        #expect(SDPExtensionLine(type: "y", value: "z").description == "y=z")
        #expect(TransportProtocol.udpTLSRTPSAVPF.components == ["UDP", "TLS", "RTP", "SAVPF"])
        #expect(TransportProtocol("RTP/AVPF").isRTP)
        #expect(!TransportProtocol("RTP/AVPF").isSecureRTP)
        #expect(!TransportProtocol.udptl.isRTP)
    }
}
