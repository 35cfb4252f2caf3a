import SwitchboardTools
import ArgumentParser
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@main
struct SwitchboardCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "switchboard",
        abstract: "Switchboard: a SIP/RTP stack in Swift.",
        subcommands: [Parse.self, Frame.self]
    )
}

struct Parse: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Parse SIP messages (one per file) and print a summary of each, or its error.",
        discussion: "Exits 0 when every file parses and validates, 65 when any does not."
    )

    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false

    @Flag(name: .long, help: "Only frame and index the messages; skip the RFC 3261 validation of their headers.")
    var noValidate = false

    @Argument(help: "Files holding one SIP message each (read as bytes).")
    var files: [String]

    func run() throws {
        let report = ParseCommand.run(paths: files, validate: !noValidate)
        print(json ? report.json : report.text, terminator: "")
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
