import ArgumentParser
import SIPRuntime
import SwitchboardTools

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

/// `--duration`, shared by `answer` and `proxy`: they run until a signal, or this long.
struct StopAfterOption: ParsableArguments {
    @Option(name: .long, help: "Stop after this many seconds.")
    var duration: Double?
}
