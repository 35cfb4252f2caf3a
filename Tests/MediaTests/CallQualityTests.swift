import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Media

@Suite struct EModelTests {
    @Test func defaultRatingGivesMOS441() {
        let r = EModel.rating(oneWayDelay: .zero, codec: .g711WithPLC, packetLossPercent: 0)
        #expect(r == 93.2)
        #expect(abs(EModel.mos(rating: r) - 4.41) < 0.005)
    }

    @Test func mosFromRFollowsAnnexB() {
        // R → MOS points of G.107 Figure B.1 (the curve's well-known values).
        let points: [(Double, Double)] = [(0, 1), (50, 2.575), (60, 3.1), (70, 3.597), (80, 4.024), (90, 4.339), (100, 4.5)]
        for (r, m) in points { #expect(abs(EModel.mos(rating: r) - m) < 0.002, "R \(r)") }
        #expect(EModel.mos(rating: -5) == 1 && EModel.mos(rating: 120) == 4.5)
        // The Annex B polynomial dips under 1 below R ≈ 6.5; it is held at 1 there, so the curve is monotonic.
        #expect(EModel.mos(rating: 3) == 1)
        let curve = stride(from: 0.0, through: 100, by: 0.5).map { EModel.mos(rating: $0) }
        #expect(zip(curve, curve.dropFirst()).allSatisfy { $0 <= $1 })
    }

    @Test func delayImpairment() {
        #expect(EModel.delayImpairment(oneWayDelay: .milliseconds(100)) == 0)
        #expect(EModel.delayImpairment(oneWayDelay: .milliseconds(50)) == 0)
        // X = 1 at 200 ms: 25 (2^(1/6) − 3 (1 + 3^-6)^(1/6) + 2) = 3.04; X = 2 at 400 ms: 25 (65^(1/6) − 3 (1 + (2/3)^6)^(1/6) + 2) = 24.07.
        #expect(abs(EModel.delayImpairment(oneWayDelay: .milliseconds(200)) - 3.044) < 0.002)
        #expect(abs(EModel.delayImpairment(oneWayDelay: .milliseconds(400)) - 24.070) < 0.002)
        let ids = stride(from: 100, through: 800, by: 50).map { EModel.delayImpairment(oneWayDelay: .milliseconds($0)) }
        #expect(zip(ids, ids.dropFirst()).allSatisfy { $0 < $1 })
    }

    @Test func lossImpairmentPerCodec() {
        // 2% random loss: G.711 with PLC 95·2/(2+25.1) = 7.01; without PLC 95·2/(2+4.3) = 30.16.
        #expect(abs(EModel.effectiveEquipmentImpairment(codec: .g711WithPLC, packetLossPercent: 2) - 7.011) < 0.002)
        #expect(abs(EModel.effectiveEquipmentImpairment(codec: .g711, packetLossPercent: 2) - 30.159) < 0.002)
        #expect(abs(EModel.mos(oneWayDelay: .zero, codec: .g711WithPLC, packetLossPercent: 2) - 4.235) < 0.001)  // R 86.19
        #expect(abs(EModel.mos(oneWayDelay: .zero, codec: .g711, packetLossPercent: 2) - 3.256) < 0.001)  // R 63.04
        // Bursty loss hurts more than random loss at the same rate.
        let random = EModel.effectiveEquipmentImpairment(codec: .g711WithPLC, packetLossPercent: 5)
        let bursty = EModel.effectiveEquipmentImpairment(codec: .g711WithPLC, packetLossPercent: 5, burstRatio: 2)
        #expect(bursty > random)
        #expect(abs(bursty - 95 * 5 / (2.5 + 25.1)) < 1e-9)
        // Opus: Ie 0 from 16 kbit/s, 10 below; Bpl as G.711 with PLC.
        #expect(EModel.effectiveEquipmentImpairment(codec: .opus(bitrate: 32000), packetLossPercent: 0) == 0)
        #expect(EModel.effectiveEquipmentImpairment(codec: .opus(bitrate: 8000), packetLossPercent: 0) == 10)
        #expect(EModel.effectiveEquipmentImpairment(codec: .opus(bitrate: 8000), packetLossPercent: 100) < 95)
    }

    @Test func burstRatio() {
        #expect(EModel.burstRatio(p: 0.01, q: 0.99) == 1)
        #expect(abs(EModel.burstRatio(p: 0.02, q: 0.48) - 2) < 1e-12)
        #expect(EModel.burstRatio(p: 0, q: 0.5) == 1)
        // Isolated losses: ratio 1; losses in pairs: higher.
        let isolated = (0..<1000).map { $0 % 20 == 0 }
        let pairs = (0..<1000).map { $0 % 40 < 2 }
        #expect(abs(EModel.burstRatio(lossPattern: isolated) - 1) < 0.06)
        #expect(EModel.burstRatio(lossPattern: pairs) > 1.8)
        #expect(EModel.burstRatio(lossPattern: []) == 1)
    }

    @Test func callStatisticsMOS() {
        var s = CallStatistics(fractionLost: 0, jitter: .milliseconds(5), roundTripTime: .milliseconds(40), codec: "PCMU/8000")
        let clean = s.estimatedMOS(codec: .g711WithPLC)
        #expect(abs(clean - 4.41) < 0.005)  // 20 + 20 ms of delay: no delay impairment
        s.fractionLost = 0.05
        let lossy = s.estimatedMOS(codec: .g711WithPLC)
        #expect(lossy < clean - 0.3)
        s.roundTripTime = .milliseconds(600)
        #expect(s.estimatedMOS(codec: .g711WithPLC) < lossy)
        // The jitter buffer's late packets count as loss.
        var jb = JitterBufferStatistics()
        jb.received = 100
        jb.late = 10
        let buffered = CallStatistics(jitterBuffer: jb).estimatedMOS(codec: .g711WithPLC)
        #expect(abs(buffered - EModel.mos(oneWayDelay: .milliseconds(20), codec: .g711WithPLC, packetLossPercent: 10)) < 1e-9)
    }
}

@Suite struct QualityMonitorTests {
    static func run(_ samples: [QualitySample], monitor: inout QualityMonitor) -> [[QualityEvent]] {
        samples.map { monitor.add($0) }
    }

    @Test func highJitterThreeOfFive() {
        var m = QualityMonitor()
        let ms = [10, 40, 10, 40, 35, 10, 10, 10, 10, 50]
        let events = Self.run(ms.map { QualitySample(jitter: .milliseconds($0)) }, monitor: &m)
        #expect(events[4] == [.raised(.highJitter)])
        #expect(events.enumerated().filter { !$0.element.isEmpty }.map(\.offset) == [4, 8])
        // At 7 the last five (40 35 10 10 10) still hold two bad ones; at 8 one: cleared.
        #expect(events[8] == [.cleared(.highJitter)])
        #expect(m.active.isEmpty)
        // Exactly 30 ms is not over the threshold.
        var m2 = QualityMonitor()
        #expect(Self.run(Array(repeating: QualitySample(jitter: .milliseconds(30)), count: 5), monitor: &m2).allSatisfy { $0.isEmpty })
    }

    @Test func majorityRulesDoNotFlap() {
        var m = QualityMonitor()
        // Alternating bad/good: raised once, never cleared while it alternates.
        let rtts = (0..<20).map { $0 % 2 == 0 ? 500 : 100 }
        let events = Self.run(rtts.map { QualitySample(roundTripTime: .milliseconds($0)) }, monitor: &m).flatMap { $0 }
        #expect(events == [.raised(.highRTT)])
        // Recovery: four good of five clears it.
        let after = Self.run(Array(repeating: QualitySample(roundTripTime: .milliseconds(100)), count: 4), monitor: &m)
        #expect(after.flatMap { $0 } == [.cleared(.highRTT)])
        #expect(after.firstIndex { !$0.isEmpty } == 1)  // 100 500 100 100 100
    }

    @Test func lowMOS() {
        var m = QualityMonitor()
        let mos = [4.2, 3.4, 3.3, 4.0, 3.0, 3.6, 4.1, 4.2, 4.0]
        let events = Self.run(mos.map { QualitySample(mos: $0) }, monitor: &m)
        #expect(events[4] == [.raised(.lowMOS)])
        #expect(events.flatMap { $0 } == [.raised(.lowMOS), .cleared(.lowMOS)])
        #expect(events[7] == [.cleared(.lowMOS)])  // 4.0 3.0 3.6 4.1 4.2: one bad
    }

    @Test func highPacketLossWithHysteresis() {
        var m = QualityMonitor()
        // A first bad second does not raise before 7 samples exist.
        var events = Self.run([0.5] + Array(repeating: 0.0, count: 5), monitor: &m, loss: true)
        #expect(events.allSatisfy { $0.isEmpty })
        m = QualityMonitor()
        let loss = Array(repeating: 0.04, count: 7) + [0.02, 0.02, 0.02, 0.02, 0.0, 0.0, 0.0, 0.0, 0.0]
        events = Self.run(loss, monitor: &m, loss: true)
        #expect(events[6] == [.raised(.highPacketLoss)])
        // Between 1% and 3%: stays raised (hysteresis); at or below 1%: cleared, once.
        var mean: [Double] = []
        for i in 6..<loss.count { mean.append(loss[(i - 6)...i].reduce(0, +) / 7) }
        let clearAt = 6 + mean.firstIndex { $0 <= 0.01 + 1e-12 }!
        #expect(events.flatMap { $0 } == [.raised(.highPacketLoss), .cleared(.highPacketLoss)])
        #expect(events[clearAt] == [.cleared(.highPacketLoss)])
        #expect(mean[clearAt - 7] > 0.01)
        // Exactly 3% does not raise.
        m = QualityMonitor()
        #expect(Self.run(Array(repeating: 0.03, count: 10), monitor: &m, loss: true).allSatisfy { $0.isEmpty })
    }

    static func run(_ losses: [Double], monitor: inout QualityMonitor, loss: Bool) -> [[QualityEvent]] {
        losses.map { monitor.add(QualitySample(packetLoss: $0)) }
    }

    @Test func constantAudioInputLevel() {
        var m = QualityMonitor()
        // A stuck microphone: digital silence for ten seconds.
        var events = (0..<10).map { _ in m.add(QualitySample(audioInputLevel: -.infinity)) }
        #expect(events[9] == [.raised(.constantAudioInputLevel)])
        #expect(events.dropLast().allSatisfy { $0.isEmpty })
        // Speech resumes: the level varies by more than 3 dB over the window.
        events = [-30.0, -28.0, -35.0].map { m.add(QualitySample(audioInputLevel: $0)) }
        #expect(events.flatMap { $0 } == [.cleared(.constantAudioInputLevel)])
        #expect(events[0] == [.cleared(.constantAudioInputLevel)])
        // Muted: a constant level is expected, no warning, and muting clears a raised one.
        m = QualityMonitor()
        #expect((0..<20).map { _ in m.add(QualitySample(audioInputLevel: -90, muted: true)) }.allSatisfy { $0.isEmpty })
        _ = (0..<10).map { _ in m.add(QualitySample(audioInputLevel: -40)) }
        #expect(m.active == [.constantAudioInputLevel])
        #expect(m.add(QualitySample(audioInputLevel: -40, muted: true)) == [.cleared(.constantAudioInputLevel)])
        // A level that varies only within 1–3 dB keeps the current state.
        m = QualityMonitor()
        let wobble = (0..<30).map { m.add(QualitySample(audioInputLevel: -40 + Double($0 % 3))) }
        #expect(wobble.allSatisfy { $0.isEmpty })
    }

    @Test func twilioClearsOnlyWhenTheWholeWindowIsGood() {
        var m = QualityMonitor(thresholds: .twilio)
        // Three bad of three raise; the default rule would clear at the second good sample,
        // Twilio's only when the last five are all good (strictly under 30 ms).
        let ms = [40, 40, 40, 10, 10, 10, 10, 30, 10, 10, 10, 10, 10]
        let events = ms.map { m.add(QualitySample(jitter: .milliseconds($0))) }
        #expect(events[2] == [.raised(.highJitter)])
        // At index 7 (30 ms, not good) the window 10 10 10 10 30 is not all good; the first
        // all-good window of five ends at index 12.
        #expect(events.enumerated().filter { !$0.element.isEmpty }.map(\.offset) == [2, 12], "\(events)")
        #expect(events[12] == [.cleared(.highJitter)])

        var mos = QualityMonitor(thresholds: .twilio)
        let scores = [3.0, 3.0, 3.0, 4.0, 4.0, 4.0, 3.5, 4.0, 4.0, 4.0, 4.0, 4.0]
        let mosEvents = scores.map { mos.add(QualitySample(mos: $0)) }
        #expect(mosEvents.flatMap { $0 } == [.raised(.lowMOS), .cleared(.lowMOS)])
        #expect(mosEvents[11] == [.cleared(.lowMOS)], "exactly 3.5 is not good")
    }

    @Test func twilioLevelRuleIsTheLinearStandardDeviation() {
        // A ±1 dB wobble at -40 dBFS: within 3 dB, so the default rule never raises, but its
        // linear deviation (a few units of 32767) is far under Twilio's 1 % (327.67).
        var twilio = QualityMonitor(thresholds: .twilio), byDecibels = QualityMonitor()
        let wobble = (0..<10).map { -40 + Double($0 % 3) - 1 }
        let t = wobble.map { twilio.add(QualitySample(audioInputLevel: $0)) }
        let d = wobble.map { byDecibels.add(QualitySample(audioInputLevel: $0)) }
        #expect(t[9] == [.raised(.constantAudioInputLevel)])
        #expect(d.allSatisfy { $0.isEmpty })
        // Speech at full range: a deviation far above 3 % clears it.
        let speech = (0..<10).map { $0 % 2 == 0 ? -3.0 : -30.0 }
        let cleared = speech.map { twilio.add(QualitySample(audioInputLevel: $0)) }.flatMap { $0 }
        #expect(cleared == [.cleared(.constantAudioInputLevel)])
        // Muted: no warning (and muting clears).
        var muted = QualityMonitor(thresholds: .twilio)
        #expect((0..<12).map { _ in muted.add(QualitySample(audioInputLevel: -60, muted: true)) }.allSatisfy { $0.isEmpty })
    }

    @Test func warningsAreIndependentAndSamplesWithoutAFieldChangeNothing() {
        var m = QualityMonitor()
        let bad = QualitySample(jitter: .milliseconds(80), roundTripTime: .milliseconds(900), mos: 2.0)
        var all: [QualityEvent] = []
        for _ in 0..<3 { all += m.add(bad) }
        #expect(Set(all) == [.raised(.highJitter), .raised(.highRTT), .raised(.lowMOS)])
        #expect(all.count == 3)
        for _ in 0..<10 { #expect(m.add(QualitySample()).isEmpty) }
        #expect(m.active == [.highJitter, .highRTT, .lowMOS])
    }

    @Test func sampleFromTwoSnapshots() {
        let a = CallStatistics(received: .init(packets: 1000, bytes: 160_000), packetsLost: 10, jitter: .milliseconds(4))
        let b = CallStatistics(received: .init(packets: 1045, bytes: 167_200), packetsLost: 15, jitter: .milliseconds(45),
                               roundTripTime: .milliseconds(100))
        let s = QualitySample(from: a, to: b, codec: .g711WithPLC, audioInputLevel: -30)
        #expect(s.packetLoss == 0.1)  // 5 of 50 expected
        #expect(s.jitter == .milliseconds(45) && s.roundTripTime == .milliseconds(100) && s.audioInputLevel == -30 && !s.muted)
        #expect(abs(s.mos! - EModel.mos(oneWayDelay: .milliseconds(70), codec: .g711WithPLC, packetLossPercent: 10)) < 1e-9)
        // Nothing expected in the interval: no loss.
        #expect(QualitySample(from: b, to: b, codec: .g711).packetLoss == 0)
        var m = QualityMonitor()
        let events = (0..<3).flatMap { _ in m.add(s) }
        #expect(Set(events) == [.raised(.highJitter), .raised(.lowMOS)])  // 10% loss: R 66.1, MOS 3.41
    }
}
