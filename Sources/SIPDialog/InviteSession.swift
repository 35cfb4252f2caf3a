import SIPMessage
import SIPAuth
import SIPTransaction

/// One INVITE session (RFC 3261 §13–15) with its dialog, as a value type: commands and inputs
/// in, actions out; no sockets, no clock, no threads. It covers the calls we make (UAC) and
/// the calls we receive (UAS):
///
/// - provisional responses and early dialogs, forking (several early dialogs; a second 2xx is
///   ACKed and sent BYE), CANCEL and its race with 2xx, BYE from either side;
/// - the 2xx retransmission and ACK dance the dialog owns (RFC 3261 §13.3.1.4, RFC 6026):
///   our 2xx is retransmitted until its ACK, and a retransmitted 2xx gets our ACK again;
/// - re-INVITE and UPDATE (RFC 3311) for hold/resume and target refresh, with the offer/answer
///   rules of RFC 3264 §4 (491 for overlapping offers, and the §14.1 retry timers);
/// - reliable provisional responses and PRACK (RFC 3262), session timers (RFC 4028);
/// - digest challenges to our requests (401/407), other requests in the dialog passed up.
///
/// The session never reads a body: offers and answers are ``SessionBody`` values that the
/// user produces and consumes with the SDP offer/answer engine.
///
/// The driver runs client transactions for ``Action/send(_:)`` (an ACK is sent directly, it is
/// not a transaction), answers server transactions for ``Action/respond(_:in:)``, runs the
/// ``SessionTimer``s and feeds back responses (including 2xx retransmissions that match no
/// transaction), transaction failures, in-dialog requests, ACKs and CANCELs as ``Input``.
public struct InviteSession: Sendable {
    public enum Role: Sendable, Hashable { case uac, uas }

    /// What the driver must do, or tell the user.
    public enum Action: Sendable {
        /// Send a request: in a new client transaction, except an ACK, which is sent as is.
        case send(SIPMessage)
        /// Send a response in a server transaction.
        case respond(SIPMessage, in: TransactionID)
        /// Start (or restart) a timer; when it fires, feed ``Input/timerFired(_:)``.
        case startTimer(SessionTimer, after: Duration)
        case cancelTimer(SessionTimer)
        case event(SessionEvent)
    }

    /// What the network and the clock tell the session.
    public enum Input: Sendable {
        /// A response to one of our requests, or a 2xx that matched no transaction
        /// (a retransmission, or another fork) for this Call-ID.
        case response(SIPMessage)
        /// Our request with this method and CSeq got no final response (`timeout`: Timer B/F)
        /// or the transport failed.
        case requestFailed(SIPMethod, cseq: UInt32, timeout: Bool)
        /// A request for this session (not ACK or CANCEL), in a server transaction.
        case request(SIPMessage, transaction: TransactionID)
        /// An ACK for a 2xx of ours.
        case ack(SIPMessage)
        /// A CANCEL for the INVITE (the transaction layer matched it), in its own transaction.
        case cancel(SIPMessage, transaction: TransactionID)
        case timerFired(SessionTimer)
        /// A server transaction of ours ended without us ending it: its transport failed
        /// (RFC 3261 §17.2.4), or Timer H fired. Only the session's INVITE server transaction
        /// matters: an INVITE we can no longer answer ends the call.
        case serverTransactionFailed(TransactionID, timeout: Bool)
    }

    public let role: Role
    /// The session's parameters. Held in a shared immutable box: the sessions a
    /// ``SessionManager`` makes share one copy instead of carrying it inline each.
    public var configuration: InviteSessionConfiguration { sharedConfiguration.value }

    /// Our address changed (a network change): our Contact (its user part and parameters
    /// kept) and Via sent-by from now on are at `host`:`port`. The peer learns the new Contact
    /// from our next target refresh (a re-INVITE or UPDATE, RFC 3261 §12.2.1.2).
    public mutating func relocate(host: SIPHost, port: UInt16?, viaSentBy: String) {
        var c = configuration
        c.relocate(host: host, port: port, viaSentBy: viaSentBy)
        sharedConfiguration = SharedConfiguration(c)
    }
    private var sharedConfiguration: SharedConfiguration
    public private(set) var state: SessionState = .idle
    public let callID: String
    public let localTag: String
    /// The dialog once there is one (early or confirmed).
    public private(set) var dialog: Dialog?

    private var rng: SplitMix64
    private var digest: DigestClient?

    // MARK: UAC: the dialog-creating INVITE
    private var target: NameAddress
    private var initialOffer: SessionBody?
    /// Headers the application adds to our initial INVITE (Referred-By, Replaces, …), kept for
    /// its authenticated retry too.
    private var initialHeaders: [(SIPHeaderName, String)] = []
    /// Following 3xx: the targets tried and left, and the headers the last 3xx asked to keep.
    private var redirects: RedirectTargets?
    private var redirectHeaders: [(SIPHeaderName, String)] = []
    /// The code of the last 3xx followed (the next target left is tried under it).
    private var redirectCode: Int?
    /// A target offered to the application (``RedirectPolicy/Mode/ask``), with its 3xx's code.
    private var offeredRedirect: (code: Int, target: SIPURI)?
    /// Our INVITE while the call is being set up; ``answeredInvite`` once it is up.
    private var invite: SIPMessage?
    /// What a confirmed call keeps of its INVITE (``skeleton(of:)``), as wire bytes.
    private var answeredInvite: DialogWireCopy?
    /// Our INVITE: the one being set up, or what is kept of it once the call is up.
    private var sentInvite: SIPMessage? { invite ?? answeredInvite?.message }
    private var inviteCSeq: UInt32 = 0
    private var inviteFinal = false
    private var answeredInviteChallenge = false
    private var earlyDialogs: [String: Dialog] = [:]
    private var gotProvisional = false
    private var cancelRequested = false
    private var cancelSent = false
    /// ACKs sent for 2xx responses, by CSeq number, repeated for retransmitted 2xx.
    private var acks: [UInt32: DialogWireCopy] = [:]
    /// A 2xx to an offerless INVITE carried an offer: the ACK waits for our answer.
    private var ackAwaitingAnswer: (invite: SIPMessage, cseq: UInt32)?
    private var lastRSeq: [String: UInt32] = [:]
    private var sessionExpiresRequest: UInt32?
    /// Option tags a 420 (Bad Extension) said the callee does not support: the INVITE is
    /// retried once without requiring them (RFC 3261 §8.1.3.5), and never requires them again.
    private var refusedExtensions: Set<String> = []

    // MARK: Offer/answer (RFC 3264 §4)
    private enum OfferState: Sendable, Hashable { case none, local(SIPMethod), remote(SIPMethod) }
    private var offer: OfferState = .none
    /// Our last session description sent (offer or answer), repeated in refreshing re-INVITEs.
    public private(set) var localBody: SessionBody?
    /// The peer's last session description (offer or answer).
    public private(set) var remoteBody: SessionBody?

    // MARK: UAS: INVITE server transactions (initial or re-INVITE)
    private struct ServerInvite: Sendable {
        var transaction: TransactionID
        var request: SIPMessage
        var cseq: UInt32
        var isInitial: Bool
        var final: SIPMessage?
        var interval: Duration = .zero
        /// Whether a final response was sent (tested without copying it).
        var hasFinal: Bool {
            if case .some = final { return true }
            return false
        }
    }
    private var serverInvite: ServerInvite?
    /// Whether the INVITE that created the call is here and not answered with a final response
    /// yet (read in place: a copy of the transaction, its request and final response, and a
    /// comparison of an Equatable optional with nil, copied them per command).
    private var initialInviteUnanswered: Bool {
        serverInvite?.isInitial == true && serverInvite?.hasFinal == false
    }
    /// Whether there is a dialog (early or confirmed), tested in place (`dialog == nil` compares
    /// a copy of the Equatable dialog).
    private var hasDialog: Bool {
        if case .some = dialog { return true }
        return false
    }
    /// The session timers running, one bit per ``SessionTimer`` (set by `arm`, cleared by
    /// `disarm` and when the timer fires).
    private var armed = SessionTimerSet()

    /// UAS: the INVITE that created the call, while it is not answered (for a forward's
    /// History-Info and the like); nil otherwise.
    public var pendingInitialInvite: SIPMessage? {
        guard role == .uas, let si = serverInvite, si.isInitial, si.final == nil else { return nil }
        return si.request
    }
    /// An answer sent in an unreliable provisional, repeated in the 2xx (RFC 3264, RFC 6337).
    private var earlyAnswer: SessionBody?
    private var pendingUpdate: (transaction: TransactionID, request: SIPMessage)?
    private var byeAfterAck = false

    // MARK: 100rel (RFC 3262)
    private var use100rel = false
    private var nextRSeq: UInt32
    private var unackedReliable: (response: SIPMessage, rseq: UInt32, interval: Duration, hadBody: Bool)?
    private var queuedFinal: SIPMessage?

    // MARK: Requests we sent inside the dialog
    private struct Pending: Sendable {
        var method: SIPMethod
        var body: SessionBody?
        var extra: [(SIPHeaderName, String)]
        var request: SIPMessage
        var answeredChallenge = false
        var isRefresh = false
    }
    private var pending: [UInt32: Pending] = [:]
    private var glare: (method: SIPMethod, body: SessionBody?)?

    // MARK: Session timers (RFC 4028)
    private var sessionInterval: UInt32?
    private var weRefresh = false
    private var peerSupportsTimer = false
    /// The peer listed `tdialog` (RFC 4538) in the Supported (or Require) of its INVITE or of
    /// the 2xx to ours: it takes a request outside the dialog authorized by `Target-Dialog`.
    public private(set) var peerSupportsTargetDialog = false
    /// Whether the peer's Allow lists UPDATE (how we refresh the session, RFC 4028 §9).
    private var peerAllowsUpdate = false

    // MARK: - Creation

    /// A call we make to `target`. `offer` is our SDP offer, or `nil` for a delayed offer
    /// (the peer offers in its 2xx and we answer in the ACK). `credentials` answer 401/407.
    /// `seed` makes Call-ID, tags and branches reproducible.
    public init(calling target: NameAddress, configuration: InviteSessionConfiguration, offer: SessionBody?,
                credentials: DigestClient? = nil, callID: String? = nil, seed: UInt64) {
        self.init(calling: target, shared: SharedConfiguration(configuration), offer: offer, credentials: credentials, callID: callID, seed: seed)
    }

    init(calling target: NameAddress, shared: SharedConfiguration, offer: SessionBody?,
         credentials: DigestClient? = nil, callID: String? = nil, seed: UInt64) {
        role = .uac
        sharedConfiguration = shared
        self.target = target
        initialOffer = offer
        digest = credentials
        var g = SplitMix64(seed: seed)
        let generated = String(g.next(), radix: 36) + String(g.next() & 0xFFFF, radix: 36) + "@switchboard"
        rng = g
        self.callID = callID ?? generated
        localTag = String(rng.next(), radix: 36)
        nextRSeq = UInt32(truncatingIfNeeded: rng.next() % 0x7FFF_FFFF) + 1
    }

    /// A call we receive: the INVITE that starts it and its server transaction. Call
    /// ``start()`` next: it checks the request and tells the user about it.
    public init(incoming request: SIPMessage, transaction: TransactionID, configuration: InviteSessionConfiguration,
                credentials: DigestClient? = nil, seed: UInt64) {
        self.init(incoming: request, transaction: transaction, shared: SharedConfiguration(configuration), credentials: credentials, seed: seed)
    }

    init(incoming request: SIPMessage, transaction: TransactionID, shared: SharedConfiguration,
         credentials: DigestClient? = nil, seed: UInt64) {
        role = .uas
        sharedConfiguration = shared
        rng = SplitMix64(seed: seed)
        callID = request.callID ?? ""
        localTag = String(rng.next(), radix: 36)
        // Only a UAC sends to its target; the UAS's peer is the dialog's remote party.
        target = Self.noTarget
        digest = credentials
        nextRSeq = UInt32(truncatingIfNeeded: rng.next() % 0x7FFF_FFFF) + 1
        serverInvite = ServerInvite(transaction: transaction, request: request, cseq: (try? request.cseq().sequence) ?? 0, isInitial: true)
    }

    /// A session on a dialog that already exists, confirmed, its initial offer and answer done:
    /// `dialog` names the Call-ID, both tags, both CSeq numbers, the route set and the remote
    /// target; `localBody` and `remoteBody` are the session descriptions the two sides agreed on
    /// (nil for a call without one); `role` says whether our side sent the INVITE that made the
    /// dialog.
    ///
    /// The capture check (`switchboard capture FILE --check`) adopts each captured call's dialog
    /// this way to play one party: what that party sent is replayed with ``replaySent(_:)``
    /// and ``replayResponded(_:)`` (as captured, never built here), what the peer sent goes to
    /// ``handle(_:)`` as for a live call, and the session's answers say what it would refuse.
    /// The session's timers are the driver's: a replay need not run them.
    package init(adopting dialog: Dialog, role: Role, configuration: InviteSessionConfiguration, localBody: SessionBody?,
                 remoteBody: SessionBody?) {
        self.role = role
        sharedConfiguration = SharedConfiguration(configuration)
        rng = SplitMix64(seed: 0)
        callID = dialog.id.callID
        localTag = dialog.id.localTag
        target = role == .uac ? NameAddress(uri: dialog.remoteTarget) : Self.noTarget
        nextRSeq = 1
        self.dialog = dialog
        self.localBody = localBody
        self.remoteBody = remoteBody
        inviteFinal = true
        state = .confirmed
    }

    /// Whether the session is over.
    public var isTerminated: Bool { state.isTerminated }

    private static let noTarget = NameAddress(uri: .other(scheme: "sip", text: "invalid"))

    /// The ID of the confirmed or early dialog.
    public var dialogID: DialogID? { dialog?.id }

    // MARK: - Commands

    /// UAC: sends the INVITE. UAS: checks the INVITE (option tags, session interval, Contact)
    /// and either refuses it or tells the user about the call and the offer in it.
    public mutating func start() -> [Action] {
        guard state == .idle else { return [] }
        switch role {
        case .uac:
            inviteCSeq = 1
            if let o = initialOffer { offer = .local(.invite); localBody = o }
            var out = [set(.calling)]
            out += sendInitialInvite(authorization: [])
            return out
        case .uas:
            return startIncoming()
        }
    }

    /// UAC: cancels the call before it is answered (RFC 3261 §9.1). The CANCEL goes out once a
    /// provisional response has come; a 2xx that crosses it is ACKed and sent BYE.
    public mutating func cancel() throws(SessionError) -> [Action] {
        guard role == .uac, state == .calling || isProceeding else { throw .invalidState(operation: "cancel", state: state) }
        if offeredRedirect != nil {
            // The INVITE is over (its 3xx came); nothing to CANCEL, the call just ends.
            offeredRedirect = nil
            inviteFinal = true
            return terminate(.cancelled)
        }
        cancelRequested = true
        var out = [set(.terminating)]
        if gotProvisional { out += sendCancel() }
        return out
    }

    /// UAS: sends a provisional response (180 Ringing, 183 Session Progress…) with our tag,
    /// making an early dialog. With `body`, the answer to the INVITE's offer (or an offer when
    /// the INVITE had none, which needs 100rel). The response is reliable (RFC 3262) when the
    /// caller supports 100rel and our policy allows it.
    public mutating func provisional(_ code: Int = 180, body: SessionBody? = nil) throws(SessionError) -> [Action] {
        guard role == .uas, state == .incoming || state == .early, initialInviteUnanswered,
              (101...199).contains(code) else { throw .invalidState(operation: "provisional \(code)", state: state) }
        if use100rel && unackedReliable != nil { throw .offerInProgress }
        // The INVITE's server transaction is read, not copied (and not changed).
        let request = serverInvite!.request, transaction = serverInvite!.transaction
        var r = response(to: request, code)
        appendContact(&r)
        if let b = body {
            r.setBody(b.bytes, contentType: b.contentType)
            if case .remote = offer {
                localBody = b
                if use100rel { offer = .none } else { earlyAnswer = b }
            }
        }
        if use100rel {
            let rs = nextRSeq
            nextRSeq &+= 1
            try? r.append(.require, "100rel")
            try? r.append(.rseq, String(rs))
            unackedReliable = (r, rs, configuration.timers.t1, body != nil)
        }
        if !hasDialog { dialog = try? Dialog(uasRequest: request, response: r, decoding: false, callID: callID) }
        // One array of the right size, filled in order.
        var out: [Action] = []
        out.reserveCapacity(4)
        out.append(.respond(r, in: transaction))
        if use100rel {
            out.append(arm(.retransmitProvisional, after: configuration.timers.t1))
            out.append(arm(.prackTimeout, after: sharedConfiguration.timeout))
        }
        if state != .early { out.append(set(.early)) }
        return out
    }

    /// UAS: answers the call with 200 OK. `body` is the answer to the INVITE's offer (it may be
    /// omitted when an answer already went in a provisional response) or, when the INVITE had
    /// no offer, our offer (the answer comes in the ACK).
    public mutating func accept(body: SessionBody? = nil) throws(SessionError) -> [Action] {
        var out: [Action] = []
        out.reserveCapacity(4)
        try accept(body: body, into: &out)
        return out
    }

    /// ``accept(body:)`` with its actions appended to `out` (a driver that runs it after
    /// another command, the 180 before it, gathers both in one array); `out` is left as it was
    /// when it throws.
    package mutating func accept(body: SessionBody? = nil, into out: inout [Action]) throws(SessionError) {
        guard role == .uas, state == .incoming || state == .early, initialInviteUnanswered else {
            throw .invalidState(operation: "accept", state: state)
        }
        var answerBody = body
        switch offer {
        case .remote:
            if answerBody == nil { answerBody = earlyAnswer }
            guard answerBody != nil else { throw .badRequest("the INVITE carried an offer: accept needs the answer") }
            offer = .none
        case .none:
            if localBody == nil {
                // Delayed offer: ours goes in the 2xx, the answer in the ACK.
                guard answerBody != nil else { throw .badRequest("the INVITE had no offer: accept needs ours") }
                offer = .local(.invite)
            }
        case .local:
            break
        }
        if let b = answerBody { localBody = b }
        let request = serverInvite!.request
        var r = response(to: request, 200)
        appendContact(&r)
        appendCapabilities(&r)
        appendSessionTimer(toResponse: &r, for: request)
        if let b = answerBody { r.setBody(b.bytes, contentType: b.contentType) }
        if !hasDialog {
            dialog = try? Dialog(uasRequest: request, response: r, decoding: false, callID: callID)
        } else {
            try? dialog?.confirm(with: r)
        }
        // RFC 3262 §3: a 2xx may not overtake an unacknowledged reliable provisional that
        // carried a session description.
        if let u = unackedReliable, u.hadBody {
            queuedFinal = r
            serverInvite?.final = r
            out.append(set(.connecting))
            return
        }
        out.append(set(.connecting))
        sendFinal2xx(r, into: &out)
    }

    /// UAS: refuses the call (or, after the answer, nothing): a 3xx–6xx final response.
    public mutating func reject(_ code: Int = 486, reason: String? = nil, headers: [(SIPHeaderName, String)] = []) throws(SessionError) -> [Action] {
        guard role == .uas, state == .incoming || state == .early, let si = serverInvite, si.isInitial, si.final == nil,
              (300...699).contains(code) else { throw .invalidState(operation: "reject \(code)", state: state) }
        var r = response(to: si.request, code, reason: reason)
        for (n, v) in headers { try? r.append(n, v) }
        serverInvite?.final = r
        return terminate(.declined(code), after: [.respond(r, in: si.transaction)])
    }

    /// Ends the call in whatever way its state calls for: BYE when it is up, CANCEL while our
    /// INVITE is unanswered, 603 Decline (or `code`) for an unanswered incoming call.
    public mutating func hangUp(declineWith code: Int = 603) -> [Action] {
        switch state {
        case .calling, .proceeding: return (try? cancel()) ?? []
        case .incoming, .early: return (try? reject(code)) ?? []
        case .connecting, .confirmed: return (try? bye()) ?? []
        default: return []
        }
    }

    /// Sends BYE on the confirmed dialog. As UAS before the ACK of our 2xx, the BYE waits for
    /// the ACK or its timeout (RFC 3261 §15).
    public mutating func bye() throws(SessionError) -> [Action] {
        guard state == .confirmed || state == .connecting, dialog != nil else { throw .invalidState(operation: "bye", state: state) }
        if state == .connecting && role == .uas {
            byeAfterAck = true
            return [set(.terminating)]
        }
        var out = [set(.terminating)] + cancelSessionTimers()
        out += sendInDialog(.bye, body: nil)
        return out
    }

    /// Sends a re-INVITE: with `body`, a new offer (hold, resume, codec change); without, asks
    /// the peer for an offer (answered in our ACK). Refresh of the target and session timer.
    public mutating func reinvite(body: SessionBody?) throws(SessionError) -> [Action] {
        try checkCanOffer("re-INVITE")
        return sendOffer(.invite, body: body)
    }

    /// Sends an UPDATE (RFC 3311) carrying a new offer, or none for a session refresh.
    public mutating func update(body: SessionBody?) throws(SessionError) -> [Action] {
        guard state == .confirmed || state == .early || isProceeding else {
            throw .invalidState(operation: "UPDATE", state: state)
        }
        if body != nil {
            guard offer == .none, !hasPendingOffer else { throw .offerInProgress }
        }
        return sendOffer(.update, body: body)
    }

    /// Answers the peer's pending offer (or, for ``SessionEvent/offerRequested``, makes ours):
    /// the 200 to a re-INVITE or UPDATE, or the ACK to a 2xx that carried an offer.
    public mutating func answer(_ body: SessionBody) throws(SessionError) -> [Action] {
        if let u = pendingUpdate {
            pendingUpdate = nil
            offer = .none
            localBody = body
            var r = response(to: u.request, 200)
            appendContact(&r)
            appendSessionTimer(toResponse: &r, for: u.request)
            r.setBody(body.bytes, contentType: body.contentType)
            var out: [Action] = [.respond(r, in: u.transaction)]
            appendSessionTimersAfterRefresh(to: &out)
            return out
        }
        if let a = ackAwaitingAnswer {
            ackAwaitingAnswer = nil
            offer = .none
            localBody = body
            return sendAck(for: a.invite, cseq: a.cseq, body: body)
        }
        if let si = serverInvite, !si.isInitial, si.final == nil {
            if case .remote = offer { offer = .none } else { offer = .local(.invite) }
            localBody = body
            var r = response(to: si.request, 200)
            appendContact(&r)
            appendCapabilities(&r)
            appendSessionTimer(toResponse: &r, for: si.request)
            r.setBody(body.bytes, contentType: body.contentType)
            var out: [Action] = []
            sendFinal2xx(r, into: &out)
            return out
        }
        throw .invalidState(operation: "answer", state: state)
    }

    /// Refuses the peer's pending offer in a re-INVITE or UPDATE (488 Not Acceptable Here with a
    /// Warning, or another code); the session goes on with the previous description.
    public mutating func rejectOffer(_ code: Int = 488, reason: String? = nil, warning: String? = nil) throws(SessionError) -> [Action] {
        let target: (TransactionID, SIPMessage)
        if let u = pendingUpdate {
            target = u
            pendingUpdate = nil
        } else if let si = serverInvite, !si.isInitial, si.final == nil {
            target = (si.transaction, si.request)
            serverInvite = nil
        } else {
            throw .invalidState(operation: "reject offer", state: state)
        }
        offer = .none
        var r = response(to: target.1, code, reason: reason)
        if let w = warning { try? r.append(.warning, w) }
        return [.respond(r, in: target.0)]
    }

    /// Sends a request inside the dialog that the session does not interpret (INFO, MESSAGE,
    /// OPTIONS, REFER, NOTIFY…); its final response arrives as ``SessionEvent/requestCompleted(method:statusCode:response:)``.
    public mutating func sendRequest(_ method: SIPMethod, body: SessionBody? = nil, headers: [(SIPHeaderName, String)] = []) throws(SessionError) -> [Action] {
        guard dialog != nil, !state.isTerminated, ![.invite, .ack, .cancel, .bye, .prack, .update].contains(method) else {
            throw .invalidState(operation: "\(method.token)", state: state)
        }
        return sendInDialog(method, body: body, extra: headers)
    }

    /// Answers a request passed up as ``SessionEvent/request(_:transaction:)``.
    public func respond(to request: SIPMessage, in transaction: TransactionID, statusCode: Int, body: SessionBody? = nil,
                        headers: [(SIPHeaderName, String)] = []) -> [Action] {
        var r = response(to: request, statusCode)
        for (n, v) in headers { try? r.append(n, v) }
        if let b = body { r.setBody(b.bytes, contentType: b.contentType) }
        return [.respond(r, in: transaction)]
    }

    // MARK: - Inputs

    public mutating func handle(_ input: Input) -> [Action] {
        switch input {
        case .response(let r): return handleResponse(r)
        case .requestFailed(let method, let cseq, let timeout): return requestFailed(method, cseq: cseq, timeout: timeout)
        case .request(let r, let tx): return handleRequest(r, transaction: tx)
        case .ack(let a): return handleAck(a)
        case .cancel(let c, let tx): return handleCancel(c, transaction: tx)
        case .timerFired(let t): return timerFired(t)
        case .serverTransactionFailed(let id, let timeout): return serverTransactionFailed(id, timeout: timeout)
        }
    }

    /// The INVITE server transaction is gone. Unanswered, the INVITE can no longer get a final
    /// response: the call ends (`transportError`) instead of waiting for an answer nobody could
    /// send. Answered with a 2xx whose ACK has not come, the 2xx can no longer be carried
    /// (RFC 6026 §7.1 hands its retransmission to us, over this transaction): as when the ACK
    /// never comes (RFC 3261 §13.3.1.4), the session ends with a BYE — sent in a new client
    /// transaction, which may find a route the failed one lost (§18.2.2: a new connection).
    private mutating func serverTransactionFailed(_ id: TransactionID, timeout: Bool) -> [Action] {
        guard !state.isTerminated, let si = serverInvite, si.transaction == id else { return [] }
        guard let final = si.final else {
            serverInvite = nil
            unackedReliable = nil
            queuedFinal = nil
            if si.isInitial {
                return terminate(.transportError)
            }
            // A re-INVITE we can no longer answer: the dialog stays as it was before it.
            if case .remote(.invite) = offer { offer = .none }
            return []
        }
        guard (200..<300).contains(final.statusCode ?? 0), !timeout else { return [] }
        serverInvite = nil
        byeAfterAck = false
        return [disarm(.retransmit2xx), disarm(.ackTimeout)] + cancelSessionTimers()
            + sendInDialog(.bye, body: nil) + [set(.terminated(.transportError))]
    }

    // MARK: - UAS start

    private mutating func startIncoming() -> [Action] {
        guard let si = serverInvite else { return [] }
        let request = si.request
        let require = (try? request.require()) ?? []
        let supported = (try? request.supported()) ?? []
        peerAllowsUpdate = ((try? request.allow()) ?? []).contains(.update)
        peerSupportsTimer = supported.contains("timer") || require.contains("timer")
        peerSupportsTargetDialog = supported.contains("tdialog") || require.contains("tdialog")
        // No set of known option tags is built per INVITE (most carry no Require).
        let with100rel = configuration.reliableProvisional != .unsupported
        let unknown = require.filter {
            let tag = $0.lowercased()
            return tag != "timer" && !(with100rel && tag == "100rel")
        }
        if !unknown.isEmpty {
            return refuseInitial(420, headers: [(.unsupported, unknown.joined(separator: ", "))])
        }
        guard request.hasContactAddresses, request.fromTagBytes != nil else {
            return refuseInitial(400, reason: "Missing Contact or From tag")
        }
        let peer100rel = require.contains("100rel") || supported.contains("100rel")
        if configuration.reliableProvisional == .required && !peer100rel {
            return refuseInitial(421, headers: [(.require, "100rel")])
        }
        use100rel = peer100rel && configuration.reliableProvisional != .unsupported
        let minimum = configuration.sessionTimer?.minimum ?? 90
        if let se = try? request.sessionExpires(), se.seconds < minimum {
            return refuseInitial(422, headers: [(.minSE, String(minimum))])
        }
        var out: [Action] = []
        out.reserveCapacity(2)  // the state and, usually, the offer
        out.append(set(.incoming))
        if let b = SessionBody(of: request) {
            offer = .remote(.invite)
            remoteBody = b
            out.append(.event(.remoteOffer(b, in: .invite)))
        }
        return out
    }

    private mutating func refuseInitial(_ code: Int, reason: String? = nil, headers: [(SIPHeaderName, String)] = []) -> [Action] {
        guard let si = serverInvite else { return [] }
        var r = response(to: si.request, code, reason: reason)
        for (n, v) in headers { try? r.append(n, v) }
        serverInvite?.final = r
        return [.respond(r, in: si.transaction), set(.terminated(.declined(code)))]
    }

    // MARK: - UAC: INVITE and CANCEL

    /// UAC: the INVITE went again, unchanged but for its top Via's branch, to the next target
    /// of RFC 3263 server location after the previous one failed without any response (RFC 3263
    /// §4.3: a new transaction). A CANCEL now matches the new transaction. Ignored unless the
    /// session is still calling and `request` is its INVITE (same CSeq).
    public mutating func inviteResent(_ request: SIPMessage) {
        guard role == .uac, state == .calling || state == .terminating, request.method == .invite, let inv = sentInvite,
              let cs = try? request.cseq(), let old = try? inv.cseq(), cs.sequence == old.sequence else { return }
        invite = request
    }

    /// RFC 3261 §8.1.3.4: the INVITE goes again to the next target of the 3xx (same Call-ID and
    /// From tag, CSeq + 1), or the call ends with ``SessionEndReason/redirectFailed(_:_:)``.
    private mutating func followRedirect(_ response: SIPMessage, _ code: Int) -> [Action] {
        guard case .sip(let original) = target.uri else {
            inviteFinal = true
            return terminate(.redirectFailed(code, .unsupportedScheme))
        }
        var r = redirects ?? RedirectTargets(original: original, policy: configuration.redirects)
        let ours = configuration.contact.sipURI.map { [$0] } ?? []
        let next = r.next(after: response, ours: ours)
        redirects = r
        switch next {
        case .failure(let why):
            inviteFinal = true
            return terminate(.redirectFailed(code, why))
        case .success(let uri):
            // RFC 5806/7044: the diversion history the 3xx carries goes with the new INVITE,
            // growing hop by hop (each 3xx's entries kept once).
            for h in response.values(.diversion).map({ (SIPHeaderName.diversion, $0) }) + response.values(SIPHeaderName(.historyInfo)).map({ (SIPHeaderName(.historyInfo), $0) })
            where !redirectHeaders.contains(where: { $0.0 == h.0 && $0.1 == h.1 }) {
                redirectHeaders.append(h)
            }
            return configuration.redirects.mode == .ask ? offerRedirect(uri, code) : redirect(to: uri, code)
        }
    }

    /// ``RedirectPolicy/Mode/ask``: calls the target offered by the last
    /// ``SessionEvent/redirectOffered(statusCode:target:)``.
    public mutating func followRedirect() throws(SessionError) -> [Action] {
        guard let offer = offeredRedirect, !isTerminated else { throw .invalidState(operation: "follow a redirection", state: state) }
        offeredRedirect = nil
        return redirect(to: offer.target, offer.code)
    }

    /// ``RedirectPolicy/Mode/ask``: passes on the target offered; the next one left is offered,
    /// or, with none left, the call ends with ``RedirectFailure/declined``.
    public mutating func skipRedirect() throws(SessionError) -> [Action] {
        guard let offer = offeredRedirect, !isTerminated else { throw .invalidState(operation: "skip a redirection", state: state) }
        if let next = redirects?.skip() { return offerRedirect(next, offer.code) }
        return stopRedirect(offer.code)
    }

    /// ``RedirectPolicy/Mode/ask``: ends the call instead of following the redirection
    /// (``SessionEndReason/redirectFailed(_:_:)`` with ``RedirectFailure/declined``).
    public mutating func stopRedirect() throws(SessionError) -> [Action] {
        guard let offer = offeredRedirect, !isTerminated else { throw .invalidState(operation: "stop a redirection", state: state) }
        return stopRedirect(offer.code)
    }

    private mutating func stopRedirect(_ code: Int) -> [Action] {
        offeredRedirect = nil
        inviteFinal = true
        return terminate(.redirectFailed(code, .declined))
    }

    /// The next target left from the redirections followed so far (sent to, or offered to the
    /// application with ``RedirectPolicy/Mode/ask``); nil when none is left or the call was
    /// not redirected.
    private mutating func nextRedirectTarget() -> [Action]? {
        guard role == .uac, var r = redirects, let last = redirectCode, let next = r.skip() else { return nil }
        redirects = r
        return configuration.redirects.mode == .ask ? offerRedirect(next, last) : redirect(to: next, last)
    }

    /// ``RedirectPolicy/Mode/ask``: the target waits for the application's decision.
    private mutating func offerRedirect(_ target: SIPURI, _ code: Int) -> [Action] {
        offeredRedirect = (code, target)
        return [.event(.redirectOffered(statusCode: code, target: target))]
    }

    /// Whether a redirection target waits for the application's decision.
    public var isRedirectOffered: Bool { offeredRedirect != nil }

    /// The INVITE goes to `uri`, the next target of a `code` redirection.
    private mutating func redirect(to uri: SIPURI, _ code: Int) -> [Action] {
        redirectCode = code
        inviteCSeq += 1
        earlyDialogs = [:]
        gotProvisional = false
        // A new target: its challenge, its reliable provisionals and its answer are new; an
        // early answer from the old target (a 100rel 183 with SDP) is void.
        answeredInviteChallenge = false
        lastRSeq = [:]
        if initialOffer != nil { offer = .local(.invite) }
        remoteBody = nil
        var out: [Action] = [.event(.redirected(statusCode: code, target: uri))]
        if state != .calling { out.append(set(.calling)) }
        return out + sendInitialInvite(authorization: [])
    }

    /// The Request-URI our INVITE goes to now: the target, or the last redirection's.
    var currentRequestURI: URI {
        redirects.flatMap { $0.tried.count > 1 ? $0.tried.last.map(URI.sip) : nil } ?? target.uri
    }

    /// UAC: whether the application asked to cancel the call (the CANCEL may still wait for a
    /// provisional response, RFC 3261 §9.1).
    public var isCancelRequested: Bool { cancelRequested }

    /// UAC: the early dialogs of our unanswered INVITE (one per tagged provisional response,
    /// forked calls have several), for Replaces matching and attended transfer while ringing.
    public var earlyDialogList: [Dialog] { Array(earlyDialogs.values) }

    /// UAC, before ``start()``: headers for the initial INVITE (a transferee's `Referred-By` and
    /// `Replaces`, RFC 3892 and RFC 3891).
    public mutating func addInitialHeaders(_ headers: [(SIPHeaderName, String)]) {
        guard role == .uac, state == .idle else { return }
        initialHeaders += headers
    }

    private var isProceeding: Bool {
        if case .proceeding = state { return true }
        return false
    }

    private mutating func sendInitialInvite(authorization: [(SIPHeaderName, AuthenticationHeader)]) -> [Action] {
        do {
            // After a redirection the Request-URI is the new target; To stays the original (§8.1.3.4).
            var m = try SIPMessage(method: .invite, uri: currentRequestURI)
            try m.append(.via, newVia())
            try m.append(.maxForwards, "70")
            for r in configuration.outboundRoute { try m.append(.route, r) }
            var from = configuration.localParty
            from.parameters.set("tag", localTag)
            try m.append(.from, from)
            var to = target
            to.parameters.remove("tag")
            try m.append(.to, to)
            try m.append(.callID, callID)
            try m.append(.cseq, CSeq(inviteCSeq, .invite))
            try m.append(.contact, configuration.contact.description)
            appendCapabilities(&m)
            if configuration.reliableProvisional == .required, !refusedExtensions.contains("100rel") { try m.append(.require, "100rel") }
            if let st = configuration.sessionTimer {
                let se = sessionExpiresRequest ?? st.interval
                try m.append(.sessionExpires, String(se))
                try m.append(.minSE, String(max(st.minimum, sessionExpiresRequest ?? 0)))
            }
            if let ua = configuration.userAgent { try m.append(.userAgent, ua) }
            for (n, v) in authorization { try m.append(n, v) }
            for (n, v) in initialHeaders + redirectHeaders {
                // A Require the caller added keeps only the tags no 420 refused.
                if n == .require, !refusedExtensions.isEmpty {
                    let kept = v.split(separator: ",").map { String($0.filter { $0 != " " && $0 != "\t" }) }.filter { !refusedExtensions.contains($0.lowercased()) }
                    if !kept.isEmpty { try m.append(n, kept.joined(separator: ", ")) }
                    continue
                }
                try m.append(n, v)
            }
            if let b = initialOffer { m.setBody(b.bytes, contentType: b.contentType) }
            invite = m
            return [.send(m)]
        } catch {
            return terminate(.transportError)
        }
    }

    private mutating func sendCancel() -> [Action] {
        guard !cancelSent, let inv = sentInvite else { return [] }
        cancelSent = true
        do {
            var c = try SIPMessage(method: .cancel, requestURI: inv.requestURIText ?? target.uri.description)
            try c.append(.via, inv.topVia())
            try c.append(.maxForwards, "70")
            for r in try inv.route() { try c.append(.route, r) }
            try c.append(.from, inv.from())
            try c.append(.to, inv.to())
            try c.append(.callID, callID)
            try c.append(.cseq, CSeq(inviteCSeq, .cancel))
            return [.send(c), arm(.cancelGuard, after: sharedConfiguration.timeout)]
        } catch {
            return []
        }
    }

    // MARK: - Responses

    private mutating func handleResponse(_ r: SIPMessage) -> [Action] {
        guard let code = r.statusCode, let cs = try? r.cseq() else { return [] }
        if cs.method == .invite && role == .uac && cs.sequence == inviteCSeq {
            return initialInviteResponse(r, code: code)
        }
        if cs.method == .invite, (200..<300).contains(code), let a = acks[cs.sequence]?.message {
            // A retransmitted 2xx to a re-INVITE: the same ACK again.
            return [.send(a)]
        }
        if cs.method == .cancel { return [] }
        guard let p = pending[cs.sequence], p.method == cs.method else {
            if cs.method == .invite, (200..<300).contains(code), r.toTag != nil {
                // A 2xx for an old INVITE of ours we no longer track: ACK and BYE it.
                return endStrayDialog(r)
            }
            return []
        }
        return inDialogResponse(r, code: code, pending: p)
    }

    private mutating func initialInviteResponse(_ r: SIPMessage, code: Int) -> [Action] {
        let tag = r.toTag
        if (200..<300).contains(code), let tag, let d = dialog, invite != nil || answeredInvite != nil {
            // The call is up: a retransmitted 2xx gets the same ACK, another fork's is ended.
            if d.id.remoteTag == tag { return acks[inviteCSeq]?.message.map { [.send($0)] } ?? [] }
            return endExtraFork(r, tag: tag)
        }
        guard let inv = invite else { return [] }
        switch code {
        case 100:
            // Any provisional response, 100 included, lets a pending CANCEL go (§9.1).
            guard !inviteFinal, !gotProvisional else { return [] }
            gotProvisional = true
            return cancelRequested ? sendCancel() : []
        case 101..<200:
            guard !inviteFinal else { return [] }
            var out: [Action] = []
            gotProvisional = true
            if cancelRequested { out += sendCancel() }
            guard let tag else { return out + [.event(.provisional(code: code, remoteTag: nil, body: nil))] }
            if earlyDialogs[tag] == nil,
               let d = (try? Dialog(uacRequest: inv, response: r, decoding: false, callID: callID)) ?? (try? Dialog(uacRequest: inv, provisionalWithoutContact: r)) {
                earlyDialogs[tag] = d
            }
            let require = (try? r.require()) ?? []
            var body = SessionBody(of: r)
            if require.contains("100rel"), let rs = try? r.rseq() {
                if let last = lastRSeq[tag], rs <= last || rs != last &+ 1 {
                    // A retransmission or an out-of-order reliable provisional: not presented
                    // (RFC 3262 §4).
                    return out
                }
                lastRSeq[tag] = rs
                if let b = body, case .local = offer {
                    remoteBody = b
                    offer = .none
                    out.append(.event(.remoteAnswer(b)))
                    body = nil
                }
                if var d = earlyDialogs[tag], !cancelRequested {
                    let prack = try? d.makeRequest(.prack, via: viaValue())
                    earlyDialogs[tag] = d
                    if var p = prack {
                        try? p.append(.rack, RAck(rseq: rs, cseq: inviteCSeq, method: .invite))
                        pending[(try? p.cseq().sequence) ?? 0] = Pending(method: .prack, body: nil, extra: [], request: p)
                        out.append(.send(p))
                    }
                }
            } else if let b = body, case .local = offer, remoteBody != b {
                // An answer in an unreliable provisional: usable for early media; the 2xx
                // repeats it (RFC 6337 §3.1).
                remoteBody = b
                out.append(.event(.remoteAnswer(b)))
                body = nil
            }
            if !cancelRequested { out.append(set(.proceeding(code))) }
            out.append(.event(.provisional(code: code, remoteTag: tag, body: body)))
            return out
        case 200..<300:
            guard let tag, dialog == nil else { return [] }
            inviteFinal = true
            var out: [Action] = [disarm(.cancelGuard)]
            var d: Dialog
            if var early = earlyDialogs[tag], early.targetFromContact || ((try? r.contact()) ?? nil)?.addresses.isEmpty == false {
                try? early.confirm(with: r, decoding: false)
                d = early
            } else {
                guard let made = try? Dialog(uacRequest: inv, response: r, decoding: false, callID: callID) else {
                    // A 2xx without Contact cannot make a dialog: end the attempt.
                    return out + [set(.terminated(.rejected(code)))]
                }
                d = made
            }
            earlyDialogs = [:]
            dialog = d
            digest?.requestSucceeded()
            peerAllowsUpdate = ((try? r.allow()) ?? []).contains(.update)
            let supported = ((try? r.supported()) ?? []) + ((try? r.require()) ?? [])
            peerSupportsTimer = supported.contains("timer")
            peerSupportsTargetDialog = supported.contains("tdialog")
            negotiateTimer(fromResponse: r, weSentRequest: true)
            let b = SessionBody(of: r)
            switch offer {
            case .local:
                offer = .none
                if let b, b != remoteBody {
                    remoteBody = b
                    out.append(.event(.remoteAnswer(b)))
                }
                out += sendAck(for: inv, cseq: inviteCSeq, body: nil)
            case .none where initialOffer == nil && b != nil:
                offer = .remote(.invite)
                remoteBody = b
                ackAwaitingAnswer = (inv, inviteCSeq)
                out.append(.event(.remoteOffer(b!, in: .invite)))
            default:
                out += sendAck(for: inv, cseq: inviteCSeq, body: nil)
            }
            // The call is up: from now on the INVITE only makes the dialog of a late fork's 2xx.
            invite = nil
            answeredInvite = DialogWireCopy(Self.skeleton(of: inv))
            if cancelRequested {
                // The 2xx crossed our CANCEL: the call is up at the peer, so end it with BYE.
                out += sendInDialog(.bye, body: nil)
                return out
            }
            out.append(set(.confirmed))
            appendSessionTimersAfterRefresh(to: &out)
            return out
        default:
            guard !inviteFinal else { return [] }
            if (code == 401 || code == 407), digest != nil {
                let challenges = (try? (code == 401 ? r.wwwAuthenticate() : r.proxyAuthenticate())) ?? []
                let stale = challenges.contains { $0.stale }
                if !answeredInviteChallenge || stale, var dc = digest {
                    do {
                        let headers = try dc.authorize(challenges: challenges, method: .invite, requestURI: currentRequestURI.description,
                                                       body: initialOffer?.bytes ?? [], using: &rng)
                        digest = dc
                        answeredInviteChallenge = true
                        inviteCSeq += 1
                        earlyDialogs = [:]
                        gotProvisional = false
                        let name: SIPHeaderName = code == 401 ? .authorization : .proxyAuthorization
                        return sendInitialInvite(authorization: headers.map { (name, $0) })
                    } catch {
                        inviteFinal = true
                        return terminate(.authenticationFailed("\(error)"))
                    }
                }
                inviteFinal = true
                return terminate(.authenticationFailed("credentials refused (\(code))"))
            }
            if code == 420, !cancelRequested {
                // RFC 3261 §8.1.3.5: retry without the extensions the callee does not support,
                // once for each (a callee that refuses the retry too ends the call).
                let required = Set(((try? inv.require()) ?? []).map { $0.lowercased() })
                let unsupported = Set(((try? r.unsupported()) ?? []).map { $0.lowercased() })
                let dropped = required.intersection(unsupported).subtracting(refusedExtensions)
                if !dropped.isEmpty {
                    refusedExtensions.formUnion(dropped)
                    inviteCSeq += 1
                    earlyDialogs = [:]
                    gotProvisional = false
                    return sendInitialInvite(authorization: [])
                }
            }
            if code == 422, let min = try? r.minSE(), configuration.sessionTimer != nil, min > (sessionExpiresRequest ?? 0) {
                // RFC 4028 §7.4: ask again with the larger interval.
                sessionExpiresRequest = min
                inviteCSeq += 1
                earlyDialogs = [:]
                return sendInitialInvite(authorization: [])
            }
            // 300, 301 and 302 name new Request-URIs; a 305's Contact is a proxy to route through
            // and a 380's alternatives are in its body (§21.3): those end the call.
            if (300...302).contains(code), !cancelRequested, configuration.redirects.mode != .fail {
                return followRedirect(r, code)
            }
            // RFC 3261 §8.1.3.4: a redirection's targets are tried in turn; a target that
            // refuses (not globally: a 6xx ends the search) hands over to the next one left.
            if code < 600, !cancelRequested, let next = nextRedirectTarget() { return next }
            inviteFinal = true
            let reason: SessionEndReason = (cancelSent || cancelRequested) && code == 487 ? .cancelled : .rejected(code)
            return terminate(cancelRequested ? .cancelled : reason)
        }
    }

    /// What a confirmed call still needs of its INVITE: the Request-URI, From and CSeq that
    /// make the dialog of another fork's 2xx and its ACK (§13.2.2.4), with Via, To and Call-ID.
    /// The body (the offer is ``localBody``) and the other headers are dropped.
    static func skeleton(of m: SIPMessage) -> SIPMessage {
        guard let uri = m.requestURIText, var k = try? SIPMessage(method: .invite, requestURI: uri) else { return m }
        for name in [SIPHeaderName.via, .from, .to, .callID, .cseq] {
            for v in m.valueBytes(name) {
                do { try k.append(name, String(decoding: v, as: UTF8.self)) } catch { return m }
            }
        }
        return k
    }

    /// A 2xx from a second fork after the call was set up: ACK it, then BYE it (§13.2.2.4).
    private mutating func endExtraFork(_ r: SIPMessage, tag: String) -> [Action] {
        guard let inv = sentInvite, var d = try? Dialog(uacRequest: inv, response: r) else { return [] }
        var out: [Action] = []
        if let ack = try? d.makeAck(for: inv, via: viaValue()) { out.append(.send(ack)) }
        if let bye = try? d.makeRequest(.bye, via: viaValue()) { out.append(.send(bye)) }
        out.append(.event(.extraForkEnded(remoteTag: tag)))
        return out
    }

    private mutating func endStrayDialog(_ r: SIPMessage) -> [Action] {
        guard invite != nil || answeredInvite != nil, r.callID == callID, let tag = r.toTag, tag != dialog?.id.remoteTag else { return [] }
        return endExtraFork(r, tag: tag)
    }

    private mutating func inDialogResponse(_ r: SIPMessage, code: Int, pending p: Pending) -> [Action] {
        let seq = (try? r.cseq().sequence) ?? 0
        guard code >= 200 else { return [] }
        pending[seq] = nil
        var out: [Action] = []
        if (code == 401 || code == 407), !p.answeredChallenge, var dc = digest {
            let challenges = (try? (code == 401 ? r.wwwAuthenticate() : r.proxyAuthenticate())) ?? []
            let uri = p.request.requestURIText ?? ""
            if let headers = try? dc.authorize(challenges: challenges, method: p.method, requestURI: uri, body: p.body?.bytes ?? [], using: &rng) {
                digest = dc
                let name: SIPHeaderName = code == 401 ? .authorization : .proxyAuthorization
                return sendInDialog(p.method, body: p.body, extra: p.extra + headers.map { (name, $0.description) },
                                    answeredChallenge: true, isRefresh: p.isRefresh)
            }
        }
        switch p.method {
        case .bye:
            return terminate(terminationReasonForBye)
        case .prack:
            return []
        case .invite, .update:
            if (200..<300).contains(code) {
                if p.method == .invite {
                    if let b = SessionBody(of: r), p.body == nil {
                        // We asked for an offer: it is here, our answer goes in the ACK.
                        offer = .remote(.invite)
                        remoteBody = b
                        ackAwaitingAnswer = (p.request, seq)
                        out.append(.event(.remoteOffer(b, in: .invite)))
                    } else {
                        out += sendAck(for: p.request, cseq: seq, body: nil)
                    }
                }
                try? dialog?.refreshTarget(from: r)
                if case .local = offer, p.body != nil {
                    offer = .none
                    if let b = SessionBody(of: r) {
                        remoteBody = b
                        out.append(.event(.remoteAnswer(b)))
                    }
                }
                negotiateTimer(fromResponse: r, weSentRequest: true)
                appendSessionTimersAfterRefresh(to: &out)
                if p.isRefresh, let i = sessionInterval { out.append(.event(.sessionRefreshed(interval: i))) }
            } else {
                if case .local = offer, p.body != nil { offer = .none }
                if code == 491 {
                    // RFC 3261 §14.1: the owner of the Call-ID waits 2.1–4 s, the other side 0–2 s.
                    let ms: UInt64 = role == .uac ? 2100 + (rng.next() % 191) * 10 : (rng.next() % 201) * 10
                    let wait = Duration.milliseconds(Int64(ms))
                    glare = (p.method, p.body)
                    return [arm(.glareRetry, after: wait), .event(.glare(retryAfter: wait))]
                }
                if code == 481 || code == 408 {
                    out.append(.event(.requestCompleted(method: p.method, statusCode: code, response: r)))
                    if code == 408 { out += sendInDialog(.bye, body: nil) }
                    return terminate(.dialogGone(code), after: out)
                }
            }
            out.append(.event(.requestCompleted(method: p.method, statusCode: code, response: r)))
            return out
        default:
            out.append(.event(.requestCompleted(method: p.method, statusCode: code, response: r)))
            // §12.2.1.2: the dialog is gone at the peer — except for the requests of another
            // dialog usage (RFC 5057 §5.6): a 481 or 408 to a NOTIFY, REFER or SUBSCRIBE ends
            // that subscription only, never the call.
            if code == 481 || code == 408, ![SIPMethod.notify, .refer, .subscribe].contains(p.method) {
                out = terminate(.dialogGone(code), after: out)
            }
            return out
        }
    }

    private var terminationReasonForBye: SessionEndReason {
        if cancelRequested { return .cancelled }
        return .localHangup
    }

    private mutating func requestFailed(_ method: SIPMethod, cseq: UInt32, timeout: Bool) -> [Action] {
        if method == .invite && role == .uac && cseq == inviteCSeq && !inviteFinal {
            // A redirection's target that does not answer hands over to the next one left.
            if !cancelRequested, let next = nextRedirectTarget() { return next }
            inviteFinal = true
            let reason: SessionEndReason = cancelRequested ? .cancelled : (timeout ? .timeout : .transportError)
            return terminate(reason)
        }
        guard let p = pending[cseq], p.method == method else { return [] }
        pending[cseq] = nil
        switch method {
        case .bye:
            return terminate(terminationReasonForBye)
        case .prack:
            return []
        case .invite, .update:
            // §14.1: a re-INVITE that times out ends the dialog with a BYE.
            if case .local = offer { offer = .none }
            return terminate(.dialogGone(408), after: [.event(.requestCompleted(method: method, statusCode: 408, response: nil))]
                                                        + sendInDialog(.bye, body: nil))
        default:
            return [.event(.requestCompleted(method: method, statusCode: 408, response: nil))]
        }
    }

    // MARK: - Requests from the peer

    private mutating func handleRequest(_ request: SIPMessage, transaction tx: TransactionID) -> [Action] {
        guard let method = request.method else { return [] }
        guard hasDialog, !state.isTerminated else {
            return [.respond(response(to: request, 481), in: tx)]
        }
        // In place (no copy of the dialog to write back): a request it refuses leaves it as it
        // was. (Nothing below reads the dialog before the BYE's session winds down.)
        do {
            try dialog!.receive(request)
        } catch .outOfOrder {
            return [.respond(response(to: request, 500, reason: "CSeq Out of Order"), in: tx)]
        } catch .notThisDialog {
            return [.respond(response(to: request, 481), in: tx)]
        } catch {
            return [.respond(response(to: request, 400), in: tx)]
        }
        switch method {
        case .bye:
            // Room for the 487s and what terminate(_:after:) appends: one array.
            var out: [Action] = []
            out.reserveCapacity(3 + armed.count + 1)
            out.append(.respond(response(to: request, 200), in: tx))
            if let si = serverInvite, si.final == nil {
                let r487 = response(to: si.request, 487)
                out.append(.respond(r487, in: si.transaction))
                serverInvite?.final = r487
            }
            if let u = pendingUpdate {
                out.append(.respond(response(to: u.request, 487), in: u.transaction))
                pendingUpdate = nil
            }
            return terminate(.remoteHangup, after: out)
        case .prack:
            return handlePrack(request, transaction: tx)
        case .invite:
            return handleReinvite(request, transaction: tx)
        case .update:
            return handleUpdate(request, transaction: tx)
        default:
            return [.event(.request(request, transaction: tx))]
        }
    }

    private mutating func handlePrack(_ request: SIPMessage, transaction tx: TransactionID) -> [Action] {
        guard let u = unackedReliable, let rack = try? request.rack(), rack.rseq == u.rseq, rack.method == .invite,
              rack.cseq == serverInvite?.cseq else {
            return [.respond(response(to: request, 481), in: tx)]
        }
        unackedReliable = nil
        var out: [Action] = [.respond(response(to: request, 200), in: tx), disarm(.retransmitProvisional), disarm(.prackTimeout)]
        if let q = queuedFinal {
            queuedFinal = nil
            sendFinal2xx(q, into: &out)
        }
        return out
    }

    private mutating func handleReinvite(_ request: SIPMessage, transaction tx: TransactionID) -> [Action] {
        if let si = serverInvite, si.final == nil || (si.final?.statusCode ?? 0) < 300 && state == .connecting {
            // §14.2: an INVITE while another is in progress gets 500 with Retry-After.
            var r = response(to: request, 500, reason: "Server Internal Error")
            try? r.append(.retryAfter, String(rng.next() % 10))
            return [.respond(r, in: tx)]
        }
        if hasPendingOffer || offer != .none {
            return [.respond(response(to: request, 491), in: tx)]
        }
        serverInvite = ServerInvite(transaction: tx, request: request, cseq: (try? request.cseq().sequence) ?? 0, isInitial: false)
        noteTimerSupport(request)
        if let b = SessionBody(of: request) {
            offer = .remote(.invite)
            remoteBody = b
            return [.event(.remoteOffer(b, in: .invite))]
        }
        return [.event(.offerRequested)]
    }

    private mutating func handleUpdate(_ request: SIPMessage, transaction tx: TransactionID) -> [Action] {
        noteTimerSupport(request)
        guard let b = SessionBody(of: request) else {
            // A refresh or target refresh without an offer: answer at once.
            var r = response(to: request, 200)
            appendContact(&r)
            appendSessionTimer(toResponse: &r, for: request)
            var out: [Action] = [.respond(r, in: tx)]
            appendSessionTimersAfterRefresh(to: &out)
            return out
        }
        if hasPendingOffer || offer != .none || pendingUpdate != nil {
            return [.respond(response(to: request, 491), in: tx)]
        }
        offer = .remote(.update)
        remoteBody = b
        pendingUpdate = (tx, request)
        return [.event(.remoteOffer(b, in: .update))]
    }

    private mutating func noteTimerSupport(_ request: SIPMessage) {
        let tags = ((try? request.supported()) ?? []) + ((try? request.require()) ?? [])
        if tags.contains("timer") { peerSupportsTimer = true }
    }

    private mutating func handleAck(_ ack: SIPMessage) -> [Action] {
        guard let si = serverInvite, let seq = try? ack.cseq().sequence, seq == si.cseq, let f = si.final,
              let code = f.statusCode, (200..<300).contains(code) else { return [] }
        serverInvite = nil
        // Room for a usual ACK's actions (two cancels, an answer, the state, two of the session
        // timer): one array.
        var out: [Action] = []
        out.reserveCapacity(6)
        out.append(disarm(.retransmit2xx))
        out.append(disarm(.ackTimeout))
        if case .local = offer {
            offer = .none
            if let b = SessionBody(of: ack) {
                remoteBody = b
                out.append(.event(.remoteAnswer(b)))
            }
        }
        if si.isInitial {
            if byeAfterAck {
                byeAfterAck = false
                return out + cancelSessionTimers() + sendInDialog(.bye, body: nil)
            }
            out.append(set(.confirmed))
        }
        appendSessionTimersAfterRefresh(to: &out)
        return out
    }

    private mutating func handleCancel(_ cancel: SIPMessage, transaction tx: TransactionID) -> [Action] {
        var out: [Action] = [.respond(response(to: cancel, 200), in: tx)]
        guard let si = serverInvite, si.isInitial, si.final == nil else { return out }
        let r = response(to: si.request, 487)
        serverInvite?.final = r
        unackedReliable = nil
        queuedFinal = nil
        out.append(.respond(r, in: si.transaction))
        return terminate(.remoteCancelled, after: out)
    }

    // MARK: - Timers

    private mutating func timerFired(_ t: SessionTimer) -> [Action] {
        // A timer that fired no longer runs (its handler arms it again if it repeats).
        armed.remove(t)
        switch t {
        case .retransmit2xx:
            guard var si = serverInvite, let f = si.final else { return [] }
            si.interval = min(si.interval * 2, configuration.timers.t2)
            serverInvite = si
            return [.respond(f, in: si.transaction), arm(.retransmit2xx, after: si.interval)]
        case .ackTimeout:
            guard let si = serverInvite, si.final != nil else { return [] }
            serverInvite = nil
            byeAfterAck = false
            // §13.3.1.4: no ACK, so the session ends with a BYE.
            return [disarm(.retransmit2xx)] + cancelSessionTimers() + sendInDialog(.bye, body: nil) + [set(.terminated(.noAck))]
        case .retransmitProvisional:
            guard var u = unackedReliable, let si = serverInvite, si.final == nil || queuedFinal != nil else { return [] }
            u.interval = min(u.interval * 2, configuration.timers.t2)
            unackedReliable = u
            return [.respond(u.response, in: si.transaction), arm(.retransmitProvisional, after: u.interval)]
        case .prackTimeout:
            guard unackedReliable != nil, let si = serverInvite else { return [] }
            unackedReliable = nil
            // The 2xx already went (the provisional had no body, so it did not wait for the
            // PRACK): the INVITE is answered and can no longer be refused. The 2xx's own ACK
            // timeout ends the call (with BYE) if the caller never confirms it.
            if si.final != nil && queuedFinal == nil { return [disarm(.retransmitProvisional)] }
            queuedFinal = nil
            // RFC 3262 §3: the reliable provisional was never acknowledged: refuse with a 5xx.
            let r = response(to: si.request, 500, reason: "Reliable Provisional Response Not Acknowledged")
            serverInvite?.final = r
            return terminate(.declined(500), after: [.respond(r, in: si.transaction)])
        case .glareRetry:
            guard let g = glare, state == .confirmed else { return [] }
            glare = nil
            if g.body != nil && (offer != .none || hasPendingOffer) { return [] }
            return sendOffer(g.method, body: g.body)
        case .cancelGuard:
            guard role == .uac, !inviteFinal else { return [] }
            inviteFinal = true
            return terminate(.cancelled)
        case .sessionRefresh:
            guard state == .confirmed, weRefresh, sessionInterval != nil else { return [] }
            if hasPendingOffer || offer != .none || serverInvite != nil {
                // Something is under way; try again shortly.
                return [arm(.sessionRefresh, after: .seconds(2))]
            }
            if peerAllowsUpdate { return sendOffer(.update, body: nil, isRefresh: true) }
            return sendOffer(.invite, body: localBody, isRefresh: true)
        case .sessionExpiry:
            guard state == .confirmed || state == .connecting else { return [] }
            return terminate(.sessionExpired, after: [disarm(.sessionRefresh)] + sendInDialog(.bye, body: nil))
        }
    }

    // MARK: - Session timers (RFC 4028)

    /// Reads the Session-Expires of a 2xx to a request we sent.
    private mutating func negotiateTimer(fromResponse r: SIPMessage, weSentRequest: Bool) {
        guard let se = try? r.sessionExpires() else {
            if weSentRequest { sessionInterval = nil }
            return
        }
        sessionInterval = se.seconds
        let refresher = se.refresher?.lowercased() ?? "uac"
        weRefresh = (refresher == "uac") == weSentRequest
    }

    /// Adds Session-Expires (and Require: timer) to our 2xx to an INVITE or UPDATE and
    /// records who refreshes (RFC 4028 §9).
    private mutating func appendSessionTimer(toResponse r: inout SIPMessage, for request: SIPMessage) {
        let requested = try? request.sessionExpires()
        var interval: UInt32
        var refresher: String
        if let req = requested {
            interval = req.seconds
            if let st = configuration.sessionTimer { interval = max(interval, st.minimum) }
            refresher = req.refresher?.lowercased() ?? (peerSupportsTimer ? "uac" : "uas")
        } else if let st = configuration.sessionTimer {
            interval = st.interval
            refresher = "uas"
        } else {
            sessionInterval = nil
            return
        }
        if !peerSupportsTimer { refresher = "uas" }
        sessionInterval = interval
        weRefresh = refresher == "uas"
        if refresher == "uas", interval == configuration.sessionTimer?.interval, let written = sharedConfiguration.sessionExpires {
            r.append(written)
        } else {
            try? r.append(.sessionExpires, SessionExpires(seconds: interval, refresher: refresher))
        }
        if peerSupportsTimer { try? r.append(.require, "timer") }
    }

    /// Appends to `out` the session timer's actions after a refresh (or after the call came
    /// up): both timers cancelled when no session interval was agreed, else ours started.
    private mutating func appendSessionTimersAfterRefresh(to out: inout [Action]) {
        guard let i = sessionInterval, i > 0 else {
            out.append(contentsOf: cancelSessionTimers())
            return
        }
        let interval = Duration.seconds(Int64(i))
        if weRefresh {
            disarmIfArmed(.sessionExpiry, into: &out)
            // Half the interval, in whole milliseconds (exact: the interval is in seconds; a
            // Duration divided goes through 128-bit arithmetic).
            out.append(arm(.sessionRefresh, after: .milliseconds(Int64(i) * 500)))
            return
        }
        // §10: the other side ends the session if no refresh came by SE − min(32, SE/3).
        let margin = Duration.seconds(Int64(min(32, i / 3)))
        disarmIfArmed(.sessionRefresh, into: &out)
        out.append(arm(.sessionExpiry, after: interval - margin))
    }

    /// Cancels of the session timers that run.
    private mutating func cancelSessionTimers() -> [Action] {
        var out: [Action] = []
        disarmIfArmed(.sessionRefresh, into: &out)
        disarmIfArmed(.sessionExpiry, into: &out)
        return out
    }

    /// Arms `timer`: the action, and the note that it runs (so that only running timers are
    /// cancelled when the session ends; a BYE cancelled all eight, one look-up each in the
    /// driver's timer table).
    private mutating func arm(_ timer: SessionTimer, after delay: Duration) -> Action {
        armed.insert(timer)
        return .startTimer(timer, after: delay)
    }

    /// Cancels `timer`: the action, and the note that it no longer runs.
    private mutating func disarm(_ timer: SessionTimer) -> Action {
        armed.remove(timer)
        return .cancelTimer(timer)
    }

    /// Appends the cancel of `timer` to `out` when it runs.
    private mutating func disarmIfArmed(_ timer: SessionTimer, into out: inout [Action]) {
        if armed.contains(timer) { out.append(disarm(timer)) }
    }

    /// The session ends for `reason`: `out`, then a cancel of each of its running timers, then its
    /// terminated state. Built in one array of the right size (the usual `out + cancels +
    /// [state]` made three arrays and copied each action twice).
    private mutating func terminate(_ reason: SessionEndReason, after out: consuming [Action] = []) -> [Action] {
        var out = out
        out.reserveCapacity(out.count + armed.count + 1)
        for t in SessionTimer.allCases { disarmIfArmed(t, into: &out) }
        out.append(set(.terminated(reason)))
        return out
    }

    // MARK: - Sending inside the dialog

    private var hasPendingOffer: Bool {
        pending.values.contains { ($0.method == .invite || $0.method == .update) && ($0.body != nil || $0.method == .invite) }
    }

    /// Whether a re-INVITE (or UPDATE) with a new offer may be sent now: the call is up, no
    /// offer is outstanding either way, and no INVITE transaction is open in either direction
    /// (RFC 3261 §14.1; ours waits for its ACK too). When false, ``reinvite(body:)`` throws.
    public var canOffer: Bool {
        state == .confirmed && dialog != nil && offer == .none && !hasPendingOffer && serverInvite == nil && pendingUpdate == nil
    }

    private func checkCanOffer(_ what: String) throws(SessionError) {
        guard state == .confirmed, dialog != nil else { throw .invalidState(operation: what, state: state) }
        guard offer == .none, !hasPendingOffer, serverInvite == nil, pendingUpdate == nil else { throw .offerInProgress }
    }

    private mutating func sendOffer(_ method: SIPMethod, body: SessionBody?, isRefresh: Bool = false) -> [Action] {
        if let b = body { offer = .local(method); localBody = b }
        var extra: [(SIPHeaderName, String)] = []
        if let i = sessionInterval ?? configuration.sessionTimer?.interval, configuration.sessionTimer != nil || sessionInterval != nil {
            extra.append((.sessionExpires, SessionExpires(seconds: i, refresher: "uac").description))
        }
        return sendInDialog(method, body: body, extra: extra, isRefresh: isRefresh)
    }

    private mutating func sendInDialog(_ method: SIPMethod, body: SessionBody?, extra: [(SIPHeaderName, String)] = [],
                                       answeredChallenge: Bool = false, isRefresh: Bool = false) -> [Action] {
        guard var d = dialog else { return [] }
        let targetRefresh = method == .invite || method == .update
        guard var m = try? d.makeRequest(method, via: viaValue(), contact: targetRefresh ? configuration.contact : nil) else { return [] }
        dialog = d
        if targetRefresh { appendCapabilities(&m) }
        if let h = sharedConfiguration.userAgent { m.append(h) }
        for (n, v) in extra { try? m.append(n, v) }
        if let b = body { m.setBody(b.bytes, contentType: b.contentType) }
        let seq = d.localSequence ?? 0
        pending[seq] = Pending(method: method, body: body, extra: extra.filter { $0.0 != .authorization && $0.0 != .proxyAuthorization },
                               request: m, answeredChallenge: answeredChallenge, isRefresh: isRefresh)
        return [.send(m)]
    }

    private mutating func sendAck(for request: SIPMessage, cseq: UInt32, body: SessionBody?) -> [Action] {
        guard let d = dialog, var ack = try? d.makeAck(for: request, via: viaValue()) else { return [] }
        if let b = body { ack.setBody(b.bytes, contentType: b.contentType) }
        // Credentials of the INVITE go on its ACK too (RFC 3261 §22.1 for the proxy case).
        for h in request.valueBytes(.proxyAuthorization) { try? ack.append(.proxyAuthorization, String(decoding: h, as: UTF8.self)) }
        acks[cseq] = DialogWireCopy(ack)
        if acks.count > 4, let oldest = acks.keys.min() { acks[oldest] = nil }
        return [.send(ack)]
    }

    /// Sends our 2xx to the INVITE: its actions are appended to `out`.
    private mutating func sendFinal2xx(_ r: SIPMessage, into out: inout [Action]) {
        // Changed in place (no copy of the transaction and its request to write back).
        guard serverInvite != nil else { return }
        serverInvite!.final = r
        serverInvite!.interval = configuration.timers.t1
        out.append(.respond(r, in: serverInvite!.transaction))
        out.append(arm(.retransmit2xx, after: configuration.timers.t1))
        out.append(arm(.ackTimeout, after: sharedConfiguration.timeout))
    }

    // MARK: - Building

    private func response(to request: SIPMessage, _ code: Int, reason: String? = nil) -> SIPMessage {
        var r = SIPMessage(responseTo: request, statusCode: code, reasonPhrase: reason, toTag: localTag)
        if request.method == .invite && (101..<300).contains(code), request.firstValueBytes(.recordRoute) != nil {
            // §12.1.1: the route set travels back in the dialog-creating responses.
            for rr in request.valueBytes(.recordRoute) { try? r.append(.recordRoute, String(decoding: rr, as: UTF8.self)) }
        }
        if let h = sharedConfiguration.server { r.append(h) }
        return r
    }

    private func appendContact(_ m: inout SIPMessage) {
        if let h = sharedConfiguration.contact { m.append(h) }
    }

    private func appendCapabilities(_ m: inout SIPMessage) {
        if let h = sharedConfiguration.allow { m.append(h) }
        if let h = m.isRequest ? sharedConfiguration.supportedInRequests : sharedConfiguration.supportedInResponses { m.append(h) }
    }

    private mutating func newVia() -> String {
        "SIP/2.0/\(configuration.viaTransport) \(configuration.viaSentBy);branch=\(TransactionLayer<String>.newBranch(using: &rng));rport"
    }

    private mutating func viaValue() -> Via {
        let text = newVia()
        // The sent-by comes from the configuration; a bad one is a programming error the first
        // request already reported, so fall back to a placeholder that still parses.
        return (try? Via(text)) ?? Via(transport: configuration.viaTransport, host: .domain("invalid"))
    }

    private mutating func set(_ s: SessionState) -> Action {
        state = s
        return .event(.stateChanged(s))
    }
}

/// An ``InviteSessionConfiguration`` shared by the sessions of one manager (immutable).
final class SharedConfiguration: Sendable {
    let value: InviteSessionConfiguration
    /// Our Contact, checked and written once (it goes on every dialog-making response and
    /// request); nil when it does not make a header value (then it is left out, as before).
    let contact: PreparedHeader?
    /// The Allow header, joined and checked once (it goes on every 2xx and dialog request).
    let allow: PreparedHeader?
    /// The Supported header for requests and for responses (they differ in 100rel).
    let supportedInRequests: PreparedHeader?
    let supportedInResponses: PreparedHeader?
    /// The Server and User-Agent headers, when the configuration names us.
    let server: PreparedHeader?
    let userAgent: PreparedHeader?
    /// The Session-Expires of our configured interval with us refreshing, as written once (it
    /// goes on the 2xx to every INVITE that asks for no interval of its own).
    let sessionExpires: PreparedHeader?
    /// 64·T1: how long the 2xx waits for its ACK, a reliable provisional for its PRACK, a
    /// CANCEL for the INVITE's final response (multiplied once: a Duration times an integer
    /// goes through 128-bit arithmetic).
    let timeout: Duration

    init(_ value: InviteSessionConfiguration) {
        self.value = value
        timeout = value.timers.t1 * 64
        contact = try? PreparedHeader(.contact, value.contact.description)
        allow = value.allow.isEmpty ? nil : try? PreparedHeader(.allow, value.allow.map(\.token).joined(separator: ", "))
        // Literals: "100rel" only where we may send or ask for reliable provisionals (requests).
        let tdialog = value.supportsTargetDialog ? ", tdialog" : ""
        supportedInRequests = try? PreparedHeader(.supported, (value.reliableProvisional != .unsupported ? "100rel, timer" : "timer") + tdialog)
        supportedInResponses = try? PreparedHeader(.supported, "timer" + tdialog)
        server = value.userAgent.flatMap { try? PreparedHeader(.server, $0) }
        userAgent = value.userAgent.flatMap { try? PreparedHeader(.userAgent, $0) }
        sessionExpires = value.sessionTimer.flatMap { try? PreparedHeader(.sessionExpires, SessionExpires(seconds: $0.interval, refresher: "uas").description) }
    }
}

// MARK: - Replay of a captured dialog

extension InviteSession {
    /// The offer made and not answered yet in the dialog (RFC 3264 §4): `byUs` when our side
    /// made it, in a request of `method` or in the 2xx to one (nil when none is outstanding).
    package var outstandingOffer: (byUs: Bool, method: SIPMethod)? {
        switch offer {
        case .none: return nil
        case .local(let m): return (true, m)
        case .remote(let m): return (false, m)
        }
    }

    /// Replay (``init(adopting:role:configuration:localBody:remoteBody:)``): our side sent
    /// `request` in the dialog as captured (its CSeq, branch and body are the capture's). A
    /// request opens what its response will close, as if a command had sent it: a re-INVITE or
    /// UPDATE with a body makes our offer, a BYE winds the session down; an ACK carrying our
    /// answer to the offer of a 2xx closes that offer. CANCEL is not the session's.
    package mutating func replaySent(_ request: SIPMessage) {
        guard let method = request.method, method != .cancel, let seq = try? request.cseq().sequence, var d = dialog, !state.isTerminated else { return }
        let body = SessionBody(of: request)
        if method == .ack {
            guard let a = ackAwaitingAnswer, a.cseq == seq else { return }
            ackAwaitingAnswer = nil
            offer = .none
            if let body { localBody = body }
            acks[seq] = DialogWireCopy(request)
            return
        }
        d.noteSent(sequence: seq)
        dialog = d
        // An offer while another is outstanding is not ours to make (``reinvite(body:)`` and
        // ``update(body:)`` throw): the one outstanding stays.
        if method == .invite || method == .update, let body, offer == .none {
            offer = .local(method)
            localBody = body
        }
        pending[seq] = Pending(method: method, body: body, extra: [], request: request)
        if method == .bye { state = .terminating }
    }

    /// Replay: our side answered the peer's re-INVITE or UPDATE with `response` as captured (a
    /// final response; a provisional changes nothing). A 2xx answers the peer's offer or, to an
    /// offerless re-INVITE, makes ours (the ACK answers it); another final refuses the offer.
    /// A request of ours that a command would have refused (an offer while one is outstanding)
    /// is recorded as sent, and the outstanding offer kept.
    /// A response to a request the session refused itself, or handles itself (BYE, PRACK, an
    /// UPDATE without offer), changes nothing.
    package mutating func replayResponded(_ response: SIPMessage) {
        guard let code = response.statusCode, code >= 200, let cs = try? response.cseq(), !state.isTerminated else { return }
        let body = SessionBody(of: response)
        switch cs.method {
        case .invite:
            guard var si = serverInvite, !si.isInitial, si.cseq == cs.sequence, si.final == nil else { return }
            if (200..<300).contains(code) {
                if case .remote(.invite) = offer {
                    offer = .none
                    if let body { localBody = body }
                } else if let body, offer == .none, SessionBody(of: si.request) == nil {
                    offer = .local(.invite)
                    localBody = body
                }
                si.final = response
                serverInvite = si
            } else {
                if case .remote(.invite) = offer { offer = .none }
                serverInvite = nil
            }
        case .update:
            guard let u = pendingUpdate, (try? u.request.cseq().sequence) == cs.sequence else { return }
            pendingUpdate = nil
            offer = .none
            if (200..<300).contains(code), let body { localBody = body }
        default:
            return
        }
    }
}
