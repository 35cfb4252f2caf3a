import SIPMessage
import SIPTransaction
import SIPDialog
import SIPRules
import PacketCapture

extension CaptureCheck {
    /// The layers of the check that can name a broken rule: the ``rules`` read the captured
    /// messages as a whole (timing, pairs of messages, bodies); the other layers are our own
    /// machines (``TransactionLayer``, ``Dialog``, ``InviteSession``, the
    /// ``ReferSubscriber``) driven with the capture's messages, playing the peer of the party
    /// judged. A finding both found carries both.
    public struct Layers: OptionSet, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: UInt8
        /// A layer set from its bits.
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// The message rules (``ConformanceRule/captureCheck`` over the whole call).
        public static let rules = Layers(rawValue: 1)
        /// Our transaction layer (RFC 3261 §17): branch matching, responses to client transactions.
        public static let transaction = Layers(rawValue: 2)
        /// Our dialog (RFC 3261 §12): tags, CSeq order, the end of the dialog, the ACK of a 2xx.
        public static let dialog = Layers(rawValue: 4)
        /// Our INVITE session (``InviteSession``, adopting the captured dialog): one INVITE
        /// transaction at a time (RFC 3261 §14), one offer at a time (RFC 3264 §4, RFC 3311
        /// §5.2), an answer to each offer.
        public static let session = Layers(rawValue: 8)
        /// Our REFER subscription (RFC 3515, RFC 6665): NOTIFYs of a live subscription only.
        public static let subscription = Layers(rawValue: 16)

        /// The names of the layers in the set, in the order above (`rules`, `transaction`, …).
        public var names: [String] {
            [(Layers.rules, "rules"), (.transaction, "transaction"), (.dialog, "dialog"), (.session, "session"), (.subscription, "subscription")]
                .filter { contains($0.0) }.map(\.1)
        }

        /// `rules+dialog`
        public var description: String { names.joined(separator: "+") }
    }
}

/// The capture check's machine layers: for each pair of parties that exchanged messages of the
/// call, and each of the two as the party judged (P), our machines play the other party (Q):
/// Q's requests open client transactions in a ``TransactionLayer`` that P's responses are fed
/// to; P's requests go in as received requests (server transactions), and Q's responses are
/// sent in them; the dialogs Q holds (``Dialog``) check P's requests inside them; once a dialog
/// is confirmed, an ``InviteSession`` adopting it replays its re-INVITEs, UPDATEs, BYEs, their
/// responses and ACKs (Q's as sent, P's as received) and judges P's; the ``ReferSubscriber`` of
/// each REFER Q sent judges P's NOTIFYs. The clock is the capture's: the layer's timers (Timers
/// B, D, F, H, I, K, L, M) fire at their virtual deadlines before each message.
///
/// What a machine refuses or would answer with an error is a finding against P, only where the
/// capture shows the whole exchange (the pair's first message opens it: a request without a
/// To tag), so a capture started mid-call reports nothing it cannot see.
struct MachineReplay {
    let check: CaptureCheck
    let callID: String
    let ms: [CaptureCheck.Message]
    var findings: [CaptureCheck.Finding] = []

    init(check: CaptureCheck, callID: String, messages: [CaptureCheck.Message]) {
        self.check = check
        self.callID = callID
        ms = messages
    }

    /// An ordered pair of parties: the pair's first message went from `a` to `b`.
    struct Pair: Hashable {
        var a: CaptureEndpoint, b: CaptureEndpoint
    }

    mutating func run() -> [CaptureCheck.Finding] {
        guard let first = ms.first else { return [] }
        let origin = first.time.totalNanoseconds
        // The pairs in the order they first talked, each with its two sides.
        var index: [Pair: Int] = [:]
        var sides: [[Side]] = []
        for (i, x) in ms.enumerated() {
            let k: Int
            if let known = index[Pair(a: x.source, b: x.destination)] ?? index[Pair(a: x.destination, b: x.source)] {
                k = known
            } else {
                let m = x.message
                let opens = m.isRequest && m.toTag == nil && m.method != .ack && m.method != .cancel
                k = sides.count
                index[Pair(a: x.source, b: x.destination)] = k
                sides.append([Side(check: check, party: x.source, complete: opens), Side(check: check, party: x.destination, complete: opens)])
            }
            let now = Double(x.time.totalNanoseconds - origin) / 1e9
            sides[k][0].take(i, x, now: now)
            sides[k][1].take(i, x, now: now)
        }
        for pair in sides {
            for side in pair {
                for f in side.found {
                    findings.append(.init(callID: callID, rule: f.rule, frameNumber: ms[f.index].frameNumber, time: ms[f.index].time,
                                          party: side.party, detail: f.detail, layers: f.layer))
                }
            }
        }
        return findings
    }
}

/// One party (P) judged by our machines playing its peer in one pair of the call.
struct Side {
    let check: CaptureCheck
    let party: CaptureEndpoint
    /// Whether the pair's exchange is seen from its start.
    let complete: Bool
    var found: [(rule: ConformanceRule, index: Int, detail: String, layer: CaptureCheck.Layers)] = []
    var reported: Set<String> = []

    var layer: TransactionLayer<CaptureEndpoint>
    /// The layer's running timers: deadline (seconds from the call's start).
    var timers: [TimerKey: Double] = [:]
    struct TimerKey: Hashable { var id: TransactionID; var timer: TransactionTimer }

    /// The peer's (our) requests, first copies, by "branch|METHOD".
    var ours: [String: SIPMessage] = [:]
    /// P's requests that opened server transactions, by "branch|METHOD" (ACK as INVITE).
    var serverTransactions: [String: TransactionID] = [:]
    /// Every branch P used, with the request that used it first.
    var branches: [String: (method: SIPMethod, sequence: UInt32, frame: Int)] = [:]
    /// P's INVITE requests by CSeq number (the ones our side answered are in `finals`).
    var invites: [UInt32: SIPMessage] = [:]
    /// Our final responses to P's INVITEs, by CSeq number.
    var finals: [UInt32: Int] = [:]

    /// The dialogs our side holds, by "our tag|P's tag".
    var dialogs: [String: Held] = [:]
    /// A dialog of our side: the request and response that made it, the ``Dialog`` built from
    /// them when P first sends a request in it (most dialogs of a capture see none from one side).
    struct Held {
        var request: SIPMessage, response: SIPMessage, uac: Bool
        var dialog: Dialog?
        var endedAt: Double?
        /// Whether the INVITE that made the dialog was answered 2xx (the session is adopted then).
        var confirmed = false
        /// Whether the INVITE that made the dialog had its final response (2xx or not): until
        /// then the dialog is early and that INVITE is in progress in it.
        var settled = false
        init(request: SIPMessage, response: SIPMessage, uac: Bool) {
            self.request = request
            self.response = response
            self.uac = uac
        }
    }

    /// Our sessions, by the key of the dialog they adopted, made at its first re-INVITE or UPDATE
    /// (apart from ``dialogs``, whose values stay small: most calls never make one).
    var sessions: [String: InviteSession] = [:]
    /// Our re-INVITEs and UPDATEs in a session without a final response from P, by "dialog key|CSeq":
    /// when we sent them, whether they carried an offer, whether P answered provisionally (so P
    /// had them: a request of P's crossing one unanswered is glare, nobody's fault), whether a
    /// provisional of P's carried a session description (an answer may come there).
    var sessionSent: [String: (method: SIPMethod, sequence: UInt32, time: Double, offer: Bool, answered: Bool, early: Bool)] = [:]
    /// P's re-INVITE in progress in a session, by dialog key.
    var partyInvite: [String: (transaction: TransactionID, sequence: UInt32, time: Double)] = [:]
    /// P's BYEs, by "dialog key|CSeq", given to the session when our side answers them 2xx (a
    /// challenged BYE is sent again).
    var partyByes: [String: (request: SIPMessage, transaction: TransactionID)] = [:]
    /// The configuration of the sessions our side plays (only its timers matter to a replay).
    static let sessionConfiguration: InviteSessionConfiguration = {
        let us = NameAddress(uri: .other(scheme: "sip", text: "replay.invalid"))
        return InviteSessionConfiguration(localParty: us, contact: us, viaSentBy: "replay.invalid", sessionTimer: nil)
    }()
    /// The subscriptions of the REFERs our side sent to P.
    var subscribers: [ReferSubscriber] = []

    init(check: CaptureCheck, party: CaptureEndpoint, complete: Bool) {
        self.check = check
        self.party = party
        self.complete = complete
        layer = TransactionLayer(timers: TransactionTimers(t1: .nanoseconds(Int64(check.t1 * 1e9)), t2: .nanoseconds(Int64(check.t2 * 1e9))), seed: 0)
    }

    mutating func add(_ rule: ConformanceRule, _ index: Int, _ layer: CaptureCheck.Layers, _ detail: String, once key: String? = nil) {
        if let key, !reported.insert(key).inserted { return }
        found.append((rule, index, detail, layer))
    }

    static func seconds(_ d: Duration) -> Double {
        let (s, a) = d.components
        return Double(s) + Double(a) / 1e18
    }

    static func key(_ branch: String, _ method: SIPMethod) -> String { branch + "|" + method.token }

    // MARK: The clock

    /// Fires every timer due by `now`, earliest first (bounded: a timer fired is gone, and the
    /// ones it starts lie later or end their transaction).
    mutating func advance(to now: Double) {
        for _ in 0..<10_000 {
            guard let (key, deadline) = timers.min(by: { $0.value < $1.value }), deadline <= now else { return }
            timers[key] = nil
            apply(layer.timerFired(key.id, key.timer), at: deadline)
        }
    }

    /// Keeps the timers the outputs start and stop; the layer's own sends are not looked at.
    @discardableResult
    mutating func apply(_ outputs: [TransactionLayer<CaptureEndpoint>.Output], at now: Double) -> [TransactionLayer<CaptureEndpoint>.Output] {
        for o in outputs {
            switch o {
            case .startTimer(let id, let t, let after): timers[TimerKey(id: id, timer: t)] = now + Self.seconds(after)
            case .cancelTimer(let id, let t): timers[TimerKey(id: id, timer: t)] = nil
            case .terminated(let id):
                for k in timers.keys where k.id == id { timers[k] = nil }
                for (k, v) in serverTransactions where v == id { serverTransactions[k] = nil }
            default: break
            }
        }
        return outputs
    }

    // MARK: Messages

    mutating func take(_ index: Int, _ x: CaptureCheck.Message, now: Double) {
        advance(to: now)
        let m = x.message
        if x.source == party {
            if m.isRequest { partyRequest(index, m, reliable: x.reliable, now: now) } else { partyResponse(index, m, reliable: x.reliable, now: now) }
        } else if x.destination == party {
            if m.isRequest { ourRequest(m, reliable: x.reliable, now: now) } else { ourResponse(m, now: now) }
        }
    }

    /// Our request to P: a client transaction (an ACK is none; a copy is the transaction's own
    /// retransmission).
    mutating func ourRequest(_ m: SIPMessage, reliable: Bool, now: Double) {
        guard let method = m.method, let branch = m.topViaBranch, let cseq = try? m.cseq() else { return }
        if method == .ack {
            if let d = sessionKey(local: m.fromTag, remote: m.toTag) { sessions[d]?.replaySent(m) }
            return
        }
        let key = Self.key(branch, method)
        guard ours[key] == nil else { return }
        ours[key] = m
        apply(layer.sendRequest(m, to: party, reliable: reliable).1, at: now)
        if [.invite, .update, .bye].contains(method), let d = sessionKey(local: m.fromTag, remote: m.toTag, opening: method != .bye) {
            sessions[d]?.replaySent(m)
            if method != .bye {
                sessionSent[d + "|\(cseq.sequence)"] = (method, cseq.sequence, now, !m.body.isEmpty, false, false)
            }
        }
        switch method {
        case .refer:
            let noSubscription = m["Refer-Sub"]?.lowercased().hasPrefix("false") == true
            subscribers.append(ReferSubscriber(referCSeq: cseq.sequence, configuration: .init(requestedNoSubscription: noSubscription)))
            if subscribers.count > 64 { subscribers.removeFirst() }
        default: break
        }
    }

    /// Our response to P's request, in its server transaction.
    mutating func ourResponse(_ r: SIPMessage, now: Double) {
        guard let code = r.statusCode, let cseq = try? r.cseq() else { return }
        if let branch = r.topViaBranch, let id = serverTransactions[Self.key(branch, cseq.method)] {
            apply(layer.respond(r, in: id), at: now)
        }
        switch cseq.method {
        case .invite:
            if code >= 200 { finals[cseq.sequence] = code }
            if code >= 200, let tag = r.toTag, let invite = invites[cseq.sequence], invite.toTag == nil, let remote = invite.fromTag {
                dialogs[tag + "|" + remote]?.settled = true
            }
            // Our side's dialog as UAS: P's initial INVITE and our tagged 1xx or 2xx.
            if (101...299).contains(code), let tag = r.toTag, let invite = invites[cseq.sequence], invite.toTag == nil,
               let remote = invite.fromTag {
                if dialogs[tag + "|" + remote] == nil { dialogs[tag + "|" + remote] = Held(request: invite, response: r, uac: false) }
                if code >= 200 { dialogs[tag + "|" + remote]?.confirmed = true }
            }
        case .bye:
            if (200...299).contains(code), let local = r.toTag, let remote = r.fromTag, dialogs[local + "|" + remote]?.endedAt == nil {
                dialogs[local + "|" + remote]?.endedAt = now
                // The session takes P's BYE once it is answered 2xx.
                if let bye = partyByes.removeValue(forKey: local + "|" + remote + "|\(cseq.sequence)") {
                    _ = sessions[local + "|" + remote]?.handle(.request(bye.request, transaction: bye.transaction))
                }
            }
        default: break
        }
        if code >= 200, cseq.method == .invite || cseq.method == .update, let d = sessionKey(local: r.toTag, remote: r.fromTag) {
            sessions[d]?.replayResponded(r)
            if cseq.method == .invite, partyInvite[d]?.sequence == cseq.sequence { partyInvite[d] = nil }
        }
    }

    /// The key of a dialog our side holds (our tag, P's tag) that has a session, or, `opening`
    /// one (the dialog confirmed, not ended), gets one now.
    mutating func sessionKey(local: String?, remote: String?, opening: Bool = false) -> String? {
        guard let local, let remote, opening || !sessions.isEmpty else { return nil }
        let key = local + "|" + remote
        if sessions[key] != nil { return key }
        guard opening, complete, let held = dialogs[key], held.confirmed, held.endedAt == nil,
              let d = held.dialog ?? (held.uac ? Self.dialog(uac: held.request, response: held.response)
                                                : Self.dialog(uas: held.request, response: held.response)) else { return nil }
        sessions[key] = InviteSession(adopting: d, role: held.uac ? .uac : .uas, configuration: Self.sessionConfiguration,
                                              localBody: nil, remoteBody: nil)
        return key
    }

    /// P's response to our request.
    mutating func partyResponse(_ index: Int, _ r: SIPMessage, reliable: Bool, now: Double) {
        guard let code = r.statusCode, let cseq = try? r.cseq(), let branch = r.topViaBranch else { return }
        let outputs = apply(layer.receive(r, from: party, reliable: reliable), at: now)
        let request = ours[Self.key(branch, cseq.method)]
        if outputs.contains(where: { if case .strayResponse = $0 { return true } else { return false } }), request == nil, complete {
            add(.responseMatchesTransaction, index, .transaction,
                "the \(code) to \(cseq.method.token) (CSeq \(cseq.sequence), branch \(branch)) answers no request of the peer: "
                    + "no client transaction of ours has that branch and method", once: "stray|\(branch)|\(cseq.method.token)")
        }
        guard let request else { return }
        if request.toTag != nil, [.invite, .update, .bye].contains(cseq.method), let d = sessionKey(local: r.fromTag, remote: r.toTag) {
            sessionResponse(index, r, code: code, method: cseq.method, sequence: cseq.sequence, key: d)
        }
        switch cseq.method {
        case .invite:
            // Our side's dialog as UAC: our initial INVITE and P's tagged 1xx or 2xx.
            if (101...299).contains(code), request.toTag == nil, let local = request.fromTag, let tag = r.toTag {
                if dialogs[local + "|" + tag] == nil { dialogs[local + "|" + tag] = Held(request: request, response: r, uac: true) }
                if code >= 200 { dialogs[local + "|" + tag]?.confirmed = true }
            }
            if code >= 200, request.toTag == nil, let local = request.fromTag, let tag = r.toTag { dialogs[local + "|" + tag]?.settled = true }
        case .bye:
            if (200...299).contains(code), let local = r.fromTag, let remote = r.toTag, dialogs[local + "|" + remote]?.endedAt == nil {
                dialogs[local + "|" + remote]?.endedAt = now
            }
        case .refer:
            if let k = subscribers.lastIndex(where: { $0.referCSeq == cseq.sequence }) { _ = subscribers[k].handleReferResponse(r) }
        default: break
        }
    }

    /// P's request: checked against the branches P used, then received by our transaction
    /// layer; a new one goes to our dialog, session and subscription.
    mutating func partyRequest(_ index: Int, _ m: SIPMessage, reliable: Bool, now: Double) {
        guard let method = m.method, let cseq = try? m.cseq() else { return }
        let branch = m.topViaBranch ?? ""
        if method == .ack {
            partyAck(index, m, branch: branch, cseq: cseq.sequence, reliable: reliable, now: now)
            return
        }
        if !branch.isEmpty {
            if let first = branches[branch] {
                let same = first.method == method && first.sequence == cseq.sequence
                let cancel = method == .cancel && first.method == .invite && first.sequence == cseq.sequence
                if !same && !cancel {
                    let live = serverTransactions[Self.key(branch, method)] != nil
                    add(.viaBranch, index, .transaction,
                        "the \(method.token) (CSeq \(cseq.sequence)) reuses the branch \(branch) of the \(first.method.token) (CSeq \(first.sequence)) of frame \(first.frame): "
                            + (live ? "our transaction layer takes it for a retransmission of that transaction and never answers it"
                                    : "a branch names one transaction only"), once: "branch|\(branch)|\(method.token)|\(cseq.sequence)")
                }
            } else {
                branches[branch] = (method, cseq.sequence, index)
            }
        }
        let outputs = apply(layer.receive(m, from: party, reliable: reliable), at: now)
        var opened: TransactionID?
        for o in outputs {
            if case .request(_, _, let id) = o {
                serverTransactions[Self.key(branch, method)] = id
                opened = id
            }
        }
        guard let opened else { return }
        if method == .invite { invites[cseq.sequence] = m }
        guard m.toTag != nil else { return }
        inDialog(index, m, method: method, sequence: cseq.sequence, transaction: opened, now: now)
    }

    /// A new request of P inside a dialog.
    mutating func inDialog(_ index: Int, _ m: SIPMessage, method: SIPMethod, sequence: UInt32, transaction: TransactionID, now: Double) {
        guard let local = m.toTag, let remote = m.fromTag else { return }
        let key = local + "|" + remote
        let session: Set<SIPMethod> = [.invite, .update, .info, .prack, .bye]
        if method == .notify, m[.event]?.lowercased().hasPrefix("refer") == true { referNotify(index, m, sequence: sequence) }
        guard let held = dialogs[key] else {
            // Subscription dialogs (a NOTIFY's, a SUBSCRIBE's) are not ours to hold: only the
            // INVITE usage's requests are judged.
            if complete, session.contains(method), !dialogs.isEmpty {
                add(.dialogTags, index, .dialog,
                    "our dialog layer would answer 481 to the \(method.token) (CSeq \(sequence)): its tags (From \(remote), To \(local)) name no dialog of the call",
                    once: "nodialog|\(key)")
            }
            return
        }
        // (A capture's times, not its frame order, say what came after.)
        if let ended = held.endedAt, now >= ended, session.contains(method) {
            add(.requestAfterBye, index, .dialog,
                "our dialog had ended (its BYE answered 2xx) and would answer 481 to the \(method.token) (CSeq \(sequence))", once: "ended|\(key)")
            return
        }
        guard var d = held.dialog ?? (held.uac ? Self.dialog(uac: held.request, response: held.response)
                                                : Self.dialog(uas: held.request, response: held.response)) else { return }
        do {
            try d.receive(m)
        } catch .outOfOrder(let received, let last) {
            add(.cseqIncreases, index, .dialog,
                "our dialog would answer 500 (CSeq out of order) to the \(method.token): CSeq \(received) is below \(last), the last the party sent in it")
            return
        } catch {
            return
        }
        // A BYE ends the dialog when it is answered 2xx (a challenged BYE is sent again).
        if method != .bye { dialogs[key]?.dialog = d }
        if [.invite, .update, .bye].contains(method) { sessionRequest(index, m, method: method, sequence: sequence, transaction: transaction, now: now) }
    }

    // MARK: The session

    /// P's re-INVITE, UPDATE or BYE in a confirmed dialog, to our ``InviteSession`` on it: what
    /// it refuses is a finding. A 500 (P's own re-INVITE had no final response) or a 491 to a
    /// re-INVITE while our INVITE was in progress is `reinvite-while-pending`; another 491 (an
    /// offer while one is outstanding) is `offer-while-pending`. A request crossing ours (P had
    /// not answered ours at all) is glare, nobody's fault. What waited longer than
    /// ``CaptureCheck/patience`` for its final response is over for the session (Timer B or a
    /// transaction given up).
    mutating func sessionRequest(_ index: Int, _ m: SIPMessage, method: SIPMethod, sequence: UInt32, transaction: TransactionID, now: Double) {
        guard let local = m.toTag, let remote = m.fromTag else { return }
        if method == .invite, let held = dialogs[local + "|" + remote], !held.settled {
            earlyReinvite(index, held: held, sequence: sequence)
            return
        }
        if method == .bye {
            if sessionKey(local: local, remote: remote) != nil { partyByes[local + "|" + remote + "|\(sequence)"] = (m, transaction) }
            return
        }
        guard let key = sessionKey(local: local, remote: remote, opening: true), var session = sessions[key], !session.isTerminated else { return }
        for (k, s) in sessionSent where k.hasPrefix(key + "|") && now - s.time > check.patience {
            sessionSent[k] = nil
            _ = session.handle(.requestFailed(s.method, cseq: s.sequence, timeout: true))
        }
        if let p = partyInvite[key], now - p.time > check.patience {
            partyInvite[key] = nil
            _ = session.handle(.serverTransactionFailed(p.transaction, timeout: true))
        }
        guard !session.isTerminated else {
            sessions[key] = session
            return
        }
        let outstanding = session.outstandingOffer
        let outputs = session.handle(.request(m, transaction: transaction))
        sessions[key] = session
        let refusal = outputs.lazy.compactMap { o -> Int? in
            if case .respond(let r, _) = o, let code = r.statusCode, code >= 300 { return code }
            return nil
        }.first
        let ours = sessionSent.filter { $0.key.hasPrefix(key + "|") }.map(\.value).sorted { $0.sequence < $1.sequence }
        switch refusal {
        case nil:
            if method == .invite { partyInvite[key] = (transaction, sequence, now) }
        case 500 where method == .invite:
            let earlier = partyInvite[key].map { " (CSeq \($0.sequence))" } ?? ""
            add(.reinviteWhilePending, index, .session,
                "the re-INVITE (CSeq \(sequence)) came while the party's INVITE\(earlier) had no final response: "
                    + "our session would answer 500 with Retry-After")
        case 491:
            if method == .invite, let q = ours.first(where: { $0.method == .invite }) {
                guard q.answered else { return }
                add(.reinviteWhilePending, index, .session,
                    "the re-INVITE (CSeq \(sequence)) came while our INVITE (CSeq \(q.sequence)), which the party had answered provisionally, "
                        + "had no final response: our session would answer 491")
            } else if let o = outstanding, !o.byUs {
                add(.offerWhilePending, index, .session,
                    "the \(method.token) (CSeq \(sequence)) makes an offer while the party's own offer (in its \(o.method.token)) has no answer: "
                        + "our session would answer 491")
            } else if let q = ours.first(where: { $0.method == .invite || $0.offer }), q.answered {
                add(.offerWhilePending, index, .session,
                    "the \(method.token) (CSeq \(sequence)) makes an offer while our \(q.method.token) (CSeq \(q.sequence)), which the party had answered "
                        + "provisionally, " + (q.offer ? "had its offer unanswered" : "had no final response") + ": our session would answer 491")
            }
        default:
            break
        }
    }

    /// RFC 3261 §14.1, §14.2: P's INVITE in an early dialog, while the INVITE that made it has
    /// no final response. No session is adopted before the dialog is confirmed, so this is judged
    /// here: P's own INVITE in progress (P the caller) gets 500 from a UAS; our INVITE, which P
    /// answered provisionally (P the callee), makes our session answer 491.
    mutating func earlyReinvite(_ index: Int, held: Held, sequence: UInt32) {
        let first = (try? held.request.cseq()).map { " (CSeq \($0.sequence))" } ?? ""
        if held.uac {
            add(.reinviteWhilePending, index, .session,
                "the re-INVITE (CSeq \(sequence)) came in the early dialog while our INVITE\(first), which the party had answered "
                    + "provisionally, had no final response: our session would answer 491")
        } else {
            add(.reinviteWhilePending, index, .session,
                "the re-INVITE (CSeq \(sequence)) came in the early dialog while the party's INVITE\(first) had no final response: "
                    + "our session would answer 500 with Retry-After")
        }
    }

    /// P's response to our re-INVITE, UPDATE or BYE in a session. A 2xx to our offer that leaves
    /// the session without an answer (none in it, none in a provisional before) is an
    /// `offer-answer` finding.
    mutating func sessionResponse(_ index: Int, _ r: SIPMessage, code: Int, method: SIPMethod, sequence: UInt32, key: String) {
        guard var session = sessions[key] else { return }
        let sent = key + "|\(sequence)"
        if code < 200 {
            if code > 100, sessionSent[sent]?.method == method {
                sessionSent[sent]?.answered = true
                if !r.body.isEmpty { sessionSent[sent]?.early = true }
            }
            return
        }
        let s = sessionSent.removeValue(forKey: sent)
        let awaited = session.outstandingOffer?.byUs == true
        let outputs = session.handle(.response(r))
        sessions[key] = session
        guard let s, s.method == method, s.offer, awaited, !s.early, (200...299).contains(code) else { return }
        let answered = outputs.contains { if case .event(.remoteAnswer) = $0 { return true } else { return false } }
        if !answered {
            add(.offerAnswer, index, .session,
                "the \(code) to our \(method.token) (CSeq \(sequence)) with an offer carries no answer: our session is left with its offer unanswered",
                once: "noanswer|\(key)|\(sequence)")
        }
    }

    /// A NOTIFY of a REFER subscription, to the subscriber of the REFER our side sent.
    mutating func referNotify(_ index: Int, _ m: SIPMessage, sequence: UInt32) {
        guard let k = subscribers.lastIndex(where: { $0.matches(m) }) else { return }
        let before = subscribers[k].state
        if subscribers[k].handleNotify(m).contains(.respond(statusCode: 481)) {
            let why: String
            if case .closed(.refused(let code)) = before { why = "the REFER (CSeq \(subscribers[k].referCSeq)) was refused \(code)" }
            else { why = "an earlier NOTIFY had terminated the REFER's subscription" }
            add(.notifyInSubscription, index, .subscription,
                "the NOTIFY (CSeq \(sequence)) came after \(why): our subscriber would answer 481", once: "notify|\(subscribers[k].referCSeq)")
        }
    }

    /// P's ACK: on the branch of an INVITE we answered 2xx (the server transaction takes it),
    /// on an INVITE's branch after a non-2xx (the transaction's own), or for a 2xx: it must
    /// acknowledge a final response our side sent.
    mutating func partyAck(_ index: Int, _ m: SIPMessage, branch: String, cseq: UInt32, reliable: Bool, now: Double) {
        if let first = branches[branch], first.method == .invite, first.sequence == cseq, let code = finals[cseq], (200...299).contains(code) {
            add(.ack2xx, index, .transaction,
                "the ACK of the \(code) to the INVITE (CSeq \(cseq)) is on the INVITE's branch \(branch): our INVITE server transaction takes it, "
                    + "where a 2xx's ACK is a transaction of its own with a new branch", once: "ackbranch|\(branch)")
            return
        }
        let outputs = apply(layer.receive(m, from: party, reliable: reliable), at: now)
        guard outputs.contains(where: { if case .ack = $0 { return true } else { return false } }) else { return }
        if let key = sessionKey(local: m.toTag, remote: m.fromTag), var session = sessions[key] {
            // The ACK of our 2xx to P's offerless re-INVITE carries P's answer to our offer there.
            let awaited = session.outstandingOffer.map { $0.byUs && $0.method == .invite } ?? false
            let acked = session.handle(.ack(m))
            sessions[key] = session
            let took = acked.contains { if case .cancelTimer(.retransmit2xx) = $0 { return true } else { return false } }
            if awaited, took, !acked.contains(where: { if case .event(.remoteAnswer) = $0 { return true } else { return false } }) {
                add(.offerAnswer, index, .session,
                    "the ACK (CSeq \(cseq)) carries no answer to the offer of our 2xx to the party's offerless re-INVITE: our session is left with its offer unanswered",
                    once: "ackanswer|\(key)|\(cseq)")
            }
        }
        guard complete else { return }
        if finals[cseq] == nil {
            add(.ackAnswersFinal, index, .dialog,
                "the ACK (CSeq \(cseq)) acknowledges no final response: our side never answered an INVITE with that CSeq number finally",
                once: "ack|\(cseq)")
        }
    }

    // MARK: Dialogs

    /// Our dialog as UAC; a response without Contact (another rule's finding) is given our
    /// INVITE's Request-URI as target so that the dialog still exists.
    static func dialog(uac request: SIPMessage, response: SIPMessage) -> Dialog? {
        if let d = try? Dialog(uacRequest: request, response: response) { return d }
        do { if case .some = try response.contact() { return nil } } catch { return nil }
        guard let uri = try? request.requestURI() else { return nil }
        var r = response
        try? r.append(.contact, "<\(uri)>")
        return try? Dialog(uacRequest: request, response: r)
    }

    /// Our dialog as UAS; a request without Contact is given its From URI as target.
    static func dialog(uas request: SIPMessage, response: SIPMessage) -> Dialog? {
        if let d = try? Dialog(uasRequest: request, response: response) { return d }
        do { if case .some = try request.contact() { return nil } } catch { return nil }
        guard let from = try? request.from() else { return nil }
        var q = request
        try? q.append(.contact, "<\(from.uri)>")
        return try? Dialog(uasRequest: q, response: response)
    }
}
