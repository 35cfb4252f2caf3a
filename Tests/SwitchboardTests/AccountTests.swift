import Testing
import Synchronization
import SIPMessage
import SIPAuth
import SIPDialog
import SIPRuntime
import SIPProxy
import SIPTransport
import NetworkIO
@testable import Switchboard
import SwitchboardTestSupport

/// Several accounts on one phone, against two of our digest-authenticating registrar/proxies:
/// each registers with its own credentials and Contact, receives the calls for its address,
/// places calls as itself, and leaves with the phone.
@Suite("Phone accounts: several identities on one phone")
struct AccountTests {
    /// A registrar/proxy for `domain` on 127.0.0.1 with these users.
    static func proxy(_ domain: String, users: [String: String]) throws -> (SIPEndpoint, ProxyServer) {
        let box = Mutex<ProxyServer?>(nil)
        let endpoint = try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { e in
            box.withLock { $0 }?.handle(e)
        }
        let p = ProxyServer(configuration: .init(domain: domain, users: users))
        p.attach(endpoint)
        box.withLock { $0 = p }
        return (endpoint, p)
    }

    static func phone(_ identity: String, password: String, outboundProxy: SIPURI? = nil, trace: (@Sendable (SIPMessage, Bool, SIPPeer) -> Void)? = nil) throws -> Phone {
        let user = try SIPURI(identity).user ?? ""
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: CallTests.fast),
                                           identity: try SIPURI(identity), credentials: DigestClient(username: user, password: password),
                                           outboundProxy: outboundProxy)
        c.sessionTimer = nil
        return try Phone(name: user, configuration: c, trace: trace)
    }

    static func uri(_ endpoint: SIPEndpoint) throws -> SIPURI { try SIPURI("sip:127.0.0.1:\(endpoint.localAddresses[0].address.port)") }

    /// The first incoming call of `phone` within `timeout`.
    static func nextIncoming(_ phone: Phone, _ calls: AsyncStream<Call>, timeout: Duration = .seconds(5)) async -> Call? {
        await within(timeout) { for await c in calls { return c }; return nil }
    }

    @Test("two accounts register with their own credentials; each gets its own calls; both unregister at shutdown", .timeLimit(.minutes(1)))
    func twoAccounts() async throws {
        let (registrar, proxy) = try Self.proxy("switchboard.test", users: ["alice": "alicepw", "bob": "bobpw", "carol": "carolpw"])
        defer { registrar.close() }
        let here = try Self.uri(registrar)
        let phone = try Self.phone("sip:alice@switchboard.test", password: "alicepw", outboundProxy: here)
        let bob = try phone.addAccount(.init(addressOfRecord: try SIPURI("sip:bob@switchboard.test"), displayName: "Bob",
                                             credentials: DigestClient(username: "bob", password: "bobpw"), registrar: here))
        #expect(phone.accounts.map(\.id) == [0, 1])
        #expect(phone.account.isPrimary && !bob.isPrimary && bob.contactUser == "bob")
        try await phone.register(with: here, expires: 300)
        try await bob.register(timeout: .seconds(5))
        #expect(bob.registrationState.isRegistered && phone.registrationState.isRegistered)
        // Each binding carries its own user in the Contact, at the phone's one address.
        let port = phone.agent.endpoint.localAddresses[0].address.port
        let bobBinding = try #require(proxy.bindings(of: try SIPURI("sip:bob@switchboard.test")).first)
        let aliceBinding = try #require(proxy.bindings(of: try SIPURI("sip:alice@switchboard.test")).first)
        #expect(bobBinding.contact.sipURI?.user == "bob" && bobBinding.contact.sipURI?.port == port, "\(bobBinding.contact)")
        #expect(aliceBinding.contact.sipURI?.user == "alice" && aliceBinding.contact.sipURI?.port == port, "\(aliceBinding.contact)")

        // Carol calls bob, then alice, through the proxy: the calls arrive for their accounts.
        let carol = try Self.phone("sip:carol@switchboard.test", password: "carolpw", outboundProxy: here)
        defer { carol.close() }
        let arrivals = phone.incomingCallStream
        let toBob = await carol.dial(try SIPURI("sip:bob@switchboard.test"))
        let forBob = try #require(await Self.nextIncoming(phone, arrivals))
        #expect(forBob.account === bob)
        try await forBob.answer()
        try await toBob.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        let toAlice = await carol.dial(try SIPURI("sip:alice@switchboard.test"))
        let forAlice = try #require(await Self.nextIncoming(phone, arrivals))
        #expect(forAlice.account === phone.account)
        try await forAlice.reject(486)
        try await toAlice.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        await toBob.hangUp()

        // Bob places a call: carol sees bob (and his display name) in From.
        let carolArrivals = carol.incomingCallStream
        let fromBob = try await bob.dial(try SIPURI("sip:carol@switchboard.test"))
        #expect(fromBob.account === bob)
        // Carol is not registered: the proxy answers 404, and the call ends; register her and retry.
        try await fromBob.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        try await carol.register(with: here, expires: 300)
        let again = try await bob.dial(try SIPURI("sip:carol@switchboard.test"))
        let atCarol = try #require(await Self.nextIncoming(carol, carolArrivals))
        #expect(atCarol.remote?.description.hasPrefix("sip:bob@switchboard.test") == true, "\(String(describing: atCarol.remote))")
        try await atCarol.answer()
        try await again.waitUntil(timeout: .seconds(5)) { $0.isEstablished }

        // Shutdown ends the call and removes both bindings.
        await phone.shutdown(timeout: .seconds(5))
        #expect(proxy.bindings(of: try SIPURI("sip:bob@switchboard.test")).isEmpty)
        #expect(proxy.bindings(of: try SIPURI("sip:alice@switchboard.test")).isEmpty)
        #expect(bob.registrationHistory.contains(.unregistering))
    }

    @Test("the same user at two providers: distinct Contacts, each provider's calls reach its account", .timeLimit(.minutes(1)))
    func sameUserTwoProviders() async throws {
        let (home, _) = try Self.proxy("switchboard.test", users: ["alice": "alicepw", "carol": "carolpw"])
        defer { home.close() }
        let (work, workProxy) = try Self.proxy("work.test", users: ["alice": "workpw", "dave": "davepw"])
        defer { work.close() }
        let phone = try Self.phone("sip:alice@switchboard.test", password: "alicepw")
        defer { phone.close() }
        let office = try phone.addAccount(.init(addressOfRecord: try SIPURI("sip:alice@work.test"),
                                                credentials: DigestClient(username: "alice", password: "workpw"), registrar: try Self.uri(work)))
        #expect(office.contactUser == "alice-1")
        try await phone.register(with: try Self.uri(home), expires: 300)
        try await office.register(timeout: .seconds(5))
        let binding = try #require(workProxy.bindings(of: try SIPURI("sip:alice@work.test")).first)
        #expect(binding.contact.sipURI?.user == "alice-1")
        // A second account with the same address of record is refused.
        #expect(throws: AccountError.duplicate(try SIPURI("sip:alice@WORK.test"))) {
            try phone.addAccount(.init(addressOfRecord: try SIPURI("sip:alice@WORK.test")))
        }
        let dave = try Self.phone("sip:dave@work.test", password: "davepw", outboundProxy: try Self.uri(work))
        defer { dave.close() }
        let arrivals = phone.incomingCallStream
        let call = await dave.dial(try SIPURI("sip:alice@work.test"))
        let arrived = try #require(await Self.nextIncoming(phone, arrivals))
        #expect(arrived.account === office)
        try await arrived.reject(603)
        try await call.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        await office.unregister(timeout: .seconds(5))
        #expect(workProxy.bindings(of: try SIPURI("sip:alice@work.test")).isEmpty)
        #expect(phone.registrationState.isRegistered, "the other account's registration is untouched")
    }

    @Test("a wrong password fails that account only; a registration-free account never registers and dials with its token",
          .timeLimit(.minutes(1)))
    func failuresAndRegistrationFree() async throws {
        let (registrar, _) = try Self.proxy("switchboard.test", users: ["alice": "alicepw", "bob": "bobpw"])
        defer { registrar.close() }
        let phone = try Self.phone("sip:alice@switchboard.test", password: "alicepw")
        defer { phone.close() }
        let bob = try phone.addAccount(.init(addressOfRecord: try SIPURI("sip:bob@switchboard.test"),
                                             credentials: DigestClient(username: "bob", password: "wrong"), registrar: try Self.uri(registrar)))
        await #expect(throws: RegistrationError.failed(.badCredentials)) { try await bob.register(timeout: .seconds(5)) }
        #expect(phone.registrationState == .unregistered)
        try await phone.register(with: try Self.uri(registrar), expires: 300)
        #expect(bob.registrationState == .failed(.badCredentials))

        // Registration-free: the token goes in every call of the account.
        let invites = Mutex<[SIPMessage]>([])
        let callee = try Self.phone("sip:carol@127.0.0.1", password: "-", trace: { m, outgoing, _ in
            if !outgoing, m.method == .invite { invites.withLock { $0.append(m) } }
        })
        defer { callee.close() }
        let free = try phone.addAccount(.init(addressOfRecord: try SIPURI("sip:kiosk@tenant.example"), registration: .none,
                                              sessionToken: "tok-123"))
        await #expect(throws: RegistrationError.registrationFree) { try await free.register() }
        let arrivals = callee.incomingCallStream
        let port = callee.agent.endpoint.localAddresses[0].address.port
        let call = try await free.dial(try SIPURI("sip:carol@127.0.0.1:\(port)"))
        let arrived = try #require(await Self.nextIncoming(callee, arrivals))
        try await arrived.reject(486)
        try await call.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        let invite = try #require(invites.withLock { $0.first })
        #expect(invite.values(.authorization) == ["Bearer tok-123"])
        #expect(try invite.from().uri.description == "sip:kiosk@tenant.example")
        // A call's own token wins over the account's.
        let other = try await free.dial(try SIPURI("sip:carol@127.0.0.1:\(port)"), options: CallOptions(sessionToken: "once"))
        let second = try #require(await Self.nextIncoming(callee, arrivals))
        try await second.reject(486)
        try await other.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(invites.withLock { $0.count } == 2 && invites.withLock { $0[1].values(.authorization) } == ["Bearer once"])
        // Removing an account forgets it; the phone's own stays.
        await phone.removeAccount(free)
        await phone.removeAccount(phone.account)
        #expect(phone.accounts.map(\.id) == [0, 1])
    }
}
