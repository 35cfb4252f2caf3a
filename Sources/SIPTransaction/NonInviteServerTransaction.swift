import SIPMessage

/// The non-INVITE server transaction of RFC 3261 §17.2.2.
///
/// ```
///   request: deliver to TU --> Trying --TU 1xx--> Proceeding --TU 200-699--> Completed --J--> Terminated
///                                \--TU 200-699--> Completed
/// ```
public struct NonInviteServerTransaction: Sendable {
    public enum State: Sendable, Hashable { case idle, trying, proceeding, completed, terminated }

    /// The events this machine is fed: `.request` is a retransmission of the request.
    public typealias Event = ServerTransactionInput

    public private(set) var state: State = .idle
    /// The request, until the final response: a completed transaction only repeats that
    /// response to retransmissions, so it keeps no copy of the request for its 32 s (Timer J).
    public private(set) var request: SIPMessage?
    public let reliable: Bool
    public let timers: TransactionTimers
    public private(set) var lastResponse: SIPMessage?

    public init(request: SIPMessage, reliable: Bool, timers: TransactionTimers = .rfc3261) {
        self.request = request
        self.reliable = reliable
        self.timers = timers
    }

    public mutating func start() -> [TransactionAction] {
        guard state == .idle, let request else { return [] }
        state = .trying
        return [.deliverRequest(request)]
    }

    public mutating func handle(_ event: Event) -> [TransactionAction] {
        switch (state, event) {
        case (.trying, .send(let r)), (.proceeding, .send(let r)):
            guard let code = r.statusCode else { return [] }
            lastResponse = r
            if code < 200 {
                state = .proceeding
                return [.transmit(r)]
            }
            state = .completed
            request = nil
            return [.transmit(r), .startTimer(.J, after: reliable ? .zero : timers.timeout)]
        case (.proceeding, .request), (.completed, .request):
            guard let last = lastResponse else { return [] }
            return [.transmit(last)]
        case (.trying, .transportError), (.proceeding, .transportError), (.completed, .transportError):
            state = .terminated
            return [.cancelTimer(.J), .transportError, .terminated]
        case (.completed, .timer(.J)):
            state = .terminated
            return [.terminated]
        default:
            // Trying absorbs retransmissions (no response to repeat yet).
            return []
        }
    }
}
