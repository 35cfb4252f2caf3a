import Testing
@testable import SIPResolver
import NetworkIO

@Suite("Names, addresses, host and resolver files")
struct DNSNameAndAddressTests {
    @Test func namesParseAndCompareWithoutCase() throws {
        let n = try DNSName("SIP.Example.COM.")
        #expect(n.labels.count == 3)
        #expect(n.description == "SIP.Example.COM")
        #expect(n == (try DNSName("sip.example.com")))
        #expect(n.hashValue == (try DNSName("sip.example.com")).hashValue)
        #expect(Set([n, try DNSName("sip.EXAMPLE.com")]).count == 1)
        #expect(n.wireLength == 17)
        #expect(try DNSName(".") == .root)
        #expect(try DNSName("") == .root)
        #expect(DNSName.root.description == ".")
        #expect(try n.prepending("_sip._udp").description == "_sip._udp.SIP.Example.COM")
    }

    @Test func escapesInPresentationForm() throws {
        let n = try DNSName(#"a\.b.c\032d.e\\f"#)
        #expect(n.labels == [Array("a.b".utf8), Array("c d".utf8), Array(#"e\f"#.utf8)])
        #expect(n.description == #"a\.b.c\032d.e\\f"#)
        #expect(try DNSName(n.description) == n)
        #expect(throws: DNSNameError.invalidEscape) { try DNSName(#"a\25"#) }
        #expect(throws: DNSNameError.invalidEscape) { try DNSName(#"a\256"#) }
        #expect(throws: DNSNameError.invalidEscape) { try DNSName(#"a\"#) }
    }

    @Test func nameLimits() throws {
        #expect(throws: DNSNameError.emptyLabel) { try DNSName("a..b") }
        #expect(throws: DNSNameError.emptyLabel) { try DNSName(".a") }
        #expect(throws: DNSNameError.labelTooLong(64)) { try DNSName(String(repeating: "x", count: 64) + ".com") }
        _ = try DNSName(String(repeating: "x", count: 63) + ".com")
        let label = String(repeating: "y", count: 63)
        #expect(throws: DNSNameError.nameTooLong(257)) { try DNSName([label, label, label, label].joined(separator: ".")) }
        _ = try DNSName([label, label, label, String(repeating: "z", count: 61)].joined(separator: "."))
        #expect(throws: DNSNameError.emptyLabel) { try DNSName(labels: [[]]) }
    }

    @Test func resolvConf() {
        let text = """
        # comment
        search example.com
        nameserver 192.0.2.53
        nameserver 2001:db8::53
        nameserver fe80::1%eth0
        nameserver not-an-address
        nameserver 192.0.2.54
        nameserver 192.0.2.55
        options ndots:2 timeout:1 attempts:9
        """
        let c = DNSClientConfiguration(resolvConf: text)
        #expect(c.nameservers.map(\.description) == ["192.0.2.53:53", "[2001:db8::53]:53", "192.0.2.54:53"])
        #expect(c.timeout == .seconds(1))
        #expect(c.attempts == 5)
        let empty = DNSClientConfiguration(resolvConf: "")
        #expect(empty.nameservers.isEmpty)
        #expect(empty.timeout == .seconds(2) && empty.attempts == 2)
        let missing = DNSClientConfiguration.system(resolvConfPath: "/nonexistent/resolv.conf", hostsPath: "/nonexistent/hosts")
        #expect(missing.nameservers.isEmpty)
        #expect(missing.hosts == nil)
    }

    @Test func hostsFile() throws {
        let hosts = HostsFile(contents: """
        127.0.0.1\tlocalhost
        ::1 localhost ip6-localhost # trailing comment
        192.0.2.10 pbx.example.com pbx
        192.0.2.11 PBX.example.com
        # 192.0.2.99 commented.example.com
        fe80::1%eth0 zoned.example.com
        garbage line here
        """)
        #expect(hosts.addresses(for: try DNSName("localhost")) == [.v4(IPv4Address(127, 0, 0, 1)), .v6(IPv6Address("::1")!)])
        #expect(hosts.addresses(for: try DNSName("pbx.EXAMPLE.com")).map(\.description) == ["192.0.2.10", "192.0.2.11"])
        #expect(hosts.addresses(for: try DNSName("commented.example.com")).isEmpty)
        #expect(hosts.addresses(for: try DNSName("zoned.example.com")).isEmpty)
        #expect(hosts.records(for: try DNSName("pbx"), type: .a).map(\.data) == [.a(IPv4Address(192, 0, 2, 10))])
        #expect(hosts.records(for: try DNSName("pbx"), type: .aaaa).isEmpty)
    }
}

@Suite("DNS cache")
struct DNSCacheTests {
    let name = try! DNSName("example.com")
    let record = DNSRecord(name: try! DNSName("example.com"), ttl: 100, data: .a(IPv4Address(192, 0, 2, 1)))

    @Test func answersLiveForTheirTTLWithDecreasingTTL() {
        var cache = DNSCache(capacity: 4)
        let t0 = MonotonicClock.now
        cache.store(.records([record]), name: name, type: .a, ttl: 100, now: t0)
        #expect(cache.lookup(name: try! DNSName("EXAMPLE.com"), type: .a, now: t0) == .records([record]))
        guard case .records(let later)? = cache.lookup(name: name, type: .a, now: t0 + .seconds(30)) else {
            Issue.record("expected records"); return
        }
        #expect(later[0].ttl == 70)
        #expect(cache.lookup(name: name, type: .aaaa, now: t0) == nil)
        #expect(cache.lookup(name: name, type: .a, now: t0 + .seconds(100)) == nil)
        #expect(cache.count == 0)
    }

    @Test func zeroTTLAndMaximumTTL() {
        var cache = DNSCache(capacity: 4, maximumTTL: 10)
        let t0 = MonotonicClock.now
        cache.store(.records([record]), name: name, type: .a, ttl: 0, now: t0)
        #expect(cache.count == 0)
        cache.store(.nonexistentDomain, name: name, type: .a, ttl: 1000, now: t0)
        #expect(cache.lookup(name: name, type: .a, now: t0 + .seconds(9)) == .nonexistentDomain)
        #expect(cache.lookup(name: name, type: .a, now: t0 + .seconds(10)) == nil)
        var off = DNSCache(capacity: 0)
        off.store(.records([]), name: name, type: .a, ttl: 10, now: t0)
        #expect(off.count == 0)
    }

    @Test func sizeIsBoundedEvictingExpiredThenSoonest() throws {
        var cache = DNSCache(capacity: 3)
        let t0 = MonotonicClock.now
        let names = try (0..<5).map { try DNSName("h\($0).example.com") }
        cache.store(.records([]), name: names[0], type: .a, ttl: 5, now: t0)
        cache.store(.records([]), name: names[1], type: .a, ttl: 50, now: t0)
        cache.store(.records([]), name: names[2], type: .a, ttl: 20, now: t0)
        // Full: names[0] has expired by t0 + 6 and goes first.
        cache.store(.records([]), name: names[3], type: .a, ttl: 60, now: t0 + .seconds(6))
        #expect(cache.count == 3)
        #expect(cache.lookup(name: names[0], type: .a, now: t0 + .seconds(6)) == nil)
        // Full again, nothing expired: the one closest to expiry (names[2]) goes.
        cache.store(.records([]), name: names[4], type: .a, ttl: 60, now: t0 + .seconds(7))
        #expect(cache.count == 3)
        #expect(cache.lookup(name: names[2], type: .a, now: t0 + .seconds(7)) == nil)
        #expect(cache.lookup(name: names[1], type: .a, now: t0 + .seconds(7)) != nil)
        // Replacing an entry does not evict.
        cache.store(.records([record]), name: names[1], type: .a, ttl: 60, now: t0 + .seconds(8))
        #expect(cache.count == 3)
        cache.removeAll()
        #expect(cache.count == 0)
    }
}
