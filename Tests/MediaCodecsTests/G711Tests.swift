import SDP
import SwitchboardTestSupport
import Testing

@testable import MediaCodecs

@Suite struct G711Tests {
    @Test func everyCodeRoundTripsThroughDecodeAndEncode() {
        for code in 0...255 {
            let c = UInt8(code)
            // µ-law has two zeros: 0xFF (+0) and 0x7F (−0); both decode to 0, which encodes as +0.
            let expected: UInt8 = c == 0x7F ? 0xFF : c
            #expect(G711.muLawEncode(G711.muLawDecode(c)) == expected, "µ-law code \(code)")
            #expect(G711.aLawEncode(G711.aLawDecode(c)) == c, "A-law code \(code)")
        }
    }

    @Test func decodedValuesAreTheG711Reconstruction() {
        // µ-law: 0x00 is the most negative, 0x80 the most positive, 0xFF and 0x7F zero.
        #expect(G711.muLawDecode(0x80) == 32124)
        #expect(G711.muLawDecode(0x00) == -32124)
        #expect(G711.muLawDecode(0xFF) == 0)
        #expect(G711.muLawDecode(0x7F) == 0)
        #expect(G711.muLawDecode(0xFE) == 8)  // first step of segment 0: 2 units of 14 bits
        // A-law: 0xD5 and 0x55 are the smallest magnitudes (±8), 0xAA/0x2A the largest.
        #expect(G711.aLawDecode(0xD5) == 8)
        #expect(G711.aLawDecode(0x55) == -8)
        #expect(G711.aLawDecode(0xAA) == 32256)
        #expect(G711.aLawDecode(0x2A) == -32256)
        // The decoders are odd functions apart from µ-law's bias.
        for code in 0..<128 {
            #expect(G711.muLawDecode(UInt8(code)) == -G711.muLawDecode(UInt8(code) | 0x80))
            #expect(G711.aLawDecode(UInt8(code)) == -G711.aLawDecode(UInt8(code) | 0x80))
        }
    }

    @Test func segmentBoundaries() {
        // µ-law segment s (positive) starts where the 14-bit magnitude plus the bias 33 reaches
        // 32 << s; in 16-bit units times 4. One sample below it is still in segment s − 1, step 15.
        for segment in 1..<8 {
            let start = Int16(((32 << segment) - 33) * 4)
            let code = ~G711.muLawEncode(start)
            #expect(Int((code >> 4) & 7) == segment && code & 0x0F == 0, "µ-law segment \(segment) start")
            let below = ~G711.muLawEncode(start - 4)
            #expect(Int((below >> 4) & 7) == segment - 1 && below & 0x0F == 0x0F, "µ-law below segment \(segment)")
        }
        // A-law: segment s ≥ 1 starts at 13-bit magnitude 16 << s (times 8 in 16-bit units).
        for segment in 1..<8 {
            let start = Int16((16 << segment) * 8)
            let code = G711.aLawEncode(start) ^ 0xD5
            #expect(Int((code >> 4) & 7) == segment && code & 0x0F == 0, "A-law segment \(segment) start")
            let below = G711.aLawEncode(start - 8) ^ 0xD5
            #expect(Int((below >> 4) & 7) == segment - 1 && below & 0x0F == 0x0F, "A-law below segment \(segment)")
        }
        // Saturation.
        #expect(G711.muLawEncode(.max) == 0x80 && G711.muLawEncode(.min) == 0x00)
        #expect(G711.aLawEncode(.max) == 0xAA && G711.aLawEncode(.min) == 0x2A)
    }

    @Test func encodingIsMonotonicAndWithinHalfAStep() {
        var previousMu = Int(G711.muLawDecode(G711.muLawEncode(.min)))
        var previousA = Int(G711.aLawDecode(G711.aLawEncode(.min)))
        for s in Int(Int16.min)...Int(Int16.max) {
            let sample = Int16(s)
            let mu = Int(G711.muLawDecode(G711.muLawEncode(sample)))
            let a = Int(G711.aLawDecode(G711.aLawEncode(sample)))
            #expect(mu >= previousMu && a >= previousA)
            previousMu = mu
            previousA = a
            // Quantization error: at most one step of the segment (the step doubles per segment;
            // 16-bit step sizes reach 1024), and small values come back almost exact.
            if abs(s) < 30000 {
                #expect(abs(mu - s) <= max(8, abs(s) / 16 + 8))
                #expect(abs(a - s) <= max(16, abs(s) / 16 + 16))
            }
        }
    }

    /// The buffer encoder (table lookups) agrees with the per-sample rule on all 65,536 inputs.
    @Test(arguments: [G711.Law.muLaw, .aLaw])
    func bufferEncodingMatchesThePerSampleRule(law: G711.Law) {
        let pcm = (Int(Int16.min)...Int(Int16.max)).map { Int16($0) }
        var codes = [UInt8](repeating: 0, count: pcm.count)
        let n = pcm.withUnsafeBufferPointer { p in codes.withUnsafeMutableBytes { G711.encode(law, p, into: $0) } }
        #expect(n == pcm.count)
        let expected = pcm.map { law == .muLaw ? G711.muLawEncode($0) : G711.aLawEncode($0) }
        let mismatches = zip(pcm, zip(codes, expected)).filter { $0.1.0 != $0.1.1 }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
    }

    @Test func codecObjects() throws {
        var encoder = try G711Encoder(law: .aLaw)
        var decoder = try G711Decoder(law: .aLaw)
        #expect(encoder.samplesPerFrame == 160 && encoder.rtpTimestampIncrement == 160)
        #expect(encoder.frameMilliseconds == 20)
        let pcm = Signals.tone(440, sampleRate: 8000, count: 160)
        let payload = try encoder.encode(pcm)
        #expect(payload.count == 160)
        let decoded = try decoder.decode(payload)
        #expect(decoded.count == 160)
        for (x, y) in zip(pcm, decoded) { #expect(abs(Int(x) - Int(y)) <= 256) }
        #expect(throws: AudioCodecError.self) { try G711Encoder(law: .muLaw, frameMilliseconds: 0) }
        // Encoder and decoder take the same frame durations: 1 to 120 ms, 8 samples each.
        for ms in [0, -20, 121] {
            let refusal = AudioCodecError.invalidConfiguration("G.711 frame of \(ms) ms (1 to 120 allowed)")
            #expect(throws: refusal) { try G711Encoder(law: .aLaw, frameMilliseconds: ms) }
            #expect(throws: refusal) { try G711Decoder(law: .aLaw, frameMilliseconds: ms) }
        }
        #expect(try G711Encoder(law: .aLaw, frameMilliseconds: 1).samplesPerFrame == 8)
        #expect(try G711Decoder(law: .muLaw, frameMilliseconds: 120).samplesPerFrame == 960)
        #expect(throws: AudioCodecError.bufferTooSmall(needed: 160, available: 10)) {
            var small = [UInt8](repeating: 0, count: 10)
            _ = try pcm.withUnsafeBufferPointer { p in try small.withUnsafeMutableBytes { try encoder.encode(p, into: $0) } }
        }
    }

    @Test func concealmentRepeatsThenFadesToSilence() throws {
        var decoder = try G711Decoder(law: .muLaw)
        let pcm = Signals.tone(200, sampleRate: 8000, count: 160)
        var encoder = try G711Encoder(law: .muLaw)
        _ = try decoder.decode(try encoder.encode(pcm))
        let first = try decoder.concealLoss(samplesPerChannel: 160)
        #expect(first.count == 160)
        // The first lost frame is the last 10 ms period repeated, fading: loud at the start.
        let energyStart = first[0..<40].map { abs(Int($0)) }.reduce(0, +)
        let energyEnd = first[120..<160].map { abs(Int($0)) }.reduce(0, +)
        #expect(energyStart > 40 * 2000 && energyEnd < energyStart)
        _ = try decoder.concealLoss(samplesPerChannel: 160)
        let third = try decoder.concealLoss(samplesPerChannel: 160)
        let energyThird = third.map { abs(Int($0)) }.reduce(0, +)
        #expect(energyThird > 0 && energyThird < energyEnd * 4)
        let fourth = try decoder.concealLoss(samplesPerChannel: 160)
        #expect(fourth.allSatisfy { $0 == 0 }, "silence after 60 ms")
        #expect(decoder.concealer.concealedSamples == 640)
        _ = try decoder.decode(try encoder.encode(pcm))
        #expect(decoder.concealer.concealedSamples == 0)
    }

    @Test func sdpMapping() {
        #expect(AudioCodecDescription(payloadType: 0, rtpMaps: []) == .pcmu)
        #expect(AudioCodecDescription(payloadType: 8, rtpMaps: []) == .pcma)
        #expect(AudioCodecDescription(payloadType: 18, rtpMaps: []) == nil)
        let opusMap = RTPMap(payloadType: 111, encodingName: "OPUS", clockRate: 48000, channels: 2)
        #expect(AudioCodecDescription(payloadType: 111, rtpMaps: [opusMap]) == .opus)
        #expect(AudioCodecDescription(payloadType: 111, rtpMaps: []) == nil)
        #expect(AudioCodecDescription(rtpMap: RTPMap(payloadType: 111, encodingName: "opus", clockRate: 48000)) == nil)
        #expect(AudioCodecDescription.opus.rtpMap(payloadType: 96)?.attributeValue == "96 opus/48000/2")
        #expect(AudioCodecDescription.pcmu.rtpMap()?.attributeValue == "0 PCMU/8000")
        #expect(AudioCodecDescription.opus.rtpMap() == nil)
    }
}

/// Python's `audioop` (the classic Sun/CCITT reference code in C) on every 16-bit input.
@Suite(
    .enabled(
        if: PythonOracle.available(["audioop"]) || TestPaths.isCI,
        "the Python venv (scripts/py-oracles) is missing: audioop comparison skipped"),
    .requires("the Python oracle audioop (scripts/py-oracles)", { PythonOracle.available(["audioop"]) }))
struct G711AudioopTests {
    @Test func everySampleEncodesAsAudioopDoesAndEveryCodeDecodesAsAudioopDoes() throws {
        var input: [UInt8] = []
        for s in Int(Int16.min)...Int(Int16.max) {
            let v = UInt16(bitPattern: Int16(s))
            input.append(UInt8(v & 0xFF))
            input.append(UInt8(v >> 8))
        }
        let script = """
            import sys, audioop
            pcm = open(sys.argv[1], 'rb').read()
            codes = bytes(range(256))
            out = audioop.lin2ulaw(pcm, 2) + audioop.lin2alaw(pcm, 2) + audioop.ulaw2lin(codes, 2) + audioop.alaw2lin(codes, 2)
            open(sys.argv[2], 'wb').write(out)
            """
        let out = try PythonOracle.run(script, input: input)
        try #require(out.count == 65536 * 2 + 512 * 2)
        var muMismatches = 0, aMismatches = 0
        for i in 0..<65536 {
            let sample = Int16(Int(Int16.min) + i)
            if G711.muLawEncode(sample) != out[i] { muMismatches += 1 }
            if G711.aLawEncode(sample) != out[65536 + i] { aMismatches += 1 }
        }
        #expect(muMismatches == 0)
        #expect(aMismatches == 0)
        for code in 0..<256 {
            let mu = Int16(bitPattern: UInt16(out[131072 + 2 * code]) | UInt16(out[131072 + 2 * code + 1]) << 8)
            let a = Int16(bitPattern: UInt16(out[131584 + 2 * code]) | UInt16(out[131584 + 2 * code + 1]) << 8)
            #expect(G711.muLawDecode(UInt8(code)) == mu, "µ-law decode \(code)")
            #expect(G711.aLawDecode(UInt8(code)) == a, "A-law decode \(code)")
        }
    }
}
