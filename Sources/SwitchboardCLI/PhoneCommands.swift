import Conformance
import ArgumentParser
import Synchronization
import SIPMessage
import SIPAuth
import SIPDialog
import SIPRuntime
import SIPTransport
import SwitchboardTools
import MediaRuntime
import SDP
import SIPProxy
import Switchboard
import NetworkIO

/// The transfer options shared by `call` and `answer` (RFC 5589: we are the transferor).
struct TransferOptions: ParsableArguments {
    @Option(name: .long, help: "Once the call is up, transfer it to this URI (blind: REFER, the call is held first) and exit 0 only when the transfer succeeded.")
    var transferTo: String?

    @Option(name: .long, help: "Attended transfer: once the call is up, hold it, call this URI, and when that call is answered transfer the first call to it (REFER with Replaces).")
    var consult: String?

    @Option(name: .long, help: "With --transfer-to or --consult: seconds in the call before transferring.")
    var transferAfter: Double = 1

    @Option(name: .long, help: "A REFER we receive (as transferee): accept or reject (603).")
    var refer: ReferAnswer = .accept

    enum ReferAnswer: String, ExpressibleByArgument { case accept, reject }

    func validate() throws {
        if transferTo != nil && consult != nil { throw ValidationError("--transfer-to and --consult are exclusive") }
        guard transferAfter >= 0 else { throw ValidationError("--transfer-after takes a number of seconds") }
    }

    var wanted: Bool { transferTo != nil || consult != nil }

    /// Transfers the call `key` as asked; returns the outcome (nil when no transfer was asked).
    func run(_ phone: Phone, _ key: SessionKey, say: @escaping @Sendable (String) -> Void) async throws -> ReferOutcome? {
        guard wanted else { return nil }
        try await Task.sleep(for: .milliseconds(Int64(transferAfter * 1000)))
        guard phone.states(key).last == .confirmed else { return nil }
        try? await phone.hold(key, true)
        // The REFER goes once the hold is answered (RFC 5589's flows; a transferee that handles
        // one transaction at a time, as SIPp scenarios do, needs it), or after 5 s regardless.
        for _ in 0..<250 {
            guard let s = await phone.agent.session(key), !s.canOffer, !s.isTerminated else { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        if let t = transferTo {
            return await phone.transfer(key, to: try SIPURI(t))
        }
        let consultation = await phone.dial(try SIPURI(consult!))
        guard (try? await consultation.waitUntil("consult", timeout: .seconds(30)) { $0.isEstablished }) != nil else {
            say("the consultation call was not answered: taking the call back")
            try? await phone.hold(key, false)
            return .unknown(.noNotify)
        }
        return await phone.transfer(key, replacing: consultation.key)
    }
}

/// The account options shared by `call` and `answer`.
struct AccountOptions: ParsableArguments {
    @Option(name: .long, help: "Authentication user name for 401/407 challenges (default: our AOR's user).")
    var user: String?

    @Option(name: .long, help: "Password for 401/407 challenges.")
    var password: String?

    @Option(name: .long, help: "Register with this registrar (e.g. sip:127.0.0.1:5080) first, and unregister at the end.")
    var register: String?

    /// The digest credentials for `identity`, when a password was given.
    func credentials(for identity: SIPURI) -> DigestClient? {
        password.map { DigestClient(username: user ?? identity.user ?? "", password: $0) }
    }
}

/// The media options shared by `call` and `answer`.
struct MediaOptions: ParsableArguments {
    @Option(name: .long, help: "Send this tone (Hz) (default 440 when nothing else is played).")
    var tone: Double?

    @Option(name: .long, help: "Play this PCM WAV file (then silence).")
    var play: String?

    @Option(name: .long, help: "Record what the peer sends to this WAV file (16-bit mono, 8 kHz).")
    var record: String?

    @Option(name: .long, help: "SDES-SRTP: off, optional (RTP/AVP with a=crypto) or mandatory (RTP/SAVP).")
    var srtp: String = "off"

    @Option(name: .long, help: "Send these digits as RFC 4733 events once the call is up (e.g. 123#).")
    var dtmf: String?

    @Option(name: .long, help: "RTP port range, LOW-HIGH (even RTP port, RTCP on the next).")
    var rtpPorts: String = "20000-29999"

    @Flag(name: .long, help: "Send back what the peer sends (an echo test line), instead of a tone or a file.")
    var echo = false

    @Flag(name: .long, help: "No media: write a placeholder port and send nothing.")
    var noMedia = false

    func phoneMedia(host: String) throws -> PhoneMediaOptions? {
        guard !noMedia else { return nil }
        let policy = try MediaArguments.srtpPolicy(srtp)
        let ports = try MediaArguments.portRange(rtpPorts)
        let input: MediaAudioInput
        if echo {
            input = .echo
        } else if let play {
            input = .wav(path: play)
        } else {
            input = .tone(frequency: tone ?? 440)
        }
        return PhoneMediaOptions(
            configuration: MediaSessionConfiguration(localAddress: MediaArguments.address(forListenHost: host), portRange: ports, srtpPolicy: policy),
            input: input, recordPath: record)
    }
}

/// The parsing of the media options that `call`/`answer` and `serve --echo` share.
enum MediaArguments {
    /// `--srtp`: off, optional or mandatory.
    static func srtpPolicy(_ text: String) throws -> SRTPPolicy {
        guard let policy = SRTPPolicy(rawValue: text) else { throw ValidationError("--srtp takes off, optional or mandatory") }
        return policy
    }

    /// `--rtp-ports LOW-HIGH`.
    static func portRange(_ text: String) throws -> ClosedRange<UInt16> {
        let bounds = text.split(separator: "-").compactMap { UInt16($0) }
        guard bounds.count == 2, bounds[0] < bounds[1] else { throw ValidationError("--rtp-ports takes LOW-HIGH") }
        return bounds[0]...bounds[1]
    }

    /// The media address for a listen host: a wildcard listen address sends media from 127.0.0.1.
    static func address(forListenHost host: String) -> String {
        host == "0.0.0.0" || host == "::" ? "127.0.0.1" : host
    }
}

struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A registrar/proxy and two phones on 127.0.0.1: register with digest, call, hold, resume, hang up, as a ladder.",
        discussion: "Exits 0 when every step happened."
    )

    func run() async throws {
        let ok = try await DemoRun.run { print($0) }
        if !ok { throw ExitCode(1) }
    }
}

/// Prints state changes with the time since start.
func stamped(_ start: MonotonicClock.Instant) -> @Sendable (String) -> Void {
    { line in
        let d = MonotonicClock.now - start
        let ms = d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
        // "%7.3f  " without Foundation (whose ICU-backed loading costs every command ~10 ms).
        let whole = String(ms / 1000), fraction = String(ms % 1000)
        let text = whole + "." + String(repeating: "0", count: 3 - fraction.count) + fraction
        print(String(repeating: " ", count: max(0, 7 - text.count)) + text + "  " + line)
    }
}


struct Call: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Place one call, print its state changes as they happen, optionally hold and resume it, then hang up.",
        discussion: "Exits 0 when the call was answered and ended by us or the peer, 1 otherwise."
    )

    @Argument(help: "Whom to call, e.g. sip:bob@127.0.0.1:5090.")
    var target: String

    @Option(name: .long, help: "Our address of record (default: sip:switchboard@<the target's host>).")
    var from: String?


    @Option(name: .long, help: "An outbound proxy every request goes through, e.g. sip:127.0.0.1:5080.")
    var proxy: String?


    @Option(name: .long, help: "Local address: udp:HOST:PORT or tcp:… (port 0 = any).")
    var listen: String = "udp:127.0.0.1:0"

    @Option(name: .long, help: "Seconds to stay in the call before hanging up.")
    var duration: Double = 2

    @Flag(name: .long, help: "Hold the call (re-INVITE sendonly) a third of the way in and resume it at two thirds.")
    var hold = false

    @Option(name: .long, help: "Give up on the setup after this many seconds (CANCEL).")
    var timeout: Double = 30

    @Option(name: .long, help: "A 3xx answer: follow its targets (q order, each once, at most 5 hops) or reject (the call fails with the targets printed).")
    var redirects: RedirectAnswer = .follow

    enum RedirectAnswer: String, ExpressibleByArgument { case follow, reject }


    @OptionGroup var account: AccountOptions
    @OptionGroup var media: MediaOptions
    @OptionGroup var transfer: TransferOptions
    @OptionGroup var logging: LoggingOptions
    @OptionGroup var tracing: TraceOptions

    func run() async throws {
        let targetURI = try SIPURI(target)
        let identity = try SIPURI(from ?? "sip:switchboard@\(targetURI.host)")
        let point = try ListenSpec.parse(listen)
        let transport: TransportKind
        switch point { case .tcp: transport = .tcp; case .tls: transport = .tls; case .udp: transport = .udp }
        let creds = account.credentials(for: identity)
        var config = SIPUserAgent.Configuration(endpoint: .init(listen: [point]), identity: identity, credentials: creds,
                                                outboundProxy: try proxy.map { try SIPURI($0) }, transport: transport)
        config.logger = logging.logger("switchboard.call")
        config.redirects = RedirectPolicy(mode: redirects == .follow ? .follow : .fail)
        let say = stamped(.now)
        let host: String
        switch point { case .tcp(let a), .tls(let a), .udp(let a): host = a.ipString }
        let accepts = transfer.refer == .accept
        let phone = try Phone(name: "call", configuration: config, media: try media.phoneMedia(host: host),
                              referDecision: { _, _ in accepts }, report: { say(String($0.dropFirst(6))) }, trace: tracing.traceLines())
        defer { phone.close() }
        say("from \(identity) on \(phone.agent.endpoint.localAddresses[0])")
        if let r = account.register {
            let registrar = try SIPURI(r)
            do throws(RegistrationError) {
                try await phone.register(with: registrar, expires: 600, timeout: .seconds(40))
            } catch {
                throw ExitCode(1)
            }
        }
        // SIGINT/SIGTERM hang up at once (CANCEL or BYE) and end the command.
        let stop = StopSignal()
        let placed = await phone.dial(targetURI)
        // The call the user is in: ours, or the one that replaced it while it rang (an
        // attended transfer to our ringing call, RFC 3891): the conversation goes on there.
        let current = { @Sendable () -> SessionKey in
            var c = placed
            while let r = c.replacement { c = r }
            return c.key
        }
        let answered = await phone.wait(timeout: .seconds(timeout)) {
            stop.requested || phone.states(current()).contains { $0 == .confirmed || $0.isTerminated }
        }
        let key = current()
        if key != placed.key { say("the call was replaced by the call \(key.callID)") }
        guard answered, !stop.requested || phone.states(key).contains(.confirmed), phone.states(key).contains(.confirmed) else {
            if !phone.states(key).contains(where: \.isTerminated) {
                say(stop.requested ? "interrupted: cancelling" : "no answer after \(timeout) s: cancelling")
                try? await phone.agent.perform(key) { s throws(SessionError) in try s.cancel() }
                _ = await phone.wait(key, timeout: .seconds(2)) { $0.isTerminated }
            }
            throw ExitCode(1)
        }
        if let digits = media.dtmf {
            do { try await phone.sendDigits(key, digits) } catch { say("DTMF not sent: \(error)") }
        }
        if transfer.wanted {
            let outcome = try await transfer.run(phone, key, say: say)
            // A transfer that did not succeed leaves the call with us: hang it up and say so.
            if !phone.states(key).contains(where: \.isTerminated) {
                try? await phone.agent.perform(key) { s throws(SessionError) in try s.bye() }
            }
            _ = await phone.wait(key, timeout: .seconds(5)) { $0.isTerminated }
            guard outcome?.isSuccess == true else { throw ExitCode(1) }
            return
        }
        let third = Duration.milliseconds(Int64(duration * 1000 / 3))
        if hold {
            if await !stop.sleep(third) {
                try? await phone.hold(key, true)
                if await !stop.sleep(third) {
                    try? await phone.hold(key, false)
                    _ = await stop.sleep(third)
                }
            }
        } else {
            _ = await stop.sleep(.milliseconds(Int64(duration * 1000)))
        }
        if stop.requested { say("interrupted: hanging up") }
        if !phone.states(key).contains(where: \.isTerminated) {
            try? await phone.agent.perform(key) { s throws(SessionError) in try s.bye() }
        }
        // The user's call ends with our BYE: its transaction finishes in the background (at most
        // 2 s are given to its answer), never holding the command for Timer F.
        _ = await phone.wait(key, timeout: .seconds(2)) { $0.isTerminated }
        if account.register != nil {
            await phone.unregister(timeout: .seconds(40))
        }
        let end = phone.states(key).last
        let hungUp = phone.states(key).contains(.terminating) && end != .terminated(.remoteHangup)
        guard end == .terminated(.localHangup) || end == .terminated(.remoteHangup) || hungUp else { throw ExitCode(1) }
    }
}

struct Answer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A phone that answers every call after ringing, answers holds and resumes, and prints what happens.",
        discussion: "Runs until SIGINT/SIGTERM, --duration, or --count calls have ended."
    )

    @Option(name: .long, help: "Where to listen: udp:HOST:PORT or tcp:….")
    var listen: String = "udp:127.0.0.1:5090"

    @Option(name: .long, help: "Our address of record (default: sip:switchboard@<listen host>).")
    var aor: String?


    @Option(name: .long, help: "Ring this many milliseconds before answering.")
    var ring: Int = 300

    @Option(name: .long, help: "Hang up answered calls after this many seconds (default: wait for the caller).")
    var hangupAfter: Double?

    @Option(name: .long, help: "Exit after this many calls have ended.")
    var count: Int?

    @Option(name: .long, help: "Stop after this many seconds.")
    var duration: Double?


    @Option(name: .long, help: "Send early media for this many seconds before answering: 183 Session Progress with the SDP answer instead of 180, then the 200.")
    var earlyMedia: Double?

    @Option(name: .long, help: "With --early-media: send this tone (Hz) before the answer (ringback, announcement), then the call's own audio.")
    var earlyTone: Double?

    @Option(name: .long, help: "Forward every call: answer with 302 listing these targets (comma-separated, preferred first; q-values and Diversion added).")
    var forwardTo: String?

    @Option(name: .long, help: "With --forward-to: the history the 302 carries: diversion (RFC 5806), history-info (RFC 7044) or both.")
    var forwardHistory: ForwardHistoryOption = .diversion

    @Option(name: .long, help: ArgumentHelp("Break an RFC rule on purpose, to test conformance checkers: \(Misbehaviour.allCases.map(\.rawValue).joined(separator: ", ")).",
                                            valueName: "fault"))
    var misbehave: Misbehaviour?

    @OptionGroup var account: AccountOptions
    @OptionGroup var media: MediaOptions
    @OptionGroup var transfer: TransferOptions
    @OptionGroup var logging: LoggingOptions
    @OptionGroup var tracing: TraceOptions

    func phoneMedia(host: String) throws -> PhoneMediaOptions? {
        guard var options = try media.phoneMedia(host: host) else {
            if earlyMedia != nil { throw ValidationError("--early-media needs media (not --no-media)") }
            return nil
        }
        if let e = earlyMedia {
            guard e > 0 else { throw ValidationError("--early-media takes a positive number of seconds") }
            options.earlyMedia = .milliseconds(Int64(e * 1000))
        }
        if let f = earlyTone {
            guard earlyMedia != nil else { throw ValidationError("--early-tone needs --early-media") }
            guard !media.echo else { throw ValidationError("--early-tone cannot be combined with --echo") }
            options.earlyInput = .tone(frequency: f)
        }
        return options
    }

    func run() async throws {
        let point = try ListenSpec.parse(listen)
        let transport: TransportKind
        let host: String
        switch point {
        case .tcp(let a): transport = .tcp; host = a.ipString
        case .tls(let a): transport = .tls; host = a.ipString
        case .udp(let a): transport = .udp; host = a.ipString
        }
        let identity = try SIPURI(aor ?? "sip:switchboard@\(host)")
        let creds = account.credentials(for: identity)
        var config = SIPUserAgent.Configuration(endpoint: .init(listen: [point]), identity: identity, credentials: creds, transport: transport)
        config.logger = logging.logger("switchboard.answer")
        config.endpoint.outboundRewrite = misbehave?.rewriter()
        let say = stamped(.now)
        let accepts = transfer.refer == .accept
        let phone = try Phone(name: "answer", configuration: config, autoAnswer: .milliseconds(Int64(ring)),
                              media: try phoneMedia(host: host),
                              forwardTo: try (forwardTo ?? "").split(separator: ",").map { try SIPURI(String($0)) },
                              forwardHistory: forwardHistory.history,
                              referDecision: { _, _ in accepts },
                              report: { say(String($0.dropFirst(8))) }, trace: tracing.traceLines())
        defer { phone.close() }
        say("listening on \(phone.agent.endpoint.localAddresses[0]) as \(identity)")
        if let r = account.register {
            await phone.agent.register(registrar: try SIPURI(r), expires: 600)
        }
        let stop = StopSignal()
        let clock = MonotonicClock(), start = clock.now
        var hungUp: Set<SessionKey> = []
        var answeredAt: [SessionKey: MonotonicClock.Instant] = [:]
        var dtmfSent: Set<SessionKey> = []
        var transferring: Set<SessionKey> = []
        while !stop.requested {
            try await Task.sleep(for: .milliseconds(50))
            if let d = duration, clock.now - start >= .milliseconds(Int64(d * 1000)) { break }
            let calls = phone.incomingCalls
            let ended = calls.filter { phone.states($0).contains(where: \.isTerminated) }
            if let c = count, ended.count >= c { break }
            if let digits = media.dtmf {
                for k in calls where phone.states(k).last == .confirmed && !dtmfSent.contains(k) {
                    dtmfSent.insert(k)
                    do { try await phone.sendDigits(k, digits) } catch { say("DTMF not sent: \(error)") }
                }
            }
            if transfer.wanted {
                // Each answered call is transferred once (we are the transferor).
                for k in calls where phone.states(k).last == .confirmed && !transferring.contains(k) {
                    transferring.insert(k)
                    let options = transfer
                    Task {
                        let outcome = try? await options.run(phone, k, say: say)
                        say("transfer of \(k.callID): \(outcome.map { "\($0)" } ?? "not done")")
                    }
                }
            }
            if let h = hangupAfter {
                for k in calls where phone.states(k).last == .confirmed && !hungUp.contains(k) {
                    let t = answeredAt[k] ?? clock.now
                    answeredAt[k] = t
                    if clock.now - t >= .milliseconds(Int64(h * 1000)) {
                        hungUp.insert(k)
                        try? await phone.agent.perform(k) { s throws(SessionError) in try s.bye() }
                    }
                }
            }
        }
        if account.register != nil {
            await phone.unregister(timeout: .seconds(10))
        }
    }
}

struct Proxy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A registrar (digest authentication) with a proxy to the registered contacts.",
        discussion: "Runs until SIGINT/SIGTERM or --duration; prints a line a second when something happened."
    )

    @Option(name: .long, help: "Where to listen: udp:HOST:PORT or tcp:… (repeatable).")
    var listen: [String] = ["udp:127.0.0.1:5060"]

    @Option(name: .long, help: "The registrar's domain (REGISTER Request-URI and AOR host).")
    var domain: String = "switchboard.test"

    @Option(name: .customLong("user"), help: "A user as name:password (repeatable).")
    var users: [String] = []

    @Flag(name: .long, help: "Do not Record-Route (in-dialog requests then go end to end).")
    var noRecordRoute = false

    @Flag(name: .long, help: "Challenge with MD5 only (for clients that read only the first challenge, such as SIPp 3.6).")
    var md5Only = false

    @Option(name: .long, help: "Stop after this many seconds.")
    var duration: Double?

    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = logging.logger("switchboard.proxy")
        var table: [String: String] = [:]
        for u in users {
            let parts = u.split(separator: ":", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw ValidationError("--user takes name:password") }
            table[parts[0]] = parts[1]
        }
        let box = Mutex<ProxyServer?>(nil)
        let endpoint = try SIPEndpoint(configuration: .init(listen: try listen.map(ListenSpec.parse), logger: logger)) { e in box.withLock { $0 }?.handle(e) }
        defer { endpoint.close() }
        let proxy = ProxyServer(configuration: .init(domain: domain, users: table, recordRoute: !noRecordRoute,
                                                    algorithms: md5Only ? [.md5] : [.sha256, .md5], logger: logger))
        proxy.attach(endpoint)
        box.withLock { $0 = proxy }
        for p in endpoint.localAddresses { print("listening on \(p) for \(domain)") }
        let stop = StopSignal()
        let clock = MonotonicClock(), start = clock.now
        var last = proxy.statistics
        while !stop.requested {
            try await Task.sleep(for: .seconds(1))
            let s = proxy.statistics
            if s != last {
                print("REGISTER \(s.registers)  forwarded \(s.forwarded)  not found \(s.notFound)  ACK \(s.acks)  CANCEL \(s.cancels)")
                last = s
            }
            if let d = duration, clock.now - start >= .milliseconds(Int64(d * 1000)) { break }
        }
    }
}

/// `answer --forward-history`.
enum ForwardHistoryOption: String, ExpressibleByArgument, CaseIterable {
    case diversion
    case historyInfo = "history-info"
    case both

    var history: ForwardHeaders.History {
        switch self {
        case .diversion: return .diversion
        case .historyInfo: return .historyInfo
        case .both: return .both
        }
    }
}
