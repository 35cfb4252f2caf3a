import SIPMessage

/// The timers of RFC 3261 §17 (Table 4) and RFC 6026.
public enum TransactionTimer: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// INVITE client: request retransmission (unreliable transports).
    case A
    /// INVITE client: transaction timeout while calling.
    case B
    /// INVITE client: wait time for response retransmissions in Completed.
    case D
    /// Non-INVITE client: request retransmission.
    case E
    /// Non-INVITE client: transaction timeout.
    case F
    /// INVITE server: response retransmission in Completed.
    case G
    /// INVITE server: wait time for the ACK.
    case H
    /// INVITE server: wait time for ACK retransmissions in Confirmed.
    case I
    /// Non-INVITE server: wait time for request retransmissions in Completed.
    case J
    /// Non-INVITE client: wait time for response retransmissions in Completed.
    case K
    /// INVITE server (RFC 6026): wait time for 2xx retransmissions and ACKs in Accepted.
    case L
    /// INVITE client (RFC 6026): wait time for 2xx retransmissions in Accepted.
    case M
    /// INVITE server: send 100 Trying when the TU has not answered within 200 ms (§17.2.1).
    case trying

    public var description: String { rawValue == "trying" ? "100-Trying" : "Timer \(rawValue)" }
}

/// T1, T2 and T4 of RFC 3261 §17 (Table 4), and the 100 Trying delay.
///
/// Every transaction keeps a copy, so the four durations are stored as nanoseconds (32 bytes,
/// not the 64 of four `Duration`s): a server holds tens of thousands of transactions lingering
/// for retransmissions. Durations finer than a nanosecond are rounded down to one.
public struct TransactionTimers: Sendable, Hashable {
    @usableFromInline var t1Nanoseconds: Int64
    @usableFromInline var t2Nanoseconds: Int64
    @usableFromInline var t4Nanoseconds: Int64
    @usableFromInline var tryingNanoseconds: Int64

    /// RTT estimate, 500 ms by default.
    @inlinable public var t1: Duration {
        get { .nanoseconds(t1Nanoseconds) }
        set { t1Nanoseconds = Self.nanoseconds(newValue) }
    }
    /// Maximum retransmission interval for non-INVITE requests and INVITE responses, 4 s.
    @inlinable public var t2: Duration {
        get { .nanoseconds(t2Nanoseconds) }
        set { t2Nanoseconds = Self.nanoseconds(newValue) }
    }
    /// Maximum time a message stays in the network, 5 s.
    @inlinable public var t4: Duration {
        get { .nanoseconds(t4Nanoseconds) }
        set { t4Nanoseconds = Self.nanoseconds(newValue) }
    }
    /// How long an INVITE server waits for the TU before sending 100 Trying itself, 200 ms.
    @inlinable public var tryingDelay: Duration {
        get { .nanoseconds(tryingNanoseconds) }
        set { tryingNanoseconds = Self.nanoseconds(newValue) }
    }

    public init(t1: Duration = .milliseconds(500), t2: Duration = .seconds(4), t4: Duration = .seconds(5), tryingDelay: Duration = .milliseconds(200)) {
        t1Nanoseconds = Self.nanoseconds(t1)
        t2Nanoseconds = Self.nanoseconds(t2)
        t4Nanoseconds = Self.nanoseconds(t4)
        tryingNanoseconds = Self.nanoseconds(tryingDelay)
    }

    /// A duration in whole nanoseconds (saturating: a timer of centuries is still centuries).
    @inlinable static func nanoseconds(_ d: Duration) -> Int64 {
        let (s, atto) = d.components
        let (ns, overflow) = s.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return s < 0 ? .min : .max }
        let (sum, over2) = ns.addingReportingOverflow(atto / 1_000_000_000)
        return over2 ? (s < 0 ? .min : .max) : sum
    }

    /// The RFC 3261 defaults.
    public static let rfc3261 = TransactionTimers()

    /// 64·T1: Timers B, F, H, J (unreliable), L and M.
    public var timeout: Duration { t1 * 64 }
    /// Timer D: at least 32 s on unreliable transports, 0 on reliable ones.
    public func timerD(reliable: Bool) -> Duration { reliable ? .zero : max(.seconds(32), t1 * 64) }

    /// The actions for a message sent for the first time and retransmitted until answered
    /// (a client's request under Timers A/B or E/F, an INVITE server's final response under
    /// G/H): `first` if given, the transmission, the `retransmit` timer after `interval` on an
    /// unreliable transport only, and the `timeout` timer after 64·T1.
    func transmit(
        _ message: SIPMessage, after first: TransactionAction? = nil, reliable: Bool,
        retransmit: TransactionTimer, interval: Duration, timeout: TransactionTimer
    ) -> [TransactionAction] {
        var out: [TransactionAction] = []
        out.reserveCapacity(4)
        if let first { out.append(first) }
        out.append(.transmit(message))
        if !reliable { out.append(.startTimer(retransmit, after: interval)) }
        out.append(.startTimer(timeout, after: self.timeout))
        return out
    }
}

/// What a transaction machine asks its driver to do.
public enum TransactionAction: Sendable {
    /// Send this message (a request or ACK for client transactions, a response for server ones).
    case transmit(SIPMessage)
    /// Start (or restart) a timer.
    case startTimer(TransactionTimer, after: Duration)
    /// Cancel a timer if it is running.
    case cancelTimer(TransactionTimer)
    /// Hand a response to the transaction user (client transactions).
    case deliverResponse(SIPMessage)
    /// Hand a request to the transaction user (server transactions: the first request, and
    /// an ACK for a 2xx in the Accepted state).
    case deliverRequest(SIPMessage)
    /// Tell the transaction user the transaction timed out (Timer B, F or H).
    case timeout(TransactionTimer)
    /// Tell the transaction user the transport failed.
    case transportError
    /// The transaction is over; the driver removes it.
    case terminated
}
