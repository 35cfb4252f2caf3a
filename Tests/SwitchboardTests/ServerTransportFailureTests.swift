import Testing
import SIPMessage
import SIPDialog
import SIPRuntime
import NetworkIO
@testable import Switchboard
import SwitchboardTestSupport

/// RFC 3261 §17.2.4 / §18.2.2: a response that cannot be carried ends the INVITE server
/// transaction with a transport error, and the call it belongs to ends too instead of ringing on
/// with nobody able to answer it.
@Suite("An INVITE whose server transaction fails ends its call")
struct ServerTransportFailureTests {
    @Test("over TCP: the caller's connection closes and its Via port is dead: the answer cannot go, and the call ends with the transport-error reason (not a 64·T1 ACK wait)",
          .timeLimit(.minutes(1)))
    func callerGoneOverTCP() async throws {
        let bob = try NetworkChangeTests.tcpPhone("bob")
        defer { bob.close() }
        let arrivals = bob.incomingCallStream
        let bobAddress = bob.agent.endpoint.localAddresses[0].address
        let dead = freeTCPPort()
        var client = RawTCPClient(connectingTo: bobAddress)
        try #require(client != nil, "connected to the phone")
        let sdp = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 40000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n"
        let invite = "INVITE sip:bob@127.0.0.1:\(bobAddress.port);transport=tcp SIP/2.0\r\n"
            + "Via: SIP/2.0/TCP 127.0.0.1:\(dead);branch=z9hG4bK-gone-\(dead)\r\n"
            + "Max-Forwards: 70\r\nFrom: <sip:gone@127.0.0.1>;tag=g1\r\nTo: <sip:bob@127.0.0.1>\r\n"
            + "Call-ID: gone-\(dead)@127.0.0.1\r\nCSeq: 1 INVITE\r\n"
            + "Contact: <sip:gone@127.0.0.1:\(dead);transport=tcp>\r\n"
            + "Content-Type: application/sdp\r\nContent-Length: \(sdp.utf8.count)\r\n\r\n" + sdp
        client?.write(invite)
        let call = try #require(await AccountTests.nextIncoming(bob, arrivals), "the INVITE reached the phone")
        // The caller goes away while the phone rings: its connection and its Via port are dead.
        client = nil
        withExtendedLifetime(client) {}
        let closed = await bob.wait(timeout: .seconds(5)) { bob.agent.endpoint.tcpStatistics.reduce(0) { $0 + $1.connectionsClosed } >= 1 }
        #expect(closed, "the phone saw the connection close")
        // §18.2.2: the 200 goes to the caller's address on a new connection, which is refused;
        // the transaction ends on that error and the call with it, well before the 64·T1 ACK
        // timeout (with these timers 1.28 s, after which the call used to end as "no ACK").
        await #expect(throws: CallError.self) { try await call.answer() }
        let ended = await bob.wait(call.key, timeout: .seconds(10)) { $0 == .terminated(.transportError) }
        #expect(ended, "state: \(call.state)")
    }
}
