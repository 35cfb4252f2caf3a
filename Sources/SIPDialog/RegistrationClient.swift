import SIPMessage
import SIPAuth
import SIPTransaction

/// A registration binding kept alive by REGISTER (RFC 3261 §10, RFC 5626 instance/reg-id),
/// as a value type: events in, actions out, no I/O and no clock. The driver sends the
/// requests in client transactions and feeds back their outcomes and the timer.
public struct RegistrationClient: Sendable {
    /// Why a registration failed.
    public enum FailureReason: Sendable, Hashable {
        /// The registrar rejected the credentials (a new challenge right after an answer).
        case badCredentials
        /// 403.
        case forbidden
        /// No response (Timer F).
        case timeout
        /// The transport could not send.
        case transport
        /// Any other final response.
        case rejected(Int)
        /// A challenge the client cannot answer (scheme, algorithm, no credentials for the realm).
        case cannotAuthenticate(String)
    }

    /// The states a user sees.
    public enum State: Sendable, Hashable {
        case unregistered
        case registering
        /// Registered; the binding lasts `expires` seconds from the 200.
        case registered(expires: UInt32)
        case unregistering
        /// Failed; a retry is scheduled unless the failure needs the user (bad credentials, 403).
        case failed(FailureReason)
    }

    /// What the driver must do.
    public enum Action: Sendable {
        /// Send this REGISTER in a new client transaction (to the registrar's address).
        case send(SIPMessage)
        /// (Re)start the single timer; when it fires, call `handle(.timerFired)`.
        case startTimer(after: Duration)
        case cancelTimer
        /// The state changed.
        case state(State)
    }

    public enum Event: Sendable {
        /// The final response to the last REGISTER.
        case response(SIPMessage)
        /// The REGISTER's transaction timed out.
        case timeout
        case transportError
        /// The timer fired (refresh or retry).
        case timerFired
    }

    public struct Configuration: Sendable {
        /// The registrar's URI (Request-URI), e.g. `sip:example.com`.
        public var registrar: SIPURI
        /// The address of record (To and From).
        public var addressOfRecord: SIPURI
        /// Our Contact URI.
        public var contact: SIPURI
        /// Requested binding lifetime.
        public var expires: UInt32
        /// RFC 5626 `+sip.instance` (a URN such as `urn:uuid:…`) and `reg-id`, when set.
        public var instanceID: String?
        public var regID: UInt32?
        /// The transport token and sent-by for the Via (`UDP`, `127.0.0.1:5060`).
        public var viaTransport: String
        public var viaSentBy: String
        /// Retry after a failure: the base wait, doubled per consecutive failure up to the cap
        /// (RFC 5626 §4.5), with ±50 % jitter.
        public var retryBase: Duration
        public var retryCap: Duration

        public init(registrar: SIPURI, addressOfRecord: SIPURI, contact: SIPURI, expires: UInt32 = 3600,
                    instanceID: String? = nil, regID: UInt32? = nil, viaTransport: String = "UDP", viaSentBy: String,
                    retryBase: Duration = .seconds(30), retryCap: Duration = .seconds(1800)) {
            self.registrar = registrar
            self.addressOfRecord = addressOfRecord
            self.contact = contact
            self.expires = expires
            self.instanceID = instanceID
            self.regID = regID
            self.viaTransport = viaTransport
            self.viaSentBy = viaSentBy
            self.retryBase = retryBase
            self.retryCap = retryCap
        }
    }

    public private(set) var configuration: Configuration
    public private(set) var state: State = .unregistered
    /// The Contact a move left behind (``move(contact:viaSentBy:)``), removed (`expires=0`) by
    /// the REGISTERs until one succeeds.
    public private(set) var retiringContact: SIPURI?
    private var digest: DigestClient
    private var rng: SplitMix64
    private var cseq: UInt32 = 0
    private let callID: String
    private let fromTag: String
    private var lastRequest: SIPMessage?
    private var requestedExpires: UInt32
    /// The expires of the REGISTER in flight (0 while unregistering), repeated when it is
    /// answered with credentials.
    private var inFlightExpires: UInt32 = 0
    private var failures = 0
    private var stopping = false
    private var answeredChallenge = false
    /// Whether the registrar's challenges came as 407 (Proxy-Authorization) rather than 401.
    private var proxyChallenges = false

    /// - Parameters:
    ///   - seed: seeds Call-ID, tags, branches, cnonces and retry jitter (reproducible runs).
    public init(configuration: Configuration, credentials: DigestClient, seed: UInt64) {
        self.configuration = configuration
        digest = credentials
        rng = SplitMix64(seed: seed)
        callID = String(rng.next(), radix: 36) + "@switchboard"
        fromTag = String(rng.next(), radix: 36)
        requestedExpires = configuration.expires
    }

    /// Starts (or restarts) registering.
    public mutating func start() -> [Action] {
        stopping = false
        failures = 0
        // The state change comes before the send, so a driver reports it before any response.
        return [.cancelTimer, set(.registering)] + send(expires: configuration.expires, authorization: [])
    }

    /// Removes the binding (REGISTER with expires 0).
    public mutating func stop() -> [Action] {
        stopping = true
        // With the credentials of the last challenge (next nonce count), so the registrar
        // need not challenge again.
        return [.cancelTimer, set(.unregistering)] + send(expires: 0, authorization: cachedCredentials())
    }

    /// Our address changed (a network change): the binding moves to `contact`. Registered or
    /// registering, a REGISTER goes at once with the new Contact and the old one with
    /// `expires=0` (RFC 3261 §10.2.2: one request adds the new binding and removes the old);
    /// otherwise the next REGISTER uses the new Contact.
    public mutating func move(contact: SIPURI, viaSentBy: String) -> [Action] {
        guard contact != configuration.contact || viaSentBy != configuration.viaSentBy else { return [] }
        if retiringContact == nil, contact != configuration.contact { retiringContact = configuration.contact }
        configuration.contact = contact
        configuration.viaSentBy = viaSentBy
        switch state {
        case .registered, .registering:
            stopping = false
            failures = 0
            return [.cancelTimer, set(.registering)] + send(expires: configuration.expires, authorization: cachedCredentials())
        case .unregistered, .unregistering, .failed:
            return []
        }
    }

    public mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .timerFired:
            if case .registered = state { return send(expires: configuration.expires, authorization: cachedCredentials()) }
            if case .failed = state { return [set(.registering)] + send(expires: configuration.expires, authorization: []) }
            return []
        case .timeout:
            return fail(.timeout, retry: true)
        case .transportError:
            return fail(.transport, retry: true)
        case .response(let r):
            return response(r)
        }
    }

    private mutating func response(_ r: SIPMessage) -> [Action] {
        guard let code = r.statusCode, code >= 200, lastRequest != nil else { return [] }
        switch code {
        case 200..<300:
            answeredChallenge = false
            digest.requestSucceeded()
            failures = 0
            retiringContact = nil
            if stopping {
                stopping = false
                return [.cancelTimer, set(.unregistered)]
            }
            let granted = grantedExpires(r) ?? requestedExpires
            guard granted > 0 else { return [set(.unregistered)] }
            let refresh = max(1, min(Int(granted) - 5, Int(Double(granted) * 0.9)))
            return [.startTimer(after: .seconds(refresh)), set(.registered(expires: granted))]
        case 401, 407:
            let challenges = (try? (code == 401 ? r.wwwAuthenticate() : r.proxyAuthenticate())) ?? []
            let stale = challenges.contains { $0.stale }
            if answeredChallenge && !stale { return fail(.badCredentials, retry: false) }
            do {
                let headers = try digest.authorize(challenges: challenges, method: .register,
                                                   requestURI: configuration.registrar.description, using: &rng)
                answeredChallenge = true
                proxyChallenges = code == 407
                return send(expires: inFlightExpires, authorization: headers.map { (code == 401 ? SIPHeaderName.authorization : .proxyAuthorization, $0) })
            } catch DigestError.credentialsRejected {
                return fail(.badCredentials, retry: false)
            } catch {
                return fail(.cannotAuthenticate("\(error)"), retry: false)
            }
        case 423:
            // Interval Too Brief: ask again with the registrar's minimum (RFC 3261 §10.2.8).
            guard let min = try? r.minExpires(), min > requestedExpires else { return fail(.rejected(423), retry: true) }
            requestedExpires = min
            // The credentials were accepted: answer again with them, not as a new attempt.
            answeredChallenge = false
            return send(expires: min, authorization: cachedCredentials())
        case 403:
            return fail(.forbidden, retry: false)
        default:
            return fail(.rejected(code), retry: true)
        }
    }

    /// The expires the registrar granted our Contact (its `expires` parameter, else Expires).
    private func grantedExpires(_ r: SIPMessage) -> UInt32? {
        if case .addresses(let bindings)? = try? r.contact() {
            for b in bindings {
                guard let u = b.sipURI else { continue }
                let ours = u.user == configuration.contact.user && u.host.isEquivalent(to: configuration.contact.host) && u.port == configuration.contact.port
                if ours, let e = b.expires { return e }
            }
        }
        return (try? r.expires()) ?? nil
    }

    /// Credentials for the remembered challenges with the next nonce count (RFC 7616 §3.4.5),
    /// sent with refreshes so the registrar need not challenge every one.
    private mutating func cachedCredentials() -> [(SIPHeaderName, AuthenticationHeader)] {
        let name: SIPHeaderName = proxyChallenges ? .proxyAuthorization : .authorization
        return digest.authorizeCached(method: .register, requestURI: configuration.registrar.description, using: &rng).map { (name, $0) }
    }

    private mutating func fail(_ reason: FailureReason, retry: Bool) -> [Action] {
        stopping = false
        answeredChallenge = false
        failures += 1
        var out: [Action] = [.cancelTimer, set(.failed(reason))]
        if retry {
            // RFC 5626 §4.5: base · 2^(failures−1), capped, then a random factor in [0.5, 1].
            let exp = min(failures - 1, 16)
            let ceiling = min(configuration.retryCap, configuration.retryBase * (1 << exp))
            let factor = 0.5 + 0.5 * Double(rng.next() >> 11) / Double(1 << 53)
            out.append(.startTimer(after: ceiling * factor))
        }
        return out
    }

    private mutating func set(_ s: State) -> Action {
        state = s
        return .state(s)
    }

    private mutating func send(expires: UInt32, authorization: [(SIPHeaderName, AuthenticationHeader)]) -> [Action] {
        cseq += 1
        inFlightExpires = expires
        var contact = NameAddress(uri: configuration.contact)
        contact.parameters.set("expires", String(expires))
        if let inst = configuration.instanceID { contact.parameters.set("+sip.instance", "<\(inst)>", quoted: true) }
        if let reg = configuration.regID { contact.parameters.set("reg-id", String(reg)) }
        let branch = "z9hG4bK" + String(rng.next(), radix: 36)
        do {
            var m = try SIPMessage(method: .register, uri: configuration.registrar)
            try m.append(.via, "SIP/2.0/\(configuration.viaTransport) \(configuration.viaSentBy);branch=\(branch);rport")
            try m.append(.maxForwards, "70")
            try m.append(.from, NameAddress(uri: configuration.addressOfRecord, parameters: [SIPParameter(name: "tag", value: fromTag)]))
            try m.append(.to, NameAddress(uri: configuration.addressOfRecord))
            try m.append(.callID, callID)
            try m.append(.cseq, CSeq(cseq, .register))
            try m.append(.contact, contact)
            if let old = retiringContact, expires > 0 {
                var gone = NameAddress(uri: old)
                gone.parameters.set("expires", "0")
                try m.append(.contact, gone)
            }
            try m.append(.expires, String(expires))
            if configuration.instanceID != nil || configuration.regID != nil { try m.append(.supported, "outbound, path") }
            for (name, value) in authorization { try m.append(name, value) }
            lastRequest = m
            return [.send(m)]
        } catch {
            return fail(.cannotAuthenticate("cannot build REGISTER: \(error)"), retry: false)
        }
    }
}
