import PacketCapture
import CaptureAnalysis
import SIPRules

/// The text and JSON of `switchboard capture FILE --check`: the findings of ``CaptureCheck``,
/// grouped per call, each with its frame, its time (UTC, ISO 8601, and seconds from the
/// capture's first frame), the party that broke the rule, the rule (RFC, section, id) and a
/// sentence.
enum CaptureCheckText {
    static func relative(_ t: CaptureTimestamp, _ origin: CaptureTimestamp?) -> String {
        CaptureAnalyzer.seconds(t.totalNanoseconds - (origin ?? t).totalNanoseconds, digits: 6)
    }

    static func render(_ a: CaptureAnalyzer, path: String, origin: CaptureTimestamp?) -> String {
        let flagged = a.calls.filter { !$0.findings.isEmpty }
        let total = flagged.reduce(0) { $0 + $1.findings.count }
        var out = "\(path): \(a.calls.count) call\(a.calls.count == 1 ? "" : "s") checked, "
            + "\(total) finding\(total == 1 ? "" : "s") in \(flagged.count) call\(flagged.count == 1 ? "" : "s")\n"
        for c in a.calls where !c.findings.isEmpty || c.uncheckedMessages > 0 {
            out += "\nCall-ID: \(c.callID.isEmpty ? "(none)" : c.callID)  (\(c.outcome))  \(c.from ?? "?") -> \(c.to ?? "?")\n"
            if c.uncheckedMessages > 0 {
                out += "  (only the first \(CaptureCheck.maximumMessages) messages checked; \(c.uncheckedMessages) more not)\n"
            }
            // Who broke what, then each finding in frame order.
            var parties: [CaptureEndpoint] = []
            for f in c.findings where !parties.contains(f.party) { parties.append(f.party) }
            for p in parties {
                var ids: [String] = []
                for f in c.findings where f.party == p && !ids.contains(f.rule.id) { ids.append(f.rule.id) }
                out += "  \(p): \(ids.joined(separator: ", "))\n"
            }
            for f in c.findings {
                out += "  frame \(f.frameNumber)  \(RTPStreamText.iso8601(f.time))  +\(relative(f.time, origin)) s  \(f.party)  \(f.rule.reference) [\(f.rule.id)]\n"
                // What only our machines found says which (the rules' findings read as before).
                let by = f.layers.contains(.rules) ? "" : "  (found by our \(f.layers.names.joined(separator: " and ")) machine)"
                out += "      \(f.detail)\(by)\n"
            }
        }
        out += stories(a.calls, origin: origin)
        return out
    }

    /// Transfers and forwards as one story: the calls tied by Replaces, a REFER's target or
    /// Referred-By, or a 3xx Contact (``CaptureCommand/linkedGroups(_:)``), their steps in time
    /// order, each after its call's number, with the findings of its frame.
    static func stories(_ calls: [CaptureAnalyzer.Call], origin: CaptureTimestamp?) -> String {
        var out = ""
        for group in CaptureCommand.linkedGroups(calls) where group.contains(where: { !$0.story.isEmpty }) {
            out += "\n" + (group.count == 1 ? "Story of call:" : "Story of \(group.count) linked calls:")
            for (n, c) in group.enumerated() { out += " [\(n + 1)] \(c.callID.isEmpty ? "(none)" : c.callID) (\(c.outcome))" }
            out += "\n"
            var steps: [(step: CaptureCheck.StoryStep, call: Int)] = []
            for (n, c) in group.enumerated() { steps += c.story.map { ($0, n) } }
            steps.sort { ($0.step.time, $0.step.frameNumber, $0.call) < ($1.step.time, $1.step.frameNumber, $1.call) }
            for (step, n) in steps {
                out += "  +\(relative(step.time, origin)) s  frame \(step.frameNumber)  [\(n + 1)] \(step.source) -> \(step.destination)  \(step.text)\n"
                for f in group[n].findings where f.frameNumber == step.frameNumber {
                    out += "      ⚠ \(f.party) broke \(f.rule.reference) [\(f.rule.id)]\n"
                }
            }
        }
        return out
    }

    static func findingJSON(_ f: CaptureCheck.Finding, origin: CaptureTimestamp?) -> JSONValue {
        .object([
            ("frame", .int(f.frameNumber)),
            ("time", .object([("utc", .string(RTPStreamText.iso8601(f.time))),
                              ("relative", .number(Double(f.time.totalNanoseconds - (origin ?? f.time).totalNanoseconds) / 1e9))])),
            ("party", .string(f.party.description)),
            ("rule", .object([("id", .string(f.rule.id)), ("reference", .string(f.rule.reference)), ("requirement", .string(f.rule.requirement))])),
            ("detail", .string(f.detail)),
            ("layers", .array(f.layers.names.map { .string($0) })),
        ])
    }

    static func json(_ a: CaptureAnalyzer, origin: CaptureTimestamp?) -> [(String, JSONValue)] {
        let flagged = a.calls.filter { !$0.findings.isEmpty || $0.uncheckedMessages > 0 }
        return [
            ("origin", origin.map { .string(RTPStreamText.iso8601($0)) } ?? .null),
            ("callsChecked", .int(a.calls.count)),
            ("findings", .int(a.calls.reduce(0) { $0 + $1.findings.count })),
            ("checks", .array(flagged.map { c in
                .object([("callID", .string(c.callID)), ("outcome", .string(c.outcome.key)),
                         ("from", c.from.map { .string($0) } ?? .null), ("to", c.to.map { .string($0) } ?? .null),
                         ("uncheckedMessages", .int(c.uncheckedMessages)),
                         ("findings", .array(c.findings.map { findingJSON($0, origin: origin) }))])
            })),
            ("stories", .array(CaptureCommand.linkedGroups(a.calls).filter { $0.contains { !$0.story.isEmpty } }.map { group in
                var steps: [(step: CaptureCheck.StoryStep, callID: String)] = []
                for c in group { steps += c.story.map { ($0, c.callID) } }
                steps.sort { ($0.step.time, $0.step.frameNumber) < ($1.step.time, $1.step.frameNumber) }
                return .object([
                    ("calls", .array(group.map { .string($0.callID) })),
                    ("steps", .array(steps.map { s in
                        .object([("callID", .string(s.callID)), ("frame", .int(s.step.frameNumber)),
                                 ("relative", .number(Double(s.step.time.totalNanoseconds - (origin ?? s.step.time).totalNanoseconds) / 1e9)),
                                 ("from", .string(s.step.source.description)), ("to", .string(s.step.destination.description)),
                                 ("text", .string(s.step.text))])
                    })),
                ])
            })),
        ]
    }
}
