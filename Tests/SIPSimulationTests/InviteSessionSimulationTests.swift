import Testing
import SIPMessage
import SIPTransaction
import SIPAuth
import SIPDialog
@testable import SIPSimulation

/// INVITE sessions between user agents on the simulated network: the real session machines,
/// transaction layers and timers, with loss, duplication and delay, on a virtual clock.
@Suite("INVITE sessions over the simulated network")
struct InviteSessionSimulationTests {
    static let offer = SessionBody.sdp("v=0\r\no=alice 1 1 IN IP4 198.51.100.1\r\ns=-\r\nc=IN IP4 198.51.100.1\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\na=sendrecv\r\n")
    static let answer = SessionBody.sdp("v=0\r\no=bob 2 1 IN IP4 198.51.100.2\r\ns=-\r\nc=IN IP4 198.51.100.2\r\nt=0 0\r\nm=audio 5000 RTP/AVP 0\r\na=sendrecv\r\n")

    static func body(_ text: String) -> SessionBody { .sdp("v=0\r\ns=\(text)\r\n") }

    /// Two user agents, `alice` and `bob`, on one simulation.
    struct Pair {
        let sim: Simulation
        let alice: SimulatedUserAgent
        let bob: SimulatedUserAgent

        init(seed: UInt64, conditions: NetworkConditions = NetworkConditions(minimumDelay: .milliseconds(10), maximumDelay: .milliseconds(10)),
             alice aliceConfig: InviteSessionConfiguration = SimulatedUserAgent.configuration("alice"),
             bob bobConfig: InviteSessionConfiguration = SimulatedUserAgent.configuration("bob"),
             credentials: DigestClient? = nil) {
            sim = Simulation(seed: seed, conditions: conditions)
            sim.tracing = false
            alice = SimulatedUserAgent(sim, name: "alice", configuration: aliceConfig, credentials: credentials)
            bob = SimulatedUserAgent(sim, name: "bob", configuration: bobConfig)
        }
    }

    /// Answers every offer the session receives with `answer(offer)` (an echo of its text).
    static func autoAnswer(_ ua: SimulatedUserAgent) {
        let previous = ua.onEvent
        ua.onEvent = { ua, key, e in
            previous?(ua, key, e)
            switch e {
            case .remoteOffer(let b, _) where ua[key]?.state != .incoming:
                recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.answer(.sdp("answer-to:" + String(decoding: b.bytes, as: UTF8.self))) } }
            case .offerRequested:
                recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.answer(Self.body("offer-from-\(ua.node.name)")) } }
            case .request(let m, let tx):
                ua.apply(ua.manager[key].map { s in s.respond(to: m, in: tx, statusCode: 200).map { .session(key, $0) } } ?? [])
            default:
                break
            }
        }
    }

    static func lastState(_ ua: SimulatedUserAgent, _ key: SessionKey) -> SessionState? { ua.states(key).last }

    @Test("a call rings, is answered with the answer to the offer, and ends with BYE on both sides")
    func basicCall() throws {
        let p = Pair(seed: 1)
        var bobKey: SessionKey?
        p.bob.onIncomingCall = { ua, key, invite in
            bobKey = key
            #expect(invite.method == .invite)
            recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.provisional(180) } }
            p.sim.schedule(after: .seconds(1)) { recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.accept(body: Self.answer) } } }
        }
        let key = p.alice.call("bob@bob", offer: Self.offer)
        p.sim.run(until: .seconds(3))
        #expect(p.alice[key]?.state == .confirmed)
        try p.alice.perform(key) { s throws(SessionError) in try s.bye() }
        p.sim.run(until: .seconds(10))

        #expect(p.alice.states(key) == [.calling, .proceeding(180), .confirmed, .terminating, .terminated(.localHangup)])
        let bk = try #require(bobKey)
        #expect(p.bob.states(bk) == [.incoming, .early, .connecting, .confirmed, .terminated(.remoteHangup)])
        #expect(p.alice.events(key).contains { if case .remoteAnswer(let b) = $0 { return b == Self.answer } else { return false } })
        #expect(p.bob.events(bk).contains { if case .remoteOffer(let b, .invite) = $0 { return b == Self.offer } else { return false } })
        #expect(p.alice.manager.count == 0 && p.bob.manager.count == 0)
    }

    @Test("forty calls at 25% loss and 10% duplication all set up and tear down", arguments: [UInt64(7), 8])
    func lossyCalls(seed: UInt64) {
        let p = Pair(seed: seed, conditions: NetworkConditions(loss: 0.25, duplication: 0.10, minimumDelay: .milliseconds(5), maximumDelay: .milliseconds(80)))
        var bobKeys: [SessionKey] = []
        p.bob.onIncomingCall = { ua, key, _ in
            bobKeys.append(key)
            recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.accept(body: Self.answer) } }
        }
        p.alice.onEvent = { ua, key, e in
            if case .stateChanged(.confirmed) = e {
                p.sim.schedule(after: .seconds(2)) { recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.bye() } } }
            }
        }
        var keys: [SessionKey] = []
        for i in 0..<40 {
            p.sim.schedule(after: .milliseconds(50 * i)) { keys.append(p.alice.call("bob@bob", offer: Self.offer)) }
        }
        p.sim.run(until: .seconds(600))
        #expect(keys.count == 40 && bobKeys.count == 40)
        for k in keys {
            #expect(p.alice.states(k).contains(.confirmed))
            #expect(Self.lastState(p.alice, k) == .terminated(.localHangup))
        }
        for k in bobKeys {
            // When every ACK (first and repeated) is lost before alice's BYE, bob goes from
            // connecting straight to the end: the BYE ends the call either way.
            #expect(p.bob.states(k).contains(.connecting))
            #expect(Self.lastState(p.bob, k) == .terminated(.remoteHangup))
        }
        #expect(bobKeys.filter { p.bob.states($0).contains(.confirmed) }.count >= 30)
        #expect(p.alice.manager.count == 0 && p.bob.manager.count == 0)
    }

    @Test("CANCEL before the answer: 487 for the caller, remoteCancelled for the callee")
    func cancelBeforeAnswer() throws {
        let p = Pair(seed: 2)
        var bobKey: SessionKey?
        p.bob.onIncomingCall = { ua, key, _ in
            bobKey = key
            recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.provisional(180) } }
        }
        let key = p.alice.call("bob@bob", offer: Self.offer)
        p.sim.run(until: .seconds(2))
        try p.alice.perform(key) { s throws(SessionError) in try s.cancel() }
        p.sim.run(until: .seconds(40))
        #expect(p.alice.states(key) == [.calling, .proceeding(180), .terminating, .terminated(.cancelled)])
        #expect(Self.lastState(p.bob, try #require(bobKey)) == .terminated(.remoteCancelled))
        #expect(p.alice.manager.count == 0 && p.bob.manager.count == 0)
    }

    @Test("a CANCEL asked for before any provisional waits for the 100 Trying (RFC 3261 §9.1)")
    func cancelWaitsForProvisional() throws {
        let p = Pair(seed: 3)
        var bobKey: SessionKey?
        p.bob.onIncomingCall = { _, key, _ in bobKey = key }   // never answers
        let key = p.alice.call("bob@bob", offer: Self.offer)
        try p.alice.perform(key) { s throws(SessionError) in try s.cancel() }
        p.sim.run(until: .seconds(60))
        #expect(p.alice.states(key) == [.calling, .terminating, .terminated(.cancelled)])
        #expect(Self.lastState(p.bob, try #require(bobKey)) == .terminated(.remoteCancelled))
    }

    @Test("a 2xx that crosses the CANCEL is ACKed and ended with BYE")
    func cancelCrossesAnswer() throws {
        let p = Pair(seed: 4, conditions: NetworkConditions(minimumDelay: .milliseconds(100), maximumDelay: .milliseconds(100)))
        var bobKey: SessionKey?
        p.bob.onIncomingCall = { ua, key, _ in
            bobKey = key
            recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.provisional(180) } }
            p.sim.schedule(after: .seconds(1)) { recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.accept(body: Self.answer) } } }
        }
        let key = p.alice.call("bob@bob", offer: Self.offer)
        // The INVITE arrives at 0.1 s, the 200 leaves bob at 1.1 s and reaches alice at 1.2 s.
        p.sim.schedule(after: .milliseconds(1150)) { recordingErrors { try p.alice.perform(key) { s throws(SessionError) in try s.cancel() } } }
        p.sim.run(until: .seconds(60))
        #expect(Self.lastState(p.alice, key) == .terminated(.cancelled))
        let bk = try #require(bobKey)
        #expect(p.bob.states(bk) == [.incoming, .early, .connecting, .confirmed, .terminated(.remoteHangup)])
    }

    @Test("hold and resume by re-INVITE in both directions")
    func holdResume() throws {
        let p = Pair(seed: 5)
        Self.autoAnswer(p.alice)
        Self.autoAnswer(p.bob)
        var bobKey: SessionKey?
        p.bob.onIncomingCall = { ua, key, _ in
            bobKey = key
            recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.accept(body: Self.answer) } }
        }
        let key = p.alice.call("bob@bob", offer: Self.offer)
        p.sim.run(until: .seconds(1))
        try p.alice.perform(key) { s throws(SessionError) in try s.reinvite(body: Self.body("hold-by-alice")) }
        p.sim.run(until: .seconds(2))
        let bk = try #require(bobKey)
        try p.bob.perform(bk) { s throws(SessionError) in try s.reinvite(body: Self.body("resume-by-bob")) }
        p.sim.run(until: .seconds(3))
        try p.alice.perform(key) { s throws(SessionError) in try s.update(body: Self.body("update-by-alice")) }
        p.sim.run(until: .seconds(4))

        let aliceAnswers = p.alice.events(key).compactMap { e -> String? in
            if case .remoteAnswer(let b) = e { return String(decoding: b.bytes, as: UTF8.self) } else { return nil }
        }
        #expect(aliceAnswers.contains("answer-to:v=0\r\ns=hold-by-alice\r\n"))
        #expect(aliceAnswers.contains("answer-to:v=0\r\ns=update-by-alice\r\n"))
        let bobAnswers = p.bob.events(bk).compactMap { e -> String? in
            if case .remoteAnswer(let b) = e { return String(decoding: b.bytes, as: UTF8.self) } else { return nil }
        }
        #expect(bobAnswers == ["answer-to:v=0\r\ns=resume-by-bob\r\n"])
        #expect(p.alice[key]?.state == .confirmed && p.bob[bk]?.state == .confirmed)
        #expect(p.alice[key]?.localBody == Self.body("update-by-alice"))
    }

    @Test("re-INVITE glare: both get 491, retry after the §14.1 waits, and both succeed")
    func glare() throws {
        let p = Pair(seed: 6)
        Self.autoAnswer(p.alice)
        Self.autoAnswer(p.bob)
        var bobKey: SessionKey?
        p.bob.onIncomingCall = { ua, key, _ in
            bobKey = key
            recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.accept(body: Self.answer) } }
        }
        let key = p.alice.call("bob@bob", offer: Self.offer)
        p.sim.run(until: .seconds(1))
        let bk = try #require(bobKey)
        try p.alice.perform(key) { s throws(SessionError) in try s.reinvite(body: Self.body("a")) }
        try p.bob.perform(bk) { s throws(SessionError) in try s.reinvite(body: Self.body("b")) }
        p.sim.run(until: .seconds(20))

        func completions(_ ua: SimulatedUserAgent, _ k: SessionKey) -> [(Duration, Int)] {
            ua.log.filter { $0.key == k }.compactMap { e in
                if case .requestCompleted(.invite, let code, _) = e.event { return (e.time, code) } else { return nil }
            }
        }
        let glareA = p.alice.events(key).compactMap { if case .glare(let d) = $0 { return d } else { return nil } }
        let glareB = p.bob.events(bk).compactMap { if case .glare(let d) = $0 { return d } else { return nil } }
        #expect(glareA.count == 1 && glareB.count == 1)
        // Alice owns the Call-ID (she sent the INVITE): 2.1–4 s; bob: 0–2 s.
        #expect(glareA[0] >= .milliseconds(2100) && glareA[0] <= .seconds(4))
        #expect(glareB[0] <= .seconds(2))
        let a = completions(p.alice, key), b = completions(p.bob, bk)
        #expect(a.map(\.1) == [200] && b.map(\.1) == [200])
        #expect(b[0].0 < a[0].0)
    }

    @Test("a callee that never gets the ACK retransmits its 2xx and ends the call with BYE at 64·T1")
    func noAck() throws {
        let p = Pair(seed: 9)
        var bobKey: SessionKey?
        var acceptedAt: Duration = .zero
        p.bob.onIncomingCall = { ua, key, _ in
            bobKey = key
            // From now on nothing alice sends reaches bob.
            p.sim.setConditions(from: "alice", to: "bob", NetworkConditions(loss: 1.0))
            acceptedAt = p.sim.now
            recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.accept(body: Self.answer) } }
        }
        let key = p.alice.call("bob@bob", offer: Self.offer)
        p.sim.run(until: .seconds(120))
        let bk = try #require(bobKey)
        let end = try #require(p.bob.log.last { $0.key == bk })
        #expect(end.event.isTermination(.noAck))
        #expect(end.time - acceptedAt == .seconds(32))
        // Alice saw the call up (the 2xx reached her) and then the BYE never came through the
        // link she cannot send on, so it is still up at her side.
        #expect(p.alice.states(key).contains(.confirmed))
    }

    @Test("reliable provisional responses: 183 with the answer is PRACKed, and the 2xx waits for the PRACK")
    func reliableProvisional() throws {
        let p = Pair(seed: 10, conditions: NetworkConditions(loss: 0.2, minimumDelay: .milliseconds(20), maximumDelay: .milliseconds(40)))
        var bobKey: SessionKey?
        var prackSeenBeforeFinal = false
        p.bob.onIncomingCall = { ua, key, _ in
            bobKey = key
            recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.provisional(183, body: Self.answer) } }
            // Accept at once: the 2xx must wait for the PRACK of the 183 that carried the answer.
            recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.accept() } }
        }
        p.bob.onEvent = { ua, key, e in
            if case .stateChanged(.confirmed) = e { prackSeenBeforeFinal = true }
        }
        let key = p.alice.call("bob@bob", offer: Self.offer)
        p.sim.run(until: .seconds(60))
        let bk = try #require(bobKey)
        #expect(p.alice.states(key).contains(.confirmed))
        #expect(p.bob.states(bk) == [.incoming, .early, .connecting, .confirmed])
        #expect(prackSeenBeforeFinal)
        let answers = p.alice.events(key).filter { if case .remoteAnswer = $0 { return true } else { return false } }
        #expect(answers.count == 1)
        // The 183 was presented once even if retransmitted.
        let provisionals = p.alice.events(key).filter { if case .provisional(183, _, _) = $0 { return true } else { return false } }
        #expect(provisionals.count == 1)
    }

    @Test("session timers: the refresher refreshes every half interval; without refreshes the other side hangs up")
    func sessionTimers() throws {
        let st = SessionTimerSettings(interval: 90, minimum: 90)
        let p = Pair(seed: 11, alice: SimulatedUserAgent.configuration("alice", sessionTimer: st),
                     bob: SimulatedUserAgent.configuration("bob", sessionTimer: st))
        var bobKey: SessionKey?
        p.bob.onIncomingCall = { ua, key, _ in
            bobKey = key
            recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.accept(body: Self.answer) } }
        }
        let key = p.alice.call("bob@bob", offer: Self.offer)
        p.sim.run(until: .seconds(600))
        let bk = try #require(bobKey)
        #expect(p.alice[key]?.state == .confirmed && p.bob[bk]?.state == .confirmed)
        let refreshes = p.alice.events(key).filter { if case .sessionRefreshed(90) = $0 { return true } else { return false } }
        // One refresh each 45 s over 600 s.
        #expect(refreshes.count >= 12 && refreshes.count <= 14)
        // Alice goes silent: bob ends the session within 90 − 30 s of the last refresh.
        p.sim.setConditions(from: "alice", to: "bob", NetworkConditions(loss: 1.0))
        p.sim.run(until: .seconds(700))
        let end = try #require(p.bob.log.last { $0.key == bk })
        #expect(end.event.isTermination(.sessionExpired))
        #expect(end.time <= .seconds(600 + 60))
    }

    @Test("422 Session Interval Too Small: the caller asks again with the callee's Min-SE")
    func sessionIntervalTooSmall() throws {
        let p = Pair(seed: 12, alice: SimulatedUserAgent.configuration("alice", sessionTimer: SessionTimerSettings(interval: 90)),
                     bob: SimulatedUserAgent.configuration("bob", sessionTimer: SessionTimerSettings(interval: 1800, minimum: 1800)))
        var calls = 0
        p.bob.onIncomingCall = { ua, key, invite in
            calls += 1
            if ua[key]?.state == .incoming { recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.accept(body: Self.answer) } } }
        }
        let key = p.alice.call("bob@bob", offer: Self.offer)
        p.sim.run(until: .seconds(5))
        // The first INVITE was refused by the session itself, so only the second reached the user.
        #expect(calls == 1)
        #expect(p.bob.log.contains { $0.event.isTermination(.declined(422)) })
        #expect(p.alice[key]?.state == .confirmed)
        #expect(!p.alice.events(key).contains { $0.isTermination })
    }

    @Test("a 407-challenged INVITE is sent again with credentials; wrong ones end the call")
    func challengedInvite() throws {
        for (password, expectConfirmed) in [("alicepw", true), ("wrong", false)] {
            let p = Pair(seed: 13, credentials: DigestClient(username: "alice", password: password))
            var server = DigestServer(configuration: .init(realm: "example.com", key: Array("k".utf8), nonceLifetime: 3600),
                                      store: DigestPasswordTable(["alice": "alicepw"]))
            var rng = SplitMix64(seed: 5)
            var verified = 0
            p.bob.onIncomingCall = { ua, key, invite in
                if case .authenticated = server.verify(request: invite, proxy: true, now: 1_000_000) {
                    verified += 1
                    recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.accept(body: Self.answer) } }
                } else {
                    let challenge = server.challenges(now: 1_000_000, using: &rng).map { (SIPHeaderName.proxyAuthenticate, $0.description) }
                    recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.reject(407, headers: challenge) } }
                }
            }
            let key = p.alice.call("bob@bob", offer: Self.offer)
            p.sim.run(until: .seconds(5))
            if expectConfirmed {
                #expect(p.alice[key]?.state == .confirmed)
                #expect(verified == 1)
            } else {
                #expect(Self.lastState(p.alice, key) == .terminated(.authenticationFailed("credentials refused (407)")))
            }
        }
    }

    @Test("delayed offer: the callee offers in its 2xx and the caller answers in the ACK")
    func delayedOffer() throws {
        let p = Pair(seed: 14)
        var bobKey: SessionKey?
        p.bob.onIncomingCall = { ua, key, _ in
            bobKey = key
            recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.accept(body: Self.answer) } }
        }
        p.alice.onEvent = { ua, key, e in
            if case .remoteOffer(_, .invite) = e { recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.answer(Self.offer) } } }
        }
        let key = p.alice.call("bob@bob", offer: nil)
        p.sim.run(until: .seconds(3))
        let bk = try #require(bobKey)
        #expect(p.alice[key]?.state == .confirmed && p.bob[bk]?.state == .confirmed)
        #expect(p.bob.events(bk).contains { if case .remoteAnswer(let b) = $0 { return b == Self.offer } else { return false } })
    }

    @Test("INFO and MESSAGE inside the dialog reach the user and their responses come back")
    func inDialogRequests() throws {
        let p = Pair(seed: 15)
        Self.autoAnswer(p.bob)
        var bobKey: SessionKey?
        var received: [SIPMethod] = []
        p.bob.onIncomingCall = { ua, key, _ in
            bobKey = key
            recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.accept(body: Self.answer) } }
        }
        let previous = p.bob.onEvent
        p.bob.onEvent = { ua, key, e in
            if case .request(let m, _) = e, let method = m.method { received.append(method) }
            previous?(ua, key, e)
        }
        let key = p.alice.call("bob@bob", offer: Self.offer)
        p.sim.run(until: .seconds(1))
        let dtmf = SessionBody(contentType: MediaType(type: "application", subtype: "dtmf-relay"), bytes: Array("Signal=5\r\nDuration=160\r\n".utf8))
        try p.alice.perform(key) { s throws(SessionError) in try s.sendRequest(.info, body: dtmf) }
        try p.alice.perform(key) { s throws(SessionError) in try s.sendRequest(.message, body: SessionBody(contentType: MediaType(type: "text", subtype: "plain"), bytes: Array("hi".utf8))) }
        p.sim.run(until: .seconds(2))
        #expect(received == [.info, .message])
        let done = p.alice.events(key).compactMap { e -> SIPMethod? in
            if case .requestCompleted(let m, 200, _) = e { return m } else { return nil }
        }
        #expect(done == [.info, .message])
        _ = bobKey
    }
}

extension SessionEvent {
    var isTermination: Bool {
        if case .stateChanged(.terminated) = self { return true }
        return false
    }

    func isTermination(_ reason: SessionEndReason) -> Bool {
        if case .stateChanged(.terminated(let r)) = self { return r == reason }
        return false
    }
}

/// A stateless forking proxy on the simulated network (RFC 3261 §16.11): an INVITE (and its
/// CANCEL or non-2xx ACK, same branch) for `sip:bob@proxy` goes to every fork with a branch
/// derived from the incoming one; requests inside a dialog go to their Request-URI's host;
/// responses lose our Via and go to the next one. Every 2xx reaches the caller, as from a
/// real forking proxy.
final class ForkingProxy {
    unowned let sim: Simulation
    let name: String
    let forks: [String]

    init(_ sim: Simulation, name: String = "proxy", forks: [String]) {
        self.sim = sim
        self.name = name
        self.forks = forks
        // The simulation keeps the proxy alive through this closure.
        sim.addRawNode(name) { m, from in self.receive(m, from: from) }
    }

    func receive(_ m: SIPMessage, from: String) {
        if m.isRequest {
            let branch = m.topViaBranch ?? "none"
            if m.toTag == nil || (m.method == .ack && recordingErrors({ try m.requestURI().sipURI?.host.description }) == name) {
                for (i, fork) in forks.enumerated() {
                    guard var out = recordingErrors({ try m.replacingRequestURI("sip:bob@\(fork)") }) else { continue }
                    recordingErrors { try out.prepend(.via, "SIP/2.0/UDP \(name);branch=z9hG4bK\(branch.dropFirst(7))f\(i)") }
                    sim.send(out, from: name, to: fork)
                }
            } else {
                var out = m
                recordingErrors { try out.prepend(.via, "SIP/2.0/UDP \(name);branch=z9hG4bK\(branch.dropFirst(7))d") }
                let host = recordingErrors({ try m.requestURI().sipURI?.host.description }).flatMap { $0 } ?? ""
                sim.send(out, from: name, to: host)
            }
        } else {
            guard let vias = recordingErrors({ try m.via() }), vias.count >= 2 else { return }
            var out = m
            out.removeFirstElement(.via)
            sim.send(out, from: name, to: vias[1].host.description)
        }
    }
}

@Suite("Forking through a proxy on the simulated network")
struct ForkingSimulationTests {
    @Test("two forks ring, the first 2xx wins, the second is ACKed and sent BYE; at 10% loss too", arguments: [0.0, 0.1])
    func twoForksAnswer(loss: Double) throws {
        let sim = Simulation(seed: 21, conditions: NetworkConditions(loss: loss, minimumDelay: .milliseconds(10), maximumDelay: .milliseconds(30)))
        sim.tracing = false
        let alice = SimulatedUserAgent(sim, name: "alice", configuration: SimulatedUserAgent.configuration("alice", reliableProvisional: .unsupported))
        let bob1 = SimulatedUserAgent(sim, name: "bob1", configuration: SimulatedUserAgent.configuration("bob1", reliableProvisional: .unsupported))
        let bob2 = SimulatedUserAgent(sim, name: "bob2", configuration: SimulatedUserAgent.configuration("bob2", reliableProvisional: .unsupported))
        _ = ForkingProxy(sim, forks: ["bob1", "bob2"])
        var keys: [String: SessionKey] = [:]
        for (ua, delay) in [(bob1, 1000), (bob2, 1300)] {
            ua.onIncomingCall = { ua, key, _ in
                keys[ua.node.name] = key
                recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.provisional(180) } }
                sim.schedule(after: .milliseconds(Int64(delay))) {
                    recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.accept(body: InviteSessionSimulationTests.answer) } }
                }
            }
        }
        let key = alice.call("bob@proxy", offer: InviteSessionSimulationTests.offer)
        sim.run(until: .seconds(20))

        let k1 = try #require(keys["bob1"]), k2 = try #require(keys["bob2"])
        // Alice's call is with bob1; both forks were early dialogs before.
        #expect(alice[key]?.state == .confirmed)
        #expect(alice[key]?.dialogID?.remoteTag == k1.localTag)
        let provisionals = Set(alice.events(key).compactMap { e -> String? in
            if case .provisional(180, let tag?, _) = e { return tag } else { return nil }
        })
        #expect(provisionals == [k1.localTag, k2.localTag])
        #expect(alice.events(key).contains { if case .extraForkEnded(k2.localTag) = $0 { return true } else { return false } })
        // bob2's 2xx was ACKed and sent BYE (sent together, they may arrive in either order).
        #expect(bob2.states(k2).contains(.connecting))
        #expect(InviteSessionSimulationTests.lastState(bob2, k2) == .terminated(.remoteHangup))
        #expect(bob1[k1]?.state == .confirmed)

        try alice.perform(key) { s throws(SessionError) in try s.bye() }
        sim.run(until: .seconds(60))
        #expect(InviteSessionSimulationTests.lastState(bob1, k1) == .terminated(.remoteHangup))
        #expect(alice.manager.count == 0 && bob1.manager.count == 0 && bob2.manager.count == 0)
    }

    @Test("CANCEL through the forking proxy reaches every fork")
    func cancelForks() throws {
        let sim = Simulation(seed: 22, conditions: NetworkConditions(minimumDelay: .milliseconds(10), maximumDelay: .milliseconds(10)))
        sim.tracing = false
        let alice = SimulatedUserAgent(sim, name: "alice", configuration: SimulatedUserAgent.configuration("alice"))
        let forks = (1...3).map { SimulatedUserAgent(sim, name: "bob\($0)", configuration: SimulatedUserAgent.configuration("bob\($0)")) }
        _ = ForkingProxy(sim, forks: forks.map(\.node.name))
        var incoming: [(SimulatedUserAgent, SessionKey)] = []
        for f in forks {
            f.onIncomingCall = { ua, key, _ in
                incoming.append((ua, key))
                recordingErrors { try ua.perform(key) { s throws(SessionError) in try s.provisional(180) } }
            }
        }
        let key = alice.call("bob@proxy", offer: InviteSessionSimulationTests.offer)
        sim.run(until: .seconds(1))
        try alice.perform(key) { s throws(SessionError) in try s.cancel() }
        sim.run(until: .seconds(60))
        #expect(incoming.count == 3)
        for (ua, k) in incoming { #expect(InviteSessionSimulationTests.lastState(ua, k) == .terminated(.remoteCancelled)) }
        #expect(InviteSessionSimulationTests.lastState(alice, key) == .terminated(.cancelled))
    }
}

/// Runs `body` inside a simulation callback (which cannot throw) and records an error as a test
/// failure instead of dropping it, as `try?` did: an action the test relies on (answer, accept,
/// BYE, CANCEL, a proxy's header edit) that throws must fail the test, not change its course
/// silently. SIPSimulationTests does not depend on SwitchboardTestSupport: this is its own.
@discardableResult
func recordingErrors<T>(sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> T) -> T? {
    do {
        return try body()
    } catch {
        Issue.record("a simulation callback threw: \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
