import Testing
import SIPMessage
import SIPTransaction
import SIPDialog
@testable import SIPSimulation

/// Call transfer (RFC 3515 REFER, RFC 5589 flows, RFC 3891 Replaces) and forwarding (RFC 3261
/// §8.1.3.4) over the simulated network at 20 % loss, with duplication and reordering, for the
/// three roles at once: alice transfers (transferor), bob is transferred (transferee), carol is
/// the transfer target. Every party runs the real transaction layers, INVITE sessions and
/// transfer machines (``SimulatedTransferAgent``); the clock is virtual, so a 32 s timeout takes
/// microseconds, and a seed gives the same run every time.
@Suite("Transfer and forwarding over a lossy simulated network")
struct TransferSimulationTests {
    /// 20 % of the datagrams lost, 5 % duplicated, 5–60 ms of delay (datagrams sent close together
    /// overtake each other).
    static let lossy = NetworkConditions(loss: 0.2, duplication: 0.05, minimumDelay: .milliseconds(5), maximumDelay: .milliseconds(60))
    static let seeds: [UInt64] = Array(1...8)

    /// Virtual time a flow may take from its start to its last datagram (the longest: three
    /// NOTIFYs in turn going unanswered until their Timer F, 3 × 32 s).
    static let quietWithin = Duration.seconds(150)

    static func uri(_ name: String) -> SIPURI { SIPURI(user: name, host: .domain(name)) }

    /// Alice, bob and carol on one lossy network.
    struct Parties {
        let sim: Simulation
        let alice: SimulatedTransferAgent
        let bob: SimulatedTransferAgent
        let carol: SimulatedTransferAgent
        init(seed: UInt64, conditions: NetworkConditions = TransferSimulationTests.lossy,
             follow: Bool = false) {
            sim = Simulation(seed: seed, conditions: conditions)
            func config(_ name: String) -> InviteSessionConfiguration {
                var c = SimulatedUserAgent.configuration(name)
                if follow { c.redirects = RedirectPolicy(mode: .follow) }
                return c
            }
            alice = SimulatedTransferAgent(sim, name: "alice", configuration: config("alice"))
            bob = SimulatedTransferAgent(sim, name: "bob", configuration: config("bob"))
            carol = SimulatedTransferAgent(sim, name: "carol", configuration: config("carol"))
        }
    }

    final class Box<T> {
        var value: T
        init(_ value: T) { self.value = value }
    }

    /// Runs until `done` holds, at most `limit` of virtual time (or until nothing is left to run).
    @discardableResult
    static func run(_ sim: Simulation, for limit: Duration, until done: () -> Bool) -> Bool {
        let end = sim.now + limit
        while !done() && sim.now < end && sim.pendingEvents > 0 {
            sim.run(until: min(sim.now + .milliseconds(20), end))
        }
        return done()
    }

    /// Runs until no event is left; checks that the last datagram left within the bound of the
    /// flow's start, that no transfer is left open at any party, and, unless told otherwise (the
    /// shortest flows), that this run did lose datagrams: the seeds are fixed, and a run that
    /// lost nothing would have tested nothing of the loss.
    static func settle(_ p: Parties, since start: Duration, expectLoss: Bool = true, sourceLocation: SourceLocation = #_sourceLocation) {
        p.sim.run(until: start + .seconds(3600))
        #expect(p.sim.pendingEvents == 0, "events left", sourceLocation: sourceLocation)
        #expect(p.sim.lastTransmission - start <= quietWithin, "quiet only after \(p.sim.lastTransmission - start)", sourceLocation: sourceLocation)
        for agent in [p.alice, p.bob, p.carol] {
            #expect(agent.isQuiet, "\(agent.name) still has a transfer open", sourceLocation: sourceLocation)
        }
        if expectLoss { #expect(p.sim.lost > 0, "the network lost nothing", sourceLocation: sourceLocation) }
    }

    /// `caller` calls `callee`, who answers at once; returns both keys once both sides are up.
    static func establish(_ p: Parties, _ caller: SimulatedTransferAgent, _ callee: SimulatedTransferAgent,
                          sourceLocation: SourceLocation = #_sourceLocation) throws -> (SessionKey, SessionKey) {
        let calleeKey = Box<SessionKey?>(nil)
        let previous = callee.onIncomingCall
        callee.onIncomingCall = { agent, key, _ in
            calleeKey.value = key
            let answer = agent.answerBody
            recordingErrors { try agent.ua.perform(key) { s throws(SessionError) in try s.accept(body: answer) } }
        }
        defer { callee.onIncomingCall = previous }
        let key = caller.ua.call(uri: uri(callee.name), offer: caller.offerBody)
        let up = run(p.sim, for: .seconds(60)) {
            caller.ua[key]?.state == .confirmed && calleeKey.value.flatMap { callee.ua[$0]?.state } == .confirmed
        }
        try #require(up, "the call \(caller.name) → \(callee.name) did not come up", sourceLocation: sourceLocation)
        return (key, try #require(calleeKey.value, sourceLocation: sourceLocation))
    }

    /// The target's behaviour: ring (180), then answer after `after`.
    static func ringThenAnswer(_ agent: SimulatedTransferAgent, after: Duration = .seconds(1), keys: Box<[SessionKey]>) {
        agent.onIncomingCall = { agent, key, _ in
            keys.value.append(key)
            recordingErrors { try agent.ua.perform(key) { s throws(SessionError) in try s.provisional(180) } }
            let answer = agent.answerBody
            agent.ua.node.simulation.schedule(after: after) {
                recordingErrors { try agent.ua.perform(key) { s throws(SessionError) in try s.accept(body: answer) } }
            }
        }
    }

    // MARK: Checks on the transferor's view

    static func notifies(_ records: [SimulatedTransferAgent.Record]) -> [(status: SIPFragStatus?, state: String)] {
        records.compactMap { if case .notifyReceived(let s, let st, _) = $0 { return (s, st) } else { return nil } }
    }

    static func sent(_ records: [SimulatedTransferAgent.Record]) -> [(status: SIPFragStatus, state: String)] {
        records.compactMap { if case .notifySent(let s, let st) = $0 { return (s, st) } else { return nil } }
    }

    /// The outcome was reported once, right after the NOTIFY that carried the final status (never
    /// on the 202), and every NOTIFY the transferee sent reached the transferor once, in order,
    /// whatever the network lost on the way.
    static func checkReported(_ outcome: ReferOutcome, transferor: [SimulatedTransferAgent.Record],
                              transferee: [SimulatedTransferAgent.Record], sourceLocation: SourceLocation = #_sourceLocation) {
        let outcomes = transferor.compactMap { if case .outcome(let o) = $0 { return o } else { return nil } }
        #expect(outcomes == [outcome], sourceLocation: sourceLocation)
        guard let i = transferor.firstIndex(of: .outcome(outcome)), i > 0 else {
            Issue.record("no outcome in \(transferor)", sourceLocation: sourceLocation)
            return
        }
        if case .notifyReceived(let status?, let state, 200) = transferor[i - 1] {
            let code: Int? = switch outcome {
            case .succeeded(let c), .failed(let c): c
            default: nil
            }
            #expect(status.isFinal && status.statusCode == code, "outcome \(outcome) after \(status)", sourceLocation: sourceLocation)
            #expect(state.hasPrefix("terminated"), sourceLocation: sourceLocation)
        } else {
            Issue.record("the outcome did not follow a final NOTIFY: \(transferor)", sourceLocation: sourceLocation)
        }
        let received = notifies(transferor), out = sent(transferee)
        #expect(received.map(\.status) == out.map(\.status), sourceLocation: sourceLocation)
        #expect(received.map(\.state) == out.map(\.state), sourceLocation: sourceLocation)
        #expect(out.first?.status.statusCode == 100 && out.first?.state.hasPrefix("active") == true, sourceLocation: sourceLocation)
        #expect(out.dropLast().allSatisfy { !$0.status.isFinal && $0.state.hasPrefix("active") }, sourceLocation: sourceLocation)
    }

    static func last(_ agent: SimulatedTransferAgent, _ key: SessionKey) -> SessionState? { agent.ua.states(key).last }

    // MARK: Blind transfer

    /// Alice calls bob, then transfers him to carol, who rings for a second and answers.
    static func blindFlow(seed: UInt64) throws -> (p: Parties, ab: SessionKey, ba: SessionKey, carolKeys: Box<[SessionKey]>) {
        let p = Parties(seed: seed)
        let (ab, ba) = try Self.establish(p, p.alice, p.bob)
        let carolKeys = Box<[SessionKey]>([])
        Self.ringThenAnswer(p.carol, keys: carolKeys)
        let start = p.sim.now
        try p.alice.transfer(ab, to: Self.uri("carol"))
        Self.settle(p, since: start)
        return (p, ab, ba, carolKeys)
    }

    @Test("blind transfer: REFER, 202, NOTIFY 100 … 200, the new INVITE with Referred-By, BYE after the final NOTIFY", arguments: seeds)
    func blindTransfer(seed: UInt64) throws {
        let (p, ab, ba, carolKeys) = try Self.blindFlow(seed: seed)

        // Transferor: success reported once, after the final NOTIFY; then its BYE ended the call.
        let aliceRecords = p.alice.records(ab), bobRecords = p.bob.records(ba)
        Self.checkReported(.succeeded(200), transferor: aliceRecords, transferee: bobRecords)
        // The 202 may come last, or never while the call lives (all its copies lost until after
        // the BYE): it decides nothing either way.
        #expect(aliceRecords.allSatisfy { if case .referAnswered(let c) = $0 { return c == 202 } else { return true } })
        #expect(aliceRecords.filter { $0 == .hungUpAfterTransfer }.count == 1)
        #expect(aliceRecords.firstIndex(of: .hungUpAfterTransfer) == aliceRecords.firstIndex(of: .outcome(.succeeded(200))).map { $0 + 1 })
        #expect(Self.last(p.alice, ab) == .terminated(.localHangup))
        #expect(p.alice.ua.manager.count == 0)
        // Transferee: accepted, placed one call to carol, reported its progress, was hung up on.
        let placed = p.bob.placedForTransfers
        #expect(placed.count == 1 && placed.first?.original == ba)
        let bc = try #require(placed.first?.newCall)
        #expect(bobRecords.first == .referReceived(answeredWith: 202))
        #expect(Self.sent(bobRecords).last?.status == SIPFragStatus(statusCode: 200))
        // Its subscription ended once: on the 200 to the final NOTIFY, or with the call when
        // alice's BYE overtook that 200.
        #expect(bobRecords.filter { $0 == .subscriptionEnded }.count == 1)
        #expect(Self.last(p.bob, ba) == .terminated(.remoteHangup))
        #expect(p.bob.ua[bc]?.state == .confirmed)
        // Target: one call, from bob, with alice as Referred-By, up.
        #expect(carolKeys.value.count == 1)
        let invite = try #require(p.carol.incomingInvites.map(\.invite).first)
        #expect(try invite.referredBy()?.uri == .sip(Self.uri("alice")))
        #expect(try invite.from().uri == .sip(Self.uri("bob")))
        #expect(try invite.replaces() == nil)
        #expect(p.carol.ua[carolKeys.value[0]]?.state == .confirmed)
        #expect(p.carol.ua[carolKeys.value[0]]?.dialogID?.remoteTag == bc.localTag)
    }

    // MARK: Attended transfer

    @Test("attended transfer: the target's INVITE with Replaces matches the consultation dialog, which ends with BYE",
          arguments: seeds, [false, true])
    func attendedTransfer(seed: UInt64, targetCalledTransferor: Bool) throws {
        let p = Parties(seed: seed)
        let (ab, ba) = try Self.establish(p, p.alice, p.bob)
        // The consultation call: alice calls carol, or carol calls alice.
        let (ac, ca): (SessionKey, SessionKey)
        if targetCalledTransferor {
            (ca, ac) = try Self.establish(p, p.carol, p.alice)
        } else {
            (ac, ca) = try Self.establish(p, p.alice, p.carol)
        }
        p.carol.onIncomingCall = { _, _, _ in Issue.record("carol got a call without Replaces") }
        let start = p.sim.now
        try p.alice.transfer(ab, replacing: ac)
        Self.settle(p, since: start)

        Self.checkReported(.succeeded(200), transferor: p.alice.records(ab), transferee: p.bob.records(ba))
        // The Refer-To named carol's Contact with Replaces: the target's tag as to-tag, ours as from-tag.
        let referTo = try #require(p.alice.records(ab).compactMap { if case .referSent(let r) = $0 { return r } else { return nil } }.first)
        #expect(referTo.sipURI?.host == .domain("carol"))
        // Carol's first INVITE was the consultation's when she placed it or took it.
        let invite = try #require(p.carol.incomingInvites.last?.invite)
        let replaces = try #require(try invite.replaces())
        #expect(replaces == Replaces(callID: ac.callID, toTag: ca.localTag, fromTag: ac.localTag, earlyOnly: false))
        #expect(try invite.referredBy()?.uri == .sip(Self.uri("alice")))
        // Carol matched it to the consultation and replaced that call with bob's.
        let bc = try #require(p.bob.placedForTransfers.first?.newCall)
        let replacing = p.carol.journal.filter { if case .replaces = $0.record { return true } else { return false } }
        #expect(replacing.map(\.record) == [.replaces(.replace(ca, endWith: .bye))])
        let cb = try #require(replacing.first?.key)
        #expect(p.carol.ua[cb]?.state == .confirmed && p.carol.ua[cb]?.dialogID?.remoteTag == bc.localTag)
        #expect(p.bob.ua[bc]?.state == .confirmed)
        #expect(Self.last(p.carol, ca) == .terminated(.localHangup))
        #expect(Self.last(p.alice, ac) == .terminated(.remoteHangup))
        // Both of alice's calls are over, bob's first one too.
        #expect(Self.last(p.alice, ab) == .terminated(.localHangup))
        #expect(Self.last(p.bob, ba) == .terminated(.remoteHangup))
        #expect(p.alice.ua.manager.count == 0)
        #expect(p.bob.ua.manager.keys == [bc] && p.carol.ua.manager.keys == [cb])
    }

    @Test("attended transfer while the target still rings: early-only Replaces, the target CANCELs its ringing call", arguments: seeds)
    func attendedTransferEarly(seed: UInt64) throws {
        let p = Parties(seed: seed)
        let (ab, ba) = try Self.establish(p, p.alice, p.bob)
        // Carol calls alice, who lets it ring (a reliable 180: carol holds the early dialog).
        let ringing = Box<SessionKey?>(nil)
        p.alice.onIncomingCall = { agent, key, _ in
            ringing.value = key
            recordingErrors { try agent.ua.perform(key) { s throws(SessionError) in try s.provisional(180) } }
        }
        let ca = p.carol.ua.call(uri: Self.uri("alice"), offer: p.carol.offerBody)
        try #require(Self.run(p.sim, for: .seconds(30)) { p.carol.ua[ca]?.earlyDialogList.count == 1 && ringing.value != nil })
        let ac = try #require(ringing.value)
        p.carol.onIncomingCall = { _, _, _ in Issue.record("carol got a call without Replaces") }
        let start = p.sim.now
        try p.alice.transfer(ab, replacing: ac)
        Self.settle(p, since: start)

        Self.checkReported(.succeeded(200), transferor: p.alice.records(ab), transferee: p.bob.records(ba))
        let invite = try #require(p.carol.incomingInvites.map(\.invite).first)
        #expect(try invite.replaces() == Replaces(callID: ca.callID, toTag: ca.localTag, fromTag: ac.localTag, earlyOnly: true))
        let replacing = p.carol.journal.filter { if case .replaces = $0.record { return true } else { return false } }
        #expect(replacing.map(\.record) == [.replaces(.replace(ca, endWith: .cancel))])
        let bc = try #require(p.bob.placedForTransfers.first?.newCall)
        let cb = try #require(replacing.first?.key)
        #expect(p.carol.ua[cb]?.state == .confirmed && p.bob.ua[bc]?.state == .confirmed)
        #expect(Self.last(p.carol, ca) == .terminated(.cancelled))
        #expect(Self.last(p.alice, ac) == .terminated(.remoteCancelled))
        #expect(Self.last(p.alice, ab) == .terminated(.localHangup))
        #expect(Self.last(p.bob, ba) == .terminated(.remoteHangup))
        #expect(p.alice.ua.manager.count == 0)
    }

    @Test("a Replaces naming an early dialog the target did not place is refused (481, RFC 3891 §3): the transfer fails, alice keeps both calls",
          arguments: seeds)
    func attendedTransferEarlyNotPlacedByTarget(seed: UInt64) throws {
        let p = Parties(seed: seed)
        let (ab, ba) = try Self.establish(p, p.alice, p.bob)
        // Alice calls carol, who lets it ring.
        let ringing = Box<SessionKey?>(nil)
        p.carol.onIncomingCall = { agent, key, _ in
            ringing.value = key
            recordingErrors { try agent.ua.perform(key) { s throws(SessionError) in try s.provisional(180) } }
        }
        let ac = p.alice.ua.call(uri: Self.uri("carol"), offer: p.alice.offerBody)
        try #require(Self.run(p.sim, for: .seconds(30)) { p.alice.ua[ac]?.earlyDialogList.count == 1 && ringing.value != nil })
        let ca = try #require(ringing.value)
        let start = p.sim.now
        try p.alice.transfer(ab, replacing: ac)
        Self.settle(p, since: start)

        Self.checkReported(.failed(481), transferor: p.alice.records(ab), transferee: p.bob.records(ba))
        #expect(p.carol.records(try #require(p.carol.journal.first { if case .replaces = $0.record { return true } else { return false } }?.key))
                == [.replaces(.refuse(481))])
        // Nothing changed for alice: the call with bob is up, the consultation still rings.
        #expect(p.alice.ua[ab]?.state == .confirmed && p.bob.ua[ba]?.state == .confirmed)
        #expect(p.alice.ua[ac]?.state == .proceeding(180) && p.carol.ua[ca]?.state == .early)
        #expect(!p.alice.records(ab).contains(.hungUpAfterTransfer))
    }

    // MARK: Refused transfers and recovery

    @Test("REFER declined: 603, refused once, no NOTIFY and no new call; alice keeps the call", arguments: seeds)
    func referDeclined(seed: UInt64) throws {
        let p = Parties(seed: seed)
        let (ab, ba) = try Self.establish(p, p.alice, p.bob)
        p.bob.referDecision = { _, _ in false }
        p.carol.onIncomingCall = { _, _, _ in Issue.record("carol was called") }
        let start = p.sim.now
        try p.alice.transfer(ab, to: Self.uri("carol"))
        Self.settle(p, since: start, expectLoss: false)

        #expect(p.alice.outcomes(ab) == [.refused(603)])
        #expect(p.alice.records(ab).contains(.referAnswered(603)))
        #expect(Self.notifies(p.alice.records(ab)).isEmpty && Self.sent(p.bob.records(ba)).isEmpty)
        #expect(p.bob.records(ba) == [.referReceived(answeredWith: 603)])
        #expect(p.bob.placedForTransfers.isEmpty)
        #expect(p.alice.ua[ab]?.state == .confirmed && p.bob.ua[ba]?.state == .confirmed)
    }

    @Test("target busy: its 486 reaches alice as the final NOTIFY; alice keeps the call and takes it back with a re-INVITE", arguments: seeds)
    func targetBusy(seed: UInt64) throws {
        let p = Parties(seed: seed)
        let (ab, ba) = try Self.establish(p, p.alice, p.bob)
        p.carol.onIncomingCall = { agent, key, _ in
            recordingErrors { try agent.ua.perform(key) { s throws(SessionError) in try s.provisional(180) } }
            agent.ua.node.simulation.schedule(after: .milliseconds(500)) {
                recordingErrors { try agent.ua.perform(key) { s throws(SessionError) in try s.reject(486) } }
            }
        }
        let start = p.sim.now
        try p.alice.transfer(ab, to: Self.uri("carol"))
        Self.settle(p, since: start)

        Self.checkReported(.failed(486), transferor: p.alice.records(ab), transferee: p.bob.records(ba))
        let bc = try #require(p.bob.placedForTransfers.first?.newCall)
        #expect(Self.last(p.bob, bc) == .terminated(.rejected(486)))
        try Self.checkTakenBack(p, ab, ba)
    }

    @Test("target never answers: bob's INVITE times out (Timer B) and alice gets the failure 408; she keeps the call", arguments: seeds)
    func targetNeverAnswers(seed: UInt64) throws {
        let p = Parties(seed: seed)
        let (ab, ba) = try Self.establish(p, p.alice, p.bob)
        // Nothing reaches carol from bob.
        p.sim.setConditions(from: "bob", to: "carol", NetworkConditions(loss: 1))
        p.carol.onIncomingCall = { _, _, _ in Issue.record("carol was called") }
        let start = p.sim.now
        try p.alice.transfer(ab, to: Self.uri("carol"))
        Self.settle(p, since: start)

        Self.checkReported(.failed(408), transferor: p.alice.records(ab), transferee: p.bob.records(ba))
        let bc = try #require(p.bob.placedForTransfers.first?.newCall)
        #expect(Self.last(p.bob, bc) == .terminated(.timeout))
        // The failure came when Timer B (64·T1) ran out, not before.
        let at = try #require(p.alice.journal.first { $0.record == .outcome(.failed(408)) }?.time)
        #expect(at - start >= .seconds(32))
        try Self.checkTakenBack(p, ab, ba)
    }

    @Test("no NOTIFY within the bound (all lost): the outcome is unknown once, at the bound, and alice keeps the call", arguments: seeds)
    func noNotify(seed: UInt64) throws {
        let p = Parties(seed: seed)
        let (ab, ba) = try Self.establish(p, p.alice, p.bob)
        let carolKeys = Box<[SessionKey]>([])
        Self.ringThenAnswer(p.carol, keys: carolKeys)
        p.sim.dropFilter = { m, from, _ in m.method == .notify && from == "bob" }
        let start = p.sim.now
        try p.alice.transfer(ab, to: Self.uri("carol"), notifyTimeout: .seconds(20))
        Self.settle(p, since: start)

        #expect(p.alice.outcomes(ab) == [.unknown(.noNotify)])
        #expect(Self.notifies(p.alice.records(ab)).isEmpty)
        let answered = try #require(p.alice.journal.first { $0.record == .referAnswered(202) }?.time)
        let gaveUp = try #require(p.alice.journal.first { $0.record == .outcome(.unknown(.noNotify)) }?.time)
        #expect(gaveUp - answered == .seconds(20))
        // Bob's NOTIFYs went unanswered (the final one tried twice), and his subscription ended.
        let bobRecords = p.bob.records(ba)
        #expect(Self.sent(bobRecords).map(\.status.statusCode) == [100, 200, 200])
        #expect(bobRecords.filter { $0 == .notifyAnswered(nil) }.count == 3)
        #expect(bobRecords.last == .subscriptionEnded)
        // The transfer did happen at bob's side; alice, not knowing, still has her call.
        #expect(p.bob.placedForTransfers.first.flatMap { p.bob.ua[$0.newCall]?.state } == .confirmed)
        try Self.checkTakenBack(p, ab, ba)
    }

    /// After a failed or unknown transfer the original call is still up at both ends, alice did not
    /// hang up, and she takes the call back (resumes) with a re-INVITE that bob answers.
    static func checkTakenBack(_ p: Parties, _ ab: SessionKey, _ ba: SessionKey, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(!p.alice.records(ab).contains(.hungUpAfterTransfer), sourceLocation: sourceLocation)
        #expect(p.alice.ua[ab]?.state == .confirmed && p.bob.ua[ba]?.state == .confirmed, sourceLocation: sourceLocation)
        let resume = SessionBody.sdp("v=0\r\ns=resume-by-alice\r\n")
        try p.alice.ua.perform(ab) { s throws(SessionError) in try s.reinvite(body: resume) }
        let start = p.sim.now
        Self.settle(p, since: start)
        let completed = p.alice.ua.events(ab).contains { if case .requestCompleted(.invite, 200, _) = $0 { return true } else { return false } }
        #expect(completed, sourceLocation: sourceLocation)
        #expect(p.alice.ua[ab]?.remoteBody == p.bob.answerBody, sourceLocation: sourceLocation)
        #expect(p.alice.ua[ab]?.state == .confirmed && p.bob.ua[ba]?.state == .confirmed, sourceLocation: sourceLocation)
    }

    // MARK: Retransmitted NOTIFYs

    @Test("lost NOTIFYs and lost answers to them are retransmitted by the transaction layer; the outcome still comes once")
    func lostNotifiesRetransmitted() throws {
        let p = Parties(seed: 5)
        let (ab, ba) = try Self.establish(p, p.alice, p.bob)
        let carolKeys = Box<[SessionKey]>([])
        Self.ringThenAnswer(p.carol, keys: carolKeys)
        // The first copy of every NOTIFY is lost, and so is the first 200 to the final one.
        var seen: Set<UInt32> = [], finalCSeq: UInt32?, finalAnswerLost = false
        p.sim.dropFilter = { m, _, _ in
            guard let cseq = try? m.cseq(), cseq.method == .notify else { return false }
            if m.isRequest {
                if m.values(.subscriptionState).first?.hasPrefix("terminated") == true { finalCSeq = cseq.sequence }
                return seen.insert(cseq.sequence).inserted
            }
            if m.statusCode == 200, cseq.sequence == finalCSeq, !finalAnswerLost {
                finalAnswerLost = true
                return true
            }
            return false
        }
        let start = p.sim.now
        try p.alice.transfer(ab, to: Self.uri("carol"))
        Self.settle(p, since: start)

        Self.checkReported(.succeeded(200), transferor: p.alice.records(ab), transferee: p.bob.records(ba))
        #expect(finalAnswerLost)
        let dropped = p.sim.trace.filter { $0.hasSuffix("bob->alice NOTIFY DROPPED") }.count
        #expect(dropped == Self.sent(p.bob.records(ba)).count && dropped >= 2)
        let delivered = p.sim.trace.filter { $0.hasSuffix("bob->alice NOTIFY") || $0.hasSuffix("bob->alice NOTIFY (duplicate)") }.count
        #expect(delivered > dropped)
        #expect(Self.last(p.alice, ab) == .terminated(.localHangup) && Self.last(p.bob, ba) == .terminated(.remoteHangup))
    }

    // MARK: Forwarding

    @Test("302: the caller follows the redirection to the next target (To unchanged, Diversion carried)", arguments: seeds)
    func redirectFollowed(seed: UInt64) throws {
        let p = Parties(seed: seed, follow: true)
        p.bob.onIncomingCall = { agent, key, _ in
            recordingErrors {
                try agent.ua.perform(key) { s throws(SessionError) in
                    try s.reject(302, headers: [(.contact, "<sip:carol@carol>;q=1.0;expires=3600"),
                                                (.diversion, "<sip:bob@bob>;reason=unconditional;counter=1")])
                }
            }
        }
        let carolKeys = Box<[SessionKey]>([])
        Self.ringThenAnswer(p.carol, keys: carolKeys)
        let start = p.sim.now
        let ab = p.alice.ua.call(uri: Self.uri("bob"), offer: p.alice.offerBody)
        Self.settle(p, since: start, expectLoss: false)

        let redirections = p.alice.ua.events(ab).compactMap { e -> SIPURI? in
            if case .redirected(302, let t) = e { return t } else { return nil }
        }
        #expect(redirections == [Self.uri("carol")])
        #expect(p.alice.ua[ab]?.state == .confirmed)
        #expect(p.alice.ua[ab]?.dialogID?.remoteTag == carolKeys.value.first?.localTag)
        #expect(p.bob.incomingInvites.map(\.invite).count == 1 && carolKeys.value.count == 1)
        let bobCall = try #require(p.bob.ua.log.first?.key)
        #expect(Self.last(p.bob, bobCall) == .terminated(.declined(302)))
        let invite = try #require(p.carol.incomingInvites.map(\.invite).first)
        #expect(try invite.requestURI() == .sip(Self.uri("carol")))
        #expect(try invite.to().uri == .sip(Self.uri("bob")))
        #expect(try invite.diversion().map(\.uri) == [.sip(Self.uri("bob"))])
        #expect(invite.callID == ab.callID)
        #expect(p.carol.ua[carolKeys.value[0]]?.state == .confirmed)
    }

    @Test("blind transfer to a target that forwards (302): bob follows, the final NOTIFY reports the new target's 200", arguments: seeds)
    func transferToForwardingTarget(seed: UInt64) throws {
        let p = Parties(seed: seed, follow: true)
        let dave = SimulatedTransferAgent(p.sim, name: "dave", configuration: {
            var c = SimulatedUserAgent.configuration("dave")
            c.redirects = RedirectPolicy(mode: .follow)
            return c
        }())
        let (ab, ba) = try Self.establish(p, p.alice, p.bob)
        p.carol.onIncomingCall = { agent, key, _ in
            recordingErrors {
                try agent.ua.perform(key) { s throws(SessionError) in try s.reject(302, headers: [(.contact, "<sip:dave@dave>")]) }
            }
        }
        let daveKeys = Box<[SessionKey]>([])
        Self.ringThenAnswer(dave, keys: daveKeys)
        let start = p.sim.now
        try p.alice.transfer(ab, to: Self.uri("carol"))
        Self.settle(p, since: start)
        #expect(dave.isQuiet)

        Self.checkReported(.succeeded(200), transferor: p.alice.records(ab), transferee: p.bob.records(ba))
        let bc = try #require(p.bob.placedForTransfers.first?.newCall)
        #expect(p.bob.ua.events(bc).contains { if case .redirected(302, let t) = $0 { return t == Self.uri("dave") } else { return false } })
        #expect(p.bob.ua[bc]?.state == .confirmed && p.bob.ua[bc]?.dialogID?.remoteTag == daveKeys.value.first?.localTag)
        #expect(daveKeys.value.count == 1 && dave.ua[daveKeys.value[0]]?.state == .confirmed)
        #expect(Self.last(p.alice, ab) == .terminated(.localHangup))
    }

    // MARK: The loss is real; determinism

    @Test("over the seeds, every step of a blind transfer was lost at least once, and every run still ended right")
    func everyStepLost() throws {
        var lost: Set<String> = []
        // More seeds than the flows' own: a BYE is one datagram per run.
        for seed in UInt64(1)...32 {
            let (p, ab, _, carolKeys) = try Self.blindFlow(seed: seed)
            #expect(p.alice.outcomes(ab) == [.succeeded(200)] && Self.last(p.alice, ab) == .terminated(.localHangup), "seed \(seed)")
            #expect(carolKeys.value.count == 1 && carolKeys.value.allSatisfy { p.carol.ua[$0]?.state == .confirmed }, "seed \(seed)")
            for line in p.sim.trace where line.hasSuffix(" LOST") {
                // "1.234s bob->alice NOTIFY LOST": the link and the method or status code.
                lost.insert(line.split(separator: " ").dropFirst().dropLast().joined(separator: " "))
            }
        }
        // The transfer's own messages, each way: REFER and its 202, the NOTIFYs and their 200s,
        // the new call's INVITE, provisional, 2xx and ACK, the BYE.
        for step in ["alice->bob REFER", "bob->alice 202", "bob->alice NOTIFY", "alice->bob 200", "bob->carol INVITE",
                     "carol->bob 180", "carol->bob 200", "bob->carol ACK", "alice->bob BYE"] {
            #expect(lost.contains(step), "\(step) was never lost: \(lost.sorted())")
        }
    }

    @Test("the same seed gives the same run: trace and every party's journal")
    func deterministic() throws {
        func run() throws -> ([String], [String]) {
            let p = try Self.blindFlow(seed: 11).p
            let journals = [p.alice, p.bob, p.carol].flatMap { a in a.journal.map { "\(a.name) \($0.time) \($0.key) \($0.record)" } }
            return (p.sim.trace, journals)
        }
        let a = try run(), b = try run()
        #expect(a.0 == b.0 && a.1 == b.1)
        #expect(a.0.contains { $0.hasSuffix("LOST") })
    }
}
