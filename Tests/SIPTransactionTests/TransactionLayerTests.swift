import Testing
import SIPMessage
@testable import SIPTransaction

@Suite("Transaction layer: matching and routing (RFC 3261 §17.1.3, §17.2.3, §9.2, §8.2.2.2)")
struct TransactionLayerTests {
    typealias Layer = TransactionLayer<String>

    func kinds(_ out: [Layer.Output]) -> [String] {
        out.map { o in
            switch o {
            case .send(let m, let to, _): return "send \(m.method?.token ?? String(m.statusCode!)) to \(to)"
            case .startTimer(_, let t, _): return "start \(t.rawValue)"
            case .cancelTimer(_, let t): return "cancel \(t.rawValue)"
            case .request(let m, let from, _): return "request \(m.method!.token) from \(from)"
            case .cancel(_, let from, _, _): return "cancel-request from \(from)"
            case .ack(_, let from): return "ack from \(from)"
            case .response(let m, _): return "response \(m.statusCode!)"
            case .strayResponse(let m, _): return "stray \(m.statusCode!)"
            case .timeout(_, let t): return "timeout \(t.rawValue)"
            case .transportError: return "transport error"
            case .terminated: return "terminated"
            }
        }
    }

    func serverID(_ out: [Layer.Output]) -> TransactionID? {
        for o in out { if case .request(_, _, let id) = o { return id } }
        return nil
    }

    @Test func responsesMatchByBranchAndMethod() {
        var layer = Layer(seed: 1)
        let inv = request("INVITE", branch: "z9hG4bK1")
        let (id, out) = layer.sendRequest(inv, to: "bob", reliable: false)
        #expect(kinds(out) == ["send INVITE to bob", "start A", "start B"])
        // A response with another branch, or another CSeq method, is stray.
        let wrongBranch = response(180, to: request("INVITE", branch: "z9hG4bK2"))
        #expect(kinds(layer.receive(wrongBranch, from: "bob", reliable: false)) == ["stray 180"])
        var wrongMethod = response(200, to: inv)
        try! wrongMethod.set(.cseq, "1 CANCEL")
        #expect(kinds(layer.receive(wrongMethod, from: "bob", reliable: false)) == ["stray 200"])
        let ringing = layer.receive(response(180, to: inv), from: "bob", reliable: false)
        #expect(kinds(ringing) == ["cancel A", "cancel B", "response 180"])
        if case .response(_, let rid) = ringing.last { #expect(rid == id) }
        #expect(layer.stateDescription(id) == "proceeding")
        #expect(layer.counters.strayResponses == 2)
    }

    /// `awaitsTrying` holds for an INVITE server transaction until its first response, and
    /// never for other transactions.
    @Test func awaitsTryingUntilTheFirstResponse() throws {
        var layer = Layer(seed: 1)
        let inv = request("INVITE", branch: "z9hG4bKt")
        let id = try #require(serverID(layer.receive(inv, from: "alice", reliable: false)))
        let before = layer.awaitsTrying(id)
        _ = layer.respond(response(180, to: inv), in: id)
        let after = layer.awaitsTrying(id)
        let bye = try #require(serverID(layer.receive(request("BYE", branch: "z9hG4bKb"), from: "alice", reliable: false)))
        let forBye = layer.awaitsTrying(bye)
        let unknown = layer.awaitsTrying(TransactionID(rawValue: 999))
        #expect(before)
        #expect(!after)
        #expect(!forBye)
        #expect(!unknown)
    }

    @Test func serverTransactionAbsorbsRetransmissionsAndNon2xxACK() {
        var layer = Layer(seed: 2)
        let inv = request("INVITE", branch: "z9hG4bKs1")
        let first = layer.receive(inv, from: "alice", reliable: false)
        #expect(kinds(first) == ["request INVITE from alice", "start trying"])
        let id = try! #require(serverID(first))
        #expect(kinds(layer.receive(inv, from: "alice", reliable: false)).isEmpty)
        #expect(kinds(layer.respond(response(486, to: inv), in: id)) == ["cancel trying", "send 486 to alice", "start G", "start H"])
        #expect(kinds(layer.receive(inv, from: "alice", reliable: false)) == ["send 486 to alice"])
        let ack = request("ACK", branch: "z9hG4bKs1", toTag: "t1")
        #expect(kinds(layer.receive(ack, from: "alice", reliable: false)) == ["cancel G", "cancel H", "start I"])
        #expect(layer.stateDescription(id) == "confirmed")
        #expect(layer.count == 1)
        #expect(kinds(layer.timerFired(id, .I)) == ["terminated"])
        #expect(layer.count == 0)
    }

    @Test func ackFor2xxGoesToTheTU() {
        var layer = Layer(seed: 3)
        let inv = request("INVITE", branch: "z9hG4bKs2")
        let id = try! #require(serverID(layer.receive(inv, from: "alice", reliable: false)))
        _ = layer.respond(response(200, to: inv), in: id)
        // The ACK for a 2xx has its own branch: no transaction matches it.
        let ack = request("ACK", branch: "z9hG4bKnewbranch", toTag: "t1")
        #expect(kinds(layer.receive(ack, from: "alice", reliable: false)) == ["ack from alice"])
        // RFC 6026: one with the INVITE's branch reaches the TU through the Accepted state.
        let same = request("ACK", branch: "z9hG4bKs2", toTag: "t1")
        #expect(kinds(layer.receive(same, from: "alice", reliable: false)) == ["ack from alice"])
        #expect(layer.stateDescription(id) == "accepted")
    }

    @Test func cancelFindsItsInvite() {
        var layer = Layer(seed: 4)
        let inv = request("INVITE", branch: "z9hG4bKc1")
        let invID = try! #require(serverID(layer.receive(inv, from: "alice", reliable: false)))
        let cancel = request("CANCEL", branch: "z9hG4bKc1")
        let out = layer.receive(cancel, from: "alice", reliable: false)
        #expect(kinds(out) == ["cancel-request from alice"])
        guard case .cancel(_, _, let cancelID, let target) = out[0] else { Issue.record("no cancel"); return }
        #expect(target == invID)
        #expect(cancelID != invID)
        #expect(kinds(layer.respond(response(200, to: cancel), in: cancelID)) == ["send 200 to alice", "start J"])
        #expect(kinds(layer.respond(response(487, to: inv), in: invID)) == ["cancel trying", "send 487 to alice", "start G", "start H"])
    }

    @Test func unmatchedCancelGets481() {
        var layer = Layer(seed: 5)
        let out = layer.receive(request("CANCEL", branch: "z9hG4bKnothing"), from: "alice", reliable: false)
        #expect(kinds(out) == ["send 481 to alice", "start J"])
        #expect(layer.counters.unmatchedCancels == 1)
    }

    @Test func mergedRequestGets482() {
        var layer = Layer(seed: 6)
        let a = request("INVITE", branch: "z9hG4bKpath1", sentBy: "proxy1.example.com")
        let b = request("INVITE", branch: "z9hG4bKpath2", sentBy: "proxy2.example.com")
        #expect(serverID(layer.receive(a, from: "p1", reliable: false)) != nil)
        let out = layer.receive(b, from: "p2", reliable: false)
        #expect(kinds(out) == ["start trying", "cancel trying", "send 482 to p2", "start G", "start H"])
        #expect(layer.counters.merged482 == 1)
        // With a To tag (in-dialog) the check does not apply.
        let c = request("BYE", branch: "z9hG4bKpath3", toTag: "x")
        #expect(serverID(layer.receive(c, from: "p3", reliable: false)) != nil)
    }

    @Test func rfc2543RequestsMatchWithoutTheCookie() {
        var layer = Layer(seed: 7)
        let old = msg("""
        INVITE sip:bob@example.com SIP/2.0
        Via: SIP/2.0/UDP 192.0.2.9:5060
        From: <sip:alice@example.com>
        To: <sip:bob@example.com>
        Call-ID: old-1
        CSeq: 7 INVITE


        """)
        let id = try! #require(serverID(layer.receive(old, from: "old", reliable: false)))
        #expect(kinds(layer.receive(old, from: "old", reliable: false)).isEmpty)
        _ = layer.respond(response(404, to: old), in: id)
        let ack = msg("""
        ACK sip:bob@example.com SIP/2.0
        Via: SIP/2.0/UDP 192.0.2.9:5060
        From: <sip:alice@example.com>
        To: <sip:bob@example.com>;tag=t1
        Call-ID: old-1
        CSeq: 7 ACK


        """)
        #expect(kinds(layer.receive(ack, from: "old", reliable: false)) == ["cancel G", "cancel H", "start I"])
    }

    @Test func timersForDeadTransactionsAreIgnored() {
        var layer = Layer(seed: 8)
        let (id, _) = layer.sendRequest(request("OPTIONS", branch: "z9hG4bKo"), to: "x", reliable: true)
        #expect(kinds(layer.timerFired(id, .F)) == ["cancel E", "timeout F", "terminated"])
        #expect(layer.timerFired(id, .F).isEmpty)
        #expect(layer.receive(response(200, to: request("OPTIONS", branch: "z9hG4bKo")), from: "x", reliable: true).count == 1)
    }

    @Test func branchesCarryTheCookieAndAreReproducible() {
        var a = SplitMix64(seed: 42), b = SplitMix64(seed: 42)
        let x = Layer.newBranch(using: &a), y = Layer.newBranch(using: &b)
        #expect(x == y)
        #expect(x.hasPrefix("z9hG4bK") && x.count == 23)
        #expect(Layer.newBranch() != Layer.newBranch())
    }

    /// A generator that returns fixed numbers, to check the branch's digits.
    struct FixedNumbers: RandomNumberGenerator {
        var values: [UInt64]
        mutating func next() -> UInt64 { values.removeFirst() }
    }

    @Test func branchesAreTheCookieAndSixteenLowercaseHexDigits() {
        var g = FixedNumbers(values: [0xAB, 0xFEDC_BA98_7654_3210, 0, .max])
        #expect(Layer.newBranch(using: &g) == "z9hG4bK00000000000000ab")
        #expect(Layer.newBranch(using: &g) == "z9hG4bKfedcba9876543210")
        #expect(Layer.newBranch(using: &g) == "z9hG4bK0000000000000000")
        #expect(Layer.newBranch(using: &g) == "z9hG4bKffffffffffffffff")
    }
}
