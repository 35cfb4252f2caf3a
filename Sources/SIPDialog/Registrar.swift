import SIPMessage
import SIPAuth

/// An in-memory registrar and location service (RFC 3261 §10.3), as a value type: REGISTER in,
/// response out; time is passed in. Authentication through SIPAuth's ``DigestServer``.
public struct Registrar: Sendable {
    /// One registered contact of an address of record.
    public struct Binding: Sendable, Hashable {
        public var contact: NameAddress {
            didSet { uriText = contact.uri.description }
        }
        /// The contact's URI as text, written once when the binding is made (a proxy retargets a
        /// request to it for every request rather than formatting the URI again).
        public private(set) var uriText: String
        /// Capture of the `expires` deadline, in the caller's seconds.
        public var expiresAt: Int64
        public var callID: String
        public var cseq: UInt32
        /// RFC 5626 `+sip.instance` and `reg-id`, when the UA sent them.
        public var instanceID: String?
        public var regID: String?

        /// A binding of `contact`; its ``uriText`` is derived here, as `contact`'s `didSet` does later.
        init(contact: NameAddress, expiresAt: Int64, callID: String, cseq: UInt32, instanceID: String?, regID: String?) {
            self.contact = contact
            uriText = contact.uri.description
            self.expiresAt = expiresAt
            self.callID = callID
            self.cseq = cseq
            self.instanceID = instanceID
            self.regID = regID
        }
    }

    public struct Configuration: Sendable {
        /// The domain this registrar serves (the Request-URI host and the AOR hosts).
        public var domain: String
        /// The shortest accepted binding (shorter → 423 with Min-Expires).
        public var minExpires: UInt32
        /// The longest granted binding (longer requests are shortened).
        public var maxExpires: UInt32
        /// The binding length when the request names none.
        public var defaultExpires: UInt32
        public init(domain: String, minExpires: UInt32 = 60, maxExpires: UInt32 = 3600, defaultExpires: UInt32 = 3600) {
            self.domain = domain
            self.minExpires = minExpires
            self.maxExpires = maxExpires
            self.defaultExpires = defaultExpires
        }
    }

    public let configuration: Configuration
    private var auth: DigestServer
    private var bindings: [String: [Binding]] = [:]
    private var tag: UInt64 = 0

    public init(configuration: Configuration, authentication: DigestServer) {
        self.configuration = configuration
        auth = authentication
    }

    /// The key of an address of record: `user@host`, host lower-cased (RFC 3261 §10.3 step 5).
    /// A host without ASCII capitals (the usual case) is used as it is, not lower-cased again.
    static func key(_ uri: SIPURI) -> String {
        let host = uri.host.address
        let lower = host.utf8.contains { $0 &- 0x41 < 26 || $0 >= 0x80 } ? host.lowercased() : host
        return (uri.user ?? "") + "@" + lower
    }

    /// The live bindings of an address of record.
    public func lookup(_ aor: SIPURI, now: Int64) -> [Binding] {
        guard let all = bindings[Registrar.key(aor)] else { return [] }
        // All live (the usual case): the stored array itself, without a filtered copy.
        return all.allSatisfy { $0.expiresAt > now } ? all : all.filter { $0.expiresAt > now }
    }

    /// The number of addresses of record with at least one live binding.
    public func registeredCount(now: Int64) -> Int {
        bindings.values.filter { $0.contains { $0.expiresAt > now } }.count
    }

    private mutating func response(_ request: SIPMessage, _ code: Int) -> SIPMessage {
        tag &+= 1
        return SIPMessage(responseTo: request, statusCode: code, toTag: "reg" + String(tag, radix: 36))
    }

    /// Handles one REGISTER and returns the response to send.
    /// - Parameter requestURIChecked: the caller already decided the Request-URI is this
    ///   registrar's (it names one of its addresses rather than its domain).
    public mutating func handle<R: RandomNumberGenerator>(_ request: SIPMessage, now: Int64, requestURIChecked: Bool = false,
                                                          using rng: inout R) -> SIPMessage {
        guard request.method == .register else { return response(request, 405) }
        // Step 1-2: the Request-URI names this domain.
        guard case .sip(let target)? = try? request.requestURI(),
              requestURIChecked || target.host.address.lowercased() == configuration.domain.lowercased() else {
            return response(request, 404)
        }
        // Step 3-4: authentication.
        switch auth.verify(request: request, now: now) {
        case .authenticated(let user):
            // Step 5: the AOR is the To URI; its user must be the authenticated one.
            guard let to = try? request.to(), case .sip(let aor) = to.uri else { return response(request, 400) }
            guard aor.user == user else { return response(request, 403) }
            return register(request, aor: aor, now: now)
        case .stale:
            return challenge(request, now: now, stale: true, using: &rng)
        case .malformed:
            return response(request, 400)
        default:
            return challenge(request, now: now, stale: false, using: &rng)
        }
    }

    private mutating func challenge<R: RandomNumberGenerator>(_ request: SIPMessage, now: Int64, stale: Bool, using rng: inout R) -> SIPMessage {
        var r = response(request, 401)
        for c in auth.challenges(now: now, stale: stale, using: &rng) { try? r.append(.wwwAuthenticate, c) }
        return r
    }

    /// Steps 6-8: update the bindings and answer with the current ones.
    private mutating func register(_ request: SIPMessage, aor: SIPURI, now: Int64) -> SIPMessage {
        let key = Registrar.key(aor)
        guard let callID = request.callID, let cseq = try? request.cseq().sequence else { return response(request, 400) }
        let headerExpires: UInt32?
        do { headerExpires = try request.expires() } catch { return response(request, 400) }
        let contacts: ContactValue?
        do { contacts = try request.contact() } catch { return response(request, 400) }
        var current = (bindings[key] ?? []).filter { $0.expiresAt > now }
        switch contacts {
        case .wildcard?:
            // "*" only with Expires: 0 (§10.3 step 6): remove every binding not newer than this.
            guard headerExpires == 0 else { return response(request, 400) }
            current.removeAll { $0.callID != callID || $0.cseq < cseq }
        case .addresses(let list)?:
            for c in list {
                let asked = c.expires ?? headerExpires ?? configuration.defaultExpires
                if asked != 0 && asked < configuration.minExpires {
                    var r = response(request, 423)
                    try? r.append(.minExpires, String(configuration.minExpires))
                    return r
                }
                let granted = min(asked, configuration.maxExpires)
                let existing = current.firstIndex { Registrar.sameContact($0.contact, c) }
                if let i = existing, current[i].callID == callID, current[i].cseq >= cseq {
                    // §10.3 step 7: an older or repeated request for this binding.
                    return response(request, 500)
                }
                if let i = existing { current.remove(at: i) }
                guard granted > 0 else { continue }
                var bare = c
                bare.parameters.remove("expires")
                current.append(Binding(contact: bare, expiresAt: now + Int64(granted), callID: callID, cseq: cseq,
                                       instanceID: c.parameters["+sip.instance"] ?? nil, regID: c.parameters["reg-id"] ?? nil))
            }
        case nil:
            break  // a query
        }
        bindings[key] = current.isEmpty ? nil : current
        var ok = response(request, 200)
        for b in current {
            var c = b.contact
            c.parameters.set("expires", String(max(0, b.expiresAt - now)))
            try? ok.append(.contact, c)
        }
        return ok
    }

    static func sameContact(_ a: NameAddress, _ b: NameAddress) -> Bool {
        switch (a.uri, b.uri) {
        case (.sip(let x), .sip(let y)): return x.isEquivalent(to: y)
        default: return a.uri == b.uri
        }
    }
}
