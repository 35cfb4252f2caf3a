import SwitchboardTestSupport
import Glibc
import NetworkIO
import SIPMessage
import SIPTransport
import Testing

@Suite("TCP transport (loopback)")
struct TCPTransportTests {
    static let loopback = try! SocketAddress("127.0.0.1:0")

    static func server(_ rec: EventRecorder, _ configuration: TCPTransportConfiguration = .init()) throws -> TCPTransport {
        try TCPTransport(listeningOn: loopback, configuration: configuration, handler: rec.handler)
    }

    @Test func connectAcceptAndExchangeOverTheSameConnection() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try Self.server(s)
        let client = try Self.server(c)
        defer { server.close(); client.close() }
        #expect(server.localAddress.port != 0)

        let info = try client.connect(to: server.localAddress)
        #expect(info.direction == .outbound)
        #expect(info.remote == server.localAddress)
        #expect(await c.wait { _ in c.opened.count == 1 })
        #expect(await s.wait { _ in s.opened.count == 1 })
        let inbound = try #require(s.opened.first)
        #expect(inbound.direction == .inbound)
        #expect(inbound.remote == info.local)
        #expect(inbound.local == server.localAddress)
        #expect(inbound.transport == .tcp)

        let invite = Fixture.request("INVITE", callID: "tcp@test", transport: "TCP", body: Fixture.sdp)
        try client.send(invite, on: info.id)
        let got = await s.waitForMessages(1)
        try #require(got.count == 1)
        #expect(got[0].message.serialized() == invite)
        #expect(got[0].connection == inbound.id)
        #expect(got[0].source == info.local)
        #expect(got[0].transport == .tcp)

        try server.send(Fixture.response(to: got[0].message), on: try #require(got[0].connection))
        let back = await c.waitForMessages(1)
        try #require(back.count == 1)
        #expect(back[0].message.statusCode == 200)
        #expect(back[0].connection == info.id)
        #expect(server.statistics.connectionsAccepted == 1)
        #expect(client.statistics.connectionsEstablished == 1)
        #expect(server.connections.map(\.id) == [inbound.id])
    }

    @Test func messageWrittenOneByteAtATimeIsFramed() async throws {
        let s = EventRecorder()
        let server = try Self.server(s)
        defer { server.close() }
        let raw = try #require(RawTCPClient(connectingTo: server.localAddress))
        let message = Fixture.request("MESSAGE", callID: "bytes@test", transport: "TCP", body: "hello, one byte at a time")
        for byte in message { raw.write([byte]) }
        let got = await s.waitForMessages(1)
        try #require(got.count == 1)
        #expect(got[0].message.serialized() == message)
        #expect(got[0].source == raw.localAddress)
        #expect(server.statistics.bytesReceived == message.count)
    }

    @Test func twoMessagesInOneWrite() async throws {
        let s = EventRecorder()
        let server = try Self.server(s)
        defer { server.close() }
        let raw = try #require(RawTCPClient(connectingTo: server.localAddress))
        let first = Fixture.request(callID: "one@test", transport: "TCP")
        let second = Fixture.request("INFO", callID: "two@test", cseq: 2, transport: "TCP", body: "x=1\r\n")
        raw.write(first + second)
        let got = await s.waitForMessages(2)
        try #require(got.count == 2)
        #expect(got[0].message.callID == "one@test")
        #expect(got[1].message.callID == "two@test")
        #expect(got[1].message.serialized() == second)
        #expect(got[0].connection == got[1].connection)
    }

    @Test func keepAlivePingIsAnsweredAndPongReported() async throws {
        let s = EventRecorder()
        let server = try Self.server(s)
        defer { server.close() }
        let raw = try #require(RawTCPClient(connectingTo: server.localAddress))
        raw.write("\r\n\r\n")
        #expect(raw.read() == Array("\r\n".utf8))
        raw.write("\r\n")
        #expect(await s.wait { $0.contains { if case .keepAlivePong = $0 { return true } else { return false } } })
        #expect(s.all.contains { if case .keepAlivePing = $0 { return true } else { return false } })
        #expect(server.statistics.keepAlivePingsAnswered == 1)
        #expect(server.statistics.keepAlivePongsReceived == 1)
        // The connection still carries messages afterwards.
        raw.write(Fixture.request(transport: "TCP"))
        #expect(await s.waitForMessages(1).count == 1)
    }

    @Test func ourPingGetsThePeersPong() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try Self.server(s)
        let client = try Self.server(c)
        defer { server.close(); client.close() }
        let info = try client.connect(to: server.localAddress)
        try client.sendKeepAlivePing(on: info.id)
        #expect(await c.wait { $0.contains { if case .keepAlivePong(info.id) = $0 { return true } else { return false } } })
    }

    @Test func framingGarbageClosesTheConnectionWithAnError() async throws {
        let s = EventRecorder()
        let server = try Self.server(s)
        defer { server.close() }
        let raw = try #require(RawTCPClient(connectingTo: server.localAddress))
        raw.write([0x01, 0x02] + Array("garbage\r\n\r\n".utf8))
        #expect(raw.seesEndOfStream())
        #expect(await s.wait { _ in s.closed.count == 1 })
        let (_, reason) = try #require(s.closed.first)
        guard case .failed(.framing(let error)) = reason else {
            Issue.record("expected a framing error, got \(reason)")
            return
        }
        #expect(error.rule == .garbage)
        #expect(server.statistics.framingErrors == 1)
        #expect(server.connections.isEmpty)
    }

    @Test func missingContentLengthIsAFramingError() async throws {
        let s = EventRecorder()
        let server = try Self.server(s)
        defer { server.close() }
        let raw = try #require(RawTCPClient(connectingTo: server.localAddress))
        raw.write("OPTIONS sip:a@b SIP/2.0\r\nVia: SIP/2.0/TCP h;branch=z9hG4bK1\r\nCall-ID: x\r\nCSeq: 1 OPTIONS\r\n\r\n")
        #expect(raw.seesEndOfStream())
        #expect(await s.wait { _ in s.closed.count == 1 })
        if case .failed(.framing(let e))? = s.closed.first?.1 { #expect(e.rule == .missingContentLength) } else { Issue.record("\(s.all)") }
    }

    @Test func idleConnectionsAreClosed() async throws {
        let s = EventRecorder()
        let server = try Self.server(s, TCPTransportConfiguration(idleTimeout: .milliseconds(150)))
        defer { server.close() }
        let start = ContinuousClock.now
        let raw = try #require(RawTCPClient(connectingTo: server.localAddress))
        #expect(raw.seesEndOfStream(timeout: .seconds(1)))
        let elapsed = start.duration(to: .now)
        #expect(elapsed >= .milliseconds(140), "closed after \(elapsed)")
        #expect(await s.wait { _ in s.closed.count == 1 })
        #expect(s.closed.first?.1 == .idleTimeout)
        #expect(server.statistics.idleTimeouts == 1)
    }

    @Test func activityDefersTheIdleTimeout() async throws {
        let s = EventRecorder()
        let server = try Self.server(s, TCPTransportConfiguration(idleTimeout: .milliseconds(600)))
        defer { server.close() }
        let raw = try #require(RawTCPClient(connectingTo: server.localAddress))
        // Pongs every 50 ms for 1.2 s keep it open past the 600 ms timeout. Under heavy load a
        // sleep can overshoot, so the largest real gap between writes is measured: the
        // connection must survive whenever every gap stayed below the timeout.
        let clock = ContinuousClock()
        let start = clock.now
        var last = clock.now
        var largestGap = Duration.zero
        while start.duration(to: clock.now) < .milliseconds(1200) {
            try await Task.sleep(for: .milliseconds(50))
            raw.write("\r\n")
            let now = clock.now
            largestGap = max(largestGap, last.duration(to: now))
            last = now
        }
        if largestGap < .milliseconds(500) {
            #expect(s.closed.isEmpty, "closed although the largest gap between writes was \(largestGap)")
        }
        #expect(raw.seesEndOfStream(timeout: .seconds(2)))
        #expect(await s.wait { _ in s.closed.count == 1 })
        #expect(s.closed.first?.1 == .idleTimeout)
    }

    @Test func connectionLimitIsEnforced() async throws {
        let s = EventRecorder()
        let server = try Self.server(s, TCPTransportConfiguration(maxConnections: 2))
        defer { server.close() }
        let first = try #require(RawTCPClient(connectingTo: server.localAddress))
        let second = try #require(RawTCPClient(connectingTo: server.localAddress))
        #expect(await s.wait { _ in s.opened.count == 2 })
        let third = try #require(RawTCPClient(connectingTo: server.localAddress))
        #expect(third.seesEndOfStream())
        #expect(server.statistics.connectionsRejected == 1)
        #expect(server.statistics.currentConnections == 2)
        // The first two still work.
        first.write(Fixture.request(callID: "first@test", transport: "TCP"))
        second.write(Fixture.request(callID: "second@test", transport: "TCP"))
        #expect(await s.waitForMessages(2).count == 2)
        // Outbound connections count too.
        let elsewhere = try TCPTransport(listeningOn: Self.loopback) { _ in }
        defer { elsewhere.close() }
        #expect(throws: TransportError.connectionLimitReached(limit: 2)) { try server.connect(to: elsewhere.localAddress) }
        #expect(throws: TransportError.connectionLimitReached(limit: 2)) { try server.send(Fixture.request(), to: elsewhere.localAddress) }
    }

    @Test func sendToAddressReusesTheConnection() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try Self.server(s)
        let client = try Self.server(c)
        defer { server.close(); client.close() }
        // The first send connects in the background; the bytes wait for the connection.
        let id1 = try client.send(Fixture.request(callID: "reuse-1@test", transport: "TCP"), to: server.localAddress)
        let id2 = try client.send(Fixture.request(callID: "reuse-2@test", cseq: 2, transport: "TCP"), to: server.localAddress)
        #expect(id1 == id2)
        #expect(client.connection(to: server.localAddress) == id1)
        let got = await s.waitForMessages(2)
        try #require(got.count == 2)
        #expect(got.map(\.message.callID) == ["reuse-1@test", "reuse-2@test"])
        let id3 = try client.send(Fixture.request(callID: "reuse-3@test", cseq: 3, transport: "TCP"), to: server.localAddress)
        #expect(id3 == id1)
        #expect(await s.waitForMessages(3).count == 3)
        #expect(server.statistics.connectionsAccepted == 1)
        #expect(client.statistics.connectionsEstablished == 1)
        #expect(c.opened.map(\.id) == [id1])
        // The server can answer a request over the inbound connection by address too.
        let inbound = try #require(got.first)
        #expect(try server.send(Fixture.response(to: inbound.message), to: inbound.source) == inbound.connection)
        #expect(await c.waitForMessages(1).count == 1)
    }

    @Test func failedBackgroundConnectIsReported() async throws {
        let c = EventRecorder()
        let client = try Self.server(c)
        defer { client.close() }
        // A port nobody listens on: bind a listener, note its port, close it.
        let gone = try TCPTransport(listeningOn: Self.loopback) { _ in }
        let target = gone.localAddress
        gone.close()
        #expect(throws: TransportError.self) { try client.connect(to: target) }
        let id = try client.send(Fixture.request(), to: target)
        #expect(await c.wait { _ in c.closed.count == 1 })
        let (info, reason) = try #require(c.closed.first)
        #expect(info.id == id)
        guard case .failed(.system(let e)) = reason else { Issue.record("\(reason)"); return }
        #expect(e.code == ECONNREFUSED)
        #expect(client.statistics.connectFailures == 2)
        #expect(throws: TransportError.connectionClosed(id)) { try client.send(Fixture.request(), on: id) }
    }

    @Test func closingTheTransportClosesEveryConnection() async throws {
        let s = EventRecorder()
        let server = try Self.server(s)
        let raws = (0..<3).compactMap { _ in RawTCPClient(connectingTo: server.localAddress) }
        #expect(await s.wait { _ in s.opened.count == 3 })
        let start = ContinuousClock.now
        server.close()
        // A bound against waiting out a poll timeout, loose enough for a loaded machine.
        #expect(start.duration(to: .now) < .seconds(1))
        #expect(s.closed.count == 3)
        #expect(s.closed.allSatisfy { $0.1 == .transportClosed })
        for raw in raws { #expect(raw.seesEndOfStream()) }
        #expect(throws: TransportError.transportClosed) { try server.send([], to: server.localAddress) }
        server.close()
        #expect(RawTCPClient(connectingTo: server.localAddress) == nil)
    }

    @Test func closeOneConnectionLocally() async throws {
        let s = EventRecorder()
        let server = try Self.server(s)
        defer { server.close() }
        let raw = try #require(RawTCPClient(connectingTo: server.localAddress))
        #expect(await s.wait { _ in s.opened.count == 1 })
        let id = try #require(s.opened.first?.id)
        server.close(connection: id)
        #expect(raw.seesEndOfStream())
        #expect(await s.wait { _ in s.closed.count == 1 })
        #expect(s.closed.first?.1 == .closedLocally)
        #expect(throws: TransportError.connectionClosed(id)) { try server.send([0x41], on: id) }
    }

    @Test func peerCloseIsReported() async throws {
        let s = EventRecorder()
        let server = try Self.server(s)
        defer { server.close() }
        var raw = RawTCPClient(connectingTo: server.localAddress)
        #expect(raw != nil)
        #expect(await s.wait { _ in s.opened.count == 1 })
        raw = nil
        #expect(await s.wait { _ in s.closed.count == 1 })
        #expect(s.closed.first?.1 == .remoteClosed)
    }

    @Test func largeMessageSurvivesPartialWrites() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try Self.server(s)
        let client = try Self.server(c)
        defer { server.close(); client.close() }
        let body = String(repeating: "a=x-filler:0123456789abcdef0123456789abcdef\r\n", count: 1_300)  // ~59 KB
        let messages = (0..<20).map { Fixture.request("MESSAGE", callID: "big-\($0)@test", transport: "TCP", body: body) }
        let id = try client.connect(to: server.localAddress).id
        for m in messages { try client.send(m, on: id) }
        let got = await s.waitForMessages(20)
        #expect(got.count == 20)
        #expect(got.map { $0.message.serialized() } == messages)
    }

    @Test func aPeerThatDoesNotReadFillsTheQueueAndSendsAreRefused() async throws {
        let s = EventRecorder()
        let server = try Self.server(s, TCPTransportConfiguration(maxQueuedBytesPerConnection: 256 * 1024))
        defer { server.close() }
        let raw = try #require(RawTCPClient(connectingTo: server.localAddress))
        #expect(await s.wait { _ in s.opened.count == 1 })
        let id = try #require(s.opened.first?.id)
        let big = Fixture.request("MESSAGE", transport: "TCP", body: String(repeating: "x", count: 50_000))
        var refused: TransportError?
        // The kernel buffers a few MiB on loopback; then our queue fills.
        for _ in 0..<2_000 {
            do { try server.send(big, on: id) } catch { refused = error; break }
        }
        #expect(refused == .sendQueueFull(id, limit: 256 * 1024))
        #expect(server.statistics.sendErrors == 1)
        // The connection stays usable: once the peer reads, the queue drains.
        var drained = 0
        let deadline = ContinuousClock.now + .milliseconds(1500)
        while ContinuousClock.now < deadline, let bytes = raw.read(timeout: .milliseconds(200)), !bytes.isEmpty { drained += bytes.count }
        #expect(drained > 256 * 1024)
        #expect(await eventually { (try? server.send(big, on: id)) != nil })
    }

    @Test(.enabled(if: ipv6LoopbackAvailable, "IPv6 loopback (::1) cannot be bound here: IPv6 TCP test skipped"))
    func ipv6() async throws {
        let s = EventRecorder(), c = EventRecorder()
        let server = try TCPTransport(listeningOn: try SocketAddress("[::1]:0"), handler: s.handler)
        let client = try TCPTransport(listeningOn: try SocketAddress("[::1]:0"), handler: c.handler)
        defer { server.close(); client.close() }
        #expect(server.localAddress.isIPv6)
        let id = try client.send(Fixture.request(transport: "TCP", host: "[::1]"), to: server.localAddress)
        let got = await s.waitForMessages(1)
        try #require(got.count == 1)
        #expect(got[0].source.isIPv6)
        #expect(got[0].source.ipString == "::1")
        try server.send(Fixture.response(to: got[0].message), on: try #require(got[0].connection))
        let back = await c.waitForMessages(1)
        #expect(back.first?.connection == id)
        // A raw IPv6 client sees keep-alive answers too.
        let raw = try #require(RawTCPClient(connectingTo: server.localAddress))
        raw.write("\r\n\r\n")
        #expect(raw.read() == Array("\r\n".utf8))
    }
}
