import SIPMessage
import SIPAuth

/// Why a registrar test stopped before its own verdict (a missing answer, a challenge it cannot
/// answer).
enum RegistrarStop: Error {
    case failed(String)
    case inconclusive(String)
}

/// One registration of the runner at the DUT (a registrar): an address of record, one Call-ID
/// with a rising CSeq (RFC 3261 §10.2), and digest answers to the registrar's challenges when
/// the run has credentials. The address of record is the target URI (its user, else the
/// credentials' username, else `conform`); the Request-URI is the target without its user
/// (RFC 3261 §10.2: the registrar's domain).
struct RunnerRegistration {
    let session: ConformanceSession
    let callID: String
    let fromTag: String
    var cseq: UInt32
    /// The digest state (the challenge answered, the nonce count).
    var digest: DigestClient?
    /// The Authorization (or Proxy-Authorization) lines of the last request the registrar
    /// accepted, with the header name, and whether its challenge offered qop.
    var acceptedAuthorization: [String] = []
    var acceptedWithQOP = false
    /// The contacts this registration bound (removed at the end of the test).
    var bound: Set<String> = []

    init(_ session: ConformanceSession, cseq: UInt32 = 1) {
        self.session = session
        callID = session.token() + "@conform"
        fromTag = session.token()
        self.cseq = cseq
        digest = session.credentials.map { DigestClient(credentials: [$0]) }
    }

    /// An address of record to register instead of the target's (the proxy suite's forking test).
    var addressOfRecord: String?

    /// The address of record: ``addressOfRecord`` when set, else the target URI, with the
    /// credentials' username when it has no user.
    var aor: String {
        if let addressOfRecord { return addressOfRecord }
        var u = session.targetURI
        u.parameters = []
        u.headers = []
        if u.user == nil { u.user = session.credentials?.username ?? "conform" }
        return u.description
    }

    /// The Request-URI: the registrar (the target without user).
    var requestURI: String {
        var u = session.targetURI
        u.user = nil
        u.password = nil
        u.parameters = []
        u.headers = []
        return u.description
    }

    /// A fresh contact user (`c-…`), unique in the run.
    func newContact() -> String { "c-" + session.token() }

    /// The Contact value of a contact user, at the runner.
    func contact(_ user: String, _ params: String = "") -> String { "<sip:\(user)@\(session.hostPort)\(session.uriTransport)>\(params)" }

    /// The REGISTER's text.
    func text(branch: String, cseq: UInt32, contacts: [String], expires: Int?, authorization: [String]) -> String {
        var lines = ["REGISTER \(requestURI) SIP/2.0",
                     "Via: SIP/2.0/\(session.viaTransport) \(session.hostPort);branch=\(branch);rport",
                     "Max-Forwards: 70",
                     "From: <\(aor)>;tag=\(fromTag)",
                     "To: <\(aor)>",
                     "Call-ID: \(callID)",
                     "CSeq: \(cseq) REGISTER"]
        lines += contacts.map { "Contact: \($0)" }
        if let expires { lines.append("Expires: \(expires)") }
        lines += authorization
        lines.append("Content-Length: 0")
        return lines.joined(separator: "\r\n") + "\r\n\r\n"
    }

    /// Sends a REGISTER with `contacts` (Contact values as written) and `expires` (the Expires
    /// header, none when nil), at `cseq` when given (the next number otherwise), and returns the
    /// registrar's final answer. A 401/407 is answered with the credentials (a new CSeq, RFC 3261
    /// §22.2) and the answer to that returned; with no credentials the test is inconclusive.
    /// `authorization`, when given, is sent as it is instead of the digest's own.
    mutating func register(_ contacts: [String], expires: Int?, cseq explicit: UInt32? = nil, authorization fixed: [String]? = nil,
                           answerChallenge: Bool = true) async throws -> SIPMessage {
        var number = explicit ?? cseq
        var rng = SystemRandomNumberGenerator()
        var authorization: [String] = fixed ?? []
        if fixed == nil, var client = digest {
            authorization = client.authorizeCached(method: .register, requestURI: requestURI, using: &rng).map { "Authorization: \($0)" }
            digest = client
        }
        var attempts = 0
        while true {
            let branch = session.branch()
            session.send(text(branch: branch, cseq: number, contacts: contacts, expires: expires, authorization: authorization))
            cseq = max(cseq, number &+ 1)
            guard let r = await session.finalResponse(branch: branch, method: .register) else {
                throw RegistrarStop.failed("no final response to REGISTER (CSeq \(number))")
            }
            let code = r.statusCode ?? 0
            if (200...299).contains(code) {
                digest?.requestSucceeded()
                if !authorization.isEmpty { acceptedAuthorization = authorization }
                return r
            }
            guard code == 401 || code == 407, answerChallenge, fixed == nil, attempts < 2 else { return r }
            attempts += 1
            guard var client = digest else {
                throw RegistrarStop.inconclusive("the registrar challenged (\(code)) and the run has no credentials (--user, --password)")
            }
            let challenges = (code == 401 ? try? r.wwwAuthenticate() : try? r.proxyAuthenticate()) ?? []
            let header = code == 401 ? "Authorization" : "Proxy-Authorization"
            do {
                let answers = try client.authorize(challenges: challenges, method: .register, requestURI: requestURI, using: &rng)
                authorization = answers.map { "\(header): \($0)" }
            } catch .credentialsRejected {
                throw RegistrarStop.inconclusive("the registrar refused the credentials given (challenged again after the answer)")
            } catch {
                throw RegistrarStop.failed("the \(code) carries no challenge the runner can answer: \(error) (RFC 3261 §22.1: a 401 carries WWW-Authenticate, a 407 Proxy-Authenticate)")
            }
            digest = client
            acceptedWithQOP = challenges.contains { $0["qop"] != nil }
            number = cseq
        }
    }

    /// Registers `contacts` (users) for `expires` seconds and requires a 2xx.
    mutating func bind(_ users: [String], expires: Int = 600) async throws -> SIPMessage {
        let r = try await register(users.map { contact($0) }, expires: expires)
        guard (200...299).contains(r.statusCode ?? 0) else {
            throw RegistrarStop.inconclusive("REGISTER of a new binding was answered \(r.statusCode ?? 0), so the test's binding could not be made")
        }
        bound.formUnion(users)
        return r
    }

    /// A query (REGISTER without Contact, RFC 3261 §10.2.3); requires a 2xx.
    mutating func query() async throws -> SIPMessage {
        let r = try await register([], expires: nil)
        guard (200...299).contains(r.statusCode ?? 0) else { throw RegistrarStop.failed("a query (REGISTER without Contact) was answered \(r.statusCode ?? 0), 200 expected (RFC 3261 §10.2.3)") }
        return r
    }

    /// Removes what the test bound (best effort: the test's verdict is already made).
    mutating func cleanUp() async {
        guard !bound.isEmpty else { return }
        _ = try? await register(bound.sorted().map { contact($0, ";expires=0") }, expires: nil)
        bound = []
    }

    /// The binding of contact user `user` listed in `response`, if any.
    static func binding(_ response: SIPMessage, _ user: String) -> NameAddress? {
        guard case .addresses(let list)? = try? response.contact() else { return nil }
        return list.first { $0.sipURI?.user == user }
    }

    /// How many times contact user `user` is listed in `response`.
    static func listings(_ response: SIPMessage, _ user: String) -> Int {
        guard case .addresses(let list)? = try? response.contact() else { return 0 }
        return list.filter { $0.sipURI?.user == user }.count
    }
}

extension ConformanceSuites {
    static let registrarNote = "no ETSI TS 102 027-2 identifier: the registrar purposes (SIP_RG_…) could not be read in full to confirm a match"

    /// A registrar test: the body throws ``RegistrarStop`` to end early; the registration's
    /// bindings are removed at the end whatever the verdict.
    static func registrarTest(_ name: String, _ summary: String, _ reference: String, note: String? = nil,
                              _ body: @escaping @Sendable (ConformanceSession, inout RunnerRegistration) async throws -> ScenarioOutcome) -> ConformanceTestCase {
        ConformanceTestCase(name: name, etsiPurpose: nil, summary: summary, reference: reference, purposeNote: note ?? registrarNote, role: .uac) { s in
            var reg = RunnerRegistration(s)
            let outcome: ScenarioOutcome
            do { outcome = try await body(s, &reg) } catch let stop as RegistrarStop {
                switch stop {
                case .failed(let why): outcome = .failed(why)
                case .inconclusive(let why): outcome = .inconclusive(why)
                }
            }
            await reg.cleanUp()
            return outcome
        }
    }

    /// `registrar`: the runner is a UAC registering at the DUT.
    public static let registrar: [ConformanceTestCase] = [
        registrarTest("add-binding", "REGISTER with a new Contact and Expires 600 is answered 200 listing that binding with an expires parameter of at most 600",
                      "RFC 3261 §10.2.1, §10.3 steps 6 and 8") { _, reg in
            let user = reg.newContact()
            let r = try await reg.bind([user])
            guard let b = RunnerRegistration.binding(r, user) else { return .failed("the 200 does not list the new binding (RFC 3261 §10.3 step 8: it lists every current binding)") }
            if let e = b.expires, e == 0 || e > 600 { return .failed("the binding is listed with expires=\(e), for 600 asked (RFC 3261 §10.3 step 6: the registrar may shorten the interval, not lengthen it)") }
            return .passed
        },
        registrarTest("query", "a REGISTER without Contact is answered 200 listing the current bindings, the one just made among them",
                      "RFC 3261 §10.2.3, §10.3 step 8") { _, reg in
            let user = reg.newContact()
            _ = try await reg.bind([user])
            let q = try await reg.query()
            guard RunnerRegistration.binding(q, user) != nil else { return .failed("the 200 to a query does not list the binding made just before (RFC 3261 §10.3 step 8)") }
            return .passed
        },
        registrarTest("refresh", "a second REGISTER of the same Contact (same Call-ID, higher CSeq) with Expires 300 updates the binding: listed once, expires at most 300",
                      "RFC 3261 §10.2.1, §10.3 step 7") { _, reg in
            let user = reg.newContact()
            _ = try await reg.bind([user], expires: 600)
            let r = try await reg.register([reg.contact(user)], expires: 300)
            guard (200...299).contains(r.statusCode ?? 0) else { return .failed("the refresh was answered \(r.statusCode ?? 0), 200 expected") }
            let n = RunnerRegistration.listings(r, user)
            guard n == 1 else { return .failed("the refreshed binding is listed \(n) times, once expected (RFC 3261 §10.3 step 7: the binding is updated, not added)") }
            if let e = RunnerRegistration.binding(r, user)?.expires, e == 0 || e > 300 {
                return .failed("the refreshed binding is listed with expires=\(e), for 300 asked (RFC 3261 §10.3 step 7)")
            }
            return .passed
        },
        registrarTest("remove-expires-zero", "REGISTER of a bound Contact with Expires 0 removes that binding: the 200 and a later query no longer list it",
                      "RFC 3261 §10.2.2, §10.3 step 7") { _, reg in
            let user = reg.newContact()
            _ = try await reg.bind([user])
            let r = try await reg.register([reg.contact(user)], expires: 0)
            guard (200...299).contains(r.statusCode ?? 0) else { return .failed("the removal (Expires: 0) was answered \(r.statusCode ?? 0), 200 expected") }
            if RunnerRegistration.binding(r, user) != nil { return .failed("the 200 to Expires: 0 still lists the binding (RFC 3261 §10.3 step 7: expires 0 removes it)") }
            let q = try await reg.query()
            if RunnerRegistration.binding(q, user) != nil { return .failed("a query after Expires: 0 still lists the binding (RFC 3261 §10.2.2)") }
            reg.bound = []
            return .passed
        },
        registrarTest("wildcard-removes-all", "Contact: * with Expires: 0 removes every binding of the address of record (two made before): the 200 and a later query list neither",
                      "RFC 3261 §10.2.2, §10.3 step 6") { _, reg in
            let a = reg.newContact(), b = reg.newContact()
            _ = try await reg.bind([a, b])
            let r = try await reg.register(["*"], expires: 0)
            guard (200...299).contains(r.statusCode ?? 0) else { return .failed("Contact: * with Expires: 0 was answered \(r.statusCode ?? 0), 200 expected") }
            let q = try await reg.query()
            for (m, when) in [(r, "the 200 to the wildcard"), (q, "a query after the wildcard")] where RunnerRegistration.binding(m, a) != nil || RunnerRegistration.binding(m, b) != nil {
                return .failed("\(when) still lists a binding (RFC 3261 §10.3 step 6: * with Expires 0 removes every binding not newer than the request)")
            }
            reg.bound = []
            return .passed
        },
        registrarTest("wildcard-nonzero-expires", "Contact: * with Expires: 60 is refused 400 and removes nothing",
                      "RFC 3261 §10.3 step 6") { _, reg in
            let user = reg.newContact()
            _ = try await reg.bind([user])
            let r = try await reg.register(["*"], expires: 60)
            let q = try await reg.query()
            guard r.statusCode == 400 else { return .failed("Contact: * with Expires: 60 was answered \(r.statusCode ?? 0), 400 expected (RFC 3261 §10.3 step 6: an expiration other than zero makes the request invalid)") }
            guard RunnerRegistration.binding(q, user) != nil else { return .failed("the refused wildcard removed the binding anyway") }
            return .passed
        },
        registrarTest("wildcard-with-contacts", "Contact: * together with another Contact (Expires: 0) is refused 400 and removes nothing",
                      "RFC 3261 §10.3 step 6") { _, reg in
            let user = reg.newContact(), other = reg.newContact()
            _ = try await reg.bind([user])
            let r = try await reg.register(["*", reg.contact(other)], expires: 0)
            let q = try await reg.query()
            guard r.statusCode == 400 else { return .failed("Contact: * with another Contact was answered \(r.statusCode ?? 0), 400 expected (RFC 3261 §10.3 step 6: additional Contact fields make the request invalid)") }
            guard RunnerRegistration.binding(q, user) != nil else { return .failed("the refused wildcard removed the binding anyway") }
            return .passed
        },
        registrarTest("min-expires", "REGISTER asking 1 s is refused 423 with a Min-Expires above 1 (a registrar granting a longer interval instead is inconclusive: 423 is a MAY)",
                      "RFC 3261 §10.3 step 6, §21.4.17, §20.23") { _, reg in
            let user = reg.newContact()
            let r = try await reg.register([reg.contact(user)], expires: 1)
            let code = r.statusCode ?? 0
            if (200...299).contains(code) {
                reg.bound.insert(user)
                let e = RunnerRegistration.binding(r, user)?.expires.map { "expires=\($0)" } ?? "no expires"
                return .inconclusive("1 s was answered \(code) with \(e): the registrar did not use 423, which RFC 3261 §10.3 step 6 allows but does not require")
            }
            guard code == 423 else { return .failed("REGISTER asking 1 s was answered \(code), 423 (or 2xx) expected") }
            guard let text = r.values(.minExpires).first, let min = UInt32(text.trimmingCharacters(in: .whitespaces)) else {
                return .failed("the 423 has no Min-Expires (RFC 3261 §10.3 step 6: the 423 MUST carry it)")
            }
            guard min > 1 else { return .failed("the 423 gives Min-Expires \(min), not above the 1 s refused") }
            return .passed
        },
        registrarTest("q-values", "REGISTER of two Contacts with q=0.9 and q=0.1 is answered 200 listing both, each with expires, each q as given when echoed",
                      "RFC 3261 §10.2.1.2, §10.3 step 8") { _, reg in
            let a = reg.newContact(), b = reg.newContact()
            let r = try await reg.register([reg.contact(a, ";q=0.9"), reg.contact(b, ";q=0.1")], expires: 600)
            guard (200...299).contains(r.statusCode ?? 0) else { return .failed("REGISTER of two Contacts with q-values was answered \(r.statusCode ?? 0), 200 expected") }
            reg.bound.formUnion([a, b])
            for (user, q) in [(a, 0.9), (b, 0.1)] {
                guard let listed = RunnerRegistration.binding(r, user) else { return .failed("the 200 does not list the Contact with q=\(q) (RFC 3261 §10.3 step 8)") }
                if let got = listed.q, abs(got - q) > 0.0005 { return .failed("the Contact registered with q=\(q) is listed with q=\(got)") }
            }
            return .passed
        },
        registrarTest("cseq-order", "after a binding made at CSeq 100, a REGISTER of the same Call-ID with CSeq 50 removing it (Expires 0) fails and the binding stays",
                      "RFC 3261 §10.3 step 7") { _, reg in
            let user = reg.newContact()
            reg.cseq = 100
            _ = try await reg.bind([user])
            let above = reg.cseq
            let r = try await reg.register([reg.contact(user)], expires: 0, cseq: 50)
            reg.cseq = max(reg.cseq, above)
            let q = try await reg.query()
            let kept = RunnerRegistration.binding(q, user) != nil
            if !kept { return .failed("a REGISTER with CSeq 50, lower than the binding's, removed it (RFC 3261 §10.3 step 7: the update MUST be aborted)") }
            if (200...299).contains(r.statusCode ?? 0) { return .failed("a REGISTER with a CSeq lower than the binding's was answered \(r.statusCode ?? 0) (RFC 3261 §10.3 step 7: the request fails)") }
            return .passed
        },
        registrarTest("auth-challenge", "a REGISTER without credentials is challenged (401 with a Digest WWW-Authenticate carrying realm and nonce); answered with the run's credentials it is accepted 200",
                      "RFC 3261 §10.3 step 3, §22.1, §22.4") { s, reg in
            let user = reg.newContact()
            let bare = try await reg.register([reg.contact(user)], expires: 600, answerChallenge: false)
            let code = bare.statusCode ?? 0
            if (200...299).contains(code) {
                reg.bound.insert(user)
                return .inconclusive("the registrar accepted a REGISTER without credentials: it does not authenticate (RFC 3261 §10.3 step 3 leaves that to it)")
            }
            guard code == 401 || code == 407 else { return .failed("a REGISTER without credentials was answered \(code), 401 (or 2xx) expected") }
            let challenges = (code == 401 ? try? bare.wwwAuthenticate() : try? bare.proxyAuthenticate()) ?? []
            guard challenges.contains(where: { $0.scheme.lowercased() == "digest" && $0.realm != nil && $0.nonce != nil }) else {
                return .failed("the \(code) carries no Digest challenge with realm and nonce (RFC 3261 §22.1, §22.4)")
            }
            guard s.credentials != nil else { return .inconclusive("challenged as due; the run has no credentials (--user, --password) to answer it") }
            let r = try await reg.register([reg.contact(user)], expires: 600)
            guard (200...299).contains(r.statusCode ?? 0) else { return .failed("answered with the run's credentials, the REGISTER got \(r.statusCode ?? 0), 200 expected") }
            reg.bound.insert(user)
            return .passed
        },
        registrarTest("auth-wrong-password", "a challenge answered with a wrong password is not accepted (401 or 403, never 2xx)",
                      "RFC 3261 §22.4, §10.3 step 3") { s, reg in
            let user = reg.newContact()
            let bare = try await reg.register([reg.contact(user)], expires: 600, answerChallenge: false)
            let code = bare.statusCode ?? 0
            if (200...299).contains(code) {
                reg.bound.insert(user)
                return .inconclusive("the registrar accepted a REGISTER without credentials: it does not authenticate")
            }
            guard code == 401 || code == 407 else { return .inconclusive("a REGISTER without credentials was answered \(code), no challenge to answer wrongly") }
            let name = s.credentials?.username ?? (s.targetURI.user ?? "conform")
            var wrong = DigestClient(username: name, password: "not-" + (s.credentials?.password ?? "the-password") + "-" + s.token())
            var rng = SystemRandomNumberGenerator()
            let challenges = (code == 401 ? try? bare.wwwAuthenticate() : try? bare.proxyAuthenticate()) ?? []
            guard let answers = try? wrong.authorize(challenges: challenges, method: .register, requestURI: reg.requestURI, using: &rng) else {
                return .failed("the \(code) carries no challenge the runner can answer (RFC 3261 §22.1)")
            }
            let header = code == 401 ? "Authorization" : "Proxy-Authorization"
            let r = try await reg.register([reg.contact(user)], expires: 600, authorization: answers.map { "\(header): \($0)" })
            if (200...299).contains(r.statusCode ?? 0) {
                reg.bound.insert(user)
                return .failed("a wrong password was accepted (\(r.statusCode ?? 0))")
            }
            return .passed
        },
        registrarTest("nonce-reuse", "the Authorization of an accepted REGISTER, sent again as it is on the next REGISTER, is not accepted (401/407, stale or a new challenge); with no qop offered, acceptance is inconclusive",
                      "RFC 3261 §22.4; RFC 7616 §3.4 (nc detects replays); RFC 2617 §4.5") { s, reg in
            guard s.credentials != nil else {
                // Without credentials a challenge ends the test inconclusive (in register); a
                // registrar that does not challenge leaves nothing to replay.
                let user = reg.newContact()
                let r = try await reg.register([reg.contact(user)], expires: 600)
                if (200...299).contains(r.statusCode ?? 0) { reg.bound.insert(user) }
                return .inconclusive("the registrar did not challenge, so there is no Authorization to replay")
            }
            let user = reg.newContact()
            _ = try await reg.bind([user])
            let accepted = reg.acceptedAuthorization
            guard !accepted.isEmpty else { return .inconclusive("the registrar did not challenge, so there is no Authorization to replay") }
            let r = try await reg.register([reg.contact(user)], expires: 600, authorization: accepted)
            let code = r.statusCode ?? 0
            if code == 401 || code == 407 { return .passed }
            if (200...299).contains(code) {
                if reg.acceptedWithQOP { return .failed("the same Authorization (same nonce and nc) was accepted twice: a replay (RFC 7616 §3.4: a repeated nc marks a replay)") }
                return .inconclusive("the replayed Authorization was accepted; its challenge offered no qop, so there is no nonce count to tell a replay (RFC 2617 §4.5 leaves one-time nonces to the server)")
            }
            return .failed("the replayed Authorization was answered \(code), 401 or 407 expected")
        },
    ]
}
