import Foundation
import Synchronization

/// The Python venv holding the reference implementations (pylibsrtp, opuslib) that
/// `scripts/py-oracles` installs; the media tests compare against them.
public enum PythonOracle {
    /// `$SWITCHBOARD_VENV/bin/python`, by default `/var/cache/switchboard/venv/bin/python`.
    public static let python: String = {
        let venv = ProcessInfo.processInfo.environment["SWITCHBOARD_VENV"] ?? "/var/cache/switchboard/venv"
        return venv + "/bin/python"
    }()

    /// Whether the venv's python exists and imports `modules` (asked once per set of modules:
    /// suites ask for every test).
    public static func available(_ modules: [String]) -> Bool {
        let key = modules.joined(separator: ", ")
        if let known = answers.withLock({ $0[key] }) { return known }
        let ok = FileManager.default.isExecutableFile(atPath: python) && (try? run("import " + key, input: [])) != nil
        answers.withLock { $0[key] = ok }
        return ok
    }
    private static let answers = Mutex<[String: Bool]>([:])

    /// Why a run failed.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Runs `script` with the venv's python, bounded by `timeout` seconds. The script reads its
    /// input from the file named by `sys.argv[1]` and writes its output to `sys.argv[2]`.
    public static func run(_ script: String, input: [UInt8], timeout: Double = 60) throws -> [UInt8] {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("switchboard-oracle-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let inURL = dir.appendingPathComponent("in.bin"), outURL = dir.appendingPathComponent("out.bin")
        let scriptURL = dir.appendingPathComponent("oracle.py")
        try Data(input).write(to: inURL)
        try Data(script.utf8).write(to: scriptURL)
        let errURL = dir.appendingPathComponent("stderr.txt")
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = ["-W", "ignore", scriptURL.path, inURL.path, outURL.path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: errURL)
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > deadline {
                process.terminate()
                process.waitUntilExit()
                throw Failure(description: "python oracle timed out after \(timeout) s")
            }
            usleep(10_000)
        }
        guard process.terminationStatus == 0 else {
            let err = (try? String(contentsOf: errURL, encoding: .utf8)) ?? ""
            throw Failure(description: "python oracle exited \(process.terminationStatus): \(err)")
        }
        return [UInt8]((try? Data(contentsOf: outURL)) ?? Data())
    }
}
