import Testing
import SIPAuth
import SIPMessage

@Suite("DigestClient")
struct ClientTests {
    @Test func prefersStrongestAlgorithmPerRealm() throws {
        var rng = SplitMix64(seed: 1)
        var client = DigestClient(username: "alice", password: "pw")
        let challenges = try [
            AuthenticationHeader(#"Digest realm="a.example", nonce="n1", algorithm=MD5, qop="auth""#),
            AuthenticationHeader(#"Digest realm="a.example", nonce="n2", algorithm=SHA-512-256, qop="auth""#),
            AuthenticationHeader(#"Digest realm="a.example", nonce="n3", algorithm=SHA-256, qop="auth""#),
            AuthenticationHeader(#"Digest realm="b.example", nonce="n4", algorithm=SHA-256, qop="auth""#),
            AuthenticationHeader(#"Digest realm="b.example", nonce="n5", algorithm=MD5, qop="auth""#),
            AuthenticationHeader(#"Basic realm="c.example""#),
            AuthenticationHeader(#"Digest realm="d.example", nonce="n6", algorithm=SHA-1, qop="auth""#),
        ]
        let answers = try client.authorize(challenges: challenges, method: .invite, requestURI: "sip:bob@b.example", using: &rng)
        #expect(answers.count == 2)
        #expect(answers[0].realm == "a.example")
        #expect(answers[0].algorithm == "SHA-512-256")
        #expect(answers[0].nonce == "n2")
        #expect(answers[1].realm == "b.example")
        #expect(answers[1].algorithm == "SHA-256")
        #expect(answers[0].cnonce?.utf8.count == 32)
        #expect(answers[0].cnonce != answers[1].cnonce)
    }

    @Test func perRealmCredentials() throws {
        var rng = SplitMix64(seed: 2)
        var client = DigestClient(credentials: [
            DigestCredentials(username: "carol", password: "x", realm: "proxy.example"),
            DigestCredentials(username: "default", password: "y"),
        ])
        let a = try client.authorize(challenge: AuthenticationHeader(#"Digest realm="proxy.example", nonce="n", qop="auth""#), method: .invite, requestURI: "sip:x@y", using: &rng)
        #expect(a.username == "carol")
        let b = try client.authorize(challenge: AuthenticationHeader(#"Digest realm="other", nonce="n", qop="auth""#), method: .invite, requestURI: "sip:x@y", using: &rng)
        #expect(b.username == "default")
        var strict = DigestClient(credentials: [DigestCredentials(username: "carol", password: "x", realm: "proxy.example")])
        #expect(throws: DigestError.noCredentials(realm: "other")) {
            try strict.authorize(challenge: AuthenticationHeader(#"Digest realm="other", nonce="n""#), method: .invite, requestURI: "sip:x@y", using: &rng)
        }
    }

    @Test func prefersAuthOverAuthInt() throws {
        var rng = SplitMix64(seed: 3)
        var client = DigestClient(username: "u", password: "p")
        let a = try client.authorize(challenge: AuthenticationHeader(#"Digest realm="r", nonce="n", qop="auth-int,auth""#), method: .message, requestURI: "sip:r", using: &rng)
        #expect(a["qop"] == "auth")
    }

    @Test func typedErrors() throws {
        var rng = SplitMix64(seed: 4)
        var client = DigestClient(username: "u", password: "p")
        #expect(throws: DigestError.unsupportedScheme("Basic")) {
            try client.authorize(challenge: AuthenticationHeader(#"Basic realm="r""#), method: .invite, requestURI: "sip:r", using: &rng)
        }
        #expect(throws: DigestError.unsupportedAlgorithm("SHA-1")) {
            try client.authorize(challenges: [AuthenticationHeader(#"Basic realm="r""#), AuthenticationHeader(#"Digest realm="r", nonce="n", algorithm=SHA-1"#)], method: .invite, requestURI: "sip:r", using: &rng)
        }
        #expect(throws: DigestError.unsupportedQOP("auth-conf")) {
            try client.authorize(challenge: AuthenticationHeader(#"Digest realm="r", nonce="n", qop="auth-conf""#), method: .invite, requestURI: "sip:r", using: &rng)
        }
        #expect(throws: DigestError.malformedChallenge("missing nonce")) {
            try client.authorize(challenge: AuthenticationHeader(#"Digest realm="r""#), method: .invite, requestURI: "sip:r", using: &rng)
        }
        #expect(throws: DigestError.malformedChallenge("missing realm")) {
            try client.authorize(challenge: AuthenticationHeader(#"Digest nonce="n""#), method: .invite, requestURI: "sip:r", using: &rng)
        }
        var limited = DigestClient(credentials: [DigestCredentials(username: "u", password: "p")], supportedAlgorithms: [.sha256])
        #expect(throws: DigestError.unsupportedAlgorithm("MD5")) {
            try limited.authorize(challenge: AuthenticationHeader(#"Digest realm="r", nonce="n""#), method: .invite, requestURI: "sip:r", using: &rng)
        }
    }

    @Test func nonceCountIncrementsAndRejectionIsReported() throws {
        var rng = SplitMix64(seed: 5)
        var client = DigestClient(username: "u", password: "p")
        let c = try AuthenticationHeader(#"Digest realm="r", nonce="n1", qop="auth""#)
        let first = try client.authorize(challenge: c, method: .register, requestURI: "sip:r", using: &rng)
        #expect(first.nonceCount == "00000001")
        // Preemptive reuse of the same nonce.
        let cached = client.authorizeCached(method: .register, requestURI: "sip:r", using: &rng)
        #expect(cached.count == 1)
        #expect(cached[0].nonceCount == "00000002")
        #expect(cached[0].nonce == "n1")
        // Challenged again, not stale: the password was wrong; do not loop.
        #expect(throws: DigestError.credentialsRejected(realm: "r")) {
            try client.authorize(challenge: c, method: .register, requestURI: "sip:r", using: &rng)
        }
        // Stale: answer again without asking for the password, with a fresh count.
        let stale = try AuthenticationHeader(#"Digest realm="r", nonce="n2", qop="auth", stale=true"#)
        let again = try client.authorize(challenge: stale, method: .register, requestURI: "sip:r", using: &rng)
        #expect(again.nonce == "n2")
        #expect(again.nonceCount == "00000001")
        // After success, a later challenge (a refresh) is answered again.
        client.requestSucceeded()
        let later = try AuthenticationHeader(#"Digest realm="r", nonce="n3", qop="auth""#)
        #expect(try client.authorize(challenge: later, method: .register, requestURI: "sip:r", using: &rng).nonce == "n3")
    }

    @Test func sessWithoutQOPIsRefused() throws {
        #expect(throws: DigestError.malformedChallenge("MD5-sess without qop")) {
            try DigestClient.answer(challenge: AuthenticationHeader(#"Digest realm="r", nonce="n", algorithm=MD5-sess"#), username: "u", password: "p", method: "INVITE", uri: "sip:r", cnonce: "c", nonceCount: 1)
        }
    }

    @Test func quotingFollowsRFC7616() throws {
        var rng = SplitMix64(seed: 6)
        var client = DigestClient(username: "u", password: "p")
        let a = try client.authorize(challenge: AuthenticationHeader(#"Digest realm="r", nonce="n", qop="auth", algorithm=SHA-256, opaque="o""#), method: .invite, requestURI: "sip:b@r", using: &rng)
        let t = a.description
        #expect(t.hasPrefix("Digest username=\"u\", realm=\"r\", nonce=\"n\", uri=\"sip:b@r\", response=\""))
        #expect(t.contains(", algorithm=SHA-256, cnonce=\""))
        #expect(t.hasSuffix(", qop=auth, nc=00000001, opaque=\"o\""))
    }
}
