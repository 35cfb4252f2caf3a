import SIPMessage

extension PlacedCall {
    /// Places a call to the DUT and waits for its 2xx: the established call and that 2xx, or
    /// nil when the DUT answered otherwise or not at all (a test that needs the dialog is then
    /// inconclusive, saying what for).
    static func established(_ s: ConformanceSession) async -> (PlacedCall, SIPMessage)? {
        var call = PlacedCall(s)
        guard let final = await call.establish(), (200...299).contains(final.statusCode ?? 0) else { return nil }
        return (call, final)
    }

    /// Ends a call whose INVITE has no final response yet, whatever state it reached: CANCELs
    /// it first when `cancel`, waits for the INVITE's final response, ACKs it and hangs up a 2xx.
    mutating func wrapUp(cancel: Bool) async {
        if cancel { self.cancel() }
        guard let final = await session.finalResponse(branch: inviteBranch, method: .invite) else { return }
        if (200...299).contains(final.statusCode ?? 0) {
            remoteTag = final.toTag
            ack2xx(final)
            _ = await hangUp()
        } else {
            ackFailure(final)
        }
    }

    /// ACKs the final response `final` to the call's INVITE and hangs up when it was a 2xx.
    mutating func close(_ final: SIPMessage) async {
        if (200...299).contains(final.statusCode ?? 0) {
            remoteTag = final.toTag
            ack2xx(final)
            _ = await hangUp()
        } else {
            ackFailure(final)
        }
    }
}

extension SIPMessage {
    /// The option tags of Require, lowercased.
    var requiredTags: [String] { ((try? require()) ?? []).map { $0.lowercased() } }
}

extension ConformanceSuites {
    /// Why the tests of RFC 3262, 3311 and 4028 carry no ETSI identifier.
    static let outOfETSIScope = "no ETSI TS 102 027-2 identifier: that document's purposes cover RFC 3261 (its scope); this extension (RFC 3262, 3311 or 4028) is outside it"

    /// The `uas` suite's tests of the INVITE extensions and of overlapping requests: §14.2's 500,
    /// RFC 3311's 491 and UPDATE, RFC 3262's reliable provisionals, RFC 4028's session timers,
    /// RFC 3261 §8.2.2.3's 420. A DUT without an optional extension makes its test inconclusive.
    static let uasExtensions: [ConformanceTestCase] = [
        ConformanceTestCase(name: "reinvite-while-pending", etsiPurpose: nil,
                            summary: "a second INVITE in the early dialog (after a 1xx with a To tag), sent before the first INVITE has its final response, is answered 500 with Retry-After 0-10 s; the first INVITE then completes",
                            reference: "RFC 3261 §14.2 (\"A UAS that receives a second INVITE before it sends the final response to a first INVITE with a lower CSeq sequence number on the same dialog MUST return a 500 (Server Internal Error) response to the second INVITE and MUST include a Retry-After header field with a randomly chosen value of between 0 and 10 seconds\")",
                            purposeNote: unverified, role: .uac) { s in
            var call = PlacedCall(s)
            call.invite()
            guard let early = await s.response(branch: call.inviteBranch, method: .invite, { (101...699).contains($0) }) else {
                await call.wrapUp(cancel: true)
                return .failed("no response other than 100 to the INVITE")
            }
            let code = early.statusCode ?? 0
            if code >= 200 {
                await call.close(early)
                return .inconclusive("the DUT answered \(code) at once (no early dialog), so no second INVITE could be sent while the first was pending")
            }
            guard let tag = early.toTag else {
                await call.wrapUp(cancel: true)
                return .inconclusive("the \(code) carries no To tag: there is no early dialog to send a second INVITE in")
            }
            call.remoteTag = tag
            let first = call.inviteBranch
            let b = call.request("INVITE", body: PlacedCall.offer(s, port: 49172, version: 2))
            // Each final response is ACKed as it comes (the first INVITE's 2xx must not wait for
            // the second's answer: its retransmissions are judged up to our ACK).
            var second: (SIPMessage, Int)?, firstFinal: (SIPMessage, Int)?
            var after = 0
            for _ in 0..<6 where second == nil || firstFinal == nil {
                guard let hit = await s.waitFor(after: after, timeout: s.responseTimeout, { m in
                    !m.isRequest && (m.statusCode ?? 0) >= 200 && (try? m.cseq().method) == .invite && (m.topViaBranch == b || m.topViaBranch == first)
                }) else { break }
                after = hit.1 + 1
                if hit.0.topViaBranch == b {
                    if second == nil { second = hit; call.acknowledge(hit.0, branch: b) }
                } else if firstFinal == nil {
                    firstFinal = hit
                    call.acknowledge(hit.0, branch: first)
                }
            }
            if let firstFinal {
                if (200...299).contains(firstFinal.0.statusCode ?? 0) { _ = await call.hangUp() }
            } else {
                await call.wrapUp(cancel: true)
            }
            guard let (r, at) = second.map({ ($0.0, $0.1) }) else { return .failed("no final response to the second INVITE") }
            if r.statusCode == 500 {
                guard let after = try? r.retryAfter() else { return .failed("the 500 to the second INVITE has no Retry-After (RFC 3261 §14.2)") }
                return after.seconds <= 10 ? .passed : .failed("the 500's Retry-After is \(after.seconds) s; 0 to 10 was due (RFC 3261 §14.2)")
            }
            if let firstFinal, firstFinal.1 < at {
                return .inconclusive("the first INVITE was answered \(firstFinal.0.statusCode ?? 0) before the second got its \(r.statusCode ?? 0): it may no longer have been pending")
            }
            return .failed("the second INVITE, sent while the first had no final response, was answered \(r.statusCode ?? 0); 500 with Retry-After was due")
        },
        ConformanceTestCase(name: "update-glare-491", etsiPurpose: nil,
                            summary: "a re-INVITE without an offer gets a 2xx carrying the DUT's offer; an UPDATE with an offer of ours, sent as if it crossed that 2xx (before the ACK with the answer), is answered 491",
                            reference: "RFC 3311 §5.2 (\"If an UPDATE is received that contains an offer, and the UAS has generated an offer (in an UPDATE, PRACK or INVITE) to which it has not yet received an answer, the UAS MUST reject the UPDATE with a 491 response\"); RFC 3261 §14.2, §13.3.1",
                            purposeNote: outOfETSIScope, role: .uac) { s in
            guard var (call, final) = await PlacedCall.established(s) else { return .inconclusive("the call was not established, so there is no dialog to re-INVITE") }
            let b = call.request("INVITE")
            guard let r = await s.finalResponse(branch: b, method: .invite) else {
                _ = await call.hangUp()
                return .failed("no final response to the re-INVITE without an offer")
            }
            guard (200...299).contains(r.statusCode ?? 0) else {
                call.ackFailure(r, branch: b)
                _ = await call.hangUp()
                return .inconclusive("the re-INVITE without an offer was refused \(r.statusCode ?? 0)")
            }
            guard let answer = ReceivedCall.answer(s, to: r, version: 2) else {
                call.ack2xx(r)
                _ = await call.hangUp()
                return .failed("the 2xx to a re-INVITE without an offer carries no SDP offer (RFC 3261 §14.2, §13.3.1: the offer goes in the 2xx)")
            }
            let u = call.request("UPDATE", body: PlacedCall.offer(s, port: 49174, version: 3))
            let ur = await s.finalResponse(branch: u, method: .update)
            call.ack2xx(r, body: answer)
            _ = await call.hangUp()
            guard let ur else { return .failed("no final response to the UPDATE") }
            switch ur.statusCode ?? 0 {
            case 491: return .passed
            case 405, 501: return .inconclusive("the DUT does not support UPDATE (\(ur.statusCode ?? 0))")
            case 200...299: return .failed("the UPDATE's offer was accepted while the DUT's own offer (in its 2xx to the re-INVITE) had no answer; 491 was due (RFC 3311 §5.2)")
            case let c: return .failed("the UPDATE crossing the DUT's offer was answered \(c); 491 was due (RFC 3311 §5.2)")
            }
        },
        ConformanceTestCase(name: "100rel-prack", etsiPurpose: nil,
                            summary: "an INVITE with Require: 100rel gets a reliable 18x (Require: 100rel, RSeq) retransmitted while no PRACK comes (or, when the 18x had no SDP, the final response before the PRACK); the PRACK is answered 2xx and the INVITE completes. 420 with Unsupported: 100rel: inconclusive",
                            reference: "RFC 3262 §3 (\"the UAS MUST send any non-100 provisional response reliably\" when the request's Require lists 100rel; a reliable provisional carries Require: 100rel and RSeq and is retransmitted at T1, doubling, until its PRACK), §4, §7.1; RFC 3261 §8.2.2.3",
                            purposeNote: outOfETSIScope, role: .uac) { s in
            var call = PlacedCall(s)
            call.invite(headers: ["Supported: 100rel", "Require: 100rel"])
            let branch = call.inviteBranch
            guard let (first, index) = await s.waitFor(timeout: s.responseTimeout, { m in
                !m.isRequest && (101...699).contains(m.statusCode ?? 0) && m.topViaBranch == branch && (try? m.cseq().method) == .invite
            }) else {
                await call.wrapUp(cancel: true)
                return .failed("no response other than 100 to the INVITE")
            }
            let code = first.statusCode ?? 0
            switch code {
            case 420:
                call.ackFailure(first)
                let unsupported = ((try? first.unsupported()) ?? []).map { $0.lowercased() }
                return unsupported.contains("100rel") ? .inconclusive("the DUT does not support 100rel (420 with Unsupported: 100rel)")
                    : .failed("420 without Unsupported: 100rel (RFC 3261 §8.2.2.3)")
            case 200...299:
                await call.close(first)
                return .inconclusive("the DUT answered \(code) at once: no provisional response to send reliably")
            case 300...:
                call.ackFailure(first)
                return .failed("the INVITE requiring 100rel was refused \(code)")
            default:
                break
            }
            guard first.requiredTags.contains("100rel"), let rseq = try? first.rseq() else {
                await call.wrapUp(cancel: true)
                return .failed("the \(code) to an INVITE requiring 100rel is not sent reliably (it needs Require: 100rel and RSeq, RFC 3262 §3)")
            }
            call.remoteTag = first.toTag
            // No PRACK yet: the 18x must come again (T1 = 0.5 s after it, RFC 3262 §3), unless the
            // final response comes first (allowed before the PRACK when the 18x had no SDP).
            let next = await s.waitFor(after: index + 1, timeout: .milliseconds(1500)) { m in
                !m.isRequest && m.topViaBranch == branch && (try? m.cseq().method) == .invite
                    && ((m.statusCode ?? 0) >= 200 || (m.statusCode == code && (try? m.rseq()) == rseq))
            }?.0
            let finalFirst = (next?.statusCode ?? 0) >= 200
            let p = call.request("PRACK", headers: ["RAck: \(rseq) \(call.inviteCSeq) INVITE"])
            let prack = await s.finalResponse(branch: p, method: .prack)
            let final = await s.finalResponse(branch: call.inviteBranch, method: .invite)
            if let final { await call.close(final) } else { await call.wrapUp(cancel: true) }
            guard let next else { return .failed("the reliable \(code) was not retransmitted within 1.5 s while no PRACK came (RFC 3262 §3: T1, doubling)") }
            if finalFirst {
                // §3: a 2xx may not precede the PRACK of a reliable provisional that carried SDP.
                if !first.body.isEmpty, (200...299).contains(next.statusCode ?? 0) {
                    return .failed("the \(next.statusCode ?? 0) came before the PRACK of the reliable \(code), which carried a session description (RFC 3262 §3)")
                }
                guard (200...299).contains(next.statusCode ?? 0) else { return .failed("the INVITE ended with \(next.statusCode ?? 0)") }
                // The PRACK crossing the final response is not judged: the early dialog is over.
                return .passed
            }
            guard let prack else { return .failed("no final response to the PRACK") }
            guard (200...299).contains(prack.statusCode ?? 0) else { return .failed("the PRACK was answered \(prack.statusCode ?? 0); 2xx was due (RFC 3262 §3)") }
            guard let final else { return .failed("no final response to the INVITE after its PRACK") }
            guard (200...299).contains(final.statusCode ?? 0) else { return .failed("the INVITE ended with \(final.statusCode ?? 0) after its PRACK") }
            return .passed
        },
        ConformanceTestCase(name: "require-unknown-extension", etsiPurpose: nil,
                            summary: "an INVITE whose Require lists an option tag no one defines is answered 420 with that tag in Unsupported",
                            reference: "RFC 3261 §8.2.2.3 (\"If a UAS does not understand an option tag listed in a Require header field, it MUST respond by generating a response with status code 420 (Bad Extension). The UAS MUST add an Unsupported header field, and list in it those options it does not understand amongst those in the Require header field of the request\")",
                            purposeNote: unverified, role: .uac) { s in
            var call = PlacedCall(s)
            let tag = "x-conform-" + s.token()
            call.invite(headers: ["Require: \(tag)"])
            guard let r = await s.response(branch: call.inviteBranch, method: .invite, { (101...699).contains($0) }) else {
                await call.wrapUp(cancel: true)
                return .failed("no response other than 100 to the INVITE")
            }
            let code = r.statusCode ?? 0
            if code < 200 {
                await call.wrapUp(cancel: true)
                return .failed("the INVITE requiring an unknown extension got a \(code); 420 was due")
            }
            await call.close(r)
            guard code == 420 else { return .failed("the INVITE requiring an unknown extension was answered \(code); 420 was due") }
            let unsupported = ((try? r.unsupported()) ?? []).map { $0.lowercased() }
            return unsupported.contains(tag) ? .passed : .failed("the 420 does not list \(tag) in Unsupported")
        },
        ConformanceTestCase(name: "session-timer-too-small", etsiPurpose: nil,
                            summary: "an INVITE with Supported: timer and Session-Expires: 30 (below the 90 s floor) is answered 422 with a Min-SE above 30; the INVITE retried with Session-Expires and Min-SE at that value (same Call-ID, next CSeq) is answered 2xx. 2xx without Session-Expires: inconclusive",
                            reference: "RFC 4028 §9 (a UAS whose minimum exceeds the request's Session-Expires rejects it with 422), §6 (the 422 carries Min-SE), §5 (Min-SE is never below 90 s), §7.4",
                            purposeNote: outOfETSIScope, role: .uac) { s in
            var call = PlacedCall(s)
            call.invite(headers: ["Supported: timer", "Session-Expires: 30"])
            guard let r = await s.finalResponse(branch: call.inviteBranch, method: .invite) else {
                await call.wrapUp(cancel: true)
                return .failed("no final response to the INVITE")
            }
            let code = r.statusCode ?? 0
            await call.close(r)
            if (200...299).contains(code) {
                if let se = try? r.sessionExpires() {
                    return .failed("the DUT runs a session timer (Session-Expires \(se) in its \(code)) yet accepted Session-Expires 30, below the 90 s floor: 422 was due (RFC 4028 §9, §5)")
                }
                return .inconclusive("the DUT does not run session timers (its \(code) has no Session-Expires)")
            }
            guard code == 422 else { return .failed("the INVITE with Session-Expires 30 was answered \(code); 422 with Min-SE was due") }
            guard let minimum = try? r.minSE(), minimum > 30 else { return .failed("the 422 carries no Min-SE above the request's 30 s (RFC 4028 §6)") }
            call.cseq += 1
            call.invite(headers: ["Supported: timer", "Session-Expires: \(minimum)", "Min-SE: \(minimum)"])
            guard let retry = await s.finalResponse(branch: call.inviteBranch, method: .invite) else {
                await call.wrapUp(cancel: true)
                return .failed("no final response to the INVITE retried with Session-Expires \(minimum)")
            }
            await call.close(retry)
            guard (200...299).contains(retry.statusCode ?? 0) else {
                return .failed("the INVITE retried with Session-Expires at the 422's Min-SE (\(minimum)) was answered \(retry.statusCode ?? 0)")
            }
            return .passed   // the rule checker judges the 2xx's Session-Expires
        },
        ConformanceTestCase(name: "session-timer-refresher", etsiPurpose: nil,
                            summary: "an INVITE with Supported: timer and Session-Expires: 1800 gets a 2xx echoing Session-Expires (90…1800 s) with refresher uac or uas (uac with Require: timer). No Session-Expires: inconclusive",
                            reference: "RFC 4028 §9 (the UAS may lower the interval, not below Min-SE, and must say in the refresher parameter who refreshes; Require: timer when that is the UAC)",
                            purposeNote: outOfETSIScope, role: .uac) { s in
            var call = PlacedCall(s)
            guard let final = await call.establish(headers: ["Supported: timer", "Session-Expires: 1800"]) else {
                return .failed("no final response to the INVITE")
            }
            let code = final.statusCode ?? 0
            guard (200...299).contains(code) else {
                return code == 422 ? .inconclusive("the DUT's minimum session interval is above 1800 s (422)") : .failed("the INVITE was refused \(code)")
            }
            _ = await call.hangUp()
            guard let se = try? final.sessionExpires() else {
                return .inconclusive("the DUT does not run session timers (its \(code) has no Session-Expires)")
            }
            if se.seconds > 1800 { return .failed("the \(code) raises Session-Expires to \(se.seconds); a UAS may lower the 1800 asked, not raise it (RFC 4028 §9)") }
            if se.seconds < 90 { return .failed("the \(code)'s Session-Expires \(se.seconds) is below the 90 s floor (RFC 4028 §5)") }
            guard se.refresher == "uac" || se.refresher == "uas" else { return .failed("the \(code)'s Session-Expires has no refresher parameter (RFC 4028 §9)") }
            return .passed   // the rule checker judges Require: timer
        },
        ConformanceTestCase(name: "update-offer", etsiPurpose: nil,
                            summary: "an UPDATE with an SDP offer in a confirmed dialog is answered 2xx with an SDP answer. 405/501 is inconclusive, unless the 2xx to the INVITE listed UPDATE in Allow",
                            reference: "RFC 3311 §5.2 (the UAS answers an UPDATE's offer in its 2xx), §5.1; RFC 3261 §20.5",
                            purposeNote: outOfETSIScope, role: .uac) { s in
            guard var (call, final) = await PlacedCall.established(s) else { return .inconclusive("the call was not established, so there is no dialog to UPDATE") }
            let allowsUpdate = ((try? final.allow()) ?? []).contains(.update)
            let u = call.request("UPDATE", body: PlacedCall.offer(s, port: 49174, version: 2))
            let r = await s.finalResponse(branch: u, method: .update)
            _ = await call.hangUp()
            guard let r else { return .failed("no final response to the UPDATE") }
            switch r.statusCode ?? 0 {
            case 200...299:
                let body = String(decoding: r.body, as: UTF8.self)
                return body.contains("m=audio") ? .passed : .failed("the \(r.statusCode ?? 0) to an UPDATE with an offer carries no SDP answer (RFC 3311 §5.2)")
            case 405, 501:
                return allowsUpdate ? .failed("the 2xx to the INVITE listed UPDATE in Allow, yet the UPDATE was answered \(r.statusCode ?? 0)")
                    : .inconclusive("the DUT does not support UPDATE (\(r.statusCode ?? 0))")
            case let c: return .failed("the UPDATE with an offer was answered \(c); 2xx with an answer was due")
            }
        },
    ]
}
