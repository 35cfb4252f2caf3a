import Testing
import SIPAuth
import SIPMessage

@Suite("SIPAuth with SIPMessage")
struct MessageTests {
    @Test func registerThroughMessages() throws {
        var server = makeServer()
        var rng = SplitMix64(seed: 11)
        // 401 with the challenges.
        var resp = try SIPMessage(method: .register, requestURI: "sip:example.com")
        for c in server.challenges(now: 500, using: &rng) { try resp.append(.wwwAuthenticate, c) }
        let parsedChallenges = try SIPMessage(bytes: resp.serialized()).wwwAuthenticate()
        #expect(parsedChallenges.count == 2)

        var client = DigestClient(username: "bob", password: "builder")
        let answers = try client.authorize(challenges: parsedChallenges, method: .register, requestURI: "sip:example.com", using: &rng)
        var m = try SIPMessage(method: .register, requestURI: "sip:example.com")
        try m.append(.authorization, answers[0])
        let wire = try SIPMessage(bytes: m.serialized())
        let back = try wire.authorization()
        #expect(back.count == 1)
        #expect(back[0] == answers[0])
        #expect(server.verify(request: wire, now: 501) == .authenticated(user: "bob"))
        #expect(server.verify(request: wire, now: 502) == .replayed)
        #expect(server.verify(request: try SIPMessage(method: .register, requestURI: "sip:example.com"), now: 502) == .missingCredentials)
    }

    @Test func proxyAuthorizationWithBody() throws {
        var server = makeServer(realm: "proxy.example", qop: [.auth, .authInt], userhash: true)
        var rng = SplitMix64(seed: 12)
        var client = DigestClient(username: "alice", password: "wonderland")
        var invite = try SIPMessage(method: .invite, requestURI: "sip:bob@example.com")
        invite.setBody(Array("v=0\r\n".utf8))
        let challenges = server.challenges(now: 0, using: &rng)
        let a = try client.authorize(challenges: challenges, method: .invite, requestURI: "sip:bob@example.com", body: Array(invite.body), using: &rng)
        try invite.append(.proxyAuthorization, a[0])
        let wire = try SIPMessage(bytes: invite.serialized())
        #expect(try wire.proxyAuthorization()[0]["userhash"] == "true")
        #expect(server.verify(request: wire, proxy: true, now: 1) == .authenticated(user: "alice"))
        #expect(server.verify(request: wire, now: 1) == .missingCredentials)
    }
}
