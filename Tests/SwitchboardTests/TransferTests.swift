import Testing
import Synchronization
import SIPMessage
import SIPTransaction
import SIPTransport
import SIPDialog
import SIPRuntime
import NetworkIO
@testable import Switchboard
import SwitchboardTestSupport

/// Transfer between three of our own phones on 127.0.0.1 (RFC 5589's roles: transferor,
/// transferee, transfer target), over real sockets, without media.
@Suite("Phone: call transfer (REFER, Replaces)")
struct TransferTests {
    static let fast = TransactionTimers(t1: .milliseconds(20), t2: .milliseconds(160), t4: .milliseconds(200))

    static func phone(_ user: String, autoAnswer: Duration? = .milliseconds(20), lines: Lines,
                      referDecision: @escaping @Sendable (SessionKey, ReferRequest) async -> Bool = { _, _ in true }) throws -> Phone {
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: fast),
                                           identity: try SIPURI("sip:\(user)@127.0.0.1"))
        c.sessionTimer = nil
        return try Phone(name: user, configuration: c, autoAnswer: autoAnswer, referDecision: referDecision, report: { lines.add($0) })
    }

    static func uri(_ p: Phone, _ user: String) throws -> SIPURI {
        try SIPURI("sip:\(user)@127.0.0.1:\(p.agent.endpoint.localAddresses[0].address.port)")
    }

    /// Every report line of the three phones, in order.
    final class Lines: Sendable {
        private let all = Mutex<[String]>([])
        func add(_ s: String) { all.withLock { $0.append(s) } }
        var text: [String] { all.withLock { $0 } }
        func contains(_ part: String) -> Bool { text.contains { $0.contains(part) } }
    }

    static func up(_ p: Phone, _ key: SessionKey) async -> Bool {
        await p.wait(key, timeout: .seconds(5)) { $0 == .confirmed }
    }

    @Test("blind transfer: the transferee calls the target with Referred-By, success comes from the final NOTIFY, the transferor hangs up")
    func blind() async throws {
        let lines = Lines()
        let alice = try Self.phone("alice", lines: lines), bob = try Self.phone("bob", lines: lines), carol = try Self.phone("carol", lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let ab = await alice.call(try Self.uri(bob, "bob"))
        #expect(await Self.up(alice, ab))
        let outcome = await alice.transfer(ab, to: try Self.uri(carol, "carol"), notifyTimeout: .seconds(5))
        #expect(outcome == .succeeded(200), "lines: \(lines.text)")
        #expect(await alice.wait(ab, timeout: .seconds(5)) { $0 == .terminated(.localHangup) })
        // Bob's new call to Carol is up; Carol heard who referred it.
        #expect(carol.incomingCalls.count == 1)
        let bc = try #require(carol.incomingCalls.first)
        #expect(await carol.wait(bc, timeout: .seconds(5)) { $0 == .confirmed })
        #expect(lines.contains("bob: transfer to sip:carol@"))
        #expect(lines.contains("carol: incoming call from sip:bob@127.0.0.1 (Referred-By sip:alice@127.0.0.1)"), "lines: \(lines.text)")
        #expect(lines.contains("alice: transfer progress: SIP/2.0 100 Trying"))
        #expect(lines.contains("alice: transfer progress: SIP/2.0 200 OK"))
        #expect(lines.contains("alice: NOTIFY") == false, "alice sends no NOTIFY")
    }

    @Test("the target never answers: the transfer fails with 408 and the call stays with the transferor")
    func targetNeverAnswers() async throws {
        let lines = Lines()
        let alice = try Self.phone("alice", lines: lines), bob = try Self.phone("bob", lines: lines)
        defer { alice.close(); bob.close() }
        let nobody = try UDPTransport(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0)) { _ in }
        let silent = try SIPURI("sip:nobody@127.0.0.1:\(nobody.localAddress.port)")
        defer { nobody.close() }
        let ab = await alice.call(try Self.uri(bob, "bob"))
        #expect(await Self.up(alice, ab))
        let outcome = await alice.transfer(ab, to: silent, notifyTimeout: .seconds(5))
        #expect(outcome == .failed(408), "lines: \(lines.text)")
        #expect(alice.states(ab).last == .confirmed, "the call is still ours to take back")
    }

    @Test("the transferee hangs up before any final NOTIFY: the transferor learns it at once (subscription ended), not at its bound",
          .timeLimit(.minutes(1)))
    func transfereeHangsUpFirst() async throws {
        let lines = Lines()
        let alice = try Self.phone("alice", lines: lines), bob = try Self.phone("bob", lines: lines)
        let carol = try Self.phone("carol", autoAnswer: nil, lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let ab = await alice.call(try Self.uri(bob, "bob"))
        #expect(await Self.up(alice, ab))
        let bk = try #require(bob.incomingCalls.first)
        // Carol lets bob's call ring; bob hangs up on alice meanwhile.
        let target = try Self.uri(carol, "carol")
        async let outcome = alice.transfer(ab, to: target, notifyTimeout: .seconds(5))
        #expect(await carol.wait(timeout: .seconds(5)) { !carol.incomingCalls.isEmpty })
        let clock = ContinuousClock(), start = clock.now
        try await bob.agent.perform(bk) { s throws(SessionError) in try s.bye() }
        #expect(await outcome == .unknown(.terminatedWithoutFinalStatus(reason: nil)), "lines: \(lines.text)")
        #expect(clock.now - start < .seconds(2), "the outcome came with the BYE")
        // The ended call's entry is gone once the outcome was read.
        #expect(alice.transfers.withLock { $0.outgoing[ab] } == nil)
    }

    @Test("the transferee declines the REFER: refused (603), the call goes on")
    func declined() async throws {
        let lines = Lines()
        let alice = try Self.phone("alice", lines: lines)
        let bob = try Self.phone("bob", lines: lines, referDecision: { _, _ in false })
        let carol = try Self.phone("carol", lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let ab = await alice.call(try Self.uri(bob, "bob"))
        #expect(await Self.up(alice, ab))
        #expect(await alice.transfer(ab, to: try Self.uri(carol, "carol"), notifyTimeout: .seconds(5)) == .refused(603))
        #expect(carol.incomingCalls.isEmpty)
        #expect(alice.states(ab).last == .confirmed)
    }

    @Test("a Refer-To with an http: URI is refused with 403 and nothing is fetched or called")
    func badScheme() async throws {
        let lines = Lines()
        let alice = try Self.phone("alice", lines: lines), bob = try Self.phone("bob", lines: lines)
        defer { alice.close(); bob.close() }
        let ab = await alice.call(try Self.uri(bob, "bob"))
        #expect(await Self.up(alice, ab))
        try await alice.agent.perform(ab) { s throws(SessionError) in try s.sendRequest(.refer, headers: [(.referTo, "<http://198.51.100.1/x>")]) }
        #expect(await alice.wait(timeout: .seconds(5)) { lines.contains("alice: REFER → 403") }, "lines: \(lines.text)")
        #expect(lines.contains("bob: REFER refused: 403: Refer-To scheme http is not followed"))
    }

    @Test("Refer-Sub: false granted: the outcome is unknown, yet the transferee places the call")
    func noSubscription() async throws {
        let lines = Lines()
        let alice = try Self.phone("alice", lines: lines), bob = try Self.phone("bob", lines: lines), carol = try Self.phone("carol", lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let ab = await alice.call(try Self.uri(bob, "bob"))
        #expect(await Self.up(alice, ab))
        #expect(await alice.transfer(ab, to: try Self.uri(carol, "carol"), noSubscription: true) == .unknown(.noSubscription))
        #expect(alice.states(ab).last == .confirmed, "an unknown outcome does not hang up")
        #expect(await carol.wait(timeout: .seconds(5)) { carol.incomingCalls.count == 1 })
    }

    @Test("attended transfer: the transferee's INVITE replaces the consultation call at the target")
    func attended() async throws {
        let lines = Lines()
        let alice = try Self.phone("alice", lines: lines), bob = try Self.phone("bob", lines: lines), carol = try Self.phone("carol", lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let ab = await alice.call(try Self.uri(bob, "bob"))
        #expect(await Self.up(alice, ab))
        try await alice.hold(ab, true)
        let ac = await alice.call(try Self.uri(carol, "carol"))
        #expect(await Self.up(alice, ac))
        let outcome = await alice.transfer(ab, replacing: ac, notifyTimeout: .seconds(5))
        #expect(outcome == .succeeded(200), "lines: \(lines.text)")
        // Carol took Bob's call in place of the consultation, which she ended with BYE.
        #expect(await alice.wait(ac, timeout: .seconds(5)) { $0 == .terminated(.remoteHangup) }, "lines: \(lines.text)")
        #expect(await alice.wait(ab, timeout: .seconds(5)) { $0 == .terminated(.localHangup) })
        #expect(lines.contains("carol: call replaces \(ac.callID)"))
        #expect(lines.contains("(Replaces \(ac.callID);to-tag="), "lines: \(lines.text)")
        #expect(carol.incomingCalls.count == 2)
        let bc = try #require(carol.incomingCalls.last)
        #expect(await carol.wait(bc, timeout: .seconds(5)) { $0 == .confirmed })
    }

    @Test("early-only Replaces: the target's own ringing call is replaced (CANCEL) and it takes the transferee's call")
    func earlyOnlyReplacesARingingCall() async throws {
        let lines = Lines()
        let alice = try Self.phone("alice", autoAnswer: .seconds(20), lines: lines)
        let bob = try Self.phone("bob", lines: lines), carol = try Self.phone("carol", lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let ab = await alice.call(try Self.uri(bob, "bob"))
        #expect(await Self.up(alice, ab))
        // Carol calls alice, who lets it ring; alice transfers bob to carol, replacing that call.
        let ca = await carol.call(try Self.uri(alice, "alice"))
        #expect(await carol.wait(ca, timeout: .seconds(5)) { if case .proceeding = $0 { return true } else { return false } })
        let ringing = try #require(alice.incomingCalls.first)
        let outcome = await alice.transfer(ab, replacing: ringing, notifyTimeout: .seconds(5))
        #expect(outcome == .succeeded(200), "lines: \(lines.text)")
        #expect(lines.contains("carol: call replaces \(ca.callID)"), "lines: \(lines.text)")
        #expect(await carol.wait(ca, timeout: .seconds(5)) { $0 == .terminated(.cancelled) }, "carol's own call is cancelled")
        #expect(await alice.wait(ringing, timeout: .seconds(5)) { $0 == .terminated(.remoteCancelled) })
        let bc = try #require(carol.incomingCalls.first)
        #expect(await carol.wait(bc, timeout: .seconds(5)) { $0 == .confirmed })
    }

    @Test("Replaces naming no dialog of the target: 481, and the transfer fails")
    func replacesNothing() async throws {
        let lines = Lines()
        let alice = try Self.phone("alice", lines: lines), bob = try Self.phone("bob", lines: lines), carol = try Self.phone("carol", lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let ab = await alice.call(try Self.uri(bob, "bob"))
        #expect(await Self.up(alice, ab))
        let bogus = ReferRequest.referTo(contact: try Self.uri(carol, "carol"), replaces: Replaces(callID: "nope@x", toTag: "a", fromTag: "b"))
        try await alice.agent.perform(ab) { s throws(SessionError) in try s.sendRequest(.refer, headers: [(.referTo, bogus.description)]) }
        #expect(await alice.wait(timeout: .seconds(5)) { lines.contains("carol: Replaces refused with 481") }, "lines: \(lines.text)")
        // Alice sent that REFER by hand, so she has no subscription: her 481 to bob's NOTIFY ends
        // the subscription only (RFC 5057), never the call between them.
        #expect(await alice.wait(timeout: .seconds(5)) { lines.contains("bob: NOTIFY → 481") }, "lines: \(lines.text)")
        try await Task.sleep(for: .milliseconds(200))
        #expect(alice.states(ab).last == .confirmed, "lines: \(lines.text)")
        #expect(!lines.contains("bob: ended: dialog gone (481)"), "lines: \(lines.text)")
    }
}

/// Forwarding with 302 between our own phones on 127.0.0.1, both roles.
@Suite("Phone: forwarding (3xx)")
struct ForwardingTests {
    static func phone(_ user: String, forwardTo: [SIPURI] = [], follow: Bool = true, lines: TransferTests.Lines) throws -> Phone {
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: TransferTests.fast),
                                           identity: try SIPURI("sip:\(user)@127.0.0.1"))
        c.sessionTimer = nil
        c.redirects = RedirectPolicy(mode: follow ? .follow : .fail)
        return try Phone(name: user, configuration: c, autoAnswer: .milliseconds(20), forwardTo: forwardTo, report: { lines.add($0) })
    }

    @Test("bob forwards to carol (302 with q-values and Diversion); alice's call follows and reaches carol")
    func forwarded() async throws {
        let lines = TransferTests.Lines()
        let carol = try Self.phone("carol", lines: lines)
        let bob = try Self.phone("bob", forwardTo: [try TransferTests.uri(carol, "carol")], lines: lines)
        let alice = try Self.phone("alice", lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let key = await alice.call(try TransferTests.uri(bob, "bob"))
        #expect(await alice.wait(key, timeout: .seconds(5)) { $0 == .confirmed }, "lines: \(lines.text)")
        #expect(lines.contains("bob: forwarding (302) to sip:carol@"))
        #expect(lines.contains("alice: redirected (302) to sip:carol@"))
        #expect(carol.incomingCalls.count == 1)
        #expect(bob.states(bob.incomingCalls[0]).last == .terminated(.declined(302)))
    }

    @Test("with redirects rejected, the 302 ends the call")
    func notFollowed() async throws {
        let lines = TransferTests.Lines()
        let carol = try Self.phone("carol", lines: lines)
        let bob = try Self.phone("bob", forwardTo: [try TransferTests.uri(carol, "carol")], lines: lines)
        let alice = try Self.phone("alice", follow: false, lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let key = await alice.call(try TransferTests.uri(bob, "bob"))
        #expect(await alice.wait(key, timeout: .seconds(5)) { $0.isTerminated })
        #expect(alice.states(key).last == .terminated(.rejected(302)))
        #expect(carol.incomingCalls.isEmpty)
    }

    @Test("redirects asked target by target: the agent's application passes on the first target and calls the second",
          .timeLimit(.minutes(1)))
    func askedTargetByTarget() async throws {
        let lines = TransferTests.Lines()
        let carol = try Self.phone("carol", lines: lines)
        let nobody = try SIPURI("sip:nobody@192.0.2.1")
        let bob = try Self.phone("bob", forwardTo: [nobody, try TransferTests.uri(carol, "carol")], lines: lines)
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: TransferTests.fast),
                                           identity: try SIPURI("sip:alice@127.0.0.1"))
        c.sessionTimer = nil
        c.redirects = RedirectPolicy(mode: .ask)
        let alice = try SIPUserAgent(configuration: c)
        defer { alice.close(); bob.close(); carol.close() }
        let key = await alice.call(try TransferTests.uri(bob, "bob"), offer: nil)
        var offered: [String] = []
        var end: SessionState?
        let deadline = ContinuousClock.now + .seconds(5)
        for await e in alice.events {
            guard case .session(let k, let ev) = e, k == key else { continue }
            if case .redirectOffered(302, let target) = ev {
                offered.append(target.description)
                // The unreachable target first (q 1.0): passed on; carol (q 0.9): called.
                if target.host.address == "192.0.2.1" {
                    try await alice.perform(key) { s throws(SessionError) in try s.skipRedirect() }
                } else {
                    try await alice.perform(key) { s throws(SessionError) in try s.followRedirect() }
                }
            }
            if case .stateChanged(let st) = ev, st == .confirmed || st.isTerminated { end = st; break }
            if ContinuousClock.now > deadline { break }
        }
        #expect(offered.count == 2 && offered[0] == nobody.description && offered[1].hasPrefix("sip:carol@127.0.0.1"), "\(offered)")
        #expect(end == .confirmed, "lines: \(lines.text)")
        #expect(carol.incomingCalls.count == 1)
        try await alice.perform(key) { s throws(SessionError) in try s.bye() }
    }

    @Test("two phones forwarding to each other: the loop ends the call with a clear reason")
    func loop() async throws {
        let lines = TransferTests.Lines()
        // Two free ports first, so that each phone can forward to the other's address.
        let portB = freeUDPPort()
        var portD = freeUDPPort()
        while portD == portB { portD = freeUDPPort() }
        func at(_ user: String, _ port: UInt16) throws -> Phone {
            var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: port))], timers: TransferTests.fast),
                                               identity: try SIPURI("sip:\(user)@127.0.0.1"))
            c.sessionTimer = nil
            let other = user == "bob" ? portD : portB
            return try Phone(name: user, configuration: c, forwardTo: [try SIPURI("sip:\(user == "bob" ? "dave" : "bob")@127.0.0.1:\(other)")],
                             report: { lines.add($0) })
        }
        let bob = try at("bob", portB), dave = try at("dave", portD)
        let alice = try Self.phone("alice", lines: lines)
        defer { alice.close(); bob.close(); dave.close() }
        let key = await alice.call(try SIPURI("sip:bob@127.0.0.1:\(portB)"))
        #expect(await alice.wait(key, timeout: .seconds(5)) { $0.isTerminated }, "lines: \(lines.text)")
        #expect(alice.states(key).last == .terminated(.redirectFailed(302, .loop)), "lines: \(lines.text)")
    }
}

@Suite("Call: transfer events and an application that takes its time to decide")
struct CallTransferEventTests {
    @Test("blind transfer through Call: the transferee's call reports the request and its answer (given after a wait), the transferor's the progress and the outcome",
          .timeLimit(.minutes(1)))
    func events() async throws {
        let lines = TransferTests.Lines()
        let alice = try TransferTests.phone("alice", autoAnswer: nil, lines: lines)
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: TransferTests.fast),
                                           identity: try SIPURI("sip:bob@127.0.0.1"))
        c.sessionTimer = nil
        // Bob asks "someone" (a sleep stands for a user or a service) before accepting.
        let bob = try Phone(name: "bob", configuration: c, autoAnswer: .milliseconds(20), referDecision: { _, request in
            try? await Task.sleep(for: .milliseconds(150))
            return request.target.description.contains("carol")
        }, report: { lines.add($0) })
        let carol = try TransferTests.phone("carol", lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let bobArrivals = bob.incomingCallStream
        let call = await alice.dial(try TransferTests.uri(bob, "bob"))
        let aliceEvents = call.events
        try await call.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        let bobCall = try #require(await CallTests.nextIncoming(bobArrivals))
        let bobEvents = bobCall.events
        let outcome = try await call.transfer(to: try TransferTests.uri(carol, "carol"), notifyTimeout: .seconds(5))
        #expect(outcome == .succeeded(200), "\(lines.text)")
        try await call.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        var seenA: [CallEvent] = [], seenB: [CallEvent] = []
        for await e in aliceEvents { seenA.append(e) }
        _ = try? await bobCall.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        for await e in bobEvents { seenB.append(e) }
        let progress = seenA.compactMap { e -> Int? in if case .transferProgress(let s) = e { return s.statusCode } else { return nil } }
        #expect(progress.first == 100 && progress.last == 200, "\(seenA)")
        #expect(seenA.contains(.transferResult(.succeeded(200))))
        let result = seenA.firstIndex(of: .transferResult(.succeeded(200))), ended = seenA.firstIndex { if case .state(.ended) = $0 { true } else { false } }
        #expect(result != nil && ended != nil && result! < ended!, "the outcome before the end: \(seenA)")
        let requested = seenB.compactMap { e -> (String, Bool)? in
            if case .transferRequested(let r, let accepted) = e { return (r.target.description, accepted) } else { return nil }
        }
        #expect(requested.count == 1 && requested[0].0.contains("carol") && requested[0].1, "\(seenB)")
    }
}
