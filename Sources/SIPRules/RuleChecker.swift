import Foundation
import SIPMessage

/// Watches every message exchanged with the DUT and names each rule the DUT broke, with the
/// index of the message that broke it. It works on the whole exchange of a test once the test
/// is over, so its verdicts do not depend on when the scenario looked.
public struct RuleChecker: Sendable {
    /// RFC 3261 T1 in seconds the DUT is expected to use (the RFC's default unless the test says).
    public var t1: Double
    /// RFC 3261 T2 in seconds (the cap of the 2xx retransmission interval).
    public var t2: Double
    /// Whether the 2xx retransmission schedule is checked (RFC 3261 §13.3.1.4 asks it of every
    /// transport: the retransmissions are end to end, a hop behind the UAS may be UDP).
    public var checks2xxRetransmissions: Bool
    /// Whether the DUT's INVITE retransmissions (Timer A, RFC 3261 §17.1.1.2) are checked: over
    /// UDP only, as a reliable transport retransmits nothing.
    public var checksInviteRetransmissions: Bool

    /// Call-IDs the runner knows the DUT has no dialog of (it made them up for the test): an
    /// INVITE whose Replaces names one must be refused 481 (RFC 3891 §3).
    public var absentDialogs: Set<String> = []

    /// A checker expecting `t1` and `t2` (seconds) of the DUT.
    public init(t1: Double = 0.5, t2: Double = 4, checks2xxRetransmissions: Bool = true, checksInviteRetransmissions: Bool = true) {
        self.t1 = t1
        self.t2 = t2
        self.checks2xxRetransmissions = checks2xxRetransmissions
        self.checksInviteRetransmissions = checksInviteRetransmissions
    }

    /// One message of the exchange as the checker sees it.
    public struct Record: Sendable {
        /// True for the runner's messages, false for the DUT's.
        public var sent: Bool
        /// Seconds since the exchange started.
        public var time: Double
        /// `nil` when the bytes did not parse.
        public var message: SIPMessage?
        /// Why the bytes did not parse.
        public var parseError: String?
        /// A record of one message.
        public init(sent: Bool, time: Double, message: SIPMessage?, parseError: String? = nil) {
            self.sent = sent
            self.time = time
            self.message = message
            self.parseError = parseError
        }
    }

    /// The findings of an exchange that ended at `end` (seconds since its start).
    public func check(_ records: [Record], end: Double) -> [ConformanceFinding] {
        var findings: [ConformanceFinding] = []
        func add(_ rule: ConformanceRule, _ index: Int?, _ detail: String) {
            findings.append(ConformanceFinding(rule: rule, messageIndex: index, detail: detail))
        }
        // Our requests by (branch, CSeq method): what each response answers.
        var requests: [String: SIPMessage] = [:]
        func key(_ branch: String?, _ method: SIPMethod?) -> String { "\(branch ?? "-")|\(method?.token ?? "-")" }
        // Per-INVITE-transaction (Call-ID + CSeq) state of the 2xx.
        struct Answer { var firstIndex: Int; var tag: String?; var times: [Double]; var reportedContact = false; var reportedRR = false }
        var answers: [String: Answer] = [:]
        var answerOrder: [String] = []
        // The DUT's requests: branches seen and the highest CSeq per Call-ID.
        var dutBranches: [String: String] = [:]   // branch → "METHOD CSeq"
        var dutCSeq: [String: UInt32] = [:]
        var reportedCopy: Set<String> = []
        // The INVITE dialogs of the exchange as the DUT holds them, and what an INVITE of ours
        // with Replaces was due (RFC 3891 §3), by its (branch, method) key.
        var dialogs = DialogBook()
        var replacesDue: [String: SIPMessage] = [:]
        // Our INVITEs per Call-ID: CSeq number → whether the DUT's final response to it came
        // (RFC 3261 §14.2), and the extension findings already made (copies repeat them).
        var pendingInvites: [String: [UInt32: Bool]] = [:]
        var reportedExtension: Set<String> = []

        for (i, r) in records.enumerated() {
            guard let m = r.message else {
                if !r.sent { add(.wellFormed, i, "a message that does not parse: \(r.parseError ?? "?")") }
                continue
            }
            let cseq = try? m.cseq()
            if r.sent, m.method == .invite, m.toTag == nil, dialogs.replacesRefusal(for: m, absent: absentDialogs) != nil {
                replacesDue[key(m.topViaBranch, .invite)] = m
            }
            dialogs.note(m, sent: r.sent)
            if !r.sent {
                for p in MessageRules.notifyProblems(m) { add(p.rule, i, p.detail) }
                if let n = MessageRules.referToCount(m), n != 1 { add(.referToCount, i, "the DUT's REFER carries \(n) Refer-To values; exactly one is due") }
            }
            if !r.sent {
                var needed: [SIPHeaderName] = [.to, .from, .cseq, .callID, .via]
                if m.isRequest { needed.append(.maxForwards) }
                // A response cannot copy what its request lacked (a 400 to a request without
                // Call-ID has none to give).
                if !m.isRequest, let request = requests[key(m.topViaBranch, cseq?.method)] { needed = needed.filter { request.contains($0) } }
                let missing = needed.filter { !m.contains($0) }
                if !missing.isEmpty {
                    let what = m.isRequest ? (m.method?.token ?? "request") : "\(m.statusCode ?? 0) response"
                    add(.mandatoryHeaders, i, "the \(what) has no \(missing.map(\.spelling).joined(separator: ", "))")
                }
            }
            if r.sent {
                if m.isRequest { requests[key(m.topViaBranch, cseq?.method)] = m }
                if m.method == .invite, let callID = m.callID, let n = cseq?.sequence, pendingInvites[callID]?[n] == nil {
                    pendingInvites[callID, default: [:]][n] = false
                }
                continue
            }
            if m.isRequest {
                checkDUTRequest(m, cseq, i, &dutBranches, &dutCSeq, add)
                // An attended transferor's Replaces (once per REFER: copies repeat it).
                if m.method == .refer, let problem = dialogs.referReplacesProblem(m),
                   reportedCopy.insert("replaces|\(m.callID ?? "")|\(cseq?.sequence ?? 0)").inserted {
                    add(.replacesNamesDialog, i, problem)
                }
                continue
            }
            // A response from the DUT.
            guard let cseq, let request = requests[key(m.topViaBranch, cseq.method)] else { continue }
            let code = m.statusCode ?? 0
            let txKey = "\(m.callID ?? "")|\(cseq.sequence)|\(cseq.method.token)"
            if !reportedCopy.contains(txKey), let problem = copyProblem(request: request, response: m) {
                reportedCopy.insert(txKey)
                add(.responseCopiesRequest, i, problem)
            }
            if MessageRules.redirectNeedsContact(code), m.values(.contact).isEmpty, !reportedCopy.contains("3xx|" + txKey) {
                reportedCopy.insert("3xx|" + txKey)
                add(.contactIn3xx, i, "the \(code) to the \(cseq.method.token) has no Contact header field: it redirects nowhere")
            }
            if (200...299).contains(code), let n = MessageRules.referToCount(request), n != 1, !reportedCopy.contains("refer|" + txKey) {
                reportedCopy.insert("refer|" + txKey)
                add(.referToCount, i, "a REFER with \(n) Refer-To values was accepted \(code); it must be refused (400)")
            }
            // Judged as the dialog stood both when the INVITE left and when its 2xx came (a 2xx
            // of the ringing call crossing the INVITE confirmed it meanwhile: no finding).
            if (200...299).contains(code), cseq.method == .invite, let invite = replacesDue.removeValue(forKey: key(m.topViaBranch, .invite)),
               let due = dialogs.replacesRefusal(for: invite, absent: absentDialogs),
               DialogBook.claimsReplaces(request: request, response: m) {
                add(.replacesDialog, i, "the INVITE with Replaces was answered \(code): \(due)")
            }
            for f in extensionFindings(request: request, response: m, cseq: cseq, index: i, pendingInvites: &pendingInvites)
            where reportedExtension.insert("\(f.rule.id)|\(f.detail)").inserted {
                findings.append(f)
            }
            // Inside a dialog: the To tag of the response is the request's.
            if let requestTag = request.toTag, m.toTag != requestTag {
                add(.dialogTagStable, i, "the request carried To tag \(requestTag), the \(code) to it carries \(m.toTag.map { "To tag \($0)" } ?? "no To tag")")
            }
            let recordRoutes = request.values(.recordRoute).flatMap(Self.split)
            if cseq.method == .invite, (101...299).contains(code), m.toTag != nil, !recordRoutes.isEmpty {
                let echoed = m.values(.recordRoute).flatMap(Self.split)
                if echoed != recordRoutes {
                    var a = answers[txKey] ?? Answer(firstIndex: i, tag: m.toTag, times: [])
                    if !a.reportedRR {
                        a.reportedRR = true
                        add(.recordRouteEchoed, i, "the INVITE was record-routed \(recordRoutes); the \(code) carries \(echoed.isEmpty ? "no Record-Route" : "\(echoed)")")
                    }
                    answers[txKey] = a
                }
            }
            if cseq.method == .register, (200...299).contains(code), case .addresses(let bound)? = try? m.contact(),
               let bare = bound.first(where: { $0.expires == nil }) {
                add(.registerContactExpires, i, "the \(code) to REGISTER lists the binding \(bare.uri) without an expires parameter")
            }
            guard cseq.method == .invite, (200...299).contains(code) else { continue }
            if answers[txKey] == nil || answers[txKey]!.times.isEmpty {
                let prior = answers[txKey]
                answers[txKey] = Answer(firstIndex: i, tag: m.toTag, times: [r.time], reportedContact: prior?.reportedContact ?? false,
                                        reportedRR: prior?.reportedRR ?? false)
                answerOrder.append(txKey)
            } else {
                answers[txKey]!.times.append(r.time)
                if let tag = answers[txKey]!.tag, m.toTag != tag, request.toTag == nil {
                    add(.dialogTagStable, i, "a copy of the 2xx carries To tag \(m.toTag ?? "none"), the first one carried \(tag)")
                }
            }
            if m.values(.contact).isEmpty, !answers[txKey]!.reportedContact {
                answers[txKey]!.reportedContact = true
                add(.contactIn2xx, i, "the \(code) to INVITE has no Contact header field")
            }
        }

        // 2xx retransmissions until the ACK (RFC 3261 §13.3.1.4).
        if checks2xxRetransmissions {
            for txKey in answerOrder {
                guard let a = answers[txKey], let first = a.times.first else { continue }
                let parts = txKey.split(separator: "|", omittingEmptySubsequences: false)
                let ackTime = records.first { rec in
                    guard rec.sent, let m = rec.message, m.method == .ack, let c = try? m.cseq() else { return false }
                    return m.callID == String(parts[0]) && String(c.sequence) == String(parts[1]) && rec.time >= first
                }?.time ?? end
                findings += retransmissionFindings(times: a.times, until: ackTime, firstIndex: a.firstIndex)
            }
        }
        findings += uacFindings(records, end: end)
        return findings
    }

    /// The extensions' rules for a response of the DUT to our `request`: 420 (RFC 3261
    /// §8.2.2.3), 500 to an INVITE while an earlier one is pending (§14.2), reliable
    /// provisionals (RFC 3262), 422 and Session-Expires (RFC 4028).
    func extensionFindings(request: SIPMessage, response m: SIPMessage, cseq: CSeq, index i: Int,
                           pendingInvites: inout [String: [UInt32: Bool]]) -> [ConformanceFinding] {
        var out: [ConformanceFinding] = []
        func add(_ rule: ConformanceRule, _ detail: String) { out.append(ConformanceFinding(rule: rule, messageIndex: i, detail: detail)) }
        let code = m.statusCode ?? 0
        let require = ((try? request.require()) ?? []).map { $0.lowercased() }
        let supported = ((try? request.supported()) ?? []).map { $0.lowercased() }
        let responseRequire = ((try? m.require()) ?? []).map { $0.lowercased() }
        if code == 420 {
            let listed = Set(((try? m.unsupported()) ?? []).map { $0.lowercased() })
            if listed.isEmpty {
                add(.unsupportedIn420, "the 420 to the \(cseq.method.token) has no Unsupported header field" + (require.isEmpty ? "" : " (its Require listed \(require.joined(separator: ", ")))"))
            } else if !require.isEmpty, listed.isDisjoint(with: require) {
                add(.unsupportedIn420, "the 420 lists \(listed.sorted().joined(separator: ", ")) as unsupported, none of the request's Require \(require.joined(separator: ", "))")
            }
        }
        if code == 422 {
            let asked = (try? request.sessionExpires())?.seconds
            if let minimum = try? m.minSE() {
                if let asked, minimum <= asked {
                    add(.minSEIn422, "the 422 gives Min-SE \(minimum), not above the request's Session-Expires \(asked)")
                }
            } else {
                add(.minSEIn422, "the 422 has no (readable) Min-SE header field")
            }
        }
        if cseq.method == .invite, let callID = m.callID {
            if code >= 200, pendingInvites[callID]?[cseq.sequence] == false {
                if code == 500, let earlier = pendingInvites[callID]?.filter({ $0.key < cseq.sequence && !$0.value }).keys.min() {
                    if let after = try? m.retryAfter() {
                        if after.seconds > 10 { add(.retryAfterIn500, "the 500 to INVITE CSeq \(cseq.sequence) (INVITE CSeq \(earlier) still pending) has Retry-After \(after.seconds); 0 to 10 s was due") }
                    } else {
                        add(.retryAfterIn500, "the 500 to INVITE CSeq \(cseq.sequence), sent while INVITE CSeq \(earlier) had no final response, has no (readable) Retry-After")
                    }
                }
                pendingInvites[callID]?[cseq.sequence] = true
            }
            if (101...199).contains(code), require.contains("100rel") || responseRequire.contains("100rel") {
                if !responseRequire.contains("100rel") {
                    add(.reliableProvisional, "the \(code) to an INVITE requiring 100rel is sent unreliably (no Require: 100rel)")
                } else if (try? m.rseq()) == nil {
                    add(.reliableProvisional, "the \(code) carries Require: 100rel but no (readable) RSeq")
                }
            }
        }
        if cseq.method == .invite || cseq.method == .update, (200...299).contains(code), let se = try? m.sessionExpires() {
            let timer = (require + supported).contains("timer")
            switch se.refresher {
            case "uas": break
            case "uac":
                if !timer { add(.sessionExpiresRefresher, "the \(code)'s Session-Expires \(se) makes the UAC refresh, but the request listed no timer in Supported or Require") }
                else if !responseRequire.contains("timer") { add(.sessionExpiresRefresher, "the \(code)'s Session-Expires \(se) makes the UAC refresh without Require: timer in the \(code)") }
            default:
                add(.sessionExpiresRefresher, "the \(code)'s Session-Expires \(se) has no refresher parameter (uac or uas)")
            }
        }
        return out
    }

    /// The DUT as UAC (the runner answered its INVITEs): its ACKs and its INVITE retransmissions.
    func uacFindings(_ records: [Record], end: Double) -> [ConformanceFinding] {
        var out: [ConformanceFinding] = []
        func add(_ rule: ConformanceRule, _ index: Int?, _ detail: String) {
            out.append(ConformanceFinding(rule: rule, messageIndex: index, detail: detail))
        }
        struct Sent { var index: Int; var time: Double; var code: Int; var toTag: String? }
        struct Invite { var index: Int; var branch: String; var times: [Double] = []; var copies: [Int] = [] }
        struct Ack { var index: Int; var time: Double; var callID: String; var sequence: UInt32; var branch: String; var toTag: String? }
        var invites: [String: Invite] = [:], order: [String] = []
        var responses: [String: [Sent]] = [:]
        var acks: [Ack] = []
        // Every INVITE branch per Call-ID: behind a forking proxy several INVITE transactions
        // share a Call-ID and CSeq, and the ACK of one branch's non-2xx is not another's.
        var inviteBranches: [String: Set<String>] = [:]
        // The reliable provisionals we sent per Call-ID ("RSeq CSeq"), and the Min-SE of the
        // 422s we sent (with the refused INVITE's CSeq number).
        var reliable: [String: Set<String>] = [:]
        var refused422: [String: (minimum: UInt32, sequence: UInt32)] = [:]
        // The option tags our 420s listed as unsupported, per Call-ID (with the refused INVITE's CSeq number).
        var refused420: [String: (tags: Set<String>, sequence: UInt32)] = [:]
        var reported: Set<String> = []
        for (i, r) in records.enumerated() {
            guard let m = r.message, let cseq = try? m.cseq(), let callID = m.callID else { continue }
            let key = "\(callID)|\(cseq.sequence)"
            if r.sent, !m.isRequest, cseq.method == .invite {
                if (101...199).contains(m.statusCode ?? 0), let rseq = try? m.rseq() { reliable[callID, default: []].insert("\(rseq) \(cseq.sequence)") }
                if m.statusCode == 422, let minimum = try? m.minSE() { refused422[callID] = (max(minimum, refused422[callID]?.minimum ?? 0), cseq.sequence) }
                if m.statusCode == 420, let tags = try? m.unsupported(), !tags.isEmpty {
                    refused420[callID] = (Set(tags.map { $0.lowercased() }).union(refused420[callID]?.tags ?? []), cseq.sequence)
                }
            }
            if !r.sent, m.method == .invite, m.toTag == nil, let refused = refused420[callID], cseq.sequence > refused.sequence,
               reported.insert("420 \(callID) \(cseq.sequence)").inserted {
                let still = ((try? m.require()) ?? []).filter { refused.tags.contains($0.lowercased()) }
                if !still.isEmpty {
                    add(.requireAfter420, i, "the INVITE retried after a 420 with Unsupported: \(refused.tags.sorted().joined(separator: ", ")) still requires \(still.joined(separator: ", "))")
                }
            }
            if !r.sent, m.method == .prack, reported.insert("prack \(callID) \(cseq.sequence)").inserted {
                if let rack = try? m.rack() {
                    if rack.method != .invite || !(reliable[callID]?.contains("\(rack.rseq) \(rack.cseq)") ?? false) {
                        let sent = (reliable[callID] ?? []).sorted().map { "RSeq \($0.split(separator: " ")[0]) of INVITE CSeq \($0.split(separator: " ")[1])" }
                        add(.prackRAck, i, "the PRACK's RAck \(rack) names no reliable provisional response of this call (sent: \(sent.isEmpty ? "none" : sent.joined(separator: ", ")))")
                    }
                } else {
                    add(.prackRAck, i, "the PRACK has no (readable) RAck header field")
                }
            }
            if !r.sent, m.method == .invite, m.toTag == nil, let refused = refused422[callID], cseq.sequence > refused.sequence,
               reported.insert("422 \(callID) \(cseq.sequence)").inserted {
                let asked = (try? m.sessionExpires())?.seconds
                let floor = try? m.minSE()
                if asked == nil || asked! < refused.minimum {
                    add(.sessionExpiresAfter422, i, "the INVITE retried after a 422 with Min-SE \(refused.minimum) asks Session-Expires \(asked.map(String.init) ?? "none")")
                } else if floor == nil || floor! < refused.minimum {
                    add(.sessionExpiresAfter422, i, "the INVITE retried after a 422 with Min-SE \(refused.minimum) carries Min-SE \(floor.map(String.init) ?? "none")")
                }
            }
            if !r.sent, m.method == .invite {
                let branch = m.topViaBranch ?? ""
                inviteBranches[callID, default: []].insert(branch)
                if invites[key] == nil { invites[key] = Invite(index: i, branch: branch); order.append(key) }
                // A copy of the same transaction (a new branch with the same CSeq is not one).
                if invites[key]!.branch == branch { invites[key]!.times.append(r.time); invites[key]!.copies.append(i) }
            } else if !r.sent, m.method == .ack {
                acks.append(Ack(index: i, time: r.time, callID: callID, sequence: cseq.sequence, branch: m.topViaBranch ?? "", toTag: m.toTag))
            } else if r.sent, !m.isRequest, cseq.method == .invite, invites[key] != nil, m.topViaBranch == invites[key]!.branch {
                responses[key, default: []].append(Sent(index: i, time: r.time, code: m.statusCode ?? 0, toTag: m.toTag))
            }
        }
        for key in order {
            guard let invite = invites[key] else { continue }
            let sent = responses[key] ?? []
            let callID = String(key.split(separator: "|", omittingEmptySubsequences: false)[0])
            let sequence = UInt32(key.split(separator: "|").last ?? "") ?? 0
            // Timer A: copies before the first response on schedule, none well after it.
            if checksInviteRetransmissions {
                let answered = sent.first?.time ?? end
                let before = invite.times.filter { $0 <= answered }
                out += retransmissionFindings(times: before, until: answered, firstIndex: invite.index, rule: .inviteRetransmission,
                                              what: "INVITE", cap: .infinity, until: "a response")
                if let late = zip(invite.times, invite.copies).first(where: { $0.0 > answered + 0.25 }) {
                    add(.inviteRetransmission, late.1, String(format: "the INVITE was retransmitted %.2f s after the runner's first response to it", late.0 - answered))
                }
            }
            guard let final = sent.first(where: { $0.code >= 200 }) else { continue }
            let others = (inviteBranches[callID] ?? []).subtracting([invite.branch])
            let related = acks.filter { $0.callID == callID && $0.time >= final.time && !others.contains($0.branch) }
            if (200...299).contains(final.code) {
                guard let ack = related.first else {
                    add(.ack2xx, final.index, "the \(final.code) to the INVITE (CSeq \(sequence)) was never acknowledged")
                    continue
                }
                if ack.sequence != sequence { add(.ack2xx, ack.index, "the ACK carries CSeq \(ack.sequence); the INVITE's was \(sequence)") }
                if ack.branch == invite.branch {
                    add(.ack2xx, ack.index, "the ACK for the 2xx reuses the INVITE's branch \(ack.branch); it is a new transaction and needs a new branch")
                }
                if ack.toTag != final.toTag {
                    add(.ack2xx, ack.index, "the ACK carries \(ack.toTag.map { "To tag \($0)" } ?? "no To tag"); the 2xx's was \(final.toTag ?? "none")")
                }
                // Each copy of the 2xx sent after the first ACK must be acknowledged again.
                let copies = sent.filter { (200...299).contains($0.code) && $0.time > ack.time }
                for (k, copy) in copies.enumerated() {
                    let next = k + 1 < copies.count ? copies[k + 1].time : end
                    if !related.contains(where: { $0.time >= copy.time && $0.time <= next }) {
                        add(.ack2xx, copy.index, String(format: "the copy of the 2xx sent at %.2f s (after the ACK) was not acknowledged again", copy.time))
                        break
                    }
                }
            } else {
                guard let ack = related.first else {
                    add(.ackNon2xx, final.index, "the \(final.code) to the INVITE (CSeq \(sequence)) was never acknowledged")
                    continue
                }
                if ack.branch != invite.branch {
                    add(.ackNon2xx, ack.index, "the ACK for the \(final.code) has branch \(ack.branch); the INVITE's \(invite.branch) was due (the ACK is part of the INVITE's transaction)")
                }
                if ack.sequence != sequence { add(.ackNon2xx, ack.index, "the ACK carries CSeq \(ack.sequence); the INVITE's was \(sequence)") }
                if ack.toTag != final.toTag {
                    add(.ackNon2xx, ack.index, "the ACK carries \(ack.toTag.map { "To tag \($0)" } ?? "no To tag"); the \(final.code)'s was \(final.toTag ?? "none")")
                }
            }
        }
        return out
    }

    /// What the schedule T1, 2·T1, … capped at `cap` (T2 when `nil`) predicts for copies of a
    /// message first sent at `times[0]`, against the copies sent (`times`) before `ack` (the
    /// time the sender had to stop, named `stop` in the detail): a finding of `rule` at
    /// `firstIndex` when retransmissions due before it are missing, or one came off schedule
    /// (beyond ``tolerance(_:)``). Shared with the capture check.
    public func retransmissionFindings(times: [Double], until ack: Double, firstIndex: Int, rule: ConformanceRule = .retransmit2xx,
                                what: String = "2xx", cap: Double? = nil, until stop: String = "the ACK") -> [ConformanceFinding] {
        var out: [ConformanceFinding] = []
        guard let first = times.first else { return out }
        let t2 = cap ?? self.t2
        var expected: [Double] = []   // expected send times of retransmissions 1, 2, …
        var gap = t1, at = first
        while true {
            at += gap
            // Only retransmissions due comfortably before the ACK count as missing.
            if at + tolerance(gap) >= ack { break }
            expected.append(at)
            gap = min(gap * 2, t2)
        }
        let got = Array(times.dropFirst().filter { $0 <= ack })
        if got.count < expected.count {
            let schedule = t2.isInfinite ? String(format: "T1 = %.1f s, doubling", t1) : String(format: "T1 = %.1f s, doubling to T2 = %.0f s", t1, t2)
            out.append(ConformanceFinding(rule: rule, messageIndex: firstIndex,
                detail: "the \(what) was sent \(got.count + 1) time(s) in the " + String(format: "%.2f", ack - first)
                    + " s before \(stop); \(expected.count) retransmission(s) were due (\(schedule))"))
            return out
        }
        var previous = first
        gap = t1
        for (k, t) in got.enumerated() {
            let actual = t - previous
            if abs(actual - gap) > tolerance(gap) {
                out.append(ConformanceFinding(rule: rule, messageIndex: firstIndex,
                    detail: "retransmission \(k + 1) of the \(what) came " + String(format: "%.2f s after the previous copy; %.2f s was due", actual, gap)))
                break
            }
            previous = t
            gap = min(gap * 2, t2)
        }
        return out
    }

    /// How far a retransmission may stray from its due time: scheduling on a loaded machine
    /// and the loopback path, not a different schedule.
    public func tolerance(_ gap: Double) -> Double { 0.3 * gap + 0.15 }

    /// The DUT's own requests: the branch rule and the CSeq order in a dialog.
    func checkDUTRequest(_ m: SIPMessage, _ cseq: CSeq?, _ i: Int, _ branches: inout [String: String], _ highest: inout [String: UInt32],
                         _ add: (ConformanceRule, Int?, String) -> Void) {
        guard let method = m.method, let cseq else { return }
        let branch = m.topViaBranch ?? ""
        if !branch.hasPrefix("z9hG4bK") {
            add(.viaBranch, i, "the \(method.token)'s top Via branch \(branch.isEmpty ? "is missing" : "\"\(branch)\"") does not start with z9hG4bK")
        }
        let tx = "\(method.token) \(cseq.sequence)"
        if let earlier = branches[branch], !branch.isEmpty {
            // The same transaction again (a retransmission), or CANCEL / ACK-to-non-2xx sharing the INVITE's branch.
            let shares = earlier == tx || ((method == .cancel || method == .ack) && earlier == "INVITE \(cseq.sequence)")
            if !shares { add(.viaBranch, i, "the \(tx) reuses branch \(branch) of the DUT's earlier \(earlier)") }
            if earlier == tx { return }
        } else if !branch.isEmpty {
            branches[branch] = tx
        }
        guard method != .ack, method != .cancel, m.toTag != nil, let callID = m.callID else { return }
        if let last = highest[callID], cseq.sequence <= last {
            add(.cseqIncreases, i, "the \(tx) in dialog \(callID) does not increase on the DUT's previous CSeq \(last)")
        }
        highest[callID] = max(highest[callID] ?? 0, cseq.sequence)
    }

    /// Why the response does not carry the request's Via, From, Call-ID and CSeq, or `nil`.
    func copyProblem(request: SIPMessage, response: SIPMessage) -> String? {
        if response.callID != request.callID { return "Call-ID \(response.callID ?? "missing") is not the request's \(request.callID ?? "")" }
        let rc = try? request.cseq(), sc = try? response.cseq()
        if rc != sc { return "CSeq \(sc.map { "\($0)" } ?? "missing") is not the request's \(rc.map { "\($0)" } ?? "")" }
        if response.fromTag != request.fromTag { return "From tag \(response.fromTag ?? "missing") is not the request's \(request.fromTag ?? "none")" }
        if let a = try? request.from(), let b = try? response.from(), a.uri.description != b.uri.description {
            return "From URI \(b.uri) is not the request's \(a.uri)"
        }
        guard let rv = try? request.via(), let sv = try? response.via() else { return "the Via header fields do not parse" }
        if rv.count != sv.count { return "\(sv.count) Via value(s), the request had \(rv.count)" }
        for (a, b) in zip(rv, sv) where a.branch != b.branch || a.host != b.host || a.port != b.port || a.transport.uppercased() != b.transport.uppercased() {
            return "Via \(b) does not copy the request's \(a)"
        }
        return nil
    }

    /// The URIs of Record-Route values, without white space.
    static func split(_ value: String) -> [String] {
        value.split(separator: ",").map { $0.filter { !$0.isWhitespace } }
    }
}


/// The INVITE dialogs an exchange shows, as the DUT holds them: who initiated each, and whether
/// it is early, confirmed or over, so that an INVITE with Replaces can be judged against RFC 3891 §3.
struct DialogBook {
    enum Phase { case early, confirmed, terminated }
    struct Dialog { var initiatedByDUT: Bool; var phase: Phase; var callID = ""; var dutTag = ""; var runnerTag = "" }
    /// By "Call-ID|DUT's tag|runner's tag".
    var dialogs: [String: Dialog] = [:]
    /// The DUT's dialog-creating INVITEs, by Call-ID and CSeq: its From tag.
    var dutInvites: [String: String] = [:]

    static func key(_ callID: String, dut: String, runner: String) -> String { "\(callID)|\(dut)|\(runner)" }

    /// Follows a message of the exchange (`sent`: the runner's).
    mutating func note(_ m: SIPMessage, sent: Bool) {
        guard let callID = m.callID, let cseq = try? m.cseq() else { return }
        if m.isRequest {
            if !sent, m.method == .invite, m.toTag == nil, let tag = m.fromTag { dutInvites["\(callID)|\(cseq.sequence)"] = tag }
            if m.method == .bye, let from = m.fromTag, let to = m.toTag {
                let k = sent ? Self.key(callID, dut: to, runner: from) : Self.key(callID, dut: from, runner: to)
                dialogs[k]?.phase = .terminated
            }
            return
        }
        guard cseq.method == .invite, let code = m.statusCode, code > 100, let from = m.fromTag, let to = m.toTag else { return }
        let k: String, byDUT: Bool, dutTag: String, runnerTag: String
        if sent {
            // Our answer to the DUT's INVITE: the DUT's tag is its From tag.
            guard dutInvites["\(callID)|\(cseq.sequence)"] == from else { return }
            k = Self.key(callID, dut: from, runner: to); byDUT = true; dutTag = from; runnerTag = to
        } else {
            k = Self.key(callID, dut: to, runner: from); byDUT = false; dutTag = to; runnerTag = from
        }
        var d = dialogs[k] ?? Dialog(initiatedByDUT: byDUT, phase: .early, callID: callID, dutTag: dutTag, runnerTag: runnerTag)
        if (200...299).contains(code), d.phase == .early { d.phase = .confirmed }
        if code >= 300, d.phase == .early { d.phase = .terminated }
        dialogs[k] = d
    }

    /// Whether the DUT is bound by RFC 3891 in this exchange: the INVITE required `replaces`, or
    /// the DUT's answer lists it as supported. Otherwise a UA that does not implement the
    /// extension ignores the header (RFC 3261 §8.2.2.3) and answers the INVITE as a new call.
    static func claimsReplaces(request: SIPMessage, response: SIPMessage) -> Bool {
        let tags = ((try? request.require()) ?? []) + ((try? response.supported()) ?? []) + ((try? response.require()) ?? [])
        return tags.contains { $0.lowercased() == "replaces" }
    }

    /// What is wrong with the Replaces a REFER of the DUT's carries in its Refer-To (RFC 3891 §3,
    /// RFC 5589 §7), or `nil`. Judged only when the Replaces names (by Call-ID) a dialog the DUT
    /// initiated towards the runner and the runner answered with a tag: the runner is then the
    /// target that receives the INVITE with Replaces, so the to-tag must be the runner's tag and
    /// the from-tag the DUT's, the dialog as the target sees it.
    func referReplacesProblem(_ refer: SIPMessage) -> String? {
        guard refer.method == .refer, let r = (try? refer.referToReplaces()) ?? nil else { return nil }
        let candidates = dialogs.values.filter { $0.initiatedByDUT && $0.callID == r.callID }
        guard !candidates.isEmpty, !candidates.contains(where: { $0.runnerTag == r.toTag && $0.dutTag == r.fromTag }) else { return nil }
        if let d = candidates.first(where: { $0.runnerTag == r.fromTag && $0.dutTag == r.toTag }) {
            return "the REFER's Replaces names dialog \(r.callID) with its tags the wrong way round (to-tag \(r.toTag), from-tag \(r.fromTag)): to-tag is the target's (\(d.runnerTag)), from-tag the DUT's (\(d.dutTag))"
        }
        let known = candidates.map { "to-tag \($0.runnerTag), from-tag \($0.dutTag)" }.sorted().joined(separator: " or ")
        return "the REFER's Replaces names dialog \(r.callID) with to-tag \(r.toTag), from-tag \(r.fromTag); that dialog is \(known) as the target (the runner) sees it"
    }

    /// What an INVITE of the runner's with Replaces must get instead of a 2xx, or `nil` when a
    /// 2xx may do (or the exchange does not tell).
    func replacesRefusal(for invite: SIPMessage, absent: Set<String>) -> String? {
        guard !invite.values(.replaces).isEmpty, let r = (try? invite.replaces()) ?? nil else { return nil }
        guard let d = dialogs[Self.key(r.callID, dut: r.toTag, runner: r.fromTag)] else {
            return absent.contains(r.callID) ? "it names the dialog \(r.callID), which the DUT does not have (481 is due)" : nil
        }
        switch d.phase {
        case .early where !d.initiatedByDUT:
            return "it names an early dialog the DUT did not initiate (481 is due, and that dialog left alone)"
        case .confirmed where r.earlyOnly:
            return "it carries early-only and names a confirmed dialog (486 is due)"
        case .terminated:
            return "it names a dialog that has already ended (603 is due)"
        default:
            return nil
        }
    }
}
