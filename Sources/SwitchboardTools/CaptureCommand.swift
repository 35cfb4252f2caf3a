import SIPMessage
import SDP
import PacketCapture
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CaptureAnalysis

/// `switchboard capture FILE`: a capture's SIP summary, its calls, or ladder diagrams.
public enum CaptureCommand {
    /// What to show.
    public enum View: Sendable, Hashable {
        /// Totals by method and status code, and calls by outcome.
        case summary
        /// One line per call.
        case calls
        /// A ladder diagram of the call with this Call-ID, or of every call when `nil`.
        case ladder(String?)
        /// The ladder as a self-contained HTML page (``HTMLLadder``) of one call or of every
        /// call; the arrows keep their messages, and the findings of the rule check
        /// (``CaptureCheck``) are marked on them and listed under each ladder, followed by each
        /// RTP stream's plots (jitter, loss and level over time).
        case html(String?)
        /// Every call replayed through the rules (``CaptureCheck``): the findings, per call.
        case check
        /// The RTP streams, as `tshark -z rtp,streams` lists them, with MOS, RTCP, DTMF,
        /// silent streams and one-way calls.
        case rtp
        /// The RTP streams, and their audio written as WAV files into this directory (each
        /// stream, and each call as a stereo file).
        case audio(String)
    }

    /// The analysis and its rendering.
    public struct Report: Sendable {
        /// The capture's path.
        public var path: String
        /// The view rendered.
        public var view: View
        /// The analysis of every message read before the end or the error.
        public var analysis: CaptureAnalyzer
        /// The error that stopped reading (the file could not be opened, or is corrupt).
        public var error: CaptureFileError?
        /// The first frame's time (relative times count from it, as in tshark).
        public var firstFrame: CaptureTimestamp?
        /// The WAV files written for ``View/audio(_:)``, or why one could not be.
        public var audioFiles: [RTPAudioExport.Output] = []
        /// 0 when the file was read to its end (and the asked-for call exists), 65 on a file
        /// error, 1 when `--ladder CALL-ID` names no call or ``View/check`` found a broken rule.
        public var exitCode: Int32 {
            if error != nil { return 65 }
            if audioFiles.contains(where: { $0.error != nil }) { return 73 }
            switch view {
            case .ladder(let id?), .html(let id?):
                if !analysis.calls.contains(where: { $0.callID == id }) { return 1 }
            case .check:
                if analysis.calls.contains(where: { !$0.findings.isEmpty }) { return 1 }
            default: break
            }
            return 0
        }
        /// The view as text.
        public var text: String { CaptureCommand.text(self) }
        /// The view as JSON.
        public var json: String { CaptureCommand.json(self).rendered() + "\n" }
        /// The ladder as a self-contained HTML page (for ``View/html(_:)``; for other views, of
        /// the calls that kept arrows).
        public var html: String {
            var id: String?
            if case .html(let x) = view { id = x }
            let streams = (analysis.rtp?.streams ?? []).filter { id == nil || $0.callID == id }
            return HTMLLadder.render(analysis.calls.filter { id == nil || $0.callID == id }, title: path, streams: streams)
        }
    }

    /// Reads the capture at `path` and analyzes it for `view`. `progress`, when given, is
    /// called about every 10 000 messages with the number read so far. `srtp`: how SRTP streams
    /// are decrypted for ``View/rtp`` and ``View/audio(_:)`` (the capture's SDP keys by default).
    public static func run(path: String, view: View, srtp: SRTPCaptureOptions = SRTPCaptureOptions(), progress: ((Int) -> Void)? = nil) -> Report {
        let ladder: CaptureAnalyzer.LadderSelection
        let keep: Bool
        var rtp = false, payloads = false
        switch view {
        case .summary: ladder = .none; keep = false
        case .calls, .check: ladder = .none; keep = true
        case .ladder(let id): ladder = id.map { .call($0) } ?? .all; keep = false
        case .html(let id): ladder = id.map { .call($0) } ?? .all; keep = false; rtp = true
        case .rtp: ladder = .none; keep = true; rtp = true
        case .audio: ladder = .none; keep = true; rtp = true; payloads = true
        }
        var isHTML = false, check = view == .check
        if case .html = view { isHTML = true; check = true }
        var analysis = CaptureAnalyzer(keepCalls: keep, ladder: ladder, keepMessages: isHTML, rtp: rtp, rtpPayloads: payloads, srtp: srtp, check: check,
                                       rtpTimelines: isHTML)
        var report = Report(path: path, view: view, analysis: analysis, error: nil)
        let reader: SIPCaptureReader
        do {
            // The summary needs only what a digest holds: the datagrams are scanned in place.
            reader = try SIPCaptureReader(path: path, digests: view == .summary, datagrams: view == .calls || rtp, payloads: rtp)
        } catch {
            report.error = error
            analysis.finish()
            report.analysis = analysis
            return report
        }
        // The analysis is passed inout, not captured by a closure: a captured var is boxed and
        // every access to it checked for exclusivity at run time, once per packet.
        do throws(CaptureFileError) {
            var events: [CaptureEvent] = []
            // RTP datagrams come in place, without an event (the reader's fast path).
            while try reader.nextEvents(into: &events, rtp: { analysis.add($0) }) {
                for e in events { take(e, into: &analysis, progress: progress) }
            }
        } catch {
            report.error = error
            var decoder = reader.decoder
            for e in decoder.finish() { take(e, into: &analysis, progress: progress) }
        }
        analysis.finish()
        report.firstFrame = reader.counters.firstFrameTime
        report.analysis = analysis
        if case .audio(let dir) = view, let r = analysis.rtp {
            report.audioFiles = RTPAudioExport.write(r, directory: dir)
        }
        return report
    }

    /// The SRTP options of `--srtp-key` (each `SUITE:INLINE-KEY[@HOST:PORT]`) and
    /// `--srtp-ignore-sdp`; throws for a key that does not parse or that the suite refuses.
    public static func srtpOptions(keys: [String], ignoreSDP: Bool) throws(SRTPCaptureKey.ParseError) -> SRTPCaptureOptions {
        var list: [SRTPCaptureKey] = []
        for text in keys {
            let key = try SRTPCaptureKey(parsing: text)
            if let problem = key.problem { throw SRTPCaptureKey.ParseError(argument: text, reason: problem) }
            list.append(key)
        }
        return SRTPCaptureOptions(keys: list, useSDPKeys: !ignoreSDP)
    }

    /// One event into the analysis.
    @inline(__always)
    static func take(_ e: CaptureEvent, into analysis: inout CaptureAnalyzer, progress: ((Int) -> Void)?) {
        switch e {
        case .message(let m):
            analysis.add(m)
            if let progress, analysis.summary.messages % 10_000 == 0 { progress(analysis.summary.messages) }
        case .digest(let d):
            analysis.add(d)
            if let progress, analysis.summary.messages % 10_000 == 0 { progress(analysis.summary.messages) }
        case .datagram(let d): analysis.add(d)
        case .anomaly: analysis.noteAnomaly()
        }
    }

    /// A progress reporter for ``run(path:view:progress:)`` that rewrites one line on stderr
    /// (end it with ``endProgress()``): when `force` is set, or when stderr is a terminal and the
    /// capture is over 50 MB; `nil` otherwise.
    public static func stderrProgress(path: String, force: Bool = false) -> ((Int) -> Void)? {
        if !force {
            var st = stat()
            guard isatty(2) == 1, stat(path, &st) == 0, Int64(st.st_size) > 50 << 20 else { return nil }
        }
        return { n in writeStderr("\r\(path): \(n) SIP messages read") }
    }

    /// Ends the progress line started by ``stderrProgress(path:)``.
    public static func endProgress() { writeStderr("\n") }

    static func writeStderr(_ s: String) {
        let bytes = Array(s.utf8)
        _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }

    // MARK: Text

    /// Nanoseconds as seconds with `digits` decimals (rounded).
    static func seconds(_ ns: Int64, digits: Int = 3) -> String { CaptureAnalyzer.seconds(ns, digits: digits) }

    static func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
    static func padLeft(_ s: String, _ n: Int) -> String { s.count >= n ? s : String(repeating: " ", count: n - s.count) + s }

    static func sortedOutcomes(_ d: [CaptureAnalyzer.Outcome: Int]) -> [(CaptureAnalyzer.Outcome, Int)] {
        d.sorted { $0.key.sortKey < $1.key.sortKey }.map { ($0.key, $0.value) }
    }

    static func text(_ r: Report) -> String {
        var out = ""
        if r.error == nil || r.analysis.summary.messages > 0 {
            switch r.view {
            case .summary: out = summaryText(r.analysis.summary, path: r.path)
            case .calls: out = r.analysis.calls.map { callLine($0, origin: r.analysis.summary.first) }.joined()
            case .ladder(let id):
                let calls = r.analysis.calls.filter { id == nil || $0.callID == id }
                out = (id == nil ? linkedGroups(calls).map(ladderText) : calls.map(ladderText)).joined(separator: "\n")
                if let id, calls.isEmpty, r.error == nil { out = "no call with Call-ID \(id)\n" }
            case .html(let id):
                let calls = r.analysis.calls.filter { id == nil || $0.callID == id }
                out = "ladder of \(calls.count) call\(calls.count == 1 ? "" : "s"), \(calls.reduce(0) { $0 + $1.arrows.count }) arrows\n"
                if let id, calls.isEmpty, r.error == nil { out = "no call with Call-ID \(id)\n" }
            case .check: out = CaptureCheckText.render(r.analysis, path: r.path, origin: r.firstFrame)
            case .rtp, .audio:
                if let rtp = r.analysis.rtp { out = RTPStreamText.render(rtp, origin: r.firstFrame) }
                for f in r.audioFiles {
                    out += f.error.map { "\(f.path): cannot write: \($0)\n" } ?? "wrote \(f.path) (\(f.description))\n"
                }
            }
        }
        if let e = r.error { out += "\(r.path): \(e)\n" }
        return out
    }

    static func summaryText(_ s: CaptureAnalyzer.Summary, path: String) -> String {
        var out = "\(path): \(s.messages) SIP messages (\(s.requests) requests, \(s.responses) responses), "
            + "\(s.retransmissions) retransmissions, \(s.anomalies) capture anomalies\n"
        if let a = s.first, let b = s.last {
            out += "time: \(a) to \(b) (\(seconds(b.totalNanoseconds - a.totalNanoseconds)) s)\n"
        }
        out += "\nSIP requests by method\n"
        for (m, n) in s.requestsByMethod.sorted(by: { $0.key < $1.key }) { out += "  \(pad(m, 24)) \(padLeft("\(n)", 6))\n" }
        out += "SIP responses by status code\n"
        for (c, n) in s.responsesByCode.sorted(by: { $0.key < $1.key }) {
            let phrase = s.reasonPhrases[c].map { $0.isEmpty ? "" : " " + $0 } ?? ""
            out += "  \(pad("\(c)\(phrase)", 24)) \(padLeft("\(n)", 6))\n"
        }
        out += "\nCalls: \(s.calls)\n"
        for (o, n) in sortedOutcomes(s.callsByOutcome) where o != .noInvite { out += "  \(pad(o.description, 24)) \(padLeft("\(n)", 6))\n" }
        out += "Other Call-IDs (no INVITE): \(s.callsByOutcome[.noInvite] ?? 0)\n"
        return out
    }

    static func callLine(_ c: CaptureAnalyzer.Call, origin: CaptureTimestamp?) -> String {
        let start = origin.map { seconds(c.first.totalNanoseconds - $0.totalNanoseconds) } ?? "\(c.first)"
        var parts = [padLeft(start, 10), c.callID.isEmpty ? "(no Call-ID)" : c.callID, "\(c.from ?? "?") -> \(c.to ?? "?")", c.outcome.description]
        if let s = c.setupTime { parts.append("setup=\(seconds(s, digits: 6))s") }
        if let a = c.answerTime { parts.append("answer=\(seconds(a, digits: 6))s") }
        if let d = c.duration { parts.append("duration=\(seconds(d, digits: 6))s") }
        parts.append("msgs=\(c.messageCount)")
        if c.retransmissions > 0 { parts.append("rtx=\(c.retransmissions)") }
        var addresses: [String] = []
        for r in c.rtp {
            let a = "\(r.address.contains(":") ? "[\(r.address)]" : r.address):\(r.port)"
            if !addresses.contains(a) { addresses.append(a) }
        }
        if !addresses.isEmpty { parts.append("rtp=" + addresses.joined(separator: ",")) }
        if !c.media.isEmpty { parts.append("media=" + c.media.map(\.description).joined(separator: "; ")) }
        if !c.dialogs.isEmpty { parts.append("dialogs=" + c.dialogs.map(\.description).joined(separator: "; ")) }
        if !c.linked.isEmpty { parts.append("linked=" + c.linked.joined(separator: ",")) }
        return parts.joined(separator: "  ") + "\n"
    }

    /// A terminal ladder diagram: one column per host (IP:port, in order of appearance), time
    /// downwards, one arrow per message with its time relative to the call's first message.
    static func ladderText(_ c: CaptureAnalyzer.Call) -> String {
        var out = "Call-ID: \(c.callID.isEmpty ? "(none)" : c.callID)  (\(c.outcome))"
        for d in c.dialogs { out += "  dialog \(d)" }
        return out + "\n" + ladderBody(c.arrows, origin: c.first)
    }

    /// The calls in groups tied by ``CaptureAnalyzer/Call/linked`` (a transfer's or a
    /// forwarding's calls), each group in the order of its first call, groups in the order of
    /// their first call.
    static func linkedGroups(_ calls: [CaptureAnalyzer.Call]) -> [[CaptureAnalyzer.Call]] {
        var group = Array(calls.indices)
        func root(_ i: Int) -> Int { var i = i; while group[i] != i { i = group[i] }; return i }
        var index: [String: Int] = [:]
        for (i, c) in calls.enumerated() where index[c.callID] == nil { index[c.callID] = i }
        for (i, c) in calls.enumerated() {
            for other in c.linked {
                guard let j = index[other] else { continue }
                let (a, b) = (root(i), root(j))
                if a != b { group[max(a, b)] = min(a, b) }
            }
        }
        var groups: [Int: [CaptureAnalyzer.Call]] = [:], order: [Int] = []
        for (i, c) in calls.enumerated() {
            let r = root(i)
            if groups[r] == nil { order.append(r) }
            groups[r, default: []].append(c)
        }
        return order.map { groups[$0]! }
    }

    /// One call's ladder, or the calls of a transfer or forwarding drawn together (their hosts
    /// as columns, every message in time order from the group's first, each label after its
    /// call's number), so that the order of messages across the calls shows.
    static func ladderText(_ group: [CaptureAnalyzer.Call]) -> String {
        guard group.count > 1 else { return group.first.map(ladderText) ?? "" }
        var out = "\(group.count) linked calls drawn together ([n] before a label: the call):\n"
        var arrows: [(arrow: CaptureAnalyzer.Arrow, call: Int, index: Int)] = []
        for (n, c) in group.enumerated() {
            out += "[\(n + 1)] Call-ID: \(c.callID.isEmpty ? "(none)" : c.callID)  (\(c.outcome))"
            for d in c.dialogs { out += "  dialog \(d)" }
            out += "\n"
            arrows += c.arrows.enumerated().map { ($1, n + 1, $0) }
        }
        // In capture order; messages of one frame (TCP) keep their call's order.
        arrows.sort { ($0.arrow.time, $0.arrow.frameNumber, $0.call, $0.index) < ($1.arrow.time, $1.arrow.frameNumber, $1.call, $1.index) }
        let labelled = arrows.map { a -> CaptureAnalyzer.Arrow in
            var x = a.arrow
            x.label = "[\(a.call)] " + x.label
            return x
        }
        return out + ladderBody(labelled, origin: group.map(\.first).min()!)
    }

    /// The columns and arrows of a ladder, times relative to `origin`.
    static func ladderBody(_ arrows: [CaptureAnalyzer.Arrow], origin: CaptureTimestamp) -> String {
        var hosts: [CaptureEndpoint] = []
        for a in arrows {
            if !hosts.contains(a.source) { hosts.append(a.source) }
            if !hosts.contains(a.destination) { hosts.append(a.destination) }
        }
        let names = hosts.map(\.description)
        let widest = max(arrows.map(\.label.count).max() ?? 0, names.map(\.count).max() ?? 0)
        let gap = max(widest + 6, 16)
        let margin = 12
        let width = margin + gap * max(hosts.count, 1)
        func center(_ i: Int) -> Int { margin + gap / 2 + i * gap }
        var out = ""
        var header = [Character](repeating: " ", count: width)
        for (i, n) in names.enumerated() {
            let start = max(0, center(i) - n.count / 2)
            for (k, ch) in n.enumerated() where start + k < width { header[start + k] = ch }
        }
        out += String(header).trimmingTrailingSpaces() + "\n"
        func blank() -> [Character] {
            var l = [Character](repeating: " ", count: width)
            for i in hosts.indices { l[center(i)] = "│" }
            return l
        }
        out += String(blank()).trimmingTrailingSpaces() + "\n"
        for a in arrows {
            var l = blank()
            let time = padLeft(seconds(a.time.totalNanoseconds - origin.totalNanoseconds, digits: 6), margin - 2)
            for (k, ch) in time.enumerated() where k < margin { l[k] = ch }
            let s = hosts.firstIndex(of: a.source)!, d = hosts.firstIndex(of: a.destination)!
            if s == d {
                let text = "↺ " + a.label
                for (k, ch) in text.enumerated() where center(s) + 2 + k < width { l[center(s) + 2 + k] = ch }
            } else {
                let lo = center(min(s, d)), hi = center(max(s, d))
                for x in (lo + 1)..<hi { l[x] = "─" }
                if s < d { l[hi - 1] = ">" } else { l[lo + 1] = "<" }
                let start = lo + 1 + (hi - lo - 1 - a.label.count) / 2
                for (k, ch) in a.label.enumerated() { l[start + k] = ch }
            }
            out += String(l).trimmingTrailingSpaces() + "\n"
        }
        return out
    }

    // MARK: JSON

    static func json(_ r: Report) -> JSONValue {
        var o: [(String, JSONValue)] = [("file", .string(r.path))]
        switch r.view {
        case .summary: o.append(("summary", summaryJSON(r.analysis.summary)))
        case .calls: o.append(("calls", .array(r.analysis.calls.map(callJSON))))
        case .check: o += CaptureCheckText.json(r.analysis, origin: r.firstFrame)
        case .ladder(let id), .html(let id):
            let calls = r.analysis.calls.filter { id == nil || $0.callID == id }
            o.append(("ladders", .array(calls.map(ladderJSON))))
        case .rtp, .audio:
            if let rtp = r.analysis.rtp { o += RTPStreamText.json(rtp, origin: r.firstFrame) }
            if case .audio = r.view {
                o.append(("audio", .array(r.audioFiles.map {
                    .object([("path", .string($0.path)), ("kind", .string($0.kind)), ("streams", .array($0.streams.map { .int($0) })),
                             ("sampleRate", .int($0.sampleRate)), ("channels", .int($0.channels)), ("seconds", .number($0.seconds)),
                             ("error", $0.error.map { .string($0) } ?? .null)])
                })))
            }
        }
        if let e = r.error {
            o.append(("error", .object([("offset", .int(Int(e.offset))), ("record", .int(e.record)),
                                        ("rule", .string(e.rule.rawValue)), ("detail", .string(e.detail))])))
        } else {
            o.append(("error", .null))
        }
        return .object(o)
    }

    static func secondsJSON(_ ns: Int64?) -> JSONValue { ns.map { .number(Double($0) / 1e9) } ?? .null }
    static func timeJSON(_ t: CaptureTimestamp?) -> JSONValue {
        t.map { .number(Double($0.seconds) + Double($0.nanoseconds) / 1e9) } ?? .null
    }

    static func summaryJSON(_ s: CaptureAnalyzer.Summary) -> JSONValue {
        var outcomes: [(String, JSONValue)] = []
        var rejected: [(String, JSONValue)] = []
        for key in ["answered", "rejected", "cancelled", "noAnswer", "noInvite"] {
            outcomes.append((key, .int(s.callsByOutcome.filter { $0.key.key == key }.reduce(0) { $0 + $1.value })))
        }
        for (o, n) in sortedOutcomes(s.callsByOutcome) { if let c = o.code { rejected.append(("\(c)", .int(n))) } }
        return .object([
            ("messages", .int(s.messages)), ("requests", .int(s.requests)), ("responses", .int(s.responses)),
            ("retransmissions", .int(s.retransmissions)), ("anomalies", .int(s.anomalies)),
            ("first", timeJSON(s.first)), ("last", timeJSON(s.last)),
            ("requestsByMethod", .object(s.requestsByMethod.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })),
            ("responsesByCode", .object(s.responsesByCode.sorted { $0.key < $1.key }.map { ("\($0.key)", .int($0.value)) })),
            ("calls", .int(s.calls)),
            ("callsByOutcome", .object(outcomes)),
            ("rejectedByCode", .object(rejected)),
        ])
    }

    static func endpointJSON(_ e: CaptureEndpoint) -> JSONValue { .string(e.description) }

    static func callJSON(_ c: CaptureAnalyzer.Call) -> JSONValue {
        .object([
            ("callID", .string(c.callID)), ("first", timeJSON(c.first)), ("last", timeJSON(c.last)),
            ("from", c.from.map { .string($0) } ?? .null), ("to", c.to.map { .string($0) } ?? .null),
            ("outcome", .string(c.outcome.key)), ("code", c.outcome.code.map { .int($0) } ?? .null),
            ("setupTime", secondsJSON(c.setupTime)), ("answerTime", secondsJSON(c.answerTime)),
            ("duration", secondsJSON(c.duration)),
            ("messages", .int(c.messageCount)), ("retransmissions", .int(c.retransmissions)),
            ("transactions", .array(c.transactions.map {
                .object([("method", .string($0.method)), ("cseq", .int(Int($0.cseq))), ("final", $0.finalCode.map { .int($0) } ?? .null)])
            })),
            ("rtp", .array(c.rtp.map {
                .object([("media", .string($0.media)), ("address", .string($0.address)), ("port", .int(Int($0.port))),
                         ("announcedBy", endpointJSON($0.announcedBy))])
            })),
            ("media", .array(c.media.map {
                .object([("media", .string($0.media)), ("address", .string($0.address)), ("port", .int(Int($0.port))),
                         ("rtcpAddress", .string($0.rtcpAddress)), ("rtcpPort", .int(Int($0.rtcpPort))), ("rtcpMux", .bool($0.rtcpMux)),
                         ("announcedBy", endpointJSON($0.announcedBy)), ("rtpPackets", .int($0.rtpPackets)), ("rtcpPackets", .int($0.rtcpPackets))])
            })),
            ("dialogs", dialogsJSON(c.dialogs)),
            ("linked", .array(c.linked.map { .string($0) })),
        ])
    }

    static func dialogsJSON(_ d: [CaptureAnalyzer.Dialog]) -> JSONValue {
        .array(d.map {
            .object([("localTag", .string($0.localTag)), ("remoteTag", .string($0.remoteTag)), ("state", .string($0.state.rawValue)),
                     ("method", .string($0.method)), ("cseq", .int(Int($0.cseq)))])
        })
    }

    static func ladderJSON(_ c: CaptureAnalyzer.Call) -> JSONValue {
        var hosts: [CaptureEndpoint] = []
        for a in c.arrows {
            if !hosts.contains(a.source) { hosts.append(a.source) }
            if !hosts.contains(a.destination) { hosts.append(a.destination) }
        }
        return .object([
            ("callID", .string(c.callID)), ("outcome", .string(c.outcome.key)),
            ("dialogs", dialogsJSON(c.dialogs)),
            ("hosts", .array(hosts.map(endpointJSON))),
            ("arrows", .array(c.arrows.map {
                .object([("time", secondsJSON($0.time.totalNanoseconds - c.first.totalNanoseconds)),
                         ("from", endpointJSON($0.source)), ("to", endpointJSON($0.destination)),
                         ("label", .string($0.label)), ("frame", .int($0.frameNumber)),
                         ("retransmission", .bool($0.retransmission))])
            })),
        ])
    }
}

extension String {
    fileprivate func trimmingTrailingSpaces() -> String {
        var s = Substring(self)
        while s.last == " " { s.removeLast() }
        return String(s)
    }
}
