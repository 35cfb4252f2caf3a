import Testing
import NetworkIO

@Suite("IPv4, IPv6 and IP addresses")
struct IPAddressTests {
    @Test func ipv4Text() {
        #expect(IPv4Address("192.0.2.1")?.value == 0xC000_0201)
        #expect(IPv4Address("0.0.0.0")?.description == "0.0.0.0")
        #expect(IPv4Address("255.255.255.255")?.bytes == [255, 255, 255, 255])
        for bad in ["", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1..2.3", "1.2.3.", "a.b.c.d", "1.2.3.4 ", "0001.2.3.4"] {
            #expect(IPv4Address(bad) == nil, "\(bad)")
        }
    }

    @Test func ipv6TextFollowsRFC5952() {
        let cases: [(String, String)] = [
            ("2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"),
            ("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"),  // the first of two equal runs
            ("2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"),  // a single zero group stays
            ("::", "::"),
            ("::1", "::1"),
            ("1::", "1::"),
            ("FE80::A:B", "fe80::a:b"),
            ("::ffff:192.0.2.1", "::ffff:192.0.2.1"),
            ("64:ff9b::192.0.2.33", "64:ff9b::c000:221"),
            ("1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"),
            ("1:0:0:2:0:0:0:3", "1:0:0:2::3"),
        ]
        for (input, canonical) in cases {
            #expect(IPv6Address(input)?.description == canonical, "\(input)")
        }
        for bad in ["", ":", ":::", "1:2:3:4:5:6:7", "1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", "g::1", "1:", ":1", "1:2:3:4:5:6:7::8:9",
                    "[::1]", "fe80::1%eth0", "::1.2.3", "1:2:3:4:5:6:7:1.2.3.4"] {
            #expect(IPv6Address(bad) == nil, "\(bad)")
        }
        #expect(IPv6Address(bytes: [UInt8](repeating: 0, count: 15)) == nil)
        #expect(IPv6Address("2001:db8::1")?.bytes == [0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 0, count: 11) + [1])
        #expect(IPAddress("[2001:db8::1]") == .v6(IPv6Address("2001:db8::1")!))
        #expect(IPAddress("192.0.2.1") == .v4(IPv4Address(192, 0, 2, 1)))
        #expect(IPAddress("example.com") == nil)
    }

    @Test func addressesFromAndToBytes() {
        let v4 = IPAddress(bytes: [192, 0, 2, 1])
        #expect(v4 == .v4(IPv4Address(192, 0, 2, 1)))
        #expect(v4?.bytes == [192, 0, 2, 1] && v4?.byteCount == 4 && v4?.isIPv6 == false && v4?.description == "192.0.2.1")
        let v6Bytes: [UInt8] = [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [1]
        let v6 = IPAddress(bytes: v6Bytes[...])
        #expect(v6 == IPAddress("2001:db8::1"))
        #expect(v6?.bytes == v6Bytes && v6?.byteCount == 16 && v6?.isIPv6 == true && v6?.description == "2001:db8::1")
        for count in [0, 1, 3, 5, 15, 17] {
            #expect(IPAddress(bytes: [UInt8](repeating: 1, count: count)) == nil, "\(count) bytes")
        }
        // An IPv4 address and the IPv6 address with the same leading bytes differ.
        #expect(IPAddress(bytes: [192, 0, 2, 1]) != IPAddress(bytes: [192, 0, 2, 1] + Array(repeating: 0, count: 12)))
    }

    @Test func packedWordsAreBigEndian() {
        let v4 = IPAddress.v4(IPv4Address(192, 0, 2, 1)).packed
        #expect(v4.high == 0xC000_0201_0000_0000 && v4.low == 0 && v4.length == 4)
        let v6 = IPAddress("2001:db8::1")!.packed
        #expect(v6.high == 0x2001_0DB8_0000_0000 && v6.low == 1 && v6.length == 16)
    }
}
