import SIPMessage

/// The non-INVITE client transaction of RFC 3261 §17.1.2.
///
/// ```
///   Trying --1xx--> Proceeding --200-699--> Completed --K--> Terminated
///     \--200-699--> Completed
///   Trying/Proceeding --F or transport error--> Terminated (timeout reported)
/// ```
public struct NonInviteClientTransaction: Sendable {
    public enum State: Sendable, Hashable { case idle, trying, proceeding, completed, terminated }

    /// The events this machine is fed.
    public typealias Event = ClientTransactionInput

    public private(set) var state: State = .idle
    /// The request, while the transaction may retransmit it (Trying, Proceeding): Completed
    /// only absorbs retransmitted responses and keeps no copy.
    public private(set) var request: SIPMessage?
    public let reliable: Bool
    public let timers: TransactionTimers
    private var intervalE: Duration

    public init(request: SIPMessage, reliable: Bool, timers: TransactionTimers = .rfc3261) {
        self.request = request
        self.reliable = reliable
        self.timers = timers
        intervalE = timers.t1
    }

    public mutating func start() -> [TransactionAction] {
        guard state == .idle, let request else { return [] }
        state = .trying
        return timers.transmit(request, reliable: reliable, retransmit: .E, interval: intervalE, timeout: .F)
    }

    public mutating func handle(_ event: Event) -> [TransactionAction] {
        switch (state, event) {
        case (.trying, .timer(.E)):
            guard let request else { return [] }
            intervalE = min(intervalE * 2, timers.t2)
            return [.transmit(request), .startTimer(.E, after: intervalE)]
        case (.proceeding, .timer(.E)):
            guard let request else { return [] }
            intervalE = timers.t2
            return [.transmit(request), .startTimer(.E, after: intervalE)]
        case (.trying, .timer(.F)), (.proceeding, .timer(.F)):
            state = .terminated
            return [.cancelTimer(.E), .timeout(.F), .terminated]
        case (.trying, .transportError), (.proceeding, .transportError):
            state = .terminated
            return [.cancelTimer(.E), .cancelTimer(.F), .transportError, .terminated]
        case (.trying, .response(let r)), (.proceeding, .response(let r)):
            guard let code = r.statusCode else { return [] }
            if code < 200 {
                state = .proceeding
                return [.deliverResponse(r)]
            }
            state = .completed
            request = nil
            let k = reliable ? Duration.zero : timers.t4
            return [.cancelTimer(.E), .cancelTimer(.F), .deliverResponse(r), .startTimer(.K, after: k)]
        case (.completed, .timer(.K)):
            state = .terminated
            return [.terminated]
        default:
            // Completed absorbs retransmitted responses.
            return []
        }
    }
}
