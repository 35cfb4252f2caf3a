import ArgumentParser
import Logging
import Synchronization
import SIPMessage
import SIPRuntime
import SwitchboardTools

/// `--log-level`, shared by every command that runs the stack: the one place the CLI
/// bootstraps swift-log (the libraries never do), with lines on standard error.
struct LoggingOptions: ParsableArguments {
    @Option(name: .long, help: "Log on stderr at this level and above: trace (every message), debug (every drop, refusal, call state), info (start, stop, registrations), notice, warning, error, critical.")
    var logLevel: Logger.Level = .warning

    /// A logger for `label`, at ``logLevel``; the first call bootstraps the logging system.
    func logger(_ label: String) -> Logger {
        LoggingOptions.bootstrapOnce.withLock { done in
            guard !done else { return }
            LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
            done = true
        }
        var logger = Logger(label: label)
        logger.logLevel = logLevel
        return logger
    }

    private static let bootstrapOnce = Mutex(false)
}

/// `--trace`, shared by the phones (`call`, `answer`).
struct TraceOptions: ParsableArguments {
    @Flag(name: .long, help: "Print every message sent and received, one line each (a ladder's arrows), on stdout.")
    var trace = false

    /// With `--trace`: a line per message (direction, peer, first line), for a ``Phone``.
    func traceLines() -> (@Sendable (SIPMessage, Bool, SIPPeer) -> Void)? {
        guard trace else { return nil }
        return { m, outgoing, peer in
            BatchedOutput.write("        \(outgoing ? "→" : "←") \(peer.address)  \(LadderPrinter.label(m))")
        }
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// `--json`, shared by `parse` and `capture`.
struct JSONOption: ParsableArguments {
    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false
}

/// `--listen`, shared by the commands that work from one local address (`call`, `register`).
struct LocalAddressOption: ParsableArguments {
    @Option(name: .long, help: "Local address: udp:HOST:PORT or tcp:… (port 0 = any).")
    var listen: String = "udp:127.0.0.1:0"

    /// The listen point `--listen` names.
    func point() throws -> SIPEndpoint.ListenPoint { try ListenSpec.parse(listen) }
}

/// `--listen` for the servers (`serve`, `proxy`): the listen points, as many as given.
struct ListenPointsOption: ParsableArguments {
    @Option(name: .long, help: "Where to listen: udp:HOST:PORT, tcp:… or (serve and proxy, with --cert and --key) tls:… (repeatable).")
    var listen: [String] = ["udp:127.0.0.1:5060"]

    /// The listen points `--listen` names.
    func points() throws -> [SIPEndpoint.ListenPoint] { try listen.map(ListenSpec.parse) }
}

/// `--duration`, shared by `answer`, `serve` and `proxy`: they run until a signal, or this long.
struct StopAfterOption: ParsableArguments {
    @Option(name: .long, help: "Stop after this many seconds (default: run until SIGINT/SIGTERM).")
    var duration: Double?
}
