import Foundation
import Synchronization
import Testing
import NetworkIO
import SIPLoad
import SIPRuntime
import SIPTransport
import SIPpScenario
import SwitchboardTestSupport

/// SIPp (Debian `sip-tester`) run as a child process, bounded in time, in a fresh folder.
///
/// Spawned with `posix_spawn` and an empty signal mask: a child started from a Dispatch or
/// cooperative-pool thread inherits that thread's blocked signals, and SIPp's global
/// `-timeout` (SIGALRM) then never fires.
enum SIPpTool {
    static let path: String? = ExternalTool.find(["/usr/bin/sipp", "/usr/local/bin/sipp"])
    static var available: Bool { path != nil }

    /// Runs sipp with `arguments` and returns its exit status and the tail of its output (nil
    /// status when it had to be killed at `timeout`).
    static func run(_ arguments: [String], timeout: Double) async -> (status: Int32?, log: String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sipp-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let logPath = dir.appendingPathComponent("out.log").path
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for sig in [SIGALRM, SIGPIPE, SIGINT, SIGTERM, SIGCHLD] { sigaddset(&defaults, sig) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = ([path ?? "/usr/bin/sipp"] + arguments).map { strdup($0) } + [nil]
        defer { for a in argv { free(a) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, path ?? "/usr/bin/sipp", &actions, &attributes, argv, environ) == 0 else { return (nil, "cannot start sipp") }
        let clock = ContinuousClock(), deadline = clock.now + .milliseconds(Int64(timeout * 1000))
        var status: Int32 = 0
        var exited = false
        while clock.now < deadline {
            if waitpid(pid, &status, WNOHANG) == pid { exited = true; break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        if !exited {
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
        }
        let log = (try? String(contentsOfFile: logPath, encoding: .utf8)).map { String($0.suffix(2500)) } ?? ""
        // WIFEXITED / WEXITSTATUS.
        let code: Int32? = exited && (status & 0x7f) == 0 ? (status >> 8) & 0xff : nil
        return (code, log)
    }
}

/// Lines the runner printed.
final class Lines: Sendable {
    private let lines = Mutex<[String]>([])
    func add(_ s: String) { lines.withLock { $0.append(s) } }
    var all: [String] { lines.withLock { $0 } }
}

/// `switchboard sipp` against SIPp and beside it: the built-in uac and uas each way, and the
/// project's scenarios run by both against the same device, with the same verdict.
@Suite("SIPp scenarios against SIPp", .serialized, .enabled(if: SIPpTool.available || TestPaths.isCI, "sipp (Debian sip-tester) is not installed"),
       .requires("sipp (Debian sip-tester)", { SIPpTool.available }))
struct SIPpVerdictTests {
    /// Waits (at most 5 s) until a callee has bound its UDP port on 127.0.0.1.
    static func waitUntilBound(_ port: UInt16) async {
        let clock = ContinuousClock(), deadline = clock.now + .seconds(5)
        while !udpPortIsBound(port), clock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
    }

    static func ours(_ arguments: [String], _ lines: Lines) async -> Int32 {
        await SIPpCommandLine.run(arguments: arguments, output: { lines.add($0) }, error: { lines.add($0) })
    }

    @Test(.timeLimit(.minutes(1)))
    func ourUACAgainstSIPpsUAS() async throws {
        let sippPort = freeUDPPort(), ourPort = freeUDPPort()
        async let sipp = SIPpTool.run(["-sn", "uas", "-i", "127.0.0.1", "-p", "\(sippPort)", "-m", "10", "-nostdin", "-timeout", "20"], timeout: 30)
        await Self.waitUntilBound(sippPort)
        let lines = Lines()
        let code = await Self.ours(["127.0.0.1:\(sippPort)", "-sn", "uac", "-i", "127.0.0.1", "-p", "\(ourPort)", "-m", "10", "-r", "50", "-timeout", "20"], lines)
        let s = await sipp
        #expect(code == 0, "\(lines.all)")
        #expect(lines.all.last == "calls created: 10, successful: 10, failed: 0")
        #expect(s.status == 0, "sipp: \(s.log)")
        #expect(s.log.contains("Successful call"))
    }

    @Test(.timeLimit(.minutes(1)))
    func sippsUACAgainstOurUAS() async throws {
        let sippPort = freeUDPPort(), ourPort = freeUDPPort()
        let lines = Lines()
        async let ours = Self.ours(["-sn", "uas", "-i", "127.0.0.1", "-p", "\(ourPort)", "-m", "10", "-timeout", "20"], lines)
        await Self.waitUntilBound(ourPort)
        let s = await SIPpTool.run(["127.0.0.1:\(ourPort)", "-sn", "uac", "-i", "127.0.0.1", "-p", "\(sippPort)", "-m", "10", "-r", "50",
                                    "-nostdin", "-timeout", "20"], timeout: 30)
        let code = await ours
        #expect(s.status == 0, "sipp: \(s.log)")
        #expect(code == 0, "\(lines.all)")
        #expect(lines.all.last == "calls created: 10, successful: 10, failed: 0")
    }

    @Test(.timeLimit(.minutes(1)))
    func ourUACAgainstOurUAS() async throws {
        let uasPort = freeUDPPort(), uacPort = freeUDPPort()
        let uasLines = Lines(), uacLines = Lines()
        async let uas = Self.ours(["-sn", "uas", "-i", "127.0.0.1", "-p", "\(uasPort)", "-m", "20", "-timeout", "20"], uasLines)
        await Self.waitUntilBound(uasPort)
        let code = await Self.ours(["127.0.0.1:\(uasPort)", "-sn", "uac", "-i", "127.0.0.1", "-p", "\(uacPort)", "-m", "20", "-r", "100", "-l", "5",
                                    "-d", "20", "-timeout", "20"], uacLines)
        #expect(code == 0, "\(uacLines.all)")
        #expect(await uas == 0, "\(uasLines.all)")
        #expect(uasLines.all.last == "calls created: 20, successful: 20, failed: 0")
    }

    /// The project's scenarios, each with the verdict due, run by SIPp and by the runner
    /// against the same device (our transaction-level answering server, 200 to every INVITE).
    @Test(.timeLimit(.minutes(1)), arguments: [("uac_expect_486", Int32(1)), ("uac_check_header", 1), ("uac_recv_timeout", 1), ("uac_actions", 0)])
    func sameVerdictAsSIPp(_ fixture: String, _ expected: Int32) async throws {
        let box = Mutex<AnsweringServer?>(nil)
        let endpoint = try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { e in box.withLock { $0 }?.handle(e) }
        defer { endpoint.close() }
        let dut = endpoint.localAddresses[0].address.port
        let server = AnsweringServer(answerCode: 200, contact: "sip:dut@127.0.0.1:\(dut)")
        server.attach(endpoint)
        box.withLock { $0 = server }
        let inf = temporaryFile("SEQUENTIAL\nbob;alice\ncarol;dave\n")
        defer { try? FileManager.default.removeItem(atPath: inf) }
        let common = ["127.0.0.1:\(dut)", "-sf", TestPathsForSIPp.fixture(fixture), "-i", "127.0.0.1", "-m", "2", "-r", "20",
                      "-timeout", "15", "-inf", inf, "-key", "subject", "hello"]
        let s = await SIPpTool.run(common + ["-p", "\(freeUDPPort())", "-nostdin"], timeout: 25)
        let lines = Lines()
        let code = await Self.ours(common + ["-p", "\(freeUDPPort())"], lines)
        #expect(s.status == expected, "sipp: \(s.log)")
        #expect(code == expected, "\(lines.all)")
        #expect(code == s.status)
        if expected == 0 {
            #expect(lines.all.last == "calls created: 2, successful: 2, failed: 0")
        } else {
            #expect(lines.all.last == "calls created: 2, successful: 0, failed: 2", "\(lines.all)")
        }
    }

    /// The global timeout as SIPp ends on it: `-timeout_error` stops the run at once (255, the
    /// call to a silent peer abandoned); a uas that saw no call by the timeout exits 97.
    @Test(.timeLimit(.minutes(1)))
    func globalTimeoutExitCodesAsSIPp() async throws {
        let silent = try UDPTransport(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0)) { _ in }
        defer { silent.close() }
        let peer = "127.0.0.1:\(silent.localAddress.port)"
        let s = await SIPpTool.run([peer, "-sn", "uac", "-i", "127.0.0.1", "-p", "\(freeUDPPort())", "-m", "1", "-nostdin", "-timeout", "1", "-timeout_error"], timeout: 15)
        let lines = Lines()
        let clock = ContinuousClock(), start = clock.now
        let code = await Self.ours([peer, "-sn", "uac", "-i", "127.0.0.1", "-p", "\(freeUDPPort())", "-m", "1", "-timeout", "1", "-timeout_error"], lines)
        #expect(clock.now - start < .seconds(3))
        #expect(s.status == 255, "sipp: \(s.log)")
        #expect(code == 255, "\(lines.all)")
        #expect(lines.all.last == "calls created: 1, successful: 0, failed: 0, abandoned: 1 (global timeout reached)")

        let sUAS = await SIPpTool.run(["-sn", "uas", "-i", "127.0.0.1", "-p", "\(freeUDPPort())", "-nostdin", "-timeout", "1"], timeout: 15)
        let oursUAS = await Self.ours(["-sn", "uas", "-i", "127.0.0.1", "-p", "\(freeUDPPort())", "-timeout", "1"], Lines())
        #expect(sUAS.status == 97, "sipp: \(sUAS.log)")
        #expect(oursUAS == 97)
    }

    /// -trace_err and -trace_msg write `<scenario>_<pid>_errors.log` (a line per failed call with
    /// its reason) and `<scenario>_<pid>_messages.log` (every message both ways).
    @Test(.timeLimit(.minutes(1)))
    func traceFilesAreWritten() async throws {
        let box = Mutex<AnsweringServer?>(nil)
        let endpoint = try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { e in box.withLock { $0 }?.handle(e) }
        defer { endpoint.close() }
        let dut = endpoint.localAddresses[0].address.port
        let server = AnsweringServer(answerCode: 200, contact: "sip:dut@127.0.0.1:\(dut)")
        server.attach(endpoint)
        box.withLock { $0 = server }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sbsipp-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let code = await SIPpCommandLine.run(arguments: ["127.0.0.1:\(dut)", "-sf", TestPathsForSIPp.fixture("uac_check_header"), "-i", "127.0.0.1", "-p", "\(freeUDPPort())",
                                                         "-m", "1", "-timeout", "10", "-trace_err", "-trace_msg"],
                                             traceDirectory: dir, output: { _ in }, error: { _ in })
        #expect(code == 1)
        let files = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        let pid = getpid()
        #expect(files == ["uac_check_header_\(pid)_errors.log", "uac_check_header_\(pid)_messages.log"])
        let errors = try String(contentsOfFile: dir + "/uac_check_header_\(pid)_errors.log", encoding: .utf8)
        #expect(errors.contains("call 1 (Call-ID 1-\(pid)@127.0.0.1): regexp \"sip:nobody-here@\" (line 22) did not match (check_it)"))
        let messages = try String(contentsOfFile: dir + "/uac_check_header_\(pid)_messages.log", encoding: .utf8)
        #expect(messages.contains("UDP message sent") && messages.contains("INVITE sip:service@127.0.0.1:\(dut) SIP/2.0\r\n"))
        #expect(messages.contains("UDP message received") && messages.contains("SIP/2.0 200 OK\r\n"))

        // -trace_logs: the <log> actions, keywords and variables filled in.
        let inf = temporaryFile("SEQUENTIAL\nbob;alice\n")
        defer { try? FileManager.default.removeItem(atPath: inf) }
        let logged = await SIPpCommandLine.run(arguments: ["127.0.0.1:\(dut)", "-sf", TestPathsForSIPp.fixture("uac_actions"), "-i", "127.0.0.1", "-p", "\(freeUDPPort())",
                                                           "-m", "1", "-timeout", "10", "-inf", inf, "-key", "subject", "hi", "-trace_logs"],
                                               traceDirectory: dir, output: { _ in }, error: { _ in })
        #expect(logged == 0)
        let log = try String(contentsOfFile: dir + "/uac_actions_\(pid)_logs.log", encoding: .utf8)
        #expect(log.hasPrefix("call 1 to bob: tag sb") && log.hasSuffix(", n=5.000000\n"), "\(log)")
    }

    /// A project uas scenario (Fixtures/sipp/uas_final.xml, answering 486) played by SIPp and by
    /// the runner to the same caller, SIPp's built-in uac (which expects a 200): both callees
    /// pass (0: the 486 is ACKed), and the caller fails the same way against each (1).
    @Test(.timeLimit(.minutes(1)))
    func uasScenarioSameVerdictAsSIPp() async throws {
        let template = try String(contentsOfFile: TestPaths.repoRoot + "/Fixtures/sipp/uas_final.xml", encoding: .utf8)
        let scenario = temporaryFile(template.replacingOccurrences(of: "FINAL_STATUS", with: "486"))
        defer { try? FileManager.default.removeItem(atPath: scenario) }
        var verdicts: [(callee: Int32?, caller: Int32?)] = []
        for ours in [false, true] {
            let port = freeUDPPort()
            let args = ["-sf", scenario, "-i", "127.0.0.1", "-p", "\(port)", "-m", "2", "-timeout", "15"]
            let lines = Lines()
            async let callee: Int32? = ours ? Self.ours(args, lines) : SIPpTool.run(args + ["-nostdin"], timeout: 25).status
            await Self.waitUntilBound(port)
            let caller = await SIPpTool.run(["127.0.0.1:\(port)", "-sn", "uac", "-i", "127.0.0.1", "-p", "\(freeUDPPort())", "-m", "2", "-r", "10",
                                             "-nostdin", "-timeout", "15"], timeout: 25)
            verdicts.append((await callee, caller.status))
            if ours { #expect(lines.all.last == "calls created: 2, successful: 2, failed: 0", "\(lines.all)") }
        }
        #expect(verdicts[0].callee == 0 && verdicts[0].caller == 1, "SIPp as callee: \(verdicts[0])")
        #expect(verdicts[1].callee == 0 && verdicts[1].caller == 1, "switchboard sipp as callee: \(verdicts[1])")
    }
}
