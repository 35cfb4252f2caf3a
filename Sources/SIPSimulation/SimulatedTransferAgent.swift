import SIPMessage
import SIPTransaction
import SIPDialog

/// The three roles of a call transfer (RFC 5589) on a ``SimulatedUserAgent``, driving the pure
/// machines of SIPDialog the way a phone does, on the simulation's clock:
///
/// - transferor: ``transfer(_:to:notifyTimeout:hangUpOnSuccess:)`` (blind) and
///   ``transfer(_:replacing:notifyTimeout:hangUpOnSuccess:)`` (attended) send a REFER in the
///   call's dialog; its response and the NOTIFYs that follow go to a ``ReferSubscriber``, which
///   reports the outcome once (never on the 202, RFC 3515 §2.4.5); on success the call is ended
///   with BYE after the final NOTIFY was answered; without a final status in time the call stays.
/// - transferee: a REFER is read with ``ReferRequest`` against ``referPolicy``, decided by
///   ``referDecision`` (603 when declined), answered 202, and followed by a new call to the
///   Refer-To target carrying `Referred-By` and `Replaces` (RFC 3892, 3891); the new call's
///   progress goes to a ``ReferNotifier``, whose NOTIFYs report it (100, provisional, final).
/// - transfer target: an INVITE with `Replaces` is matched with ``ReplacesDecision`` among this
///   agent's calls: answered at once and the replaced call ended (BYE, or CANCEL for an early
///   call we placed), or refused (400, 481, 486, 603). Other calls go to ``onIncomingCall``.
///
/// Offers in re-INVITEs and UPDATEs are answered with ``answerBody``; other requests inside a
/// dialog (INFO, MESSAGE, OPTIONS) with 200. What happened is kept in ``journal`` for assertions.
public final class SimulatedTransferAgent {
    public let ua: SimulatedUserAgent
    unowned let simulation: Simulation

    /// What a transferee accepts.
    public var referPolicy = ReferPolicy()
    /// Whether a transferee follows a REFER that passed ``referPolicy`` (false: 603 Decline).
    public var referDecision: (SessionKey, ReferRequest) -> Bool = { _, _ in true }
    /// The transferee's subscription settings.
    public var notifierConfiguration = ReferNotifier.Configuration()
    /// The offer of the calls a transferee places.
    public var offerBody: SessionBody
    /// The answer to offers (a replacing call's INVITE, re-INVITEs, UPDATEs).
    public var answerBody: SessionBody
    /// Incoming calls without `Replaces`: the test decides (accept, ring, reject, forward).
    public var onIncomingCall: ((SimulatedTransferAgent, SessionKey, SIPMessage) -> Void)?
    /// Every session event, after the agent handled it.
    public var onSessionEvent: ((SimulatedTransferAgent, SessionKey, SessionEvent) -> Void)?

    /// What the agent did or saw in a transfer.
    public enum Record: Sendable, Hashable {
        // Transferor.
        /// Our REFER left, with this Refer-To.
        case referSent(referTo: NameAddress)
        /// The final response to our REFER (408 when none came).
        case referAnswered(Int)
        /// A NOTIFY of our subscription (one per NOTIFY: retransmissions are absorbed by the
        /// transaction layer), its sipfrag, its Subscription-State and our answer.
        case notifyReceived(status: SIPFragStatus?, subscriptionState: String, answeredWith: Int)
        /// A NOTIFY for no subscription of ours, answered 481.
        case strayNotify
        /// The transfer's outcome: reported once per transfer.
        case outcome(ReferOutcome)
        /// The transferred call was ended with BYE after the success.
        case hungUpAfterTransfer
        // Transferee.
        /// A REFER, answered with this status (202 accepted, 603 declined, 403/400/… refused).
        case referReceived(answeredWith: Int)
        /// The call placed for the REFER.
        case newCall(SessionKey, target: SIPURI)
        /// A NOTIFY sent to the transferor.
        case notifySent(status: SIPFragStatus, subscriptionState: String)
        /// Its outcome (nil: no response, it timed out).
        case notifyAnswered(Int?)
        /// The subscription is over at the notifier.
        case subscriptionEnded
        // Transfer target.
        /// An INVITE with `Replaces` and what was decided.
        case replaces(ReplacesDecision)
    }

    /// One journal line: when, in which call, what.
    public struct Entry: Sendable {
        public var time: Duration
        public var key: SessionKey
        public var record: Record
    }
    public private(set) var journal: [Entry] = []
    /// The INVITEs that opened calls here (after the session checked them), in order.
    public private(set) var incomingInvites: [(key: SessionKey, invite: SIPMessage)] = []

    private struct Outgoing {
        var subscriber: ReferSubscriber
        var outcome: ReferOutcome?
        var hangUpOnSuccess: Bool
    }
    private struct Incoming {
        var notifier: ReferNotifier?
        var newCall: SessionKey?
    }
    private var outgoing: [SessionKey: Outgoing] = [:]
    private var incoming: [SessionKey: Incoming] = [:]
    private var byNewCall: [SessionKey: SessionKey] = [:]
    private var refers: [SessionKey: Int] = [:]

    private enum TimerRole: Hashable { case subscriber, notifier }
    private struct TimerKey: Hashable { var key: SessionKey; var role: TimerRole }
    private var timerGenerations: [TimerKey: UInt64] = [:]
    private var generation: UInt64 = 0

    /// Adds a user agent named `name` to the simulation, with its transfer roles.
    public init(_ simulation: Simulation, name: String, configuration: InviteSessionConfiguration? = nil,
                offer: SessionBody? = nil, answer: SessionBody? = nil) {
        self.simulation = simulation
        ua = SimulatedUserAgent(simulation, name: name, configuration: configuration ?? SimulatedUserAgent.configuration(name))
        offerBody = offer ?? .sdp("v=0\r\ns=offer-from-\(name)\r\n")
        answerBody = answer ?? .sdp("v=0\r\ns=answer-from-\(name)\r\n")
        ua.onIncomingCall = { [unowned self] _, key, invite in self.incomingCall(key, invite) }
        ua.onEvent = { [unowned self] _, key, event in self.sessionEvent(key, event) }
    }

    public var name: String { ua.node.name }

    /// The journal of one call.
    public func records(_ key: SessionKey) -> [Record] { journal.filter { $0.key == key }.map(\.record) }

    /// The outcomes reported for transfers of the call `key` (one per transfer).
    public func outcomes(_ key: SessionKey) -> [ReferOutcome] {
        records(key).compactMap { if case .outcome(let o) = $0 { return o } else { return nil } }
    }

    /// The calls this agent placed as a transferee, with the call whose REFER asked for each.
    public var placedForTransfers: [(original: SessionKey, newCall: SessionKey)] {
        journal.compactMap { if case .newCall(let k, _) = $0.record { return ($0.key, k) } else { return nil } }
    }

    /// Whether nothing of a transfer is left open: every subscription over at both ends (or its
    /// call gone) and no transfer timer armed.
    public var isQuiet: Bool {
        let subscriptionsOpen = outgoing.values.contains { if case .closed = $0.subscriber.state { return false } else { return true } }
        return !subscriptionsOpen && !incoming.values.contains { $0.notifier != nil } && timerGenerations.isEmpty
    }

    // MARK: Transferor

    /// Blind transfer (RFC 5589 §6): a REFER to `target` in the call's dialog.
    public func transfer(_ key: SessionKey, to target: SIPURI, notifyTimeout: Duration = .seconds(32),
                         hangUpOnSuccess: Bool = true) throws(SessionError) {
        try refer(key, referTo: NameAddress(uri: target), notifyTimeout: notifyTimeout, hangUpOnSuccess: hangUpOnSuccess)
    }

    /// Attended transfer (RFC 5589 §7): the transferee's call replaces `consultation` (confirmed,
    /// or an early dialog still ringing: then `early-only`). The Refer-To is the consultation's
    /// remote target (the target's Contact) with `Replaces` built from our side of that dialog.
    public func transfer(_ key: SessionKey, replacing consultation: SessionKey, notifyTimeout: Duration = .seconds(32),
                         hangUpOnSuccess: Bool = true) throws(SessionError) {
        guard let session = ua[consultation], let dialog = session.dialog ?? session.earlyDialogList.first,
              case .sip(let contact) = dialog.remoteTarget else {
            throw .invalidState(operation: "attended transfer without a consultation dialog", state: ua[consultation]?.state ?? .idle)
        }
        let replaces = ReferRequest.replaces(forConsultation: consultation, remoteTag: dialog.id.remoteTag,
                                             earlyOnly: session.state != .confirmed)
        try refer(key, referTo: ReferRequest.referTo(contact: contact, replaces: replaces), notifyTimeout: notifyTimeout,
                  hangUpOnSuccess: hangUpOnSuccess)
    }

    private func refer(_ key: SessionKey, referTo: NameAddress, notifyTimeout: Duration, hangUpOnSuccess: Bool) throws(SessionError) {
        guard let session = ua[key] else { throw .invalidState(operation: "REFER in no call", state: .idle) }
        if let o = outgoing[key], o.outcome == nil { throw .invalidState(operation: "REFER while a transfer runs", state: session.state) }
        // The REFER takes the dialog's next CSeq: the `id` of its NOTIFYs' Event.
        let cseq = (session.dialog?.localSequence).map { $0 &+ 1 } ?? 1
        let headers: [(SIPHeaderName, String)] = [(.referTo, referTo.description),
                                                 (.referredBy, ua.manager.configuration.localParty.description)]
        try ua.perform(key) { s throws(SessionError) in try s.sendRequest(.refer, headers: headers) }
        let configuration = ReferSubscriber.Configuration(notifyTimeout: notifyTimeout)
        outgoing[key] = Outgoing(subscriber: ReferSubscriber(referCSeq: cseq, configuration: configuration), hangUpOnSuccess: hangUpOnSuccess)
        log(key, .referSent(referTo: referTo))
    }

    private func receivedNotify(_ key: SessionKey, _ m: SIPMessage, _ tx: TransactionID) {
        guard var o = outgoing[key], o.subscriber.matches(m) else {
            log(key, .strayNotify)
            respond(key, m, tx, 481)
            return
        }
        let actions = o.subscriber.handleNotify(m)
        outgoing[key] = o
        applySubscriber(key, actions, notify: (m, tx))
    }

    private func applySubscriber(_ key: SessionKey, _ actions: [ReferSubscriber.Action], notify: (SIPMessage, TransactionID)? = nil) {
        var hangUp = false
        for a in actions {
            switch a {
            case .respond(let code):
                guard let (m, tx) = notify else { continue }
                let status = try? SIPFragStatus(parsing: Array(m.body))
                log(key, .notifyReceived(status: status, subscriptionState: m.values(.subscriptionState).first ?? "", answeredWith: code))
                respond(key, m, tx, code)
            case .progress:
                break
            case .finished(let outcome):
                outgoing[key]?.outcome = outcome
                log(key, .outcome(outcome))
                hangUp = outcome.isSuccess && outgoing[key]?.hangUpOnSuccess == true
            case .startTimer(let d):
                setTimer(.subscriber, key, after: d) { [unowned self] in
                    guard var o = self.outgoing[key] else { return }
                    let more = o.subscriber.timerFired()
                    self.outgoing[key] = o
                    self.applySubscriber(key, more)
                }
            case .cancelTimer:
                setTimer(.subscriber, key, after: nil)
            }
        }
        // After the final NOTIFY is answered: the transferee never sees our BYE before it.
        if hangUp, ua[key]?.state == .confirmed {
            do {
                try ua.perform(key) { s throws(SessionError) in try s.bye() }
                log(key, .hungUpAfterTransfer)
            } catch {}
        }
    }

    // MARK: Transferee

    private func receivedRefer(_ key: SessionKey, _ m: SIPMessage, _ tx: TransactionID) {
        // One transfer per call at a time: its NOTIFYs and its new call are this dialog's.
        if let i = incoming[key], i.notifier != nil || i.newCall.map({ byNewCall[$0] != nil }) ?? true {
            log(key, .referReceived(answeredWith: 403))
            respond(key, m, tx, 403)
            return
        }
        let count = refers[key] ?? 0
        let open = incoming.values.filter { $0.notifier != nil }.count
        let request: ReferRequest
        switch ReferRequest.read(m, policy: referPolicy, inDialog: true, refersInDialog: count, openSubscriptions: open) {
        case .failure(let refusal):
            log(key, .referReceived(answeredWith: refusal.statusCode))
            respond(key, m, tx, refusal.statusCode)
            return
        case .success(let r):
            request = r
        }
        refers[key] = count + 1
        guard referDecision(key, request) else {
            log(key, .referReceived(answeredWith: 603))
            respond(key, m, tx, 603)
            return
        }
        let noSubscription = request.grantsNoSubscription(referPolicy)
        respond(key, m, tx, 202, headers: noSubscription ? [(SIPHeaderName("Refer-Sub"), "false")] : [])
        log(key, .referReceived(answeredWith: 202))
        incoming[key] = Incoming(notifier: noSubscription ? nil : ReferNotifier(referCSeq: request.cseq, writesEventID: count > 0,
                                                                               configuration: notifierConfiguration))
        notifierStep(key) { $0.accepted() }
        guard case .sip(let target) = request.target else {
            notifierStep(key) { $0.progress(SIPFragStatus(statusCode: 488)) }
            return
        }
        var headers: [(SIPHeaderName, String)] = []
        if let by = request.referredBy { headers.append((.referredBy, by.description)) }
        if let replaces = request.replaces { headers.append((.replaces, replaces.description)) }
        let newCall = ua.call(uri: target, offer: offerBody, headers: headers)
        incoming[key]?.newCall = newCall
        byNewCall[newCall] = key
        log(key, .newCall(newCall, target: target))
    }

    /// The state of a call placed for a transfer: its progress is the transferor's NOTIFYs.
    private func newCallChanged(_ original: SessionKey, _ state: SessionState) {
        if let status = state.referProgress { notifierStep(original) { $0.progress(status) } }
    }

    private func notifierStep(_ key: SessionKey, _ body: (inout ReferNotifier) -> [ReferNotifier.Action]) {
        guard var notifier = incoming[key]?.notifier else { return }
        let actions = body(&notifier)
        incoming[key]?.notifier = notifier
        for a in actions {
            switch a {
            case .send(let notify):
                log(key, .notifySent(status: notify.status, subscriptionState: notify.subscriptionState))
                let headers: [(SIPHeaderName, String)] = [(.event, notify.event), (.subscriptionState, notify.subscriptionState)]
                do {
                    try ua.perform(key) { s throws(SessionError) in try s.sendRequest(.notify, body: notify.body, headers: headers) }
                } catch {
                    // The dialog is over: the subscription with it.
                    notifierStep(key) { $0.notifyCompleted(statusCode: 481) }
                }
            case .startTimer(let d):
                setTimer(.notifier, key, after: d) { [unowned self] in self.notifierStep(key) { $0.timerFired() } }
            case .cancelTimer:
                setTimer(.notifier, key, after: nil)
            case .terminated:
                incoming[key]?.notifier = nil
                log(key, .subscriptionEnded)
            }
        }
    }

    // MARK: Transfer target

    private func incomingCall(_ key: SessionKey, _ invite: SIPMessage) {
        incomingInvites.append((key, invite))
        guard let decision = replacesDecision(key, invite) else {
            onIncomingCall?(self, key, invite)
            return
        }
        log(key, .replaces(decision))
        switch decision {
        case .refuse(let code):
            _ = try? ua.perform(key) { s throws(SessionError) in try s.reject(code) }
        case .replace(let old, let method):
            // Answered at once (no ringing), then the replaced call ended.
            let answer = answerBody
            _ = try? ua.perform(key) { s throws(SessionError) in try s.accept(body: answer) }
            if method == .cancel {
                _ = try? ua.perform(old) { s throws(SessionError) in try s.cancel() }
            } else {
                _ = try? ua.perform(old) { s throws(SessionError) in try s.bye() }
            }
        }
    }

    /// RFC 3891 §3 among this agent's live calls with the Call-ID the `Replaces` names.
    private func replacesDecision(_ key: SessionKey, _ invite: SIPMessage) -> ReplacesDecision? {
        guard !invite.values(.replaces).isEmpty else { return nil }
        let callID = (try? invite.replaces())??.callID
        var dialogs: [ReplaceableDialog] = []
        for k in ua.manager.keys where k != key && k.callID == callID {
            if let s = ua[k] { dialogs += ReplaceableDialog.dialogs(of: s, key: k) }
        }
        return ReplacesDecision.decide(for: invite, among: dialogs)
    }

    // MARK: Events

    private func sessionEvent(_ key: SessionKey, _ e: SessionEvent) {
        switch e {
        case .request(let m, let tx) where m.method == .refer:
            receivedRefer(key, m, tx)
        case .request(let m, let tx) where m.method == .notify:
            receivedNotify(key, m, tx)
        case .request(let m, let tx):
            respond(key, m, tx, 200)
        case .requestCompleted(.refer, let code, let response):
            log(key, .referAnswered(code))
            guard var o = outgoing[key] else { break }
            let actions = response.map { o.subscriber.handleReferResponse($0) } ?? o.subscriber.handleReferFailure(timeout: code == 408)
            outgoing[key] = o
            applySubscriber(key, actions)
        case .requestCompleted(.notify, let code, let response):
            log(key, .notifyAnswered(response == nil ? nil : code))
            notifierStep(key) { $0.notifyCompleted(statusCode: response == nil ? nil : code) }
        case .remoteOffer(_, _) where ua[key]?.state != .incoming:
            let answer = answerBody
            _ = try? ua.perform(key) { s throws(SessionError) in try s.answer(answer) }
        case .offerRequested:
            let offer = offerBody
            _ = try? ua.perform(key) { s throws(SessionError) in try s.answer(offer) }
        case .stateChanged(let state):
            if let original = byNewCall[key] {
                newCallChanged(original, state)
                if state.isTerminated || state == .confirmed { byNewCall[key] = nil }
            }
            if state.isTerminated { callEnded(key) }
        default:
            break
        }
        onSessionEvent?(self, key, e)
    }

    /// A call ended: a transfer it carried ends with it (RFC 6665 §4.1.3: no NOTIFY can follow).
    private func callEnded(_ key: SessionKey) {
        if let o = outgoing.removeValue(forKey: key) {
            setTimer(.subscriber, key, after: nil)
            if o.outcome == nil { log(key, .outcome(.unknown(.terminatedWithoutFinalStatus(reason: nil)))) }
        }
        if let i = incoming.removeValue(forKey: key) {
            setTimer(.notifier, key, after: nil)
            if i.notifier != nil { log(key, .subscriptionEnded) }
        }
        refers[key] = nil
    }

    // MARK: Helpers

    private func respond(_ key: SessionKey, _ m: SIPMessage, _ tx: TransactionID, _ code: Int, headers: [(SIPHeaderName, String)] = []) {
        guard let s = ua[key] else { return }
        ua.apply(s.respond(to: m, in: tx, statusCode: code, headers: headers).map { .session(key, $0) })
    }

    private func log(_ key: SessionKey, _ record: Record) {
        journal.append(Entry(time: simulation.now, key: key, record: record))
    }

    /// (Re)arms one transfer timer (`after` nil only cancels it).
    private func setTimer(_ role: TimerRole, _ key: SessionKey, after: Duration?, fire: @escaping () -> Void = {}) {
        let tk = TimerKey(key: key, role: role)
        guard let after else {
            timerGenerations[tk] = nil
            return
        }
        generation += 1
        let g = generation
        timerGenerations[tk] = g
        simulation.schedule(after: after) { [weak self] in
            guard let self, self.timerGenerations[tk] == g else { return }
            self.timerGenerations[tk] = nil
            fire()
        }
    }
}
