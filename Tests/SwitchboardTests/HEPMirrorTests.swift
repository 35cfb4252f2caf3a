import Testing
import Synchronization
import SIPMessage
import SIPAuth
import SIPRuntime
import SIPTransport
import PacketCapture
import NetworkIO
@testable import Switchboard

/// The live HEP mirror: a phone's SIP traffic reaches a collector (a socket of the test) as HEP
/// version 3 packets that decode to the messages, addresses and Call-ID of the call.
@Suite("HEP mirror of a phone's traffic")
struct HEPMirrorTests {
    @Test("a call's messages arrive at the collector as HEP3, in both directions, filed under the Call-ID", .timeLimit(.minutes(1)))
    func mirrorsACall() async throws {
        let received = Mutex<[[UInt8]]>([])
        let collector = try UDPTransport(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0)) { e in
            // HEP is not SIP: the transport hands the datagram over as unparsable.
            if case .malformed(let bytes, _, _) = e { received.withLock { $0.append(bytes) } }
        }
        defer { collector.close() }
        let sink = try HEPTrafficSink(collector: collector.localAddress, agentID: 77, authKey: "k")
        defer { sink.close() }
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: CallTests.fast),
                                           identity: try SIPURI("sip:alice@127.0.0.1"))
        c.sessionTimer = nil
        c.endpoint.capture = sink
        let alice = try Phone(name: "alice", configuration: c)
        defer { alice.close() }
        var cb = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: CallTests.fast),
                                            identity: try SIPURI("sip:bob@127.0.0.1"))
        cb.sessionTimer = nil
        let bob = try Phone(name: "bob", configuration: cb, autoAnswer: .zero)
        defer { bob.close() }
        let alicePort = alice.agent.endpoint.localAddresses[0].address.port
        let bobPort = bob.agent.endpoint.localAddresses[0].address.port
        let call = await alice.dial(try SIPURI("sip:bob@127.0.0.1:\(bobPort)"))
        try await call.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        await call.hangUp()
        // INVITE, 100?, 180?, 200, ACK, BYE, 200: wait for the BYE's answer to be mirrored.
        let deadline = ContinuousClock.now + .seconds(5)
        var packets: [HEPPacket] = []
        while ContinuousClock.now < deadline {
            packets = try received.withLock { $0 }.map { try HEPPacket(decoding: $0) }
            if packets.contains(where: { p in
                p.destination.port == alicePort && (try? SIPMessage(bytes: p.payload)).map { $0.statusCode == 200 && (try? $0.cseq())?.method == .bye } == true
            }) { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        let messages = try packets.map { try SIPMessage(bytes: $0.payload) }
        let sent = packets.filter { $0.source.port == alicePort && $0.destination.port == bobPort }
        let got = packets.filter { $0.source.port == bobPort && $0.destination.port == alicePort }
        #expect(sent.count + got.count == packets.count, "only alice's traffic")
        #expect(messages.contains { $0.method == .invite } && messages.contains { $0.method == .ack } && messages.contains { $0.method == .bye })
        #expect(Set(messages.filter { $0.statusCode == 200 }.compactMap { try? $0.cseq().method }).isSuperset(of: [.invite, .bye]), "the 200s of the INVITE and of the BYE")
        #expect(packets.allSatisfy { $0.correlationID == call.sipCallID && $0.agentID == 77 && $0.authKey == "k" && $0.payloadType == .sip
            && $0.ipProtocol == .udp })
        let now = WallTime.now().components.seconds
        #expect(packets.allSatisfy { abs(Int64($0.seconds) - now) < 60 }, "stamped with the wall clock")
        #expect(sink.statistics.sent == packets.count && sink.statistics.dropped == 0)
    }
}
