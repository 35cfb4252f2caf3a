import Foundation
import SwitchboardTestSupport
import Testing
import SIPMessage
import SIPDialog
import SIPRuntime
@testable import SwitchboardTools
import Switchboard
import NetworkIO

/// Transfer and forwarding with baresip 1.0 (blind transfer in both roles; following our 302).
@Suite("Transfer and forwarding with baresip", .enabled(if: Baresip.available || TestPaths.isCI, "baresip is not installed: baresip interop skipped"),
       .requires("baresip", { Baresip.available }))
struct BaresipTransferTests {
    typealias Lines = ReportLines

    static func phone(_ name: String, _ lines: Lines, forwardTo: [SIPURI] = []) throws -> Phone {
        let config = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]),
                                                identity: try SIPURI("sip:\(name)@127.0.0.1"), sessionTimer: nil)
        return try Phone(name: name, configuration: config, autoAnswer: .milliseconds(100), forwardTo: forwardTo, report: { lines.append($0) },
                         trace: { m, outgoing, _ in lines.append("\(name) \(outgoing ? "sent" : "got") \(LadderPrinter.label(m))") })
    }

    static func uri(_ p: Phone, _ user: String) throws -> SIPURI {
        try SIPURI("sip:\(user)@127.0.0.1:\(p.agent.endpoint.localAddresses[0].address.port)")
    }

    @Test("we transfer baresip to our target: its NOTIFYs report 100 and 200, the outcome is success, the target gets its call",
          .timeLimit(.minutes(1)))
    func weTransferBaresip() async throws {
        let b = try await Baresip.start()
        defer { Baresip.stop(b) }
        let lines = Lines()
        let alice = try Self.phone("alice", lines), carol = try Self.phone("carol", lines)
        defer { alice.close(); carol.close() }
        let key = await alice.call(try SIPURI("sip:b@127.0.0.1:\(b.sipPort)"))
        try #require(await alice.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)\n\(Baresip.log(b.rundir))")
        let outcome = await alice.transfer(key, to: try Self.uri(carol, "carol"), notifyTimeout: .seconds(10))
        #expect(outcome == .succeeded(200), "\(lines.all)\n\(Baresip.log(b.rundir))")
        #expect(lines.count("alice: transfer progress: SIP/2.0 200") > 0)
        #expect(carol.incomingCalls.count == 1)
        #expect(await alice.wait(key, timeout: .seconds(10)) { $0.isTerminated })
    }

    @Test("baresip transfers us: we accept its REFER, call the target, and tell it with NOTIFYs", .timeLimit(.minutes(1)))
    func baresipTransfersUs() async throws {
        let b = try await Baresip.start()
        defer { Baresip.stop(b) }
        let lines = Lines()
        let bob = try Self.phone("bob", lines), carol = try Self.phone("carol", lines)
        defer { bob.close(); carol.close() }
        try await Baresip.ctl(b, ["dial \(try Self.uri(bob, "bob"))"])
        try #require(await bob.wait(timeout: .seconds(10)) { !bob.incomingCalls.isEmpty })
        let key = bob.incomingCalls[0]
        try #require(await bob.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)")
        try await Baresip.ctl(b, ["transfer \(try Self.uri(carol, "carol"))"])
        #expect(await bob.wait(timeout: .seconds(10)) { lines.count("bob: transfer to sip:carol@") > 0 }, "\(lines.all)\n\(Baresip.log(b.rundir))")
        #expect(await carol.wait(timeout: .seconds(10)) { carol.incomingCalls.count == 1 })
        let bc = try #require(carol.incomingCalls.first)
        #expect(await carol.wait(bc, timeout: .seconds(10)) { $0 == .confirmed })
        // Our NOTIFYs were taken (200), and baresip ends the original call after the final one.
        #expect(await bob.wait(timeout: .seconds(10)) { lines.all.filter { $0 == "bob: NOTIFY → 200" }.count >= 2 }, "\(lines.all)")
        #expect(await bob.wait(key, timeout: .seconds(10)) { $0.isTerminated }, "\(lines.all)")
    }

    @Test("baresip calls our forwarding phone: it follows the 302 to our target", .timeLimit(.minutes(1)))
    func baresipFollowsOurRedirect() async throws {
        let b = try await Baresip.start()
        defer { Baresip.stop(b) }
        let lines = Lines()
        let carol = try Self.phone("carol", lines)
        let bob = try Self.phone("bob", lines, forwardTo: [try Self.uri(carol, "carol")])
        defer { bob.close(); carol.close() }
        try await Baresip.ctl(b, ["dial \(try Self.uri(bob, "bob"))"])
        #expect(await carol.wait(timeout: .seconds(10)) { carol.incomingCalls.count == 1 }, "\(lines.all)\n\(Baresip.log(b.rundir))")
        #expect(lines.count("bob: forwarding (302) to sip:carol@") > 0)
        let key = try #require(carol.incomingCalls.first)
        #expect(await carol.wait(key, timeout: .seconds(10)) { $0 == .confirmed })
    }
}
