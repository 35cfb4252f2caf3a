import SDP
import Testing

@Suite("Addresses in o=, c= and a=rtcp")
struct AddressTests {
    private func connection(_ value: String) -> Result<Connection?, SDPParseError> {
        var lines = minimalLines
        lines[3] = "c=" + value
        do {
            return .success(try SessionDescription.parse(sdp(lines)).connection)
        } catch {
            return .failure(error)
        }
    }

    @Test(arguments: [
        "IN IP4 192.0.2.1", "IN IP4 0.0.0.0", "IN IP4 255.255.255.255", "IN IP4 localhost",
        "IN IP4 host.example.com", "IN IP4 sip-gw_1.example.org.", "IN IP4 224.2.1.1/127",
        "IN IP4 224.2.1.1/127/3", "IN IP6 ::", "IN IP6 ::1", "IN IP6 2001:db8::1",
        "IN IP6 2001:0db8:85a3:0000:0000:8a2e:0370:7334", "IN IP6 ::ffff:192.0.2.2", "IN IP6 fe80::1:2",
        "IN IP6 1::", "IN IP6 1:2:3:4:5:6:7::", "IN IP6 host.example.com", "IN IP6 FF15::101/3",
        "IN X25 anything/with/slashes", "ATM NSAP 47.0091.8100.0000.0060.3e64.fd01.0060.3e64.fd01.00",
    ])
    func acceptedConnections(value: String) throws {
        let parsed = try connection(value).get()
        let c = try #require(parsed)
        #expect(c.description == value)
    }

    @Test(arguments: [
        "IN IP4 256.1.1.1", "IN IP4 1.2.3", "IN IP4 1.2.3.4.5", "IN IP4 ::1", "IN IP4 a..b", "IN IP4 -",
        "IN IP4 -host.example.com", "IN IP4 host_name$", "IN IP4 1.2.3.4/", "IN IP4 1.2.3.4/1/2/3", "IN IP4",
        "IN IP4 1.2.3.4 extra", "IN IP6 :::", "IN IP6 1:::2", "IN IP6 2001:db8::1::2", "IN IP6 12345::",
        "IN IP6 g::1", "IN IP6 1:2:3:4:5:6:7:8:9", "IN IP6 1:2:3:4:5:6:7", "IN IP6 192.0.2.1",
        "IN IP6 ::ffff:999.0.2.2", "IN IP6 :1::", "IN IP6 1::2:", "IN IP6 1.2.3.4::", "IN IP6 ::1/x",
        "I\"N IP4 192.0.2.1",
    ])
    func rejectedConnections(value: String) throws {
        guard case .failure(let error) = connection(value) else {
            Issue.record("\(value) should be rejected")
            return
        }
        #expect(error.rule == .connection)
        #expect(error.line == 4)
    }

    @Test func multicastFieldsAreParsed() throws {
        let v4 = try #require(try connection("IN IP4 224.2.1.1/127/3").get())
        #expect(v4.address == "224.2.1.1")
        #expect(v4.ttl == 127)
        #expect(v4.numberOfAddresses == 3)
        let v6 = try #require(try connection("IN IP6 ff15::101/3").get())
        #expect(v6.address == "ff15::101")
        #expect(v6.ttl == nil)
        #expect(v6.numberOfAddresses == 3)
        #expect(v6.connectionAddress == "ff15::101/3")
        let other = try #require(try connection("IN X25 a/b").get())
        #expect(other.address == "a/b")
    }

    @Test func originAcceptsIPv6AndNames() throws {
        var lines = minimalLines
        lines[1] = "o=bob 1 2 IN IP6 ::ffff:192.0.2.2"
        #expect(try parseOK(sdp(lines)).origin.address == "::ffff:192.0.2.2")
        lines[1] = "o=bob 1 2 IN IP4 pbx.example.net"
        #expect(try parseOK(sdp(lines)).origin.address == "pbx.example.net")
        lines[1] = "o=bob 1 2 IN IP4 10.0.0.1/127"
        #expect(parseError(sdp(lines))?.rule == .origin)
    }

    @Test func connectionSerializationFollowsAddressType() {
        #expect(Connection(addressType: .ip4, address: "224.2.1.1", ttl: 16, numberOfAddresses: 2).description == "IN IP4 224.2.1.1/16/2")
        #expect(Connection(addressType: .ip4, address: "224.2.1.1", numberOfAddresses: 2).description == "IN IP4 224.2.1.1")
        #expect(Connection(addressType: .ip6, address: "ff15::1", ttl: 16, numberOfAddresses: 2).description == "IN IP6 ff15::1/2")
        #expect(Connection.ip4("192.0.2.9") == Connection(networkType: "IN", addressType: "IP4", address: "192.0.2.9"))
        #expect(Connection.ip4("0.0.0.0").isUnspecified)
        #expect(Connection.ip6("::").isUnspecified)
        #expect(!Connection.ip4("192.0.2.9").isUnspecified)
        #expect(!Connection(addressType: "X", address: "0.0.0.0").isUnspecified)
    }
}
