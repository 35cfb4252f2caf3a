import Media
import SDP
import Synchronization
import SwitchboardTestSupport
import Testing

@testable import MediaRuntime

/// Quality warnings raised and cleared by real impairments between two sessions on sockets.
@Suite(.serialized) struct QualityWarningTests {
    /// Two PCMU sessions with RTCP every ~200 ms (a quality sample each), A's view of B through
    /// the relay.
    static func relayedCall(_ relay: ImpairingRelay) throws -> (MediaSession, MediaSession, Recorder) {
        let config = MediaSessionConfiguration(localAddress: "127.0.0.1", portRange: 10000...19999, codecs: [.pcmu], rtcpMux: true,
                                               rtcpInterval: .milliseconds(200))
        let recA = Recorder(rate: 8000)
        let a = try MediaSession(configuration: config, input: .tone(frequency: 440), output: recA.output, events: recA.sink)
        let b = try MediaSession(configuration: config, input: .tone(frequency: 1000))
        // Each side's SDP names the relay's socket facing the other side.
        var capsA = a.streamCapabilities()
        capsA.port = relay.portForB
        var capsB = b.streamCapabilities()
        capsB.port = relay.portForA
        var oaA = OfferAnswer(capabilities: MediaCapabilities(address: "127.0.0.1", streams: [capsA]), sessionID: 1)
        var oaB = OfferAnswer(capabilities: MediaCapabilities(address: "127.0.0.1", streams: [capsB]), sessionID: 2)
        let offer = try oaA.makeOffer()
        let answer = try oaB.receiveOffer(offer)
        let negotiatedA = try oaA.receiveAnswer(answer.sdp)
        relay.start(a: a.localPort, b: b.localPort)
        try b.apply(#require(answer.negotiated.audio))
        try a.apply(#require(negotiatedA.audio))
        return (a, b, recA)
    }

    static func qualityEvents(_ r: Recorder) -> [QualityEvent] {
        r.events.compactMap { if case .quality(let q) = $0 { return q } else { return nil } }
    }

    @Test("10% of the packets dropped raises the high-loss warning; without drops it clears", .timeLimit(.minutes(1)))
    func lossRaisedAndCleared() async throws {
        let relay = try ImpairingRelay()
        let (a, b, rec) = try Self.relayedCall(relay)
        defer {
            a.stop()
            b.stop()
            relay.stop()
        }
        // A clean second first: no loss warning.
        #expect(await waitUntil(seconds: 5) { a.stats().call.received.packets > 50 })
        try await Task.sleep(for: .milliseconds(1000))
        #expect(!Self.qualityEvents(rec).contains(.raised(.highPacketLoss)), "\(Self.qualityEvents(rec))")
        #expect(a.stats().call.packetsLost == 0)
        relay.set(.dropEvery(10))
        #expect(await waitUntil(seconds: 10) { Self.qualityEvents(rec).contains(.raised(.highPacketLoss)) }, "\(Self.qualityEvents(rec))")
        let lostWhileDropping = a.stats().call.packetsLost
        #expect(lostWhileDropping > 0 && Int(lostWhileDropping) <= relay.stats.dropped, "\(a.stats()) relay \(relay.stats)")
        #expect(!Self.qualityEvents(rec).contains(.cleared(.highPacketLoss)))
        relay.set(.none)
        #expect(await waitUntil(seconds: 10) { Self.qualityEvents(rec).contains(.cleared(.highPacketLoss)) }, "\(Self.qualityEvents(rec))")
        let events = Self.qualityEvents(rec)
        let raised = try #require(events.firstIndex(of: .raised(.highPacketLoss)))
        let cleared = try #require(events.firstIndex(of: .cleared(.highPacketLoss)))
        #expect(raised < cleared)
        #expect(events.filter { $0 == .raised(.highPacketLoss) }.count == 1, "no flapping: \(events)")
        // The loss A counted is what the relay dropped (a few may still be in flight).
        #expect(a.stats().call.packetsLost == Int64(relay.stats.dropped), "\(a.stats()) relay \(relay.stats)")
    }

    @Test("every other packet delayed by 80 ms raises the high-jitter warning; in time again it clears", .timeLimit(.minutes(1)))
    func jitterRaisedAndCleared() async throws {
        let relay = try ImpairingRelay()
        let (a, b, rec) = try Self.relayedCall(relay)
        defer {
            a.stop()
            b.stop()
            relay.stop()
        }
        #expect(await waitUntil(seconds: 5) { a.stats().call.received.packets > 50 })
        try await Task.sleep(for: .milliseconds(1000))
        #expect(!Self.qualityEvents(rec).contains(.raised(.highJitter)), "\(Self.qualityEvents(rec))")
        // Below the warning's threshold (a loaded machine adds a few milliseconds of its own).
        #expect(a.stats().call.jitter < .milliseconds(30), "\(a.stats())")
        relay.set(.delayEveryOther(.milliseconds(80)))
        #expect(await waitUntil(seconds: 10) { Self.qualityEvents(rec).contains(.raised(.highJitter)) }, "\(Self.qualityEvents(rec))")
        #expect(a.stats().call.jitter > .milliseconds(30), "\(a.stats())")
        #expect(!Self.qualityEvents(rec).contains(.cleared(.highJitter)))
        relay.set(.none)
        #expect(await waitUntil(seconds: 10) { Self.qualityEvents(rec).contains(.cleared(.highJitter)) }, "\(Self.qualityEvents(rec))")
        #expect(a.stats().call.jitter < .milliseconds(30), "\(a.stats())")
        #expect(relay.stats.delayed > 10, "\(relay.stats)")
    }

    /// A tone switched on and off every `period` samples: its level changes from one quality
    /// interval to the next, as speech does.
    struct Interrupted: AudioSource {
        var tone = ToneGenerator(frequency: 700, amplitude: 0.3, sampleRate: 8000)
        var position = 0
        let period = 2400
        var sampleRate: Int { 8000 }
        mutating func nextFrame(count: Int) -> [Int16]? {
            var frame = tone.next(count)
            for i in frame.indices where ((position + i) / period) % 2 == 1 { frame[i] = 0 }
            position += count
            return frame
        }
    }

    @Test("a constant input level (silence or a steady tone) raises the constant-audio warning; a varying input or mute clears it", .timeLimit(.minutes(1)))
    func constantInputLevel() async throws {
        let config = MediaSessionConfiguration(localAddress: "127.0.0.1", portRange: 10000...19999, codecs: [.pcmu],
                                               rtcpInterval: .milliseconds(100))
        let rec = Recorder(rate: 8000)
        let a = try MediaSession(configuration: config, input: .silence, events: rec.sink)
        let b = try MediaSession(configuration: config, input: .tone(frequency: 1000))
        defer {
            a.stop()
            b.stop()
        }
        try connect(a, b)
        // Digital silence: ten intervals at -120 dBFS.
        #expect(await waitUntil(seconds: 10) { Self.qualityEvents(rec).contains(.raised(.constantAudioInputLevel)) }, "\(Self.qualityEvents(rec))")
        // Speech-like on/off: the levels spread over more than 3 dB.
        a.setInput(Interrupted())
        #expect(await waitUntil(seconds: 10) { Self.qualityEvents(rec).contains(.cleared(.constantAudioInputLevel)) }, "\(Self.qualityEvents(rec))")
        // A steady tone is a constant level again.
        a.setInput(ToneGenerator(frequency: 700, amplitude: 0.3, sampleRate: 8000))
        #expect(await waitUntil(seconds: 10) { Self.qualityEvents(rec).filter { $0 == .raised(.constantAudioInputLevel) }.count == 2 },
                "\(Self.qualityEvents(rec))")
        // Muted, the input level means nothing: cleared.
        a.setMuted(true)
        #expect(await waitUntil(seconds: 10) { Self.qualityEvents(rec).filter { $0 == .cleared(.constantAudioInputLevel) }.count == 2 },
                "\(Self.qualityEvents(rec))")
    }
}
