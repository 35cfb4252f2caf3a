import ArgumentParser
import Foundation
import SIPpScenario

struct SIPp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sipp",
        abstract: "Runs SIPp XML scenarios natively, with SIPp's own options (-sf, -sn uac|uas, host:port, -i, -p, -m, -r, -l, -inf, -key, -set, -t, -timeout, …).",
        discussion: "Transports: -t u1, un (UDP), t1, tn (TCP), l1, ln (TLS, with -tls_cert/-tls_key or a self-signed pair made for the run). Exit status as SIPp's: 0 when every call succeeded, 1 when one failed, 97 after <exec int_cmd=\"stop_now\"/>, 255 for a refused command line or scenario. docs/CONFORMANCE.md lists what is supported and refused."
    )

    @Argument(parsing: .captureForPassthrough, help: "SIPp's arguments, as given to sipp.")
    var arguments: [String] = []

    func run() async throws {
        if arguments.contains("--help") || arguments.contains("-h") {
            print(Self.helpMessage())
            return
        }
        let code = await SIPpCommandLine.run(arguments: arguments, output: { print($0) }, error: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) })
        if code != 0 { throw ExitCode(code) }
    }
}
