import Foundation
import Synchronization
import Testing
import SIPMessage
import SIPTransport
import SIPTransaction
import SIPDialog
import SwitchboardTestSupport
@testable import SIPRuntime
import SIPLoad
import NetworkIO

/// The dialog-level UAS (`DialogServer`, behind `switchboard serve --dialogs`) under SIPp's
/// built-in uac: every call must complete (INVITE, 180, 200 with SDP, ACK, BYE) and leave no
/// session behind. Bounded by -m, -timeout and the test's own deadline; 127.0.0.1 only.
@Suite("DialogServer against SIPp", .enabled(if: SIPp.available || SIPp.isCI, "sipp (Debian sip-tester) is not installed: SIPp interop skipped"),
       .requires("sipp (Debian sip-tester)", { SIPp.available }))
struct DialogServerSIPpTests {
    static let answer = SessionBody.sdp("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 40000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n")

    @Test(.timeLimit(.minutes(1)))
    func sippUACAgainstDialogServer() async throws {
        #expect(SIPp.available, "sipp must be installed in CI (scripts/test installs sip-tester)")
        let offers = OfferCounter()
        let server = try DialogServer(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { offer in
            if let o = offer, o.isSDP, String(decoding: o.bytes, as: UTF8.self).contains("m=audio") { offers.increment() }
            return Self.answer
        }
        defer { server.close() }
        let port = server.endpoint.localAddresses[0].address.port
        let sippPort = try SIPp.freePort()
        let (p, dir) = try SIPp.start(["127.0.0.1:\(port)", "-sn", "uac", "-i", "127.0.0.1", "-p", "\(sippPort)",
                                       "-m", "300", "-r", "300", "-nostdin", "-timeout", "20", "-timeout_error", "-buff_size", "4194304"])
        let status = await SIPp.wait(p, timeout: .seconds(30))
        #expect(status == 0, "sipp exit \(String(describing: status)):\n\(SIPp.log(dir))")
        // SIPp is done once it has our 200 to its last BYE; give the server a bounded moment.
        let clock = ContinuousClock(), deadline = clock.now + .seconds(5)
        while server.statistics.liveDialogs > 0 && clock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let s = server.statistics
        #expect(s.invites == 300)
        #expect(s.answered == 300)
        #expect(s.confirmed == 300)
        #expect(s.remoteHangups == 300)
        #expect(s.ackTimeouts == 0 && s.refused == 0 && s.otherEnds == 0)
        #expect(s.liveDialogs == 0)
        #expect(offers.value == 300, "every INVITE's SDP offer reached the answerer")
        #expect(server.runningTimers == 0, "every call's session timers were cancelled or fired")
    }
}

/// Counts from the answerer, which runs on the endpoint's threads.
final class OfferCounter: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

/// The dialog-level UAS against our own user agent: what SIPp's uac does not exercise.
@Suite("DialogServer on 127.0.0.1")
struct DialogServerLoopbackTests {
    @Test("a re-INVITE (hold) is answered by the answerer, INFO gets 200, a refused re-offer gets 488, and the BYE ends the call", .timeLimit(.minutes(1)))
    func reinviteInfoAndBye() async throws {
        let hold = SessionBody.sdp(String(decoding: UserAgentLoopbackTests.offer.bytes, as: UTF8.self).replacingOccurrences(of: "sendrecv", with: "sendonly"))
        let refused = SessionBody.sdp("v=0\r\no=- 1 3 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=video 4002 RTP/AVP 96\r\n")
        let server = try DialogServer(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { offer in
            guard let o = offer else { return UserAgentLoopbackTests.answer }
            let text = String(decoding: o.bytes, as: UTF8.self)
            if text.contains("m=video") { return nil }
            return .sdp(String(decoding: UserAgentLoopbackTests.answer.bytes, as: UTF8.self)
                .replacingOccurrences(of: "sendrecv", with: text.contains("sendonly") ? "recvonly" : "sendrecv"))
        }
        defer { server.close() }
        let alice = try UserAgentLoopbackTests.agent("alice")
        defer { alice.close() }
        let a = AgentEvents(alice)
        let port = server.endpoint.localAddresses[0].address.port
        let key = await alice.call(try SIPURI("sip:switchboard@127.0.0.1:\(port)"), offer: UserAgentLoopbackTests.offer)
        try #require(await a.wait("confirmed", a.has(key, .confirmed)))

        try await alice.perform(key) { s throws(SessionError) in try s.reinvite(body: hold) }
        try #require(await a.wait("hold answered") { es in es.contains { e in
            if case .session(key, .remoteAnswer(let b)) = e { return String(decoding: b.bytes, as: UTF8.self).contains("a=recvonly") } else { return false }
        } })
        try await alice.perform(key) { s throws(SessionError) in try s.sendRequest(.info, body: SessionBody(contentType: MediaType(type: "application", subtype: "dtmf-relay"), bytes: Array("Signal=5\r\nDuration=160\r\n".utf8))) }
        try #require(await a.wait("INFO answered") { es in es.contains { if case .session(key, .requestCompleted(.info, 200, _)) = $0 { return true } else { return false } } })
        try await alice.perform(key) { s throws(SessionError) in try s.reinvite(body: refused) }
        try #require(await a.wait("re-offer refused") { es in es.contains { if case .session(key, .requestCompleted(.invite, 488, _)) = $0 { return true } else { return false } } })

        try await alice.perform(key) { s throws(SessionError) in try s.bye() }
        try #require(await a.wait("ended", a.has(key, .terminated(.localHangup))))
        let clock = ContinuousClock(), deadline = clock.now + .seconds(5)
        while server.statistics.liveDialogs > 0 && clock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let st = server.statistics
        #expect(st.invites == 1 && st.confirmed == 1 && st.remoteHangups == 1 && st.liveDialogs == 0)
        #expect(server.runningTimers == 0)
    }

    @Test("a 2xx never ACKed is retransmitted on the session's timer, then the call ends with a BYE", .timeLimit(.minutes(1)))
    func unacknowledgedAnswerEndsWithBye() async throws {
        // Short timers: the 2xx goes again after T1, the ACK wait ends after 64·T1 (1.28 s).
        let fast = TransactionTimers(t1: .milliseconds(20), t2: .milliseconds(80), t4: .milliseconds(100))
        let server = try DialogServer(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: fast),
                                      ringing: false) { _ in UserAgentLoopbackTests.answer }
        defer { server.close() }
        let byes = Atomic<Int>(0)
        let box = Mutex<SIPEndpoint?>(nil)
        let client = try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: fast)) { e in
            guard case .request(let r) = e, r.message.method == .bye else { return }
            byes.add(1, ordering: .relaxed)
            box.withLock { $0 }?.respond(SIPMessage(responseTo: r.message, statusCode: 200), to: r.transaction)
        }
        box.withLock { $0 = client }
        defer { client.close() }
        let me = client.localAddresses[0].address
        let port = server.endpoint.localAddresses[0].address.port
        var invite = try SIPMessage(method: .invite, uri: try SIPURI("sip:switchboard@127.0.0.1:\(port)"))
        try invite.append(.via, "SIP/2.0/UDP 127.0.0.1:\(me.port);branch=\(TransactionLayer<SIPPeer>.newBranch());rport")
        try invite.append(.maxForwards, "70")
        try invite.append(.from, "<sip:alice@127.0.0.1>;tag=a1")
        try invite.append(.to, "<sip:switchboard@127.0.0.1>")
        try invite.append(.callID, "no-ack-\(UInt32.random(in: 1...UInt32.max))@127.0.0.1")
        try invite.append(.cseq, "1 INVITE")
        try invite.append(.contact, "<sip:alice@127.0.0.1:\(me.port)>")
        invite.setBody(UserAgentLoopbackTests.offer.bytes, contentType: UserAgentLoopbackTests.offer.contentType)
        let finals = Atomic<Int>(0)
        client.sendRequest(invite, to: SIPPeer(transport: .udp, address: try SocketAddress(ip: "127.0.0.1", port: port))) { e in
            if case .final(let r) = e, r.statusCode == 200 { finals.add(1, ordering: .relaxed) }
        }
        // Never ACKed: the session's timers retransmit the 2xx, then give up with a BYE.
        let clock = ContinuousClock(), deadline = clock.now + .seconds(10)
        while (server.statistics.ackTimeouts == 0 || byes.load(ordering: .relaxed) == 0) && clock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        let st = server.statistics
        #expect(st.invites == 1 && st.answered == 1 && st.confirmed == 0 && st.ackTimeouts == 1)
        #expect(byes.load(ordering: .relaxed) == 1)
        #expect(finals.load(ordering: .relaxed) >= 2)
        while server.statistics.liveDialogs > 0 && clock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(server.statistics.liveDialogs == 0)
        #expect(server.runningTimers == 0, "the 2xx's timers ended with the call")
    }
}
