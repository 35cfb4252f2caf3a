import Testing
import NetworkIO
import PacketCapture
import SIPMessage
import SIPRules
import SwitchboardTestSupport
@testable import CaptureAnalysis

/// The capture check on hand-made calls between A (10.0.0.1:5060, the caller) and B
/// (10.0.0.2:5060): a clean call has no finding, and each rule fires, alone, at the message
/// that breaks it, naming the party that broke it.
struct CaptureCheckTests {
    static let a = CaptureEndpoint(address: IPAddress("10.0.0.1")!, port: 5060)
    static let b = CaptureEndpoint(address: IPAddress("10.0.0.2")!, port: 5060)
    static let origin: Int64 = 1_764_115_200   // 2025-11-26T00:00:00Z

    static let offer = sdp(port: 4000, formats: "0 8 101", extra: ["a=rtpmap:101 telephone-event/8000"])
    static let answer = sdp(port: 6000, formats: "0 101", extra: ["a=rtpmap:101 telephone-event/8000"])

    static func sdp(port: Int, formats: String, extra: [String] = [], media: Int = 1) -> String {
        var lines = ["v=0", "o=- 1 1 IN IP4 10.0.0.9", "s=-", "c=IN IP4 10.0.0.9", "t=0 0"]
        for k in 0..<media { lines.append("m=audio \(port + 2 * k) RTP/AVP \(formats)") }
        lines += extra
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    static func parse(_ lines: [String], body: String?) -> SIPMessage {
        var text = lines.joined(separator: "\r\n") + "\r\n"
        if let body {
            let typed = lines.contains { $0.lowercased().hasPrefix("content-type:") }
            text += (typed ? "" : "Content-Type: application/sdp\r\n") + "Content-Length: \(body.utf8.count)\r\n\r\n" + body
        } else {
            text += "Content-Length: 0\r\n\r\n"
        }
        return try! SIPMessage(text)
    }

    /// A request from the caller (or, with `fromCallee`, from the callee) in call `c1`.
    static func request(_ method: String, _ cseq: UInt32, branch: String, toTag: String? = "bt", fromCallee: Bool = false,
                        uri: String = "sip:b@10.0.0.2:5060", extra: [String] = [], body: String? = nil) -> SIPMessage {
        let (via, from, to) = fromCallee
            ? ("10.0.0.2:5060", "<sip:b@10.0.0.2>;tag=\(toTag ?? "bt")", "<sip:a@10.0.0.1>;tag=at")
            : ("10.0.0.1:5060", "<sip:a@10.0.0.1>;tag=at", "<sip:b@10.0.0.2>" + (toTag.map { ";tag=\($0)" } ?? ""))
        return parse(["\(method) \(fromCallee ? "sip:a@10.0.0.1:5060" : uri) SIP/2.0", "Via: SIP/2.0/UDP \(via);branch=\(branch)",
                      "Max-Forwards: 70", "From: \(from)", "To: \(to)", "Call-ID: c1", "CSeq: \(cseq) \(method)",
                      "Contact: <sip:\(fromCallee ? "b@10.0.0.2" : "a@10.0.0.1"):5060>"] + extra, body: body)
    }

    /// A response to `request` (its Via, From, Call-ID, CSeq copied; To with `tag`).
    static func response(_ code: Int, to request: SIPMessage, tag: String? = "bt", contact: Bool = true, extra: [String] = [],
                         body: String? = nil) -> SIPMessage {
        let to = request[.to]!.split(separator: ";")[0] + (tag.map { ";tag=\($0)" } ?? "")
        var lines = ["SIP/2.0 \(code) \(code == 200 ? "OK" : "Status")", "Via: \(request[.via]!)", "From: \(request[.from]!)", "To: \(to)",
                     "Call-ID: c1", "CSeq: \(request[.cseq]!)"]
        if contact { lines.append("Contact: <sip:b@10.0.0.2:5060>") }
        return parse(lines + extra, body: body)
    }

    /// A call being written: messages with their times (seconds from the origin).
    struct Script {
        var messages: [CaptureCheck.Message] = []
        mutating func add(_ t: Double, _ m: SIPMessage, from: CaptureEndpoint, to: CaptureEndpoint, tcp: Bool = false) {
            let ns = Int64((t * 1e9).rounded())
            messages.append(.init(frameNumber: messages.count + 1, time: CaptureTimestamp(seconds: CaptureCheckTests.origin, nanoseconds: ns),
                                  source: from, destination: to, reliable: tcp, message: m))
        }
        mutating func ab(_ t: Double, _ m: SIPMessage, tcp: Bool = false) { add(t, m, from: CaptureCheckTests.a, to: CaptureCheckTests.b, tcp: tcp) }
        mutating func ba(_ t: Double, _ m: SIPMessage, tcp: Bool = false) { add(t, m, from: CaptureCheckTests.b, to: CaptureCheckTests.a, tcp: tcp) }
        func check(end: Double = 40) -> [CaptureCheck.Finding] {
            CaptureCheck().check(callID: "c1", messages: messages,
                                 captureEnd: CaptureTimestamp(seconds: CaptureCheckTests.origin, nanoseconds: Int64(end * 1e9)))
        }
    }

    static let invite = request("INVITE", 1, branch: "z9hG4bK-i1", toTag: nil, body: offer)
    static let ok = response(200, to: invite, body: answer)
    static let ack = request("ACK", 1, branch: "z9hG4bK-a1")
    static let bye = request("BYE", 2, branch: "z9hG4bK-b2")

    /// INVITE, 100, 180, 200 with the answer, ACK; BYE at 10 s and its 200.
    static func cleanCall(upToBye: Bool = true) -> Script {
        var s = Script()
        s.ab(0, invite)
        s.ba(0.01, response(100, to: invite, tag: nil, contact: false))
        s.ba(0.05, response(180, to: invite))
        s.ba(0.3, ok)
        s.ab(0.31, ack)
        if upToBye {
            s.ab(10, bye)
            s.ba(10.01, response(200, to: bye))
        }
        return s
    }

    /// The one finding of `findings`, which must be of `rule`, by `party`, at `frame`.
    func expectOnly(_ findings: [CaptureCheck.Finding], _ rule: ConformanceRule, party: CaptureEndpoint, frame: Int,
                    sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(findings.count == 1, "\(findings)", sourceLocation: sourceLocation)
        guard let f = findings.first else { return }
        #expect(f.rule == rule && f.party == party && f.frameNumber == frame, "\(f)", sourceLocation: sourceLocation)
        #expect(f.callID == "c1" && !f.detail.isEmpty, sourceLocation: sourceLocation)
    }

    @Test func aCleanCallHasNoFinding() {
        #expect(Self.cleanCall().check().isEmpty, "\(Self.cleanCall().check())")
        // Over TCP nothing is retransmitted and nothing is missing either.
        var tcp = Script()
        for m in Self.cleanCall().messages { tcp.add(Double(m.time.totalNanoseconds - Self.origin * 1_000_000_000) / 1e9, m.message,
                                                     from: m.source, to: m.destination, tcp: true) }
        #expect(tcp.check().isEmpty)
    }

    @Test func aCallCutShortReportsNothingItCannotSee() {
        // The capture ends right after the 2xx: the ACK may still come.
        var s = Script()
        s.ab(0, Self.invite)
        s.ba(0.01, Self.response(100, to: Self.invite, tag: nil, contact: false))
        s.ba(0.3, Self.ok)
        #expect(s.check(end: 0.3).isEmpty)
        // An INVITE alone, the capture ending 0.2 s later: no retransmission was due yet.
        var t = Script()
        t.ab(0, Self.invite)
        #expect(t.check(end: 0.2).isEmpty)
    }

    @Test func inviteRetransmissionsFollowTimerA() {
        var late = Script()
        late.ab(0, Self.invite)
        late.ba(2.0, Self.response(180, to: Self.invite))
        expectOnly(late.check(end: 2.0), .inviteRetransmission, party: Self.a, frame: 1)
        // Copies at T1 and 3·T1 before the first response: on schedule.
        var good = Script()
        good.ab(0, Self.invite)
        good.ab(0.52, Self.invite)
        good.ab(1.49, Self.invite)
        good.ba(2.0, Self.response(180, to: Self.invite))
        #expect(good.check(end: 2.0).isEmpty)
        // Over TCP the INVITE is sent once.
        var tcp = Script()
        tcp.ab(0, Self.invite, tcp: true)
        tcp.ba(2.0, Self.response(180, to: Self.invite), tcp: true)
        #expect(tcp.check(end: 2.0).isEmpty)
    }

    @Test func nonInviteRetransmissionsFollowTimerE() {
        var s = Self.cleanCall(upToBye: false)
        s.ab(10, Self.bye)
        s.ba(11.6, Self.response(200, to: Self.bye))
        expectOnly(s.check(), .nonInviteRetransmission, party: Self.a, frame: 6)
        var good = Self.cleanCall(upToBye: false)
        good.ab(10, Self.bye)
        good.ab(10.5, Self.bye)
        good.ab(11.5, Self.bye)
        good.ba(11.6, Self.response(200, to: Self.bye))
        #expect(good.check().isEmpty)
    }

    @Test func a2xxIsRetransmittedUntilTheAck() {
        var s = Script()
        s.ab(0, Self.invite)
        s.ba(0.3, Self.ok)
        s.ab(2.6, Self.ack)
        s.ab(10, Self.bye)
        s.ba(10.01, Self.response(200, to: Self.bye))
        expectOnly(s.check(), .retransmit2xx, party: Self.b, frame: 2)
        var good = Script()
        good.ab(0, Self.invite)
        good.ba(0.3, Self.ok)
        good.ba(0.8, Self.ok)
        good.ba(1.8, Self.ok)
        good.ab(2.6, Self.ack)
        #expect(good.check().isEmpty)
    }

    @Test func every2xxIsAcknowledged() {
        // Never ACKed, and the caller goes on to a BYE (the 2xx copies on schedule until then).
        var s = Script()
        s.ab(0, Self.invite)
        s.ba(0.3, Self.ok)
        s.ba(0.8, Self.ok)
        s.ba(1.8, Self.ok)
        s.ba(3.8, Self.ok)
        s.ab(5, Self.bye)
        s.ba(5.01, Self.response(200, to: Self.bye))
        expectOnly(s.check(end: 6), .ack2xx, party: Self.a, frame: 2)
        // ACKed once, but a copy that came after the ACK was not ACKed again.
        var again = Script()
        again.ab(0, Self.invite)
        again.ba(0.3, Self.ok)
        again.ab(0.31, Self.ack)
        again.ba(0.8, Self.ok)
        expectOnly(again.check(end: 6), .ack2xx, party: Self.a, frame: 4)
        again.ab(0.81, Self.ack)
        #expect(again.check(end: 6).isEmpty)
    }

    /// The copies of a non-2xx final a UAS sends over UDP while no ACK comes (Timer G: T1,
    /// doubling to T2) from `start` until Timer H (64·T1 after it).
    static func timerGCopies(_ s: inout Script, _ response: SIPMessage, start: Double) {
        var t = start, gap = 0.5
        while t <= start + 32 {
            s.ba(t, response)
            t += gap
            gap = min(gap * 2, 4)
        }
    }

    @Test func aNon2xxFinalIsAcknowledged() {
        var s = Script()
        s.ab(0, Self.invite)
        // The callee retransmits its 486 on schedule until Timer H: only the missing ACK is wrong.
        Self.timerGCopies(&s, Self.response(486, to: Self.invite), start: 0.3)
        expectOnly(s.check(), .ackNon2xx, party: Self.a, frame: 2)
        s = Script()
        s.ab(0, Self.invite)
        s.ba(0.3, Self.response(486, to: Self.invite))
        // The ACK on the INVITE's branch.
        s.ab(0.31, Self.request("ACK", 1, branch: "z9hG4bK-i1"))
        #expect(s.check().isEmpty)
        // Cut short: nothing to say yet.
        var cut = Script()
        cut.ab(0, Self.invite)
        cut.ba(0.3, Self.response(486, to: Self.invite))
        #expect(cut.check(end: 1).isEmpty)
    }

    /// Timer G, case by case: (name, times of the UAS's copies of its 486, time of the caller's
    /// ACK or nil, capture end, over TCP, whether a non-2xx-retransmission finding is due).
    @Test(arguments: [
        ("ACKed at once: nothing was due", [0.3], 0.31, 40.0, false, false),
        ("ACKed after two copies on schedule", [0.3, 0.8, 1.8], 1.9, 40.0, false, false),
        ("ACKed after 1.5 s, never sent again", [0.3], 1.8, 40.0, false, true),
        ("copy 2 s late", [0.3, 2.3], 2.4, 40.0, false, true),
        ("copies at T1 doubling, capped at T2 = 4 s", [0.3, 0.8, 1.8, 3.8, 7.8, 11.8], 12.0, 40.0, false, false),
        ("doubling past T2", [0.3, 0.8, 1.8, 3.8, 7.8, 15.8], 16.0, 40.0, false, true),
        ("never ACKed, copies until Timer H", [0.3, 0.8, 1.8, 3.8, 7.8, 11.8, 15.8, 19.8, 23.8, 27.8, 31.8], nil, 40.0, false, false),
        ("never ACKed, sent once", [0.3], nil, 40.0, false, true),
        ("the capture ends before the first copy was due", [0.3], nil, 0.7, false, false),
        ("over TCP: sent once", [0.3], 1.8, 40.0, true, false),
    ] as [(String, [Double], Double?, Double, Bool, Bool)])
    func aNon2xxFinalIsRetransmittedUntilTheAck(_ name: String, _ copies: [Double], _ ack: Double?, _ end: Double, _ tcp: Bool, _ due: Bool) {
        var s = Script()
        s.ab(0, Self.invite, tcp: tcp)
        let busy = Self.response(486, to: Self.invite)
        for t in copies { s.ba(t, busy, tcp: tcp) }
        if let ack { s.ab(ack, Self.request("ACK", 1, branch: "z9hG4bK-i1"), tcp: tcp) }
        let findings = s.check(end: end).filter { $0.rule == .retransmitNon2xx }
        #expect(findings.count == (due ? 1 : 0), "\(name): \(findings)")
        if let f = findings.first {
            #expect(f.party == Self.b && f.frameNumber == 2 && f.detail.contains("486 to INVITE"), "\(name): \(f)")
        }
        // Every other finding belongs to another rule (the missing ACK of a 486 never ACKed).
        #expect(s.check(end: end).allSatisfy { $0.rule == .retransmitNon2xx || $0.rule == .ackNon2xx }, "\(name)")
    }

    @Test func noSessionRequestAfterTheBye() {
        var s = Self.cleanCall()
        let info = Self.request("INFO", 3, branch: "z9hG4bK-n3")
        s.ab(11, info)
        s.ba(11.01, Self.response(200, to: info))
        expectOnly(s.check(), .requestAfterBye, party: Self.a, frame: 8)
        // A NOTIFY of a REFER subscription is another usage of the dialog: allowed.
        var n = Self.cleanCall()
        let notify = Self.request("NOTIFY", 1, branch: "z9hG4bK-nb", toTag: "bt", fromCallee: true,
                                  extra: ["Event: refer", "Subscription-State: terminated;reason=noresource", "Content-Type: message/sipfrag"],
                                  body: "SIP/2.0 200 OK\r\n")
        n.ba(11, notify)
        n.ab(11.01, Self.response(200, to: notify, tag: "at"))
        #expect(n.check().isEmpty, "\(n.check())")
    }

    @Test func a481NamesTheRequestsSender() {
        var s = Self.cleanCall(upToBye: false)
        s.ab(10, Self.bye)
        s.ba(10.01, Self.response(481, to: Self.bye))
        expectOnly(s.check(), .unknownDialog, party: Self.a, frame: 7)
    }

    @Test func dialogTagsStay() {
        // The 200 to the BYE with another To tag.
        var s = Self.cleanCall(upToBye: false)
        s.ab(10, Self.bye)
        s.ba(10.01, Self.response(200, to: Self.bye, tag: "bx"))
        expectOnly(s.check(), .dialogTagStable, party: Self.b, frame: 7)
        // A BYE whose To tag is not the callee's.
        var r = Self.cleanCall(upToBye: false)
        let bye = Self.request("BYE", 2, branch: "z9hG4bK-b2", toTag: "zz")
        r.ab(10, bye)
        r.ba(10.01, Self.response(200, to: bye, tag: "zz"))
        expectOnly(r.check(), .dialogTags, party: Self.a, frame: 6)
    }

    @Test func cseqIncreasesPerSender() {
        var s = Self.cleanCall(upToBye: false)
        let info = Self.request("INFO", 1, branch: "z9hG4bK-n1")
        s.ab(5, info)
        s.ba(5.01, Self.response(200, to: info))
        expectOnly(s.check(), .cseqIncreases, party: Self.a, frame: 6)
        // The callee's own numbering starts anywhere.
        var t = Self.cleanCall()
        let byeB = Self.request("INFO", 1, branch: "z9hG4bK-x", fromCallee: true)
        t.ba(5, byeB)
        t.ab(5.01, Self.response(200, to: byeB, tag: "at"))
        #expect(t.check().isEmpty, "\(t.check())")
    }

    @Test(arguments: [
        ("two m-lines", sdp(port: 6000, formats: "0", media: 2), "expected 1 m-lines, found 2"),
        ("no codec of the offer", sdp(port: 6000, formats: "18", extra: ["a=rtpmap:18 G729/8000"]), "no codec in common"),
        ("a number remapped", sdp(port: 6000, formats: "8", extra: ["a=rtpmap:8 G722/8000"]), "payload type 8"),
    ])
    func theAnswerAnswersTheOffer(_ name: String, _ body: String, _ words: String) {
        var s = Script()
        s.ab(0, Self.invite)
        s.ba(0.3, Self.response(200, to: Self.invite, body: body))
        s.ab(0.31, Self.ack)
        let f = s.check()
        expectOnly(f, .offerAnswer, party: Self.b, frame: 2)
        #expect(f.first?.detail.contains(words) == true, "\(name): \(f)")
    }

    @Test func offersAndAnswersInTheirPlaces() {
        // An answer in the ACK although the INVITE's offer was answered in the 2xx.
        var s = Script()
        s.ab(0, Self.invite)
        s.ba(0.3, Self.ok)
        s.ab(0.31, Self.request("ACK", 1, branch: "z9hG4bK-a1", body: Self.answer))
        expectOnly(s.check(), .offerAnswer, party: Self.a, frame: 3)
        // Late offer: INVITE without SDP, the offer in the 2xx, the answer in the ACK.
        let bare = Self.request("INVITE", 1, branch: "z9hG4bK-i1", toTag: nil)
        var late = Script()
        late.ab(0, bare)
        late.ba(0.3, Self.response(200, to: bare, body: Self.offer))
        late.ab(0.31, Self.request("ACK", 1, branch: "z9hG4bK-a1", body: Self.answer))
        #expect(late.check().isEmpty, "\(late.check())")
        // … and the ACK without the answer.
        var missing = Script()
        missing.ab(0, bare)
        missing.ba(0.3, Self.response(200, to: bare, body: Self.offer))
        missing.ab(0.31, Self.ack)
        expectOnly(missing.check(), .offerAnswer, party: Self.a, frame: 3)
    }

    @Test func anOfferInAReliableProvisionalIsAnsweredInItsPRACK() {
        // RFC 3262 §5: INVITE without SDP, the offer in a reliable 183, the answer in the PRACK.
        let bare = Self.request("INVITE", 1, branch: "z9hG4bK-i1", toTag: nil, extra: ["Supported: 100rel"])
        let progress = Self.response(183, to: bare, extra: ["Require: 100rel", "RSeq: 7"], body: Self.offer)
        func call(prackBody: String?, rack: String = "7 1 INVITE") -> Script {
            var s = Script()
            s.ab(0, bare)
            s.ba(0.05, progress)
            let prack = Self.request("PRACK", 2, branch: "z9hG4bK-p2", extra: ["RAck: \(rack)"], body: prackBody)
            s.ab(0.06, prack)
            s.ba(0.07, Self.response(200, to: prack))
            s.ba(0.3, Self.response(200, to: bare))
            s.ab(0.31, Self.ack)
            return s
        }
        #expect(call(prackBody: Self.answer).check().isEmpty, "\(call(prackBody: Self.answer).check())")
        // The PRACK without the answer.
        let missing = call(prackBody: nil).check()
        expectOnly(missing, .offerAnswer, party: Self.a, frame: 3)
        #expect(missing.first?.detail.contains("PRACK carries no answer") == true, "\(missing)")
        // An answer that does not answer the offer (two m-lines for one).
        let wrong = call(prackBody: Self.sdp(port: 6000, formats: "0", media: 2)).check()
        expectOnly(wrong, .offerAnswer, party: Self.a, frame: 3)
        #expect(wrong.first?.detail.contains("m-lines") == true, "\(wrong)")
        // A PRACK for another reliable response (RAck names RSeq 8) is not the one that answers.
        #expect(call(prackBody: nil, rack: "8 1 INVITE").check().isEmpty)
    }

    @Test func anUpdatesOfferIsAnsweredInIts2xx() {
        var s = Self.cleanCall(upToBye: false)
        let update = Self.request("UPDATE", 2, branch: "z9hG4bK-u2", body: Self.offer)
        s.ab(2, update)
        s.ba(2.01, Self.response(200, to: update))
        expectOnly(s.check(), .offerAnswer, party: Self.b, frame: 7)
        var good = Self.cleanCall(upToBye: false)
        good.ab(2, update)
        good.ba(2.01, Self.response(200, to: update, body: Self.answer))
        #expect(good.check().isEmpty, "\(good.check())")
    }

    @Test func a2xxToInviteCarriesContact() {
        var s = Script()
        s.ab(0, Self.invite)
        s.ba(0.3, Self.response(200, to: Self.invite, contact: false, body: Self.answer))
        s.ab(0.31, Self.ack)
        expectOnly(s.check(), .contactIn2xx, party: Self.b, frame: 2)
    }

    @Test func a3xxCarriesContact() {
        var s = Script()
        s.ab(0, Self.invite)
        s.ba(0.1, Self.response(302, to: Self.invite, contact: false))
        s.ab(0.11, Self.request("ACK", 1, branch: "z9hG4bK-i1"))
        expectOnly(s.check(), .contactIn3xx, party: Self.b, frame: 2)
    }

    @Test func anAcceptedReferEndsWithAFinalNotify() {
        var s = Self.cleanCall(upToBye: false)
        let refer = Self.request("REFER", 2, branch: "z9hG4bK-r2", extra: ["Refer-To: <sip:c@10.0.0.3>"])
        s.ab(2, refer)
        s.ba(2.01, Self.response(202, to: refer))
        let trying = Self.request("NOTIFY", 1, branch: "z9hG4bK-n1", fromCallee: true,
                                  extra: ["Event: refer", "Subscription-State: active;expires=60", "Content-Type: message/sipfrag"],
                                  body: "SIP/2.0 100 Trying\r\n")
        s.ba(2.1, trying)
        s.ab(2.11, Self.response(200, to: trying, tag: "at"))
        expectOnly(s.check(), .referNotify, party: Self.b, frame: 7)
        // Cut short (the transfer may still be ringing): nothing.
        #expect(s.check(end: 10).isEmpty)
        let done = Self.request("NOTIFY", 2, branch: "z9hG4bK-n2", fromCallee: true,
                                extra: ["Event: refer", "Subscription-State: terminated;reason=noresource", "Content-Type: message/sipfrag"],
                                body: "SIP/2.0 200 OK\r\n")
        s.ba(5, done)
        s.ab(5.01, Self.response(200, to: done, tag: "at"))
        #expect(s.check().isEmpty, "\(s.check())")
    }

    @Test func a3xxChainDoesNotRevisitATarget() {
        var s = Script()
        let x = "sip:x@10.0.0.2:5060", y = "sip:y@10.0.0.2:5060"
        let first = Self.request("INVITE", 1, branch: "z9hG4bK-1", toTag: nil, uri: x)
        s.ab(0, first)
        s.ba(0.1, Self.response(302, to: first, extra: ["Contact: <\(y)>"]))
        s.ab(0.11, Self.request("ACK", 1, branch: "z9hG4bK-1", uri: x))
        let second = Self.request("INVITE", 2, branch: "z9hG4bK-2", toTag: nil, uri: y)
        s.ab(0.2, second)
        s.ba(0.3, Self.response(302, to: second, contact: false, extra: ["Contact: <\(x)>"]))
        s.ab(0.31, Self.request("ACK", 2, branch: "z9hG4bK-2", uri: y))
        let third = Self.request("INVITE", 3, branch: "z9hG4bK-3", toTag: nil, uri: x)
        s.ab(0.4, third)
        s.ba(0.5, Self.response(486, to: third))
        s.ab(0.51, Self.request("ACK", 3, branch: "z9hG4bK-3", uri: x))
        expectOnly(s.check(), .redirectLoop, party: Self.a, frame: 7)
        // Trying the same target again after a 407 is no loop.
        var auth = Script()
        auth.ab(0, first)
        auth.ba(0.1, Self.response(407, to: first))
        auth.ab(0.11, Self.request("ACK", 1, branch: "z9hG4bK-1", uri: x))
        let retry = Self.request("INVITE", 2, branch: "z9hG4bK-2", toTag: nil, uri: x)
        auth.ab(0.2, retry)
        auth.ba(0.3, Self.response(486, to: retry))
        auth.ab(0.31, Self.request("ACK", 2, branch: "z9hG4bK-2", uri: x))
        #expect(auth.check().isEmpty, "\(auth.check())")
    }

    /// Random calls (seeded): messages drawn from the clean call's, the BYE, REFER, NOTIFY and
    /// responses of every kind, with random tags, branches, CSeq numbers, bodies and times (some
    /// years apart) over both transports: the check ends, quickly, with findings that name a
    /// frame of the call and a party of it.
    @Test func randomCallsEndWithSaneFindings() {
        var rng = TestRandom(seed: 16)
        let methods = ["INVITE", "ACK", "BYE", "CANCEL", "INFO", "UPDATE", "PRACK", "REFER", "NOTIFY", "OPTIONS"]
        let codes = [100, 180, 183, 200, 202, 302, 401, 481, 486, 487, 500]
        let bodies: [String?] = [nil, Self.offer, Self.answer, Self.sdp(port: 5000, formats: "18", media: 2), "v=0\r\nbroken\r\n"]
        for _ in 0..<300 {
            var s = Script()
            var t = 0.0
            for _ in 0..<Int.random(in: 1...40, using: &rng) {
                t += [0, 0.001, 0.3, 0.5, 1, 4, 33, 1e7].randomElement(using: &rng)!
                let method = methods.randomElement(using: &rng)!
                let cseq = UInt32.random(in: 1...4, using: &rng)
                let branch = "z9hG4bK-\(Int.random(in: 0...5, using: &rng))"
                let tag = ["bt", "bx", nil].randomElement(using: &rng)!
                let body = bodies.randomElement(using: &rng)!
                let request = Self.request(method, cseq, branch: branch, toTag: tag, fromCallee: Bool.random(using: &rng),
                                           uri: ["sip:b@10.0.0.2:5060", "sip:c@10.0.0.3"].randomElement(using: &rng)!,
                                           extra: method == "NOTIFY" ? ["Event: refer", "Subscription-State: terminated"] : [], body: body)
                let tcp = Bool.random(using: &rng)
                if Bool.random(using: &rng) {
                    Bool.random(using: &rng) ? s.ab(t, request, tcp: tcp) : s.ba(t, request, tcp: tcp)
                } else {
                    let r = Self.response(codes.randomElement(using: &rng)!, to: request, tag: ["bt", "by", nil].randomElement(using: &rng)!,
                                          contact: Bool.random(using: &rng), body: bodies.randomElement(using: &rng)!)
                    Bool.random(using: &rng) ? s.ba(t, r, tcp: tcp) : s.ab(t, r, tcp: tcp)
                }
            }
            let end = t + [0, 1, 40].randomElement(using: &rng)!
            let clock = ContinuousClock.now
            let findings = s.check(end: end)
            #expect(ContinuousClock.now - clock < .seconds(1))
            let frames = Set(s.messages.map(\.frameNumber))
            #expect(findings.allSatisfy { frames.contains($0.frameNumber) && ($0.party == Self.a || $0.party == Self.b) && !$0.detail.isEmpty })
            #expect(findings.allSatisfy { ConformanceRule.captureCheck.contains($0.rule) })
        }
    }

    @Test func oddMessagesGiveNoCrashAndNoBogusFinding() throws {
        // No Via branch, no tags, no CSeq, a body that is not SDP, a response to nothing.
        var s = Script()
        s.ab(0, try SIPMessage("OPTIONS sip:b@10.0.0.2 SIP/2.0\r\nVia: SIP/2.0/TCP 10.0.0.1\r\nCall-ID: c1\r\nContent-Length: 0\r\n\r\n"))
        s.ba(0.1, try SIPMessage("SIP/2.0 200 OK\r\nCall-ID: c1\r\nContent-Type: application/sdp\r\nContent-Length: 3\r\n\r\nxyz"))
        s.ab(0.2, try SIPMessage("INVITE sip:b@10.0.0.2 SIP/2.0\r\nCSeq: x INVITE\r\nContent-Type: application/sdp\r\nContent-Length: 4\r\n\r\nm=\r\n"))
        s.ba(0.3, try SIPMessage("SIP/2.0 481 Gone\r\nCSeq: 9 CANCEL\r\nContent-Length: 0\r\n\r\n"))
        let findings = s.check(end: 0.3)
        #expect(findings.allSatisfy { $0.rule == .inviteRetransmission || $0.rule == .nonInviteRetransmission } && findings.count <= 1, "\(findings)")
        #expect(CaptureCheck().check(callID: "", messages: [], captureEnd: CaptureTimestamp(seconds: 0, nanoseconds: 0)).isEmpty)
    }
}
