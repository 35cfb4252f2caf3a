import SIPMessage
import Synchronization
import Testing
@testable import SIPResolver

/// A ``DNSLookup`` answering from a list of records, recording what it was asked.
final class ZoneLookup: DNSLookup {
    let zone: [DNSRecord]
    let failing: Set<String>
    private let log = Mutex<[String]>([])

    init(_ zone: [DNSRecord], failing: Set<String> = []) {
        self.zone = zone
        self.failing = failing
    }

    var asked: [String] { log.withLock { $0 } }

    func resolve(_ name: String, type: DNSRecordType) async throws -> [DNSRecord] {
        let n = try DNSName(name)
        log.withLock { $0.append("\(n.description.lowercased()) \(type)") }
        if failing.contains("\(n.description.lowercased()) \(type)") { throw DNSError.timedOut }
        guard zone.contains(where: { $0.name == n }) else { throw DNSError.nonexistentDomain(name) }
        return zone.filter { $0.name == n && $0.type == type }
    }
}

@Suite("RFC 3263 server location")
struct SIPServerLocatorTests {
    static let zone: [DNSRecord] = [
        // example.com: NAPTR prefers TLS, then TCP, then UDP.
        Z.naptr("example.com", 30, 10, "SIP+D2U", "_sip._udp.example.com"),
        Z.naptr("example.com", 10, 10, "SIPS+D2T", "_sips._tcp.example.com"),
        Z.naptr("example.com", 20, 10, "SIP+D2T", "_sip._tcp.example.com"),
        Z.naptr("example.com", 5, 10, "SIP+D2S", "_sip._sctp.example.com"),  // unsupported: skipped
        Z.naptr("example.com", 6, 10, "SIP+D2U", "_sip._udp.example.com", flags: "u"),  // wrong flag: skipped
        Z.srv("_sips._tcp.example.com", 10, 0, 5061, "a.example.com"),
        Z.srv("_sip._tcp.example.com", 10, 0, 5060, "a.example.com"),
        Z.srv("_sip._udp.example.com", 10, 0, 5060, "b.example.com"),
        Z.a("a.example.com", "192.0.2.1"),
        Z.aaaa("a.example.com", "2001:db8::1"),
        Z.a("b.example.com", "192.0.2.2"),
        Z.a("example.com", "192.0.2.100"),
        // srv.example.net: no NAPTR, SRV for TCP only, two priorities.
        Z.srv("_sip._tcp.srv.example.net", 20, 0, 5080, "backup.example.net"),
        Z.srv("_sip._tcp.srv.example.net", 10, 0, 5070, "main.example.net"),
        Z.a("main.example.net", "198.51.100.1"),
        Z.a("backup.example.net", "198.51.100.2"),
        Z.a("srv.example.net", "198.51.100.99"),
        // plain.example.org: addresses only.
        Z.a("plain.example.org", "203.0.113.5"),
        Z.aaaa("plain.example.org", "2001:db8::5"),
        // down.example.org: SRV says "no service".
        Z.srv("_sip._udp.down.example.org", 0, 0, 0, "."),
        Z.srv("_sip._tcp.down.example.org", 0, 0, 0, "."),
        Z.srv("_sips._tcp.down.example.org", 0, 0, 0, "."),
        Z.a("down.example.org", "203.0.113.6"),
    ]

    func locate(_ uri: String, zone: [DNSRecord] = zone, configuration: SIPServerLocator.Configuration = .init(), seed: UInt64 = 1) async throws -> ([String], ZoneLookup) {
        let lookup = ZoneLookup(zone)
        let locator = SIPServerLocator(lookup: lookup, configuration: configuration)
        var rng = SeededGenerator(seed: seed)
        let targets = try await locator.resolve(try SIPURI(uri), using: &rng)
        return (targets.map(\.description), lookup)
    }

    @Test func numericHosts() async throws {
        let cases: [(String, [String])] = [
            ("sip:alice@192.0.2.1", ["udp:192.0.2.1:5060"]),
            ("sip:alice@192.0.2.1:5070", ["udp:192.0.2.1:5070"]),
            ("sip:alice@192.0.2.1;transport=TCP", ["tcp:192.0.2.1:5060"]),
            ("sip:alice@192.0.2.1;transport=tls", ["tls:192.0.2.1:5061"]),
            ("sips:alice@192.0.2.1", ["tls:192.0.2.1:5061"]),
            ("sips:alice@192.0.2.1;transport=tcp", ["tls:192.0.2.1:5061"]),
            ("sip:[2001:DB8::0:1]:5080", ["udp:[2001:db8::1]:5080"]),
            ("sip:alice@example.com;maddr=192.0.2.9", ["udp:192.0.2.9:5060"]),
        ]
        for (uri, expected) in cases {
            let (targets, lookup) = try await locate(uri)
            #expect(targets == expected, "\(uri)")
            #expect(lookup.asked.isEmpty, "\(uri) made DNS queries")
        }
        let (targets, _) = try await locate("sip:[::1]")
        let locator = SIPServerLocator(lookup: ZoneLookup([]))
        let direct = try await locator.resolve(try SIPURI("sip:[::1]"))
        #expect(direct == [ResolvedTarget(transport: .udp, address: "::1", port: 5060)])
        #expect(targets == ["udp:[::1]:5060"])
    }

    @Test func explicitPortMeansAddressRecordsOnly() async throws {
        let (targets, lookup) = try await locate("sip:example.com:5080")
        #expect(targets == ["udp:192.0.2.100:5080"])
        #expect(lookup.asked.sorted() == ["example.com A", "example.com AAAA"])
        let (tcp, _) = try await locate("sip:plain.example.org:5090;transport=tcp")
        #expect(tcp == ["tcp:203.0.113.5:5090", "tcp:[2001:db8::5]:5090"])
        let (sips, _) = try await locate("sips:plain.example.org:5091")
        #expect(sips == ["tls:203.0.113.5:5091", "tls:[2001:db8::5]:5091"])
    }

    @Test func naptrOrdersTransports() async throws {
        let (targets, lookup) = try await locate("sip:alice@example.com")
        #expect(targets == [
            "tls:192.0.2.1:5061", "tls:[2001:db8::1]:5061",
            "tcp:192.0.2.1:5060", "tcp:[2001:db8::1]:5060",
            "udp:192.0.2.2:5060",
        ])
        #expect(lookup.asked.first == "example.com NAPTR")
        #expect(!lookup.asked.contains("_sip._sctp.example.com SRV"))
        // A SIPS URI keeps only SIPS+D2T.
        let (sips, _) = try await locate("sips:alice@example.com")
        #expect(sips == ["tls:192.0.2.1:5061", "tls:[2001:db8::1]:5061"])
        // Without TLS support, the TLS record is skipped.
        let (noTLS, _) = try await locate("sip:alice@example.com", configuration: .init(transports: [.udp, .tcp]))
        #expect(noTLS.first == "tcp:192.0.2.1:5060")
        // IPv6 first, or only.
        let (v6, _) = try await locate("sips:example.com", configuration: .init(addressPreference: .ipv6First))
        #expect(v6 == ["tls:[2001:db8::1]:5061", "tls:192.0.2.1:5061"])
        let (v6only, _) = try await locate("sips:example.com", configuration: .init(addressPreference: .ipv6Only))
        #expect(v6only == ["tls:[2001:db8::1]:5061"])
        let (v4only, _) = try await locate("sips:example.com", configuration: .init(addressPreference: .ipv4Only))
        #expect(v4only == ["tls:192.0.2.1:5061"])
    }

    @Test func srvWithoutNAPTR() async throws {
        let (targets, lookup) = try await locate("sip:bob@srv.example.net")
        #expect(targets == ["tcp:198.51.100.1:5070", "tcp:198.51.100.2:5080"])
        #expect(Set(lookup.asked).isSuperset(of: ["srv.example.net NAPTR", "_sip._udp.srv.example.net SRV", "_sip._tcp.srv.example.net SRV",
                                                   "_sips._tcp.srv.example.net SRV"]))
        #expect(!lookup.asked.contains("srv.example.net A"))
    }

    @Test func explicitTransportAsksOnlyItsSRV() async throws {
        let (targets, lookup) = try await locate("sip:example.com;transport=tcp")
        #expect(targets == ["tcp:192.0.2.1:5060", "tcp:[2001:db8::1]:5060"])
        #expect(!lookup.asked.contains("example.com NAPTR"))
        #expect(lookup.asked.contains("_sip._tcp.example.com SRV"))
        let (sips, sipsLookup) = try await locate("sips:example.com;transport=tcp")
        #expect(sips == ["tls:192.0.2.1:5061", "tls:[2001:db8::1]:5061"])
        #expect(sipsLookup.asked.contains("_sips._tcp.example.com SRV"))
        // No SRV for that transport: the domain's addresses at the default port.
        let (fallback, _) = try await locate("sip:plain.example.org;transport=tls")
        #expect(fallback == ["tls:203.0.113.5:5061", "tls:[2001:db8::5]:5061"])
    }

    @Test func noNAPTRNoSRVFallsBackToAddresses() async throws {
        let (targets, _) = try await locate("sip:plain.example.org")
        #expect(targets == ["udp:203.0.113.5:5060", "udp:[2001:db8::5]:5060"])
        let (sips, _) = try await locate("sips:plain.example.org")
        #expect(sips == ["tls:203.0.113.5:5061", "tls:[2001:db8::5]:5061"])
        let (tcpOnly, _) = try await locate("sip:plain.example.org", configuration: .init(transports: [.tcp]))
        #expect(tcpOnly == ["tcp:203.0.113.5:5060", "tcp:[2001:db8::5]:5060"])
        let (trailingDot, _) = try await locate("sip:plain.example.org.")
        #expect(trailingDot.count == 2)
    }

    @Test func srvTargetDotMeansNoService() async throws {
        await #expect(throws: SIPLocationError.noTargets("down.example.org")) { try await locate("sip:down.example.org") }
    }

    @Test func failuresAndUnknownNames() async throws {
        await #expect(throws: SIPLocationError.noTargets("nowhere.example")) { try await locate("sip:nowhere.example") }
        await #expect(throws: SIPLocationError.unsupportedTransport("sctp")) { try await locate("sip:example.com;transport=sctp") }
        await #expect(throws: SIPLocationError.unsupportedTransport("udp")) { try await locate("sips:example.com;transport=udp") }
        await #expect(throws: SIPLocationError.unsupportedTransport("tls")) {
            try await locate("sips:example.com", configuration: .init(transports: [.udp]))
        }
        await #expect(throws: SIPLocationError.unsupportedTransport("tcp")) {
            try await locate("sip:example.com;transport=tcp", configuration: .init(transports: [.udp]))
        }
        await #expect(throws: SIPLocationError.invalidHost("bad..host")) { try await locate("sip:example.com;maddr=bad..host") }
        // DNS failing everywhere is reported as such, not as "no targets".
        let lookup = ZoneLookup([Z.a("x.example.org", "192.0.2.1")], failing: ["x.example.org A", "x.example.org AAAA", "x.example.org NAPTR"])
        let locator = SIPServerLocator(lookup: lookup)
        await #expect(throws: SIPLocationError.lookupFailed("x.example.org", .timedOut)) {
            try await locator.resolve(try SIPURI("sip:x.example.org"))
        }
        // A failed NAPTR lookup alone does not stop the rest.
        let partial = SIPServerLocator(lookup: ZoneLookup(Self.zone, failing: ["example.com NAPTR"]))
        #expect(try await partial.resolve(try SIPURI("sip:example.com")).first?.transport == .udp)
    }

    @Test func duplicatesAreRemovedAndTheListIsCapped() async throws {
        let zone = [
            Z.srv("_sip._udp.dup.example", 1, 0, 5060, "h.dup.example"),
            Z.srv("_sip._udp.dup.example", 2, 0, 5060, "h.dup.example"),
            Z.srv("_sip._udp.dup.example", 3, 0, 5060, "H.dup.example"),
        ] + (1...50).map { Z.a("h.dup.example", "10.0.0.\($0)") }
        let (targets, _) = try await locate("sip:dup.example", zone: zone)
        #expect(targets.count == 32)
        #expect(Set(targets).count == 32)
        let (five, _) = try await locate("sip:dup.example", zone: zone, configuration: .init(maximumTargets: 5))
        #expect(five == (1...5).map { "udp:10.0.0.\($0):5060" })
    }

    @Test func serverNameIsTheURIDomain() async throws {
        let locator = SIPServerLocator(lookup: ZoneLookup(Self.zone))
        let targets = try await locator.resolve(try SIPURI("sips:example.com"))
        #expect(targets.allSatisfy { $0.serverName == "example.com" })
        let numeric = try await locator.resolve(try SIPURI("sips:192.0.2.1"))
        #expect(numeric[0].serverName == nil)
    }
}

@Suite("RFC 2782 SRV ordering")
struct SRVOrderingTests {
    func srv(_ priority: UInt16, _ weight: UInt16, _ host: String) -> DNSSRVRecord {
        DNSSRVRecord(priority: priority, weight: weight, port: 5060, target: Z.name(host))
    }

    @Test func prioritiesAreStrict() {
        let records = [srv(20, 100, "c"), srv(10, 1, "a"), srv(30, 0, "d"), srv(10, 1, "b"), srv(20, 1, "e")]
        var rng = SeededGenerator(seed: 3)
        for _ in 0..<200 {
            let ordered = SRVOrdering.order(records, using: &rng)
            #expect(ordered.map(\.priority) == [10, 10, 20, 20, 30])
            #expect(Set(ordered.map(\.target.description)) == ["a", "b", "c", "d", "e"])
        }
        #expect(SRVOrdering.order([]).isEmpty)
    }

    @Test func weightsShareTheFirstPick() {
        let records = [srv(1, 10, "ten"), srv(1, 30, "thirty"), srv(1, 60, "sixty"), srv(1, 0, "zero")]
        var rng = SeededGenerator(seed: 99)
        var first = [String: Int]()
        let runs = 20_000
        for _ in 0..<runs {
            first[SRVOrdering.order(records, using: &rng)[0].target.description, default: 0] += 1
        }
        // Expected shares: 10/101, 30/101, 60/101, and 1/101 for weight 0 (drawn as 0).
        func share(_ k: String) -> Double { Double(first[k] ?? 0) / Double(runs) }
        #expect(abs(share("sixty") - 60.0 / 101) < 0.02)
        #expect(abs(share("thirty") - 30.0 / 101) < 0.02)
        #expect(abs(share("ten") - 10.0 / 101) < 0.015)
        #expect(share("zero") < 0.02)
    }

    @Test func allZeroWeightsAndDeterminism() {
        let records = (0..<6).map { srv(5, 0, "h\($0)") }
        var a = SeededGenerator(seed: 11), b = SeededGenerator(seed: 11)
        #expect(SRVOrdering.order(records, using: &a) == SRVOrdering.order(records, using: &b))
        var rng = SeededGenerator(seed: 12)
        // With all weights zero the draw is always 0: file order is kept.
        #expect(SRVOrdering.order(records, using: &rng) == records)
    }

    @Test func seededLocationIsReproducible() async throws {
        let zone = [
            Z.srv("_sip._udp.w.example", 1, 50, 5060, "p.w.example"),
            Z.srv("_sip._udp.w.example", 1, 50, 5060, "q.w.example"),
            Z.srv("_sip._udp.w.example", 1, 50, 5060, "r.w.example"),
            Z.a("p.w.example", "10.1.0.1"), Z.a("q.w.example", "10.1.0.2"), Z.a("r.w.example", "10.1.0.3"),
        ]
        let locator = SIPServerLocator(lookup: ZoneLookup(zone))
        var orders = Set<[ResolvedTarget]>()
        for seed in UInt64(0)..<20 {
            var r1 = SeededGenerator(seed: seed), r2 = SeededGenerator(seed: seed)
            let x = try await locator.resolve(try SIPURI("sip:w.example;transport=udp"), using: &r1)
            let y = try await locator.resolve(try SIPURI("sip:w.example;transport=udp"), using: &r2)
            #expect(x == y)
            orders.insert(x)
        }
        #expect(orders.count > 1)
    }
}
