import Testing
import Foundation
import SIPMessage
@testable import Conformance

/// The rule checker on hand-made exchanges: each rule fires on the message that breaks it,
/// and not on a conforming exchange.
struct RuleCheckerTests {
    static let invite = msg("""
        INVITE sip:dut@127.0.0.1:5090 SIP/2.0
        Via: SIP/2.0/UDP 127.0.0.1:4000;branch=z9hG4bK-1;rport
        Via: SIP/2.0/UDP 10.0.0.9:5060;branch=z9hG4bK-proxy
        Max-Forwards: 70
        From: <sip:conform@127.0.0.1:4000>;tag=ft
        To: <sip:dut@127.0.0.1:5090>
        Call-ID: c1
        CSeq: 1 INVITE
        Contact: <sip:conform@127.0.0.1:4000>
        Record-Route: <sip:rr1@127.0.0.1:4000;lr>
        Content-Length: 0
        """)

    static func msg(_ text: String) -> SIPMessage {
        let wire = text.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\r\n") + "\r\n\r\n"
        return try! SIPMessage(wire)
    }

    /// A response to `request` as a conforming UAS writes it, with `extra` lines.
    static func response(_ code: Int, to request: SIPMessage, tag: String? = "tt", extra: [String] = [], dropping: Set<String> = []) -> SIPMessage {
        var r = SIPMessage(responseTo: request, statusCode: code, toTag: tag)
        for h in dropping { r.remove(SIPHeaderName(h)) }
        for line in extra {
            let parts = line.split(separator: ":", maxSplits: 1)
            try! r.append(SIPHeaderName(String(parts[0])), parts[1].trimmingCharacters(in: .whitespaces))
        }
        try! r.append(.contentLength, "0")
        return try! SIPMessage(bytes: r.serialized())
    }

    /// A request of the runner's in the dialog `callID` (its tag `fromTag`, the DUT's `toTag`).
    static func inDialog(_ method: String, callID: String = "c1", fromTag: String = "ft", toTag: String = "tt", branch: String, cseq: UInt32) -> SIPMessage {
        msg("""
            \(method) sip:dut@127.0.0.1:5090 SIP/2.0
            Via: SIP/2.0/UDP 127.0.0.1:4000;branch=\(branch)
            Max-Forwards: 70
            From: <sip:conform@127.0.0.1:4000>;tag=\(fromTag)
            To: <sip:dut@127.0.0.1:5090>;tag=\(toTag)
            Call-ID: \(callID)
            CSeq: \(cseq) \(method)
            Content-Length: 0
            """)
    }

    static func ack(cseq: UInt32 = 1) -> SIPMessage { inDialog("ACK", branch: "z9hG4bK-ack\(cseq)", cseq: cseq) }

    static let good200 = response(200, to: invite, extra: ["Contact: <sip:dut@127.0.0.1:5090>", "Record-Route: <sip:rr1@127.0.0.1:4000;lr>"])

    func records(_ list: [(Bool, Double, SIPMessage)]) -> [RuleChecker.Record] {
        list.map { RuleChecker.Record(sent: $0.0, time: $0.1, message: $0.2) }
    }

    @Test func aConformingCallHasNoFinding() {
        let f = RuleChecker().check(records([(true, 0, Self.invite), (false, 0.01, Self.good200), (true, 0.02, Self.ack())]), end: 1)
        #expect(f.isEmpty, "\(f)")
    }

    @Test func a2xxWithoutContactIsNamedOnce() {
        let bad = Self.response(200, to: Self.invite, extra: ["Record-Route: <sip:rr1@127.0.0.1:4000;lr>"])
        let f = RuleChecker().check(records([(true, 0, Self.invite), (false, 0.01, bad), (false, 0.51, bad), (true, 0.6, Self.ack())]), end: 1)
        #expect(f.map(\.rule) == [.contactIn2xx])
        #expect(f.first?.messageIndex == 1)
    }

    @Test func recordRouteNotEchoed() {
        let bad = Self.response(200, to: Self.invite, extra: ["Contact: <sip:dut@127.0.0.1:5090>"])
        let f = RuleChecker().check(records([(true, 0, Self.invite), (false, 0.01, bad), (true, 0.02, Self.ack())]), end: 1)
        #expect(f.map(\.rule) == [.recordRouteEchoed])
    }

    @Test func aResponseMustCopyTheRequestsVias() {
        var bad = Self.good200
        bad.removeFirstElement(.via)
        bad = try! SIPMessage(bytes: bad.serialized())
        // Without the top Via the response matches no request of ours: drop the second instead.
        var second = Self.good200
        let vias = second.values(.via)
        second.remove(.via)
        try! second.append(.via, vias[0].split(separator: ",")[0].trimmingCharacters(in: .whitespaces))
        second = try! SIPMessage(bytes: second.serialized())
        let f = RuleChecker().check(records([(true, 0, Self.invite), (false, 0.01, second), (true, 0.02, Self.ack())]), end: 1)
        #expect(f.map(\.rule) == [.responseCopiesRequest])
        #expect(f.first?.detail.contains("Via") == true)
    }

    @Test func retransmissionsOnScheduleAreFine() {
        let r = records([(true, 0, Self.invite), (false, 0.01, Self.good200), (false, 0.52, Self.good200), (false, 1.50, Self.good200),
                         (false, 3.53, Self.good200), (true, 3.7, Self.ack())])
        #expect(RuleChecker().check(r, end: 4).isEmpty)
    }

    @Test func missingRetransmissionsAreNamed() {
        let r = records([(true, 0, Self.invite), (false, 0.01, Self.good200), (true, 2.2, Self.ack())])
        let f = RuleChecker().check(r, end: 3)
        #expect(f.map(\.rule) == [.retransmit2xx])
        #expect(f.first?.detail.contains("2 retransmission(s) were due") == true, "\(f)")
    }

    @Test func aWrongIntervalIsNamed() {
        // Retransmitted every 0.5 s instead of doubling.
        let r = records([(true, 0, Self.invite), (false, 0.0, Self.good200), (false, 0.5, Self.good200), (false, 1.0, Self.good200),
                         (false, 1.5, Self.good200), (true, 2.2, Self.ack())])
        let f = RuleChecker().check(r, end: 3)
        #expect(f.map(\.rule) == [.retransmit2xx])
        #expect(f.first?.detail.contains("retransmission 2") == true, "\(f)")
    }

    @Test func aPromptAckNeedsNoRetransmission() {
        let r = records([(true, 0, Self.invite), (false, 0.01, Self.good200), (true, 0.4, Self.ack())])
        #expect(RuleChecker().check(r, end: 1).isEmpty)
        // With the schedule not checked, a late ACK is no finding.
        let late = records([(true, 0, Self.invite), (false, 0.01, Self.good200), (true, 3, Self.ack())])
        #expect(RuleChecker(checks2xxRetransmissions: false).check(late, end: 4).isEmpty)
    }

    @Test func theToTagOfAnInDialogResponseMustNotChange() {
        let bye = Self.inDialog("BYE", branch: "z9hG4bK-bye", cseq: 2)
        var ok = SIPMessage(responseTo: bye, statusCode: 200)
        try! ok.set(.to, "<sip:dut@127.0.0.1:5090>;tag=other")
        let f = RuleChecker().check(records([(true, 0, Self.invite), (false, 0.01, Self.good200), (true, 0.02, Self.ack()),
                                             (true, 0.1, bye), (false, 0.11, try! SIPMessage(bytes: ok.serialized()))]), end: 1)
        #expect(f.map(\.rule) == [.dialogTagStable])
        #expect(f.first?.messageIndex == 4)
    }

    @Test func theDUTsRequestsKeepBranchAndCSeqRules() {
        func bye(_ cseq: Int, _ branch: String) -> SIPMessage {
            Self.msg("""
                BYE sip:conform@127.0.0.1:4000 SIP/2.0
                Via: SIP/2.0/UDP 127.0.0.1:5090;branch=\(branch)
                Max-Forwards: 70
                From: <sip:dut@127.0.0.1:5090>;tag=tt
                To: <sip:conform@127.0.0.1:4000>;tag=ft
                Call-ID: c1
                CSeq: \(cseq) \(cseq == 9 ? "INFO" : "BYE")
                Content-Length: 0
                """)
        }
        // A retransmission (same branch, same CSeq) is fine; a lower CSeq, a reused branch and a
        // branch without the cookie are each named.
        let f = RuleChecker().check(records([(false, 0, bye(5, "z9hG4bK-a")), (false, 0.5, bye(5, "z9hG4bK-a")), (false, 1, bye(4, "z9hG4bK-b")),
                                             (false, 1.5, bye(9, "z9hG4bK-a")), (false, 2, bye(10, "old-style"))]), end: 3)
        #expect(f.map(\.rule) == [.cseqIncreases, .viaBranch, .viaBranch])
        #expect(f.map(\.messageIndex) == [2, 3, 4])
    }

    @Test func mandatoryHeadersAreNamed() {
        let noCallID = Self.response(200, to: Self.invite, extra: ["Contact: <sip:dut@127.0.0.1:5090>", "Record-Route: <sip:rr1@127.0.0.1:4000;lr>"],
                                     dropping: ["Call-ID"])
        let f = RuleChecker().check(records([(true, 0, Self.invite), (false, 0.01, noCallID)]), end: 0.1)
        #expect(f.map(\.rule) == [.mandatoryHeaders, .responseCopiesRequest], "\(f)")
        #expect(f.first?.detail == "the 200 response has no Call-ID")
        // A response to a request that had no Call-ID has none to copy: no finding.
        var bare = Self.invite
        bare.remove(.callID)
        bare = try! SIPMessage(bytes: bare.serialized())
        let reply = Self.response(400, to: bare)
        #expect(RuleChecker().check(records([(true, 0, bare), (false, 0.01, reply)]), end: 0.1).isEmpty)
    }

    @Test func anUnparseableMessageFromTheDUTIsNamed() {
        let f = RuleChecker().check([RuleChecker.Record(sent: false, time: 0, message: nil, parseError: "bad")], end: 1)
        #expect(f.map(\.rule) == [.wellFormed])
    }

    @Test func aRegisterAnswerListsEachBindingWithExpires() {
        let register = Self.msg("""
            REGISTER sip:127.0.0.1:5090 SIP/2.0
            Via: SIP/2.0/UDP 127.0.0.1:4000;branch=z9hG4bK-r1;rport
            Max-Forwards: 70
            From: <sip:alice@127.0.0.1:5090>;tag=ft
            To: <sip:alice@127.0.0.1:5090>
            Call-ID: r1
            CSeq: 1 REGISTER
            Contact: <sip:a@127.0.0.1:4000>
            Expires: 600
            Content-Length: 0
            """)
        let good = Self.response(200, to: register, extra: ["Contact: <sip:a@127.0.0.1:4000>;expires=600", "Contact: <sip:b@127.0.0.1:4000>;expires=30"])
        #expect(RuleChecker().check(records([(true, 0, register), (false, 0.01, good)]), end: 1).isEmpty)
        // An Expires header does not stand in for the parameter (RFC 3261 §10.3 step 8: each Contact value).
        let bare = Self.response(200, to: register, extra: ["Contact: <sip:a@127.0.0.1:4000>;expires=600", "Contact: <sip:b@127.0.0.1:4000>", "Expires: 600"])
        let f = RuleChecker().check(records([(true, 0, register), (false, 0.01, bare)]), end: 1)
        #expect(f.map(\.rule) == [.registerContactExpires])
        #expect(f.first?.messageIndex == 1 && f.first?.detail.contains("sip:b@127.0.0.1:4000") == true, "\(f)")
        // A 200 listing nothing (no bindings left) and a refusal are fine.
        let none = Self.response(200, to: register)
        let refused = Self.response(423, to: register, extra: ["Min-Expires: 60"])
        #expect(RuleChecker().check(records([(true, 0, register), (false, 0.01, none), (false, 0.02, refused)]), end: 1).isEmpty)
    }
}
