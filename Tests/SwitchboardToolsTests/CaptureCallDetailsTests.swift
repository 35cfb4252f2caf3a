import Foundation
import Testing
import PacketCapture
import SwitchboardTestSupport
@testable import SwitchboardTools
@testable import CaptureAnalysis
import NetworkIO

/// Writes a synthetic capture (our pcapng writer) for the call-detail tests.
final class CallDetailCapture {
    let path = NSTemporaryDirectory() + "call-details-\(getpid())-\(UUID().uuidString).pcapng"
    let writer: CaptureWriter
    private var t: Int64 = 1_700_000_000_000_000_000

    init() throws { writer = try CaptureWriter(path: path) }
    deinit { unlink(path) }

    static func endpoint(_ last: UInt8, _ port: UInt16) -> CaptureEndpoint {
        CaptureEndpoint(address: IPAddress(bytes: [192, 0, 2, last])!, port: port)
    }

    func send(_ from: CaptureEndpoint, _ to: CaptureEndpoint, _ payload: [UInt8]) {
        t += 10_000_000
        writer.writeUDP(from: from, to: to, payload: payload, time: CaptureTimestamp(seconds: t / 1_000_000_000, nanoseconds: t % 1_000_000_000))
    }

    /// A SIP message from text with `\n` line ends; Content-Length added for the body.
    func sip(_ from: CaptureEndpoint, _ to: CaptureEndpoint, _ head: String, body: String = "") {
        let b = body.replacingOccurrences(of: "\n", with: "\r\n")
        let text = head.replacingOccurrences(of: "\n", with: "\r\n") + "Content-Length: \(b.utf8.count)\r\n\r\n" + b
        send(from, to, Array(text.utf8))
    }

    func run(_ view: CaptureCommand.View) -> CaptureCommand.Report {
        writer.close()
        return CaptureCommand.run(path: path, view: view)
    }
}

@Suite("switchboard capture: dialogs, media streams, Referred-By")
struct CaptureCallDetailsTests {
    static let a = CallDetailCapture.endpoint(1, 5060), b = CallDetailCapture.endpoint(2, 5060)

    static func request(_ method: String, _ id: String, cseq: Int, from: String = "fa", to: String? = nil, uri: String = "sip:bob@x",
                        extra: String = "") -> String {
        "\(method) \(uri) SIP/2.0\nVia: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bK\(id)\(method)\(cseq)\nFrom: <sip:alice@x>;tag=\(from)\n"
            + "To: <sip:bob@x>\(to.map { ";tag=\($0)" } ?? "")\nCall-ID: \(id)\nCSeq: \(cseq) \(method)\n\(extra)"
    }

    static func response(_ status: String, _ id: String, cseq: Int, method: String, to: String?, branch: String? = nil, extra: String = "") -> String {
        "SIP/2.0 \(status)\nVia: SIP/2.0/UDP 192.0.2.1;branch=\(branch ?? "z9hG4bK\(id)\(method)\(cseq)")\nFrom: <sip:alice@x>;tag=fa\n"
            + "To: <sip:bob@x>\(to.map { ";tag=\($0)" } ?? "")\nCall-ID: \(id)\nCSeq: \(cseq) \(method)\n\(extra)"
    }

    @Test func dialogsFollowForksFailuresByesAndSubscriptions() throws {
        let c = try CallDetailCapture()
        let (a, b) = (Self.a, Self.b)
        // Forked INVITE: two early dialogs, one confirmed by the 200, then ended by a BYE.
        c.sip(a, b, Self.request("INVITE", "fork", cseq: 1))
        c.sip(b, a, Self.response("180 Ringing", "fork", cseq: 1, method: "INVITE", to: "x"))
        c.sip(b, a, Self.response("183 Session Progress", "fork", cseq: 1, method: "INVITE", to: "y"))
        c.sip(b, a, Self.response("200 OK", "fork", cseq: 1, method: "INVITE", to: "x"))
        c.sip(a, b, Self.request("ACK", "fork", cseq: 1, to: "x"))
        c.sip(b, a, "BYE sip:alice@x SIP/2.0\nVia: SIP/2.0/UDP 192.0.2.2;branch=z9hG4bKbye\nFrom: <sip:bob@x>;tag=x\nTo: <sip:alice@x>;tag=fa\n"
            + "Call-ID: fork\nCSeq: 7 BYE\n")
        // Early dialog ended by a 486.
        c.sip(a, b, Self.request("INVITE", "busy", cseq: 1))
        c.sip(b, a, Self.response("180 Ringing", "busy", cseq: 1, method: "INVITE", to: "z"))
        c.sip(b, a, Self.response("486 Busy Here", "busy", cseq: 1, method: "INVITE", to: "z"))
        // A subscription ended by NOTIFY (Subscription-State: terminated).
        c.sip(a, b, Self.request("SUBSCRIBE", "sub", cseq: 1, extra: "Event: presence\n"))
        c.sip(b, a, Self.response("200 OK", "sub", cseq: 1, method: "SUBSCRIBE", to: "s"))
        c.sip(b, a, "NOTIFY sip:alice@x SIP/2.0\nVia: SIP/2.0/UDP 192.0.2.2;branch=z9hG4bKn1\nFrom: <sip:bob@x>;tag=s\nTo: <sip:alice@x>;tag=fa\n"
            + "Call-ID: sub\nCSeq: 1 NOTIFY\nEvent: presence\nSubscription-State: active;expires=60\n")
        let r = c.run(.calls)
        #expect(r.error == nil)
        let byID = Dictionary(uniqueKeysWithValues: r.analysis.calls.map { ($0.callID, $0) })
        typealias D = CaptureAnalyzer.Dialog
        #expect(byID["fork"]?.dialogs == [D(localTag: "fa", remoteTag: "x", state: .terminated, method: "INVITE", cseq: 1),
                                          D(localTag: "fa", remoteTag: "y", state: .early, method: "INVITE", cseq: 1)])
        #expect(byID["busy"]?.dialogs == [D(localTag: "fa", remoteTag: "z", state: .terminated, method: "INVITE", cseq: 1)])
        #expect(byID["sub"]?.dialogs == [D(localTag: "fa", remoteTag: "s", state: .confirmed, method: "SUBSCRIBE", cseq: 1)])

        // Text, JSON and the ladder header show them.
        let line = try #require(r.text.split(separator: "\n").first { $0.contains("  fork  ") })
        #expect(line.contains("dialogs=fa/x terminated (INVITE 1); fa/y early (INVITE 1)"))
        let json = try CaptureCorpus.jsonObject(r.json)
        let calls = try #require(json["calls"] as? [[String: Any]])
        let fork = try #require(calls.first { $0["callID"] as? String == "fork" })
        let dialogs = try #require(fork["dialogs"] as? [[String: Any]])
        #expect(dialogs.count == 2)
        #expect(dialogs.first?["localTag"] as? String == "fa" && dialogs.first?["remoteTag"] as? String == "x")
        #expect(dialogs.first?["state"] as? String == "terminated" && dialogs.first?["method"] as? String == "INVITE")
        #expect(dialogs.first?["cseq"] as? Int == 1)
        let ladder = CaptureCommand.run(path: c.path, view: .ladder("busy"))
        #expect(ladder.text.hasPrefix("Call-ID: busy  (rejected 486)  dialog fa/z terminated (INVITE 1)\n"))
        let ladderJSON = try CaptureCorpus.jsonObject(ladder.json)
        let first = try #require((ladderJSON["ladders"] as? [[String: Any]])?.first)
        #expect((first["dialogs"] as? [[String: Any]])?.first?["state"] as? String == "terminated")
    }

    @Test func subscriptionEndsWithATerminatedNotify() throws {
        let c = try CallDetailCapture()
        let (a, b) = (Self.a, Self.b)
        c.sip(a, b, Self.request("SUBSCRIBE", "sub", cseq: 1, extra: "Event: dialog\n"))
        c.sip(b, a, Self.response("202 Accepted", "sub", cseq: 1, method: "SUBSCRIBE", to: "s"))
        c.sip(b, a, "NOTIFY sip:alice@x SIP/2.0\nVia: SIP/2.0/UDP 192.0.2.2;branch=z9hG4bKn2\nFrom: <sip:bob@x>;tag=s\nTo: <sip:alice@x>;tag=fa\n"
            + "Call-ID: sub\nCSeq: 2 NOTIFY\nEvent: dialog\nSubscription-State: terminated;reason=timeout\n")
        let r = c.run(.calls)
        #expect(r.analysis.calls.first?.dialogs.map(\.description) == ["fa/s terminated (SUBSCRIBE 1)"])
    }

    @Test func referredByAloneLinksTheTriggeredCall() throws {
        let c = try CallDetailCapture()
        let (a, b) = (Self.a, Self.b)
        // Call "first": established, then Bob REFERs Alice elsewhere (Refer-To: carol).
        c.sip(a, b, Self.request("INVITE", "first", cseq: 1))
        c.sip(b, a, Self.response("200 OK", "first", cseq: 1, method: "INVITE", to: "x"))
        c.sip(b, a, "REFER sip:alice@x SIP/2.0\nVia: SIP/2.0/UDP 192.0.2.2;branch=z9hG4bKr\nFrom: <sip:bob@x>;tag=x\nTo: <sip:alice@x>;tag=fa\n"
            + "Call-ID: first\nCSeq: 2 REFER\nRefer-To: <sip:carol@y>\nReferred-By: \"Bob\" <sip:bob@x>;foo=bar\n")
        // Call "second": an INVITE to another URI than the Refer-To target (a proxy rewrote it),
        // carrying the REFER's Referred-By (compact form, other case): linked by that alone.
        c.sip(a, b, Self.request("INVITE", "second", cseq: 1, uri: "sip:carol-mobile@z", extra: "b: <sip:bob@X>\n"))
        // Call "third": Referred-By names someone who sent no REFER: not linked.
        c.sip(a, b, Self.request("INVITE", "third", cseq: 1, uri: "sip:dave@z", extra: "Referred-By: <sip:mallory@x>\n"))
        // Call "fourth": a re-INVITE-like request with a To tag is not an initial INVITE: not linked.
        c.sip(a, b, Self.request("INVITE", "fourth", cseq: 1, to: "q", uri: "sip:erin@z", extra: "Referred-By: <sip:bob@x>\n"))
        let r = c.run(.calls)
        let byID = Dictionary(uniqueKeysWithValues: r.analysis.calls.map { ($0.callID, $0) })
        #expect(byID["second"]?.linked == ["first"])
        #expect(byID["first"]?.linked == ["second"])
        #expect(byID["third"]?.linked == [])
        #expect(byID["fourth"]?.linked == [])
    }

    static func rtp(_ seq: UInt16, marker: Bool = false) -> [UInt8] {
        [0x80, marker ? 0x80 : 0x00, UInt8(seq >> 8), UInt8(seq & 0xFF), 0, 0, 0, 1, 0xAB, 0xCD, 0, 1] + [UInt8](repeating: 0xD5, count: 160)
    }
    static let rtcpSenderReport: [UInt8] = [0x80, 200, 0, 6] + [UInt8](repeating: 0, count: 24)

    @Test func mediaStreamsCountRTPAndRTCPPerAddress() throws {
        let c = try CallDetailCapture()
        let (a, b) = (Self.a, Self.b)
        let sdpA = "v=0\no=- 1 1 IN IP4 192.0.2.1\ns=-\nc=IN IP4 192.0.2.1\nt=0 0\nm=audio 4000 RTP/AVP 0\na=rtcp:4005\n"
        let sdpB = "v=0\no=- 2 2 IN IP4 192.0.2.2\ns=-\nc=IN IP4 192.0.2.2\nt=0 0\nm=audio 5000 RTP/AVP 0\na=rtcp-mux\n"
        let sdpC = "v=0\no=- 3 3 IN IP4 192.0.2.3\ns=-\nc=IN IP4 192.0.2.3\nt=0 0\nm=audio 6000 RTP/AVP 0\n"
        c.sip(a, b, Self.request("INVITE", "media", cseq: 1, extra: "Content-Type: application/sdp\n"), body: sdpA)
        c.sip(b, a, Self.response("200 OK", "media", cseq: 1, method: "INVITE", to: "x", extra: "Content-Type: application/sdp\n"), body: sdpB)
        let ra = CallDetailCapture.endpoint(1, 4000), rb = CallDetailCapture.endpoint(2, 5000)
        for s in 0..<3 { c.send(ra, rb, Self.rtp(UInt16(s), marker: s == 0)) }   // A → B: RTP
        c.send(rb, ra, Self.rtp(9))                                                // B → A: RTP
        c.send(CallDetailCapture.endpoint(1, 4005), rb, Self.rtcpSenderReport)      // A's RTCP port → B (muxed)
        c.send(CallDetailCapture.endpoint(1, 4005), rb, Self.rtcpSenderReport)
        c.send(rb, ra, Self.rtcpSenderReport)                                      // B (muxed) → A's RTP port: RTCP for B only
        c.send(ra, rb, [0x00, 0x01, 0x02, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0])          // not version 2: neither
        c.send(CallDetailCapture.endpoint(1, 4001), CallDetailCapture.endpoint(9, 9), Self.rtcpSenderReport)  // port+1 is not A's RTCP here
        // A second call whose stream has no a=rtcp: RTCP on port + 1.
        c.sip(a, b, Self.request("INVITE", "plain", cseq: 1, extra: "Content-Type: application/sdp\n"), body: sdpC)
        c.send(CallDetailCapture.endpoint(3, 6001), CallDetailCapture.endpoint(9, 9), Self.rtcpSenderReport)
        c.send(CallDetailCapture.endpoint(9, 9), CallDetailCapture.endpoint(3, 6000), Self.rtp(1))
        let r = c.run(.calls)
        let byID = Dictionary(uniqueKeysWithValues: r.analysis.calls.map { ($0.callID, $0) })
        let media = try #require(byID["media"]?.media)
        #expect(media.count == 2)
        let sa = try #require(media.first { $0.port == 4000 }), sb = try #require(media.first { $0.port == 5000 })
        #expect(sa.rtcpPort == 4005 && sa.rtcpAddress == "192.0.2.1" && !sa.rtcpMux)
        #expect(sa.rtpPackets == 4 && sa.rtcpPackets == 2)
        #expect(sb.rtcpPort == 5000 && sb.rtcpMux)
        #expect(sb.rtpPackets == 4 && sb.rtcpPackets == 3)
        let plain = try #require(byID["plain"]?.media.first)
        #expect(plain.rtcpPort == 6001 && plain.rtpPackets == 1 && plain.rtcpPackets == 1)
        let line = try #require(r.text.split(separator: "\n").first { $0.contains("  media  ") })
        #expect(line.contains("media=audio 192.0.2.1:4000 rtcp 192.0.2.1:4005 (4 RTP, 2 RTCP packets); audio 192.0.2.2:5000 rtcp 192.0.2.2:5000 mux (4 RTP, 3 RTCP packets)"))
        let json = try CaptureCorpus.jsonObject(r.json)
        let call = try #require((json["calls"] as? [[String: Any]])?.first { $0["callID"] as? String == "media" })
        let streams = try #require(call["media"] as? [[String: Any]])
        #expect(streams.map { $0["rtpPackets"] as? Int } == [4, 4])
        #expect(streams.map { $0["rtcpPackets"] as? Int } == [2, 3])
        #expect(streams.map { $0["rtcpMux"] as? Bool } == [false, true])
    }
}

@Suite("switchboard capture: corpus dialogs and media", .serialized,
       .enabled(if: CaptureCorpus.available, "../shared/corpora/pcaps is absent: capture corpus tests skipped"),
       .requires("the capture corpus", { CaptureCorpus.present }))
struct CaptureCallDetailsCorpusTests {
    @Test func tcpCallsHaveOneTerminatedInviteDialogEach() {
        let r = CaptureCommand.run(path: CaptureCorpus.path("sip-capture/sip-tcp.pcap"), view: .calls)
        #expect(r.analysis.calls.count == 5)
        for c in r.analysis.calls {
            #expect(c.dialogs.count == 1, "\(c.callID)")
            #expect(c.dialogs.first?.state == .terminated && c.dialogs.first?.method == "INVITE", "\(c.callID)")
            #expect(c.dialogs.first.map { !$0.localTag.isEmpty && !$0.remoteTag.isEmpty } == true)
        }
    }

    /// SIP_CALL_RTP_G711 holds RTP and RTCP: per stream, our counts equal tshark's (RTP streams
    /// from `-z rtp,streams`, RTCP frames by address and port).
    @Test func rtpAndRTCPCountsMatchTshark() async throws {
        let file = CaptureCorpus.path("wireshark-samplecaptures/SIP_CALL_RTP_G711")
        let r = CaptureCommand.run(path: file, view: .calls)
        let streams = r.analysis.calls.flatMap(\.media)
        #expect(streams.reduce(0) { $0 + $1.rtpPackets } > 1000)
        #expect(streams.reduce(0) { $0 + $1.rtcpPackets } > 0)
        guard TestPaths.requirement("tshark", available: Tshark.available), let tshark = Tshark.path else { return }
        let rtp = await ExternalTool.run(tshark, ["-r", file, "-q", "-z", "rtp,streams"], timeout: 60)
        #expect(rtp.ok)
        // "start end srcIP srcPort dstIP dstPort SSRC payload… pkts lost …": take the addresses and the packets.
        var tsharkStreams: [(src: String, dst: String, packets: Int)] = []
        for line in rtp.output.split(separator: "\n") {
            let f = line.split(separator: " ", omittingEmptySubsequences: true)
            guard f.count > 8, f[2].contains("."), let sport = Int(f[3]), let dport = Int(f[5]), f[6].hasPrefix("0x") else { continue }
            // Packets: the first integer field after the payload name(s), before "(x%)" loss.
            guard let pk = f[7...].firstIndex(where: { Int($0) != nil }), let packets = Int(f[pk]) else { continue }
            tsharkStreams.append(("\(f[2]):\(sport)", "\(f[4]):\(dport)", packets))
        }
        #expect(!tsharkStreams.isEmpty, "\(rtp.output)")
        let rtcp = await ExternalTool.run(tshark, ["-r", file, "-Y", "rtcp", "-T", "fields", "-e", "ip.src", "-e", "udp.srcport",
                                                   "-e", "ip.dst", "-e", "udp.dstport"], timeout: 60)
        #expect(rtcp.ok)
        let rtcpFrames = rtcp.output.split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }.filter { $0.count == 4 }
        #expect(!rtcpFrames.isEmpty)
        for s in streams {
            let rtpAddress = "\(s.address):\(s.port)", rtcpAddress = "\(s.rtcpAddress):\(s.rtcpPort)"
            let expectedRTP = tsharkStreams.filter { $0.src == rtpAddress || $0.dst == rtpAddress }.reduce(0) { $0 + $1.packets }
            let expectedRTCP = rtcpFrames.filter { "\($0[0]):\($0[1])" == rtcpAddress || "\($0[2]):\($0[3])" == rtcpAddress }.count
            #expect(s.rtpPackets == expectedRTP, "\(s)")
            #expect(s.rtcpPackets == expectedRTCP, "\(s)")
        }
    }
}
