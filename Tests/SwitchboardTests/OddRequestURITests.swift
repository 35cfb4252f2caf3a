import Testing
import Synchronization
import SIPMessage
import SIPTransaction
import SIPTransport
import SIPDialog
import SIPRuntime
import NetworkIO
import Switchboard

/// Be tolerant in what we accept: an in-dialog request whose Request-URI host is not a valid host
/// (deployed equipment sends such things) is matched by Call-ID and tags and handled; the same
/// Request-URI outside a dialog gets a 400 naming the rule, never silence.
@Suite("In-dialog requests with an odd Request-URI")
struct OddRequestURITests {
    @Test("validate(): tolerated with a To tag, refused without")
    func validation() throws {
        func request(toTag: String?) throws -> SIPMessage {
            let text = "BYE sip:alice@bad_host!:5060 SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.2;branch=z9hG4bKodd\r\n"
                + "From: <sip:bob@b.example>;tag=b1\r\nTo: <sip:alice@a.example>\(toTag.map { ";tag=\($0)" } ?? "")\r\n"
                + "Call-ID: odd@b\r\nCSeq: 5 BYE\r\nContent-Length: 0\r\n\r\n"
            return try SIPMessage(bytes: Array(text.utf8))
        }
        #expect(throws: Never.self) { try request(toTag: "a1").validate() }
        #expect(throws: SIPParseError.self) { try request(toTag: nil).validate() }
    }

    @Test("a BYE with a malformed host in its Request-URI ends the call; outside a dialog it gets 400")
    func byeWithOddHost() async throws {
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]),
                                           identity: try SIPURI("sip:alice@127.0.0.1"))
        c.sessionTimer = nil
        let alice = try Phone(name: "alice", configuration: c, autoAnswer: .milliseconds(10))
        defer { alice.close() }
        let alicePort = alice.agent.endpoint.localAddresses[0].address.port
        // Bob is a raw socket: he calls, answers the 200 with an ACK, then sends the odd BYE.
        let got = Mutex<[SIPMessage]>([])
        let bob = try UDPTransport(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0)) { e in
            if case .message(let m) = e { got.withLock { $0.append(m.message) } }
        }
        defer { bob.close() }
        let bobPort = bob.localAddress.port
        let to = try SocketAddress(ip: "127.0.0.1", port: alicePort)
        func send(_ text: String) throws { try bob.send(Array(text.utf8), to: to) }
        func head(_ method: String, _ uri: String, cseq: Int, toTag: String?, branch: String) -> String {
            "\(method) \(uri) SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:\(bobPort);branch=z9hG4bK\(branch);rport\r\nMax-Forwards: 70\r\n"
                + "From: <sip:bob@127.0.0.1>;tag=bobtag\r\nTo: <sip:alice@127.0.0.1>\(toTag.map { ";tag=\($0)" } ?? "")\r\n"
                + "Call-ID: odd-uri@127.0.0.1\r\nCSeq: \(cseq) \(method)\r\nContact: <sip:bob@127.0.0.1:\(bobPort)>\r\n"
        }
        try send(head("INVITE", "sip:alice@127.0.0.1:\(alicePort)", cseq: 1, toTag: nil, branch: "inv1") + "Content-Length: 0\r\n\r\n")
        let clock = ContinuousClock(), deadline = clock.now + .seconds(5)
        var ok: SIPMessage?
        while clock.now < deadline, ok == nil {
            ok = got.withLock { $0.first { $0.statusCode == 200 && (try? $0.cseq().method) == .invite } }
            try await Task.sleep(for: .milliseconds(10))
        }
        let answer = try #require(ok)
        let tag = try #require(answer.toTag)
        try send(head("ACK", "sip:alice@127.0.0.1:\(alicePort)", cseq: 1, toTag: tag, branch: "ack1") + "Content-Length: 0\r\n\r\n")
        let key = try #require(alice.incomingCalls.first)
        #expect(await alice.wait(key, timeout: .seconds(5)) { $0 == .confirmed })
        try send(head("BYE", "sip:alice@bad_host!:\(alicePort)", cseq: 2, toTag: tag, branch: "bye1") + "Content-Length: 0\r\n\r\n")
        #expect(await alice.wait(key, timeout: .seconds(5)) { $0 == .terminated(.remoteHangup) })
        #expect(await alice.wait(timeout: .seconds(5)) { got.withLock { $0.contains { $0.statusCode == 200 && (try? $0.cseq().method) == .bye } } })
        // The same Request-URI outside any dialog: 400 with a Warning naming the rule.
        try send(head("OPTIONS", "sip:alice@bad_host!:\(alicePort)", cseq: 1, toTag: nil, branch: "opt1").replacingOccurrences(of: "odd-uri@", with: "odd-options@")
                 + "Content-Length: 0\r\n\r\n")
        #expect(await alice.wait(timeout: .seconds(5)) { got.withLock { $0.contains { $0.statusCode == 400 && (try? $0.cseq().method) == .options } } })
        let warning = got.withLock { $0.first { $0.statusCode == 400 }?.values(.warning).first } ?? ""
        #expect(warning.contains("at byte"), "\(warning)")
    }
}
