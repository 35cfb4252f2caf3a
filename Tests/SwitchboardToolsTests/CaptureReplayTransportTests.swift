import Foundation
import Testing
import Synchronization
import NetworkIO
import SIPMessage
import SIPRuntime
import SIPTransport
import Switchboard
import SwitchboardTestSupport
import CaptureReplay
@testable import SwitchboardTools
@testable import CaptureAnalysis

/// `switchboard capture FILE --replay … --to URI` over TCP and TLS: a call captured between two of
/// our phones (over UDP) is replayed from either side against a phone listening on TCP or TLS,
/// one connection carrying the call, nothing retransmitted; a busy server's 486 is named.
@Suite("capture: replay over TCP and TLS", .serialized,
       .requires("the openssl tool", { FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") }))
struct CaptureReplayTransportTests {
    /// A phone listening on `kind` (TLS with the test PKI's certificate, trusting its CA).
    static func phone(_ user: String, over kind: TransportKind, pki: TestPKI, autoAnswer: Duration? = nil) throws -> Phone {
        let any = try SocketAddress(ip: "127.0.0.1", port: 0)
        var endpoint = SIPEndpoint.Configuration(listen: [kind == .tls ? .tls(any) : .tcp(any)])
        endpoint.tls = TLSConfiguration(certificateChain: .file(pki.cert), privateKey: .file(pki.key), trustedCertificates: [.file(pki.ca)])
        var c = SIPUserAgent.Configuration(endpoint: endpoint, identity: try SIPURI("sip:\(user)@127.0.0.1"), transport: kind)
        c.sessionTimer = nil
        return try Phone(name: user, configuration: c, autoAnswer: autoAnswer, metrics: nil)
    }

    /// Whether a TCP socket listens on 127.0.0.1:`port` (/proc/net/tcp, state 0A), without connecting.
    static func tcpListening(_ port: UInt16) -> Bool {
        guard let table = readBytes("/proc/net/tcp").map({ String(decoding: $0, as: UTF8.self) }) else { return false }
        let hex = String(port, radix: 16, uppercase: true)
        let entry = "0100007F:" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + " 00000000:0000 0A"
        return table.contains(entry)
    }

    static func options(_ target: String, pki: TestPKI) throws -> CaptureReplayOptions {
        var o = CaptureReplayOptions(target: try SIPURI(target))
        o.linger = .milliseconds(300)
        o.requestTimeout = .seconds(3)
        o.tls = TLSConfiguration(certificateChain: .file(pki.cert), privateKey: .file(pki.key), trustedCertificates: [.file(pki.ca)])
        return o
    }

    /// The caller's side against a phone on TCP or TLS (the transport from the URI): the answers
    /// of the capture, four messages sent on one connection (no retransmission).
    @Test(.timeLimit(.minutes(1)), arguments: [TransportKind.tcp, .tls])
    func theCallerReplaysOverAConnection(kind: TransportKind) async throws {
        let pki = try TestPKI()
        defer { pki.remove() }
        let path = try await CaptureSideTests.capturedCall()
        defer { unlink(path) }
        let call = try CapturedCall.load(path: path)
        let bob = try Self.phone("bob", over: kind, pki: pki, autoAnswer: .milliseconds(200))
        defer { bob.close() }
        let port = CaptureSideTests.port(bob)
        let r = try await CaptureReplay.run(call, party: .caller, options: Self.options("sip:bob@127.0.0.1:\(port);transport=\(kind.rawValue)", pki: pki))
        #expect(r.transport == kind)
        #expect(r.differences.isEmpty, "\(r.differences) \(r.steps)")
        #expect(r.steps.map(\.sent) == ["INVITE", "PRACK", "ACK", "BYE"], "\(r.steps)")
        #expect(r.steps.flatMap(\.live).sorted() == ["180 INVITE", "200 BYE", "200 INVITE", "200 PRACK"], "\(r.steps)")
        #expect(r.datagramsSent == 4, "\(r.datagramsSent) messages sent")
        let stats = kind == .tls ? bob.agent.endpoint.tlsStatistics.first?.connections : bob.agent.endpoint.tcpStatistics.first
        #expect(stats?.connectionsAccepted == 1, "\(String(describing: stats))")
    }

    /// The callee's side waits on a TCP or TLS listener; our phone calls it there and the replay
    /// answers on the phone's connection as the capture did: no difference.
    @Test(.timeLimit(.minutes(1)), arguments: [TransportKind.tcp, .tls])
    func theCalleeIsCalledOverAConnection(kind: TransportKind) async throws {
        let pki = try TestPKI()
        defer { pki.remove() }
        let path = try await CaptureSideTests.capturedCall()
        defer { unlink(path) }
        let call = try CapturedCall.load(path: path)
        let port = freeTCPPort()
        var o = try Self.options("sip:alice@127.0.0.1", pki: pki)
        o.transport = kind
        o.local = try SocketAddress(ip: "127.0.0.1", port: port)
        o.callWait = .seconds(10)
        let options = o
        let replay = Task { try await CaptureReplay.run(call, party: .callee, options: options) }
        let bound = ContinuousClock.now + .seconds(5)
        while !Self.tcpListening(port), ContinuousClock.now < bound { try await Task.sleep(for: .milliseconds(10)) }
        let alice = try Self.phone("alice", over: kind, pki: pki)
        defer { alice.close() }
        let out = await alice.dial(try SIPURI("sip:bob@127.0.0.1:\(port);transport=\(kind.rawValue)"))
        try await out.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        try await Task.sleep(for: .milliseconds(300))
        await out.hangUp(timeout: .seconds(5))
        let r = try await replay.value
        #expect(r.transport == kind && r.local.port == port)
        #expect(r.differences.isEmpty, "\(r.differences) \(r.steps)")
        #expect(r.steps.allSatisfy { $0.wasSent }, "\(r.steps)")
        #expect(r.steps.map(\.sent).last == "200 BYE", "\(r.steps)")
        #expect(r.steps.flatMap(\.live).contains("ACK"), "\(r.steps)")
        // The 2xx is not retransmitted over a reliable transport: one message per step.
        #expect(r.datagramsSent == r.steps.count, "\(r.datagramsSent) messages for \(r.steps.count) steps")
    }

    /// A device that reads the INVITE and never answers: over TCP it is sent once (over UDP the
    /// same replay retransmits it, timer A); a refused connection fails the replay at once
    /// instead of after 64·T1; the callee's side over TLS without a certificate is refused.
    @Test(.timeLimit(.minutes(1)))
    func nothingIsRetransmittedOverTCPAndARefusedConnectionFailsAtOnce() async throws {
        let pki = try TestPKI()
        defer { pki.remove() }
        let path = try await CaptureSideTests.capturedCall()
        defer { unlink(path) }
        let call = try CapturedCall.load(path: path)
        let any = try SocketAddress(ip: "127.0.0.1", port: 0)
        let tcpCount = ReplayMessageCounter(), udpCount = ReplayMessageCounter()
        let silentTCP = try TCPTransport(listeningOn: any) { if case .message = $0 { tcpCount.add() } }
        defer { silentTCP.close() }
        let silentUDP = try UDPTransport(bindingTo: any) { if case .message = $0 { udpCount.add() } }
        defer { silentUDP.close() }
        func replay(_ target: String) async throws -> CaptureReplay.Report {
            var o = try Self.options(target, pki: pki)
            o.t1 = .milliseconds(20)
            o.requestTimeout = .milliseconds(200)
            o.linger = .milliseconds(100)
            return try await CaptureReplay.run(call, party: .caller, options: o)
        }
        let overTCP = try await replay("sip:bob@127.0.0.1:\(silentTCP.localAddress.port);transport=tcp")
        #expect(overTCP.datagramsSent == 1 && tcpCount.value == 1, "\(overTCP.datagramsSent) sent, \(tcpCount.value) received")
        #expect(overTCP.differences.contains { $0.kind == .missing && $0.captured == "200 INVITE" }, "\(overTCP.differences)")
        let overUDP = try await replay("sip:bob@127.0.0.1:\(silentUDP.localAddress.port)")
        #expect(overUDP.datagramsSent >= 5 && udpCount.value >= 5, "\(overUDP.datagramsSent) sent, \(udpCount.value) received")

        // Nobody listens: the connection is refused and the INVITE fails as a transport error,
        // long before 64·T1 (32 s).
        var o = try Self.options("sip:bob@127.0.0.1:\(freeTCPPort());transport=tcp", pki: pki)
        o.linger = .milliseconds(100)
        let start = ContinuousClock.now
        let refused = try await CaptureReplay.run(call, party: .caller, options: o)
        #expect(ContinuousClock.now - start < .seconds(5))
        #expect(refused.differences.contains { $0.kind == .missing && $0.captured == "200 INVITE" }, "\(refused.differences)")

        var noCertificate = CaptureReplayOptions(target: try SIPURI("sips:alice@127.0.0.1"))
        noCertificate.local = try SocketAddress(ip: "127.0.0.1", port: freeTCPPort())
        await #expect(throws: CaptureReplayError.self) { try await CaptureReplay.run(call, party: .callee, options: noCertificate) }
        var sctp = CaptureReplayOptions(target: try SIPURI("sip:bob@127.0.0.1;transport=sctp"))
        sctp.linger = .zero
        await #expect(throws: CaptureReplayError.self) { try await CaptureReplay.run(call, party: .caller, options: sctp) }
    }

    /// Through the command: a busy server on TCP answers 486 where the capture has 200.
    @Test(.timeLimit(.minutes(1)))
    func aBusyServerOverTCPIsADifference() async throws {
        let path = try await CaptureSideTests.capturedCall()
        defer { unlink(path) }
        let busy = try ServeCommand(listen: [try ListenSpec.parse("tcp:127.0.0.1:0")], answer: 486)
        defer { busy.endpoint.close() }
        let port = try #require(busy.endpoint.localAddress(.tcp)).address.port
        let r = await CaptureSideCommand.replay(path: path, call: "1", party: "caller", target: "sip:bob@127.0.0.1:\(port)", json: false) {
            $0.transport = .tcp
            $0.linger = .milliseconds(300)
            $0.requestTimeout = .seconds(2)
        }
        #expect(r.exitCode == 1, "\(r.text)")
        #expect(r.text.contains("over TCP") && r.text.contains("messages sent"), "\(r.text)")
        #expect(r.text.contains("the device answered 486 INVITE where the capture has 200 INVITE"), "\(r.text)")
        #expect(busy.server.statistics.invites == 1, "\(busy.server.statistics)")
        let json = await CaptureSideCommand.replay(path: path, call: "1", party: "caller", target: "sip:bob@127.0.0.1:\(port);transport=tcp", json: true) {
            $0.linger = .milliseconds(100)
            $0.requestTimeout = .seconds(1)
        }
        #expect(json.text.contains("\"transport\":\"TCP\"") || json.text.contains("\"transport\": \"TCP\""), "\(json.text)")
    }
}

/// A count shared with a transport's handler.
final class ReplayMessageCounter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
