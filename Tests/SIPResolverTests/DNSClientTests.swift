import Glibc
import Testing
import SIPResolver
import NetworkIO

/// The client against ``LocalDNSServer`` on 127.0.0.1. Every wait is bounded well under 2 s.
@Suite("DNS client over loopback")
struct DNSClientTests {
    static let zone: [DNSRecord] = [
        Z.soa("example.com", minimum: 60),
        Z.a("pbx.example.com", "192.0.2.10"),
        Z.a("pbx.example.com", "192.0.2.11"),
        Z.aaaa("pbx.example.com", "2001:db8::10"),
        Z.cname("alias.example.com", "pbx.example.com"),
        Z.cname("outside.example.com", "pbx.example.com"),
        Z.cname("loop1.example.com", "loop2.example.com"),
        Z.cname("dangling.example.com", "gone.example.com"),
        Z.cname("loop2.example.com", "loop1.example.com"),
        Z.a("short.example.com", "192.0.2.20", ttl: 0),
        Z.srv("_sip._udp.example.com", 10, 60, 5060, "pbx.example.com"),
        Z.naptr("example.com", 10, 10, "SIP+D2U", "_sip._udp.example.com"),
    ] + (1...40).map { Z.a("big.example.com", "198.51.100.\($0)") }

    @Test func answersAndCaches() async throws {
        let server = try LocalDNSServer(zone: Self.zone)
        defer { server.stop() }
        let client = localClient([server.address])
        let records = try await client.resolve("pbx.example.com", type: .a)
        #expect(records.map(\.data) == [.a(IPv4Address(192, 0, 2, 10)), .a(IPv4Address(192, 0, 2, 11))])
        #expect(records.allSatisfy { $0.ttl <= 300 && $0.ttl >= 298 })
        let again = try await client.resolve("PBX.example.com.", type: .a)
        #expect(again.map(\.data) == records.map(\.data))
        #expect(server.count("pbx.example.com", .a) == 1)
        let v6 = try await client.resolve("pbx.example.com", type: .aaaa)
        #expect(v6.map(\.data) == [.aaaa(IPv6Address("2001:db8::10")!)])
        let srv = try await client.resolve("_sip._udp.example.com", type: .srv)
        #expect(srv.first?.data == .srv(DNSSRVRecord(priority: 10, weight: 60, port: 5060, target: Z.name("pbx.example.com"))))
        let naptr = try await client.resolve("example.com", type: .naptr)
        #expect(naptr.count == 1)
        #expect(client.cachedAnswerCount == 4)
        client.removeCachedAnswers()
        _ = try await client.resolve("pbx.example.com", type: .a)
        #expect(server.count("pbx.example.com", .a) == 2)
    }

    @Test func zeroTTLIsNotCached() async throws {
        let server = try LocalDNSServer(zone: Self.zone)
        defer { server.stop() }
        let client = localClient([server.address])
        _ = try await client.resolve("short.example.com", type: .a)
        _ = try await client.resolve("short.example.com", type: .a)
        #expect(server.count("short.example.com", .a) == 2)
    }

    @Test func queriesUseRandomIDsAndSourcePorts() async throws {
        let server = try LocalDNSServer(zone: Self.zone)
        defer { server.stop() }
        let client = localClient([server.address])
        for i in 0..<6 { _ = try? await client.resolve("n\(i).example.com", type: .a) }
        let log = server.queries
        #expect(log.count == 6)
        #expect(Set(log.map(\.id)).count >= 5)
        #expect(Set(log.map(\.sourcePort)).count >= 5)
        #expect(log.allSatisfy { $0.sourcePort >= 1024 && !$0.overTCP })
    }

    @Test func followsAliases() async throws {
        let server = try LocalDNSServer(zone: Self.zone)
        defer { server.stop() }
        let client = localClient([server.address])
        let records = try await client.resolve("alias.example.com", type: .a)
        #expect(records.map(\.data) == [.a(IPv4Address(192, 0, 2, 10)), .a(IPv4Address(192, 0, 2, 11))])
        #expect(records.allSatisfy { $0.name == Z.name("pbx.example.com") })
        // Asking for the CNAME itself returns it.
        let cname = try await client.resolve("alias.example.com", type: .cname)
        #expect(cname.map(\.data) == [.cname(Z.name("pbx.example.com"))])
    }

    @Test func followsAliasesLeadingOutOfTheAnswer() async throws {
        var options = LocalDNSServer.Options()
        options.chaseAliases = false
        let server = try LocalDNSServer(zone: Self.zone, options: options)
        defer { server.stop() }
        let client = localClient([server.address])
        let records = try await client.resolve("outside.example.com", type: .a)
        #expect(records.count == 2)
        #expect(server.count("outside.example.com", .a) == 1)
        #expect(server.count("pbx.example.com", .a) == 1)
        // Cached under the alias as well.
        _ = try await client.resolve("outside.example.com", type: .a)
        #expect(server.queries.count == 2)
    }

    @Test func aliasLoopsAreBounded() async throws {
        var options = LocalDNSServer.Options()
        options.chaseAliases = false
        let server = try LocalDNSServer(zone: Self.zone, options: options)
        defer { server.stop() }
        let client = localClient([server.address])
        await #expect(throws: DNSError.aliasChainTooLong("loop1.example.com")) {
            try await client.resolve("loop1.example.com", type: .a)
        }
        #expect(server.queries.count <= 9)
        // A server that follows the loop itself sends a long chain in one answer: same end.
        let chasing = try LocalDNSServer(zone: Self.zone)
        defer { chasing.stop() }
        await #expect(throws: DNSError.aliasChainTooLong("loop2.example.com")) {
            try await localClient([chasing.address]).resolve("loop2.example.com", type: .a)
        }
    }

    @Test func nonexistentNamesAndNoData() async throws {
        let server = try LocalDNSServer(zone: Self.zone)
        defer { server.stop() }
        let client = localClient([server.address])
        await #expect(throws: DNSError.nonexistentDomain("missing.example.com")) {
            try await client.resolve("missing.example.com", type: .a)
        }
        // The negative answer is cached (SOA minimum 60 s).
        await #expect(throws: DNSError.nonexistentDomain("missing.example.com")) {
            try await client.resolve("missing.example.com", type: .a)
        }
        #expect(server.count("missing.example.com", .a) == 1)
        // The name exists without AAAA records: no data, also cached.
        #expect(try await client.resolve("short.example.com", type: .aaaa).isEmpty)
        #expect(try await client.resolve("short.example.com", type: .aaaa).isEmpty)
        #expect(server.count("short.example.com", .aaaa) == 1)
        await #expect(throws: DNSError.invalidName("a..b")) { try await client.resolve("a..b", type: .a) }
        // An alias to a name that does not exist: NXDOMAIN with the CNAME in the answer.
        await #expect(throws: DNSError.nonexistentDomain("dangling.example.com")) {
            try await client.resolve("dangling.example.com", type: .a)
        }
    }

    @Test func truncatedAnswersAreRetriedOverTCP() async throws {
        var options = LocalDNSServer.Options()
        options.truncateOverUDP = [Z.name("big.example.com")]
        let server = try LocalDNSServer(zone: Self.zone, options: options)
        defer { server.stop() }
        let client = localClient([server.address])
        let records = try await client.resolve("big.example.com", type: .a)
        #expect(records.count == 40)
        #expect(records.last?.data == .a(IPv4Address(198, 51, 100, 40)))
        #expect(server.queries.map(\.overTCP) == [false, true])
        #expect(server.queries[0].id == server.queries[1].id)
    }

    @Test func answersNotMatchingTheQueryAreIgnored() async throws {
        var options = LocalDNSServer.Options()
        options.decoysFirst = true
        let server = try LocalDNSServer(zone: Self.zone, options: options)
        defer { server.stop() }
        let client = localClient([server.address])
        let records = try await client.resolve("pbx.example.com", type: .a)
        #expect(records.map(\.data) == [.a(IPv4Address(192, 0, 2, 10)), .a(IPv4Address(192, 0, 2, 11))])
        #expect(server.queries.count == 1)
    }

    @Test func silentServersTimeOutWithinTheBound() async throws {
        var options = LocalDNSServer.Options()
        options.silent = true
        let server = try LocalDNSServer(zone: Self.zone, options: options)
        defer { server.stop() }
        let client = localClient([server.address], timeout: .milliseconds(150), attempts: 3)
        let start = ContinuousClock.now
        await #expect(throws: DNSError.timedOut) { try await client.resolve("pbx.example.com", type: .a) }
        let elapsed = ContinuousClock.now - start
        #expect(elapsed >= .milliseconds(440))
        // An upper bound only to catch a hang: wall-clock speed is not asserted in tests.
        #expect(elapsed < .seconds(10))
        #expect(server.queries.count == 3)
        #expect(Set(server.queries.map(\.sourcePort)).count >= 2)
    }

    @Test func failsOverToTheNextServer() async throws {
        let server = try LocalDNSServer(zone: Self.zone)
        defer { server.stop() }
        var silentOptions = LocalDNSServer.Options()
        silentOptions.silent = true
        let silent = try LocalDNSServer(zone: Self.zone, options: silentOptions)
        defer { silent.stop() }
        var failingOptions = LocalDNSServer.Options()
        failingOptions.responseCode = .serverFailure
        let failing = try LocalDNSServer(zone: Self.zone, options: failingOptions)
        defer { failing.stop() }
        // Nothing listening (ICMP port unreachable), then no answer, then SERVFAIL, then a good one.
        let client = localClient([deadServerAddress(), silent.address, failing.address, server.address], timeout: .milliseconds(200), attempts: 1)
        let records = try await client.resolve("pbx.example.com", type: .a)
        #expect(records.count == 2)
        #expect(silent.queries.count == 1 && failing.queries.count == 1 && server.queries.count == 1)
    }

    @Test func serverFailureFromEveryServer() async throws {
        var options = LocalDNSServer.Options()
        options.responseCode = .refused
        let server = try LocalDNSServer(zone: Self.zone, options: options)
        defer { server.stop() }
        let client = localClient([server.address], attempts: 2)
        await #expect(throws: DNSError.serverFailure(.refused)) { try await client.resolve("pbx.example.com", type: .a) }
        #expect(server.queries.count == 2)
        // The whole response is available to callers who want it, NXDOMAIN included.
        let plain = try LocalDNSServer(zone: Self.zone)
        defer { plain.stop() }
        let response = try await localClient([plain.address]).query(Z.name("missing.example.com"), type: .a)
        #expect(response.responseCode == .nameError)
        #expect(response.authorities.first?.type == .soa)
    }

    @Test func unreachableServersReportTheSocketError() async throws {
        let client = localClient([deadServerAddress()], timeout: .milliseconds(300), attempts: 1)
        do {
            _ = try await client.resolve("pbx.example.com", type: .a)
            Issue.record("resolved without a server")
        } catch let error as DNSError {
            // ICMP port unreachable arrives as ECONNREFUSED on the connected socket.
            #expect(error == .socket(operation: "recv", errno: 111) || error == .timedOut)
        }
    }

    @Test func brokenAnswersAreReportedWhenNothingBetterArrives() async throws {
        var options = LocalDNSServer.Options()
        options.cutAnswers = true
        let server = try LocalDNSServer(zone: Self.zone, options: options)
        defer { server.stop() }
        let client = localClient([server.address], timeout: .milliseconds(150), attempts: 1)
        await #expect(throws: DNSError.malformedResponse(DNSParseError(offset: 14, reason: .truncated))) {
            try await client.resolve(Z.name("pbx.example.com"), type: .a)
        }
        // Over TCP (after a truncated UDP answer) a broken answer fails at once.
        options.truncateOverUDP = [Z.name("big.example.com")]
        options.cutAnswers = false
        let tcp = try LocalDNSServer(zone: Self.zone, options: options)
        defer { tcp.stop() }
        var cutTCP = options
        cutTCP.cutAnswers = true
        let both = try LocalDNSServer(zone: Self.zone, options: cutTCP)
        defer { both.stop() }
        await #expect(throws: DNSError.self) { try await localClient([both.address], timeout: .milliseconds(150), attempts: 1).resolve("big.example.com", type: .a) }
        #expect(try await localClient([tcp.address]).resolve("big.example.com", type: .a).count == 40)
    }

    @Test func systemConfigurationFromFiles() async throws {
        let server = try LocalDNSServer(zone: Self.zone)
        defer { server.stop() }
        let resolvConf = temporaryFile("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
        let hosts = temporaryFile("192.0.2.77 gateway.example.com\n")
        defer { unlink(resolvConf); unlink(hosts) }
        var configuration = DNSClientConfiguration.system(resolvConfPath: resolvConf, hostsPath: hosts)
        #expect(configuration.nameservers == [SocketAddress(.v4(IPv4Address(127, 0, 0, 1)), port: 53)])
        #expect(configuration.timeout == .seconds(1) && configuration.attempts == 1)
        #expect(configuration.hosts?.addresses(for: Z.name("gateway.example.com")) == [.v4(IPv4Address(192, 0, 2, 77))])
        // Point it at the local server's port: the file cannot say which port.
        configuration.nameservers = [server.address]
        let client = DNSClient(configuration: configuration)
        #expect(try await client.resolve("gateway.example.com", type: .a).map(\.data) == [.a(IPv4Address(192, 0, 2, 77))])
        #expect(try await client.resolve("pbx.example.com", type: .a).count == 2)
        #expect(server.queries.count == 1)
    }

    @Test func cancellationEndsTheWaitPromptly() async throws {
        var options = LocalDNSServer.Options()
        options.silent = true
        let server = try LocalDNSServer(zone: Self.zone, options: options)
        defer { server.stop() }
        // A long timeout, so that cancellation always comes first even on a loaded machine
        // (a 100 ms sleep has been seen to take seconds there): had cancellation not ended
        // the wait, the error would be DNSError.timedOut after 30 s.
        let client = localClient([server.address], timeout: .seconds(30), attempts: 1)
        let task = Task { try await client.resolve("pbx.example.com", type: .a) }
        // Cancel once the query is on the wire (bounded wait).
        let clock = ContinuousClock(), deadline = clock.now + .seconds(10)
        while server.queries.isEmpty && clock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(server.queries.count == 1)
    }

    @Test func hostsTableComesFirst() async throws {
        let server = try LocalDNSServer(zone: Self.zone)
        defer { server.stop() }
        let hosts = HostsFile(contents: "192.0.2.99 pbx.example.com\n")
        let client = localClient([server.address], hosts: hosts)
        #expect(try await client.resolve("pbx.example.com", type: .a).map(\.data) == [.a(IPv4Address(192, 0, 2, 99))])
        // No AAAA in the table: DNS is asked.
        #expect(try await client.resolve("pbx.example.com", type: .aaaa).count == 1)
        #expect(server.queries.map(\.question.type) == [.aaaa])
    }

    @Test func withoutNameservers() async throws {
        let client = localClient([])
        await #expect(throws: DNSError.noNameservers) { try await client.resolve("example.com", type: .srv) }
        await #expect(throws: DNSError.noNameservers) { try await client.resolve("example.com", type: .a) }
        // With the system fallback, numeric names resolve without any DNS traffic.
        let system = DNSClient(configuration: DNSClientConfiguration(nameservers: []))
        #expect(try await system.resolve("127.0.0.1", type: .a).map(\.data) == [.a(IPv4Address(127, 0, 0, 1))])
        #expect(try await system.resolve("::1", type: .aaaa).map(\.data) == [.aaaa(IPv6Address("::1")!)])
        await #expect(throws: DNSError.noNameservers) { try await system.resolve("example.com", type: .naptr) }
    }

    @Test func concurrentQueriesDoNotInterfere() async throws {
        let server = try LocalDNSServer(zone: Self.zone)
        defer { server.stop() }
        let client = localClient([server.address])
        let names = ["pbx", "alias", "big", "short", "missing"].map { "\($0).example.com" }
        let counts = try await withThrowingTaskGroup(of: (String, Int).self) { group in
            for name in names {
                group.addTask { (name, (try? await client.resolve(name, type: .a))?.count ?? -1) }
            }
            var out = [String: Int]()
            for try await (name, count) in group { out[name] = count }
            return out
        }
        #expect(counts == ["pbx.example.com": 2, "alias.example.com": 2, "big.example.com": 40, "short.example.com": 1, "missing.example.com": -1])
    }
}
