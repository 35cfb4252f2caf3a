import SDP
import SwitchboardTestSupport
import Testing

// The RFC 3264 offer/answer engine: offers, answers, answers to our offers,
// re-offers, SRTP, errors. Real peers' descriptions are in OfferAnswerCorpusTests.swift.

/// Local capabilities and peers used by the tests.
enum Local {
    static let key80 = SRTPKey(suite: .aesCM128HMACSHA1_80, keySaltBytes: Array(repeating: 0xA1, count: 30))
    static let key32 = SRTPKey(suite: .aesCM128HMACSHA1_32, keySaltBytes: Array(repeating: 0xB2, count: 30))
    static let inline80 = "oaGhoaGhoaGhoaGhoaGhoaGhoaGhoaGhoaGhoaGh"
    static let inline32 = "srKysrKysrKysrKysrKysrKysrKysrKysrKysrKy"
    /// A valid 30-byte key for remote offers.
    static let remoteKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd"
    static let remoteKey2 = "ZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXp7fH1+f4CB"

    static func audio(
        port: UInt16 = 40000, codecs: [Codec] = [.opus, .pcmu, .pcma, .telephoneEvent], ptime: UInt32? = 20,
        rtcpMux: Bool = false, srtp: SRTPPolicy = .off, keys: [SRTPKey] = [key80, key32],
        direction: MediaDirection = .sendrecv
    ) -> StreamCapabilities {
        StreamCapabilities(
            mediaType: .audio, port: port, codecs: codecs, ptime: ptime, rtcpMux: rtcpMux,
            srtp: SRTPCapabilities(policy: srtp, keys: srtp == .off ? [] : keys), direction: direction)
    }

    static func engine(
        _ streams: [StreamCapabilities] = [audio()], address: String = "192.0.2.10", sessionID: UInt64 = 5000
    ) -> OfferAnswer {
        OfferAnswer(capabilities: MediaCapabilities(address: address, streams: streams), sessionID: sessionID)
    }
}

/// A remote offer: session lines of a peer at 198.51.100.7, then `media`.
func remoteOffer(_ media: [String], connection: String = "IN IP4 198.51.100.7", version: Int = 1) -> String {
    sdp(["v=0", "o=peer 77 \(version) IN IP4 198.51.100.7", "s=-", "c=\(connection)", "t=0 0"] + media)
}

/// Answers `text`, expecting success.
func answer(
    _ engine: inout OfferAnswer, _ text: String, sourceLocation: SourceLocation = #_sourceLocation
) throws -> OfferAnswer.Answer {
    do {
        return try engine.receiveOffer(bytes: Array(text.utf8))
    } catch {
        Issue.record("offer refused: \(error)", sourceLocation: sourceLocation)
        throw error
    }
}

/// Answers `text`, expecting a refusal, and returns it.
func refusal(_ engine: inout OfferAnswer, _ text: String) -> OfferAnswerError? {
    do {
        _ = try engine.receiveOffer(bytes: Array(text.utf8))
        return nil
    } catch {
        return error
    }
}

/// Makes `offerer`'s offer, has `answerer` answer it, and gives the answer back to `offerer`.
func exchange(
    _ offerer: inout OfferAnswer, _ answerer: inout OfferAnswer
) throws -> (offer: SessionDescription, answer: SessionDescription, offerer: NegotiatedSession, answerer: NegotiatedSession) {
    let offer = try offerer.makeOffer()
    // Through the wire form, as a real peer would see it.
    let reply = try answerer.receiveOffer(bytes: offer.serialized())
    let result = try offerer.receiveAnswer(bytes: reply.sdp.serialized())
    return (offer, reply.sdp, result, reply.negotiated)
}

@Suite("Offer/answer: offers")
struct OfferTests {
    @Test func initialOfferIsExact() throws {
        var engine = Local.engine([Local.audio(rtcpMux: true)])
        let offer = try engine.makeOffer()
        #expect(offer.description == sdp(
            "v=0", "o=- 5000 5000 IN IP4 192.0.2.10", "s=-", "c=IN IP4 192.0.2.10", "t=0 0",
            "m=audio 40000 RTP/AVP 111 0 8 101",
            "a=rtpmap:111 opus/48000/2", "a=fmtp:111 useinbandfec=1",
            "a=rtpmap:0 PCMU/8000", "a=rtpmap:8 PCMA/8000",
            "a=rtpmap:101 telephone-event/8000", "a=fmtp:101 0-16",
            "a=ptime:20", "a=sendrecv", "a=rtcp-mux"))
        #expect(engine.state == .localOfferPending)
        #expect(engine.localDescription == offer)
    }

    @Test(arguments: [
        (SRTPPolicy.off, "RTP/AVP", [String]()),
        (.optional, "RTP/AVP", ["a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:\(Local.inline80)", "a=crypto:2 AES_CM_128_HMAC_SHA1_32 inline:\(Local.inline32)"]),
        (.mandatory, "RTP/SAVP", ["a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:\(Local.inline80)", "a=crypto:2 AES_CM_128_HMAC_SHA1_32 inline:\(Local.inline32)"]),
    ])
    func srtpPolicyShapesTheOffer(policy: SRTPPolicy, proto: String, cryptoLines: [String]) throws {
        var engine = Local.engine([Local.audio(codecs: [.pcmu], ptime: nil, srtp: policy)])
        let text = try engine.makeOffer().description
        let lines = text.split(separator: "\r\n").map(String.init)
        #expect(lines.contains("m=audio 40000 \(proto) 0"))
        #expect(lines.filter { $0.hasPrefix("a=crypto:") } == cryptoLines)
    }

    @Test(arguments: [
        // Two codecs preferring 101: the second takes the lowest free dynamic number.
        ([Codec.telephoneEvent, Codec(name: "G726-32", clockRate: 8000, payloadType: 101)], ["101", "96"]),
        // A "static" number that is not the codec's static assignment is treated as taken.
        ([Codec.pcmu, Codec(name: "iLBC", clockRate: 8000, payloadType: 8)], ["0", "96"]),
        // A preferred number outside 96–127 for a dynamic codec.
        ([Codec(name: "speex", clockRate: 16000, payloadType: 50), .opus], ["96", "111"]),
        ([Codec.opus, .pcmu, .pcma, .g722, .telephoneEvent], ["111", "0", "8", "9", "101"]),
    ])
    func payloadTypeNumbering(codecs: [Codec], formats: [String]) throws {
        var engine = Local.engine([Local.audio(codecs: codecs)])
        #expect(try engine.makeOffer().media[0].formats == formats)
    }

    @Test func offerWithTwoStreamsAndAStreamAddress() throws {
        var video = StreamCapabilities(
            mediaType: .video, port: 40002, address: "192.0.2.11",
            codecs: [Codec(name: "H264", clockRate: 90000, payloadType: 96, parameters: "packetization-mode=1")])
        video.rtcpMux = true
        var engine = Local.engine([Local.audio(), video])
        let offer = try engine.makeOffer()
        #expect(offer.media.map(\.media) == [.audio, .video])
        #expect(offer.media[1].connections == [.ip4("192.0.2.11")])
        #expect(offer.media[1].formats == ["96"])
        #expect(offer.media[1].fmtp(forPayloadType: 96)?.parameters == "packetization-mode=1")
        #expect(offer.media[0].connections.isEmpty)
    }

    @Test func badLocalKeysAreRefusedBeforeAnythingIsSent() {
        var engine = Local.engine([Local.audio(srtp: .mandatory, keys: [SRTPKey(suite: .aesCM128HMACSHA1_80, keySaltBytes: [1, 2, 3])])])
        #expect(throws: OfferAnswerError(.invalidCapabilities("key for AES_CM_128_HMAC_SHA1_80 has the wrong length or method"))) {
            try engine.makeOffer()
        }
        #expect(engine.state == .initial)
        var keyless = Local.engine([Local.audio(srtp: .optional, keys: [])])
        #expect(throws: OfferAnswerError.self) { try keyless.makeOffer() }
        #expect((try? keyless.makeOffer()) == nil)
    }

    @Test func ipv6Address() throws {
        var engine = Local.engine(address: "2001:db8::10")
        let offer = try engine.makeOffer()
        #expect(offer.origin.addressType == .ip6)
        #expect(offer.connection == .ip6("2001:db8::10"))
        // An IPv4 offer to an IPv6-only endpoint: address formats incompatible (301).
        var answerer = Local.engine(address: "2001:db8::20")
        let error = refusal(&answerer, remoteOffer(["m=audio 5000 RTP/AVP 0"]))
        #expect(error?.reason == .incompatibleAddressType(media: 0, .ip4))
        #expect(error?.warningCode == 301)
    }
}

@Suite("Offer/answer: answering offers")
struct AnswerTests {
    struct CodecCase: Sendable, CustomTestStringConvertible {
        var name: String
        var offer: [String]
        var codecs: [Codec] = [.opus, .pcmu, .pcma, .telephoneEvent]
        var order: OfferAnswer.AnswerOrder = .offerer
        /// The answer's m= formats.
        var formats: [String]
        /// The send codec: payload type and name.
        var send: (UInt8, String)
        /// The telephone-event payload type and rate we send DTMF with.
        var event: (UInt8, UInt32)?
        /// Expected a=fmtp values in the answer, by payload type.
        var fmtp: [UInt8: String] = [:]
        var testDescription: String { name }
    }

    static let codecCases: [CodecCase] = [
        CodecCase(
            name: "offerer's numbers and order",
            offer: ["m=audio 5000 RTP/AVP 8 0 97", "a=rtpmap:97 telephone-event/8000", "a=fmtp:97 0-15"],
            formats: ["8", "0", "97"], send: (8, "PCMA"), event: (97, 8000), fmtp: [97: "0-15"]),
        CodecCase(
            name: "our order on request; we still send the offerer's first",
            offer: ["m=audio 5000 RTP/AVP 8 0 97", "a=rtpmap:97 telephone-event/8000"],
            order: .local, formats: ["0", "8", "97"], send: (8, "PCMA"), event: (97, 8000), fmtp: [97: "0-15"]),
        CodecCase(
            name: "dynamic collision: opus at 101, telephone-event at 96",
            offer: [
                "m=audio 5000 RTP/AVP 101 0 96", "a=rtpmap:101 opus/48000/2", "a=fmtp:101 stereo=1",
                "a=rtpmap:96 telephone-event/8000", "a=fmtp:96 0-11,16",
            ],
            formats: ["101", "0", "96"], send: (101, "opus"), event: (96, 8000), fmtp: [101: "useinbandfec=1", 96: "0-11,16"]),
        CodecCase(
            name: "unknown codecs skipped, static without rtpmap",
            offer: ["m=audio 5000 RTP/AVP 18 3 0 98", "a=rtpmap:98 iLBC/8000"],
            formats: ["0"], send: (0, "PCMU"), event: nil),
        CodecCase(
            name: "telephone-event matched by rate: the opus-rate one for DTMF",
            offer: [
                "m=audio 5000 RTP/AVP 109 0 100 101", "a=rtpmap:109 opus/48000/2",
                "a=rtpmap:100 telephone-event/8000", "a=rtpmap:101 telephone-event/48000", "a=fmtp:101 0-15",
            ],
            codecs: [.opus, .pcmu, .telephoneEvent, Codec(name: "telephone-event", clockRate: 48000, payloadType: 102, parameters: "0-16")],
            formats: ["109", "0", "100", "101"], send: (109, "opus"), event: (101, 48000), fmtp: [100: "0-15", 101: "0-15"]),
        CodecCase(
            name: "telephone-event at another rate than ours is left out",
            offer: [
                "m=audio 5000 RTP/AVP 109 101", "a=rtpmap:109 opus/48000/2", "a=rtpmap:101 telephone-event/48000",
            ],
            formats: ["109"], send: (109, "opus"), event: nil),
        CodecCase(
            name: "telephone-event with no event in common is left out",
            offer: ["m=audio 5000 RTP/AVP 0 101", "a=rtpmap:101 telephone-event/8000", "a=fmtp:101 32-40"],
            formats: ["0"], send: (0, "PCMU"), event: nil),
        CodecCase(
            name: "encoding names compare without case; channel counts must match",
            offer: [
                "m=audio 5000 RTP/AVP 96 97 8", "a=rtpmap:96 OPUS/48000/1", "a=rtpmap:97 Opus/48000/2", "a=rtpmap:8 pcma/8000",
            ],
            formats: ["97", "8"], send: (97, "Opus"), event: nil),
        CodecCase(
            name: "same codec offered twice: the first is taken",
            offer: ["m=audio 5000 RTP/AVP 96 97", "a=rtpmap:96 opus/48000/2", "a=rtpmap:97 opus/48000/2"],
            formats: ["96"], send: (96, "opus"), event: nil),
    ]

    @Test(arguments: codecCases)
    func codecIntersection(_ c: CodecCase) throws {
        var engine = Local.engine([Local.audio(codecs: c.codecs)])
        engine.answerOrder = c.order
        let reply = try answer(&engine, remoteOffer(c.offer))
        let media = try #require(reply.sdp.media.first)
        #expect(media.formats == c.formats)
        #expect(media.port == 40000)
        for (pt, parameters) in c.fmtp { #expect(media.fmtp(forPayloadType: pt)?.parameters == parameters) }
        let negotiated = try #require(reply.negotiated.audio)
        #expect(negotiated.sendCodec.payloadType == c.send.0)
        #expect(negotiated.sendCodec.name == c.send.1)
        #expect(negotiated.telephoneEvent?.payloadType == c.event?.0)
        #expect(negotiated.telephoneEvent?.clockRate == c.event?.1)
        // We receive under the numbers our answer declared.
        #expect(negotiated.receiveCodecs.map { String($0.payloadType) } == c.formats)
        // Each rtpmap in the answer names the offerer's codec under the offerer's number.
        for pt in media.payloadTypes {
            let offered = try parseOK(remoteOffer(c.offer)).media[0].codec(forPayloadType: pt)
            #expect(media.codec(forPayloadType: pt) == offered)
        }
    }

    struct RefusalCase: Sendable, CustomTestStringConvertible {
        var name: String
        var offer: [String]
        var reason: OfferAnswerError.Reason
        var warning: String
        var testDescription: String { name }
    }

    static let refusalCases: [RefusalCase] = [
        RefusalCase(
            name: "only telephone-event in common",
            offer: ["m=audio 5000 RTP/AVP 18 101", "a=rtpmap:101 telephone-event/8000"],
            reason: .onlyAuxiliaryCodecsInCommon(media: 0),
            warning: #"305 switchboard "Incompatible media format: m-line 0: only telephone-event/CN in common""#),
        RefusalCase(
            name: "no codec in common",
            offer: ["m=audio 5000 RTP/AVP 18 4"],
            reason: .noCommonCodec(media: 0),
            warning: #"305 switchboard "Incompatible media format: m-line 0: no codec in common""#),
        RefusalCase(
            name: "only media we have no stream for",
            offer: ["m=video 5002 RTP/AVP 96", "a=rtpmap:96 VP8/90000", "m=image 5004 udptl t38"],
            reason: .mediaTypeNotAvailable(media: 0, .video),
            warning: #"304 switchboard "Media type not available: m-line 0: media type video not available""#),
        RefusalCase(
            name: "WebRTC transport",
            offer: ["m=audio 9 UDP/TLS/RTP/SAVPF 111", "a=rtpmap:111 opus/48000/2"],
            reason: .unsupportedTransport(media: 0, .udpTLSRTPSAVPF),
            warning: #"302 switchboard "Incompatible transport protocol: m-line 0: transport UDP/TLS/RTP/SAVPF not supported""#),
        RefusalCase(
            name: "SRTP offered, we have none",
            offer: ["m=audio 5000 RTP/SAVP 0", "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:\(Local.remoteKey)"],
            reason: .srtpNotSupported(media: 0),
            warning: #"302 switchboard "Incompatible transport protocol: m-line 0: SRTP not supported""#),
    ]

    @Test(arguments: refusalCases)
    func refusals(_ c: RefusalCase) throws {
        var engine = Local.engine()
        let error = try #require(refusal(&engine, remoteOffer(c.offer)))
        #expect(error.reason == c.reason)
        #expect(error.statusCode == 488)
        #expect(error.warningHeaderValue() == c.warning)
        // Nothing was committed.
        #expect(engine.state == .initial)
        #expect(engine.localDescription == nil)
    }

    @Test func opusParametersReachTheEncoder() throws {
        var engine = Local.engine()
        let reply = try answer(&engine, remoteOffer([
            "m=audio 5000 RTP/AVP 111 0", "a=rtpmap:111 opus/48000/2",
            "a=fmtp:111 stereo=1; sprop-stereo=1; useinbandfec=1; maxaveragebitrate=64000",
        ]))
        let audio = try #require(reply.negotiated.audio)
        #expect(audio.sendCodec.parameters == "stereo=1; sprop-stereo=1; useinbandfec=1; maxaveragebitrate=64000")
        let opus = OpusParameters(audio.sendCodec.parameters)
        #expect(opus.stereo && opus.spropStereo && opus.useInbandFEC && !opus.useDTX)
        #expect(opus.maxAverageBitrate == 64000)
        #expect(opus.maxPlaybackRate == nil)
        // Our fmtp declares what we want to receive.
        #expect(reply.sdp.media[0].fmtp(forPayloadType: 111)?.parameters == "useinbandfec=1")
        #expect(audio.receiveCodec(forPayloadType: 111)?.parameters == "useinbandfec=1")
        #expect(OpusParameters(nil) == OpusParameters(""))
        #expect(!OpusParameters(nil).stereo)
    }

    @Test func customParameterRule() throws {
        let h264 = Codec(
            name: "H264", clockRate: 90000, payloadType: 96, parameters: "packetization-mode=1",
            parameterRule: .identical)
        let video = StreamCapabilities(mediaType: .video, port: 40002, codecs: [h264])
        var engine = Local.engine([Local.audio(), video])
        let reply = try answer(&engine, remoteOffer([
            "m=audio 5000 RTP/AVP 0",
            "m=video 5002 RTP/AVP 97 98", "a=rtpmap:97 H264/90000", "a=fmtp:97 packetization-mode=0",
            "a=rtpmap:98 H264/90000", "a=fmtp:98 Packetization-Mode=1",
        ]))
        #expect(reply.sdp.media[1].formats == ["98"])
        #expect(TelephoneEvents("0-11, 16")?.description == "0-11,16")
        #expect(TelephoneEvents("5-2") == nil)
        #expect(TelephoneEvents("0-300") == nil)
        #expect(TelephoneEvents("1,2,3,7")?.description == "1-3,7")
    }

    @Test func exactAnswerWithVideoDeclined() throws {
        var engine = Local.engine([Local.audio(rtcpMux: true)], sessionID: 9)
        let reply = try answer(&engine, remoteOffer([
            "m=audio 5000 RTP/AVP 0 8 101", "a=rtpmap:101 telephone-event/8000", "a=fmtp:101 0-15", "a=ptime:30",
            "m=video 5002 RTP/AVP 96 97", "a=rtpmap:96 VP8/90000", "a=rtpmap:97 H264/90000",
        ]))
        #expect(reply.sdp.description == sdp(
            "v=0", "o=- 9 9 IN IP4 192.0.2.10", "s=-", "c=IN IP4 192.0.2.10", "t=0 0",
            "m=audio 40000 RTP/AVP 0 8 101", "a=rtpmap:0 PCMU/8000", "a=rtpmap:8 PCMA/8000",
            "a=rtpmap:101 telephone-event/8000", "a=fmtp:101 0-15", "a=ptime:20", "a=sendrecv",
            "m=video 0 RTP/AVP 96 97"))
        #expect(reply.negotiated.declined == [1])
        let audio = try #require(reply.negotiated.audio)
        #expect(audio.ptime == 30)
        #expect(!audio.rtcpMux)  // offered without a=rtcp-mux: not echoed
        #expect(audio.remoteAddress == "198.51.100.7")
        #expect(audio.remoteRTPPort == 5000)
        #expect(audio.remoteRTCPPort == 5001)
        #expect(audio.localStream == 0)
        #expect(engine.state == .stable)
    }

    @Test func rtcpAddressAndMux() throws {
        var engine = Local.engine([Local.audio(rtcpMux: true)])
        let reply = try answer(&engine, remoteOffer([
            "m=audio 5000 RTP/AVP 0", "c=IN IP4 203.0.113.5", "a=rtcp:6001 IN IP4 203.0.113.6",
        ]))
        let audio = try #require(reply.negotiated.audio)
        #expect(audio.remoteAddress == "203.0.113.5")
        #expect((audio.remoteRTCPAddress, audio.remoteRTCPPort) == ("203.0.113.6", 6001))
        var muxed = Local.engine([Local.audio(rtcpMux: true)])
        let reply2 = try answer(&muxed, remoteOffer(["m=audio 5000 RTP/AVP 0", "a=rtcp:5001", "a=rtcp-mux"]))
        let audio2 = try #require(reply2.negotiated.audio)
        #expect(audio2.rtcpMux)
        #expect(reply2.sdp.media[0].isRTCPMuxed)
        #expect((audio2.remoteRTCPAddress, audio2.remoteRTCPPort) == ("198.51.100.7", 5000))
        var unmuxed = Local.engine([Local.audio(rtcpMux: false)])
        let reply3 = try answer(&unmuxed, remoteOffer(["m=audio 5000 RTP/AVP 0", "a=rtcp-mux"]))
        #expect(!reply3.sdp.media[0].isRTCPMuxed)
        #expect(reply3.negotiated.audio?.remoteRTCPPort == 5001)
    }

    struct DirectionCase: Sendable, CustomTestStringConvertible {
        var offered: String?
        var connection: String = "IN IP4 198.51.100.7"
        var intent: MediaDirection
        var answer: MediaDirection
        var held: Bool
        var testDescription: String { "\(offered ?? "none") c=\(connection) intent \(intent)" }
    }

    static let directionCases: [DirectionCase] = [
        DirectionCase(offered: nil, intent: .sendrecv, answer: .sendrecv, held: false),
        DirectionCase(offered: "sendrecv", intent: .sendrecv, answer: .sendrecv, held: false),
        DirectionCase(offered: "sendonly", intent: .sendrecv, answer: .recvonly, held: true),
        DirectionCase(offered: "recvonly", intent: .sendrecv, answer: .sendonly, held: false),
        DirectionCase(offered: "inactive", intent: .sendrecv, answer: .inactive, held: true),
        DirectionCase(offered: "sendrecv", intent: .sendonly, answer: .sendonly, held: false),
        DirectionCase(offered: "sendonly", intent: .sendonly, answer: .inactive, held: true),
        DirectionCase(offered: "recvonly", intent: .recvonly, answer: .inactive, held: false),
        DirectionCase(offered: "sendrecv", intent: .inactive, answer: .inactive, held: false),
        // RFC 2543 hold: c=0.0.0.0 means "do not send to me".
        DirectionCase(offered: nil, connection: "IN IP4 0.0.0.0", intent: .sendrecv, answer: .recvonly, held: true),
        DirectionCase(offered: "sendonly", connection: "IN IP4 0.0.0.0", intent: .sendrecv, answer: .recvonly, held: true),
    ]

    @Test(arguments: directionCases)
    func directions(_ c: DirectionCase) throws {
        var engine = Local.engine([Local.audio(direction: c.intent)])
        let lines = ["m=audio 5000 RTP/AVP 0"] + (c.offered.map { ["a=\($0)"] } ?? [])
        let reply = try answer(&engine, remoteOffer(lines, connection: c.connection))
        #expect(reply.sdp.media[0].direction == c.answer)
        let audio = try #require(reply.negotiated.audio)
        #expect(audio.direction == c.answer)
        #expect(audio.sends == c.answer.sends)
        #expect(audio.receives == c.answer.receives)
        #expect(audio.isHeldByRemote == c.held)
    }

    @Test func sessionLevelDirectionAndTiming() throws {
        var engine = Local.engine()
        let text = sdp(
            "v=0", "o=peer 1 1 IN IP4 198.51.100.7", "s=-", "c=IN IP4 198.51.100.7", "t=3034423619 3042462419",
            "a=sendonly", "m=audio 5000 RTP/AVP 0")
        let reply = try answer(&engine, text)
        #expect(reply.sdp.media[0].direction == .recvonly)
        // RFC 3264 section 6: the answer's t= equals the offer's.
        #expect(reply.sdp.timing == [Timing(start: 3_034_423_619, stop: 3_042_462_419)])
    }

    @Test func malformedOffer() throws {
        var engine = Local.engine()
        let text = remoteOffer(["m=audio 5000 RTP/AVP 0", "a=rtpmap:0 PCMU"])
        let error = try #require(refusal(&engine, text))
        guard case .malformed(let parse) = error.reason else {
            Issue.record("expected malformed, got \(error.reason)")
            return
        }
        #expect(parse.line == 7)
        #expect(parse.rule == .rtpmap)
        #expect(error.statusCode == 488)
        #expect(error.warningCode == 399)
        #expect(error.warningHeaderValue(agent: "pbx") == "399 pbx \"Miscellaneous warning: malformed SDP: SDP line 7 (offset \(parse.offset)): rtpmap: missing clock rate\"")
        // An active m-line without any c=.
        let noConnection = sdp("v=0", "o=peer 1 1 IN IP4 198.51.100.7", "s=-", "t=0 0", "m=audio 5000 RTP/AVP 0")
        #expect(refusal(&engine, noConnection)?.reason == .missingConnection(media: 0))
    }

    @Test func warningTextIsQuotedSafely() {
        let error = OfferAnswerError(.malformed(SDPParseError(offset: 3, line: 1, rule: .crypto, detail: #"bad "x"\y"#)))
        #expect(error.warningHeaderValue() == #"399 switchboard "Miscellaneous warning: malformed SDP: SDP line 1 (offset 3): crypto: bad \"x\"\\y""#)
        #expect(OfferAnswerError(.offerPending).warningHeaderValue() == nil)
        #expect(OfferAnswerError(.offerPending).statusCode == 491)
        #expect(OfferAnswerError(.noOfferPending).statusCode == 500)
    }

    @Test func streamsDeclinedInTheOfferStayDeclined() throws {
        var engine = Local.engine()
        let reply = try answer(&engine, remoteOffer(["m=audio 0 RTP/AVP 0", "m=audio 5000 RTP/AVP 8"]))
        #expect(reply.sdp.media.map(\.port) == [0, 40000])
        #expect(reply.sdp.media[0].formats == ["0"])
        #expect(reply.negotiated.declined == [0])
        #expect(reply.negotiated.audio?.index == 1)
        // A second audio stream finds no free local stream.
        var single = Local.engine()
        let two = try answer(&single, remoteOffer(["m=audio 5000 RTP/AVP 0", "m=audio 5002 RTP/AVP 0"]))
        #expect(two.sdp.media.map(\.port) == [40000, 0])
    }
}

@Suite("Offer/answer: SRTP")
struct SRTPTests {
    enum Outcome: Sendable, Equatable {
        case plain
        case srtp(tag: UInt32, CryptoSuite)
        case refused(OfferAnswerError.Reason)
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var policy: SRTPPolicy
        var proto: String
        var crypto: [String]
        var outcome: Outcome
        var testDescription: String { "\(policy) × \(proto) with \(crypto.count) crypto" }
    }

    static let c80 = "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:\(Local.remoteKey)"
    static let c256 = "a=crypto:1 AES_256_CM_HMAC_SHA1_80 inline:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLQ=="

    static let cases: [Case] = [
        Case(policy: .off, proto: "RTP/AVP", crypto: [], outcome: .plain),
        Case(policy: .off, proto: "RTP/AVP", crypto: [c80], outcome: .plain),
        Case(policy: .off, proto: "RTP/SAVP", crypto: [c80], outcome: .refused(.srtpNotSupported(media: 0))),
        Case(policy: .optional, proto: "RTP/AVP", crypto: [], outcome: .plain),
        Case(policy: .optional, proto: "RTP/AVP", crypto: [c80], outcome: .srtp(tag: 1, .aesCM128HMACSHA1_80)),
        Case(policy: .optional, proto: "RTP/AVP", crypto: [c256], outcome: .plain),
        Case(policy: .optional, proto: "RTP/SAVP", crypto: [c80], outcome: .srtp(tag: 1, .aesCM128HMACSHA1_80)),
        Case(policy: .optional, proto: "RTP/SAVP", crypto: [c256], outcome: .refused(.noAcceptableCrypto(media: 0))),
        Case(policy: .optional, proto: "RTP/SAVP", crypto: [], outcome: .refused(.noAcceptableCrypto(media: 0))),
        Case(policy: .mandatory, proto: "RTP/AVP", crypto: [], outcome: .refused(.srtpRequired(media: 0))),
        Case(policy: .mandatory, proto: "RTP/AVP", crypto: [c80], outcome: .srtp(tag: 1, .aesCM128HMACSHA1_80)),
        Case(policy: .mandatory, proto: "RTP/AVP", crypto: [c256], outcome: .refused(.noAcceptableCrypto(media: 0))),
        Case(policy: .mandatory, proto: "RTP/SAVP", crypto: [c80], outcome: .srtp(tag: 1, .aesCM128HMACSHA1_80)),
        Case(policy: .mandatory, proto: "RTP/SAVP", crypto: [], outcome: .refused(.noAcceptableCrypto(media: 0))),
    ]

    @Test(arguments: cases)
    func policyAgainstOffer(_ c: Case) throws {
        var engine = Local.engine([Local.audio(codecs: [.pcmu], srtp: c.policy)])
        let text = remoteOffer(["m=audio 5000 \(c.proto) 0"] + c.crypto)
        switch c.outcome {
        case .refused(let reason):
            let error = try #require(refusal(&engine, text))
            #expect(error.reason == reason)
            #expect(error.statusCode == 488)
        case .plain:
            let reply = try answer(&engine, text)
            #expect(reply.sdp.media[0].cryptos.isEmpty)
            #expect(reply.sdp.media[0].proto.rawValue == c.proto)
            #expect(reply.negotiated.audio?.srtp == nil)
        case .srtp(let tag, let suite):
            let reply = try answer(&engine, text)
            let media = reply.sdp.media[0]
            #expect(media.proto.rawValue == c.proto)
            #expect(media.cryptos.map(\.tag) == [tag])
            #expect(media.cryptos.first?.suite == suite)
            #expect(media.cryptos.first?.keyParameters.first?.keySalt == Local.inline80)
            let srtp = try #require(reply.negotiated.audio?.srtp)
            #expect(srtp.suite == suite)
            #expect(srtp.tag == tag)
            #expect(srtp.remoteKeys.map(\.keySalt) == [Local.remoteKey])
            #expect(srtp.localKeys.map(\.keySalt) == [Local.inline80])
        }
    }

    @Test func severalSuitesWithLifetimeAndMKI() throws {
        var engine = Local.engine([Local.audio(codecs: [.pcmu], srtp: .mandatory, keys: [Local.key80, Local.key32])])
        let reply = try answer(&engine, remoteOffer([
            "m=audio 5000 RTP/SAVP 0",
            Self.c256,  // not accepted
            "a=crypto:2 AES_CM_128_HMAC_SHA1_80 inline:\(Local.remoteKey) UNENCRYPTED_SRTP",  // a session parameter we cannot honour
            "a=crypto:3 AES_CM_128_HMAC_SHA1_80 inline:AAECAwQF|2^20|1:4",  // too short a key
            "a=crypto:4 AES_CM_128_HMAC_SHA1_32 inline:\(Local.remoteKey)|2^31|5:2;inline:\(Local.remoteKey2)|2^31|6:2 WSH=128",
            "a=crypto:5 AES_CM_128_HMAC_SHA1_80 inline:\(Local.remoteKey2)",
        ]))
        // The first acceptable line in the offer's order wins, even though we prefer _80.
        let media = reply.sdp.media[0]
        #expect(media.cryptos.count == 1)
        #expect(media.attributes(named: "crypto").map(\.value) == ["4 AES_CM_128_HMAC_SHA1_32 inline:\(Local.inline32)"])
        let srtp = try #require(reply.negotiated.audio?.srtp)
        #expect(srtp.tag == 4)
        #expect(srtp.suite == .aesCM128HMACSHA1_32)
        #expect(srtp.remoteKeys.count == 2)
        #expect(srtp.remoteKeys[0].lifetime == .powerOfTwo(31))
        #expect(srtp.remoteKeys[0].mki == CryptoAttribute.MKI(value: 5, length: 2))
        #expect(srtp.remoteKeys[1].mki == CryptoAttribute.MKI(value: 6, length: 2))
        #expect(srtp.remoteKeys[1].keySaltBytes == (100..<130).map { UInt8($0) })
    }

    @Test(arguments: [SRTPPolicy.optional, .mandatory])
    func engineToEngineKeysCross(policy: SRTPPolicy) throws {
        var alice = Local.engine([Local.audio(srtp: policy, keys: [Local.key80])])
        var bob = Local.engine([Local.audio(port: 50000, srtp: .optional, keys: [Local.key32, SRTPKey(suite: .aesCM128HMACSHA1_80, inlineKey: Local.remoteKey)])])
        let result = try exchange(&alice, &bob)
        let a = try #require(result.offerer.audio?.srtp)
        let b = try #require(result.answerer.audio?.srtp)
        #expect(a.suite == .aesCM128HMACSHA1_80 && b.suite == .aesCM128HMACSHA1_80)
        #expect(a.localKeys == b.remoteKeys)
        #expect(a.remoteKeys == b.localKeys)
        #expect(b.localKeys.map(\.keySalt) == [Local.remoteKey])
        #expect(result.answer.media[0].proto == (policy == .mandatory ? .rtpSAVP : .rtpAVP))
    }
}

@Suite("Offer/answer: answers to our offers")
struct AnswerProcessingTests {
    /// Our offer: opus 111, PCMU 0, PCMA 8, telephone-event 101 (optional SRTP, tags 1 and 2).
    static func offering(srtp: SRTPPolicy = .optional, rtcpMux: Bool = true) throws -> OfferAnswer {
        var engine = Local.engine([Local.audio(rtcpMux: rtcpMux, srtp: srtp)])
        _ = try engine.makeOffer()
        return engine
    }

    static func answerText(_ media: [String]) -> String {
        sdp(["v=0", "o=peer 88 2 IN IP4 198.51.100.9", "s=-", "c=IN IP4 198.51.100.9", "t=0 0"] + media)
    }

    struct BadCase: Sendable, CustomTestStringConvertible {
        var name: String
        var srtp: SRTPPolicy = .optional
        var media: [String]
        var reason: OfferAnswerError.Reason
        var testDescription: String { name }
    }

    static let badCases: [BadCase] = [
        BadCase(name: "only formats we did not offer", media: ["m=audio 6000 RTP/AVP 18 97", "a=rtpmap:97 speex/16000"], reason: .noCommonCodec(media: 0)),
        BadCase(
            name: "our number remapped to another codec",
            media: ["m=audio 6000 RTP/AVP 0", "a=rtpmap:0 PCMA/8000"], reason: .payloadTypeMismatch(media: 0, payloadType: 0)),
        BadCase(
            name: "our dynamic number remapped",
            media: ["m=audio 6000 RTP/AVP 111", "a=rtpmap:111 speex/16000"], reason: .payloadTypeMismatch(media: 0, payloadType: 111)),
        BadCase(name: "undefined dynamic number only", media: ["m=audio 6000 RTP/AVP 100"], reason: .noCommonCodec(media: 0)),
        BadCase(name: "extra m-line", media: ["m=audio 6000 RTP/AVP 0", "m=video 6002 RTP/AVP 96"], reason: .mediaLineCount(expected: 1, found: 2)),
        BadCase(name: "no m-line", media: [], reason: .mediaLineCount(expected: 1, found: 0)),
        BadCase(name: "media type changed", media: ["m=video 6000 RTP/AVP 0"], reason: .mediaTypeMismatch(media: 0)),
        BadCase(name: "transport changed", media: ["m=audio 6000 RTP/AVPF 0"], reason: .transportMismatch(media: 0)),
        BadCase(
            name: "crypto tag we did not offer",
            media: ["m=audio 6000 RTP/AVP 0", "a=crypto:7 AES_CM_128_HMAC_SHA1_80 inline:\(Local.remoteKey)"],
            reason: .cryptoNotOffered(media: 0, tag: 7)),
        BadCase(
            name: "crypto suite differs from the tag's",
            media: ["m=audio 6000 RTP/AVP 0", "a=crypto:1 AES_CM_128_HMAC_SHA1_32 inline:\(Local.remoteKey)"],
            reason: .cryptoNotOffered(media: 0, tag: 1)),
        BadCase(
            name: "crypto key too short",
            media: ["m=audio 6000 RTP/AVP 0", "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:AAECAwQF"],
            reason: .cryptoNotOffered(media: 0, tag: 1)),
        BadCase(name: "SAVP answered without crypto", srtp: .mandatory, media: ["m=audio 6000 RTP/SAVP 0"], reason: .missingCrypto(media: 0)),
        BadCase(name: "every stream declined", media: ["m=audio 0 RTP/AVP 0"], reason: .allStreamsDeclined),
        BadCase(name: "only telephone-event", media: ["m=audio 6000 RTP/AVP 101", "a=rtpmap:101 telephone-event/8000"], reason: .onlyAuxiliaryCodecsInCommon(media: 0)),
    ]

    @Test(arguments: badCases)
    func badAnswers(_ c: BadCase) throws {
        var engine = try Self.offering(srtp: c.srtp)
        #expect(throws: OfferAnswerError(c.reason)) { try engine.receiveAnswer(bytes: Array(Self.answerText(c.media).utf8)) }
        // The offer is no longer pending; the session is as before it.
        #expect(engine.state == .initial)
        #expect(engine.negotiated == nil)
    }

    @Test func goodAnswer() throws {
        var engine = try Self.offering()
        let result = try engine.receiveAnswer(bytes: Array(Self.answerText([
            "m=audio 6000 RTP/AVP 8 96", "a=rtpmap:8 PCMA/8000", "a=rtpmap:96 telephone-event/8000", "a=fmtp:96 0-15",
            "a=ptime:30", "a=recvonly", "a=rtcp-mux",
            "a=crypto:2 AES_CM_128_HMAC_SHA1_32 inline:\(Local.remoteKey)|2^20|1:4",
        ]).utf8))
        let audio = try #require(result.audio)
        #expect(engine.state == .stable)
        #expect(audio.sendCodec == NegotiatedCodec(payloadType: 8, name: "PCMA", clockRate: 8000))
        // A different number for telephone-event is accepted: we send with theirs, receive with ours.
        #expect(audio.telephoneEvent == NegotiatedCodec(payloadType: 96, name: "telephone-event", clockRate: 8000, parameters: "0-15"))
        #expect(audio.receiveCodecs.map(\.payloadType) == [8, 101])
        #expect(audio.receiveCodec(forPayloadType: 101)?.parameters == "0-16")
        #expect(audio.ptime == 30)
        #expect(audio.direction == .sendonly)
        #expect(!audio.isHeldByRemote)
        #expect(audio.rtcpMux)
        #expect((audio.remoteAddress, audio.remoteRTPPort, audio.remoteRTCPPort) == ("198.51.100.9", 6000, 6000))
        let srtp = try #require(audio.srtp)
        #expect(srtp.tag == 2)
        #expect(srtp.localKeys.map(\.keySalt) == [Local.inline32])
        #expect(srtp.remoteKeys.first?.mki == CryptoAttribute.MKI(value: 1, length: 4))
        // The same answer again (183, then 200) is accepted; another one is not.
        let again = try engine.receiveAnswer(bytes: Array(Self.answerText([
            "m=audio 6000 RTP/AVP 8 96", "a=rtpmap:8 PCMA/8000", "a=rtpmap:96 telephone-event/8000", "a=fmtp:96 0-15",
            "a=ptime:30", "a=recvonly", "a=rtcp-mux",
            "a=crypto:2 AES_CM_128_HMAC_SHA1_32 inline:\(Local.remoteKey)|2^20|1:4",
        ]).utf8))
        #expect(again == result)
        #expect(throws: OfferAnswerError(.noOfferPending)) {
            try engine.receiveAnswer(bytes: Array(Self.answerText(["m=audio 6000 RTP/AVP 0"]).utf8))
        }
    }

    @Test func formatsNotOfferedAreIgnoredAndLenientRTPMaps() throws {
        // RFC 3264 section 6.1: an answer MAY list formats the offer did not have.
        var engine = Local.engine([Local.audio(codecs: [.pcmu, .g722, .telephoneEvent])])
        let offer = try engine.makeOffer()
        #expect(offer.media[0].formats == ["0", "9", "101"])
        let result = try engine.receiveAnswer(bytes: Array(Self.answerText([
            // speex 97 and the undefined 100 were not offered; 101 lacks its a=rtpmap;
            // 9 is declared with the common wrong rate G722/16000.
            "m=audio 6000 RTP/AVP 97 9 100 0 101", "a=rtpmap:97 speex/16000", "a=rtpmap:9 G722/16000",
        ]).utf8))
        let audio = try #require(result.audio)
        #expect(audio.sendCodec == NegotiatedCodec(payloadType: 9, name: "G722", clockRate: 8000))
        #expect(audio.receiveCodecs.map(\.payloadType) == [9, 0, 101])
        #expect(audio.telephoneEvent?.payloadType == 101)
        // The same lenience when answering: static numbers go by their assignment; the offer's line is echoed.
        var answerer = Local.engine([Local.audio(codecs: [.g722])])
        let reply = try answer(&answerer, remoteOffer(["m=audio 5000 RTP/AVP 9", "a=rtpmap:9 G722/16000"]))
        #expect(reply.sdp.media[0].rtpmap(forPayloadType: 9) == RTPMap(payloadType: 9, encodingName: "G722", clockRate: 16000))
        #expect(reply.negotiated.audio?.sendCodec.clockRate == 8000)
    }

    @Test func plainAnswerToOptionalSRTPAndNoMuxWhenNotOffered() throws {
        var engine = try Self.offering(srtp: .optional, rtcpMux: false)
        let result = try engine.receiveAnswer(bytes: Array(Self.answerText(["m=audio 6000 RTP/AVP 0", "a=rtcp-mux"]).utf8))
        let audio = try #require(result.audio)
        #expect(audio.srtp == nil)
        #expect(!audio.rtcpMux)
        #expect(audio.remoteRTCPPort == 6001)
        #expect(audio.direction == .sendrecv)
    }

    @Test func malformedAnswerRollsBack() throws {
        var engine = try Self.offering()
        let error = try #require(throws: OfferAnswerError.self) { try engine.receiveAnswer(bytes: Array("v=0\r\nx".utf8)) }
        guard case .malformed = error.reason else {
            Issue.record("expected malformed, got \(error.reason)")
            return
        }
        #expect(engine.state == .initial)
        #expect(throws: OfferAnswerError(.noOfferPending)) {
            try engine.receiveAnswer(bytes: Array(Self.answerText(["m=audio 6000 RTP/AVP 0"]).utf8))
        }
    }
}

@Suite("Offer/answer: sessions")
struct SessionTests {
    @Test func holdAndResumeByUs() throws {
        var alice = Local.engine(sessionID: 100)
        var bob = Local.engine([Local.audio(port: 50000, codecs: [.pcma, .opus, .telephoneEvent])], address: "192.0.2.20", sessionID: 200)
        let first = try exchange(&alice, &bob)
        #expect(first.offer.origin.sessionVersion == 100)
        #expect(first.answer.origin.sessionVersion == 200)
        #expect(first.answer.media[0].formats == ["111", "8", "101"])
        #expect(first.offerer.audio?.sendCodec.name == "opus")
        #expect(first.answerer.audio?.sendCodec.name == "opus")
        #expect(first.offerer.audio?.remoteRTPPort == 50000)
        #expect(first.answerer.audio?.remoteAddress == "192.0.2.10")

        alice.setHold(true)
        let hold = try exchange(&alice, &bob)
        #expect(hold.offer.origin.sessionID == 100)
        #expect(hold.offer.origin.sessionVersion == 101)
        #expect(hold.offer.media[0].formats == first.offer.media[0].formats)
        #expect(hold.offer.media[0].direction == .sendonly)
        #expect(hold.answer.media[0].direction == .recvonly)
        #expect(hold.answer.origin.sessionVersion == 201)
        #expect(hold.offerer.audio.map { ($0.sends, $0.receives, $0.isHeldByRemote) } ?? (false, true, true) == (true, false, false))
        #expect(hold.answerer.audio.map { ($0.sends, $0.receives, $0.isHeldByRemote) } ?? (true, false, false) == (false, true, true))

        alice.setHold(false)
        let resume = try exchange(&alice, &bob)
        #expect(resume.offer.origin.sessionVersion == 102)
        #expect(resume.answer.origin.sessionVersion == 202)
        #expect(resume.offerer.audio?.direction == .sendrecv)
        #expect(resume.answerer.audio?.isHeldByRemote == false)
        // Same payload types throughout.
        #expect(resume.answer.media[0].formats == first.answer.media[0].formats)

        // A refresh offer changing nothing keeps the versions (RFC 3264 section 8).
        let refresh = try exchange(&alice, &bob)
        #expect(refresh.offer.origin.sessionVersion == 102)
        #expect(refresh.answer.origin.sessionVersion == 202)
        #expect(refresh.offer == resume.offer)
    }

    @Test func streamDeclinedByThePeerStaysDeclinedInReOffers() throws {
        let video = StreamCapabilities(mediaType: .video, port: 40002, codecs: [Codec(name: "VP8", clockRate: 90000, payloadType: 96)])
        var alice = Local.engine([Local.audio(), video], sessionID: 100)
        var bob = Local.engine([Local.audio(port: 50000)], address: "192.0.2.20", sessionID: 200)
        let first = try exchange(&alice, &bob)
        #expect(first.answer.media.map(\.port) == [50000, 0])
        #expect(first.offerer.declined == [1])
        alice.setHold(true)
        let hold = try exchange(&alice, &bob)
        #expect(hold.offer.media.map(\.port) == [40000, 0])
        #expect(hold.offer.media[1].formats == ["96"])
        #expect(hold.offer.media[1].media == .video)
        #expect(hold.answer.media.map(\.port) == [50000, 0])
    }

    @Test func holdByThePeerAndBothOnHold() throws {
        var alice = Local.engine(sessionID: 100)
        var bob = Local.engine([Local.audio(port: 50000)], address: "192.0.2.20", sessionID: 200)
        _ = try exchange(&alice, &bob)
        // Bob holds Alice: Bob's re-offer, Alice answers.
        bob.setHold(true)
        let held = try exchange(&bob, &alice)
        #expect(held.offer.origin.sessionVersion == 201)
        #expect(held.answer.media[0].direction == .recvonly)
        #expect(held.answer.origin.sessionVersion == 101)
        #expect(held.answerer.audio?.isHeldByRemote == true)
        #expect(held.answerer.audio?.sends == false)
        // Alice holds too: her offer says sendonly, Bob (still holding) answers inactive.
        alice.setHold(true)
        let both = try exchange(&alice, &bob)
        #expect(both.offer.media[0].direction == .sendonly)
        #expect(both.answer.media[0].direction == .inactive)
        #expect(both.offerer.audio?.direction == .inactive)
        #expect(both.offerer.audio?.isHeldByRemote == true)
        // Bob resumes; Alice still holds: she answers sendonly.
        bob.setHold(false)
        let half = try exchange(&bob, &alice)
        #expect(half.answer.media[0].direction == .sendonly)
        #expect(half.offerer.audio?.direction == .recvonly)
    }

    @Test func delayedOffer() throws {
        // INVITE without SDP: the UAS (bob) offers in the 200, the UAC (alice) answers in the ACK.
        var alice = Local.engine(sessionID: 100)
        var bob = Local.engine([Local.audio(port: 50000, codecs: [.pcmu, .telephoneEvent])], address: "192.0.2.20", sessionID: 200)
        #expect(alice.state == .initial && bob.state == .initial)
        let offerIn200 = try bob.makeOffer()
        #expect(bob.state == .localOfferPending)
        let ack = try alice.receiveOffer(bytes: offerIn200.serialized())
        #expect(alice.state == .stable)
        let media = try bob.receiveAnswer(bytes: ack.sdp.serialized())
        #expect(bob.state == .stable)
        #expect(media.audio?.sendCodec.name == "PCMU")
        #expect(ack.negotiated.audio?.sendCodec.name == "PCMU")
        #expect(media.audio?.remoteRTPPort == 40000)
        #expect(ack.negotiated.audio?.remoteRTPPort == 50000)
    }

    @Test func forkedAnswersGoToCopies() throws {
        var caller = Local.engine(sessionID: 100)
        _ = try caller.makeOffer()
        var early1 = caller, early2 = caller
        let pcmu = try early1.receiveAnswer(bytes: Array(AnswerProcessingTests.answerText(["m=audio 6000 RTP/AVP 0"]).utf8))
        let opus = try early2.receiveAnswer(bytes: Array(AnswerProcessingTests.answerText(["m=audio 7000 RTP/AVP 111", "a=rtpmap:111 opus/48000/2"]).utf8))
        #expect(pcmu.audio?.sendCodec.name == "PCMU")
        #expect(opus.audio?.sendCodec.name == "opus")
        #expect(early1.negotiated?.audio?.remoteRTPPort == 6000)
        #expect(early2.negotiated?.audio?.remoteRTPPort == 7000)
        #expect(caller.state == .localOfferPending)
    }

    @Test func glareAndRollback() throws {
        var alice = Local.engine(sessionID: 100)
        var bob = Local.engine([Local.audio(port: 50000)], address: "192.0.2.20", sessionID: 200)
        _ = try exchange(&alice, &bob)
        alice.setHold(true)
        let pending = try alice.makeOffer()
        #expect(pending.origin.sessionVersion == 101)
        #expect(throws: OfferAnswerError(.offerPending)) { try alice.makeOffer() }
        // Bob's re-INVITE crosses ours: 491.
        let bobOffer = try bob.makeOffer()
        let glare = try #require(throws: OfferAnswerError.self) { try alice.receiveOffer(bobOffer) }
        #expect(glare.statusCode == 491)
        // Our re-INVITE got 491 too: roll back, then the peer's offer is answered.
        alice.rollback()
        #expect(alice.state == .stable)
        let reply = try alice.receiveOffer(bobOffer)
        #expect(reply.sdp.media[0].direction == .sendonly)  // the hold intent still applies
        // The version keeps counting from the highest one sent.
        #expect(reply.sdp.origin.sessionVersion == 102)
        // Rolling back an answer not sent restores the previous session.
        let before = try #require(alice.negotiated)
        alice.setHold(false)
        _ = try alice.receiveOffer(bobOffer)
        alice.rollback()
        #expect(alice.negotiated == before)
        alice.rollback()  // nothing more to undo
        #expect(alice.negotiated == before)
    }

    @Test func reOfferKeepsPayloadTypesFromThePeersOffer() throws {
        let g726 = Codec(name: "G726-32", clockRate: 8000, payloadType: 97)
        var engine = Local.engine([Local.audio(codecs: [.opus, .pcmu, .pcma, g726, .telephoneEvent])])
        let offer = remoteOffer([
            "m=audio 5000 RTP/AVP 109 0 97 110", "a=rtpmap:109 opus/48000/2", "a=rtpmap:97 speex/16000",
            "a=rtpmap:110 telephone-event/8000", "a=fmtp:110 0-15",
            "m=video 5002 RTP/AVP 96", "a=rtpmap:96 VP8/90000",
        ])
        let reply = try answer(&engine, offer)
        #expect(reply.sdp.media[0].formats == ["109", "0", "110"])
        engine.setHold(true)
        let reoffer = try engine.makeOffer()
        #expect(reoffer.origin.sessionVersion == reply.sdp.origin.sessionVersion + 1)
        // The session's m-lines, in order; the declined video stays at port 0.
        #expect(reoffer.media.map(\.port) == [40000, 0])
        #expect(reoffer.media[1].media == .video)
        #expect(reoffer.media[1].formats == ["96"])
        // opus and telephone-event keep the peer's numbers; G726 avoids 97 (speex in the peer's offer).
        #expect(reoffer.media[0].formats == ["109", "0", "8", "96", "110"])
        #expect(reoffer.media[0].rtpmap(forPayloadType: 96)?.encodingName == "G726-32")
        #expect(reoffer.media[0].direction == .sendonly)

        // The peer answers the hold; later it re-offers with fewer m-lines: refused.
        let result = try engine.receiveAnswer(bytes: Array(remoteOffer([
            "m=audio 5000 RTP/AVP 109 110", "a=rtpmap:109 opus/48000/2", "a=rtpmap:110 telephone-event/8000", "a=recvonly",
            "m=video 0 RTP/AVP 96",
        ], version: 2).utf8))
        #expect(result.declined == [1])
        #expect(result.audio?.sends == true && result.audio?.receives == false)
        let shrunk = refusal(&engine, remoteOffer(["m=audio 5000 RTP/AVP 0"], version: 3))
        #expect(shrunk?.reason == .mediaLineCount(expected: 2, found: 1))
        #expect(shrunk?.warningCode == 399)
    }

    @Test func sessionWithoutMediaStaysWithoutMedia() throws {
        // Found by the fuzzer: an offer without m-lines, then our re-offer. RFC 3264 allows an
        // offer without media; our re-offers keep the session's m-lines, here none.
        var engine = Local.engine()
        let reply = try answer(&engine, remoteOffer([]))
        #expect(reply.sdp.media.isEmpty)
        #expect(reply.negotiated.media.isEmpty)
        let reoffer = try engine.makeOffer()
        #expect(reoffer.media.isEmpty)
        #expect(reoffer.origin.sessionVersion == reply.sdp.origin.sessionVersion)
    }

    @Test func answerToUnchangedReOfferKeepsItsVersion() throws {
        var engine = Local.engine(sessionID: 7)
        let offer = remoteOffer(["m=audio 5000 RTP/AVP 0 8"])
        let first = try answer(&engine, offer)
        let second = try answer(&engine, offer)
        #expect(first.sdp == second.sdp)
        #expect(second.sdp.origin.sessionVersion == 7)
        let changed = try answer(&engine, remoteOffer(["m=audio 5000 RTP/AVP 8"], version: 2))
        #expect(changed.sdp.origin.sessionVersion == 8)
        #expect(changed.sdp.media[0].formats == ["8"])
    }
}

@Suite("Offer/answer: RFC 2543 hold and robustness")
struct HoldAndRobustnessTests {
    @Test func unspecifiedAddressInAnswersAndReOffers() throws {
        // In an answer to our offer.
        var alice = Local.engine()
        _ = try alice.makeOffer()
        let result = try alice.receiveAnswer(bytes: Array(remoteOffer(["m=audio 6000 RTP/AVP 0"], connection: "IN IP4 0.0.0.0").utf8))
        let audio = try #require(result.audio)
        #expect(audio.isHeldByRemote)
        #expect(!audio.sends)
        #expect(audio.receives)
        // In a peer's re-offer mid-session (old-style hold), then its resume.
        var bob = Local.engine(sessionID: 30)
        let first = try answer(&bob, remoteOffer(["m=audio 5000 RTP/AVP 0 8"]))
        let hold = try answer(&bob, remoteOffer(["m=audio 5000 RTP/AVP 0 8"], connection: "IN IP4 0.0.0.0", version: 2))
        #expect(hold.sdp.media[0].direction == .recvonly)
        #expect(hold.sdp.media[0].formats == first.sdp.media[0].formats)
        #expect(hold.sdp.origin.sessionVersion == 31)
        #expect(hold.negotiated.audio?.isHeldByRemote == true)
        #expect(hold.negotiated.audio?.sends == false)
        let resume = try answer(&bob, remoteOffer(["m=audio 5000 RTP/AVP 0 8"], version: 3))
        #expect(resume.sdp.media[0].direction == .sendrecv)
        #expect(resume.sdp.origin.sessionVersion == 32)
        #expect(resume.negotiated.audio?.sends == true)
        // An empty telephone-event fmtp means the default events.
        var carol = Local.engine()
        let events = try answer(&carol, remoteOffer(["m=audio 5000 RTP/AVP 0 101", "a=rtpmap:101 telephone-event/8000", "a=fmtp:101 "]))
        #expect(events.sdp.media[0].fmtp(forPayloadType: 101)?.parameters == "0-15")
    }

    static let seeds: [String] = [
        remoteOffer([
            "m=audio 5000 RTP/SAVP 111 0 8 101 13", "a=rtpmap:111 opus/48000/2", "a=fmtp:111 stereo=1;useinbandfec=1",
            "a=rtpmap:101 telephone-event/8000", "a=fmtp:101 0-16", "a=rtpmap:13 CN/8000", "a=ptime:20", "a=sendonly",
            "a=rtcp:5001 IN IP4 198.51.100.8", "a=rtcp-mux",
            "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:\(Local.remoteKey)|2^20|1:4",
            "a=crypto:2 AES_CM_128_HMAC_SHA1_32 inline:\(Local.remoteKey2)",
            "m=video 5002 RTP/AVP 96", "a=rtpmap:96 VP8/90000", "a=recvonly",
        ]),
        remoteOffer(["m=audio 5000 RTP/AVP 0 8 9 18 101", "a=rtpmap:101 telephone-event/8000", "a=inactive"], connection: "IN IP4 0.0.0.0"),
    ]

    /// Seeded line-level mutations of offers (delete, duplicate, swap, renumber, rename); every
    /// result is answered within the RFC 3264 rules or refused with a typed error, as an offer and
    /// as an answer to our offer.
    @Test(arguments: 0..<2)
    func mutatedDescriptions(seedIndex: Int) throws {
        var random = TestRandom(seed: 0x0A_0000 + UInt64(seedIndex))
        let words = ["0", "8", "96", "101", "127", "200", "65535", "PCMU/8000", "opus/48000/2", "telephone-event/8000",
                     "RTP/SAVP", "RTP/AVP", "0.0.0.0", "IP6", "sendonly", "inactive", "::", "0-300", "2^99", ""]
        let base = Self.seeds[seedIndex].split(separator: "\r\n").map(String.init)
        var answered = 0, refused = 0, malformed = 0
        for _ in 0..<800 {
            var lines = base
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let i = Int.random(in: 0..<lines.count, using: &random)
                switch Int.random(in: 0..<5, using: &random) {
                case 0: if lines.count > 5 { lines.remove(at: i) }
                case 1: lines.insert(lines[i], at: i)
                case 2: lines.swapAt(i, Int.random(in: 0..<lines.count, using: &random))
                default:
                    var fields = lines[i].split(separator: " ", omittingEmptySubsequences: false).map(String.init)
                    let f = Int.random(in: 0..<fields.count, using: &random)
                    let word = words.randomElement(using: &random)!
                    fields[f] = f == 0 ? String(fields[f].prefix { $0 != ":" }) + (fields[f].contains(":") ? ":" + word : "") : word
                    lines[i] = fields.joined(separator: " ")
                }
            }
            let text = sdp(lines)
            var engine = Local.engine([Local.audio(codecs: [.opus, .pcmu, .pcma, .telephoneEvent], rtcpMux: true, srtp: .optional)])
            let outcome: Result<OfferAnswer.Answer, OfferAnswerError>
            do { outcome = .success(try engine.receiveOffer(bytes: Array(text.utf8))) } catch { outcome = .failure(error) }
            switch outcome {
            case .success(let reply):
                answered += 1
                let offer = try SessionDescription.parse(text)
                #expect(reply.sdp.media.count == offer.media.count)
                for (offered, answeredMedia) in zip(offer.media, reply.sdp.media) where !answeredMedia.isRejected {
                    #expect(Set(answeredMedia.formats).isSubset(of: Set(offered.formats)), "\(text)")
                    #expect(answeredMedia.cryptos.count <= 1)
                    #expect(answeredMedia.cryptos.allSatisfy { c in offered.cryptos.contains { $0.tag == c.tag && $0.suite == c.suite } })
                }
                #expect(try SessionDescription.parse(reply.sdp.serialized()) == reply.sdp)
            case .failure(let error):
                if case .malformed = error.reason {
                    malformed += 1
                    #expect((try? SessionDescription.parse(text)) == nil)
                } else {
                    refused += 1
                }
                #expect(error.statusCode == 488)
                #expect(engine.state == .initial)
            }
            // The same text as the answer to our offer: a result or a typed error, and a consistent state.
            var offerer = Local.engine([Local.audio(srtp: .optional)])
            _ = try offerer.makeOffer()
            do {
                _ = try offerer.receiveAnswer(bytes: Array(text.utf8))
                #expect(offerer.state == .stable)
            } catch {
                #expect(offerer.state == .initial)
            }
        }
        // The mutations reach every outcome.
        #expect(answered > 150 && refused > 15 && malformed > 300, "answered \(answered), refused \(refused), malformed \(malformed)")
    }
}
