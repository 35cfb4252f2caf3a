import Foundation
import Synchronization
import SwitchboardTestSupport
import Testing
import SIPMessage
import SIPAuth
import SIPDialog
import SIPRuntime
import SIPTransport
@testable import SwitchboardTools
import Switchboard

/// Calls routed through Kamailio (the project's configuration: registrar, Record-Route, loose
/// routing, and with WITH_INVITE_AUTH a 407 for INVITEs), between two Switchboard phones.
@Suite("Calls through Kamailio", .enabled(if: Kamailio.available || TestPaths.isCI, "kamailio is not installed: Kamailio interop skipped"),
       .requires("kamailio", { Kamailio.available }))
struct KamailioCallTests {
    typealias Lines = ReportLines

    static func phone(_ user: String, _ password: String, kamailio port: UInt16, transport: String, lines: Lines? = nil) throws -> Phone {
        let listen = try ListenSpec.parse("\(transport):127.0.0.1:0")
        let kind: TransportKind = transport == "tcp" ? .tcp : .udp
        let proxy = try SIPURI("sip:127.0.0.1:\(port)" + (transport == "tcp" ? ";transport=tcp" : ""))
        let config = SIPUserAgent.Configuration(endpoint: .init(listen: [listen]), identity: try SIPURI("sip:\(user)@127.0.0.1"),
                                                credentials: DigestClient(username: user, password: password), outboundProxy: proxy,
                                                transport: kind, sessionTimer: nil)
        return try Phone(name: user, configuration: config, autoAnswer: .milliseconds(100), report: { l in lines?.append(l) },
                         trace: { m, outgoing, _ in lines?.append("\(user) \(outgoing ? "sent" : "got") \(LadderPrinter.label(m))") })
    }

    func run(transport: String, inviteAuth: Bool) async throws {
        let (pid, port, rundir) = try await Kamailio.start(define: inviteAuth ? "WITH_INVITE_AUTH" : nil)
        defer { Kamailio.stop(pid); try? FileManager.default.removeItem(atPath: rundir) }
        let lines = Lines()
        let bob = try Self.phone("bob", "bobpw", kamailio: port, transport: transport, lines: lines)
        let alice = try Self.phone("alice", "alicepw", kamailio: port, transport: transport, lines: lines)
        defer { alice.close(); bob.close() }
        let registrar = try SIPURI("sip:127.0.0.1:\(port)" + (transport == "tcp" ? ";transport=tcp" : ""))
        await bob.agent.register(registrar: registrar, expires: 120)
        let registered = await bob.wait(timeout: .seconds(10)) { bob.registrationStates.contains { if case .registered = $0 { return true } else { return false } } }
        try #require(registered, "bob did not register: \(bob.registrationStates)")

        // Alice calls bob's AOR at Kamailio; Kamailio finds his contact and Record-Routes.
        let key = await alice.call(try SIPURI("sip:bob@127.0.0.1:\(port)"))
        try #require(await alice.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "states: \(alice.states(key)) \(lines.all)")
        let route = await alice.agent.session(key)?.dialog?.routeSet ?? []
        #expect(route.count == 1)
        #expect(route.first?.sipURI?.port == port)
        let bk = try #require(bob.incomingCalls.first)
        #expect(await bob.agent.session(bk)?.dialog?.routeSet.first?.sipURI?.port == port)

        // A hold from alice, then one from bob while alice still holds him: both on hold means
        // inactive (RFC 3264 §8.4), through Kamailio.
        try await alice.hold(key, true)
        try #require(await alice.wait(timeout: .seconds(10)) { lines.count("alice: peer answers recvonly") > 0 })
        try await bob.hold(bk, true)
        try #require(await bob.wait(timeout: .seconds(10)) { lines.count("bob: peer answers inactive") > 0 })

        // Bob hangs up; the BYE follows the route set through Kamailio.
        try await bob.agent.perform(bk) { s throws(SessionError) in try s.bye() }
        try #require(await alice.wait(key, timeout: .seconds(10)) { $0 == .terminated(.remoteHangup) })
        #expect(await bob.wait(bk, timeout: .seconds(10)) { $0 == .terminated(.localHangup) })
        // The other way: alice registers too, and bob calls her through Kamailio.
        await alice.agent.register(registrar: registrar, expires: 120)
        try #require(await alice.wait(timeout: .seconds(10)) { alice.registrationStates.contains { if case .registered = $0 { return true } else { return false } } })
        let back = await bob.call(try SIPURI("sip:alice@127.0.0.1:\(port)"))
        try #require(await bob.wait(back, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)")
        #expect(await bob.agent.session(back)?.dialog?.routeSet.first?.sipURI?.port == port)
        try await bob.agent.perform(back) { s throws(SessionError) in try s.bye() }
        let ak = try #require(alice.incomingCalls.first)
        #expect(await alice.wait(ak, timeout: .seconds(10)) { $0 == .terminated(.remoteHangup) })

        await bob.agent.unregister()
        await alice.agent.unregister()
        // The un-REGISTERs (Expires: 0) are answered: both registrations end unregistered.
        #expect(await bob.wait(timeout: .seconds(10)) { bob.registrationStates.last == .unregistered }, "bob: \(bob.registrationStates)")
        #expect(await alice.wait(timeout: .seconds(10)) { alice.registrationStates.last == .unregistered }, "alice: \(alice.registrationStates)")
        let all = lines.all
        #expect(all.filter { $0 == "alice sent INVITE (sdp)" }.count == (inviteAuth ? 3 : 2))
        // Each side: its hold re-INVITE and its call (plus the one the 407 refused).
        #expect(all.filter { $0 == "bob sent INVITE (sdp)" }.count == (inviteAuth ? 3 : 2))
        #expect(all.contains("alice got 407 INVITE") == inviteAuth)
        #expect(all.contains("bob got BYE") == false && all.contains("alice got BYE"))

        // And Kamailio's binding for bob is gone: a call to his AOR ends in its 404 (lookup failed).
        let gone = await alice.call(try SIPURI("sip:bob@127.0.0.1:\(port)"))
        #expect(await alice.wait(gone, timeout: .seconds(10)) { $0 == .terminated(.rejected(404)) }, "states: \(alice.states(gone)) \(lines.all)")
        #expect(bob.incomingCalls.count == 1, "bob was reached after unregistering")
    }

    @Test("UDP: register, call through Kamailio with Record-Route, holds both ways, BYE from the callee, then a call the other way", .timeLimit(.minutes(1)))
    func udp() async throws { try await run(transport: "udp", inviteAuth: false) }

    @Test("TCP: the same over TCP connections to Kamailio", .timeLimit(.minutes(1)))
    func tcp() async throws { try await run(transport: "tcp", inviteAuth: false) }

    @Test("a 407-challenged INVITE is answered with credentials and the call goes through", .timeLimit(.minutes(1)))
    func inviteAuth() async throws { try await run(transport: "udp", inviteAuth: true) }

    @Test("a wrong password for the 407 ends the call attempt with an authentication failure", .timeLimit(.minutes(1)))
    func inviteAuthWrongPassword() async throws {
        let (pid, port, rundir) = try await Kamailio.start(define: "WITH_INVITE_AUTH")
        defer { Kamailio.stop(pid); try? FileManager.default.removeItem(atPath: rundir) }
        let alice = try Self.phone("alice", "wrong", kamailio: port, transport: "udp")
        defer { alice.close() }
        let key = await alice.call(try SIPURI("sip:bob@127.0.0.1:\(port)"))
        #expect(await alice.wait(key, timeout: .seconds(10)) {
            if case .terminated(.authenticationFailed) = $0 { return true } else { return false }
        })
    }
}
