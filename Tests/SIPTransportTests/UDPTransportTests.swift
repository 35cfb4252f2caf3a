import Glibc
import NetworkIO
import SIPMessage
import SIPTransport
import Synchronization
import Testing

@Suite("UDP transport (loopback)")
struct UDPTransportTests {
    static let loopback = try! SocketAddress("127.0.0.1:0")

    @Test func bindsAnEphemeralPortAndGrantsLargeBuffers() throws {
        let udp = try UDPTransport(bindingTo: Self.loopback) { _ in }
        defer { udp.close() }
        #expect(udp.localAddress.port != 0)
        #expect(udp.localAddress.ipString == "127.0.0.1")
        #expect(udp.kind == .udp)
        // Linux reports twice what it grants; at least the default 208 KiB is there.
        #expect(udp.receiveBufferSize >= 212_992)
        #expect(udp.sendBufferSize >= 212_992)
        // The same port cannot be bound twice (no SO_REUSEADDR by default).
        #expect(throws: TransportError.self) {
            try UDPTransport(bindingTo: udp.localAddress) { _ in }
        }
        do {
            _ = try UDPTransport(bindingTo: udp.localAddress) { _ in }
        } catch {
            guard case .system(let e) = error else { Issue.record("unexpected \(error)"); return }
            #expect(e.call == "bind")
            #expect(e.code == EADDRINUSE)
        }
    }

    @Test func roundTripBothWaysWithSourceAddresses() async throws {
        let a = EventRecorder(), b = EventRecorder()
        let ua = try UDPTransport(bindingTo: Self.loopback, handler: a.handler)
        let ub = try UDPTransport(bindingTo: Self.loopback, handler: b.handler)
        defer { ua.close(); ub.close() }

        let invite = Fixture.request("INVITE", callID: "rt@test", body: Fixture.sdp)
        try ua.send(invite, to: ub.localAddress)
        let atB = await b.waitForMessages(1)
        try #require(atB.count == 1)
        let request = atB[0]
        #expect(request.source == ua.localAddress)
        #expect(request.local == ub.localAddress)
        #expect(request.transport == .udp)
        #expect(request.connection == nil)
        #expect(request.message.method == .invite)
        #expect(request.message.callID == "rt@test")
        #expect(request.message.serialized() == invite)
        #expect(Array(request.message.body) == Array(Fixture.sdp.utf8))
        #expect(request.receivedAt <= MonotonicClock.now)

        try ub.send(Fixture.response(to: request.message), to: request.source)
        let atA = await a.waitForMessages(1)
        try #require(atA.count == 1)
        #expect(atA[0].source == ub.localAddress)
        #expect(atA[0].message.statusCode == 200)
        #expect(atA[0].message.callID == "rt@test")

        #expect(ua.statistics.datagramsSent == 1)
        #expect(ua.statistics.bytesSent == invite.count)
        #expect(ub.statistics.messagesReceived == 1)
        #expect(ub.statistics.bytesReceived == invite.count)
        #expect(ua.statistics.messagesReceived == 1)
    }

    @Test func burstOfAThousandDatagramsArrivesComplete() async throws {
        let receiver = EventRecorder()
        let rx = try UDPTransport(bindingTo: Self.loopback, handler: receiver.handler)
        let tx = try UDPTransport(bindingTo: Self.loopback) { _ in }
        defer { rx.close(); tx.close() }
        let total = 1_000
        let datagrams = (0..<total).map { i in (Fixture.request(callID: "burst-\(i)@test", cseq: i + 1), rx.localAddress) }
        // With the 4 MiB buffers asked for, the whole burst fits the receive queue; where the
        // kernel grants less (a low rmem_max), pace the sender so the test stays meaningful.
        let paced = rx.receiveBufferSize < 2 << 20
        let start = ContinuousClock.now
        for chunk in stride(from: 0, to: total, by: 100) {
            try tx.send(Array(datagrams[chunk..<min(chunk + 100, total)]))
            if paced { await eventually { rx.statistics.datagramsReceived >= chunk + 50 } }
        }
        let arrived = await eventually { rx.statistics.messagesReceived >= total }
        let elapsed = start.duration(to: .now)
        #expect(arrived, "received \(rx.statistics.messagesReceived) of \(total)")
        let ids = Set(receiver.messages.compactMap(\.message.callID))
        #expect(ids.count == total)
        #expect(tx.statistics.datagramsSent == total)
        #expect(rx.statistics.malformed == 0)
        if getenv("SWITCHBOARD_TRANSPORT_REPORT") != nil {
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            print("burst: \(total) datagrams in \(elapsed) = \(Int(Double(total) / seconds))/s, \(rx.statistics.receiveBatches) recvmmsg batches; SO_RCVBUF \(rx.receiveBufferSize), SO_SNDBUF \(rx.sendBufferSize) (paced: \(paced))")
        }
    }

    @Test func malformedDatagramIsCountedAndReported() async throws {
        let rec = EventRecorder()
        let rx = try UDPTransport(bindingTo: Self.loopback, handler: rec.handler)
        let tx = try UDPTransport(bindingTo: Self.loopback) { _ in }
        defer { rx.close(); tx.close() }
        let garbage = Array("HELLO WORLD\r\nnot a header\r\n\r\n".utf8)
        try tx.send(Array("\r\n\r\n".utf8), to: rx.localAddress)  // a NAT keep-alive: not malformed
        try tx.send(garbage, to: rx.localAddress)
        try tx.send(Fixture.request(), to: rx.localAddress)
        await rec.wait { $0.count >= 2 }
        let events = rec.all
        try #require(events.count == 2)
        guard case .malformed(let bytes, let source, let error) = events[0] else {
            Issue.record("expected a malformed event first, got \(events[0])")
            return
        }
        #expect(bytes == garbage)
        #expect(source == tx.localAddress)
        #expect(error.suggestedStatusCode == 400)
        guard case .message = events[1] else { Issue.record("expected a message"); return }
        let stats = rx.statistics
        #expect(stats.malformed == 1)
        #expect(stats.keepAlives == 1)
        #expect(stats.messagesReceived == 1)
        #expect(stats.datagramsReceived == 3)
    }

    @Test func oversizeAndWrongFamilyAreRefused() throws {
        let udp = try UDPTransport(bindingTo: Self.loopback) { _ in }
        defer { udp.close() }
        let target = try SocketAddress("127.0.0.1:9")
        #expect(udp.maxDatagramSize == 65_507)
        #expect(throws: TransportError.messageTooLarge(size: 65_508, limit: 65_507)) {
            try udp.send([UInt8](repeating: 0x41, count: 65_508), to: target)
        }
        // The largest datagram is accepted.
        try udp.send([UInt8](repeating: 0x41, count: 65_507), to: udp.localAddress)
        let v6 = try SocketAddress("[::1]:9")
        #expect(throws: TransportError.addressFamilyMismatch(local: udp.localAddress, remote: v6)) {
            try udp.send(Fixture.request(), to: v6)
        }
        // A batch is checked whole before anything is sent.
        #expect(throws: TransportError.messageTooLarge(size: 70_000, limit: 65_507)) {
            try udp.send([(Fixture.request(), target), ([UInt8](repeating: 0, count: 70_000), target)])
        }
        #expect(udp.statistics.datagramsSent == 1)
    }

    /// A socket that has sent to closed ports holds their ICMP errors (IP_RECVERR): each one
    /// fails one later `sendto` on Linux, and reading the error queue arms the next while more
    /// are queued. A datagram to a live peer sent meanwhile must still go out (it once failed
    /// now and then: `switchboard serve`, retransmitting 2xx answers to a test runner's closed
    /// sockets, dropped its answer to the next OPTIONS).
    @Test func sendsToALivePeerAmongICMPErrorsAllGoOut() async throws {
        let rec = EventRecorder()
        let live = try UDPTransport(bindingTo: Self.loopback, handler: rec.handler)
        let unreachable = Mutex(0)
        let tx = try UDPTransport(bindingTo: Self.loopback) { e in
            if case .unreachable = e { unreachable.withLock { $0 += 1 } }
        }
        defer { live.close(); tx.close() }
        // A port nobody listens on any more.
        let gone = try UDPTransport(bindingTo: Self.loopback) { _ in }
        let dead = gone.localAddress
        gone.close()
        let rounds = 400
        var failed: [String] = []
        for i in 0..<rounds {
            // Several ICMP errors queued before each send to the live peer.
            for _ in 0..<4 { try? tx.send(Fixture.request(callID: "dead-\(i)@test"), to: dead) }
            do { try tx.send(Fixture.request(callID: "live-\(i)@test"), to: live.localAddress) } catch { failed.append("\(i): \(error)") }
        }
        #expect(failed.count == 0, "\(failed.count) of \(rounds) sends to the live peer failed: \(failed.prefix(3))")
        let arrived = await eventually { live.statistics.messagesReceived >= rounds }
        #expect(arrived, "received \(live.statistics.messagesReceived) of \(rounds)")
        // The errors were there (the test is about them) and were reported.
        #expect(await eventually { unreachable.withLock { $0 } > 0 })
    }

    @Test func closeStopsPromptlyAndIsIdempotent() async throws {
        let rec = EventRecorder()
        let udp = try UDPTransport(bindingTo: Self.loopback, handler: rec.handler)
        let address = udp.localAddress
        let start = ContinuousClock.now
        udp.close()
        let elapsed = start.duration(to: .now)
        // A bound against waiting out a receive timeout, loose enough for a loaded machine.
        #expect(elapsed < .seconds(1), "close took \(elapsed)")
        #expect(udp.isClosed)
        udp.close()
        #expect(throws: TransportError.transportClosed) { try udp.send(Fixture.request(), to: address) }
        // The port is free again.
        let again = try UDPTransport(bindingTo: address) { _ in }
        #expect(again.localAddress == address)
        again.close()
    }

    @Test func closeFromTheHandlerDoesNotDeadlock() async throws {
        let box = TransportBox()
        let udp = try UDPTransport(bindingTo: Self.loopback) { _ in box.transport?.close() }
        box.transport = udp
        let tx = try UDPTransport(bindingTo: Self.loopback) { _ in }
        defer { tx.close() }
        try tx.send(Fixture.request(), to: udp.localAddress)
        #expect(await eventually { udp.isClosed })
        udp.close()
        box.transport = nil
    }

    @Test(.enabled(if: ipv6LoopbackAvailable, "IPv6 loopback (::1) cannot be bound here: IPv6 UDP test skipped"))
    func ipv6RoundTrip() async throws {
        let a = EventRecorder(), b = EventRecorder()
        let ua = try UDPTransport(bindingTo: try SocketAddress("[::1]:0"), handler: a.handler)
        let ub = try UDPTransport(bindingTo: try SocketAddress("[::1]:0"), handler: b.handler)
        defer { ua.close(); ub.close() }
        #expect(ua.localAddress.isIPv6 && ua.localAddress.port != 0)
        #expect(ua.maxDatagramSize == 65_527)
        try ua.send(Fixture.request(host: "[::1]"), to: ub.localAddress)
        let got = await b.waitForMessages(1)
        try #require(got.count == 1)
        #expect(got[0].source == ua.localAddress)
        #expect(got[0].source.description.hasPrefix("[::1]:"))
        try ub.send(Fixture.response(to: got[0].message), to: got[0].source)
        #expect(await a.waitForMessages(1).count == 1)
    }
}

/// Lets a handler reach the transport it belongs to.
final class TransportBox: Sendable {
    private let value = Mutex<UDPTransport?>(nil)
    var transport: UDPTransport? {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }
}
