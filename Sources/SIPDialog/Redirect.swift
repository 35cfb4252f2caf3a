import SIPMessage

/// What our calls do with a 3xx (RFC 3261 §8.1.3.4).
public struct RedirectPolicy: Sendable, Hashable {
    /// Follow or not.
    public enum Mode: Sendable, Hashable {
        /// Try the Contacts of each 3xx in q order, each target at most once.
        case follow
        /// The 3xx ends the call (``SessionEndReason/rejected(_:)``), its targets left to the application.
        case fail
    }

    public var mode: Mode
    /// Redirections one call may follow; the next ends it (``RedirectFailure/hopLimit``).
    public var maximumRedirects: Int

    /// Defaults: not followed, at most 5 hops when following.
    public init(mode: Mode = .fail, maximumRedirects: Int = 5) {
        self.mode = mode
        self.maximumRedirects = maximumRedirects
    }
}

/// Why a redirected call could not go on.
public enum RedirectFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The 3xx listed no Contact (or only expired ones).
    case noContact
    /// Every Contact was a target already tried or pointed back at us (a redirect loop).
    case loop
    /// More redirections than ``RedirectPolicy/maximumRedirects``.
    case hopLimit
    /// The Contacts use schemes we do not call (only sip and sips are followed).
    case unsupportedScheme

    public var description: String {
        switch self {
        case .noContact: return "no Contact in the redirection"
        case .loop: return "redirect loop (every target already tried or pointing back at us)"
        case .hopLimit: return "too many redirections"
        case .unsupportedScheme: return "no SIP target in the redirection"
        }
    }
}

/// The targets a redirected call may still try (RFC 3261 §8.1.3.4, §16.6 for the q-ordering):
/// the Contacts of each 3xx, highest q first (equal q in the order given), each target at most
/// once (compared as RFC 3261 §19.1.4 equivalent URIs), never one of our own addresses, within a
/// bound on hops. Pure.
public struct RedirectTargets: Sendable, Hashable {
    public let policy: RedirectPolicy
    /// The targets tried so far, the original first.
    public private(set) var tried: [SIPURI]
    /// The targets waiting, in the order they will be tried.
    public private(set) var pending: [SIPURI] = []
    /// Redirections followed so far.
    public private(set) var hops = 0

    /// - Parameter original: the call's first Request-URI.
    public init(original: SIPURI, policy: RedirectPolicy) {
        self.policy = policy
        tried = [original]
    }

    /// Takes a 3xx and returns the next target to try, or why there is none. The new Contacts
    /// go before targets left from earlier redirections. `ours` are our own addresses (a Contact
    /// equal to one of them would call ourselves).
    public mutating func next(after response: SIPMessage, ours: [SIPURI]) -> Result<SIPURI, RedirectFailure> {
        hops += 1
        guard hops <= policy.maximumRedirects else { return .failure(.hopLimit) }
        var contacts: [(uri: URI, q: Double, index: Int)] = []
        let listed = ((try? response.contact()) ?? nil)?.addresses ?? []
        for (i, a) in listed.enumerated() {
            if let e = a.parameters["expires"] ?? nil, e.trimmed == "0" { continue }
            let q = (a.parameters["q"] ?? nil).flatMap { Double($0) } ?? 1.0
            contacts.append((a.uri, q, i))
        }
        guard !contacts.isEmpty else { return pending.isEmpty ? .failure(.noContact) : .success(take()) }
        contacts.sort { $0.q != $1.q ? $0.q > $1.q : $0.index < $1.index }
        var fresh: [SIPURI] = []
        var sawSIP = false
        for c in contacts {
            guard case .sip(var u) = c.uri else { continue }
            sawSIP = true
            u.headers = []
            let known = tried + pending + fresh
            if known.contains(where: { $0.isEquivalent(to: u) }) || ours.contains(where: { Self.same($0, u) }) { continue }
            fresh.append(u)
        }
        pending = fresh + pending
        guard !pending.isEmpty else { return .failure(sawSIP ? .loop : .unsupportedScheme) }
        return .success(take())
    }

    private mutating func take() -> SIPURI {
        let u = pending.removeFirst()
        tried.append(u)
        return u
    }

    /// Whether two URIs reach the same place: host and port (5060 when absent) alike, whatever the user.
    static func same(_ a: SIPURI, _ b: SIPURI) -> Bool {
        a.host.isEquivalent(to: b.host) && (a.port ?? 5060) == (b.port ?? 5060)
    }
}
