import SIPMessage
import SIPTransaction

/// A message body carried by an INVITE session: an SDP offer or answer as a rule, with its
/// Content-Type. The session does not read it; offer/answer is the job of the SDP layer.
public struct SessionBody: Sendable, Hashable {
    public var contentType: MediaType
    public var bytes: [UInt8]

    public init(contentType: MediaType, bytes: [UInt8]) {
        self.contentType = contentType
        self.bytes = bytes
    }

    /// An `application/sdp` body.
    public static func sdp(_ bytes: [UInt8]) -> SessionBody {
        SessionBody(contentType: MediaType(type: "application", subtype: "sdp"), bytes: bytes)
    }

    /// An `application/sdp` body from text.
    public static func sdp(_ text: String) -> SessionBody { sdp(Array(text.utf8)) }

    /// The body of a message, `nil` when it has none.
    public init?(of message: SIPMessage) {
        guard !message.body.isEmpty else { return nil }
        let type = (try? message.contentType()) ?? nil
        self.init(contentType: type ?? MediaType(type: "application", subtype: "sdp"), bytes: Array(message.body))
    }

    /// Whether this is a session description (the only kind offer/answer uses).
    public var isSDP: Bool { contentType.type == "application" && contentType.subtype == "sdp" }
}

/// How an INVITE session uses reliable provisional responses (RFC 3262, option tag `100rel`).
public enum ReliableProvisionalPolicy: Sendable, Hashable {
    /// Never: a request that requires 100rel is refused with 420.
    case unsupported
    /// Offered (`Supported: 100rel`) and used when the peer offers it.
    case supported
    /// Required (`Require: 100rel` on our INVITEs; a UAC that does not support it gets 421).
    case required
}

/// Session timer settings (RFC 4028).
public struct SessionTimerSettings: Sendable, Hashable {
    /// The session interval we ask for (Session-Expires), seconds.
    public var interval: UInt32
    /// The smallest interval we accept (Min-SE), seconds; at least 90 per RFC 4028 §4.
    public var minimum: UInt32

    public init(interval: UInt32 = 1800, minimum: UInt32 = 90) {
        self.minimum = max(90, minimum)
        self.interval = max(self.minimum, interval)
    }
}

/// The parameters of one INVITE session that do not come from the peer.
public struct InviteSessionConfiguration: Sendable {
    /// Our identity: From of the calls we make (a tag is added), To of the calls we receive.
    public var localParty: NameAddress
    /// Our Contact: where the peer sends requests inside the dialog.
    public var contact: NameAddress
    /// The Via transport token (`UDP`, `TCP`, `TLS`) and sent-by (`127.0.0.1:5060`).
    public var viaTransport: String
    public var viaSentBy: String
    /// T1 and T2 drive the 2xx and reliable-provisional retransmissions (RFC 3261 §13.3.1.4).
    public var timers: TransactionTimers
    public var reliableProvisional: ReliableProvisionalPolicy
    /// Session timers; `nil` turns them off (they are still honoured when the peer requires them).
    public var sessionTimer: SessionTimerSettings?
    /// Sent in User-Agent (requests) and Server (responses) when set.
    public var userAgent: String?
    /// The methods listed in Allow.
    public var allow: [SIPMethod]
    /// A proxy route to put on the dialog-creating INVITE (an outbound proxy, loose routing).
    public var outboundRoute: [NameAddress]
    /// What our calls do with a 3xx.
    public var redirects: RedirectPolicy
    /// Whether `tdialog` (RFC 4538) is listed in our Supported: the application takes requests
    /// outside a dialog authorized by a `Target-Dialog` naming one of ours (an out-of-dialog REFER).
    public var supportsTargetDialog = false

    public init(localParty: NameAddress, contact: NameAddress, viaTransport: String = "UDP", viaSentBy: String,
                timers: TransactionTimers = .rfc3261, reliableProvisional: ReliableProvisionalPolicy = .supported,
                sessionTimer: SessionTimerSettings? = SessionTimerSettings(), userAgent: String? = nil,
                allow: [SIPMethod] = [.invite, .ack, .cancel, .bye, .options, .info, .message, .update, .prack, .refer, .notify],
                outboundRoute: [NameAddress] = [], redirects: RedirectPolicy = RedirectPolicy()) {
        self.redirects = redirects
        self.localParty = localParty
        self.contact = contact
        self.viaTransport = viaTransport
        self.viaSentBy = viaSentBy
        self.timers = timers
        self.reliableProvisional = reliableProvisional
        self.sessionTimer = sessionTimer
        self.userAgent = userAgent
        self.allow = allow
        self.outboundRoute = outboundRoute
    }

    /// Our address changed (a network change): the Contact (its user part and parameters kept)
    /// and the Via sent-by move to `host`:`port`. A non-SIP Contact keeps its URI.
    public mutating func relocate(host: SIPHost, port: UInt16?, viaSentBy: String) {
        if case .sip(var uri) = contact.uri {
            uri.host = host
            uri.port = port
            contact.uri = .sip(uri)
        }
        self.viaSentBy = viaSentBy
    }
}

/// The timers an INVITE session asks its driver to run. One of each runs at a time.
///
/// The raw value numbers the kinds from 0 in declaration order (a slot per kind in a table of a
/// session's timers).
public enum SessionTimer: Int, Sendable, Hashable, CaseIterable {
    /// Retransmit our 2xx to an INVITE (T1 doubling to T2, RFC 3261 §13.3.1.4).
    case retransmit2xx
    /// Give up waiting for the ACK of our 2xx (64·T1): send BYE.
    case ackTimeout
    /// Retransmit our reliable provisional response (RFC 3262 §3).
    case retransmitProvisional
    /// Give up waiting for the PRACK (64·T1): refuse the INVITE with 500 (RFC 3262 §3).
    case prackTimeout
    /// Retry a re-INVITE or UPDATE refused with 491 (RFC 3261 §14.1).
    case glareRetry
    /// Consider a cancelled INVITE over when no final response came (RFC 3261 §9.1, 64·T1).
    case cancelGuard
    /// Time to refresh the session (RFC 4028, the refresher's half interval).
    case sessionRefresh
    /// The session expired without a refresh (RFC 4028 §10): send BYE.
    case sessionExpiry
}

/// Some kinds of ``SessionTimer``, a bit each (by raw value): the timers a session runs, the
/// ones a driver cancels in one go. One type for every such set (the session's running timers,
/// a driver's run of cancels).
public struct SessionTimerSet: OptionSet, Sendable, Hashable {
    public let rawValue: UInt16

    @inlinable public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// The set of the one kind `timer`.
    @inlinable public init(_ timer: SessionTimer) { rawValue = 1 << UInt16(timer.rawValue) }

    /// Whether `timer` is in the set.
    @inlinable public func contains(_ timer: SessionTimer) -> Bool { rawValue & SessionTimerSet(timer).rawValue != 0 }

    /// Adds `timer`.
    @inlinable public mutating func insert(_ timer: SessionTimer) { self = SessionTimerSet(rawValue: rawValue | SessionTimerSet(timer).rawValue) }

    /// Removes `timer`.
    @inlinable public mutating func remove(_ timer: SessionTimer) { self = SessionTimerSet(rawValue: rawValue & ~SessionTimerSet(timer).rawValue) }

    /// How many kinds the set holds.
    @inlinable public var count: Int { rawValue.nonzeroBitCount }
}

/// Why a session ended.
public enum SessionEndReason: Sendable, Hashable {
    /// We sent BYE.
    case localHangup
    /// The peer sent BYE.
    case remoteHangup
    /// We cancelled our INVITE before it was answered.
    case cancelled
    /// The caller cancelled before we answered.
    case remoteCancelled
    /// Our INVITE got this final non-2xx response.
    case rejected(Int)
    /// We answered the INVITE with this final non-2xx response.
    case declined(Int)
    /// No final response to our INVITE (Timer B), or our BYE got none.
    case timeout
    /// The caller never ACKed our 2xx (RFC 3261 §13.3.1.4): we sent BYE.
    case noAck
    /// The session interval passed without a refresh (RFC 4028 §10): we sent BYE.
    case sessionExpired
    /// The transport could not carry the INVITE.
    case transportError
    /// A request inside the dialog got 481 or 408: the dialog is gone at the peer (§12.2.1.2).
    case dialogGone(Int)
    /// The peer's challenge could not be answered, or our credentials were refused.
    case authenticationFailed(String)
    /// Our INVITE was redirected (this 3xx) and could not be followed further.
    case redirectFailed(Int, RedirectFailure)
}

/// The states an INVITE session goes through, as a user sees them.
public enum SessionState: Sendable, Hashable {
    /// Not started.
    case idle
    /// UAC: INVITE sent, no provisional response yet.
    case calling
    /// UAC: a provisional response came (180/183…), with its code.
    case proceeding(Int)
    /// UAS: the INVITE arrived and is not answered.
    case incoming
    /// UAS: a provisional response with our tag was sent (ringing or early media).
    case early
    /// UAS: our 2xx was sent, its ACK has not come.
    case connecting
    /// The call is up.
    case confirmed
    /// BYE or CANCEL sent, waiting for the end.
    case terminating
    /// Over.
    case terminated(SessionEndReason)

    public var isTerminated: Bool {
        if case .terminated = self { return true }
        return false
    }
}

/// What an INVITE session tells the user.
public enum SessionEvent: Sendable {
    case stateChanged(SessionState)
    /// UAC: a provisional response (180, 183 …) from the dialog with this remote tag.
    case provisional(code: Int, remoteTag: String?, body: SessionBody?)
    /// The peer made an offer (in INVITE, re-INVITE, UPDATE or a 2xx to our offerless INVITE):
    /// answer with ``InviteSession/answer(_:)`` or refuse with ``InviteSession/rejectOffer(_:reason:warning:)``.
    case remoteOffer(SessionBody, in: SIPMethod)
    /// The peer asked us for an offer (a re-INVITE without a body): give it with ``InviteSession/answer(_:)``.
    case offerRequested
    /// The peer answered our offer.
    case remoteAnswer(SessionBody)
    /// A request inside the dialog that the session does not handle itself (INFO, MESSAGE,
    /// OPTIONS, REFER, NOTIFY…): answer it with ``InviteSession/respond(to:statusCode:body:)``.
    case request(SIPMessage, transaction: TransactionID)
    /// The final response to a request we sent inside the dialog (re-INVITE, UPDATE, INFO…).
    case requestCompleted(method: SIPMethod, statusCode: Int, response: SIPMessage?)
    /// Our INVITE got this 3xx and goes again to `target` (same Call-ID and tag, the next CSeq,
    /// the 3xx's Diversion and History-Info kept), as ``RedirectPolicy`` says.
    case redirected(statusCode: Int, target: SIPURI)
    /// Our INVITE got this 3xx and the policy asks (``RedirectPolicy/Mode/ask``): call `target`
    /// with ``InviteSession/followRedirect()``, pass to the next one with
    /// ``InviteSession/skipRedirect()``, or end the call with ``InviteSession/stopRedirect()``.
    /// The call stays in its state until then.
    case redirectOffered(statusCode: Int, target: SIPURI)
    /// A re-INVITE or UPDATE we asked for was refused with 491 and will be retried.
    case glare(retryAfter: Duration)
    /// The session interval was refreshed (RFC 4028): the new interval in seconds.
    case sessionRefreshed(interval: UInt32)
    /// A second 2xx from another fork: it was ACKed and sent BYE (RFC 3261 §13.2.2.4).
    case extraForkEnded(remoteTag: String)
}

/// Misuse of the session API (a call in a state that does not allow it).
public enum SessionError: Error, Sendable, Hashable {
    /// The operation needs another state.
    case invalidState(operation: String, state: SessionState)
    /// An offer or answer is already in progress (RFC 3264 §4; the peer would answer 491).
    case offerInProgress
    /// The incoming INVITE lacks what a session needs.
    case badRequest(String)
}
