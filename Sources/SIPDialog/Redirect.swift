import SIPMessage

/// What our calls do with a 3xx (RFC 3261 §8.1.3.4).
public struct RedirectPolicy: Sendable, Hashable {
    /// Follow or not.
    public enum Mode: Sendable, Hashable {
        /// Try the Contacts of each 3xx in q order, each target at most once.
        case follow
        /// The 3xx ends the call (``SessionEndReason/rejected(_:)``), its targets left to the application.
        case fail
        /// Each target is offered to the application in turn (``SessionEvent/redirectOffered(statusCode:target:)``):
        /// it calls it (``InviteSession/followRedirect()``), passes to the next one
        /// (``InviteSession/skipRedirect()``) or ends the call (``InviteSession/stopRedirect()``).
        case ask
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
    /// The application declined the targets offered (``RedirectPolicy/Mode/ask``).
    case declined
    /// The Contacts use schemes we do not call (only sip and sips are followed).
    case unsupportedScheme

    public var description: String {
        switch self {
        case .noContact: return "no Contact in the redirection"
        case .loop: return "redirect loop (every target already tried or pointing back at us)"
        case .hopLimit: return "too many redirections"
        case .unsupportedScheme: return "no SIP target in the redirection"
        case .declined: return "the application declined the redirection's targets"
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

    /// The next target left from earlier redirections, if any (the application passed on the
    /// one offered).
    public mutating func skip() -> SIPURI? {
        pending.isEmpty ? nil : take()
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

/// The headers of a 3xx that forwards a call (RFC 3261 §21.3): the Contacts, preferred first
/// (q 1.0, 0.9, …), each valid for `expires` seconds, and the redirection's history as
/// `Diversion` (RFC 5806), `History-Info` (RFC 7044, each target with its RFC 4458 `cause`), or
/// both. Pure.
public struct ForwardHeaders: Sendable, Hashable {
    /// Which history header(s) a forward writes.
    public enum History: Sendable, Hashable {
        case diversion
        case historyInfo
        case both
    }

    /// The Diversion reasons of RFC 5806 §4 and the RFC 4458 cause code each maps to.
    public static func cause(forReason reason: String) -> Int {
        switch reason.lowercased() {
        case "user-busy": return 486
        case "no-answer": return 408
        case "unavailable": return 503
        case "deflection", "time-of-day", "do-not-disturb", "away": return 480
        case "unknown": return 404
        default: return 302  // unconditional, follow-me, out-of-service…
        }
    }

    /// At most this many Contacts (the q ladder goes from 1.0 down by 0.1).
    public static let maximumTargets = 10

    /// - Parameters:
    ///   - request: the INVITE being forwarded (its Request-URI and any History-Info it carries).
    ///   - us: who forwards (the Diversion entry).
    public static func headers(forwarding request: SIPMessage, to targets: [SIPURI], by us: SIPURI, reason: String = "unconditional",
                               expires: UInt32 = 3600, history: History = .diversion) -> [(SIPHeaderName, String)] {
        let chosen = Array(targets.prefix(maximumTargets))
        let contacts = chosen.enumerated().map { i, t -> String in
            let q = max(1, 10 - i)
            return "<\(t)>;q=\(q == 10 ? "1.0" : "0.\(q)");expires=\(expires)"
        }
        var out: [(SIPHeaderName, String)] = [(.contact, contacts.joined(separator: ", "))]
        if history != .historyInfo {
            out.append((.diversion, "<\(us)>;reason=\(reason);counter=1"))
        }
        if history != .diversion {
            out.append((SIPHeaderName(.historyInfo), historyInfo(request, chosen, cause: cause(forReason: reason))))
        }
        return out
    }

    /// RFC 7044 §9.2/§10: the entries the INVITE brought (or one for its Request-URI, index 1),
    /// then one per target, each `mp`-tagged (the target user changed) below the last index,
    /// its URI carrying `cause` (RFC 4458).
    static func historyInfo(_ request: SIPMessage, _ targets: [SIPURI], cause: Int) -> String {
        var entries = request.elementBytes(SIPHeaderName(.historyInfo)).map { String(decoding: $0, as: UTF8.self) }
        var base = "1"
        if let last = entries.last, let index = (try? NameAddress(last))?.parameters["index"] ?? nil, !index.isEmpty {
            base = index
        } else {
            entries = ["<\(request.requestURIText ?? "sip:unknown@invalid")>;index=1"]
        }
        for (i, t) in targets.enumerated() {
            var u = t
            u.headers = []
            u.parameters.set("cause", String(cause))
            entries.append("<\(u)>;index=\(base).\(i + 1);mp=\(base)")
        }
        return entries.joined(separator: ", ")
    }
}
