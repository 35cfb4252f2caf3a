import Testing
import PacketCapture
import SIPMessage

@Suite struct DecoderTests {
    let udpSIP = Build.udp(5070, 40000, Build.sipInvite)

    @Test func linkTypes() throws {
        let v4 = Build.ipv4(proto: 17, udpSIP), v6 = Build.ipv6(next: 17, udpSIP)
        let sll: [UInt8] = [0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0] + Build.be16(0x0800) + v4
        let sll2: [UInt8] = Build.be16(0x86DD) + [0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0] + v6
        let cases: [(LinkType, [UInt8])] = [
            (.ethernet, Build.ethernet(v4)), (.ethernet, Build.ethernet(v4, vlans: [100])), (.ethernet, Build.ethernet(v6, v6: true, vlans: [100, 200])),
            (.linuxSLL, sll), (.linuxSLL2, sll2), (.raw, v4), (.raw, v6), (.ipv4, v4), (.ipv6, v6),
            (.null, [2, 0, 0, 0] + v4), (.null, [0, 0, 0, 2] + v4), (.null, [30, 0, 0, 0] + v6), (.loop, [0, 0, 0, 2] + v4),
        ]
        for (i, (link, data)) in cases.enumerated() {
            let r = decodeAll([Build.frame(i + 1, data, link: link)])
            #expect(r.messages.count == 1, "case \(i) \(link)")
            #expect(r.anomalies.isEmpty, "case \(i)")
            guard let m = r.messages.first else { continue }
            #expect(m.transport == .udp && m.frameNumber == i + 1)
            #expect(m.destination.port == 40000)
            #expect(m.message.method == .invite)
        }
        let v6msg = try #require(decodeAll([Build.frame(1, v6, link: .ipv6)]).messages.first)
        #expect(v6msg.source.description == "[2001:db8::1]:5070")
        #expect(v6msg.timestamp == CaptureTimestamp(seconds: 1_700_000_001, nanoseconds: 0))
    }

    @Test func nonSIPAndBrokenSIP() {
        let hello = Build.frame(1, Build.ethernet(Build.ipv4(proto: 17, Build.udp(1, 2, Array("hello".utf8)))))
        let broken = Build.frame(2, Build.ethernet(Build.ipv4(proto: 17, Build.udp(1, 2, Array("INVITE sip:a@b SIP/2.0\r\nContent-Length: x\r\n\r\n".utf8)))))
        let arp = Build.frame(3, [UInt8](repeating: 0xFF, count: 12) + Build.be16(0x0806) + [UInt8](repeating: 0, count: 28))
        let r = decodeAll([hello, broken, arp])
        #expect(r.messages.isEmpty)
        #expect(r.counters.nonSIPPayloads == 1)
        #expect(r.counters.parseErrors == 1)
        #expect(r.counters.nonIPFrames == 1)
        guard case .sipParseError = r.anomalies.first?.kind else { Issue.record("expected a parse error anomaly"); return }
    }

    @Test func truncatedIPIsAnAnomaly() {
        let full = Build.ethernet(Build.ipv4(proto: 17, udpSIP))
        let r = decodeAll([Build.frame(1, Array(full.prefix(60)))])
        #expect(r.messages.isEmpty)
        guard case .truncated = r.anomalies.first?.kind else { Issue.record("expected truncated"); return }
    }

    @Test func ipv4FragmentsOutOfOrder() {
        let u = udpSIP
        let f = [(256, Array(u[256...]), false), (0, Array(u[0..<128]), true), (128, Array(u[128..<256]), true)]
        let frames = f.enumerated().map { i, x in Build.frame(i + 1, Build.ethernet(Build.ipv4(proto: 17, x.1, id: 7, fragment: (x.0, x.2)))) }
        let r = decodeAll(frames)
        #expect(r.messages.count == 1)
        #expect(r.messages.first?.frameNumber == 3)
        #expect(r.counters.fragments == 3 && r.counters.datagramsReassembled == 1)
        #expect(r.anomalies.isEmpty)
    }

    @Test func ipv4OverlappingFragmentsFirstArrivalWins() {
        let u = udpSIP
        var b = Array(u[64..<200])
        for i in 0..<64 { b[i] = UInt8(ascii: "X") }  // overlap with different bytes
        let frames = [
            Build.frame(1, Build.ethernet(Build.ipv4(proto: 17, Array(u[0..<128]), id: 9, fragment: (0, true)))),
            Build.frame(2, Build.ethernet(Build.ipv4(proto: 17, b, id: 9, fragment: (64, true)))),
            Build.frame(3, Build.ethernet(Build.ipv4(proto: 17, Array(u[200...]), id: 9, fragment: (200, false)))),
        ]
        let r = decodeAll(frames)
        #expect(r.messages.count == 1)
        #expect(r.messages.first?.message.serialized() == Build.sipInvite)
        guard case .overlappingFragments(identical: false, discarded: false) = r.anomalies.first?.kind else {
            Issue.record("expected an overlap anomaly, got \(r.anomalies)"); return
        }
    }

    @Test func ipv4FragmentTimeoutAndLimits() {
        let u = udpSIP
        let first = Build.frame(1, Build.ethernet(Build.ipv4(proto: 17, Array(u[0..<128]), id: 1, fragment: (0, true))))
        let later = Build.frame(40, Build.ethernet(Build.ipv4(proto: 17, Build.udp(1, 2, [1]))))
        let r = decodeAll([first, later])
        guard case .fragmentTimeout(count: 1) = r.anomalies.first?.kind else { Issue.record("expected a timeout: \(r.anomalies)"); return }
        #expect(r.anomalies.first?.frameNumber == 40)
        // Only two datagrams may be pending: the third evicts the oldest.
        var limits = CaptureDecoder.Limits()
        limits.maxPendingDatagrams = 2
        let frames = (1...3).map { Build.frame($0, Build.ethernet(Build.ipv4(proto: 17, Array(u[0..<128]), id: $0, fragment: (0, true)))) }
        let r2 = decodeAll(frames, limits: limits)
        guard case .fragmentsEvicted = r2.anomalies.first?.kind else { Issue.record("expected eviction: \(r2.anomalies)"); return }
    }

    static func ipv6Fragment(_ u: [UInt8], offset: Int, more: Bool, id: UInt32 = 0x1234) -> [UInt8] {
        let hopByHop: [UInt8] = [60, 0, 1, 4, 0, 0, 0, 0]
        let destOpts: [UInt8] = [44, 0, 1, 4, 0, 0, 0, 0]
        let frag: [UInt8] = [17, 0] + Build.be16(offset | (more ? 1 : 0)) + Build.be32(id)
        return Build.ethernet(Build.ipv6(next: 0, hopByHop + destOpts + frag + u), v6: true)
    }

    @Test func ipv6ExtensionHeadersAndFragments() {
        let u = udpSIP
        let frames = [
            Build.frame(1, Self.ipv6Fragment(Array(u[200...]), offset: 200, more: false)),
            Build.frame(2, Self.ipv6Fragment(Array(u[0..<200]), offset: 0, more: true)),
        ]
        let r = decodeAll(frames)
        #expect(r.messages.count == 1)
        #expect(r.counters.ipv6Packets == 2 && r.counters.datagramsReassembled == 1)
        #expect(r.anomalies.isEmpty)
    }

    @Test func ipv6OverlapDiscardsTheDatagram() {
        let u = udpSIP
        let frames = [
            Build.frame(1, Self.ipv6Fragment(Array(u[0..<200]), offset: 0, more: true)),
            Build.frame(2, Self.ipv6Fragment(Array(u[192...]), offset: 192, more: false)),
        ]
        let r = decodeAll(frames)
        #expect(r.messages.isEmpty)
        guard case .overlappingFragments(identical: true, discarded: true) = r.anomalies.first?.kind else {
            Issue.record("expected a discarding overlap: \(r.anomalies)"); return
        }
    }

    // MARK: TCP

    let r180 = Build.sipResponse(180), r200 = Build.sipResponse(200)

    func seg(_ n: Int, seq: UInt32, flags: UInt8 = 0x18, _ payload: [UInt8] = [], reverse: Bool = false) -> CaptureFrame {
        let t = Build.tcp(reverse ? 5060 : 33000, reverse ? 33000 : 5060, seq: seq, flags: flags, payload)
        return Build.frame(n, Build.ethernet(Build.ipv4(proto: 6, t, src: reverse ? Build.b4 : Build.a4, dst: reverse ? Build.a4 : Build.b4)))
    }

    @Test func tcpOutOfOrderAndRetransmissions() {
        let inv = Build.sipInvite
        let s1 = Array(inv[0..<100]), s2 = Array(inv[100...])
        let isn: UInt32 = 0xFFFF_FFF0  // crosses the sequence-number wrap
        let frames = [
            seg(1, seq: isn, flags: 0x02),
            seg(2, seq: 7000, flags: 0x12, reverse: true),
            seg(3, seq: isn &+ 1 &+ 100, s2),              // arrives before s1
            seg(4, seq: isn &+ 1, s1),                      // fills the hole: INVITE complete
            seg(5, seq: isn &+ 1, s1),                      // retransmission
            seg(6, seq: isn &+ 1 &+ 50, Array(inv[50...])), // partial retransmission
            seg(7, seq: 7001, r180, reverse: true),
            seg(8, seq: 7001 &+ UInt32(r180.count), r200, reverse: true),
            seg(9, seq: 7001, r180, reverse: true),         // duplicate
        ]
        let r = decodeAll(frames)
        #expect(r.messages.map { $0.message.statusCode ?? 0 } == [0, 180, 200])
        #expect(r.messages.map(\.frameNumber) == [4, 7, 8])
        #expect(r.messages.allSatisfy { $0.transport == .tcp })
        #expect(r.messages.first?.message.method == .invite)
        #expect(r.messages[1].source.port == 5060)
        #expect(r.counters.tcpRetransmissions == 3)
        #expect(r.counters.tcpGaps == 0)
        #expect(r.anomalies.isEmpty)
    }

    @Test func tcpGapIsReportedAndStreamResumes() {
        let inv = Build.sipInvite
        let s1 = Array(inv[0..<100]), s2 = Array(inv[100...])
        let base: UInt32 = 1001
        let after = base + UInt32(inv.count)
        let frames = [
            seg(1, seq: 1000, flags: 0x02),
            seg(2, seq: base, s1),
            // s2 is never captured
            seg(3, seq: after, r180),
            seg(4, seq: after + UInt32(r180.count), r200),
            seg(5, seq: after + UInt32(r180.count + r200.count), flags: 0x11),
        ]
        _ = s2
        let r = decodeAll(frames)
        #expect(r.messages.map { $0.message.statusCode ?? 0 } == [180, 200])
        #expect(r.counters.tcpGaps == 1)
        guard case .tcpGap(_, _, let bytes, let partial) = r.anomalies.first?.kind else { Issue.record("expected a gap: \(r.anomalies)"); return }
        #expect(bytes == s2.count && partial == 100)
        // With a small out-of-order budget the gap is skipped before the FIN.
        var limits = CaptureDecoder.Limits()
        limits.maxBufferedBytesPerFlow = r180.count
        let r2 = decodeAll(Array(frames.prefix(4)), limits: limits)
        #expect(r2.messages.map(\.frameNumber) == [4, 4])
        #expect(r2.counters.tcpGaps == 1)
    }

    @Test func tcpResetAndMidStreamStart() {
        // Capture begins mid-message: the framer resynchronizes on the next start line.
        let tail = Array(Build.sipInvite[40...])
        let frames = [
            seg(1, seq: 500, tail),
            seg(2, seq: 500 + UInt32(tail.count), r180),
            seg(3, seq: 500 + UInt32(tail.count + r180.count), Array(r200[0..<30])),
            seg(4, seq: 500 + UInt32(tail.count + r180.count + 30), flags: 0x04),
        ]
        let r = decodeAll(frames)
        #expect(r.messages.map { $0.message.statusCode ?? 0 } == [180])
        #expect(r.counters.parseErrors == 1)  // the partial INVITE, discarded
        #expect(r.anomalies.contains { if case .tcpIncompleteMessage(_, _, 30) = $0.kind { return true } else { return false } })
    }

    @Test func tcpLateRetransmissionAfterFINIsNotNewData() {
        let end = 101 + UInt32(r180.count)
        let frames = [
            seg(1, seq: 100, flags: 0x02),
            seg(2, seq: 101, r180),
            seg(3, seq: end, flags: 0x11),
            seg(4, seq: 101, r180),
            seg(5, seq: 9000, flags: 0x02),  // a new connection on the same ports
            seg(6, seq: 9001, r200),
        ]
        let r = decodeAll(frames)
        #expect(r.messages.map { $0.message.statusCode ?? 0 } == [180, 200])
        #expect(r.counters.tcpRetransmissions == 1)
        #expect(r.anomalies.isEmpty)
    }

    @Test func tcpFlowLimit() {
        var limits = CaptureDecoder.Limits()
        limits.maxTCPFlows = 1
        let frames = [seg(1, seq: 1, Array("x".utf8)), seg(2, seq: 1, Array("y".utf8), reverse: true)]
        let r = decodeAll(frames, limits: limits)
        guard case .tcpFlowEvicted = r.anomalies.first?.kind else { Issue.record("expected eviction: \(r.anomalies)"); return }
        #expect(r.counters.nonSIPPayloads == 2)
    }

    /// Found by the tcp-reassembly fuzzer: a start line split so that the first segment does not
    /// hold "SIP/2.0" ("I", then "NVITE sip:… SIP/2.0…") lost its first byte, and "NVITE" passed
    /// for a method. Bytes before detection are now held until the direction shows SIP.
    @Test func tcpStartLineSplitBeforeSIPVersion() {
        let inv = Build.sipInvite
        for cut in [1, 6, 20, 34] {
            let frames = [
                seg(1, seq: 100, flags: 0x02),
                seg(2, seq: 101, Array(inv[0..<cut])),
                seg(3, seq: 101 &+ UInt32(cut), Array(inv[cut...])),
            ]
            let r = decodeAll(frames)
            #expect(r.messages.count == 1, "cut at \(cut)")
            #expect(r.messages.first?.message.method == .invite, "cut at \(cut)")
            #expect(r.messages.first?.message.serialized() == inv, "cut at \(cut)")
            #expect(r.anomalies.isEmpty, "cut at \(cut): \(r.anomalies)")
        }
    }
}
