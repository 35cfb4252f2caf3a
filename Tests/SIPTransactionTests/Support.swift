import Testing
import SIPMessage
@testable import SIPTransaction

func msg(_ s: String) -> SIPMessage {
    try! SIPMessage(bytes: Array(s.replacingLF().utf8))
}

extension String {
    func replacingLF() -> String {
        var out = ""
        for c in self.unicodeScalars { if c == "\n" { out += "\r\n" } else { out.unicodeScalars.append(c) } }
        return out
    }
}

func request(_ method: String = "INVITE", branch: String = "z9hG4bKabc", sentBy: String = "192.0.2.1:5060", cseq: Int = 1, toTag: String? = nil, fromTag: String = "f1", callID: String = "call-1") -> SIPMessage {
    msg("""
    \(method) sip:bob@example.com SIP/2.0
    Via: SIP/2.0/UDP \(sentBy);branch=\(branch)
    Max-Forwards: 70
    From: <sip:alice@example.com>;tag=\(fromTag)
    To: <sip:bob@example.com>\(toTag.map { ";tag=" + $0 } ?? "")
    Call-ID: \(callID)
    CSeq: \(cseq) \(method == "ACK" ? "INVITE" : method)
    Content-Length: 0


    """)
}

func response(_ code: Int, to req: SIPMessage, toTag: String? = "t1") -> SIPMessage {
    SIPMessage(responseTo: req, statusCode: code, toTag: code == 100 ? nil : toTag)
}

/// A compact description of actions, for table-driven expectations.
func describe(_ actions: [TransactionAction]) -> [String] {
    actions.map { a in
        switch a {
        case .transmit(let m): return "send " + (m.method.map { $0.token } ?? "\(m.statusCode!)")
        case .startTimer(let t, let d): return "start \(t.rawValue) \(ms(d))"
        case .cancelTimer(let t): return "cancel \(t.rawValue)"
        case .deliverResponse(let m): return "deliver \(m.statusCode!)"
        case .deliverRequest(let m): return "deliver \(m.method!.token)"
        case .timeout(let t): return "timeout \(t.rawValue)"
        case .transportError: return "transport error"
        case .terminated: return "terminated"
        }
    }
}

func ms(_ d: Duration) -> String {
    let (s, a) = d.components
    return "\(s * 1000 + a / 1_000_000_000_000_000)ms"
}
