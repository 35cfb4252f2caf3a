import ArgumentParser
import Foundation
import SIPpScenario

struct SIPp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sipp",
        abstract: "Runs SIPp XML scenarios natively, with SIPp's own options (-sf, -sn uac|uas, host:port, -i, -p, -m, -r, -l, -inf, -key, -set, -timeout, …).",
        discussion: "UDP only for now (-t u1). Exit status as SIPp's: 0 when every call succeeded, 1 when one failed, 255 for a refused command line or scenario. docs/CONFORMANCE.md lists what is supported and refused."
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
