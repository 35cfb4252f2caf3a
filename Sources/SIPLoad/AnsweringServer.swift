import Synchronization
import SIPMessage
import SIPRuntime
import SIPTransaction
import SIPTransport

/// A minimal user agent server that answers every INVITE with one status code and every other
/// request with 200: the `switchboard serve` load target. For 2xx answers to INVITE it does
/// the one dialog-layer duty a UAS cannot skip: retransmitting the 2xx until the ACK arrives
/// (RFC 3261 §13.3.1.4: T1, doubling up to T2, for 64·T1), and echoes the INVITE's
/// Record-Route in the 2xx that establishes the dialog (§12.1.1).
public final class AnsweringServer: Sendable {
    public struct Statistics: Sendable, Hashable {
        public var invites = 0
        public var answered = 0
        public var acks = 0
        public var byes = 0
        public var cancels = 0
        public var okRetransmissions = 0
        /// 2xx answers for which no ACK came within 64·T1.
        public var ackTimeouts = 0
        public var otherRequests = 0
    }

    struct Pending {
        var response: SIPMessage
        var peer: SIPPeer
        var interval: Duration
        var elapsed: Duration
        /// The retransmission or ACK-timeout timer, cancelled when the ACK comes.
        var timer: TimerService.Handle?
    }

    /// The Call-ID held inline (no allocation per INVITE and ACK) and the CSeq number.
    struct DialogKey: Hashable { var callID: SIPByteKey; var cseq: UInt32 }

    public let answerCode: Int
    public let contact: String
    /// The Contact header (`<contact>`), checked and written once; nil when the URI does not
    /// make a header value (2xx answers then go without one).
    private let contactHeader: PreparedHeader?
    private let timers: TransactionTimers
    private let state = Mutex<(stats: Statistics, pending: [DialogKey: Pending], tag: UInt64)>((Statistics(), [:], 0))
    private let endpointBox = Mutex<SIPEndpoint?>(nil)

    /// - Parameters:
    ///   - answerCode: the final response to INVITE (200, 486, 603…).
    ///   - contact: the Contact URI put in 2xx answers.
    public init(answerCode: Int, contact: String, timers: TransactionTimers = .rfc3261) {
        self.answerCode = answerCode
        self.contact = contact
        contactHeader = try? PreparedHeader(.init(.contact), "<\(contact)>")
        self.timers = timers
    }

    /// Connects the server to its endpoint (the endpoint's handler calls ``handle(_:)``).
    public func attach(_ endpoint: SIPEndpoint) {
        endpointBox.withLock { $0 = endpoint }
    }

    public var statistics: Statistics { state.withLock { $0.stats } }

    /// `sb` and a counter in base 36, written in place (a tag of up to 15 bytes is held in
    /// the string itself: no allocation).
    private func nextTag() -> String {
        let n = state.withLock { s in
            s.tag += 1
            return s.tag
        }
        return String(unsafeUninitializedCapacity: 15) { out in
            out[0] = UInt8(ascii: "s")
            out[1] = UInt8(ascii: "b")
            var digits = 1, v = n
            while v >= 36 { v /= 36; digits += 1 }
            v = n
            for k in stride(from: 1 + digits, through: 2, by: -1) {
                let d = UInt8(v % 36)
                out[k] = d < 10 ? 0x30 + d : 0x57 + d
                v /= 36
            }
            return 2 + digits
        }
    }

    /// Handles one endpoint event.
    public func handle(_ event: EndpointEvent) {
        guard let endpoint = endpointBox.withLock({ $0 }) else { return }
        switch event {
        case .request(let r):
            let method = r.message.method ?? .options
            if method == .invite {
                var response = SIPMessage(responseTo: r.message, statusCode: answerCode, toTag: nextTag())
                if (200..<300).contains(answerCode) {
                    if let h = contactHeader { response.append(h) }
                    // RFC 3261 §12.1.1: a response that establishes a dialog copies every
                    // Record-Route value of the request, in order.
                    if r.message.firstValueBytes(.recordRoute) != nil {
                        for rr in r.message.valueBytes(.recordRoute) { try? response.append(.recordRoute, String(decoding: rr, as: UTF8.self)) }
                    }
                    if let id = r.message.callIDBytes, let cs = try? r.message.cseq() {
                        let key = DialogKey(callID: SIPByteKey(id), cseq: cs.sequence)
                        state.withLock { $0.pending[key] = Pending(response: response, peer: r.peer, interval: timers.t1, elapsed: .zero) }
                        if !r.peer.transport.isReliable { scheduleRetransmission(key, after: timers.t1) }
                        else { scheduleAckTimeout(key) }
                    }
                }
                state.withLock { $0.stats.invites += 1; $0.stats.answered += 1 }
                endpoint.respond(response, to: r.transaction)
            } else {
                state.withLock { s in
                    if method == .bye { s.stats.byes += 1 } else { s.stats.otherRequests += 1 }
                }
                endpoint.respond(SIPMessage(responseTo: r.message, statusCode: 200, toTag: r.message.toTagBytes == nil ? nextTag() : nil), to: r.transaction)
            }
        case .cancel(let c, let invite):
            state.withLock { $0.stats.cancels += 1 }
            endpoint.respond(SIPMessage(responseTo: c.message, statusCode: 200), to: c.transaction)
            endpoint.respond(SIPMessage(responseTo: c.message, statusCode: 487, toTag: nextTag()), to: invite)
        case .ack(let m, _):
            guard let id = m.callIDBytes, let cs = try? m.cseq() else { return }
            let key = DialogKey(callID: SIPByteKey(id), cseq: cs.sequence)
            let timer = state.withLock { s -> TimerService.Handle? in
                guard let p = s.pending.removeValue(forKey: key) else { return nil }
                s.stats.acks += 1
                return p.timer
            }
            if let timer { endpoint.timerService.cancel(timer) }
        default:
            break
        }
    }

    private func scheduleRetransmission(_ key: DialogKey, after delay: Duration) {
        guard let endpoint = endpointBox.withLock({ $0 }) else { return }
        let handle = endpoint.timerService.schedule(after: delay) { [weak self] in
            guard let self else { return }
            let resend: Pending? = self.state.withLock { s in
                guard var p = s.pending[key] else { return nil }
                p.elapsed += p.interval
                if p.elapsed >= self.timers.timeout {
                    s.pending[key] = nil
                    s.stats.ackTimeouts += 1
                    return nil
                }
                p.interval = min(p.interval * 2, self.timers.t2)
                s.pending[key] = p
                s.stats.okRetransmissions += 1
                return p
            }
            guard let p = resend else { return }
            endpoint.sendStateless(p.response, to: p.peer)
            self.scheduleRetransmission(key, after: p.interval)
        }
        note(handle, for: key)
    }

    /// Remembers the pending answer's timer, so its ACK cancels it.
    private func note(_ handle: TimerService.Handle, for key: DialogKey) {
        // In place (the optional-chained subscript copies the entry out and back).
        state.withLock { s in
            if let i = s.pending.index(forKey: key) { s.pending.values[i].timer = handle }
        }
    }

    private func scheduleAckTimeout(_ key: DialogKey) {
        guard let endpoint = endpointBox.withLock({ $0 }) else { return }
        let handle = endpoint.timerService.schedule(after: timers.timeout) { [weak self] in
            self?.state.withLock { s in
                if s.pending.removeValue(forKey: key) != nil { s.stats.ackTimeouts += 1 }
            }
        }
        note(handle, for: key)
    }
}
