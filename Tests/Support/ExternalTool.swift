import Foundation

/// Runs the external tools some tests compare against (tshark, chromium), bounded in time.
/// They are installed by scripts/test; a test that needs one skips with a message when it is
/// missing, except under CI (`TestPaths.isCI`), where it fails.
public enum ExternalTool {
    /// The result of a run.
    public struct Run: Sendable {
        public var status: Int32
        public var timedOut: Bool
        public var output: String
        public var ok: Bool { !timedOut && status == 0 }
    }

    /// The first executable among `candidates`.
    public static func find(_ candidates: [String]) -> String? {
        candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs `path` with `arguments` and a private HOME (a fresh temporary folder, removed after),
    /// killing it after `timeout` seconds. Standard output is returned; standard error is kept
    /// only when `mergeErrors` is set.
    ///
    /// The blocking wait happens on a Dispatch thread, not on the test's: Swift Testing runs tests
    /// on the cooperative pool (one thread per core), and a test blocked in a child process there
    /// starves the other suites' async tests, whose wall-clock bounds then fail.
    public static func run(_ path: String, _ arguments: [String], timeout: Double = 30, mergeErrors: Bool = false) async -> Run {
        await withCheckedContinuation { (c: CheckedContinuation<Run, Never>) in
            DispatchQueue.global().async {
                c.resume(returning: runBlocking(path, arguments, timeout: timeout, mergeErrors: mergeErrors))
            }
        }
    }

    /// ``run(_:_:timeout:mergeErrors:)`` on the calling thread (for cleanups in `defer`, which cannot await).
    public static func runBlocking(_ path: String, _ arguments: [String], timeout: Double, mergeErrors: Bool) -> Run {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = arguments
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("tool-home-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: home) }
        p.environment = ["HOME": home.path, "PATH": "/usr/bin:/bin", "XDG_CONFIG_HOME": home.path + "/config",
                         "XDG_CACHE_HOME": home.path + "/cache", "WIRESHARK_CONFIG_DIR": home.path + "/wireshark"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = mergeErrors ? out : FileHandle.nullDevice
        p.standardInput = FileHandle.nullDevice
        do { try p.run() } catch {
            return Run(status: -1, timedOut: false, output: "cannot start \(path): \(error)")
        }
        let pid = p.processIdentifier
        let fired = TimeoutFlag()
        let watchdog = DispatchWorkItem {
            fired.set()
            kill(pid, SIGKILL)
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        // Read while it runs (a full pipe would stall it); the watchdog bounds the wait.
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        watchdog.cancel()
        return Run(status: p.terminationStatus, timedOut: fired.value, output: String(decoding: data, as: UTF8.self))
    }
}

private final class TimeoutFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var fired = false
    func set() { lock.lock(); fired = true; lock.unlock() }
    var value: Bool { lock.lock(); defer { lock.unlock() }; return fired }
}

/// tshark (Debian package `tshark`).
public enum Tshark {
    public static let path: String? = ExternalTool.find(["/usr/bin/tshark", "/usr/local/bin/tshark"])
    public static var available: Bool { path != nil }

    /// What tshark dissects as SIP in a file, one entry per SIP message, looking for SIP on every
    /// UDP and TCP port (the heuristic dissectors), as our decoder does.
    public struct View: Equatable, Sendable {
        /// Call-ID → number of messages.
        public var callIDs: [String: Int] = [:]
        /// Request method → count.
        public var methods: [String: Int] = [:]
        /// Status code → count.
        public var codes: [Int: Int] = [:]
        /// Frames holding SIP.
        public var frames = 0
        public var messages: Int { callIDs.values.reduce(0, +) }
        public init() {}
    }

    static let separator = "\u{1F}"

    /// tshark's view of `file`; `nil` (with the reason) when tshark failed or timed out.
    public static func view(of file: String, timeout: Double = 30) async -> Result<View, ToolFailure> {
        guard let path else { return .failure(ToolFailure(description: "tshark is not installed")) }
        let r = await ExternalTool.run(path, ["-r", file, "-n", "--enable-heuristic", "sip_udp", "--enable-heuristic", "sip_tcp",
                                        "-Y", "sip", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=\(separator)",
                                        "-e", "sip.Call-ID", "-e", "sip.Method", "-e", "sip.Status-Code"], timeout: timeout)
        guard r.ok else { return .failure(ToolFailure(description: "tshark on \(file): status \(r.status), timed out \(r.timedOut)")) }
        var v = View()
        for line in r.output.split(separator: "\n", omittingEmptySubsequences: true) {
            // One line per frame; a frame carrying several SIP messages (TCP) has one value per
            // message in each field, joined by the aggregator.
            v.frames += 1
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            func values(_ i: Int) -> [String] {
                i < fields.count ? fields[i].components(separatedBy: separator).filter { !$0.isEmpty } : []
            }
            for c in values(0) { v.callIDs[c, default: 0] += 1 }
            for m in values(1) { v.methods[m, default: 0] += 1 }
            for c in values(2) { if let n = Int(c) { v.codes[n, default: 0] += 1 } }
        }
        return .success(v)
    }
}

/// Why an external tool gave no answer.
public struct ToolFailure: Error, CustomStringConvertible, Sendable {
    public var description: String
}
