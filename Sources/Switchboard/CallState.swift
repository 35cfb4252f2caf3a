import SIPMessage
import SIPDialog

/// Which way a call goes.
public enum CallDirection: Sendable, Hashable {
    /// We placed it.
    case outgoing
    /// The peer placed it.
    case incoming
}

/// Which side of a call did something.
public enum CallParty: Sendable, Hashable {
    case local
    case remote
}

/// Where an incoming call is before it is answered.
public enum IncomingPhase: Sendable, Hashable {
    /// The INVITE arrived; nothing beyond 100 Trying was sent (libSoftphone's `IncomingTrying`).
    case trying
    /// A provisional response with our tag went out: 180 Ringing, or 183 with early media
    /// (`IncomingRinging`).
    case ringing
    /// The application chose not to deal with it now (``Call/ignore()``, libSoftphone's
    /// `IncomingIgnored`): nothing changes on the wire; it can still be answered, rejected or
    /// forwarded, and the caller may give up.
    case ignored
}

/// Which side holds an established call (RFC 3264 §8.4: a `sendonly` or `inactive` offer).
public enum HoldState: Sendable, Hashable {
    /// Media flows both ways.
    case active
    /// We hold the peer.
    case localHold
    /// The peer holds us.
    case remoteHold
    /// Both hold.
    case bothHold

    init(local: Bool, remote: Bool) {
        switch (local, remote) {
        case (false, false): self = .active
        case (true, false): self = .localHold
        case (false, true): self = .remoteHold
        case (true, true): self = .bothHold
        }
    }

    /// Whether we hold the peer.
    public var isLocal: Bool { self == .localHold || self == .bothHold }
    /// Whether the peer holds us.
    public var isRemote: Bool { self == .remoteHold || self == .bothHold }
}

/// Which timer ended a call.
public enum CallTimeout: Sendable, Hashable {
    /// The far end rang and nobody answered (a 408 or 480 to our INVITE).
    case noAnswer
    /// Nothing answered our INVITE or BYE at all (Timer B or F).
    case noResponse
    /// The caller never acknowledged our 2xx (RFC 3261 §13.3.1.4).
    case noAck
    /// The session interval passed without a refresh (RFC 4028 §10).
    case sessionExpired
}

/// Why the phone's screening refused an incoming call (logged; such a call never becomes a
/// ``Call``: the application is not alerted).
public enum CallFilter: Sendable, Hashable {
    /// The caller's number is blocked in the call directory.
    case blocked
    /// Do-not-disturb is on.
    case doNotDisturb
}

/// Why a call failed in a way that is neither side's choice.
public enum CallFailure: Sendable, Hashable {
    /// The transport could not carry the call's requests (no route, connection refused…).
    case transport
    /// A request inside the dialog got 481 or 408: the peer no longer knows the call.
    case dialogGone(status: Int)
    /// The peer's challenge could not be answered, or our credentials were refused.
    case authentication(String)
    /// Our INVITE was redirected (this 3xx) and the redirection could not be followed.
    case redirect(status: Int, RedirectFailure)
}

/// Why a call ended: the union of the disconnect reasons of the voice SDKs this API is
/// modelled on (see the `CallStates` article), each from a SIP fact.
public enum CallEndReason: Sendable, Hashable {
    /// A BYE ended the established call; `by` says who sent it.
    case hungUp(by: CallParty)
    /// The caller gave up before the call was answered (CANCEL).
    case cancelled(by: CallParty)
    /// The callee refused the call with this final status (`by: .remote` for our calls, 603
    /// Decline among them; `by: .local` for calls we refused).
    case rejected(by: CallParty, status: Int)
    /// The callee was busy (486 Busy Here, 600 Busy Everywhere).
    case busy(status: Int)
    /// A timer ran out.
    case timeout(CallTimeout)
    /// The callee could not accept our media (488 Not Acceptable Here, 606 Not Acceptable).
    case mediaFailure(status: Int)
    /// We forwarded the incoming call with a 3xx to these targets.
    case forwarded(to: [SIPURI])
    /// Our call was redirected with this 3xx and not followed (the redirect policy says so).
    case redirected(status: Int)
    /// We transferred the call (REFER) and the transfer succeeded; the call ended with our BYE.
    case transferred(to: URI?)
    /// Another call replaced this one (INVITE with Replaces, RFC 3891).
    case replaced
    /// The peer sent no media (no RTP, no RTCP) for the media's inactivity timeout while it
    /// should have (`MediaSessionConfiguration.inactivityTimeout`), and we hung up (BYE).
    case noMedia
    /// Our address changed (``Phone/networkChanged(to:port:timeout:)``) and the call could not
    /// follow: the peer refused or did not answer the re-INVITE with our new address
    /// (Cloudonix's `DisconnectedDueToNetworkChange`, Twilio's reconnect failure).
    case networkChange
    /// Something failed.
    case failed(CallFailure)

    /// The reason the session layer's end reason gives (before what the phone knows on top:
    /// a forward, a transfer, a replacement).
    public init(_ reason: SessionEndReason) {
        switch reason {
        case .localHangup: self = .hungUp(by: .local)
        case .remoteHangup: self = .hungUp(by: .remote)
        case .cancelled: self = .cancelled(by: .local)
        case .remoteCancelled: self = .cancelled(by: .remote)
        case .rejected(let status):
            switch status {
            case 486, 600: self = .busy(status: status)
            case 408, 480: self = .timeout(.noAnswer)
            case 488, 606: self = .mediaFailure(status: status)
            case 300..<400: self = .redirected(status: status)
            default: self = .rejected(by: .remote, status: status)
            }
        case .declined(let status): self = .rejected(by: .local, status: status)
        case .timeout: self = .timeout(.noResponse)
        case .noAck: self = .timeout(.noAck)
        case .sessionExpired: self = .timeout(.sessionExpired)
        case .transportError: self = .failed(.transport)
        case .dialogGone(let status): self = .failed(.dialogGone(status: status))
        case .authenticationFailed(let why): self = .failed(.authentication(why))
        case .redirectFailed(let status, let why): self = .failed(.redirect(status: status, why))
        }
    }
}

/// One state model for a call, whichever way it goes: the states the voice SDKs report
/// (CallKit's starting/connecting/connected, Twilio's ringing/connected/disconnected,
/// libSoftphone's incoming phases, Cloudonix's calling/confirmed…), each reached by a SIP event.
///
/// Outgoing: `starting` → `calling` (INVITE sent) → `queued` (182) or `ringing` (180/183) →
/// `established` (2xx). Incoming: `incoming(.trying)` → `incoming(.ringing)` (our 18x) →
/// `connecting` (our 2xx, waiting for the ACK) → `established`. Every call ends in `ended`.
public enum CallState: Sendable, Hashable {
    /// Created; the INVITE has not left yet (server location, transport, media ports).
    case starting
    /// Our INVITE is out; no provisional response beyond 100 Trying yet.
    case calling
    /// The far end queues the call (182 Queued: a contact centre's waiting line).
    case queued
    /// The far end rings (180), or plays early media (a 18x whose SDP answer set up media).
    case ringing(earlyMedia: Bool)
    /// A call for us, not answered yet.
    case incoming(IncomingPhase)
    /// We answered with 2xx; the caller's ACK has not come.
    case connecting
    /// The call is up, held or not.
    case established(HoldState)
    /// The call was up and our address changed: the re-INVITE with our new Contact and media
    /// address is out (Twilio's reconnecting). It goes back to ``established(_:)`` when the
    /// peer accepts it, or ends with ``CallEndReason/networkChange``.
    case reconnecting
    /// The call is over, and why.
    case ended(CallEndReason)

    /// Whether the call is over.
    public var isEnded: Bool {
        if case .ended = self { return true }
        return false
    }

    /// Whether the call is up (held or not).
    public var isEstablished: Bool {
        if case .established = self { return true }
        return false
    }
}

/// Follows one INVITE session's events and the phone's own facts, and says which
/// ``CallState`` the call is in: a pure value, fed in order, so the mapping is tested without
/// sockets.
public struct CallStateTracker: Sendable, Hashable {
    public let direction: CallDirection
    public private(set) var state: CallState
    /// Whether a provisional response's SDP answer set up early media (our call).
    private var earlyMedia = false
    /// An answer came and its provisional response is still to be reported: the session
    /// reports the answer of an 18x before the 18x itself, and the answer of a 2xx before
    /// `confirmed` — only the first is early media.
    private var answerPending = false
    private var localHold = false
    /// The application ignores this incoming call (it stays `.incoming(.ignored)` until answered or ended).
    private var ignored = false
    private var remoteHold = false
    /// Our address changed and the call's re-INVITE has not been answered.
    private var reconnecting = false
    /// What the phone knows about how the call ended, above the session's reason.
    private var endOverride: CallEndReason?

    public init(direction: CallDirection) {
        self.direction = direction
        state = direction == .outgoing ? .starting : .incoming(.trying)
    }

    /// Feeds one session event; returns the new state when it changed.
    public mutating func feed(_ event: SessionEvent) -> CallState? {
        switch event {
        case .stateChanged(let s):
            // A pending answer followed by a state other than the provisional's own came in a 2xx.
            if case .proceeding(let code) = s {
                if answerPending, code > 100, code != 182 { earlyMedia = true }
            } else {
                answerPending = false
            }
            return move(to: mapped(s))
        case .provisional(let code, _, let body):
            guard direction == .outgoing, !state.isEnded else { return nil }
            // An answer in this 18x (reported just before it, or its body): early media.
            if body != nil || answerPending, (101..<200).contains(code), code != 182 { earlyMedia = true }
            answerPending = false
            return move(to: code == 182 ? .queued : code > 100 ? .ringing(earlyMedia: earlyMedia) : nil)
        case .remoteAnswer:
            // Early media only if the provisional response that carried it follows.
            guard direction == .outgoing, !state.isEstablished, !state.isEnded else { return nil }
            answerPending = true
            return nil
        default:
            return nil
        }
    }

    /// Notes who holds the call after an offer/answer exchange; returns the new state when
    /// the call is established and its hold state changed.
    public mutating func hold(local: Bool? = nil, remote: Bool? = nil) -> CallState? {
        if let local { localHold = local }
        if let remote { remoteHold = remote }
        guard state.isEstablished else { return nil }
        return move(to: .established(HoldState(local: localHold, remote: remoteHold)))
    }

    /// Notes that the call is following a change of our address (`true`: the re-INVITE left)
    /// or has followed it (`false`: the peer accepted); returns the new state when it changed.
    /// Only an established call reconnects.
    public mutating func reconnect(_ started: Bool) -> CallState? {
        if started {
            guard state.isEstablished else { return nil }
            reconnecting = true
            return move(to: .reconnecting)
        }
        guard reconnecting else { return nil }
        reconnecting = false
        guard state == .reconnecting else { return nil }
        return move(to: .established(HoldState(local: localHold, remote: remoteHold)))
    }

    /// Marks an incoming, unanswered call as ignored; returns the new state when it changed.
    public mutating func ignore() -> CallState? {
        guard direction == .incoming, case .incoming = state else { return nil }
        ignored = true
        return move(to: .incoming(.ignored))
    }

    /// Notes how the call will end when the session ends (a forward, a completed transfer, a
    /// replacement), so the end reason says it rather than the BYE or 3xx behind it; `nil`
    /// withdraws it (the request that was to end the call could not be sent).
    public mutating func willEnd(_ reason: CallEndReason?) {
        if !state.isEnded { endOverride = reason }
    }

    private func mapped(_ s: SessionState) -> CallState? {
        switch s {
        case .idle: return nil
        case .calling: return .calling
        case .proceeding(let code):
            if code == 182 { return .queued }
            return code > 100 ? .ringing(earlyMedia: earlyMedia) : nil
        case .incoming: return .incoming(ignored ? .ignored : .trying)
        case .early: return direction == .incoming ? .incoming(ignored ? .ignored : .ringing) : .ringing(earlyMedia: earlyMedia)
        case .connecting: return .connecting
        case .confirmed: return reconnecting ? .reconnecting : .established(HoldState(local: localHold, remote: remoteHold))
        case .terminating: return nil
        case .terminated(let reason):
            if let endOverride { return .ended(endOverride) }
            // The re-INVITE with our new address failed (no answer, the transport, the dialog gone).
            if reconnecting {
                switch reason {
                case .timeout, .transportError, .dialogGone: return .ended(.networkChange)
                default: break
                }
            }
            return .ended(CallEndReason(reason))
        }
    }

    private mutating func move(to next: CallState?) -> CallState? {
        guard let next, !state.isEnded, next != state else { return nil }
        // A late provisional never takes an answered call back to ringing.
        if state.isEstablished || state == .connecting {
            switch next {
            case .calling, .queued, .ringing, .incoming, .starting: return nil
            default: break
            }
        }
        state = next
        return next
    }
}

/// Why ``Phone/register(with:peer:expires:timeout:)`` did not register.
public enum RegistrationError: Error, Sendable, Hashable {
    /// The registrar refused or could not be reached, for this reason.
    case failed(RegistrationClient.FailureReason)
    /// No outcome within the deadline.
    case timedOut
    /// The account is registration-free (``Account/Registration/none``): it never registers.
    case registrationFree
}

/// When a call was created, established and ended (``Call/times``), on the continuous clock.
public struct CallTimes: Sendable, Hashable {
    /// When the call was created (dialed, or the INVITE arrived).
    public var created: ContinuousClock.Instant
    /// When it was first established, if it was.
    public var established: ContinuousClock.Instant?
    /// When it ended, if it has.
    public var ended: ContinuousClock.Instant?

    public init(created: ContinuousClock.Instant, established: ContinuousClock.Instant? = nil, ended: ContinuousClock.Instant? = nil) {
        self.created = created
        self.established = established
        self.ended = ended
    }

    /// From creation to established (nil if it never was).
    public var setup: Duration? { established.map { $0 - created } }
    /// From established to ended, or to now while it lasts (nil if it never was established).
    public var duration: Duration? { established.map { (ended ?? .now) - $0 } }
}
