import SIPMessage
import SIPAuth

extension ConformanceSuites {
    static let authNote = "no ETSI TS 102 027-2 identifier: the authentication purposes could not be read in full to confirm a match"

    /// The challenge a REGISTER without credentials gets, or why the test cannot go on.
    static func challenge(_ s: ConformanceSession, _ reg: inout RunnerRegistration) async throws -> (code: Int, challenges: [AuthenticationHeader], user: String) {
        guard s.credentials != nil else { throw RegistrarStop.inconclusive("the run has no credentials (--user, --password)") }
        let user = reg.newContact()
        let bare = try await reg.register([reg.contact(user)], expires: 600, answerChallenge: false)
        let code = bare.statusCode ?? 0
        if (200...299).contains(code) {
            reg.bound.insert(user)
            throw RegistrarStop.inconclusive("the registrar accepted a REGISTER without credentials: it does not authenticate")
        }
        guard code == 401 || code == 407 else { throw RegistrarStop.inconclusive("a REGISTER without credentials was answered \(code), no challenge") }
        let challenges = ((code == 401 ? try? bare.wwwAuthenticate() : try? bare.proxyAuthenticate()) ?? []).filter { $0.scheme.lowercased() == "digest" }
        guard !challenges.isEmpty else { throw RegistrarStop.failed("the \(code) carries no Digest challenge (RFC 3261 §22.1)") }
        return (code, challenges, user)
    }

    /// A test answering the registrar's challenge with `algorithm` only.
    static func algorithmTest(_ name: String, _ algorithm: DigestAlgorithm, _ reference: String) -> ConformanceTestCase {
        registrarTest(name, "a challenge offering \(algorithm.token) answered with \(algorithm.token) (username, realm, nonce, uri, response) is accepted 200; not offered: inconclusive",
                      reference, note: authNote) { s, reg in
            let (_, challenges, user) = try await challenge(s, &reg)
            guard challenges.contains(where: { DigestAlgorithm(token: $0.algorithm) == algorithm }) else {
                return .inconclusive("the challenge offers \(challenges.map(\.algorithm).joined(separator: ", ")), not \(algorithm.token)")
            }
            reg.digest = DigestClient(credentials: [s.credentials!], supportedAlgorithms: [algorithm])
            let r = try await reg.register([reg.contact(user)], expires: 600)
            guard (200...299).contains(r.statusCode ?? 0) else { return .failed("answered with \(algorithm.token), the REGISTER got \(r.statusCode ?? 0), 200 expected") }
            reg.bound.insert(user)
            guard reg.acceptedAuthorization.contains(where: { $0.contains("algorithm=\(algorithm.token)") }) else {
                return .failed("the accepted request did not carry algorithm=\(algorithm.token)")
            }
            return .passed
        }
    }

    /// `auth`: the DUT (a registrar) authenticates the runner's REGISTERs.
    public static let auth: [ConformanceTestCase] = [
        algorithmTest("md5", .md5, "RFC 3261 §22.4; RFC 2617 §3.2.2"),
        algorithmTest("sha-256", .sha256, "RFC 8760 §2.1; RFC 7616 §3.4"),
        registrarTest("qop-auth", "a challenge offering qop=auth answered with qop=auth, cnonce and nc=00000001 is accepted, and so is the next REGISTER on the same nonce with nc=00000002",
                      "RFC 7616 §3.4; RFC 3261 §22.4 (RFC 2617 §3.2.2)", note: authNote) { s, reg in
            let (_, challenges, user) = try await challenge(s, &reg)
            guard challenges.contains(where: { $0.qopOptions.map { $0.lowercased() }.contains("auth") }) else {
                return .inconclusive("the challenge offers no qop=auth")
            }
            let first = try await reg.register([reg.contact(user)], expires: 600)
            guard (200...299).contains(first.statusCode ?? 0) else { return .failed("answered with qop=auth, the REGISTER got \(first.statusCode ?? 0), 200 expected") }
            reg.bound.insert(user)
            guard reg.acceptedAuthorization.contains(where: { $0.contains("qop=auth") && $0.contains("nc=00000001") }) else {
                return .failed("the accepted answer did not carry qop=auth with nc=00000001")
            }
            let second = try await reg.register([reg.contact(user)], expires: 600)
            guard (200...299).contains(second.statusCode ?? 0) else { return .failed("the next REGISTER got \(second.statusCode ?? 0)") }
            guard reg.acceptedAuthorization.contains(where: { $0.contains("nc=00000002") }) else {
                return .inconclusive("the registrar challenged again instead of taking nc=00000002 on the same nonce (allowed: a new nonce)")
            }
            return .passed
        },
        registrarTest("forged-nonce", "an answer computed with the right password over a nonce the registrar never issued is not accepted (401/407 or 400, never 2xx)",
                      "RFC 3261 §22.4; RFC 7616 §3.3 (the nonce is the server's)", note: authNote) { s, reg in
            let (code, challenges, user) = try await challenge(s, &reg)
            let c = challenges[0]
            guard let nonce = c.nonce, !nonce.isEmpty else { return .failed("the challenge has no nonce (RFC 3261 §22.4)") }
            // The same length, every character changed.
            let forgedNonce = String(nonce.map { $0 == "a" ? "b" : "a" })
            var forged = c
            forged.parameters = c.parameters.map { $0.name.lowercased() == "nonce" ? SIPParameter(name: "nonce", value: forgedNonce, quoted: true) : $0 }
            let cred = s.credentials!
            let answer: AuthenticationHeader
            do {
                answer = try DigestClient.answer(challenge: forged, username: cred.username, password: cred.password, method: "REGISTER",
                                                 uri: reg.requestURI, cnonce: s.token(), nonceCount: 1)
            } catch {
                return .failed("the challenge cannot be answered: \(error)")
            }
            let header = code == 401 ? "Authorization" : "Proxy-Authorization"
            let r = try await reg.register([reg.contact(user)], expires: 600, authorization: ["\(header): \(answer)"])
            if (200...299).contains(r.statusCode ?? 0) {
                reg.bound.insert(user)
                return .failed("an answer over a nonce the registrar never issued was accepted (\(r.statusCode ?? 0))")
            }
            return .passed
        },
    ]
}
