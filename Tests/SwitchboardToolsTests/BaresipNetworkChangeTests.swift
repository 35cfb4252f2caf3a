import Foundation
import MediaRuntime
import NetworkIO
import SIPMessage
import SIPRuntime
import SwitchboardTestSupport
import Testing

@testable import SwitchboardTools
import Switchboard

/// A network change in a call with baresip: our address moves from 127.0.0.1 to 127.0.0.2
/// mid-call; baresip accepts the re-INVITE, sends its audio to the new address and its BYE to
/// the new Contact. Skipped without baresip, except under CI, where that fails.
@Suite("Network change with baresip", .enabled(if: Baresip.available || TestPaths.isCI, "baresip is not installed: baresip interop skipped"),
       .requires("baresip", { Baresip.available }))
struct BaresipNetworkChangeTests {
    @Test("reconnecting and back: baresip's audio and BYE follow us to 127.0.0.2", .timeLimit(.minutes(1)))
    func followsTheNewAddress() async throws {
        let b = try await Baresip.start(options: "answermode=auto;audio_codecs=pcmu")
        defer { Baresip.stop(b) }
        let lines = BaresipTests.Lines()
        let config = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]),
                                                identity: try SIPURI("sip:switchboard@127.0.0.1"), sessionTimer: nil)
        let media = PhoneMediaOptions(configuration: MediaSessionConfiguration(localAddress: "127.0.0.1", portRange: 10000...19999), input: .tone(frequency: 1000))
        let phone = try Phone(name: "sb", configuration: config, codecs: [.pcmu, .telephoneEvent], media: media, report: { lines.append($0) })
        defer { phone.close() }
        let call = await phone.dial(try SIPURI("sip:b@127.0.0.1:\(b.sipPort)"))
        try await call.waitUntil(timeout: .seconds(10)) { $0.isEstablished }
        try #require(await phone.wait(timeout: .seconds(10)) { (call.statistics()?.call.received.packets ?? 0) > 20 },
                     "\(lines.all)\n\(Baresip.log(b.rundir))")
        let change = try await phone.networkChanged(to: "127.0.0.2", timeout: .seconds(5))
        #expect(change.reconnected.map(\.id) == [call.id], "\(lines.all)\n\(Baresip.log(b.rundir))")
        #expect(call.state.isEstablished)
        // The new media session (bound to 127.0.0.2) hears baresip.
        #expect(await phone.wait(timeout: .seconds(10)) { (call.statistics()?.call.received.packets ?? 0) > 20 },
                "\(String(describing: call.statistics()))\n\(Baresip.log(b.rundir))")
        // baresip hangs up: its BYE goes to our new Contact (the old address no longer listens).
        _ = try await Baresip.ctl(b, ["hangup"], wait: 1)
        let end = try await call.waitUntil(timeout: .seconds(10)) { $0.isEnded }
        #expect(end == .ended(.hungUp(by: .remote)), "\(lines.all)")
    }
}
