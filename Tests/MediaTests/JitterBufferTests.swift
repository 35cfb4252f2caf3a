import Testing
@testable import Media

@Suite struct JitterBufferTests {
    static func packet(_ i: Int, seq0: UInt16 = 100, ts0: UInt32 = 1000, ssrc: UInt32 = 7, samples: UInt32 = 160) -> JitterBufferPacket {
        JitterBufferPacket(sequenceNumber: seq0 &+ UInt16(truncatingIfNeeded: i), timestamp: ts0 &+ UInt32(truncatingIfNeeded: i) &* samples,
                           ssrc: ssrc, payload: [UInt8(truncatingIfNeeded: i)])
    }

    static func at(_ ms: Double) -> Duration { .nanoseconds(Int64((ms * 1e6).rounded())) }

    @Test func emptyBeforeAnyPacket() {
        var b = JitterBuffer()
        #expect(b.pull(at: .zero) == .empty)
        #expect(b.pull(at: .milliseconds(20)) == .empty)
        #expect(b.statistics.received == 0 && b.statistics.buffered == 0 && b.statistics.concealed == 0)
        #expect(b.nextPacket == nil)
    }

    @Test func steadyStreamPlaysEverythingInOrderAfterTheInitialDelay() {
        let r = replay(Pattern(count: 200, baseDelayMs: 30).arrivals(), pulls: 230)
        checkInvariants(r, distinctSent: 200, first: 1000)
        // No jitter: after a second at the initial 60 ms, the target falls to the minimum and the
        // delay follows it by dropping packets (one per adjustment interval at most).
        #expect(r.played.count + r.stats.dropped == 200)
        #expect(r.stats.dropped >= 1 && r.stats.dropped <= 2)
        #expect(r.stats.late == 0 && r.stats.lost == 0 && r.lostFrames.isEmpty && r.stats.stretched == 0, "\(r.stats) \(r.delays) \(r.frames.enumerated().filter { $0.element.frame == .stretch }.map(\.offset))")
        #expect(ms(r.stats.targetDelay) == 20)
        #expect(r.delays.suffix(50).allSatisfy { $0 >= 19 && $0 <= 41 }, "\(r.delays.suffix(50))")
        // Prebuffering: silence until the first packet has waited the initial delay.
        guard case .audio(let first) = r.frames.first(where: { if case .audio = $0.frame { true } else { false } })?.frame else {
            Issue.record("nothing played"); return
        }
        #expect(first.sequenceNumber == 1000)
    }

    @Test func reorderedPacketsPlayInSequence() {
        var arrivals = Pattern(count: 100, baseDelayMs: 20).arrivals()
        // Swap neighbours pairwise in arrival time, and delay every 10th by 45 ms more (65 ms in all: three packets overtake it).
        for i in stride(from: 2, to: 96, by: 2) { (arrivals[i].time, arrivals[i + 1].time) = (arrivals[i + 1].time, arrivals[i].time) }
        for i in stride(from: 10, to: 90, by: 10) { arrivals[i].time += .milliseconds(45) }
        let r = replay(arrivals, configuration: JitterBufferConfiguration(initialDelay: .milliseconds(80)), pulls: 130)
        checkInvariants(r, distinctSent: 100, first: 1000)
        #expect(r.played.count + r.stats.dropped == 100)
        #expect(r.stats.late == 0 && r.stats.lost == 0 && r.lostFrames.isEmpty, "\(r.stats) \(r.delays)")
    }

    @Test(arguments: [2, 4, 8])
    func reorderingWindows(window: Int) {
        var p = Pattern(count: 2000, jitterMs: 5)
        p.reorderWindow = window
        p.seed = UInt64(window)
        let arrivals = p.arrivals()
        let r = replay(arrivals, pulls: 2030)
        checkInvariants(r, distinctSent: 2000, first: 1000)
        // The buffer grows to the reordering depth (window − 1 frames) and loses nothing; late
        // packets only in the first second or two, while the initial 60 ms is too short.
        #expect(r.stats.lost == 0)
        #expect(Double(r.stats.late) / 2000 < 0.025, "\(r.stats)")
        let settled = r.frames[150..<1950].filter { if case .missing = $0.frame { true } else { false } }
        #expect(settled.isEmpty, "\(settled.count) frames missing after the start")
        #expect(ms(r.stats.targetDelay) >= Double(window - 1) * 20 - 5, "\(r.stats)")
        #expect(ms(r.stats.targetDelay) <= Double(window) * 20 + 10, "\(r.stats)")
    }

    @Test func duplicatesAreCountedAndPlayedOnce() {
        var arrivals = Pattern(count: 50).arrivals()
        arrivals += arrivals.map { Arrival(packet: $0.packet, time: $0.time + .milliseconds(3)) }
        // A duplicate of an already played packet, long after.
        arrivals.append(Arrival(packet: arrivals[0].packet, time: .milliseconds(900)))
        let r = replay(arrivals, pulls: 80)
        checkInvariants(r, distinctSent: 50, first: 1000)
        #expect(r.played.count + r.stats.dropped == 50)
        #expect(r.stats.duplicates == 51)
        #expect(r.stats.received == 101)
    }

    @Test func lostPacketIsReportedWithTheNextPacketForFEC() {
        var arrivals = Pattern(count: 40).arrivals()
        arrivals.removeAll { $0.packet.sequenceNumber == 1020 }
        let r = replay(arrivals, pulls: 60)
        checkInvariants(r, distinctSent: 40, first: 1000)
        #expect(r.lostFrames.count == 1)
        let m = r.lostFrames[0]
        #expect(m.sequenceNumber == 1020 && m.reason == .lost)
        #expect(m.timestamp == 5000 + 20 * 160)
        #expect(m.next?.sequenceNumber == 1021)
        #expect(r.stats.lost == 1 && r.stats.late == 0)
        // The frame after the missing one is the packet itself, in its slot.
        let i = r.frames.firstIndex { if case .missing = $0.frame { true } else { false } }!
        #expect(r.frames[i + 1].frame == .audio(arrivals.first { $0.packet.sequenceNumber == 1021 }!.packet))
    }

    @Test func twoConsecutiveLossesOfferNoFECForTheFirst() {
        var arrivals = Pattern(count: 40).arrivals()
        arrivals.removeAll { $0.packet.sequenceNumber == 1020 || $0.packet.sequenceNumber == 1021 }
        let r = replay(arrivals, pulls: 60)
        checkInvariants(r, distinctSent: 40, first: 1000)
        #expect(r.lostFrames.map(\.sequenceNumber) == [1020, 1021])
        #expect(r.lostFrames[0].next == nil)
        #expect(r.lostFrames[1].next?.sequenceNumber == 1022)
        #expect(r.stats.lost == 2)
    }

    @Test func latePacketIsDroppedAndNotCountedLost() {
        var arrivals = Pattern(count: 40).arrivals()
        let i = arrivals.firstIndex { $0.packet.sequenceNumber == 1020 }!
        arrivals[i].time += .milliseconds(400)
        let r = replay(arrivals, pulls: 70)
        checkInvariants(r, distinctSent: 40, first: 1000)
        #expect(r.lostFrames.map(\.sequenceNumber) == [1020])
        #expect(r.stats.late == 1)
        #expect(r.stats.lost == 0)
        #expect(!r.played.contains(1020))
    }

    @Test func sequenceAndTimestampWrapAround() {
        var p = Pattern(count: 200, firstSequence: 65_500, firstTimestamp: UInt32.max - 160 * 50 + 7)
        p.jitterMs = 10
        p.seed = 3
        var arrivals = p.arrivals()
        arrivals.removeAll { $0.packet.sequenceNumber == 2 }  // lost right after the wrap
        let r = replay(arrivals, pulls: 240)
        checkInvariants(r, distinctSent: 200, first: 65_500)
        #expect(r.played.count + r.stats.dropped == 199)
        #expect(r.lostFrames.map(\.sequenceNumber) == [2])
        #expect(r.played.contains(65_535) && r.played.contains(0))
        #expect(r.stats.late == 0)
    }

    @Test func ssrcChangeResetsAndOldSourceIsIgnored() {
        var b = JitterBuffer()
        var t = 0.0
        var played: [UInt32] = []
        for i in 0..<30 {
            #expect(b.insert(Self.packet(i, ssrc: 1), arrival: Self.at(t)) == .accepted)
            if case .audio(let p) = b.pull(at: Self.at(t)) { played.append(p.ssrc) }
            t += 20
        }
        // The new source starts with unrelated numbers.
        #expect(b.insert(Self.packet(0, seq0: 40_000, ts0: 9_999_999, ssrc: 2), arrival: Self.at(t)) == .restarted)
        #expect(b.statistics.resets == 1)
        #expect(b.statistics.buffered == 1)
        // A straggler of the old source.
        #expect(b.insert(Self.packet(30, ssrc: 1), arrival: Self.at(t + 1)) == .foreign)
        #expect(b.statistics.foreign == 1)
        var newPlayed: [UInt16] = []
        for i in 0..<40 {
            if i > 0 { b.insert(Self.packet(i, seq0: 40_000, ts0: 9_999_999, ssrc: 2), arrival: Self.at(t)) }
            if case .audio(let p) = b.pull(at: Self.at(t)) {
                #expect(p.ssrc == 2)
                newPlayed.append(p.sequenceNumber)
            }
            t += 20
        }
        #expect(played.count >= 25 && played.allSatisfy { $0 == 1 })
        #expect(newPlayed.first == 40_000)
        #expect(zip(newPlayed, newPlayed.dropFirst()).allSatisfy { $0 < $1 })
        #expect(newPlayed.count + b.statistics.dropped >= 35)
        #expect(b.statistics.lost == 0)
    }

    @Test(arguments: [-400_000, 400_000] as [Int64])
    func timestampJumpKeepsTheStreamPlaying(jump: Int64) {
        // The sender's timestamps jump by ±50 s at packet 200, sequence numbers continue.
        var arrivals = Pattern(count: 400, jitterMs: 10).arrivals()
        for i in 200..<400 {
            arrivals[i].packet.timestamp = UInt32(truncatingIfNeeded: Int64(arrivals[i].packet.timestamp) + jump)
        }
        let r = replay(arrivals, pulls: 430)
        // Before and after the jump the stream plays; a few frames around it may be lost to the restart.
        let before = r.played.filter { $0 < 1200 }.count
        let after = r.played.filter { $0 >= 1200 }.count
        #expect(before >= 190 && after >= 185, "\(before) \(after) \(r.stats)")
        #expect(zip(r.played, r.played.dropFirst()).allSatisfy { $0 < $1 })
        #expect(r.stats.resets == 1)
        #expect(r.stats.maxDelay <= .milliseconds(220))
    }

    @Test func aStragglerSecondsLateIsNotAClockJump() {
        var arrivals = Pattern(count: 400, jitterMs: 10).arrivals()
        arrivals[150].time += .seconds(3)
        let r = replay(arrivals, pulls: 430)
        checkInvariants(r, distinctSent: 400, first: 1000)
        #expect(r.stats.resets == 0)
        #expect(r.stats.late == 1 && r.stats.lost == 0)
        #expect(r.lostFrames.map(\.sequenceNumber) == [1150])
    }

    @Test func sequenceJumpRestarts() {
        var b = JitterBuffer()
        for i in 0..<10 { b.insert(Self.packet(i), arrival: Self.at(Double(i) * 20)) }
        #expect(b.insert(Self.packet(0, seq0: 30_000, ts0: 500), arrival: Self.at(200)) == .restarted)
        #expect(b.statistics.resets == 1 && b.statistics.buffered == 1)
        #expect(b.nextPacket?.sequenceNumber == 30_000)
    }

    @Test(arguments: [0.005, -0.005, 0.02, -0.02])
    func clockDriftNeitherGrowsNorStarves(skew: Double) {
        // Three minutes of continuous audio: an uncorrected 0.5% drift would add or remove 900 ms.
        var p = Pattern(count: 9000, baseDelayMs: 40, jitterMs: 20)
        p.skew = skew
        p.seed = 11
        let arrivals = p.arrivals()
        let pulls = Int(9000.0 / (1 + skew)) + 20
        let r = replay(arrivals, pulls: pulls)
        checkInvariants(r, distinctSent: 9000, first: 1000)
        let tail = r.delays.suffix(r.delays.count - 500)
        #expect(tail.max()! <= 200 + 20, "delay grew to \(tail.max()!) ms")
        #expect(Double(r.stats.late) / 9000 < 0.02, "late \(r.stats.late)")
        let drift = abs(skew) * 180 * 1000 / 20  // frames of drift over three minutes
        if skew > 0 {
            #expect(Double(r.stats.dropped) >= drift * 0.8 && Double(r.stats.dropped) <= drift * 1.3 + 5, "dropped \(r.stats.dropped), drift \(drift) frames")
        } else {
            let grown = Double(r.stats.stretched)
            #expect(grown >= drift * 0.8 && grown <= drift * 1.3 + 5, "stretched \(r.stats.stretched), drift \(drift) frames")
        }
        #expect(Double(r.stats.concealed) / 9000 < 0.02, "concealed \(r.stats.concealed)")
        #expect(abs(r.stats.clockDrift + skew) < 0.002, "estimated drift \(r.stats.clockDrift)")
    }

    @Test func targetDelayFollowsTheMeasuredJitter() {
        func target(jitter: Double) -> Double {
            var p = Pattern(count: 1000, jitterMs: jitter)
            p.seed = 5
            let r = replay(p.arrivals(), pulls: 1020)
            checkInvariants(r, distinctSent: 1000, first: 1000)
            return ms(r.stats.targetDelay)
        }
        #expect(target(jitter: 0) == 20)       // the minimum
        let t60 = target(jitter: 60)
        #expect(t60 >= 50 && t60 <= 62, "\(t60)")  // ≈ the 97th percentile of U(0, 60)
        let t120 = target(jitter: 120)
        #expect(t120 >= 105 && t120 <= 122, "\(t120)")
        #expect(target(jitter: 600) == 200)    // the maximum
    }

    @Test(arguments: [20.0, 60.0, 100.0])
    func uniformJitterKeepsLateFramesRare(jitter: Double) {
        var p = Pattern(count: 3000, jitterMs: jitter)
        p.seed = 17
        let r = replay(p.arrivals(), pulls: 3030)
        checkInvariants(r, distinctSent: 3000, first: 1000)
        let lateRate = Double(r.stats.late) / 3000
        #expect(lateRate < 0.04, "late \(r.stats.late)")
        #expect(r.stats.lost == 0)
        #expect(r.played.count + r.stats.dropped + r.stats.late == 3000)
        #expect(r.stats.maxDelay <= .milliseconds(220))
    }

    @Test func burstyLossIsConcealed() {
        var p = Pattern(count: 3000, jitterMs: 30)
        p.lossEnter = 0.02
        p.lossStay = 0.6
        p.seed = 23
        let arrivals = p.arrivals()
        let networkLost = 3000 - arrivals.count
        #expect(networkLost > 60)
        let r = replay(arrivals, pulls: 3030)
        checkInvariants(r, distinctSent: 3000, first: 1000)
        #expect(r.stats.lost == networkLost)
        // A burst longer than the buffer's depth empties it: those frames are underruns.
        #expect(Double(r.missing.count) >= Double(networkLost) * 0.9, "\(r.missing.count) concealed of \(networkLost)")
        #expect(r.lostFrames.count >= 10)
        let fec = r.missing.filter { $0.next != nil }
        #expect(fec.allSatisfy { $0.next!.sequenceNumber == $0.sequenceNumber &+ 1 })
        #expect(!fec.isEmpty)
    }

    @Test(arguments: [1.0, 3.0])
    func longStallIsConcealedThenSkippedWithoutKeepingTheDelay(seconds: Double) {
        var p = Pattern(count: 600, baseDelayMs: 30, jitterMs: 5)
        p.stall = (start: 4.0, duration: seconds)  // nothing arrives, then the whole burst at once
        let r = replay(p.arrivals(), pulls: 620)
        checkInvariants(r, distinctSent: 600, first: 1000)
        // The underrun is concealed for 100 ms, then silence.
        let underruns = r.frames.filter { JitterBuffer.seconds($0.time) < 10 }.compactMap { if case .missing(let m) = $0.frame, m.reason == .underrun { m } else { nil } }
        #expect(underruns.count == 5)
        #expect(r.stats.lost == 0)
        #expect(r.stats.resets == 0)
        // Most of the stale burst (50 packets a second) is skipped (late, or pushed out of the
        // full buffer) instead of being played seconds late.
        let stale = Int(seconds * 50)
        #expect(r.stats.late + r.stats.overflowed >= stale - 15, "\(r.stats)")
        #expect(r.played.count + r.stats.dropped <= 600 - stale + 15)
        // The delay never grows past the maximum and a frame, and is back under it at the end.
        #expect(r.delays.suffix(50).allSatisfy { $0 <= 200 })
        #expect(r.stats.maxDelay <= .milliseconds(220), "\(r.stats)")
    }

    @Test func silenceGapsAreNotLoss() {
        // Three talkspurts separated by 1 s of DTX silence (sequence numbers continue, timestamps jump).
        var arrivals: [Arrival] = []
        var seq: UInt16 = 10
        for spurt in 0..<3 {
            for i in 0..<50 {
                let tsIndex = spurt * 100 + i
                let sendMs = Double(tsIndex) * 20
                let p = JitterBufferPacket(sequenceNumber: seq, timestamp: 777 + UInt32(tsIndex) * 160, ssrc: 9, marker: i == 0, payload: [1])
                arrivals.append(Arrival(packet: p, time: Self.at(sendMs + 25 + Double((i * 7) % 13))))
                seq &+= 1
            }
        }
        let r = replay(arrivals, pulls: 330)
        checkInvariants(r, distinctSent: 150, first: 10)
        #expect(r.played.count + r.stats.dropped == 150, "\(r.stats)")
        #expect(r.stats.lost == 0 && r.lostFrames.isEmpty && r.stats.late == 0, "\(r.stats)")
        #expect(r.count { $0 == .silence } >= 95)
    }

    /// RFC 4733 digits in the middle of continuous audio: the events take sequence numbers but
    /// never reach the audio buffer, and the three end packets leave in one 20 ms tick, so the
    /// sequence gap is two more than the frames that passed. The audio after them starts a
    /// talkspurt (marker bit): it plays on time, nothing is late, and only the events' numbers
    /// count as missing.
    @Test(arguments: [2, 4, 8, 20])
    func audioAfterTelephoneEventsStartsATalkspurt(eventTicks: Int) {
        var arrivals: [Arrival] = []
        var seq: UInt16 = 500
        var tick = 0
        func audio(marker: Bool) {
            let p = JitterBufferPacket(sequenceNumber: seq, timestamp: 3000 + UInt32(tick) * 160, ssrc: 5, marker: marker, payload: [2])
            arrivals.append(Arrival(packet: p, time: Self.at(Double(tick) * 20 + 30 + Double((tick * 7) % 5))))
            seq &+= 1
            tick += 1
        }
        var eventNumbers = 0
        for round in 0..<3 {
            for i in 0..<50 { audio(marker: round == 0 && i == 0) }
            // Events: one packet per tick, the last tick three end packets; audio's timestamp
            // moves on by a frame per tick all the same.
            eventNumbers += eventTicks + 2
            seq &+= UInt16(eventTicks + 2)
            tick += eventTicks
            audio(marker: true)
        }
        let r = replay(arrivals, pulls: tick + 20)
        #expect(r.stats.late == 0, "\(r.stats)")
        #expect(r.stats.lost == eventNumbers, "\(r.stats)")
        #expect(r.played.count + r.stats.dropped == 153, "\(r.stats)")
        // Every audio packet after the events plays (none is skipped as late).
        let after = Set(r.played)
        #expect(arrivals.filter { $0.packet.marker }.allSatisfy { after.contains($0.packet.sequenceNumber) }, "\(r.played)")
    }

    @Test func nextPacketAndPrebuffering() {
        var b = JitterBuffer()
        #expect(b.pull(at: Self.at(10)) == .empty)
        // Packet 1 on time (media time 20 ms, arrival 20 ms), packet 0 25 ms late.
        b.insert(Self.packet(1), arrival: Self.at(20))
        b.insert(Self.packet(0), arrival: Self.at(25))
        #expect(b.nextPacket?.sequenceNumber == 100)
        // Prebuffering: silence until the fastest packet has waited the initial 60 ms.
        #expect(b.pull(at: Self.at(30)) == .silence)
        #expect(b.pull(at: Self.at(50)) == .silence)
        #expect(b.pull(at: Self.at(70)) == .audio(Self.packet(0)))
        #expect(b.nextPacket?.sequenceNumber == 101)
        #expect(b.pull(at: Self.at(90)) == .audio(Self.packet(1)))
        #expect(b.nextPacket == nil)
        // Then the buffer runs dry: concealed as underrun for 100 ms, then silence.
        let after = (0..<8).map { b.pull(at: Self.at(110 + 20 * Double($0))) }
        #expect(after.prefix(5).allSatisfy { if case .missing(let m) = $0 { m.reason == .underrun } else { false } })
        #expect(after.suffix(3).allSatisfy { $0 == .silence })
        #expect(b.statistics.concealed == 5 && b.statistics.lost == 0)
        b.reset()
        #expect(b.pull(at: Self.at(300)) == .empty)
    }

    @Test func observedPacketDuration() {
        var b = JitterBuffer()
        for i in 0..<3 { b.insert(Self.packet(i, samples: 480), arrival: Self.at(Double(i) * 60)) }
        #expect(b.statistics.observedFrameSamples == nil)  // two steps so far
        b.insert(Self.packet(3, samples: 480), arrival: Self.at(180))
        #expect(b.statistics.observedFrameSamples == 480)
        // A silence gap (a larger step) does not change it.
        b.insert(JitterBufferPacket(sequenceNumber: 104, timestamp: 1000 + 480 * 50, ssrc: 7, payload: []), arrival: Self.at(900))
        #expect(b.statistics.observedFrameSamples == 480)
    }

    @Test func opusDTXPacketsEvery400ms() {
        // Opus at 48 kHz: 2 s of speech, 4 s of DTX (one packet every 400 ms), 2 s of speech.
        var arrivals: [Arrival] = []
        var seq: UInt16 = 500
        var rng = TestRandom(seed: 4)
        func send(_ mediaMs: Int) {
            let p = JitterBufferPacket(sequenceNumber: seq, timestamp: 3_000_000 &+ UInt32(mediaMs * 48), ssrc: 3, payload: [0])
            arrivals.append(Arrival(packet: p, time: .milliseconds(mediaMs + 25 + Int.random(in: 0...15, using: &rng))))
            seq &+= 1
        }
        for i in 0..<100 { send(i * 20) }
        for k in 0..<10 { send(2000 + k * 400) }
        for i in 0..<100 { send(6000 + i * 20) }
        let c = JitterBufferConfiguration(clockRate: 48000)
        let r = replay(arrivals, configuration: c, pulls: 420)
        checkInvariants(r, distinctSent: 210, first: 500)
        #expect(r.played.count + r.stats.dropped == 210, "\(r.stats)")
        #expect(r.stats.lost == 0 && r.stats.late == 0 && r.stats.resets == 0)
        #expect(r.stats.observedFrameSamples == 960)
        // The DTX packets play about 400 ms apart, with silence (or a short concealment) between.
        #expect(r.count { $0 == .silence } >= 150)
    }

    @Test func overflowDropsTheOldest() {
        var b = JitterBuffer(configuration: JitterBufferConfiguration(capacity: 8))
        for i in 0..<12 { b.insert(Self.packet(i), arrival: .zero) }
        #expect(b.statistics.overflowed == 4)
        #expect(b.statistics.buffered == 8)
        #expect(b.nextPacket?.sequenceNumber == 104)
    }

    @Test func stretchWhenDelayIsShortOfTarget() {
        // A stream at exactly the minimum delay, then jitter appears: the target rises and the
        // buffer grows by inserting frames while audio plays.
        var arrivals = Pattern(count: 400, baseDelayMs: 10).arrivals()
        var rng = TestRandom(seed: 9)
        for i in 150..<400 { arrivals[i].time += .milliseconds(Int.random(in: 0...80, using: &rng)) }
        let r = replay(arrivals, pulls: 440)
        checkInvariants(r, distinctSent: 400, first: 1000)
        #expect(r.stats.stretched >= 2)
        #expect(ms(r.stats.targetDelay) > 60)
    }
}

@Suite struct JitterBufferRobustnessTests {
    /// Random and hostile input: arbitrary sequence numbers, timestamps, SSRCs and times (huge,
    /// negative, going backwards). Nothing traps, the buffer stays within its capacity, and
    /// within one SSRC no sequence number plays twice in a row of the same stream.
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func randomInput(seed: UInt64) {
        var rng = TestRandom(seed: seed)
        var b = JitterBuffer(configuration: JitterBufferConfiguration(capacity: 16))
        var time = Duration.zero
        var lastPlayed: (ssrc: UInt32, seq: UInt16)?
        var resets = 0
        for _ in 0..<20_000 {
            switch Int.random(in: 0..<10, using: &rng) {
            case 0: time = .seconds(Int64.random(in: -1_000_000_000...1_000_000_000, using: &rng))
            case 1: time += .milliseconds(Int.random(in: -50...50, using: &rng))
            default: time += .milliseconds(Int.random(in: 0...25, using: &rng))
            }
            if Bool.random(using: &rng) {
                let p = JitterBufferPacket(sequenceNumber: UInt16.random(in: 0...20, using: &rng) &+ (lastPlayed?.seq ?? 0),
                                           timestamp: UInt32.random(in: .min ... .max, using: &rng), ssrc: UInt32.random(in: 0...2, using: &rng),
                                           marker: Bool.random(using: &rng), payload: [])
                if b.insert(p, arrival: time) == .restarted { resets += 1; lastPlayed = nil }
            } else if case .audio(let p) = b.pull(at: time) {
                if let l = lastPlayed, l.ssrc == p.ssrc { #expect(p.sequenceNumber != l.seq) }
                lastPlayed = (p.ssrc, p.sequenceNumber)
            }
            #expect(b.statistics.buffered <= 16)
        }
        #expect(b.statistics.resets == resets)
        #expect(b.statistics.received > 5000)
    }

    @Test func absurdConfigurationIsTolerated() {
        let c = JitterBufferConfiguration(clockRate: 0, frameDuration: .zero, minDelay: .seconds(10), maxDelay: .zero, jitterQuantile: .nan,
                                          historySize: 0, minimumHistory: -1, maxConcealment: .seconds(-1), adjustmentInterval: 0, capacity: 0)
        var b = JitterBuffer(configuration: c)
        for i in 0..<200 {
            b.insert(JitterBufferPacket(sequenceNumber: UInt16(i), timestamp: UInt32(i), payload: []), arrival: .milliseconds(i))
            _ = b.pull(at: .milliseconds(i))
        }
        #expect(b.statistics.buffered <= 1)
    }
}

@Suite struct JitterEstimateTests {
    /// The target delay is the chosen quantile of the transit spread, checked against a plain
    /// sort. Both halves of the history share the same minimum, so the drift estimate is zero.
    @Test(arguments: [0.5, 0.9, 0.97, 1.0])
    func targetIsTheQuantileOfTheSpread(quantile: Double) {
        var rng = TestRandom(seed: UInt64(quantile * 1000))
        var extra = (0..<100).map { _ in Double(Int.random(in: 0...150_000, using: &rng)) / 1000 }  // ms, µs resolution
        extra[3] = 0
        extra[77] = 0
        let c = JitterBufferConfiguration(maxDelay: .milliseconds(500), jitterQuantile: quantile, historySize: 100, minimumHistory: 50)
        var b = JitterBuffer(configuration: c)
        for i in 0..<100 {
            let p = JitterBufferPacket(sequenceNumber: UInt16(i), timestamp: UInt32(i * 160), payload: [])
            b.insert(p, arrival: .microseconds(Int64((Double(i) * 20 + 40 + extra[i]) * 1000)))
        }
        _ = b.pull(at: .seconds(3))
        let sorted = extra.sorted()
        let expected = min(max(sorted[Int((99 * quantile).rounded(.up))], 20), 500)
        #expect(abs(ms(b.statistics.targetDelay) - expected) < 0.001, "\(ms(b.statistics.targetDelay)) vs \(expected)")
        #expect(b.statistics.clockDrift == 0)
    }
}
