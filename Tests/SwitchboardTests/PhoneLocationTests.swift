import Testing
import Glibc
import Synchronization
import Logging
import SIPMessage
import SIPTransaction
import SIPTransport
import SIPDialog
import SIPRuntime
import SIPResolver
import NetworkIO
import Switchboard
import SwitchboardTestSupport

/// RFC 3263 inside the phone: a call to a domain name is located through DNS (a server this
/// test starts on 127.0.0.1) and fails over to the next SRV target when the first does not
/// answer (RFC 3263 §4.3).
@Suite("Phone: RFC 3263 location and failover")
struct PhoneLocationTests {
    /// Short transaction timers, so the dead target's Timer B (64·T1) fires after 1.28 s.
    static let fast = TransactionTimers(t1: .milliseconds(20), t2: .milliseconds(160), t4: .milliseconds(200))

    @Test("a call to sip:alice@example.test reaches the second SRV target when the first is dead: silent (timeout) or closed (ICMP, at once)",
          arguments: [false, true])
    func failsOverToTheSecondTarget(closed: Bool) async throws {
        let callee = try Phone(name: "alice", configuration: .init(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]),
                                                                   identity: try SIPURI("sip:alice@example.test")),
                               autoAnswer: .milliseconds(10))
        defer { callee.close() }
        let live = callee.agent.endpoint.localAddresses[0].address.port
        // Silent: a bound socket that never answers (Timer B); closed: nobody bound (ICMP port
        // unreachable, a transport error at once).
        let silent = closed ? nil : try UDPTransport(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0)) { _ in }
        defer { silent?.close() }
        let dead = silent?.localAddress.port ?? freeUDPPort()
        let dns = try LocalDNSServer(zone: [
            Z.srv("_sip._udp.example.test", 10, 0, dead, "dead.example.test"),
            Z.srv("_sip._udp.example.test", 20, 0, live, "live.example.test"),
            Z.a("dead.example.test", "127.0.0.1"),
            Z.a("live.example.test", "127.0.0.1"),
            Z.soa("example.test"),
        ])
        defer { dns.stop() }
        let log = RecordingLog()
        var configuration = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: Self.fast),
                                                       identity: try SIPURI("sip:bob@example.test"))
        configuration.sessionTimer = nil
        configuration.logger = log.logger(level: .debug)
        let caller = try Phone(name: "bob", configuration: configuration,
                               dns: DNSClientConfiguration(nameservers: [dns.address], timeout: .seconds(1), usesSystemResolverWithoutNameservers: false))
        defer { caller.close() }

        let key = await caller.call(try SIPURI("sip:alice@example.test"))
        let answered = await caller.wait(key, timeout: .seconds(10)) { $0 == .confirmed || $0.isTerminated }
        #expect(answered)
        #expect(caller.states(key).contains(.confirmed), "states: \(caller.states(key))")
        #expect(callee.incomingCalls.count == 1)
        // Located through DNS: the SRV question was asked (NAPTR first, per RFC 3263 §4.1).
        #expect(dns.count("_sip._udp.example.test", .srv) >= 1)
        // The INVITE went to the dead target first, failed there, and went again to the live one.
        let lines = log.messages
        #expect(lines.contains("located sip:alice@example.test: udp:127.0.0.1:\(dead), udp:127.0.0.1:\(live)"), "log: \(lines)")
        let why = closed ? "transport error" : "timeout"
        #expect(lines.contains("target udp:127.0.0.1:\(dead) failed (\(why)); trying udp:127.0.0.1:\(live)"), "log: \(lines)")
        try await caller.agent.perform(key) { s throws(SessionError) in try s.bye() }
        #expect(await caller.wait(key, timeout: .seconds(5)) { $0.isTerminated })
    }

    @Test("a 503 from the first SRV target moves the call on to the second (RFC 3263 §4.3)")
    func failsOverOn503() async throws {
        let callee = try Phone(name: "alice", configuration: .init(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]),
                                                                   identity: try SIPURI("sip:alice@example.test")),
                               autoAnswer: .milliseconds(10))
        defer { callee.close() }
        // A server that answers every INVITE with 503 (the transaction layer of the caller ACKs it).
        let box = Mutex<UDPTransport?>(nil)
        let busy = try UDPTransport(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0)) { e in
            guard case .message(let inbound) = e, inbound.message.method == .invite else { return }
            let r = SIPMessage(responseTo: inbound.message, statusCode: 503, toTag: "busy1")
            try? box.withLock { $0 }?.send(r.serialized(), to: inbound.source)
        }
        box.withLock { $0 = busy }
        defer { busy.close() }
        let dns = try LocalDNSServer(zone: [
            Z.srv("_sip._udp.example.test", 10, 0, busy.localAddress.port, "busy.example.test"),
            Z.srv("_sip._udp.example.test", 20, 0, callee.agent.endpoint.localAddresses[0].address.port, "live.example.test"),
            Z.a("busy.example.test", "127.0.0.1"),
            Z.a("live.example.test", "127.0.0.1"),
            Z.soa("example.test"),
        ])
        defer { dns.stop() }
        let log = RecordingLog()
        var configuration = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]),
                                                       identity: try SIPURI("sip:bob@example.test"))
        configuration.sessionTimer = nil
        configuration.logger = log.logger(level: .info)
        let caller = try Phone(name: "bob", configuration: configuration,
                               dns: DNSClientConfiguration(nameservers: [dns.address], timeout: .seconds(1), usesSystemResolverWithoutNameservers: false))
        defer { caller.close() }
        let key = await caller.call(try SIPURI("sip:alice@example.test"))
        #expect(await caller.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "states: \(caller.states(key)) log: \(log.messages)")
        #expect(log.messages.contains { $0.contains("failed (503); trying udp:127.0.0.1:") }, "log: \(log.messages)")
        try await caller.agent.perform(key) { s throws(SessionError) in try s.bye() }
    }

    @Test("a name that locates nothing ends the call with a transport error, at once")
    func unknownNameFails() async throws {
        let dns = try LocalDNSServer(zone: [Z.soa("example.test")])
        defer { dns.stop() }
        let caller = try Phone(name: "bob", configuration: .init(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]),
                                                                 identity: try SIPURI("sip:bob@example.test")),
                               dns: DNSClientConfiguration(nameservers: [dns.address], timeout: .seconds(1), usesSystemResolverWithoutNameservers: false))
        defer { caller.close() }
        let key = await caller.call(try SIPURI("sip:alice@nowhere.example.test"))
        #expect(await caller.wait(key, timeout: .seconds(5)) { $0.isTerminated })
        #expect(caller.states(key).last == .terminated(.transportError), "states: \(caller.states(key))")
    }
}

/// A swift-log handler that keeps every message, for tests that check what was logged.
final class RecordingLog: Sendable {
    private let lines = Mutex<[String]>([])

    var messages: [String] { lines.withLock { $0 } }

    func logger(level: Logger.Level) -> Logger {
        var logger = Logger(label: "test") { _ in Handler(log: self) }
        logger.logLevel = level
        return logger
    }

    struct Handler: LogHandler {
        let log: RecordingLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            log.lines.withLock { $0.append(event.message.description) }
        }
    }
}
