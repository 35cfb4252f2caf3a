// Cost of the Media module's per-frame work, in release builds; run through scripts/bench-media.
// Each figure is the best of three rounds, in nanoseconds per operation.
import Media

let clock = ContinuousClock()
let rounds = 3

func report(_ name: String, operations: Int, _ body: () -> Int) {
    var best = Double.infinity
    var sink = 0
    for _ in 0..<rounds {
        let start = clock.now
        sink &+= body()
        let elapsed = clock.now - start
        let ns = Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
        best = min(best, ns / Double(operations))
    }
    let padded = name + String(repeating: " ", count: max(1, 44 - name.count))
    print("\(padded) \(Int(best.rounded())) ns/op  (\(operations) ops, check \(sink & 0xFF))")
}

// Jitter buffer: one insert and one pull per 20 ms frame, 0–40 ms of uniform jitter.
var rng = SystemRandomNumberGenerator()
let frames = 200_000
let arrivals = (0..<frames).map { Duration.milliseconds(20 * $0 + 30 + Int.random(in: 0...40, using: &rng)) }
let packets = (0..<frames).map { JitterBufferPacket(sequenceNumber: UInt16(truncatingIfNeeded: $0), timestamp: UInt32(truncatingIfNeeded: $0 * 160), ssrc: 1, payload: [1, 2, 3]) }
report("jitter buffer: insert + pull, 20 ms frame", operations: frames) {
    var b = JitterBuffer()
    var played = 0
    var next = 0
    for k in 0..<frames {
        let t = Duration.milliseconds(20 * k + 5)
        while next < frames && arrivals[next] <= t {
            b.insert(packets[next], arrival: arrivals[next])
            next += 1
        }
        if case .audio = b.pull(at: t) { played += 1 }
    }
    return played
}

var tone8 = ToneGenerator(frequency: 440, sampleRate: 8000)
let frame8 = tone8.next(160)
var tone48 = ToneGenerator(frequency: 440, sampleRate: 48000)
let frame48 = tone48.next(960)
report("resampler 8k → 48k, 20 ms frame", operations: 20_000) {
    var r = Resampler(from: 8000, to: 48000)!
    var c = 0
    for _ in 0..<20_000 { c &+= r.process(frame8).count }
    return c
}
report("resampler 48k → 8k, 20 ms frame", operations: 20_000) {
    var r = Resampler(from: 48000, to: 8000)!
    var c = 0
    for _ in 0..<20_000 { c &+= r.process(frame48).count }
    return c
}
report("tone generator, 20 ms at 48 kHz", operations: 20_000) {
    var c = 0
    for _ in 0..<20_000 { c &+= Int(tone48.next(960)[7]) }
    return c
}
report("Goertzel, 20 ms at 8 kHz", operations: 50_000) {
    var c = 0
    for _ in 0..<50_000 { c &+= Int(ToneAnalysis.amplitude(of: 440, in: frame8, sampleRate: 8000) * 1000) }
    return c
}
let second8 = tone8.next(8000)
report("dominant frequency, 1 s at 8 kHz", operations: 200) {
    var c = 0
    for _ in 0..<200 { c &+= Int(ToneAnalysis.dominantFrequency(in: second8, sampleRate: 8000)!.frequency) }
    return c
}
report("RMS level, 20 ms at 48 kHz", operations: 50_000) {
    var c = 0
    for _ in 0..<50_000 { c &+= Int(AudioSamples.rmsLevel(frame48)) }
    return c
}
let digits = try! DTMFSender().schedule("0123456789*#")
report("DTMF: receive one telephone-event packet", operations: digits.count * 2000) {
    var c = 0
    for _ in 0..<2000 {
        var r = DTMFReceiver()
        for p in digits { c &+= (try? r.receive(payload: p.event.serialized(), timestamp: p.timestampOffset, arrival: p.sendOffset).count) ?? 0 }
    }
    return c
}
report("E-model MOS", operations: 1_000_000) {
    var c = 0.0
    for i in 0..<1_000_000 { c += EModel.mos(oneWayDelay: .milliseconds(i % 500), codec: .g711WithPLC, packetLossPercent: Double(i % 10)) }
    return Int(c)
}
report("quality monitor: one sample", operations: 200_000) {
    var m = QualityMonitor()
    var c = 0
    for i in 0..<200_000 {
        c &+= m.add(QualitySample(jitter: .milliseconds(i % 50), roundTripTime: .milliseconds(300 + i % 200), packetLoss: Double(i % 5) / 100,
                                  mos: 3 + Double(i % 10) / 10, audioInputLevel: -30 - Double(i % 7))).count
    }
    return c
}
