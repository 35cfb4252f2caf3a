import Testing
@testable import NetworkIO

@Suite("SocketAddress")
struct SocketAddressTests {
    @Test func parsesIPv4WithPort() throws {
        let a = try SocketAddress("127.0.0.1:5060")
        #expect(a.ipString == "127.0.0.1")
        #expect(a.port == 5060)
        #expect(!a.isIPv6)
        #expect(a.description == "127.0.0.1:5060")
        #expect(try SocketAddress(ip: "127.0.0.1", port: 5060) == a)
        #expect(try SocketAddress("0.0.0.0:0").isWildcard)
    }

    @Test func parsesBracketedIPv6() throws {
        let a = try SocketAddress("[::1]:5061")
        #expect(a.isIPv6)
        #expect(a.ipString == "::1")
        #expect(a.port == 5061)
        #expect(a.description == "[::1]:5061")
        // The text form is canonical (inet_ntop), so equal addresses print alike.
        let b = try SocketAddress("[2001:DB8:0:0::1]:5060")
        #expect(b.description == "[2001:db8::1]:5060")
        #expect(b == (try SocketAddress(ip: "2001:db8::1", port: 5060)))
        #expect(try SocketAddress("[::]:0").isWildcard)
    }

    @Test func defaultPortAndScope() throws {
        #expect(try SocketAddress("192.0.2.1", defaultPort: 5060).description == "192.0.2.1:5060")
        #expect(try SocketAddress("[::1]", defaultPort: 5060).description == "[::1]:5060")
        #expect(try SocketAddress("::1", defaultPort: 5060).description == "[::1]:5060")
        let scoped = try SocketAddress("[fe80::1%3]:5060")
        #expect(scoped.scopeID == 3)
        #expect(scoped.description == "[fe80::1%3]:5060")
        #expect(scoped != (try SocketAddress("[fe80::1]:5060")))
        #expect(try SocketAddress(scoped.description) == scoped)
        #expect(try SocketAddress("[fe80::1%lo]:5060").scopeID != 0)
    }

    @Test(arguments: [
        "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:50a",
        "::1:5060", "[::1", "[::1]5060", "[127.0.0.1]:5060", "localhost:5060", "256.0.0.1:5060",
        "1.2.3:5060", "", ":5060", "[fe80::1%]:5060", "[fe80::1%nosuchif0]:5060",
    ])
    func rejectsInvalidText(_ text: String) {
        #expect(throws: SocketAddressError.self) { try SocketAddress(text) }
    }

    @Test func rejectsHostNames() {
        #expect(throws: SocketAddressError(text: "example.com", reason: "not a numeric IPv4 or IPv6 address")) {
            try SocketAddress(ip: "example.com", port: 5060)
        }
    }

    @Test func hashesByValue() throws {
        let set: Set<SocketAddress> = [try SocketAddress("127.0.0.1:1"), try SocketAddress("127.0.0.1:1"), try SocketAddress("127.0.0.1:2"), try SocketAddress("[::1]:1")]
        #expect(set.count == 3)
        #expect(try SocketAddress("127.0.0.1:1").withPort(2) == (try SocketAddress("127.0.0.1:2")))
    }

    @Test func partsAndWildcards() throws {
        let a = SocketAddress(.v4(IPv4Address(192, 0, 2, 1)), port: 5060)
        #expect(a == (try SocketAddress("192.0.2.1:5060")))
        #expect(a.ip == IPAddress("192.0.2.1") && a.scopeID == 0)
        // A scope applies to IPv6 only.
        #expect(SocketAddress(.v4(IPv4Address(192, 0, 2, 1)), port: 5060, scopeID: 3).scopeID == 0)
        let scoped = SocketAddress(IPAddress("fe80::1")!, port: 5060, scopeID: 3)
        #expect(scoped == (try SocketAddress("[fe80::1%3]:5060")))
        #expect(scoped.withPort(1).scopeID == 3)
        #expect(SocketAddress.wildcard(ipv6: false).description == "0.0.0.0:0")
        #expect(SocketAddress.wildcard(ipv6: true, port: 53).description == "[::]:53")
        #expect(SocketAddress.wildcard(ipv6: true).isWildcard && SocketAddress.wildcard(ipv6: false).isWildcard)
    }

    @Test func sockaddrRoundTrip() throws {
        for text in ["192.0.2.1:5060", "[2001:db8::1]:5061", "[fe80::1%1]:5062", "0.0.0.0:0"] {
            let a = try SocketAddress(text)
            let (storage, length) = a.sockaddr
            #expect(SocketAddress(storage: storage, length: length) == a, "\(text)")
        }
    }
}
