import Foundation
import Testing
import NetworkIO
import PacketCapture
import SIPMessage
import SIPRuntime
import SIPRules
import Switchboard
import SwitchboardTestSupport
import Conformance
@testable import SwitchboardTools
@testable import CaptureAnalysis

/// `switchboard capture FILE --check`: findings per call in text, JSON and on the HTML ladder,
/// exit 1 with findings; clean and damaged captures give none.
@Suite("switchboard capture --check", .serialized)
struct CaptureCheckCommandTests {
    typealias S = SyntheticCapture

    static func write(_ bytes: [UInt8]) throws -> String {
        let path = NSTemporaryDirectory() + "capture-check-\(UUID().uuidString).pcap"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Call `ok`: INVITE, 200, ACK, BYE, 200. Call `bad`: the 200 has no Contact and is never
    /// ACKed (the caller sends its BYE 5 s later).
    static func twoCalls() -> SyntheticCapture {
        var c = SyntheticCapture()
        let contact = "Contact: <sip:bob@10.0.0.2>\n"
        c.add(S.request("INVITE", callID: "ok", cseq: 1, branch: "z9hG4bK-o1"), at: 1000, from: 1, to: 2)
        c.add(S.response(200, "OK", callID: "ok", cseq: 1, method: "INVITE", branch: "z9hG4bK-o1", extra: contact), at: 1100, from: 2, to: 1)
        c.add(S.request("ACK", callID: "ok", cseq: 1, branch: "z9hG4bK-o2", toTag: "b"), at: 1110, from: 1, to: 2)
        c.add(S.request("BYE", callID: "ok", cseq: 2, branch: "z9hG4bK-o3", toTag: "b"), at: 3000, from: 1, to: 2)
        c.add(S.response(200, "OK", callID: "ok", cseq: 2, method: "BYE", branch: "z9hG4bK-o3"), at: 3010, from: 2, to: 1)
        c.add(S.request("INVITE", callID: "bad", cseq: 1, branch: "z9hG4bK-b1"), at: 4000, from: 1, to: 2)
        c.add(S.response(200, "OK", callID: "bad", cseq: 1, method: "INVITE", branch: "z9hG4bK-b1"), at: 4100, from: 2, to: 1)
        c.add(S.response(200, "OK", callID: "bad", cseq: 1, method: "INVITE", branch: "z9hG4bK-b1"), at: 4600, from: 2, to: 1)
        c.add(S.response(200, "OK", callID: "bad", cseq: 1, method: "INVITE", branch: "z9hG4bK-b1"), at: 5600, from: 2, to: 1)
        c.add(S.response(200, "OK", callID: "bad", cseq: 1, method: "INVITE", branch: "z9hG4bK-b1"), at: 7600, from: 2, to: 1)
        c.add(S.request("BYE", callID: "bad", cseq: 2, branch: "z9hG4bK-b2", toTag: "b"), at: 9000, from: 1, to: 2)
        c.add(S.response(200, "OK", callID: "bad", cseq: 2, method: "BYE", branch: "z9hG4bK-b2"), at: 9010, from: 2, to: 1)
        return c
    }

    @Test func findingsAreListedPerCallInTextJSONAndHTML() throws {
        let path = try Self.write(Self.twoCalls().bytes)
        defer { unlink(path) }
        let r = CaptureCommand.run(path: path, view: .check)
        #expect(r.error == nil)
        #expect(r.exitCode == 1)
        let bad = try #require(r.analysis.calls.first { $0.callID == "bad" })
        #expect(r.analysis.calls.first { $0.callID == "ok" }?.findings.isEmpty == true)
        #expect(bad.findings.map(\.rule) == [.ack2xx, .contactIn2xx], "\(bad.findings)")
        // The caller (10.0.0.1) did not ACK; the callee (10.0.0.2) left out the Contact; both at frame 7.
        #expect(bad.findings.map(\.party.description) == ["10.0.0.1:5060", "10.0.0.2:5060"])
        #expect(bad.findings.allSatisfy { $0.frameNumber == 7 })

        let text = r.text
        #expect(text.contains("2 calls checked, 2 findings in 1 call"), "\(text)")
        #expect(text.contains("Call-ID: bad"), "\(text)")
        #expect(!text.contains("Call-ID: ok"))
        #expect(text.contains("frame 7  1970-01-01T00:00:04.100000Z  +3.100000 s  10.0.0.2:5060  RFC 3261 §12.1.1 [contact-in-2xx]"), "\(text)")
        #expect(text.contains("RFC 3261 §13.2.2.4 [ack-2xx]"))

        let json = try CaptureCorpus.jsonObject(r.json)
        #expect(json["callsChecked"] as? Int == 2 && json["findings"] as? Int == 2)
        let checks = try #require(json["checks"] as? [[String: Any]])
        #expect(checks.count == 1 && checks[0]["callID"] as? String == "bad")
        let first = try #require((checks[0]["findings"] as? [[String: Any]])?.first)
        #expect(first["frame"] as? Int == 7 && first["party"] as? String == "10.0.0.1:5060")
        #expect((first["rule"] as? [String: Any])?["id"] as? String == "ack-2xx")
        let time = try #require(first["time"] as? [String: Any])
        #expect(time["utc"] as? String == "1970-01-01T00:00:04.100000Z" && time["relative"] as? Double == 3.1)

        // The HTML ladder marks frame 7's arrow and lists both findings under the ladder.
        let page = CaptureCommand.run(path: path, view: .html(nil))
        #expect(page.exitCode == 0)
        let html = page.html
        #expect(html.components(separatedBy: "class=\"arrow response finding\"").count - 1 == 1, "\(html)")
        #expect(html.components(separatedBy: "<li class=\"finding\" data-frame=\"7\">").count - 1 == 2)
        #expect(html.contains("[contact-in-2xx]") && html.contains("2 findings</h2>"))
    }

    /// The page with findings renders in headless Chromium: the marked arrow and the list are
    /// in the DOM after the page's script ran.
    @Test(.timeLimit(.minutes(3)))
    func findingsRenderInHeadlessChromium() async throws {
        guard TestPaths.requirement("chromium", available: Chromium.available) else { return }
        let path = try Self.write(Self.twoCalls().bytes)
        defer { unlink(path) }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("check-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let page = dir + "/check.html"
        #expect(ParseCommand.writeFile(page, Array(CaptureCommand.run(path: path, view: .html(nil)).html.utf8)))
        let dom = await Chromium.run(page, ["--dump-dom"], dir: dir)
        #expect(dom.ok, "chromium --dump-dom: status \(dom.status), timed out \(dom.timedOut)")
        #expect(dom.output.contains("data-arrows=\"12\""))
        #expect(dom.output.components(separatedBy: "class=\"arrow response finding\"").count - 1 == 1)
        #expect(dom.output.components(separatedBy: "<li class=\"finding\"").count - 1 == 2)
        #expect(dom.output.contains("⚠ 200 OK"))
    }

    /// Every capture of the corpus: the one finding is real (the phone of DTMFsipinfo.pcap answers
    /// re-INVITEs offering audio and a rejected video line with a single m-line, twice).
    @Test func theCorpusHasOnlyItsRealFindings() throws {
        guard CaptureCorpus.required() else { return }
        var files: [String] = []
        for dir in ["asterisk-testsuite", "sip-capture", "wireshark-samplecaptures"] {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: CaptureCorpus.path(dir))) ?? [] {
                files.append(CaptureCorpus.path(dir + "/" + name))
            }
        }
        #expect(files.count >= 15)
        var found: [String: [CaptureCheck.Finding]] = [:]
        for f in files {
            let r = CaptureCommand.run(path: f, view: .check)
            let findings = r.analysis.calls.flatMap(\.findings)
            if !findings.isEmpty { found[(f as NSString).lastPathComponent] = findings }
        }
        #expect(Set(found.keys) == ["DTMFsipinfo.pcap"], "\(found)")
        let dtmf = found["DTMFsipinfo.pcap"] ?? []
        #expect(dtmf.map(\.rule) == [.offerAnswer, .offerAnswer] && dtmf.map(\.frameNumber) == [23, 27], "\(dtmf)")
        #expect(dtmf.allSatisfy { $0.party.description == "178.45.73.241:5060" && $0.detail.contains("expected 2 m-lines, found 1") })
    }

    @Test func garbageAndTruncatedCapturesGiveNoBogusFinding() throws {
        var c = Self.twoCalls()
        // Keep only the clean call, then datagrams that are not SIP, or SIP that does not parse.
        c = SyntheticCapture()
        let contact = "Contact: <sip:bob@10.0.0.2>\n"
        c.add(S.request("INVITE", callID: "ok", cseq: 1, branch: "z9hG4bK-o1"), at: 1000, from: 1, to: 2)
        c.add("INVITE sip:x SIP/2.0\nVia: nonsense\nCSeq: banana\n\n", at: 1050, from: 1, to: 2)
        c.add("SIP/2.0 200 OK\nCall-ID: ok\nCSeq: 1 INVITE\nContent-Length: 99999\n\nxx", at: 1060, from: 2, to: 1)
        c.add(String(repeating: "\u{1}\u{2}garbage", count: 50), at: 1070, from: 2, to: 1)
        c.add(S.response(200, "OK", callID: "ok", cseq: 1, method: "INVITE", branch: "z9hG4bK-o1", extra: contact), at: 1100, from: 2, to: 1)
        c.add(S.request("ACK", callID: "ok", cseq: 1, branch: "z9hG4bK-o2", toTag: "b"), at: 1110, from: 1, to: 2)
        c.add(S.request("BYE", callID: "ok", cseq: 2, branch: "z9hG4bK-o3", toTag: "b"), at: 3000, from: 1, to: 2)
        c.add(S.response(200, "OK", callID: "ok", cseq: 2, method: "BYE", branch: "z9hG4bK-o3"), at: 3010, from: 2, to: 1)
        let path = try Self.write(c.bytes)
        defer { unlink(path) }
        let r = CaptureCommand.run(path: path, view: .check)
        #expect(r.error == nil && r.exitCode == 0, "\(r.text)")
        #expect(r.analysis.calls.allSatisfy { $0.findings.isEmpty }, "\(r.text)")

        // Cut inside every record of the two-call capture: read up to the cut, exit 65, and never
        // a finding the capture cannot show (the last call is the bad one: its findings appear
        // only once its BYE is in).
        let whole = Self.twoCalls().bytes
        for cut in stride(from: 30, to: whole.count, by: 37) {
            let p = try Self.write(Array(whole.prefix(cut)))
            defer { unlink(p) }
            let t = CaptureCommand.run(path: p, view: .check)
            let findings = t.analysis.calls.flatMap(\.findings)
            #expect(t.exitCode == 65 || t.exitCode == 1 || t.exitCode == 0)
            #expect(findings.allSatisfy { $0.callID == "bad" && ($0.rule == .contactIn2xx || $0.rule == .ack2xx) }, "cut at \(cut): \(findings)")
            if findings.contains(where: { $0.rule == .ack2xx }) {
                #expect(t.analysis.calls.first { $0.callID == "bad" }?.transactions.contains { $0.method == "BYE" } == true, "cut at \(cut)")
            }
        }
    }

    /// A blind transfer: bob REFERs alice to carol, alice calls carol (Referred-By) and reports
    /// in NOTIFYs, bob hangs up: one story of two calls, no finding.
    @Test func aTransferIsToldAsOneStory() throws {
        var c = SyntheticCapture()
        let contact = "Contact: <sip:x@10.0.0.9>\n"
        c.add(S.request("INVITE", callID: "t1", cseq: 1, branch: "z9hG4bK-t1"), at: 1000, from: 1, to: 2)
        c.add(S.response(200, "OK", callID: "t1", cseq: 1, method: "INVITE", branch: "z9hG4bK-t1", extra: contact), at: 1100, from: 2, to: 1)
        c.add(S.request("ACK", callID: "t1", cseq: 1, branch: "z9hG4bK-t1a", toTag: "b"), at: 1110, from: 1, to: 2)
        func bob(_ method: String, _ cseq: Int, _ branch: String, _ extra: String) -> String {
            "\(method) sip:alice@10.0.0.1 SIP/2.0\nVia: SIP/2.0/UDP 10.0.0.2;branch=\(branch)\nFrom: <sip:bob@10.0.0.2>;tag=b\n"
                + "To: <sip:alice@10.0.0.1>;tag=a\nCall-ID: t1\nCSeq: \(cseq) \(method)\nMax-Forwards: 70\n\(extra)Content-Length: 0\n\n"
        }
        func toBob(_ code: Int, _ cseq: Int, _ method: String, _ branch: String) -> String {
            "SIP/2.0 \(code) OK\nVia: SIP/2.0/UDP 10.0.0.2;branch=\(branch)\nFrom: <sip:bob@10.0.0.2>;tag=b\n"
                + "To: <sip:alice@10.0.0.1>;tag=a\nCall-ID: t1\nCSeq: \(cseq) \(method)\nContact: <sip:alice@10.0.0.1>\nContent-Length: 0\n\n"
        }
        func notify(_ cseq: Int, _ state: String, _ frag: String, _ branch: String) -> String {
            "NOTIFY sip:bob@10.0.0.2 SIP/2.0\nVia: SIP/2.0/UDP 10.0.0.1;branch=\(branch)\nFrom: <sip:alice@10.0.0.1>;tag=a\n"
                + "To: <sip:bob@10.0.0.2>;tag=b\nCall-ID: t1\nCSeq: \(cseq) NOTIFY\nMax-Forwards: 70\nContact: <sip:alice@10.0.0.1>\n"
                + "Event: refer\nSubscription-State: \(state)\nContent-Type: message/sipfrag\nContent-Length: \(frag.utf8.count + 2)\n\n\(frag)\n"
        }
        c.add(bob("REFER", 1, "z9hG4bK-r1", "Contact: <sip:bob@10.0.0.2>\nRefer-To: <sip:carol@10.0.0.3>\nReferred-By: <sip:bob@10.0.0.2>\n"),
              at: 2000, from: 2, to: 1)
        c.add(toBob(202, 1, "REFER", "z9hG4bK-r1"), at: 2010, from: 1, to: 2)
        c.add(notify(2, "active;expires=60", "SIP/2.0 100 Trying", "z9hG4bK-n2"), at: 2020, from: 1, to: 2)
        c.add(S.response(200, "OK", callID: "t1", cseq: 2, method: "NOTIFY", branch: "z9hG4bK-n2"), at: 2030, from: 2, to: 1)
        c.add(S.request("INVITE", callID: "t2", cseq: 1, branch: "z9hG4bK-t2", extra: "Referred-By: <sip:bob@10.0.0.2>\n")
                .replacingOccurrences(of: "INVITE sip:bob@10.0.0.2", with: "INVITE sip:carol@10.0.0.3"), at: 2040, from: 1, to: 3)
        c.add(S.response(200, "OK", callID: "t2", cseq: 1, method: "INVITE", branch: "z9hG4bK-t2", extra: contact), at: 2100, from: 3, to: 1)
        c.add(S.request("ACK", callID: "t2", cseq: 1, branch: "z9hG4bK-t2a", toTag: "b"), at: 2110, from: 1, to: 3)
        c.add(notify(3, "terminated;reason=noresource", "SIP/2.0 200 OK", "z9hG4bK-n3"), at: 2120, from: 1, to: 2)
        c.add(S.response(200, "OK", callID: "t1", cseq: 3, method: "NOTIFY", branch: "z9hG4bK-n3"), at: 2130, from: 2, to: 1)
        c.add(bob("BYE", 2, "z9hG4bK-y2", ""), at: 2200, from: 2, to: 1)
        c.add(toBob(200, 2, "BYE", "z9hG4bK-y2"), at: 2210, from: 1, to: 2)
        let path = try Self.write(c.bytes)
        defer { unlink(path) }
        let r = CaptureCommand.run(path: path, view: .check)
        #expect(r.exitCode == 0, "\(r.text)")
        let text = r.text
        #expect(text.contains("Story of 2 linked calls: [1] t1 (answered) [2] t2 (answered)"), "\(text)")
        let lines = [
            "[1] 10.0.0.1:5060 -> 10.0.0.2:5060  INVITE to sip:bob@10.0.0.2",
            "[1] 10.0.0.2:5060 -> 10.0.0.1:5060  REFER (Referred-By), Refer-To sip:carol@10.0.0.3",
            "[1] 10.0.0.1:5060 -> 10.0.0.2:5060  202 OK to the REFER",
            "[1] 10.0.0.1:5060 -> 10.0.0.2:5060  NOTIFY (100 Trying, active)",
            "[2] 10.0.0.1:5060 -> 10.0.0.3:5060  INVITE (Referred-By) to sip:carol@10.0.0.3",
            "[2] 10.0.0.3:5060 -> 10.0.0.1:5060  200 OK",
            "[1] 10.0.0.1:5060 -> 10.0.0.2:5060  NOTIFY (200 OK, terminated)",
            "[1] 10.0.0.2:5060 -> 10.0.0.1:5060  BYE",
        ]
        var from = text.startIndex
        for line in lines {
            guard let found = text.range(of: line, range: from..<text.endIndex) else {
                Issue.record("missing or out of order: \(line)\n\(text)")
                break
            }
            from = found.upperBound
        }
        let json = try CaptureCorpus.jsonObject(r.json)
        let stories = try #require(json["stories"] as? [[String: Any]])
        #expect(stories.count == 1 && (stories.first?["calls"] as? [String]) == ["t1", "t2"])
        #expect((stories.first?["steps"] as? [[String: Any]])?.count == 10, "\(stories)")
    }

    @Test(.timeLimit(.minutes(1)), arguments: ["udp", "tcp"])
    func aHundredCleanDialCallsAgainstServeHaveNoFinding(_ transport: String) async throws {
        let path = NSTemporaryDirectory() + "capture-check-serve-\(UUID().uuidString).pcapng"
        defer { unlink(path) }
        let sink = try CaptureFileSink(path: path)
        let serve = try ServeCommand(listen: [try ListenSpec.parse("\(transport):127.0.0.1:0")], answer: 200)
        let port = try #require(serve.endpoint.localAddresses.first).address.port
        let r = try await DialCommand.run(target: "sip:test@127.0.0.1:\(port)", count: 100, rate: 200,
                                          listen: try ListenSpec.parse("\(transport):127.0.0.1:0"), timeout: .seconds(20), capture: sink)
        #expect(r.succeeded == 100, "\(r.failures)")
        try await Task.sleep(for: .milliseconds(200))
        serve.endpoint.close()
        sink.close()
        let report = CaptureCommand.run(path: path, view: .check)
        #expect(report.error == nil)
        #expect(report.analysis.calls.count == 100)
        #expect(report.analysis.calls.allSatisfy { $0.findings.isEmpty }, "\(report.text)")
        #expect(report.exitCode == 0)
        #expect(report.text.contains("100 calls checked, 0 findings"), "\(report.text)")
    }

    /// The check of the capture at `path` of two calls with our phone at `dut`, told to break a
    /// rule (`fault`) or not: exactly the fault's rule, every finding the phone's, exit 1; or, from
    /// a clean phone, nothing and exit 0. The report, for what a test looks at beyond that.
    @discardableResult
    static func expectOnlyTheFault(_ fault: Misbehaviour?, capture path: String, dut: String,
                                   sourceLocation: SourceLocation = #_sourceLocation) -> CaptureCommand.Report {
        let r = CaptureCommand.run(path: path, view: .check)
        #expect(r.error == nil, sourceLocation: sourceLocation)
        #expect(r.analysis.calls.count == 2, sourceLocation: sourceLocation)
        let findings = r.analysis.calls.flatMap(\.findings)
        if let fault {
            #expect(Set(findings.map(\.rule)) == [fault.brokenRule], "\(r.text)", sourceLocation: sourceLocation)
            #expect(findings.allSatisfy { $0.party.description == dut }, "\(r.text)", sourceLocation: sourceLocation)
            #expect(r.exitCode == 1, sourceLocation: sourceLocation)
        } else {
            #expect(findings.isEmpty, "\(r.text)", sourceLocation: sourceLocation)
            #expect(r.exitCode == 0, sourceLocation: sourceLocation)
        }
        return r
    }

    /// Our answering phone told to break a rule (`switchboard answer --misbehave`), called by the
    /// conformance runner (which holds its ACK back 2.6 s in `2xx-retransmission`) with every
    /// datagram recorded: the capture check finds exactly the fault's rule, and nothing on a
    /// clean phone.
    @Test(.timeLimit(.minutes(1)), arguments: [nil, Misbehaviour.no2xxRetransmission, .noContactIn2xx, .wrongToTag])
    func theFaultOfOurUASIsFoundInItsCapture(_ fault: Misbehaviour?) async throws {
        let phone = try CaptureSideTests.phone("dut", autoAnswer: .milliseconds(300), fault: fault)
        defer { phone.close() }
        let path = NSTemporaryDirectory() + "capture-check-fault-\(UUID().uuidString).pcapng"
        defer { unlink(path) }
        let capture = try CaptureWriter(path: path)
        let port = phone.agent.endpoint.localAddresses[0].address.port
        let runner = ConformanceRunner(target: try SIPURI("sip:dut@127.0.0.1:\(port)"), responseTimeout: .seconds(2), capture: capture)
        let report = try await runner.run(suite: "uas", only: ["basic-call", "2xx-retransmission"])
        capture.close()
        #expect(report.results.count == 2)

        Self.expectOnlyTheFault(fault, capture: path, dut: "127.0.0.1:\(port)")
        if let fault {
            // The conformance runner named the same rule.
            #expect(Set(report.results.flatMap(\.findings).map(\.rule)) == [fault.brokenRule])
        }
    }

    /// Our calling phone told to break a rule (`switchboard call --misbehave`), calling the
    /// conformance runner's uac suite (`basic-call`, then `2xx-retransmission-ack`, where the
    /// runner sends its 200 twice more after the ACK) with every datagram recorded: the check
    /// finds exactly the fault's rule, by the phone, through the layer that sees it:
    /// `reuse-branch` (the 2xx's ACK on the INVITE's branch) only our INVITE server transaction
    /// sees; nothing on a clean phone. (`no-ack-retransmission` is not here: the runner ends its
    /// test 0.5 s after the unacknowledged copy, the last packet of the capture, and a copy
    /// that recent is not judged — the capture may have been cut short.)
    @Test(.timeLimit(.minutes(1)), arguments: [nil, Misbehaviour.reuseBranch])
    func theFaultOfOurCallerIsFoundInItsCapture(_ fault: Misbehaviour?) async throws {
        let phone = try CaptureSideTests.phone("dut", fault: fault)
        defer { phone.close() }
        let path = NSTemporaryDirectory() + "capture-check-caller-\(UUID().uuidString).pcapng"
        defer { unlink(path) }
        let capture = try CaptureWriter(path: path)
        let port = freeUDPPort()
        let target = try SIPURI("sip:conform@127.0.0.1:\(port)")
        let tests = ["basic-call", "2xx-retransmission-ack"]
        let runner = ConformanceRunner(target: target, responseTimeout: .seconds(3), capture: capture)
        async let running = runner.run(suite: "uac", only: Set(tests))
        try await Task.sleep(for: .milliseconds(100))
        for _ in tests {
            let call = await phone.dial(target)
            if (try? await call.waitUntil("answer", timeout: .seconds(8)) { $0.isEstablished })?.isEstablished == true {
                try? await Task.sleep(for: .seconds(1))
                await call.hangUp(timeout: .seconds(4))
            } else {
                _ = try? await call.waitUntil("end", timeout: .seconds(8)) { $0.isEnded }
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        let report = try await running
        capture.close()
        #expect(report.results.count == 2)

        let r = Self.expectOnlyTheFault(fault, capture: path, dut: "127.0.0.1:\(CaptureSideTests.port(phone))")
        let findings = r.analysis.calls.flatMap(\.findings)
        if fault != nil {
            #expect(findings.allSatisfy { $0.layers == .transaction }, "\(r.text)")
            // Once per call: the ACK of each call's 2xx (its copies' ACKs on the same branch are not told again).
            #expect(findings.count == 2 && Set(findings.map(\.callID)).count == 2, "\(r.text)")
            #expect(r.text.contains("(found by our transaction machine)"), "\(r.text)")
        }
    }
}
