import Synchronization
import SIPMessage
import SIPTransaction
import SIPDialog
import SIPRuntime

/// The transfers a phone is part of: as transferor (a REFER it sent, keyed by the call it
/// transfers) and as transferee (a REFER it accepted, keyed by the call that carried it, and
/// the new call it placed).
struct TransferBook: Sendable {
    /// A transfer with the one timer its machine asks for.
    protocol Timed: Sendable {
        var timer: Task<Void, Never>? { get set }
    }

    /// A REFER we sent.
    struct Outgoing: Timed {
        var subscriber: ReferSubscriber
        var outcome: ReferOutcome?
        var timer: Task<Void, Never>?
        /// `transfer` still waits for the outcome: the entry outlives the call until it is read.
        var awaited = true
        /// The call ended (its subscription with it).
        var callEnded = false
    }

    /// A REFER we accepted.
    struct Incoming: Timed {
        var notifier: ReferNotifier?
        var newCall: SessionKey?
        var timer: Task<Void, Never>?
        /// The REFER came outside any dialog: its NOTIFYs go in the dialog its 202 created (the
        /// entry's key), held by the agent, not in a call.
        var ownDialog = false
    }

    var outgoing: [SessionKey: Outgoing] = [:]
    var incoming: [SessionKey: Incoming] = [:]
    /// The new call a transferee placed → the call whose REFER asked for it.
    var byNewCall: [SessionKey: SessionKey] = [:]
    /// REFERs each dialog carried.
    var refers: [SessionKey: Int] = [:]
}

extension Phone {
    // MARK: Transferor

    /// Transfers the call to `target` (blind transfer, RFC 5589 §6): a REFER in the call's
    /// dialog; the progress the transferee reports (NOTIFY sipfrags) goes to `report`; on a
    /// final 2xx the call is hung up (`hangUpOnSuccess`). Returns when the outcome is known:
    /// success only on the final NOTIFY's 2xx, never on the 202; ``ReferOutcome/unknown(_:)``
    /// without a subscription or when no NOTIFY comes within `notifyTimeout` (the call is then
    /// still ours to take back).
    public func transfer(_ key: SessionKey, to target: SIPURI, noSubscription: Bool = false, notifyTimeout: Duration = .seconds(32),
                         hangUpOnSuccess: Bool = true) async -> ReferOutcome {
        await refer(key, referTo: NameAddress(uri: target), noSubscription: noSubscription, notifyTimeout: notifyTimeout,
                    hangUpOnSuccess: hangUpOnSuccess)
    }

    /// Attended transfer (RFC 5589 §7): the call `key` is transferred to the party of the
    /// consultation call, which the transferee's INVITE replaces (`Replaces` embedded in the
    /// Refer-To, built from the consultation's Contact and our view of its tags). The
    /// consultation may still be ringing (an early dialog we placed).
    public func transfer(_ key: SessionKey, replacing consultation: SessionKey, notifyTimeout: Duration = .seconds(32),
                         hangUpOnSuccess: Bool = true) async -> ReferOutcome {
        // The consultation's dialog: confirmed, or (the target still rings) its early dialog.
        guard let session = await agent.session(consultation), let dialog = session.dialog ?? session.earlyDialogList.first,
              case .sip(let contact) = dialog.remoteTarget else {
            report("\(name): no consultation dialog to refer to")
            return .refused(481)
        }
        let replaces = ReferRequest.replaces(forConsultation: consultation, remoteTag: dialog.id.remoteTag,
                                             earlyOnly: session.state != .confirmed)
        return await refer(key, referTo: ReferRequest.referTo(contact: contact, replaces: replaces), noSubscription: false,
                           notifyTimeout: notifyTimeout, hangUpOnSuccess: hangUpOnSuccess)
    }

    private func refer(_ key: SessionKey, referTo: NameAddress, noSubscription: Bool, notifyTimeout: Duration,
                       hangUpOnSuccess: Bool) async -> ReferOutcome {
        var headers: [(SIPHeaderName, String)] = [(.referTo, referTo.description),
                                                 (.referredBy, NameAddress(uri: agent.configuration.identity).description)]
        if noSubscription { headers.append((SIPHeaderName("Refer-Sub"), "false")) }
        let configuration = ReferSubscriber.Configuration(notifyTimeout: notifyTimeout, requestedNoSubscription: noSubscription)
        // Reserve the call's one outgoing transfer (check and insert under one lock).
        let reserved = transfers.withLock { book -> Bool in
            if let o = book.outgoing[key], o.outcome == nil { return false }
            book.outgoing[key]?.timer?.cancel()
            book.outgoing[key] = TransferBook.Outgoing(subscriber: ReferSubscriber(referCSeq: 0, configuration: configuration))
            return true
        }
        guard reserved else { return .refused(491) }
        let sent = headers
        do {
            try await agent.perform(key) { [self] s throws(SessionError) in
                // The subscriber is in place before the REFER leaves: its 202 and the first
                // NOTIFY may come back at once. Its CSeq is the dialog's next one.
                let cseq = (s.dialog?.localSequence).map { $0 &+ 1 } ?? 1
                let actions = try s.sendRequest(.refer, headers: sent)
                self.transfers.withLock { $0.outgoing[key]?.subscriber = ReferSubscriber(referCSeq: cseq, configuration: configuration) }
                return actions
            }
        } catch {
            report("\(name): REFER not sent: \(error)")
            transfers.withLock { $0.outgoing[key] = nil }
            return .refused(481)
        }
        report("\(name): REFER to \(referTo.uri)")
        let deadline = notifyTimeout * 4 + .seconds(64)
        _ = await wait(timeout: deadline) { self.transfers.withLock { $0.outgoing[key]?.outcome != nil } }
        let outcome = transfers.withLock { book -> ReferOutcome in
            let o = book.outgoing[key]?.outcome ?? .unknown(.noNotify)
            book.outgoing[key]?.outcome = o
            book.outgoing[key]?.awaited = false
            if book.outgoing[key]?.callEnded == true { book.outgoing[key] = nil }
            return o
        }
        report("\(name): transfer \(outcome)")
        if outcome.isSuccess && hangUpOnSuccess {
            let call = call(for: key)
            call?.willEnd(.transferred(to: referTo.uri))
            do {
                try await agent.perform(key) { s throws(SessionError) in try s.bye() }
            } catch {
                call?.willEnd(nil)
            }
        }
        return outcome
    }

    /// When a transfer's REFER goes outside the call's dialog with `Target-Dialog` (RFC 4538).
    public enum TargetDialogUse: Sendable, Hashable {
        /// When the peer listed `tdialog` in its Supported (the REFER then carries
        /// `Require: tdialog`); otherwise the REFER goes in the call's dialog.
        case whenSupported
        /// Always, whatever the peer advertised (no `Require`: a peer that does not know the
        /// header may still take the REFER on its own policy).
        case always
    }

    /// Transfers the call `key` to `target` with a REFER sent *outside* the call's dialog, to the
    /// peer's Contact, carrying `Target-Dialog` naming the call (RFC 4538: the peer authorizes it
    /// by that) — when `use` says so, else in the dialog like ``transfer(_:to:noSubscription:notifyTimeout:hangUpOnSuccess:)``.
    /// The REFER's subscription lives in the new dialog its 202 creates; its NOTIFYs are
    /// reported (`report`) and end in the outcome exactly as the in-dialog transfer's.
    public func transfer(_ key: SessionKey, to target: SIPURI, targetDialog use: TargetDialogUse,
                         notifyTimeout: Duration = .seconds(32), hangUpOnSuccess: Bool = true) async -> ReferOutcome {
        guard let session = await agent.session(key), let dialog = session.dialog, session.state == .confirmed,
              case .sip(let contact) = dialog.remoteTarget else {
            report("\(name): no established call to transfer")
            return .refused(481)
        }
        guard use == .always || session.peerSupportsTargetDialog else {
            return await transfer(key, to: target, notifyTimeout: notifyTimeout, hangUpOnSuccess: hangUpOnSuccess)
        }
        guard let sub = agent.openDialog() else { return .refused(503) }
        let named = TargetDialog.naming(key, remoteTag: dialog.id.remoteTag)
        var headers: [(SIPHeaderName, String)] = [(.referTo, NameAddress(uri: target).description),
                                                 (.referredBy, NameAddress(uri: agent.configuration.identity).description),
                                                 (SIPHeaderName("Target-Dialog"), named.description)]
        if session.peerSupportsTargetDialog { headers.append((.require, "tdialog")) }
        let configuration = ReferSubscriber.Configuration(notifyTimeout: notifyTimeout, requestedNoSubscription: false)
        // In place before the REFER leaves: a NOTIFY may come before the 202 (RFC 6665 §4.1.2.4).
        transfers.withLock { $0.outgoing[sub] = TransferBook.Outgoing(subscriber: ReferSubscriber(referCSeq: 1, configuration: configuration)) }
        report("\(name): REFER to \(target) outside the call (Target-Dialog \(named))")
        let response = await agent.sendDialogCreatingRequest(sub, .refer, to: contact,
                                                              headers: headers)
        let code = response?.statusCode ?? 408
        report("\(name): REFER → \(code)")
        let actions = transfers.withLock { book -> [ReferSubscriber.Action] in
            guard var o = book.outgoing[sub] else { return [] }
            let a = response.map { o.subscriber.handleReferResponse($0) } ?? o.subscriber.handleReferFailure(timeout: true)
            book.outgoing[sub] = o
            return a
        }
        await applySubscriber(sub, actions)
        _ = await wait(timeout: notifyTimeout * 4 + .seconds(64)) { self.transfers.withLock { $0.outgoing[sub]?.outcome != nil } }
        let outcome = transfers.withLock { book -> ReferOutcome in
            let o = book.outgoing[sub]?.outcome ?? .unknown(.noNotify)
            book.outgoing[sub]?.timer?.cancel()
            book.outgoing[sub] = nil
            return o
        }
        agent.closeDialog(sub)
        report("\(name): transfer \(outcome)")
        if outcome.isSuccess && hangUpOnSuccess {
            let call = call(for: key)
            call?.willEnd(.transferred(to: .sip(target)))
            do {
                try await agent.perform(key) { s throws(SessionError) in try s.bye() }
            } catch {
                call?.willEnd(nil)
            }
        }
        return outcome
    }

    /// A NOTIFY in a call: for our REFER's subscription, else 481 (RFC 6665 §4.1.3).
    func receivedNotify(_ key: SessionKey, _ m: SIPMessage, _ tx: TransactionID) async {
        let actions = transfers.withLock { book -> [ReferSubscriber.Action]? in
            guard var o = book.outgoing[key], o.subscriber.matches(m) else { return nil }
            let a = o.subscriber.handleNotify(m)
            book.outgoing[key] = o
            return a
        }
        guard let actions else {
            await respondInTransfer(key, m, tx, 481)
            return
        }
        await applySubscriber(key, actions, notify: (m, tx))
    }

    func applySubscriber(_ key: SessionKey, _ actions: [ReferSubscriber.Action], notify: (SIPMessage, TransactionID)? = nil) async {
        for a in actions {
            switch a {
            case .respond(let code):
                // A 415 says what we take (RFC 3261 §21.4.13).
                let headers: [(SIPHeaderName, String)] = code == 415 ? [(SIPHeaderName("Accept"), "message/sipfrag")] : []
                if let (m, tx) = notify { await respondInTransfer(key, m, tx, code, headers) }
            case .progress(let status):
                report("\(name): transfer progress: \(status)")
                call(for: key)?.note(.transferProgress(status))
            case .finished(let outcome):
                transfers.withLock { $0.outgoing[key]?.outcome = outcome }
                call(for: key)?.note(.transferResult(outcome))
            case .startTimer(let d):
                setTimer(\.outgoing, key, after: d) { phone in
                    let more = phone.transfers.withLock { book -> [ReferSubscriber.Action] in
                        guard var o = book.outgoing[key] else { return [] }
                        let a = o.subscriber.timerFired()
                        book.outgoing[key] = o
                        return a
                    }
                    await phone.applySubscriber(key, more)
                }
            case .cancelTimer:
                setTimer(\.outgoing, key, after: nil)
            }
        }
    }

    /// Answers a request of a transfer: in the call `key`, or in the dialog the agent holds as
    /// `key` (an out-of-dialog REFER's subscription).
    private func respondInTransfer(_ key: SessionKey, _ m: SIPMessage, _ tx: TransactionID, _ code: Int,
                                   _ headers: [(SIPHeaderName, String)] = []) async {
        if agent.holdsDialog(key) {
            agent.respond(to: m, in: tx, statusCode: code, headers: headers)
        } else {
            try? await agent.perform(key) { s throws(SessionError) in s.respond(to: m, in: tx, statusCode: code, headers: headers) }
        }
    }

    /// (Re)arms a transfer's timer (`after` nil only cancels it): `fire` runs on expiry unless it
    /// was cancelled or replaced first.
    private func setTimer<T: TransferBook.Timed>(_ table: WritableKeyPath<TransferBook, [SessionKey: T]>, _ key: SessionKey, after: Duration?,
                                                 fire: @escaping @Sendable (Phone) async -> Void = { _ in }) {
        let task = after.map { d in
            Task { [weak self] in
                try? await Task.sleep(for: d)
                guard !Task.isCancelled, let self else { return }
                await fire(self)
            }
        }
        transfers.withLock { book in
            book[keyPath: table][key]?.timer?.cancel()
            book[keyPath: table][key]?.timer = task
        }
    }

    /// The final response to a REFER or NOTIFY we sent in a call.
    func transferRequestCompleted(_ key: SessionKey, _ method: SIPMethod, _ code: Int, _ response: SIPMessage?) async {
        report("\(name): \(method.token) → \(code)")
        if method == .refer {
            let actions = transfers.withLock { book -> [ReferSubscriber.Action] in
                guard var o = book.outgoing[key] else { return [] }
                let a = response.map { o.subscriber.handleReferResponse($0) } ?? o.subscriber.handleReferFailure(timeout: code == 408)
                book.outgoing[key] = o
                return a
            }
            await applySubscriber(key, actions)
        } else {
            await notifierStep(key) { $0.notifyCompleted(statusCode: response == nil ? nil : code) }
        }
    }

    // MARK: Transferee

    /// The application's answer to a REFER (``referDecision``), declined when it takes longer
    /// than ``referDecisionTimeout``.
    func decideRefer(_ key: SessionKey, _ request: ReferRequest) async -> Bool {
        let decide = referDecision
        return await within(Self.referDecisionTimeout) { await decide(key, request) } ?? false
    }

    /// A REFER in a call: checked against ``referPolicy``, then ``referDecision``; accepted with
    /// 202 (and `Refer-Sub: false` when asked and granted), the transferor kept informed by
    /// NOTIFYs while we call the target with its `Referred-By` and `Replaces`.
    func receivedRefer(_ key: SessionKey, _ m: SIPMessage, _ tx: TransactionID) async {
        let (count, open, busy) = transfers.withLock { book -> (Int, Int, Bool) in
            let i = book.incoming[key]
            let inProgress = i.map { $0.notifier != nil || $0.newCall.map { book.byNewCall[$0] != nil } ?? true } ?? false
            return (book.refers[key] ?? 0, book.incoming.values.filter { $0.notifier != nil }.count, inProgress)
        }
        guard !busy else {
            // One transfer at a time per call: its NOTIFYs and its new call are this dialog's.
            report("\(name): REFER refused: a transfer is already in progress in this call")
            try? await agent.perform(key) { s throws(SessionError) in
                s.respond(to: m, in: tx, statusCode: 403, headers: [(.warning, "399 switchboard \"a transfer is already in progress in this call\"")])
            }
            return
        }
        let request: ReferRequest
        switch ReferRequest.read(m, policy: referPolicy, inDialog: true, refersInDialog: count, openSubscriptions: open) {
        case .failure(let refusal):
            report("\(name): REFER refused: \(refusal)")
            agent.logger(for: key).info("REFER refused: \(refusal)")
            let warning = "399 switchboard \"\(refusal.reason)\""
            try? await agent.perform(key) { s throws(SessionError) in s.respond(to: m, in: tx, statusCode: refusal.statusCode, headers: [(.warning, warning)]) }
            return
        case .success(let r):
            request = r
        }
        transfers.withLock { $0.refers[key] = count + 1 }
        let referredBy = request.referredBy.map { " (Referred-By \($0.uri))" } ?? ""
        let accepted = await decideRefer(key, request)
        call(for: key)?.note(.transferRequested(request, accepted: accepted))
        guard accepted else {
            report("\(name): REFER to \(request.target) declined\(referredBy)")
            try? await agent.perform(key) { s throws(SessionError) in s.respond(to: m, in: tx, statusCode: 603) }
            return
        }
        let noSubscription = request.grantsNoSubscription(referPolicy)
        let answerHeaders: [(SIPHeaderName, String)] = noSubscription ? [(SIPHeaderName("Refer-Sub"), "false")] : []
        try? await agent.perform(key) { s throws(SessionError) in s.respond(to: m, in: tx, statusCode: 202, headers: answerHeaders) }
        transfers.withLock { book in
            book.incoming[key]?.timer?.cancel()
            book.incoming[key] = TransferBook.Incoming(notifier: noSubscription ? nil : ReferNotifier(referCSeq: request.cseq, writesEventID: count > 0))
        }
        await performTransfer(key, request)
    }

    /// A REFER outside any dialog (RFC 3515 §2.4.4): authorized by a `Target-Dialog` (RFC 4538)
    /// naming a call of ours with the sender — then handled as that call's REFER (the policy,
    /// ``referDecision`` asked with that call's key, 202, NOTIFYs, the new INVITE) except that its
    /// subscription lives in the new dialog the 202 creates — or by
    /// ``ReferPolicy/allowsOutOfDialog`` (``referDecision`` then gets the REFER's Call-ID and an
    /// empty tag). Otherwise refused: 403 without a known Target-Dialog, 400 for one that does
    /// not parse.
    func receivedOutOfDialogRefer(_ m: SIPMessage, _ tx: TransactionID) async {
        // RFC 3261 §8.2.2.3: an extension we do not know, required, is refused (420).
        let unknown = ((try? m.require()) ?? []).filter { !["tdialog", "norefersub"].contains($0.lowercased()) }
        guard unknown.isEmpty else {
            report("\(name): out-of-dialog REFER refused: 420 (Require: \(unknown.joined(separator: ", ")))")
            agent.respond(to: m, in: tx, statusCode: 420, headers: [(.unsupported, unknown.joined(separator: ", "))])
            return
        }
        var call: SessionKey?
        if let td = try? TargetDialog.read(m) {
            for k in Set(callStates.withLock { Array($0.keys) } + incomingCalls) where k.callID == td.callID && k.localTag == td.localTag {
                guard let s = await agent.session(k), !s.isTerminated else { continue }
                if ReplaceableDialog.dialogs(of: s, key: k).contains(where: { td.names(k, remoteTag: $0.remoteTag) }) { call = k }
            }
        }
        let (count, open) = transfers.withLock { book in
            (call.map { book.refers[$0] ?? 0 } ?? 0, book.incoming.values.filter { $0.notifier != nil }.count)
        }
        let request: ReferRequest
        switch ReferRequest.read(m, policy: referPolicy, inDialog: false, targetDialogKnown: call != nil,
                                 refersInDialog: count, openSubscriptions: open) {
        case .failure(let refusal):
            report("\(name): out-of-dialog REFER refused: \(refusal)")
            agent.configuration.logger.info("out-of-dialog REFER refused: \(refusal)", metadata: ["sip.call_id": "\(m.callID ?? "")"])
            agent.respond(to: m, in: tx, statusCode: refusal.statusCode, headers: [(.warning, "399 switchboard \"\(refusal.reason)\"")])
            return
        case .success(let r):
            request = r
        }
        if let call { transfers.withLock { $0.refers[call] = count + 1 } }
        let referredBy = request.referredBy.map { " (Referred-By \($0.uri))" } ?? ""
        let accepted = await decideRefer(call ?? SessionKey(callID: m.callID ?? "", localTag: ""), request)
        if let call { self.call(for: call)?.note(.transferRequested(request, accepted: accepted)) }
        guard accepted else {
            report("\(name): out-of-dialog REFER to \(request.target) declined\(referredBy)")
            agent.respond(to: m, in: tx, statusCode: 603)
            return
        }
        let noSubscription = request.grantsNoSubscription(referPolicy)
        let answerHeaders: [(SIPHeaderName, String)] = noSubscription ? [(SIPHeaderName("Refer-Sub"), "false")] : []
        // The 202 creates the subscription's dialog (ours: NOTIFYs go in it, RFC 3515 §2.4.4).
        let dialog = agent.respond(to: m, in: tx, statusCode: 202, headers: answerHeaders, createsDialog: !noSubscription)
        if !noSubscription && dialog == nil { return }  // answered 400/503 by the agent instead
        let key = dialog ?? SessionKey(callID: m.callID ?? "", localTag: "norefersub-\(UInt32.random(in: 0...UInt32.max))")
        report("\(name): out-of-dialog REFER accepted\(call.map { " (Target-Dialog: call \($0.callID))" } ?? "")")
        transfers.withLock { book in
            book.incoming[key] = TransferBook.Incoming(notifier: noSubscription ? nil : ReferNotifier(referCSeq: request.cseq, writesEventID: false),
                                                       ownDialog: true)
        }
        await performTransfer(key, request)
    }

    /// A request in a dialog the agent holds for a transfer: a NOTIFY of our out-of-dialog
    /// REFER; anything else (a SUBSCRIBE refreshing the subscription we notify) gets 405.
    func receivedSubscriptionRequest(_ key: SessionKey, _ m: SIPMessage, _ tx: TransactionID) async {
        if m.method == .notify {
            await receivedNotify(key, m, tx)
        } else {
            agent.respond(to: m, in: tx, statusCode: 405, headers: [(.allow, "NOTIFY")])
        }
    }

    /// Accepted: the transferor kept informed (the notifier in `key`'s entry) while we call the
    /// REFER's target with its `Referred-By` and `Replaces`.
    private func performTransfer(_ key: SessionKey, _ request: ReferRequest) async {
        let referredBy = request.referredBy.map { " (Referred-By \($0.uri))" } ?? ""
        report("\(name): transfer to \(request.target)\(referredBy)\(request.replaces.map { " replacing \($0.callID)" } ?? "")")
        await notifierStep(key) { $0.accepted() }
        guard case .sip(let target) = request.target else {
            // tel: URIs need a gateway this phone does not know: the transfer fails.
            await notifierStep(key) { $0.progress(SIPFragStatus(statusCode: 488)) }
            return
        }
        var headers: [(SIPHeaderName, String)] = []
        if let by = request.referredBy { headers.append((.referredBy, by.description)) }
        if let replaces = request.replaces { headers.append((.replaces, replaces.description)) }
        // Placed in a task of its own: locating a target named by a domain (DNS) must not hold
        // this phone's event loop, which answers every call's requests.
        let sent = headers
        Task {
            let newCall = await self.call(target, headers: sent)
            self.transfers.withLock { book in
                book.incoming[key]?.newCall = newCall
                book.byNewCall[newCall] = key
            }
            // States the call reached before it was recorded here (a fast failure) still count.
            if let last = self.states(newCall).last, last.isTerminated || last == .confirmed {
                await self.transferCallChanged(newCall, last)
            }
        }
    }

    /// A state change of any call: for a call placed by a transfer, its progress goes to the
    /// transferor; for a call that carried a transfer of ours or theirs, its end closes the books.
    func transferCallChanged(_ key: SessionKey, _ state: SessionState) async {
        if let original = transfers.withLock({ $0.byNewCall[key] }) {
            let status: SIPFragStatus?
            switch state {
            case .proceeding(let code): status = SIPFragStatus(statusCode: code)
            case .confirmed: status = SIPFragStatus(statusCode: 200)
            case .terminated(let reason): status = Self.finalStatus(reason)
            default: status = nil
            }
            if let status { await notifierStep(original) { $0.progress(status) } }
            if state.isTerminated || state == .confirmed {
                transfers.withLock { book in
                    book.byNewCall.removeValue(forKey: key)
                    // An out-of-dialog REFER without subscription: nothing more to tell anyone.
                    if let i = book.incoming[original], i.ownDialog, i.notifier == nil { book.incoming[original] = nil }
                }
            }
        }
        transferCallEnded(key, state)
    }

    /// A call's state change, for the transfers it takes part in as the call a REFER was about
    /// (not as a transferee's new call: ``transferCallChanged(_:_:)``): an ended call ends them.
    func transferCallEnded(_ key: SessionKey, _ state: SessionState) {
        if state.isTerminated {
            transfers.withLock { book in
                // Most calls carry no transfer: empty tables are not searched.
                if !book.outgoing.isEmpty, var o = book.outgoing[key] {
                    o.timer?.cancel()
                    if o.awaited {
                        // The dialog ended, and the REFER's subscription with it (RFC 6665
                        // §4.1.3): no final NOTIFY can come now. The transferor still waiting
                        // learns it at once (with the outcome if it came first), not at its bound.
                        o.timer = nil
                        o.callEnded = true
                        if o.outcome == nil { o.outcome = .unknown(.terminatedWithoutFinalStatus(reason: nil)) }
                        book.outgoing[key] = o
                    } else {
                        book.outgoing[key] = nil
                    }
                }
                // Our REFER's dialog ended: its subscription goes with it (no NOTIFY can follow).
                if !book.incoming.isEmpty, let i = book.incoming.removeValue(forKey: key) { i.timer?.cancel() }
                if !book.refers.isEmpty { book.refers[key] = nil }
            }
        }
    }

    /// The sipfrag status for a placed call that ended before it was answered.
    static func finalStatus(_ reason: SessionEndReason) -> SIPFragStatus? {
        // The same mapping a transferee reports in its NOTIFYs (480 for a redirection that
        // could not be followed: the target cannot be reached).
        SessionState.terminated(reason).referProgress
    }

    /// Runs `body` on the notifier of the REFER the call `key` carried, and carries out what it says.
    func notifierStep(_ key: SessionKey, _ body: (inout ReferNotifier) -> [ReferNotifier.Action]) async {
        let actions = transfers.withLock { book -> [ReferNotifier.Action] in
            guard var notifier = book.incoming[key]?.notifier else { return [] }
            let a = body(&notifier)
            book.incoming[key]?.notifier = notifier
            return a
        }
        let ownDialog = transfers.withLock { $0.incoming[key]?.ownDialog ?? false }
        for a in actions {
            switch a {
            case .send(let notify) where ownDialog:
                // In the dialog the REFER created: sent from a task (the answer may take up to
                // Timer F; the notifier holds any newer status until it comes).
                let headers: [(SIPHeaderName, String)] = [(.event, notify.event), (.subscriptionState, notify.subscriptionState)]
                let body = notify.body
                Task {
                    let response = await self.agent.sendInDialog(key, .notify, body: body, headers: headers)
                    await self.notifierStep(key) { $0.notifyCompleted(statusCode: response?.statusCode) }
                }
            case .send(let notify):
                let headers: [(SIPHeaderName, String)] = [(.event, notify.event), (.subscriptionState, notify.subscriptionState)]
                let body = notify.body
                do {
                    try await agent.perform(key) { s throws(SessionError) in try s.sendRequest(.notify, body: body, headers: headers) }
                } catch {
                    // The dialog is gone (the transferor hung up first): the subscription with it.
                    agent.logger(for: key).debug("NOTIFY not sent: \(error)")
                    await notifierStep(key) { $0.notifyCompleted(statusCode: 481) }
                }
            case .startTimer(let d):
                setTimer(\.incoming, key, after: d) { phone in await phone.notifierStep(key) { $0.timerFired() } }
            case .cancelTimer:
                setTimer(\.incoming, key, after: nil)
            case .terminated where ownDialog:
                // The subscription is over, and with it the dialog the REFER created.
                if let i = transfers.withLock({ $0.incoming.removeValue(forKey: key) }) { i.timer?.cancel() }
                agent.closeDialog(key)
            case .terminated:
                transfers.withLock { $0.incoming[key]?.notifier = nil }
            }
        }
    }

    // MARK: Transfer target

    /// The RFC 3891 decision for an incoming INVITE with `Replaces`, among this phone's calls
    /// with that Call-ID; nil without Replaces.
    func replacesDecision(for key: SessionKey, invite: SIPMessage) async -> ReplacesDecision? {
        guard !invite.values(.replaces).isEmpty else { return nil }
        let callID = (try? invite.replaces())??.callID
        var dialogs: [ReplaceableDialog] = []
        for k in Set(callStates.withLock { Array($0.keys) } + incomingCalls) where k != key && k.callID == callID {
            if let s = await agent.session(k) { dialogs += ReplaceableDialog.dialogs(of: s, key: k) }
        }
        return ReplacesDecision.decide(for: invite, among: dialogs)
    }

    /// Takes an incoming call that replaces one of ours: answered at once (no ringing), the
    /// replaced call ended with BYE (or CANCEL, an early call we placed); or refused — by RFC
    /// 3891 §3's rules, or with 403 when not authorized (§6: ``authorizeReplaces``).
    func takeReplacing(_ key: SessionKey, _ invite: SIPMessage, _ decision: ReplacesDecision) async {
        let by = ((try? invite.referredBy()) ?? nil).map { " (Referred-By \($0.uri))" } ?? ""
        var decision = decision
        if case .replace(let old, _) = decision {
            let session = await agent.session(old)
            let replacesTag = ((try? invite.replaces()) ?? nil)?.fromTag
            let dialog = session?.dialog ?? session?.earlyDialogList.first { $0.id.remoteTag == replacesTag }
            let grounds = dialog.flatMap { ReplacesAuthorization.grounds(for: invite, peer: $0.remoteParty.uri, peerContact: $0.remoteTarget) }
            if !authorizeReplaces(invite, old, grounds) {
                report("\(name): Replaces not authorized (RFC 3891 §6)\(by)")
                agent.logger(for: key).info("Replaces of \(old.callID) not authorized: neither Referred-By nor From is that call's peer")
                decision = .refuse(403)
            } else if let grounds {
                agent.logger(for: key).debug("Replaces of \(old.callID) authorized: \(grounds)")
            }
        }
        switch decision {
        case .refuse(let code):
            report("\(name): Replaces refused with \(code)\(by)")
            try? await agent.perform(key) { s throws(SessionError) in try s.reject(code) }
        case .replace(let old, let method):
            report("\(name): call replaces \(old.callID)\(by)")
            if let replaced = call(for: old) {
                if let new = call(for: key) { replaced.replaced(by: new) }
                replaced.willEnd(.replaced)
            }
            // RFC 3891 §3: the new call is accepted (its 200 is out when this returns), then the
            // replaced one ended.
            await answerIncoming(key, after: .zero, ring: false)
            if method == .cancel {
                try? await agent.perform(old) { s throws(SessionError) in try s.cancel() }
            } else {
                try? await agent.perform(old) { s throws(SessionError) in try s.bye() }
            }
        }
    }
}

extension Phone {
    // MARK: Forwarding (3xx)

    /// Forwards an incoming call that is not answered yet (trying, ringing): a 3xx (302 by
    /// default; 301 or 380 where asked) listing `targets` as Contacts, the first preferred (q
    /// 1.0, then 0.9, …), each valid for `expires` seconds, with a `Diversion` header (RFC 5806)
    /// naming us and `reason`.
    public func forward(_ key: SessionKey, to targets: [SIPURI], statusCode: Int = 302, reason: String = "unconditional",
                        expires: UInt32 = 3600, history: ForwardHeaders.History? = nil) async {
        guard (300..<400).contains(statusCode), !targets.isEmpty else { return }
        try? await forwardCall(key, to: targets, statusCode: statusCode, reason: reason, expires: expires, history: history)
    }

    /// ``forward(_:to:statusCode:reason:expires:history:)``, throwing when the 3xx could not be
    /// sent (the call is answered, or gone).
    func forwardCall(_ key: SessionKey, to targets: [SIPURI], statusCode: Int = 302, reason: String = "unconditional",
                     expires: UInt32 = 3600, history: ForwardHeaders.History? = nil) async throws(SessionError) {
        let session = await agent.session(key)
        guard let invite = session?.pendingInitialInvite else {
            // Answered, refused, or (no session) already over and gone.
            throw .invalidState(operation: "forward", state: session?.state ?? .idle)
        }
        let headers = ForwardHeaders.headers(forwarding: invite, to: targets, by: agent.configuration.identity, reason: reason,
                                             expires: expires, history: history ?? forwardHistory)
        report("\(name): forwarding (\(statusCode)) to \(targets.map(\.description).joined(separator: ", "))")
        let call = call(for: key)
        call?.willEnd(.forwarded(to: Array(targets.prefix(10))))
        do {
            try await agent.perform(key) { s throws(SessionError) in try s.reject(statusCode, headers: headers) }
        } catch {
            call?.willEnd(nil)
            report("\(name): not forwarded: \(error)")
            throw error
        }
    }
}
