import SDP
import SwitchboardTestSupport
import Testing

@testable import MediaCodecs

@Suite struct OpusParametersTests {
    @Test func parsesAndSerializesEveryRFC7587Parameter() throws {
        let text = "maxplaybackrate=16000;sprop-maxcapturerate=16000;maxptime=40;ptime=20;minptime=10;maxaveragebitrate=20000;stereo=1;sprop-stereo=0;cbr=1;useinbandfec=1;usedtx=1;x-custom=abc"
        let p = try OpusParameters(fmtp: text)
        #expect(p.maxPlaybackRate == 16000 && p.spropMaxCaptureRate == 16000)
        #expect(p.maxptime == 40 && p.ptime == 20 && p.minptime == 10)
        #expect(p.maxAverageBitrate == 20000)
        #expect(p.stereo == true && p.spropStereo == false && p.cbr == true)
        #expect(p.useInbandFEC == true && p.useDTX == true)
        #expect(p.otherParameters == [FormatParameters.Parameter(name: "x-custom", value: "abc")])
        #expect(p.fmtpParameters == text)
        #expect(try OpusParameters(fmtp: p.fmtpParameters) == p)
        // Through the SDP attribute, with white space and upper case.
        let fmtp = try #require(FormatParameters(attributeValue: "111 minptime=10; UseInbandFEC=1"))
        let q = try OpusParameters(fmtp)
        #expect(q.minptime == 10 && q.useInbandFEC == true)
        #expect(q.formatParameters(payloadType: 111).attributeValue == "111 minptime=10;useinbandfec=1")
        #expect(try OpusParameters(fmtp: "").fmtpParameters == "")
    }

    @Test func rejectsValuesOutsideTheRFC() {
        for bad in ["useinbandfec=2", "stereo=yes", "maxplaybackrate=4000", "maxplaybackrate=96000", "maxaveragebitrate=1",
                    "ptime=0", "maxptime=121", "cbr", "usedtx=", "maxaveragebitrate=-6000", "maxplaybackrate=99999999999999"] {
            #expect(throws: OpusParameterError.self, "\(bad)") { try OpusParameters(fmtp: bad) }
        }
        do {
            _ = try OpusParameters(fmtp: "minptime=10;useinbandfec=2")
            Issue.record("accepted useinbandfec=2")
        } catch {
            #expect(error.parameter == "useinbandfec" && error.value == "2" && error.rule == "0 or 1")
        }
    }

    @Test func encoderSettingsFollowThePeersFmtp() throws {
        // No fmtp from the peer: our base settings, a stereo source sent as mono.
        let stereoBase = OpusEncoder.Configuration(channels: 2)
        let plain = OpusParameters().encoderConfiguration(base: stereoBase)
        #expect(plain.forceMono && !plain.inbandFEC && plain.variableBitrate && plain.frameDuration == .ms20)
        #expect(plain.bitrate == nil && plain.maxBandwidth == nil)

        let peer = try OpusParameters(fmtp: "maxplaybackrate=16000;maxaveragebitrate=20000;stereo=1;cbr=1;useinbandfec=1;usedtx=1;ptime=40;maxptime=60")
        let c = OpusParameters().encoderConfiguration(for: peer, base: stereoBase)
        #expect(c.maxBandwidth == .wideband)
        #expect(c.bitrate == 20000)
        #expect(!c.forceMono)
        #expect(!c.variableBitrate)
        #expect(c.inbandFEC && c.expectedPacketLossPercent == 10)
        #expect(c.discontinuousTransmission)
        #expect(c.frameDuration == .ms40)
        // A lower bitrate of our own stays; maxptime bounds ptime; a narrower rate narrows.
        let d = try OpusParameters(fmtp: "maxplaybackrate=8000;maxaveragebitrate=64000;ptime=60;maxptime=20;useinbandfec=0")
            .encoderConfiguration(base: OpusEncoder.Configuration(bitrate: 24000, inbandFEC: true))
        #expect(d.maxBandwidth == .narrowband && d.bitrate == 24000 && d.frameDuration == .ms20 && !d.inbandFEC)
        // minptime lengthens a too-short frame.
        let e = try OpusParameters(fmtp: "minptime=30").encoderConfiguration(base: OpusEncoder.Configuration(frameDuration: .ms10))
        #expect(e.frameDuration == .ms40)
        #expect(OpusBandwidth(maxPlaybackRate: 12000) == .mediumband && OpusBandwidth(maxPlaybackRate: 24000) == .superWideband)
        #expect(OpusParameters.decoderChannels(for: try OpusParameters(fmtp: "sprop-stereo=1")) == 2)
        #expect(OpusParameters.decoderChannels(for: OpusParameters()) == 1)
        #expect(OpusParameters.forReceiving(sampleRate: 16000, channels: 2).fmtpParameters == "maxplaybackrate=16000;stereo=1;sprop-stereo=1;useinbandfec=1")
        // The derived settings are accepted by libopus.
        _ = try OpusEncoder(c)
        _ = try OpusEncoder(d)
    }
}

@Suite struct OpusCodecTests {
    @Test func toneSurvivesEncodeAndDecode() throws {
        let encoder = try OpusEncoder(.init(bitrate: 48000, complexity: 10))
        let decoder = try OpusDecoder()
        #expect(encoder.samplesPerFrame == 960 && encoder.rtpTimestampIncrement == 960)
        let input = Signals.tone(440, sampleRate: 48000, count: 48000)
        var output: [Int16] = []
        for frame in 0..<50 {
            let payload = try encoder.encode(Array(input[frame * 960..<(frame + 1) * 960]))
            #expect(payload.count > 10 && payload.count <= 1275)
            #expect(Opus.samplesPerChannel(inPacket: payload) == 960)
            output += try decoder.decode(payload)
        }
        #expect(output.count == 48000)
        #expect(decoder.lastPacketDuration == 960)
        // The decoder's output lags the input by the encoder's lookahead (6.5 ms at 48 kHz).
        #expect(encoder.lookahead == 312)
        let snr = Signals.snr(reference: Array(input[0..<40000]), test: output, lags: 312...312).snr
        #expect(snr > 10, "SNR \(snr) dB")
        #expect(Signals.snr(reference: Array(input[0..<40000]), test: output, lags: 0...0).snr < 0, "misaligned")
        let at440 = Signals.goertzel(Array(output[4800...]), frequency: 440, sampleRate: 48000)
        let at1000 = Signals.goertzel(Array(output[4800...]), frequency: 1000, sampleRate: 48000)
        #expect(at440 > 1000 * at1000)
    }

    @Test func stereoAndOtherRates() throws {
        let encoder = try OpusEncoder(.init(sampleRate: 16000, channels: 2, frameDuration: .ms10))
        let decoder = try OpusDecoder(sampleRate: 16000, channels: 2)
        #expect(encoder.samplesPerFrame == 160 && encoder.rtpTimestampIncrement == 480)
        let input = Signals.tone(300, sampleRate: 16000, count: 160, channels: 2)
        let payload = try encoder.encode(input)
        #expect(Opus.channels(inPacket: payload) == 2)
        #expect(Opus.samplesPerChannel(inPacket: payload, sampleRate: 16000) == 160)
        #expect(try decoder.decode(payload).count == 320)
        // A mono decoder accepts the stereo packet (down-mix).
        #expect(try OpusDecoder(sampleRate: 48000, channels: 1).decode(payload).count == 480)
    }

    @Test func typedErrors() throws {
        #expect(throws: AudioCodecError.self) { try OpusEncoder(.init(sampleRate: 44100)) }
        #expect(throws: AudioCodecError.self) { try OpusEncoder(.init(channels: 3)) }
        #expect(throws: AudioCodecError.self) { try OpusEncoder(.init(bitrate: 100)) }
        #expect(throws: AudioCodecError.self) { try OpusDecoder(sampleRate: 11025) }
        let encoder = try OpusEncoder()
        #expect(throws: AudioCodecError.self) { try encoder.encode([Int16](repeating: 0, count: 100)) }
        let decoder = try OpusDecoder()
        // Code 3 (arbitrary frame count) with a count of 0 frames: invalid (RFC 6716 §3.2.5).
        do {
            _ = try decoder.decode([0x03, 0x00])
            Issue.record("decoded an invalid packet")
        } catch {
            guard case .opus(let operation, let code, _) = error else { Issue.record("wrong error \(error)"); return }
            #expect(operation == "opus_decode" && code == -4)
        }
        // A reconfiguration that would change the rate is refused; others apply.
        #expect(throws: AudioCodecError.self) { try encoder.reconfigure(.init(sampleRate: 16000)) }
        try encoder.reconfigure(.init(frameDuration: .ms40, bitrate: 16000))
        #expect(encoder.samplesPerFrame == 1920 && encoder.currentBitrate == 16000)
    }

    @Test func encoderAndDecoderRefuseTheSameFormats() throws {
        for (rate, channels) in [(44100, 1), (11025, 2), (48000, 0), (16000, 3)] {
            var encoderError: AudioCodecError?
            do { _ = try OpusEncoder(.init(sampleRate: rate, channels: channels)) } catch { encoderError = error }
            var decoderError: AudioCodecError?
            do { _ = try OpusDecoder(sampleRate: rate, channels: channels) } catch { decoderError = error }
            #expect(encoderError != nil && encoderError == decoderError, "\(rate) Hz × \(channels)")
            guard case .invalidConfiguration = decoderError else { Issue.record("not a configuration error"); continue }
        }
        for rate in Opus.sampleRates.sorted() {
            _ = try OpusEncoder(.init(sampleRate: rate, channels: 2))
            _ = try OpusDecoder(sampleRate: rate, channels: 2)
        }
    }

    @Test func fecAndConcealmentNeedRoomForTheWholeFrame() throws {
        let decoder = try OpusDecoder(sampleRate: 48000, channels: 2)
        var pcm = [Int16](repeating: 0, count: 2 * 480 - 1)
        pcm.withUnsafeMutableBufferPointer { out in
            #expect(throws: AudioCodecError.bufferTooSmall(needed: 960, available: 959)) {
                try decoder.concealLoss(samplesPerChannel: 480, into: out)
            }
            #expect(throws: AudioCodecError.bufferTooSmall(needed: 960, available: 959)) {
                try [UInt8]().withUnsafeBytes { try decoder.decodeFEC(from: $0, samplesPerChannel: 480, into: out) }
            }
            // No samples asked for: the frame size itself is refused, as before.
            #expect(throws: AudioCodecError.bufferTooSmall(needed: 2, available: 959)) {
                try decoder.concealLoss(samplesPerChannel: 0, into: out)
            }
            // Room for the whole frame is enough.
            #expect((try? decoder.concealLoss(samplesPerChannel: 240, into: out)) == 240)
        }
    }

    /// One lost packet: its in-band FEC copy, decoded from the next packet, is closer to what
    /// the lost packet itself would have given than plain concealment is.
    @Test func fecRecoversALostPacketBetterThanConcealment() throws {
        let config = OpusEncoder.Configuration(
            bitrate: 24000, inbandFEC: true, expectedPacketLossPercent: 20, complexity: 10, signal: .voice)
        let encoder = try OpusEncoder(config)
        let input = Signals.speechLike(sampleRate: 48000, count: 960 * 60)
        var packets: [[UInt8]] = []
        for frame in 0..<60 { packets.append(try encoder.encode(Array(input[frame * 960..<(frame + 1) * 960]))) }
        let lost = 40
        let reference = try OpusDecoder(), withFEC = try OpusDecoder(), withPLC = try OpusDecoder()
        var refFrame: [Int16] = [], fecFrame: [Int16] = [], plcFrame: [Int16] = []
        for (i, packet) in packets.enumerated() {
            let r = try reference.decode(packet)
            if i == lost {
                refFrame = r
                plcFrame = try withPLC.concealLoss(samplesPerChannel: 960)
                fecFrame = try withFEC.decodeFEC(from: packets[i + 1], samplesPerChannel: 960)
            } else {
                _ = try withPLC.decode(packet)
                _ = try withFEC.decode(packet)
            }
        }
        #expect(fecFrame.count == 960 && plcFrame.count == 960)
        #expect(fecFrame != plcFrame, "the next packet carried FEC data")
        let fecSNR = Signals.snr(reference: refFrame, test: fecFrame).snr
        let plcSNR = Signals.snr(reference: refFrame, test: plcFrame).snr
        #expect(fecSNR > plcSNR + 3, "FEC \(fecSNR) dB, PLC \(plcSNR) dB")
        #expect(fecSNR > 5)
    }
}

/// opuslib (libopus through ctypes) on the same input and settings.
@Suite(
    .enabled(
        if: PythonOracle.available(["opuslib"]) || TestPaths.isCI,
        "the Python venv (scripts/py-oracles) is missing: opuslib comparison skipped"),
    .requires("the Python oracle opuslib (scripts/py-oracles)", { PythonOracle.available(["opuslib"]) }))
struct OpusOpuslibTests {
    @Test func sameSettingsGiveTheSamePacketsAndTheSameAudio() throws {
        let frames = 50
        let input = Signals.speechLike(sampleRate: 48000, count: 960 * frames)
        let encoder = try OpusEncoder(.init(bitrate: 32000, inbandFEC: true, expectedPacketLossPercent: 10, complexity: 10))
        var ours: [[UInt8]] = []
        for f in 0..<frames { ours.append(try encoder.encode(Array(input[f * 960..<(f + 1) * 960]))) }

        // Input file: the PCM, then our packets, each with a 2-byte length.
        var blob: [UInt8] = []
        for s in input { blob += [UInt8(UInt16(bitPattern: s) & 0xFF), UInt8(UInt16(bitPattern: s) >> 8)] }
        for p in ours { blob += [UInt8(p.count >> 8), UInt8(p.count & 0xFF)] + p }
        let script = """
            import sys, struct, opuslib
            data = open(sys.argv[1], 'rb').read()
            frames, n = \(frames), 960
            pcm, rest = data[:frames * n * 2], data[frames * n * 2:]
            enc = opuslib.Encoder(48000, 1, 'voip')
            # opuslib's property setters are partly broken (inband_fec drops its value): call the ctls.
            ctl, api = opuslib.api.ctl, opuslib.api.encoder
            api.encoder_ctl(enc.encoder_state, ctl.set_bitrate, 32000)
            api.encoder_ctl(enc.encoder_state, ctl.set_complexity, 10)
            api.encoder_ctl(enc.encoder_state, ctl.set_inband_fec, 1)
            api.encoder_ctl(enc.encoder_state, ctl.set_packet_loss_perc, 10)
            assert api.encoder_ctl(enc.encoder_state, ctl.get_inband_fec) == 1
            theirs = [enc.encode(pcm[i * n * 2:(i + 1) * n * 2], n) for i in range(frames)]
            ours, i = [], 0
            while i < len(rest):
                l = struct.unpack('>H', rest[i:i + 2])[0]; ours.append(rest[i + 2:i + 2 + l]); i += 2 + l
            dec = opuslib.Decoder(48000, 1)
            decoded = b''.join(dec.decode(p, n) for p in ours)
            out = b''.join(struct.pack('>H', len(p)) + p for p in theirs)
            open(sys.argv[2], 'wb').write(struct.pack('>I', len(out)) + out + decoded)
            """
        let out = try PythonOracle.run(script, input: blob)
        try #require(out.count >= 4)
        let packetBytes = Int(out[0]) << 24 | Int(out[1]) << 16 | Int(out[2]) << 8 | Int(out[3])
        var theirs: [[UInt8]] = []
        var i = 4
        while i < 4 + packetBytes {
            let l = Int(out[i]) << 8 | Int(out[i + 1])
            theirs.append(Array(out[(i + 2)..<(i + 2 + l)]))
            i += 2 + l
        }
        let theirDecoding: [Int16] = stride(from: 4 + packetBytes, to: out.count - 1, by: 2).map {
            Int16(bitPattern: UInt16(out[$0]) | UInt16(out[$0 + 1]) << 8)
        }
        try #require(theirs.count == frames)
        // Same libopus, same settings: bit-exact packets.
        #expect(theirs == ours)
        // Their packets decode in ours to what ours decode to (bit-exact, libopus is deterministic),
        // and opuslib's decoding of our packets is the same audio.
        let decoder = try OpusDecoder()
        var ourDecoding: [Int16] = []
        for p in theirs { ourDecoding += try decoder.decode(p) }
        #expect(ourDecoding.count == theirDecoding.count)
        #expect(ourDecoding == theirDecoding)
        let reference = Array(input[0..<(960 * (frames - 2))])
        let snr = Signals.snr(reference: reference, test: ourDecoding, lags: 312...312).snr
        #expect(snr > 6, "decoded SNR \(snr) dB")
        #expect(Signals.snr(reference: reference, test: ourDecoding, lags: 0...0).snr < snr - 6)
    }
}
