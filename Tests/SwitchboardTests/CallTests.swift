import Testing
import Synchronization
import SIPMessage
import SIPTransaction
import SIPDialog
import SIPRuntime
import NetworkIO
import MediaRuntime
@testable import Switchboard

/// The `Call` handle between two of our phones on 127.0.0.1 (real sockets, no media): states
/// as async sequences, and each action's success, failure and idempotence.
@Suite("Call: states and actions between two phones")
struct CallTests {
    static let fast = TransactionTimers(t1: .milliseconds(20), t2: .milliseconds(160), t4: .milliseconds(200))

    static func phone(_ user: String, autoAnswer: Duration? = nil, forwardTo: [SIPURI] = [],
                      redirects: RedirectPolicy = RedirectPolicy()) throws -> Phone {
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: fast),
                                           identity: try SIPURI("sip:\(user)@127.0.0.1"))
        c.sessionTimer = nil
        c.redirects = redirects
        return try Phone(name: user, configuration: c, autoAnswer: autoAnswer, forwardTo: forwardTo)
    }

    /// A phone with real media (PCMU and telephone-event), its media configuration adjusted by `configure`.
    static func mediaPhone(_ user: String, listen: String = "127.0.0.1", configure: (inout MediaSessionConfiguration) -> Void = { _ in }) throws -> Phone {
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: listen, port: 0))], timers: fast),
                                           identity: try SIPURI("sip:\(user)@\(listen)"))
        c.sessionTimer = nil
        var media = PhoneMediaOptions.defaultConfiguration
        configure(&media)
        return try Phone(name: user, configuration: c, codecs: [.pcmu, .telephoneEvent], media: PhoneMediaOptions(configuration: media))
    }

    static func uri(_ p: Phone, _ user: String) throws -> SIPURI {
        try SIPURI("sip:\(user)@127.0.0.1:\(p.agent.endpoint.localAddresses[0].address.port)")
    }

    /// A call from `caller` to `callee` (user `user`), answered by the callee: both ends, established.
    static func establishedCall(from caller: Phone, to callee: Phone, user: String = "bob") async throws -> (outgoing: Call, incoming: Call) {
        let arrivals = callee.incomingCallStream
        let call = await caller.dial(try uri(callee, user))
        let incoming = try #require(await nextIncoming(arrivals))
        try await incoming.answer()
        try await call.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        return (call, incoming)
    }

    /// The next incoming call of `p` (bounded).
    static func nextIncoming(_ stream: AsyncStream<Call>) async -> Call? {
        await within(.seconds(5)) {
            for await c in stream { return c }
            return nil
        }
    }

    @Test("answer, hold both ways, digits, hang up: every state in order on both sides", .timeLimit(.minutes(1)))
    func fullCall() async throws {
        let alice = try Self.phone("alice"), bob = try Self.phone("bob")
        defer { alice.close(); bob.close() }
        let arrivals = bob.incomingCallStream
        let out = await alice.dial(try Self.uri(bob, "bob"))
        #expect(out.direction == .outgoing)
        let aliceStates = out.states
        let inc = try #require(await Self.nextIncoming(arrivals))
        #expect(inc.direction == .incoming)
        #expect(inc.sipCallID == out.sipCallID)
        #expect(inc.remote?.description.hasPrefix("sip:alice@127.0.0.1") == true)
        let bobStates = inc.states
        let bobEvents = inc.events
        try await inc.answer(timeout: .seconds(5))
        #expect(inc.state == .established(.active))
        try await out.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        // Answering again is not an error.
        try await inc.answer(timeout: .seconds(1))

        try await out.setHeld(true, timeout: .seconds(5))
        #expect(out.state == .established(.localHold))
        try await inc.waitUntil(timeout: .seconds(5)) { $0 == .established(.remoteHold) }
        try await out.setHeld(false, timeout: .seconds(5))
        #expect(out.state == .established(.active))
        try await inc.waitUntil(timeout: .seconds(5)) { $0 == .established(.active) }

        // No media: the digits go as SIP INFO.
        #expect(try await out.sendDigits("1#") == .info)
        out.setMuted(true)
        #expect(out.isMuted)

        await out.hangUp(timeout: .seconds(5))
        #expect(out.state == .ended(.hungUp(by: .local)))
        try await inc.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(inc.state == .ended(.hungUp(by: .remote)))
        // CallKit's dates: created, connected, ended, in order; setup and duration from them.
        let t = out.times
        let up = try #require(t.established), end = try #require(t.ended)
        #expect(t.created <= up && up <= end)
        #expect(t.setup == up - t.created && t.duration == end - up)
        // Ending an ended call does nothing; other actions say why they cannot.
        await out.hangUp()
        await #expect(throws: CallError.invalidState(action: "hold", state: .ended(.hungUp(by: .local)))) { try await out.setHeld(true) }
        await #expect(throws: CallError.self) { try await inc.answer() }

        var seenA: [CallState] = [], seenB: [CallState] = []
        for await s in aliceStates { seenA.append(s) }
        for await s in bobStates { seenB.append(s) }
        // Subscribed right after dial: starting or calling first, depending on timing.
        #expect(Array(seenA.drop { $0 == .starting || $0 == .calling }) ==
                [.established(.active), .established(.localHold), .established(.active), .ended(.hungUp(by: .local))], "\(seenA)")
        #expect(seenB == [.incoming(.trying), .connecting, .established(.active), .established(.remoteHold),
                          .established(.active), .ended(.hungUp(by: .remote))], "\(seenB)")
        // Bob's events: his states (after the subscription) and alice's digits by INFO, in order.
        var events: [CallEvent] = []
        for await e in bobEvents { events.append(e) }
        #expect(events.filter { if case .digit = $0 { return true } else { return false } } == [.digit("1", via: .info), .digit("#", via: .info)])
        #expect(events.last == .state(.ended(.hungUp(by: .remote))))
        #expect(alice.calls.isEmpty && bob.calls.isEmpty)
    }

    @Test("a busy callee: the caller's call ends busy(486), the callee's rejected by us", .timeLimit(.minutes(1)))
    func busy() async throws {
        let alice = try Self.phone("alice"), bob = try Self.phone("bob")
        defer { alice.close(); bob.close() }
        let arrivals = bob.incomingCallStream
        let out = await alice.dial(try Self.uri(bob, "bob"))
        let inc = try #require(await Self.nextIncoming(arrivals))
        try await inc.reject(486)
        let end = try await out.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(end == .ended(.busy(status: 486)))
        // Bob's own state comes through his phone's event loop: awaited, not read at once.
        #expect(try await inc.waitUntil(timeout: .seconds(5)) { $0.isEnded } == .ended(.rejected(by: .local, status: 486)))
        await #expect(throws: CallError.self) { try await inc.reject() }
    }

    @Test("the caller gives up while it rings: CANCEL on both sides", .timeLimit(.minutes(1)))
    func cancelWhileRinging() async throws {
        let alice = try Self.phone("alice"), bob = try Self.phone("bob")
        defer { alice.close(); bob.close() }
        let arrivals = bob.incomingCallStream
        let out = await alice.dial(try Self.uri(bob, "bob"))
        let inc = try #require(await Self.nextIncoming(arrivals))
        // Bob rings (180) so the caller may cancel.
        try await bob.agent.perform(inc.key) { s throws(SessionError) in try s.provisional(180) }
        try await out.waitUntil(timeout: .seconds(5)) { $0 == .ringing(earlyMedia: false) }
        try await inc.waitUntil(timeout: .seconds(5)) { $0 == .incoming(.ringing) }
        await out.hangUp(timeout: .seconds(5))
        #expect(out.state == .ended(.cancelled(by: .local)))
        try await inc.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(inc.state == .ended(.cancelled(by: .remote)))
    }

    @Test("a forwarding phone: its call ends forwarded to the target; a caller that does not follow 3xx ends redirected",
          .timeLimit(.minutes(1)))
    func forwardedNotFollowed() async throws {
        let bob = try Self.phone("bob", forwardTo: [try SIPURI("sip:carol@192.0.2.9")])
        let alice = try Self.phone("alice")
        defer { alice.close(); bob.close() }
        let arrivals = bob.incomingCallStream
        let out = await alice.dial(try Self.uri(bob, "bob"))
        let inc = try #require(await Self.nextIncoming(arrivals))
        try await inc.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(inc.state == .ended(.forwarded(to: [try SIPURI("sip:carol@192.0.2.9")])))
        let end = try await out.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(end == .ended(.redirected(status: 302)))
    }

    @Test("an ignored call can still be forwarded (libSoftphone's IncomingIgnored, then a 302)", .timeLimit(.minutes(1)))
    func ignoredThenForwarded() async throws {
        let alice = try Self.phone("alice"), bob = try Self.phone("bob")
        defer { alice.close(); bob.close() }
        let arrivals = bob.incomingCallStream
        let out = await alice.dial(try Self.uri(bob, "bob"))
        let inc = try #require(await Self.nextIncoming(arrivals))
        try inc.ignore()
        #expect(inc.state == .incoming(.ignored))
        let target = try SIPURI("sip:carol@192.0.2.9")
        try await inc.forward(to: [target])
        #expect(inc.state == .ended(.forwarded(to: [target])))
        let end = try await out.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(end == .ended(.redirected(status: 302)))
        #expect(throws: CallError.self) { try inc.ignore() }
    }

    @Test("a forwarding phone: its call ends forwarded to the target, the caller follows to the target", .timeLimit(.minutes(1)))
    func forwarded() async throws {
        let carol = try Self.phone("carol", autoAnswer: .milliseconds(10))
        let bob = try Self.phone("bob", forwardTo: [try Self.uri(carol, "carol")])
        let alice = try Self.phone("alice", redirects: RedirectPolicy(mode: .follow))
        defer { alice.close(); bob.close(); carol.close() }
        let arrivals = bob.incomingCallStream
        let out = await alice.dial(try Self.uri(bob, "bob"))
        let inc = try #require(await Self.nextIncoming(arrivals))
        try await inc.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(inc.state == .ended(.forwarded(to: [try Self.uri(carol, "carol")])))
        // The caller followed the 302 to Carol, who answered.
        try await out.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        await out.hangUp(timeout: .seconds(5))
    }

    @Test("with media: both calls report their media active, RFC 4733 digits arrive as events, the media stops before the end",
          .timeLimit(.minutes(1)))
    func mediaEvents() async throws {
        let alice = try Self.mediaPhone("alice"), bob = try Self.mediaPhone("bob")
        defer { alice.close(); bob.close() }
        let arrivals = bob.incomingCallStream
        let out = await alice.dial(try Self.uri(bob, "bob"))
        let aliceEvents = out.events
        let inc = try #require(await Self.nextIncoming(arrivals))
        let bobEvents = inc.events
        try await inc.answer(timeout: .seconds(5))
        try await out.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        #expect(try await out.sendDigits("42") == .rtp)
        // Bob sees both digits (bounded), then alice hangs up.
        let digits = await within(.seconds(5)) { () -> [Character]? in
            var got: [Character] = []
            for await e in bobEvents {
                if case .digit(let c, .rtp) = e { got.append(c) }
                if got.count == 2 { return got }
            }
            return got
        }
        #expect(digits == ["4", "2"])
        await out.hangUp(timeout: .seconds(5))
        var seen: [CallEvent] = []
        for await e in aliceEvents { seen.append(e) }
        #expect(seen.contains(.mediaActive(true)), "\(seen)")
        let stopped = seen.firstIndex(of: .mediaActive(false)), ended = seen.firstIndex(of: .state(.ended(.hungUp(by: .local))))
        #expect(stopped != nil && ended != nil && stopped! < ended!, "\(seen)")
    }

    @Test("ring() sends 180: the callee rings, the caller hears ringback without early media; media starts once despite hold and resume",
          .timeLimit(.minutes(1)))
    func ringThenAnswer() async throws {
        let alice = try Self.mediaPhone("alice"), bob = try Self.mediaPhone("bob")
        defer { alice.close(); bob.close() }
        let arrivals = bob.incomingCallStream
        let out = await alice.dial(try Self.uri(bob, "bob"))
        let aliceStates = out.states, aliceEvents = out.events
        let inc = try #require(await Self.nextIncoming(arrivals))
        #expect(inc.state == .incoming(.trying))
        try await inc.ring()
        #expect(inc.state == .incoming(.ringing))
        try await out.waitUntil(timeout: .seconds(5)) { $0 == .ringing(earlyMedia: false) }
        try await inc.ring()
        try await inc.answer(timeout: .seconds(5))
        await #expect(throws: CallError.invalidState(action: "ring", state: .established(.active))) { try await inc.ring() }
        try await out.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        try await out.setHeld(true, timeout: .seconds(5))
        try await out.setHeld(false, timeout: .seconds(5))
        await out.hangUp(timeout: .seconds(5))
        var states: [CallState] = [], events: [CallEvent] = []
        for await s in aliceStates { states.append(s) }
        for await e in aliceEvents { events.append(e) }
        // The 200's answer is not early media.
        #expect(!states.contains(.ringing(earlyMedia: true)), "\(states)")
        #expect(events.filter { $0 == .mediaActive(true) }.count == 1, "\(events)")
        #expect(events.filter { $0 == .mediaActive(false) }.count == 1, "\(events)")
    }

    @Test("no media: a peer that stops sending ends the call .noMedia with a BYE; a held call is not ended", .timeLimit(.minutes(1)))
    func noMediaEnd() async throws {
        func phone(_ user: String) throws -> Phone {
            try Self.mediaPhone(user) { config in
                config.inactivityTimeout = .milliseconds(600)
                config.rtcpInterval = .seconds(1)
            }
        }
        #expect(PhoneMediaOptions.defaultConfiguration.inactivityTimeout == .seconds(30))
        let alice = try phone("alice"), bob = try phone("bob")
        defer { alice.close(); bob.close() }
        let arrivals = bob.incomingCallStream
        let out = await alice.dial(try Self.uri(bob, "bob"))
        let inc = try #require(await Self.nextIncoming(arrivals))
        try await inc.answer(timeout: .seconds(5))
        try await out.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        // Held by alice (sendonly): bob's side still hears alice's RTP; alice hears nothing from
        // bob (recvonly answer) but the timer does not run for a stream that does not receive.
        try await out.setHeld(true, timeout: .seconds(5))
        try await Task.sleep(for: .milliseconds(1200))
        #expect(out.state == .established(.localHold))
        #expect(inc.state == .established(.remoteHold))
        try await out.setHeld(false, timeout: .seconds(5))
        // Bob's media dies (its process would have lost the network): no RTP, no RTCP, no BYE.
        bob.media(inc.key)?.stop()
        try await out.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(out.state == .ended(.noMedia))
        // The BYE reached bob, who sees an ordinary hang-up by the peer.
        try await inc.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(inc.state == .ended(.hungUp(by: .remote)))
    }

    @Test("our ringing call replaced by an INVITE with Replaces (early-only): it ends .replaced and names the call that replaced it",
          .timeLimit(.minutes(1)))
    func replacedWhileRinging() async throws {
        let carol = try Self.phone("carol"), bob = try Self.phone("bob"), dave = try Self.phone("dave")
        defer { carol.close(); bob.close(); dave.close() }
        let arrivals = bob.incomingCallStream
        let placed = await carol.dial(try Self.uri(bob, "bob"))
        let atBob = try #require(await Self.nextIncoming(arrivals))
        try await bob.agent.perform(atBob.key) { s throws(SessionError) in try s.provisional(180) }
        try await placed.waitUntil(timeout: .seconds(5)) { $0 == .ringing(earlyMedia: false) }
        let early = try #require(await carol.agent.session(placed.key)?.earlyDialogList.first)
        // Dave's INVITE replaces carol's ringing call: to-tag is carol's tag, from-tag bob's; bob
        // referred dave (RFC 3891 §6: the Referred-By of the replaced call's peer authorizes it).
        let replaces = "\(placed.key.callID);to-tag=\(placed.key.localTag);from-tag=\(early.id.remoteTag);early-only"
        let fromDave = await dave.dial(try Self.uri(carol, "carol"), headers: [(.replaces, replaces), (.referredBy, "<sip:bob@127.0.0.1>")])
        try await fromDave.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        try await placed.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(placed.state == .ended(.replaced))
        let replacement = try #require(placed.replacement)
        #expect(replacement.sipCallID == fromDave.sipCallID)
        // Its ACK may still be on its way when the old call has ended.
        try await replacement.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        try await atBob.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(atBob.state == .ended(.cancelled(by: .remote)))
        await fromDave.hangUp(timeout: .seconds(5))
    }
}

@Suite("Phone: bounded history")
struct PhoneHistoryTests {
    @Test("the key-based history keeps the last ended calls only: a long-running phone does not grow with every call", .timeLimit(.minutes(1)))
    func boundedHistory() async throws {
        let alice = try CallTests.phone("alice"), bob = try CallTests.phone("bob", autoAnswer: .zero)
        defer { alice.close(); bob.close() }
        bob.historyLimit.store(4, ordering: .relaxed)
        var keys: [SessionKey] = []
        for _ in 0..<7 {
            let out = await alice.dial(try CallTests.uri(bob, "bob"))
            try await out.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
            await out.hangUp(timeout: .seconds(5))
            keys.append(out.key)
        }
        // Bob's side of each call ended too (the BYE's answer left after his state changed).
        let settled = await within(.seconds(5)) { () -> Bool? in
            while bob.incomingCalls.count > 4 || bob.states(bob.incomingCalls.last!).last?.isTerminated != true {
                try? await Task.sleep(for: .milliseconds(10))
            }
            return true
        }
        #expect(settled == true)
        // Pruned in batches of a quarter of the limit (here 1) once the limit is passed: the
        // last 4 ended calls are kept, with their states; the older ones are forgotten.
        #expect(bob.incomingCalls.count == 4, "\(bob.incomingCalls.count)")
        #expect(Set(bob.incomingCalls.map(\.callID)) == Set(keys.suffix(4).map(\.callID)))
        #expect(bob.incomingCalls.allSatisfy { bob.states($0).last?.isTerminated == true })
        let forgotten = try #require(keys.first)
        #expect(!bob.incomingCalls.contains { $0.callID == forgotten.callID })
    }
}

@Suite("Phone.perform: batches of actions")
struct PhoneBatchTests {
    @Test("a batch runs in order and reports each action: end one call and answer another; a failed action does not stop the rest",
          .timeLimit(.minutes(1)))
    func batch() async throws {
        let alice = try CallTests.phone("alice"), carol = try CallTests.phone("carol"), bob = try CallTests.phone("bob")
        let other = try CallTests.phone("other")
        defer { alice.close(); carol.close(); bob.close(); other.close() }
        let arrivals = bob.incomingCallStream
        let first = await alice.dial(try CallTests.uri(bob, "bob"))
        let one = try #require(await CallTests.nextIncoming(arrivals))
        try await one.answer(timeout: .seconds(5))
        let second = await carol.dial(try CallTests.uri(bob, "bob"))
        let two = try #require(await CallTests.nextIncoming(arrivals))
        let foreign = await other.dial(try CallTests.uri(alice, "alice"))
        // CallKit's "end and answer": hang up the first, answer the second; a hold on an ended
        // call fails in its place, and a call of another phone is refused.
        let results = await bob.perform([.hangUp(one), .answer(two), .setHeld(one, true), .setMuted(two, true), .hangUp(foreign)])
        #expect(results.count == 5)
        #expect((try? results[0].get()) != nil)
        #expect((try? results[1].get()) != nil)
        func failure(_ r: Result<Void, CallError>) -> CallError? { if case .failure(let e) = r { return e } else { return nil } }
        #expect(failure(results[2]) == .invalidState(action: "hold", state: .ended(.hungUp(by: .local))))
        #expect((try? results[3].get()) != nil)
        #expect(failure(results[4]) == .invalidArgument("the call belongs to another phone"))
        #expect(one.state == .ended(.hungUp(by: .local)))
        #expect(two.state.isEstablished && two.isMuted)
        try await first.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        try await second.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        await second.hangUp(timeout: .seconds(5))
        await foreign.hangUp(timeout: .seconds(5))
    }
}
