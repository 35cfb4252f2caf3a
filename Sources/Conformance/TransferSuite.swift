import SIPMessage

/// The `transfer` suite: the runner calls the DUT and plays the other parties of a transfer
/// (RFC 3515 REFER, RFC 3891 Replaces, RFC 5589's flows) — the DUT as transferee (it is
/// REFERred to a target the runner also plays) and as transfer target (it receives an INVITE
/// with Replaces).
enum TransferSuite {
    static let note = "no ETSI TS 102 027-2 identifier: that document's purposes cover RFC 3261 (its scope); REFER (RFC 3515), Replaces (RFC 3891) and Referred-By (RFC 3892) are outside it, and no purpose for them was found"

    /// Sends a REFER in `call` with these Refer-To values (and Referred-By when given); its branch.
    static func refer(_ call: inout PlacedCall, referTo: [String], referredBy: String? = nil) -> String {
        call.cseq += 1
        let b = call.session.branch()
        var d = call.draft("REFER", branch: b, inDialog: true)
        d.extra += referTo.map { "Refer-To: \($0)" } + (referredBy.map { ["Referred-By: \($0)"] } ?? [])
        call.session.send(d.text(call.session))
        return b
    }

    /// The DUT's NOTIFYs in the call `callID` received after message `after`, with their
    /// sipfrag status (nil when the body is not one) and subscription state.
    static func notifies(_ s: ConformanceSession, callID: String, after: Int) -> [(status: Int?, state: String?)] {
        s.entries.dropFirst(after).compactMap { e in
            guard e.direction == .received, let m = e.message, m.method == .notify, m.callID == callID else { return nil }
            let status = try? SIPFragStatus(parsing: Array(m.body)).statusCode
            return (status, ((try? m.subscriptionState()) ?? nil)?.state)
        }
    }

    /// Waits for the NOTIFY ending the REFER's subscription (a final sipfrag status, or
    /// Subscription-State terminated).
    static func finalNotify(_ s: ConformanceSession, callID: String, after: Int, timeout: Duration) async -> SIPMessage? {
        await s.waitFor(after: after, timeout: timeout) { m in
            guard m.method == .notify, m.callID == callID else { return false }
            let final = ((try? SIPFragStatus(parsing: Array(m.body)))?.statusCode ?? 0) >= 200
            return final || ((try? m.subscriptionState()) ?? nil)?.state == "terminated"
        }?.0
    }

    /// Ends a call the DUT placed to the runner (the runner is its callee): BYE with the
    /// dialog's tags and CSeq `cseq` (above those of the runner's NOTIFYs in it), to the DUT's
    /// Contact; its final response.
    static func hangUp(_ call: ReceivedCall, cseq: UInt32 = 1) async -> SIPMessage? {
        let s = call.session
        let b = s.branch()
        var uri = s.targetURI.description
        if case .addresses(let list)? = (try? call.invite.contact()) ?? nil, let first = list.first { uri = first.uri.description }
        let text = ["BYE \(uri) SIP/2.0", "Via: SIP/2.0/\(s.viaTransport) \(s.hostPort);branch=\(b);rport", "Max-Forwards: 70",
                    "From: \(call.invite[.to] ?? "<sip:conform@\(s.hostPort)>");tag=\(call.toTag)", "To: \(call.invite[.from] ?? "")",
                    "Call-ID: \(call.callID)", "CSeq: \(cseq) BYE", "Content-Length: 0"].joined(separator: "\r\n") + "\r\n\r\n"
        s.sendRaw(Array(text.utf8), to: call.source)
        return await s.finalResponse(branch: b, method: .bye)
    }

    /// The DUT's new INVITE to `user` at the runner received after `after`, as a call the runner answers.
    static func incoming(_ s: ConformanceSession, user: String, after: Int, timeout: Duration) async -> ReceivedCall? {
        guard let (m, i) = await s.waitFor(after: after, timeout: timeout, { m in
            m.method == .invite && m.toTag == nil && m.requestURIText?.hasPrefix("sip:\(user)@") == true
        }) else { return nil }
        return ReceivedCall(session: s, invite: m, index: i, source: s.entries[i].source ?? s.target, toTag: s.token(), time: s.entries[i].time)
    }

    /// The original call after a transfer: the DUT's BYE within 1 s, else the runner's, answered 2xx.
    static func oldCallEnds(_ call: inout PlacedCall, after: Int) async -> String? {
        let s = call.session, id = call.callID
        if await s.waitFor(after: after, timeout: .seconds(1), { $0.method == .bye && $0.callID == id }) != nil { return nil }
        guard let r = await call.hangUp() else { return "no final response to the transferor's BYE of the original call" }
        guard (200...299).contains(r.statusCode ?? 0) else { return "the BYE of the original call was answered \(r.statusCode ?? 0)" }
        return nil
    }

    /// Blind or attended (with `replaces`, a dialog the runner holds with the target side): the
    /// DUT accepts the REFER, calls the target with Referred-By (and Replaces), and reports 1xx
    /// then 200 in NOTIFYs; the original call ends with BYE.
    static func transferee(_ s: ConformanceSession, replaces: Replaces?) async -> ScenarioOutcome {
        guard var (call, _) = await PlacedCall.established(s) else { return .inconclusive("the call to the DUT was not established, so there was nothing to transfer") }
        s.answerInvitesInScenario()
        let user = "target-" + s.token()
        let referredBy = "<sip:conform@\(s.hostPort)>"
        var referTo = "<sip:\(user)@\(s.hostPort)\(s.uriTransport)"
        if let r = replaces {
            referTo += "?Replaces=\(r.callID)%3Bto-tag%3D\(r.toTag)%3Bfrom-tag%3D\(r.fromTag)"
        }
        referTo += ">"
        let mark = s.entries.count
        let b = refer(&call, referTo: [referTo], referredBy: referredBy)
        guard let answer = await s.finalResponse(branch: b, method: .refer) else {
            _ = await call.hangUp()
            return .failed("no final response to the REFER")
        }
        let code = answer.statusCode ?? 0
        guard (200...299).contains(code) else {
            _ = await call.hangUp()
            return .inconclusive("the DUT refused the REFER with \(code), so the transfer itself could not be tested (refer-answered judges the refusal)")
        }
        guard let target = await incoming(s, user: user, after: mark, timeout: s.responseTimeout) else {
            _ = await call.hangUp()
            return .failed("the DUT accepted the REFER (\(code)) but never called the Refer-To target (RFC 3515 §2.4.2)")
        }
        var problems: [String] = []
        let by = (try? target.invite.referredBy()) ?? nil
        if by?.uri.description != "sip:conform@\(s.hostPort)" {
            problems.append("the INVITE to the target carries \(by.map { "Referred-By \($0)" } ?? "no Referred-By"); the REFER's is due (RFC 3892 §2.2: a referee MUST copy any Referred-By header field value into the referenced request without modification)")
        }
        if let r = replaces {
            let got = (try? target.invite.replaces()) ?? nil
            if got?.callID != r.callID || got?.toTag != r.toTag || got?.fromTag != r.fromTag {
                problems.append("the INVITE to the target carries \(got.map { "Replaces \($0)" } ?? "no Replaces"); the Refer-To's \(r) is due (RFC 3891 §3, RFC 3515 §2.1)")
            }
        }
        target.send(target.response(180))
        guard await target.sendUntilAcknowledged(target.response(200, answer: true)) != nil else {
            _ = await call.hangUp()
            return .failed("the DUT never acknowledged the target's 200")
        }
        let ended = await finalNotify(s, callID: call.callID, after: mark, timeout: s.responseTimeout)
        let reports = notifies(s, callID: call.callID, after: mark)
        if reports.isEmpty {
            problems.append("no NOTIFY came in the REFER's dialog after the \(code) (RFC 3515 §2.4.4: the first NOTIFY is sent at once)")
        } else {
            if let first = reports.first?.status, first >= 200 {
                problems.append("the first NOTIFY reports \(first), not a provisional status (100 Trying while the INVITE is under way, RFC 3515 §2.4.4)")
            }
            if ended == nil {
                problems.append("no NOTIFY reported the outcome (200) with the subscription terminated (RFC 3515 §2.4.5, §2.4.7)")
            } else if let last = reports.last, last.status != 200 || last.state != "terminated" {
                problems.append("the last NOTIFY reports \(last.status.map(String.init) ?? "no sipfrag status") with Subscription-State \(last.state ?? "missing"); 200 and terminated are due")
            }
        }
        if let why = await oldCallEnds(&call, after: mark) { problems.append(why) }
        _ = await hangUp(target)
        return problems.isEmpty ? .passed : .failed(problems.joined(separator: "; "))
    }

    /// A REFER the DUT refuses must leave the call as it was; one it accepts, to a target that
    /// is busy, ends its subscription with a NOTIFY carrying the failure.
    static func referAnswered(_ s: ConformanceSession) async -> ScenarioOutcome {
        guard var (call, _) = await PlacedCall.established(s) else { return .inconclusive("the call to the DUT was not established, so no REFER could be sent in it") }
        s.answerInvitesInScenario()
        let user = "busy-" + s.token()
        let mark = s.entries.count
        let b = refer(&call, referTo: ["<sip:\(user)@\(s.hostPort)\(s.uriTransport)>"])
        guard let answer = await s.finalResponse(branch: b, method: .refer) else {
            _ = await call.hangUp()
            return .failed("no final response to the REFER")
        }
        let code = answer.statusCode ?? 0
        if (200...299).contains(code) {
            guard let target = await incoming(s, user: user, after: mark, timeout: s.responseTimeout) else {
                _ = await call.hangUp()
                return .failed("the DUT accepted the REFER (\(code)) but never called the Refer-To target (RFC 3515 §2.4.2)")
            }
            target.send(target.response(100))
            _ = await target.sendUntilAcknowledged(target.response(486))
            let ended = await finalNotify(s, callID: call.callID, after: mark, timeout: s.responseTimeout)
            guard let bye = await call.hangUp(), (200...299).contains(bye.statusCode ?? 0) else {
                return .failed("after the failed transfer the original call did not go on: BYE not answered 2xx")
            }
            guard let ended else { return .failed("no NOTIFY reported the target's 486 and ended the subscription (RFC 3515 §2.4.5, §2.4.7)") }
            let status = try? SIPFragStatus(parsing: Array(ended.body)).statusCode
            guard let status, status >= 300 else {
                return .failed("the last NOTIFY reports \(status.map(String.init) ?? "no status"); the target's failure (486) is due")
            }
            return .passed
        }
        guard (400...699).contains(code) else {
            _ = await call.hangUp()
            return .failed("the REFER was answered \(code): 2xx, or a refusal 4xx-6xx, is due")
        }
        // Refused: nothing follows (no NOTIFY, no INVITE), and the call goes on.
        await s.pause(.milliseconds(500))
        let followed = s.entries.dropFirst(mark).contains { e in
            e.direction == .received && ((e.message?.method == .notify && e.message?.callID == call.callID)
                                         || (e.message?.method == .invite && e.message?.requestURIText?.hasPrefix("sip:\(user)@") == true))
        }
        guard let bye = await call.hangUp(), (200...299).contains(bye.statusCode ?? 0) else {
            return .failed("after refusing the REFER (\(code)) the DUT did not keep the call: BYE not answered 2xx")
        }
        if followed { return .failed("the DUT refused the REFER (\(code)) and still sent a NOTIFY or called the target") }
        return .passed
    }

    /// A REFER with `count` Refer-To values (0 or 2) must be refused 400.
    static func referToCount(_ s: ConformanceSession, count: Int) async -> ScenarioOutcome {
        guard var (call, _) = await PlacedCall.established(s) else { return .inconclusive("the call to the DUT was not established, so no REFER could be sent in it") }
        s.answerInvitesInScenario()
        let targets = (0..<count).map { "<sip:nobody\($0)-\(s.token())@\(s.hostPort)>" }
        let b = refer(&call, referTo: targets)
        let answer = await s.finalResponse(branch: b, method: .refer)
        if let answer, (200...299).contains(answer.statusCode ?? 0) {
            // It will call someone: each INVITE is refused, its subscription left to end.
            await s.pause(.milliseconds(300))
            for e in s.entries where e.direction == .received && e.message?.method == .invite && e.message?.toTag == nil && e.message?.callID != call.callID {
                if let m = e.message {
                    let r = ReceivedCall(session: s, invite: m, index: 0, source: e.source ?? s.target, toTag: s.token(), time: e.time)
                    r.send(r.response(603))
                }
            }
        }
        _ = await call.hangUp()
        guard let answer else { return .failed("no final response to the REFER with \(count) Refer-To values") }
        let code = answer.statusCode ?? 0
        guard code == 400 else { return .failed("the REFER with \(count) Refer-To values was answered \(code), 400 is due") }
        return .passed
    }

    /// The DUT as transfer target: an INVITE with Replaces naming the confirmed call the runner
    /// has with it is answered 2xx, and the replaced call is ended by the DUT's BYE.
    static func replacesConfirmed(_ s: ConformanceSession) async -> ScenarioOutcome {
        guard var (old, _) = await PlacedCall.established(s), let tag = old.remoteTag else {
            return .inconclusive("the first call to the DUT was not established, so there was no dialog to replace")
        }
        let mark = s.entries.count
        var new = PlacedCall(s)
        guard let r = await new.establish(extra: ["Replaces: \(old.callID);to-tag=\(tag);from-tag=\(old.fromTag)"]) else {
            _ = await old.hangUp()
            return .failed("no final response to the INVITE with Replaces")
        }
        let code = r.statusCode ?? 0
        guard (200...299).contains(code) else {
            _ = await old.hangUp()
            return .failed("the INVITE with Replaces naming an established call was answered \(code); 2xx is due (RFC 3891 §3)")
        }
        let id = old.callID
        let bye = await s.waitFor(after: mark, timeout: s.responseTimeout) { $0.method == .bye && $0.callID == id }
        _ = await new.hangUp()
        guard bye != nil else {
            _ = await old.hangUp()
            if !claimsReplaces(r) { return ignored(code) }
            return .failed("the replaced call was not ended with a BYE from the DUT (RFC 3891 §3)")
        }
        return .passed
    }

    /// Whether the DUT's answer lists `replaces` (Supported or Require): only then is a 2xx
    /// that ignored the header held against it (the runner does not send `Require: replaces`,
    /// so a UA without RFC 3891 may ignore the header, RFC 3261 §8.2.2.3).
    static func claimsReplaces(_ answer: SIPMessage) -> Bool {
        (((try? answer.supported()) ?? []) + ((try? answer.require()) ?? [])).contains { $0.lowercased() == "replaces" }
    }

    static func ignored(_ code: Int) -> ScenarioOutcome {
        .inconclusive("the DUT answered the INVITE with Replaces \(code) as a new call and does not list replaces in Supported: it seems not to implement RFC 3891 (an extension it may ignore when not required)")
    }

    /// The DUT as transfer target: Replaces naming a dialog it does not have gets 481.
    static func replacesUnknown(_ s: ConformanceSession) async -> ScenarioOutcome {
        let ghost = "ghost-" + s.token()
        s.declareAbsent(callID: ghost)
        var new = PlacedCall(s)
        guard let r = await new.establish(extra: ["Replaces: \(ghost);to-tag=\(s.token());from-tag=\(s.token())"]) else {
            return .failed("no final response to the INVITE with Replaces")
        }
        let code = r.statusCode ?? 0
        if (200...299).contains(code) {
            _ = await new.hangUp()
            if !claimsReplaces(r) { return ignored(code) }
        }
        guard code == 481 else { return .failed("the INVITE with Replaces naming no dialog was answered \(code), 481 is due (RFC 3891 §3)") }
        return .passed
    }

    /// The DUT as transfer target: Replaces naming the early dialog of a call the runner placed
    /// to it (the DUT did not initiate it) gets 481, and the ringing call is left alone.
    static func replacesEarly(_ s: ConformanceSession) async -> ScenarioOutcome {
        var old = PlacedCall(s)
        old.invite()
        guard let ringing = await s.response(branch: old.inviteBranch, method: .invite, { (101...299).contains($0) }) else {
            return .failed("no response other than 100 to the INVITE")
        }
        if (200...299).contains(ringing.statusCode ?? 0) {
            old.remoteTag = ringing.toTag
            old.ack2xx(ringing)
            _ = await old.hangUp()
            return .inconclusive("the DUT answered at once (no early dialog to name)")
        }
        guard let tag = ringing.toTag else {
            old.cancel()
            if let f = await s.finalResponse(branch: old.inviteBranch, method: .invite) {
                if (200...299).contains(f.statusCode ?? 0) { old.remoteTag = f.toTag; old.ack2xx(f); _ = await old.hangUp() } else { old.ackFailure(f) }
            }
            return .inconclusive("the DUT's provisional carries no To tag (no early dialog to name)")
        }
        var new = PlacedCall(s)
        let r = await new.establish(extra: ["Replaces: \(old.callID);to-tag=\(tag);from-tag=\(old.fromTag)"])
        if let r, (200...299).contains(r.statusCode ?? 0) { _ = await new.hangUp() }
        // Whether the ringing call was answered before the DUT answered the INVITE with Replaces
        // (then the dialog it named was no longer early, and replacing it was allowed).
        let entries = s.entries
        func firstFinal(_ branch: String, _ codes: ClosedRange<Int>) -> Int? {
            entries.firstIndex { e in
                guard e.direction == .received, let m = e.message, !m.isRequest else { return false }
                return m.topViaBranch == branch && (try? m.cseq().method) == .invite && codes.contains(m.statusCode ?? 0)
            }
        }
        let oldAnswered = firstFinal(old.inviteBranch, 200...299), replacesAnswered = firstFinal(new.inviteBranch, 200...699)
        let answeredFirst = oldAnswered.map { o in replacesAnswered.map { o < $0 } ?? true } ?? false
        // The ringing call: cancelled (or hung up when its 2xx crossed), and it must still exist.
        old.cancel()
        if let f = await s.finalResponse(branch: old.inviteBranch, method: .invite) {
            if (200...299).contains(f.statusCode ?? 0) { old.remoteTag = f.toTag; old.ack2xx(f); _ = await old.hangUp() } else { old.ackFailure(f) }
        }
        guard let r else { return .failed("no final response to the INVITE with Replaces") }
        if (200...299).contains(r.statusCode ?? 0), !claimsReplaces(r) { return ignored(r.statusCode ?? 0) }
        if answeredFirst, r.statusCode != 481 {
            return .inconclusive("the DUT answered the ringing call before it answered the INVITE with Replaces (\(r.statusCode ?? 0)): the dialog it named was no longer early")
        }
        guard r.statusCode == 481 else {
            return .failed("the INVITE with Replaces naming an early dialog the DUT did not initiate was answered \(r.statusCode ?? 0), 481 is due (RFC 3891 §3)")
        }
        return .passed
    }

    static let tests: [ConformanceTestCase] = [
        ConformanceTestCase(name: "blind-transferee", etsiPurpose: nil,
                            summary: "in a call the runner placed, a REFER to a target the runner answers (with Referred-By): 2xx, an INVITE to the target carrying Referred-By, NOTIFYs with sipfrag 1xx then 200 (terminated), the original call ended by BYE",
                            reference: "RFC 3515 §2.4.2, §2.4.4, §2.4.5; RFC 3892 §2.2; RFC 5589 §6", purposeNote: note, role: .uac) { s in
            await transferee(s, replaces: nil)
        },
        ConformanceTestCase(name: "attended-transferee", etsiPurpose: nil,
                            summary: "the same with Refer-To carrying Replaces of a dialog the runner holds with the target side: the DUT's INVITE to the target carries that Replaces",
                            reference: "RFC 3515 §2.1, §2.4.5; RFC 3891 §3; RFC 5589 §7", purposeNote: note, role: .uac) { s in
            await transferee(s, replaces: Replaces(callID: "consult-" + s.token(), toTag: s.token(), fromTag: s.token()))
        },
        ConformanceTestCase(name: "refer-answered", etsiPurpose: nil,
                            summary: "a REFER to a busy target: refused (4xx-6xx) with nothing following and the call kept, or accepted with a final NOTIFY carrying the failure and the call kept",
                            reference: "RFC 3515 §2.4.2, §2.4.5, §2.4.7", purposeNote: note, role: .uac) { s in
            await referAnswered(s)
        },
        ConformanceTestCase(name: "refer-without-refer-to", etsiPurpose: nil,
                            summary: "a REFER without Refer-To is refused 400",
                            reference: "RFC 3515 §2.4.1, §2.4.2", purposeNote: note, role: .uac) { s in
            await referToCount(s, count: 0)
        },
        ConformanceTestCase(name: "refer-two-refer-to", etsiPurpose: nil,
                            summary: "a REFER with two Refer-To values is refused 400",
                            reference: "RFC 3515 §2.4.1, §2.4.2", purposeNote: note, role: .uac) { s in
            await referToCount(s, count: 2)
        },
        ConformanceTestCase(name: "replaces-confirmed", etsiPurpose: nil,
                            summary: "the DUT as transfer target: an INVITE with Replaces naming the established call the runner has with it is answered 2xx, and the DUT ends the replaced call with BYE",
                            reference: "RFC 3891 §3; RFC 5589 §7.1", purposeNote: note, role: .uac) { s in
            await replacesConfirmed(s)
        },
        ConformanceTestCase(name: "replaces-unknown-dialog", etsiPurpose: nil,
                            summary: "an INVITE with Replaces naming no dialog of the DUT is answered 481",
                            reference: "RFC 3891 §3", purposeNote: note, role: .uac) { s in
            await replacesUnknown(s)
        },
        ConformanceTestCase(name: "replaces-early-dialog", etsiPurpose: nil,
                            summary: "while a call the runner placed rings, an INVITE with Replaces naming its early dialog (which the DUT did not initiate) is answered 481; inconclusive when the DUT answers at once",
                            reference: "RFC 3891 §3", purposeNote: note, role: .uac) { s in
            await replacesEarly(s)
        },
    ]
}

extension TransferSuite {
    /// Sends a NOTIFY of the DUT's REFER in the call the DUT placed to the runner (the runner
    /// is its callee): sipfrag `status`, Subscription-State `state`; its final response.
    static func notify(_ call: ReceivedCall, cseq: UInt32, status: Int, state: String) async -> SIPMessage? {
        let s = call.session
        let b = s.branch()
        var uri = s.targetURI.description
        if case .addresses(let list)? = (try? call.invite.contact()) ?? nil, let first = list.first { uri = first.uri.description }
        let body = SIPFragStatus(statusCode: status).description + "\r\n"
        let text = ["NOTIFY \(uri) SIP/2.0", "Via: SIP/2.0/\(s.viaTransport) \(s.hostPort);branch=\(b);rport", "Max-Forwards: 70",
                    "From: \(call.invite[.to] ?? "<sip:conform@\(s.hostPort)>");tag=\(call.toTag)", "To: \(call.invite[.from] ?? "")",
                    "Call-ID: \(call.callID)", "CSeq: \(cseq) NOTIFY", "Contact: <sip:conform@\(s.hostPort)\(s.uriTransport)>",
                    "Event: refer", "Subscription-State: \(state)", "Content-Type: message/sipfrag",
                    "Content-Length: \(body.utf8.count)"].joined(separator: "\r\n") + "\r\n\r\n" + body
        s.sendRaw(Array(text.utf8), to: call.source)
        return await s.finalResponse(branch: b, method: .notify)
    }

    /// The DUT calls the runner and transfers the call (blind): the runner answers, answers a
    /// hold re-INVITE if one comes, takes the REFER (202, the session's answer), reports 100
    /// then 200 in NOTIFYs, and the DUT must end the call with BYE.
    static func transferor(_ s: ConformanceSession) async -> ScenarioOutcome {
        guard let call = await ReceivedCall.next(s) else { return .failed("no INVITE from the DUT within \(s.responseTimeout)") }
        call.send(call.response(180))
        guard let (_, acked) = await call.sendUntilAcknowledged(call.response(200, answer: true)) else { return .failed("the DUT never acknowledged the 200") }
        // Up to 8 s for the REFER (a transferor holds the call first, RFC 5589 §6).
        var after = acked + 1
        var referMessage: SIPMessage?
        let deadline = s.elapsed + s.responseTimeout + .seconds(8)
        while referMessage == nil, s.elapsed < deadline {
            guard let (m, i) = await s.waitFor(after: after, timeout: deadline - s.elapsed, { m in
                m.callID == call.callID && (m.method == .refer || m.method == .bye || (m.method == .invite && m.toTag != nil))
            }) else { break }
            after = i + 1
            switch m.method {
            case .refer?: referMessage = m
            case .bye?: return .inconclusive("the DUT ended the call without transferring it (drive it to transfer: switchboard call --transfer-to URI)")
            default:
                let again = ReceivedCall(session: s, invite: m, index: i, source: s.entries[i].source ?? s.target, toTag: call.toTag, time: s.entries[i].time)
                guard await again.sendUntilAcknowledged(again.response(200, answer: true)) != nil else { return .failed("the DUT never acknowledged the 200 to its re-INVITE") }
            }
        }
        guard let refer = referMessage else { return .inconclusive("no REFER from the DUT in its call (drive it to transfer: switchboard call --transfer-to URI)") }
        var problems: [String] = []
        if ((try? refer.referTo()) ?? nil) == nil { problems.append("the REFER's Refer-To is missing or does not parse (RFC 3515 §2.4.1)") }
        guard let trying = await notify(call, cseq: 1, status: 100, state: "active;expires=60"), (200...299).contains(trying.statusCode ?? 0) else {
            return .failed("the DUT did not answer 2xx the NOTIFY (100 Trying) of its REFER's subscription (RFC 3515 §2.4.4, RFC 6665 §4.1.3)")
        }
        // The BYE may follow the 2xx to the final NOTIFY at once: looked for from here.
        let mark = s.entries.count
        guard let done = await notify(call, cseq: 2, status: 200, state: "terminated;reason=noresource"), (200...299).contains(done.statusCode ?? 0) else {
            return .failed("the DUT did not answer 2xx the final NOTIFY (200 OK) of its REFER's subscription")
        }
        let id = call.callID
        if await s.waitFor(after: mark, timeout: s.responseTimeout, { $0.method == .bye && $0.callID == id }) == nil {
            _ = await hangUp(call, cseq: 3)
            problems.append("the DUT did not end its call with BYE after the NOTIFY reported the transfer's success (RFC 5589 §6)")
        }
        return problems.isEmpty ? .passed : .failed(problems.joined(separator: "; "))
    }

    /// The user the DUT calls for the consultation of an attended transfer (`sip:consult@` the runner).
    static let consultUser = "consult"

    /// How to drive a DUT to the attended transfer `transferor-attended` tests.
    static let driveAttended = "drive it: switchboard call TARGET --consult sip:\(consultUser)@RUNNER, where RUNNER is TARGET's host and port"

    /// What is wrong with the Replaces a transferor's REFER carries for the consultation call
    /// `consultation` (the runner, as the target, answered it), or nil. RFC 3891 §3 names the
    /// dialog as its receiver (the target) sees it: to-tag the target's, from-tag the transferor's.
    static func replacesProblem(_ refer: SIPMessage, consultation: ReceivedCall) -> String? {
        let dutTag = consultation.invite.fromTag ?? "", targetTag = consultation.toTag
        let got: Replaces?
        do throws(SIPParseError) {
            got = try refer.referToReplaces()
        } catch {
            return "the REFER's Refer-To or the Replaces it carries does not parse (byte \(error.offset): \(error.detail))"
        }
        guard let got else {
            return "the REFER's Refer-To carries no Replaces: an attended transfer names the consultation call's dialog in it (RFC 5589 §7, RFC 3891 §3, RFC 3515 §2.1)"
        }
        if got.callID != consultation.callID {
            return "the Replaces names Call-ID \(got.callID), the consultation call is \(consultation.callID) (RFC 5589 §7, RFC 3891 §3)"
        }
        if got.toTag == dutTag && got.fromTag == targetTag {
            return "the Replaces has the consultation call's tags the wrong way round (to-tag \(got.toTag), from-tag \(got.fromTag)): to-tag is the target's (\(targetTag)) and from-tag the transferor's (\(dutTag)), the dialog as the target sees it (RFC 3891 §3)"
        }
        if got.toTag != targetTag || got.fromTag != dutTag {
            return "the Replaces names to-tag \(got.toTag), from-tag \(got.fromTag); the consultation call's are to-tag \(targetTag) (the target's), from-tag \(dutTag) (RFC 3891 §3)"
        }
        return nil
    }

    /// The DUT calls the runner, holds that call, calls `consult@` the runner (the transfer
    /// target) and transfers the first call to the second (attended, RFC 5589 §7): its REFER's
    /// Refer-To carries a Replaces naming the consultation dialog (``replacesProblem(_:consultation:)``).
    /// The runner answers both calls and any re-INVITE, accepts the REFER 202, reports 100 then
    /// 200 in NOTIFYs; the DUT must end the first call with BYE and, as the target ends the
    /// replaced consultation call (RFC 5589 §7.1), answer that BYE 2xx (or end it itself).
    static func attendedTransferor(_ s: ConformanceSession) async -> ScenarioOutcome {
        s.expect(requestUser: consultUser)
        guard let call = await ReceivedCall.next(s) else { return .failed("no INVITE from the DUT within \(s.responseTimeout)") }
        call.send(call.response(180))
        guard let (_, acked) = await call.sendUntilAcknowledged(call.response(200, answer: true)) else { return .failed("the DUT never acknowledged the 200") }
        // The consultation call, then the REFER: up to 12 s beyond the response timeout (a
        // transferor holds the call first and waits for the consultation to be answered).
        var after = acked + 1
        var consultation: ReceivedCall?, referMessage: SIPMessage?
        let deadline = s.elapsed + s.responseTimeout + .seconds(12)
        while referMessage == nil, s.elapsed < deadline {
            let a = call.callID, b = consultation?.callID
            guard let (m, i) = await s.waitFor(after: after, timeout: deadline - s.elapsed, { m in
                guard m.method == .invite || m.method == .refer || m.method == .bye else { return false }
                if m.callID == a || (b != nil && m.callID == b) { return true }
                return b == nil && m.method == .invite && m.toTag == nil && m.requestURIText?.hasPrefix("sip:\(consultUser)@") == true
            }) else { break }
            after = i + 1
            let source = s.entries[i].source ?? s.target
            switch m.method {
            case .refer? where m.callID == a: referMessage = m
            case .refer?:
                _ = await hangUp(call)
                return .inconclusive("the DUT sent its REFER in the consultation call (transferring the target to the first party): this test plays the transferee in the first call (RFC 5589 §7)")
            case .bye?:
                if let b = consultation, m.callID == a { _ = await hangUp(b) } else { _ = await hangUp(call) }
                return .inconclusive("the DUT ended \(m.callID == a ? "the call" : "the consultation call") without transferring (\(driveAttended))")
            default:
                if m.toTag == nil {
                    // A copy of an INVITE already taken, or the consultation call.
                    guard m.callID != a, b == nil else { continue }
                    let c = ReceivedCall(session: s, invite: m, index: i, source: source, toTag: s.token(), time: s.entries[i].time)
                    c.send(c.response(180))
                    guard await c.sendUntilAcknowledged(c.response(200, answer: true)) != nil else {
                        _ = await hangUp(call)
                        return .failed("the DUT never acknowledged the consultation call's 200")
                    }
                    consultation = c
                } else {
                    // A re-INVITE (hold) in either call.
                    let again = ReceivedCall(session: s, invite: m, index: i, source: source, toTag: m.toTag ?? call.toTag, time: s.entries[i].time)
                    guard await again.sendUntilAcknowledged(again.response(200, answer: true)) != nil else { return .failed("the DUT never acknowledged the 200 to its re-INVITE") }
                }
            }
        }
        guard let refer = referMessage else {
            if let b = consultation { _ = await hangUp(b) }
            _ = await hangUp(call)
            return .inconclusive(consultation == nil ? "the DUT placed no consultation call to sip:\(consultUser)@ the runner (\(driveAttended))"
                                                     : "no REFER from the DUT in its first call after the consultation call was answered (\(driveAttended))")
        }
        guard let consult = consultation else {
            _ = await notify(call, cseq: 1, status: 603, state: "terminated;reason=noresource")
            _ = await hangUp(call, cseq: 2)
            return .inconclusive("the DUT transferred without a consultation call (blind: transferor-blind tests that)")
        }
        var problems: [String] = []
        if let why = replacesProblem(refer, consultation: consult) { problems.append(why) }
        guard let trying = await notify(call, cseq: 1, status: 100, state: "active;expires=60"), (200...299).contains(trying.statusCode ?? 0) else {
            _ = await hangUp(consult)
            return .failed((problems + ["the DUT did not answer 2xx the NOTIFY (100 Trying) of its REFER's subscription (RFC 3515 §2.4.4)"]).joined(separator: "; "))
        }
        let mark = s.entries.count
        guard let done = await notify(call, cseq: 2, status: 200, state: "terminated;reason=noresource"), (200...299).contains(done.statusCode ?? 0) else {
            _ = await hangUp(consult)
            return .failed((problems + ["the DUT did not answer 2xx the final NOTIFY (200 OK) of its REFER's subscription"]).joined(separator: "; "))
        }
        let a = call.callID, b = consult.callID
        if await s.waitFor(after: mark, timeout: s.responseTimeout, { $0.method == .bye && $0.callID == a }) == nil {
            _ = await hangUp(call, cseq: 3)
            problems.append("the DUT did not end its first call with BYE after the NOTIFY reported the transfer's success (RFC 5589 §7)")
        }
        // The target ends the replaced consultation call (RFC 5589 §7.1), unless the DUT did.
        if s.entries.dropFirst(mark).contains(where: { $0.direction == .received && $0.message?.method == .bye && $0.message?.callID == b }) == false {
            guard let r = await hangUp(consult), (200...299).contains(r.statusCode ?? 0) else {
                problems.append("the DUT did not answer 2xx the target's BYE of the replaced consultation call (RFC 5589 §7.1)")
                return .failed(problems.joined(separator: "; "))
            }
        }
        return problems.isEmpty ? .passed : .failed(problems.joined(separator: "; "))
    }

    /// `transfer-uac`: the DUT calls the runner (listening at TARGET) and transfers the call.
    static let uacTests: [ConformanceTestCase] = [
        ConformanceTestCase(name: "transferor-blind", etsiPurpose: nil,
                            summary: "the DUT calls the runner and transfers the call: its REFER (one Refer-To) is accepted 202, it answers the NOTIFYs (sipfrag 100, then 200 with the subscription terminated) 2xx, then ends the call with BYE",
                            reference: "RFC 3515 §2.4.1, §2.4.4; RFC 6665 §4.1.3; RFC 5589 §6", purposeNote: note, role: .uas) { s in
            await transferor(s)
        },
        ConformanceTestCase(name: "transferor-attended", etsiPurpose: nil,
                            summary: "the DUT calls the runner, holds the call, calls sip:consult@ the runner (answered) and transfers the first call to it: the REFER's Refer-To carries Replaces naming the consultation dialog (its Call-ID, to-tag the target's, from-tag the DUT's); after the NOTIFYs (100, then 200 terminated) the DUT ends the first call with BYE and answers 2xx the target's BYE of the consultation call",
                            reference: "RFC 5589 §7, §7.1; RFC 3891 §3; RFC 3515 §2.1, §2.4.4", purposeNote: note, role: .uas) { s in
            await attendedTransferor(s)
        },
    ]
}
