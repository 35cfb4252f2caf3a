import Foundation
import Media
import MediaRuntime
import NetworkIO
import SDP
import SIPDialog
import SIPMessage
import SIPRuntime
import SIPTransport
import SwitchboardTestSupport
import Testing

@testable import SwitchboardTools
import SIPLoad
import Switchboard

/// The phone's output names the quality warnings its media raises and clears: a call to a
/// `DialogServer` whose media session is reached through an impairing relay.
@Suite struct PhoneQualityTests {
    @Test("a phone prints \"quality warning raised: highPacketLoss\" while 10% is dropped, and \"cleared\" after", .timeLimit(.minutes(1)))
    func phonePrintsQualityWarnings() async throws {
        let relay = try ImpairingRelay()
        let config = MediaSessionConfiguration(localAddress: "127.0.0.1", portRange: 10000...19999, codecs: [.pcmu], rtcpMux: true,
                                               rtcpInterval: .milliseconds(200))
        let far = try MediaSession(configuration: config, input: .tone(frequency: 1000))
        // The far end answers with the relay's port; its session sends to the relay's other side.
        let server = try DialogServer(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]), ringing: false,
                                      handlers: .init(incoming: { _, offer in
            guard let offer, var d = try? SessionDescription.parse(offer.bytes), !d.media.isEmpty else { return .refuse(488) }
            let phonePort = d.media[0].port
            d.media[0].port = relay.portForB
            var caps = far.streamCapabilities()
            caps.port = relay.portForA
            var oa = OfferAnswer(capabilities: MediaCapabilities(address: "127.0.0.1", streams: [caps]), sessionID: 7)
            guard let answer = try? oa.receiveOffer(d), let audio = answer.negotiated.audio else { return .refuse(488) }
            return .accept(.sdp(answer.sdp.serialized()), then: {
                relay.start(a: phonePort, b: far.localPort)
                try? far.apply(audio)
            })
        }))
        defer {
            far.stop()
            server.close()
            relay.stop()
        }
        let lines = ReportLines()
        let phoneConfig = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]),
                                                     identity: try SIPURI("sip:caller@127.0.0.1"), sessionTimer: nil)
        let phone = try Phone(name: "caller", configuration: phoneConfig, codecs: [.pcmu],
                              media: PhoneMediaOptions(configuration: config, input: .tone(frequency: 440)), report: { lines.append($0) })
        defer { phone.close() }
        let key = await phone.call(try SIPURI("sip:far@127.0.0.1:\(server.endpoint.localAddresses[0].address.port)"))
        try #require(await phone.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(lines.all)")
        try #require(await phone.wait(timeout: .seconds(10)) { (phone.mediaStatistics(key)?.call.received.packets ?? 0) > 50 }, "\(lines.all)")
        #expect(lines.count("caller: quality warning") == 0, "\(lines.all)")
        relay.set(.dropEvery(10))
        #expect(await phone.wait(timeout: .seconds(10)) { lines.count("caller: quality warning raised: highPacketLoss") == 1 }, "\(lines.all)")
        relay.set(.none)
        #expect(await phone.wait(timeout: .seconds(10)) { lines.count("caller: quality warning cleared: highPacketLoss") == 1 }, "\(lines.all)")
        try await phone.agent.perform(key) { s throws(SessionError) in try s.bye() }
        #expect(await phone.wait(key, timeout: .seconds(10)) { $0 == .terminated(.localHangup) })
    }
}
