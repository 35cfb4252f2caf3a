import Testing
import Foundation
import SIPMessage
@testable import Conformance

/// The rules of the DUT as UAC (the runner answered its INVITE) on hand-made exchanges: the
/// ACK of a 2xx and of a non-2xx, and Timer A.
struct UACRuleCheckerTests {
    static let invite = RuleCheckerTests.msg("""
        INVITE sip:conform@127.0.0.1:4000 SIP/2.0
        Via: SIP/2.0/UDP 127.0.0.1:5090;branch=z9hG4bK-inv;rport
        Max-Forwards: 70
        From: <sip:dut@127.0.0.1:5090>;tag=dut
        To: <sip:conform@127.0.0.1:4000>
        Call-ID: u1
        CSeq: 7 INVITE
        Contact: <sip:dut@127.0.0.1:5090>
        Content-Length: 0
        """)

    static func ack(branch: String, cseq: UInt32 = 7, tag: String? = "rt") -> SIPMessage {
        RuleCheckerTests.msg("""
            ACK sip:conform@127.0.0.1:4000 SIP/2.0
            Via: SIP/2.0/UDP 127.0.0.1:5090;branch=\(branch);rport
            Max-Forwards: 70
            From: <sip:dut@127.0.0.1:5090>;tag=dut
            To: <sip:conform@127.0.0.1:4000>\(tag.map { ";tag=\($0)" } ?? "")
            Call-ID: u1
            CSeq: \(cseq) ACK
            Content-Length: 0
            """)
    }

    static func response(_ code: Int) -> SIPMessage {
        RuleCheckerTests.response(code, to: invite, tag: code == 100 ? nil : "rt", extra: (200...299).contains(code) ? ["Contact: <sip:conform@127.0.0.1:4000>"] : [])
    }

    /// (sent by the runner, time, message)
    func check(_ list: [(Bool, Double, SIPMessage)], end: Double = 3) -> [ConformanceFinding] {
        RuleChecker().check(list.map { RuleChecker.Record(sent: $0.0, time: $0.1, message: $0.2) }, end: end)
    }

    @Test func aConformingACKOfA2xxHasNoFinding() {
        let f = check([(false, 0, Self.invite), (true, 0.01, Self.response(180)), (true, 0.1, Self.response(200)),
                       (false, 0.11, Self.ack(branch: "z9hG4bK-ack")),
                       (true, 0.3, Self.response(200)), (false, 0.31, Self.ack(branch: "z9hG4bK-ack"))])
        #expect(f.isEmpty, "\(f)")
    }

    @Test func anACKOfA2xxOnTheINVITEsBranchIsNamed() {
        let f = check([(false, 0, Self.invite), (true, 0.1, Self.response(200)), (false, 0.11, Self.ack(branch: "z9hG4bK-inv"))])
        #expect(f.map(\.rule) == [.ack2xx], "\(f)")
        #expect(f.first?.messageIndex == 2)
        #expect(f.first?.detail.contains("reuses the INVITE's branch") == true)
    }

    @Test func anACKOfA2xxWithAnotherCSeqOrTagIsNamed() {
        let f = check([(false, 0, Self.invite), (true, 0.1, Self.response(200)), (false, 0.11, Self.ack(branch: "z9hG4bK-a", cseq: 8, tag: "other"))])
        #expect(f.map(\.rule) == [.ack2xx, .ack2xx], "\(f)")
        #expect(f[0].detail.contains("CSeq 8") && f[1].detail.contains("To tag other"), "\(f)")
    }

    @Test func aMissingACKAndAnUnacknowledgedCopyAreNamed() {
        let missing = check([(false, 0, Self.invite), (true, 0.1, Self.response(200))])
        #expect(missing.map(\.rule) == [.ack2xx] && missing.first?.messageIndex == 1, "\(missing)")
        let copy = check([(false, 0, Self.invite), (true, 0.1, Self.response(200)), (false, 0.11, Self.ack(branch: "z9hG4bK-a")),
                          (true, 0.6, Self.response(200))])
        #expect(copy.map(\.rule) == [.ack2xx] && copy.first?.messageIndex == 3, "\(copy)")
        let non2xx = check([(false, 0, Self.invite), (true, 0.1, Self.response(486))])
        #expect(non2xx.map(\.rule) == [.ackNon2xx] && non2xx.first?.messageIndex == 1, "\(non2xx)")
    }

    @Test func theACKOfANon2xxMustUseTheINVITEsBranch() {
        let good = check([(false, 0, Self.invite), (true, 0.1, Self.response(486)), (false, 0.11, Self.ack(branch: "z9hG4bK-inv"))])
        #expect(good.isEmpty, "\(good)")
        let bad = check([(false, 0, Self.invite), (true, 0.1, Self.response(486)), (false, 0.11, Self.ack(branch: "z9hG4bK-new"))])
        #expect(bad.map(\.rule) == [.ackNon2xx] && bad.first?.messageIndex == 2, "\(bad)")
        #expect(bad.first?.detail.contains("z9hG4bK-inv") == true)
    }

    @Test func timerAIsChecked() {
        // Copies at T1 and 3·T1, answered at 2.2 s: on schedule.
        let good = check([(false, 0, Self.invite), (false, 0.5, Self.invite), (false, 1.5, Self.invite), (true, 2.2, Self.response(486)),
                          (false, 2.21, Self.ack(branch: "z9hG4bK-inv"))])
        #expect(good.isEmpty, "\(good)")
        // No copy at all in 2.2 s.
        let none = check([(false, 0, Self.invite), (true, 2.2, Self.response(486)), (false, 2.21, Self.ack(branch: "z9hG4bK-inv"))])
        #expect(none.map(\.rule) == [.inviteRetransmission], "\(none)")
        // A copy at a fixed 0.5 s interval (no doubling).
        let flat = check([(false, 0, Self.invite), (false, 0.5, Self.invite), (false, 1.0, Self.invite), (false, 1.5, Self.invite),
                          (true, 2.2, Self.response(486)), (false, 2.21, Self.ack(branch: "z9hG4bK-inv"))])
        #expect(flat.map(\.rule) == [.inviteRetransmission], "\(flat)")
        // A copy long after a provisional response.
        let after = check([(false, 0, Self.invite), (true, 0.05, Self.response(100)), (false, 0.5, Self.invite), (true, 0.6, Self.response(486)),
                           (false, 0.61, Self.ack(branch: "z9hG4bK-inv"))])
        #expect(after.map(\.rule) == [.inviteRetransmission] && after.first?.messageIndex == 2, "\(after)")
        // Not checked over a reliable transport.
        var tcp = RuleChecker()
        tcp.checksInviteRetransmissions = false
        let records = [(false, 0.0, Self.invite), (true, 2.2, Self.response(486)), (false, 2.21, Self.ack(branch: "z9hG4bK-inv"))]
        #expect(tcp.check(records.map { RuleChecker.Record(sent: $0.0, time: $0.1, message: $0.2) }, end: 3).isEmpty)
    }
}
