import Synchronization
import Testing
import SIPMessage
import SIPTransaction
import SIPTransport
import SIPDialog
import SIPAuth
@testable import SIPRuntime

/// Records a user agent's events and waits for conditions on them, with a bound.
final class AgentEvents: Sendable {
    final class Store: Sendable {
        let list = Mutex<[SIPUserAgent.Event]>([])
        func withLock<T>(_ body: (inout [SIPUserAgent.Event]) -> T) -> T { list.withLock { body(&$0) } }
    }
    let events = Store()
    let task: Task<Void, Never>

    init(_ agent: SIPUserAgent) {
        let events = self.events
        task = Task {
            for await e in agent.events { events.withLock { $0.append(e) } }
        }
    }

    /// Waits until `condition` holds over the events so far, at most `timeout`.
    @discardableResult
    func wait(_ what: String, timeout: Duration = .seconds(10), _ condition: ([SIPUserAgent.Event]) -> Bool) async -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while clock.now < deadline {
            if condition(events.withLock { $0 }) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("timed out waiting for \(what)")
        return false
    }

    func states(_ key: SessionKey) -> [SessionState] {
        events.withLock { $0.compactMap { e in
            if case .session(key, .stateChanged(let s)) = e { return s } else { return nil }
        } }
    }

    var incoming: [SessionKey] {
        events.withLock { $0.compactMap { e in if case .incomingCall(let k, _) = e { return k } else { return nil } } }
    }

    func has(_ key: SessionKey, _ state: SessionState) -> ([SIPUserAgent.Event]) -> Bool {
        { events in events.contains { if case .session(key, .stateChanged(let s)) = $0 { return s == state } else { return false } } }
    }
}

@Suite("SIPUserAgent on 127.0.0.1")
struct UserAgentLoopbackTests {
    static let offer = SessionBody.sdp("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\na=sendrecv\r\n")
    static let answer = SessionBody.sdp("v=0\r\no=- 2 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 5000 RTP/AVP 0\r\na=sendrecv\r\n")

    static func agent(_ user: String, transport: TransportKind = .udp, credentials: DigestClient? = nil,
                      outboundProxy: SIPURI? = nil) throws -> SIPUserAgent {
        let local = try SocketAddress(ip: "127.0.0.1", port: 0)
        let listen: [SIPEndpoint.ListenPoint] = transport == .tcp ? [.tcp(local)] : [.udp(local)]
        return try SIPUserAgent(configuration: .init(endpoint: .init(listen: listen), identity: try SIPURI("sip:\(user)@127.0.0.1"),
                                                     credentials: credentials, outboundProxy: outboundProxy, transport: transport))
    }

    static func uri(of agent: SIPUserAgent, _ user: String) throws -> SIPURI {
        guard case .sip(let u) = agent.contact.uri else { throw SessionError.badRequest("no contact") }
        var t = u
        t.user = user
        return t
    }

    @Test("call, ring, answer, hold and resume by re-INVITE, hang up", .timeLimit(.minutes(1)), arguments: [TransportKind.udp, .tcp])
    func callHoldHangUp(transport: TransportKind) async throws {
        let alice = try Self.agent("alice", transport: transport)
        let bob = try Self.agent("bob", transport: transport)
        defer { alice.close(); bob.close() }
        let a = AgentEvents(alice), b = AgentEvents(bob)

        let key = await alice.call(try Self.uri(of: bob, "bob"), offer: Self.offer)
        try #require(await b.wait("incoming call") { _ in !b.incoming.isEmpty })
        let bk = b.incoming[0]
        try await bob.perform(bk) { s throws(SessionError) in try s.provisional(180) }
        try #require(await a.wait("ringing", a.has(key, .proceeding(180))))
        try await bob.perform(bk) { s throws(SessionError) in try s.accept(body: Self.answer) }
        try #require(await a.wait("alice confirmed", a.has(key, .confirmed)))
        try #require(await b.wait("bob confirmed", b.has(bk, .confirmed)))

        // Hold: alice offers sendonly, bob answers recvonly.
        let hold = SessionBody.sdp(String(decoding: Self.offer.bytes, as: UTF8.self).replacingOccurrences(of: "sendrecv", with: "sendonly"))
        try await alice.perform(key) { s throws(SessionError) in try s.reinvite(body: hold) }
        try #require(await b.wait("hold offer") { es in es.contains { if case .session(bk, .remoteOffer(let o, .invite)) = $0 { return o == hold } else { return false } } })
        let held = SessionBody.sdp(String(decoding: Self.answer.bytes, as: UTF8.self).replacingOccurrences(of: "sendrecv", with: "recvonly"))
        try await bob.perform(bk) { s throws(SessionError) in try s.answer(held) }
        try #require(await a.wait("hold answered") { es in es.contains { if case .session(key, .requestCompleted(.invite, 200, _)) = $0 { return true } else { return false } } })
        // Resume from bob's side.
        try await bob.perform(bk) { s throws(SessionError) in try s.reinvite(body: Self.answer) }
        try #require(await a.wait("resume offer") { es in es.contains { if case .session(key, .remoteOffer(let o, .invite)) = $0 { return o == Self.answer } else { return false } } })
        try await alice.perform(key) { s throws(SessionError) in try s.answer(Self.offer) }
        try #require(await b.wait("resume answered") { es in es.contains { if case .session(bk, .requestCompleted(.invite, 200, _)) = $0 { return true } else { return false } } })

        try await alice.perform(key) { s throws(SessionError) in try s.bye() }
        try #require(await a.wait("alice ended", a.has(key, .terminated(.localHangup))))
        try #require(await b.wait("bob ended", b.has(bk, .terminated(.remoteHangup))))
        #expect(a.states(key) == [.calling, .proceeding(180), .confirmed, .terminating, .terminated(.localHangup)])
        #expect(b.states(bk) == [.incoming, .early, .connecting, .confirmed, .terminated(.remoteHangup)])
        #expect(alice.sessionCount == 0 && bob.sessionCount == 0)
    }

    @Test("CANCEL of a ringing call over real sockets", .timeLimit(.minutes(1)))
    func cancel() async throws {
        let alice = try Self.agent("alice"), bob = try Self.agent("bob")
        defer { alice.close(); bob.close() }
        let a = AgentEvents(alice), b = AgentEvents(bob)
        let key = await alice.call(try Self.uri(of: bob, "bob"), offer: Self.offer)
        try #require(await b.wait("incoming") { _ in !b.incoming.isEmpty })
        let bk = b.incoming[0]
        try await bob.perform(bk) { s throws(SessionError) in try s.provisional(180) }
        try #require(await a.wait("ringing", a.has(key, .proceeding(180))))
        try await alice.perform(key) { s throws(SessionError) in try s.cancel() }
        try #require(await a.wait("cancelled", a.has(key, .terminated(.cancelled))))
        try #require(await b.wait("remote cancelled", b.has(bk, .terminated(.remoteCancelled))))
    }

    @Test("a call to a port nobody listens on fails with a timeout or transport error, bounded", .timeLimit(.minutes(1)))
    func unreachable() async throws {
        let timers = TransactionTimers(t1: .milliseconds(20), t2: .milliseconds(80))
        let alice = try SIPUserAgent(configuration: .init(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: timers),
                                                          identity: try SIPURI("sip:alice@127.0.0.1")))
        defer { alice.close() }
        let a = AgentEvents(alice)
        // A bound but silent socket: nothing answers.
        let silent = try UDPTransport(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0)) { _ in }
        defer { silent.close() }
        let key = await alice.call(try SIPURI("sip:nobody@127.0.0.1:\(silent.localAddress.port)"), offer: Self.offer)
        try #require(await a.wait("timeout", a.has(key, .terminated(.timeout))))
    }
}
