import SIPMessage

/// How a transfer we asked for (a REFER we sent) ended, as far as the transferee told us.
///
/// A transfer succeeds only on a final NOTIFY's 2xx sipfrag, never on the 202 to the REFER
/// (RFC 3515 §2.4.5); 200 and 202 to the REFER mean the same (RFC 7647). Without a subscription
/// (`Refer-Sub: false` granted, RFC 4488) the outcome is unknown, not a success.
public enum ReferOutcome: Sendable, Hashable, CustomStringConvertible {
    /// The referred request (usually the INVITE to the transfer target) got this 2xx.
    case succeeded(Int)
    /// The referred request failed with this final status (486, 603, 408, …).
    case failed(Int)
    /// The REFER itself was refused with this status (403, 405, 481, 501, …; 408 when it went
    /// unanswered).
    case refused(Int)
    /// The REFER was accepted, but we cannot know how the referred request ended.
    case unknown(ReferOutcomeUnknown)

    /// Whether the transfer is known to have succeeded.
    public var isSuccess: Bool { if case .succeeded = self { return true } else { return false } }

    /// `succeeded (200)`, `failed (486)`, `refused (403)`, `unknown: no subscription`.
    public var description: String {
        switch self {
        case .succeeded(let c): return "succeeded (\(c))"
        case .failed(let c): return "failed (\(c))"
        case .refused(let c): return "refused (\(c))"
        case .unknown(let why): return "unknown: \(why)"
        }
    }
}

/// Why a transfer's outcome is unknown.
public enum ReferOutcomeUnknown: Sendable, Hashable, CustomStringConvertible {
    /// The transferee accepted without a subscription (`Refer-Sub: false`, RFC 4488).
    case noSubscription
    /// The subscription ended (`Subscription-State: terminated`) before any final status, with
    /// this reason (`noresource`, `timeout`, `rejected`, …) when one was given.
    case terminatedWithoutFinalStatus(reason: String?)
    /// No NOTIFY came within the bound after the last sign of life.
    case noNotify

    public var description: String {
        switch self {
        case .noSubscription: return "no subscription"
        case .terminatedWithoutFinalStatus(let r): return "subscription ended without a final status" + (r.map { " (\($0))" } ?? "")
        case .noNotify: return "no NOTIFY in time"
        }
    }
}

/// The transferor's side of a REFER's implicit subscription (RFC 3515, RFC 6665, RFC 4488): it
/// reads the REFER's response and the NOTIFYs that follow, answers each NOTIFY, reports the
/// referred request's progress (the sipfrag status lines) and, once, the ``ReferOutcome``.
///
/// Pure: the driver sends the REFER, hands in its response and the NOTIFYs that match
/// (``matches(_:)``), sends the responses it is told to, and runs one timer.
public struct ReferSubscriber: Sendable {
    /// Settings.
    public struct Configuration: Sendable, Hashable {
        /// How long to wait for a NOTIFY: after the 2xx to the REFER, then after each NOTIFY
        /// that does not end the transfer. With nothing by then the outcome is
        /// ``ReferOutcomeUnknown/noNotify`` (the transferor may take its call back).
        public var notifyTimeout: Duration
        /// Whether our REFER asked for no subscription (`Refer-Sub: false`, RFC 4488).
        public var requestedNoSubscription: Bool

        /// Defaults: a 32 s NOTIFY bound (64·T1), a subscription asked for.
        public init(notifyTimeout: Duration = .seconds(32), requestedNoSubscription: Bool = false) {
            self.notifyTimeout = notifyTimeout
            self.requestedNoSubscription = requestedNoSubscription
        }
    }

    /// Where the subscription stands.
    public enum State: Sendable, Hashable {
        /// The REFER is out; no final response yet.
        case referring
        /// Accepted; NOTIFYs report progress.
        case active
        /// The outcome is known (reported), NOTIFYs are still answered until one terminates
        /// the subscription.
        case finished(ReferOutcome)
        /// Over; a NOTIFY now gets 481.
        case closed(ReferOutcome)
    }

    /// What the driver does.
    public enum Action: Sendable, Hashable {
        /// Answer the NOTIFY just handed in with this status (200, 400, 481, 489).
        case respond(statusCode: Int)
        /// The referred request's latest status (100 Trying, 180 Ringing, …, the final one).
        case progress(SIPFragStatus)
        /// The transfer's outcome, reported once.
        case finished(ReferOutcome)
        /// (Re)arm the one timer.
        case startTimer(Duration)
        /// Stop the timer.
        case cancelTimer
    }

    /// The REFER's CSeq number: the `id` of its `Event: refer` (RFC 3515 §2.4.6). A REFER
    /// sent again with credentials (401/407) has the next one: taken from its final response.
    public private(set) var referCSeq: UInt32
    public let configuration: Configuration
    public private(set) var state: State = .referring
    /// The last status line a NOTIFY carried.
    public private(set) var lastStatus: SIPFragStatus?

    public init(referCSeq: UInt32, configuration: Configuration = Configuration()) {
        self.referCSeq = referCSeq
        self.configuration = configuration
    }

    /// Whether a NOTIFY belongs to this subscription: `Event: refer` with our REFER's CSeq as
    /// `id`, or with no `id` (a dialog with one REFER, as most peers write it).
    public func matches(_ notify: SIPMessage) -> Bool {
        guard let event = try? notify.event(), event.package.lowercased() == "refer" else { return false }
        guard let id = event.id else { return true }
        return UInt32(id) == referCSeq
    }

    /// The final response to the REFER (provisional responses change nothing).
    public mutating func handleReferResponse(_ response: SIPMessage) -> [Action] {
        guard let code = response.statusCode, code >= 200, case .referring = state else { return [] }
        if let cseq = try? response.cseq(), cseq.method == .refer { referCSeq = cseq.sequence }
        guard code < 300 else { return finish(.refused(code), close: true) }
        // RFC 4488: no subscription only when we asked for none and the 2xx grants it.
        let granted = response.values(SIPHeaderName("Refer-Sub")).first.map { $0.trimmed.lowercased() == "false" } ?? false
        if configuration.requestedNoSubscription && granted { return finish(.unknown(.noSubscription), close: true) }
        state = .active
        return [.startTimer(configuration.notifyTimeout)]
    }

    /// The REFER got no response (timeout) or could not be sent.
    public mutating func handleReferFailure(timeout: Bool) -> [Action] {
        guard case .referring = state else { return [] }
        return finish(.refused(timeout ? 408 : 503), close: true)
    }

    /// A NOTIFY that ``matches(_:)``: its response, the progress it carries, and the outcome
    /// when it is final. A NOTIFY before the REFER's 2xx (they can cross) counts as the 2xx.
    public mutating func handleNotify(_ notify: SIPMessage) -> [Action] {
        guard let event = try? notify.event(), event.package.lowercased() == "refer" else { return [.respond(statusCode: 489)] }
        if case .closed = state { return [.respond(statusCode: 481)] }
        guard let subscription = Self.subscriptionState(of: notify) else { return [.respond(statusCode: 400)] }
        let terminated = subscription.state.lowercased() == "terminated"
        // The body: a sipfrag status line; none is tolerated (the NOTIFY is answered 200).
        var status: SIPFragStatus?
        if !notify.body.isEmpty {
            let type = (try? notify.contentType()) ?? nil
            if let type, type.type.lowercased() != "message" || type.subtype.lowercased() != "sipfrag" { return [.respond(statusCode: 415)] }
            do { status = try SIPFragStatus(parsing: Array(notify.body)) } catch { return [.respond(statusCode: 400)] }
        }
        var out: [Action] = [.respond(statusCode: 200)]
        if let status, status != lastStatus || status.isFinal {
            lastStatus = status
            out.append(.progress(status))
        }
        switch state {
        case .referring, .active:
            if let status, status.isFinal {
                out += finish(status.statusCode < 300 ? .succeeded(status.statusCode) : .failed(status.statusCode), close: terminated)
            } else if terminated {
                out += finish(.unknown(.terminatedWithoutFinalStatus(reason: subscription.reason)), close: true)
            } else {
                state = .active
                // A notifier NOTIFYs on changes only: silence is normal while the subscription
                // lasts (the target may ring a long time), so wait out its expiry, plus slack.
                let wait = subscription.expires.map { max(configuration.notifyTimeout, .seconds(Int64($0)) + .seconds(5)) } ?? configuration.notifyTimeout
                out.append(.startTimer(wait))
            }
        case .finished(let outcome):
            if terminated {
                state = .closed(outcome)
                out.append(.cancelTimer)
            }
        case .closed:
            break
        }
        return out
    }

    /// A NOTIFY's Subscription-State; when its parameters do not parse, its state alone (the
    /// leading token, which is what decides): linphonec 5.1 ends its subscriptions with
    /// `terminated;reason=reason=noresource`, and a bad parameter must not turn its final
    /// sipfrag away. Nil when the header is missing, repeated, or its state is no token.
    static func subscriptionState(of notify: SIPMessage) -> SubscriptionState? {
        if let s = try? notify.subscriptionState() { return s }
        let values = notify.values(.subscriptionState)
        guard values.count == 1 else { return nil }
        let isSpace = { (c: Character) in c == " " || c == "\t" }
        let state = values[0].prefix { $0 != ";" }.drop(while: isSpace).reversed().drop(while: isSpace).reversed()
        let token = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.!%*_+`'~")
        guard !state.isEmpty, state.allSatisfy(token.contains) else { return nil }
        return SubscriptionState(state: String(state).lowercased())
    }

    /// The timer ran out: no NOTIFY in time while the outcome was open; a finished transfer
    /// simply stops waiting for the terminating NOTIFY.
    public mutating func timerFired() -> [Action] {
        switch state {
        case .active, .referring: return finish(.unknown(.noNotify), close: true)
        case .finished(let outcome):
            state = .closed(outcome)
            return []
        case .closed: return []
        }
    }

    private mutating func finish(_ outcome: ReferOutcome, close: Bool) -> [Action] {
        state = close ? .closed(outcome) : .finished(outcome)
        // Still open: wait a bounded time for the NOTIFY that terminates the subscription.
        return [.finished(outcome), close ? .cancelTimer : .startTimer(configuration.notifyTimeout)]
    }
}

extension String {
    var trimmed: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}
