import Testing
import SIPMessage
import SIPTransaction
import SIPTransport
import SIPDialog
import SIPRuntime
import NetworkIO
@testable import Switchboard
import SwitchboardTestSupport

/// A request to a UDP port nobody listens on fails at once (ICMP port unreachable, read with
/// IP_RECVERR), not after Timer B/F (RFC 3261 §8.1.3.1: a transport error).
@Suite("UDP: a closed port fails at once")
struct ClosedPortTests {
    static func phone(_ lines: TransferTests.Lines) throws -> Phone {
        // RFC 3261 timers (T1 500 ms: Timer B 32 s), so only the ICMP error can end it quickly.
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]),
                                           identity: try SIPURI("sip:alice@127.0.0.1"))
        c.sessionTimer = nil
        return try Phone(name: "alice", configuration: c, report: { lines.add($0) })
    }

    @Test("an INVITE to 127.0.0.1:<closed port> ends with the transport-error reason in well under a second", .timeLimit(.minutes(1)))
    func invite() async throws {
        let lines = TransferTests.Lines()
        let alice = try Self.phone(lines)
        defer { alice.close() }
        let closed = freeUDPPort()
        let clock = ContinuousClock(), start = clock.now
        let key = await alice.call(try SIPURI("sip:nobody@127.0.0.1:\(closed)"))
        #expect(await alice.wait(key, timeout: .seconds(5)) { $0 == .terminated(.transportError) }, "\(lines.text)")
        #expect(clock.now - start < .milliseconds(900), "took \(clock.now - start)")
        #expect(alice.agent.endpoint.udpStatistics.first.map { $0.unreachable >= 1 } ?? false)
    }

    @Test("a call placed after the phone closed ends; its description is built without the closed endpoint's address", .timeLimit(.minutes(1)))
    func callAfterClose() async throws {
        let lines = TransferTests.Lines()
        let alice = try Self.phone(lines)
        alice.close()
        #expect(alice.agent.endpoint.localAddresses.isEmpty)
        let key = await alice.call(try SIPURI("sip:nobody@127.0.0.1:\(freeUDPPort())"))
        #expect(await alice.wait(key, timeout: .seconds(5)) { $0.isTerminated }, "\(lines.text)")
    }

    @Test("OPTIONS to a closed port: no answer, at once; a later request to a live peer is not hurt by the pending error")
    func options() async throws {
        let lines = TransferTests.Lines()
        let alice = try Self.phone(lines), bob = try Self.phone(lines)
        defer { alice.close(); bob.close() }
        let closed = freeUDPPort()
        let clock = ContinuousClock(), start = clock.now
        let r = await alice.agent.sendRequest(.options, to: try SIPURI("sip:nobody@127.0.0.1:\(closed)"))
        #expect(r == nil)
        #expect(clock.now - start < .milliseconds(900), "took \(clock.now - start)")
        let bobURI = try SIPURI("sip:bob@127.0.0.1:\(bob.agent.endpoint.localAddresses[0].address.port)")
        #expect(await alice.agent.sendRequest(.options, to: bobURI)?.statusCode == 200)
    }
}
