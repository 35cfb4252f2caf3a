import Foundation
import NetworkIO
import PacketCapture
import Testing

@testable import CaptureAnalysis

/// A capture's SIP and RTCP as HEP packets: order, addresses, times, and RTCP filed with the
/// call whose SDP named its ports.
struct HEPExportTests {
    static let a = CaptureEndpoint(address: IPAddress("10.0.0.1")!, port: 5060)
    static let b = CaptureEndpoint(address: IPAddress("10.0.0.2")!, port: 5060)

    static func sip(_ start: String, cseq: String, sdp: String? = nil) -> [UInt8] {
        let body = sdp ?? ""
        return Array(("\(start)\r\nVia: SIP/2.0/UDP 10.0.0.1:5060;branch=z9hG4bK1\r\nFrom: <sip:a@x>;tag=1\r\nTo: <sip:b@x>\r\n"
            + "Call-ID: hep-call@x\r\nCSeq: \(cseq)\r\n" + (sdp == nil ? "" : "Content-Type: application/sdp\r\n")
            + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)").utf8)
    }

    static func sdp(_ ip: String, _ port: Int) -> String {
        "v=0\r\no=- 1 1 IN IP4 \(ip)\r\ns=-\r\nc=IN IP4 \(ip)\r\nt=0 0\r\nm=audio \(port) RTP/AVP 0\r\n"
    }

    /// An RTCP receiver report (version 2, PT 201, one SSRC).
    static let rtcp: [UInt8] = [0x80, 201, 0, 1, 0x12, 0x34, 0x56, 0x78]
    /// An RTP packet (PT 0): never exported.
    static let rtp: [UInt8] = [0x80, 0x00, 0, 1, 0, 0, 0, 160, 0x12, 0x34, 0x56, 0x78] + [UInt8](repeating: 0xFF, count: 160)

    @Test("SIP and RTCP exported in order, RTP left out, RTCP filed with its call when the SDP names its port")
    func export() throws {
        let path = NSTemporaryDirectory() + "hep-export-\(UUID().uuidString).pcapng"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let w = try CaptureWriter(path: path)
        func t(_ ms: Int64) -> CaptureTimestamp { CaptureTimestamp(seconds: 1_700_000_000, nanoseconds: ms * 1_000_000) }
        w.writeUDP(from: Self.a, to: Self.b, payload: Self.sip("INVITE sip:b@x SIP/2.0", cseq: "1 INVITE", sdp: Self.sdp("10.0.0.1", 4000)), time: t(0))
        w.writeUDP(from: Self.b, to: Self.a, payload: Self.sip("SIP/2.0 200 OK", cseq: "1 INVITE", sdp: Self.sdp("10.0.0.2", 6000)), time: t(10))
        w.writeUDP(from: CaptureEndpoint(address: IPAddress("10.0.0.1")!, port: 4000), to: CaptureEndpoint(address: IPAddress("10.0.0.2")!, port: 6000),
                   payload: Self.rtp, time: t(20))
        w.writeUDP(from: CaptureEndpoint(address: IPAddress("10.0.0.1")!, port: 4001), to: CaptureEndpoint(address: IPAddress("10.0.0.2")!, port: 6001),
                   payload: Self.rtcp, time: t(30))
        w.writeUDP(from: CaptureEndpoint(address: IPAddress("10.9.9.9")!, port: 7001), to: CaptureEndpoint(address: IPAddress("10.9.9.8")!, port: 7003),
                   payload: Self.rtcp, time: t(40))
        w.writeTCP(from: Self.a, to: Self.b, payload: Self.sip("BYE sip:b@x SIP/2.0", cseq: "2 BYE"), time: t(50))
        w.close()
        var got: [HEPPacket] = []
        let summary = try HEPExport.export(path: path, options: .init(agentID: 9, authKey: "k")) { got.append($0) }
        #expect(summary == HEPExport.Summary(sip: 3, rtcp: 2, rtcpCorrelated: 1, tooLarge: 0))
        #expect(got.map(\.payloadType) == [.sip, .sip, .rtcp, .rtcp, .sip])
        #expect(got.map(\.correlationID) == ["hep-call@x", "hep-call@x", "hep-call@x", nil, "hep-call@x"])
        #expect(got.map(\.ipProtocol) == [.udp, .udp, .udp, .udp, .tcp])
        #expect(got.map(\.microseconds) == [0, 10_000, 30_000, 40_000, 50_000] && got.allSatisfy { $0.seconds == 1_700_000_000 })
        #expect(got[0].source.description == "10.0.0.1:5060" && got[0].destination.description == "10.0.0.2:5060")
        #expect(got[2].payload == Self.rtcp && got[2].source.port == 4001)
        #expect(got.allSatisfy { $0.agentID == 9 && $0.authKey == "k" })
        // Every packet encodes and decodes back.
        for p in got { #expect(try HEPPacket(decoding: p.encoded()) == p) }
    }

    @Test("an unreadable file is a capture error, nothing sent")
    func unreadable() {
        var sent = 0
        #expect(throws: CaptureFileError.self) { try HEPExport.export(path: "/nonexistent/x.pcap") { _ in sent += 1 } }
        #expect(sent == 0)
    }
}
