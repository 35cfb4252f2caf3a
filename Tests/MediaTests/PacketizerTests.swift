import Testing
import RTP
@testable import Media

@Suite struct PacketizerTests {
    @Test func sequenceTimestampAndMarker() throws {
        var p = RTPPacketizer(payloadType: 0, clockRate: 8000, frameDuration: .milliseconds(20), ssrc: 0xDEAD_BEEF,
                              firstSequenceNumber: 65534, firstTimestamp: UInt32.max - 159)
        #expect(p.samplesPerFrame == 160)
        let a = p.packetize([1, 2, 3])
        let b = p.packetize([4])
        #expect(a.marker && !b.marker)
        #expect(a.sequenceNumber == 65534 && b.sequenceNumber == 65535)
        #expect(a.timestamp == UInt32.max - 159 && b.timestamp == 0)  // wraps
        #expect(a.ssrc == 0xDEAD_BEEF && a.payloadType == 0 && Array(a.payload) == [1, 2, 3])
        // Three silent frames not sent: timestamps advance, sequence numbers do not, marker next.
        p.skip(frames: 3)
        let c = p.packetize([5])
        #expect(c.marker && c.sequenceNumber == 0 && c.timestamp == 160 * 4)
        #expect(!p.packetize([6]).marker)
        #expect(p.packetsSent == 4 && p.bytesSent == 6)
        // Serializes as a valid RTP packet.
        let bytes = c.serialized()!
        #expect(try RTPPacket(parsing: bytes) == c)
    }

    @Test func opusAt48kHzAnd10msFrames() {
        var p = RTPPacketizer(payloadType: 111, clockRate: 48000, frameDuration: .milliseconds(10), ssrc: 1, firstSequenceNumber: 0, firstTimestamp: 0)
        _ = p.packetize([0])
        #expect(p.nextTimestamp == 480)
    }

    @Test func dtmfSharesTheSequenceSpace() throws {
        var p = RTPPacketizer(payloadType: 8, clockRate: 8000, frameDuration: .milliseconds(20), ssrc: 5, firstSequenceNumber: 10, firstTimestamp: 1000)
        _ = p.packetize([0])
        let base = p.nextTimestamp
        let schedule = try DTMFSender().schedule("1")
        let packets = schedule.map { p.packet($0, payloadType: 101, timestampBase: base) }
        #expect(packets.map(\.sequenceNumber) == Array(11...17))
        #expect(packets.allSatisfy { $0.timestamp == 1160 && $0.payloadType == 101 })
        #expect(packets.first!.marker && packets.dropFirst().allSatisfy { !$0.marker })
        #expect(p.nextTimestamp == base)  // the audio clock is not moved by events
        // The receiver decodes the digit from these packets.
        var r = DTMFReceiver()
        var out: [DTMFReceiver.Output] = []
        for (i, pk) in packets.enumerated() { out += try r.receive(pk, arrival: .milliseconds(20 * i)) }
        #expect(out.count == 2 && out.last == .ended(ReceivedDTMF(event: 1, timestamp: 1160, duration: 800, volume: 10, endReceived: true)))
    }

    @Test func randomStartingValuesComeFromTheGenerator() {
        var r1 = TestRandom(seed: 1), r2 = TestRandom(seed: 1), r3 = TestRandom(seed: 2)
        let a = RTPPacketizer(payloadType: 0, clockRate: 8000, frameDuration: .milliseconds(20), using: &r1)
        let b = RTPPacketizer(payloadType: 0, clockRate: 8000, frameDuration: .milliseconds(20), using: &r2)
        let c = RTPPacketizer(payloadType: 0, clockRate: 8000, frameDuration: .milliseconds(20), using: &r3)
        #expect(a.ssrc == b.ssrc && a.nextSequenceNumber == b.nextSequenceNumber && a.nextTimestamp == b.nextTimestamp)
        #expect(a.ssrc != c.ssrc)
        // The system CSPRNG: two packetizers differ (a collision of all three 80 bits is not a concern).
        let x = RTPPacketizer(payloadType: 0, clockRate: 8000, frameDuration: .milliseconds(20))
        let y = RTPPacketizer(payloadType: 0, clockRate: 8000, frameDuration: .milliseconds(20))
        #expect(x.ssrc != y.ssrc || x.nextSequenceNumber != y.nextSequenceNumber || x.nextTimestamp != y.nextTimestamp)
        var z = x
        var rng = TestRandom(seed: 3)
        z.changeSSRC(using: &rng)
        #expect(z.ssrc != x.ssrc && z.nextSequenceNumber == x.nextSequenceNumber)
        #expect(z.packetize([]).marker)
    }

    @Test func mediaClock() {
        let c = MediaClock(clockRate: 8000, start: .seconds(100), baseTimestamp: UInt32.max - 7999)
        #expect(c.timestamp(at: .seconds(100)) == UInt32.max - 7999)
        #expect(c.timestamp(at: .seconds(101)) == 0)
        #expect(c.timestamp(at: .seconds(100) + .microseconds(125)) == UInt32.max - 7998)
        #expect(c.time(of: 800) == .seconds(101) + .milliseconds(100))
        #expect(c.time(of: UInt32.max - 8799) == .seconds(99) + .milliseconds(900))
    }
}

@Suite struct LatchTests {
    typealias Latch = SymmetricRTPLatch<String>

    @Test func latchesAfterTwoConsecutivePackets() {
        var l = Latch(signalledAddress: "10.0.0.1:4000", payloadTypes: [0, 101])
        #expect(l.destination == "10.0.0.1:4000")
        #expect(l.observe(from: "203.0.113.5:61000", ssrc: 9, sequenceNumber: 100, payloadType: 0, at: .zero) == .accept)
        #expect(l.latchedAddress == nil)
        #expect(l.observe(from: "203.0.113.5:61000", ssrc: 9, sequenceNumber: 101, payloadType: 0, at: .milliseconds(20)) == .latched("203.0.113.5:61000"))
        #expect(l.destination == "203.0.113.5:61000")
        #expect(l.observe(from: "203.0.113.5:61000", ssrc: 9, sequenceNumber: 102, payloadType: 101, at: .milliseconds(40)) == .accept)
    }

    @Test func strayAndInvalidPacketsDoNotLatch() {
        var l = Latch(signalledAddress: "a", payloadTypes: [8], expectedSSRC: 77)
        #expect(l.observe(from: "x", ssrc: 77, sequenceNumber: 1, payloadType: 0, at: .zero) == .refuse)  // wrong payload type
        #expect(l.observe(from: "x", ssrc: 78, sequenceNumber: 2, payloadType: 8, at: .zero) == .refuse)  // wrong SSRC
        // Interleaved sources never reach two consecutive.
        #expect(l.observe(from: "x", ssrc: 77, sequenceNumber: 3, payloadType: 8, at: .zero) == .accept)
        #expect(l.observe(from: "y", ssrc: 77, sequenceNumber: 4, payloadType: 8, at: .zero) == .accept)
        #expect(l.observe(from: "x", ssrc: 77, sequenceNumber: 5, payloadType: 8, at: .zero) == .accept)
        // A gap in sequence numbers restarts the count.
        #expect(l.observe(from: "x", ssrc: 77, sequenceNumber: 7, payloadType: 8, at: .zero) == .accept)
        #expect(l.latchedAddress == nil)
        #expect(l.observe(from: "x", ssrc: 77, sequenceNumber: 8, payloadType: 8, at: .zero) == .latched("x"))
        #expect(l.refused == 2)
    }

    @Test func latchedSourceIsKeptUntilSilentThenAnotherMayTakeOver() {
        var l = Latch(signalledAddress: nil, payloadTypes: [0])
        _ = l.observe(from: "a", ssrc: 1, sequenceNumber: 1, payloadType: 0, at: .zero)
        #expect(l.observe(from: "a", ssrc: 1, sequenceNumber: 2, payloadType: 0, at: .milliseconds(20)) == .latched("a"))
        // An attacker sending valid-looking packets while the peer talks: refused.
        for i in 0..<10 {
            #expect(l.observe(from: "evil", ssrc: 5, sequenceNumber: UInt16(i), payloadType: 0, at: .milliseconds(30 + 20 * i)) == .refuse)
            #expect(l.observe(from: "a", ssrc: 1, sequenceNumber: UInt16(3 + i), payloadType: 0, at: .milliseconds(40 + 20 * i)) == .accept)
        }
        #expect(l.destination == "a" && l.refused == 10)
        // The peer's NAT rebinds: after two seconds of silence from "a", "b" is latched.
        #expect(l.observe(from: "b", ssrc: 1, sequenceNumber: 100, payloadType: 0, at: .seconds(1)) == .refuse)
        // A challenger's packets are not delivered until it wins.
        #expect(l.observe(from: "b", ssrc: 1, sequenceNumber: 101, payloadType: 0, at: .seconds(3)) == .refuse)
        #expect(l.latchedAddress == "a")
        #expect(l.observe(from: "b", ssrc: 1, sequenceNumber: 102, payloadType: 0, at: .milliseconds(3020)) == .latched("b"))
        #expect(l.destination == "b")
        #expect(l.observe(from: "a", ssrc: 1, sequenceNumber: 13, payloadType: 0, at: .milliseconds(3040)) == .refuse)
    }

    @Test func worksWithParsedPackets() throws {
        var l = Latch(signalledAddress: "sdp", payloadTypes: [0], requiredPackets: 1)
        let p = RTPPacket(payloadType: 0, sequenceNumber: 1, timestamp: 0, ssrc: 3, payload: [1])
        #expect(l.observe(p, from: "nat", at: .zero) == .latched("nat"))
    }
}
