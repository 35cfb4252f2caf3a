import SDP
import Testing

@Suite("Fixture field checks")
struct FixtureFieldTests {
    @Test func baresipOpusSRTPOffer() throws {
        let s = try Fixtures.parse("baresip-opus-srtp-offer.sdp")
        #expect(s.origin.username == "-")
        #expect(s.origin.sessionID == 3_920_563_457)
        #expect(s.origin.sessionVersion == 2_918_473_012)
        #expect(s.origin.addressType == .ip4)
        #expect(s.origin.address == "192.168.178.41")
        #expect(s.sessionName == "-")
        #expect(s.connection == .ip4("192.168.178.41"))
        #expect(s.timing == [Timing(start: 0, stop: 0)])
        #expect(s.attributeValue(named: "tool") == "baresip 3.10.1")
        #expect(s.media.count == 1)

        let audio = s.media[0]
        #expect(audio.media == .audio)
        #expect(audio.port == 10318)
        #expect(audio.proto == .rtpSAVP)
        #expect(audio.proto.isSecureRTP)
        #expect(audio.formats == ["111", "9", "0", "8", "101"])
        #expect(audio.payloadTypes == [111, 9, 0, 8, 101])
        #expect(audio.bandwidths == [Bandwidth(type: .applicationSpecific, value: 64)])
        #expect(audio.codec(forPayloadType: 111) == RTPMap(payloadType: 111, encodingName: "opus", clockRate: 48000, channels: 2))
        #expect(audio.codec(forPayloadType: 101)?.encodingName == "telephone-event")
        #expect(audio.codecs.map(\.encodingName) == ["opus", "G722", "PCMU", "PCMA", "telephone-event"])

        let opusFmtp = try #require(audio.fmtp(forPayloadType: 111))
        #expect(opusFmtp.parameters == "stereo=1;sprop-stereo=1;useinbandfec=1")
        #expect(opusFmtp.parsedParameters.map(\.name) == ["stereo", "sprop-stereo", "useinbandfec"])
        #expect(opusFmtp.value(forParameter: "useinbandfec") == "1")
        #expect(audio.fmtp(forPayloadType: 101)?.parameters == "0-15")

        #expect(audio.direction == .sendrecv)
        #expect(s.effectiveDirection(for: audio) == .sendrecv)
        #expect(audio.ptime == 20)
        #expect(audio.ssrcs == [SSRCAttribute(ssrc: 2_861_942_370, name: "cname", value: "7a5c3d1e-93b4-4c0e-a1f2-5d8e9b6c4a27")])
        #expect(audio.cname(forSSRC: 2_861_942_370) == "7a5c3d1e-93b4-4c0e-a1f2-5d8e9b6c4a27")
        #expect(audio.hasAttribute(named: "rtcp-rsize"))
        #expect(audio.firstAttribute(named: "rtcp-rsize")?.isProperty == true)

        let cryptos = audio.cryptos
        try #require(cryptos.count == 2)
        #expect(cryptos.map(\.tag) == [1, 2])
        #expect(cryptos[0].suite == .aesCM128HMACSHA1_80)
        #expect(cryptos[1].suite == .aesCM128HMACSHA1_32)
        for crypto in cryptos {
            try #require(crypto.keyParameters.count == 1)
            let key = crypto.keyParameters[0]
            #expect(key.method == "inline")
            #expect(key.keySalt.utf8.count == 40)
            #expect(key.keySaltBytes?.count == 30)
            #expect(crypto.suite.keySaltLength == 30)
            #expect(key.masterKey(for: crypto.suite)?.count == 16)
            #expect(key.masterSalt(for: crypto.suite)?.count == 14)
            #expect(key.lifetime == .powerOfTwo(20))
            #expect(key.lifetime?.packetCount == 1_048_576)
            #expect(key.mki == CryptoAttribute.MKI(value: 1, length: 4))
            #expect(crypto.sessionParameters.isEmpty)
        }
        #expect(cryptos[0].keySaltBytes != cryptos[1].keySaltBytes)
        #expect(s.connection(for: audio)?.address == "192.168.178.41")
        #expect(!audio.isRTCPMuxed)
        #expect(audio.rtcp == nil)
    }

    @Test func asteriskG711Answer() throws {
        let s = try Fixtures.parse("asterisk-g711-answer.sdp")
        #expect(s.sessionName == "Asterisk")
        #expect(s.origin.sessionID == 1_746_523_180)
        #expect(s.origin.sessionVersion == 1_746_523_182)
        let audio = try #require(s.media.first)
        #expect(audio.proto == .rtpAVP)
        #expect(!audio.proto.isSecureRTP)
        #expect(audio.payloadTypes == [0, 101])
        #expect(audio.rtpmap(forPayloadType: 0) == RTPMap(payloadType: 0, encodingName: "PCMU", clockRate: 8000))
        #expect(audio.codec(forPayloadType: 101) == RTPMap(payloadType: 101, encodingName: "telephone-event", clockRate: 8000))
        #expect(audio.fmtp(forPayloadType: 101)?.parsedParameters == [FormatParameters.Parameter(name: "0-16")])
        #expect(audio.ptime == 20)
        #expect(audio.maxptime == 150)
        #expect(audio.direction == .sendrecv)
        #expect(audio.cryptos.isEmpty)
        #expect(s.connection(for: audio) == .ip4("203.0.113.10"))
    }

    @Test func freeSwitchPCMAAnswer() throws {
        let s = try Fixtures.parse("freeswitch-pcma-answer.sdp")
        #expect(s.origin.username == "FreeSWITCH")
        let audio = try #require(s.media.first)
        #expect(audio.payloadTypes == [8, 13, 101])
        #expect(audio.rtpmap(forPayloadType: 13) == nil)
        #expect(audio.codec(forPayloadType: 13) == RTPMap(payloadType: 13, encodingName: "CN", clockRate: 8000))
        #expect(audio.codec(forPayloadType: 8)?.encodingName == "PCMA")
        #expect(audio.codecs.map(\.encodingName) == ["PCMA", "CN", "telephone-event"])
        #expect(audio.attributeValue(named: "silenceSupp") == "off - - - -")
        let rtcp = try #require(audio.rtcp)
        #expect(rtcp.port == 28971)
        #expect(rtcp.connection == .ip4("198.51.100.7"))
        #expect(rtcp.attributeValue == "28971 IN IP4 198.51.100.7")
    }

    @Test func linphoneOffer() throws {
        let s = try Fixtures.parse("linphone-offer.sdp")
        #expect(s.origin.username == "alice")
        #expect(s.origin.sessionID == 2473)
        #expect(s.origin.sessionVersion == 1736)
        #expect(s.sessionName == "Talk")
        #expect(s.attributes.map(\.name) == ["rtcp-xr", "record"])
        #expect(s.media.map(\.media) == [.audio, .video])
        let audio = s.media[0]
        #expect(audio.payloadTypes == [96, 97, 98, 0, 8, 18, 101, 99, 100])
        #expect(audio.codec(forPayloadType: 18) == RTPMap(payloadType: 18, encodingName: "G729", clockRate: 8000))
        #expect(audio.fmtp(forPayloadType: 18)?.value(forParameter: "annexb") == "yes")
        #expect(audio.codec(forPayloadType: 97)?.clockRate == 16000)
        #expect(audio.rtpmaps.filter { $0.encodingName == "telephone-event" }.map(\.clockRate) == [48000, 16000, 8000])
        #expect(audio.attributes(named: "rtcp-fb").count == 2)
        #expect(audio.direction == nil)
        #expect(s.effectiveDirection(for: audio) == .sendrecv)
        let video = s.media[1]
        #expect(video.port == 9078)
        #expect(video.codec(forPayloadType: 96)?.encodingName == "VP8")
        #expect(video.codec(forPayloadType: 97)?.clockRate == 90000)
        #expect(video.codec(forPayloadType: 97)?.channels == nil)
        #expect(video.fmtp(forPayloadType: 97)?.value(forParameter: "PROFILE-LEVEL-ID") == "42801F")
        #expect(s.connection(for: video) == .ip4("10.0.0.23"))
    }

    @Test func ipv6Offer() throws {
        let s = try Fixtures.parse("ipv6-offer.sdp")
        #expect(s.origin.addressType == .ip6)
        #expect(s.origin.address == "2001:db8::2")
        #expect(s.connection == Connection(addressType: .ip6, address: "2001:db8::2"))
        #expect(s.media.count == 2)
        let first = s.media[0]
        #expect(s.connection(for: first)?.address == "2001:db8::2")
        let rtcp = try #require(first.rtcp)
        #expect(rtcp.port == 49173)
        #expect(rtcp.connection == .ip6("2001:db8::2"))
        let second = s.media[1]
        #expect(second.connections == [.ip6("::ffff:192.0.2.2")])
        #expect(s.connection(for: second)?.address == "::ffff:192.0.2.2")
        #expect(second.direction == .recvonly)
        #expect(s.effectiveDirection(for: second) == .recvonly)
        #expect(second.codec(forPayloadType: 0)?.encodingName == "PCMU")
    }

    @Test func audioVideoOffer() throws {
        let s = try Fixtures.parse("audio-video-offer.sdp")
        #expect(s.origin.sessionID == 4_611_731_400_430_051_336)
        #expect(s.origin.sessionVersion == 2)
        #expect(s.connection == nil)
        #expect(s.attributeValue(named: "group") == "BUNDLE 0 1 2")
        #expect(s.attributeValue(named: "msid-semantic") == " WMS stream0")
        #expect(s.firstAttribute(named: "extmap-allow-mixed")?.value == nil)
        #expect(s.media.map(\.media) == [.audio, .video, .application])
        #expect(s.media.map(\.mid) == ["0", "1", "2"])

        let audio = s.media[0]
        #expect(audio.proto == .udpTLSRTPSAVPF)
        #expect(audio.proto.isSecureRTP)
        #expect(audio.isRTCPMuxed)
        #expect(audio.rtcp == RTCPAttribute(port: 9, connection: .ip4("0.0.0.0")))
        #expect(audio.setup == "actpass")
        #expect(audio.fingerprint?.hasPrefix("sha-256 4A:AD:") == true)
        #expect(audio.iceUfrag == "Oyef")
        #expect(audio.icePwd == "7bN5mXp0Qw3rT9vL2kJhGf8d")
        #expect(audio.candidates.count == 2)
        #expect(audio.candidates.first?.hasPrefix("1467250027 1 udp") == true)
        #expect(audio.codec(forPayloadType: 63) == RTPMap(payloadType: 63, encodingName: "red", clockRate: 48000, channels: 2))
        #expect(audio.fmtp(forPayloadType: 111)?.value(forParameter: "minptime") == "10")
        #expect(audio.ssrcs.map(\.name) == ["cname", "msid"])
        #expect(audio.ssrcs.last?.value == "stream0 audio0")
        #expect(audio.cname(forSSRC: 3_735_928_559) == "Yk3s9x0PqLmN2vB7")
        #expect(s.connection(for: audio) == .ip4("198.51.100.23"))

        let video = s.media[1]
        #expect(video.bandwidths == [
            Bandwidth(type: .applicationSpecific, value: 2000),
            Bandwidth(type: .transportIndependent, value: 2_000_000),
        ])
        #expect(video.payloadTypes == [96, 97, 102, 103])
        #expect(video.fmtp(forPayloadType: 97)?.value(forParameter: "apt") == "96")
        #expect(video.fmtp(forPayloadType: 102)?.value(forParameter: "packetization-mode") == "1")
        #expect(video.attributeValue(named: "ssrc-group") == "FID 1122334455 2233445566")
        #expect(Set(video.ssrcs.map(\.ssrc)) == [1_122_334_455, 2_233_445_566])
        #expect(video.attributeValue(named: "framerate") == "30")

        let data = s.media[2]
        #expect(data.proto == TransportProtocol("UDP/DTLS/SCTP"))
        #expect(!data.proto.isRTP)
        #expect(data.formats == ["webrtc-datachannel"])
        #expect(data.payloadTypes.isEmpty)
        #expect(data.attributeValue(named: "sctp-port") == "5000")
    }

    @Test func holdReOffer() throws {
        let original = try Fixtures.parse("asterisk-g711-answer.sdp")
        let hold = try Fixtures.parse("hold-sendonly-reoffer.sdp")
        #expect(hold.origin.sessionID == original.origin.sessionID)
        #expect(hold.origin.sessionVersion == original.origin.sessionVersion + 1)
        #expect(hold.media[0].direction == .sendonly)
        #expect(hold.effectiveDirection(for: hold.media[0]) == .sendonly)
        #expect(hold.media[0].direction?.reversed == .recvonly)

        // Re-creating the hold offer from the original with the builder API gives the same bytes.
        var rebuilt = original
        rebuilt.incrementVersion()
        rebuilt.media[0].setDirection(.sendonly)
        #expect(rebuilt == hold)
        #expect(rebuilt.serialized() == (try Fixtures.bytes("hold-sendonly-reoffer.sdp")))
    }

    @Test func manyUnknownAttributes() throws {
        let s = try Fixtures.parse("many-unknown-attributes.sdp")
        #expect(s.sessionName == "SDP Seminar")
        #expect(s.information == "A Seminar on the session description protocol")
        #expect(s.uri == "http://www.example.com/seminars/sdp.pdf")
        #expect(s.emails == ["j.doe@example.com (Jane Doe)"])
        #expect(s.phones == ["+1 617 555-6011"])
        #expect(s.connection == Connection(addressType: .ip4, address: "224.2.17.12", ttl: 127, numberOfAddresses: 3))
        #expect(s.bandwidths == [Bandwidth(type: .conferenceTotal, value: 384), Bandwidth(type: "X-YZ", value: 128)])
        #expect(s.timing == [Timing(start: 2_873_397_496, stop: 2_873_404_696, repeats: ["604800 3600 0 90000", "7d 1h 0 25h"])])
        #expect(s.timeZones == "2882844526 -1h 2898848070 0")
        #expect(s.key == "prompt")
        #expect(s.direction == .recvonly)
        #expect(s.attributes.map(\.description) == [
            "recvonly", "X-nat:0", "x-vendor-flag", "x-vendor-info:free text with  two spaces and: colons",
            "charset:UTF-8", "sdplang:en", "ice-lite",
        ])
        #expect(s.extensionLines == [SDPExtensionLine(type: "y", value: "0100000001")])
        #expect(s.hasExtensionLines)

        let audio = s.media[0]
        #expect(audio.port == 49170)
        #expect(audio.portCount == 2)
        #expect(audio.information == "Main audio")
        #expect(audio.connections == [Connection(addressType: .ip4, address: "224.2.17.12", ttl: 127)])
        #expect(audio.bandwidths.map(\.type) == [.rtcpReceivers, .rtcpSenders])
        #expect(audio.key == "clear:opaque")
        #expect(audio.direction == nil)
        #expect(s.effectiveDirection(for: audio) == .recvonly)
        #expect(audio.codec(forPayloadType: 97)?.encodingName == "iLBC")
        #expect(audio.hasAttribute(named: "X-unknown-property"))
        #expect(audio.attributeValue(named: "3gpp_MaxRecvSDUSize") == "1400")
        #expect(audio.extensionLines == [SDPExtensionLine(type: "f", value: "v/2/4CIF/25/a/1/8000")])

        let cryptos = audio.cryptos
        try #require(cryptos.count == 2)
        #expect(cryptos[0].keyParameters[0].lifetime == .packets(1_048_576))
        #expect(cryptos[0].keyParameters[0].lifetime?.packetCount == 1_048_576)
        #expect(cryptos[0].keyParameters[0].mki == nil)
        #expect(cryptos[0].sessionParameters == [
            .keyDerivationRate(1), .unencryptedSRTCP, .fecOrder("FEC_SRTP"), .windowSizeHint(128), .other("X-EXTENSION"),
        ])
        #expect(cryptos[1].suite == .aes256CMHMACSHA1_80)
        #expect(cryptos[1].suite.keySaltLength == 46)
        #expect(cryptos[1].keySaltBytes?.count == 46)
        #expect(cryptos[1].keyParameters[0].lifetime?.packetCount == 2_147_483_648)
        #expect(cryptos[1].keyParameters[0].mki == CryptoAttribute.MKI(value: 2, length: 1))

        let fax = s.media[1]
        #expect(fax.media == .image)
        #expect(fax.proto == .udptl)
        #expect(fax.formats == ["t38"])
        #expect(fax.attributes.count == 6)
        #expect(fax.attributeValue(named: "T38FaxUdpEC") == "t38UDPRedundancy")
        #expect(s.connection(for: fax)?.address == "224.2.17.12")
    }

    @Test func lfOnlyOffer() throws {
        let s = try Fixtures.parse("lf-only-offer.sdp")
        #expect(s.origin.username == "user1")
        let audio = try #require(s.media.first)
        #expect(audio.codecs.map(\.encodingName) == ["G729", "PCMU", "telephone-event"])
        #expect(audio.fmtp(forPayloadType: 18)?.value(forParameter: "annexb") == "no")
        #expect(audio.ptime == 30)
        #expect(audio.direction == .inactive)
        #expect(!(s.effectiveDirection(for: audio).sends))
    }
}
