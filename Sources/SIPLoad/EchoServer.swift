import Synchronization
import Logging
import NetworkIO
import SIPMessage
import SIPRuntime
import SIPTransport
import SIPDialog
import SDP
import Media
import MediaRuntime

/// `switchboard serve --echo`: an echo test line for many calls at once. The SIP side is the
/// dialog-layer ``DialogServer`` (no thread per call, one lock, O(1) work per message); every
/// INVITE with an SDP offer gets an answer from its own offer/answer engine and a
/// ``MediaSession`` in ``MediaAudioInput/echo`` mode that sends back what the caller sends. The
/// media stops at BYE, CANCEL, a missing ACK, or when no RTP arrived for the media timeout (the
/// server then sends BYE). Calls over the limit are refused (503 with Retry-After, or 486).
public final class EchoServer: Sendable {
    /// What the echo server does.
    public struct Options: Sendable {
        /// Media address, RTP port range, codecs (preference order), SRTP policy, RTCP interval.
        public var media: MediaSessionConfiguration
        /// Calls up at once; the next ones are refused.
        public var maxCalls: Int
        /// The refusal over the limit: 503 (with `Retry-After`) or 486.
        public var overLimitCode: Int
        /// The `Retry-After` seconds of a 503.
        public var retryAfter: Int
        /// A call whose media has carried nothing for this long is ended with BYE (checked at
        /// every ``tick()``); `nil` never.
        public var mediaTimeout: Duration?
        /// Send 180 Ringing before the 200.
        public var ringing: Bool

        /// Options: the media defaults (127.0.0.1, 20000–29999, Opus, PCMU, PCMA,
        /// telephone-event, no SRTP), 1000 calls, 503 with Retry-After 5, a 30 s media timeout.
        public init(media: MediaSessionConfiguration = MediaSessionConfiguration(), maxCalls: Int = 1000, overLimitCode: Int = 503,
                    retryAfter: Int = 5, mediaTimeout: Duration? = .seconds(30), ringing: Bool = false) {
            self.media = media
            self.maxCalls = maxCalls
            self.overLimitCode = overLimitCode
            self.retryAfter = retryAfter
            self.mediaTimeout = mediaTimeout
            self.ringing = ringing
        }
    }

    /// Counters since the start.
    public struct Statistics: Sendable, Hashable {
        /// Calls with media up now.
        public var callsUp = 0
        /// The most calls up at once.
        public var peakCallsUp = 0
        /// Calls answered with echo media.
        public var answered = 0
        /// Calls refused over the limit.
        public var overLimit = 0
        /// Calls refused because their offer could not be answered (488).
        public var refusedOffers = 0
        /// Calls refused because no RTP port pair was free (503).
        public var noPort = 0
        /// Calls ended by the media timeout.
        public var mediaTimeouts = 0
        /// RTP packets received, over the ended calls plus the live ones at the last tick.
        public var packetsReceived: UInt64 = 0
        /// RTP packets sent back, counted the same way (one every ptime while the call is up:
        /// silence when nothing arrived).
        public var packetsEchoed: UInt64 = 0
        /// Packets lost on the way to us (RTP sequence gaps; a call with duplicates counts 0).
        public var packetsLost: Int64 = 0
        /// SRTP calls answered.
        public var secureCalls = 0
    }

    /// One call: its engine, media and the packet count seen at the last tick.
    struct Call {
        var engine: OfferAnswer
        let media: MediaSession
        var lastReceived: UInt64 = 0
        var idleSince: Duration
    }

    struct State: ~Copyable {
        var calls: [SessionKey: Call] = [:]
        /// Counters of ended calls (the live ones are added at each tick).
        var ended = Totals()
        var stats = Statistics()
    }

    struct Totals {
        var received: UInt64 = 0
        var echoed: UInt64 = 0
        var lost: Int64 = 0
    }

    /// The options given at creation.
    public let options: Options
    /// The SIP side (its endpoint's listen points, its dialog statistics).
    public let server: DialogServer
    private let table: CallTable

    /// Binds the SIP listen points and starts answering.
    /// - Parameter logger: where the server's endpoint logs (see ``SIPEndpoint/Configuration/logger``);
    ///   each call's media session logs there too unless ``Options/media`` names its own logger.
    public init(listen: [SIPEndpoint.ListenPoint], options: Options, tls: TLSConfiguration = .init(), logger: Logger = .disabled) throws {
        self.options = options
        let table = CallTable(options: options)
        self.table = table
        let handlers = DialogServer.Handlers(
            incoming: { key, offer in table.incoming(key, offer) },
            offer: { key, offer in table.reoffer(key, offer) },
            answer: { key, body in table.answer(key, body) },
            ended: { key, _ in table.ended(key) })
        server = try DialogServer(configuration: .init(listen: listen, tls: tls, logger: logger), ringing: options.ringing, userAgent: "Switchboard echo",
                                  handlers: handlers)
    }

    // MARK: Statistics and the media timeout

    /// Reads every live call's counters (O(calls), once per statistics interval), ends the
    /// calls whose media timed out, and returns the totals.
    @discardableResult
    public func tick() -> Statistics {
        let now = table.clock.now - table.origin
        var idle: [SessionKey] = []
        let media = table.state.withLock { s in s.calls.map { ($0.key, $0.value.media) } }
        // Each call's counters are read outside the lock, and count as live only if the call is
        // still in the table afterwards: one that ended meanwhile is already in `ended`.
        let read = media.map { key, m in
            let st = m.stats()
            return (key: key, received: st.call.received.packets, echoed: st.call.sent.packets, lost: max(0, st.call.packetsLost))
        }
        let stats = table.state.withLock { s -> Statistics in
            var live = Totals()
            for (key, count, echoed, lost) in read {
                guard let call = s.calls[key] else { continue }
                live.received &+= count
                live.echoed &+= echoed
                live.lost &+= lost
                if count != call.lastReceived {
                    s.calls[key]?.lastReceived = count
                    s.calls[key]?.idleSince = now
                } else if let limit = options.mediaTimeout, now - call.idleSince >= limit {
                    idle.append(key)
                    s.stats.mediaTimeouts += 1
                    s.calls[key]?.idleSince = now
                }
            }
            s.stats.packetsReceived = s.ended.received &+ live.received
            s.stats.packetsEchoed = s.ended.echoed &+ live.echoed
            s.stats.packetsLost = s.ended.lost &+ live.lost
            s.stats.callsUp = s.calls.count
            return s.stats
        }
        for key in idle { server.hangUp(key) }
        return stats
    }

    /// The counters at the last ``tick()`` (calls up is current).
    public var statistics: Statistics { table.state.withLock { $0.stats } }

    /// One statistics line (ticks first): calls up, packets received and echoed, loss.
    public func line(elapsed: Int) -> String {
        let s = tick()
        let sip = server.statistics
        let total = Double(s.packetsReceived) + Double(max(0, s.packetsLost))
        let loss = total > 0 ? Double(max(0, s.packetsLost)) / total * 100 : 0
        return "t=\(elapsed)s calls-up=\(s.callsUp) peak=\(s.peakCallsUp) answered=\(s.answered) over-limit=\(s.overLimit) "
            + "refused=\(s.refusedOffers + s.noPort) media-timeouts=\(s.mediaTimeouts) packets-received=\(s.packetsReceived) "
            + "packets-echoed=\(s.packetsEchoed) lost=\(s.packetsLost) loss=\(String(format2: loss))% live-dialogs=\(sip.liveDialogs)"
            + " " + Self.engineLine(options.media.engine.statistics())
    }

    /// The media engine's tick lateness (p99 since the start, 0.1 ms buckets) and how many of
    /// its workers run with real-time priority.
    static func engineLine(_ e: MediaEngineStatistics) -> String {
        let p99 = e.latenessQuantile(0.99).map { MediaSessionStatistics.msText($0) } ?? "-"
        return "media-threads=\(e.threads) realtime=\(e.realtimeThreads) tick-p99=\(p99)ms"
    }

    /// The totals line printed at the end.
    public func summary() -> String {
        let s = tick()
        let d = server.statistics
        return "total: invites=\(d.invites) answered=\(s.answered) confirmed=\(d.confirmed) remote-hangups=\(d.remoteHangups) "
            + "cancelled=\(d.cancelled) over-limit=\(s.overLimit) refused=\(s.refusedOffers + s.noPort) srtp-calls=\(s.secureCalls) "
            + "media-timeouts=\(s.mediaTimeouts) packets-received=\(s.packetsReceived) packets-echoed=\(s.packetsEchoed) lost=\(s.packetsLost) "
            + "peak-calls-up=\(s.peakCallsUp)"
    }

    /// Stops every call's media and closes the SIP side.
    public func close() {
        server.close()
        let all = table.state.withLock { s -> [MediaSession] in
            defer { s.calls.removeAll() }
            return s.calls.values.map(\.media)
        }
        for m in all { m.stop() }
    }
}

/// The calls of an echo server and the per-call handlers (under the server's lock; each is
/// O(1) in the number of calls).
final class CallTable: Sendable {
    let options: EchoServer.Options
    let state = Mutex(EchoServer.State())
    let clock = MonotonicClock()
    let origin: MonotonicClock.Instant

    init(options: EchoServer.Options) {
        self.options = options
        origin = clock.now
    }

    typealias Call = EchoServer.Call

    func incoming(_ key: SessionKey, _ offer: SessionBody?) -> DialogServer.CallDecision {
        let now = clock.now - origin
        let full = state.withLock { s -> Bool in
            guard s.calls.count >= options.maxCalls else { return false }
            s.stats.overLimit += 1
            return true
        }
        if full {
            let headers: [(SIPHeaderName, String)] = options.overLimitCode == 503 ? [(.retryAfter, String(options.retryAfter))] : []
            return .refuse(options.overLimitCode, headers: headers)
        }
        let media: MediaSession
        do {
            media = try MediaSession(configuration: options.media, input: .echo)
        } catch {
            state.withLock { $0.stats.noPort += 1 }
            return .refuse(503, headers: [(.retryAfter, String(options.retryAfter))])
        }
        var engine = OfferAnswer(capabilities: MediaCapabilities(username: "switchboard", address: options.media.localAddress,
                                                                 streams: [media.streamCapabilities()]),
                                 sessionID: UInt64.random(in: 1...UInt64(Int64.max)))
        let body: SessionBody
        var negotiated: NegotiatedMedia?
        do throws(OfferAnswerError) {
            if let offer {
                guard offer.isSDP else { throw OfferAnswerError(.mediaTypeNotAvailable(media: 0, .audio)) }
                let answer = try engine.receiveOffer(bytes: offer.bytes)
                guard let audio = answer.negotiated.audio else { throw OfferAnswerError(.mediaTypeNotAvailable(media: 0, .audio)) }
                negotiated = audio
                body = .sdp(answer.sdp.serialized())
            } else {
                body = .sdp(try engine.makeOffer().serialized())
            }
        } catch {
            media.stop()
            state.withLock { $0.stats.refusedOffers += 1 }
            var headers: [(SIPHeaderName, String)] = []
            if let w = error.warningHeaderValue() { headers.append((.warning, w)) }
            return .refuse(488, headers: headers)
        }
        state.withLock { s in
            s.calls[key] = Call(engine: engine, media: media, idleSince: now)
            s.stats.answered += 1
            s.stats.callsUp = s.calls.count
            s.stats.peakCallsUp = max(s.stats.peakCallsUp, s.calls.count)
            if negotiated?.srtp != nil { s.stats.secureCalls += 1 }
        }
        // The media starts outside the server's lock, before the 200 leaves.
        guard let audio = negotiated else { return .accept(body) }
        return .accept(body, then: { try? media.apply(audio) })
    }

    func reoffer(_ key: SessionKey, _ offer: SessionBody?) -> SessionBody? {
        state.withLock { s -> SessionBody? in
            guard var call = s.calls.removeValue(forKey: key) else { return nil }
            defer { s.calls[key] = call }
            do throws(OfferAnswerError) {
                guard let offer else { return .sdp(try call.engine.makeOffer().serialized()) }
                let answer = try call.engine.receiveOffer(bytes: offer.bytes)
                if let audio = answer.negotiated.audio { try? call.media.apply(audio) }
                return .sdp(answer.sdp.serialized())
            } catch {
                return nil
            }
        }
    }

    func answer(_ key: SessionKey, _ body: SessionBody) {
        state.withLock { s in
            guard let media = s.calls[key]?.media,
                let n = try? s.calls[key]?.engine.receiveAnswer(bytes: body.bytes), let audio = n.audio else { return }
            try? media.apply(audio)
        }
    }

    func ended(_ key: SessionKey) {
        // The call stays in the table (and in tick()'s live totals) until its final counters
        // are in `ended`: removing it first let a tick in between miss its packets.
        guard let media = state.withLock({ $0.calls[key]?.media }) else { return }
        media.stop()
        let stats = media.stats()
        state.withLock { s in
            guard s.calls.removeValue(forKey: key) != nil else { return }
            s.stats.callsUp = s.calls.count
            s.ended.received &+= stats.call.received.packets
            s.ended.echoed &+= stats.call.sent.packets
            // RFC 3550's cumulative loss goes negative with duplicates (a replayed pcap): none lost.
            s.ended.lost &+= max(0, stats.call.packetsLost)
        }
    }
}

extension String {
    /// A number with two decimals (no Foundation).
    init(format2 value: Double) {
        let hundredths = Int((value * 100).rounded())
        let fraction = hundredths % 100
        self = "\(hundredths / 100)." + (fraction < 10 ? "0" : "") + "\(fraction)"
    }
}
