import SwitchboardTools
import CaptureAnalysis
import PacketCapture
import CSocket
import ArgumentParser
import Dispatch
import SIPRuntime
import SIPMessage
import SIPDialog
import SIPTransport
import MediaRuntime
import SDP
import Synchronization
import SIPLoad
import Switchboard
import NetworkIO

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@main
struct SwitchboardCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "switchboard",
        abstract: "Switchboard: a SIP/RTP stack in Swift.",
        subcommands: [Demo.self, Call.self, Answer.self, Proxy.self, Parse.self, Frame.self, Serve.self, Dial.self, Register.self, Capture.self, Conform.self, SIPp.self]
    )

    /// Every line printed reaches a file or pipe as it is printed (line-buffered stdout), so a
    /// command redirected and then killed loses nothing it said.
    static func main() async {
        cs_stdout_line_buffered()
        do {
            var command = try parseAsRoot()
            if var asynchronous = command as? AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}

struct Parse: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Parse SIP messages (one per file) and print a summary of each, or its error.",
        discussion: "Exits 0 when every file parses and validates, 65 when any does not."
    )

    @OptionGroup var output: JSONOption

    @Flag(name: .long, help: "Only frame and index the messages; skip the RFC 3261 validation of their headers.")
    var noValidate = false

    @Argument(help: "Files holding one SIP message each (read as bytes).")
    var files: [String]

    func run() throws {
        let report = ParseCommand.run(paths: files, validate: !noValidate)
        print(output.json ? report.json : report.text, terminator: "")
        if !report.allParsed { throw ExitCode(65) }
    }
}

struct Frame: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Frame SIP messages out of a byte stream (as TCP/TLS delivers them) and list them.",
        discussion: "Exits 0 when the stream frames cleanly, 65 when it fails (strict) or bytes are discarded (--resync)."
    )

    @Flag(name: .long, help: "Skip bad bytes to the next start line instead of failing (for captures).")
    var resync = false

    @Option(name: .long, help: "Bytes per read, to show framing across partial reads.")
    var chunk = 1460

    @Argument(help: "A file holding the stream's bytes.")
    var file: String

    func run() throws {
        guard let bytes = ParseCommand.readFile(file, limit: 256 << 20) else {
            print("\(file): cannot read")
            throw ExitCode(65)
        }
        let report = FrameCommand.run(bytes: bytes, mode: resync ? .resynchronizing : .strict, chunkSize: chunk)
        print(report.text, terminator: "")
        if report.error != nil || report.lines.contains(where: { $0.hasPrefix("discarded") }) { throw ExitCode(65) }
    }
}

struct Capture: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Summarize the SIP in a pcap/pcapng capture: totals, calls, ladder diagrams, rule checks, RTP streams, audio; export a side of a call for SIPp or replay it against a device.",
        discussion: "Exits 0 when the file is read to its end, 65 when it cannot be read or is corrupt (the error names its byte offset, record and rule), 1 when --ladder names no call, --check finds a broken rule or --replay a difference (64 for a party or --to it cannot take)."
    )

    @OptionGroup var output: JSONOption

    @Flag(name: .long, help: "One line per call instead of the summary.")
    var calls = false

    @Flag(name: .long, help: "Ladder diagrams: of the call whose Call-ID follows the file, else of every call.")
    var ladder = false

    @Option(name: .long, help: "Write the ladder diagrams as a self-contained HTML page (click an arrow for its message; each RTP stream's jitter, loss and level plotted under its call) to this file.")
    var html: String?

    @Option(name: .long, help: "With --html: draw only the call with this Call-ID. With --sipp-scenario or --replay: the call, by number (from 1, Call-IDs with an INVITE in order) or Call-ID (default: the first).")
    var call: String?

    @Option(name: .long, help: "Write one party's side of a call (--call, --party) as a SIPp scenario (sipp -sf) to this file.")
    var sippScenario: String?

    @Option(name: .long, help: "With --sipp-scenario: the party whose side is written: caller, callee or HOST:PORT.")
    var party: String = "caller"

    @Option(name: .long, help: ArgumentHelp("Re-send this party's side of a call (--call) to a live device (--to) over UDP, TCP or TLS with a fresh Call-ID, tags, branches, CSeq, Contact and SDP addresses, and list where the device's answers differ from the captured ones (exit 1 when they do): caller, callee or HOST:PORT. The callee's side waits at --listen for the device to call.", valueName: "party"))
    var replay: String?

    @Option(name: .long, help: "With --replay: the device's SIP URI (an IP address as host, e.g. sip:bob@192.0.2.1:5060, sip:bob@192.0.2.1;transport=tcp, sips:bob@192.0.2.1).")
    var to: String?

    @Option(name: .long, help: ArgumentHelp("With --replay: our address, IP:PORT (default: the address routed to the device, any port); the callee's side needs it: the device calls there (over TCP and TLS: our listener).", valueName: "address"))
    var listen: String?

    @Option(name: .long, help: "With --replay: the transport to the device, udp, tcp or tls (default: the --to URI's transport parameter, tls for sips:, else udp).")
    var transport: String?

    @Option(name: .customLong("tls-ca"), help: "With --replay over tls: the CA certificate (PEM file) the device's certificate must chain to (default: the system's store).")
    var tlsCA: String?

    @Flag(name: .customLong("tls-insecure"), help: "With --replay over tls: do not verify the device's certificate (a self-signed test certificate).")
    var tlsInsecure = false

    @Option(name: .customLong("tls-cert"), help: "With --replay callee over tls: the certificate chain (PEM file) the replay listens with.")
    var tlsCert: String?

    @Option(name: .customLong("tls-key"), help: "With --tls-cert: its private key (PEM file).")
    var tlsKey: String?

    @Flag(name: .long, help: "Replay each call through the transaction, dialog, REFER and offer/answer rules and list every rule a party broke (frame, time, party, RFC section); exit 1 when any was.")
    var check = false

    @OptionGroup var streams: RTPOptions

    @Flag(name: .long, help: "Show a progress line on stderr (default: only when stderr is a terminal and the file is over 50 MB).")
    var progress = false

    @OptionGroup var collector: HEPOptions

    @Argument(help: "The capture file (pcap or pcapng).")
    var file: String

    @Argument(help: "With --ladder: the Call-ID of the one call to draw.")
    var callID: String?

    func validate() throws {
        if calls && ladder { throw ValidationError("--calls and --ladder are exclusive") }
        if html != nil && (calls || ladder || output.json) { throw ValidationError("--html is exclusive with --calls, --ladder and --json") }
        if callID != nil && !ladder { throw ValidationError("a Call-ID is only taken with --ladder") }
        if call != nil && html == nil && sippScenario == nil && replay == nil { throw ValidationError("--call is only taken with --html, --sipp-scenario and --replay") }
        if (replay == nil) != (to == nil) { throw ValidationError("--replay and --to go together") }
        if listen != nil && replay == nil { throw ValidationError("--listen is only taken with --replay") }
        if replay == nil && (transport != nil || tlsCA != nil || tlsInsecure || tlsCert != nil || tlsKey != nil) {
            throw ValidationError("--transport, --tls-ca, --tls-insecure, --tls-cert and --tls-key are only taken with --replay")
        }
        if let transport, TransportKind(rawValue: transport.lowercased()) == nil { throw ValidationError("--transport takes udp, tcp or tls") }
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("--tls-cert and --tls-key go together") }
        if replay != nil && (calls || ladder || html != nil || streams.wanted || check || collector.hep != nil || sippScenario != nil) {
            throw ValidationError("--replay is exclusive with the views (--calls, --ladder, --html, --rtp, --audio, --check), --hep and --sipp-scenario")
        }
        if sippScenario != nil && (calls || ladder || output.json || html != nil || streams.wanted || check || collector.hep != nil) {
            throw ValidationError("--sipp-scenario is exclusive with the views (--calls, --ladder, --json, --html, --rtp, --audio, --check) and --hep")
        }
        if check && (calls || ladder || html != nil || streams.wanted) {
            throw ValidationError("--check is exclusive with --calls, --ladder, --rtp and --audio (--html shows the findings on its own)")
        }
        if streams.wanted && (calls || ladder || html != nil) { throw ValidationError("--rtp and --audio are exclusive with --calls, --ladder and --html") }
        if collector.hep != nil && (calls || ladder || output.json || html != nil || streams.wanted || check) {
            throw ValidationError("--hep (send the capture to a collector) is exclusive with the views (--calls, --ladder, --json, --html, --rtp, --audio, --check)")
        }
    }

    func run() async throws {
        if let address = try collector.address() { return try exportHEP(to: address) }
        if let party = replay, let to {
            let tls = TLSConfiguration(certificateChain: tlsCert.map { .file($0) }, privateKey: tlsKey.map { .file($0) },
                                       trustedCertificates: tlsCA.map { [.file($0)] } ?? [], verifyPeer: !tlsInsecure)
            let kind = transport.flatMap { TransportKind(rawValue: $0.lowercased()) }
            let r = await CaptureSideCommand.replay(path: file, call: call, party: party, target: to, listen: listen, json: output.json) {
                $0.transport = kind
                $0.tls = tls
            }
            print(r.text, terminator: "")
            if r.exitCode != 0 { throw ExitCode(r.exitCode) }
            return
        }
        if let out = sippScenario {
            let r = CaptureSideCommand.exportScenario(path: file, call: call, party: party, output: out)
            print(r.text, terminator: "")
            if r.exitCode != 0 { throw ExitCode(r.exitCode) }
            return
        }
        let view: CaptureCommand.View = streams.audio.map { .audio($0) } ?? (streams.rtp ? .rtp : html != nil ? .html(call) : check ? .check : ladder ? .ladder(callID) : calls ? .calls : .summary)
        let reporter = CaptureCommand.stderrProgress(path: file, force: progress)
        let report = CaptureCommand.run(path: file, view: view, srtp: try streams.srtpOptions(), progress: reporter)
        if reporter != nil { CaptureCommand.endProgress() }
        if let html {
            if report.error == nil || report.analysis.summary.messages > 0 {
                guard ParseCommand.writeFile(html, Array(report.html.utf8)) else {
                    print("\(html): cannot write")
                    throw ExitCode(73)
                }
            }
            print(report.text, terminator: "")
        } else {
            print(output.json ? report.json : report.text, terminator: "")
        }
        if report.exitCode != 0 { throw ExitCode(report.exitCode) }
    }
}

extension Capture {
    /// `--hep`: the capture's SIP and RTCP to a collector, paced by a blocking socket (a
    /// collector on loopback drops nothing a large capture sends at once).
    func exportHEP(to destination: SocketAddress) throws {
        let sink: HEPTrafficSink
        do { sink = try HEPTrafficSink(collector: destination, blocking: true) } catch { throw ValidationError("--hep: \(error)") }
        defer { sink.close() }
        let s: HEPExport.Summary
        do throws(CaptureFileError) {
            s = try HEPExport.export(path: file, options: .init(agentID: collector.hepAgentID, authKey: collector.hepKey)) { sink.send($0) }
        } catch {
            print("\(file): \(error)")
            throw ExitCode(65)
        }
        let st = sink.statistics
        print("hep: \(s.sip) SIP messages and \(s.rtcp) RTCP packets (\(s.rtcpCorrelated) filed with their call) to \(destination); "
              + "sent \(st.sent), dropped \(st.dropped), too large \(s.tooLarge + st.tooLarge)")
        if st.dropped > 0 { throw ExitCode(1) }
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a UAS that answers every INVITE with one status code (and other requests with 200).",
        discussion: "Prints one line per second (calls/s, retransmissions, errors) and a summary on SIGINT/SIGTERM."
    )

    @OptionGroup var listen: ListenPointsOption

    @Option(name: .long, help: "The final response to INVITE.")
    var answer: Int = 200

    @OptionGroup var stopAfter: StopAfterOption

    @Option(name: .long, help: "For tls: listen points, the certificate chain (PEM file).")
    var cert: String?

    @Option(name: .long, help: "For tls: listen points, the private key (PEM file).")
    var key: String?

    @OptionGroup var capture: CaptureOptions

    @Flag(name: .long, help: "Answer on the dialog layer: an INVITE session per call (180, 200 with an SDP answer, ACK, BYE).")
    var dialogs = false

    @Flag(name: .long, help: "With --dialogs: answer with 200 at once, without 180 Ringing.")
    var noRinging = false

    @OptionGroup var echoLine: EchoOptions

    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        guard (200...699).contains(answer) else { throw ValidationError("--answer must be a final status code (200-699)") }
        let points = try listen.points()
        if points.contains(where: { if case .tls = $0 { return true } else { return false } }), cert == nil || key == nil {
            throw ValidationError("a tls: listen point needs --cert and --key")
        }
        let tls = TLSConfiguration(certificateChain: cert.map { .file($0) }, privateKey: key.map { .file($0) })
        if echoLine.echo {
            guard answer == 200, !dialogs else { throw ValidationError("--echo is a dialog-layer server of its own (without --answer or --dialogs)") }
            guard capture.capture == nil, capture.collector.hep == nil else { throw ValidationError("--capture and --hep are not available with --echo yet") }
            try await runEcho(points, tls: tls)
            return
        }
        if dialogs {
            guard answer == 200 else { throw ValidationError("--dialogs answers with 200 (--answer is for the transaction-level server)") }
            guard capture.capture == nil, capture.collector.hep == nil else { throw ValidationError("--capture and --hep are not available with --dialogs yet") }
            try await runDialogs(points, tls: tls)
            return
        }
        let sink = try capture.sink()
        defer { sink?.close() }
        let serve = try ServeCommand(listen: points, answer: answer, tls: tls, capture: sink, logger: logging.logger("switchboard.serve"))
        for p in serve.endpoint.localAddresses { print("listening on \(p)") }
        try await report(snapshot: { serve.snapshot() }, line: { serve.line(since: $0, seconds: 1, elapsed: $1) })
        print(serve.summary())
        serve.endpoint.close()
    }

    private func runDialogs(_ points: [SIPEndpoint.ListenPoint], tls: TLSConfiguration) async throws {
        let serve = try DialogServeCommand(listen: points, ringing: !noRinging, tls: tls, logger: logging.logger("switchboard.serve"))
        for p in serve.server.endpoint.localAddresses { print("listening on \(p) (dialogs)") }
        try await report(snapshot: { serve.snapshot() }, line: { serve.line(since: $0, seconds: 1, elapsed: $1) })
        print(serve.summary())
        serve.server.close()
    }

    private func runEcho(_ points: [SIPEndpoint.ListenPoint], tls: TLSConfiguration) async throws {
        let options = try echoLine.options(points, ringing: !noRinging)
        let serve = try EchoServer(listen: points, options: options, tls: tls, logger: logging.logger("switchboard.echo"))
        for p in serve.server.endpoint.localAddresses { print("listening on \(p) (echo, media on \(options.media.localAddress) ports \(echoLine.rtpPorts))") }
        try await report(every: max(1, echoLine.statsInterval), snapshot: { () }, line: { _, t in serve.line(elapsed: t) })
        print(serve.summary())
        serve.close()
    }

    /// Prints a line every `every` seconds until SIGINT/SIGTERM or `--duration`; `t=` is the
    /// wall-clock time since the start (an overloaded process sleeps longer than asked).
    private func report<Snapshot>(every: Int = 1, snapshot: () -> Snapshot, line: (Snapshot, Int) -> String) async throws {
        let stop = StopSignal()
        var previous = snapshot()
        let clock = MonotonicClock(), start = clock.now
        var ticks = 0
        while !stop.requested {
            try await Task.sleep(for: .seconds(1))
            ticks += 1
            let elapsed = Int((clock.now - start).components.seconds)
            if ticks % every == 0 {
                print(line(previous, elapsed))
                previous = snapshot()
            }
            if let d = stopAfter.duration, Double(elapsed) >= d { break }
        }
    }
}

/// SIGINT/SIGTERM: a flag (for the loops that print once a second) and something to await
/// (``wait()``, ``sleep(_:)``: the phone commands react at once, without polling). The dispatch
/// sources are set once, in `init`; the state is behind a lock.
final class StopSignal: @unchecked Sendable {
    final class State: Sendable {
        struct Inner {
            var requested = false
            var waiters: [UInt64: AsyncStream<Void>.Continuation] = [:]
            var next: UInt64 = 0
        }
        let inner = Mutex(Inner())

        func fire() {
            let waiters = inner.withLock { s -> [AsyncStream<Void>.Continuation] in
                s.requested = true
                defer { s.waiters = [:] }
                return Array(s.waiters.values)
            }
            for w in waiters { w.finish() }
        }
    }
    private let state = State()
    private var sources: [any DispatchSourceSignal] = []
    init() {
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            let state = self.state
            s.setEventHandler { state.fire() }
            s.resume()
            sources.append(s)
        }
    }
    var requested: Bool { state.inner.withLock { $0.requested } }

    /// Returns when a signal came (at once if one already did), or when the task is cancelled.
    func wait() async {
        let (stream, continuation) = AsyncStream<Void>.makeStream()
        let id = state.inner.withLock { s -> UInt64? in
            guard !s.requested else { return nil }
            s.next += 1
            s.waiters[s.next] = continuation
            return s.next
        }
        guard let id else { return }
        continuation.onTermination = { [state] _ in _ = state.inner.withLock { $0.waiters.removeValue(forKey: id) } }
        // Finished by the signal; a cancelled task leaves the loop at once.
        for await _ in stream {}
    }

    /// Sleeps `duration`, or less when a signal comes or `until` returns first; returns whether
    /// a signal came.
    func sleep(_ duration: Duration, until: (@Sendable () async -> Void)? = nil) async -> Bool {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.wait() }
            group.addTask { try? await Task.sleep(for: duration) }
            if let until { group.addTask { await until() } }
            await group.next()
            group.cancelAll()
        }
        return requested
    }
}

struct Dial: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Place calls (INVITE, ACK, BYE) against a UAS and report how many succeeded.",
        discussion: "Exits 0 when every call succeeded, 1 otherwise."
    )

    @Argument(help: "The target URI, e.g. sip:service@127.0.0.1:5070 (numeric host).")
    var target: String

    @Option(name: .long, help: "Number of calls.")
    var count: Int = 1

    @Option(name: .long, help: "New calls per second.")
    var rate: Double = 10

    @Option(name: .long, help: "Local address: udp:HOST:PORT, tcp:… or tls:… (port 0 = any); its transport carries the calls.")
    var listen: String = "udp:127.0.0.1:0"

    @Option(name: .long, help: "For TLS: trusted CA certificates (PEM file); the system store when absent.")
    var ca: String?

    @Option(name: .long, help: "For TLS: the name to verify the server certificate against (default: the target's address).")
    var serverName: String?

    @Option(name: .long, help: "Give up after this many seconds.")
    var timeout: Int = 60

    @OptionGroup var capture: CaptureOptions

    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let tls = TLSConfiguration(trustedCertificates: ca.map { [.file($0)] } ?? [])
        let sink = try capture.sink()
        defer { sink?.close() }
        let result = try await DialCommand.run(target: target, count: count, rate: rate, listen: try ListenSpec.parse(listen), timeout: .seconds(timeout),
                                               tls: tls, serverName: serverName, logger: logging.logger("switchboard.dial"), capture: sink)
        print("calls: \(result.started) started, \(result.succeeded) succeeded, \(result.failed) failed")
        for (reason, n) in result.failures.sorted(by: { $0.key < $1.key }) { print("  \(reason): \(n)") }
        if result.succeeded != count { throw ExitCode(1) }
    }
}

struct Register: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Register an address of record with a registrar (digest authentication), print the state changes, then unregister.",
        discussion: "Exits 0 when it registered and unregistered, 1 otherwise."
    )

    @Argument(help: "The address of record, e.g. sip:alice@127.0.0.1:5080 (its host:port is the registrar).")
    var aor: String

    @OptionGroup var login: CredentialOptions

    @Option(name: .long, help: "Requested binding lifetime in seconds.")
    var expires: UInt32 = 600

    @Option(name: .long, help: "Stay registered this many seconds (refreshing as needed) before unregistering.")
    var duration: Int = 0

    @OptionGroup var local: LocalAddressOption

    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let uri = try SIPURI(aor)
        let registrar = SIPURI(secure: uri.secure, host: uri.host, port: uri.port)
        let point = try local.point()
        let peer = SIPPeer(transport: point.transport, address: try SocketAddress(ip: uri.host.address, port: uri.port ?? 5060))
        let session = try RegisterSession(listen: point, peer: peer, registrar: registrar, addressOfRecord: uri,
                                          username: login.username(for: uri), password: login.password ?? "", expires: expires,
                                          logger: logging.logger("switchboard.register")) { state in
            print(state.label)
        }
        defer { session.close() }
        await session.start()
        let registered = await session.wait(timeout: .seconds(40)) { $0.isSettled }
        guard case .registered = registered else { throw ExitCode(1) }
        if duration > 0 { try await Task.sleep(for: .seconds(duration)) }
        await session.stop()
        // Settled again, and no longer the registration that was in force before the stop.
        let end = await session.wait(timeout: .seconds(40)) { s in
            if case .registered = s { return false }
            return s.isSettled
        }
        if end != .unregistered { throw ExitCode(1) }
    }
}

/// `--capture FILE`, shared by `serve` and `dial`: the pcapng traffic mirror.
struct CaptureOptions: ParsableArguments {
    @Option(name: .long, help: "Record every message sent and received into this pcapng file (TLS as its plaintext over TCP).")
    var capture: String?

    @OptionGroup var collector: HEPOptions

    /// The mirrors asked for (nil without `--capture` and `--hep`).
    func sink() throws -> TrafficMirror? {
        var file: CaptureFileSink?
        if let path = capture {
            do { file = try CaptureFileSink(path: path) } catch { throw ValidationError("\(error)") }
        }
        var hep: HEPTrafficSink?
        if let address = try collector.address() {
            do { hep = try HEPTrafficSink(collector: address, agentID: collector.hepAgentID, authKey: collector.hepKey) } catch { throw ValidationError("--hep: \(error)") }
        }
        guard file != nil || hep != nil else { return nil }
        return TrafficMirror(file: file, hep: hep)
    }
}

/// The `--capture` file and the `--hep` collector of a command, as one sink.
final class TrafficMirror: SIPTrafficSink {
    let file: CaptureFileSink?
    let hep: HEPTrafficSink?
    private let both: TrafficSinks

    init(file: CaptureFileSink?, hep: HEPTrafficSink?) {
        self.file = file
        self.hep = hep
        var sinks: [any SIPTrafficSink] = []
        if let file { sinks.append(file) }
        if let hep { sinks.append(hep) }
        both = TrafficSinks(sinks)
    }

    func record(_ record: SIPTrafficRecord) { both.record(record) }
    func connectionClosed(_ connection: ConnectionInfo) { both.connectionClosed(connection) }

    func close() {
        file?.close()
        hep?.close()
    }
}

/// `--hep` and its settings: where a command mirrors its SIP (and `capture` sends a file's SIP and RTCP).
struct HEPOptions: ParsableArguments {
    @Option(name: .long, help: "Send SIP (a capture's: and its RTCP) to a HEP v3 collector (Homer, Kamailio sipcapture), udp:HOST:PORT.")
    var hep: String?

    @Option(name: .long, help: "With --hep: the capture agent id in each packet.")
    var hepAgentID: UInt32 = 2001

    @Option(name: .long, help: "With --hep: a key for the collector to check (sent in clear).")
    var hepKey: String?

    func validate() throws { _ = try address() }

    /// The collector (`udp:HOST:PORT`, the only transport: HEP collectors listen on UDP first); nil without `--hep`.
    func address() throws -> SocketAddress? {
        guard let text = hep else { return nil }
        guard text.hasPrefix("udp:") else { throw ValidationError("--hep takes udp:HOST:PORT, not \(text)") }
        do { return try SocketAddress(String(text.dropFirst(4))) } catch { throw ValidationError("--hep: \(error)") }
    }
}

/// `capture --rtp` and `--audio`, and the SRTP keys they decrypt with.
struct RTPOptions: ParsableArguments {
    @Flag(name: .long, help: "The RTP streams (as tshark -z rtp,streams, with MOS, RTCP reports, DTMF digits, silent streams, one-way calls).")
    var rtp = false

    @Option(name: .long, help: "Write each RTP stream (G.711, Opus) and each call (stereo) as WAV files into this directory; lists the streams as --rtp.")
    var audio: String?

    @Option(name: .long, help: "With --rtp or --audio: an SRTP key, SUITE:INLINE-KEY[@HOST:PORT] (the sender it protects; without, every SRTP stream the capture's SDP gives no key). Repeatable.")
    var srtpKey: [String] = []

    @Flag(name: .long, help: "With --rtp or --audio: do not use the a=crypto keys of the capture's SDP (only --srtp-key).")
    var srtpIgnoreSDP = false

    /// Whether the streams are asked for (`--rtp` or `--audio`).
    var wanted: Bool { rtp || audio != nil }

    func validate() throws {
        if (!srtpKey.isEmpty || srtpIgnoreSDP) && !wanted { throw ValidationError("--srtp-key and --srtp-ignore-sdp are only taken with --rtp or --audio") }
        _ = try srtpOptions()
    }

    func srtpOptions() throws -> SRTPCaptureOptions {
        do throws(SRTPCaptureKey.ParseError) {
            return try CaptureCommand.srtpOptions(keys: srtpKey, ignoreSDP: srtpIgnoreSDP)
        } catch {
            throw ValidationError(error.description)
        }
    }
}

/// `serve --echo` and the options only it takes: the echo test line's media, limits and engine.
struct EchoOptions: ParsableArguments {
    @Flag(name: .long, help: "An echo test line: answer every INVITE's SDP offer and send back the caller's audio (dialog layer, a media session per call).")
    var echo = false

    @Option(name: .long, help: "With --echo: the media address (default: the first listen address).")
    var mediaAddress: String?

    @Option(name: .long, help: "With --echo: RTP port range, LOW-HIGH (even RTP port, RTCP on the next).")
    var rtpPorts: String = "20000-29999"

    @Option(name: .long, help: "With --echo: codecs in preference order, from opus, pcmu, pcma, g722 and telephone-event.")
    var codecs: String = "opus,pcmu,pcma,telephone-event"

    @Option(name: .long, help: "With --echo: SDES-SRTP: off, optional (RTP/AVP with a=crypto) or mandatory (RTP/SAVP).")
    var srtp: String = "optional"

    @Option(name: .long, help: "With --echo: calls up at once; more are refused.")
    var maxCalls: Int = 1000

    @Option(name: .long, help: "With --echo: the refusal over --max-calls: 503 (with Retry-After) or 486.")
    var overLimit: Int = 503

    @Option(name: .long, help: "With --echo: end a call with BYE after this many seconds without RTP (0: never).")
    var mediaTimeout: Int = 30

    @Option(name: .long, help: "With --echo: seconds between statistics lines.")
    var statsInterval: Int = 1

    @Option(name: .long, help: "With --echo: media worker threads (default: one per core).")
    var mediaThreads: Int?

    @Option(name: .long, help: "With --echo: run the media workers in SCHED_FIFO at this priority (1-99; needs CAP_SYS_NICE, else normal scheduling).")
    var realtime: Int32?

    @Option(name: .long, help: "With --echo: Opus encoder complexity 0-10 (default libopus's 10; lower carries more calls per core).")
    var opusComplexity: Int?

    @Option(name: .long, help: "With --echo: Opus target bitrate in bit/s, 6000-510000 (default: libopus's automatic, ~54 kbit/s).")
    var opusBitrate: Int?

    /// The echo server's options for a server listening on `points`.
    func options(_ points: [SIPEndpoint.ListenPoint], ringing: Bool) throws -> EchoServer.Options {
        let policy = try MediaArguments.srtpPolicy(srtp)
        let ports = try MediaArguments.portRange(rtpPorts)
        let table: [String: Codec] = ["opus": .opus, "pcmu": .pcmu, "pcma": .pcma, "g722": .g722, "telephone-event": .telephoneEvent]
        var list: [Codec] = []
        for name in codecs.split(separator: ",") {
            guard let c = table[name.lowercased()] else { throw ValidationError("--codecs: unknown codec \(name) (opus, pcmu, pcma, g722, telephone-event)") }
            list.append(c)
        }
        guard list.contains(where: { $0.name != "telephone-event" }) else { throw ValidationError("--codecs needs an audio codec") }
        guard maxCalls > 0 else { throw ValidationError("--max-calls must be positive") }
        guard overLimit == 503 || overLimit == 486 else { throw ValidationError("--over-limit takes 503 or 486") }
        let ip = mediaAddress ?? MediaArguments.address(forListenHost: points.first?.address.ipString ?? "127.0.0.1")
        if let n = mediaThreads, n < 1 { throw ValidationError("--media-threads must be positive") }
        if let p = realtime, !(1...99).contains(p) { throw ValidationError("--realtime takes a priority from 1 to 99") }
        if let c = opusComplexity, !(0...10).contains(c) { throw ValidationError("--opus-complexity takes 0 to 10") }
        if let b = opusBitrate, !(6000...510_000).contains(b) { throw ValidationError("--opus-bitrate takes 6000 to 510000 bit/s") }
        let engine = mediaThreads == nil && realtime == nil
            ? MediaEngine.shared
            : MediaEngine(threads: mediaThreads ?? MediaEngine.onlineProcessors, scheduling: realtime.map { .realtime(priority: $0) } ?? .normal)
        // Two sockets per call: the usual soft limit of 1,024 descriptors would stop at ~500 calls.
        MediaEngine.raiseDescriptorLimit()
        let media = MediaSessionConfiguration(localAddress: ip, portRange: ports, codecs: list, srtpPolicy: policy, opusComplexity: opusComplexity,
                                              opusBitrate: opusBitrate, engine: engine)
        return EchoServer.Options(media: media, maxCalls: maxCalls, overLimitCode: overLimit,
                                        mediaTimeout: mediaTimeout > 0 ? .seconds(mediaTimeout) : nil, ringing: ringing)
    }
}
