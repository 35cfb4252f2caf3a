import SIPMessage

/// The INVITE client transaction of RFC 3261 §17.1.1 with the Accepted state of RFC 6026.
///
/// A value type: feed it events, perform the actions it returns. It never touches a socket or
/// a clock.
///
/// ```
///            start: send INVITE, A (unreliable), B
///   Calling --1xx--> Proceeding --2xx--> Accepted --M--> Terminated
///      |  \--2xx--> Accepted            \--300-699: ACK--> Completed --D--> Terminated
///      |--300-699: ACK--> Completed
///      \--B or transport error--> Terminated (timeout reported)
/// ```
public struct InviteClientTransaction: Sendable {
    public enum State: Sendable, Hashable { case idle, calling, proceeding, completed, accepted, terminated }

    /// The events this machine is fed.
    public typealias Event = ClientTransactionInput

    public private(set) var state: State = .idle
    /// The INVITE this transaction sends.
    /// The INVITE, while the transaction may retransmit it (Calling, Proceeding): once a final
    /// response has come it keeps no copy (Completed keeps only its ACK).
    public private(set) var request: SIPMessage?
    public let reliable: Bool
    public let timers: TransactionTimers
    private var intervalA: Duration
    private var ack: SIPMessage?

    public init(request: SIPMessage, reliable: Bool, timers: TransactionTimers = .rfc3261) {
        self.request = request
        self.reliable = reliable
        self.timers = timers
        intervalA = timers.t1
    }

    /// Sends the INVITE and starts the timers.
    public mutating func start() -> [TransactionAction] {
        guard state == .idle, let request else { return [] }
        state = .calling
        return timers.transmit(request, reliable: reliable, retransmit: .A, interval: intervalA, timeout: .B)
    }

    public mutating func handle(_ event: Event) -> [TransactionAction] {
        switch (state, event) {
        case (.calling, .timer(.A)):
            guard let request else { return [] }
            intervalA = intervalA * 2
            return [.transmit(request), .startTimer(.A, after: intervalA)]
        case (.calling, .timer(.B)):
            state = .terminated
            return [.cancelTimer(.A), .timeout(.B), .terminated]
        case (.calling, .transportError), (.proceeding, .transportError):
            state = .terminated
            return [.cancelTimer(.A), .cancelTimer(.B), .transportError, .terminated]
        case (.calling, .response(let r)), (.proceeding, .response(let r)):
            guard let code = r.statusCode else { return [] }
            switch code {
            case 100..<200:
                let wasCalling = state == .calling
                state = .proceeding
                return (wasCalling ? [.cancelTimer(.A), .cancelTimer(.B)] : []) + [.deliverResponse(r)]
            case 200..<300:
                state = .accepted
                request = nil
                return [.cancelTimer(.A), .cancelTimer(.B), .deliverResponse(r), .startTimer(.M, after: timers.timeout)]
            default:
                guard let invite = request else { return [] }
                state = .completed
                let a = SIPMessage(ackFor: invite, response: r)
                ack = a
                request = nil
                return [.cancelTimer(.A), .cancelTimer(.B), .transmit(a), .deliverResponse(r), .startTimer(.D, after: timers.timerD(reliable: reliable))]
            }
        case (.completed, .response(let r)):
            // A retransmitted final response: ACK it again, the TU has seen it already.
            guard let code = r.statusCode, code >= 300, let a = ack else { return [] }
            return [.transmit(a)]
        case (.completed, .timer(.D)), (.accepted, .timer(.M)):
            state = .terminated
            return [.terminated]
        case (.accepted, .response(let r)):
            // RFC 6026 §8.4: 2xx retransmissions (and 2xx from other forks) go to the TU,
            // which ACKs them; anything else is dropped.
            guard let code = r.statusCode, (200..<300).contains(code) else { return [] }
            return [.deliverResponse(r)]
        default:
            return []
        }
    }
}
