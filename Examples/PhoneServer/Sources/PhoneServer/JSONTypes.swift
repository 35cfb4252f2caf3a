import Foundation
import Hummingbird
import Switchboard

/// A call as `GET /calls` and the action routes return it.
struct CallSummary: ResponseCodable {
    var id: UInt64
    var direction: String
    var remote: String
    /// starting, calling, queued, ringing, incoming, connecting, established or ended.
    var state: String
    /// What the state carries: who holds an established call, why a call ended…
    var detail: String?
    /// The DTMF digits received so far.
    var digits: String

    init(_ call: Call, digits: String) {
        id = call.id
        direction = "\(call.direction)"
        remote = call.remote.map { "\($0)" } ?? ""
        (state, detail) = describe(call.state)
        self.digits = digits
    }
}

struct CallList: ResponseCodable {
    var calls: [CallSummary]
}

/// `POST /calls`.
struct DialRequest: Decodable {
    var to: String
}

/// `POST /calls/{id}/digits`.
struct DigitsRequest: Decodable {
    var digits: String
}

/// One line of `GET /events`.
struct EventLine: Encodable {
    var call: UInt64
    var direction: String
    var remote: String
    /// state, digit, media or quality.
    var event: String
    var state: String?
    var detail: String?

    init(_ call: Call, event: String, state: CallState? = nil, detail: String? = nil) {
        self.call = call.id
        direction = "\(call.direction)"
        remote = call.remote.map { "\($0)" } ?? ""
        self.event = event
        self.detail = detail
        if let state { (self.state, self.detail) = describe(state) }
    }

    func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}

/// A state's name, and what it carries as text.
func describe(_ state: CallState) -> (String, String?) {
    switch state {
    case .starting: return ("starting", nil)
    case .calling: return ("calling", nil)
    case .queued: return ("queued", nil)
    case .ringing(let earlyMedia): return ("ringing", earlyMedia ? "early media" : nil)
    case .incoming(let phase): return ("incoming", "\(phase)")
    case .connecting: return ("connecting", nil)
    case .established(let hold): return ("established", "\(hold)")
    case .reconnecting: return ("reconnecting", nil)
    case .ended(let reason): return ("ended", describe(reason))
    }
}

/// Why a call ended, as words.
func describe(_ reason: CallEndReason) -> String {
    switch reason {
    case .hungUp(let by): return "hung up by \(by)"
    case .cancelled(let by): return "cancelled by \(by)"
    case .rejected(let by, let status): return "rejected by \(by) (\(status))"
    case .busy(let status): return "busy (\(status))"
    default: return "\(reason)".replacingOccurrences(of: "Switchboard.", with: "")
    }
}
