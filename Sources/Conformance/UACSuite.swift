import SIPMessage
import NetworkIO

/// The runner's side of a call the DUT places (RFC 3261 §13.3 as UAS), kept as plain values:
/// the DUT's INVITE, where it came from, and the To tag the runner gives the dialog.
struct ReceivedCall {
    let session: ConformanceSession
    let invite: SIPMessage
    /// The INVITE's index in the exchange.
    let index: Int
    let source: SocketAddress
    let toTag: String
    /// When the INVITE arrived, on the session's clock.
    let time: Duration

    /// Waits (up to the session's response timeout) for the DUT's next new INVITE, one that
    /// opens a call (no To tag).
    static func next(_ s: ConformanceSession) async -> ReceivedCall? {
        guard let (m, i) = await s.waitFor(timeout: s.responseTimeout, { $0.method == .invite && $0.toTag == nil }) else { return nil }
        let entry = s.entries[i]
        return ReceivedCall(session: s, invite: m, index: i, source: entry.source ?? s.target, toTag: s.token(), time: entry.time)
    }

    var callID: String { invite.callID ?? "" }
    var branch: String { invite.topViaBranch ?? "" }

    /// The response `code` to the INVITE, as bytes (the same bytes serve its retransmissions).
    func response(_ code: Int, extra: [(SIPHeaderName, String)] = [], answer: Bool = false) -> [UInt8] {
        var r = SIPMessage(responseTo: invite, statusCode: code, toTag: code == 100 ? nil : toTag)
        if (101...299).contains(code) { try? r.append(.contact, "<sip:conform@\(session.hostPort)\(session.uriTransport)>") }
        for (name, value) in extra { try? r.append(name, value) }
        if answer, (101...299).contains(code), let sdp = Self.answer(session, to: invite) {
            r.setBody(Array(sdp.utf8), contentType: .sdp)
        }
        return r.serialized()
    }

    /// Sends response bytes to the DUT.
    func send(_ bytes: [UInt8]) { session.sendRaw(bytes, to: source) }

    /// An SDP answer to the INVITE's offer: its first audio format, on a port nothing listens on
    /// (the suite checks signalling; no media flows). `nil` when the INVITE carries no offer.
    static func answer(_ s: ConformanceSession, to invite: SIPMessage, version: Int = 1) -> String? {
        // "\r\n" is one Character in Swift: lines are split on newlines as such.
        let lines = String(decoding: invite.body, as: UTF8.self).split(whereSeparator: \.isNewline)
        let mLines = lines.filter { $0.hasPrefix("m=") }
        guard let audio = mLines.first(where: { $0.hasPrefix("m=audio ") }) else { return nil }
        let ip = s.local.ipString, family = s.local.isIPv6 ? "IP6" : "IP4"
        var out = "v=0\r\no=conform 1 \(version) IN \(family) \(ip)\r\ns=-\r\nc=IN \(family) \(ip)\r\nt=0 0\r\n"
        // One m-line per offered stream, in order (RFC 3264 §6): the first audio stream accepted
        // with its first format, every other stream rejected (port 0).
        for m in mLines {
            let fields = m.split(separator: " ")
            guard fields.count >= 4 else { return nil }
            if m == audio {
                let format = fields[3]
                let rtpmap = lines.first { $0.hasPrefix("a=rtpmap:\(format) ") }
                out += "m=audio 49180 \(fields[2]) \(format)\r\n" + (rtpmap.map { "\($0)\r\n" } ?? "") + "a=sendrecv\r\n"
            } else {
                out += "\(fields[0]) 0 \(fields[2]) \(fields[3...].joined(separator: " "))\r\n"
            }
        }
        return out
    }

    /// Waits for the DUT's ACK in this call received after message `after`.
    func ack(after: Int, timeout: Duration) async -> (SIPMessage, Int)? {
        await session.waitFor(after: after + 1, timeout: timeout) { $0.method == .ack && $0.callID == callID }
    }

    /// Sends `bytes` (a final response) at T1, doubling, until the ACK arrives or the session's
    /// response timeout passes (RFC 3261 §13.3.1.4 for a 2xx, Timer G of §17.2.1 for the rest);
    /// returns the ACK and its index.
    func sendUntilAcknowledged(_ bytes: [UInt8]) async -> (SIPMessage, Int)? {
        let from = session.entries.count - 1
        send(bytes)
        var gap = session.t1, waited = Duration.zero
        while waited < session.responseTimeout {
            let slice = min(gap, session.responseTimeout - waited)
            if let ack = await ack(after: from, timeout: slice) { return ack }
            waited += slice
            guard waited < session.responseTimeout else { break }
            send(bytes)
            gap = min(gap * 2, session.t2)
        }
        return nil
    }

    /// Sends `bytes` at T1, doubling, until a request of this call satisfying `predicate` arrives
    /// or the session's response timeout passes (a reliable provisional until its PRACK, RFC
    /// 3262 §3); returns that request and its index.
    func sendUntil(_ bytes: [UInt8], _ predicate: @escaping (SIPMessage) -> Bool) async -> (SIPMessage, Int)? {
        let from = session.entries.count - 1
        send(bytes)
        var gap = session.t1, waited = Duration.zero
        while waited < session.responseTimeout {
            let slice = min(gap, session.responseTimeout - waited)
            if let hit = await session.waitFor(after: from + 1, timeout: slice, { $0.callID == callID && predicate($0) }) { return hit }
            waited += slice
            guard waited < session.responseTimeout else { break }
            send(bytes)
            gap = min(gap * 2, session.t2)
        }
        return nil
    }

    /// Refuses the call 486 (acknowledged) because the test cannot run with it, and says why.
    func decline(_ why: String) async -> ScenarioOutcome {
        _ = await sendUntilAcknowledged(response(486))
        return .inconclusive(why)
    }

    /// Waits for the DUT to end the answered call with a BYE (the session answers it 200).
    func bye(timeout: Duration) async -> SIPMessage? {
        await session.waitFor(after: index, timeout: timeout) { $0.method == .bye && $0.callID == callID }?.0
    }
}

extension ConformanceSuites {
    static let noETSIForUAC = "no ETSI TS 102 027-2 identifier: the originating-side (TE as caller) purposes could not be read to confirm a match"

    /// `uac`: the runner is the UAS, listening at the target address; the DUT calls it once per test.
    public static let uac: [ConformanceTestCase] = [
        ConformanceTestCase(name: "basic-call", etsiPurpose: nil,
                            summary: "the DUT's INVITE is answered 180, then 200 with an SDP answer; the DUT ACKs the 200 (INVITE's CSeq, the 200's To tag, a new branch) and ends the call with BYE",
                            reference: "RFC 3261 §13.2.2.4, §17.1.1.3, §15.1.1", purposeNote: noETSIForUAC, role: .uas) { s in
            guard let call = await ReceivedCall.next(s) else { return .failed("no INVITE from the DUT within \(s.responseTimeout)") }
            call.send(call.response(180))
            await s.pause(.milliseconds(100))
            guard await call.sendUntilAcknowledged(call.response(200, answer: true)) != nil else { return .failed("the DUT never acknowledged the 200") }
            guard let bye = await call.bye(timeout: s.responseTimeout + .seconds(4)) else {
                return .failed("the DUT did not end the call with a BYE")
            }
            guard bye.fromTag == call.invite.fromTag, bye.toTag == call.toTag else { return .failed("the BYE's tags are not the dialog's") }
            return .passed   // the rule checker judges the ACK
        },
        ConformanceTestCase(name: "ack-non-2xx", etsiPurpose: nil,
                            summary: "the DUT's INVITE is answered 486 Busy Here; the DUT ACKs it on the INVITE's branch, with its CSeq and the 486's To tag",
                            reference: "RFC 3261 §17.1.1.3", purposeNote: noETSIForUAC, role: .uas) { s in
            guard let call = await ReceivedCall.next(s) else { return .failed("no INVITE from the DUT within \(s.responseTimeout)") }
            call.send(call.response(100))
            guard await call.sendUntilAcknowledged(call.response(486)) != nil else { return .failed("the DUT never acknowledged the 486") }
            return .passed   // the rule checker judges the ACK
        },
        ConformanceTestCase(name: "invite-retransmission", etsiPurpose: nil,
                            summary: "the DUT's INVITE is left unanswered 2.2 s over UDP: copies are due at T1 and 3·T1 (0.5 s, 1.5 s); then 486, acknowledged",
                            reference: "RFC 3261 §17.1.1.2, §17.1.1.3", purposeNote: noETSIForUAC, role: .uas) { s in
            guard let call = await ReceivedCall.next(s) else { return .failed("no INVITE from the DUT within \(s.responseTimeout)") }
            // 2.2 s from the INVITE's arrival (it may have been held while the previous test ended).
            let wait = .milliseconds(2200) - (s.elapsed - call.time)
            if wait > .zero { await s.pause(wait) }
            guard await call.sendUntilAcknowledged(call.response(486)) != nil else { return .failed("the DUT never acknowledged the 486") }
            let copies = s.entries.filter { $0.direction == .received && $0.message?.method == .invite && $0.message?.topViaBranch == call.branch }.count
            if copies < 2 && s.transport == .udp { return .failed("the INVITE was sent \(copies) time(s) in 2.2 s without a response") }
            return .passed   // the rule checker judges the schedule
        },
        ConformanceTestCase(name: "2xx-retransmission-ack", etsiPurpose: nil,
                            summary: "after the DUT's ACK the runner sends its 200 twice more (as if the ACK had been lost); the DUT ACKs each copy again",
                            reference: "RFC 3261 §13.2.2.4", purposeNote: noETSIForUAC, role: .uas) { s in
            guard let call = await ReceivedCall.next(s) else { return .failed("no INVITE from the DUT within \(s.responseTimeout)") }
            let ok = call.response(200, answer: true)
            guard let (_, first) = await call.sendUntilAcknowledged(ok) else { return .failed("the DUT never acknowledged the 200") }
            var last = first
            for _ in 0..<2 {
                await s.pause(.milliseconds(100))
                let mark = max(last, s.entries.count - 1)
                call.send(ok)
                guard let (_, i) = await call.ack(after: mark, timeout: .milliseconds(500)) else {
                    return .failed("the DUT did not acknowledge a retransmission of the 200 within 0.5 s")
                }
                last = i
            }
            _ = await call.bye(timeout: s.responseTimeout + .seconds(4))
            return .passed
        },
        ConformanceTestCase(name: "redirect-3xx", etsiPurpose: nil,
                            summary: "the DUT's INVITE is answered 100, then 302 with a Contact at the runner: the DUT ACKs the 302 on the INVITE's branch; a retry at the Contact (a new transaction) is answered 486 and must be ACKed too",
                            reference: "RFC 3261 §8.1.3.4, §17.1.1.3", purposeNote: noETSIForUAC, role: .uas) { s in
            guard let call = await ReceivedCall.next(s) else { return .failed("no INVITE from the DUT within \(s.responseTimeout)") }
            let user = "moved-" + s.token()
            s.expect(requestUser: user)
            let mark = s.entries.count - 1
            call.send(call.response(100))
            // A retry is answered even when the 302 was not ACKed (the DUT's call ends cleanly).
            let acknowledged = await call.sendUntilAcknowledged(call.response(302, extra: [(.contact, "<sip:\(user)@\(s.hostPort)\(s.uriTransport)>")])) != nil
            let unacknowledged = ScenarioOutcome.failed("the DUT never acknowledged the 302")
            guard let (m, i) = await s.waitFor(after: mark, timeout: acknowledged ? s.responseTimeout : .zero, { $0.method == .invite && $0.toTag == nil && s.expects($0) }) else {
                return acknowledged ? .inconclusive("the DUT did not retry at the 302's Contact (RFC 3261 §8.1.3.4 leaves recursion to the UAC)") : unacknowledged
            }
            let retry = ReceivedCall(session: s, invite: m, index: i, source: s.entries[i].source ?? s.target, toTag: s.token(), time: s.entries[i].time)
            guard retry.branch != call.branch else {
                return .failed("the retry at the Contact reuses the redirected INVITE's branch (it is a new transaction, RFC 3261 §8.1.3.4, §8.1.1.7)")
            }
            guard await retry.sendUntilAcknowledged(retry.response(486)) != nil else { return .failed("the DUT never acknowledged the 486 to its retry") }
            return acknowledged ? .passed : unacknowledged
        },
        ConformanceTestCase(name: "100rel-prack", etsiPurpose: nil,
                            summary: "a DUT whose INVITE lists 100rel in Supported (or Require) gets a reliable 183 with the SDP answer (Require: 100rel, RSeq), retransmitted until its PRACK; the PRACK must carry RAck with that RSeq and the INVITE's CSeq; then 200, ACK, BYE. No 100rel in the INVITE: inconclusive",
                            reference: "RFC 3262 §4 (\"The UAC MUST send a PRACK\" for a reliable provisional; its RAck carries the response's RSeq and the CSeq number and method of the request), §7.2, §5",
                            purposeNote: noETSIForUAC, role: .uas) { s in
            guard let call = await ReceivedCall.next(s) else { return .failed("no INVITE from the DUT within \(s.responseTimeout)") }
            let tags = (((try? call.invite.supported()) ?? []) + ((try? call.invite.require()) ?? [])).map { $0.lowercased() }
            guard tags.contains("100rel") else { return await call.decline("the DUT's INVITE does not list 100rel in Supported or Require") }
            let rseq = UInt32.random(in: 1...0x7FFF_0000)
            let inviteCSeq = (try? call.invite.cseq().sequence) ?? 0
            call.send(call.response(100))
            let reliable = call.response(183, extra: [(.require, "100rel"), (.rseq, "\(rseq)")], answer: true)
            guard let (prack, _) = await call.sendUntil(reliable, { $0.method == .prack }) else {
                _ = await call.sendUntilAcknowledged(call.response(486))
                return .failed("no PRACK for the reliable 183 (RFC 3262 §4)")
            }
            await s.pause(.milliseconds(50))
            guard await call.sendUntilAcknowledged(call.response(200)) != nil else { return .failed("the DUT never acknowledged the 200") }
            _ = await call.bye(timeout: s.responseTimeout + .seconds(4))
            guard let rack = try? prack.rack() else { return .failed("the PRACK has no (readable) RAck") }
            guard rack.rseq == rseq, rack.cseq == inviteCSeq, rack.method == .invite else {
                return .failed("the PRACK's RAck is \(rack); \(rseq) \(inviteCSeq) INVITE was due (RFC 3262 §7.2)")
            }
            guard prack.toTag == call.toTag else { return .failed("the PRACK does not carry the early dialog's To tag \(call.toTag)") }
            return .passed
        },
        ConformanceTestCase(name: "session-timer-422", etsiPurpose: nil,
                            summary: "a DUT whose INVITE carries Session-Expires gets 422 with a Min-SE twice that; it ACKs the 422 and retries as a new transaction (same Call-ID, higher CSeq, new branch) with Session-Expires and Min-SE at least the 422's Min-SE; answered 200, ACK, BYE. No Session-Expires: inconclusive; no retry: inconclusive",
                            reference: "RFC 4028 §7.4 (after a 422 the UAC may retry with Session-Expires at least the Min-SE given; the retry carries that Min-SE), §6; RFC 3261 §8.1.3.5, §17.1.1.3",
                            purposeNote: noETSIForUAC, role: .uas) { s in
            guard let call = await ReceivedCall.next(s) else { return .failed("no INVITE from the DUT within \(s.responseTimeout)") }
            guard let se = try? call.invite.sessionExpires() else {
                return await call.decline("the DUT's INVITE carries no Session-Expires (a 422 answers only one, RFC 4028 §9)")
            }
            let minimum = se.seconds > UInt32.max / 2 ? UInt32.max : se.seconds * 2
            let inviteCSeq = (try? call.invite.cseq().sequence) ?? 0
            call.send(call.response(100))
            let mark = s.entries.count - 1
            guard await call.sendUntilAcknowledged(call.response(422, extra: [(.minSE, "\(minimum)")])) != nil else {
                return .failed("the DUT never acknowledged the 422")
            }
            guard let (m, i) = await s.waitFor(after: mark, timeout: s.responseTimeout, { $0.method == .invite && $0.toTag == nil && $0.callID == call.callID && $0.topViaBranch != call.branch }) else {
                return .inconclusive("the DUT did not retry after the 422 (RFC 4028 §7.4 leaves it to the UAC)")
            }
            let retry = ReceivedCall(session: s, invite: m, index: i, source: s.entries[i].source ?? s.target, toTag: s.token(), time: s.entries[i].time)
            guard await retry.sendUntilAcknowledged(retry.response(200, answer: true)) != nil else { return .failed("the DUT never acknowledged the 200 to its retry") }
            _ = await retry.bye(timeout: s.responseTimeout + .seconds(4))
            let retryCSeq = (try? m.cseq().sequence) ?? 0
            guard retryCSeq > inviteCSeq else { return .failed("the retry carries CSeq \(retryCSeq), not above the refused INVITE's \(inviteCSeq) (RFC 3261 §8.1.3.5)") }
            guard let asked = try? m.sessionExpires(), asked.seconds >= minimum else {
                return .failed("the retry asks Session-Expires \((try? m.sessionExpires())?.description ?? "none"), below the 422's Min-SE \(minimum) (RFC 4028 §7.4)")
            }
            return .passed   // the rule checker judges the Min-SE and the ACK of the 422
        },
        ConformanceTestCase(name: "require-420-retry", etsiPurpose: nil,
                            summary: "a DUT whose INVITE requires extensions (Require) gets 420 Bad Extension with all of them in Unsupported; it ACKs the 420 and retries as a new transaction (same Call-ID, higher CSeq, new branch) without requiring any of them; answered 200, ACK, BYE. No Require: inconclusive; no retry: inconclusive (a SHOULD)",
                            reference: "RFC 3261 §8.1.3.5 (after a 420 the UAC SHOULD retry the request omitting the extensions the response's Unsupported lists), §8.2.2.3, §17.1.1.3",
                            purposeNote: noETSIForUAC, role: .uas) { s in
            guard let call = await ReceivedCall.next(s) else { return .failed("no INVITE from the DUT within \(s.responseTimeout)") }
            let required = (try? call.invite.require()) ?? []
            guard !required.isEmpty else { return await call.decline("the DUT's INVITE requires no extension (no Require: a 420 would refuse nothing)") }
            let refused = Set(required.map { $0.lowercased() })
            let inviteCSeq = (try? call.invite.cseq().sequence) ?? 0
            call.send(call.response(100))
            let mark = s.entries.count - 1
            guard await call.sendUntilAcknowledged(call.response(420, extra: [(.unsupported, required.joined(separator: ", "))])) != nil else {
                return .failed("the DUT never acknowledged the 420")
            }
            guard let (m, i) = await s.waitFor(after: mark, timeout: s.responseTimeout, { $0.method == .invite && $0.toTag == nil && $0.callID == call.callID && $0.topViaBranch != call.branch }) else {
                return .inconclusive("the DUT did not retry after the 420 (RFC 3261 §8.1.3.5: a SHOULD)")
            }
            let retry = ReceivedCall(session: s, invite: m, index: i, source: s.entries[i].source ?? s.target, toTag: s.token(), time: s.entries[i].time)
            let still = ((try? m.require()) ?? []).filter { refused.contains($0.lowercased()) }
            guard still.isEmpty else {
                // Refused again, for the same reason.
                _ = await retry.sendUntilAcknowledged(retry.response(420, extra: [(.unsupported, required.joined(separator: ", "))]))
                return .failed("the INVITE retried after the 420 still requires \(still.joined(separator: ", ")) (RFC 3261 §8.1.3.5: the retry omits the extensions listed in Unsupported)")
            }
            guard await retry.sendUntilAcknowledged(retry.response(200, answer: true)) != nil else { return .failed("the DUT never acknowledged the 200 to its retry") }
            _ = await retry.bye(timeout: s.responseTimeout + .seconds(4))
            let retryCSeq = (try? m.cseq().sequence) ?? 0
            guard retryCSeq > inviteCSeq else { return .failed("the retry carries CSeq \(retryCSeq), not above the refused INVITE's \(inviteCSeq) (RFC 3261 §8.1.3.5)") }
            return .passed   // the rule checker judges the ACK of the 420
        },
    ]
}
