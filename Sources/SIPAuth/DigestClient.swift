import SIPMessage

/// A username and password, for one realm or for any realm.
public struct DigestCredentials: Sendable, Hashable {
    /// The username (sent as is, or hashed when the challenge asks for `userhash`).
    public var username: String
    /// The password.
    public var password: String
    /// The realm these credentials are for; `nil` for any realm.
    public var realm: String?

    /// Creates credentials; `realm: nil` makes them apply to every realm without its own.
    public init(username: String, password: String, realm: String? = nil) {
        self.username = username
        self.password = password
        self.realm = realm
    }
}

/// The client side of Digest authentication (RFC 3261 §22.2–§22.3, RFC 7616, RFC 8760).
///
/// A value type with no I/O: feed it the challenges of a 401/407 and it returns the
/// `Authorization`/`Proxy-Authorization` values to add to the retried request. It remembers
/// the chosen challenge of each realm and a nonce count per nonce, so later requests can be
/// authorized preemptively (``authorizeCached(method:requestURI:body:using:)``) with increasing
/// `nc`. A realm challenged again without `stale=true` after an answer is reported as
/// ``DigestError/credentialsRejected(realm:)`` instead of looping; call ``requestSucceeded()``
/// once a request was accepted.
public struct DigestClient: Sendable {
    /// The credentials, looked up by realm (a realm-less entry is the fallback).
    public var credentials: [DigestCredentials]
    /// The algorithms this client answers.
    public var supportedAlgorithms: Set<DigestAlgorithm>

    struct RealmState: Sendable {
        var challenge: AuthenticationHeader
        var algorithm: DigestAlgorithm
        var nonceCount: UInt32
        var answered: Bool
    }

    /// Per realm, the challenge being answered; bounded by the number of realms seen.
    var realms: [String: RealmState] = [:]

    /// Creates a client with the given credentials and (by default) every algorithm.
    public init(credentials: [DigestCredentials], supportedAlgorithms: Set<DigestAlgorithm> = Set(DigestAlgorithm.allCases)) {
        self.credentials = credentials
        self.supportedAlgorithms = supportedAlgorithms
    }

    /// Convenience for one username and password used for every realm.
    public init(username: String, password: String) {
        self.init(credentials: [DigestCredentials(username: username, password: password)])
    }

    /// Marks the last answers as accepted, so that a later challenge of the same realm (for
    /// instance at a registration refresh) is answered again rather than reported as rejected.
    public mutating func requestSucceeded() {
        for k in realms.keys { realms[k]?.answered = false }
    }

    /// Answers the challenges of a 401 or 407 (all `WWW-Authenticate` or all
    /// `Proxy-Authenticate` values): one answer per realm, using the strongest supported
    /// algorithm offered for it. Challenges with other schemes, unsupported algorithms or no
    /// matching credentials are skipped while at least one realm can be answered; otherwise
    /// the first reason is thrown.
    public mutating func authorize<R: RandomNumberGenerator>(
        challenges: [AuthenticationHeader], method: SIPMethod, requestURI: String, body: [UInt8] = [],
        using rng: inout R
    ) throws(DigestError) -> [AuthenticationHeader] {
        var firstError: DigestError?
        var order: [String] = []
        var best: [String: (AuthenticationHeader, DigestAlgorithm)] = [:]
        for c in challenges {
            guard c.scheme.lowercased() == "digest" else {
                if firstError == nil { firstError = .unsupportedScheme(c.scheme) }
                continue
            }
            guard let realm = c.realm else {
                if firstError == nil { firstError = .malformedChallenge("missing realm") }
                continue
            }
            guard let alg = DigestAlgorithm(token: c.algorithm), supportedAlgorithms.contains(alg) else {
                if firstError == nil || firstError.map(isSchemeError) == true { firstError = .unsupportedAlgorithm(c.algorithm) }
                continue
            }
            if let (_, a) = best[realm] {
                if alg.strength > a.strength { best[realm] = (c, alg) }
            } else {
                best[realm] = (c, alg)
                order.append(realm)
            }
        }
        var out: [AuthenticationHeader] = []
        for realm in order {
            let (c, alg) = best[realm]!
            do throws(DigestError) {
                out.append(try answer(challenge: c, algorithm: alg, realm: realm, method: method, requestURI: requestURI, body: body, using: &rng))
            } catch {
                if firstError == nil || firstError.map(isSchemeError) == true { firstError = error }
            }
        }
        if out.isEmpty { throw firstError ?? .unsupportedScheme("") }
        return out
    }

    /// Answers one challenge (see ``authorize(challenges:method:requestURI:body:using:)``).
    public mutating func authorize<R: RandomNumberGenerator>(
        challenge: AuthenticationHeader, method: SIPMethod, requestURI: String, body: [UInt8] = [],
        using rng: inout R
    ) throws(DigestError) -> AuthenticationHeader {
        try authorize(challenges: [challenge], method: method, requestURI: requestURI, body: body, using: &rng)[0]
    }

    /// Authorizes a new request with the challenges answered before (preemptive
    /// authentication, RFC 3261 §22.3), with the nonce count incremented. Empty when no
    /// challenge is remembered.
    public mutating func authorizeCached<R: RandomNumberGenerator>(
        method: SIPMethod, requestURI: String, body: [UInt8] = [], using rng: inout R
    ) -> [AuthenticationHeader] {
        var out: [AuthenticationHeader] = []
        for realm in realms.keys.sorted() {
            guard var st = realms[realm], let cred = credential(for: realm) else { continue }
            st.nonceCount &+= 1
            if let h = try? DigestClient.answer(
                challenge: st.challenge, algorithm: st.algorithm, username: cred.username, password: cred.password,
                method: method.token, uri: requestURI, body: body,
                cnonce: randomHex(bytes: 16, using: &rng), nonceCount: st.nonceCount
            ) {
                out.append(h)
                realms[realm] = st
            }
        }
        return out
    }

    func credential(for realm: String) -> DigestCredentials? {
        credentials.first { $0.realm == realm } ?? credentials.first { $0.realm == nil }
    }

    mutating func answer<R: RandomNumberGenerator>(
        challenge c: AuthenticationHeader, algorithm: DigestAlgorithm, realm: String, method: SIPMethod,
        requestURI: String, body: [UInt8], using rng: inout R
    ) throws(DigestError) -> AuthenticationHeader {
        guard let nonce = c.nonce else { throw .malformedChallenge("missing nonce") }
        guard let cred = credential(for: realm) else { throw .noCredentials(realm: realm) }
        var nc: UInt32 = 1
        if let st = realms[realm] {
            if st.answered && !c.stale { throw .credentialsRejected(realm: realm) }
            if st.challenge.nonce == nonce { nc = st.nonceCount &+ 1 }
        }
        let h = try DigestClient.answer(
            challenge: c, algorithm: algorithm, username: cred.username, password: cred.password,
            method: method.token, uri: requestURI, body: body,
            cnonce: randomHex(bytes: 16, using: &rng), nonceCount: nc
        )
        realms[realm] = RealmState(challenge: c, algorithm: algorithm, nonceCount: nc, answered: true)
        return h
    }

    /// Computes the credentials answering `challenge` with explicit `cnonce` and nonce count
    /// (the stateless core; also reproduces the RFC examples). The algorithm is the
    /// challenge's unless given. `qop=auth` is preferred when both `auth` and `auth-int`
    /// are offered; without `qop` the RFC 2069 form is produced (and `-sess` is refused).
    public static func answer(
        challenge c: AuthenticationHeader, algorithm: DigestAlgorithm? = nil, username: String, password: String,
        method: String, uri: String, body: [UInt8] = [], cnonce: String, nonceCount: UInt32
    ) throws(DigestError) -> AuthenticationHeader {
        guard c.scheme.lowercased() == "digest" else { throw .unsupportedScheme(c.scheme) }
        guard let realm = c.realm else { throw .malformedChallenge("missing realm") }
        guard let nonce = c.nonce else { throw .malformedChallenge("missing nonce") }
        guard let alg = algorithm ?? DigestAlgorithm(token: c.algorithm) else { throw .unsupportedAlgorithm(c.algorithm) }
        let qop: DigestQOP?
        let offered = c.qopOptions.map { $0.lowercased() }
        if c["qop"] == nil {
            qop = nil
        } else if offered.contains("auth") {
            qop = .auth
        } else if offered.contains("auth-int") {
            qop = .authInt
        } else {
            throw .unsupportedQOP(c["qop"] ?? "")
        }
        if qop == nil && alg.isSession { throw .malformedChallenge("\(alg.token) without qop") }
        let nc = DigestComputation.nonceCountText(nonceCount)
        let base = DigestComputation.baseHA1(alg, username: username, realm: realm, password: password)
        let ha1 = DigestComputation.ha1(alg, baseHA1: base, nonce: nonce, cnonce: qop == nil ? nil : cnonce)
        let ha2 = DigestComputation.ha2(alg, method: method, uri: uri, qop: qop, body: body)
        let response = DigestComputation.response(alg, ha1: ha1, nonce: nonce, nc: nc, cnonce: cnonce, qop: qop, ha2: ha2)
        let userhash = c["userhash"]?.lowercased() == "true"
        var p: [SIPParameter] = [
            SIPParameter(name: "username", value: userhash ? DigestComputation.userhash(alg, username: username, realm: realm) : username, quoted: true),
            SIPParameter(name: "realm", value: realm, quoted: true),
            SIPParameter(name: "nonce", value: nonce, quoted: true),
            SIPParameter(name: "uri", value: uri, quoted: true),
            SIPParameter(name: "response", value: response, quoted: true),
            SIPParameter(name: "algorithm", value: alg.token),
        ]
        if let q = qop {
            p.append(SIPParameter(name: "cnonce", value: cnonce, quoted: true))
            p.append(SIPParameter(name: "qop", value: q.rawValue))
            p.append(SIPParameter(name: "nc", value: nc))
        }
        if let o = c.opaque { p.append(SIPParameter(name: "opaque", value: o, quoted: true)) }
        if userhash { p.append(SIPParameter(name: "userhash", value: "true")) }
        return AuthenticationHeader(scheme: "Digest", parameters: p)
    }
}

private func isSchemeError(_ e: DigestError) -> Bool {
    if case .unsupportedScheme = e { return true }
    return false
}
