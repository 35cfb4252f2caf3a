import Foundation
import Testing
import PacketCapture
import SwitchboardTestSupport
@testable import SwitchboardTools
@testable import CaptureAnalysis

/// The captures of the shared corpora, found through `TestPaths` (so `$SWITCHBOARD_CORPORA` counts).
enum CaptureCorpus {
    static let root: String = TestPaths.corpus("pcaps")
    static func path(_ name: String) -> String { root + "/" + name }
    /// Whether the captures are there.
    static var present: Bool { TestPaths.corporaHas("pcaps") }
    /// For the suites' `.enabled(if:)`: run when present, and always under CI (where absent fails).
    static var available: Bool { present || TestPaths.isCI }
    /// Inside a test: fails under CI, skips with a message elsewhere, when the captures are missing.
    static func required(sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        TestPaths.requirement("the capture corpus \(root)", available: present, sourceLocation: sourceLocation)
    }

    static func jsonObject(_ text: String) throws -> [String: Any] {
        let any = try JSONSerialization.jsonObject(with: Data(text.utf8))
        return try #require(any as? [String: Any])
    }
}

@Suite("switchboard capture: corpus", .enabled(if: CaptureCorpus.available, "../shared/corpora/pcaps is absent: capture corpus tests skipped"),
       .requires("the capture corpus", { CaptureCorpus.present }))
struct CaptureCommandTests {
    @Test func tcpCaptureHasFiveAnsweredCalls() throws {
        let r = CaptureCommand.run(path: CaptureCorpus.path("sip-capture/sip-tcp.pcap"), view: .calls)
        #expect(r.error == nil)
        #expect(r.exitCode == 0)
        let s = r.analysis.summary
        #expect(s.messages == 30)
        #expect(s.requests == 15 && s.responses == 15)
        #expect(s.retransmissions == 0)
        #expect(s.requestsByMethod == ["INVITE": 5, "ACK": 5, "BYE": 5])
        #expect(s.responsesByCode == [180: 5, 200: 10])
        #expect(s.calls == 5)
        #expect(s.callsByOutcome == [.answered: 5])
        let calls = r.analysis.calls
        #expect(calls.map(\.callID) == (1...5).map { "\($0)-2550@127.0.0.1" })
        for c in calls {
            #expect(c.outcome == .answered)
            #expect(c.messageCount == 6)
            #expect(c.transactions.map(\.method) == ["INVITE", "BYE"])
            #expect(c.transactions.map(\.finalCode) == [200, 200])
            #expect(c.setupTime != nil && c.answerTime != nil && c.duration != nil)
            #expect(c.setupTime! <= c.answerTime!)
            #expect(c.to == "sip:service@127.0.0.1:5060")
            #expect(Set(c.rtp.map { "\($0.address):\($0.port)" }) == ["127.0.0.1:6000", "127.0.0.1:6004"])
        }
        #expect(r.text.split(separator: "\n").count == 5)
        let summary = CaptureCommand.run(path: CaptureCorpus.path("sip-capture/sip-tcp.pcap"), view: .summary)
        #expect(summary.analysis.calls.isEmpty, "the summary view keeps no call records")
        #expect(summary.text.contains("30 SIP messages (15 requests, 15 responses)"))
        #expect(summary.text.contains("180 Ringing"))
        #expect(summary.text.contains("Calls: 5"))
    }

    @Test func wiresharkSampleCallIsAnsweredWithRTPAddresses() throws {
        let r = CaptureCommand.run(path: CaptureCorpus.path("wireshark-samplecaptures/sip-rtp-g711.pcap"), view: .calls)
        #expect(r.error == nil)
        let c = try #require(r.analysis.calls.first)
        #expect(c.callID == "1-1966@10.0.2.20")
        #expect(c.outcome == .answered)
        let setup = try #require(c.setupTime), answer = try #require(c.answerTime), duration = try #require(c.duration)
        #expect(setup > 0 && setup <= answer && answer < 1_000_000_000)
        #expect(duration > 8_000_000_000 && duration < 9_000_000_000)
        #expect(c.rtp.map { "\($0.media) \($0.address):\($0.port)" } == ["audio 10.0.2.20:6000", "audio 10.0.2.15:27942"])
        #expect(c.rtp[0].announcedBy.description == "10.0.2.20:5060")
    }

    @Test func sipCallRTPG711() throws {
        let r = CaptureCommand.run(path: CaptureCorpus.path("wireshark-samplecaptures/SIP_CALL_RTP_G711"), view: .calls)
        #expect(r.error == nil)
        let s = r.analysis.summary
        #expect(s.calls == 2)
        #expect(s.callsByOutcome == [.answered: 1, .noAnswer: 1, .noInvite: 2])
        let answered = try #require(r.analysis.calls.first { $0.outcome == .answered })
        #expect(answered.callID == "12013223@200.57.7.195")
        #expect(answered.setupTime == 47_524_000)
        #expect(answered.answerTime == 8_477_925_000)
        #expect(answered.duration == nil, "the capture ends before the BYE")
        #expect(answered.rtp.map(\.description) == ["audio 200.57.7.196:40376", "audio 200.57.7.204:8000"])
        #expect(answered.transactions == [.init(method: "INVITE", cseq: answered.transactions[0].cseq, finalCode: 200)])
    }

    @Test func netMonAndMissingFilesAreErrors() throws {
        let r = CaptureCommand.run(path: CaptureCorpus.path("wireshark-samplecaptures/c07-sip-r2.cap"), view: .summary)
        let e = try #require(r.error)
        #expect(e.rule == .netMonFormat)
        #expect(e.offset == 0)
        #expect(r.exitCode == 65)
        #expect(r.text.contains("capture file error at byte 0 (record 0): netMonFormat"))
        let j = try CaptureCorpus.jsonObject(r.json)
        let je = try #require(j["error"] as? [String: Any])
        #expect(je["rule"] as? String == "netMonFormat")
        #expect(je["offset"] as? Int == 0)

        let missing = CaptureCommand.run(path: CaptureCorpus.path("no-such-file.pcap"), view: .calls)
        #expect(missing.error?.rule == .io)
        #expect(missing.exitCode == 65)

        // Cut short in record 19: the calls before it are still reported, then the error.
        let whole = try #require(FileManager.default.contents(atPath: CaptureCorpus.path("sip-capture/sip-tcp.pcap")))
        let cut = try ToolPaths.temp("capture-cut.pcap", Array(whole.prefix(9000)))
        defer { try? FileManager.default.removeItem(atPath: cut) }
        let t = CaptureCommand.run(path: cut, view: .calls)
        #expect(t.error?.rule == .truncatedRecord)
        #expect(t.error?.record == 19)
        #expect(t.exitCode == 65)
        #expect(t.analysis.calls.count == 3)
        #expect(t.text.hasSuffix("truncatedRecord: record holds 577 bytes, 557 left in the file\n"))
    }

    @Test func jsonViewsParseWithTheExpectedKeys() throws {
        let path = CaptureCorpus.path("sip-capture/sip-tcp.pcap")
        let summary = try CaptureCorpus.jsonObject(CaptureCommand.run(path: path, view: .summary).json)
        #expect(Set(summary.keys) == ["file", "summary", "error"])
        #expect(summary["error"] is NSNull)
        let s = try #require(summary["summary"] as? [String: Any])
        for key in ["messages", "requests", "responses", "retransmissions", "anomalies", "first", "last",
                    "requestsByMethod", "responsesByCode", "calls", "callsByOutcome", "rejectedByCode"] {
            #expect(s[key] != nil, "summary lacks \(key)")
        }
        #expect(s["messages"] as? Int == 30)
        #expect((s["requestsByMethod"] as? [String: Int])?["INVITE"] == 5)
        #expect((s["responsesByCode"] as? [String: Int])?["200"] == 10)
        #expect((s["callsByOutcome"] as? [String: Int])?["answered"] == 5)

        let calls = try CaptureCorpus.jsonObject(CaptureCommand.run(path: path, view: .calls).json)
        let list = try #require(calls["calls"] as? [[String: Any]])
        #expect(list.count == 5)
        let first = try #require(list.first)
        #expect(Set(first.keys) == ["callID", "first", "last", "from", "to", "outcome", "code", "setupTime", "answerTime",
                                    "duration", "messages", "retransmissions", "transactions", "rtp", "media", "dialogs", "linked"])
        #expect(first["outcome"] as? String == "answered")
        #expect((first["transactions"] as? [[String: Any]])?.first?["final"] as? Int == 200)
        #expect((first["rtp"] as? [[String: Any]])?.first?["port"] as? Int == 6004)

        let ladder = try CaptureCorpus.jsonObject(CaptureCommand.run(path: path, view: .ladder("3-2550@127.0.0.1")).json)
        let ladders = try #require(ladder["ladders"] as? [[String: Any]])
        #expect(ladders.count == 1)
        let arrows = try #require(ladders.first?["arrows"] as? [[String: Any]])
        #expect(arrows.map { $0["label"] as? String } == ["INVITE", "180 Ringing", "200 OK", "ACK", "BYE", "200 OK"])
        #expect(arrows.first?["time"] as? Double == 0)
    }

    @Test func ladderHasOneArrowPerMessageInOrder() throws {
        let r = CaptureCommand.run(path: CaptureCorpus.path("sip-capture/sip-tcp.pcap"), view: .ladder("1-2550@127.0.0.1"))
        #expect(r.exitCode == 0)
        let lines = r.text.split(separator: "\n").map(String.init)
        #expect(lines[0] == "Call-ID: 1-2550@127.0.0.1  (answered)  dialog 2550SIPpTag001/656SIPpTag0131 terminated (INVITE 1)")
        #expect(lines[1].contains("127.0.0.1:36959") && lines[1].contains("127.0.0.1:5060"))
        #expect(lines[1].range(of: "127.0.0.1:36959")!.lowerBound < lines[1].range(of: "127.0.0.1:5060")!.lowerBound)
        let arrows = lines.filter { $0.contains("─") }
        #expect(arrows.count == 6)
        let expected: [(String, Bool)] = [("INVITE", true), ("180 Ringing", false), ("200 OK", false), ("ACK", true), ("BYE", true), ("200 OK", false)]
        for (line, (label, rightwards)) in zip(arrows, expected) {
            #expect(line.contains("─\(label)─"), "\(line)")
            #expect(line.contains(">│") == rightwards && line.contains("│<") == !rightwards, "\(line)")
        }
        #expect(arrows[0].hasPrefix("  0.000000"))
        // Relative times increase downwards.
        let times = arrows.map { Double($0.split(separator: " ")[0])! }
        #expect(times == times.sorted())

        let all = CaptureCommand.run(path: CaptureCorpus.path("sip-capture/sip-tcp.pcap"), view: .ladder(nil))
        #expect(all.text.split(separator: "\n").filter { $0.contains("─") }.count == 30)
        let none = CaptureCommand.run(path: CaptureCorpus.path("sip-capture/sip-tcp.pcap"), view: .ladder("nope"))
        #expect(none.exitCode == 1)
        #expect(none.text == "no call with Call-ID nope\n")
    }

    /// Compared with `tshark -q -z sip,stat` when tshark is installed. Expected differences:
    /// tshark dissects SIP only on its registered ports (5060/5061) or by heuristics, whereas the
    /// decoder finds SIP by content on any port, so tshark may count fewer; and tshark counts a
    /// retransmitted TCP segment's message again, which the TCP reassembly drops. The corpus
    /// files compared here use UDP or TCP on 5060 without TCP retransmissions, so the counts match.
    @Test(.enabled(if: CaptureCorpus.tshark != nil || TestPaths.isCI, "tshark is not installed: comparison skipped"),
          .requires("tshark", { CaptureCorpus.tshark != nil }),
          arguments: ["sip-capture/sip-tcp.pcap", "wireshark-samplecaptures/SIP_CALL_RTP_G711", "wireshark-samplecaptures/sip-rtp-g711.pcap"])
    func matchesTshark(_ name: String) throws {
        let tshark = try #require(CaptureCorpus.tshark)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tshark)
        p.arguments = ["-r", CaptureCorpus.path(name), "-q", "-z", "sip,stat"]
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        var methods: [String: Int] = [:], codes: [Int: Int] = [:]
        var section = ""
        for raw in out.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.contains("Status Codes") { section = "codes"; continue }
            if line.contains("Request methods") { section = "methods"; continue }
            guard let colon = line.lastIndex(of: ":"), line.hasSuffix("Packets") else { continue }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces)
            guard let n = Int(line[line.index(after: colon)...].split(separator: " ").first ?? "") else { continue }
            if section == "codes", let code = Int(name.split(separator: " ").dropFirst().first ?? "") {
                codes[code] = n
            } else if section == "methods" {
                methods[name] = n
            }
        }
        let ours = CaptureCommand.run(path: CaptureCorpus.path(name), view: .summary).analysis.summary
        #expect(ours.requestsByMethod == methods)
        #expect(ours.responsesByCode == codes)
    }
}

extension CaptureCorpus {
    /// The tshark executable on PATH, if any.
    static let tshark: String? = {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            let p = "\(dir)/tshark"
            if FileManager.default.isExecutableFile(atPath: p) { return p }
        }
        return nil
    }()
}

/// Synthetic captures: raw-IPv4 pcap records carrying UDP datagrams.
struct SyntheticCapture {
    var bytes: [UInt8] = []

    init() {
        le32(0xA1B2_C3D4); le16(2); le16(4); le32(0); le32(0); le32(65535); le32(101)
    }

    mutating func le16(_ v: UInt16) { bytes += [UInt8(v & 0xFF), UInt8(v >> 8)] }
    mutating func le32(_ v: UInt32) { for i in 0..<4 { bytes.append(UInt8((v >> (8 * UInt32(i))) & 0xFF)) } }

    /// Adds `text` as a UDP datagram from `src` to `dst` (last octet of 10.0.0.x, port 5060) at `ms`.
    mutating func add(_ text: String, at ms: Int, from src: UInt8, to dst: UInt8) {
        let payload = Array(text.replacingOccurrences(of: "\n", with: "\r\n").utf8)
        let udpLength = 8 + payload.count, ipLength = 20 + udpLength
        var packet: [UInt8] = [0x45, 0, UInt8(ipLength >> 8), UInt8(ipLength & 0xFF), 0, 1, 0, 0, 64, 17, 0, 0,
                               10, 0, 0, src, 10, 0, 0, dst]
        packet += [0x13, 0xC4, 0x13, 0xC4, UInt8(udpLength >> 8), UInt8(udpLength & 0xFF), 0, 0]
        packet += payload
        le32(UInt32(ms / 1000)); le32(UInt32((ms % 1000) * 1000)); le32(UInt32(packet.count)); le32(UInt32(packet.count))
        bytes += packet
    }

    static func request(_ method: String, callID: String, cseq: Int, cseqMethod: String? = nil, branch: String,
                        toTag: String? = nil, extra: String = "") -> String {
        """
        \(method) sip:bob@10.0.0.2 SIP/2.0
        Via: SIP/2.0/UDP 10.0.0.1;branch=\(branch)
        From: <sip:alice@10.0.0.1>;tag=a
        To: <sip:bob@10.0.0.2>\(toTag.map { ";tag=" + $0 } ?? "")
        Call-ID: \(callID)
        CSeq: \(cseq) \(cseqMethod ?? method)
        Max-Forwards: 70
        \(extra)Content-Length: 0


        """
    }

    static func response(_ code: Int, _ reason: String, callID: String, cseq: Int, method: String, branch: String,
                         toTag: String? = "b", extra: String = "") -> String {
        """
        SIP/2.0 \(code) \(reason)
        Via: SIP/2.0/UDP 10.0.0.1;branch=\(branch)
        From: <sip:alice@10.0.0.1>;tag=a
        To: <sip:bob@10.0.0.2>\(toTag.map { ";tag=" + $0 } ?? "")
        Call-ID: \(callID)
        CSeq: \(cseq) \(method)
        \(extra)Content-Length: 0


        """
    }

    func analysis(keepCalls: Bool = true, settleSeconds: Int64 = 32, check: Bool = false) throws -> CaptureAnalyzer {
        let reader = try SIPCaptureReader(bytes: bytes)
        var a = CaptureAnalyzer(keepCalls: keepCalls, check: check)
        a.settleSeconds = settleSeconds
        while let e = try reader.next() {
            if case .message(let m) = e { a.add(m) } else { a.noteAnomaly() }
        }
        a.finish()
        return a
    }
}

@Suite("switchboard capture: analysis")
struct CaptureCommandAnalysisTests {
    typealias S = SyntheticCapture

    /// Redirections followed with a new Call-ID each (RFC 3261 §8.1.3.4 allows it): P to x → 302 y,
    /// Q to y → 302 x, R to x again. The per-call check sees one INVITE a call; the analysis
    /// follows the chain across Call-IDs and finds the loop in R.
    @Test func aRedirectLoopAcrossCallIDs() throws {
        func invite(_ callID: String, to user: String) -> String {
            S.request("INVITE", callID: callID, cseq: 1, branch: "z9hG4bK\(callID)")
                .replacingOccurrences(of: "INVITE sip:bob@10.0.0.2", with: "INVITE sip:\(user)@10.0.0.2")
        }
        func redirect(_ callID: String, to user: String) -> String {
            S.response(302, "Moved Temporarily", callID: callID, cseq: 1, method: "INVITE", branch: "z9hG4bK\(callID)",
                       extra: "Contact: <sip:\(user)@10.0.0.2>\n")
        }
        func ack(_ callID: String) -> String { S.request("ACK", callID: callID, cseq: 1, branch: "z9hG4bK\(callID)", toTag: "b") }
        func capture(thirdAt: Int, thirdFrom: UInt8) -> SyntheticCapture {
            var c = SyntheticCapture()
            c.add(invite("P", to: "x"), at: 0, from: 1, to: 2)
            c.add(redirect("P", to: "y"), at: 10, from: 2, to: 1)
            c.add(ack("P"), at: 20, from: 1, to: 2)
            c.add(invite("Q", to: "y"), at: 100, from: 1, to: 2)
            c.add(redirect("Q", to: "x"), at: 110, from: 2, to: 1)
            c.add(ack("Q"), at: 120, from: 1, to: 2)
            c.add(invite("R", to: "x"), at: thirdAt, from: thirdFrom, to: 2)
            return c
        }
        let a = try capture(thirdAt: 200, thirdFrom: 1).analysis(check: true)
        let byID = Dictionary(uniqueKeysWithValues: a.calls.map { ($0.callID, $0) })
        #expect(byID["P"]?.findings.isEmpty == true && byID["Q"]?.findings.isEmpty == true, "\(a.calls.map(\.findings))")
        let loop = try #require(byID["R"]?.findings.first)
        #expect(byID["R"]?.findings.count == 1)
        #expect(loop.rule == .redirectLoop && loop.frameNumber == 7 && loop.party.description == "10.0.0.1:5060", "\(loop)")
        #expect(loop.detail.contains("x@10.0.0.2:0 → y@10.0.0.2:0"), "\(loop.detail)")
        // Not the party the 3xx went to, or long after it (past 64·T1): a new call, no loop.
        for (at, from) in [(200, UInt8(3)), (60_000, UInt8(1))] {
            let b = try capture(thirdAt: at, thirdFrom: from).analysis(check: true)
            #expect(b.calls.allSatisfy { $0.findings.isEmpty }, "\(at) \(from): \(b.calls.map(\.findings))")
        }
    }

    @Test func retransmissionsCancelRejectAndLinks() throws {
        var c = SyntheticCapture()
        // Call A: INVITE retransmitted once, forwarded by a proxy (10.0.0.3, another source), then cancelled.
        c.add(S.request("INVITE", callID: "A", cseq: 1, branch: "z9hG4bKa1"), at: 0, from: 1, to: 2)
        c.add(S.request("INVITE", callID: "A", cseq: 1, branch: "z9hG4bKa1"), at: 500, from: 1, to: 2)
        c.add(S.request("INVITE", callID: "A", cseq: 1, branch: "z9hG4bKa1"), at: 501, from: 3, to: 2)
        c.add(S.response(180, "Ringing", callID: "A", cseq: 1, method: "INVITE", branch: "z9hG4bKa1"), at: 600, from: 2, to: 1)
        c.add(S.request("CANCEL", callID: "A", cseq: 1, branch: "z9hG4bKa1"), at: 1000, from: 1, to: 2)
        c.add(S.response(200, "OK", callID: "A", cseq: 1, method: "CANCEL", branch: "z9hG4bKa1"), at: 1010, from: 2, to: 1)
        c.add(S.response(487, "Request Terminated", callID: "A", cseq: 1, method: "INVITE", branch: "z9hG4bKa1"), at: 1020, from: 2, to: 1)
        c.add(S.request("ACK", callID: "A", cseq: 1, branch: "z9hG4bKa1", toTag: "b"), at: 1030, from: 1, to: 2)
        // Call B: 407, then a new INVITE rejected with 486; carries Replaces naming call A.
        c.add(S.request("INVITE", callID: "B", cseq: 1, branch: "z9hG4bKb1"), at: 2000, from: 1, to: 2)
        c.add(S.response(407, "Proxy Authentication Required", callID: "B", cseq: 1, method: "INVITE", branch: "z9hG4bKb1"), at: 2010, from: 2, to: 1)
        c.add(S.request("ACK", callID: "B", cseq: 1, branch: "z9hG4bKb1", toTag: "b"), at: 2020, from: 1, to: 2)
        c.add(S.request("INVITE", callID: "B", cseq: 2, branch: "z9hG4bKb2", extra: "Replaces: A;to-tag=b;from-tag=a\n"), at: 2030, from: 1, to: 2)
        c.add(S.response(486, "Busy Here", callID: "B", cseq: 2, method: "INVITE", branch: "z9hG4bKb2"), at: 2040, from: 2, to: 1)
        // Call C: 302 to sip:carol@10.0.0.4; call D is the INVITE to that Contact.
        c.add(S.request("INVITE", callID: "C", cseq: 1, branch: "z9hG4bKc1"), at: 3000, from: 1, to: 2)
        c.add(S.response(302, "Moved Temporarily", callID: "C", cseq: 1, method: "INVITE", branch: "z9hG4bKc1",
                         extra: "Contact: <sip:carol@10.0.0.4>\n"), at: 3010, from: 2, to: 1)
        c.add(S.request("INVITE", callID: "D", cseq: 1, branch: "z9hG4bKd1").replacingOccurrences(of: "INVITE sip:bob@10.0.0.2", with: "INVITE sip:carol@10.0.0.4"),
              at: 3100, from: 1, to: 4)
        // Call E: an OPTIONS (no INVITE), no answer.
        c.add(S.request("OPTIONS", callID: "E", cseq: 1, branch: "z9hG4bKe1"), at: 4000, from: 1, to: 2)
        // Call F: a blind transfer (REFER to dave); call G is the transferee's INVITE to dave.
        c.add(S.request("REFER", callID: "F", cseq: 1, branch: "z9hG4bKf1", extra: "Refer-To: <sip:dave@10.0.0.5>\n"), at: 5000, from: 1, to: 2)
        c.add(S.request("INVITE", callID: "G", cseq: 1, branch: "z9hG4bKg1", extra: "Referred-By: <sip:alice@10.0.0.1>\n")
            .replacingOccurrences(of: "INVITE sip:bob@10.0.0.2", with: "INVITE sip:dave@10.0.0.5"), at: 5100, from: 2, to: 4)

        let a = try c.analysis()
        let s = a.summary
        #expect(s.messages == 19)
        #expect(s.retransmissions == 1, "the proxy's copy is not a retransmission")
        #expect(s.requestsByMethod["INVITE"] == 8)
        #expect(s.responsesByCode == [180: 1, 200: 1, 487: 1, 407: 1, 486: 1, 302: 1])
        #expect(s.calls == 5)
        #expect(s.callsByOutcome == [.cancelled: 1, .rejected(486): 1, .rejected(302): 1, .noAnswer: 2, .noInvite: 2])
        let byID = Dictionary(uniqueKeysWithValues: a.calls.map { ($0.callID, $0) })
        let callA = try #require(byID["A"])
        #expect(callA.outcome == .cancelled)
        #expect(callA.retransmissions == 1)
        #expect(callA.messageCount == 8)
        #expect(callA.setupTime == 600_000_000)
        #expect(callA.answerTime == nil && callA.duration == nil)
        #expect(callA.transactions == [.init(method: "INVITE", cseq: 1, finalCode: 487), .init(method: "CANCEL", cseq: 1, finalCode: 200)])
        #expect(byID["B"]?.outcome == .rejected(486))
        #expect(byID["B"]?.transactions.map(\.finalCode) == [407, 486])
        #expect(byID["B"]?.linked == ["A"])
        #expect(callA.linked == ["B"], "links are made mutual")
        #expect(byID["D"]?.linked == ["C"])
        #expect(byID["C"]?.linked == ["D"])
        #expect(byID["D"]?.outcome == .noAnswer)
        #expect(byID["E"]?.outcome == .noInvite)
        #expect(byID["G"]?.linked == ["F"] && byID["F"]?.linked == ["G"], "blind transfer: REFER's target and the new INVITE")
        #expect(byID["E"]?.linked == [])
    }

    @Test func settledCallsLeaveMemoryAfterTheQuietPeriod() throws {
        var c = SyntheticCapture()
        // 20 answered calls, one every 10 s of capture time, each ended by an answered BYE.
        for i in 0..<20 {
            let id = "call-\(i)", t = i * 10_000
            c.add(S.request("INVITE", callID: id, cseq: 1, branch: "z9hG4bK\(i)i"), at: t, from: 1, to: 2)
            c.add(S.response(200, "OK", callID: id, cseq: 1, method: "INVITE", branch: "z9hG4bK\(i)i"), at: t + 100, from: 2, to: 1)
            c.add(S.request("ACK", callID: id, cseq: 1, branch: "z9hG4bK\(i)a", toTag: "b"), at: t + 110, from: 1, to: 2)
            c.add(S.request("BYE", callID: id, cseq: 2, branch: "z9hG4bK\(i)b", toTag: "b"), at: t + 5000, from: 1, to: 2)
            c.add(S.response(200, "OK", callID: id, cseq: 2, method: "BYE", branch: "z9hG4bK\(i)b"), at: t + 5010, from: 2, to: 1)
        }
        let reader = try SIPCaptureReader(bytes: c.bytes)
        var a = CaptureAnalyzer(keepCalls: false)
        var maxLive = 0
        while let e = try reader.next() {
            if case .message(let m) = e { a.add(m) }
            maxLive = max(maxLive, a.liveCallCount)
        }
        #expect(maxLive <= 5, "settled calls are retired 32 s after their last message")
        a.finish()
        #expect(a.liveCallCount == 0)
        #expect(a.calls.isEmpty)
        #expect(a.summary.callsByOutcome == [.answered: 20])
        let kept = try c.analysis()
        #expect(kept.calls.count == 20)
        #expect(kept.calls.allSatisfy { $0.duration == 4_900_000_000 && $0.answerTime == 100_000_000 })
    }

    @Test func manyCallsArriveInOrderThenTheFileError() throws {
        // 800 calls, one every 100 ms, each over 40 ms: 3,772 messages, with settled calls
        // retired (and the live calls moved about in their array) all along the 80 s.
        var c = SyntheticCapture()
        var recordEnds: [Int] = []
        var answered = 0, rejected = 0
        for i in 0..<800 {
            let id = "many-\(i)@10.0.0.1", t = i * 100
            c.add(S.request("INVITE", callID: id, cseq: 1, branch: "z9hG4bKm\(i)"), at: t, from: 1, to: 2)
            recordEnds.append(c.bytes.count)
            if i % 7 == 3 {
                c.add(S.response(486, "Busy Here", callID: id, cseq: 1, method: "INVITE", branch: "z9hG4bKm\(i)"), at: t + 10, from: 2, to: 1)
                recordEnds.append(c.bytes.count)
                c.add(S.request("ACK", callID: id, cseq: 1, branch: "z9hG4bKm\(i)", toTag: "b"), at: t + 20, from: 1, to: 2)
                recordEnds.append(c.bytes.count)
                rejected += 1
                continue
            }
            c.add(S.response(200, "OK", callID: id, cseq: 1, method: "INVITE", branch: "z9hG4bKm\(i)"), at: t + 10, from: 2, to: 1)
            c.add(S.request("ACK", callID: id, cseq: 1, branch: "z9hG4bKa\(i)", toTag: "b"), at: t + 20, from: 1, to: 2)
            c.add(S.request("BYE", callID: id, cseq: 2, branch: "z9hG4bKb\(i)", toTag: "b"), at: t + 30, from: 1, to: 2)
            c.add(S.response(200, "OK", callID: id, cseq: 2, method: "BYE", branch: "z9hG4bKb\(i)"), at: t + 40, from: 2, to: 1)
            recordEnds.append(contentsOf: Array(repeating: c.bytes.count, count: 4))
            answered += 1
        }
        let path = try ToolPaths.temp("capture-many-calls.pcap", c.bytes)
        defer { try? FileManager.default.removeItem(atPath: path) }

        let calls = CaptureCommand.run(path: path, view: .calls)
        #expect(calls.error == nil)
        #expect(calls.analysis.summary.messages == recordEnds.count)
        #expect(calls.analysis.calls.map(\.callID) == (0..<800).map { "many-\($0)@10.0.0.1" })
        #expect(calls.analysis.summary.callsByOutcome == [.answered: answered, .rejected(486): rejected])
        let summary = CaptureCommand.run(path: path, view: .summary).analysis.summary
        #expect(summary.callsByOutcome == calls.analysis.summary.callsByOutcome)
        #expect(summary.requestsByMethod == ["INVITE": 800, "ACK": 800, "BYE": answered])
        #expect(summary.responsesByCode == [200: 2 * answered, 486: rejected])
        #expect(summary.retransmissions == 0)

        // Cut in the middle of a record: every message before it, then the error.
        let cutLength = recordEnds[recordEnds.count / 2] + 30
        let cut = try ToolPaths.temp("capture-many-calls-cut.pcap", Array(c.bytes.prefix(cutLength)))
        defer { try? FileManager.default.removeItem(atPath: cut) }
        let t = CaptureCommand.run(path: cut, view: .summary)
        #expect(t.error?.rule == .truncatedRecord)
        #expect(t.analysis.summary.messages == recordEnds.filter { $0 <= cutLength }.count)
        #expect(t.exitCode == 65)
    }

    @Test func secondsFormatting() {
        #expect(CaptureCommand.seconds(0) == "0.000")
        #expect(CaptureCommand.seconds(1_234_567_890) == "1.235")
        #expect(CaptureCommand.seconds(1_234_567_890, digits: 6) == "1.234568")
        #expect(CaptureCommand.seconds(-500_000) == "-0.001")
        #expect(CaptureCommand.seconds(59_999_999_999, digits: 0) == "60")
    }
}
