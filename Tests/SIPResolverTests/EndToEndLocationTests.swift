import SIPMessage
import Testing
import SIPResolver

/// RFC 3263 location through the real ``DNSClient`` against ``LocalDNSServer`` on 127.0.0.1.
@Suite("SIP server location over loopback DNS")
struct EndToEndLocationTests {
    static let zone: [DNSRecord] = [
        Z.soa("example.com"),
        Z.naptr("example.com", 50, 50, "SIPS+D2T", "_sips._tcp.example.com"),
        Z.naptr("example.com", 90, 50, "SIP+D2T", "_sip._tcp.example.com"),
        Z.naptr("example.com", 100, 50, "SIP+D2U", "_sip._udp.example.com"),
        // Two priorities; weights 60/40 at the first.
        Z.srv("_sips._tcp.example.com", 10, 60, 5061, "sip1.example.com"),
        Z.srv("_sips._tcp.example.com", 10, 40, 5061, "sip2.example.com"),
        Z.srv("_sips._tcp.example.com", 20, 0, 5061, "backup.example.com"),
        Z.srv("_sip._tcp.example.com", 0, 0, 5060, "sip1.example.com"),
        Z.srv("_sip._udp.example.com", 0, 0, 5060, "sip1.example.com"),
        Z.a("sip1.example.com", "192.0.2.1"),
        Z.aaaa("sip1.example.com", "2001:db8::1"),
        Z.cname("sip2.example.com", "host2.example.com"),
        Z.a("host2.example.com", "192.0.2.2"),
        Z.a("backup.example.com", "192.0.2.3"),
        // No NAPTR, no SRV: addresses only.
        Z.a("plain.example.com", "192.0.2.50"),
        // SRV without NAPTR, its target's addresses too many for 512 octets.
        Z.srv("_sip._udp.large.example.com", 0, 0, 5062, "farm.example.com"),
    ] + (1...30).map { Z.a("farm.example.com", "198.51.100.\($0)") }

    @Test func naptrSRVAndAddressesEndToEnd() async throws {
        let server = try LocalDNSServer(zone: Self.zone)
        defer { server.stop() }
        let locator = SIPServerLocator(lookup: localClient([server.address]))
        var rng = SeededGenerator(seed: 5)
        let targets = try await locator.resolve(try SIPURI("sip:alice@example.com"), using: &rng)
        let tls = targets.filter { $0.transport == .tls }.map(\.description)
        #expect(Set(tls.prefix(3)) == ["tls:192.0.2.1:5061", "tls:[2001:db8::1]:5061", "tls:192.0.2.2:5061"])
        #expect(tls.last == "tls:192.0.2.3:5061")
        #expect(targets.map(\.transport) == [.tls, .tls, .tls, .tls, .tcp, .tcp, .udp, .udp])
        #expect(targets.suffix(4).map(\.description) == ["tcp:192.0.2.1:5060", "tcp:[2001:db8::1]:5060", "udp:192.0.2.1:5060", "udp:[2001:db8::1]:5060"])
        #expect(server.count("example.com", .naptr) == 1)
        #expect(server.count("_sip._udp.example.com", .srv) == 1)
    }

    @Test func weightsAtTheFirstPriorityFollowTheirShares() async throws {
        let server = try LocalDNSServer(zone: Self.zone)
        defer { server.stop() }
        let locator = SIPServerLocator(lookup: localClient([server.address]))
        var rng = SeededGenerator(seed: 77)
        var firstIsSip1 = 0
        let runs = 300
        for _ in 0..<runs {
            let t = try await locator.resolve(try SIPURI("sips:example.com"), using: &rng)
            if t[0].address == "192.0.2.1" { firstIsSip1 += 1 }
            #expect(t.last?.address == "192.0.2.3")
        }
        // 60 / 101 expected; the cache means the server saw each question once.
        #expect(abs(Double(firstIsSip1) / Double(runs) - 60.0 / 101) < 0.1)
        #expect(server.count("_sips._tcp.example.com", .srv) == 1)
    }

    @Test func fallbackAndExplicitPort() async throws {
        let server = try LocalDNSServer(zone: Self.zone)
        defer { server.stop() }
        let locator = SIPServerLocator(lookup: localClient([server.address]))
        let plain = try await locator.resolve(try SIPURI("sip:plain.example.com"))
        #expect(plain.map(\.description) == ["udp:192.0.2.50:5060"])
        #expect(server.count("_sip._udp.plain.example.com", .srv) == 1)
        let withPort = try await locator.resolve(try SIPURI("sip:sip1.example.com:5070;transport=tcp"))
        #expect(withPort.map(\.description) == ["tcp:192.0.2.1:5070", "tcp:[2001:db8::1]:5070"])
        #expect(server.queries.allSatisfy { $0.question.type != .srv || !$0.question.name.description.hasSuffix("sip1.example.com") })
        #expect(server.count("sip1.example.com", .naptr) == 0)
        await #expect(throws: SIPLocationError.noTargets("missing.example.com")) {
            try await locator.resolve(try SIPURI("sip:missing.example.com"))
        }
    }

    @Test func truncatedAnswersAlongTheWay() async throws {
        var options = LocalDNSServer.Options()
        options.truncateOverUDP = [Z.name("farm.example.com"), Z.name("_sip._udp.large.example.com")]
        let server = try LocalDNSServer(zone: Self.zone, options: options)
        defer { server.stop() }
        let locator = SIPServerLocator(lookup: localClient([server.address]), configuration: .init(addressPreference: .ipv4Only, maximumTargets: 64))
        let targets = try await locator.resolve(try SIPURI("sip:large.example.com"))
        #expect(targets.count == 30)
        #expect(targets.allSatisfy { $0.port == 5062 && $0.transport == .udp })
        #expect(server.queries.filter(\.overTCP).count == 2)
    }

    @Test func deadDNSIsReportedAsALookupFailure() async throws {
        var options = LocalDNSServer.Options()
        options.silent = true
        let server = try LocalDNSServer(zone: Self.zone, options: options)
        defer { server.stop() }
        let locator = SIPServerLocator(lookup: localClient([server.address], timeout: .milliseconds(100), attempts: 1))
        let start = ContinuousClock.now
        await #expect(throws: SIPLocationError.lookupFailed("example.com", .timedOut)) {
            try await locator.resolve(try SIPURI("sip:example.com"))
        }
        // NAPTR, then three SRV lookups at once, then A and AAAA at once: three waits.
        // An upper bound only to catch a hang: wall-clock speed is not asserted in tests.
        #expect(ContinuousClock.now - start < .seconds(10))
    }
}
