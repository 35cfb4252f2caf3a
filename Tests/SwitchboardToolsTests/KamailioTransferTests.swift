import Foundation
import SwitchboardTestSupport
import Testing
import SIPMessage
import SIPDialog
import SIPRuntime
@testable import SwitchboardTools
import Switchboard

/// Transfer with Kamailio as the record-routing proxy between the parties: the REFER and its
/// NOTIFYs follow the route set through it, and the transferee's new INVITE to the target's AOR
/// goes through it too (its outbound proxy), to the target's registered contact.
@Suite("Transfer through Kamailio", .enabled(if: Kamailio.available || TestPaths.isCI, "kamailio is not installed: Kamailio interop skipped"),
       .requires("kamailio", { Kamailio.available }))
struct KamailioTransferTests {
    typealias Lines = ReportLines

    static func registered(_ p: Phone, _ registrar: SIPURI) async -> Bool {
        await p.agent.register(registrar: registrar, expires: 120)
        return await p.wait(timeout: .seconds(10)) { p.registrationStates.contains { if case .registered = $0 { return true } else { return false } } }
    }

    @Test("blind and attended transfer through Kamailio (UDP)", .timeLimit(.minutes(1)))
    func transfers() async throws {
        let (pid, port, rundir) = try await Kamailio.start()
        defer { Kamailio.stop(pid); try? FileManager.default.removeItem(atPath: rundir) }
        let lines = Lines()
        let alice = try KamailioCallTests.phone("alice", "alicepw", kamailio: port, transport: "udp", lines: lines)
        let bob = try KamailioCallTests.phone("bob", "bobpw", kamailio: port, transport: "udp", lines: lines)
        let carol = try KamailioCallTests.phone("carol", "carolpw", kamailio: port, transport: "udp", lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let registrar = try SIPURI("sip:127.0.0.1:\(port)")
        for p in [bob, carol] { try #require(await Self.registered(p, registrar), "\(p.name) did not register: \(p.registrationStates)") }

        // Blind: alice → bob through Kamailio, then REFER bob to carol's AOR.
        let ab = await alice.call(try SIPURI("sip:bob@127.0.0.1:\(port)"))
        try #require(await alice.wait(ab, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)")
        #expect(await alice.agent.session(ab)?.dialog?.routeSet.first?.sipURI?.port == port)
        let blind = await alice.transfer(ab, to: try SIPURI("sip:carol@127.0.0.1:\(port)"), notifyTimeout: .seconds(10))
        #expect(blind == .succeeded(200), "\(lines.all)")
        #expect(await carol.wait(timeout: .seconds(10)) { carol.incomingCalls.count == 1 })
        let bc = try #require(carol.incomingCalls.first)
        #expect(await carol.wait(bc, timeout: .seconds(10)) { $0 == .confirmed })
        #expect(await carol.agent.session(bc)?.dialog?.routeSet.first?.sipURI?.port == port, "the new call is record-routed too")
        #expect(lines.count("carol: incoming call from sip:bob@127.0.0.1 (Referred-By sip:alice@127.0.0.1)") > 0, "\(lines.all)")
        try await carol.agent.perform(bc) { s throws(SessionError) in try s.bye() }

        // Attended: alice → bob again, alice → carol (consultation), then REFER with Replaces.
        let ab2 = await alice.call(try SIPURI("sip:bob@127.0.0.1:\(port)"))
        try #require(await alice.wait(ab2, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)")
        let ac = await alice.call(try SIPURI("sip:carol@127.0.0.1:\(port)"))
        try #require(await alice.wait(ac, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)")
        let attended = await alice.transfer(ab2, replacing: ac, notifyTimeout: .seconds(10))
        #expect(attended == .succeeded(200), "\(lines.all)")
        #expect(await alice.wait(ac, timeout: .seconds(10)) { $0 == .terminated(.remoteHangup) }, "carol ended the replaced consultation")
        #expect(lines.count("carol: call replaces \(ac.callID)") > 0, "\(lines.all)")
    }
}
