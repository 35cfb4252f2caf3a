import Testing
import SIPMessage
import SIPTransaction
@testable import SIPSimulation

func makeRequest(_ method: SIPMethod, n: Int, branch: String) -> SIPMessage {
    var m = try! SIPMessage(method: method, requestURI: "sip:uas@sim")
    try! m.append(.via, "SIP/2.0/UDP uac:5060;branch=\(branch)")
    try! m.append(.maxForwards, "70")
    try! m.append(.from, "<sip:uac@sim>;tag=f\(n)")
    try! m.append(.to, "<sip:uas@sim>")
    try! m.append(.callID, "call-\(n)@sim")
    try! m.append(.cseq, CSeq(1, method))
    return m
}

/// Many transactions over a lossy, duplicating, reordering network: each completes or times
/// out exactly when RFC 3261 says, the TU sees each request once, and runs are reproducible.
@Suite("Transactions on a simulated lossy network")
struct LossyNetworkTests {
    static let lossy = NetworkConditions(loss: 0.30, duplication: 0.10, minimumDelay: .milliseconds(5), maximumDelay: .milliseconds(150))

    struct Outcome: Equatable {
        var finals = 0, timeouts = 0, serverDeliveries = 0, serverTerminated = 0, clientTerminated = 0
        var trace: [String] = []
    }

    /// `count` client transactions of `method` from uac to uas; the UAS answers `code` after
    /// `answerDelay`.
    func run(seed: UInt64, method: SIPMethod, count: Int, code: Int, answerDelay: Duration = .milliseconds(20), conditions: NetworkConditions = lossy) -> (Outcome, Simulation) {
        let sim = Simulation(seed: seed, conditions: conditions)
        let uac = sim.addNode("uac")
        let uas = sim.addNode("uas")
        var out = Outcome()
        var finalsPerTx: [TransactionID: Int] = [:]
        uas.onEvent = { node, e in
            switch e {
            case .request(let m, _, let id):
                out.serverDeliveries += 1
                sim.schedule(after: answerDelay) { node.respond(SIPMessage(responseTo: m, statusCode: code, toTag: "uas\(id.rawValue)"), in: id) }
            case .terminated: out.serverTerminated += 1
            default: break
            }
        }
        uac.onEvent = { _, e in
            switch e {
            case .response(let m, let id, _) where (m.statusCode ?? 0) >= 200:
                finalsPerTx[id, default: 0] += 1
                out.finals += 1
            case .timeout: out.timeouts += 1
            case .terminated: out.clientTerminated += 1
            default: break
            }
        }
        for n in 0..<count {
            sim.schedule(after: .milliseconds(n * 3)) {
                uac.sendRequest(makeRequest(method, n: n, branch: "z9hG4bK-\(seed)-\(n)"), to: "uas")
            }
        }
        sim.run(until: .seconds(120))
        #expect(finalsPerTx.values.allSatisfy { $0 == 1 }, "a final response reached the TU twice")
        out.trace = sim.trace
        return (out, sim)
    }

    @Test func nonInviteTransactionsCompleteAt30PercentLoss() {
        let (o, sim) = run(seed: 1, method: .options, count: 300, code: 200)
        #expect(sim.lost > 300 && sim.duplicated > 50, "the network really was lossy: lost \(sim.lost), duplicated \(sim.duplicated)")
        // Each request reached the TU exactly once despite retransmissions and duplicates.
        #expect(o.serverDeliveries == 300)
        #expect(o.finals + o.timeouts == 300)
        #expect(o.finals >= 297, "finals \(o.finals), timeouts \(o.timeouts)")
        #expect(o.clientTerminated == 300)
        #expect(o.serverTerminated == 300)
        #expect(sim.node("uac")!.layer.count == 0 && sim.node("uas")!.layer.count == 0)
    }

    @Test func inviteFailuresAreACKedAt30PercentLoss() {
        let (o, sim) = run(seed: 2, method: .invite, count: 300, code: 486)
        #expect(o.serverDeliveries == 300)
        #expect(o.finals >= 297, "finals \(o.finals), timeouts \(o.timeouts)")
        // Server transactions end through Confirmed (the ACK arrived), except where every ACK
        // and every retransmitted 486 within Timer H was lost.
        let serverTimeouts = sim.node("uas")!.events.filter { if case .timeout(_, .H, _) = $0 { return true } else { return false } }.count
        #expect(serverTimeouts <= 3)
        #expect(o.serverTerminated == 300 && o.clientTerminated == 300)
    }

    @Test func deadPeerTimesOutExactlyWhenTheRFCSays() {
        let dead = NetworkConditions(loss: 1.0)
        for (method, timer, transmissions) in [(SIPMethod.options, TransactionTimer.F, 11), (.invite, .B, 7)] {
            let sim = Simulation(seed: 3, conditions: dead)
            let uac = sim.addNode("uac")
            sim.addNode("uas")
            sim.schedule(after: .seconds(10)) { uac.sendRequest(makeRequest(method, n: 0, branch: "z9hG4bKdead"), to: "uas") }
            sim.run()
            let timeouts = uac.events.compactMap { e -> (TransactionTimer, Duration)? in
                if case .timeout(_, let t, let at) = e { return (t, at) } else { return nil }
            }
            #expect(timeouts.count == 1)
            #expect(timeouts.first?.0 == timer)
            #expect(timeouts.first?.1 == .seconds(10) + .milliseconds(500) * 64, "\(method) timed out at \(String(describing: timeouts.first?.1))")
            // Retransmissions at 0.5, 1, 2, 4 s… (capped at T2 = 4 s for non-INVITE).
            #expect(uac.transmissions == transmissions, "\(method): \(uac.transmissions) transmissions")
        }
    }

    @Test func runsAreReproduciblePerSeed() {
        let (a, _) = run(seed: 7, method: .options, count: 50, code: 200)
        let (b, _) = run(seed: 7, method: .options, count: 50, code: 200)
        let (c, _) = run(seed: 8, method: .options, count: 50, code: 200)
        #expect(a.trace == b.trace)
        #expect(a.trace.count > 100)
        #expect(a.trace != c.trace)
    }

    @Test func perfectNetworkHasNoRetransmissions() {
        let (o, sim) = run(seed: 4, method: .options, count: 100, code: 200, conditions: .perfect)
        #expect(o.finals == 100)
        // One request and one response per transaction.
        #expect(sim.sent == 200)
    }

    @Test func slowTUGets100TryingFromTheInviteServer() {
        let (_, sim) = run(seed: 5, method: .invite, count: 10, code: 486, answerDelay: .seconds(2), conditions: .perfect)
        let tryings = sim.node("uac")!.events.filter { if case .response(let m, _, _) = $0 { return m.statusCode == 100 } else { return false } }
        #expect(tryings.count == 10)
    }
}
