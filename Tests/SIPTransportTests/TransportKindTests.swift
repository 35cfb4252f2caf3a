import Testing
import SIPTransport
import NetworkIO

@Suite("TransportKind and TransportError")
struct TransportKindTests {
    @Test func transportKinds() {
        #expect(TransportKind.udp.viaToken == "UDP")
        #expect(TransportKind.tcp.viaToken == "TCP")
        #expect(TransportKind.tls.viaToken == "TLS")
        #expect(!TransportKind.udp.isReliable)
        #expect(TransportKind.tcp.isReliable && TransportKind.tls.isReliable)
        #expect(TransportKind.tls.defaultPort == 5061 && TransportKind.udp.defaultPort == 5060)
    }

    @Test func errorsDescribeThemselves() {
        let e = TransportError.system(SystemCallError(call: "bind", code: 98))
        #expect(e.description.contains("bind"))
        #expect(e.description.contains("Address already in use"))
    }
}
