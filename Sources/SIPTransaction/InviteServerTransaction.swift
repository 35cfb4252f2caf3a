import SIPMessage

/// The INVITE server transaction of RFC 3261 §17.2.1 with the Accepted state of RFC 6026.
///
/// ```
///   INVITE: deliver to TU --> Proceeding (100 Trying after 200 ms unless the TU answered)
///   Proceeding --TU 2xx--> Accepted --L--> Terminated (ACKs and 2xx retransmissions pass)
///   Proceeding --TU 300-699--> Completed (G unreliable, H) --ACK--> Confirmed --I--> Terminated
///                                        \--H--> Terminated (timeout reported)
/// ```
public struct InviteServerTransaction: Sendable {
    public enum State: Sendable, Hashable { case idle, proceeding, completed, confirmed, accepted, terminated }

    /// The events this machine is fed: `.request` is a retransmitted INVITE or an ACK.
    public typealias Event = ServerTransactionInput

    public private(set) var state: State = .idle
    /// The INVITE, until the transaction's final response: from then on the transaction only
    /// absorbs retransmissions (and repeats a non-2xx response), so it keeps no copy of it, and a
    /// server that lingers 32 s per call holds no request in memory.
    public private(set) var request: SIPMessage?
    public let reliable: Bool
    public let timers: TransactionTimers
    /// The last response sent, while the transaction may repeat it: provisional responses, and
    /// a non-2xx final one. Nil in Accepted, where the TU retransmits its 2xx (RFC 6026).
    public private(set) var lastResponse: SIPMessage?
    private var intervalG: Duration

    public init(request: SIPMessage, reliable: Bool, timers: TransactionTimers = .rfc3261) {
        self.request = request
        self.reliable = reliable
        self.timers = timers
        intervalG = timers.t1
    }

    /// Hands the INVITE to the TU and arms the 100 Trying timer.
    public mutating func start() -> [TransactionAction] {
        guard state == .idle else { return [] }
        guard let request else { return [] }
        state = .proceeding
        return [.deliverRequest(request), .startTimer(.trying, after: timers.tryingDelay)]
    }

    public mutating func handle(_ event: Event) -> [TransactionAction] {
        switch (state, event) {
        case (.proceeding, .timer(.trying)):
            guard lastResponse == nil, let request else { return [] }
            let trying = SIPMessage(responseTo: request, statusCode: 100)
            lastResponse = trying
            return [.transmit(trying)]
        case (.proceeding, .request(let r)):
            // A retransmitted INVITE: repeat the last provisional response, if any.
            guard r.method == .invite, let last = lastResponse else { return [] }
            return [.transmit(last)]
        case (.proceeding, .send(let r)):
            guard let code = r.statusCode else { return [] }
            switch code {
            case 100..<200:
                lastResponse = r
                return [.cancelTimer(.trying), .transmit(r)]
            case 200..<300:
                state = .accepted
                request = nil
                lastResponse = nil
                return [.cancelTimer(.trying), .transmit(r), .startTimer(.L, after: timers.timeout)]
            default:
                state = .completed
                request = nil
                lastResponse = r
                return timers.transmit(r, after: .cancelTimer(.trying), reliable: reliable, retransmit: .G, interval: intervalG, timeout: .H)
            }
        case (.proceeding, .transportError), (.completed, .transportError), (.accepted, .transportError):
            state = .terminated
            return [.cancelTimer(.trying), .cancelTimer(.G), .cancelTimer(.H), .cancelTimer(.L), .transportError, .terminated]
        case (.accepted, .send(let r)):
            // RFC 6026 §7.1: the TU retransmits its 2xx through the transaction.
            guard let code = r.statusCode, (200..<300).contains(code) else { return [] }
            return [.transmit(r)]
        case (.accepted, .request(let r)):
            // INVITE retransmissions are absorbed; the ACK for the 2xx goes to the TU.
            return r.method == .ack ? [.deliverRequest(r)] : []
        case (.accepted, .timer(.L)):
            state = .terminated
            return [.terminated]
        case (.completed, .request(let r)):
            if r.method == .ack {
                state = .confirmed
                return [.cancelTimer(.G), .cancelTimer(.H), .startTimer(.I, after: reliable ? .zero : timers.t4)]
            }
            guard let last = lastResponse else { return [] }
            return [.transmit(last)]
        case (.completed, .timer(.G)):
            guard let last = lastResponse else { return [] }
            intervalG = min(intervalG * 2, timers.t2)
            return [.transmit(last), .startTimer(.G, after: intervalG)]
        case (.completed, .timer(.H)):
            state = .terminated
            return [.cancelTimer(.G), .timeout(.H), .terminated]
        case (.confirmed, .timer(.I)):
            state = .terminated
            return [.terminated]
        default:
            // Confirmed absorbs ACK retransmissions.
            return []
        }
    }
}
