import Testing
@testable import NetworkIO

/// A ``SocketAddress`` is three words; every part reads back as it was given, and two
/// addresses are equal exactly when their parts are.
@Suite("SocketAddress in three words")
struct SocketAddressWordsTests {
    @Test func threeWords() {
        #expect(MemoryLayout<SocketAddress>.size == 3 * 8)
    }

    @Test func everyPartReadsBack() throws {
        let v4 = SocketAddress(.v4(IPv4Address(192, 0, 2, 255)), port: 65535, scopeID: 7)
        #expect(v4.ip == .v4(IPv4Address(192, 0, 2, 255)) && v4.port == 65535)
        #expect(v4.scopeID == 0, "IPv4 has no scope")
        #expect(!v4.isIPv6 && v4.description == "192.0.2.255:65535")
        let v6 = SocketAddress(.v6(IPv6Address(high: .max, low: 1)), port: 1, scopeID: .max)
        #expect(v6.ip == .v6(IPv6Address(high: .max, low: 1)) && v6.port == 1 && v6.scopeID == .max && v6.isIPv6)
        let parsed = try SocketAddress("[fe80::1%3]:5060")
        #expect(parsed.scopeID == 3 && parsed.port == 5060 && parsed.isIPv6)
        #expect(try SocketAddress(parsed.description) == parsed)
        // From the words, with foreign bits in the meta word ignored.
        let again = SocketAddress(high: v6.high, low: v6.low, meta: v6.meta | 0x00FF_0000_0000_0000)
        #expect(again == v6 && again.hashValue == v6.hashValue)
        #expect(v6.withPort(9).port == 9 && v6.withPort(9).scopeID == .max)
    }

    @Test func equalExactlyWhenThePartsAre() {
        let a = SocketAddress(.v4(IPv4Address(1)), port: 5060)
        // The same 32 bits as IPv6 (::1) is another address.
        let b = SocketAddress(.v6(IPv6Address(high: 0, low: 1)), port: 5060)
        #expect(a != b)
        #expect(a != SocketAddress(.v4(IPv4Address(1)), port: 5061))
        #expect(b != SocketAddress(.v6(IPv6Address(high: 0, low: 1)), port: 5060, scopeID: 2))
        #expect(a == SocketAddress(.v4(IPv4Address(0, 0, 0, 1)), port: 5060, scopeID: 9))
        #expect(Set([a, b, a]).count == 2)
        #expect(SocketAddress.wildcard(ipv6: true).isWildcard && SocketAddress.wildcard(ipv6: false).isWildcard && !a.isWildcard)
    }
}
