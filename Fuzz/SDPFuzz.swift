// libFuzzer entry point for the SDP parser and the offer/answer engine: parse, serialize,
// re-parse; then answer the description as an offer and take it as the answer to our offer.
// Compiled together with Sources/SDP by scripts/fuzz.
let fuzzCapabilities = MediaCapabilities(address: "192.0.2.10", streams: [
    StreamCapabilities(
        mediaType: .audio, port: 40000, codecs: [.opus, .pcmu, .pcma, .telephoneEvent], ptime: 20, rtcpMux: true,
        srtp: SRTPCapabilities(policy: .optional, keys: [
            SRTPKey(suite: .aesCM128HMACSHA1_80, keySaltBytes: Array(repeating: 0xA1, count: 30)),
        ])),
    StreamCapabilities(mediaType: .video, port: 40002, codecs: [Codec(name: "H264", clockRate: 90000, payloadType: 96)]),
])

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSDP(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let s = try? SessionDescription.parse(bytes) else { return 0 }
    let out = s.serialized()
    guard let again = try? SessionDescription.parse(out) else { fatalError("serialized SDP does not parse") }
    guard again == s else { fatalError("parse ∘ serialize is not a fixed point") }

    var answerer = OfferAnswer(capabilities: fuzzCapabilities, sessionID: 1)
    if let reply = try? answerer.receiveOffer(s) {
        guard reply.sdp.media.count == s.media.count else { fatalError("answer has another m-line count") }
        guard (try? SessionDescription.parse(reply.sdp.serialized())) == reply.sdp else { fatalError("answer does not re-parse") }
        for (offered, answered) in zip(s.media, reply.sdp.media) where !answered.isRejected {
            // Compared as numbers: an offered "08" is payload type 8, answered as "8".
            guard Set(answered.payloadTypes).isSubset(of: Set(offered.payloadTypes)) else { fatalError("answer format not offered") }
        }
        // A re-offer from the answerer must be valid too.
        if let reoffer = try? answerer.makeOffer() {
            guard reoffer.media.count == s.media.count else { fatalError("re-offer changed the m-line count") }
        }
    }
    var offerer = OfferAnswer(capabilities: fuzzCapabilities, sessionID: 2)
    _ = try? offerer.makeOffer()
    _ = try? offerer.receiveAnswer(s)
    return 0
}
