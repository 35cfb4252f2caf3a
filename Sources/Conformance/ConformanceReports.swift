import Foundation
import CaptureAnalysis

/// The text, JUnit XML and JSON forms of a conformance report.
extension ConformanceReport {
    /// The progress line printed when a test finishes: `[3/10] PASS  SIP_CC_TE_CE_V_001 (basic-call)`.
    public static func progressLine(_ index: Int, _ count: Int, _ r: ConformanceTestResult) -> String {
        let verdict = switch r.verdict { case .pass: "PASS"; case .fail: "FAIL"; case .inconclusive: "INCONCLUSIVE" }
        var line = "[\(index)/\(count)] \(verdict.padding(toLength: 12, withPad: " ", startingAt: 0)) \(r.etsiPurpose.map { "\($0) (\(r.name))" } ?? r.name)"
        line += String(format: "  %.2fs", r.duration)
        if let reason = r.reason { line += "\n      \(reason)" }
        for f in r.findings { line += "\n      rule \(f)" }
        return line
    }

    /// The closing summary lines.
    public var summaryLines: [String] {
        ["suite \(suite) against \(target) over \(transport.rawValue): \(results.count) tests, \(count(.pass)) passed, "
            + "\(count(.fail)) failed, \(count(.inconclusive)) inconclusive"]
    }

    /// JUnit XML (one testsuite; a failure per failing test with its findings; inconclusive
    /// tests are reported as skipped with their reason).
    public var junitXML: String {
        func esc(_ s: String) -> String {
            s.replacingScalars { ch in
                switch ch {
                case "&": return "&amp;"
                case "<": return "&lt;"
                case ">": return "&gt;"
                case "\"": return "&quot;"
                case "\r": return "&#13;"
                case "\n", "\t": return nil
                default: return ch.value < 0x20 ? "?" : nil
                }
            }
        }
        let total = results.reduce(0) { $0 + $1.duration }
        var x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        x += "<testsuites>\n<testsuite name=\"\(esc("conform.\(suite)"))\" tests=\"\(results.count)\" failures=\"\(count(.fail))\" errors=\"0\" "
        x += "skipped=\"\(count(.inconclusive))\" time=\"\(String(format: "%.3f", total))\">\n"
        x += "  <properties><property name=\"target\" value=\"\(esc(target))\"/><property name=\"transport\" value=\"\(transport.rawValue)\"/></properties>\n"
        for r in results {
            let name = r.etsiPurpose.map { "\($0) (\(r.name))" } ?? r.name
            x += "  <testcase classname=\"\(esc("conform.\(suite)"))\" name=\"\(esc(name))\" time=\"\(String(format: "%.3f", r.duration))\">\n"
            let ladder = r.messages.enumerated().map { i, m in
                String(format: "#%d %+.3fs %@ %@", i, m.time, m.direction == .sent ? "→" : "←", m.summary)
            }.joined(separator: "\n")
            switch r.verdict {
            case .pass: break
            case .inconclusive: x += "    <skipped message=\"\(esc(r.reason ?? "inconclusive"))\"/>\n"
            case .fail:
                let body = (r.findings.map { "rule \($0)" } + ["", ladder]).joined(separator: "\n")
                x += "    <failure message=\"\(esc(r.reason ?? "failed"))\">\(esc(body))</failure>\n"
            }
            x += "    <system-out>\(esc(ladder))</system-out>\n  </testcase>\n"
        }
        x += "</testsuite>\n</testsuites>\n"
        return x
    }

    /// The report as JSON (every result with its findings and messages).
    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        guard let data = try? encoder.encode(self) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}

extension ConformanceTestCase {
    /// The `--list` line of a test.
    public var listLine: String {
        // Padded to a column, never cut (a long name pushes the rest of its line right).
        var s = "  \(name.count >= 22 ? name : name.padding(toLength: 22, withPad: " ", startingAt: 0)) \(etsiPurpose ?? "(no ETSI id)")  \(reference)\n      \(summary)"
        if let note = purposeNote { s += "\n      note: \(note)" }
        return s
    }
}
