import Foundation
import CaptureAnalysis
import NetworkIO
import PacketCapture

extension ConformanceReport {
    /// A self-contained HTML page: every test's verdict, the findings of each test that did not
    /// pass (rule, RFC section, message index) and the capture module's ladder of their
    /// messages (click an arrow for the message). Tests run one after another, so each test's
    /// ladder starts where the previous one ended.
    public var html: String {
        let notPassed = results.filter { $0.verdict != .pass }
        var encoder = PcapngEncoder()
        var bytes = encoder.header()
        var base = 0.0
        var callIDs: [String: [String]] = [:]
        for r in notPassed {
            guard let runner = try? SocketAddress(r.runnerAddress), let dut = try? SocketAddress(r.dutAddress) else { continue }
            for m in r.messages {
                let (from, to) = m.direction == .sent ? (runner, dut) : (dut, runner)
                let t = base + m.time
                let time = CaptureTimestamp(seconds: Int64(t), nanoseconds: Int64((t - Double(Int64(t))) * 1e9))
                if let packet = encoder.udp(from: CaptureEndpoint(address: from.ip, port: from.port), to: CaptureEndpoint(address: to.ip, port: to.port),
                                            payload: Array(m.text.utf8), time: time) {
                    bytes += packet
                }
                if let id = Self.callID(m.text), !(callIDs[r.name] ?? []).contains(id) { callIDs[r.name, default: []].append(id) }
            }
            base += r.duration + 1
        }
        var analyzer = CaptureAnalyzer(ladder: .all, keepMessages: true)
        if let reader = try? SIPCaptureReader(bytes: bytes) {
            while let event = try? reader.next() {
                if case .message(let captured) = event { analyzer.add(captured) }
            }
        }
        analyzer.finish()
        let e = HTMLLadder.escape
        var pre = "<p>\(e(summaryLines.joined(separator: " ")))</p>\n<table>\n"
        pre += "<tr><th align=left>test</th><th align=left>ETSI purpose</th><th align=left>RFC</th><th align=left>verdict</th></tr>\n"
        for r in results {
            let colour = r.verdict == .pass ? "#2a6a2a" : r.verdict == .fail ? "#b22" : "#a60"
            pre += "<tr><td>\(e(r.name))</td><td>\(e(r.etsiPurpose ?? "—"))</td><td>\(e(r.reference))</td>"
                + "<td style=\"color:\(colour)\"><b>\(r.verdict.rawValue)</b></td></tr>\n"
        }
        pre += "</table>\n"
        for r in notPassed {
            pre += "<h2>\(e(r.name)): \(r.verdict.rawValue)</h2>\n"
            if let reason = r.reason { pre += "<p>\(e(reason))</p>\n" }
            if !r.findings.isEmpty {
                pre += "<ul>\n" + r.findings.map { "<li>\(e($0.description))</li>\n" }.joined() + "</ul>\n"
            }
            pre += "<p>Messages (index: direction, start line); the ladder below is under Call-ID \(e((callIDs[r.name] ?? []).joined(separator: ", "))).</p>\n<pre>"
            pre += r.messages.enumerated().map { i, m in
                e("#\(i) \(String(format: "%+.3f", m.time)) s \(m.direction == .sent ? "runner → DUT" : "DUT → runner")  \(m.summary)")
            }.joined(separator: "\n")
            pre += "</pre>\n"
        }
        return HTMLLadder.render(analyzer.calls, title: "conform \(suite) against \(target)", preamble: pre)
    }

    static func callID(_ text: String) -> String? {
        for line in text.split(separator: "\r\n") {
            let lower = line.lowercased()
            if lower.hasPrefix("call-id:") || lower.hasPrefix("i:") {
                return line.split(separator: ":", maxSplits: 1).last.map { $0.trimmingPrefix(while: { $0 == " " }) }.map(String.init)
            }
            if line.isEmpty { break }
        }
        return nil
    }
}
