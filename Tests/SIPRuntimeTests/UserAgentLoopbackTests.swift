import Synchronization
import Testing
import SIPMessage
import SIPTransaction
import SIPTransport
import SIPDialog
import SIPAuth
@testable import SIPRuntime
import SIPProxy
import NetworkIO

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
        // Resume from bob's side, once alice's ACK has closed her re-INVITE at bob (§14.1).
        var ready = false
        for _ in 0..<500 where !ready {
            ready = await bob.session(bk)?.canOffer == true
            if !ready { try await Task.sleep(for: .milliseconds(10)) }
        }
        try #require(ready, "bob's INVITE transaction did not close")
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

    @Test("MESSAGE and OPTIONS outside dialogs: answered 200, the MESSAGE reaches the other application", .timeLimit(.minutes(1)))
    func outOfDialogRequests() async throws {
        let alice = try Self.agent("alice"), bob = try Self.agent("bob")
        defer { alice.close(); bob.close() }
        let b = AgentEvents(bob)
        let text = SessionBody(contentType: MediaType(type: "text", subtype: "plain"), bytes: Array("hello bob".utf8))
        let r = await alice.sendRequest(.message, to: try Self.uri(of: bob, "bob"), body: text)
        #expect(r?.statusCode == 200)
        try #require(await b.wait("MESSAGE") { es in es.contains { if case .request(let m, _) = $0 { return m.method == .message && Array(m.body) == text.bytes } else { return false } } })
        let o = await alice.sendRequest(.options, to: try Self.uri(of: bob, "bob"))
        #expect(o?.statusCode == 200)
        #expect(try o?.allow().contains(.invite) == true)
        let sub = await alice.sendRequest(.subscribe, to: try Self.uri(of: bob, "bob"))
        #expect(sub?.statusCode == 405)
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

@Suite("Registrar and proxy on 127.0.0.1")
struct ProxyLoopbackTests {
    static func proxy(recordRoute: Bool = true) throws -> (SIPEndpoint, ProxyServer) {
        let box = Mutex<ProxyServer?>(nil)
        let endpoint = try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { e in
            box.withLock { $0 }?.handle(e)
        }
        let p = ProxyServer(configuration: .init(domain: "switchboard.test", users: ["alice": "alicepw", "bob": "bobpw"], recordRoute: recordRoute))
        p.attach(endpoint)
        box.withLock { $0 = p }
        return (endpoint, p)
    }

    static func agent(_ user: String, password: String?, proxyPort: UInt16) throws -> SIPUserAgent {
        try SIPUserAgent(configuration: .init(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]),
                                              identity: try SIPURI("sip:\(user)@switchboard.test"),
                                              credentials: password.map { DigestClient(username: user, password: $0) },
                                              outboundProxy: try SIPURI("sip:127.0.0.1:\(proxyPort)")))
    }

    /// A proxy, alice registered through it (digest) and bob using it as outbound proxy.
    struct Parties {
        let pe: SIPEndpoint, proxy: ProxyServer, alice: SIPUserAgent, bob: SIPUserAgent, a: AgentEvents, b: AgentEvents
        func close() { alice.close(); bob.close(); pe.close() }
    }

    static func aliceRegistered() async throws -> Parties {
        let (pe, proxy) = try Self.proxy()
        let port = pe.localAddresses[0].address.port
        let alice = try Self.agent("alice", password: "alicepw", proxyPort: port)
        let bob = try Self.agent("bob", password: nil, proxyPort: port)
        let parties = Parties(pe: pe, proxy: proxy, alice: alice, bob: bob, a: AgentEvents(alice), b: AgentEvents(bob))
        await alice.register(registrar: try SIPURI("sip:switchboard.test"), peer: pe.localAddresses[0], expires: 600)
        let registered = await parties.a.wait("registered") { es in
            es.contains { if case .registration(.registered, _) = $0 { return true } else { return false } }
        }
        if !registered { parties.close() }
        try #require(registered)
        return parties
    }

    @Test("alice registers with digest, bob calls her through the proxy with Record-Route, holds, and she hangs up", .timeLimit(.minutes(1)))
    func callThroughProxy() async throws {
        let parties = try await Self.aliceRegistered()
        defer { parties.close() }
        let (proxy, alice, bob, a, b) = (parties.proxy, parties.alice, parties.bob, parties.a, parties.b)
        #expect(proxy.bindings(of: try SIPURI("sip:alice@switchboard.test")).count == 1)

        let key = await bob.call(try SIPURI("sip:alice@switchboard.test"), offer: UserAgentLoopbackTests.offer)
        try #require(await a.wait("incoming") { _ in !a.incoming.isEmpty })
        let ak = a.incoming[0]
        let invite = try #require(a.events.withLock { $0.compactMap { e -> SIPMessage? in if case .incomingCall(_, let m) = e { return m } else { return nil } }.first })
        #expect(try invite.recordRoute().count == 1)
        #expect(try invite.via().count == 2)
        try await alice.perform(ak) { s throws(SessionError) in try s.accept(body: UserAgentLoopbackTests.answer) }
        try #require(await b.wait("bob confirmed", b.has(key, .confirmed)))
        try #require(await a.wait("alice confirmed", a.has(ak, .confirmed)))
        // The dialog's route set goes through the proxy.
        #expect(await bob.session(key)?.dialog?.routeSet.count == 1)

        let hold = SessionBody.sdp("v=0\r\ns=hold\r\n")
        try await bob.perform(key) { s throws(SessionError) in try s.reinvite(body: hold) }
        try #require(await a.wait("hold offer") { es in es.contains { if case .session(ak, .remoteOffer(hold, .invite)) = $0 { return true } else { return false } } })
        try await alice.perform(ak) { s throws(SessionError) in try s.answer(.sdp("v=0\r\ns=held\r\n")) }
        try #require(await b.wait("hold done") { es in es.contains { if case .session(key, .requestCompleted(.invite, 200, _)) = $0 { return true } else { return false } } })

        try await alice.perform(ak) { s throws(SessionError) in try s.bye() }
        try #require(await b.wait("bob ended", b.has(key, .terminated(.remoteHangup))))
        try #require(await a.wait("alice ended", a.has(ak, .terminated(.localHangup))))
        let st = proxy.statistics
        #expect(st.registers == 2)   // challenged, then with credentials
        #expect(st.forwarded >= 3)   // INVITE, re-INVITE, BYE
        #expect(st.acks >= 2)

        await alice.unregister()
        try #require(await a.wait("unregistered") { es in es.contains { if case .registration(.unregistered, _) = $0 { return true } else { return false } } })
        #expect(proxy.bindings(of: try SIPURI("sip:alice@switchboard.test")).isEmpty)
    }

    @Test("a Request-URI the proxy resolved before is resolved again once a REGISTER removed the binding", .timeLimit(.minutes(1)))
    func resolvedRequestURIForgottenOnRegister() async throws {
        let parties = try await Self.aliceRegistered()
        defer { parties.close() }
        let (alice, bob, a, b) = (parties.alice, parties.bob, parties.a, parties.b)
        // Twice to her binding (the second time from what the proxy kept).
        for round in 0..<2 {
            let key = await bob.call(try SIPURI("sip:alice@switchboard.test"), offer: UserAgentLoopbackTests.offer)
            try #require(await a.wait("incoming \(round)") { _ in a.incoming.count == round + 1 })
            try await alice.perform(a.incoming[round]) { s throws(SessionError) in try s.reject(486) }
            try #require(await b.wait("486 \(round)", b.has(key, .terminated(.rejected(486)))))
        }
        await alice.unregister()
        try #require(await a.wait("unregistered") { es in es.contains { if case .registration(.unregistered, _) = $0 { return true } else { return false } } })
        let key = await bob.call(try SIPURI("sip:alice@switchboard.test"), offer: UserAgentLoopbackTests.offer)
        try #require(await b.wait("404", b.has(key, .terminated(.rejected(404)))))
        #expect(a.incoming.count == 2)
    }

    @Test("a call to an address of record nobody registered gets 404; a wrong password fails registration", .timeLimit(.minutes(1)))
    func notFoundAndBadPassword() async throws {
        let (pe, _) = try Self.proxy()
        defer { pe.close() }
        let port = pe.localAddresses[0].address.port
        let bob = try Self.agent("bob", password: "wrong", proxyPort: port)
        defer { bob.close() }
        let b = AgentEvents(bob)
        let key = await bob.call(try SIPURI("sip:carol@switchboard.test"), offer: UserAgentLoopbackTests.offer)
        try #require(await b.wait("404", b.has(key, .terminated(.rejected(404)))))
        await bob.register(registrar: try SIPURI("sip:switchboard.test"), peer: pe.localAddresses[0])
        try #require(await b.wait("bad credentials") { es in es.contains { if case .registration(.failed(.badCredentials), _) = $0 { return true } else { return false } } })
    }

    @Test("an endpoint whose handler holds the proxy itself: answered while attached, ignored once detached", .timeLimit(.minutes(1)))
    func detached() async throws {
        let proxy = ProxyServer(configuration: .init(domain: "switchboard.test", users: [:]))
        let pe = try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { e in proxy.handle(e) }
        defer { pe.close() }
        proxy.attach(pe)
        let bob = try Self.agent("bob", password: nil, proxyPort: pe.localAddresses[0].address.port)
        defer { bob.close() }
        let nobody = try SIPURI("sip:nobody@switchboard.test")
        #expect(await bob.sendRequest(.options, to: nobody)?.statusCode == 404)
        #expect(proxy.statistics.notFound == 1)
        proxy.detach()
        // No answer comes (the agent would wait for its transaction's timeout): the proxy counts nothing.
        let late = Task { await bob.sendRequest(.options, to: nobody) }
        try await Task.sleep(for: .milliseconds(500))
        #expect(proxy.statistics.notFound == 1)
        late.cancel()
    }
}
