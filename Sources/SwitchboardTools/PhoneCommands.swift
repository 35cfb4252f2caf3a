import Synchronization
import SIPMessage
import SDP
import SIPTransaction
import SIPTransport
import SIPAuth
import SIPDialog
import SIPRuntime
import MediaRuntime
import Media

/// Helpers over session descriptions for the command-line phones.
public enum PhoneSDP {
    /// The direction attribute of a description's first audio stream, `sendrecv` when none is
    /// written (and `inactive` for RFC 2543 hold, c=0.0.0.0).
    public static func direction(of body: SessionBody) -> String {
        guard let d = try? SessionDescription.parse(body.bytes) else { return "?" }
        let media = d.media.first { $0.media == .audio } ?? d.media.first
        if let m = media, let dir = m.direction ?? d.direction { return dir.rawValue }
        return "sendrecv"
    }
}

/// Draws messages between named hosts as a ladder in the terminal.
public struct LadderPrinter: Sendable {
    public let names: [String]
    public let width: Int

    public init(names: [String], width: Int = 24) {
        self.names = names
        self.width = width
    }

    /// The header line with the host names.
    public var header: String {
        "  time  " + names.map { pad($0, width) }.joined()
    }

    /// One arrow from `from` to `to` labelled with the message's first line (short form).
    public func line(time: Duration, from: String, to: String, message: SIPMessage) -> String {
        let label = Self.label(message)
        let t = Double(time.components.seconds) + Double(time.components.attoseconds) / 1e18
        let stamp = String(Int(t * 1000)).leftPadded(6) + "ms "
        guard let a = names.firstIndex(of: from), let b = names.firstIndex(of: to), a != b else {
            return stamp + "\(from) -> \(to): \(label)"
        }
        let lo = min(a, b), hi = max(a, b)
        var row = Array(repeating: Character(" "), count: names.count * width)
        for i in names.indices { row[i * width + width / 2] = "|" }
        let start = lo * width + width / 2, end = hi * width + width / 2
        for x in (start + 1)..<end { row[x] = "-" }
        if a < b { row[end - 1] = ">" } else { row[start + 1] = "<" }
        let text = Array(" \(label) ")
        let room = end - start - 3
        let shown = text.count <= room ? text : Array(text.prefix(room))
        let offset = start + 2 + max(0, (room - shown.count) / 2)
        for (i, c) in shown.enumerated() { row[offset + i] = c }
        return stamp + String(row)
    }

    /// `INVITE (sdp)`, `200 INVITE`, …
    public static func label(_ m: SIPMessage) -> String {
        let sdp = m.body.isEmpty ? "" : " (sdp)"
        if let code = m.statusCode {
            let method = (try? m.cseq().method.token) ?? ""
            return "\(code) \(method)\(sdp)"
        }
        return (m.method?.token ?? "?") + sdp
    }

    private func pad(_ s: String, _ n: Int) -> String {
        let left = max(0, (n - s.count) / 2)
        return String(repeating: " ", count: left) + s + String(repeating: " ", count: max(0, n - left - s.count))
    }
}

extension String {
    func leftPadded(_ n: Int) -> String { count >= n ? self : String(repeating: " ", count: n - count) + self }
}

extension SessionState {
    /// A short label for the command line.
    public var label: String {
        switch self {
        case .idle: return "idle"
        case .calling: return "calling"
        case .proceeding(let c): return c == 180 ? "ringing (180)" : "proceeding (\(c))"
        case .incoming: return "incoming"
        case .early: return "early"
        case .connecting: return "connecting"
        case .confirmed: return "confirmed"
        case .terminating: return "terminating"
        case .terminated(let r): return "ended: \(r.label)"
        }
    }
}

extension SessionEndReason {
    public var label: String {
        switch self {
        case .localHangup: return "we hung up"
        case .remoteHangup: return "the peer hung up"
        case .cancelled: return "cancelled"
        case .remoteCancelled: return "cancelled by the caller"
        case .rejected(let c): return "rejected \(c)"
        case .declined(let c): return "declined \(c)"
        case .timeout: return "no answer (timeout)"
        case .noAck: return "no ACK"
        case .sessionExpired: return "session expired"
        case .transportError: return "transport error"
        case .dialogGone(let c): return "dialog gone (\(c))"
        case .authenticationFailed(let why): return "authentication failed: \(why)"
        }
    }
}

/// What a ``Phone`` does with media: each call gets a ``MediaSession`` (bound before the offer,
/// its port in the SDP) that plays `input` and records to `recordPath`.
public struct PhoneMediaOptions: Sendable {
    /// Address, port range, SRTP policy, RTCP interval (the codecs are the phone's).
    public var configuration: MediaSessionConfiguration
    /// What each call sends.
    public var input: MediaAudioInput
    /// A WAV file recording what each call receives (the second call's gets `-2` before the
    /// extension, and so on); nil records nothing.
    public var recordPath: String?
    /// The recording's sample rate.
    public var recordRate: Int
    /// Answering: send early media for this long before the 200 (a 183 Session Progress with the
    /// SDP answer instead of 180; reliable when the caller supports 100rel); nil rings as usual,
    /// and so does a call whose INVITE has no offer.
    public var earlyMedia: Duration?
    /// Answering with ``earlyMedia``: what to send before the 200 (a ringback tone, an
    /// announcement), after which ``input`` takes over in the same stream; nil sends ``input``
    /// throughout. Not with ``MediaAudioInput/echo`` as ``input``.
    public var earlyInput: MediaAudioInput?

    /// Options: a 440 Hz tone, no recording, the session defaults (127.0.0.1, ports 20000–29999, no SRTP).
    public init(configuration: MediaSessionConfiguration = MediaSessionConfiguration(), input: MediaAudioInput = .tone(frequency: 440),
                recordPath: String? = nil, recordRate: Int = 8000, earlyMedia: Duration? = nil, earlyInput: MediaAudioInput? = nil) {
        self.configuration = configuration
        self.input = input
        self.recordPath = recordPath
        self.recordRate = recordRate
        self.earlyMedia = earlyMedia
        self.earlyInput = earlyInput
    }

    /// The audio source of an input (for a switch in a running session); nil for
    /// ``MediaAudioInput/echo``, which only a new session can do.
    static func source(_ input: MediaAudioInput) throws(WAVError) -> (any AudioSource)? {
        switch input {
        case .silence: return SilenceSource(sampleRate: 8000)
        case .tone(let f, let a): return ToneGenerator(frequency: f, amplitude: a, sampleRate: 48000)
        case .wav(let path, let loops):
            let file = try WAVFile(path: path)
            return try SamplesSource(file, sampleRate: file.sampleRate, loops: loops)
        case .source(let s): return s
        case .echo: return nil
        }
    }

    func recordPath(forCall index: Int) -> String? {
        guard let path = recordPath else { return nil }
        guard index > 1 else { return path }
        if let dot = path.lastIndex(of: "."), !path[dot...].contains("/") {
            return String(path[..<dot]) + "-\(index)" + String(path[dot...])
        }
        return path + "-\(index)"
    }
}

/// A user agent with a phone's behaviour for the command line and the demo: it answers the
/// peer's offers (hold is answered with the mirrored direction), optionally answers incoming
/// calls after ringing, and reports what happens through `report`.
public final class Phone: Sendable {
    public let agent: SIPUserAgent
    public let name: String
    private let report: @Sendable (String) -> Void
    private let autoAnswer: Duration?
    private let task = Mutex<Task<Void, Never>?>(nil)
    private let states = Mutex<[SessionKey: [SessionState]]>([:])
    private let incoming = Mutex<[SessionKey]>([])
    private let registration = Mutex<[RegistrationClient.State]>([])
    /// One offer/answer engine per session (RFC 3264 state, versions, payload types).
    private let engines = Mutex<[SessionKey: OfferAnswer]>([:])
    private let codecs: [Codec]
    private let mediaOptions: PhoneMediaOptions?
    private let mediaSessions = Mutex<[SessionKey: MediaSession]>([:])
    private let finalStatistics = Mutex<[SessionKey: MediaSessionStatistics]>([:])
    private let mediaCount = Mutex(0)
    private let infoDigits = Mutex<[SessionKey: String]>([:])
    /// Our calls' engines as they were after the INVITE's offer, until the call is up: a 2xx
    /// whose answer differs from an unreliable 18x's is taken on this copy (RFC 6337 §3.1 asks
    /// for the same answer, not every peer obeys), and so is a later fork's early answer.
    private let offerEngines = Mutex<[SessionKey: OfferAnswer]>([:])

    /// - Parameters:
    ///   - autoAnswer: answer incoming calls after ringing this long (nil: leave them ringing).
    ///   - report: one line per state change.
    ///   - trace: every message sent and received, with the peer.
    ///   - codecs: what we offer and accept, in preference order.
    ///   - media: real media per call; nil writes a placeholder port (SIP port + 2) and sends none.
    public init(name: String, configuration: SIPUserAgent.Configuration, autoAnswer: Duration? = nil,
                codecs: [Codec] = [.opus, .pcmu, .pcma, .telephoneEvent], media: PhoneMediaOptions? = nil,
                report: @escaping @Sendable (String) -> Void = { _ in },
                trace: (@Sendable (SIPMessage, Bool, SIPPeer) -> Void)? = nil) throws {
        agent = try SIPUserAgent(configuration: configuration, tracing: trace != nil)
        self.codecs = codecs
        self.mediaOptions = media
        self.name = name
        self.report = report
        self.autoAnswer = autoAnswer
        let t = Task { [agent, weak self] in
            for await e in agent.events {
                guard let self else { return }
                if case .trace(let m, let out, let peer) = e { trace?(m, out, peer) } else { await self.handle(e) }
            }
        }
        task.withLock { $0 = t }
    }

    public func close() {
        for media in mediaSessions.withLock({ m -> [MediaSession] in defer { m = [:] }; return Array(m.values) }) { media.stop() }
        agent.close()
        task.withLock { $0?.cancel() }
    }

    /// The placeholder RTP port written in our descriptions when the phone has no media.
    private var placeholderPort: UInt16 { UInt16(truncatingIfNeeded: Int(agent.endpoint.localAddresses[0].address.port) &+ 2) }
    private var sipAddress: String { agent.endpoint.localAddresses[0].address.ipString }

    /// A media session for a new call (nil without media options, or when no port is free).
    /// An incoming call with early media starts with the early input.
    private func newMedia(incoming: Bool = false) -> MediaSession? {
        guard var options = mediaOptions else { return nil }
        options.configuration.codecs = codecs
        let index = mediaCount.withLock { n -> Int in n += 1; return n }
        let output: MediaAudioOutput = options.recordPath(forCall: index).map { .wav(path: $0, sampleRate: options.recordRate) } ?? .discard
        let report = self.report, name = self.name
        let input = incoming && options.earlyMedia != nil ? options.earlyInput ?? options.input : options.input
        do {
            return try MediaSession(configuration: options.configuration, input: input, output: output) { event in
                switch event {
                case .dtmf(let d): report("\(name): DTMF received \(d.character.map(String.init) ?? "event \(d.event)")")
                case .latched(let e): report("\(name): media from \(e)")
                case .quality(.raised(let w)): report("\(name): quality warning raised: \(w)")
                case .quality(.cleared(let w)): report("\(name): quality warning cleared: \(w)")
                case .bye: report("\(name): RTCP BYE")
                case .dtmfBegan: break
                }
            }
        } catch {
            report("\(name): no media: \(error)")
            return nil
        }
    }

    private func newEngine(media: MediaSession?) -> OfferAnswer {
        let stream = media?.streamCapabilities() ?? StreamCapabilities(mediaType: .audio, port: placeholderPort, codecs: codecs, ptime: 20)
        let address = mediaOptions?.configuration.localAddress ?? sipAddress
        return OfferAnswer(capabilities: MediaCapabilities(username: "switchboard", address: address, streams: [stream]),
                           sessionID: UInt64.random(in: 1...UInt64(Int64.max)))
    }

    /// The engine of a session not seen yet (an incoming call), with its media session.
    private func newEngine(for key: SessionKey) -> OfferAnswer {
        let media = newMedia(incoming: true)
        if let media { mediaSessions.withLock { $0[key] = media } }
        return newEngine(media: media)
    }

    /// The media session of a call (nil without media options or after it ended).
    public func media(_ key: SessionKey) -> MediaSession? { mediaSessions.withLock { $0[key] } }

    /// The media statistics of a call: live while it runs, final after it ended.
    public func mediaStatistics(_ key: SessionKey) -> MediaSessionStatistics? {
        media(key)?.stats() ?? finalStatistics.withLock { $0[key] }
    }

    /// Starts or updates a call's media with a negotiation result.
    private func applyMedia(_ key: SessionKey, _ negotiated: NegotiatedSession) {
        guard let media = media(key) else { return }
        guard let audio = negotiated.audio else {
            report("\(name): no audio stream negotiated")
            return
        }
        do {
            try media.apply(audio)
        } catch {
            report("\(name): media not started: \(error)")
        }
    }

    private func stopMedia(_ key: SessionKey) {
        guard let media = mediaSessions.withLock({ $0.removeValue(forKey: key) }) else { return }
        let stats = media.stats()
        media.stop()
        finalStatistics.withLock { $0[key] = stats }
        if stats.call.codec != "none" { report("\(name): media \(stats)") }
    }

    /// Runs `body` on the session's engine (made on first use).
    private func withEngine<T>(_ key: SessionKey, _ body: (inout OfferAnswer) throws(OfferAnswerError) -> T) -> Result<T, OfferAnswerError> {
        engines.withLock { all in
            var e = all[key] ?? newEngine(for: key)
            defer { all[key] = e }
            do throws(OfferAnswerError) { return .success(try body(&e)) } catch { return .failure(error) }
        }
    }

    /// Calls `target` with an offer from our capabilities.
    public func call(_ target: SIPURI) async -> SessionKey {
        let media = newMedia()
        var engine = newEngine(media: media)
        let offer = (try? engine.makeOffer()).map { SessionBody.sdp($0.serialized()) }
        // The engine is in place before the INVITE leaves: the answer may come back at once.
        let ready = engine
        return await agent.call(target, offer: offer) { key in
            if let media { self.mediaSessions.withLock { $0[key] = media } }
            self.engines.withLock { $0[key] = ready }
            self.offerEngines.withLock { $0[key] = ready }
        }
    }

    /// Puts the call on hold (re-INVITE with sendonly, or inactive when the peer holds us too)
    /// or takes it off hold.
    public func hold(_ key: SessionKey, _ held: Bool) async throws(SessionError) {
        // A transaction still open (the ACK of the last re-INVITE on its way) delays the new
        // offer a little rather than failing it (RFC 3261 §14.1).
        for _ in 0..<100 {
            guard let s = await agent.session(key), !s.canOffer, !s.isTerminated else { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        let offer = withEngine(key) { (e: inout OfferAnswer) throws(OfferAnswerError) in
            e.setHold(held)
            return try e.makeOffer()
        }
        guard case .success(let sdp) = offer else { throw .offerInProgress }
        let body = SessionBody.sdp(sdp.serialized())
        do {
            try await agent.perform(key) { s throws(SessionError) in try s.reinvite(body: body) }
        } catch {
            _ = withEngine(key) { (e: inout OfferAnswer) throws(OfferAnswerError) in e.rollback() }
            throw error
        }
    }

    /// Our answer to an offer, or the 488 (with a Warning) that refuses it.
    private func answer(_ key: SessionKey, offer: SessionBody) -> Result<SessionBody, OfferAnswerError> {
        let result = withEngine(key) { (e: inout OfferAnswer) throws(OfferAnswerError) in
            try e.receiveOffer(bytes: offer.bytes)
        }
        if case .success(let answer) = result { applyMedia(key, answer.negotiated) }
        return result.map { SessionBody.sdp($0.sdp.serialized()) }
    }

    private func handle(_ e: SIPUserAgent.Event) async {
        switch e {
        case .incomingCall(let key, let m):
            incoming.withLock { $0.append(key) }
            let from = (try? m.from().uri.description) ?? "?"
            report("\(name): incoming call from \(from)")
            if let delay = autoAnswer {
                // The offer in the INVITE (if any) is answered now; a refusal is a 488.
                let offer = await agent.session(key)?.remoteBody
                if let o = offer, case .failure(let err) = answer(key, offer: o) {
                    report("\(name): refusing the offer: \(err.reason)")
                    let warning = err.warningHeaderValue() ?? ""
                    try? await agent.perform(key) { s throws(SessionError) in try s.reject(488, headers: [(.warning, warning)]) }
                    return
                }
                let early = offer == nil ? nil : mediaOptions?.earlyMedia
                if let early {
                    // Early media: the answer goes in a 183 now, the same one in the 200 later.
                    let answer = engines.withLock { $0[key]?.localDescription }.map { SessionBody.sdp($0.serialized()) }
                    try? await agent.perform(key) { s throws(SessionError) in try s.provisional(183, body: answer) }
                    report("\(name): early media for \(early)")
                } else {
                    try? await agent.perform(key) { s throws(SessionError) in try s.provisional(180) }
                }
                // Ring in a task of its own: this loop keeps handling events meanwhile.
                Task { [agent] in
                    try? await Task.sleep(for: early ?? delay)
                    if early != nil, let options = self.mediaOptions, options.earlyInput != nil, let media = self.media(key) {
                        // The call's own input takes over from the early one, in the same stream.
                        do {
                            if let source = try PhoneMediaOptions.source(options.input) { media.setInput(source) }
                        } catch {
                            self.report("\(self.name): input not switched: \(error)")
                        }
                    }
                    let body: SessionBody?
                    if offer != nil {
                        body = self.engines.withLock { $0[key]?.localDescription }.map { SessionBody.sdp($0.serialized()) }
                    } else {
                        // No offer in the INVITE: ours goes in the 200, the answer in the ACK.
                        body = try? self.withEngine(key) { (e: inout OfferAnswer) throws(OfferAnswerError) in
                            SessionBody.sdp(try e.makeOffer().serialized())
                        }.get()
                    }
                    try? await agent.perform(key) { s throws(SessionError) in try s.accept(body: body) }
                }
            }
        case .session(let key, let ev):
            switch ev {
            case .stateChanged(let s):
                if s.isTerminated {
                    _ = engines.withLock { $0.removeValue(forKey: key) }
                    stopMedia(key)
                }
                if s.isTerminated || s == .confirmed { _ = offerEngines.withLock { $0.removeValue(forKey: key) } }
                // Reported before it is recorded: whoever waits for the state sees the lines first.
                report("\(name): \(s.label)")
                states.withLock { $0[key, default: []].append(s) }
            case .remoteOffer(let b, let method):
                // Answer re-INVITEs and UPDATEs (and a 2xx offer to our offerless INVITE); the
                // initial INVITE's offer is answered when the call is accepted.
                guard await agent.session(key)?.state != .incoming else { break }
                report("\(name): peer offers \(PhoneSDP.direction(of: b)) in \(method.token)")
                switch answer(key, offer: b) {
                case .success(let a):
                    try? await agent.perform(key) { s throws(SessionError) in try s.answer(a) }
                case .failure(let err):
                    report("\(name): refusing the offer: \(err.reason)")
                    let warning = err.warningHeaderValue()
                    try? await agent.perform(key) { s throws(SessionError) in try s.rejectOffer(488, warning: warning) }
                }
            case .offerRequested:
                if case .success(let sdp) = withEngine(key, { (e: inout OfferAnswer) throws(OfferAnswerError) in try e.makeOffer() }) {
                    try? await agent.perform(key) { s throws(SessionError) in try s.answer(.sdp(sdp.serialized())) }
                }
            case .remoteAnswer(let b):
                let beforeAnswer = offerEngines.withLock { $0[key] }
                switch withEngine(key, { (e: inout OfferAnswer) throws(OfferAnswerError) in
                    // A second answer to the INVITE's offer (early, then a different one in the 2xx):
                    // taken on the engine as it was after the offer; the media session is updated,
                    // not restarted.
                    if e.state != .localOfferPending, let first = beforeAnswer { e = first }
                    return try e.receiveAnswer(bytes: b.bytes)
                }) {
                case .success(let n):
                    applyMedia(key, n)
                    let codec = n.audio.map { "\($0.sendCodec.name)/\($0.sendCodec.clockRate)" } ?? "none"
                    report("\(name): peer answers \(PhoneSDP.direction(of: b)) (\(codec))")
                case .failure(let err):
                    report("\(name): bad answer: \(err.reason)")
                }
            case .request(let m, let tx):
                if m.method == .info, let body = SessionBody(of: m), body.contentType.type.lowercased() == "application",
                    body.contentType.subtype.lowercased() == "dtmf-relay"
                {
                    // RFC 4733's SIP INFO fallback (application/dtmf-relay); a bad body is a 400.
                    guard let relay = try? DTMFRelayBody(parsing: body.bytes) else {
                        try? await agent.perform(key) { s throws(SessionError) in s.respond(to: m, in: tx, statusCode: 400) }
                        break
                    }
                    report("\(name): DTMF received \(relay.signal) (INFO)")
                    infoDigits.withLock { $0[key, default: ""].append(relay.signal) }
                }
                try? await agent.perform(key) { s throws(SessionError) in s.respond(to: m, in: tx, statusCode: 200) }
            case .requestCompleted(let method, let code, _):
                if (method == .invite || method == .update) && code >= 300 {
                    // Our offer was refused: the previous description stands.
                    _ = withEngine(key) { (e: inout OfferAnswer) throws(OfferAnswerError) in e.rollback() }
                }
                report("\(name): \(method.token) → \(code)")
            case .glare(let d):
                report("\(name): glare (491), retrying in \(d)")
            default:
                break
            }
        case .registration(let s):
            registration.withLock { $0.append(s) }
            report("\(name): \(s.label)")
        case .request, .trace:
            break
        }
    }

    /// Sends digits on a call: RFC 4733 events in the media when telephone-event was
    /// negotiated, else one SIP INFO (`application/dtmf-relay`, 100 ms each) per digit, 170 ms
    /// apart (pauses `w`, `W` and `,` wait 500 ms). Returns how they were sent.
    @discardableResult
    public func sendDigits(_ key: SessionKey, _ digits: String) async throws -> DigitTransport {
        if let media = media(key) {
            var unavailable = false
            do throws(MediaSessionError) {
                try media.sendDigits(digits)
            } catch {
                // No telephone-event: the INFO fallback below; anything else is an error.
                guard case .dtmfUnavailable = error else { throw error }
                unavailable = true
            }
            if !unavailable { return .rtp }
        }
        for c in digits where c != " " {
            if c == "w" || c == "W" || c == "," {
                try await Task.sleep(for: .milliseconds(500))
                continue
            }
            let relay = try DTMFRelayBody(signal: c, duration: 100)
            let body = SessionBody(contentType: .init(type: "application", subtype: "dtmf-relay"), bytes: relay.serialized())
            try await agent.perform(key) { s throws(SessionError) in try s.sendRequest(.info, body: body) }
            try await Task.sleep(for: .milliseconds(170))
        }
        return .info
    }

    /// How ``sendDigits(_:_:)`` sent digits.
    public enum DigitTransport: Sendable, Hashable {
        /// RFC 4733 telephone-events in the RTP stream.
        case rtp
        /// SIP INFO requests with `application/dtmf-relay` bodies.
        case info
    }

    /// Digits received on a call by SIP INFO (`application/dtmf-relay`).
    public func digitsReceivedByInfo(_ key: SessionKey) -> String { infoDigits.withLock { $0[key] ?? "" } }

    /// The states a session went through.
    public func states(_ key: SessionKey) -> [SessionState] { states.withLock { $0[key] ?? [] } }

    /// Incoming calls so far.
    public var incomingCalls: [SessionKey] { incoming.withLock { $0 } }

    public var registrationStates: [RegistrationClient.State] { registration.withLock { $0 } }

    /// Waits (bounded) for a condition; returns whether it held in time.
    public func wait(timeout: Duration, _ condition: @Sendable () -> Bool) async -> Bool {
        let clock = ContinuousClock(), deadline = clock.now + timeout
        while clock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return condition()
    }

    /// Waits until the session reaches a state matching `match`.
    public func wait(_ key: SessionKey, timeout: Duration, for match: @escaping @Sendable (SessionState) -> Bool) async -> Bool {
        await wait(timeout: timeout) { self.states(key).contains(where: match) }
    }
}

/// `switchboard demo`: a registrar/proxy and two phones on 127.0.0.1. Alice registers with
/// digest authentication; Bob calls her through the proxy; she answers; Bob holds and resumes
/// by re-INVITE; Alice hangs up. Every message on the wire is printed as a ladder.
public enum DemoRun {
    /// Runs the demo, printing through `output`; returns whether every step happened.
    public static func run(output: @escaping @Sendable (String) -> Void) async throws -> Bool {
        let box = Mutex<ProxyServer?>(nil)
        let proxyEndpoint = try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { e in
            box.withLock { $0 }?.handle(e)
        }
        defer { proxyEndpoint.close() }
        let proxy = ProxyServer(configuration: .init(domain: "switchboard.test", users: ["alice": "alicepw", "bob": "bobpw"]))
        proxy.attach(proxyEndpoint)
        box.withLock { $0 = proxy }
        let proxyPeer = proxyEndpoint.localAddresses[0]
        let proxyURI = try SIPURI("sip:127.0.0.1:\(proxyPeer.address.port)")

        let names = Mutex<[UInt16: String]>([proxyPeer.address.port: "registrar/proxy"])
        let ladder = LadderPrinter(names: ["alice", "registrar/proxy", "bob"])
        let start = ContinuousClock.now
        let trace: @Sendable (String) -> @Sendable (SIPMessage, Bool, SIPPeer) -> Void = { me in
            { m, outgoing, peer in
                let other = names.withLock { $0[peer.address.port] } ?? "\(peer.address)"
                // Each message is drawn once: by its sender, or by its receiver when the proxy sent it.
                guard outgoing || other == "registrar/proxy" else { return }
                output(ladder.line(time: ContinuousClock.now - start, from: outgoing ? me : other, to: outgoing ? other : me, message: m))
            }
        }
        func config(_ user: String, _ password: String) throws -> SIPUserAgent.Configuration {
            .init(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]), identity: try SIPURI("sip:\(user)@switchboard.test"),
                  credentials: DigestClient(username: user, password: password), outboundProxy: proxyURI, sessionTimer: nil)
        }
        let notes: @Sendable (String) -> Void = { output("          · " + $0) }
        let alice = try Phone(name: "alice", configuration: try config("alice", "alicepw"), autoAnswer: .milliseconds(300), report: notes, trace: trace("alice"))
        let bob = try Phone(name: "bob", configuration: try config("bob", "bobpw"), report: notes, trace: trace("bob"))
        defer { alice.close(); bob.close() }
        names.withLock {
            $0[alice.agent.endpoint.localAddresses[0].address.port] = "alice"
            $0[bob.agent.endpoint.localAddresses[0].address.port] = "bob"
        }
        output("registrar/proxy on udp:\(proxyPeer.address), alice on udp:\(alice.agent.endpoint.localAddresses[0].address), bob on udp:\(bob.agent.endpoint.localAddresses[0].address)")
        output(ladder.header)

        await alice.agent.register(registrar: try SIPURI("sip:switchboard.test"), peer: proxyPeer, expires: 600)
        guard await alice.wait(timeout: .seconds(10), { alice.registrationStates.contains { if case .registered = $0 { return true } else { return false } } }) else {
            output("alice did not register"); return false
        }
        let key = await bob.call(try SIPURI("sip:alice@switchboard.test"))
        guard await bob.wait(key, timeout: .seconds(10), for: { $0 == .confirmed }) else { output("the call was not answered"); return false }
        try await Task.sleep(for: .milliseconds(300))
        try await bob.hold(key, true)
        try await Task.sleep(for: .milliseconds(300))
        try await bob.hold(key, false)
        try await Task.sleep(for: .milliseconds(300))
        guard let ak = alice.incomingCalls.first else { return false }
        try await alice.agent.perform(ak) { s throws(SessionError) in try s.bye() }
        let ended = await bob.wait(key, timeout: .seconds(10)) { $0 == .terminated(.remoteHangup) }
        await alice.agent.unregister()
        _ = await alice.wait(timeout: .seconds(5)) { alice.registrationStates.last == .unregistered }
        let s = proxy.statistics
        output("proxy: \(s.registers) REGISTER, \(s.forwarded) requests forwarded, \(s.acks) ACKs, \(s.relayedResponses) responses relayed")
        return ended
    }
}
