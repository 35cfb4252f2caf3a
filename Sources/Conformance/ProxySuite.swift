import SIPMessage
import NetworkIO

/// One call the runner places to itself through a proxy DUT (RFC 3261 §16): the caller side
/// sends to the DUT (the session's target) with the runner's own address as Request-URI, and
/// the callee side answers what the DUT forwards there. Both sides share the test's socket:
/// a forwarded request is told from a response by being a request, and from the caller's
/// own by arriving (the runner never sends requests to itself).
struct ProxyCall {
    let session: ConformanceSession
    let callID: String
    let fromTag: String
    /// The callee's To tag (one dialog: the DUT is not asked to fork).
    let calleeTag: String
    var inviteBranch = ""
    var cseq: UInt32 = 1

    init(_ session: ConformanceSession) {
        self.session = session
        callID = session.token() + "@conform-proxy"
        fromTag = session.token()
        calleeTag = session.token()
    }

    /// The callee's URI: the runner's own address.
    var calleeURI: String { "sip:callee@\(session.hostPort)\(session.uriTransport)" }

    func draft(_ method: String, branch: String, uri: String? = nil, toTag: String? = nil) -> RequestDraft {
        var d = RequestDraft(method: method, uri: uri ?? calleeURI, branch: branch, callID: callID, fromTag: fromTag, toTag: toTag, cseq: cseq)
        d.to = calleeURI
        return d
    }

    /// Sends the INVITE (with an offer) to the DUT.
    mutating func invite(maxForwards: Int = 70) {
        inviteBranch = session.branch()
        var d = draft("INVITE", branch: inviteBranch)
        d.maxForwards = maxForwards
        d.body = PlacedCall.offer(session)
        d.contentType = "application/sdp"
        session.send(d.text(session))
    }

    /// Waits for the DUT to forward a request of this call with `method` to the callee,
    /// received after index `after`; returns it, its index and where it came from.
    func forwarded(_ method: SIPMethod, after: Int = 0, timeout: Duration? = nil) async -> (SIPMessage, Int, SocketAddress)? {
        guard let (m, i) = await session.waitFor(after: after, timeout: timeout ?? session.responseTimeout, { $0.method == method && $0.callID == callID }) else {
            return nil
        }
        return (m, i, session.entries[i].source ?? session.target)
    }

    /// Sends the INVITE (Max-Forwards 70) and waits for the DUT to forward it to the callee
    /// (as ``forwarded(_:after:timeout:)``); when it does not, the test fails with ``notForwarded``.
    mutating func inviteForwarded() async -> (SIPMessage, Int, SocketAddress)? {
        invite()
        return await forwarded(.invite)
    }

    /// The verdict when the DUT did not forward the INVITE.
    var notForwarded: ScenarioOutcome { .failed("the DUT did not forward the INVITE to \(calleeURI) (RFC 3261 §16.6)") }

    /// Checks the forwarded INVITE `fwd` (``ProxySuite/forwardingProblem(_:sentBranch:sentMaxForwards:)``);
    /// a faulty one is refused 500 by the callee, the caller's ACK sent, and the failure returned.
    func refuseIfMisforwarded(_ fwd: SIPMessage, from hop: SocketAddress) async -> ScenarioOutcome? {
        guard let problem = ProxySuite.forwardingProblem(fwd, sentBranch: inviteBranch, sentMaxForwards: 70) else { return nil }
        answer(fwd, from: hop, code: 500)
        if let f = await session.finalResponse(branch: inviteBranch, method: .invite) { ackFailure(f) }
        return .failed(problem)
    }

    /// The callee's response `code` to a forwarded request, sent back to the hop it came from:
    /// a dialog-establishing answer echoes the request's Record-Route (§12.1.1) and names the
    /// callee as Contact.
    /// Behind a forking DUT each branch is a UAS of its own: `tag` and `contact` give the
    /// branch's To tag and Contact (the callee's by default).
    func answer(_ request: SIPMessage, from hop: SocketAddress, code: Int, tag: String? = nil, contact: String? = nil) {
        var r = SIPMessage(responseTo: request, statusCode: code, toTag: code == 100 ? nil : (request.toTag == nil ? tag ?? calleeTag : nil))
        if request.method == .invite, (101...299).contains(code) {
            try? r.append(.contact, "<\(contact ?? calleeURI)>")
            for rr in request.valueBytes(.recordRoute) { try? r.append(.recordRoute, String(decoding: rr, as: UTF8.self)) }
        }
        try? r.append(.contentLength, "0")
        session.sendRaw(r.serialized(), to: hop)
    }

    /// The ACK of a non-2xx final response (the INVITE's branch, hop by hop to the DUT).
    func ackFailure(_ response: SIPMessage) {
        session.send(draft("ACK", branch: inviteBranch, toTag: response.toTag).text(session))
    }

    /// A request in the dialog the 2xx `ok` set up: to its Contact, through its Record-Route
    /// (reversed: the caller's route set, §12.1.2), sent to the DUT.
    func inDialog(_ method: String, branch: String, ok: SIPMessage) {
        let target = ((try? ok.contact()) ?? nil)?.addresses.first?.uri.description ?? calleeURI
        var d = draft(method, branch: branch, uri: target, toTag: ok.toTag)
        d.extra = ok.valueBytes(.recordRoute).reversed().map { "Route: " + String(decoding: $0, as: UTF8.self) }
        session.send(d.text(session))
    }
}

/// The `proxy` suite: the runner places calls to itself through the DUT and checks what a
/// proxy must do to requests and responses it forwards (RFC 3261 §16).
enum ProxySuite {
    static let unverified = ConformanceSuites.unverified

    /// The Via branches of a message, top first.
    static func branches(_ m: SIPMessage) -> [String] { ((try? m.via()) ?? []).map { $0.parameters["branch"].flatMap { $0 } ?? "" } }

    /// Checks a request the DUT forwarded against the one the runner sent (§16.6 items 3 and 8):
    /// Max-Forwards one less, a Via of the DUT's on top with an RFC 3261 branch of its own, and
    /// the runner's Via below it unchanged. `nil` when it conforms.
    static func forwardingProblem(_ fwd: SIPMessage, sentBranch: String, sentMaxForwards: Int) -> String? {
        let mf = (try? fwd.maxForwards()) ?? nil
        guard mf == sentMaxForwards - 1 else {
            return "the forwarded \(fwd.method?.token ?? "request") has Max-Forwards \(mf.map(String.init) ?? "(none)"), \(sentMaxForwards - 1) expected (RFC 3261 §16.6 item 3: decremented by one)"
        }
        let b = branches(fwd)
        guard b.count >= 2, b[1] == sentBranch else {
            return "the forwarded \(fwd.method?.token ?? "request") does not carry the runner's Via under one of the DUT's (Vias: \(b)) (RFC 3261 §16.6 item 8)"
        }
        guard b[0].hasPrefix("z9hG4bK"), b[0] != sentBranch else {
            return "the DUT's Via branch \(b[0]) is not a new RFC 3261 branch (RFC 3261 §16.6 item 8: z9hG4bK, unique per forward)"
        }
        return nil
    }

    /// Checks a response relayed back to the caller: only the caller's Via is left (§16.7 item 3).
    static func relayProblem(_ r: SIPMessage, sentBranch: String) -> String? {
        let b = branches(r)
        guard b == [sentBranch] else {
            return "the \(r.statusCode ?? 0) relayed back has Vias \(b), only the runner's (\(sentBranch)) expected (RFC 3261 §16.7 item 3: the proxy removes its own)"
        }
        return nil
    }

    /// The final response to the runner's request `branch`/`method`, found by the runner's Via
    /// anywhere in it (a DUT that leaves its own Via on top is caught by ``relayProblem``).
    /// A response carrying one of `excluding` answers another request of the runner's (one it
    /// sent as a further hop) and is skipped.
    static func relayedFinal(_ s: ConformanceSession, branch: String, method: SIPMethod, excluding: Set<String> = []) async -> SIPMessage? {
        await s.waitFor(timeout: s.responseTimeout) { m in
            guard !m.isRequest, (m.statusCode ?? 0) >= 200, (try? m.cseq().method) == method else { return false }
            let b = branches(m)
            return b.contains(branch) && !b.contains(where: excluding.contains)
        }?.0
    }

    /// An INVITE through the DUT answered `code` by the callee: the forward and the relay checked.
    static func refusedCall(_ s: ConformanceSession, code: Int) async -> ScenarioOutcome {
        var call = ProxyCall(s)
        guard let (fwd, _, hop) = await call.inviteForwarded() else { return call.notForwarded }
        if let refused = await call.refuseIfMisforwarded(fwd, from: hop) { return refused }
        call.answer(fwd, from: hop, code: code)
        guard let final = await relayedFinal(s, branch: call.inviteBranch, method: .invite) else {
            return .failed("the callee's \(code) was not relayed back to the caller (RFC 3261 §16.7 item 10)")
        }
        call.ackFailure(final)
        guard final.statusCode == code else {
            return .failed("the caller got \(final.statusCode ?? 0) where the callee answered \(code) (RFC 3261 §16.7 items 6–10)")
        }
        if let problem = relayProblem(final, sentBranch: call.inviteBranch) { return .failed(problem) }
        // The DUT acknowledges the callee's final response itself (hop by hop, §17.1.1.3); the
        // rule checker judges that ACK (ack-non-2xx).
        _ = await call.forwarded(.ack, timeout: .seconds(1))
        return .passed
    }

    /// The `fork` test: the runner registers two contacts of its own for one address of record
    /// at the DUT (its username from the credentials, else `fork`, at the target's host), calls
    /// that address through the DUT, and unregisters the contacts afterwards, whatever the verdict.
    static func forking(_ s: ConformanceSession) async -> ScenarioOutcome {
        let user = s.credentials?.username ?? "fork"
        let aor = "sip:\(user)@\(s.targetURI.host)"
        var reg = RunnerRegistration(s)
        reg.addressOfRecord = aor
        let contacts = ["fork-a-" + s.token(), "fork-b-" + s.token()]
        do {
            let r = try await reg.register(contacts.map { reg.contact($0) }, expires: 120)
            guard let code = r.statusCode, (200...299).contains(code) else {
                return .inconclusive("the DUT refused to bind two contacts to \(aor) (\(r.statusCode ?? 0)): forking to registered contacts is not tested")
            }
        } catch RegistrarStop.inconclusive(let why) {
            return .inconclusive("\(why): forking needs two contacts registered at the DUT")
        } catch RegistrarStop.failed(let why) {
            return .inconclusive("registering two contacts at the DUT failed (\(why)): forking is not tested (the registrar suite judges registration)")
        } catch {
            return .inconclusive("registering two contacts at the DUT failed: \(error)")
        }
        let outcome = await forkedCall(s, aor: aor, user: user, contacts: Set(contacts))
        _ = try? await reg.register(contacts.map { reg.contact($0) }, expires: 0)
        return outcome
    }

    /// The call of the `fork` test, once `contacts` (users at the runner) are bound to `aor`.
    static func forkedCall(_ s: ConformanceSession, aor: String, user: String, contacts: Set<String>) async -> ScenarioOutcome {
        var call = ProxyCall(s)
        call.inviteBranch = s.branch()
        var d = call.draft("INVITE", branch: call.inviteBranch, uri: "sip:\(user)@\(s.target)\(s.uriTransport)")
        d.to = aor
        d.body = PlacedCall.offer(s)
        d.contentType = "application/sdp"
        s.send(d.text(s))
        // (Plain values rather than tuple patterns: Swift 6.3's optimizer crashed on this suite's closures with them.)
        guard let firstHit = await call.forwarded(.invite) else {
            if let f = await s.finalResponse(branch: call.inviteBranch, method: .invite, timeout: .milliseconds(300)) {
                call.ackFailure(f)
                return .inconclusive("the DUT answered the INVITE to \(aor) \(f.statusCode ?? 0) instead of forwarding it to the registered contacts")
            }
            return .failed("the DUT forwarded the INVITE to \(aor) to neither registered contact (RFC 3261 §16.5, §16.6)")
        }
        let first = firstHit.0, firstIndex = firstHit.1, firstHop = firstHit.2
        let firstBranch = branches(first).first ?? ""
        // A parallel fork sends the second branch at once (RFC 3261 §16.6: "in parallel").
        let secondHit = await s.waitFor(after: firstIndex + 1, timeout: .seconds(1)) { m in
            m.method == .invite && m.callID == call.callID && (branches(m).first ?? "") != firstBranch
        }
        guard let secondHit else {
            // One branch at a time (or one contact only): each refused, the search ends.
            call.answer(first, from: firstHop, code: 486, tag: s.token())
            var tried = 1
            if let next = await s.waitFor(after: firstIndex + 1, timeout: s.responseTimeout, { m in
                m.method == .invite && m.callID == call.callID && (branches(m).first ?? "") != firstBranch
            }) {
                tried += 1
                call.answer(next.0, from: s.entries[next.1].source ?? firstHop, code: 486, tag: s.token())
            }
            if let f = await relayedFinal(s, branch: call.inviteBranch, method: .invite) { call.ackFailure(f) }
            return .inconclusive(tried == 1 ? "the DUT forwarded the INVITE to one of the two registered contacts only (it does not fork)"
                                            : "the DUT tried the two registered contacts one after the other (sequential, not parallel forking)")
        }
        let second = secondHit.0, secondHop = s.entries[secondHit.1].source ?? firstHop
        let secondBranch = branches(second).first ?? ""
        let winnerTag = s.token(), loserTag = s.token()
        let winnerContact = first.requestURIText ?? call.calleeURI
        for fwd in [first, second] {
            if let problem = forwardingProblem(fwd, sentBranch: call.inviteBranch, sentMaxForwards: 70) {
                call.answer(first, from: firstHop, code: 500, tag: winnerTag)
                call.answer(second, from: secondHop, code: 500, tag: loserTag)
                if let f = await relayedFinal(s, branch: call.inviteBranch, method: .invite) { call.ackFailure(f) }
                return .failed(problem)
            }
        }
        let targets = Set([first, second].compactMap { m in ((try? m.requestURI().sipURI) ?? nil)?.user })
        // Both ring; the first answers.
        call.answer(first, from: firstHop, code: 180, tag: winnerTag, contact: winnerContact)
        call.answer(second, from: secondHop, code: 180, tag: loserTag, contact: second.requestURIText)
        await s.pause(.milliseconds(100))
        let mark = s.entries.count - 1
        call.answer(first, from: firstHop, code: 200, tag: winnerTag, contact: winnerContact)
        let cancelHit = await s.waitFor(after: mark, timeout: s.responseTimeout) { $0.method == .cancel && $0.callID == call.callID }
        if let cancelHit {
            call.answer(cancelHit.0, from: s.entries[cancelHit.1].source ?? secondHop, code: 200, tag: loserTag)
            call.answer(second, from: secondHop, code: 487, tag: loserTag)
        } else {
            call.answer(second, from: secondHop, code: 486, tag: loserTag)
        }
        let ok = await s.finalResponse(branch: call.inviteBranch, method: .invite)
        let okStatus: Int? = ok.flatMap { $0.statusCode }
        if let ok, okStatus == 200 {
            call.inDialog("ACK", branch: s.branch(), ok: ok)
            call.cseq += 1
            let byeBranch = s.branch()
            call.inDialog("BYE", branch: byeBranch, ok: ok)
            _ = await s.finalResponse(branch: byeBranch, method: .bye)
        } else if let ok {
            call.ackFailure(ok)
        }
        // Late responses (a 487 relayed after the 200) have had time to arrive.
        await s.pause(.milliseconds(300))
        let finals = s.entries.compactMap { e -> SIPMessage? in
            guard e.direction == .received, let m = e.message, !m.isRequest, (m.statusCode ?? 0) >= 200,
                  (try? m.cseq().method) == .invite, branches(m) == [call.inviteBranch] else { return nil }
            return m
        }
        guard targets == contacts else {
            return .failed("the DUT forked the INVITE to \(targets.sorted()), the registered contacts are \(contacts.sorted()) (RFC 3261 §16.5: the target set is the location service's contacts)")
        }
        guard let cancel = cancelHit?.0 else {
            return .failed("after the 200 of one branch the DUT did not CANCEL the other, still ringing (RFC 3261 §16.7 step 10: a final response forwarded, every pending client transaction is cancelled)")
        }
        guard branches(cancel).first == secondBranch, (try? cancel.cseq().sequence) == (try? second.cseq().sequence) else {
            return .failed("the CANCEL went on branch \(branches(cancel).first ?? "-"), the ringing branch is \(secondBranch) (RFC 3261 §9.1: same branch and CSeq number)")
        }
        guard okStatus == 200 else {
            return .failed("the caller got \(okStatus.map(String.init) ?? "no final response") where one branch answered 200 (RFC 3261 §16.7 step 5: a 2xx is forwarded at once)")
        }
        if let other = finals.first(where: { ($0.statusCode ?? 0) >= 300 }) {
            return .failed("the \(other.statusCode ?? 0) of the cancelled branch was relayed to the caller after the 200 (RFC 3261 §16.7 step 5: once a final response was sent only 2xx are forwarded)")
        }
        let tags = Set(finals.compactMap(\.toTag))
        guard tags == [winnerTag] else {
            return .failed("the caller got 2xx with To tags \(tags.sorted()), only the answering branch's \(winnerTag) was sent (RFC 3261 §16.7)")
        }
        return .passed
    }

    static let tests: [ConformanceTestCase] = [
        ConformanceTestCase(name: "forward-4xx", etsiPurpose: nil,
                            summary: "an INVITE is forwarded with Max-Forwards one less and a Via of the proxy's with a new branch; the callee's 486 comes back with the proxy's Via removed",
                            reference: "RFC 3261 §16.6 items 3, 8; §16.7 items 3, 10", purposeNote: unverified, role: .proxy) { s in
            await refusedCall(s, code: 486)
        },
        ConformanceTestCase(name: "forward-6xx", etsiPurpose: nil,
                            summary: "the callee's 603 Decline comes back to the caller (a 6xx ends the search and is forwarded)",
                            reference: "RFC 3261 §16.7 items 4, 6, 10", purposeNote: unverified, role: .proxy) { s in
            await refusedCall(s, code: 603)
        },
        ConformanceTestCase(name: "max-forwards-zero", etsiPurpose: nil,
                            summary: "an INVITE with Max-Forwards 0 is refused 483 Too Many Hops and not forwarded",
                            reference: "RFC 3261 §16.3 item 2", purposeNote: unverified, role: .proxy) { s in
            var call = ProxyCall(s)
            call.invite(maxForwards: 0)
            let final = await s.finalResponse(branch: call.inviteBranch, method: .invite)
            if let final { call.ackFailure(final) }
            if let (fwd, _, hop) = await call.forwarded(.invite, timeout: .milliseconds(300)) {
                call.answer(fwd, from: hop, code: 500)
                return .failed("the INVITE with Max-Forwards 0 was forwarded (RFC 3261 §16.3 item 2: 483 expected)")
            }
            guard let final else { return .failed("no final response to an INVITE with Max-Forwards 0 (RFC 3261 §16.3 item 2: 483 expected)") }
            guard final.statusCode == 483 else { return .failed("an INVITE with Max-Forwards 0 was answered \(final.statusCode ?? 0), 483 expected (RFC 3261 §16.3 item 2)") }
            return .passed
        },
        ConformanceTestCase(name: "record-route", etsiPurpose: nil,
                            summary: "a record-routing proxy puts its Record-Route in the forwarded INVITE and relays it in the 2xx; the ACK and BYE sent with that route reach the callee through it",
                            reference: "RFC 3261 §16.6 item 4, §16.12, §12.1.2", purposeNote: unverified, role: .proxy) { s in
            var call = ProxyCall(s)
            guard let (fwd, fwdIndex, hop) = await call.inviteForwarded() else { return call.notForwarded }
            if let refused = await call.refuseIfMisforwarded(fwd, from: hop) { return refused }
            let recordRouted = !fwd.valueBytes(.recordRoute).isEmpty
            call.answer(fwd, from: hop, code: 200)
            guard let ok = await s.finalResponse(branch: call.inviteBranch, method: .invite), ok.statusCode == 200 else {
                return .failed("the callee's 200 was not relayed back to the caller (RFC 3261 §16.7 item 10)")
            }
            if let problem = relayProblem(ok, sentBranch: call.inviteBranch) { return .failed(problem) }
            let rrIn = fwd.valueBytes(.recordRoute).map { String(decoding: $0, as: UTF8.self) }
            let rrOut = ok.valueBytes(.recordRoute).map { String(decoding: $0, as: UTF8.self) }
            call.inDialog("ACK", branch: s.branch(), ok: ok)
            let ack = await call.forwarded(.ack, after: fwdIndex + 1)
            call.cseq += 1
            let byeBranch = s.branch()
            call.inDialog("BYE", branch: byeBranch, ok: ok)
            // The session answers the forwarded BYE 200 by itself (the callee's part).
            let bye = await call.forwarded(.bye, after: fwdIndex + 1)
            let byeFinal = await s.finalResponse(branch: byeBranch, method: .bye)
            guard recordRouted else {
                return .inconclusive("the DUT does not record-route (no Record-Route in the forwarded INVITE; RFC 3261 §16.6 item 4 leaves it to the proxy), so in-dialog routing through it is not tested")
            }
            guard rrOut == rrIn else {
                return .failed("the 2xx relayed back carries Record-Route \(rrOut), the callee sent \(rrIn) (RFC 3261 §16.7 item 9 leaves it unchanged here)")
            }
            guard let (ackMessage, _, _) = ack else {
                return .failed("the ACK sent with Route \(rrIn.reversed()) did not reach the callee through the DUT (RFC 3261 §16.12, §16.4)")
            }
            guard branches(ackMessage).count >= 2 else { return .failed("the ACK reached the callee without the DUT's Via (RFC 3261 §16.6 item 8)") }
            guard let (byeMessage, _, _) = bye else {
                return .failed("the BYE sent with Route \(rrIn.reversed()) did not reach the callee through the DUT (RFC 3261 §16.12, §16.4)")
            }
            if let problem = forwardingProblem(byeMessage, sentBranch: byeBranch, sentMaxForwards: 70) { return .failed(problem) }
            guard let byeFinal, byeFinal.statusCode == 200 else { return .failed("the callee's 200 to BYE was not relayed back (RFC 3261 §16.7)") }
            if let problem = relayProblem(byeFinal, sentBranch: byeBranch) { return .failed(problem) }
            return .passed
        },
        ConformanceTestCase(name: "loop", etsiPurpose: nil,
                            summary: "an INVITE the DUT forwarded, sent back to it unchanged (same Request-URI, its own Via inside), is refused 482 Loop Detected; forwarded again: inconclusive (loop detection is a MAY, Max-Forwards bounds loops)",
                            reference: "RFC 3261 §16.3 item 4; RFC 5393 §4.2", purposeNote: unverified, role: .proxy) { s in
            var call = ProxyCall(s)
            // (No tuple pattern in the binding: Swift 6.3's optimizer crashes on this closure with one.)
            guard let forwarded = await call.inviteForwarded() else { return call.notForwarded }
            let fwd = forwarded.0, fwdIndex = forwarded.1, hop = forwarded.2
            // The runner, as the next proxy (a 100 first, §16.2), routes the request back to the
            // DUT: its Via on top, Max-Forwards one less, the Request-URI unchanged.
            call.answer(fwd, from: hop, code: 100)
            let loopBranch = s.branch()
            var looped = fwd
            try? looped.prepend(.via, "SIP/2.0/\(s.viaTransport) \(s.hostPort);branch=\(loopBranch);rport")
            try? looped.set(.maxForwards, String((((try? fwd.maxForwards()) ?? nil) ?? 70) - 1))
            s.send(looped)
            // The DUT's final response to the looped request, or its forwarding it once more.
            let first = await s.waitFor(after: fwdIndex + 1, timeout: s.responseTimeout) { m in
                if m.isRequest { return m.method == .invite && m.callID == call.callID && branches(m).contains(loopBranch) }
                return (m.statusCode ?? 0) >= 200 && m.topViaBranch == loopBranch && (try? m.cseq().method) == .invite
            }
            var loopFinal: SIPMessage?
            var forwardedAgain = false
            if let hit = first {
                let m = hit.0, i = hit.1
                if m.isRequest {
                    // Forwarded again: the callee refuses it, and the refusal comes back to the loop hop.
                    forwardedAgain = true
                    call.answer(m, from: s.entries[i].source ?? hop, code: 486)
                    loopFinal = await s.finalResponse(branch: loopBranch, method: .invite)
                } else {
                    loopFinal = m
                }
            }
            // Plain values from here on (Swift 6.3's optimizer crashed on this closure's further
            // uses of the optional message).
            let loopStatus: Int? = loopFinal.flatMap { $0.statusCode }
            let loopToTag: String? = loopFinal.flatMap { $0.toTag }
            // Unwind: each hop's final response ACKed, the first forward answered as the loop hop was.
            if loopStatus != nil { s.send(call.draft("ACK", branch: loopBranch, toTag: loopToTag).text(s)) }
            call.answer(fwd, from: hop, code: loopStatus.flatMap { $0 >= 300 ? $0 : nil } ?? 500)
            if let f = await relayedFinal(s, branch: call.inviteBranch, method: .invite, excluding: [loopBranch]) { call.ackFailure(f) }
            if loopStatus == 482 && !forwardedAgain { return .passed }
            if forwardedAgain {
                return .inconclusive("the DUT forwarded the looped INVITE again (it does not detect loops; RFC 3261 §16.3 item 4 makes detection a MAY and Max-Forwards bounds the loop)")
            }
            return .failed("the looped INVITE got \(loopStatus.map(String.init) ?? "no final response") and was not forwarded again (RFC 3261 §16.3 item 4: 482 expected when a loop is detected)")
        },
        ConformanceTestCase(name: "cancel", etsiPurpose: nil,
                            summary: "a CANCEL after the callee's 180 is answered 200 by the proxy and sent on to the callee on the forwarded INVITE's branch; the callee's 487 comes back",
                            reference: "RFC 3261 §16.10, §9.1", purposeNote: unverified, role: .proxy) { s in
            var call = ProxyCall(s)
            // (Plain values rather than tuple patterns and optional chains on messages: Swift
            // 6.3's optimizer crashed on this closure with them.)
            guard let forwarded = await call.inviteForwarded() else { return call.notForwarded }
            let fwd = forwarded.0, fwdIndex = forwarded.1, hop = forwarded.2
            call.answer(fwd, from: hop, code: 180)
            guard await s.response(branch: call.inviteBranch, method: .invite, { $0 == 180 }) != nil else {
                call.answer(fwd, from: hop, code: 500)
                if let f = await s.finalResponse(branch: call.inviteBranch, method: .invite) { call.ackFailure(f) }
                return .failed("the callee's 180 was not relayed back (RFC 3261 §16.7 item 5)")
            }
            var cancel = call.draft("CANCEL", branch: call.inviteBranch)
            cancel.extra = []
            s.send(cancel.text(s))
            let cancelStatus: Int? = await s.finalResponse(branch: call.inviteBranch, method: .cancel).flatMap { $0.statusCode }
            let forwardedCancel = await call.forwarded(.cancel, after: fwdIndex + 1)
            if let fc = forwardedCancel { call.answer(fc.0, from: fc.2, code: 200) }
            call.answer(fwd, from: hop, code: 487)
            let final = await s.finalResponse(branch: call.inviteBranch, method: .invite)
            if let final { call.ackFailure(final) }
            let finalStatus: Int? = final.flatMap { $0.statusCode }
            guard cancelStatus == 200 else {
                return .failed("the CANCEL was answered \(cancelStatus.map(String.init) ?? "nothing"), 200 expected from the proxy (RFC 3261 §16.10)")
            }
            guard let fc = forwardedCancel else {
                return .failed("the CANCEL was not sent on to the callee (RFC 3261 §16.10: the proxy cancels its pending client transactions)")
            }
            let c = fc.0
            guard branches(c).first == branches(fwd).first, (try? c.cseq().sequence) == (try? fwd.cseq().sequence) else {
                return .failed("the CANCEL sent on has Via branch \(branches(c).first ?? "-"), the forwarded INVITE's is \(branches(fwd).first ?? "-") (RFC 3261 §9.1: same branch and CSeq number)")
            }
            guard let finalStatus else { return .failed("the callee's 487 was not relayed back (RFC 3261 §16.7)") }
            guard finalStatus == 487 else { return .failed("the caller got \(finalStatus) for the cancelled INVITE, 487 expected") }
            _ = await call.forwarded(.ack, timeout: .seconds(1))
            return .passed
        },
        ConformanceTestCase(name: "fork", etsiPurpose: nil,
                            summary: "two contacts of the runner are registered for one address of record at the DUT (with the run's credentials); an INVITE to it is forked to both in parallel, both ring, one answers 200: the DUT CANCELs the other branch on its INVITE's branch, relays exactly one 2xx, and does not relay the cancelled branch's 487. Not registered, or not forked in parallel: inconclusive",
                            reference: "RFC 3261 §16.5, §16.6, §16.7 steps 5 and 10, §9.1", purposeNote: unverified, role: .proxy) { s in
            await forking(s)
        },
    ]
}
