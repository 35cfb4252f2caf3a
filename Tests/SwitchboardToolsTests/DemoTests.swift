import Synchronization
import Testing
import SIPMessage
@testable import SwitchboardTools

@Suite("switchboard demo")
struct DemoTests {
    @Test("registrar, proxy and two phones: register, call, hold, resume, hang up, drawn as a ladder", .timeLimit(.minutes(1)))
    func demo() async throws {
        let lines = Mutex<[String]>([])
        let ok = try await DemoRun.run { line in lines.withLock { $0.append(line) } }
        let out = lines.withLock { $0 }
        #expect(ok)
        let text = out.joined(separator: "\n")
        // The ladder shows the challenge, the call through the proxy, both re-INVITEs and the BYE.
        #expect(out.filter { $0.contains("401 REGISTER") }.count >= 1)
        #expect(out.filter { $0.contains("INVITE (sdp)") && !$0.contains("200") }.count == 6)   // 3 INVITEs, each on two legs
        #expect(out.filter { $0.contains("BYE") && !$0.contains("200") }.count == 2)
        #expect(text.contains("bob: peer answers recvonly (opus/48000)"))
        #expect(text.contains("bob: ended: the peer hung up"))
        #expect(text.contains("alice: unregistered"))
        // Arrows point the right way: alice's REGISTER goes right, towards the registrar.
        let register = try #require(out.first { $0.contains(" REGISTER ") && !$0.contains("401") && !$0.contains("200") })
        #expect(register.contains("------>|"))
    }
}
