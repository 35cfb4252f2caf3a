import SIPMessage

/// The result of checking credentials.
public enum DigestOutcome: Sendable, Hashable {
    /// The response is right; carries the (unhashed) username.
    case authenticated(user: String)
    /// The response was computed with a right password but an expired or forgotten nonce:
    /// challenge again with `stale=true`.
    case stale
    /// The response is wrong (wrong password, or altered request).
    case badCredentials
    /// The nonce count was used before with this nonce (or is lower than one seen).
    case replayed
    /// The credentials cannot be checked; the reason says why.
    case malformed(reason: String)
    /// The store does not know the user.
    case unknownUser
    /// The request carries no credentials for this server's realm.
    case missingCredentials
}

/// The server side of Digest authentication (RFC 3261 §22.4, RFC 7616, RFC 8760).
///
/// Nonces are stateless: each one carries its issue time, random bytes and an HMAC-SHA-256
/// (under ``Configuration/key``) of both and the realm, so any nonce can be checked for
/// origin and age without storage. Replays are caught by a bounded LRU cache holding, per
/// nonce, the highest nonce count accepted; a nonce that may have been forgotten by the cache
/// is answered as ``DigestOutcome/stale``. Time is passed in as seconds on any monotonic scale.
public struct DigestServer: Sendable {
    /// Server settings.
    public struct Configuration: Sendable {
        /// The realm challenged for.
        public var realm: String
        /// The HMAC key authenticating nonces (keep it secret; 32 random bytes suffice).
        public var key: [UInt8]
        /// How long a nonce stays valid, in seconds.
        public var nonceLifetime: Int64
        /// How many nonces the replay cache remembers.
        public var replayCacheSize: Int
        /// The algorithms offered, strongest first (one challenge each).
        public var algorithms: [DigestAlgorithm]
        /// The qop values offered.
        public var qop: [DigestQOP]
        /// An `opaque` value to send with challenges, if any.
        public var opaque: String?
        /// Whether to ask clients for hashed usernames (RFC 7616 §3.4.4).
        public var userhash: Bool
        /// Whether credentials must echo a `uri` equal to the Request-URI.
        public var checkURI: Bool

        /// Creates a configuration.
        public init(
            realm: String, key: [UInt8], nonceLifetime: Int64 = 300, replayCacheSize: Int = 4096,
            algorithms: [DigestAlgorithm] = [.sha256, .md5], qop: [DigestQOP] = [.auth], opaque: String? = nil,
            userhash: Bool = false, checkURI: Bool = true
        ) {
            self.realm = realm
            self.key = key
            self.nonceLifetime = nonceLifetime
            self.replayCacheSize = replayCacheSize
            self.algorithms = algorithms
            self.qop = qop
            self.opaque = opaque
            self.userhash = userhash
            self.checkURI = checkURI
        }
    }

    /// The settings.
    public let configuration: Configuration
    /// Where users' secrets are found.
    public let store: any DigestCredentialStore
    var replay: NonceReplayCache

    /// Creates a server.
    public init(configuration: Configuration, store: any DigestCredentialStore) {
        self.configuration = configuration
        self.store = store
        replay = NonceReplayCache(capacity: configuration.replayCacheSize)
    }

    // MARK: Challenges

    /// A fresh nonce issued at `now`.
    public func makeNonce<R: RandomNumberGenerator>(now: Int64, using rng: inout R) -> String {
        var body: [UInt8] = []
        let t = UInt64(bitPattern: now)
        for s in stride(from: 56, through: 0, by: -8) { body.append(UInt8(truncatingIfNeeded: t >> UInt64(s))) }
        var r = rng.next()
        for _ in 0..<8 {
            body.append(UInt8(truncatingIfNeeded: r))
            r >>= 8
        }
        return hexString(body + mac(body))
    }

    func mac(_ body: [UInt8]) -> [UInt8] {
        Array(hmacSHA256(key: configuration.key, data: body + Array(configuration.realm.utf8)).prefix(16))
    }

    /// The issue time of a nonce this server made; `nil` when it is not one.
    public func nonceIssueTime(_ nonce: String) -> Int64? {
        guard let b = hexBytes(nonce), b.count == 32 else { return nil }
        let body = Array(b[0..<16])
        guard constantTimeEqual(mac(body), Array(b[16..<32])) else { return nil }
        var t: UInt64 = 0
        for i in 0..<8 { t = t << 8 | UInt64(body[i]) }
        return Int64(bitPattern: t)
    }

    /// The challenges for a 401/407, one per configured algorithm sharing one nonce; pass
    /// `stale: true` after a ``DigestOutcome/stale`` outcome.
    public func challenges<R: RandomNumberGenerator>(now: Int64, stale: Bool = false, using rng: inout R) -> [AuthenticationHeader] {
        let nonce = makeNonce(now: now, using: &rng)
        return configuration.algorithms.map { challenge(nonce: nonce, algorithm: $0, stale: stale) }
    }

    /// One challenge with the given nonce and algorithm.
    public func challenge(nonce: String, algorithm: DigestAlgorithm, stale: Bool = false) -> AuthenticationHeader {
        var p: [SIPParameter] = [
            SIPParameter(name: "realm", value: configuration.realm, quoted: true),
            SIPParameter(name: "nonce", value: nonce, quoted: true),
        ]
        if let o = configuration.opaque { p.append(SIPParameter(name: "opaque", value: o, quoted: true)) }
        p.append(SIPParameter(name: "algorithm", value: algorithm.token))
        if !configuration.qop.isEmpty {
            p.append(SIPParameter(name: "qop", value: configuration.qop.map(\.rawValue).joined(separator: ","), quoted: true))
        }
        if stale { p.append(SIPParameter(name: "stale", value: "true")) }
        if configuration.userhash { p.append(SIPParameter(name: "userhash", value: "true")) }
        return AuthenticationHeader(scheme: "Digest", parameters: p)
    }

    // MARK: Verification

    /// Checks the `Authorization` (or, with `proxy: true`, `Proxy-Authorization`) values of a
    /// request that carry this server's realm.
    public mutating func verify(request: SIPMessage, proxy: Bool = false, now: Int64) -> DigestOutcome {
        guard let method = request.method, let uri = request.requestURIText else { return .malformed(reason: "not a request") }
        let all: [AuthenticationHeader]
        do {
            all = try proxy ? request.proxyAuthorization() : request.authorization()
        } catch {
            return .malformed(reason: "unparsable credentials")
        }
        guard let mine = all.first(where: { $0.realm == configuration.realm }) else { return .missingCredentials }
        return verify(mine, method: method, requestURI: uri, body: Array(request.body), now: now)
    }

    /// Checks one set of credentials for a request with `method`, `requestURI` and `body`.
    public mutating func verify(
        _ cred: AuthenticationHeader, method: SIPMethod, requestURI: String, body: [UInt8] = [], now: Int64
    ) -> DigestOutcome {
        guard cred.scheme.lowercased() == "digest" else { return .malformed(reason: "scheme \(cred.scheme) is not Digest") }
        for name in ["username", "realm", "nonce", "uri", "response"] where cred[name] == nil {
            return .malformed(reason: "missing \(name)")
        }
        let username = cred.username!, realm = cred.realm!, nonce = cred.nonce!, uri = cred.uri!, response = cred.response!
        guard realm == configuration.realm else { return .malformed(reason: "realm \(realm) is not \(configuration.realm)") }
        guard let alg = DigestAlgorithm(token: cred.algorithm) else { return .malformed(reason: "unknown algorithm \(cred.algorithm)") }
        guard configuration.algorithms.contains(alg) else { return .malformed(reason: "algorithm \(alg.token) not offered") }

        var qop: DigestQOP?
        var nc: UInt32 = 1
        var cnonce: String?
        if let q = cred["qop"] {
            guard let v = DigestQOP(rawValue: q.lowercased()), configuration.qop.contains(v) else { return .malformed(reason: "qop \(q) not offered") }
            qop = v
            guard let c = cred.cnonce, !c.isEmpty else { return .malformed(reason: "missing cnonce") }
            cnonce = c
            guard let n = cred.nonceCount else { return .malformed(reason: "missing nc") }
            guard n.utf8.count == 8, n.utf8.allSatisfy({ hexValue($0) != nil }), let value = UInt32(n, radix: 16), value > 0 else {
                return .malformed(reason: "bad nc \(n)")
            }
            nc = value
        } else {
            guard configuration.qop.isEmpty else { return .malformed(reason: "missing qop") }
            guard !alg.isSession else { return .malformed(reason: "\(alg.token) without qop") }
        }

        guard let issued = nonceIssueTime(nonce) else { return .malformed(reason: "nonce not issued by this server") }
        if configuration.checkURI && uri != requestURI { return .malformed(reason: "uri does not match the Request-URI") }

        let user: String
        if cred["userhash"]?.lowercased() == "true" {
            guard let u = store.username(userhash: username, realm: realm, algorithm: alg) else { return .unknownUser }
            user = u
        } else {
            user = username
        }
        guard let secret = store.secret(username: user, realm: realm, algorithm: alg) else { return .unknownUser }
        let base: String
        switch secret {
        case .password(let pw): base = DigestComputation.baseHA1(alg, username: user, realm: realm, password: pw)
        case .ha1(let h): base = h.lowercased()
        }
        let ha1 = DigestComputation.ha1(alg, baseHA1: base, nonce: nonce, cnonce: cnonce)
        let ha2 = DigestComputation.ha2(alg, method: method.token, uri: uri, qop: qop, body: body)
        let expected = DigestComputation.response(
            alg, ha1: ha1, nonce: nonce, nc: cred.nonceCount, cnonce: cnonce, qop: qop, ha2: ha2
        )
        guard constantTimeEqual(Array(expected.utf8), Array(response.lowercased().utf8)) else { return .badCredentials }

        if issued > now || now - issued > configuration.nonceLifetime { return .stale }
        if let highest = replay.highest(nonce) {
            if nc <= highest { return .replayed }
        } else if issued <= replay.evictedIssueTime {
            return .stale
        }
        replay.record(nonce, issued: issued, nc: nc)
        return .authenticated(user: user)
    }
}
