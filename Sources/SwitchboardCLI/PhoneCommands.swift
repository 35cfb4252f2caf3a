import Conformance
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import ArgumentParser
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

    /// Transfers `call` as asked; returns the outcome (nil when no transfer was asked, or the
    /// call was no longer up when the time came).
    func run(_ phone: Phone, _ call: Switchboard.Call, say: @escaping @Sendable (String) -> Void) async throws -> ReferOutcome? {
        guard wanted else { return nil }
        try await Task.sleep(for: .milliseconds(Int64(transferAfter * 1000)))
        guard call.state.isEstablished else { return nil }
        // The REFER goes once the hold is answered (RFC 5589's flows; a transferee that handles
        // one transaction at a time, as SIPp scenarios do, needs it), or after 5 s regardless.
        do throws(CallError) {
            try await call.setHeld(true, timeout: .seconds(5))
        } catch {
            say("hold before the transfer: \(error)")
        }
        if let t = transferTo {
            return try? await call.transfer(to: try SIPURI(t))
        }
        let consultation = await phone.dial(try SIPURI(consult!))
        guard (try? await consultation.waitUntil("consult", timeout: .seconds(30)) { $0.isEstablished }) != nil else {
            say("the consultation call was not answered: taking the call back")
            try? await call.setHeld(false, timeout: .seconds(5))
            return .unknown(.noNotify)
        }
        let outcome: ReferOutcome
        do throws(CallError) {
            outcome = try await call.attendedTransfer(to: consultation)
        } catch {
            say("attended transfer: \(error)")
            return .unknown(.noNotify)
        }
        // On success the target ends the replaced consultation call with a BYE (RFC 5589 §7.1):
        // it is waited for (5 s at most, else we end that call ourselves), so the command does
        // not exit with the consultation dialog still open.
        if outcome.isSuccess, (try? await consultation.waitUntil("replaced", timeout: .seconds(5)) { $0.isEnded }) == nil {
            say("the target did not end the consultation call: hanging it up")
            await consultation.hangUp(timeout: .seconds(4))
        }
        return outcome
    }
}

/// `--user` and `--password`, shared by `call`, `answer` and `register`: the digest credentials.
struct CredentialOptions: ParsableArguments {
    @Option(name: .long, help: "Authentication user name for 401/407 challenges (default: the address of record's user).")
    var user: String?

    @Option(name: .long, help: "Password for 401/407 challenges.")
    var password: String?

    /// The user name to authenticate as for the address of record `identity`.
    func username(for identity: SIPURI) -> String { user ?? identity.user ?? "" }

    /// The digest credentials for `identity`, when a password was given.
    func credentials(for identity: SIPURI) -> DigestClient? {
        password.map { DigestClient(username: username(for: identity), password: $0) }
    }
}

/// The account options shared by `call` and `answer`.
struct AccountOptions: ParsableArguments {
    @OptionGroup var login: CredentialOptions

    @Option(name: .long, help: "Register with this registrar (e.g. sip:127.0.0.1:5080) first, and unregister at the end.")
    var register: String?
}

/// Everything `call` and `answer` share after their own options: the account, the media, the
/// transfer, logging, tracing and the traffic mirror, and the user agent they configure.
struct PhoneOptions: ParsableArguments {
    @OptionGroup var account: AccountOptions
    @OptionGroup var media: MediaOptions
    @OptionGroup var transfer: TransferOptions
    @OptionGroup var logging: LoggingOptions
    @OptionGroup var tracing: TraceOptions
    @OptionGroup var capture: CaptureOptions

    @Option(name: .long, help: ArgumentHelp("Break an RFC rule on purpose, to test conformance checkers: \(Misbehaviour.allCases.filter { ["uas", "uac", "transfer", "transfer-uac", "forward-uas"].contains($0.suite) }.map(\.rawValue).joined(separator: ", ")) (the uac ones as a caller, wrong-replaces-tags as a caller transferring with --consult, the others as the answering side).",
                                            valueName: "fault"))
    var misbehave: Misbehaviour?

    /// The user agent of a phone listening on `point` as `identity`: its credentials, logger
    /// (`label`), traffic mirror (`mirror`, from ``CaptureOptions/sink()``) and fault (`--misbehave`).
    func agent(_ point: SIPEndpoint.ListenPoint, identity: SIPURI, outboundProxy: SIPURI? = nil, label: String,
               mirror: TrafficMirror?) -> SIPUserAgent.Configuration {
        var config = SIPUserAgent.Configuration(endpoint: .init(listen: [point]), identity: identity, credentials: account.login.credentials(for: identity),
                                                outboundProxy: outboundProxy, transport: point.transport)
        config.logger = logging.logger(label)
        config.endpoint.capture = mirror
        config.endpoint.outboundRewrite = misbehave?.rewriter()
        return config
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
    stamped(start, dropping: 0)
}

/// Like ``stamped(_:)``, for lines that start with a known ASCII prefix of `prefixLength`
/// bytes (a phone's "name: "), written without it and without copying the rest.
func stamped(_ start: MonotonicClock.Instant, dropping prefixLength: Int) -> @Sendable (String) -> Void {
    // The clock read as MonotonicClock does, without its Duration arithmetic.
    let origin = start.timespec
    return { text in
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let elapsed = Int64(now.tv_sec - origin.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec - origin.tv_nsec)
        var text = text
        text.withUTF8 { all in stamp(UnsafeBufferPointer(rebasing: all.dropFirst(prefixLength)), at: elapsed) }
    }
}

/// Writes `line` after the time `nanoseconds` as "%7.3f  " (without Foundation, whose
/// ICU-backed loading costs every command ~10 ms), as bytes in a buffer on the stack (a phone
/// prints a few lines per call).
private func stamp(_ line: UnsafeBufferPointer<UInt8>, at nanoseconds: Int64) {
    let ms = nanoseconds / 1_000_000
    let whole = ms / 1000, fraction = Int(ms % 1000)
    var count = 1, w = whole
    while w >= 10 { w /= 10; count += 1 }
    let pad = max(0, 3 - count)
    let stampLength = pad + count + 6, length = stampLength + line.count
    // Stamp, line and the NUL for puts in one buffer (on the stack for a usual line).
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: length + 1) { buffer in
        for i in 0..<pad { buffer[i] = 0x20 }
        w = whole
        for k in stride(from: pad + count - 1, through: pad, by: -1) {
            buffer[k] = UInt8(48 + w % 10)
            w /= 10
        }
        let i = pad + count
        buffer[i] = 0x2E
        buffer[i + 1] = UInt8(48 + fraction / 100)
        buffer[i + 2] = UInt8(48 + fraction / 10 % 10)
        buffer[i + 3] = UInt8(48 + fraction % 10)
        buffer[i + 4] = 0x20
        buffer[i + 5] = 0x20
        let rest = UnsafeMutableBufferPointer(rebasing: buffer[stampLength..<length])
        _ = rest.initialize(fromContentsOf: line)
        // Batched (`answer`), or puts: stdout's own buffer and lock like print, without
        // print's boxing of its arguments and the String it would be given; a NUL in the
        // line would cut it short.
        if BatchedOutput.write(UnsafeBufferPointer(rebasing: buffer[..<length])) { return }
        guard !rest.contains(0) else { return print(String(decoding: buffer[..<length], as: UTF8.self)) }
        buffer[length] = 0
        buffer.withMemoryRebound(to: CChar.self) { _ = puts($0.baseAddress!) }
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

    @OptionGroup var local: LocalAddressOption

    @Option(name: .long, help: "Seconds to stay in the call before hanging up.")
    var duration: Double = 2

    @Flag(name: .long, help: "Hold the call (re-INVITE sendonly) a third of the way in and resume it at two thirds.")
    var hold = false

    @Option(name: .long, help: "Give up on the setup after this many seconds (CANCEL).")
    var timeout: Double = 30

    @Option(name: .long, help: "A 3xx answer: follow its targets (q order, each once, at most 5 hops) or reject (the call fails with the targets printed).")
    var redirects: RedirectAnswer = .follow

    enum RedirectAnswer: String, ExpressibleByArgument { case follow, reject }

    @Option(name: .customLong("100rel"), help: "Reliable provisional responses (RFC 3262): off, supported (Supported: 100rel) or required (Require: 100rel; a 420 refusing it makes the call retry without it, RFC 3261 §8.1.3.5).")
    var reliableProvisional: ReliableProvisionalOption = .supported

    enum ReliableProvisionalOption: String, ExpressibleByArgument {
        case off, supported, required
        var policy: ReliableProvisionalPolicy {
            switch self {
            case .off: return .unsupported
            case .supported: return .supported
            case .required: return .required
            }
        }
    }

    @OptionGroup var common: PhoneOptions

    func run() async throws {
        let targetURI = try SIPURI(target)
        let identity = try SIPURI(from ?? "sip:switchboard@\(targetURI.host)")
        let point = try local.point()
        let mirror = try common.capture.sink()
        defer { mirror?.close() }
        var config = common.agent(point, identity: identity, outboundProxy: try proxy.map { try SIPURI($0) }, label: "switchboard.call", mirror: mirror)
        config.redirects = RedirectPolicy(mode: redirects == .follow ? .follow : .fail)
        config.reliableProvisional = reliableProvisional.policy
        let start = MonotonicClock.now
        let say = stamped(start)
        let host = point.address.ipString
        let accepts = common.transfer.refer == .accept
        let phone = try Phone(name: "call", configuration: config, media: try common.media.phoneMedia(host: host),
                              referDecision: { _, _ in accepts }, report: stamped(start, dropping: 6), trace: common.tracing.traceLines())
        defer { phone.close() }
        say("from \(identity) on \(phone.agent.endpoint.localAddresses[0])")
        if let r = common.account.register {
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
        let setup = await withTaskGroup(of: Setup.self) { group in
            group.addTask { await Self.answered(placed).map(Setup.answered) ?? .ended }
            group.addTask { await stop.wait(); return .interrupted }
            group.addTask { try? await Task.sleep(for: .milliseconds(Int64(timeout * 1000))); return .timedOut }
            let first = await group.next() ?? .ended
            group.cancelAll()
            return first
        }
        guard case .answered(let call) = setup else {
            let current = Self.current(placed)
            if !current.state.isEnded {
                say(setup == .interrupted ? "interrupted: cancelling" : "no answer after \(timeout) s: cancelling")
                await current.hangUp(timeout: .seconds(2))
            }
            throw ExitCode(1)
        }
        if call !== placed { say("the call was replaced by the call \(call.sipCallID)") }
        if let digits = common.media.dtmf {
            do { try await call.sendDigits(digits) } catch { say("DTMF not sent: \(error)") }
        }
        if common.transfer.wanted {
            let outcome = try await common.transfer.run(phone, call, say: say)
            // A transfer that did not succeed leaves the call with us: hang it up and say so.
            await call.hangUp(timeout: .seconds(5))
            guard outcome?.isSuccess == true else { throw ExitCode(1) }
            return
        }
        // The time in the call ends early on a signal or when the peer hangs up.
        let ended: @Sendable () async -> Void = { _ = try? await call.waitUntil(timeout: .seconds(86_400)) { $0.isEnded } }
        let third = Duration.milliseconds(Int64(duration * 1000 / 3))
        if hold {
            if await !stop.sleep(third, until: ended), call.state.isEstablished {
                try? await call.setHeld(true)
                if await !stop.sleep(third, until: ended), call.state.isEstablished {
                    try? await call.setHeld(false)
                    _ = await stop.sleep(third, until: ended)
                }
            }
        } else {
            _ = await stop.sleep(.milliseconds(Int64(duration * 1000)), until: ended)
        }
        if stop.requested { say("interrupted: hanging up") }
        // Ended by the peer, or by us now: the BYE's transaction finishes in the background (at
        // most 2 s are given to its answer), never holding the command for Timer F.
        let endedBefore = call.state.isEnded
        await call.hangUp(timeout: .seconds(2))
        if common.account.register != nil {
            await phone.unregister(timeout: .seconds(40))
        }
        switch call.state {
        case .ended(.hungUp): return
        case .ended: throw ExitCode(1)
        default:
            // Our BYE is out, its answer still to come.
            if endedBefore { throw ExitCode(1) }
        }
    }

    enum Setup: Sendable, Equatable {
        case answered(Switchboard.Call), ended, interrupted, timedOut
        static func == (a: Setup, b: Setup) -> Bool {
            switch (a, b) {
            case (.answered(let x), .answered(let y)): return x === y
            case (.ended, .ended), (.interrupted, .interrupted), (.timedOut, .timedOut): return true
            default: return false
            }
        }
    }

    /// The call the user is in: ours, or the one that replaced it while it rang (an attended
    /// transfer to our ringing call, RFC 3891): the conversation goes on there.
    static func current(_ placed: Switchboard.Call) -> Switchboard.Call {
        var c = placed
        while let r = c.replacement { c = r }
        return c
    }

    /// The call once answered (following replacements), or nil when it ended unanswered.
    static func answered(_ placed: Switchboard.Call) async -> Switchboard.Call? {
        var c = placed
        while true {
            guard let s = try? await c.waitUntil("answer", timeout: .seconds(86_400), { $0.isEstablished || $0.isEnded }) else { return nil }
            if s.isEstablished { return c }
            guard let r = c.replacement else { return nil }
            c = r
        }
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

    @OptionGroup var stopAfter: StopAfterOption

    @Option(name: .long, help: "Send early media for this many seconds before answering: 183 Session Progress with the SDP answer instead of 180, then the 200.")
    var earlyMedia: Double?

    @Option(name: .long, help: "With --early-media: send this tone (Hz) before the answer (ringback, announcement), then the call's own audio.")
    var earlyTone: Double?

    @Option(name: .long, help: "Forward every call: answer with 302 listing these targets (comma-separated, preferred first; q-values and Diversion added).")
    var forwardTo: String?

    @Option(name: .long, help: "With --forward-to: the history the 302 carries: diversion (RFC 5806), history-info (RFC 7044) or both.")
    var forwardHistory: ForwardHistoryOption = .diversion

    @OptionGroup var common: PhoneOptions

    func phoneMedia(host: String) throws -> PhoneMediaOptions? {
        guard var options = try common.media.phoneMedia(host: host) else {
            if earlyMedia != nil { throw ValidationError("--early-media needs media (not --no-media)") }
            return nil
        }
        if let e = earlyMedia {
            guard e > 0 else { throw ValidationError("--early-media takes a positive number of seconds") }
            options.earlyMedia = .milliseconds(Int64(e * 1000))
        }
        if let f = earlyTone {
            guard earlyMedia != nil else { throw ValidationError("--early-tone needs --early-media") }
            guard !common.media.echo else { throw ValidationError("--early-tone cannot be combined with --echo") }
            options.earlyInput = .tone(frequency: f)
        }
        return options
    }

    func run() async throws {
        let point = try ListenSpec.parse(listen)
        let host = point.address.ipString
        let identity = try SIPURI(aor ?? "sip:switchboard@\(host)")
        let mirror = try common.capture.sink()
        defer { mirror?.close() }
        let config = common.agent(point, identity: identity, label: "switchboard.answer", mirror: mirror)
        // Several lines a call: written in batches, not a write(2) each.
        BatchedOutput.start()
        let start = MonotonicClock.now
        let say = stamped(start)
        let report = stamped(start, dropping: 8)
        let accepts = common.transfer.refer == .accept
        let phone = try Phone(name: "answer", configuration: config, autoAnswer: .milliseconds(Int64(ring)),
                              media: try phoneMedia(host: host),
                              forwardTo: try (forwardTo ?? "").split(separator: ",").map { try SIPURI(String($0)) },
                              forwardHistory: forwardHistory.history,
                              referDecision: { _, _ in accepts },
                              report: report, trace: common.tracing.traceLines())
        defer { phone.close() }
        // Subscribed before the first call can come, and only when something is to be done per
        // call: a phone that just answers costs the command nothing per call.
        let options = self
        let wanted = common.media.dtmf != nil || common.transfer.wanted || hangupAfter != nil
        let arrivals = wanted ? phone.incomingCallStream : nil
        let endings = count != nil ? phone.endedCallStream : nil
        say("listening on \(phone.agent.endpoint.localAddresses[0]) as \(identity)")
        if let r = common.account.register {
            await phone.agent.register(registrar: try SIPURI(r), expires: 600)
        }
        let stop = StopSignal()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await stop.wait() }
            if let d = stopAfter.duration { group.addTask { try? await Task.sleep(for: .milliseconds(Int64(d * 1000))) } }
            if let endings, let c = count {
                group.addTask {
                    var n = 0
                    for await call in endings where call.direction == .incoming {
                        n += 1
                        if n >= c { return }
                    }
                }
            }
            if let arrivals {
                group.addTask {
                    await withTaskGroup(of: Void.self) { calls in
                        for await call in arrivals {
                            calls.addTask { await options.follow(call, phone, say: say) }
                        }
                    }
                    // The phone closed: nothing more will come.
                    await stop.wait()
                }
            }
            await group.next()
            group.cancelAll()
        }
        // Calls still up get a BYE (an unanswered one a 480), the registration is removed.
        await phone.shutdown(timeout: .seconds(5))
    }

    /// What happens to one answered call (the phone rings and answers it itself): digits, a
    /// transfer, a hang-up after a while; returns when it ended (or the command stops).
    func follow(_ call: Switchboard.Call, _ phone: Phone, say: @escaping @Sendable (String) -> Void) async {
        // One subscription to the call's states for its whole life: what the options ask starts
        // beside it once the call is up (and finishes on its own: a transfer's outcome may come
        // after the call ended).
        var acting = false
        for await state in call.states where !acting && state.isEstablished {
            acting = true
            Task { await act(on: call, phone, say: say) }
        }
    }

    /// Digits, a transfer, a hang-up after a while: what the options ask of an answered call.
    func act(on call: Switchboard.Call, _ phone: Phone, say: @escaping @Sendable (String) -> Void) async {
        if let digits = common.media.dtmf {
            do { try await call.sendDigits(digits) } catch { say("DTMF not sent: \(error)") }
        }
        await withTaskGroup(of: Void.self) { group in
            if common.transfer.wanted {
                // Each answered call is transferred once (we are the transferor).
                group.addTask {
                    let outcome = try? await common.transfer.run(phone, call, say: say)
                    say("transfer of \(call.sipCallID): \(outcome.map { "\($0)" } ?? "not done")")
                }
            }
            if let h = hangupAfter {
                group.addTask {
                    // Hung up after `h` seconds in the call, unless it ended before.
                    await withTaskGroup(of: Void.self) { race in
                        race.addTask { _ = try? await call.waitUntil(timeout: .seconds(86_400)) { $0.isEnded } }
                        race.addTask { try? await Task.sleep(for: .milliseconds(Int64(h * 1000))) }
                        await race.next()
                        race.cancelAll()
                    }
                    if call.state.isEstablished { await call.hangUp(timeout: .seconds(5)) }
                }
            }
        }
    }
}

struct Proxy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A registrar (digest authentication) with a proxy to the registered contacts.",
        discussion: "Runs until SIGINT/SIGTERM or --duration; prints a line a second when something happened."
    )

    @OptionGroup var listen: ListenPointsOption

    @Option(name: .long, help: "The registrar's domain (REGISTER Request-URI and AOR host).")
    var domain: String = "switchboard.test"

    @Option(name: .customLong("user"), help: "A user as name:password (repeatable).")
    var users: [String] = []

    @Flag(name: .long, help: "Do not Record-Route (in-dialog requests then go end to end).")
    var noRecordRoute = false

    @Flag(name: .long, help: "Challenge with MD5 only (for clients that read only the first challenge, such as SIPp 3.6).")
    var md5Only = false

    @Option(name: .long, help: ArgumentHelp("Break an RFC rule on purpose, to test conformance checkers (the registrar's faults: \(Misbehaviour.allCases.filter { $0.suite == "registrar" }.map(\.rawValue).joined(separator: ", "))).",
                                            valueName: "fault"))
    var misbehave: Misbehaviour?

    @Option(name: .long, help: "For tls: listen points, the certificate chain (PEM file).")
    var cert: String?

    @Option(name: .long, help: "For tls: listen points, the private key (PEM file).")
    var key: String?

    @Option(name: .long, help: "For tls: the CA certificate (PEM file) the next hops' certificates must chain to when the proxy connects to them (default: the system's store).")
    var ca: String?

    @OptionGroup var stopAfter: StopAfterOption

    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = logging.logger("switchboard.proxy")
        let points = try listen.points()
        if points.contains(where: { if case .tls = $0 { return true } else { return false } }), cert == nil || key == nil {
            throw ValidationError("a tls: listen point needs --cert and --key")
        }
        var table: [String: String] = [:]
        for u in users {
            let parts = u.split(separator: ":", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw ValidationError("--user takes name:password") }
            table[parts[0]] = parts[1]
        }
        let proxy = ProxyServer(configuration: .init(domain: domain, users: table, recordRoute: !noRecordRoute,
                                                    algorithms: md5Only ? [.md5] : [.sha256, .md5], logger: logger))
        var endpointConfig = SIPEndpoint.Configuration(listen: points, logger: logger)
        // Over TLS the proxy serves with its certificate and connects to next hops that name TLS
        // (`;transport=tls`, `sips:`), verifying them against `--ca`.
        endpointConfig.tls = TLSConfiguration(certificateChain: cert.map { .file($0) }, privateKey: key.map { .file($0) },
                                              trustedCertificates: ca.map { [.file($0)] } ?? [])
        endpointConfig.outboundRewrite = misbehave?.rewriter()
        // The handler holds the proxy itself (no box to lock per event); events before attach
        // are dropped, as before. Detaching at the end frees the endpoint the proxy held.
        let endpoint = try SIPEndpoint(configuration: endpointConfig) { e in proxy.handle(e) }
        defer { endpoint.close(); proxy.detach() }
        proxy.attach(endpoint)
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
            if let d = stopAfter.duration, clock.now - start >= .milliseconds(Int64(d * 1000)) { break }
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
