import SIPMessage
import SDP
import PacketCapture
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the SIP messages of a capture say, built one message at a time (`switchboard capture`).
///
/// Feed it with ``add(_:)`` in capture order, report anomalies with ``noteAnomaly()``, then call
/// ``finish()``. Messages are grouped into calls by Call-ID. A call stays *live* (with its
/// retransmission keys and, when asked for, its ladder arrows) until it is settled — its BYE
/// answered, every INVITE rejected, or, without INVITE, every transaction answered — and then
/// quiet for ``settleSeconds`` of capture time; it is then folded into the summary and, when
/// ``keepCalls`` is set, kept as a small ``Call`` record (no messages). Memory is thus bounded by
/// the live calls (plus the kept records), never by the file size.
///
/// **Retransmission**: a message is a retransmission when the same source already sent, in the
/// same Call-ID, a message with the same CSeq number and method, the same status code (or the
/// same request method), the same top Via branch, the same To tag and the same RSeq. A message
/// forwarded by a proxy (another source) is not one; neither are forked responses (other To
/// tags) or distinct reliable provisionals (other RSeq). Retransmissions still count in the
/// per-method and per-code tables (as `tshark -z sip,stat` counts every packet) and in a call's
/// message count, and are counted apart in ``Summary/retransmissions``.
public struct CaptureAnalyzer: Sendable {
    /// How a call's INVITE ended.
    public enum Outcome: Sendable, Hashable, CustomStringConvertible {
        /// An INVITE got a 2xx.
        case answered
        /// The last INVITE got this final non-2xx code (other than 487).
        case rejected(Int)
        /// The last INVITE got 487, or was CANCELled and got no final response.
        case cancelled
        /// The last INVITE got no final response.
        case noAnswer
        /// The Call-ID carried no INVITE (REGISTER, OPTIONS, SUBSCRIBE, MESSAGE …).
        case noInvite

        /// `answered`, `rejected 486`, `cancelled`, `no answer`, `no INVITE`.
        public var description: String {
            switch self {
            case .answered: return "answered"
            case .rejected(let c): return "rejected \(c)"
            case .cancelled: return "cancelled"
            case .noAnswer: return "no answer"
            case .noInvite: return "no INVITE"
            }
        }

        /// A stable JSON key: `answered`, `rejected`, `cancelled`, `noAnswer`, `noInvite`.
        public var key: String {
            switch self {
            case .answered: return "answered"
            case .rejected: return "rejected"
            case .cancelled: return "cancelled"
            case .noAnswer: return "noAnswer"
            case .noInvite: return "noInvite"
            }
        }

        /// The rejecting status code, for ``rejected(_:)``.
        public var code: Int? { if case .rejected(let c) = self { return c } else { return nil } }

        /// Orders outcomes for display: answered, rejected by code, cancelled, no answer, no INVITE.
        public var sortKey: (Int, Int) {
            switch self {
            case .answered: return (0, 0)
            case .rejected(let c): return (1, c)
            case .cancelled: return (2, 0)
            case .noAnswer: return (3, 0)
            case .noInvite: return (4, 0)
            }
        }
    }

    /// One transaction of a call: a request method and CSeq number (ACKs are not listed).
    public struct Transaction: Sendable, Hashable {
        /// The CSeq method.
        public var method: String
        /// The CSeq number.
        public var cseq: UInt32
        /// The final status code seen: the first 2xx, else the first final response; `nil` when none.
        public var finalCode: Int?
    }

    /// An RTP address announced in SDP (a `c=` address and an `m=` port; RTP itself is not read).
    public struct RTPAddress: Sendable, Hashable, CustomStringConvertible {
        /// The media type (`audio`, `video` …).
        public var media: String
        /// The connection address.
        public var address: String
        /// The media port.
        public var port: UInt16
        /// Who sent the SDP.
        public var announcedBy: CaptureEndpoint

        /// `audio 10.0.0.1:4000`.
        public var description: String { "\(media) \(address.contains(":") ? "[\(address)]" : address):\(port)" }
    }

    /// One message as an arrow of a ladder diagram.
    public struct Arrow: Sendable, Hashable {
        /// When it was captured.
        public var time: CaptureTimestamp
        /// Sender.
        public var source: CaptureEndpoint
        /// Receiver.
        public var destination: CaptureEndpoint
        /// The method, or the status code and reason phrase.
        public var label: String
        /// The frame that carried (completed) it.
        public var frameNumber: Int
        /// Whether it was a retransmission.
        public var retransmission: Bool
        /// The whole message as text (invalid UTF-8 replaced), when the analysis keeps messages
        /// (``CaptureAnalyzer/keepMessages``; for the HTML ladder).
        public var text: String?
    }

    /// Everything learned about one Call-ID.
    public struct Call: Sendable {
        /// The Call-ID (empty when the messages had none).
        public var callID: String
        /// The first message's time.
        public var first: CaptureTimestamp
        /// The last message's time.
        public var last: CaptureTimestamp
        /// The From URI of the first message.
        public var from: String?
        /// The To URI of the first message.
        public var to: String?
        /// How the INVITE ended.
        public var outcome: Outcome
        /// Nanoseconds from the first INVITE to its first 18x or 2xx.
        public var setupTime: Int64?
        /// Nanoseconds from the first INVITE to its first 2xx.
        public var answerTime: Int64?
        /// Nanoseconds from the first 2xx to an INVITE to the first BYE.
        public var duration: Int64?
        /// Messages seen, retransmissions included.
        public var messageCount: Int
        /// How many of them were retransmissions.
        public var retransmissions: Int
        /// The transactions, in order of first appearance.
        public var transactions: [Transaction]
        /// The RTP addresses announced in SDP bodies, in order, without repeats.
        public var rtp: [RTPAddress]
        /// The media streams announced in SDP bodies, in order, without repeats, with their RTCP
        /// addresses and the RTP and RTCP packets seen (counted for `--calls`; empty otherwise).
        public var media: [MediaStream] = []
        /// The dialogs, in order of creation.
        public var dialogs: [Dialog] = []
        /// Positions of ``media`` in the analysis's stream table (filled at ``CaptureAnalyzer/finish()``).
        var mediaRefs: [Int] = []
        /// Other Call-IDs tied to this one by Replaces (header or Refer-To) or a 3xx Contact.
        public var linked: [String]
        /// The messages as ladder arrows (only when the analysis was asked to record them).
        public var arrows: [Arrow]
        /// The rules its parties broke (``CaptureCheck``), when the analysis checks calls
        /// (``CaptureAnalyzer/checks``), in frame order.
        public var findings: [CaptureCheck.Finding] = []
        /// Messages of the call the check did not look at (past ``CaptureCheck/maximumMessages``).
        public var uncheckedMessages = 0
        /// Its steps of a transfer or forwarding (``CaptureCheck/story(of:)``), when the
        /// analysis checks calls; empty when there is none.
        public var story: [CaptureCheck.StoryStep] = []
    }

    /// Totals, like `tshark -q -z sip,stat`, and calls by outcome.
    public struct Summary: Sendable, Equatable {
        /// SIP messages seen.
        public var messages = 0
        /// Requests seen.
        public var requests = 0
        /// Responses seen.
        public var responses = 0
        /// Messages that were retransmissions (see ``CaptureAnalyzer``).
        public var retransmissions = 0
        /// Requests by method token (retransmissions included).
        public var requestsByMethod: [String: Int] = [:]
        /// Responses by status code (retransmissions included).
        public var responsesByCode: [Int: Int] = [:]
        /// The first reason phrase seen for each status code.
        public var reasonPhrases: [Int: String] = [:]
        /// Call-IDs that carried an INVITE.
        public var calls = 0
        /// Call-IDs by outcome (``Outcome/noInvite`` for those without INVITE).
        public var callsByOutcome: [Outcome: Int] = [:]
        /// Capture anomalies reported through ``noteAnomaly()``.
        public var anomalies = 0
        /// The first message's time.
        public var first: CaptureTimestamp?
        /// The last message's time.
        public var last: CaptureTimestamp?
    }

    /// Which calls keep their ladder arrows.
    public enum LadderSelection: Sendable, Hashable {
        /// None.
        case none
        /// Every call (the arrows, a few dozen bytes a message, then grow with the file).
        case all
        /// The call with this Call-ID.
        case call(String)
    }

    /// The totals so far (complete after ``finish()``).
    public private(set) var summary = Summary()
    /// The finished calls, ordered by first message (complete after ``finish()``); only kept
    /// when ``keepCalls`` is set, or for the ladder's calls.
    public private(set) var calls: [Call] = []
    /// Whether finished calls are kept in ``calls``.
    public let keepCalls: Bool
    /// Which calls record ladder arrows.
    public let ladder: LadderSelection
    /// Whether ladder arrows keep the whole message text (``Arrow/text``).
    public let keepMessages: Bool
    /// Whether each call is replayed through ``CaptureCheck`` when it is finished (its messages
    /// are kept while it is live, at most ``CaptureCheck/maximumMessages`` a call).
    public let checks: Bool
    /// The rule check's timers.
    public var checker = CaptureCheck()
    /// Whether calls are kept or drawn, so that what only a call record shows (From, To, SDP
    /// addresses, links) is worth decoding; the summary alone skips it.
    private let details: Bool
    /// How long a settled call stays live after its last message (capture time), so that late
    /// retransmissions are still recognized (64·T1).
    public var settleSeconds: Int64 = 32

    /// The live calls, in no order; ``liveIndex`` maps a Call-ID's bytes to a position here
    /// (removal moves the last call into the hole). The calls sit in an array so that growing
    /// the index moves small entries, not calls.
    private var liveCalls: [LiveCall] = []
    private var liveKeys: [SIPByteKey] = []
    private var liveIndex = CallIndex()
    /// Where recent methods and codes sit in the summary's tables (valid until the next insertion).
    private var methodSlots: [(SIPMethod, [String: Int].Index)] = []
    private var codeSlots: [(Int, [Int: Int].Index)] = []
    private var nextSweep: Int64 = .min
    /// 3xx Contact or Refer-To target (user@host:port) → the Call-ID that named it (bounded,
    /// oldest dropped first).
    private var redirects: [String: String] = [:]
    /// The media streams of the calls, with their packet counts (only when call records are kept).
    private var mediaCounter = MediaCounter()
    private var redirectOrder: [String] = []
    private static let maxRedirects = 4096
    /// For the check across Call-IDs: a 3xx Contact target (user@host:port) → the Call-ID of the
    /// 3xx, when it came and to whom (the party expected to follow it); and per Call-ID the
    /// targets its redirect chain tried, the call's own first. Both bounded, oldest dropped first.
    private var redirectedBy: [String: (callID: String, time: CaptureTimestamp, party: CaptureEndpoint)] = [:]
    private var redirectedOrder: [String] = []
    private var chains: [String: [String]] = [:]
    private var chainOrder: [String] = []
    /// Targets one redirect chain remembers.
    private static let maxChainTargets = 32

    /// The RTP stream analysis, when asked for (fed by ``add(_:)-(CapturedDatagram)`` with
    /// datagrams that carry their payloads, and by the SDP of the calls).
    public private(set) var rtp: RTPStreamAnalyzer?

    /// An empty analysis; with `rtp`, RTP streams are analyzed too (``rtp``), keeping their
    /// payloads when `rtpPayloads` is set (for audio export), SRTP decrypted as `srtp` says.
    /// With `check`, every call is replayed through ``CaptureCheck`` (``Call/findings``); with
    /// `rtpTimelines`, each RTP stream keeps its ``RTPStreamAnalyzer/Stream/timeline``.
    public init(keepCalls: Bool = true, ladder: LadderSelection = .none, keepMessages: Bool = false, rtp: Bool = false, rtpPayloads: Bool = false,
                srtp: SRTPCaptureOptions = SRTPCaptureOptions(), check: Bool = false, rtpTimelines: Bool = false) {
        self.keepCalls = keepCalls
        self.ladder = ladder
        self.keepMessages = keepMessages
        self.checks = check
        if rtp { self.rtp = RTPStreamAnalyzer(keepPayloads: rtpPayloads, srtp: srtp, timelines: rtpTimelines) }
        details = keepCalls || ladder != .none || rtp || check
    }

    /// Calls not yet finished (for tests of the memory bound).
    var liveCallCount: Int { liveCalls.count }

    /// Whether finished calls may be kept (so their order matters); the summary alone only counts them.
    private var keepsRecords: Bool { keepCalls || ladder != .none }

    /// Counts one capture anomaly.
    public mutating func noteAnomaly() { summary.anomalies += 1 }

    /// Takes in the next message (in capture order).
    public mutating func add(_ captured: CapturedSIPMessage) {
        let m = captured.message
        let d = SIPMessageDigest(m, reasonPhrase: m.statusCode.map { summary.responsesByCode[$0] == nil } ?? false)
        let (i, retransmission, counted) = take(d, time: captured.timestamp, source: captured.source)
        let recordArrows: Bool
        switch ladder {
        case .none: recordArrows = false
        case .all: recordArrows = true
        case .call(let id): recordArrows = id == liveCalls[i].callID
        }
        let announced = liveCalls[i].note(captured, retransmission: retransmission, counted: counted, recordArrow: recordArrows,
                                          keepText: keepMessages, details: details)
        if checks {
            if liveCalls[i].checked.count < CaptureCheck.maximumMessages {
                liveCalls[i].checked.append(CaptureCheck.Message(captured))
            } else {
                liveCalls[i].unchecked += 1
            }
        }
        for stream in announced where !liveCalls[i].mediaRefs.contains(where: { mediaCounter.streams[$0].sameStream(as: stream) }) {
            liveCalls[i].mediaRefs.append(mediaCounter.add(stream))
        }
        if rtp != nil { for stream in announced { rtp!.announce(stream, callID: liveCalls[i].callID) } }
        if !retransmission && checks, let loop = followRedirects(liveCalls[i].callID, captured) {
            liveCalls[i].crossFindings.append(loop)
        }
        if !retransmission && details {
            let callID = liveCalls[i].callID
            for other in links(of: callID, m) where !liveCalls[i].linked.contains(other) {
                liveCalls[i].linked.append(other)
                // The other call, if still live, is part of a story too (its link is made mutual
                // only at the end); links are rare, so the live calls are searched.
                if checks, let j = liveCalls.firstIndex(where: { $0.callID == other }) { liveCalls[j].inStory = true }
            }
        }
    }

    /// Takes in the next message as its digest (in capture order), from a decoder made with
    /// `digests: true`: what the summary counts is the same as through ``add(_:)-(CapturedSIPMessage)``,
    /// but a digest holds nothing of what only call records show (From, To, SDP, links, arrows).
    public mutating func add(_ captured: CapturedSIPDigest) {
        _ = take(captured.digest, time: captured.timestamp, source: captured.source)
    }

    /// Takes in a UDP datagram that carried no SIP (from a decoder made with `datagrams: true`):
    /// counted as RTP or RTCP in the media streams of the calls whose SDP announced its source or
    /// destination (only when call records are kept).
    public mutating func add(_ datagram: CapturedDatagram) {
        // The per-call packet counts are for --calls; the RTP analysis counts its own streams.
        if rtp != nil { rtp!.add(datagram) } else if details { mediaCounter.count(datagram) }
    }

    /// Takes in an RTP datagram lent in place (``SIPCaptureReader/nextEvents(into:rtp:)``): the
    /// same as ``add(_:)-(CapturedDatagram)`` with its ``BorrowedDatagram/datagram``, without the copy.
    public mutating func add(_ datagram: BorrowedDatagram) {
        if rtp != nil {
            rtp!.add(datagram)
        } else if details {
            mediaCounter.count(CapturedDatagram(timestamp: datagram.timestamp, source: datagram.source, destination: datagram.destination,
                                                frameNumber: datagram.frameNumber, length: datagram.payload.count, kind: .rtp))
        }
    }

    /// Counts a message in the summary and its call; returns the call's position, whether the
    /// message was a retransmission and whether it counted in its call's transactions.
    private mutating func take(_ d: SIPMessageDigest, time t: CaptureTimestamp, source: CaptureEndpoint) -> (Int, Bool, Bool) {
        sweep(now: t)
        summary.messages += 1
        if summary.first == nil || t < summary.first! { summary.first = t }
        if summary.last == nil || summary.last! < t { summary.last = t }
        if let method = d.method {
            summary.requests += 1
            countRequest(method)
        } else if let code = d.statusCode {
            summary.responses += 1
            countResponse(code, reason: d.reasonPhrase)
        }
        // Calls are found by the Call-ID's bytes (compared byte for byte, RFC 3261 §20.8), held
        // inline in the key (no allocation); the String is made once per call. The call is
        // changed in place in its array: a LiveCall holds a dozen collections, and moving it out
        // and back costs more than the rest.
        let key = d.callID ?? SIPByteKey()
        let i: Int
        if let found = liveIndex.find(key, in: liveKeys) {
            i = found
        } else {
            i = liveCalls.count
            liveCalls.append(LiveCall(callID: key.string, time: t))
            liveKeys.append(key)
            liveIndex.insert(i, in: liveKeys)
        }
        let (retransmission, counted) = liveCalls[i].absorb(d, time: t, source: source)
        if retransmission { summary.retransmissions += 1 }
        return (i, retransmission, counted)
    }

    /// Ends the analysis: every live call is finished, calls are ordered and links made mutual.
    public mutating func finish() {
        var order = Array(liveCalls.indices)
        if keepsRecords { order.sort { (liveCalls[$0].first, liveCalls[$0].callID) < (liveCalls[$1].first, liveCalls[$1].callID) } }
        let end = summary.last ?? CaptureTimestamp(seconds: 0, nanoseconds: 0)
        for i in order { retire(at: i, end: end) }
        liveCalls.removeAll()
        liveKeys.removeAll()
        liveIndex = CallIndex()
        calls.sort { ($0.first, $0.callID) < ($1.first, $1.callID) }
        for i in calls.indices { calls[i].media = calls[i].mediaRefs.map { mediaCounter.streams[$0] } }
        if rtp != nil { rtp!.finish() }
        var index: [String: Int] = [:]
        for (i, c) in calls.enumerated() { index[c.callID] = i }
        for i in calls.indices {
            for other in calls[i].linked {
                if let j = index[other], !calls[j].linked.contains(calls[i].callID) { calls[j].linked.append(calls[i].callID) }
            }
        }
    }

    /// Counts a request in ``Summary/requestsByMethod`` through ``methodSlots`` (no string
    /// hashing once the method has been seen).
    private mutating func countRequest(_ method: SIPMethod) {
        for (known, slot) in methodSlots where known == method {
            summary.requestsByMethod.values[slot] += 1
            return
        }
        let token = method.token
        if let slot = summary.requestsByMethod.index(forKey: token) {
            summary.requestsByMethod.values[slot] += 1
        } else {
            summary.requestsByMethod[token] = 1
            methodSlots.removeAll()  // an insertion may move every entry
        }
        if methodSlots.count < 16, let slot = summary.requestsByMethod.index(forKey: token) { methodSlots.append((method, slot)) }
    }

    /// Counts a response in ``Summary/responsesByCode``, noting its reason phrase the first time
    /// the code appears.
    private mutating func countResponse(_ code: Int, reason: String?) {
        for (known, slot) in codeSlots where known == code {
            summary.responsesByCode.values[slot] += 1
            return
        }
        if let slot = summary.responsesByCode.index(forKey: code) {
            summary.responsesByCode.values[slot] += 1
        } else {
            summary.responsesByCode[code] = 1
            summary.reasonPhrases[code] = reason ?? ""
            codeSlots.removeAll()
        }
        if codeSlots.count < 16, let slot = summary.responsesByCode.index(forKey: code) { codeSlots.append((code, slot)) }
    }

    /// Finishes the settled calls that have been quiet for ``settleSeconds`` (checked once per
    /// second of capture time).
    private mutating func sweep(now: CaptureTimestamp) {
        guard now.seconds >= nextSweep else { return }
        nextSweep = now.seconds + 1
        var done: [Int] = []
        for i in liveCalls.indices where liveCalls[i].last.seconds + settleSeconds < now.seconds && liveCalls[i].settled {
            done.append(i)
        }
        guard !done.isEmpty else { return }
        if keepsRecords {
            for i in done.sorted(by: { (liveCalls[$0].first, liveCalls[$0].callID) < (liveCalls[$1].first, liveCalls[$1].callID) }) {
                retire(at: i, end: now)
            }
        } else {
            for i in done { retire(at: i, end: now) }
        }
        // Highest position first: the call moved into each hole is never one still to remove.
        for i in done.reversed() { removeLive(at: i) }
    }

    private mutating func removeLive(at i: Int) {
        liveIndex.remove(i, in: liveKeys)
        let last = liveCalls.count - 1
        if i != last {
            liveIndex.move(last, to: i, in: liveKeys)
            liveCalls.swapAt(i, last)
            liveKeys.swapAt(i, last)
        }
        liveCalls.removeLast()
        liveKeys.removeLast()
    }

    /// Counts the live call at `i` (read in place, not copied) and keeps its record if wanted
    /// (checked, when the analysis checks, against a capture that ran to `end`); the caller removes it.
    private mutating func retire(at i: Int, end: CaptureTimestamp) {
        let outcome = liveCalls[i].outcome
        summary.callsByOutcome[outcome, default: 0] += 1
        if outcome != .noInvite { summary.calls += 1 }
        let wanted: Bool
        switch ladder {
        case .none: wanted = keepCalls
        case .all: wanted = true
        case .call(let id): wanted = keepCalls || id == liveCalls[i].callID
        }
        guard wanted else { return }
        var call = liveCalls[i].finished()
        if checks {
            call.findings = checker.check(callID: call.callID, messages: liveCalls[i].checked, captureEnd: end)
            if !liveCalls[i].crossFindings.isEmpty {
                call.findings = (call.findings + liveCalls[i].crossFindings).sorted { ($0.frameNumber, $0.rule.id) < ($1.frameNumber, $1.rule.id) }
            }
            call.uncheckedMessages = liveCalls[i].unchecked
            call.story = CaptureCheck.story(of: liveCalls[i].checked, linked: liveCalls[i].inStory || !liveCalls[i].linked.isEmpty)
        }
        calls.append(call)
    }

    /// The URI of a message's Referred-By header (RFC 3892), if it has one that parses.
    /// A ladder arrow's label: the method, or the status code and reason phrase, followed by
    /// what makes a transfer or forwarding flow readable, in parentheses: the `message/sipfrag`
    /// status and Subscription-State of a NOTIFY (`NOTIFY (100 Trying, active)`), Replaces
    /// (header, or in a REFER's Refer-To), Referred-By and Diversion of a request, the number of
    /// Contacts and Diversion of a 3xx.
    public static func arrowLabel(_ m: SIPMessage) -> String {
        var notes: [String] = []
        let label: String
        if let method = m.method {
            label = method.token
            if method == .notify, let type = try? m.contentType(), type.essence.lowercased() == "message/sipfrag" {
                notes.append((try? SIPFragStatus(parsing: Array(m.body.prefix(SIPFragStatus.maximumLength)))).map { "\($0.statusCode)" + ($0.reasonPhrase.isEmpty ? "" : " " + $0.reasonPhrase) }
                             ?? "sipfrag?")
            }
            if method == .notify || method == .subscribe, let state = (try? m.subscriptionState()) ?? nil { notes.append(state.state) }
            if m[.replaces] != nil || (method == .refer && ((try? m.referToReplaces()) ?? nil) != nil) { notes.append("Replaces") }
            if m[.referredBy] != nil { notes.append("Referred-By") }
        } else {
            label = "\(m.statusCode ?? 0)" + ((m.reasonPhrase ?? "").isEmpty ? "" : " " + m.reasonPhrase!)
            if let code = m.statusCode, (300...399).contains(code) {
                let n = ((try? m.contact()) ?? nil)?.addresses.count ?? 0
                notes.append("\(n) Contact\(n == 1 ? "" : "s")")
            }
        }
        if m[.diversion] != nil && (m.method == .invite || m.statusCode.map { (300...399).contains($0) } == true) { notes.append("Diversion") }
        return notes.isEmpty ? label : label + " (" + notes.joined(separator: ", ") + ")"
    }

    static func referredBy(_ m: SIPMessage) -> URI? {
        guard let v = m[.referredBy] else { return nil }
        return (try? NameAddress(v))?.uri
    }

    /// `user@host:port` of a URI (host lower-cased; port 0 when absent): how redirect targets,
    /// Refer-To targets and Request-URIs are compared.
    static func target(_ uri: URI) -> String {
        guard case .sip(let u) = uri else { return uri.description }
        return "\(u.user ?? "")@\(u.host.description.lowercased()):\(u.port ?? 0)"
    }

    /// RFC 3261 §8.1.3.4 across Call-IDs: a party that follows a 3xx with a new Call-ID (RFC 3261
    /// allows it) starts a new call; the per-call check cannot see a loop through such calls. A 3xx
    /// to INVITE remembers its Contacts; the first initial INVITE of a call, sent by the party that
    /// got such a 3xx within 64·T1 to one of its Contacts, continues that call's chain, and a target
    /// the chain already tried is a loop (the finding belongs to the new call).
    private mutating func followRedirects(_ callID: String, _ captured: CapturedSIPMessage) -> CaptureCheck.Finding? {
        let m = captured.message
        if let code = m.statusCode, (300...399).contains(code), (try? m.cseq())?.method == .invite,
           let contacts = try? m.contact()?.addresses {
            for c in contacts {
                let key = CaptureAnalyzer.target(c.uri)
                if redirectedBy.updateValue((callID, captured.timestamp, captured.destination), forKey: key) == nil { redirectedOrder.append(key) }
            }
            if redirectedOrder.count > CaptureAnalyzer.maxRedirects {
                let drop = redirectedOrder.count - CaptureAnalyzer.maxRedirects
                for k in redirectedOrder.prefix(drop) { redirectedBy.removeValue(forKey: k) }
                redirectedOrder.removeFirst(drop)
            }
            return nil
        }
        guard m.method == .invite, m.toTag == nil, let uri = try? m.requestURI() else { return nil }
        let target = CaptureAnalyzer.target(uri)
        if var tried = chains[callID] {
            // A later INVITE of the same call (the per-call check judges it): the chain grows.
            if !tried.contains(target), tried.count < CaptureAnalyzer.maxChainTargets {
                tried.append(target)
                chains[callID] = tried
            }
            return nil
        }
        var tried: [String] = []
        var finding: CaptureCheck.Finding?
        if let by = redirectedBy[target], by.callID != callID, by.party == captured.source,
           Double(captured.timestamp.totalNanoseconds - by.time.totalNanoseconds) / 1e9 <= checker.patience,
           let before = chains[by.callID] {
            if before.contains(target) {
                finding = CaptureCheck.Finding(
                    callID: callID, rule: .redirectLoop, frameNumber: captured.frameNumber, time: captured.timestamp, party: captured.source,
                    detail: "after a 3xx in call \(by.callID), \(captured.source) sent a new INVITE (new Call-ID) to \(target) again: "
                        + "that target was already tried in the redirect chain (\(before.joined(separator: " → ")))")
            }
            tried = Array(before.suffix(CaptureAnalyzer.maxChainTargets - 1))
        }
        tried.append(target)
        chains[callID] = tried
        chainOrder.append(callID)
        if chainOrder.count > CaptureAnalyzer.maxRedirects {
            let drop = chainOrder.count - CaptureAnalyzer.maxRedirects
            for k in chainOrder.prefix(drop) { chains.removeValue(forKey: k) }
            chainOrder.removeFirst(drop)
        }
        return finding
    }

    /// Ties Call-IDs together: Replaces (header or in Refer-To), and an initial INVITE sent to a
    /// URI that a 3xx of another Call-ID redirected to, or that a REFER of another Call-ID named
    /// in Refer-To (blind transfer: the transferee's new call), or whose Referred-By names the
    /// referrer of another Call-ID's REFER (the INVITE a REFER triggered, RFC 3892 §3).
    /// URIs are compared by user, host (case-insensitive) and port.
    private mutating func links(of callID: String, _ m: SIPMessage) -> [String] {
        var found: [String] = []
        func add(_ other: String) {
            if other != callID, !found.contains(other) { found.append(other) }
        }
        func target(_ uri: URI) -> String { CaptureAnalyzer.target(uri) }
        func remember(_ uri: URI) { remember(key: target(uri)) }
        func remember(key: String) {
            if redirects.updateValue(callID, forKey: key) == nil { redirectOrder.append(key) }
            if redirectOrder.count > CaptureAnalyzer.maxRedirects {
                let drop = redirectOrder.count - CaptureAnalyzer.maxRedirects
                for k in redirectOrder.prefix(drop) { redirects.removeValue(forKey: k) }
                redirectOrder.removeFirst(drop)
            }
        }
        if let r = try? m.replaces() { add(r.callID) }
        if m.method == .refer {
            if let r = try? m.referToReplaces() { add(r.callID) }
            if let to = try? m.referTo() { remember(to.uri) }
            // The Referred-By of a REFER is copied into the INVITE it triggers (RFC 3892 §3).
            if let by = CaptureAnalyzer.referredBy(m) { remember(key: "referred-by " + target(by)) }
        }
        if m.method == .invite, m.toTag == nil, let by = CaptureAnalyzer.referredBy(m), let other = redirects["referred-by " + target(by)] {
            add(other)
        }
        if m.method == .invite, m.toTag == nil, let uri = try? m.requestURI(), let other = redirects[target(uri)] {
            add(other)
        }
        if let code = m.statusCode, (300...399).contains(code), (try? m.cseq())?.method == .invite,
           let contacts = try? m.contact()?.addresses {
            for c in contacts { remember(c.uri) }
        }
        return found
    }
}

/// Positions of the live calls by Call-ID: an open-addressing table (linear probing,
/// backward-shift deletion) of positions in the keys array, hashed by the keys' precomputed
/// ``SIPByteKey/hashWord`` — no hashing per lookup, unlike a `Dictionary`.
private struct CallIndex {
    private var slots = [Int32](repeating: -1, count: 1024)
    private var count = 0
    private var mask: Int { slots.count - 1 }

    @inline(__always) private func home(_ k: SIPByteKey) -> Int { Int(truncatingIfNeeded: k.hashWord ^ (k.hashWord >> 32)) & mask }

    /// The position of `key` in `keys`, if present.
    func find(_ key: SIPByteKey, in keys: [SIPByteKey]) -> Int? {
        var i = home(key)
        while true {
            let p = slots[i]
            if p < 0 { return nil }
            if keys[Int(p)] == key { return Int(p) }
            i = (i + 1) & mask
        }
    }

    /// The slot holding position `position`.
    private func slot(of position: Int, in keys: [SIPByteKey]) -> Int {
        var i = home(keys[position])
        while Int(slots[i]) != position { i = (i + 1) & mask }
        return i
    }

    /// Adds `keys[position]` (not present).
    mutating func insert(_ position: Int, in keys: [SIPByteKey]) {
        if (count + 1) * 2 > slots.count {
            slots = [Int32](repeating: -1, count: slots.count * 2)
            count = 0
            for p in keys.indices where p != position { place(p, keys) }
        }
        place(position, keys)
    }

    private mutating func place(_ position: Int, _ keys: [SIPByteKey]) {
        var i = home(keys[position])
        while slots[i] >= 0 { i = (i + 1) & mask }
        slots[i] = Int32(position)
        count += 1
    }

    /// Removes `keys[position]`, shifting back the entries that probed past it.
    mutating func remove(_ position: Int, in keys: [SIPByteKey]) {
        var hole = slot(of: position, in: keys)
        var j = hole
        while true {
            j = (j + 1) & mask
            let p = slots[j]
            if p < 0 { break }
            let h = home(keys[Int(p)])
            // The entry at j may move to the hole when its home is not cyclically in (hole, j].
            let between = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j)
            if !between {
                slots[hole] = p
                hole = j
            }
        }
        slots[hole] = -1
        count -= 1
    }

    /// Notes that `keys[from]` is about to move to position `to`.
    mutating func move(_ from: Int, to: Int, in keys: [SIPByteKey]) {
        slots[slot(of: from, in: keys)] = Int32(to)
    }
}

/// The state of a call still receiving messages.
private struct LiveCall: Sendable {
    /// What makes a message a retransmission of another — its source, CSeq number and method,
    /// status code (or 0), top Via branch, To tag and RSeq — mixed into one 64-bit word, so a
    /// call's seen-list is a few words (the branch and tag are already ``SIPMessageDigest/hash64(_:)``
    /// hashes; two different keys colliding within a call is a 2⁻⁶⁴ event).
    static func messageKey(source: CaptureEndpoint, cseq: UInt32, cseqMethod: UInt64, status: Int, branch: UInt64, toTag: UInt64,
                           rseq: UInt32) -> UInt64 {
        @inline(__always) func mix(_ h: UInt64, _ w: UInt64) -> UInt64 {
            let x = (h ^ w) &* 0x9E37_79B9_7F4A_7C15
            return x ^ (x >> 29)
        }
        let a = source.address.packed
        var h = mix(0x243F_6A88_85A3_08D3, a.high)
        h = mix(h, a.low)
        h = mix(h, UInt64(a.length) << 16 | UInt64(source.port))
        h = mix(h, UInt64(cseq) << 32 | UInt64(rseq))
        h = mix(h, cseqMethod)
        h = mix(h, UInt64(bitPattern: Int64(status)))
        h = mix(h, branch)
        return mix(h, toTag)
    }

    /// The CSeq method as a number: the well-known methods by position, others by the
    /// FNV-1a hash of their token.
    static func methodCode(_ m: SIPMethod) -> UInt64 {
        if case .extension(let token) = m { return SIPMessageDigest.hash64(Array(token.utf8)[...]) | 1 << 63 }
        return UInt64(m.code)
    }

    struct TransactionKey: Hashable, Sendable {
        var cseq: UInt32
        var method: String
    }

    let callID: String
    let first: CaptureTimestamp
    var last: CaptureTimestamp
    var from: String?
    var to: String?
    var messageCount = 0
    var retransmissions = 0
    /// Messages seen: a short list searched linearly (calls have a handful of messages), moved
    /// into a set past ``smallLimit`` entries, so big Call-IDs stay linear in time.
    var seenList: [UInt64] = []
    var seenSet: Set<UInt64>?
    static let smallLimit = 16
    var transactions: [CaptureAnalyzer.Transaction] = []
    /// Built only once a call has more than ``smallLimit`` transactions; before that the list is searched.
    var transactionIndex: [TransactionKey: Int]?
    var inviteTime: CaptureTimestamp?
    var earlyTime: CaptureTimestamp?
    var answerTime: CaptureTimestamp?
    var byeTime: CaptureTimestamp?
    var rtp: [CaptureAnalyzer.RTPAddress] = []
    var linked: [String] = []
    /// Findings the analysis made across Call-IDs (a redirect loop through new calls).
    var crossFindings: [CaptureCheck.Finding] = []
    var arrows: [CaptureAnalyzer.Arrow] = []
    var dialogs = DialogTracker()
    /// The messages the rule check replays (only when the analysis checks), and how many more
    /// came past ``CaptureCheck/maximumMessages``.
    var checked: [CaptureCheck.Message] = []
    var unchecked = 0
    /// Whether another call linked to this one (so its steps are told with that call's).
    var inStory = false
    /// Positions of the call's streams in the analysis's ``MediaCounter``.
    var mediaRefs: [Int] = []

    init(callID: String, time: CaptureTimestamp) {
        self.callID = callID
        first = time
        last = time
    }

    /// Whether nothing more is expected: the BYE answered, every INVITE rejected, or (without
    /// INVITE) every transaction answered.
    var settled: Bool {
        // One pass, no filtered copies (this runs for every live call once a second).
        var invites = 0, invitesAnswered = 0, allAnswered = true, byeAnswered = false
        for x in transactions {
            let answered = x.finalCode != nil
            if !answered { allAnswered = false }
            if x.method == "INVITE" {
                invites += 1
                if answered { invitesAnswered += 1 }
            } else if answered && x.method == "BYE" {
                byeAnswered = true
            }
        }
        if invites == 0 { return allAnswered }
        return byeAnswered || (answerTime == nil && invitesAnswered == invites)
    }

    /// Whether `key` is new (and notes it).
    private mutating func insertSeen(_ key: UInt64) -> Bool {
        if seenSet != nil { return seenSet!.insert(key).inserted }
        if seenList.contains(key) { return false }
        if seenList.isEmpty { seenList.reserveCapacity(8) }
        seenList.append(key)
        if seenList.count > Self.smallLimit {
            seenSet = Set(seenList)
            seenList = []
        }
        return true
    }

    private func transaction(_ cseq: UInt32, _ method: String) -> Int? {
        if let index = transactionIndex { return index[TransactionKey(cseq: cseq, method: method)] }
        return transactions.lastIndex { $0.cseq == cseq && $0.method == method }
    }

    @discardableResult
    private mutating func addTransaction(_ cseq: UInt32, _ method: String) -> Int {
        let i = transactions.count
        transactions.append(.init(method: method, cseq: cseq, finalCode: nil))
        if transactionIndex != nil {
            transactionIndex![TransactionKey(cseq: cseq, method: method)] = i
        } else if transactions.count > Self.smallLimit {
            var index: [TransactionKey: Int] = [:]
            for (k, x) in transactions.enumerated() { index[TransactionKey(cseq: x.cseq, method: x.method)] = k }
            transactionIndex = index
        }
        return i
    }

    /// Counts one message of this call; returns whether it was a retransmission, and whether it
    /// counted in the transactions (not a retransmission, and a CSeq or a request method).
    mutating func absorb(_ d: SIPMessageDigest, time t: CaptureTimestamp, source: CaptureEndpoint) -> (Bool, Bool) {
        messageCount += 1
        if last < t { last = t }
        let cseq = d.cseq
        let key = Self.messageKey(source: source, cseq: cseq?.sequence ?? 0, cseqMethod: cseq.map { Self.methodCode($0.method) } ?? 0,
                             status: d.statusCode ?? 0, branch: d.branchHash, toTag: d.toTagHash, rseq: d.rseq)
        let retransmission = !insertSeen(key)
        if retransmission { retransmissions += 1 }
        // A request without a (parsable) CSeq still counts as a transaction of its method.
        guard !retransmission, let cseq = cseq ?? d.method.map({ CSeq(0, $0) }) else { return (retransmission, false) }
        let method = cseq.method.token
        if let requestMethod = d.method {
            if requestMethod != .ack, transaction(cseq.sequence, method) == nil {
                addTransaction(cseq.sequence, method)
            }
            if requestMethod == .invite, inviteTime == nil { inviteTime = t }
            if requestMethod == .bye, byeTime == nil { byeTime = t }
        } else if let code = d.statusCode {
            let i = transaction(cseq.sequence, method) ?? addTransaction(cseq.sequence, method)
            if code >= 200 {
                if let old = transactions[i].finalCode {
                    if !(200...299).contains(old), (200...299).contains(code) { transactions[i].finalCode = code }
                } else {
                    transactions[i].finalCode = code
                }
            }
            if cseq.method == .invite {
                if (180...299).contains(code), earlyTime == nil { earlyTime = t }
                if (200...299).contains(code), answerTime == nil { answerTime = t }
            }
        }
        return (false, true)
    }

    /// Notes what only call records and ladders show of a message ``absorb(_:time:source:)``
    /// counted; returns the media streams its SDP announces.
    mutating func note(_ captured: CapturedSIPMessage, retransmission: Bool, counted: Bool, recordArrow: Bool, keepText: Bool,
                       details: Bool) -> [CaptureAnalyzer.MediaStream] {
        let m = captured.message, t = captured.timestamp
        if details, from == nil, let f = try? m.from() { from = f.uri.description }
        if details, to == nil, let x = try? m.to() { to = x.uri.description }
        if recordArrow {
            let label = CaptureAnalyzer.arrowLabel(m)
            arrows.append(.init(time: t, source: captured.source, destination: captured.destination,
                                label: retransmission ? label + " (rtx)" : label,
                                frameNumber: captured.frameNumber, retransmission: retransmission,
                                text: keepText ? String(decoding: m.serialized(), as: UTF8.self) : nil))
        }
        if details && !retransmission { dialogs.note(m) }
        return details && counted ? noteSDP(m, from: captured.source) : []
    }

    private mutating func noteSDP(_ m: SIPMessage, from source: CaptureEndpoint) -> [CaptureAnalyzer.MediaStream] {
        guard !m.body.isEmpty, let type = try? m.contentType(), type.essence.lowercased() == "application/sdp",
              let sdp = try? SessionDescription.parse(m.body) else { return [] }
        for media in sdp.media where media.port != 0 {
            guard let c = sdp.connection(for: media) else { continue }
            let a = CaptureAnalyzer.RTPAddress(media: media.media.rawValue, address: c.address, port: media.port, announcedBy: source)
            if !rtp.contains(a) { rtp.append(a) }
        }
        return MediaCounter.streams(in: sdp, announcedBy: source)
    }

    var outcome: CaptureAnalyzer.Outcome {
        guard let lastInvite = transactions.last(where: { $0.method == "INVITE" }) else { return .noInvite }
        if answerTime != nil { return .answered }
        if let code = lastInvite.finalCode { return code == 487 ? .cancelled : .rejected(code) }
        if transactions.contains(where: { $0.method == "CANCEL" && $0.cseq == lastInvite.cseq }) { return .cancelled }
        return .noAnswer
    }

    func finished() -> CaptureAnalyzer.Call {
        let outcome = self.outcome
        func span(_ a: CaptureTimestamp?, _ b: CaptureTimestamp?) -> Int64? {
            guard let a, let b, !(b < a) else { return nil }
            return b.totalNanoseconds - a.totalNanoseconds
        }
        return .init(callID: callID, first: first, last: last, from: from, to: to, outcome: outcome,
                     setupTime: span(inviteTime, earlyTime), answerTime: span(inviteTime, answerTime),
                     duration: span(answerTime, byeTime), messageCount: messageCount, retransmissions: retransmissions,
                     transactions: transactions, rtp: rtp, dialogs: dialogs.dialogs, mediaRefs: mediaRefs, linked: linked, arrows: arrows)
    }
}

extension CaptureAnalyzer {
    /// Nanoseconds as seconds with `digits` decimals, rounded half up (`1.234`), without Foundation.
    public static func seconds(_ ns: Int64, digits: Int = 3) -> String {
        var scale: Int64 = 1
        for _ in 0..<(9 - digits) { scale *= 10 }
        var unit: Int64 = 1
        for _ in 0..<digits { unit *= 10 }
        let q = (ns.magnitude + UInt64(scale / 2)) / UInt64(scale)
        let whole = q / UInt64(unit), frac = String(q % UInt64(unit))
        let f = digits == 0 ? "" : "." + String(repeating: "0", count: digits - frac.count) + frac
        return (ns < 0 ? "-" : "") + "\(whole)" + f
    }
}
