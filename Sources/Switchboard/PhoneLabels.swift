import Synchronization
import SIPMessage
import SDP
import SIPTransaction
import SIPTransport
import SIPAuth
import SIPDialog
import SIPRuntime
import MediaRuntime
import Media

/// Helpers over session descriptions for the command-line phones.
public enum PhoneSDP {
    /// The direction attribute of a description's first audio stream, `sendrecv` when none is
    /// written (and `inactive` for RFC 2543 hold, c=0.0.0.0).
    public static func direction(of body: SessionBody) -> String {
        guard let d = try? SessionDescription.parse(body.bytes) else { return "?" }
        let media = d.media.first { $0.media == .audio } ?? d.media.first
        if let m = media, let dir = m.direction ?? d.direction { return dir.rawValue }
        return "sendrecv"
    }
}

extension SessionState {
    /// A short label for the command line.
    public var label: String {
        switch self {
        case .idle: return "idle"
        case .calling: return "calling"
        case .proceeding(let c): return c == 180 ? "ringing (180)" : "proceeding (\(c))"
        case .incoming: return "incoming"
        case .early: return "early"
        case .connecting: return "connecting"
        case .confirmed: return "confirmed"
        case .terminating: return "terminating"
        case .terminated(let r): return "ended: \(r.label)"
        }
    }
}

extension SessionEndReason {
    public var label: String {
        switch self {
        case .localHangup: return "we hung up"
        case .remoteHangup: return "the peer hung up"
        case .cancelled: return "cancelled"
        case .remoteCancelled: return "cancelled by the caller"
        case .rejected(let c): return "rejected \(c)"
        case .declined(let c): return "declined \(c)"
        case .timeout: return "no answer (timeout)"
        case .noAck: return "no ACK"
        case .sessionExpired: return "session expired"
        case .transportError: return "transport error"
        case .dialogGone(let c): return "dialog gone (\(c))"
        case .authenticationFailed(let why): return "authentication failed: \(why)"
        case .redirectFailed(let code, let why): return "redirected (\(code)) and \(why)"
        }
    }
}

extension RegistrationClient.State {
    /// A short label for the command line.
    public var label: String {
        switch self {
        case .unregistered: return "unregistered"
        case .registering: return "registering"
        case .registered(let e): return "registered (expires \(e) s)"
        case .unregistering: return "unregistering"
        case .failed(let r):
            switch r {
            case .badCredentials: return "failed: bad credentials"
            case .forbidden: return "failed: forbidden"
            case .timeout: return "failed: timeout"
            case .transport: return "failed: transport error"
            case .rejected(let c): return "failed: rejected \(c)"
            case .cannotAuthenticate(let why): return "failed: cannot authenticate (\(why))"
            }
        }
    }

    /// Whether a binding is in place.
    public var isRegistered: Bool {
        if case .registered = self { return true }
        return false
    }

    /// Whether the state is final for a wait (registered, unregistered or failed).
    public var isSettled: Bool {
        switch self {
        case .registered, .unregistered, .failed: return true
        default: return false
        }
    }
}
