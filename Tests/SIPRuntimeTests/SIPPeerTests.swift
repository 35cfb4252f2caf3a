import Testing
import NetworkIO
import SIPTransport
@testable import SIPRuntime

/// A ``SIPPeer`` is six words: the address's three (with the transport and the connection
/// flag in its meta word), the connection's number and the server name.
@Suite("SIPPeer in six words")
struct SIPPeerTests {
    @Test func sixWords() {
        #expect(MemoryLayout<SIPPeer>.size == 6 * 8)
    }

    @Test func everyPartReadsBackAndCanBeChanged() throws {
        let address = try SocketAddress("[2001:db8::5%4]:5061")
        var p = SIPPeer(transport: .tls, address: address, connection: ConnectionID(rawValue: 0), serverName: "sip.example.com")
        #expect(p.transport == .tls && p.address == address && p.address.scopeID == 4)
        #expect(p.connection == ConnectionID(rawValue: 0), "connection 0 is a connection, not none")
        #expect(p.serverName == "sip.example.com")
        p.connection = nil
        #expect(p.connection == nil && p.transport == .tls && p.address == address)
        p.transport = .udp
        p.address = try SocketAddress("192.0.2.1:5060")
        #expect(p.transport == .udp && p.address.description == "192.0.2.1:5060" && p.connection == nil)
        p.connection = ConnectionID(rawValue: .max)
        p.transport = .tcp
        #expect(p.connection == ConnectionID(rawValue: .max) && p.transport == .tcp && p.address.port == 5060)
        for t in TransportKind.allCases {
            p.transport = t
            #expect(p.transport == t && p.address.port == 5060 && p.connection == ConnectionID(rawValue: .max))
        }
    }

    @Test func equalExactlyWhenThePartsAre() throws {
        let a = try SocketAddress("127.0.0.1:5060")
        let base = SIPPeer(transport: .tcp, address: a)
        #expect(base == SIPPeer(transport: .tcp, address: a, connection: nil, serverName: nil))
        #expect(base != SIPPeer(transport: .udp, address: a))
        #expect(base != SIPPeer(transport: .tcp, address: a, connection: ConnectionID(rawValue: 0)))
        #expect(base != SIPPeer(transport: .tcp, address: a.withPort(5061)))
        #expect(base != SIPPeer(transport: .tcp, address: a, serverName: "x"))
        #expect(Set([base, base, SIPPeer(transport: .udp, address: a)]).count == 2)
        #expect(base.description == "tcp:127.0.0.1:5060")
    }
}
