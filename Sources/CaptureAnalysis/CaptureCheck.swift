import SIPMessage
import SDP
import PacketCapture
import SIPRules

/// Replays one call of a capture through the rules of the transaction, dialog, subscription
/// (REFER) and offer/answer layers, once from each party's point of view, and names every
/// place where a party broke one (`switchboard capture FILE --check`).
///
/// A *party* is an address (IP:port) of the capture. For each party the check looks at the
/// transactions it runs as client (its requests: Timer A/E retransmissions over UDP, the ACK of
/// a non-2xx final it received, the ACK of every 2xx it received, CSeq order, dialog tags,
/// requests after a BYE, targets retried in a 3xx chain) and as server (its responses: the 2xx
/// retransmitted until the ACK, a non-2xx final to INVITE retransmitted over UDP until the ACK
/// (Timer G), Contact in 2xx and 3xx, the To tag of in-dialog responses, the
/// answer to an offer, the final NOTIFY of a REFER it accepted). The rules are the
/// ``ConformanceRule`` catalogue the conformance runner uses (``ConformanceRule/captureCheck``).
///
/// A message that never came (an ACK, a final NOTIFY) is reported only when the capture shows
/// that it was due: the capture runs on for ``patience`` seconds (64·T1, the RFC's transaction
/// timeouts) after what called for it, or the party went on to send something else in the
/// call. A capture cut short therefore reports nothing it cannot see.
public struct CaptureCheck: Sendable {
    /// One SIP message of the call, as captured.
    public struct Message: Sendable {
        /// The frame that carried (completed) it.
        public var frameNumber: Int
        /// When it was captured.
        public var time: CaptureTimestamp
        /// Its sender.
        public var source: CaptureEndpoint
        /// Its receiver.
        public var destination: CaptureEndpoint
        /// Whether it went over a reliable transport (TCP), where nothing is retransmitted by
        /// the transaction layer.
        public var reliable: Bool
        /// The message.
        public var message: SIPMessage

        /// A message captured at `time` in frame `frameNumber`.
        public init(frameNumber: Int, time: CaptureTimestamp, source: CaptureEndpoint, destination: CaptureEndpoint, reliable: Bool,
                    message: SIPMessage) {
            self.frameNumber = frameNumber
            self.time = time
            self.source = source
            self.destination = destination
            self.reliable = reliable
            self.message = message
        }

        /// The message of a capture decoder.
        public init(_ captured: CapturedSIPMessage) {
            self.init(frameNumber: captured.frameNumber, time: captured.timestamp, source: captured.source, destination: captured.destination,
                      reliable: captured.transport == .tcp, message: captured.message)
        }
    }

    /// A rule broken by a party, at a message of the capture.
    public struct Finding: Sendable, Hashable, CustomStringConvertible {
        /// The call's Call-ID.
        public var callID: String
        /// The rule broken (RFC, section, id).
        public var rule: ConformanceRule
        /// The frame of the message that broke the rule, or that called for a message that
        /// never came.
        public var frameNumber: Int
        /// That message's time.
        public var time: CaptureTimestamp
        /// The party that broke the rule.
        public var party: CaptureEndpoint
        /// What was seen, in one sentence.
        public var detail: String
        /// The layers that found it: the message ``Layers/rules``, our machines, or both (the
        /// rules' sentence is kept when both did).
        public var layers: Layers = .rules

        /// `frame 12: 127.0.0.1:5060 broke RFC 3261 §13.3.1.4 [2xx-retransmission]: …`
        public var description: String { "frame \(frameNumber): \(party) broke \(rule.reference) [\(rule.id)]: \(detail)" }
    }

    /// RFC 3261 T1 in seconds (the retransmission schedule starts at it).
    public var t1: Double
    /// RFC 3261 T2 in seconds (the cap of non-INVITE and 2xx retransmission intervals).
    public var t2: Double
    /// Seconds the capture must run on after a message for a reply it called for to count as
    /// missing (64·T1 by default: Timers B, F and H).
    public var patience: Double
    /// The most messages of one call the check looks at (the analysis keeps no more).
    public static let maximumMessages = 4096

    /// A check expecting `t1` and `t2` (seconds) of every party.
    public init(t1: Double = 0.5, t2: Double = 4, patience: Double? = nil) {
        self.t1 = t1
        self.t2 = t2
        self.patience = patience ?? 64 * t1
    }

    /// The findings of the call `callID`, whose messages are `messages` in capture order, in a
    /// capture whose last packet was at `captureEnd`, ordered by frame.
    public func check(callID: String, messages: [Message], captureEnd: CaptureTimestamp) -> [Finding] {
        var pass = Pass(check: self, callID: callID, messages: messages, end: captureEnd)
        pass.run()
        var machines = MachineReplay(check: self, callID: callID, messages: messages)
        return Self.merge(pass.findings, machines.run())
    }

    /// The rules' findings and the machines', a rule broken by one party at one frame once (the
    /// rules' sentence kept, both layers named), ordered by frame.
    static func merge(_ rules: [Finding], _ machines: [Finding]) -> [Finding] {
        var out = rules
        var at: [String: Int] = [:]
        for (k, f) in out.enumerated() { at[f.rule.id + "|\(f.frameNumber)|\(f.party)"] = at[f.rule.id + "|\(f.frameNumber)|\(f.party)"] ?? k }
        for f in machines {
            let key = f.rule.id + "|\(f.frameNumber)|\(f.party)"
            if let k = at[key] {
                out[k].layers.formUnion(f.layers)
            } else {
                at[key] = out.count
                out.append(f)
            }
        }
        return out.sorted { ($0.frameNumber, $0.rule.id) < ($1.frameNumber, $1.rule.id) }
    }
}

extension CaptureCheck {
    /// A step of a transfer or a forwarding, told with the other calls it is linked to
    /// (``CaptureAnalyzer/Call/linked``): an initial INVITE and its final response, a REFER and
    /// its response, a NOTIFY of a REFER subscription, a 3xx and its Contacts, a BYE.
    public struct StoryStep: Sendable, Hashable {
        /// When it was captured.
        public var time: CaptureTimestamp
        /// Its frame.
        public var frameNumber: Int
        /// Its sender.
        public var source: CaptureEndpoint
        /// Its receiver.
        public var destination: CaptureEndpoint
        /// The ladder label (``CaptureAnalyzer/arrowLabel(_:)``) and the target: an INVITE's
        /// Request-URI, a REFER's Refer-To, a 3xx's Contacts.
        public var text: String
    }

    /// The steps of a call's transfer or forwarding story, in capture order (retransmissions
    /// and a proxy's forwards once each); empty for a call that is not `linked` to another and
    /// has no REFER, no 3xx, no Replaces, no Referred-By and no Diversion (nothing to tell).
    public static func story(of messages: [Message], linked: Bool = false) -> [StoryStep] {
        let told = linked || messages.contains { x in
            let m = x.message
            return m.method == .refer || m[.replaces] != nil || m[.referredBy] != nil || m[.diversion] != nil
                || (m.method == .notify && m[.event]?.lowercased().hasPrefix("refer") == true)
                || (300...399).contains(m.statusCode ?? 0)
        }
        guard told else { return [] }
        var out: [StoryStep] = []
        var seen: Set<String> = []
        var initial: Set<UInt32> = []   // CSeq numbers of initial INVITEs (a re-INVITE's steps are not told)
        for x in messages {
            let m = x.message
            guard let cseq = try? m.cseq() else { continue }
            if m.method == .invite, m.toTag == nil { initial.insert(cseq.sequence) }
            let initialInvite = cseq.method == .invite && initial.contains(cseq.sequence)
                && (m.isRequest ? m.toTag == nil : (m.statusCode ?? 0) >= 200)
            let interesting = initialInvite || cseq.method == .refer || cseq.method == .bye
                || (cseq.method == .notify && m.isRequest && m[.event]?.lowercased().hasPrefix("refer") == true)
            guard interesting, m.method != .ack else { continue }
            // One step per request or response, whoever forwarded it.
            guard seen.insert("\(cseq.sequence)|\(cseq.method.token)|\(m.statusCode ?? 0)|\(m.toTag ?? "")").inserted else { continue }
            var text = CaptureAnalyzer.arrowLabel(m)
            if m.method == .invite, let uri = try? m.requestURI() { text += " to \(uri)" }
            if m.method == .refer, let to = try? m.referTo() { text += ", Refer-To \(to.uri)" }
            if let code = m.statusCode, (300...399).contains(code), let contacts = (try? m.contact()) ?? nil {
                text += " → " + contacts.addresses.map { "\($0.uri)" }.joined(separator: ", ")
            }
            if m.statusCode != nil, cseq.method != .invite { text += " to the \(cseq.method.token)" }
            out.append(StoryStep(time: x.time, frameNumber: x.frameNumber, source: x.source, destination: x.destination, text: text))
        }
        return out
    }
}

/// One run of the rules over a call.
private struct Pass {
    let check: CaptureCheck
    let callID: String
    let ms: [CaptureCheck.Message]
    let origin: Int64
    let end: Double
    var findings: [CaptureCheck.Finding] = []

    /// What the rules read of each message, decoded once.
    struct Info {
        var method: SIPMethod?
        var code: Int?
        var cseq: CSeq?
        var branch: String
        var fromTag: String?
        var toTag: String?
        var time: Double
        var sdp: SessionDescription?
        var hasBody: Bool
    }
    let info: [Info]

    init(check: CaptureCheck, callID: String, messages: [CaptureCheck.Message], end: CaptureTimestamp) {
        self.check = check
        self.callID = callID
        ms = messages
        origin = messages.first?.time.totalNanoseconds ?? end.totalNanoseconds
        let o = origin
        self.end = Double(end.totalNanoseconds - o) / 1e9
        info = messages.map { x in
            let m = x.message
            var sdp: SessionDescription?
            if !m.body.isEmpty, let type = try? m.contentType(), type.essence.lowercased() == "application/sdp" {
                sdp = try? SessionDescription.parse(m.body)
            }
            return Info(method: m.method, code: m.statusCode, cseq: try? m.cseq(), branch: m.topViaBranch ?? "", fromTag: m.fromTag,
                        toTag: m.toTag, time: Double(x.time.totalNanoseconds - o) / 1e9, sdp: sdp, hasBody: !m.body.isEmpty)
        }
    }

    mutating func add(_ rule: ConformanceRule, _ index: Int, _ party: CaptureEndpoint, _ detail: String) {
        findings.append(.init(callID: callID, rule: rule, frameNumber: ms[index].frameNumber, time: ms[index].time, party: party, detail: detail))
    }

    static func format(_ seconds: Double) -> String {
        let ms = Int((seconds * 1000).rounded())
        let frac = String(abs(ms) % 1000)
        return (ms < 0 ? "-" : "") + "\(abs(ms) / 1000)." + String(repeating: "0", count: 3 - frac.count) + frac
    }

    /// Whether a reply `party` owed for the message at `index` counts as missing: the capture
    /// ran on for ``CaptureCheck/patience`` seconds, or `party` sent a request of this call later.
    func overdue(after index: Int, party: CaptureEndpoint) -> Bool {
        if end - info[index].time >= check.patience { return true }
        return ms.indices.contains { $0 > index && info[$0].method != nil && info[$0].method != .ack && ms[$0].source == party }
    }

    mutating func run() {
        clientRetransmissions()
        invite2xx()
        nonSuccessRetransmissions()
        nonSuccessAcks()
        requestsAfterBye()
        unknownDialogs()
        tags()
        cseqOrder()
        offerAnswer()
        contacts()
        referNotify()
        redirectLoops()
        messageRules()
    }

    /// The rules a single message shows (``MessageRules``): a NOTIFY without Subscription-State
    /// or, for a REFER, without a sipfrag status line; a REFER without exactly one Refer-To.
    mutating func messageRules() {
        for i in ms.indices {
            for p in MessageRules.notifyProblems(ms[i].message) { add(p.rule, i, ms[i].source, p.detail) }
            if let n = MessageRules.referToCount(ms[i].message), n != 1 {
                add(.referToCount, i, ms[i].source, "the REFER carries \(n) Refer-To values; exactly one is due")
            }
        }
    }

    // MARK: Transactions

    /// Timer A (INVITE) and Timer E (non-INVITE) over UDP: each client transaction's copies
    /// until its first response.
    mutating func clientRetransmissions() {
        struct Tx { var first: Int; var times: [Double] }
        var txs: [String: Tx] = [:], order: [String] = []
        for (i, x) in info.enumerated() {
            guard let method = x.method, method != .ack, !x.branch.isEmpty, !ms[i].reliable else { continue }
            let key = "\(ms[i].source)|\(x.branch)|\(method.token)"
            if txs[key] == nil { txs[key] = Tx(first: i, times: []); order.append(key) }
            txs[key]!.times.append(x.time)
        }
        let checker = RuleChecker(t1: check.t1, t2: check.t2)
        for key in order {
            let tx = txs[key]!
            let request = info[tx.first], party = ms[tx.first].source
            guard let method = request.method else { continue }
            let answered = ms.indices.first { j in
                j > tx.first && info[j].code != nil && info[j].branch == request.branch && info[j].cseq?.method == method
                    && ms[j].destination.address == party.address
            }.map { info[$0].time }
            // Timers B and F end the transaction 64·T1 after the request: no copy is due later
            // (which also bounds the schedule however far apart a capture's times are).
            let until = min(answered ?? end, request.time + check.patience)
            let invite = method == .invite
            for f in checker.retransmissionFindings(times: tx.times, until: until, firstIndex: tx.first,
                                                    rule: invite ? .inviteRetransmission : .nonInviteRetransmission,
                                                    what: method.token, cap: invite ? .infinity : check.t2,
                                                    until: answered == nil ? "the capture's end" : "a response") {
                add(f.rule, tx.first, party, f.detail)
            }
        }
    }

    /// The 2xx to INVITE: retransmitted by its sender until the ACK (RFC 3261 §13.3.1.4), and
    /// acknowledged by its receiver, every copy (RFC 3261 §13.2.2.4).
    mutating func invite2xx() {
        struct Answer { var indices: [Int] }
        var answers: [String: Answer] = [:], order: [String] = []
        for (i, x) in info.enumerated() {
            guard let code = x.code, (200...299).contains(code), let cseq = x.cseq, cseq.method == .invite else { continue }
            let key = "\(ms[i].source)|\(cseq.sequence)"
            if answers[key] == nil { answers[key] = Answer(indices: []); order.append(key) }
            answers[key]!.indices.append(i)
        }
        let checker = RuleChecker(t1: check.t1, t2: check.t2)
        for key in order {
            let a = answers[key]!
            let first = a.indices[0], sequence = info[first].cseq!.sequence
            let acks = ms.indices.filter { j in j > first && info[j].method == .ack && info[j].cseq?.sequence == sequence }
            // The sender's schedule until the first ACK.
            let ackTime = acks.first.map { info[$0].time }
            // Timer H: the UAS gives up 64·T1 after its first 2xx.
            let until = min(ackTime ?? end, info[first].time + check.patience)
            for f in checker.retransmissionFindings(times: a.indices.map { info[$0].time }, until: until, firstIndex: first,
                                                    rule: .retransmit2xx, what: "2xx to INVITE", cap: check.t2,
                                                    until: ackTime == nil ? "the capture's end" : "the ACK") {
                add(f.rule, first, ms[first].source, f.detail)
            }
            // The receiver's ACKs.
            let receiver = ms[first].destination
            guard let firstAck = acks.first else {
                if overdue(after: first, party: receiver) {
                    add(.ack2xx, first, receiver, "the \(info[first].code!) to the INVITE (CSeq \(sequence)) from \(ms[first].source) was never acknowledged")
                }
                continue
            }
            let copies = a.indices.filter { info[$0].time > info[firstAck].time }
            for (k, copy) in copies.enumerated() {
                let next = k + 1 < copies.count ? info[copies[k + 1]].time : end
                if k + 1 == copies.count && end - info[copy].time < max(2 * check.t1, 1) { break }
                if !acks.contains(where: { info[$0].time >= info[copy].time && info[$0].time <= next }) {
                    add(.ack2xx, copy, ms[copy].destination,
                        "the copy of the 2xx (CSeq \(sequence)) that came " + Self.format(info[copy].time - info[firstAck].time)
                            + " s after the first ACK was not acknowledged again")
                    break
                }
            }
        }
    }

    /// Timer G (RFC 3261 §17.2.1): over UDP, the UAS sends its non-2xx final response to INVITE
    /// again at T1, doubling up to T2, until the ACK on the INVITE's branch comes, or Timer H
    /// (64·T1 after the first copy) ends the transaction. Copies are matched by sender, branch
    /// and code.
    mutating func nonSuccessRetransmissions() {
        var finals: [String: [Int]] = [:], order: [String] = []
        for (i, x) in info.enumerated() {
            guard let code = x.code, code >= 300, let cseq = x.cseq, cseq.method == .invite, !ms[i].reliable else { continue }
            let key = "\(ms[i].source)|\(x.branch)|\(code)"
            if finals[key] == nil { finals[key] = []; order.append(key) }
            finals[key]!.append(i)
        }
        let checker = RuleChecker(t1: check.t1, t2: check.t2)
        for key in order {
            let copies = finals[key]!
            let first = copies[0], x = info[first], sender = ms[first].source
            let ackTime = ms.indices.first { j in
                j > first && info[j].method == .ack && info[j].branch == x.branch && ms[j].source.address == ms[first].destination.address
            }.map { info[$0].time }
            let until = min(ackTime ?? end, x.time + check.patience)
            for f in checker.retransmissionFindings(times: copies.map { info[$0].time }, until: until, firstIndex: first,
                                                    rule: .retransmitNon2xx, what: "\(x.code!) to INVITE", cap: check.t2,
                                                    until: ackTime == nil ? "the capture's end" : "the ACK") {
                add(f.rule, first, sender, f.detail)
            }
        }
    }

    /// A non-2xx final response to INVITE is acknowledged on the INVITE's branch (RFC 3261 §17.1.1.3).
    mutating func nonSuccessAcks() {
        var seen: Set<String> = []
        for (i, x) in info.enumerated() {
            guard let code = x.code, code >= 300, let cseq = x.cseq, cseq.method == .invite else { continue }
            let receiver = ms[i].destination
            guard seen.insert("\(receiver)|\(x.branch)").inserted else { continue }
            let acked = ms.indices.contains { j in
                j > i && info[j].method == .ack && info[j].branch == x.branch && info[j].cseq?.sequence == cseq.sequence
            }
            if !acked && overdue(after: i, party: receiver) {
                add(.ackNon2xx, i, receiver, "the \(code) to the INVITE (CSeq \(cseq.sequence)) from \(ms[i].source) was never acknowledged")
            }
        }
    }

    // MARK: Dialogs

    /// The tags of a message, unordered, as a dialog key.
    static func dialogKey(_ a: String?, _ b: String?) -> String? {
        guard let a, let b else { return nil }
        return a < b ? a + "|" + b : b + "|" + a
    }

    /// Once a BYE is answered 2xx, no more requests of the INVITE usage in its dialog (NOTIFY,
    /// SUBSCRIBE and REFER belong to other usages, RFC 5057, and are not counted).
    mutating func requestsAfterBye() {
        let session: Set<SIPMethod> = [.invite, .update, .info, .prack, .bye]
        var ended: [String: (time: Double, sequence: UInt32)] = [:]
        var reported: Set<String> = []
        var before: Set<String> = []   // "dialog|CSeq|method" of requests seen before the dialog ended
        for (i, x) in info.enumerated() {
            if let code = x.code, (200...299).contains(code), let cseq = x.cseq, cseq.method == .bye,
               let key = Self.dialogKey(x.fromTag, x.toTag), ended[key] == nil {
                ended[key] = (x.time, cseq.sequence)
                continue
            }
            guard let method = x.method, session.contains(method), let cseq = x.cseq, let key = Self.dialogKey(x.fromTag, x.toTag) else { continue }
            let id = "\(key)|\(cseq.sequence)|\(method.token)"
            guard let bye = ended[key], x.time >= bye.time else {
                before.insert(id)
                continue
            }
            // A forwarded copy or retransmission of a request sent before the end is not new.
            if before.contains(id) || reported.contains(key) { continue }
            reported.insert(key)
            add(.requestAfterBye, i, ms[i].source,
                "\(ms[i].source) sent \(method.token) (CSeq \(cseq.sequence)) in a dialog whose BYE (CSeq \(bye.sequence)) was answered 2xx "
                    + Self.format(x.time - bye.time) + " s before")
        }
    }

    /// A 481 says its request named a dialog or transaction its receiver does not have: the
    /// request's sender is named (a CANCEL that crossed the INVITE's final response is not).
    mutating func unknownDialogs() {
        var seen: Set<String> = []
        for (i, x) in info.enumerated() {
            guard x.code == 481, let cseq = x.cseq, seen.insert("\(cseq.sequence)|\(cseq.method.token)").inserted else { continue }
            if cseq.method == .cancel { continue }
            let request = ms.indices.first { info[$0].method == cseq.method && info[$0].cseq?.sequence == cseq.sequence && $0 < i }
            let party = request.map { ms[$0].source } ?? ms[i].destination
            add(.unknownDialog, i, party,
                "\(ms[i].source) answered 481 to the \(cseq.method.token) (CSeq \(cseq.sequence)) of \(party): it named a dialog or transaction that does not exist there")
        }
    }

    /// Requests in a dialog carry its tags; responses to them carry the request's To tag.
    mutating func tags() {
        let creating: Set<SIPMethod> = [.invite, .subscribe, .refer, .notify]
        var pairs: Set<String> = []        // "from|to" as the dialog's creator wrote them
        var tagsOfCall: Set<String> = []
        var reportedRequest: Set<String> = [], reportedResponse: Set<String> = []
        for (i, x) in info.enumerated() {
            if let code = x.code {
                guard let cseq = x.cseq else { continue }
                if (101...299).contains(code), creating.contains(cseq.method), let f = x.fromTag, let t = x.toTag {
                    pairs.insert(f + "|" + t)
                    tagsOfCall.insert(f)
                    tagsOfCall.insert(t)
                }
                // The response to a request inside a dialog keeps its To tag.
                guard let request = ms.indices.last(where: { j in
                    j < i && info[j].method == cseq.method && info[j].branch == x.branch && info[j].cseq?.sequence == cseq.sequence
                }), let requestTag = info[request].toTag, x.toTag != requestTag else { continue }
                guard reportedResponse.insert("\(ms[i].source)|\(x.branch)").inserted else { continue }
                add(.dialogTagStable, i, ms[i].source,
                    "the \(code) to the \(cseq.method.token) (CSeq \(cseq.sequence)) carries \(x.toTag.map { "To tag \($0)" } ?? "no To tag"); the request's To tag was \(requestTag)")
                continue
            }
            guard let method = x.method, method != .ack, method != .cancel, let to = x.toTag, let from = x.fromTag else { continue }
            if pairs.contains(from + "|" + to) || pairs.contains(to + "|" + from) { continue }
            // Only a request that keeps one tag of a known dialog and changes the other is judged
            // (one naming no known dialog at all is the 481 rule's, or a capture started mid-call).
            let keptFrom = tagsOfCall.contains(from), keptTo = tagsOfCall.contains(to)
            guard keptFrom != keptTo, reportedRequest.insert("\(ms[i].source)|\(from)|\(to)").inserted else { continue }
            let cseq = x.cseq.map { " (CSeq \($0.sequence))" } ?? ""
            add(.dialogTags, i, ms[i].source, keptFrom
                ? "the \(method.token)\(cseq) carries From tag \(from) of the dialog but To tag \(to), not the peer's tag of any dialog of the call"
                : "the \(method.token)\(cseq) carries To tag \(to) of the dialog but From tag \(from), not its sender's tag of any dialog of the call")
        }
    }

    /// Each sender's (From tag's) new requests in a call have increasing CSeq numbers (ACK and
    /// CANCEL repeat the INVITE's; a copy with the same number and method is a retransmission
    /// or a proxy's forward).
    mutating func cseqOrder() {
        var highest: [String: (sequence: UInt32, method: String)] = [:]
        var seen: Set<String> = []
        for (i, x) in info.enumerated() {
            guard let method = x.method, method != .ack, method != .cancel, let cseq = x.cseq, let from = x.fromTag else { continue }
            guard seen.insert("\(from)|\(cseq.sequence)|\(method.token)").inserted else { continue }
            if let last = highest[from], cseq.sequence <= last.sequence {
                add(.cseqIncreases, i, ms[i].source,
                    "the \(method.token) has CSeq \(cseq.sequence), not above the \(last.method) (CSeq \(last.sequence)) its sender (From tag \(from)) sent before")
            }
            if cseq.sequence > highest[from]?.sequence ?? 0 || highest[from] == nil { highest[from] = (cseq.sequence, method.token) }
        }
    }

    // MARK: Offer and answer

    /// RFC 3264 through RFC 3261 §13.2.1: an offer in the INVITE is answered in the first
    /// response with SDP, an offer in the 2xx in the ACK, an offer in a reliable 1xx (RFC 3262
    /// §5) in its PRACK; an UPDATE's offer in its 2xx.
    ///
    /// Each side of a dialog numbers its own requests (RFC 3261 §12.2.1.1), so a request, its
    /// responses and its ACK are paired by CSeq *and* the request's From tag — the sender's tag,
    /// the same on every hop —: a callee's re-INVITE with CSeq 1 is not the caller's INVITE 1.
    mutating func offerAnswer() {
        var done: Set<String> = []
        for (i, x) in info.enumerated() {
            guard let method = x.method, method == .invite || method == .update, let cseq = x.cseq else { continue }
            guard done.insert("\(cseq.sequence)|\(method.token)|\(x.fromTag ?? "")").inserted else { continue }
            let responses = ms.indices.filter { j in
                j > i && info[j].cseq?.sequence == cseq.sequence && info[j].cseq?.method == method && info[j].fromTag == x.fromTag
                    && (info[j].code ?? 0) > 100 && (info[j].code ?? 0) < 300
            }
            if let offer = x.sdp {
                // The first response with a session description is the answer.
                if let a = responses.first(where: { info[$0].sdp != nil }) {
                    judge(answer: info[a].sdp!, at: a, offer: offer, offerIndex: i)
                } else if method == .update, let ok = responses.first(where: { (200...299).contains(info[$0].code!) }) {
                    add(.offerAnswer, ok, ms[ok].source, "the \(info[ok].code!) to the UPDATE with an offer carries no answer")
                }
                if method == .invite, let ack = ms.indices.first(where: { j in
                    j > i && info[j].method == .ack && info[j].cseq?.sequence == cseq.sequence && info[j].fromTag == x.fromTag
                        && info[j].sdp != nil
                }), responses.contains(where: { info[$0].sdp != nil }) {
                    add(.offerAnswer, ack, ms[ack].source,
                        "the ACK carries a session description, an answer without an offer: the INVITE's offer was already answered")
                }
                continue
            }
            guard method == .invite, !x.hasBody else { continue }
            // No offer in the INVITE: the first reliable response carries it — a reliable 1xx
            // (RFC 3262 §5: answered in its PRACK) or the 2xx (answered in the ACK).
            if let rel = responses.first(where: { info[$0].code! < 200 && info[$0].sdp != nil && ms[$0].message[.rseq] != nil }) {
                reliableProvisionalOffer(at: rel, invite: cseq.sequence)
                continue
            }
            guard let ok = responses.first(where: { (200...299).contains(info[$0].code!) }) else { continue }
            // Neither carrying a session description is a call without media (load tests): no exchange to judge.
            guard let offer = info[ok].sdp else { continue }
            guard let ack = ms.indices.first(where: { j in
                j > ok && info[j].method == .ack && info[j].cseq?.sequence == cseq.sequence && info[j].fromTag == x.fromTag
            }) else { continue }
            guard let answer = info[ack].sdp else {
                add(.offerAnswer, ack, ms[ack].source, "the ACK carries no answer to the offer of the \(info[ok].code!) (the INVITE had none)")
                continue
            }
            judge(answer: answer, at: ack, offer: offer, offerIndex: ok)
        }
    }

    /// RFC 3262 §5: the offer of a reliable provisional response (the INVITE had none) is answered
    /// in the PRACK that acknowledges it (its RAck names the response's RSeq and the INVITE's
    /// CSeq). A PRACK that never came is not judged here.
    mutating func reliableProvisionalOffer(at rel: Int, invite cseq: UInt32) {
        guard let offer = info[rel].sdp, let rseq = (try? ms[rel].message.rseq()) ?? nil else { return }
        guard let prack = ms.indices.first(where: { j in
            guard j > rel, info[j].method == .prack, ms[j].source == ms[rel].destination,
                  let rack = (try? ms[j].message.rack()) ?? nil else { return false }
            return rack.rseq == rseq && rack.cseq == cseq && rack.method == .invite
        }) else { return }
        guard let answer = info[prack].sdp else {
            add(.offerAnswer, prack, ms[prack].source,
                "the PRACK carries no answer to the offer of the reliable \(info[rel].code!) (RSeq \(rseq); the INVITE had none)")
            return
        }
        judge(answer: answer, at: prack, offer: offer, offerIndex: rel)
    }

    mutating func judge(answer: SessionDescription, at index: Int, offer: SessionDescription, offerIndex: Int) {
        let problems = OfferAnswer.problems(answer: answer, offer: offer)
        guard !problems.isEmpty else { return }
        let what = info[index].method.map { "the \($0.token)" } ?? "the \(info[index].code!)"
        add(.offerAnswer, index, ms[index].source,
            "\(what)'s answer to the offer of frame \(ms[offerIndex].frameNumber): " + problems.map(\.description).joined(separator: "; "))
    }

    // MARK: Contacts, transfers, redirections

    /// Contact in a 2xx to INVITE (RFC 3261 §12.1.1) and in a 3xx (RFC 3261 §21.3).
    mutating func contacts() {
        var seen: Set<String> = []
        for (i, x) in info.enumerated() {
            guard let code = x.code, let cseq = x.cseq, ms[i].message.values(.contact).isEmpty else { continue }
            let redirect = [300, 301, 302, 305].contains(code)
            guard redirect || ((200...299).contains(code) && cseq.method == .invite) else { continue }
            guard seen.insert("\(ms[i].source)|\(cseq.sequence)|\(cseq.method.token)|\(code)").inserted else { continue }
            if redirect {
                add(.contactIn3xx, i, ms[i].source, "the \(code) to the \(cseq.method.token) (CSeq \(cseq.sequence)) has no Contact header field: it redirects nowhere")
            } else {
                add(.contactIn2xx, i, ms[i].source, "the \(code) to the INVITE (CSeq \(cseq.sequence)) has no Contact header field")
            }
        }
    }

    /// A REFER accepted 2xx is followed by NOTIFYs, the last with Subscription-State terminated
    /// (unless `Refer-Sub: false` asked for none, RFC 4488).
    mutating func referNotify() {
        var used: Set<Int> = []
        var seen: Set<String> = []
        for (i, x) in info.enumerated() {
            guard let code = x.code, (200...299).contains(code), let cseq = x.cseq, cseq.method == .refer,
                  seen.insert("\(cseq.sequence)").inserted else { continue }
            let noSubscription = ms.indices.contains { j in
                j <= i && info[j].cseq?.sequence == cseq.sequence && info[j].cseq?.method == .refer
                    && ms[j].message["Refer-Sub"]?.lowercased().hasPrefix("false") == true
            }
            if noSubscription { continue }
            let final = ms.indices.first { j in
                guard j > i, !used.contains(j), info[j].method == .notify,
                      ms[j].message[.event]?.lowercased().hasPrefix("refer") == true,
                      let state = (try? ms[j].message.subscriptionState()) ?? nil else { return false }
                return state.state.lowercased() == "terminated"
            }
            if let final {
                used.insert(final)
            } else if end - x.time >= check.patience {
                add(.referNotify, i, ms[i].source,
                    "\(ms[i].source) accepted the REFER (CSeq \(cseq.sequence)) with \(code), and no NOTIFY ending its subscription came in the "
                        + Self.format(end - x.time) + " s the capture runs on")
            }
        }
    }

    /// `user@host:port` of a Request-URI (host lower-cased), what a 3xx chain compares.
    static func target(_ m: SIPMessage) -> String? {
        guard let uri = try? m.requestURI() else { return nil }
        return CaptureAnalyzer.target(uri)
    }

    /// A party that follows a 3xx to a target it already tried in the call loops.
    mutating func redirectLoops() {
        var tried: [CaptureEndpoint: Set<String>] = [:]
        var lastFinal: [CaptureEndpoint: Int] = [:]
        var branches: Set<String> = []
        for (i, x) in info.enumerated() {
            if let code = x.code, code >= 200, x.cseq?.method == .invite {
                lastFinal[ms[i].destination] = code
                continue
            }
            guard x.method == .invite, x.toTag == nil, let target = Self.target(ms[i].message) else { continue }
            let party = ms[i].source
            guard branches.insert("\(party)|\(x.branch)").inserted else { continue }
            if tried[party, default: []].contains(target), let code = lastFinal[party], (300...399).contains(code) {
                add(.redirectLoop, i, party, "after a \(code), \(party) sent the INVITE to \(target) again: that target was already tried in this call")
            }
            tried[party, default: []].insert(target)
        }
    }
}
