import Testing
import RTP
@testable import Media

@Suite struct BurstGapTests {
    /// `r` received, `x` lost, `d` discarded.
    static func metrics(_ pattern: String, gmin: Int = 16) -> BurstGapMetrics {
        var m = BurstGapMetrics(gmin: gmin)
        for c in pattern {
            m.record(c == "x" ? .lost : c == "d" ? .discarded : .received)
        }
        return m
    }

    static func r(_ n: Int) -> String { String(repeating: "r", count: n) }

    @Test func noLossIsOneGap() {
        let m = Self.metrics(Self.r(100))
        #expect(m.burstCount == 0 && m.burstDensity == 0 && m.gapDensity == 0)
        #expect(m.meanGapPackets == 100 && m.meanBurstPackets == 0)
    }

    @Test func isolatedLossesBelongToTheGap() {
        let m = Self.metrics(Self.r(20) + "x" + Self.r(20) + "x" + Self.r(20))
        #expect(m.burstCount == 0)
        #expect(m.gapDensity == 2.0 / 62)
        #expect(m.lost == 2 && m.packets == 62)
    }

    @Test func lossesCloserThanGminMakeABurst() {
        // 20 received, then x r r x d x (a burst of 6 packets, 4 lost or discarded), then 30 received.
        let m = Self.metrics(Self.r(20) + "xrrxdx" + Self.r(30))
        #expect(m.burstCount == 1)
        #expect(m.meanBurstPackets == 6)
        #expect(m.burstDensity == 4.0 / 6)
        #expect(m.gapDensity == 0)
        #expect(m.meanGapPackets == 25)  // 50 gap packets over two gaps
        #expect(m.discarded == 1 && m.lost == 3)
    }

    @Test func twoBurstsAndAnIsolatedLoss() {
        let m = Self.metrics("xx" + Self.r(16) + "x" + Self.r(16) + "xrx" + Self.r(3), gmin: 16)
        // Burst 1: "xx" at the start; the lone x is isolated (16 received each side); burst 2:
        // "xrx", still open at the end and closed by the assumed trailing gmin.
        #expect(m.burstCount == 2)
        #expect(m.meanBurstPackets == 2.5)
        #expect(m.burstDensity == 4.0 / 5)
        #expect(m.gapDensity == 1.0 / 36)
    }

    @Test func gminOfOneMakesEveryLossRunABurst() {
        let m = Self.metrics("rxxrxr", gmin: 1)
        #expect(m.burstCount == 1 && m.meanBurstPackets == 2)  // "xx"; the later lone x is isolated
        #expect(m.gapDensity == 1.0 / 4)
    }
}

@Suite struct XRVoIPMetricsBuilderTests {
    @Test func blockFromMeasurements() throws {
        let bg = BurstGapTests.metrics(BurstGapTests.r(100) + "xrrxdx" + BurstGapTests.r(94))  // 200 packets
        var jb = JitterBufferStatistics()
        jb.currentDelay = .milliseconds(40)
        jb.maxDelay = .milliseconds(95)
        let rating = EModel.rating(oneWayDelay: .milliseconds(120), codec: .g711WithPLC, packetLossPercent: 2)
        let block = XRVoIPMetrics(ssrc: 9, burstGap: bg, frameDuration: .milliseconds(20), roundTripDelay: .milliseconds(80),
                                  endSystemDelay: .milliseconds(60), rating: rating, mosListening: nil,
                                  mosConversational: EModel.mos(rating: rating), jitterBuffer: jb, jitterBufferLimit: .milliseconds(200))
        #expect(block.lossRate == 3 && block.discardRate == 1)  // 3/200 × 256 = 3.84 → 3; 1/200 × 256 = 1.28 → 1
        #expect(block.burstDensity == UInt8(4.0 / 6 * 256))
        #expect(block.gapDensity == 0)
        #expect(block.burstDuration == 120 && block.gapDuration == 1940)
        #expect(block.roundTripDelay == 80 && block.endSystemDelay == 60)
        #expect(block.signalLevel == 127 && block.noiseLevel == 127 && block.residualEchoReturnLoss == 127)
        #expect(block.gmin == 16)
        #expect(block.rFactor == UInt8(rating.rounded()) && block.externalRFactor == 127)
        #expect(block.mosLQ == 127 && block.mosCQ == UInt8((EModel.mos(rating: rating) * 10).rounded()))
        #expect(block.receiverConfiguration == 0b1011_0000)  // enhanced PLC, adaptive jitter buffer
        #expect(block.jitterBufferNominal == 40 && block.jitterBufferMaximum == 95 && block.jitterBufferAbsoluteMaximum == 200)
        // Through the RTCP codec and back.
        let xr = RTCPExtendedReport(ssrc: 1, blocks: [.voipMetrics(block)])
        let compound = RTCPCompoundPacket(packets: [.extendedReport(xr)])
        let parsed = try RTCPCompoundPacket(parsing: try #require(compound.serialized()), requireLeadingReport: false)
        #expect(parsed == compound)
    }
}

@Suite struct BurstGapReferenceTests {
    /// An offline reading of the definition: losses closer than gmin form groups; a group of two
    /// or more losses is a burst from its first to its last loss, a lone loss is a gap loss.
    static func reference(_ lossFlags: [Bool], gmin: Int) -> (bursts: Int, burstPackets: Int, burstLosses: Int, gapPackets: Int, gapLosses: Int) {
        let losses = lossFlags.indices.filter { lossFlags[$0] }
        var groups: [[Int]] = []
        for i in losses {
            if let last = groups.last?.last, i - last - 1 < gmin { groups[groups.count - 1].append(i) } else { groups.append([i]) }
        }
        var r = (bursts: 0, burstPackets: 0, burstLosses: 0, gapPackets: 0, gapLosses: 0)
        for g in groups where g.count >= 2 {
            r.bursts += 1
            r.burstPackets += g.last! - g.first! + 1
            r.burstLosses += g.count
        }
        r.gapPackets = lossFlags.count - r.burstPackets
        r.gapLosses = losses.count - r.burstLosses
        return r
    }

    @Test(arguments: [1, 4, 16] as [Int])
    func matchesTheDefinitionOnRandomPatterns(gmin: Int) {
        var rng = TestRandom(seed: UInt64(gmin))
        for _ in 0..<300 {
            let n = Int.random(in: 0...400, using: &rng)
            let p = Double.random(in: 0...0.3, using: &rng)
            var losing = false
            let flags = (0..<n).map { _ -> Bool in
                losing = Double.random(in: 0..<1, using: &rng) < (losing ? 0.5 : p)
                return losing
            }
            var m = BurstGapMetrics(gmin: gmin)
            for f in flags { m.record(f ? (Bool.random(using: &rng) ? .lost : .discarded) : .received) }
            let ref = Self.reference(flags, gmin: gmin)
            #expect(m.burstCount == ref.bursts)
            #expect(abs(m.burstDensity - (ref.burstPackets > 0 ? Double(ref.burstLosses) / Double(ref.burstPackets) : 0)) < 1e-12)
            #expect(abs(m.gapDensity - (ref.gapPackets > 0 ? Double(ref.gapLosses) / Double(ref.gapPackets) : 0)) < 1e-12)
            #expect(abs(m.meanGapPackets - Double(ref.gapPackets) / Double(ref.bursts + 1)) < 1e-9)
            #expect(m.lost + m.discarded == flags.filter { $0 }.count && m.packets == n)
        }
    }
}
