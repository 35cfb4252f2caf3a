import Testing
import PacketCapture
import RTP
@testable import Media

/// RTP packets of a capture with their capture times, read in place with PacketCapture.
struct CapturedRTP {
    var source: UInt16
    var destination: UInt16
    var packet: RTPPacket
    var time: Duration

    /// Ethernet (with one VLAN tag) or Linux cooked, IPv4, UDP; RTP by `RTPDemultiplexer`.
    static func read(_ path: String) throws -> [CapturedRTP] {
        let reader = try CaptureFileReader(path: path)
        var out: [CapturedRTP] = []
        while let f = try reader.nextFrame() {
            let d = f.data
            var off: Int
            switch f.linkType {
            case .ethernet:
                off = 14
                if d.count > 14 && d[12] == 0x81 && d[13] == 0x00 { off = 18 }
            case .linuxSLL: off = 16
            default: continue
            }
            guard d.count >= off + 28, d[off] >> 4 == 4, d[off + 9] == 17 else { continue }
            let udp = off + Int(d[off] & 0x0F) * 4
            guard d.count >= udp + 8 else { continue }
            let payload = Array(d[(udp + 8)...])
            guard RTPDemultiplexer.classify(payload) == .rtp, let p = try? RTPPacket(parsing: payload) else { continue }
            out.append(CapturedRTP(source: UInt16(d[udp]) << 8 | UInt16(d[udp + 1]), destination: UInt16(d[udp + 2]) << 8 | UInt16(d[udp + 3]),
                                   packet: p, time: .nanoseconds(f.timestamp.totalNanoseconds)))
        }
        return out
    }
}

@Suite struct CaptureReplayTests {
    /// Replays the arrival times of real G.711 streams through the buffer.
    @Test(arguments: [("MagicJack-_short_call.pcap", UInt16(49154), UInt16(54550)), ("MagicJack-_short_call.pcap", 54550, 49154),
                      ("SIP_CALL_RTP_G711", 4800, 40378), ("SIP_CALL_RTP_G711", 8000, 40376)])
    func realArrivalTimes(file: String, source: UInt16, destination: UInt16) throws {
        let path = TestPaths.corpus("pcaps/wireshark-samplecaptures/" + file)
        guard TestPaths.requireCorpus("pcaps/wireshark-samplecaptures/" + file) else { return }
        let flow = try CapturedRTP.read(path).filter { $0.source == source && $0.destination == destination && $0.packet.payloadType < 64 }
        #expect(flow.count > 400)
        // Independent expectations from the capture itself.
        let first = flow[0].packet.sequenceNumber
        let offsets = Set(flow.map { Int($0.packet.sequenceNumber &- first) })
        let span = offsets.max()! + 1
        let start = flow[0].time
        let arrivals = flow.map { Arrival(packet: JitterBufferPacket($0.packet), time: $0.time - start) }
        let duration = flow.last!.time - start
        let pulls = Int(JitterBuffer.seconds(duration) * 50) + 30
        let r = replay(arrivals, pulls: pulls)
        checkInvariants(r, distinctSent: span, first: first)
        #expect(r.stats.received == flow.count)
        #expect(r.stats.duplicates == flow.count - offsets.count)
        // Every packet the network delivered is played, except the few that came too late or
        // were dropped to follow the clock.
        #expect(Double(r.stats.late) / Double(span) < 0.03, "\(r.stats)")
        #expect(r.stats.lost <= span - offsets.count)
        #expect(Double(r.played.count) >= Double(offsets.count) * 0.95, "\(r.stats)")
        #expect(r.stats.maxDelay <= .milliseconds(220))
        #expect(r.stats.targetDelay >= .milliseconds(20) && r.stats.targetDelay <= .milliseconds(200))
        #expect(r.stats.observedFrameSamples == 160)
    }

    /// SIPp's `uac_pcap` audio (G.711 A-law, as recorded): every packet plays, in order.
    @Test func sippG711AStream() throws {
        let relative = "sipp/pcap-play/g711a.pcap"
        guard TestPaths.requireCorpus(relative) else { return }
        let flow = try CapturedRTP.read(TestPaths.corpus(relative)).filter { $0.packet.payloadType == 8 }
        #expect(flow.count == 236)
        let start = flow[0].time
        let r = replay(flow.map { Arrival(packet: JitterBufferPacket($0.packet), time: $0.time - start) },
                       pulls: Int(JitterBuffer.seconds(flow.last!.time - start) * 50) + 30)
        checkInvariants(r, distinctSent: 236, first: flow[0].packet.sequenceNumber)
        #expect(r.played.count + r.stats.dropped == 236, "\(r.stats)")
        #expect(r.stats.late == 0 && r.stats.lost == 0)
    }
}
