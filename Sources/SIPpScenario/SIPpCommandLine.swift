import Foundation
import Logging
import NetworkIO

/// `switchboard sipp …`: SIPp's command line, run by this runner. The CLI hands it the
/// arguments untouched.
public enum SIPpCommandLine {
    /// The exit code for a command line or scenario refused before any call (SIPp's -1).
    public static let usageExitCode: Int32 = 255

    /// Reads the scenario (a file or a built-in) and the injection file the options name, and
    /// makes the runner.
    public static func prepare(_ options: SIPpOptions, logger: Logger = .disabled) throws(SIPpUsageError) -> SIPpRunner {
        let xml: String
        let name: String
        switch options.scenario ?? (options.remote == nil ? nil : .builtIn("uac")) {
        case .builtIn(let n)?:
            xml = SIPpBuiltIn.xml(n)!
            name = n
        case .file(let path)?:
            guard let data = FileManager.default.contents(atPath: path) else { throw SIPpUsageError("cannot read scenario file \(path)") }
            guard let text = String(data: data, encoding: .utf8) else { throw SIPpUsageError("\(path) is not UTF-8 text") }
            xml = text
            var base = (path as NSString).lastPathComponent
            if base.hasSuffix(".xml") { base.removeLast(4) }
            name = base
        case nil:
            throw SIPpUsageError("give a scenario (-sf FILE or -sn uac|uas), and a remote host:port for a uac")
        }
        let scenario: SIPpScenario
        do { scenario = try SIPpScenario.parse(xml, keys: Set(options.keys.keys)) } catch {
            throw SIPpUsageError("scenario \(name): \(error)")
        }
        var injection: SIPpInjection?
        if let inf = options.injectionFile {
            guard let data = FileManager.default.contents(atPath: inf), let text = String(data: data, encoding: .utf8) else {
                throw SIPpUsageError("cannot read injection file \(inf)")
            }
            injection = try SIPpInjection(parsing: text, file: inf)
        }
        if scenario.startsBySending && options.remote == nil { throw SIPpUsageError("scenario \(name) starts by sending: give the remote host:port") }
        return SIPpRunner(scenario: scenario, options: options, traceName: name, injection: injection, logger: logger)
    }

    /// Parses `arguments`, runs the scenario and returns SIPp's exit code: 0 when every call
    /// succeeded, 1 when one failed, 255 for a refused command line or scenario. `output`
    /// receives the lines to print (errors go to `error`). Trace files go to `traceDirectory`
    /// (the working directory when nil, as SIPp's).
    public static func run(arguments: [String], traceDirectory: String? = nil, logger: Logger = .disabled,
                           output: @Sendable (String) -> Void, error: @Sendable (String) -> Void) async -> Int32 {
        let runner: SIPpRunner
        do {
            var options = try SIPpOptions.parse(arguments)
            options.traceDirectory = traceDirectory
            runner = try prepare(options, logger: logger)
        } catch let e {
            error("switchboard sipp: \(e)")
            return usageExitCode
        }
        do {
            let summary = try await runner.run()
            for f in summary.failures.prefix(20) { output("call \(f.call) failed: \(f.reason)") }
            if summary.failed > 20 { output("… and \(summary.failed - 20) more failed calls") }
            for (counter, times) in summary.responseTimes.sorted(by: { $0.key < $1.key }) where times.count > 0 {
                output("response time \(counter): \(times.count) measured, average \(formatDouble(times.totalMilliseconds / Double(times.count))) ms")
            }
            output(summary.statisticsLine)
            return summary.exitCode
        } catch let e {
            error("switchboard sipp: \(e)")
            return usageExitCode
        }
    }
}
