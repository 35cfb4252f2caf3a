import Synchronization
import Testing
import SIPMessage
import SIPTransaction
import SIPTransport
@testable import SIPRuntime
import NetworkIO

@Suite("Runtime: invalid requests and large requests")
struct ValidationAndSizeTests {
    /// Sends raw bytes from a plain UDP socket and returns the first response.
    func exchange(_ text: String, with endpoint: SIPEndpoint) async throws -> SIPMessage? {
        let got = Mutex<SIPMessage?>(nil)
        let sender = try UDPTransport(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0)) { e in
            if case .message(let m) = e { got.withLock { $0 = m.message } }
        }
        defer { sender.close() }
        try sender.send(Array(text.utf8), to: endpoint.localAddress(.udp)!.address)
        let clock = ContinuousClock(), deadline = clock.now + .seconds(2)
        while got.withLock({ $0 }) == nil && clock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        return got.withLock { $0 }
    }

    static let base = "Via: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bKbad;rport\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:x@127.0.0.1>\r\nCall-ID: bad-1\r\n"

    @Test(.timeLimit(.minutes(1)))
    func invalidRequestsGetStatelessErrors() async throws {
        let delivered = Mutex(0)
        let endpoint = try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { e in
            if case .request = e { delivered.withLock { $0 += 1 } }
        }
        defer { endpoint.close() }
        let mismatch = try #require(try await exchange("OPTIONS sip:x@127.0.0.1 SIP/2.0\r\n" + Self.base + "CSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n", with: endpoint))
        #expect(mismatch.statusCode == 400)
        #expect(mismatch[.warning]?.contains("cseqMethodMismatch") == true)
        #expect(mismatch.topViaBranch == "z9hG4bKbad")
        let version = try #require(try await exchange("OPTIONS sip:x@127.0.0.1 SIP/3.0\r\n" + Self.base + "CSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n", with: endpoint))
        #expect(version.statusCode == 505)
        #expect(delivered.withLock { $0 } == 0)
        #expect(endpoint.statistics.rejected == 2)
    }

    /// Sends `text` from a plain UDP socket and collects every response for `window`.
    func responses(to text: String, from endpoint: SIPEndpoint, for window: Duration) async throws -> [SIPMessage] {
        let got = Mutex<[SIPMessage]>([])
        let sender = try UDPTransport(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0)) { e in
            if case .message(let m) = e { got.withLock { $0.append(m.message) } }
        }
        defer { sender.close() }
        try sender.send(Array(text.utf8), to: endpoint.localAddress(.udp)!.address)
        try await Task.sleep(for: window)
        return got.withLock { $0 }
    }

    static func invite(_ callID: String) -> String {
        "INVITE sip:x@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK\(callID);rport\r\n"
            + "From: <sip:a@b>;tag=1\r\nTo: <sip:x@127.0.0.1>\r\nCall-ID: \(callID)\r\nCSeq: 1 INVITE\r\nMax-Forwards: 70\r\n"
            + "Contact: <sip:a@127.0.0.1:5999>\r\nContent-Length: 0\r\n\r\n"
    }

    /// RFC 3261 §17.2.1: an INVITE the TU leaves unanswered gets 100 Trying from the
    /// transaction after 200 ms; one the TU answers while it handles the request gets only the
    /// answer (the endpoint starts the Trying timer after the TU has seen the request, and only
    /// if it has not answered).
    @Test(.timeLimit(.minutes(1)))
    func tryingOnlyForAnInviteLeftUnanswered() async throws {
        let answerAtOnce = Mutex(false)
        let box = Mutex<SIPEndpoint?>(nil)
        let endpoint = try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { e in
            guard case .request(let r) = e, answerAtOnce.withLock({ $0 }), let ep = box.withLock({ $0 }) else { return }
            ep.respond(SIPMessage(responseTo: r.message, statusCode: 486, toTag: "busy"), to: r.transaction)
        }
        box.withLock { $0 = endpoint }
        defer { endpoint.close() }

        let left = try await responses(to: Self.invite("trying-left"), from: endpoint, for: .milliseconds(600))
        #expect(left.map(\.statusCode) == [100])

        // The 486 is retransmitted (Timer G: nobody ACKs it here); no 100 comes at any time.
        answerAtOnce.withLock { $0 = true }
        let answered = try await responses(to: Self.invite("trying-answered"), from: endpoint, for: .milliseconds(600))
        #expect(answered.first?.statusCode == 486)
        #expect(!answered.contains { $0.statusCode == 100 })
    }

    @Test(.timeLimit(.minutes(1)))
    func largeRequestsMoveFromUDPToTCP() async throws {
        let received = Mutex<[(SIPMessage, TransportKind)]>([])
        let any = try SocketAddress(ip: "127.0.0.1", port: 0)
        let uas = try SIPEndpoint(configuration: .init(listen: [.udp(any), .tcp(any)])) { e in
            if case .request(let r) = e { received.withLock { $0.append((r.message, r.peer.transport)) } }
        }
        defer { uas.close() }
        let uac = try SIPEndpoint(configuration: .init(listen: [.udp(any), .tcp(any)])) { _ in }
        defer { uac.close() }
        // The UAS's UDP and TCP listeners have different ports; the UAC targets the TCP port
        // number over "UDP", as a Request-URI without transport would: the size moves it.
        let target = SIPPeer(transport: .udp, address: uas.localAddress(.tcp)!.address)
        var m = try SIPMessage(method: .message, requestURI: "sip:x@127.0.0.1")
        try m.append(.via, "SIP/2.0/UDP 127.0.0.1:\(uac.localAddress(.udp)!.address.port);branch=\(TransactionLayer<SIPPeer>.newBranch())")
        try m.append(.from, "<sip:a@127.0.0.1>;tag=big")
        try m.append(.to, "<sip:x@127.0.0.1>")
        try m.append(.callID, "big-1")
        try m.append(.cseq, CSeq(1, .message))
        m.setBody(Array(String(repeating: "x", count: 3000).utf8), contentType: try MediaType("text/plain"))
        uac.sendRequest(m, to: target) { _ in }
        let clock = ContinuousClock(), deadline = clock.now + .seconds(2)
        while received.withLock({ $0.isEmpty }) && clock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        let (req, kind) = try #require(received.withLock { $0.first })
        #expect(kind == .tcp)
        #expect(try req.topVia().transport == "TCP")
        #expect(req.body.count == 3000)
        #expect(uac.statistics.switchedToTCP == 1)
    }
}
