import Testing
@testable import SIPAuth
import SIPMessage

@Suite("Nonce replay cache and negotiation")
struct ReplayCacheTests {
    @Test func lruKeepsRecentlyUsedNonces() {
        var cache = NonceReplayCache(capacity: 2)
        cache.record("a", issued: 1, nc: 1)
        cache.record("b", issued: 2, nc: 1)
        cache.record("a", issued: 1, nc: 5)  // refreshes "a"
        cache.record("c", issued: 3, nc: 1)  // evicts "b", the least recently used
        #expect(cache.highest("a") == 5)
        #expect(cache.highest("b") == nil)
        #expect(cache.highest("c") == 1)
        #expect(cache.count == 2)
        #expect(cache.evictedIssueTime == 2)
        cache.record("a", issued: 1, nc: 3)  // never lowers the highest count
        #expect(cache.highest("a") == 5)
        for i in 0..<100 { cache.record("n\(i)", issued: Int64(10 + i), nc: 1) }
        #expect(cache.count == 2)
        #expect(cache.highest("n99") == 1)
        #expect(cache.highest("n98") == 1)
        #expect(cache.evictedIssueTime == 107)
    }

    @Test func clientLimitedToMD5AgainstServerOfferingBoth() throws {
        var server = makeServer(algorithms: [.sha512_256, .sha256, .md5])
        var rng = SplitMix64(seed: 21)
        var client = DigestClient(credentials: [DigestCredentials(username: "bob", password: "builder")], supportedAlgorithms: [.md5])
        let ch = server.challenges(now: 0, using: &rng)
        #expect(ch.map(\.algorithm) == ["SHA-512-256", "SHA-256", "MD5"])
        let a = try client.authorize(challenges: ch, method: .options, requestURI: "sip:example.com", using: &rng)
        #expect(a.count == 1)
        #expect(a[0].algorithm == "MD5")
        #expect(server.verify(a[0], method: .options, requestURI: "sip:example.com", now: 1) == .authenticated(user: "bob"))
    }

    @Test func nonceFromTheFutureIsStale() throws {
        var server = makeServer()
        var rng = SplitMix64(seed: 22)
        var client = DigestClient(username: "alice", password: "wonderland")
        let a = try client.authorize(challenges: server.challenges(now: 100, using: &rng), method: .invite, requestURI: "sip:x@example.com", using: &rng)
        #expect(server.verify(a[0], method: .invite, requestURI: "sip:x@example.com", now: 50) == .stale)
    }

    @Test func caseInsensitiveTokens() throws {
        var server = makeServer()
        var rng = SplitMix64(seed: 23)
        var client = DigestClient(username: "alice", password: "wonderland")
        let ch = server.challenges(now: 0, using: &rng).map { c in
            AuthenticationHeader(scheme: "DIGEST", parameters: c.parameters.map {
                $0.name == "algorithm" ? SIPParameter(name: "ALGORITHM", value: $0.value?.lowercased()) : $0
            })
        }
        let a = try client.authorize(challenges: ch, method: .invite, requestURI: "sip:x@example.com", using: &rng)
        #expect(a[0].algorithm == "SHA-256")
        #expect(server.verify(a[0], method: .invite, requestURI: "sip:x@example.com", now: 1) == .authenticated(user: "alice"))
    }
}
