import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Media

@Suite struct WAVTests {
    static func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }
    static func le32(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24 & 0xFF)] }

    /// A hand-built file: RIFF header, optional extra chunks, fmt, data.
    static func file(tag: Int = 1, channels: Int = 1, rate: Int = 8000, bits: Int = 16, align: Int? = nil, byteRate: Int? = nil,
                     data: [UInt8], before: [UInt8] = [], fmtExtra: [UInt8] = []) -> [UInt8] {
        let a = align ?? channels * bits / 8
        let fmt = le16(tag) + le16(channels) + le32(rate) + le32(byteRate ?? a * rate) + le16(a) + le16(bits) + fmtExtra
        var out = Array("RIFF".utf8) + le32(0) + Array("WAVE".utf8) + before
        out += Array("fmt ".utf8) + le32(fmt.count) + fmt
        out += Array("data".utf8) + le32(data.count) + data
        return out
    }

    @Test func readsHandBuiltPCM() throws {
        let bytes = Self.file(channels: 2, rate: 44100, data: [0x01, 0x00, 0xFF, 0xFF, 0x00, 0x80, 0xFF, 0x7F],
                              before: Array("LIST".utf8) + Self.le32(3) + [1, 2, 3, 0])
        let w = try WAVFile(parsing: bytes)
        #expect(w.sampleRate == 44100 && w.channels == 2 && w.frameCount == 2)
        #expect(w.samples == .pcm16([1, -1, Int16.min, Int16.max]))
    }

    @Test func readsG711TagsAsBytesIncludingExtensible() throws {
        let mu = try WAVFile(parsing: Self.file(tag: 7, bits: 8, data: [0xFF, 0x7F, 0x00], fmtExtra: Self.le16(0)))
        #expect(mu.samples == .muLaw([0xFF, 0x7F, 0x00]) && mu.duration == .nanoseconds(375_000))
        let a = try WAVFile(parsing: Self.file(tag: 6, bits: 8, data: [0xD5, 0x55]))
        #expect(a.samples == .aLaw([0xD5, 0x55]))
        // WAVE_FORMAT_EXTENSIBLE with the µ-law subformat GUID (0x0007…).
        let ext = Self.le16(22) + Self.le16(8) + Self.le32(4) + Self.le16(7) + [0, 0, 0, 0, 0x10, 0, 0x80, 0, 0, 0xAA, 0, 0x38, 0x9B, 0x71]
        let e = try WAVFile(parsing: Self.file(tag: 0xFFFE, bits: 8, data: [1, 2], fmtExtra: ext))
        #expect(e.samples == .muLaw([1, 2]))
    }

    @Test func roundTripsEveryEncoding() throws {
        var tone = ToneGenerator(frequency: 1000, sampleRate: 16000)
        let files = [WAVFile(sampleRate: 16000, samples: .pcm16(tone.next(1600))),
                     WAVFile(sampleRate: 48000, channels: 2, samples: .pcm16(AudioSamples.monoToStereo(tone.next(960)))),
                     WAVFile(sampleRate: 8000, samples: .muLaw([1, 2, 3])),
                     WAVFile(sampleRate: 8000, channels: 2, samples: .aLaw([9, 8, 7, 6]))]
        for f in files {
            let bytes = try f.serialized()
            #expect(bytes.count % 2 == 0)
            #expect(Array(bytes[4..<8]) == Self.le32(bytes.count - 8))
            #expect(try WAVFile(parsing: bytes) == f)
        }
        // Through the file system.
        let path = "/tmp/switchboard-media-test-\(getpid()).wav"
        defer { unlink(path) }
        try files[1].write(path: path)
        #expect(try WAVFile(path: path) == files[1])
    }

    @Test func badFilesGiveTypedErrors() {
        func rule(_ b: [UInt8], max: Int = WAVFile.defaultMaxDataBytes) -> WAVError.Rule? {
            do { _ = try WAVFile(parsing: b, maxDataBytes: max); return nil } catch { return error.rule }
        }
        let good = Self.file(data: [0, 0, 1, 0])
        #expect(rule(good) == nil)
        #expect(rule(Array("RIFX".utf8) + Array(good.dropFirst(4))) == .notWAVE)
        #expect(rule(Array(good.prefix(10))) == .notWAVE)
        #expect(rule(Array(good.dropLast(1))) == .truncatedChunk)
        #expect(rule(Self.file(data: [0, 0, 1])) == .partialFrame)
        #expect(rule(Self.file(tag: 3, bits: 32, data: [])) == .unsupportedFormat)
        #expect(rule(Self.file(bits: 8, data: [])) == .unsupportedBits)
        #expect(rule(Self.file(tag: 7, bits: 16, data: [])) == .unsupportedBits)
        #expect(rule(Self.file(channels: 0, data: [])) == .badParameters)
        #expect(rule(Self.file(channels: 9, data: [])) == .badParameters)
        #expect(rule(Self.file(rate: 0, data: [])) == .badParameters)
        #expect(rule(Self.file(align: 4, data: [])) == .badParameters)
        #expect(rule(Self.file(byteRate: 1, data: [])) == .badParameters)
        #expect(rule(Self.file(data: [UInt8](repeating: 0, count: 64)), max: 32) == .tooLarge)
        #expect(rule(Array("RIFF".utf8) + Self.le32(4) + Array("WAVE".utf8)) == .missingFormat)
        #expect(rule(Array(good.prefix(36))) == .missingData)
        // data before fmt
        let dataFirst = Array("RIFF".utf8) + Self.le32(0) + Array("WAVE".utf8) + Array("data".utf8) + Self.le32(0)
        #expect(rule(dataFirst) == .missingFormat)
        // A huge chunk size claims more than the file.
        var huge = good
        huge[40...43] = [0xFF, 0xFF, 0xFF, 0x7F]
        #expect(rule(huge) == .tooLarge)
        #expect(throws: WAVError(offset: 40, rule: .truncatedChunk, detail: "data chunk of 4 bytes, 3 in the file")) {
            try WAVFile(parsing: Array(good.dropLast(1)))
        }
        #expect { try WAVFile(path: "/nonexistent/x.wav") } throws: { ($0 as? WAVError)?.rule == .io }
        #expect { try WAVFile(sampleRate: 8000, channels: 2, samples: .pcm16([1, 2, 3])).serialized() } throws: { ($0 as? WAVError)?.rule == .badSamples }
    }

    @Test func mutatedFilesNeverCrash() {
        var rng = TestRandom(seed: 42)
        var tone = ToneGenerator(frequency: 500, sampleRate: 8000)
        let base = try! WAVFile(sampleRate: 8000, samples: .pcm16(tone.next(200))).serialized()
        var parsed = 0
        for _ in 0..<2000 {
            var b = base
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let i = Int.random(in: 0..<min(b.count, 60), using: &rng)
                b[i] = UInt8.random(in: 0...255, using: &rng)
            }
            if Bool.random(using: &rng) { b.removeLast(Int.random(in: 0..<b.count, using: &rng)) }
            if (try? WAVFile(parsing: b, maxDataBytes: 1 << 20)) != nil { parsed += 1 }
        }
        #expect(parsed > 0 && parsed < 2000)
    }
}

@Suite struct SignalTests {
    @Test func toneHasContinuousPhaseAcrossFrames() {
        var a = ToneGenerator(frequency: 440, amplitude: 0.5, sampleRate: 8000)
        var b = ToneGenerator(frequency: 440, amplitude: 0.5, sampleRate: 8000)
        let whole = a.next(8000)
        var pieces: [Int16] = []
        for _ in 0..<50 { pieces += b.next(160) }
        #expect(pieces == whole)
        // Samples are the sine itself.
        for n in [0, 1, 17, 999] {
            let expected = 0.5 * 32767 * sin(2 * Double.pi * 440 * Double(n) / 8000)
            #expect(abs(Double(whole[n]) - expected) <= 1)
        }
        #expect(abs(AudioSamples.rmsLevel(whole) - (20 * log10(0.5 * 32767 / 2.squareRoot() / 32768))) < 0.05)
        #expect(abs(AudioSamples.peakLevel(whole) - 20 * log10(0.5)) < 0.01)
    }

    @Test func levels() {
        #expect(AudioSamples.rmsLevel(AudioSamples.silence(160)) == -.infinity)
        #expect(AudioSamples.rmsLevel([Int16]()) == -.infinity)
        #expect(AudioSamples.peakLevel(AudioSamples.silence(10)) == -.infinity)
        let square = (0..<100).map { $0 % 2 == 0 ? Int16.max : Int16.min }
        #expect(abs(AudioSamples.rmsLevel(square)) < 0.001)
        var full = ToneGenerator(frequency: 1000, amplitude: 1, sampleRate: 48000)
        #expect(abs(AudioSamples.rmsLevel(full.next(4800)) + 3.01) < 0.02)
    }

    @Test func goertzelMeasuresOneFrequencyAndIgnoresOthers() {
        var t = ToneGenerator(frequencies: [440, 1336], amplitude: 0.25, sampleRate: 8000)
        let s = t.next(4000)
        #expect(abs(ToneAnalysis.amplitude(of: 440, in: s, sampleRate: 8000) - 0.25) < 0.005)
        #expect(abs(ToneAnalysis.amplitude(of: 1336, in: s, sampleRate: 8000) - 0.25) < 0.005)
        #expect(ToneAnalysis.level(of: 770, in: s, sampleRate: 8000) < -60)
        #expect(ToneAnalysis.level(of: 2000, in: s, sampleRate: 8000) < -60)
        #expect(ToneAnalysis.amplitude(of: 440, in: AudioSamples.silence(100), sampleRate: 8000) == 0)
    }

    @Test(arguments: [(440.0, 8000), (440.0, 48000), (1004.0, 16000), (3333.3, 8000), (73.5, 8000)])
    func dominantFrequency(frequency: Double, rate: Int) throws {
        var t = ToneGenerator(frequency: frequency, amplitude: 0.3, sampleRate: rate)
        var noise = TestRandom(seed: 7)
        let s = t.next(rate).map { Int16(clamping: Int($0) + Int.random(in: -300...300, using: &noise)) }
        let found = try #require(ToneAnalysis.dominantFrequency(in: s, sampleRate: rate))
        let binWidth = Double(rate) / Double(1 << Int(log2(Double(rate))))
        #expect(abs(found.frequency - frequency) < max(0.5, binWidth * 0.1), "\(found.frequency)")
        #expect(abs(found.amplitude - 0.3) < 0.01)
        #expect(ToneAnalysis.dominantFrequency(in: AudioSamples.silence(rate), sampleRate: rate) == nil)
        #expect(ToneAnalysis.dominantFrequency(in: s.prefix(10), sampleRate: rate) == nil)
    }

    @Test func rangeRestrictsTheSearch() throws {
        var t = ToneGenerator(frequencies: [300, 2000], amplitude: 0.2, sampleRate: 8000)
        var strong = ToneGenerator(frequency: 300, amplitude: 0.6, sampleRate: 8000)
        let s = zip(t.next(8000), strong.next(8000)).map { Int16(clamping: Int($0) + Int($1)) }
        #expect(abs(try #require(ToneAnalysis.dominantFrequency(in: s, sampleRate: 8000)).frequency - 300) < 0.5)
        #expect(abs(try #require(ToneAnalysis.dominantFrequency(in: s, sampleRate: 8000, range: 1000...4000)).frequency - 2000) < 0.5)
    }

    @Test func channelLayout() {
        #expect(AudioSamples.monoToStereo([1, -2]) == [1, 1, -2, -2])
        #expect(AudioSamples.stereoToMono([1, 2, -1, -2, Int16.max, Int16.max, Int16.min, Int16.min]) == [2, -2, Int16.max, Int16.min])
        #expect(AudioSamples.stereoToMono([1, 2, 3]) == [2])
        #expect(AudioSamples.channel(1, of: [1, 2, 3, 4, 5], channels: 2) == [2, 4])
        #expect(AudioSamples.channel(2, of: [1, 2], channels: 2) == [])
    }
}

@Suite struct ResamplerTests {
    static func tone(_ f: Double, rate: Int, seconds: Double = 0.5, amplitude: Double = 0.5) -> [Int16] {
        var t = ToneGenerator(frequency: f, amplitude: amplitude, sampleRate: rate)
        return t.next(Int(Double(rate) * seconds))
    }

    /// Resamples in 20 ms frames and drops the filter's start-up.
    static func run(_ input: [Int16], from: Int, to: Int) -> [Int16] {
        var r = Resampler(from: from, to: to)!
        var out: [Int16] = []
        let frame = from / 50
        var i = 0
        while i < input.count {
            out += r.process(Array(input[i..<min(i + frame, input.count)]))
            i += frame
        }
        #expect(abs(Double(out.count) - Double(input.count) * Double(to) / Double(from)) <= 1)
        return Array(out.dropFirst(Int(r.delay.rounded(.up)) * 2))
    }

    @Test(arguments: [200.0, 440.0, 1000.0, 3000.0, 3400.0])
    func upsampling8kTo48kKeepsThePassbandAndRejectsImages(f: Double) {
        let out = Self.run(Self.tone(f, rate: 8000), from: 8000, to: 48000)
        #expect(abs(ToneAnalysis.level(of: f, in: out, sampleRate: 48000) - 20 * log10(0.5)) < 0.1)
        for image in [8000 - f, 8000 + f, 16000 - f] {
            #expect(ToneAnalysis.level(of: image, in: out, sampleRate: 48000) < -65, "image at \(image) Hz")
        }
    }

    @Test(arguments: [440.0, 1000.0, 3400.0])
    func downsampling48kTo8kKeepsThePassband(f: Double) {
        let out = Self.run(Self.tone(f, rate: 48000), from: 48000, to: 8000)
        #expect(abs(ToneAnalysis.level(of: f, in: out, sampleRate: 8000) - 20 * log10(0.5)) < 0.1)
    }

    @Test(arguments: [(5000.0, 3000.0), (7000.0, 1000.0), (12000.0, 0.0), (9000.0, 1000.0), (4700.0, 3300.0)])
    /// `alias` 0: the tone folds onto 4 kHz, the output's Nyquist; the whole output is measured.
    func downsamplingRejectsWhatWouldAlias(f: Double, alias: Double) {
        let input = Self.tone(f, rate: 48000)
        let out = Self.run(input, from: 48000, to: 8000)
        let measured = alias == 0 ? AudioSamples.rmsLevel(out) : ToneAnalysis.level(of: alias, in: out, sampleRate: 8000)
        #expect(measured < -65, "\(f) Hz leaks into \(alias) Hz at \(measured) dB")
    }

    @Test func roundTripThroughWidebandKeepsA440Tone() throws {
        let input = Self.tone(440, rate: 8000, seconds: 1)
        let up = Self.run(input, from: 8000, to: 48000)
        let down = Self.run(up, from: 48000, to: 8000)
        let found = try #require(ToneAnalysis.dominantFrequency(in: down, sampleRate: 8000))
        #expect(abs(found.frequency - 440) < 0.5)
        #expect(abs(found.amplitude - 0.5) < 0.01)
    }

    @Test func framingDoesNotChangeTheOutput() {
        let input = Self.tone(1000, rate: 16000, seconds: 0.2)
        var whole = Resampler(from: 16000, to: 48000)!
        var pieces = Resampler(from: 16000, to: 48000)!
        let a = whole.process(input)
        var b: [Int16] = []
        var i = 0
        var rng = TestRandom(seed: 1)
        while i < input.count {
            let n = Int.random(in: 1...700, using: &rng)
            b += pieces.process(Array(input[i..<min(i + n, input.count)]))
            i += n
        }
        #expect(a == b)
    }

    @Test func unsupportedRatios() {
        #expect(Resampler(from: 0, to: 8000) == nil)
        #expect(Resampler(from: 8000, to: 7919) == nil)
        #expect(Resampler(from: 44100, to: 48000) != nil)
        var same = Resampler(from: 8000, to: 8000)!
        #expect(same.process([1, 2, 3]).count == 3)
    }
}

@Suite struct WAVStreamWriterTests {
    static func path(_ name: String) -> String { "/tmp/switchboard-media-\(getpid())-\(name).wav" }

    @Test func streamedPCMReadsBackAsWritten() throws {
        let p = Self.path("pcm")
        defer { unlink(p) }
        var tone = ToneGenerator(frequency: 440, sampleRate: 8000)
        var all: [Int16] = []
        let w = try WAVStreamWriter(path: p, sampleRate: 8000)
        for _ in 0..<100 {
            let frame = tone.next(160)
            all += frame
            try w.write(frame)
        }
        #expect(w.dataBytes == 32000)
        try w.close()
        try w.close()  // idempotent
        #expect(try WAVFile(path: p) == WAVFile(sampleRate: 8000, samples: .pcm16(all)))
        #expect { try w.write([1]) } throws: { ($0 as? WAVError)?.rule == .io }
    }

    @Test func streamedG711AndPartialFrames() throws {
        let p = Self.path("alaw")
        defer { unlink(p) }
        let w = try WAVStreamWriter(path: p, sampleRate: 8000, channels: 2, encoding: .aLaw)
        try w.write(encoded: [1, 2, 3])
        #expect { try w.write([1]) } throws: { ($0 as? WAVError)?.rule == .badSamples }
        try w.close()
        // The half frame is completed with A-law silence; the odd length gets its pad byte.
        let f = try WAVFile(path: p)
        #expect(f.samples == .aLaw([1, 2, 3, 0xD5]) && f.channels == 2)
        let bytes = try #require(readBytes(p))
        #expect(bytes.count % 2 == 0)
        #expect(Array(bytes[4..<8]) == WAVTests.le32(bytes.count - 8))
        #expect(Array(bytes[46..<50]) == WAVTests.le32(2))  // fact: frames
    }

    @Test func droppedWriterStillClosesTheFile() throws {
        let p = Self.path("drop")
        defer { unlink(p) }
        do {
            let w = try WAVStreamWriter(path: p, sampleRate: 16000, encoding: .muLaw)
            try w.write(encoded: [0x7F, 0xFF])
        }
        #expect(try WAVFile(path: p).samples == .muLaw([0x7F, 0xFF]))
        #expect { try WAVStreamWriter(path: "/nonexistent/dir/x.wav", sampleRate: 8000) } throws: { ($0 as? WAVError)?.rule == .io }
        #expect { try WAVStreamWriter(path: p, sampleRate: 0) } throws: { ($0 as? WAVError)?.rule == .badParameters }
    }
}

@Suite struct AudioSourceTests {
    /// The benchmarks' signal equals Benchmarks/cmedia.c's `sample_at` (values from the C code)
    /// and does not depend on how it is read in frames.
    @Test func syntheticSignalMatchesTheCReference() {
        var whole = SyntheticSignal()
        let one = whole.nextFrame(count: 48000) ?? []
        #expect(one.count == 48000)
        #expect([one[0], one[1], one[2], one[4800], one[47999]] == [-6079, -2853, 427, -4821, -2163])
        #expect(one.enumerated().reduce(0) { $0 + Int($1.element) * ($1.offset % 7 + 1) } == -844857)
        var pieces = SyntheticSignal()
        var chunked: [Int16] = []
        while chunked.count < 48000 { chunked += pieces.nextFrame(count: min(160, 48000 - chunked.count)) ?? [] }
        #expect(chunked == one && pieces.index == 48000)
    }

    @Test func samplesPlayOnceOrLoop() {
        var once = SamplesSource(samples: [1, 2, 3, 4, 5], sampleRate: 8000)
        #expect(once.nextFrame(count: 2) == [1, 2])
        #expect(once.nextFrame(count: 2) == [3, 4])
        #expect(once.nextFrame(count: 2) == [5])
        #expect(once.nextFrame(count: 2) == nil)
        var loop = SamplesSource(samples: [1, 2, 3], sampleRate: 8000, loops: true)
        #expect(loop.nextFrame(count: 7) == [1, 2, 3, 1, 2, 3, 1])
        #expect(loop.nextFrame(count: 2) == [2, 3])
        var empty = SamplesSource(samples: [], sampleRate: 8000, loops: true)
        #expect(empty.nextFrame(count: 3) == nil)
        let silence = SilenceSource(sampleRate: 8000)
        #expect(silence.nextFrame(count: 3) == [0, 0, 0])
        var tone: any AudioSource = ToneGenerator(frequency: 440, sampleRate: 48000)
        #expect(tone.nextFrame(count: 960)?.count == 960 && tone.sampleRate == 48000)
    }

    @Test func wavFileIsMixedDownAndResampledOnTime() throws {
        // One second of a 48 kHz stereo file: 440 Hz left, 440 Hz right; played at 8 kHz.
        var t = ToneGenerator(frequency: 440, amplitude: 0.4, sampleRate: 48000)
        let mono = t.next(48000)
        let file = WAVFile(sampleRate: 48000, channels: 2, samples: .pcm16(AudioSamples.monoToStereo(mono)))
        var s = try SamplesSource(file, sampleRate: 8000)
        #expect(s.samples.count == 8000)
        var frames: [Int16] = []
        while let f = s.nextFrame(count: 160) { frames += f }
        #expect(frames.count == 8000)
        let found = try #require(ToneAnalysis.dominantFrequency(in: frames, sampleRate: 8000))
        #expect(abs(found.frequency - 440) < 0.5 && abs(found.amplitude - 0.4) < 0.01)
        // On time: the resampled sine starts at phase 0, as the original does (within a sample).
        var ref = ToneGenerator(frequency: 440, amplitude: 0.4, sampleRate: 8000)
        let expected = ref.next(8000)
        let error = zip(frames[100..<7900], expected[100..<7900]).map { abs(Int($0) - Int($1)) }.max()!
        #expect(error < 300, "max difference \(error)")  // 300 of 13107: under 3%
    }

    @Test func unsupportedFiles() throws {
        #expect { try SamplesSource(WAVFile(sampleRate: 8000, samples: .muLaw([1])), sampleRate: 8000) } throws: { ($0 as? WAVError)?.rule == .unsupportedFormat }
        #expect { try SamplesSource(WAVFile(sampleRate: 7919, samples: .pcm16([1])), sampleRate: 8000) } throws: { ($0 as? WAVError)?.rule == .badParameters }
        let three = WAVFile(sampleRate: 8000, channels: 3, samples: .pcm16([3, 6, 9, -3, -6, -9]))
        #expect(try SamplesSource(three, sampleRate: 8000).samples == [6, -6])
    }
}
