import Foundation
import Testing
import NetworkIO
import PacketCapture
import SIPMessage
import SIPRuntime
import SIPpScenario
import Switchboard
import SwitchboardTestSupport
import Conformance
import CaptureReplay
@testable import SwitchboardTools
@testable import CaptureAnalysis

/// SIPp run as a child process, bounded in time (posix_spawn with an empty signal mask, so that
/// its `-timeout` alarm fires even when started from a pool thread).
enum SIPpChild {
    static let path: String? = ExternalTool.find(["/usr/bin/sipp", "/usr/local/bin/sipp"])

    /// SIPp's exit status (nil when killed at `timeout`) and the tail of its output.
    static func run(_ arguments: [String], timeout: Double) async -> (status: Int32?, log: String) {
        await SpawnedTool.run(path ?? "/usr/bin/sipp", arguments, timeout: timeout)
    }
}

/// `switchboard capture FILE --sipp-scenario` and `--replay`: a call between two of our phones
/// is captured; its caller's and callee's sides become SIPp scenarios that our reader takes and
/// real SIPp plays against our phones; the caller's side replayed against a phone gives no
/// difference, against a faulty or busy one the differences are named.
@Suite("capture: a call's side as a SIPp scenario and replayed", .serialized)
struct CaptureSideTests {
    static func phone(_ user: String, autoAnswer: Duration? = nil, fault: Misbehaviour? = nil, capture: (any SIPTrafficSink)? = nil) throws -> Phone {
        var endpoint = SIPEndpoint.Configuration(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])
        endpoint.outboundRewrite = fault?.rewriter()
        endpoint.capture = capture
        var c = SIPUserAgent.Configuration(endpoint: endpoint, identity: try SIPURI("sip:\(user)@127.0.0.1"))
        c.sessionTimer = nil
        return try Phone(name: user, configuration: c, autoAnswer: autoAnswer, metrics: nil)
    }

    static func port(_ p: Phone) -> UInt16 { p.agent.endpoint.localAddresses[0].address.port }

    static func freePort() -> UInt16 {
        for _ in 0..<50 {
            let p = UInt16.random(in: 20_000...40_000)
            if !udpPortIsBound(p) { return p }
        }
        return 0
    }

    /// A call from alice (recording to a pcapng) to bob (answering after 200 ms), hung up by
    /// alice after 300 ms; returns the capture's path.
    static func capturedCall() async throws -> String {
        let path = NSTemporaryDirectory() + "capture-side-\(UUID().uuidString).pcapng"
        let sink = try CaptureFileSink(path: path)
        let bob = try phone("bob", autoAnswer: .milliseconds(200))
        let alice = try phone("alice", capture: sink)
        defer { alice.close(); bob.close() }
        let call = await alice.dial(try SIPURI("sip:bob@127.0.0.1:\(port(bob))"))
        try await call.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        try await Task.sleep(for: .milliseconds(300))
        await call.hangUp(timeout: .seconds(5))
        try await Task.sleep(for: .milliseconds(100))
        sink.close()
        return path
    }

    static func write(_ text: String) -> String {
        let path = NSTemporaryDirectory() + "capture-side-\(UUID().uuidString).xml"
        #expect(ParseCommand.writeFile(path, Array(text.utf8)))
        return path
    }

    @Test(.timeLimit(.minutes(1)))
    func bothSidesExportAsScenariosOurReaderTakes() async throws {
        let path = try await Self.capturedCall()
        defer { unlink(path) }
        let call = try CapturedCall.load(path: path, call: "1")
        #expect(call.number == 1)
        #expect(try CapturedCall.load(path: path, call: call.callID).messages.count == call.messages.count)
        #expect(throws: CaptureSideError.noCall("2")) { try CapturedCall.load(path: path, call: "2") }

        let caller = try SIPpScenarioExport.scenario(call, party: .caller, source: path)
        let uac = try SIPpScenario.parse(caller)
        #expect(uac.startsBySending)
        for keyword in ["[call_id]", "[branch]", "[local_ip]:[local_port]", "[remote_ip]:[remote_port]", "Content-Length: [len]",
                        "[next_url]", "[peer_tag_param]", "[pid]SIPpTag00[call_number]", "[media_ip]", "[media_port]", "rrs=\"true\""] {
            #expect(caller.contains(keyword), "\(keyword) missing:\n\(caller)")
        }
        // The captured per-call values are gone.
        #expect(!caller.contains("Call-ID: \(call.callID)") && caller.contains("Call-ID: [call_id]"))
        // The 180 is reliable (100rel): its RSeq goes into the PRACK's RAck.
        #expect(caller.contains("header=\"RSeq:\" assign_to=\"rseq"), "\(caller)")
        #expect(caller.contains("RAck: [$rseq"), "\(caller)")
        #expect(caller.contains("<recv response=\"180\">"), "\(caller)")
        #expect(caller.contains("<recv response=\"200\" rrs=\"true\"/>"))

        let callee = try SIPpScenarioExport.scenario(call, party: .callee, source: path)
        let uas = try SIPpScenario.parse(callee)
        #expect(!uas.startsBySending)
        for keyword in ["[last_Via:]", "[last_From:]", "[last_To:];tag=[pid]SIPpTag01[call_number]", "[last_Call-ID:]", "[last_CSeq:]",
                        "<recv request=\"INVITE\" rrs=\"true\"", "<recv request=\"ACK\"/>", "<recv request=\"BYE\"/>"] {
            #expect(callee.contains(keyword), "\(keyword) missing:\n\(callee)")
        }
        // The callee's side by address is the same scenario.
        let byAddress = try SIPpScenarioExport.scenario(call, party: .endpoint(call.callee), source: path)
        #expect(byAddress.split(separator: "\n").dropFirst(4) == callee.split(separator: "\n").dropFirst(4))
        // The 200 INVITE comes after the PRACK: its Via and CSeq are the INVITE's, kept in variables.
        #expect(callee.contains("CSeq: [$cseq") && callee.contains("Via: [$via"), "\(callee)")
        #expect(throws: CaptureSideError.self) { try SIPpScenarioExport.scenario(call, party: try CaptureParty(parsing: "192.0.2.1:5060")) }
        #expect(throws: CaptureSideError.badParty("nobody")) { try CaptureParty(parsing: "nobody") }

        // The command writes the file and says what it wrote; a missing call exits 1.
        let out = NSTemporaryDirectory() + "capture-side-\(UUID().uuidString).xml"
        defer { unlink(out) }
        let r = CaptureSideCommand.exportScenario(path: path, call: nil, party: "caller", output: out)
        #expect(r.exitCode == 0, "\(r.text)")
        #expect(r.text.contains("the caller side of call 1"), "\(r.text)")
        #expect(try String(contentsOfFile: out, encoding: .utf8) == caller)
        #expect(CaptureSideCommand.exportScenario(path: path, call: "7", party: "caller", output: out).exitCode == 1)
        #expect(CaptureSideCommand.exportScenario(path: "/nonexistent.pcap", call: nil, party: "caller", output: out).exitCode == 65)
    }

    /// A cancelled call and a call the callee hangs up, hand-made: the CANCEL and the ACK of the
    /// 487 keep the INVITE's branch (`[last_Via:]`) and its Request-URI; the callee's BYE takes
    /// the caller's tag from an `ereg` of the INVITE's From; both sides parse in our reader.
    @Test func cancelAndCalleeByeExportWithTheirKeywords() throws {
        typealias S = SyntheticCapture
        var c = SyntheticCapture()
        c.add(S.request("INVITE", callID: "x", cseq: 1, branch: "z9hG4bK-x1"), at: 1000, from: 1, to: 2)
        c.add(S.response(180, "Ringing", callID: "x", cseq: 1, method: "INVITE", branch: "z9hG4bK-x1"), at: 1010, from: 2, to: 1)
        c.add(S.request("CANCEL", callID: "x", cseq: 1, branch: "z9hG4bK-x1"), at: 2000, from: 1, to: 2)
        c.add(S.response(200, "OK", callID: "x", cseq: 1, method: "CANCEL", branch: "z9hG4bK-x1"), at: 2010, from: 2, to: 1)
        c.add(S.response(487, "Request Terminated", callID: "x", cseq: 1, method: "INVITE", branch: "z9hG4bK-x1"), at: 2020, from: 2, to: 1)
        c.add(S.request("ACK", callID: "x", cseq: 1, branch: "z9hG4bK-x1", toTag: "b"), at: 2030, from: 1, to: 2)
        c.add(S.request("INVITE", callID: "y", cseq: 1, branch: "z9hG4bK-y1"), at: 3000, from: 1, to: 2)
        c.add(S.response(200, "OK", callID: "y", cseq: 1, method: "INVITE", branch: "z9hG4bK-y1", extra: "Contact: <sip:bob@10.0.0.2>\n"),
              at: 3100, from: 2, to: 1)
        c.add(S.request("ACK", callID: "y", cseq: 1, branch: "z9hG4bK-y2", toTag: "b"), at: 3110, from: 1, to: 2)
        c.add("BYE sip:alice@10.0.0.1 SIP/2.0\nVia: SIP/2.0/UDP 10.0.0.2;branch=z9hG4bK-y3\nFrom: <sip:bob@10.0.0.2>;tag=b\n"
              + "To: <sip:alice@10.0.0.1>;tag=a\nCall-ID: y\nCSeq: 1 BYE\nMax-Forwards: 70\nContent-Length: 0\n\n", at: 5000, from: 2, to: 1)
        c.add(S.response(200, "OK", callID: "y", cseq: 1, method: "BYE", branch: "z9hG4bK-y3"), at: 5010, from: 1, to: 2)
        let path = NSTemporaryDirectory() + "capture-side-synthetic-\(UUID().uuidString).pcap"
        #expect(ParseCommand.writeFile(path, c.bytes))
        defer { unlink(path) }

        let cancelled = try CapturedCall.load(path: path, call: "1")
        #expect(cancelled.callID == "x" && cancelled.messages.count == 6)
        let caller = try SIPpScenarioExport.scenario(cancelled, party: .caller)
        _ = try SIPpScenario.parse(caller)
        #expect(caller.contains("CANCEL sip:bob@[remote_ip] SIP/2.0\n      [last_Via:]"), "\(caller)")
        #expect(caller.contains("ACK sip:bob@[remote_ip] SIP/2.0\n      [last_Via:]"), "\(caller)")
        #expect(caller.contains("<recv response=\"487\"/>") && caller.contains("<pause milliseconds=\"990\"/>"), "\(caller)")

        let hungUp = try CapturedCall.load(path: path, call: "y")
        #expect(hungUp.number == 2)
        let callee = try SIPpScenarioExport.scenario(hungUp, party: .callee)
        _ = try SIPpScenario.parse(callee)
        #expect(callee.contains("assign_to=\"peertag\""), "\(callee)")
        #expect(callee.contains("BYE [next_url] SIP/2.0"), "\(callee)")
        #expect(callee.contains("From: <sip:bob@10.0.0.2>;tag=[pid]SIPpTag01[call_number]"), "\(callee)")
        #expect(callee.contains("To: <sip:alice@10.0.0.1>[$peertag]"), "\(callee)")
        let callerY = try SIPpScenarioExport.scenario(hungUp, party: .caller)
        _ = try SIPpScenario.parse(callerY)
        // The caller answers the BYE from the request's own fields; its To already has the tag.
        #expect(callerY.contains("<recv request=\"BYE\"/>") && callerY.contains("SIP/2.0 200 OK\n      [last_Via:]"), "\(callerY)")
        #expect(callerY.contains("      [last_To:]\n"), "\(callerY)")

        #expect(try CaptureParty(parsing: "[::1]:5062") == .endpoint(CaptureEndpoint(address: IPAddress("::1")!, port: 5062)))
        #expect(try CaptureParty(parsing: "10.0.0.2:5060") == .endpoint(hungUp.callee))
        #expect(throws: CaptureSideError.badParty("10.0.0.2")) { try CaptureParty(parsing: "10.0.0.2") }
    }

    /// The caller's side run by SIPp against a live answering phone, and the callee's side run
    /// by SIPp as the UAS a phone calls: both calls complete (SIPp exits 0).
    @Test(.timeLimit(.minutes(2)), .requires("sipp (Debian sip-tester)", { SIPpChild.path != nil }))
    func realSIPpPlaysBothSidesAgainstOurPhones() async throws {
        let path = try await Self.capturedCall()
        defer { unlink(path) }
        let call = try CapturedCall.load(path: path)
        let callerXML = Self.write(try SIPpScenarioExport.scenario(call, party: .caller, source: path))
        let calleeXML = Self.write(try SIPpScenarioExport.scenario(call, party: .callee, source: path))
        defer { unlink(callerXML); unlink(calleeXML) }

        // Caller: SIPp calls a phone that answers.
        let bob = try Self.phone("bob", autoAnswer: .milliseconds(100))
        defer { bob.close() }
        let uac = await SIPpChild.run(["127.0.0.1:\(Self.port(bob))", "-sf", callerXML, "-i", "127.0.0.1", "-p", "\(Self.freePort())",
                                       "-m", "1", "-nostdin", "-timeout", "20"], timeout: 30)
        #expect(uac.status == 0, "sipp as the caller:\n\(uac.log)")

        // Callee: a phone calls SIPp, which answers as the captured callee did.
        let sippPort = Self.freePort()
        async let uas = SIPpChild.run(["-sf", calleeXML, "-i", "127.0.0.1", "-p", "\(sippPort)", "-m", "1", "-nostdin", "-timeout", "20"], timeout: 30)
        let bound = ContinuousClock.now + .seconds(5)
        while !udpPortIsBound(sippPort), ContinuousClock.now < bound { try await Task.sleep(for: .milliseconds(20)) }
        let alice = try Self.phone("alice")
        defer { alice.close() }
        let out = await alice.dial(try SIPURI("sip:bob@127.0.0.1:\(sippPort)"))
        try await out.waitUntil(timeout: .seconds(10)) { $0.isEstablished }
        try await Task.sleep(for: .milliseconds(300))
        await out.hangUp(timeout: .seconds(5))
        let u = await uas
        #expect(u.status == 0, "sipp as the callee:\n\(u.log)")
    }

    /// `switchboard dial`'s call to an answering phone, captured; the callee's side run by SIPp
    /// as the UAS that `dial` calls again: the call succeeds and SIPp exits 0.
    @Test(.timeLimit(.minutes(1)), .requires("sipp (Debian sip-tester)", { SIPpChild.path != nil }))
    func realSIPpPlaysTheCalleeOfADialCallAgainstDial() async throws {
        let path = NSTemporaryDirectory() + "capture-side-dial-\(UUID().uuidString).pcapng"
        defer { unlink(path) }
        let sink = try CaptureFileSink(path: path)
        let bob = try Self.phone("bob", autoAnswer: .milliseconds(100))
        let first = try await DialCommand.run(target: "sip:bob@127.0.0.1:\(Self.port(bob))", count: 1, rate: 10,
                                              listen: try ListenSpec.parse("udp:127.0.0.1:0"), timeout: .seconds(10), capture: sink)
        try await Task.sleep(for: .milliseconds(100))
        bob.close()
        sink.close()
        #expect(first.succeeded == 1, "\(first.failures)")
        let call = try CapturedCall.load(path: path)
        let xml = Self.write(try SIPpScenarioExport.scenario(call, party: .callee, source: path))
        defer { unlink(xml) }

        let sippPort = Self.freePort()
        async let uas = SIPpChild.run(["-sf", xml, "-i", "127.0.0.1", "-p", "\(sippPort)", "-m", "1", "-nostdin", "-timeout", "20"], timeout: 30)
        let bound = ContinuousClock.now + .seconds(5)
        while !udpPortIsBound(sippPort), ContinuousClock.now < bound { try await Task.sleep(for: .milliseconds(20)) }
        let again = try await DialCommand.run(target: "sip:bob@127.0.0.1:\(sippPort)", count: 1, rate: 10,
                                              listen: try ListenSpec.parse("udp:127.0.0.1:0"), timeout: .seconds(10))
        #expect(again.succeeded == 1, "\(again.failures)")
        let u = await uas
        #expect(u.status == 0, "sipp as the callee of dial:\n\(u.log)")
    }

    /// The caller's side replayed: against a phone like the captured one, the same answers;
    /// against one that leaves the Contact out of its 2xx, that header named; against a busy
    /// server, the 486 where the capture has 200 and the 180 missing.
    @Test(.timeLimit(.minutes(2)))
    func replayingTheCallerFindsTheDifferencesOfTheDevice() async throws {
        let path = try await Self.capturedCall()
        defer { unlink(path) }
        let call = try CapturedCall.load(path: path)
        func replay(_ port: UInt16) async throws -> CaptureReplay.Report {
            var o = CaptureReplayOptions(target: try SIPURI("sip:bob@127.0.0.1:\(port)"))
            o.linger = .milliseconds(300)
            o.requestTimeout = .seconds(2)
            return try await CaptureReplay.run(call, party: .caller, options: o)
        }

        let same = try Self.phone("bob", autoAnswer: .milliseconds(200))
        let clean = try await replay(Self.port(same))
        same.close()
        #expect(clean.differences.isEmpty, "\(clean.differences)")
        // Our phones use reliable provisionals: the caller PRACKs the 180.
        #expect(clean.steps.map(\.sent) == ["INVITE", "PRACK", "ACK", "BYE"], "\(clean.steps)")
        #expect(clean.steps.allSatisfy { $0.wasSent })
        #expect(clean.steps.flatMap(\.live).sorted() == ["180 INVITE", "200 BYE", "200 INVITE", "200 PRACK"], "\(clean.steps)")
        #expect(clean.callID != call.callID)

        let faulty = try Self.phone("bob", autoAnswer: .milliseconds(200), fault: .noContactIn2xx)
        let noContact = try await replay(Self.port(faulty))
        faulty.close()
        #expect(noContact.differences.contains { $0.kind == .headerMissing && $0.header == "Contact" && $0.live == "200 INVITE" },
                "\(noContact.differences)")
        #expect(noContact.differences.allSatisfy { $0.kind == .headerMissing }, "\(noContact.differences)")

        let busy = try ServeCommand(listen: [try ListenSpec.parse("udp:127.0.0.1:0")], answer: 486)
        let port = try #require(busy.endpoint.localAddresses.first).address.port
        let r = await CaptureSideCommand.replay(path: path, call: "1", party: "caller", target: "sip:bob@127.0.0.1:\(port)", json: false) {
            $0.linger = .milliseconds(300)
            $0.requestTimeout = .seconds(2)
        }
        busy.endpoint.close()
        #expect(r.exitCode == 1, "\(r.text)")
        #expect(r.text.contains("the device answered 486 INVITE where the capture has 200 INVITE"), "\(r.text)")
        #expect(r.text.contains("180 INVITE did not come"), "\(r.text)")
        // The ACK of the 486 went with the transaction; the BYE has no dialog to go in.
        #expect(r.text.contains("step 4: BYE (not sent)") && r.text.contains("step 2: PRACK (not sent)"), "\(r.text)")
        #expect(!r.text.contains("200 BYE did not come"), "\(r.text)")

        // The callee's side needs an address for the device to call.
        let json = await CaptureSideCommand.replay(path: path, call: nil, party: "callee", target: "sip:bob@127.0.0.1:\(port)", json: true)
        #expect(json.exitCode == 64 && json.text.contains("--listen"), "\(json.text)")
        #expect(await CaptureSideCommand.replay(path: path, call: nil, party: "caller", target: "sip:bob@example.com", json: true).exitCode == 64)
    }

    /// The callee's side replayed: it waits at its address, our phone (the device) calls it, and
    /// the replay answers as the captured callee did (reliable 180, 200 to the PRACK, the 200 with
    /// the SDP answer retransmitted until the ACK, 200 to the BYE): no difference. With nobody
    /// calling, the INVITE is the difference ("step 0").
    @Test(.timeLimit(.minutes(2)))
    func replayingTheCalleeAnswersTheDevicesCall() async throws {
        let path = try await Self.capturedCall()
        defer { unlink(path) }
        let call = try CapturedCall.load(path: path)
        let port = Self.freePort()
        var o = CaptureReplayOptions(target: try SIPURI("sip:alice@127.0.0.1"))
        o.local = try SocketAddress(ip: "127.0.0.1", port: port)
        o.linger = .milliseconds(300)
        o.requestTimeout = .seconds(3)
        o.callWait = .seconds(10)
        let options = o
        let replay = Task { try await CaptureReplay.run(call, party: .callee, options: options) }
        let bound = ContinuousClock.now + .seconds(5)
        while !udpPortIsBound(port), ContinuousClock.now < bound { try await Task.sleep(for: .milliseconds(10)) }
        let alice = try Self.phone("alice")
        defer { alice.close() }
        let out = await alice.dial(try SIPURI("sip:bob@127.0.0.1:\(port)"))
        try await out.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        try await Task.sleep(for: .milliseconds(300))
        await out.hangUp(timeout: .seconds(5))
        let r = try await replay.value
        #expect(r.differences.isEmpty, "\(r.differences) \(r.steps)")
        #expect(r.steps.allSatisfy { $0.wasSent }, "\(r.steps)")
        let sent = r.steps.map(\.sent)
        #expect(sent.contains("200 INVITE") && sent.contains("200 BYE") && sent.contains("200 PRACK") && sent.last == "200 BYE", "\(sent)")
        #expect(r.steps.flatMap(\.live).contains("ACK") && r.steps.flatMap(\.live).contains("BYE"), "\(r.steps)")
        #expect(r.callID != call.callID && r.local.port == port)

        // Nobody calls: the INVITE did not come, and nothing of the side could be sent.
        var quiet = options
        quiet.local = try SocketAddress(ip: "127.0.0.1", port: Self.freePort())
        quiet.callWait = .milliseconds(300)
        let none = try await CaptureReplay.run(call, party: .callee, options: quiet)
        #expect(none.differences.first?.description == "step 0: INVITE did not come (the capture has it)", "\(none.differences)")
        #expect(none.steps.allSatisfy { !$0.wasSent })
    }
}
