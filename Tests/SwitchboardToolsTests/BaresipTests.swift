import Foundation
import Synchronization
import SwitchboardTestSupport
import Testing
import SIPMessage
import SIPAuth
import SIPDialog
import SIPRuntime
import SIPTransport
@testable import SwitchboardTools
import Switchboard
import NetworkIO

/// baresip 1.0 (installed by scripts/test), started by scripts/peers/baresip-start on
/// 127.0.0.1 and scripted through scripts/peers/baresip-ctl. Skipped with a message without
/// baresip, except under CI, where that fails.
enum Baresip {
    static var available: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/baresip") }

    struct Instance {
        var pid: Int32
        var sipPort: UInt16
        var ctrlPort: UInt16
        var rundir: String
    }

    static func start(options: String? = nil) async throws -> Instance {
        // baresip takes its SIP port on UDP and TCP, and the next one for TLS.
        let sip = try PeerPorts.free(count: 2)
        var ctrl = try PeerPorts.free()
        while ctrl == sip || ctrl == sip + 1 { ctrl = try PeerPorts.free() }
        let rundir = NSTemporaryDirectory() + "sb-baresip-\(UUID().uuidString)"
        try await run(TestPaths.repoRoot + "/scripts/peers/baresip-start", [String(sip), String(ctrl), rundir] + (options.map { [$0] } ?? []), timeout: .seconds(30))
        let text = (try? String(contentsOfFile: rundir + "/pid", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        guard let pid = Int32(text) else { throw ToolError("baresip did not start: \(log(rundir))") }
        return Instance(pid: pid, sipPort: sip, ctrlPort: ctrl, rundir: rundir)
    }

    static func stop(_ b: Instance) {
        let group = getpgid(b.pid)
        if group > 1 && group != getpgrp() { killpg(group, SIGKILL) } else { kill(b.pid, SIGKILL) }
        try? FileManager.default.removeItem(atPath: b.rundir)
    }

    static func log(_ rundir: String) -> String { (try? String(contentsOfFile: rundir + "/log", encoding: .utf8)) ?? "" }

    /// Sends ctrl_tcp commands; returns the JSON lines baresip sent back.
    @discardableResult
    static func ctl(_ b: Instance, _ commands: [String], wait: Double = 0.5) async throws -> String {
        let out = NSTemporaryDirectory() + "sb-bctl-\(UUID().uuidString).txt"
        defer { try? FileManager.default.removeItem(atPath: out) }
        try await run(TestPaths.repoRoot + "/scripts/peers/baresip-ctl", [String(b.ctrlPort)] + commands + ["--wait", String(wait)],
                      timeout: .seconds(20), output: out)
        return (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
    }

    /// Runs a tool with no pipes (output to a file), polling for its end, bounded.
    static func run(_ path: String, _ args: [String], timeout: Duration, output: String? = nil) async throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        let errors = NSTemporaryDirectory() + "sb-run-\(UUID().uuidString).err"
        _ = FileManager.default.createFile(atPath: errors, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: errors) }
        if let o = output {
            _ = FileManager.default.createFile(atPath: o, contents: nil)
            p.standardOutput = FileHandle(forWritingAtPath: o)
        } else {
            p.standardOutput = FileHandle.nullDevice
        }
        p.standardError = FileHandle(forWritingAtPath: errors)
        try p.run()
        let clock = ContinuousClock(), deadline = clock.now + timeout
        while p.isRunning && clock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let stderr = String((try? String(contentsOfFile: errors, encoding: .utf8))?.suffix(2000) ?? "")
        if p.isRunning { p.terminate(); throw ToolError("\(path) did not finish in \(timeout): \(stderr)") }
        guard p.terminationStatus == 0 else { throw ToolError("\(path) exited \(p.terminationStatus): \(stderr)") }
    }
}

@Suite("Calls with baresip", .enabled(if: Baresip.available || TestPaths.isCI, "baresip is not installed: baresip interop skipped"),
       .requires("baresip", { Baresip.available }))
struct BaresipTests {
    typealias Lines = ReportLines

    static func phone(_ lines: Lines, autoAnswer: Bool = true) throws -> Phone {
        let config = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]),
                                                identity: try SIPURI("sip:switchboard@127.0.0.1"), sessionTimer: nil)
        return try Phone(name: "sb", configuration: config, autoAnswer: autoAnswer ? .milliseconds(100) : nil, report: { lines.append($0) },
                         trace: { m, outgoing, _ in lines.append("\(outgoing ? "sent" : "got") \(LadderPrinter.label(m))") })
    }

    @Test("we call baresip, hold and resume it by re-INVITE, and hang up", .timeLimit(.minutes(1)))
    func callOutHoldResume() async throws {
        let b = try await Baresip.start()
        defer { Baresip.stop(b) }
        let lines = Lines()
        let phone = try Self.phone(lines)
        defer { phone.close() }
        let key = await phone.call(try SIPURI("sip:b@127.0.0.1:\(b.sipPort)"))
        try #require(await phone.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)\n\(Baresip.log(b.rundir))")
        #expect(lines.count("sb: peer answers sendrecv") > 0)
        try await phone.hold(key, true)
        try #require(await phone.wait(timeout: .seconds(10)) { lines.count("sb: peer answers recvonly") > 0 }, "\(lines.all)")
        try await phone.hold(key, false)
        try #require(await phone.wait(timeout: .seconds(10)) { lines.count("sb: peer answers sendrecv") == 2 }, "\(lines.all)")
        let stat = try await Baresip.ctl(b, ["callstat"])
        #expect(stat.contains("sip:switchboard@127.0.0.1"))
        try await phone.agent.perform(key) { s throws(SessionError) in try s.bye() }
        #expect(await phone.wait(key, timeout: .seconds(10)) { $0 == .terminated(.localHangup) })
        #expect(try await Baresip.ctl(b, ["callstat"]).contains("no active calls"))
    }

    @Test("baresip calls us, holds and resumes, and hangs up", .timeLimit(.minutes(1)))
    func callInHoldResume() async throws {
        let b = try await Baresip.start()
        defer { Baresip.stop(b) }
        let lines = Lines()
        let phone = try Self.phone(lines)
        defer { phone.close() }
        let port = phone.agent.endpoint.localAddresses[0].address.port
        try await Baresip.ctl(b, ["dial sip:switchboard@127.0.0.1:\(port)"])
        try #require(await phone.wait(timeout: .seconds(10)) { !phone.incomingCalls.isEmpty })
        let key = phone.incomingCalls[0]
        try #require(await phone.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)")
        try await Baresip.ctl(b, ["hold"])
        try #require(await phone.wait(timeout: .seconds(10)) { lines.all.contains { $0.hasPrefix("sb: peer offers sendonly") || $0.hasPrefix("sb: peer offers inactive") } }, "\(lines.all)")
        try await Baresip.ctl(b, ["resume"])
        try #require(await phone.wait(timeout: .seconds(10)) { lines.all.contains { $0.hasPrefix("sb: peer offers sendrecv") } }, "\(lines.all)")
        try await Baresip.ctl(b, ["hangup"])
        #expect(await phone.wait(key, timeout: .seconds(10)) { $0 == .terminated(.remoteHangup) }, "\(lines.all)")
    }

    @Test("we call baresip and hang up from its side; we cancel a call it lets ring", .timeLimit(.minutes(1)))
    func byeFromBaresipAndCancel() async throws {
        let b = try await Baresip.start()
        defer { Baresip.stop(b) }
        let lines = Lines()
        let phone = try Self.phone(lines)
        defer { phone.close() }
        let key = await phone.call(try SIPURI("sip:b@127.0.0.1:\(b.sipPort)"))
        try #require(await phone.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)")
        try await Baresip.ctl(b, ["hangup"])
        #expect(await phone.wait(key, timeout: .seconds(10)) { $0 == .terminated(.remoteHangup) }, "\(lines.all)")

        let ringing = try await Baresip.start(options: "answermode=manual;audio_codecs=pcmu,pcma")
        defer { Baresip.stop(ringing) }
        let k2 = await phone.call(try SIPURI("sip:b@127.0.0.1:\(ringing.sipPort)"))
        try #require(await phone.wait(k2, timeout: .seconds(10)) { if case .proceeding = $0 { return true } else { return false } }, "\(lines.all)")
        try await phone.agent.perform(k2) { s throws(SessionError) in try s.cancel() }
        #expect(await phone.wait(k2, timeout: .seconds(10)) { $0 == .terminated(.cancelled) }, "\(lines.all)")
        #expect(lines.contains("got 487 INVITE"))
        #expect(try await Baresip.ctl(ringing, ["callstat"]).contains("no active calls"))
    }
}
