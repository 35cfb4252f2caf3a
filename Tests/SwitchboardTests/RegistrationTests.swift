import Testing
import Synchronization
import SIPMessage
import SIPAuth
import SIPDialog
import SIPRuntime
import SIPProxy
import NetworkIO
@testable import Switchboard
import SwitchboardTestSupport

/// A phone's registration as states to await, against our digest-authenticating registrar.
@Suite("Phone registration: states and outcomes")
struct RegistrationTests {
    static func registrar() throws -> SIPEndpoint {
        let box = Mutex<ProxyServer?>(nil)
        let endpoint = try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { e in
            box.withLock { $0 }?.handle(e)
        }
        let p = ProxyServer(configuration: .init(domain: "switchboard.test", users: ["alice": "alicepw"]))
        p.attach(endpoint)
        box.withLock { $0 = p }
        return endpoint
    }

    static func phone(password: String) throws -> Phone {
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: CallTests.fast),
                                           identity: try SIPURI("sip:alice@switchboard.test"),
                                           credentials: DigestClient(username: "alice", password: password))
        c.sessionTimer = nil
        return try Phone(name: "alice", configuration: c)
    }

    @Test("registers, its states stream in order, unregisters", .timeLimit(.minutes(1)))
    func registersAndUnregisters() async throws {
        let registrar = try Self.registrar()
        defer { registrar.close() }
        let alice = try Self.phone(password: "alicepw")
        defer { alice.close() }
        let states = alice.registrationStateStream
        #expect(alice.registrationState == .unregistered)
        try await alice.register(with: try SIPURI("sip:127.0.0.1:\(registrar.localAddresses[0].address.port)"), expires: 300)
        #expect(alice.registrationState.isRegistered)
        await alice.unregister(timeout: .seconds(5))
        #expect(alice.registrationState == .unregistered)
        alice.close()
        var seen: [RegistrationClient.State] = []
        for await s in states { seen.append(s) }
        #expect(seen.first == .unregistered)
        #expect(seen.contains(.registering) && seen.contains(where: \.isRegistered) && seen.contains(.unregistering), "\(seen)")
        #expect(seen.last == .unregistered)
    }

    @Test("a wrong password fails with bad credentials; nobody listening times out or fails", .timeLimit(.minutes(1)))
    func failures() async throws {
        let registrar = try Self.registrar()
        defer { registrar.close() }
        let wrong = try Self.phone(password: "nope")
        defer { wrong.close() }
        await #expect(throws: RegistrationError.failed(.badCredentials)) {
            try await wrong.register(with: try SIPURI("sip:127.0.0.1:\(registrar.localAddresses[0].address.port)"), timeout: .seconds(5))
        }
        let lonely = try Self.phone(password: "alicepw")
        defer { lonely.close() }
        let nobody = try SIPURI("sip:127.0.0.1:\(deadServerAddress().port)")
        do throws(RegistrationError) {
            try await lonely.register(with: nobody, timeout: .seconds(5))
            Issue.record("registered with nobody")
        } catch {
            let expected: [RegistrationError] = [.timedOut, .failed(.timeout), .failed(.transport)]
            #expect(expected.contains(error), "\(error)")
        }
    }
}
