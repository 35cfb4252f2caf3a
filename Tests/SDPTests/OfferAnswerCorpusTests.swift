#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import PacketCapture
import SDP
import SIPMessage
import SwitchboardTestSupport
import Testing

// Offers and answers written by real peers, read in place from ../shared/corpora:
// the SDP bodies of the SIP calls in the pcaps (FreeSWITCH, SEMS, MagicJack, Clarent,
// a SIP-DECT gateway, SIPp over TCP) and the SDP templates of SIPp's scenarios.

enum Corpus {
    static let pcapFolders = ["pcaps/wireshark-samplecaptures", "pcaps/sip-capture"]
    static var available: Bool { TestPaths.corporaHas("pcaps/wireshark-samplecaptures/sip-rtp-g711.pcap") }

    /// One SDP body from a capture.
    struct Body {
        var file: String
        var isRequest: Bool
        var method: String?
        var status: Int?
        var callID: String
        var bytes: [UInt8]
    }

    /// Every SIP message with an SDP body in the capture files, duplicates (retransmissions) removed;
    /// read once.
    static func bodies() throws -> [Body] { cached }

    private static let cached: [Body] = readBodies()

    private static func readBodies() -> [Body] {
        var result: [Body] = []
        var seen = Set<[UInt8]>()
        for folder in pcapFolders {
            let path = TestPaths.corpus(folder)
            for name in listFiles(path) {
                // c07-sip-r2.cap is NetMon, not pcap: the reader refuses it (tested in PacketCaptureTests).
                guard let reader = try? SIPCaptureReader(path: path + "/" + name) else { continue }
                while true {
                    let event: CaptureEvent?
                    do { event = try reader.next() } catch { break }
                    guard let event else { break }
                    guard case .message(let captured) = event else { continue }
                    let message = captured.message
                    let body = Array(message.body)
                    guard body.starts(with: Array("v=0".utf8)), !seen.contains(body) else { continue }
                    seen.insert(body)
                    result.append(Body(
                        file: name, isRequest: message.isRequest, method: message.method?.description,
                        status: message.statusCode, callID: String(decoding: message.callIDBytes ?? [], as: UTF8.self),
                        bytes: body))
                }
            }
        }
        return result
    }

    static func listFiles(_ path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
    }
}

/// Our capabilities for the corpus: a typical softphone.
func corpusEngine() -> OfferAnswer {
    Local.engine([Local.audio(codecs: [.opus, .g722, .pcmu, .pcma, .telephoneEvent])])
}

/// Checks the RFC 3264 section 6 invariants of `answer` to `offer`.
func checkAnswer(_ answer: SessionDescription, to offer: SessionDescription, _ label: String) throws {
    #expect(answer.media.count == offer.media.count, "\(label)")
    #expect(answer.timing == offer.timing, "\(label)")
    for (offered, answered) in zip(offer.media, answer.media) {
        #expect(answered.media == offered.media, "\(label)")
        #expect(answered.proto == offered.proto, "\(label)")
        guard !answered.isRejected else { continue }
        #expect(!offered.isRejected, "\(label): a port-0 stream must stay at port 0")
        #expect(Set(answered.formats).isSubset(of: Set(offered.formats)), "\(label): \(answered.formats) ⊄ \(offered.formats)")
        for pt in answered.payloadTypes {
            #expect(answered.rtpmap(forPayloadType: pt) == offered.codec(forPayloadType: pt), "\(label): rtpmap \(pt)")
        }
        let mirrored = offer.effectiveDirection(for: offered).reversed
        let unspecified = offer.connection(for: offered)?.isUnspecified ?? false
        if !unspecified {
            // Our intent is sendrecv: the answer is exactly the mirror.
            #expect(answered.direction == mirrored, "\(label)")
        }
    }
    // The answer survives the wire.
    #expect(try SessionDescription.parse(answer.serialized()) == answer, "\(label)")
}

@Suite(
    "Offer/answer: real peers' descriptions",
    .enabled(if: Corpus.available || TestPaths.isCI, "../shared/corpora is absent: corpus tests skipped"),
    .requiresCorpus("pcaps/wireshark-samplecaptures/sip-rtp-g711.pcap"))
struct OfferAnswerCorpusTests {
    @Test func everyCapturedDescriptionIsAnsweredOrRefusedWithAReason() throws {
        let bodies = try Corpus.bodies()
        // The captures hold at least this many distinct SDP bodies; fewer means the reading broke.
        #expect(bodies.count >= 25, "found \(bodies.count) SDP bodies")
        var answered = 0
        var refused: [String] = []
        for body in bodies {
            let label = "\(body.file) \(body.isRequest ? body.method ?? "?" : "\(body.status ?? 0)") \(body.callID)"
            let offer = try SessionDescription.parse(body.bytes)
            var engine = corpusEngine()
            let outcome: Result<OfferAnswer.Answer, OfferAnswerError>
            do { outcome = .success(try engine.receiveOffer(bytes: body.bytes)) } catch { outcome = .failure(error) }
            switch outcome {
            case .success(let reply):
                answered += 1
                try checkAnswer(reply.sdp, to: offer, label)
                #expect(engine.state == .stable)
                let audio = try #require(reply.negotiated.audio, "\(label)")
                #expect(reply.sdp.media[audio.index].formats.first == String(audio.receiveCodecs[0].payloadType))
            case .failure(let error):
                refused.append("\(label): \(error.reason)")
                #expect(error.statusCode == 488)
                #expect(error.warningHeaderValue() != nil)
                #expect(engine.state == .initial)
            }
        }
        // Every captured description shares PCMU or PCMA with us.
        #expect(answered == bodies.count, "refused: \(refused)")
    }

    @Test func capturedAnswersTakenAsAnswersToOurOffer() throws {
        // Our offer: opus 111, G722 9, PCMU 0, PCMA 8, telephone-event 101: every captured
        // response body read as the answer to it.
        var taken = 0
        for body in try Corpus.bodies() where !body.isRequest {
            var engine = corpusEngine()
            _ = try engine.makeOffer()
            let answer = try SessionDescription.parse(body.bytes)
            let outcome: Result<NegotiatedSession, OfferAnswerError>
            do { outcome = .success(try engine.receiveAnswer(answer)) } catch { outcome = .failure(error) }
            switch outcome {
            case .success(let result):
                taken += 1
                let audio = try #require(result.audio)
                // We send the first of their formats that we offered, under their number.
                let ours = Set(["opus", "g722", "pcmu", "pcma"])
                let first = answer.media[audio.index].payloadTypes.first {
                    answer.media[audio.index].codec(forPayloadType: $0).map { ours.contains($0.encodingName.lowercased()) } ?? false
                }
                #expect(audio.sendCodec.payloadType == first, "\(body.file)")
                #expect(audio.remoteAddress == answer.connection(for: answer.media[audio.index])?.address)
            case .failure(let error):
                // One m-line answers to our one m-line; the captures' two-stream bodies do not fit.
                #expect(error.reason == .mediaLineCount(expected: 1, found: answer.media.count), "\(body.file): \(error)")
            }
        }
        #expect(taken >= 10, "only \(taken) answers taken")
    }

    struct Expectation: Sendable, CustomTestStringConvertible {
        var file: String
        var request: Bool
        var port: UInt16
        /// Our answer's formats and direction per m-line ("" for declined).
        var formats: [String]
        var direction: MediaDirection
        var event: String?
        var testDescription: String { "\(file) \(port)" }
    }

    static let expectations: [Expectation] = [
        // FreeSWITCH test calls: recvonly offers from 10.0.2.20; FreeSWITCH answered sendonly.
        Expectation(file: "sip-rtp-opus-hybrid.pcap", request: true, port: 6000, formats: ["99"], direction: .sendonly),
        Expectation(file: "sip-rtp-g722.pcap", request: true, port: 6000, formats: ["9"], direction: .sendonly),
        // FreeSWITCH's own sendonly description, taken as an offer (as in a 200 after a delayed offer).
        Expectation(file: "sip-rtp-opus-hybrid.pcap", request: false, port: 24196, formats: ["99 101"], direction: .recvonly, event: "0-16"),
        // An iptel.org client: PCMA, telephone-event with events 32 and 36, NSE; theora/H.261 video declined.
        Expectation(file: "DTMFsipinfo.pcap", request: true, port: 5092, formats: ["8 101", ""], direction: .sendrecv, event: "0-16"),
        // MagicJack: PCMU, PCMA, telephone-event, CN (we have no CN).
        Expectation(file: "MagicJack-_short_call.pcap", request: true, port: 49154, formats: ["0 8 101"], direction: .sendrecv, event: "0-16"),
        // A SIP-DECT gateway's 200: PCMA first, G.729, telephone-event at 96.
        Expectation(file: "SIP_DTMF2.cap", request: false, port: 4376, formats: ["8 0 96"], direction: .sendrecv, event: "0-15"),
        // Clarent gateway: PCMA, G.729, G.723, PCMU; "a=SendRecv" is not a direction attribute.
        Expectation(file: "SIP_CALL_RTP_G711", request: true, port: 40376, formats: ["8 0"], direction: .sendrecv),
    ]

    @Test(arguments: expectations)
    func namedDescriptions(_ e: Expectation) throws {
        let body = try #require(try Corpus.bodies().first { body in
            guard body.file == e.file, body.isRequest == e.request,
                let sdp = try? SessionDescription.parse(body.bytes)
            else { return false }
            return sdp.media.first?.port == e.port
        }, "no body in \(e.file) with port \(e.port)")
        var engine = corpusEngine()
        let reply = try engine.receiveOffer(bytes: body.bytes)
        let formats = reply.sdp.media.map { $0.isRejected ? "" : $0.formats.joined(separator: " ") }
        #expect(formats == e.formats)
        #expect(reply.sdp.media[0].direction == e.direction)
        let audio = try #require(reply.negotiated.audio)
        if let event = e.event {
            let pt = try #require(audio.telephoneEvent?.payloadType)
            #expect(reply.sdp.media[0].fmtp(forPayloadType: pt)?.parameters == event)
        } else {
            #expect(audio.telephoneEvent == nil)
        }
    }

    @Test func ourAnswerAgreesWithFreeSWITCHs() throws {
        // Same offers FreeSWITCH answered in the captures: same codec and direction.
        var compared = 0
        let bodies = try Corpus.bodies()
        for offerBody in bodies where offerBody.isRequest && offerBody.file.hasPrefix("sip-rtp-") {
            guard let theirs = bodies.first(where: { $0.callID == offerBody.callID && $0.status == 200 }) else { continue }
            let freeswitch = try SessionDescription.parse(theirs.bytes)
            var engine = corpusEngine()
            let ours = try engine.receiveOffer(bytes: offerBody.bytes).sdp
            #expect(ours.media[0].formats.first == freeswitch.media[0].formats.first, "\(offerBody.file)")
            #expect(ours.media[0].direction == freeswitch.effectiveDirection(for: freeswitch.media[0]), "\(offerBody.file)")
            compared += 1
        }
        #expect(compared >= 4)
    }
}

// MARK: SIPp scenarios

enum SIPpScenario {
    /// The SDP body of the first `<send>` of `file` holding one, with SIPp's keywords replaced
    /// by concrete values (media on 127.0.0.1:6000, the two SDES keys of `Local`).
    static func body(_ file: String, occurrence: Int = 0) throws -> String {
        let path = TestPaths.corpus("sipp/" + file)
        let bytes = try #require(readBytes(path), "cannot read \(path)")
        let text = String(decoding: bytes, as: UTF8.self)
        var bodies: [String] = []
        var rest = Substring(text)
        while let start = rest.firstRange(of: "v=0") {
            let after = rest[start.lowerBound...]
            guard let end = after.firstRange(of: "]]>") else { break }
            bodies.append(String(after[..<end.lowerBound]))
            rest = after[end.upperBound...]
        }
        let raw = try #require(occurrence < bodies.count ? bodies[occurrence] : nil, "\(file) has no SDP body #\(occurrence)")
        let replacements = [
            "[local_ip_type]": "4", "[media_ip_type]": "4", "[local_ip]": "127.0.0.1", "[media_ip]": "127.0.0.1",
            "[media_port]": "6000", "[rtpstream_audio_port]": "6000", "[rtpstream_audio_port+1]": "6001",
            "[cryptotag1audio]": "1", "[cryptotag2audio]": "2",
            "[cryptosuiteaescm128sha1801audio]": "AES_CM_128_HMAC_SHA1_80",
            "[cryptosuiteaescm128sha1322audio]": "AES_CM_128_HMAC_SHA1_32",
            "[cryptokeyparams1audio]": Local.remoteKey, "[cryptokeyparams2audio]": Local.remoteKey2,
        ]
        var lines: [String] = []
        for line in raw.split(separator: "\n", omittingEmptySubsequences: false) {
            var trimmed = line.drop { $0 == " " || $0 == "\t" }
            while trimmed.last == "\r" || trimmed.last == " " { trimmed = trimmed.dropLast() }
            guard !trimmed.isEmpty else { continue }
            var value = String(trimmed)
            for (keyword, replacement) in replacements { value = value.replacingAll(keyword, with: replacement) }
            #expect(!value.contains("["), "unreplaced SIPp keyword in \(file): \(value)")
            lines.append(value)
        }
        return sdp(lines)
    }
}

extension String {
    fileprivate func replacingAll(_ target: String, with replacement: String) -> String {
        var result = ""
        var rest = Substring(self)
        while let range = rest.firstRange(of: target) {
            result += rest[..<range.lowerBound] + replacement
            rest = rest[range.upperBound...]
        }
        return result + rest
    }
}

@Suite(
    "Offer/answer: SIPp scenarios",
    .enabled(if: TestPaths.corporaHas("sipp/sipp-builtin/uac.xml") || TestPaths.isCI, "../shared/corpora is absent: SIPp scenario tests skipped"),
    .requiresCorpus("sipp/sipp-builtin/uac.xml"))
struct OfferAnswerSIPpTests {
    @Test func builtInUACOffer() throws {
        var engine = corpusEngine()
        let reply = try engine.receiveOffer(bytes: Array(try SIPpScenario.body("sipp-builtin/uac.xml").utf8))
        #expect(reply.sdp.media[0].formats == ["0"])
        let audio = try #require(reply.negotiated.audio)
        #expect((audio.remoteAddress, audio.remoteRTPPort) == ("127.0.0.1", 6000))
        #expect(audio.sendCodec.name == "PCMU")
    }

    @Test(arguments: [SRTPPolicy.off, .optional, .mandatory])
    func srtpUACOfferWithTwoSuites(policy: SRTPPolicy) throws {
        // RTP/AVP with two a=crypto lines (best-effort SDES), a=rtcp, G722/16000, telephone-event 0-11,16.
        let text = try SIPpScenario.body("sipp-srtp-auth/pfca_uac_apattern_crypto_simple.xml")
        var engine = Local.engine([Local.audio(codecs: [.g722, .pcmu, .pcma, .telephoneEvent], srtp: policy, keys: [Local.key32, Local.key80])])
        let reply = try engine.receiveOffer(bytes: Array(text.utf8))
        let media = reply.sdp.media[0]
        #expect(media.proto == .rtpAVP)
        // Offer order 0 18 9 103 8 101: PCMU, (G729), G722 (written as 16000), (G7221), PCMA, telephone-event.
        #expect(media.formats == ["0", "9", "8", "101"])
        #expect(media.fmtp(forPayloadType: 101)?.parameters == "0-11,16")
        let audio = try #require(reply.negotiated.audio)
        #expect((audio.remoteRTCPAddress, audio.remoteRTCPPort) == ("127.0.0.1", 6001))
        if policy == .off {
            #expect(media.cryptos.isEmpty)
            #expect(audio.srtp == nil)
        } else {
            // The offer's first line (tag 1, _80) is acceptable: chosen over our preferred _32.
            #expect(media.attributes(named: "crypto").map(\.value) == ["1 AES_CM_128_HMAC_SHA1_80 inline:\(Local.inline80)"])
            #expect(audio.srtp?.remoteKeys.map(\.keySalt) == [Local.remoteKey])
        }
    }

    @Test func srtpUASAnswerToOurOffer() throws {
        // The UAS scenario's 200 OK body, as the answer to our best-effort SRTP offer.
        let text = try SIPpScenario.body("sipp-srtp-auth/pfca_uas_audio_crypto_simple.xml")
        var engine = Local.engine([Local.audio(codecs: [.pcmu, .g722, .pcma, .telephoneEvent], srtp: .optional)])
        let offer = try engine.makeOffer()
        #expect(offer.media[0].cryptos.map(\.tag) == [1, 2])
        let result = try engine.receiveAnswer(bytes: Array(text.utf8))
        let audio = try #require(result.audio)
        #expect(audio.sendCodec.name == "PCMU")
        #expect(audio.telephoneEvent?.parameters == "0-11,16")
        #expect(audio.srtp?.tag == 1)
        #expect(audio.srtp?.suite == .aesCM128HMACSHA1_80)
        #expect(audio.srtp?.localKeys.map(\.keySalt) == [Local.inline80])
    }
}

@Suite("Offer/answer: the project's own fixtures")
struct OfferAnswerFixtureTests {
    @Test func baresipSRTPOffer() throws {
        let bytes = try Fixtures.bytes("baresip-opus-srtp-offer.sdp")
        var optional = Local.engine([Local.audio(srtp: .optional)])
        let reply = try optional.receiveOffer(bytes: bytes)
        let audio = try #require(reply.negotiated.audio)
        #expect(reply.sdp.media[0].proto == .rtpSAVP)
        #expect(reply.sdp.media[0].formats == ["111", "0", "8", "101"])
        #expect(audio.sendCodec.name == "opus")
        #expect(OpusParameters(audio.sendCodec.parameters).stereo)
        #expect(audio.srtp?.tag == 1)
        #expect(audio.srtp?.remoteKeys.first?.mki == CryptoAttribute.MKI(value: 1, length: 4))
        #expect(reply.sdp.media[0].fmtp(forPayloadType: 101)?.parameters == "0-15")
        var plain = Local.engine()
        #expect(throws: OfferAnswerError(.srtpNotSupported(media: 0))) { try plain.receiveOffer(bytes: bytes) }
    }

    @Test func linphoneOfferWithVideo() throws {
        var engine = Local.engine([Local.audio(codecs: [.opus, .pcmu, .telephoneEvent, Codec(name: "telephone-event", clockRate: 48000, payloadType: 102, parameters: "0-16")])])
        let reply = try engine.receiveOffer(bytes: try Fixtures.bytes("linphone-offer.sdp"))
        #expect(reply.sdp.media.map(\.port) == [40000, 0])
        #expect(reply.sdp.media[0].formats == ["96", "0", "101", "100"])
        #expect(reply.negotiated.audio?.telephoneEvent?.payloadType == 101)
        #expect(reply.negotiated.declined == [1])
    }
}
