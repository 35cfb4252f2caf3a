import Testing
import SIPMessage
import SIPAuth
@testable import SIPDialog

/// A registrar for the tests: challenges with a real DigestServer, verifies, and grants
/// bindings (optionally with a minimum interval).
struct TestRegistrar {
    var server: DigestServer
    var now: Int64 = 1_000_000
    var minExpires: UInt32? = nil
    var maxExpires: UInt32 = 3600
    var rng = SystemRandomNumberGenerator()

    init(users: [String: String], key: String = "registrar-key") {
        server = DigestServer(configuration: .init(realm: "example.com", key: Array(key.utf8)), store: DigestPasswordTable(users))
    }

    mutating func answer(_ request: SIPMessage) -> SIPMessage {
        switch server.verify(request: request, now: now) {
        case .authenticated:
            let asked = (try? request.expires()) ?? 3600
            if let min = minExpires, asked != 0, asked < min {
                var r = SIPMessage(responseTo: request, statusCode: 423, toTag: "reg")
                try! r.append(.minExpires, String(min))
                return r
            }
            let granted = min(asked, maxExpires)
            var ok = SIPMessage(responseTo: request, statusCode: 200, toTag: "reg")
            if granted > 0, case .addresses(let a)? = try? request.contact(), var c = a.first {
                c.parameters.set("expires", String(granted))
                try! ok.append(.contact, c)
            }
            return ok
        case .stale:
            return challenge(request, stale: true)
        default:
            return challenge(request, stale: false)
        }
    }

    mutating func challenge(_ request: SIPMessage, stale: Bool) -> SIPMessage {
        var r = SIPMessage(responseTo: request, statusCode: 401, toTag: "reg")
        for c in server.challenges(now: now, stale: stale, using: &rng) { try! r.append(.wwwAuthenticate, c) }
        return r
    }
}

@Suite("Registration client (RFC 3261 §10)")
struct RegistrationClientTests {
    static let config = RegistrationClient.Configuration(
        registrar: try! SIPURI("sip:example.com"), addressOfRecord: try! SIPURI("sip:alice@example.com"),
        contact: try! SIPURI("sip:alice@192.0.2.10:5060"), expires: 600,
        instanceID: "urn:uuid:00000000-0000-1000-8000-000A95A0E128", regID: 1, viaSentBy: "192.0.2.10:5060")

    func sent(_ actions: [RegistrationClient.Action]) -> SIPMessage? {
        for a in actions { if case .send(let m) = a { return m } }
        return nil
    }

    func timer(_ actions: [RegistrationClient.Action]) -> Duration? {
        for a in actions { if case .startTimer(let d) = a { return d } }
        return nil
    }

    @Test func registersThroughAChallengeAndRefreshes() throws {
        var registrar = TestRegistrar(users: ["alice": "alicepw"])
        var client = RegistrationClient(configuration: Self.config, credentials: DigestClient(username: "alice", password: "alicepw"), seed: 1)
        let first = try #require(sent(client.start()))
        #expect(client.state == .registering)
        #expect(first.method == .register)
        #expect(try first.cseq().sequence == 1)
        let contact = try #require(try first.contact()?.addresses.first)
        #expect(contact.parameters["+sip.instance"] == .some("<urn:uuid:00000000-0000-1000-8000-000A95A0E128>"))
        #expect(contact.parameters["reg-id"] == .some("1"))
        try first.validate()
        let authed = try #require(sent(client.handle(.response(registrar.answer(first)))))
        #expect(try authed.cseq().sequence == 2)
        #expect(authed.callID == first.callID)
        #expect(try authed.authorization().first?.username == "alice")
        let done = client.handle(.response(registrar.answer(authed)))
        #expect(client.state == .registered(expires: 600))
        #expect(timer(done) == .seconds(540))
        // The refresh reuses the Call-ID, raises the CSeq and carries credentials for the
        // remembered challenge (nc=00000002), so the registrar accepts it at once.
        let refresh = try #require(sent(client.handle(.timerFired)))
        #expect(try refresh.cseq().sequence == 3)
        #expect(try refresh.authorization().first?.nonceCount == "00000002")
        _ = client.handle(.response(registrar.answer(refresh)))
        #expect(client.state == .registered(expires: 600))
        // Past the nonce's lifetime the registrar answers stale=true; the client re-answers
        // without treating it as a rejection.
        registrar.now += 10_000
        let late = try #require(sent(client.handle(.timerFired)))
        let reauth = try #require(sent(client.handle(.response(registrar.answer(late)))))
        _ = client.handle(.response(registrar.answer(reauth)))
        #expect(client.state == .registered(expires: 600))
    }

    @Test("a move re-registers at once: the new Contact added and the old one removed (expires=0) until a 2xx, then the new alone")
    func moveAddsTheNewContactAndRemovesTheOld() throws {
        var registrar = TestRegistrar(users: ["alice": "alicepw"])
        var client = RegistrationClient(configuration: Self.config, credentials: DigestClient(username: "alice", password: "alicepw"), seed: 1)
        let first = try #require(sent(client.start()))
        let authed = try #require(sent(client.handle(.response(registrar.answer(first)))))
        _ = client.handle(.response(registrar.answer(authed)))
        #expect(client.state == .registered(expires: 600))
        let oldContact = Self.config.contact
        let newContact = try SIPURI("sip:alice@192.0.2.99:5070")
        let actions = client.move(contact: newContact, viaSentBy: "192.0.2.99:5070")
        #expect(client.state == .registering)
        let moved = try #require(sent(actions))
        #expect(moved.callID == first.callID)
        #expect(try moved.cseq().sequence == 3)
        #expect(try moved.topVia().host.address == "192.0.2.99")
        let contacts = try #require(try moved.contact()?.addresses)
        #expect(contacts.count == 2)
        #expect(contacts[0].sipURI == newContact && contacts[0].parameters["expires"] == .some("600"))
        #expect(contacts[1].sipURI == oldContact && contacts[1].parameters["expires"] == .some("0"))
        #expect(try moved.authorization().first?.username == "alice", "the remembered challenge is answered at once")
        try moved.validate()
        _ = client.handle(.response(registrar.answer(moved)))
        #expect(client.state == .registered(expires: 600) && client.retiringContact == nil)
        let refresh = try #require(sent(client.handle(.timerFired)))
        let refreshed = try refresh.contact()?.addresses.map { $0.sipURI }
        #expect(refreshed == [newContact])
        // Moving to where it already is sends nothing; an unregistered client only remembers.
        #expect(client.move(contact: newContact, viaSentBy: "192.0.2.99:5070").isEmpty)
        var idle = RegistrationClient(configuration: Self.config, credentials: DigestClient(username: "alice", password: "alicepw"), seed: 2)
        #expect(idle.move(contact: newContact, viaSentBy: "192.0.2.99:5070").isEmpty)
        #expect(idle.configuration.contact == newContact)
    }

    @Test func wrongPasswordIsBadCredentials() throws {
        var registrar = TestRegistrar(users: ["alice": "alicepw"])
        var client = RegistrationClient(configuration: Self.config, credentials: DigestClient(username: "alice", password: "wrong"), seed: 2)
        let first = try #require(sent(client.start()))
        let authed = try #require(sent(client.handle(.response(registrar.answer(first)))))
        let out = client.handle(.response(registrar.answer(authed)))
        #expect(client.state == .failed(.badCredentials))
        #expect(sent(out) == nil)
        #expect(timer(out) == nil, "bad credentials need the user, not a retry")
    }

    @Test func intervalTooBriefRetriesWithMinExpires() throws {
        var registrar = TestRegistrar(users: ["alice": "alicepw"])
        registrar.minExpires = 1200
        var client = RegistrationClient(configuration: Self.config, credentials: DigestClient(username: "alice", password: "alicepw"), seed: 3)
        let first = try #require(sent(client.start()))
        let authed = try #require(sent(client.handle(.response(registrar.answer(first)))))
        let retry = try #require(sent(client.handle(.response(registrar.answer(authed)))))
        #expect(try retry.expires() == 1200)
        // The retry carries the credentials again, so it is accepted at once.
        _ = client.handle(.response(registrar.answer(retry)))
        #expect(client.state == .registered(expires: 1200))
    }

    @Test func failuresBackOffAndForbiddenStops() throws {
        var client = RegistrationClient(configuration: Self.config, credentials: DigestClient(username: "alice", password: "x"), seed: 4)
        _ = client.start()
        var waits: [Duration] = []
        for _ in 0..<8 {
            let out = client.handle(.timeout)
            #expect(client.state == .failed(.timeout))
            waits.append(try #require(timer(out)))
            _ = client.handle(.timerFired)
            #expect(client.state == .registering)
        }
        // Each wait lies in [½, 1] of 30 s · 2^(n−1), capped at 1800 s.
        for (n, w) in waits.enumerated() {
            let ceiling = min(Duration.seconds(1800), .seconds(30) * (1 << n))
            #expect(w >= ceiling / 2 && w <= ceiling, "wait \(n): \(w)")
        }
        let forbidden = SIPMessage(responseTo: try #require(sent(client.handle(.timerFired)) ?? sent(client.start())), statusCode: 403, toTag: "x")
        let out = client.handle(.response(forbidden))
        #expect(client.state == .failed(.forbidden))
        #expect(timer(out) == nil)
    }

    @Test func unregisterSendsExpiresZero() throws {
        var registrar = TestRegistrar(users: ["alice": "alicepw"])
        var client = RegistrationClient(configuration: Self.config, credentials: DigestClient(username: "alice", password: "alicepw"), seed: 5)
        let first = try #require(sent(client.start()))
        let authed = try #require(sent(client.handle(.response(registrar.answer(first)))))
        _ = client.handle(.response(registrar.answer(authed)))
        let bye = try #require(sent(client.stop()))
        #expect(client.state == .unregistering)
        #expect(try bye.expires() == 0)
        #expect(try bye.contact()?.addresses.first?.expires == 0)
        // It carries the credentials of the last challenge (next nonce count), so the
        // registrar accepts it without a new challenge.
        #expect(try !bye.authorization().isEmpty)
        _ = client.handle(.response(registrar.answer(bye)))
        #expect(client.state == .unregistered)
        // Started again, it registers again.
        _ = client.start()
        #expect(client.state == .registering)
    }

    @Test func unregisterAnsweredThroughANewChallenge() throws {
        var registrar = TestRegistrar(users: ["alice": "alicepw"])
        var client = RegistrationClient(configuration: Self.config, credentials: DigestClient(username: "alice", password: "alicepw"), seed: 6)
        let first = try #require(sent(client.start()))
        let authed = try #require(sent(client.handle(.response(registrar.answer(first)))))
        _ = client.handle(.response(registrar.answer(authed)))
        // A registrar that restarted knows none of its old nonces: it challenges the removal.
        var restarted = TestRegistrar(users: ["alice": "alicepw"], key: "another-key")
        let bye = try #require(sent(client.stop()))
        let challenged = restarted.answer(bye)
        #expect(challenged.statusCode == 401)
        let authedBye = try #require(sent(client.handle(.response(challenged))))
        // The answer to the challenge still removes the binding.
        #expect(try authedBye.expires() == 0)
        #expect(try authedBye.contact()?.addresses.first?.expires == 0)
        _ = client.handle(.response(restarted.answer(authedBye)))
        #expect(client.state == .unregistered)
    }

    @Test func sameSeedSameRequests() throws {
        var a = RegistrationClient(configuration: Self.config, credentials: DigestClient(username: "alice", password: "alicepw"), seed: 9)
        var b = RegistrationClient(configuration: Self.config, credentials: DigestClient(username: "alice", password: "alicepw"), seed: 9)
        #expect(sent(a.start())?.serialized() == sent(b.start())?.serialized())
    }
}
