import Testing
@testable import RTP

/// The RFC 3550 A.8 reference computation, written out plainly for comparison:
/// `transit = arrival - ts; d = transit - prev; if d < 0 { d = -d }; J += d - ((J + 8) >> 4)`,
/// with J held scaled by 16 (integer arithmetic), and the floating form J += (|D| - J) / 16.
struct ReferenceJitter {
    var previousTransit: Int? = nil
    var scaled: Int = 0
    var floating: Double = 0

    mutating func add(timestamp: Int, arrival: Int) {
        let transit = arrival - timestamp
        defer { previousTransit = transit }
        guard let prev = previousTransit else { return }
        var d = transit - prev
        if d < 0 { d = -d }
        scaled += d - ((scaled + 8) >> 4)
        floating += (Double(d) - floating) / 16
    }

    var reported: Int { scaled >> 4 }
}

/// `update(sequence:)` and `closeInterval()` as free functions, usable inside `#expect`.
func step(_ s: inout SourceState, _ seq: UInt16) -> Bool { s.update(sequence: seq) }
func close(_ s: inout SourceState) -> UInt8 { s.closeInterval() }

@Suite struct SourceStateTests {
    @Test func probationOfNewSource() {
        var s = SourceState(ssrc: 1, firstSequence: 100)
        #expect(!s.isValid)
        #expect(step(&s, 100) == false)
        #expect(s.probation == 1)
        #expect(step(&s, 101) == true)
        #expect(s.isValid)
        #expect(s.baseSeq == 101)
        #expect(s.received == 1)
        #expect(s.expected == 1)
    }

    @Test func probationRestartsOnGap() {
        var s = SourceState(ssrc: 1, firstSequence: 100)
        #expect(!step(&s, 100))
        #expect(!step(&s, 105))  // not sequential: probation back to MIN_SEQUENTIAL - 1
        #expect(s.probation == 1)
        #expect(step(&s, 106))
        #expect(s.isValid)
        #expect(s.baseSeq == 106)
    }

    @Test func longerProbation() {
        var s = SourceState(ssrc: 1, firstSequence: 10, minSequential: 4)
        #expect(!step(&s, 10))
        #expect(!step(&s, 11))
        #expect(!step(&s, 12))
        #expect(step(&s, 13))
        #expect(s.baseSeq == 13)
    }

    @Test func wrapAroundCountsCycles() {
        var s = SourceState(ssrc: 1, firstSequence: 65534)
        s.update(sequence: 65534)
        #expect(step(&s, 65535))
        #expect(step(&s, 0))
        #expect(s.cycles == 1)
        #expect(s.extendedHighestSequence == 65536)
        #expect(step(&s, 1))
        #expect(s.extendedHighestSequence == 65537)
        #expect(s.expected == 3)
        #expect(s.received == 3)
        #expect(s.cumulativeLost == 0)
        // three full turns more
        var seq: UInt16 = 1
        for _ in 0..<(3 * 65536) {
            seq &+= 1
            s.update(sequence: seq)
        }
        #expect(s.cycles == 4)
        #expect(s.extendedHighestSequence == 4 * 65536 + 1)
        #expect(s.cumulativeLost == 0)
    }

    @Test func wrapAroundWithLossAcrossZero() {
        var s = SourceState(ssrc: 1, firstSequence: 65530)
        s.update(sequence: 65530)
        s.update(sequence: 65531)
        s.update(sequence: 65535)  // lost 65532–65534
        s.update(sequence: 2)  // lost 0, 1
        #expect(s.cycles == 1)
        #expect(s.extendedHighestSequence == 65536 + 2)
        #expect(s.expected == 65538 - 65531 + 1)
        #expect(s.received == 3)
        #expect(s.cumulativeLost == 5)
    }

    @Test func lossAndFractionLost() {
        var s = SourceState(ssrc: 9, firstSequence: 1000)
        s.update(sequence: 1000)
        let missing: Set<UInt16> = [1010, 1020, 1030, 1040, 1050]
        for seq in UInt16(1001)...1100 where !missing.contains(seq) { s.update(sequence: seq) }
        #expect(s.expected == 100)
        #expect(s.received == 95)
        #expect(s.cumulativeLost == 5)
        let block = s.makeReportBlock(lastSR: 0x1234_5678, delaySinceLastSR: 0x10000)
        #expect(block.fractionLost == 12)  // 5 · 256 / 100 = 12.8, truncated
        #expect(block.cumulativeLost == 5)
        #expect(block.extendedHighestSequence == 1100)
        #expect(block.ssrc == 9)
        #expect(block.lastSR == 0x1234_5678)
        #expect(block.delaySinceLastSR == 0x10000)
        // a clean interval
        for seq in UInt16(1101)...1150 { s.update(sequence: seq) }
        #expect(close(&s) == 0)
        #expect(s.cumulativeLost == 5)
        // half lost
        for seq in stride(from: UInt16(1152), through: 1250, by: 2) { s.update(sequence: seq) }
        #expect(close(&s) == 128)
        // an empty interval
        #expect(close(&s) == 0)
    }

    @Test func duplicatesMakeLossNegative() {
        var s = SourceState(ssrc: 1, firstSequence: 1)
        s.update(sequence: 1)
        s.update(sequence: 2)
        s.update(sequence: 3)
        s.update(sequence: 3)
        s.update(sequence: 2)
        #expect(s.received == 4)
        #expect(s.expected == 2)
        #expect(s.cumulativeLost == -2)
        #expect(close(&s) == 0)
    }

    @Test func misorderedPacketsCountButKeepMax() {
        var s = SourceState(ssrc: 1, firstSequence: 500)
        s.update(sequence: 500)
        s.update(sequence: 501)
        s.update(sequence: 503)
        #expect(step(&s, 502))
        #expect(s.maxSeq == 503)
        #expect(s.cumulativeLost == 0)
    }

    @Test func largeJumpNeedsTwoSequentialPacketsToResync() {
        var s = SourceState(ssrc: 1, firstSequence: 1000)
        s.update(sequence: 1000)
        s.update(sequence: 1001)
        #expect(!step(&s, 20000))  // bad_seq = 20001
        #expect(s.badSeq == 20001)
        #expect(s.maxSeq == 1001)
        #expect(step(&s, 20001))  // the source restarted: statistics reset
        #expect(s.baseSeq == 20001)
        #expect(s.received == 1)
        #expect(s.expected == 1)
        // a single stray jump does not reset
        #expect(!step(&s, 40000))
        #expect(step(&s, 20002))
        #expect(s.baseSeq == 20001)
    }

    @Test func jitterMatchesReferenceOnSyntheticArrivals() {
        var rng = SplitMix64(seed: 42)
        var s = SourceState(ssrc: 1, firstSequence: 0)
        var ref = ReferenceJitter()
        for i in 0..<2000 {
            let ts = 160 * i
            var delay = Int(rng.next() % 400)
            if i % 97 == 0 { delay += 2000 }  // spikes
            let arrival = 50_000 + ts + delay
            s.updateJitter(timestamp: UInt32(ts), arrival: UInt32(arrival))
            ref.add(timestamp: ts, arrival: arrival)
            #expect(Int(s.scaledJitter) == ref.scaled)
            #expect(Int(s.jitter) == ref.reported)
            #expect(abs(Double(s.jitter) - ref.floating) <= 1.5)
        }
        #expect(s.jitter > 0)
    }

    @Test func jitterIsUnaffectedByTimestampWrapAndOffsets() {
        var a = SourceState(ssrc: 1, firstSequence: 0)
        var b = SourceState(ssrc: 1, firstSequence: 0)
        var rng = SplitMix64(seed: 7)
        let offset: UInt32 = 0xFFFF_F000  // b's timestamps and clock wrap during the run
        for i in 0..<500 {
            let ts = UInt32(160 * i)
            let arrival = ts &+ UInt32(rng.next() % 300)
            a.updateJitter(timestamp: ts, arrival: arrival)
            b.updateJitter(timestamp: ts &+ offset, arrival: arrival &+ 0x8000_0000)
        }
        #expect(a.scaledJitter == b.scaledJitter)
    }

    @Test func constantDelayHasNoJitter() {
        var s = SourceState(ssrc: 1, firstSequence: 0)
        for i in 0..<100 { s.updateJitter(timestamp: UInt32(i * 160), arrival: UInt32(i * 160 + 1234)) }
        #expect(s.jitter == 0)
    }

    @Test func jitterFromDurations() {
        var units = SourceState(ssrc: 1, firstSequence: 0)
        var durations = SourceState(ssrc: 1, firstSequence: 0)
        var rng = SplitMix64(seed: 3)
        for i in 0..<300 {
            let ts = UInt32(160 * i)
            let ms = 20 * i + Int(rng.next() % 50)  // 8 units per ms at 8 kHz
            units.updateJitter(timestamp: ts, arrival: UInt32(ms * 8))
            durations.updateJitter(timestamp: ts, arrival: .milliseconds(ms), clockRate: 8000)
        }
        #expect(units.scaledJitter == durations.scaledJitter)
        #expect(SourceState.timestampUnits(.milliseconds(1500), clockRate: 48000) == 72000)
        #expect(SourceState.timestampUnits(.seconds(100_000), clockRate: 90000) == UInt32(truncatingIfNeeded: 9_000_000_000))
    }

    @Test func ssrcTableDetectsCollisionsAndChanges() {
        var t = SSRCTable<String>(ownSSRCs: [0xAAAA: "me"])
        #expect(t.observe(ssrc: 1, from: "a") == .new)
        #expect(t.observe(ssrc: 1, from: "a") == .known)
        #expect(t.observe(ssrc: 1, from: "b") == .addressChanged(previous: "a"))
        #expect(t.observe(ssrc: 0xAAAA, from: "c") == .collisionWithOwnSSRC)
        #expect(t.observe(ssrc: 0xAAAA, from: "me") == .new)  // our own looped packet
        t.forget(ssrc: 1)
        #expect(t.observe(ssrc: 1, from: "b") == .new)
        #expect(t.count == 2)
    }
}
