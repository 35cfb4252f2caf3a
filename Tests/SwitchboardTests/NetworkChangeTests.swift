import Testing
import Synchronization
import SIPMessage
import SIPAuth
import SIPDialog
import SIPRuntime
import SIPProxy
import SIPTransport
import MediaRuntime
import NetworkIO
@testable import Switchboard
import SwitchboardTestSupport

/// A phone whose address changes (127.0.0.1 → 127.0.0.2 on loopback, whose whole 127/8 is
/// local): calls go reconnecting and back, the media and the peer's requests follow the new
/// address, the registration moves its binding; a peer that cannot follow loses the call.
@Suite("Network change: reconnecting calls and registrations")
struct NetworkChangeTests {
    /// A call's states in order, as they come.
    final class Recorder: Sendable {
        let seen = Mutex<[CallState]>([])
        func states() -> [CallState] { seen.withLock { $0 } }
    }

    static func record(_ call: Call) -> (Recorder, Task<Void, Never>) {
        let r = Recorder()
        let states = call.states
        let task = Task { for await s in states { r.seen.withLock { $0.append(s) } } }
        return (r, task)
    }

    @Test("an established call with media follows: reconnecting, established again, audio and the peer's BYE reach the new address",
          .timeLimit(.minutes(1)))
    func callFollows() async throws {
        let alice = try CallTests.mediaPhone("alice") { $0.localAddress = "127.0.0.1" }
        defer { alice.close() }
        let bob = try CallTests.mediaPhone("bob") { $0.localAddress = "127.0.0.1" }
        defer { bob.close() }
        let (call, atBob) = try await CallTests.establishedCall(from: alice, to: bob)
        let (seen, task) = Self.record(call)
        defer { task.cancel() }
        let oldMedia = try #require(alice.media(call.key))
        // Some audio both ways before the change (bounded: 2 s), so the old session has figures.
        for _ in 0..<100 {
            let s = oldMedia.stats().call
            if s.sent.packets >= 5 && s.received.packets >= 5 { break }
            try await Task.sleep(for: .milliseconds(20))
        }

        let change = try await alice.networkChanged(to: "127.0.0.2", timeout: .seconds(5))
        #expect(change.address.address.ipString == "127.0.0.2")
        #expect(change.reconnected.map(\.id) == [call.id] && change.lost.isEmpty)
        #expect(call.state.isEstablished)
        #expect(seen.states().contains(.reconnecting), "\(seen.states())")
        // The old address no longer listens: only the new one is left.
        #expect(alice.agent.endpoint.localAddresses.map(\.address.ipString) == ["127.0.0.2"])
        #expect(alice.agent.contact.sipURI?.host.address == "127.0.0.2")
        // New media on the new address; bob's audio reaches it.
        let newMedia = try #require(alice.media(call.key))
        #expect(newMedia !== oldMedia)
        var heard: UInt64 = 0
        for _ in 0..<100 {
            heard = newMedia.stats().call.received.packets
            if heard >= 10 { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(heard >= 10, "packets from bob at the new address: \(heard)")
        // The call's figures go on from the old session's: its counts are added, not lost.
        let before = oldMedia.stats(), after = newMedia.stats()
        #expect(before.call.sent.packets > 0 && before.call.received.packets > 0, "\(before)")
        let merged = try #require(alice.mediaStatistics(call.key))
        #expect(merged.call.sent.packets >= before.call.sent.packets + after.call.sent.packets, "\(merged)")
        #expect(merged.call.received.packets >= before.call.received.packets + after.call.received.packets, "\(merged)")
        // Bob's BYE goes to the Contact of the re-INVITE: the new address.
        await atBob.hangUp()
        let end = try await call.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(end == .ended(.hungUp(by: .remote)))
        let final = try #require(alice.mediaStatistics(call.key))
        #expect(final.call.received.packets >= merged.call.received.packets, "the final figures keep the old session's: \(final)")
        let states = seen.states()
        let i = try #require(states.firstIndex(of: .reconnecting))
        #expect(states[(i + 1)...].first?.isEstablished == true, "\(states)")
    }

    @Test("a peer that cannot follow: the call ends with networkChange", .timeLimit(.minutes(1)))
    func callLost() async throws {
        let alice = try CallTests.phone("alice")
        defer { alice.close() }
        let bob = try CallTests.phone("bob", autoAnswer: .zero)
        let call = await alice.dial(try CallTests.uri(bob, "bob"))
        try await call.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        // Bob's phone goes away without a BYE: its port is closed when the re-INVITE comes.
        bob.agent.endpoint.close()
        let change = try await alice.networkChanged(to: "127.0.0.2", timeout: .seconds(3))
        #expect(change.lost.map(\.id) == [call.id] && change.reconnected.isEmpty)
        let end = try await call.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(end == .ended(.networkChange))
        bob.close()
    }

    @Test("an address the host does not have is refused and nothing changes", .timeLimit(.minutes(1)))
    func unbindable() async throws {
        let alice = try CallTests.phone("alice")
        defer { alice.close() }
        let before = alice.agent.endpoint.localAddresses
        await #expect(throws: TransportError.self) { try await alice.networkChanged(to: "192.0.2.55") }
        await #expect(throws: TransportError.self) { try await alice.networkChanged(to: "not-an-address") }
        #expect(alice.agent.endpoint.localAddresses == before)
        #expect(alice.agent.contact.sipURI?.port == before[0].address.port)
    }

    @Test("registered accounts move their bindings: the new Contact added, the old one removed, in one REGISTER", .timeLimit(.minutes(1)))
    func registrationMoves() async throws {
        let (registrar, proxy) = try AccountTests.proxy("switchboard.test", users: ["alice": "alicepw", "bob": "bobpw"])
        defer { registrar.close() }
        let here = try AccountTests.uri(registrar)
        let phone = try AccountTests.phone("sip:alice@switchboard.test", password: "alicepw")
        defer { phone.close() }
        let bob = try phone.addAccount(.init(addressOfRecord: try SIPURI("sip:bob@switchboard.test"),
                                             credentials: DigestClient(username: "bob", password: "bobpw"), registrar: here))
        try await phone.register(with: here, expires: 300)
        try await bob.register(timeout: .seconds(5))
        let states = bob.registrationStates
        try await phone.networkChanged(to: "127.0.0.2")
        // Wait for bob's binding to settle again (registering → registered).
        _ = await within(.seconds(5)) { () -> Bool? in
            for await s in states.dropFirst() where s.isRegistered { return true }
            return nil
        }
        let port = phone.agent.endpoint.localAddresses[0].address.port
        for aor in ["sip:alice@switchboard.test", "sip:bob@switchboard.test"] {
            let bindings = proxy.bindings(of: try SIPURI(aor)).compactMap(\.contact.sipURI)
            #expect(bindings.count == 1 && bindings.first?.host.address == "127.0.0.2" && bindings.first?.port == port, "\(aor): \(bindings)")
        }
        #expect(bob.registrationHistory.suffix(2) == [.registering, .registered(expires: 3600)], "\(bob.registrationHistory)")
    }

    /// What a phone's endpoint received: each message's first line and where it came from.
    final class Received: SIPTrafficSink {
        let lines = Mutex<[(String, SocketAddress)]>([])
        func record(_ record: SIPTrafficRecord) {
            guard record.direction == .received else { return }
            let first = String(decoding: record.bytes.prefix { $0 != 0x0D }, as: UTF8.self)
            lines.withLock { $0.append((first, record.remote)) }
        }
        func from(_ prefix: String) -> [SocketAddress] { lines.withLock { $0.filter { $0.0.hasPrefix(prefix) }.map(\.1) } }
    }

    static func tcpPhone(_ user: String, autoAnswer: Duration? = nil, capture: (any SIPTrafficSink)? = nil) throws -> Phone {
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.tcp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: CallTests.fast,
                                                           capture: capture),
                                           identity: try SIPURI("sip:\(user)@127.0.0.1;transport=tcp"))
        c.transport = .tcp
        c.sessionTimer = nil
        return try Phone(name: user, configuration: c, autoAnswer: autoAnswer)
    }

    @Test("over TCP: the re-INVITE, its ACK and the answer to the peer's BYE leave from the new address on new connections",
          .timeLimit(.minutes(1)))
    func tcpCallFollows() async throws {
        let alice = try Self.tcpPhone("alice")
        defer { alice.close() }
        let seenByBob = Received()
        let bob = try Self.tcpPhone("bob", autoAnswer: .zero, capture: seenByBob)
        defer { bob.close() }
        let port = bob.agent.endpoint.localAddresses[0].address.port
        let call = await alice.dial(try SIPURI("sip:bob@127.0.0.1:\(port);transport=tcp"))
        try await call.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        #expect(seenByBob.from("INVITE").map(\.ipString) == ["127.0.0.1"])

        let change = try await alice.networkChanged(to: "127.0.0.2", timeout: .seconds(5))
        #expect(change.reconnected.map(\.id) == [call.id] && change.lost.isEmpty)
        #expect(alice.agent.endpoint.localAddresses.map(\.address.ipString) == ["127.0.0.2"])
        // The re-INVITE came over a connection from the new address.
        let invites = seenByBob.from("INVITE")
        #expect(invites.count == 2 && invites.last?.ipString == "127.0.0.2", "\(invites)")
        // Bob's BYE goes to the new Contact (127.0.0.2) and the call ends normally.
        let atBob = try #require(bob.calls.first)
        await atBob.hangUp(timeout: .seconds(5))
        let end = try await call.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(end == .ended(.hungUp(by: .remote)))
        // The ACK of the re-INVITE and the 200 to bob's BYE came from the new address too.
        #expect(seenByBob.from("ACK").last?.ipString == "127.0.0.2", "\(seenByBob.from("ACK"))")
        #expect(seenByBob.from("SIP/2.0 200").last?.ipString == "127.0.0.2", "\(seenByBob.from("SIP/2.0 200"))")
    }
}
