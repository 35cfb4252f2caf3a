import Testing
import SIPAuth
import SIPMessage

@Suite("DigestServer")
struct ServerTests {
    /// Challenge from the server, answer from the client, check by the server.
    func answer(
        _ server: DigestServer, now: Int64, user: String = "alice", password: String = "wonderland",
        method: SIPMethod = .invite, uri: String = "sip:bob@example.com", body: [UInt8] = [], seed: UInt64 = 7
    ) throws -> (AuthenticationHeader, DigestClient) {
        var rng = SplitMix64(seed: seed)
        var client = DigestClient(username: user, password: password)
        let challenges = server.challenges(now: now, using: &rng)
        let h = try client.authorize(challenges: challenges, method: method, requestURI: uri, body: body, using: &rng)
        return (h[0], client)
    }

    @Test func inviteRoundTrip() throws {
        var server = makeServer()
        var rng = SplitMix64(seed: 1)
        let ch = server.challenges(now: 1000, using: &rng)
        #expect(ch.count == 2)
        #expect(ch[0].algorithm == "SHA-256")
        #expect(ch[1].algorithm == "MD5")
        #expect(ch[0].nonce == ch[1].nonce)
        #expect(ch[0].opaque == "op4que")
        #expect(ch[0].qopOptions == ["auth"])
        #expect(ch[0].description.contains("algorithm=SHA-256"))
        #expect(ch[0].description.contains("qop=\"auth\""))
        #expect(server.nonceIssueTime(ch[0].nonce!) == 1000)
        let (h, _) = try answer(server, now: 1000)
        #expect(h.algorithm == "SHA-256")
        #expect(h.opaque == "op4que")
        #expect(server.verify(h, method: .invite, requestURI: "sip:bob@example.com", now: 1010) == .authenticated(user: "alice"))
    }

    @Test func wrongPasswordAndUnknownUser() throws {
        var server = makeServer()
        let (bad, _) = try answer(server, now: 0, password: "nope")
        #expect(server.verify(bad, method: .invite, requestURI: "sip:bob@example.com", now: 1) == .badCredentials)
        let (ghost, _) = try answer(server, now: 0, user: "mallory")
        #expect(server.verify(ghost, method: .invite, requestURI: "sip:bob@example.com", now: 1) == .unknownUser)
        // An altered method or body is a bad response too.
        let (h, _) = try answer(server, now: 0)
        #expect(server.verify(h, method: .bye, requestURI: "sip:bob@example.com", now: 1) == .badCredentials)
    }

    @Test func replayProtection() throws {
        var server = makeServer()
        var rng = SplitMix64(seed: 2)
        let (h1, c) = try answer(server, now: 0)
        var client = c
        #expect(server.verify(h1, method: .invite, requestURI: "sip:bob@example.com", now: 1) == .authenticated(user: "alice"))
        #expect(server.verify(h1, method: .invite, requestURI: "sip:bob@example.com", now: 2) == .replayed)
        let h2 = client.authorizeCached(method: .invite, requestURI: "sip:bob@example.com", using: &rng)[0]
        let h3 = client.authorizeCached(method: .invite, requestURI: "sip:bob@example.com", using: &rng)[0]
        #expect(h3.nonceCount == "00000003")
        #expect(server.verify(h3, method: .invite, requestURI: "sip:bob@example.com", now: 3) == .authenticated(user: "alice"))
        // A lower count after a higher one is rejected.
        #expect(server.verify(h2, method: .invite, requestURI: "sip:bob@example.com", now: 4) == .replayed)
    }

    @Test func expiredNonceIsStaleAndClientRetries() throws {
        var server = makeServer(lifetime: 60)
        var rng = SplitMix64(seed: 3)
        var (h, client) = try answer(server, now: 0)
        #expect(server.verify(h, method: .invite, requestURI: "sip:bob@example.com", now: 61) == .stale)
        // A wrong password with an expired nonce is still bad credentials, not stale.
        let (bad, _) = try answer(server, now: 0, password: "nope")
        #expect(server.verify(bad, method: .invite, requestURI: "sip:bob@example.com", now: 61) == .badCredentials)
        let fresh = server.challenges(now: 61, stale: true, using: &rng)
        #expect(fresh[0].stale)
        #expect(fresh[0].description.contains("stale=true"))
        h = try client.authorize(challenges: fresh, method: .invite, requestURI: "sip:bob@example.com", using: &rng)[0]
        #expect(server.verify(h, method: .invite, requestURI: "sip:bob@example.com", now: 62) == .authenticated(user: "alice"))
    }

    @Test func forgottenNonceIsStale() throws {
        var server = makeServer(cacheSize: 2)
        let (a, _) = try answer(server, now: 10, seed: 1)
        let (b, _) = try answer(server, now: 11, seed: 2)
        let (c, _) = try answer(server, now: 12, seed: 3)
        #expect(server.verify(a, method: .invite, requestURI: "sip:bob@example.com", now: 13) == .authenticated(user: "alice"))
        #expect(server.verify(b, method: .invite, requestURI: "sip:bob@example.com", now: 13) == .authenticated(user: "alice"))
        #expect(server.verify(c, method: .invite, requestURI: "sip:bob@example.com", now: 13) == .authenticated(user: "alice"))
        // `a` was evicted: its replay cannot be told from a first use, so the answer is stale.
        #expect(server.verify(a, method: .invite, requestURI: "sip:bob@example.com", now: 14) == .stale)
        #expect(server.verify(c, method: .invite, requestURI: "sip:bob@example.com", now: 14) == .replayed)
        // A nonce issued after every evicted one is still accepted on first use.
        let (d, _) = try answer(server, now: 20, seed: 4)
        #expect(server.verify(d, method: .invite, requestURI: "sip:bob@example.com", now: 21) == .authenticated(user: "alice"))
    }

    @Test(arguments: [DigestAlgorithm.md5Sess, .sha256Sess, .sha512_256Sess, .sha512_256])
    func sessionAndStrongVariants(alg: DigestAlgorithm) throws {
        var server = makeServer(algorithms: [alg])
        let (h, _) = try answer(server, now: 0)
        #expect(h.algorithm == alg.token)
        #expect(server.verify(h, method: .invite, requestURI: "sip:bob@example.com", now: 1) == .authenticated(user: "alice"))
    }

    @Test func authIntWithBody() throws {
        var server = makeServer(qop: [.authInt])
        let sdp = Array("v=0\r\no=- 1 1 IN IP4 192.0.2.1\r\ns=-\r\n".utf8)
        let (h, _) = try answer(server, now: 0, body: sdp)
        #expect(h["qop"] == "auth-int")
        #expect(server.verify(h, method: .invite, requestURI: "sip:bob@example.com", body: sdp + [0x0A], now: 1) == .badCredentials)
        #expect(server.verify(h, method: .invite, requestURI: "sip:bob@example.com", body: sdp, now: 1) == .authenticated(user: "alice"))
    }

    @Test func userhashRoundTrip() throws {
        var server = makeServer(algorithms: [.sha512_256], userhash: true)
        let (h, _) = try answer(server, now: 0)
        #expect(h.username != "alice")
        #expect(h["userhash"] == "true")
        #expect(server.verify(h, method: .invite, requestURI: "sip:bob@example.com", now: 1) == .authenticated(user: "alice"))
    }

    @Test func precomputedHA1() throws {
        let store = DigestClosureStore { user, realm, alg in
            user == "alice" ? .ha1(DigestComputation.baseHA1(alg, username: user, realm: realm, password: "wonderland")) : nil
        }
        var server = DigestServer(configuration: .init(realm: "example.com", key: testKey), store: store)
        let (h, _) = try answer(server, now: 0)
        #expect(server.verify(h, method: .invite, requestURI: "sip:bob@example.com", now: 1) == .authenticated(user: "alice"))
    }

    @Test func malformedCredentials() throws {
        var server = makeServer()
        let (h, _) = try answer(server, now: 0)
        func check(_ x: AuthenticationHeader, _ reason: String, uri: String = "sip:bob@example.com") {
            #expect(server.verify(x, method: .invite, requestURI: uri, now: 1) == .malformed(reason: reason))
        }
        check(replacing(h, "response", with: nil), "missing response")
        check(replacing(h, "username", with: nil), "missing username")
        check(replacing(h, "nonce", with: nil), "missing nonce")
        check(replacing(h, "cnonce", with: nil), "missing cnonce")
        check(replacing(h, "nc", with: nil), "missing nc")
        check(replacing(h, "qop", with: nil), "missing qop")
        check(replacing(h, "nc", with: "0000000g"), "bad nc 0000000g")
        check(replacing(h, "nc", with: "1"), "bad nc 1")
        check(replacing(h, "nc", with: "00000000"), "bad nc 00000000")
        check(replacing(h, "algorithm", with: "SHA-1"), "unknown algorithm SHA-1")
        check(replacing(h, "algorithm", with: "SHA-512-256"), "algorithm SHA-512-256 not offered")
        check(replacing(h, "qop", with: "auth-int"), "qop auth-int not offered")
        check(replacing(h, "realm", with: "evil.example", quoted: true), "realm evil.example is not example.com")
        check(replacing(h, "nonce", with: "deadbeef", quoted: true), "nonce not issued by this server")
        check(AuthenticationHeader(scheme: "Basic", parameters: []), "scheme Basic is not Digest")
        check(h, "uri does not match the Request-URI", uri: "sip:carol@example.com")
        // A nonce made under another key is refused.
        let other = DigestServer(configuration: .init(realm: "example.com", key: [1, 2, 3]), store: DigestPasswordTable([:]))
        var rng = SplitMix64(seed: 9)
        check(replacing(h, "nonce", with: other.makeNonce(now: 0, using: &rng), quoted: true), "nonce not issued by this server")
        // Nothing above was recorded: the original still passes.
        #expect(server.verify(h, method: .invite, requestURI: "sip:bob@example.com", now: 1) == .authenticated(user: "alice"))
    }
}
