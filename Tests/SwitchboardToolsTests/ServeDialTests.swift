import Testing
import SIPRuntime
import SIPTransport
@testable import SwitchboardTools
import NetworkIO

@Suite("switchboard serve and dial")
struct ServeDialTests {
    @Test func listenSpecifications() throws {
        #expect(try ListenSpec.parse("tcp:127.0.0.1:5070") == .tcp(try SocketAddress(ip: "127.0.0.1", port: 5070)))
        #expect(try ListenSpec.parse("udp:[::1]:5080") == .udp(try SocketAddress(ip: "::1", port: 5080)))
        #expect(try ListenSpec.parse("UDP:127.0.0.1") == .udp(try SocketAddress(ip: "127.0.0.1", port: 5060)))
        #expect(throws: ToolError.self) { try ListenSpec.parse("sctp:127.0.0.1:5060") }
        #expect(throws: (any Error).self) { try ListenSpec.parse("127.0.0.1") }
    }

    @Test(.timeLimit(.minutes(1)), arguments: ["udp", "tcp"])
    func dialAgainstServe(_ transport: String) async throws {
        let serve = try ServeCommand(listen: [try ListenSpec.parse("\(transport):127.0.0.1:0")], answer: 200)
        defer { serve.endpoint.close() }
        let local = try #require(serve.endpoint.localAddresses.first)
        #expect(local.transport.viaToken.lowercased() == transport)
        let r = try await DialCommand.run(target: "sip:test@127.0.0.1:\(local.address.port)", count: 50, rate: 500,
                                          listen: try ListenSpec.parse("\(transport):127.0.0.1:0"), timeout: .seconds(20))
        #expect(r.succeeded == 50, "\(r.failures)")
        #expect(serve.server.statistics.byes == 50)
        #expect(serve.summary().contains("invites=50 acks=50 byes=50"))
    }

    @Test(.timeLimit(.minutes(1)))
    func dialResolvesHostNames() async throws {
        // "localhost" with an explicit port: RFC 3263 takes A/AAAA only, answered from /etc/hosts.
        let serve = try ServeCommand(listen: [try ListenSpec.parse("udp:127.0.0.1:0")], answer: 200)
        defer { serve.endpoint.close() }
        let port = try #require(serve.endpoint.localAddresses.first).address.port
        let r = try await DialCommand.run(target: "sip:test@localhost:\(port)", count: 5, rate: 100,
                                          listen: try ListenSpec.parse("udp:127.0.0.1:0"), timeout: .seconds(20))
        #expect(r.succeeded == 5, "\(r.failures)")
    }
}
