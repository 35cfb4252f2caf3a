import Foundation
import Synchronization
import SwitchboardTestSupport
import Testing
import SIPMessage
import SIPTransport
import SIPDialog
import SIPAuth
@testable import SIPRuntime
import SIPProxy
import NetworkIO

/// SIPp against Switchboard's registrar and proxy: the REGISTER-challenge scenario of the SIPp
/// project (read in place from ../shared/corpora), and SIPp's built-in `uac` calling, through
/// the proxy, a Switchboard phone registered there.
@Suite("SIPp with the Switchboard registrar", .enabled(if: SIPp.available || SIPp.isCI, "sipp (Debian sip-tester) is not installed: SIPp interop skipped"),
       .requires("sipp (Debian sip-tester)", { SIPp.available }))
struct SIPpRegistrarTests {
    static func proxy(users: [String: String], recordRoute: Bool, algorithms: [DigestAlgorithm] = [.sha256, .md5]) throws -> (SIPEndpoint, ProxyServer) {
        let box = Mutex<ProxyServer?>(nil)
        let endpoint = try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { e in
            box.withLock { $0 }?.handle(e)
        }
        let p = ProxyServer(configuration: .init(domain: "switchboard.test", users: users, recordRoute: recordRoute, algorithms: algorithms))
        p.attach(endpoint)
        box.withLock { $0 = p }
        return (endpoint, p)
    }

    @Test("SIPp's uc360_register_challenge scenario registers through a 401 with our registrar", .timeLimit(.minutes(1)),
          .enabled(if: TestPaths.corporaHas("sipp/sipp-srtp-auth/uc360_register_challenge.xml") || TestPaths.isCI, "corpora absent"),
          .requiresCorpus("sipp/sipp-srtp-auth/uc360_register_challenge.xml"))
    func registerChallenge() async throws {
        // SIPp 3.6 answers only the first challenge and only with MD5.
        let (endpoint, proxy) = try Self.proxy(users: ["16001": "asdfzxcvqwer"], recordRoute: false, algorithms: [.md5])
        defer { endpoint.close() }
        let port = endpoint.localAddresses[0].address.port
        let scenario = TestPaths.corpus("sipp/sipp-srtp-auth/uc360_register_challenge.xml")
        let (p, dir) = try SIPp.start(["127.0.0.1:\(port)", "-sf", scenario, "-i", "127.0.0.1", "-p", "\(try SIPp.freePort())",
                                       "-m", "5", "-r", "10", "-nostdin", "-timeout", "20", "-timeout_error"])
        let status = await SIPp.wait(p, timeout: .seconds(30))
        #expect(status == 0, "sipp exit \(String(describing: status)):\n\(SIPp.log(dir))")
        // Five REGISTER pairs (challenge, then credentials); one binding at the end.
        #expect(proxy.statistics.registers == 10)
        #expect(proxy.bindings(of: try SIPURI("sip:16001@127.0.0.1")).count == 1)
    }

    @Test("SIPp's uac calls a Switchboard phone registered with our registrar, through our proxy", .timeLimit(.minutes(1)))
    func uacThroughProxy() async throws {
        // SIPp's built-in uac ignores Record-Route: the proxy stays out of the dialog here.
        let (endpoint, proxy) = try Self.proxy(users: ["service": "servicepw"], recordRoute: false)
        defer { endpoint.close() }
        let port = endpoint.localAddresses[0].address.port
        let agent = try SIPUserAgent(configuration: .init(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]),
                                                          identity: try SIPURI("sip:service@switchboard.test"),
                                                          credentials: DigestClient(username: "service", password: "servicepw"),
                                                          reliableProvisional: .unsupported, sessionTimer: nil))
        defer { agent.close() }
        // One consumer of the agent's events: it answers each call and counts the ends.
        let counts = Counters()
        let task = Task {
            for await e in agent.events {
                switch e {
                case .incomingCall(let key, _):
                    try? await agent.perform(key) { s throws(SessionError) in try s.provisional(180) }
                    let answer = SessionBody.sdp("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 6000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n")
                    try? await agent.perform(key) { s throws(SessionError) in try s.accept(body: answer) }
                    counts.bump(\.answered)
                case .session(_, .stateChanged(.terminated(.remoteHangup))):
                    counts.bump(\.ended)
                case .registration(.registered, _):
                    counts.bump(\.registered)
                default:
                    break
                }
            }
        }
        defer { task.cancel() }
        await agent.register(registrar: try SIPURI("sip:switchboard.test"), peer: endpoint.localAddresses[0], expires: 600)
        try #require(await counts.wait { $0.registered == 1 }, "not registered")

        let (p, dir) = try SIPp.start(["127.0.0.1:\(port)", "-sn", "uac", "-s", "service", "-i", "127.0.0.1", "-p", "\(try SIPp.freePort())",
                                       "-m", "50", "-r", "50", "-nostdin", "-timeout", "20", "-timeout_error", "-buff_size", "4194304"])
        let status = await SIPp.wait(p, timeout: .seconds(30))
        #expect(status == 0, "sipp exit \(String(describing: status)):\n\(SIPp.log(dir))")
        try #require(await counts.wait { $0.ended == 50 }, "calls ended: \(counts.value)")
        #expect(counts.value.answered == 50)
        // SIPp sends everything to the proxy: INVITE and BYE are forwarded in transactions, ACK statelessly.
        #expect(proxy.statistics.forwarded == 100)
        #expect(proxy.statistics.acks == 50)
        #expect(agent.sessionCount == 0)
    }
}

/// Counters shared between a test and the task consuming an agent's events.
final class Counters: Sendable {
    struct Values: Sendable { var answered = 0, ended = 0, registered = 0 }
    private let m = Mutex(Values())
    var value: Values { m.withLock { $0 } }
    func bump(_ k: WritableKeyPath<Values, Int>) { m.withLock { $0[keyPath: k] += 1 } }
    /// Waits (at most 10 s) for a condition.
    func wait(_ condition: (Values) -> Bool) async -> Bool {
        let clock = ContinuousClock(), deadline = clock.now + .seconds(10)
        while clock.now < deadline {
            if condition(value) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition(value)
    }
}
