import Synchronization
import SIPResolver
import Logging
import SIPMessage
import SDP
import SIPTransaction
import SIPTransport
import SIPAuth
import SIPDialog
import SIPRuntime
import MediaRuntime
import Media
import NetworkIO
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A user agent with a phone's behaviour for the command line and the demo: it answers the
/// peer's offers (hold is answered with the mirrored direction), optionally answers incoming
/// calls after ringing, and reports what happens through `report`.
public final class Phone: Sendable {
    public let agent: SIPUserAgent
    public let name: String
    /// Where the phone's lines go (the CLI prints them); nil: no line is even built.
    let reportHandler: (@Sendable (String) -> Void)?

    /// One line for `report` (built only when there is a handler).
    func report(_ line: @autoclosure () -> String) {
        if let h = reportHandler { h(line()) }
    }
    /// The report line of each state in ``reportedStates`` ("name: early"…), made once when
    /// there is a handler: a call's state changes are reported without building a String.
    private let stateLines: [String]
    /// The states whose lines ``stateLines`` holds, at their ``reportedStateIndex(_:)``.
    static let reportedStates: [SessionState] = [
        .idle, .calling, .incoming, .early, .connecting, .confirmed, .terminating,
        .terminated(.localHangup), .terminated(.remoteHangup), .terminated(.cancelled), .terminated(.remoteCancelled),
        .terminated(.timeout), .terminated(.noAck), .terminated(.sessionExpired), .terminated(.transportError),
    ]
    /// Where `s` is in ``reportedStates``; nil for a state with its own number or text.
    private static func reportedStateIndex(_ s: SessionState) -> Int? {
        switch s {
        case .idle: return 0
        case .calling: return 1
        case .incoming: return 2
        case .early: return 3
        case .connecting: return 4
        case .confirmed: return 5
        case .terminating: return 6
        case .terminated(.localHangup): return 7
        case .terminated(.remoteHangup): return 8
        case .terminated(.cancelled): return 9
        case .terminated(.remoteCancelled): return 10
        case .terminated(.timeout): return 11
        case .terminated(.noAck): return 12
        case .terminated(.sessionExpired): return 13
        case .terminated(.transportError): return 14
        default: return nil
        }
    }
    /// The line that reports the state `s`.
    func stateLine(_ s: SessionState) -> String {
        if let i = Self.reportedStateIndex(s), i < stateLines.count { return stateLines[i] }
        return "\(name): \(s.label)"
    }
    private let autoAnswer: Duration?
    private let task = Mutex<Task<Void, Never>?>(nil)
    let callStates = Mutex<[SessionKey: [SessionState]]>([:])
    private let incoming = Mutex<[SessionKey]>([])
    /// The phone's accounts: its own (number 0, from the agent's identity) first.
    private let accountList = Mutex<[Account]>([])
    private let accountCount = Atomic<Int>(0)
    /// One offer/answer engine per session (RFC 3264 state, versions, payload types).
    private let engines = Mutex<[SessionKey: OfferAnswer]>([:])
    private let codecs: [Codec]
    private let mediaOptions: PhoneMediaOptions?
    /// The media options' local address and early media, read on every call (the options
    /// themselves are not copied for them).
    private let mediaLocalAddress: String?, earlyMedia: Duration?
    /// No media options: calls' engines differ only by address and port (see ``FirstAnswer``).
    private let withoutMedia: Bool
    let mediaSessions = Mutex<[SessionKey: MediaSession]>([:])
    /// Where media binds after a network change (``networkChanged(to:port:timeout:)``); nil:
    /// the media options' address.
    let mediaAddress = Mutex<String?>(nil)
    private let finalStatistics = Mutex<[SessionKey: MediaSessionStatistics]>([:])
    /// The statistics of media sessions a network change replaced, by call (see ``retireMedia(_:_:)``).
    private let earlierStatistics = Mutex<[SessionKey: MediaSessionStatistics]>([:])
    /// The watch on the host's addresses (``watchNetwork(timeout:choose:)``), while on.
    let networkWatcher = Mutex<NetworkWatcher?>(nil)
    /// Every network change the phone made, asked for or seen by its watch.
    let networkChanges = EventFanOut<NetworkChange>()
    private let mediaCount = Mutex(0)
    private let infoDigits = Mutex<[SessionKey: String]>([:])
    /// Ended calls, oldest first, for ``forgetOldCalls(ended:)``.
    private let endedCalls = Mutex<[SessionKey]>([])
    /// Our calls' engines as they were after the INVITE's offer, until the call is up: a 2xx
    /// whose answer differs from an unreliable 18x's is taken on this copy (RFC 6337 §3.1 asks
    /// for the same answer, not every peer obeys), and so is a later fork's early answer.
    private let offerEngines = Mutex<[SessionKey: OfferAnswer]>([:])
    /// The last first offer answered without media, for ``answer(_:offer:)``.
    let firstAnswer = Mutex<FirstAnswer?>(nil)
    /// The capabilities of calls without a media session, for ``bareEngine(address:port:)``.
    private let bareCapabilities = Mutex<MediaCapabilities?>(nil)
    /// The calls not yet ended, by session (see ``Call``).
    private let liveCalls = Mutex<[SessionKey: Call]>([:])
    private let callCount = Atomic<UInt64>(0)
    private let arrivals = EventFanOut<Call>()
    private let endings = EventFanOut<Call>()
    /// Every in-dialog request's final status, for actions that wait for one (hold).
    let completions = EventFanOut<(SessionKey, SIPMethod, Int)>()
    /// The hold a re-INVITE of ours asks for, applied to the call when it succeeds.
    private let pendingHold = Mutex<[SessionKey: Bool]>([:])
    /// Transfers in progress, as transferor and as transferee (see Phone+Transfer.swift).
    let transfers = Mutex(TransferBook())
    /// Where incoming calls are forwarded (302), when set.
    public let forwardTargets: [SIPURI]
    /// Transfers and forwards of this phone's calls, step by step (libSoftphone's
    /// `CallRedirectionManager`): states, capabilities, flows.
    public let redirection = CallRedirectionManager()
    /// What a REFER we receive may ask (checked before ``referDecision``).
    public let referPolicy: ReferPolicy
    /// The history our forwards write: Diversion (RFC 5806), History-Info (RFC 7044) or both.
    public let forwardHistory: ForwardHeaders.History
    /// Do-not-disturb and the call directory, applied to every incoming call first.
    public let screening: CallScreening
    /// Asked for each REFER that passed ``referPolicy``: accept (true, the default) or decline (603).
    let referDecision: @Sendable (SessionKey, ReferRequest) async -> Bool
    /// Asked for each INVITE with a Replaces that matches a call of ours (RFC 3891 §6): the
    /// INVITE, the call it would replace and the default's grounds (nil: the default refuses);
    /// true lets it replace the call, false refuses it with 403.
    let authorizeReplaces: @Sendable (SIPMessage, SessionKey, ReplacesAuthorization.Grounds?) -> Bool
    /// RFC 3263 server location for next hops named by a domain (made on first use).
    private let locator: Mutex<SIPServerLocator?>
    private let dns: DNSClientConfiguration?
    /// How long ``referDecision`` may take before the REFER is declined (603): 16 s, half the
    /// transferor's non-INVITE transaction timeout (RFC 3261 Timer F, 64·T1).
    public static let referDecisionTimeout: Duration = .seconds(16)
    /// Where the phone's metrics go (swift-metrics); nil when built with `metrics: nil`.
    public let metrics: PhoneMetrics?
    private let metricsTask = Mutex<Task<Void, Never>?>(nil)

    /// - Parameters:
    ///   - autoAnswer: answer incoming calls after ringing this long (nil: leave them ringing).
    ///   - report: one line per state change (called where the phone handles the event, mostly
    ///     on the thread that read the message: it must return quickly and never wait).
    ///   - trace: every message sent and received, with the peer (called like `report`).
    ///   - codecs: what we offer and accept, in preference order.
    ///   - media: real media per call; nil writes a placeholder port (SIP port + 2) and sends none.
    ///   - dns: where RFC 3263 server location asks (NAPTR, SRV, A/AAAA) when a call's next hop
    ///     (its outbound proxy, else its target) is named by a domain; nil reads the system's
    ///     `/etc/resolv.conf` and `/etc/hosts` when first needed.
    ///   - forwardTo: answer every incoming call with a 302 listing these targets (call forwarding)
    ///     instead of ringing; empty rings as usual.
    ///   - forwardHistory: what history a forward writes (Diversion, History-Info or both).
    ///   - screening: do-not-disturb and the call directory: screened calls are refused (486,
    ///     603…) before anything else happens to them and never reach the application.
    ///   - referPolicy: what a REFER we receive may ask (schemes, out-of-dialog, bounds).
    ///   - referDecision: asked for each REFER that passed the policy; true accepts (the default).
    ///     It may wait (ask a user, a service): the REFER is answered when it returns, or
    ///     declined (603) after ``referDecisionTimeout``, well before the transferor's
    ///     transaction gives up. The call's ``Call/events`` report the request and the answer
    ///     (``CallEvent/transferRequested(_:accepted:)``).
    ///   - authorizeReplaces: decides whether an INVITE with a matching Replaces may take over
    ///     the call it names (RFC 3891 §6), given the default's grounds
    ///     (``ReplacesAuthorization``: its Referred-By or its From is that call's peer); the
    ///     default follows them. Refused: 403.
    ///   - metrics: where calls, registrations, SIP traffic and media figures are reported
    ///     (``PhoneMetrics``; the process's `MetricsSystem` by default); nil reports nothing.
    public init(name: String, configuration: SIPUserAgent.Configuration, autoAnswer: Duration? = nil,
                codecs: [Codec] = [.opus, .pcmu, .pcma, .telephoneEvent], media: PhoneMediaOptions? = nil, dns: DNSClientConfiguration? = nil,
                forwardTo: [SIPURI] = [], forwardHistory: ForwardHeaders.History = .diversion, screening: CallScreening = CallScreening(),
                referPolicy: ReferPolicy = ReferPolicy(), referDecision: @escaping @Sendable (SessionKey, ReferRequest) async -> Bool = { _, _ in true },
                authorizeReplaces: @escaping @Sendable (SIPMessage, SessionKey, ReplacesAuthorization.Grounds?) -> Bool = { _, _, grounds in grounds != nil },
                metrics: PhoneMetrics.Configuration? = PhoneMetrics.Configuration(),
                report: (@Sendable (String) -> Void)? = nil,
                trace: (@Sendable (SIPMessage, Bool, SIPPeer) -> Void)? = nil) throws {
        // Out-of-dialog REFERs come to the phone, which checks their Target-Dialog (RFC 4538).
        var configuration = configuration
        configuration.handlesOutOfDialogRefer = true
        agent = try SIPUserAgent(configuration: configuration, tracing: trace != nil)
        self.codecs = codecs
        self.mediaOptions = media
        self.withoutMedia = media == nil
        self.mediaLocalAddress = media?.configuration.localAddress
        self.earlyMedia = media?.earlyMedia
        self.name = name
        self.reportHandler = report
        self.stateLines = report == nil ? [] : Self.reportedStates.map { "\(name): \($0.label)" }
        assert(Self.reportedStates.indices.allSatisfy { Self.reportedStateIndex(Self.reportedStates[$0]) == $0 })
        self.autoAnswer = autoAnswer
        self.dns = dns
        self.referPolicy = referPolicy
        self.forwardTargets = forwardTo
        self.forwardHistory = forwardHistory
        self.screening = screening
        self.referDecision = referDecision
        self.authorizeReplaces = authorizeReplaces
        self.locator = Mutex(nil)
        self.metrics = metrics.map(PhoneMetrics.init)
        if let m = self.metrics {
            let interval = m.configuration.interval
            metricsTask.withLock {
                $0 = Task { [agent] in
                    while (try? await Task.sleep(for: interval)) != nil { m.sample(agent.endpoint.statistics) }
                }
            }
        }
        let own = Account(id: 0, configuration: Account.Configuration(addressOfRecord: configuration.identity, displayName: configuration.displayName,
                                                                    credentials: configuration.credentials),
                          contactUser: configuration.identity.user, phone: self, agent: agent)
        accountList.withLock { $0 = [own] }
        // Events are handled on the agent's queue, on the thread that read the message (no
        // stream, task or hop per message); the few that must wait (screening by a directory,
        // forwarding, Replaces, transfers) go through the agent's stream to this task, and the
        // events after them follow there until it caught up (order is kept).
        let trace = trace
        agent.setEventHandler { [weak self] e in self?.handleNow(e, trace: trace) ?? true }
        let t = Task { [agent, weak self] in
            for await e in agent.events {
                guard let self else { return }
                if !(await agent.onQueue { self.handleNow(e, trace: trace) }) { await self.handle(e) }
                agent.eventConsumed()
            }
        }
        task.withLock { $0 = t }
    }

    public func close() {
        redirection.close()
        stopWatchingNetwork()
        networkChanges.finish()
        arrivals.finish()
        endings.finish()
        for a in accounts { a.broadcast.publish(a.broadcast.current, final: true) }
        completions.finish()
        for media in mediaSessions.withLock({ m -> [MediaSession] in defer { m = [:] }; return Array(m.values) }) { media.stop() }
        metricsTask.withLock { $0?.cancel() }
        metrics?.sample(agent.endpoint.statistics)
        agent.close()
        task.withLock { $0?.cancel() }
    }

    /// The address a new engine's descriptions carry (``engineAddress``) and the placeholder
    /// RTP port written in them when the phone has no media (the SIP port + 2), from one read
    /// of the endpoint's address.
    private var bareEngineAddress: (address: String, port: UInt16) {
        let at = endpointAddress
        return (engineAddress(at: at), at.map { UInt16(truncatingIfNeeded: Int($0.port) &+ 2) } ?? 9)
    }
    /// The endpoint's first address; none once it is closed (a call placed then fails when it
    /// sends, instead of the phone trapping here).
    private var endpointAddress: SocketAddress? { agent.endpoint.firstLocalAddress?.address }
    /// What descriptions carry when the endpoint has no address left.
    static let noAddress = "0.0.0.0"
    private func sipAddress(_ at: SocketAddress) -> String {
        if let known = sipAddressText.withLock({ $0 }), known.address == at { return known.text }
        let text = at.ipString
        sipAddressText.withLock { $0 = (at, text) }
        return text
    }
    /// ``sipAddress(_:)``'s text and the address it was written from (made again only when the
    /// endpoint's address changes, not for every call).
    private let sipAddressText = Mutex<(address: SocketAddress, text: String)?>(nil)

    /// A media session for a new call (nil without media options, or when no port is free).
    /// An incoming call with early media starts with the early input.
    /// Which call a media session belongs to, for its events (known once the session key is).
    final class MediaOwner: Sendable {
        let key = Mutex<SessionKey?>(nil)
    }

    func newMedia(incoming: Bool = false, owner: MediaOwner) -> MediaSession? {
        guard var options = mediaOptions else { return nil }
        if let moved = mediaAddress.withLock({ $0 }) { options.configuration.localAddress = moved }
        options.configuration.codecs = codecs
        options.configuration.logger = agent.endpoint.logger
        let index = mediaCount.withLock { n -> Int in n += 1; return n }
        let output: MediaAudioOutput = options.recordPath(forCall: index).map { .wav(path: $0, sampleRate: options.recordRate) } ?? .discard
        let report = self.reportHandler, name = self.name
        let input = incoming && options.earlyMedia != nil ? options.earlyInput ?? options.input : options.input
        do {
            return try MediaSession(configuration: options.configuration, input: input, output: output) { [weak self] event in
                if let self, let key = owner.key.withLock({ $0 }), let call = self.call(for: key) {
                    switch event {
                    case .dtmf(let d): if let c = d.character { call.note(.digit(c, via: .rtp)) }
                    case .quality(let q): call.note(.quality(q))
                    case .inactive: Task { await self.endSilentCall(call) }
                    default: break
                    }
                }
                switch event {
                case .dtmf(let d): report?("\(name): DTMF received \(d.character.map(String.init) ?? "event \(d.event)")")
                case .latched(let e): report?("\(name): media from \(e)")
                case .quality(.raised(let w)): report?("\(name): quality warning raised: \(w)")
                case .quality(.cleared(let w)): report?("\(name): quality warning cleared: \(w)")
                case .bye: report?("\(name): RTCP BYE")
                case .inactive(let d): report?("\(name): no media from the peer for \(Self.seconds(d)) s")
                case .resumed: report?("\(name): media from the peer again")
                case .dtmfBegan: break
                }
            }
        } catch {
            agent.endpoint.logger.warning("call without media: \(error)")
            report?("\(name): no media: \(error)")
            return nil
        }
    }

    /// A call whose peer went silent (``MediaSessionEvent/inactive(silentFor:)``) ends with a
    /// BYE and ``CallEndReason/noMedia`` — unless it is not up (a held or ending call's media
    /// does not count: the session only reports while the peer should send).
    private func endSilentCall(_ call: Call) async {
        guard call.state.isEstablished else { return }
        agent.logger(for: call.key).info("no media from the peer: hanging up")
        call.willEnd(.noMedia)
        do throws(SessionError) {
            try await agent.perform(call.key) { s throws(SessionError) in try s.bye() }
        } catch {
            call.willEnd(nil)
        }
    }

    static func seconds(_ d: Duration) -> String {
        let ms = d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
        return "\(ms / 1000).\((ms % 1000) / 100)"
    }

    private func newEngine(media: MediaSession?) -> OfferAnswer {
        guard let media else {
            let (address, port) = bareEngineAddress
            return bareEngine(address: address, port: port)
        }
        return OfferAnswer(capabilities: MediaCapabilities(username: "switchboard", address: engineAddress, streams: [media.streamCapabilities()]),
                           sessionID: Self.newSessionID())
    }

    /// The engine of a call without a media session: the codecs at `address` and the
    /// placeholder `port`. Its capabilities are made once and reused while the address and
    /// port stay the same (every call of a phone without media).
    private func bareEngine(address: String, port: UInt16) -> OfferAnswer {
        let capabilities = bareCapabilities.withLock { last in
            if let c = last, c.address == address, c.streams.first?.port == port { return c }
            let made = MediaCapabilities(username: "switchboard", address: address,
                                         streams: [StreamCapabilities(mediaType: .audio, port: port, codecs: codecs, ptime: 20)])
            last = made
            return made
        }
        return OfferAnswer(capabilities: capabilities, sessionID: Self.newSessionID())
    }

    /// The address a new engine's descriptions carry (`c=`, `o=`).
    private var engineAddress: String { engineAddress(at: endpointAddress) }
    /// ``engineAddress`` with the endpoint's address already read.
    private func engineAddress(at endpoint: SocketAddress?) -> String {
        mediaAddress.withLock { $0 } ?? mediaLocalAddress ?? endpoint.map(sipAddress) ?? Self.noAddress
    }

    /// An `o=` session id for a new engine.
    static func newSessionID() -> UInt64 {
        // From a buffered source: a call costs no getrandom(2) for it.
        var random = BufferedSystemRandom()
        return UInt64.random(in: 1...UInt64(Int64.max), using: &random)
    }

    /// The engine of a session not seen yet (an incoming call), with its media session.
    private func newEngine(for key: SessionKey) -> OfferAnswer {
        guard !withoutMedia else { return newEngine(media: nil) }
        let owner = MediaOwner()
        owner.key.withLock { $0 = key }
        let media = newMedia(incoming: true, owner: owner)
        if let media { mediaSessions.withLock { $0[key] = media } }
        return newEngine(media: media)
    }

    /// The media session of a call (nil without media options or after it ended).
    public func media(_ key: SessionKey) -> MediaSession? { mediaSessions.withLock { $0[key] } }

    /// The media statistics of a call: live while it runs, final after it ended.
    /// After a network change (a new media session for the call) the figures continue the
    /// earlier session's (``MediaSessionStatistics/continuing(_:)``).
    public func mediaStatistics(_ key: SessionKey) -> MediaSessionStatistics? {
        guard let live = media(key)?.stats() else { return finalStatistics.withLock { $0[key] } }
        return earlierStatistics.withLock { $0[key] }.map { live.continuing($0) } ?? live
    }

    /// Puts aside the statistics of a call's media session that a new one replaces (a network
    /// change), so that the call's figures go on from them.
    func retireMedia(_ key: SessionKey, _ old: MediaSession) {
        let stats = old.stats()
        earlierStatistics.withLock { e in e[key] = e[key].map { stats.continuing($0) } ?? stats }
    }

    /// Starts or updates a call's media with a negotiation result.
    private func applyMedia(_ key: SessionKey, _ negotiated: NegotiatedSession) {
        call(for: key)?.noteHold(remote: negotiated.audio?.isHeldByRemote ?? false)
        guard let media = media(key) else { return }
        guard let audio = negotiated.audio else {
            report("\(name): no audio stream negotiated")
            return
        }
        do {
            try media.apply(audio)
            call(for: key)?.note(.mediaActive(true))
        } catch {
            agent.logger(for: key).warning("media not started: \(error)")
            report("\(name): media not started: \(error)")
        }
    }

    private func stopMedia(_ key: SessionKey) {
        // (A phone without media has none: an empty table is not searched.)
        guard let media = mediaSessions.withLock({ $0.isEmpty ? nil : $0.removeValue(forKey: key) }) else { return }
        // Stopped first, so the figures are final (its RTCP BYE and any last packet counted).
        media.stop()
        let own = media.stats()
        let stats = earlierStatistics.withLock { $0.removeValue(forKey: key) }.map { own.continuing($0) } ?? own
        call(for: key)?.note(.mediaActive(false))
        finalStatistics.withLock { $0[key] = stats }
        metrics?.media(stats)
        if stats.call.codec != "none" { report("\(name): media \(stats)") }
    }

    /// Runs `body` on the session's engine (made on first use).
    func withEngine<T>(_ key: SessionKey, _ body: (inout OfferAnswer) throws(OfferAnswerError) -> T) -> Result<T, OfferAnswerError> {
        engines.withLock { all in
            // Changed in place in the dictionary (kept on a throw too, as before): no copy of
            // the engine to write back.
            if all[key] == nil { all[key] = newEngine(for: key) }
            do throws(OfferAnswerError) { return .success(try body(&all[key]!)) } catch { return .failure(error) }
        }
    }

    /// Calls `target` with an offer from our capabilities. When the next hop (the outbound
    /// proxy, else `target`) is named by a domain, RFC 3263 locates its servers first (NAPTR,
    /// SRV, A/AAAA, over the transports this phone listens on) and the INVITE fails over from
    /// one to the next when a server does not answer (see `SIPUserAgent.call(_:offer:targets:headers:prepare:)`);
    /// a name that locates nothing ends the call with a transport error.
    public func call(_ target: SIPURI, headers: [(SIPHeaderName, String)] = []) async -> SessionKey {
        await place(target, headers: headers).key
    }

    /// Places a call (see ``call(_:headers:)``) and returns its ``Call`` at once, in state
    /// `.calling` (or already past it); follow it through ``Call/states``.
    public func dial(_ target: SIPURI, headers: [(SIPHeaderName, String)] = []) async -> Call {
        await place(target, headers: headers)
    }

    /// Places a call with options (see ``CallOptions``): key-value data for the callee (a
    /// `User-to-User` header, RFC 7433; the callee reads it as ``Call/attachedData``), a session
    /// token for registration-free dialing (`Authorization: Bearer`, RFC 8898, by default), a
    /// local tag, extra headers. Otherwise as ``dial(_:headers:)``.
    /// - Throws: ``CallDataError/tooLarge(_:)`` when the data is over ``CallData/maximumEncodedSize`` bytes.
    public func dial(_ target: SIPURI, options: CallOptions) async throws(CallDataError) -> Call {
        try await dial(target, options: options, account: nil)
    }

    /// Places a call with options as `account` (nil: the phone's own).
    func dial(_ target: SIPURI, options: CallOptions, account: Account?) async throws(CallDataError) -> Call {
        let size = options.attachedData.encoded.utf8.count
        guard size <= CallData.maximumEncodedSize else { throw .tooLarge(size) }
        var headers = options.headers
        if !options.attachedData.isEmpty { headers.append((.userToUser, options.attachedData.userToUserValue)) }
        if let token = options.sessionToken {
            headers.append((options.tokenHeader, options.tokenHeader == .authorization ? "Bearer \(token)" : token))
        }
        return await place(target, headers: headers, tag: options.tag, account: account)
    }

    /// The call data an INVITE carries (its first `User-to-User` header for call data); empty,
    /// and logged, when it cannot be read.
    private func attachedData(of invite: SIPMessage, key: SessionKey) -> CallData {
        // Most calls carry none: looked for first without making the list of values.
        guard invite[.userToUser] != nil else { return [:] }
        for value in invite.values(.userToUser) {
            do throws(CallDataError) {
                if let data = try CallData(userToUser: value) { return data }
            } catch {
                agent.logger(for: key).debug("call data not read: \(error)")
                return [:]
            }
        }
        return [:]
    }

    /// Sends an INFO in the call and returns its final status (nil when it timed out).
    func sendInfo(_ key: SessionKey, _ body: SessionBody, timeout: Duration) async throws(SessionError) -> Int? {
        // Subscribed before the request leaves: its answer cannot pass unseen.
        let done = completions.subscribe()
        try await agent.perform(key) { s throws(SessionError) in try s.sendRequest(.info, body: body) }
        return await within(timeout) {
            for await (k, method, code) in done where k == key && method == .info { return code }
            return nil
        }
    }

    private func place(_ target: SIPURI, headers: [(SIPHeaderName, String)], tag: String? = nil, account: Account? = nil) async -> Call {
        let account = account ?? self.account
        let targets = await locate(agent.configuration.outboundProxy ?? target)
        let owner = MediaOwner()
        let media = newMedia(owner: owner)
        var engine = newEngine(media: media)
        let offer = (try? engine.makeOffer()).map { SessionBody.sdp($0.serialized()) }
        // The engine and the Call are in place before the INVITE leaves: the answer may come
        // back at once.
        let ready = engine
        let made = Mutex<Call?>(nil)
        let key = await agent.call(target, offer: offer, targets: targets, headers: headers, as: account.isPrimary ? nil : account.identity,
                                   contactUser: account.contactUser, credentials: account.configuration.credentials) { key in
            let call = Call(id: self.callCount.add(1, ordering: .relaxed).newValue, key: key, direction: .outgoing, remote: .sip(target), phone: self,
                            account: account, tag: tag)
            self.register(call)
            owner.key.withLock { $0 = key }
            made.withLock { $0 = call }
            if let media { self.mediaSessions.withLock { $0[key] = media } }
            self.engines.withLock { $0[key] = ready }
            self.offerEngines.withLock { $0[key] = ready }
        }
        if let call = made.withLock({ $0 }) { return call }
        // Not reached: SIPUserAgent.call always runs its prepare hook. Should that change, the
        // caller still gets a handle, one that says the call never started.
        let call = Call(id: callCount.add(1, ordering: .relaxed).newValue, key: key, direction: .outgoing, remote: .sip(target), phone: self,
                        account: account)
        call.feed(.stateChanged(.terminated(.transportError)))
        return call
    }

    /// The located peers of a next hop named by a domain (in RFC 3263 order, only over the
    /// transports the endpoint has); empty for an IP address or `localhost` (the agent reaches
    /// those directly) and when nothing was found (logged).
    func locate(_ hop: SIPURI) async -> [SIPPeer] {
        let host = hop.host.address
        if case .ipv4 = hop.host { return [] }
        if case .ipv6 = hop.host { return [] }
        if host.lowercased() == "localhost" { return [] }
        let listening = Set(agent.endpoint.localAddresses.map(\.transport))
        let wanted = [ResolvedTarget.Transport.udp, .tcp, .tls].filter { listening.contains(TransportKind($0)) }
        let locator = self.locator.withLock { l -> SIPServerLocator in
            if let l { return l }
            let made = SIPServerLocator(lookup: DNSClient(configuration: dns ?? .system()), configuration: .init(transports: wanted))
            l = made
            return made
        }
        do {
            let found = try await locator.resolve(hop)
            let peers = found.compactMap { t -> SIPPeer? in
                let kind = TransportKind(t.transport)
                guard listening.contains(kind), let address = try? SocketAddress(ip: t.address, port: t.port) else { return nil }
                return SIPPeer(transport: kind, address: address, serverName: t.serverName)
            }
            if peers.isEmpty { agent.endpoint.logger.warning("no server located for \(hop) over \(wanted)") }
            else { agent.endpoint.logger.debug("located \(hop): \(peers.map(\.description).joined(separator: ", "))") }
            return peers
        } catch {
            agent.endpoint.logger.warning("cannot locate \(hop): \(error)")
            return []
        }
    }

    /// Waits (at most `limit`, in 20 ms steps) while a transaction of the session is still open
    /// (the ACK of the last re-INVITE on its way), so that a new offer is delayed a little rather
    /// than refused (RFC 3261 §14.1). Returns at once when the session can offer or is gone.
    func waitUntilCanOffer(_ key: SessionKey, within limit: Duration) async {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            guard let s = await agent.session(key), !s.canOffer, !s.isTerminated else { return }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Puts the call on hold (re-INVITE with sendonly, or inactive when the peer holds us too)
    /// or takes it off hold.
    public func hold(_ key: SessionKey, _ held: Bool) async throws(SessionError) {
        await waitUntilCanOffer(key, within: .seconds(2))
        let offer = withEngine(key) { (e: inout OfferAnswer) throws(OfferAnswerError) in
            e.setHold(held)
            return try e.makeOffer()
        }
        guard case .success(let sdp) = offer else { throw .offerInProgress }
        let body = SessionBody.sdp(sdp.serialized())
        pendingHold.withLock { $0[key] = held }
        do {
            try await agent.perform(key) { s throws(SessionError) in try s.reinvite(body: body) }
        } catch {
            pendingHold.withLock { $0[key] = nil }
            _ = withEngine(key) { (e: inout OfferAnswer) throws(OfferAnswerError) in e.rollback() }
            throw error
        }
    }

    /// ``hold(_:_:)``, then the re-INVITE's final status (nil when none came within `timeout`).
    func reinviteForHold(_ key: SessionKey, _ held: Bool, timeout: Duration) async throws(SessionError) -> Int? {
        // Subscribed before the re-INVITE leaves, so its answer cannot be missed.
        let finals = completions.subscribe()
        try await hold(key, held)
        return await within(timeout) {
            for await (k, method, status) in finals where k == key && method == .invite { return status }
            return nil
        }
    }

    // MARK: Registration

    /// The states of the phone's own registration (``account``) from now on: the current one
    /// first (`.unregistered` before any), then every change (registering, registered with its
    /// lifetime, refreshes, failures with their reason, unregistering). Each access makes a new
    /// sequence; it finishes when the phone closes.
    public var registrationStateStream: AsyncStream<RegistrationClient.State> { account.registrationStates }

    /// The state of the phone's own registration now.
    public var registrationState: RegistrationClient.State { account.registrationState }

    /// Registers the phone's own address of record (``account``) with `registrar` (digest
    /// credentials from the configuration) and returns once it is registered, keeping it
    /// refreshed afterwards (see ``Account/register(with:peer:expires:timeout:)``).
    /// - Throws: ``RegistrationError/failed(_:)`` with the reason (bad credentials, 403,
    ///   unreachable…), or ``RegistrationError/timedOut`` after `timeout`.
    /// - Parameter peer: where to send the REGISTER when not to `registrar`'s own address (a
    ///   registrar named by a domain served elsewhere).
    public func register(with registrar: SIPURI, peer: SIPPeer? = nil, expires: UInt32 = 3600,
                         timeout: Duration = .seconds(32)) async throws(RegistrationError) {
        try await account.register(with: registrar, peer: peer, expires: expires, timeout: timeout)
    }

    /// Removes the phone's own binding and returns once the registrar confirmed it (or after `timeout`).
    public func unregister(timeout: Duration = .seconds(32)) async {
        await account.unregister(timeout: timeout)
    }

    // MARK: Accounts

    /// The phone's own account: the identity and credentials of its `SIPUserAgent.Configuration`.
    public var account: Account { accountList.withLock { $0[0] } }

    /// Every account of the phone, its own first, then in the order they were added.
    public var accounts: [Account] { accountList.withLock { $0 } }

    /// Adds an account on the phone's sockets (see ``Account``). It does not register until
    /// asked (``Account/register(timeout:)``).
    /// - Throws: ``AccountError/duplicate(_:)`` when an account has the same address of record.
    @discardableResult
    public func addAccount(_ configuration: Account.Configuration) throws(AccountError) -> Account {
        let made = accountList.withLock { list -> Account? in
            let key = SIPUserAgent.registrationKey(configuration.addressOfRecord)
            guard !list.contains(where: { $0.key == key }) else { return nil }
            let id = accountCount.add(1, ordering: .relaxed).newValue
            let user = configuration.addressOfRecord.user
            let shared = list.contains { $0.contactUser == user }
            let account = Account(id: id, configuration: configuration, contactUser: shared ? "\(user ?? "")-\(id)" : user, phone: self, agent: agent)
            list.append(account)
            return account
        }
        guard let made else { throw .duplicate(configuration.addressOfRecord) }
        return made
    }

    /// Removes an account: unregisters it (bounded by `timeout`) and forgets it; its calls go
    /// on. The phone's own account cannot be removed (nothing happens).
    public func removeAccount(_ account: Account, timeout: Duration = .seconds(5)) async {
        guard !account.isPrimary, accounts.contains(where: { $0 === account }) else { return }
        await account.unregister(timeout: timeout)
        accountList.withLock { $0.removeAll { $0 === account } }
        account.broadcast.publish(account.broadcast.current, final: true)
    }

    /// The account an incoming request is for, by its Request-URI's user part: the account whose
    /// Contact carries it, else the one account with that user, else the phone's own.
    func account(for request: SIPMessage) -> Account {
        let list = accounts
        // One account (the phone's own): nothing to choose, the Request-URI is not read.
        guard list.count > 1, let user = (try? request.requestURI().sipURI)?.user else { return list[0] }
        if let a = list.first(where: { $0.contactUser == user }) { return a }
        let same = list.filter { $0.addressOfRecord.user == user }
        return same.count == 1 ? same[0] : list[0]
    }

    /// The account of a registration event's address of record.
    private func account(registering aor: SIPURI) -> Account? {
        let key = SIPUserAgent.registrationKey(aor)
        return accounts.first { $0.key == key }
    }

    // MARK: Calls

    enum Screening {
        case pass
        case identified(String)
        case refuse(Int, CallFilter)
    }

    /// Do-not-disturb, then the call directory, by the caller's number.
    private func screen(_ invite: SIPMessage) async -> Screening {
        if screening.doNotDisturb { return .refuse(screening.doNotDisturbStatus, .doNotDisturb) }
        guard let directory = screening.directory, let number = CallScreening.callerNumber(of: invite) else { return .pass }
        switch await directory.entry(for: number) {
        case .blocked?: return .refuse(screening.blockedStatus, .blocked)
        case .identified(let label)?: return .identified(label)
        case nil: return .pass
        }
    }

    private func register(_ call: Call) {
        liveCalls.withLock { $0[call.key] = call }
        redirection.callAdded(call)
    }

    /// The call of a session (while it has not ended).
    public func call(for key: SessionKey) -> Call? { liveCalls.withLock { $0[key] } }

    /// The calls that have not ended, oldest first.
    public var calls: [Call] { liveCalls.withLock { $0.values.sorted { $0.id < $1.id } } }

    /// Incoming calls as they arrive (`.incoming(.trying)`; with `autoAnswer` set the phone
    /// answers them itself, else answer or reject them through the ``Call``). Each access makes
    /// a new sequence that sees the calls arriving from then on; it finishes when the phone closes.
    public var incomingCallStream: AsyncStream<Call> { arrivals.subscribe() }

    /// Calls as they end, incoming and outgoing (each once, in state ``CallState/ended(_:)``):
    /// for call records, or to count calls without following each one's states. Each access
    /// makes a new sequence that sees the calls ending from then on; it finishes when the phone
    /// closes.
    public var endedCallStream: AsyncStream<Call> { endings.subscribe() }

    /// Told by a call when it ended.
    func callEnded(_ call: Call) { endings.publish(call) }


    /// Our answer to an offer, or the 488 (with a Warning) that refuses it.
    private func answer(_ key: SessionKey, offer: SessionBody) -> Result<SessionBody, OfferAnswerError> {
        let result = engines.withLock { all -> Result<(body: SessionBody, negotiated: NegotiatedSession), OfferAnswerError> in
            let fresh = all[key] == nil
            if fresh, withoutMedia {
                // A phone without media answers every call's first offer from the same capabilities
                // but for the address and port: the same offer as last time gets the same exchange,
                // reissued under a new session id (no parse, negotiation or serialization).
                let (address, port) = bareEngineAddress
                // Taken apart, so that each part is moved where it goes, not copied.
                if case let (engine, body, negotiated)? = firstAnswer.withLock({ $0?.reuse(offer.bytes, address: address, port: port) }) {
                    all[key] = engine
                    return .success((body, negotiated))
                }
                all[key] = bareEngine(address: address, port: port)
            } else if fresh {
                all[key] = newEngine(for: key)
            }
            do throws(OfferAnswerError) {
                let answer = try all[key]!.receiveOffer(bytes: offer.bytes)
                let body = SessionBody.sdp(answer.sdp.serialized())
                if fresh, withoutMedia {
                    let entry = FirstAnswer(offer: offer.bytes, engine: all[key]!, answer: body.bytes)
                    firstAnswer.withLock { $0 = entry }
                }
                return .success((body, answer.negotiated))
            } catch {
                return .failure(error)
            }
        }
        if case .success(let answer) = result { applyMedia(key, answer.negotiated) }
        return result.map(\.body)
    }

    /// Handles `e` now, on the agent's queue, when nothing in it has to wait; false (nothing
    /// done) leaves it to ``handle(_:)``.
    private func handleNow(_ e: SIPUserAgent.Event, trace: (@Sendable (SIPMessage, Bool, SIPPeer) -> Void)?) -> Bool {
        switch e {
        case .incomingCall(let key, let m):
            // Screening by a directory, forwarding and Replaces wait for answers: not here.
            guard !screening.doNotDisturb, screening.directory == nil, forwardTargets.isEmpty, m.firstValueBytes(.replaces) == nil else { return false }
            admit(key, m, screened: .pass)
            // The offer is the session's, just taken from this INVITE (not decoded again).
            if let delay = autoAnswer { answerIncomingOnQueue(key, after: delay) }
        case .session(let key, let ev):
            switch ev {
            case .request(let m, _) where m.method == .refer || m.method == .notify: return false
            case .requestCompleted(let method, _, _) where method == .refer || method == .notify: return false
            case .stateChanged where transfers.withLock({ !$0.byNewCall.isEmpty && $0.byNewCall[key] != nil }): return false
            default: break
            }
            sessionEvent(key, ev)
            switch ev {
            case .stateChanged(let s):
                transferCallEnded(key, s)
            case .remoteOffer(let b, let method):
                // Answer re-INVITEs and UPDATEs (and a 2xx offer to our offerless INVITE); the
                // initial INVITE's offer is answered when the call is accepted.
                guard agent.sessionStateOnQueue(key) != .incoming else { break }
                report("\(name): peer offers \(PhoneSDP.direction(of: b)) in \(method.token)")
                switch answer(key, offer: b) {
                case .success(let a):
                    try? agent.performOnQueue(key) { s throws(SessionError) in try s.answer(a) }
                case .failure(let err):
                    report("\(name): refusing the offer: \(err.reason)")
                    let warning = err.warningHeaderValue()
                    try? agent.performOnQueue(key) { s throws(SessionError) in try s.rejectOffer(488, warning: warning) }
                }
            case .offerRequested:
                if case .success(let sdp) = withEngine(key, { (e: inout OfferAnswer) throws(OfferAnswerError) in try e.makeOffer() }) {
                    try? agent.performOnQueue(key) { s throws(SessionError) in try s.answer(.sdp(sdp.serialized())) }
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
                let status = receivedInDialog(key, m)
                try? agent.performOnQueue(key) { s throws(SessionError) in s.respond(to: m, in: tx, statusCode: status) }
            case .requestCompleted(let method, let code, _):
                if (method == .invite || method == .update) && code >= 300 {
                    // Our offer was refused: the previous description stands.
                    _ = withEngine(key) { (e: inout OfferAnswer) throws(OfferAnswerError) in e.rollback() }
                }
                report("\(name): \(method.token) → \(code)")
            case .redirected(let code, let target):
                report("\(name): redirected (\(code)) to \(target)")
            case .glare(let d):
                report("\(name): glare (491), retrying in \(d)")
            default:
                break
            }
        case .registration(let s, let aor):
            guard let account = account(registering: aor) else { break }
            metrics?.registration(s)
            account.publish(s)
            report(account.isPrimary ? "\(name): \(s.label)" : "\(name): \(aor): \(s.label)")
        case .trace(let m, let out, let peer):
            trace?(m, out, peer)
        case .outOfDialogRefer, .dialogRequest:
            return false
        case .request:
            break
        }
        return true
    }

    /// What ``handleNow(_:trace:)`` leaves: the events that wait for an answer (a directory,
    /// a decision, a transfer's NOTIFY), off the agent's queue.
    private func handle(_ e: SIPUserAgent.Event) async {
        switch e {
        case .incomingCall(let key, let m):
            let screened = await screen(m)
            if case .refuse(let status, let why) = screened {
                // Never alerted: answered at once, logged, not in the incoming calls.
                report("\(name): refused a call from \((try? m.from().uri.description) ?? "?") (\(why)) with \(status)")
                agent.logger(for: key).info("call refused by screening (\(why)) with \(status)")
                try? await agent.perform(key) { s throws(SessionError) in try s.reject(status) }
                return
            }
            admit(key, m, screened: screened)
            if !forwardTargets.isEmpty {
                await forward(key, to: forwardTargets)
            } else if let replaced = await replacesDecision(for: key, invite: m) {
                // RFC 3891: a call that replaces one of ours is answered at once, or refused.
                await takeReplacing(key, m, replaced)
            } else if let delay = autoAnswer {
                await answerIncoming(key, after: delay, invite: m)
            }
        case .session(let key, let ev):
            sessionEvent(key, ev)
            switch ev {
            case .stateChanged(let s):
                await transferCallChanged(key, s)
            case .request(let m, let tx) where m.method == .refer:
                await receivedRefer(key, m, tx)
            case .request(let m, let tx) where m.method == .notify:
                await receivedNotify(key, m, tx)
            case .requestCompleted(let method, let code, let response) where method == .refer || method == .notify:
                await transferRequestCompleted(key, method, code, response)
            default:
                break
            }
        case .outOfDialogRefer(let m, let tx, _):
            await receivedOutOfDialogRefer(m, tx)
        case .dialogRequest(let key, let m, let tx):
            await receivedSubscriptionRequest(key, m, tx)
        case .registration, .request, .trace:
            break
        }
    }

    /// A new incoming call (past screening): noted, made a ``Call``, announced.
    private func admit(_ key: SessionKey, _ m: SIPMessage, screened: Screening) {
        incoming.withLock { $0.append(key) }
        let from = try? m.from()
        var label: String? = nil
        if case .identified(let l) = screened, (from?.displayName ?? nil)?.isEmpty ?? true { label = l }
        let call = Call(id: callCount.add(1, ordering: .relaxed).newValue, key: key, direction: .incoming,
                        remote: from?.uri, phone: self, account: account(for: m), label: label, attachedData: attachedData(of: m, key: key))
        register(call)
        arrivals.publish(call)
        report({
            // Appended to one buffer of the right size (an interpolation grew its own and
            // appended the usual empty parts).
            let uri = from.map { $0.uri.description } ?? "?"
            var line = ""
            line.reserveCapacity(name.utf8.count + 21 + uri.utf8.count)
            line += name
            line += ": incoming call from "
            line += uri
            if let referredBy = (try? m.referredBy()) ?? nil { line += " (Referred-By \(referredBy.uri))" }
            if let replaces = (try? m.replaces()) ?? nil { line += " (Replaces \(replaces))" }
            return line
        }())
    }

    /// What every session event does to the call and the phone's records, before the event's
    /// own handling (which may wait).
    private func sessionEvent(_ key: SessionKey, _ ev: SessionEvent) {
        let call = call(for: key)
        // The media stops, and the call leaves `calls`, before the call is seen ended (its
        // `.mediaActive(false)` first): whoever wakes on the ended state finds it gone.
        if case .stateChanged(let s) = ev, s.isTerminated {
            stopMedia(key)
            liveCalls.withLock { _ = $0.removeValue(forKey: key) }
        }
        call?.feed(ev)
        if case .requestCompleted(let method, let code, _) = ev {
            if method == .invite, let held = pendingHold.withLock({ $0.removeValue(forKey: key) }), (200..<300).contains(code) {
                call?.noteHold(local: held)
            }
            completions.publish((key, method, code))
        }
        guard case .stateChanged(let s) = ev else { return }
        if s.isTerminated {
            _ = engines.withLock { $0.removeValue(forKey: key) }
        }
        // (Only our calls have one: an empty table is not searched.)
        if s.isTerminated || s == .confirmed { _ = offerEngines.withLock { $0.isEmpty ? nil : $0.removeValue(forKey: key) } }
        // Reported before it is recorded: whoever waits for the state sees the lines first.
        report(stateLine(s))
        callStates.withLock { $0[key, default: Self.newStateList()].append(s) }
        if s.isTerminated { forgetOldCalls(ended: key) }
    }

    /// An in-dialog request other than REFER and NOTIFY (INFO with digits or call data…):
    /// noted on the call; the status to answer it with (400 for a body that cannot be read).
    private func receivedInDialog(_ key: SessionKey, _ m: SIPMessage) -> Int {
        guard m.method == .info, let body = SessionBody(of: m), body.contentType.type.lowercased() == "application" else { return 200 }
        let call = call(for: key)
        let subtype = body.contentType.subtype.lowercased()
        if subtype == "dtmf-relay" {
            // RFC 4733's SIP INFO fallback (application/dtmf-relay); a bad body is a 400.
            guard let relay = try? DTMFRelayBody(parsing: body.bytes) else { return 400 }
            report("\(name): DTMF received \(relay.signal) (INFO)")
            call?.note(.digit(relay.signal, via: .info))
            infoDigits.withLock { $0[key, default: ""].append(relay.signal) }
        } else if subtype == CallData.contentType.subtype {
            // Call data (CallData): a body that is not form-encoded UTF-8 is a 400.
            let data: CallData
            do throws(CallDataError) {
                data = try CallData(encoded: String(decoding: body.bytes, as: UTF8.self))
            } catch {
                return 400
            }
            report("\(name): data received: \(data)")
            call?.note(.data(data))
        }
        return 200
    }

    /// Answers an incoming call: its offer (if any) now (a refusal is a 488), 180 (or a 183 with
    /// early media) unless `ring` is off, then the 200 after `delay`.
    /// `invite`, when given, is the call's INVITE (its offer is read from it instead of the session).
    func answerIncoming(_ key: SessionKey, after delay: Duration, ring: Bool = true, invite: SIPMessage? = nil) async {
        await agent.onQueue { self.answerIncomingOnQueue(key, after: delay, ring: ring, invite: invite) }
    }

    /// ``answerIncoming(_:after:ring:invite:)`` on the agent's queue: the 200 (when it goes at
    /// once) is out when this returns (a Replaces takeover ends the old call only then).
    private func answerIncomingOnQueue(_ key: SessionKey, after delay: Duration, ring: Bool = true, invite: SIPMessage? = nil) {
        // The offer in the INVITE (if any) is answered now; a refusal is a 488.
        let offer: SessionBody?
        if let invite { offer = SessionBody(of: invite) } else { offer = agent.remoteBodyOnQueue(key) }
        var answerBody: SessionBody?
        if let o = offer {
            switch answer(key, offer: o) {
            case .success(let a):
                answerBody = a
            case .failure(let err):
                report("\(name): refusing the offer: \(err.reason)")
                let warning = err.warningHeaderValue() ?? ""
                try? agent.performOnQueue(key) { s throws(SessionError) in try s.reject(488, headers: [(.warning, warning)]) }
                return
            }
        }
        let early = offer == nil ? nil : earlyMedia
        if let early {
            // Early media: the answer goes in a 183 now, the same one in the 200 later.
            try? agent.performOnQueue(key) { s throws(SessionError) in try s.provisional(183, body: answerBody) }
            report("\(name): early media for \(early)")
        } else if delay > .zero {
            if ring { try? agent.performOnQueue(key) { s throws(SessionError) in try s.provisional(180) } }
        }
        let hasOffer = offer != nil
        guard early != nil || delay > .zero else {
            // Answered at once (the 180, when it rings, and the 200 in one step).
            sendAnswer(key, hasOffer: hasOffer, afterEarlyMedia: false, ringFirst: ring, answer: answerBody)
            return
        }
        // Ring in a task of its own: the queue goes on meanwhile.
        Task {
            try? await Task.sleep(for: early ?? delay)
            await self.agent.onQueue { self.sendAnswer(key, hasOffer: hasOffer, afterEarlyMedia: early != nil) }
        }
    }

    /// The 200 to an incoming call, on the agent's queue: our answer to its offer (`answer`
    /// when just made, else the engine's), or our offer when it had none.
    private func sendAnswer(_ key: SessionKey, hasOffer: Bool, afterEarlyMedia: Bool, ringFirst: Bool = false, answer: SessionBody? = nil) {
        if afterEarlyMedia, let options = mediaOptions, options.earlyInput != nil, let media = media(key) {
            // The call's own input takes over from the early one, in the same stream.
            do {
                if let source = try PhoneMediaOptions.source(options.input) { media.setInput(source) }
            } catch {
                report("\(name): input not switched: \(error)")
            }
        }
        let body: SessionBody?
        if hasOffer, let answer {
            body = answer
        } else if hasOffer {
            body = engines.withLock { $0[key]?.localDescription }.map { SessionBody.sdp($0.serialized()) }
        } else {
            // No offer in the INVITE: ours goes in the 200, the answer in the ACK.
            body = try? withEngine(key) { (e: inout OfferAnswer) throws(OfferAnswerError) in
                SessionBody.sdp(try e.makeOffer().serialized())
            }.get()
        }
        guard let body else {
            // Without a body the 200 may be refused after the 180 was made: both on a copy.
            try? agent.performOnQueue(key) { s throws(SessionError) in
                ringFirst ? try s.provisional(180) + s.accept(body: nil) : try s.accept(body: nil)
            }
            return
        }
        // With a body, a 200 after a 180 that went through is never refused: both commands on
        // the stored session (they change nothing when they throw), the 180 first when it
        // rings, in one step (one look-up of the session); the 180's actions go even if the
        // 200 is refused, and in order before the 200's.
        try? agent.performInPlaceOnQueue(key) { s throws(SessionError) in
            guard ringFirst else { return try s.accept(body: body) }
            var actions = try s.provisional(180)
            try? s.accept(body: body, into: &actions)
            return actions
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

    /// The states a session went through (kept for the last ``endedCallsKept`` ended calls).
    public func states(_ key: SessionKey) -> [SessionState] { callStates.withLock { $0[key] ?? [] } }

    /// Incoming calls so far: those not ended, and the last ``endedCallsKept`` ended ones.
    public var incomingCalls: [SessionKey] { incoming.withLock { $0 } }

    /// How many ended calls the key-based history (``states(_:)``, ``incomingCalls``,
    /// ``digitsReceivedByInfo(_:)``, ``mediaStatistics(_:)``) keeps: a phone that runs for days
    /// must not grow with every call it ever had. ``Call`` handles keep their own state.
    public var endedCallsKept: Int { historyLimit.load(ordering: .relaxed) }
    /// ``endedCallsKept`` (1,000; tests lower it).
    let historyLimit = Atomic<Int>(1000)

    /// A call's list of states, with room for a usual call's (trying, ringing, up, ending,
    /// ended): grown once, not at every other state.
    private static func newStateList() -> [SessionState] {
        var list: [SessionState] = []
        list.reserveCapacity(6)
        return list
    }

    /// Notes an ended call and, every so often, forgets the oldest ended calls beyond
    /// ``endedCallsKept`` (in batches, so the pruning costs O(1) a call on average).
    private func forgetOldCalls(ended key: SessionKey) {
        let limit = max(1, endedCallsKept)
        let old = endedCalls.withLock { e -> [SessionKey] in
            e.append(key)
            guard e.count >= limit + max(1, limit / 4) else { return [] }
            let drop = Array(e.prefix(e.count - limit))
            e.removeFirst(drop.count)
            return drop
        }
        guard !old.isEmpty else { return }
        let gone = Set(old)
        callStates.withLock { for k in old { $0[k] = nil } }
        infoDigits.withLock { for k in old { $0[k] = nil } }
        finalStatistics.withLock { for k in old { $0[k] = nil } }
        incoming.withLock { $0.removeAll { gone.contains($0) } }
    }

    /// The states of the phone's own registration so far (the last 64).
    public var registrationStates: [RegistrationClient.State] { account.registrationHistory }

    /// Waits (bounded) for a condition; returns whether it held in time.
    public func wait(timeout: Duration, _ condition: @Sendable () -> Bool) async -> Bool {
        let clock = MonotonicClock(), deadline = clock.now + timeout
        while clock.now < deadline {
            if condition() { return true }
            // A cancelled task stops waiting (Task.sleep would return at once, forever).
            guard (try? await Task.sleep(for: .milliseconds(5))) != nil else { break }
        }
        return condition()
    }

    /// Waits until the session reaches a state matching `match`.
    public func wait(_ key: SessionKey, timeout: Duration, for match: @escaping @Sendable (SessionState) -> Bool) async -> Bool {
        await wait(timeout: timeout) { self.states(key).contains(where: match) }
    }
}

/// A first offer a phone without media answered, its engine after the answer and the answer's
/// bytes: a new call whose engine would have the same capabilities (the address and port; the
/// rest is the phone's own) and gets the same offer bytes takes this exchange, reissued under a
/// session id of its own (``SDP/OfferAnswer/reissued(sessionID:)``), instead of parsing,
/// negotiating and serializing it again.
///
/// Kept after every fresh first answer, so making one costs no more than keeping its parts:
/// real phones vary their offer (`o=`, the port) from call to call and never reuse it; the
/// answer's bytes are split around its session id when an identical offer first comes.
struct FirstAnswer: Sendable {
    let offer: [UInt8]
    let address: String
    let port: UInt16?
    let engine: OfferAnswer
    let answer: [UInt8]
    /// The answer's bytes up to the `o=` session id, and after the version (both the id):
    /// nil until the first reuse, `.none` when the answer cannot be split so.
    private var parts: (head: ArraySlice<UInt8>, tail: ArraySlice<UInt8>)??

    /// The entry for `engine` after its first answer to `offer`, serialized as `answer`.
    init(offer: [UInt8], engine: OfferAnswer, answer: [UInt8]) {
        self.offer = offer
        self.address = engine.capabilities.address
        self.port = engine.capabilities.streams.first?.port
        self.engine = engine
        self.answer = answer
    }

    /// ``parts``, made from the answer: "v=0\r\no=<username> <id> <version> ..." with the
    /// version equal to the id.
    private func split() -> (head: ArraySlice<UInt8>, tail: ArraySlice<UInt8>)? {
        guard let sdp = engine.localDescription else { return nil }
        let start = Array("v=0\r\no=".utf8) + Array(sdp.origin.username.utf8) + [UInt8(ascii: " ")]
        let id = Array(String(engine.sessionID).utf8)
        let numbers = id + [UInt8(ascii: " ")] + id + [UInt8(ascii: " ")]
        guard answer.starts(with: start), answer.dropFirst(start.count).starts(with: numbers) else { return nil }
        return (answer[..<start.count], answer[(start.count + numbers.count - 1)...])
    }

    /// The exchange for a new call of the phone, whose engine would have `address` and `port`,
    /// when `offer` is this one's and the exchange can be reissued: the engine, the answer's
    /// body and what was agreed.
    mutating func reuse(_ offer: [UInt8], address: String, port: UInt16) -> (engine: OfferAnswer, body: SessionBody, negotiated: NegotiatedSession)? {
        guard port == self.port, address == self.address, Self.same(offer, self.offer),
              let engine = engine.reissued(sessionID: Phone.newSessionID()), let negotiated = engine.negotiated else { return nil }
        if parts == nil { parts = .some(split()) }
        guard let (head, tail) = parts ?? nil else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(head.count + 2 * 20 + 1 + tail.count)
        bytes += head
        Self.appendSessionID(engine.sessionID, to: &bytes)
        bytes += tail
        assert(bytes == engine.localDescription?.serialized(), "a reissued answer differs from its serialization")
        return (engine, SessionBody.sdp(bytes), negotiated)
    }

    /// Whether two offers are the same bytes (compared as memory: the offer is a few hundred
    /// bytes, compared on every call).
    private static func same(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { x in b.withUnsafeBytes { y in x.isEmpty || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0 } }
    }

    /// Appends `id` in decimal twice with a space between ("<id> <id>": the `o=` line's session
    /// id and version), as `String(id)` writes it but without the String: the room is appended
    /// once, then both copies are written digit by digit from the end, in one pass.
    private static func appendSessionID(_ id: UInt64, to bytes: inout [UInt8]) {
        var digits = 1, rest = id
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * digits + 1))
        bytes.withUnsafeMutableBufferPointer { b in
            var n = id, i = start + digits
            repeat {
                i -= 1
                let digit = UInt8(ascii: "0") + UInt8(n % 10)
                b[i] = digit
                b[i + digits + 1] = digit
                n /= 10
            } while n > 0
        }
    }
}
