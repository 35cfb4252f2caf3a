import Foundation
import Testing
import NetworkIO
import SIPAuth
import SIPMessage
@testable import SIPpScenario
import SwitchboardTestSupport

/// The scenario reader: what it accepts, and each refusal with its element and line.
@Suite("SIPp scenario parsing")
struct ScenarioParseTests {
    func refusal(_ xml: String, keys: Set<String> = [], sourceLocation: SourceLocation = #_sourceLocation) -> SIPpScenarioError? {
        do {
            _ = try SIPpScenario.parse(xml, keys: keys)
            Issue.record("parsed, a refusal was expected", sourceLocation: sourceLocation)
            return nil
        } catch {
            return error
        }
    }

    static let invite = """
    <send retrans="500"><![CDATA[
      INVITE sip:[service]@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      Call-ID: [call_id]
      CSeq: [cseq] INVITE
      Content-Length: [len]
    ]]></send>
    """

    @Test func builtInsParseAndStartTheRightWay() throws {
        let uac = try SIPpScenario.parse(try #require(SIPpBuiltIn.xml("uac")))
        #expect(uac.startsBySending)
        #expect(uac.commands.count == 9)
        let uas = try SIPpScenario.parse(try #require(SIPpBuiltIn.xml("uas")))
        #expect(!uas.startsBySending)
        #expect(uas.commands.count == 6)
        // A response's recv is tied to the method of the request sent before it.
        guard case .recv(let last) = uac.commands[8].kind else { Issue.record("recv expected"); return }
        #expect(last.response == 200 && last.responseMethod == "BYE")
    }

    @Test func theProjectsFixturesParse() throws {
        for name in ["uac_expect_486", "uac_check_header", "uac_recv_timeout", "uac_actions", "uac_random", "uac_stop_call", "uac_auth", "uac_options"] {
            let text = try #require(readBytes(TestPathsForSIPp.fixture(name))).map { Character(Unicode.Scalar($0)) }
            _ = try SIPpScenario.parse(String(text), keys: ["subject"])
        }
    }

    @Test func malformedXMLNamesTheLine() {
        let unclosed = "<scenario name=\"x\">\n  \(Self.invite)\n  <recv response=\"200\">\n</scenario>\n"
        let e = refusal(unclosed)
        #expect(e?.line == 10)
        if case .malformedXML(let why)? = e?.kind { #expect(why.contains("</scenario> does not match <recv>")) } else { Issue.record("\(String(describing: e))") }

        let quote = refusal("<scenario>\n<recv response=200/>\n</scenario>")
        #expect(quote?.line == 2)
        if case .malformedXML(let why)? = quote?.kind { #expect(why.contains("not quoted")) } else { Issue.record("\(String(describing: quote))") }

        let cdata = refusal("<scenario>\n<send><![CDATA[\nINVITE sip:x SIP/2.0\n</send>\n</scenario>")
        #expect(cdata?.line == 2)
        let entity = refusal("<scenario>\n\n<log message=\"a &nbsp; b\"/></scenario>")
        #expect(entity?.line == 3)
        let trailing = refusal("<scenario><recv request=\"INVITE\"/></scenario>\n<x/>")
        #expect(trailing?.line == 2)
    }

    @Test func unsupportedElementsAreRefusedWithTheirLine() {
        let exec = refusal("<scenario>\n<recv request=\"INVITE\"/>\n<nop>\n<action>\n<exec play_pcap_audio=\"a.pcap\"/>\n</action>\n</nop>\n</scenario>")
        #expect(exec?.line == 5 && exec?.element == "exec" && exec?.kind == .unsupportedAttribute("play_pcap_audio"))
        let intCmd = refusal("<scenario>\n<recv request=\"INVITE\"/>\n<nop>\n<action>\n<exec int_cmd=\"reboot\"/>\n</action>\n</nop>\n</scenario>")
        #expect(intCmd?.line == 5)
        // A sample without its distribution's parameters names the one missing.
        let sample = refusal("<scenario>\n<recv request=\"INVITE\">\n<action><sample assign_to=\"x\" distribution=\"normal\"/></action></recv></scenario>")
        #expect(sample?.line == 3)
        if case .missingAttribute("mean")? = sample?.kind {} else { Issue.record("\(String(describing: sample))") }
        let setdest = refusal("<scenario>\n<recv request=\"INVITE\">\n<action><setdest host=\"a\" port=\"1\" protocol=\"udp\"/></action></recv></scenario>")
        #expect(setdest?.line == 3 && setdest?.kind == .unsupportedElement("setdest"))
        let init_ = refusal("<scenario>\n<init><nop/></init>\n<recv request=\"INVITE\"/></scenario>")
        #expect(init_?.line == 2)
        if case .unsupportedElement("init")? = init_?.kind {} else { Issue.record("\(String(describing: init_))") }
    }

    @Test func unsupportedAttributesAreRefused() {
        let lost = refusal("<scenario>\n<recv request=\"INVITE\" lost=\"10\"/></scenario>")
        #expect(lost?.line == 2 && lost?.kind == .unsupportedAttribute("lost"))
        let distribution = refusal("<scenario><recv request=\"INVITE\"/>\n\n<pause distribution=\"zipf\" min=\"1\" max=\"5\"/></scenario>")
        #expect(distribution?.line == 3)
        if case .invalidValue(attribute: "distribution", _, _)? = distribution?.kind {} else { Issue.record("\(String(describing: distribution))") }
        // A parameter of another distribution is refused too.
        let foreign = refusal("<scenario><recv request=\"INVITE\"/>\n<pause distribution=\"uniform\" min=\"1\" max=\"5\" mean=\"3\"/></scenario>")
        #expect(foreign?.line == 2 && foreign?.kind == .unsupportedAttribute("mean"))
        let chance = refusal("<scenario><recv request=\"INVITE\"/>\n<label id=\"a\"/>\n<nop next=\"a\" chance=\"1.5\"/></scenario>")
        #expect(chance?.line == 3)
        let chanceWithoutNext = refusal("<scenario><recv request=\"INVITE\"/>\n<nop chance=\"0.5\"/></scenario>")
        #expect(chanceWithoutNext?.line == 2)
        let global = refusal("<scenario>\n<recv request=\"INVITE\" optional=\"global\"/></scenario>")
        #expect(global?.line == 2)
        let auth = refusal("<scenario>\n<recv response=\"401\" auth=\"maybe\"/></scenario>")
        #expect(auth?.line == 2)
        let unknown = refusal("<scenario>\n<recv request=\"INVITE\"/>\n<send start_txn=\"invite\"><![CDATA[SIP/2.0 200 OK]]></send></scenario>")
        #expect(unknown?.line == 3 && unknown?.kind == .unsupportedAttribute("start_txn"))
    }

    @Test func unsupportedKeywordsNameTheirOwnLine() {
        let xml = "<scenario>\n<recv request=\"INVITE\"/>\n<send><![CDATA[\nSIP/2.0 200 OK\n[last_Via:]\nX-Map: [tdmmap]\nContent-Length: 0\n]]></send>\n</scenario>"
        let e = refusal(xml)
        #expect(e?.line == 6 && e?.kind == .unsupportedKeyword("tdmmap") && e?.element == "send")
        let auth = refusal("<scenario>\n<send><![CDATA[REGISTER sip:x SIP/2.0\n[authentication username=a]\n]]></send></scenario>")
        #expect(auth?.line == 3 && auth?.kind == .unsupportedKeyword("authentication username=a"))
        // A -key name is a keyword only when given.
        #expect(refusal("<scenario><send><![CDATA[OPTIONS sip:[target] SIP/2.0]]></send></scenario>")?.kind == .unsupportedKeyword("target"))
        #expect((try? SIPpScenario.parse("<scenario><send><![CDATA[OPTIONS sip:[target] SIP/2.0]]></send></scenario>", keys: ["target"])) != nil)
    }

    /// The second layer's elements parse into what the runner executes.
    @Test func distributionsChanceExecAndKeywordsParse() throws {
        let xml = """
        <scenario>
          <recv request="INVITE" auth="true" chance="0.25" next="end"/>
          <pause distribution="weibull" lambda="3" k="2"/>
          <pause distribution="fixed" value="7"/>
          <timewait milliseconds="30"/>
          <nop>
            <action>
              <sample assign_to="d" distribution="pareto" k="2" x_m="3"/>
              <exec command="echo [call_number] [$d]"/>
              <exec int_cmd="stop_gracefully"/>
            </action>
          </nop>
          <pause variable="d"/>
          <send><![CDATA[
            SIP/2.0 200 OK
            X: [last_Request_URI] [clock_tick] [timestamp] [users] [userid]
            [authentication username=alice password=secret]
          ]]></send>
          <label id="end"/>
        </scenario>
        """
        let s = try SIPpScenario.parse(xml)
        guard case .recv(let r) = s.commands[0].kind else { Issue.record("recv expected"); return }
        #expect(r.authentication && s.commands[0].chance == 0.25)
        guard case .pause(.random(.weibull(lambda: 3, k: 2))) = s.commands[1].kind else { Issue.record("\(s.commands[1].kind)"); return }
        guard case .pause(.random(.fixed(value: 7))) = s.commands[2].kind else { Issue.record("\(s.commands[2].kind)"); return }
        guard case .pause(.fixed(30)) = s.commands[3].kind else { Issue.record("\(s.commands[3].kind)"); return }
        #expect(s.commands[4].actions.count == 3)
        if case .sample(assignTo: "d", .pareto(k: 2, xm: 3)) = s.commands[4].actions[0] {} else { Issue.record("\(s.commands[4].actions[0])") }
        if case .execInternal(.stopGracefully) = s.commands[4].actions[2] {} else { Issue.record("\(s.commands[4].actions[2])") }
        guard case .pause(.variable("d")) = s.commands[5].kind else { Issue.record("\(s.commands[5].kind)"); return }
        guard case .send(let t, _) = s.commands[6].kind else { Issue.record("send expected"); return }
        let keywords = t.segments.compactMap { if case .keyword(let k) = $0 { return k } else { return nil } }
        #expect(keywords == [.lastRequestURI, .clockTick, .timestamp, .users, .userID, .authentication(username: "alice", password: "secret")])
    }

    /// Each distribution, drawn 20,000 times from a seeded generator, has the mean its
    /// parameters give (within 5 %), and the same seed draws the same values.
    @Test func distributionsHaveTheirMeans() {
        let cases: [(SIPpDistribution, Double)] = [
            (.fixed(value: 7), 7), (.uniform(min: 10, max: 30), 20), (.normal(mean: 100, stdev: 15), 100),
            (.lognormal(mean: 2, stdev: 0.5), exp(2 + 0.125)), (.exponential(mean: 40), 40),
            (.weibull(lambda: 10, k: 2), 10 * 0.886_226_925), (.pareto(k: 3, xm: 2), 3.0),
            (.gamma(k: 2, theta: 3), 6), (.gamma(k: 0.5, theta: 4), 2), (.negbin(n: 3, p: 0.5), 3),
        ]
        for (d, mean) in cases {
            var g = SIPpRandom(seed: 42)
            var sum = 0.0
            for _ in 0..<20_000 { sum += d.sample(using: &g) }
            let m = sum / 20_000
            #expect(abs(m - mean) <= 0.05 * mean, "\(d): mean \(m), expected \(mean)")
            var a = SIPpRandom(seed: 7), b = SIPpRandom(seed: 7)
            #expect(d.sample(using: &a) == d.sample(using: &b))
        }
        // Negative draws (a normal's tail) and huge ones pause 0 and a day, never trap.
        #expect(SIPpRunner.milliseconds(-5) == 0 && SIPpRunner.milliseconds(.infinity) == 0 && SIPpRunner.milliseconds(1e300) == 86_400_000)
    }

    @Test func labelsVariablesAndTheFirstCommandAreChecked() {
        let label = refusal("<scenario>\n<recv request=\"INVITE\" next=\"nowhere\"/></scenario>")
        #expect(label?.kind == .unknownLabel("nowhere") && label?.line == 2)
        let once = refusal("<scenario>\n<recv request=\"INVITE\">\n<action><ereg regexp=\"a\" search_in=\"msg\" assign_to=\"unused\"/></action></recv></scenario>")
        #expect(once?.line == 3)
        if case .invalidScenario(let why)? = once?.kind { #expect(why.contains("$unused")) } else { Issue.record("\(String(describing: once))") }
        let pause = refusal("<scenario>\n<pause milliseconds=\"10\"/><recv request=\"INVITE\"/></scenario>")
        #expect(pause?.line == 2)
        let regex = refusal("<scenario>\n<recv request=\"INVITE\">\n<action><ereg regexp=\"(unclosed\" search_in=\"msg\" check_it=\"true\"/></action></recv></scenario>")
        #expect(regex?.line == 3)
        let root = refusal("<?xml version=\"1.0\"?>\n<!DOCTYPE scenario SYSTEM \"sipp.dtd\">\n<sipp/>")
        #expect(root?.line == 3)
    }

    /// Out-of-range numbers and deep nesting are refused, never overflowed or recursed into.
    @Test func boundsAreRefusedNotOverflowed() {
        let pause = refusal("<scenario><recv request=\"INVITE\"/>\n<pause milliseconds=\"99999999999999999999\"/></scenario>")
        #expect(pause?.line == 2)
        let offset = refusal("<scenario><send><![CDATA[OPTIONS sip:x SIP/2.0\nCSeq: [cseq+9223372036854775807] OPTIONS\n]]></send></scenario>")
        #expect(offset?.kind == .unsupportedKeyword("cseq+9223372036854775807"))
        let deep = refusal("<scenario>" + String(repeating: "<a>", count: 10_000) + String(repeating: "</a>", count: 10_000) + "</scenario>")
        if case .malformedXML(let why)? = deep?.kind { #expect(why.contains("nested")) } else { Issue.record("\(String(describing: deep))") }
        for option in ["-d", "-m", "-l", "-r", "-recv_timeout", "-max_retrans"] {
            #expect(throws: SIPpUsageError.self) { try SIPpOptions.parse([option, "1e300"]) }
        }
        #expect(throws: SIPpUsageError.self) { try SIPpOptions.parse(["-timeout", "1e300"]) }
    }

    @Test func optionsParseAsSIPpsAndRefuseOthers() throws {
        let o = try SIPpOptions.parse(["127.0.0.1:5070", "-sn", "uac", "-i", "127.0.0.1", "-p", "5071", "-m", "10", "-r", "50", "-l", "5",
                                       "-key", "k", "v", "-set", "n", "3", "-timeout", "20s", "-nostdin", "-bg", "-t", "u1", "-trace_err"])
        #expect(o.remote?.port == 5070 && o.localPort == 5071 && o.maxCalls == 10 && o.rate == 50 && o.limit == 5)
        #expect(o.keys == ["k": "v"] && o.globals == ["n": "3"] && o.timeout == 20 && o.traceErrors)
        #expect(try SIPpOptions.parse(["-t", "t1"]).transport == .tcpOne)
        #expect(try SIPpOptions.parse(["-t", "tn"]).transport == .tcpPerCall)
        #expect(try SIPpOptions.parse(["-t", "un"]).transport == .udpPerCall)
        let tls = try SIPpOptions.parse(["-t", "l1", "-tls_cert", "c.pem", "-tls_key", "k.pem"])
        #expect(tls.transport == .tlsOne && tls.tlsCertificate == "c.pem" && tls.tlsKey == "k.pem")
        #expect(throws: SIPpUsageError.self) { try SIPpOptions.parse(["-sn", "3pcc-A"]) }
        #expect(throws: SIPpUsageError.self) { try SIPpOptions.parse(["-rtp_echo"]) }
        #expect(throws: SIPpUsageError.self) { try SIPpOptions.parse(["-m"]) }
        do {
            _ = try SIPpOptions.parse(["-t", "s1"])
            Issue.record("-t s1 (SCTP) was accepted")
        } catch {
            #expect(error.message.contains("not supported"))
        }
    }

    @Test func badUsageExitsWith255() async {
        let code = await SIPpCommandLine.run(arguments: ["-sn", "uac", "-t", "ui", "127.0.0.1:5060"], output: { _ in }, error: { _ in })
        #expect(code == 255)
        let noRemote = await SIPpCommandLine.run(arguments: ["-sn", "uac"], output: { _ in }, error: { _ in })
        #expect(noRemote == 255)
    }

    @Test func injectionFiles() throws {
        let inf = try SIPpInjection(parsing: "SEQUENTIAL\nbob;alice\n\ncarol;dave;x\n", file: "u.csv")
        #expect(inf.order == .sequential && inf.lines == [["bob", "alice"], ["carol", "dave", "x"]])
        #expect(throws: SIPpUsageError.self) { try SIPpInjection(parsing: "ORDERED\na;b\n", file: "u.csv") }
        #expect(throws: SIPpUsageError.self) { try SIPpInjection(parsing: "RANDOM\n", file: "u.csv") }
    }

    /// Messages are written as SIPp writes them: leading white space off each line, CRLF line
    /// ends, [len] the body's length, a header line emptied by a missing [last_*] dropped.
    @Test func messagesAreRenderedAsSIPpWritesThem() throws {
        let xml = """
        <scenario>
          <recv request="INVITE"/>
          <send><![CDATA[
            SIP/2.0 200 OK
            [last_Via:]
            [last_Record-Route:]
            [last_To:];tag=x[call_number]
            To-Again: <sip:a@b>[peer_tag_param]
            Content-Type: application/sdp
            Content-Length: [len]

            v=0
            o=- 1 1 IN IP[media_ip_type] [media_ip]
          ]]></send>
        </scenario>
        """
        let scenario = try SIPpScenario.parse(xml)
        var options = SIPpOptions()
        options.localIP = "127.0.0.1"
        let runner = SIPpRunner(scenario: scenario, options: options, traceName: "t")
        let invite = "INVITE sip:a@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5071;branch=z9hG4bK-1\r\nv: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK-2\r\nFrom: <sip:b@c>;tag=peer\r\nTo: <sip:a@b>\r\nCall-ID: c1\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
        var call = SIPpRunner.Call(number: 7, callID: "c1", peer: try SocketAddress(ip: "127.0.0.1", port: 5071), fieldLine: 0)
        call.last = try SIPMessage(bytes: Array(invite.utf8))
        guard case .send(let template, _) = scenario.commands[1].kind else { Issue.record("send expected"); return }
        let text = String(decoding: runner.render(template, call, SIPpRunner.RunState(globals: [:]), index: 1), as: UTF8.self)
        let body = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\n"
        #expect(text == "SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 127.0.0.1:5071;branch=z9hG4bK-1\r\nVia: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK-2\r\n"
                + "To: <sip:a@b>;tag=x7\r\nTo-Again: <sip:a@b>;tag=peer\r\nContent-Type: application/sdp\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body)
    }

    /// `recv rrs="true"` keeps the route set (reversed for a response, RFC 3261 §12.1.2) and the
    /// Contact: the ACK that follows carries them as `[routes]` and `[next_url]`; without
    /// Record-Route the `[routes]` line is dropped.
    @Test func recordRouteSetFeedsRoutesAndNextURL() throws {
        let xml = """
        <scenario>
          <send><![CDATA[
            INVITE sip:x@127.0.0.1 SIP/2.0
            Call-ID: [call_id]
            CSeq: 1 INVITE
          ]]></send>
          <recv response="200" rrs="true"/>
          <send><![CDATA[
            ACK [next_url] SIP/2.0
            [routes]
            CSeq: 1 ACK
          ]]></send>
          <recv request="BYE"/>
        </scenario>
        """
        let scenario = try SIPpScenario.parse(xml)
        let runner = SIPpRunner(scenario: scenario, options: SIPpOptions(), traceName: "t")
        let peer = try SocketAddress(ip: "127.0.0.1", port: 5070)
        func ack(_ headers: String) throws -> String {
            var s = SIPpRunner.RunState(globals: [:])
            var call = SIPpRunner.Call(number: 1, callID: "c1", peer: peer, fieldLine: 0)
            call.index = 1
            s.calls["c1"] = call
            let ok = "SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bK-1\r\n\(headers)From: <sip:a@b>;tag=1\r\nTo: <sip:x@b>;tag=2\r\nCall-ID: c1\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
            var out: [SIPpRunner.Outgoing] = []
            runner.handle(&s, try SIPMessage(bytes: Array(ok.utf8)), from: peer, now: .now, &out)
            #expect(s.calls["c1"]?.index == 3)
            return out.first.map { String(decoding: $0.bytes, as: UTF8.self) } ?? ""
        }
        #expect(try ack("Record-Route: <sip:p1@10.0.0.1;lr>\r\nRecord-Route: <sip:p2@10.0.0.2;lr>, <sip:p3@10.0.0.3;lr>\r\nContact: <sip:uas@10.0.0.9:5070;transport=udp>;expires=60\r\n")
                == "ACK sip:uas@10.0.0.9:5070;transport=udp SIP/2.0\r\nRoute: <sip:p3@10.0.0.3;lr>, <sip:p2@10.0.0.2;lr>, <sip:p1@10.0.0.1;lr>\r\nCSeq: 1 ACK\r\n\r\n")
        #expect(try ack("Contact: sip:uas@10.0.0.9\r\n") == "ACK sip:uas@10.0.0.9 SIP/2.0\r\nCSeq: 1 ACK\r\n\r\n")
    }

    /// `[authentication]` answers the challenge kept by `recv auth="true"`: `Proxy-Authorization`
    /// after a 407, with the method and Request-URI of its own message; without a challenge its
    /// line is dropped, not left empty (which would end the header section).
    @Test func authenticationAnswersTheKeptChallenge() throws {
        let xml = """
        <scenario>
          <send><![CDATA[
            REGISTER sip:registrar.test SIP/2.0
            [authentication username=alice password=secret]
            CSeq: 1 REGISTER
          ]]></send>
        </scenario>
        """
        let scenario = try SIPpScenario.parse(xml)
        let runner = SIPpRunner(scenario: scenario, options: SIPpOptions(), traceName: "t")
        guard case .send(let template, _) = scenario.commands[0].kind else { Issue.record("send expected"); return }
        var call = SIPpRunner.Call(number: 1, callID: "c1", peer: try SocketAddress(ip: "127.0.0.1", port: 5070), fieldLine: 0)
        #expect(String(decoding: runner.render(template, call, SIPpRunner.RunState(globals: [:]), index: 0), as: UTF8.self)
                == "REGISTER sip:registrar.test SIP/2.0\r\nCSeq: 1 REGISTER\r\n\r\n")
        let challenge = "SIP/2.0 407 Proxy Authentication Required\r\nVia: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bK-1\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:a@b>;tag=2\r\n"
            + "Call-ID: c1\r\nCSeq: 1 REGISTER\r\nProxy-Authenticate: Digest realm=\"r\", nonce=\"n\", algorithm=MD5\r\nContent-Length: 0\r\n\r\n"
        call.challenge = try SIPMessage(bytes: Array(challenge.utf8))
        let text = String(decoding: runner.render(template, call, SIPpRunner.RunState(globals: [:]), index: 0), as: UTF8.self)
        // RFC 2617 without qop: MD5(MD5(alice:r:secret):n:MD5(REGISTER:sip:registrar.test)).
        let ha1 = DigestAlgorithm.md5.hash("alice:r:secret"), ha2 = DigestAlgorithm.md5.hash("REGISTER:sip:registrar.test")
        let response = DigestAlgorithm.md5.hash("\(ha1):n:\(ha2)")
        #expect(text.hasPrefix("REGISTER sip:registrar.test SIP/2.0\r\nProxy-Authorization: Digest username=\"alice\", realm=\"r\", nonce=\"n\", uri=\"sip:registrar.test\", response=\"\(response)\""), "\(text)")
        #expect(text.hasSuffix("\r\nCSeq: 1 REGISTER\r\n\r\n"))
    }

    @Test func numbersPrintAsSIPpPrintsThem() {
        #expect(formatDouble(5) == "5.000000")
        #expect(formatDouble(-0.5) == "-0.500000")
        #expect(formatDouble(1.0 / 3) == "0.333333")
    }
}

enum TestPathsForSIPp {
    static func fixture(_ name: String) -> String { TestPaths.repoRoot + "/Fixtures/sipp/\(name).xml" }
}
