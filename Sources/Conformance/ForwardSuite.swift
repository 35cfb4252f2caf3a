import SIPMessage

/// The `forward` suite (the DUT calls the runner, which redirects it: RFC 3261 §8.1.3.4) and
/// the `forward-uas` suite (the runner calls the DUT, which forwards the call with a 3xx:
/// RFC 3261 §21.3, RFC 5806 Diversion, RFC 7044 History-Info).
enum ForwardSuite {
    static let note = "no ETSI TS 102 027-2 identifier: RFC 3261 §8.1.3.4 and §21.3 are in that document's scope, but no purpose text for a UA recursing on a 3xx or sending one was found to confirm a match"

    /// The DUT's new INVITE (a new transaction, not a copy of `original`) to `user` at the
    /// runner, received after message `after`.
    static func retry(_ s: ConformanceSession, original: ReceivedCall, after: Int, timeout: Duration,
                      _ accepts: @escaping (String) -> Bool) async -> ReceivedCall? {
        guard let (m, i) = await s.waitFor(after: after, timeout: timeout, { m in
            m.method == .invite && m.toTag == nil && m.topViaBranch != original.branch && accepts(m.requestURIText ?? "")
        }) else { return nil }
        return ReceivedCall(session: s, invite: m, index: i, source: s.entries[i].source ?? s.target, toTag: s.token(), time: s.entries[i].time)
    }

    /// Why a retry is not a proper new request for the redirected INVITE, or nil.
    static func retryProblem(_ retry: ReceivedCall, of original: ReceivedCall) -> String? {
        if retry.branch == original.branch {
            return "the retry reuses the redirected INVITE's branch (it is a new transaction, RFC 3261 §8.1.3.4, §8.1.1.7)"
        }
        let a = try? original.invite.cseq().sequence, b = try? retry.invite.cseq().sequence
        if retry.callID == original.callID, retry.invite.fromTag == original.invite.fromTag, let a, let b, b <= a {
            return "the retry keeps the Call-ID and From tag with CSeq \(b), not above the redirected INVITE's \(a) (a UAS would take it for a merged request, RFC 3261 §8.2.2.2)"
        }
        return nil
    }

    /// The DUT's call redirected with a 302 listing `contacts` (user, q) at the runner: it must
    /// ACK the 302, then call the targets, each once (RFC 3261 §8.1.3.4: MUST NOT add a URI to
    /// the target set twice); each but the last is answered 486 (after which the DUT SHOULD try
    /// the next), the last 200, and that call is ended. Another order than `order` (highest q
    /// first) is inconclusive: §8.1.3.4 lets a client try the targets in any order (MAY), q
    /// order being "a common mechanism", not a requirement.
    static func redirected(_ s: ConformanceSession, contacts: [(String, Double?)], order: [String]) async -> ScenarioOutcome {
        guard let call = await ReceivedCall.next(s) else { return .failed("no INVITE from the DUT within \(s.responseTimeout)") }
        // The retries: to the Contacts given, under the same Call-ID or a new one (RFC 3261 §8.1.3.4).
        for (u, _) in contacts { s.expect(requestUser: u) }
        if let tag = call.invite.fromTag { s.expect(fromTag: tag) }
        let mark = s.entries.count - 1
        call.send(call.response(100))
        let list = contacts.map { (u, q) in (SIPHeaderName.contact, "<sip:\(u)@\(s.hostPort)>" + (q.map { ";q=\($0)" } ?? "")) }
        guard await call.sendUntilAcknowledged(call.response(302, extra: list)) != nil else { return .failed("the DUT never acknowledged the 302") }
        var after = mark
        var called: [String] = []
        for k in order.indices {
            let last = k == order.count - 1
            guard let next = await retry(s, original: call, after: after, timeout: s.responseTimeout, { uri in
                contacts.contains { uri.hasPrefix("sip:\($0.0)@") }
            }) else {
                if k == 0 { return .inconclusive("the DUT did not call the 302's Contact (RFC 3261 §8.1.3.4 leaves recursion to the UAC)") }
                return .inconclusive("after the 486 from \(called[k - 1]) the DUT did not try the next Contact (RFC 3261 §8.1.3.4: it SHOULD)")
            }
            after = next.index + 1
            let user = contacts.map(\.0).first { next.invite.requestURIText?.hasPrefix("sip:\($0)@") == true } ?? ""
            if called.contains(user) {
                next.send(next.response(486))
                return .failed("the DUT called \(user) a second time: a client recursing on 3xx MUST NOT add a URI to the target set more than once (RFC 3261 §8.1.3.4)")
            }
            called.append(user)
            if let why = retryProblem(next, of: call) { next.send(next.response(486)); return .failed(why) }
            if !last {
                next.send(next.response(100))
                guard await next.sendUntilAcknowledged(next.response(486)) != nil else { return .failed("the DUT never acknowledged the 486 from \(user)") }
                continue
            }
            next.send(next.response(180))
            guard await next.sendUntilAcknowledged(next.response(200, answer: true)) != nil else { return .failed("the DUT never acknowledged the 200 from \(user)") }
            if await next.bye(timeout: s.responseTimeout + .seconds(2)) == nil { _ = await TransferSuite.hangUp(next) }
        }
        if called != order {
            return .inconclusive("the DUT tried the Contacts in the order \(called.joined(separator: ", ")), not highest q first (\(order.joined(separator: ", "))): RFC 3261 §8.1.3.4 lets a client try them in any order (MAY); q order is a common mechanism, not a requirement")
        }
        return .passed
    }

    /// The DUT's call redirected with a 302 that must stop it: no Contact, or a Contact
    /// pointing back at the URI it called. It ACKs the 302 and sends no new INVITE there.
    static func stops(_ s: ConformanceSession, loop: Bool) async -> ScenarioOutcome {
        guard let call = await ReceivedCall.next(s) else { return .failed("no INVITE from the DUT within \(s.responseTimeout)") }
        let uri = call.invite.requestURIText ?? s.targetURI.description
        // A retry is recognised by its Call-ID (the listener hands this test every message of
        // that call) or, under a new Call-ID (RFC 3261 §8.1.3.4: the UAC MAY update it), by
        // the redirected INVITE's From tag; any other new call is the DUT's next, held for the next test.
        let tag = call.invite.fromTag
        if let tag { s.expect(fromTag: tag) }
        let mark = s.entries.count - 1
        call.send(call.response(100))
        let extra: [(SIPHeaderName, String)] = loop ? [(.contact, "<\(uri)>")] : []
        guard await call.sendUntilAcknowledged(call.response(302, extra: extra)) != nil else { return .failed("the DUT never acknowledged the 302") }
        let again = await retry(s, original: call, after: mark, timeout: .milliseconds(1500)) { loop ? $0 == uri : true }
            .flatMap { $0.callID == call.callID || (tag != nil && $0.invite.fromTag == tag) ? $0 : nil }
        guard let again else { return .passed }
        again.send(again.response(100))
        _ = await again.sendUntilAcknowledged(again.response(486))
        if loop {
            return .failed("after a 302 pointing back at \(uri) the DUT called \(uri) again: a target already tried is a redirect loop (RFC 3261 §8.1.3.4)")
        }
        return .failed("after a 302 without Contact the DUT sent a new INVITE to \(again.invite.requestURIText ?? "?"): the 3xx names no target (RFC 3261 §8.1.3.4, §21.3)")
    }

    /// `forward`: the DUT calls the runner (listening at TARGET), which redirects it.
    static let uacTests: [ConformanceTestCase] = [
        ConformanceTestCase(name: "redirect-one-target", etsiPurpose: nil,
                            summary: "the DUT's INVITE gets 302 with one Contact at the runner: the 302 is ACKed on the INVITE's branch, and a new INVITE (new branch; the same Call-ID with a higher CSeq, as recommended, or a new Call-ID, as allowed) goes to the Contact, answered 200",
                            reference: "RFC 3261 §8.1.3.4, §17.1.1.3", purposeNote: note, role: .uas) { s in
            let one = "moved-" + s.token()
            return await redirected(s, contacts: [(one, nil)], order: [one])
        },
        ConformanceTestCase(name: "redirect-q-order", etsiPurpose: nil,
                            summary: "302 listing a q=0.3 Contact before a q=0.9 one: the DUT calls each once, the first answered 486, the second 200; passes when the q=0.9 target came first, inconclusive in the other order (any order is allowed), fails when a target is called twice",
                            reference: "RFC 3261 §8.1.3.4, §20.10", purposeNote: note, role: .uas) { s in
            let low = "low-" + s.token(), high = "high-" + s.token()
            return await redirected(s, contacts: [(low, 0.3), (high, 0.9)], order: [high, low])
        },
        ConformanceTestCase(name: "redirect-no-contact", etsiPurpose: nil,
                            summary: "302 without Contact: the DUT ACKs it and gives up (no new INVITE within 1.5 s)",
                            reference: "RFC 3261 §8.1.3.4, §21.3, §17.1.1.3", purposeNote: note, role: .uas) { s in
            await stops(s, loop: false)
        },
        ConformanceTestCase(name: "redirect-loop", etsiPurpose: nil,
                            summary: "302 whose Contact is the URI the DUT just called: the DUT ACKs it and does not call that URI again within 1.5 s",
                            reference: "RFC 3261 §8.1.3.4", purposeNote: note, role: .uas) { s in
            await stops(s, loop: true)
        },
    ]

    /// What is wrong with the history a 3xx carries (Diversion, History-Info), or nil.
    static func historyProblem(_ m: SIPMessage) -> String? {
        if !m.values(.diversion).isEmpty {
            do throws(SIPParseError) { _ = try m.diversion() } catch {
                return "its Diversion does not parse (RFC 5806 §3; byte \(error.offset): \(error.detail))"
            }
        }
        for entry in m.elements(SIPHeaderName(.historyInfo)) {
            guard let a = try? NameAddress(entry) else { return "its History-Info entry \(entry) does not parse (RFC 7044 §9)" }
            if (a.parameters["index"] ?? nil) == nil { return "its History-Info entry \(entry) has no index (RFC 7044 §9: hi-index is mandatory)" }
        }
        return nil
    }

    /// `forward-uas`: the runner calls the DUT, which is set to forward.
    static let uasTests: [ConformanceTestCase] = [
        ConformanceTestCase(name: "forwards-with-contact", etsiPurpose: nil,
                            summary: "an INVITE to a DUT set to forward is answered 3xx naming the new target(s) in Contact (the checker's contact-in-3xx), ACKed; a Diversion or History-Info it adds must parse (History-Info entries with an index)",
                            reference: "RFC 3261 §21.3, §8.1.3.4; RFC 5806 §3; RFC 7044 §9", purposeNote: note, role: .uac) { s in
            var call = PlacedCall(s)
            guard let final = await call.establish() else { return .failed("no final response to the INVITE") }
            let code = final.statusCode ?? 0
            if (200...299).contains(code) {
                _ = await call.hangUp()
                return .inconclusive("the DUT answered the call (\(code)) instead of forwarding it: set it to forward")
            }
            guard (300...399).contains(code) else { return .inconclusive("the DUT refused the call with \(code) instead of forwarding it") }
            if let why = historyProblem(final) { return .failed("the \(code) carries history, but \(why)") }
            return .passed   // the rule checker judges the Contact
        },
    ]
}
