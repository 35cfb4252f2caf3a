import SIPMessage

/// The transferee's side of a REFER's implicit subscription (RFC 3515, RFC 6665): once the
/// REFER is accepted it reports the referred request's progress to the transferor in NOTIFYs
/// with `message/sipfrag` bodies — `100 Trying` at once, provisional statuses as they come, the
/// final status with `Subscription-State: terminated;reason=noresource` — and ends the
/// subscription when it expires (`reason=timeout`).
///
/// One NOTIFY is outstanding at a time (RFC 6665 §4.2.2): a status that comes while one is in
/// flight waits, and a newer one replaces it (a final status is never replaced). A NOTIFY that
/// times out or fails is not fatal while the subscription lasts; the final one is sent again up
/// to ``Configuration/finalAttempts`` times; a 481 ends the subscription at once.
///
/// Pure: the driver builds each NOTIFY in the dialog from a ``Notify`` and hands back its
/// outcome with ``notifyCompleted(statusCode:)``.
public struct ReferNotifier: Sendable {
    /// Settings.
    public struct Configuration: Sendable, Hashable {
        /// The subscription's duration, written as `Subscription-State: active;expires=…`.
        public var expires: UInt32
        /// Attempts for the final NOTIFY when one goes unanswered.
        public var finalAttempts: Int

        /// Defaults: 180 s (longer than a target usually rings: the subscription should outlive
        /// the referred INVITE), the final NOTIFY tried twice.
        public init(expires: UInt32 = 180, finalAttempts: Int = 2) {
            self.expires = expires
            self.finalAttempts = max(1, finalAttempts)
        }
    }

    /// One NOTIFY to send in the REFER's dialog.
    public struct Notify: Sendable, Hashable {
        /// The `Event` header value: `refer`, or `refer;id=<REFER CSeq>`.
        public var event: String
        /// The `Subscription-State` header value.
        public var subscriptionState: String
        /// The sipfrag status line (the body, `message/sipfrag`).
        public var status: SIPFragStatus

        /// The body to attach.
        public var body: SessionBody { SessionBody(contentType: MediaType(type: "message", subtype: "sipfrag"), bytes: status.bytes) }
    }

    /// What the driver does.
    public enum Action: Sendable, Hashable {
        /// Send this NOTIFY (in the REFER's dialog) and report its outcome.
        case send(Notify)
        /// (Re)arm the subscription's one timer.
        case startTimer(Duration)
        /// Stop the timer.
        case cancelTimer
        /// The subscription is over; nothing more will be sent.
        case terminated
    }

    /// The REFER's CSeq number.
    public let referCSeq: UInt32
    /// Whether NOTIFYs carry `id` in their Event header (the dialog carried another REFER before).
    public let writesEventID: Bool
    public let configuration: Configuration
    /// Whether the subscription is over.
    public private(set) var isTerminated = false

    private var inFlight: Notify?
    private var pending: Notify?
    private var finalSent = false
    private var finalAttemptsLeft: Int
    private var lastStatus = SIPFragStatus(statusCode: 100, reasonPhrase: "Trying")

    public init(referCSeq: UInt32, writesEventID: Bool = false, configuration: Configuration = Configuration()) {
        self.referCSeq = referCSeq
        self.writesEventID = writesEventID
        self.configuration = configuration
        finalAttemptsLeft = configuration.finalAttempts
    }

    /// The REFER was accepted (answered 202): the first NOTIFY (`100 Trying`) and the expiry timer.
    public mutating func accepted() -> [Action] {
        guard !isTerminated, inFlight == nil, !finalSent else { return [] }
        return [.startTimer(.seconds(Int64(configuration.expires)))] + queue(lastStatus, terminated: false)
    }

    /// The referred request's latest status (from its responses; a final one ends the
    /// subscription). A status equal to the last one sent is not sent again.
    public mutating func progress(_ status: SIPFragStatus) -> [Action] {
        guard !isTerminated, !finalSent else { return [] }
        if !status.isFinal, status == lastStatus { return [] }
        lastStatus = status
        return queue(status, terminated: status.isFinal, reason: "noresource")
    }

    /// The outcome of the NOTIFY in flight: its final status, or nil when it timed out or failed.
    public mutating func notifyCompleted(statusCode: Int?) -> [Action] {
        guard let sent = inFlight else { return [] }
        inFlight = nil
        if statusCode == 481 { return end() }
        let failed = statusCode == nil || (statusCode ?? 0) >= 300
        if sent.subscriptionState.hasPrefix("terminated") {
            if failed && finalAttemptsLeft > 0 { return send(sent) }
            return end()
        }
        if let next = pending {
            pending = nil
            return send(next)
        }
        return []
    }

    /// The subscription expired before the referred request ended.
    public mutating func timerFired() -> [Action] {
        guard !isTerminated, !finalSent else { return [] }
        return queue(lastStatus, terminated: true, reason: "timeout")
    }

    private mutating func queue(_ status: SIPFragStatus, terminated: Bool, reason: String = "noresource") -> [Action] {
        let state = terminated ? "terminated;reason=\(reason)" : "active;expires=\(configuration.expires)"
        let notify = Notify(event: writesEventID ? "refer;id=\(referCSeq)" : "refer", subscriptionState: state, status: status)
        var out: [Action] = []
        if terminated {
            finalSent = true
            out.append(.cancelTimer)
        }
        if inFlight != nil {
            pending = notify
            return out
        }
        return out + send(notify)
    }

    private mutating func send(_ notify: Notify) -> [Action] {
        if notify.subscriptionState.hasPrefix("terminated") { finalAttemptsLeft -= 1 }
        inFlight = notify
        return [.send(notify)]
    }

    private mutating func end() -> [Action] {
        isTerminated = true
        inFlight = nil
        pending = nil
        return [.cancelTimer, .terminated]
    }
}

extension SessionState {
    /// What the transferor is told of a call placed for its REFER (RFC 3515 §2.4.5, the
    /// sipfrag of ``ReferNotifier/progress(_:)``): each provisional status, 200 once answered,
    /// and for a call that ended unanswered the status that ended it (its final response; 408
    /// timeout, 487 cancelled, 503 transport error, 403 authentication, 480 a redirection that
    /// could not be followed). `nil` for the other states and for the ends of an answered call.
    public var referProgress: SIPFragStatus? {
        switch self {
        case .proceeding(let code): return SIPFragStatus(statusCode: code)
        case .confirmed: return SIPFragStatus(statusCode: 200)
        case .terminated(let reason):
            switch reason {
            case .rejected(let c), .declined(let c), .dialogGone(let c): return SIPFragStatus(statusCode: c)
            case .timeout: return SIPFragStatus(statusCode: 408)
            case .cancelled, .remoteCancelled: return SIPFragStatus(statusCode: 487)
            case .transportError: return SIPFragStatus(statusCode: 503)
            case .authenticationFailed: return SIPFragStatus(statusCode: 403)
            case .redirectFailed: return SIPFragStatus(statusCode: 480)
            case .localHangup, .remoteHangup, .noAck, .sessionExpired: return nil
            }
        case .idle, .calling, .incoming, .early, .connecting, .terminating: return nil
        }
    }
}
