import Foundation
import Testing
import PacketCapture
import SwitchboardTestSupport
@testable import SwitchboardTools

/// A capture the project makes itself: a bounded SIPp run (2,000 calls at 500/s, uac against uas on
/// 127.0.0.1) recorded on lo by tshark, through `scripts/sipp-capture` (the helper that makes the
/// benchmark's capture). Needs sipp and tshark (installed by scripts/test) and the right to
/// capture on lo; skipped without them, except under CI.
@Suite("switchboard capture: a SIPp run", .serialized,
       .enabled(if: (FileManager.default.isExecutableFile(atPath: "/usr/bin/sipp") && Tshark.available) || TestPaths.isCI,
                "sipp or tshark is not installed: SIPp capture test skipped"),
       .requires("sipp and tshark", { FileManager.default.isExecutableFile(atPath: "/usr/bin/sipp") && Tshark.available }))
struct CaptureSIPpRunTests {
    static let calls = 2000

    @Test func reportsEveryCallSIPpMadeAndTsharksMessageCounts() async throws {
        #expect(FileManager.default.isExecutableFile(atPath: "/usr/bin/sipp"), "sipp must be installed under CI (scripts/test installs it)")
        let tshark = try #require(Tshark.path, "tshark must be installed under CI (scripts/test installs it)")
        let file = NSTemporaryDirectory() + "sipp-run-\(getpid()).pcapng"
        defer { unlink(file) }
        let made = await ExternalTool.run("/bin/bash", [TestPaths.repoRoot + "/scripts/sipp-capture", file, "\(Self.calls)", "500", "20"],
                                          timeout: 50, mergeErrors: true)
        try #require(made.ok, "scripts/sipp-capture failed: \(made.output)")

        // The calls, as `capture --calls --json` reports them.
        let report = CaptureCommand.run(path: file, view: .calls)
        #expect(report.error == nil)
        let json = try CaptureCorpus.jsonObject(report.json)
        let calls = try #require(json["calls"] as? [[String: Any]])
        #expect(calls.count == Self.calls)
        // SIPp's Call-IDs are "<call number>-<pid>@<address>": exactly calls 1…2000.
        let numbers = Set(calls.compactMap { ($0["callID"] as? String)?.split(separator: "-").first.flatMap { Int($0) } })
        #expect(numbers == Set(1...Self.calls))
        #expect(calls.allSatisfy { $0["outcome"] as? String == "answered" })
        // INVITE, 180, 200, ACK, BYE, 200 (and any retransmission SIPp had to make under load).
        #expect(calls.allSatisfy { ($0["messages"] as? Int ?? 0) >= 6 })
        #expect(calls.allSatisfy { ($0["dialogs"] as? [[String: Any]])?.map { $0["state"] as? String } == ["terminated"] })

        // The totals, as `capture --json` reports them, against tshark's sip,stat.
        let summary = CaptureCommand.run(path: file, view: .summary)
        let s = try #require(try CaptureCorpus.jsonObject(summary.json)["summary"] as? [String: Any])
        let stat = await ExternalTool.run(tshark, ["-r", file, "-q", "-z", "sip,stat"], timeout: 60)
        #expect(stat.ok)
        var tsharkMethods: [String: Int] = [:], tsharkCodes: [String: Int] = [:], tsharkTotal = -1
        for line in stat.output.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line.hasPrefix("Number of SIP messages:") { tsharkTotal = Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) ?? -1 }
            guard line.hasSuffix("Packets"), let colon = line.lastIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces)
            let count = Int(line[line.index(after: colon)...].split(separator: " ")[0]) ?? -1
            if name.hasPrefix("SIP ") { tsharkCodes[String(name.split(separator: " ")[1])] = count } else { tsharkMethods[name] = count }
        }
        #expect(tsharkTotal >= Self.calls * 6)
        #expect(s["messages"] as? Int == tsharkTotal)
        #expect(s["requestsByMethod"] as? [String: Int] == tsharkMethods)
        #expect(s["responsesByCode"] as? [String: Int] == tsharkCodes)
        #expect(Set(tsharkMethods.keys) == ["INVITE", "ACK", "BYE"] && Set(tsharkCodes.keys) == ["180", "200"])
        #expect((s["callsByOutcome"] as? [String: Int])?["answered"] == Self.calls)
        // The summary path (digests scanned in place) and the --calls path (parsed messages)
        // count the same over these 12,000 messages.
        #expect(summary.analysis.summary == report.analysis.summary)
    }
}
