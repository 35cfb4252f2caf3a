import Foundation
import SwitchboardTestSupport
import Testing
import SIPMessage
import SIPDialog
import SIPRuntime
import SIPTransport
@testable import SwitchboardTools
import NetworkIO

/// Kamailio (installed by scripts/test) as a registrar with digest authentication, started by
/// scripts/peers/kamailio-start on 127.0.0.1 with the project's own configuration. Skipped
/// with a message without kamailio, except under CI, where that fails.
enum Kamailio {
    static var available: Bool { FileManager.default.isExecutableFile(atPath: "/usr/sbin/kamailio") }

    /// Starts it on a free port; returns (pid, port, run folder).
    static func start(define: String? = nil) async throws -> (Int32, UInt16, String) {
        let port = try PeerPorts.free()
        let rundir = NSTemporaryDirectory() + "sb-kamailio-\(UUID().uuidString)"
        let p = Process()
        p.executableURL = URL(fileURLWithPath: TestPaths.repoRoot + "/scripts/peers/kamailio-start")
        p.arguments = [String(port), rundir] + (define.map { [$0] } ?? [])
        // No pipes: tests run in parallel, and a long-lived Kamailio would inherit another
        // test's pipe and keep its reader waiting forever. The PID comes from Kamailio's file.
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        // Poll rather than waitUntilExit (which was seen to hang here); the script is bounded.
        let clock = ContinuousClock(), deadline = clock.now + .seconds(15)
        while p.isRunning && clock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let text = (try? String(contentsOfFile: rundir + "/kamailio.pid", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        guard !p.isRunning, p.terminationStatus == 0, let pid = Int32(text) else {
            if p.isRunning { p.terminate() }
            throw ToolError("kamailio did not start")
        }
        return (pid, port, rundir)
    }

    /// Stops Kamailio and its children: its whole process group (never the test's own).
    static func stop(_ pid: Int32) {
        let group = getpgid(pid)
        if group > 1 && group != getpgrp() { killpg(group, SIGKILL) } else { kill(pid, SIGKILL) }
    }

    /// The location table's AORs, from kamcmd.
    static func registeredUsers(_ rundir: String) -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/sbin/kamcmd")
        p.arguments = ["-s", "unix:\(rundir)/kamailio_ctl", "ul.dump", "brief"]
        let file = NSTemporaryDirectory() + "sb-kamcmd-\(UUID().uuidString).txt"
        _ = FileManager.default.createFile(atPath: file, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: file) }
        guard let handle = FileHandle(forWritingAtPath: file) else { return "" }
        p.standardOutput = handle
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return "" }
        let clock = ContinuousClock(), deadline = clock.now + .seconds(5)
        while p.isRunning && clock.now < deadline { usleep(20_000) }
        try? handle.close()
        return (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
    }
}

enum SIPpPort {
    static func free() throws -> UInt16 {
        let probe = try UDPTransport(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0)) { _ in }
        defer { probe.close() }
        return probe.localAddress.port
    }
}

/// Ports for peers that listen on UDP and TCP at once (Kamailio, baresip): taken from
/// 10000–19999, below the kernel's ephemeral range (32768–60999 here), so that no outgoing
/// connection of an earlier test can hold one in TIME_WAIT, and checked free for UDP and TCP
/// with plain binds (no SO_REUSEADDR, as the peers bind).
enum PeerPorts {
    /// `count` consecutive free ports, the first one returned.
    static func free(count: Int = 1) throws -> UInt16 {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let first = UInt16.random(in: 10000...(19999 - UInt16(count)), using: &rng)
            if (0..<count).allSatisfy({ bindable(first + UInt16($0)) }) { return first }
        }
        throw ToolError("no free port range in 10000-19999")
    }

    static func bindable(_ port: UInt16) -> Bool {
        for kind in [Int32(SOCK_DGRAM.rawValue), Int32(SOCK_STREAM.rawValue)] {
            let fd = socket(AF_INET, kind, 0)
            guard fd >= 0 else { return false }
            defer { close(fd) }
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = port.bigEndian
            a.sin_addr.s_addr = inet_addr("127.0.0.1")
            let rc = withUnsafePointer(to: &a) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if rc != 0 { return false }
        }
        return true
    }
}

@Suite("Registration against Kamailio", .enabled(if: Kamailio.available || TestPaths.isCI, "kamailio is not installed: Kamailio interop skipped"),
       .requires("kamailio", { Kamailio.available }))
struct KamailioRegistrationTests {
    func session(_ transport: String, port: UInt16, password: String, expires: UInt32 = 120) throws -> RegisterSession {
        let peer = SIPPeer(transport: transport == "tcp" ? .tcp : .udp, address: try SocketAddress(ip: "127.0.0.1", port: port))
        return try RegisterSession(listen: try ListenSpec.parse("\(transport):127.0.0.1:0"), peer: peer, registrar: try SIPURI("sip:127.0.0.1:\(port)"),
                                   addressOfRecord: try SIPURI("sip:alice@127.0.0.1:\(port)"), username: "alice", password: password, expires: expires)
    }

    @Test(.timeLimit(.minutes(1)), arguments: ["udp", "tcp"])
    func registersAndUnregisters(_ transport: String) async throws {
        #expect(Kamailio.available, "kamailio must be installed in CI (scripts/test installs it)")
        let (pid, port, rundir) = try await Kamailio.start()
        defer { Kamailio.stop(pid) }
        let s = try session(transport, port: port, password: "alicepw")
        defer { s.close() }
        await s.start()
        let registered = await s.wait(timeout: .seconds(10)) { $0.isSettled }
        #expect(registered == .registered(expires: 120))
        #expect(Kamailio.registeredUsers(rundir).contains("AoR: alice"))
        await s.stop()
        let end = await s.wait(timeout: .seconds(10)) { $0.isSettled && $0 != .registered(expires: 120) }
        #expect(end == .unregistered)
        // The binding is really gone from Kamailio's location table.
        let after = Kamailio.registeredUsers(rundir)
        #expect(after.contains("Records: 0") && !after.contains("AoR: alice"), "\(after)")
        #expect(s.history == [.registering, .registered(expires: 120), .unregistering, .unregistered])
    }

    /// Kamailio grants its minimum, 30 s: the client refreshes 5 s before it runs out, with the
    /// cached credentials (next nonce count), and the binding stays.
    @Test(.timeLimit(.minutes(1)))
    func refreshesBeforeExpiry() async throws {
        #expect(Kamailio.available, "kamailio must be installed in CI (scripts/test installs it)")
        let (pid, port, rundir) = try await Kamailio.start()
        defer { Kamailio.stop(pid) }
        let s = try session("udp", port: port, password: "alicepw", expires: 30)
        defer { s.close() }
        await s.start()
        #expect(await s.wait(timeout: .seconds(10)) { $0.isSettled } == .registered(expires: 30))
        // The refresh is due 25 s after the 200.
        let refreshed = await s.wait(timeout: .seconds(35)) { _ in s.history.filter { $0 == .registered(expires: 30) }.count >= 2 }
        #expect(refreshed == .registered(expires: 30))
        #expect(s.history == [.registering, .registered(expires: 30), .registered(expires: 30)])
        #expect(Kamailio.registeredUsers(rundir).contains("AoR: alice"))
        await s.stop()
        #expect(await s.wait(timeout: .seconds(10)) { $0 == .unregistered } == .unregistered)
    }

    @Test(.timeLimit(.minutes(1)))
    func wrongPasswordIsBadCredentials() async throws {
        #expect(Kamailio.available, "kamailio must be installed in CI (scripts/test installs it)")
        let (pid, port, _) = try await Kamailio.start()
        defer { Kamailio.stop(pid) }
        let s = try session("udp", port: port, password: "wrong")
        defer { s.close() }
        await s.start()
        let end = await s.wait(timeout: .seconds(10)) { $0.isSettled }
        #expect(end == .failed(.badCredentials))
    }
}
