import Testing
import NetworkIO
import PacketCapture
import SIPMessage
import SIPRules
@testable import CaptureAnalysis

/// The capture check's machine layers (our transaction layer, dialog, INVITE session and REFER
/// subscriber playing each party's peer) on hand-made calls between A (the caller) and B: what
/// only a machine can tell is found, alone, at its frame, naming the party and the layer; what
/// the rules also find is reported once, with both layers.
struct CaptureCheckMachineTests {
    typealias T = CaptureCheckTests
    static let a = T.a, b = T.b

    /// The one finding of `findings`: `rule`, by `party`, at `frame`, found by `layers`.
    func expectOnly(_ findings: [CaptureCheck.Finding], _ rule: ConformanceRule, party: CaptureEndpoint, frame: Int, layers: CaptureCheck.Layers,
                    sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(findings.count == 1, "\(findings)", sourceLocation: sourceLocation)
        guard let f = findings.first else { return }
        #expect(f.rule == rule && f.party == party && f.frameNumber == frame, "\(f)", sourceLocation: sourceLocation)
        #expect(f.layers == layers, "\(f.layers)", sourceLocation: sourceLocation)
        #expect(f.callID == "c1" && !f.detail.isEmpty, sourceLocation: sourceLocation)
    }

    @Test func aResponseToATransactionThePeerNeverOpened() {
        // B answers an INFO that A never sent (its branch names no transaction of A).
        var s = T.cleanCall()
        let ghost = T.request("INFO", 5, branch: "z9hG4bK-ghost")
        s.ba(5, T.response(200, to: ghost))
        let f = s.check()
        expectOnly(f, .responseMatchesTransaction, party: Self.b, frame: 8, layers: .transaction)
        #expect(f.first?.detail.contains("answers no request of the peer") == true, "\(f)")
        // The same response where the capture starts mid-call (its first message a response): nothing.
        var mid = T.Script()
        mid.ba(0.3, T.ok)
        mid.ab(0.31, T.ack)
        mid.ba(5, T.response(200, to: ghost))
        #expect(mid.check().isEmpty, "\(mid.check())")
    }

    @Test func anInDialogRequestWithALowerCSeqGets500FromOurDialog() {
        var s = T.cleanCall(upToBye: false)
        let info5 = T.request("INFO", 5, branch: "z9hG4bK-n5")
        s.ab(2, info5)
        s.ba(2.01, T.response(200, to: info5))
        let info3 = T.request("INFO", 3, branch: "z9hG4bK-n3")
        s.ab(3, info3)
        s.ba(3.01, T.response(200, to: info3))
        let f = s.check()
        // The rules see it too: one finding, both layers.
        expectOnly(f, .cseqIncreases, party: Self.a, frame: 8, layers: [.rules, .dialog])
    }

    @Test func aRequestNamingNoDialogOfTheCallGets481() {
        // Both tags unknown: the rules judge only a request that keeps one tag of a dialog.
        var s = T.cleanCall(upToBye: false)
        var bye = T.request("BYE", 2, branch: "z9hG4bK-b2", toTag: "yy")
        try! bye.set(.from, "<sip:a@10.0.0.1>;tag=zz")
        s.ab(10, bye)
        s.ba(10.01, T.response(481, to: bye, tag: "yy"))
        let f = s.check()
        #expect(f.map(\.rule.id).sorted() == ["481-unknown-dialog", "dialog-tags"], "\(f)")
        let machine = f.first { $0.rule == .dialogTags }
        #expect(machine?.party == Self.a && machine?.frameNumber == 6 && machine?.layers == .dialog, "\(f)")
        #expect(f.first { $0.rule == .unknownDialog }?.layers == .rules)
    }

    @Test func aReinviteDuringAPendingOneGets500FromOurSession() {
        var s = T.cleanCall(upToBye: false)
        let re2 = T.request("INVITE", 2, branch: "z9hG4bK-r2", body: T.offer)
        s.ab(2, re2)
        s.ba(2.01, T.response(100, to: re2, contact: false))
        let re3 = T.request("INVITE", 3, branch: "z9hG4bK-r3", body: T.offer)
        s.ab(2.5, re3)                                                         // frame 8
        s.ba(2.51, T.response(500, to: re3, extra: ["Retry-After: 1"]))
        s.ab(2.52, T.request("ACK", 3, branch: "z9hG4bK-r3"))
        s.ba(3, T.response(200, to: re2, body: T.answer))
        s.ab(3.01, T.request("ACK", 2, branch: "z9hG4bK-a2"))
        let f = s.check()
        expectOnly(f, .reinviteWhilePending, party: Self.a, frame: 8, layers: .session)
        #expect(f.first?.detail.contains("500") == true, "\(f)")

        // A re-INVITE B sends after answering A's pending one provisionally: 491 from our session.
        var g = T.cleanCall(upToBye: false)
        g.ab(2, re2)
        g.ba(2.01, T.response(183, to: re2))
        let reB = T.request("INVITE", 1, branch: "z9hG4bK-rb", fromCallee: true, body: T.offer)
        g.ba(2.5, reB)                                                         // frame 8
        g.ab(2.51, T.response(491, to: reB, tag: "at"))
        g.ba(2.52, T.request("ACK", 1, branch: "z9hG4bK-rb", fromCallee: true))
        g.ba(3, T.response(200, to: re2, body: T.answer))
        g.ab(3.01, T.request("ACK", 2, branch: "z9hG4bK-a2"))
        let gf = g.check()
        expectOnly(gf, .reinviteWhilePending, party: Self.b, frame: 8, layers: .session)
        #expect(gf.first?.detail.contains("491") == true, "\(gf)")

        // Crossing re-INVITEs (glare: neither had seen the other's) are no one's fault.
        var x = T.cleanCall(upToBye: false)
        x.ab(2, re2)
        x.ba(2.001, reB)
        x.ba(2.01, T.response(491, to: re2))
        x.ab(2.011, T.request("ACK", 2, branch: "z9hG4bK-r2"))
        x.ab(2.02, T.response(491, to: reB, tag: "at"))
        x.ba(2.021, T.request("ACK", 1, branch: "z9hG4bK-rb", fromCallee: true))
        #expect(x.check().isEmpty, "\(x.check())")
    }

    @Test func anUpdateWithAnOfferWhileOneIsOutstandingGets491FromOurSession() {
        // B offers in a re-INVITE; A answers it provisionally (so A has it), then offers in an
        // UPDATE before answering: RFC 3311 §5.2, our session answers 491.
        var s = T.cleanCall(upToBye: false)
        let reB = T.request("INVITE", 1, branch: "z9hG4bK-rb", fromCallee: true, body: T.offer)
        s.ba(2, reB)
        s.ab(2.01, T.response(180, to: reB, tag: "at"))
        let update = T.request("UPDATE", 2, branch: "z9hG4bK-u2", body: T.offer)
        s.ab(2.5, update)                                                      // frame 8
        s.ba(2.51, T.response(491, to: update))
        s.ab(3, T.response(200, to: reB, tag: "at", body: T.answer))
        s.ba(3.01, T.request("ACK", 1, branch: "z9hG4bK-rba", fromCallee: true))
        let f = s.check()
        expectOnly(f, .offerWhilePending, party: Self.a, frame: 8, layers: .session)
        #expect(f.first?.detail.contains("491") == true, "\(f)")

        // UPDATEs that cross (neither side had seen the other's offer), both refused 491: glare, no finding.
        var x = T.cleanCall(upToBye: false)
        let updateB = T.request("UPDATE", 1, branch: "z9hG4bK-ub", fromCallee: true, body: T.offer)
        x.ab(2, update)
        x.ba(2.001, updateB)
        x.ba(2.01, T.response(491, to: update))
        x.ab(2.02, T.response(491, to: updateB, tag: "at"))
        #expect(x.check().isEmpty, "\(x.check())")
    }

    @Test func anOfferLeftWithoutAnswerIsFoundByOurSession() {
        // B offers in a re-INVITE; A's 200 carries no answer (RFC 3261 §13.3.1: it is due there).
        var s = T.cleanCall(upToBye: false)
        let reB = T.request("INVITE", 1, branch: "z9hG4bK-rb", fromCallee: true, body: T.offer)
        s.ba(2, reB)
        s.ab(2.01, T.response(200, to: reB, tag: "at"))                       // frame 7
        s.ba(2.02, T.request("ACK", 1, branch: "z9hG4bK-rba", fromCallee: true))
        let f = s.check()
        expectOnly(f, .offerAnswer, party: Self.a, frame: 7, layers: .session)
        #expect(f.first?.detail.contains("carries no answer") == true, "\(f)")

        // A's offerless re-INVITE gets B's offer in the 200; A's ACK carries no answer: the
        // rules see it too.
        var t = T.cleanCall(upToBye: false)
        let re2 = T.request("INVITE", 2, branch: "z9hG4bK-r2")
        t.ab(2, re2)
        t.ba(2.01, T.response(200, to: re2, body: T.offer))
        t.ab(2.02, T.request("ACK", 2, branch: "z9hG4bK-a2"))                  // frame 8
        expectOnly(t.check(), .offerAnswer, party: Self.a, frame: 8, layers: [.rules, .session])
    }

    @Test func aReinviteInAnEarlyDialogIsFoundBeforeAnySessionIsAdopted() {
        // A re-INVITEs in the early dialog B's 180 made, before B's final response: 500.
        var s = T.Script()
        s.ab(0, T.invite)
        s.ba(0.01, T.response(180, to: T.invite))
        let re2 = T.request("INVITE", 2, branch: "z9hG4bK-r2", body: T.offer)
        s.ab(0.5, re2)                                                         // frame 3
        s.ba(0.51, T.response(500, to: re2, extra: ["Retry-After: 1"]))
        s.ab(0.52, T.request("ACK", 2, branch: "z9hG4bK-r2"))
        s.ba(1, T.ok)
        s.ab(1.01, T.ack)
        let f = s.check()
        expectOnly(f, .reinviteWhilePending, party: Self.a, frame: 3, layers: .session)
        #expect(f.first?.detail.contains("early dialog") == true && f.first?.detail.contains("500") == true, "\(f)")

        // B re-INVITEs in the early dialog its 183 made, while A's INVITE has no final response: 491.
        var g = T.Script()
        g.ab(0, T.invite)
        g.ba(0.01, T.response(183, to: T.invite))
        let reB = T.request("INVITE", 1, branch: "z9hG4bK-rb", fromCallee: true, body: T.offer)
        g.ba(0.5, reB)                                                         // frame 3
        g.ab(0.51, T.response(491, to: reB, tag: "at"))
        g.ba(0.52, T.request("ACK", 1, branch: "z9hG4bK-rb", fromCallee: true))
        g.ba(1, T.ok)
        g.ab(1.01, T.ack)
        let gf = g.check()
        expectOnly(gf, .reinviteWhilePending, party: Self.b, frame: 3, layers: .session)
        #expect(gf.first?.detail.contains("491") == true, "\(gf)")

        // The same re-INVITE once the INVITE was answered 2xx: the session takes it, no finding.
        var c = T.Script()
        c.ab(0, T.invite)
        c.ba(0.01, T.response(180, to: T.invite))
        c.ba(0.2, T.ok)
        c.ab(0.21, T.ack)
        c.ab(0.5, re2)
        c.ba(0.51, T.response(200, to: re2, body: T.answer))
        c.ab(0.52, T.request("ACK", 2, branch: "z9hG4bK-a2"))
        #expect(c.check().isEmpty, "\(c.check())")
    }

    @Test func aCallWithReinvitesAndUpdatesDoneRightHasNoSessionFinding() {
        var s = T.cleanCall(upToBye: false)
        let re2 = T.request("INVITE", 2, branch: "z9hG4bK-r2", body: T.offer)  // A offers in a re-INVITE
        s.ab(2, re2)
        s.ba(2.01, T.response(100, to: re2, contact: false))
        s.ba(2.02, T.response(200, to: re2, body: T.answer))
        s.ab(2.03, T.request("ACK", 2, branch: "z9hG4bK-a2"))
        // B asks for an offer, numbering its requests from 1 as A did (RFC 3261 §12.2.1.1: each
        // side its own CSeq space): B's INVITE 1 and its ACK are not A's INVITE 1 and ACK.
        let reB = T.request("INVITE", 1, branch: "z9hG4bK-rb", fromCallee: true)
        s.ba(3, reB)
        s.ab(3.01, T.response(200, to: reB, tag: "at", body: T.offer))
        s.ba(3.02, T.request("ACK", 1, branch: "z9hG4bK-rba", fromCallee: true, body: T.answer))
        let update = T.request("UPDATE", 3, branch: "z9hG4bK-u3", body: T.offer)  // A offers in an UPDATE
        s.ab(4, update)
        s.ba(4.01, T.response(200, to: update, body: T.answer))
        let refresh = T.request("UPDATE", 2, branch: "z9hG4bK-ub", fromCallee: true)  // B refreshes
        s.ba(5, refresh)
        s.ab(5.01, T.response(200, to: refresh, tag: "at"))
        let bye = T.request("BYE", 4, branch: "z9hG4bK-b4")
        s.ab(10, bye)
        s.ba(10.01, T.response(200, to: bye))
        #expect(s.check().isEmpty, "\(s.check())")
    }

    @Test func a2xxCopyAfterTheAckIsAcknowledgedAgainButAnAckForNoFinalIsNot() {
        // The 200 retransmitted after the ACK, ACKed again: fine.
        var s = T.cleanCall(upToBye: false)
        s.ba(0.8, T.ok)
        s.ab(0.81, T.ack)
        s.ab(10, T.bye)
        s.ba(10.01, T.response(200, to: T.bye))
        #expect(s.check().isEmpty, "\(s.check())")
        // An ACK whose CSeq number no final response of B carried.
        var t = T.cleanCall()
        t.ab(11, T.request("ACK", 7, branch: "z9hG4bK-a7"))
        expectOnly(t.check(), .ackAnswersFinal, party: Self.a, frame: 8, layers: .dialog)
    }

    @Test func theAckOfA2xxOnTheInvitesBranchIsTakenByTheServerTransaction() {
        var s = T.cleanCall()
        s.messages[4] = CaptureCheck.Message(frameNumber: 5, time: s.messages[4].time, source: Self.a, destination: Self.b, reliable: false,
                                             message: T.request("ACK", 1, branch: "z9hG4bK-i1"))
        let f = s.check()
        expectOnly(f, .ack2xx, party: Self.a, frame: 5, layers: .transaction)
        #expect(f.first?.detail.contains("on the INVITE's branch") == true, "\(f)")
    }

    @Test func aBranchNamesOneTransaction() {
        var s = T.cleanCall(upToBye: false)
        let info = T.request("INFO", 2, branch: "z9hG4bK-n2")
        s.ab(2, info)
        s.ba(2.01, T.response(200, to: info))
        let bye = T.request("BYE", 3, branch: "z9hG4bK-n2")
        s.ab(10, bye)                                                          // frame 8
        s.ba(10.01, T.response(200, to: bye))
        expectOnly(s.check(), .viaBranch, party: Self.a, frame: 8, layers: .transaction)
    }

    static func notify(_ cseq: UInt32, _ state: String, _ frag: String, branch: String) -> SIPMessage {
        T.request("NOTIFY", cseq, branch: branch, fromCallee: true,
                  extra: ["Event: refer", "Subscription-State: \(state)", "Content-Type: message/sipfrag"], body: frag)
    }

    @Test func aNotifyAfterTheSubscriptionEndedGets481FromOurSubscriber() {
        var s = T.cleanCall(upToBye: false)
        let refer = T.request("REFER", 2, branch: "z9hG4bK-r2", extra: ["Refer-To: <sip:c@10.0.0.3>"])
        s.ab(2, refer)
        s.ba(2.01, T.response(202, to: refer))
        let done = Self.notify(1, "terminated;reason=noresource", "SIP/2.0 200 OK\r\n", branch: "z9hG4bK-n1")
        s.ba(3, done)
        s.ab(3.01, T.response(200, to: done, tag: "at"))
        #expect(s.check().isEmpty, "\(s.check())")
        let late = Self.notify(2, "terminated;reason=noresource", "SIP/2.0 200 OK\r\n", branch: "z9hG4bK-n2")
        s.ba(4, late)                                                          // frame 10
        s.ab(4.01, T.response(200, to: late, tag: "at"))   // A lenient: our subscriber would answer 481
        expectOnly(s.check(), .notifyInSubscription, party: Self.b, frame: 10, layers: .subscription)

        // A refused REFER has no subscription.
        var r = T.cleanCall(upToBye: false)
        r.ab(2, refer)
        r.ba(2.01, T.response(603, to: refer))
        let n = Self.notify(1, "active;expires=60", "SIP/2.0 100 Trying\r\n", branch: "z9hG4bK-n1")
        r.ba(3, n)                                                             // frame 8
        r.ab(3.01, T.response(200, to: n, tag: "at"))
        let rf = r.check()
        expectOnly(rf, .notifyInSubscription, party: Self.b, frame: 8, layers: .subscription)
        #expect(rf.first?.detail.contains("refused 603") == true, "\(rf)")
    }

    @Test func aRequestAfterTheByeIsFoundByBothLayers() {
        var s = T.cleanCall()
        let info = T.request("INFO", 3, branch: "z9hG4bK-n3")
        s.ab(11, info)
        s.ba(11.01, T.response(481, to: info))
        let f = s.check()
        // The rules' 481 finding names A as well; the request after the BYE is found by both layers.
        let after = f.first { $0.rule == .requestAfterBye }
        #expect(after?.party == Self.a && after?.frameNumber == 8 && after?.layers == [.rules, .dialog], "\(f)")
    }

    /// A clean call over UDP and over TCP: the machines alone add nothing.
    @Test func cleanCallsGiveTheMachinesNothingToSay() {
        for tcp in [false, true] {
            var s = T.Script()
            for m in T.cleanCall().messages {
                s.add(Double(m.time.totalNanoseconds - T.origin * 1_000_000_000) / 1e9, m.message, from: m.source, to: m.destination, tcp: tcp)
            }
            var machines = MachineReplay(check: CaptureCheck(), callID: "c1", messages: s.messages)
            #expect(machines.run().isEmpty)
        }
    }
}
