import Synchronization
import SIPMessage
import SIPRuntime
import SIPTransaction
import SIPTransport
import NetworkIO

/// Places short calls against a UAS (INVITE, ACK for the 2xx, BYE), at a given rate: the UAC
/// side of the SIPp interop tests and a load generator. Each call succeeds when its BYE gets a
/// 2xx; it fails on a non-2xx answer, a timeout or a transport error.
public final class CallGenerator: Sendable {
    public struct Result: Sendable, Hashable {
        public var started = 0
        public var succeeded = 0
        public var failed = 0
        public var failures: [String: Int] = [:]
        public var finished: Int { succeeded + failed }
    }

    struct Call {
        var invite: SIPMessage
        var acked: SIPMessage?
        var byeSent = false
        var done = false
    }

    private let endpoint: SIPEndpoint
    private let target: SIPURI
    private let peer: SIPPeer
    private let local: SIPPeer
    private let prefix: String
    private let state = Mutex<(result: Result, calls: [Int: Call])>((Result(), [:]))

    /// - Parameters:
    ///   - target: the Request-URI, e.g. `sip:service@127.0.0.1:5070`.
    ///   - peer: where to send (the target's address).
    ///   - local: the endpoint's own address, for Via, From and Contact.
    public init(endpoint: SIPEndpoint, target: SIPURI, peer: SIPPeer, local: SIPPeer) {
        self.endpoint = endpoint
        self.target = target
        self.peer = peer
        self.local = local
        prefix = String(UInt64.random(in: 0...UInt64.max), radix: 36)
    }

    public var result: Result { state.withLock { $0.result } }

    /// Places `count` calls, `rate` new calls per second, and waits until all have finished or
    /// `timeout` has passed.
    public func run(count: Int, rate: Double, timeout: Duration) async -> Result {
        let interval = Duration.seconds(1.0 / max(rate, 0.001))
        for n in 0..<count {
            endpoint.timerService.schedule(after: interval * n) { [weak self] in self?.startCall(n) }
        }
        let clock = MonotonicClock()
        let deadline = clock.now + timeout
        while clock.now < deadline {
            if state.withLock({ $0.result.finished >= count }) { break }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return result
    }

    private var hostport: String { "\(local.address.isIPv6 ? "[\(local.address.ipString)]" : local.address.ipString):\(local.address.port)" }

    private func startCall(_ n: Int) {
        var invite = try! SIPMessage(method: .invite, requestURI: target.description)
        try! invite.append(.via, "SIP/2.0/\(local.transport.viaToken) \(hostport);branch=\(TransactionLayer<SIPPeer>.newBranch());rport")
        try! invite.append(.maxForwards, "70")
        try! invite.append(.from, "<sip:switchboard@\(hostport)>;tag=\(prefix)\(n)")
        try! invite.append(.to, "<\(target)>")
        try! invite.append(.callID, "\(prefix)-\(n)@switchboard")
        try! invite.append(.cseq, CSeq(1, .invite))
        try! invite.append(.contact, "<sip:switchboard@\(hostport)>")
        let sdp = "v=0\r\no=- \(n) 1 IN IP4 \(local.address.ipString)\r\ns=-\r\nc=IN IP4 \(local.address.ipString)\r\nt=0 0\r\nm=audio \(20000 + 2 * (n % 10000)) RTP/AVP 0 8\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\n"
        invite.setBody(Array(sdp.utf8), contentType: .sdp)
        state.withLock { s in
            s.result.started += 1
            s.calls[n] = Call(invite: invite)
        }
        endpoint.sendRequest(invite, to: peer) { [weak self] event in self?.inviteEvent(n, event) }
    }

    private func inviteEvent(_ n: Int, _ event: ClientTransactionEvent) {
        switch event {
        case .provisional:
            return
        case .final(let r):
            guard let code = r.statusCode, (200..<300).contains(code) else {
                finish(n, ok: false, reason: "INVITE \(r.statusCode ?? 0)")
                return
            }
            // The ACK for a 2xx (RFC 3261 §13.2.2.4): its own branch, same CSeq number. A
            // retransmitted 2xx gets the same ACK again.
            let (ack, sendBye) = state.withLock { s -> (SIPMessage?, Bool) in
                guard var call = s.calls[n], !call.done else { return (nil, false) }
                if call.acked == nil { call.acked = makeAck(call.invite, r) }
                let bye = !call.byeSent
                call.byeSent = true
                s.calls[n] = call
                return (call.acked, bye)
            }
            guard let a = ack else { return }
            endpoint.sendStateless(a, to: peer)
            if sendBye { self.sendBye(n, answer: r) }
        case .timeout:
            finish(n, ok: false, reason: "INVITE timeout")
        case .transportError:
            finish(n, ok: false, reason: "INVITE transport error")
        }
    }

    private func makeAck(_ invite: SIPMessage, _ ok: SIPMessage) -> SIPMessage {
        var ack = try! SIPMessage(method: .ack, requestURI: remoteTarget(ok))
        try! ack.append(.via, "SIP/2.0/\(local.transport.viaToken) \(hostport);branch=\(TransactionLayer<SIPPeer>.newBranch());rport")
        try! ack.append(.maxForwards, "70")
        try! ack.append(.from, invite[.from] ?? "")
        try! ack.append(.to, ok[.to] ?? "")
        try! ack.append(.callID, invite.callID ?? "")
        try! ack.append(.cseq, CSeq((try? invite.cseq().sequence) ?? 1, .ack))
        return ack
    }

    private func remoteTarget(_ ok: SIPMessage) -> String {
        if case .addresses(let a)? = try? ok.contact(), let first = a.first { return first.uri.description }
        return target.description
    }

    private func sendBye(_ n: Int, answer: SIPMessage) {
        guard let invite = state.withLock({ $0.calls[n]?.invite }) else { return }
        var bye = try! SIPMessage(method: .bye, requestURI: remoteTarget(answer))
        try! bye.append(.via, "SIP/2.0/\(local.transport.viaToken) \(hostport);branch=\(TransactionLayer<SIPPeer>.newBranch());rport")
        try! bye.append(.maxForwards, "70")
        try! bye.append(.from, invite[.from] ?? "")
        try! bye.append(.to, answer[.to] ?? "")
        try! bye.append(.callID, invite.callID ?? "")
        try! bye.append(.cseq, CSeq(2, .bye))
        endpoint.sendRequest(bye, to: peer) { [weak self] event in
            switch event {
            case .provisional: break
            case .final(let r): self?.finish(n, ok: (200..<300).contains(r.statusCode ?? 0), reason: "BYE \(r.statusCode ?? 0)")
            case .timeout: self?.finish(n, ok: false, reason: "BYE timeout")
            case .transportError: self?.finish(n, ok: false, reason: "BYE transport error")
            }
        }
    }

    private func finish(_ n: Int, ok: Bool, reason: String) {
        state.withLock { s in
            guard var call = s.calls[n], !call.done else { return }
            call.done = true
            s.calls[n] = call
            if ok { s.result.succeeded += 1 } else { s.result.failed += 1; s.result.failures[reason, default: 0] += 1 }
        }
    }
}
