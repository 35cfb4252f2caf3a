import Testing
@testable import RTP

/// Reads the RTP packets of the shared corpus's classic pcap files: a tiny reader (24-byte
/// global header, 16-byte record headers, Ethernet or Linux cooked link layer, IPv4, UDP).
@Suite struct CaptureTests {
    struct Datagram {
        var source: UInt16
        var destination: UInt16
        var payload: [UInt8]
    }

    static func udpPayloads(_ file: [UInt8]) -> [Datagram]? {
        guard file.count >= 24 else { return nil }
        let magic = UInt32(file[0]) | UInt32(file[1]) << 8 | UInt32(file[2]) << 16 | UInt32(file[3]) << 24
        let little: Bool
        switch magic {
        case 0xA1B2_C3D4, 0xA1B2_3C4D: little = true
        case 0xD4C3_B2A1, 0x4D3C_B2A1: little = false
        default: return nil
        }
        func u32(_ i: Int) -> Int {
            let v = little
                ? UInt32(file[i]) | UInt32(file[i + 1]) << 8 | UInt32(file[i + 2]) << 16 | UInt32(file[i + 3]) << 24
                : UInt32(file[i]) << 24 | UInt32(file[i + 1]) << 16 | UInt32(file[i + 2]) << 8 | UInt32(file[i + 3])
            return Int(v)
        }
        let linkHeader: Int
        switch u32(20) {
        case 1: linkHeader = 14  // Ethernet
        case 113: linkHeader = 16  // Linux cooked capture
        default: return nil
        }
        var out: [Datagram] = []
        var i = 24
        while i + 16 <= file.count {
            let captured = u32(i + 8)
            let start = i + 16
            i = start + captured
            guard i <= file.count else { break }
            let ip = start + linkHeader
            guard captured >= linkHeader + 28, file[ip] >> 4 == 4, file[ip + 9] == 17 else { continue }
            let udp = ip + Int(file[ip] & 0x0F) * 4
            guard udp + 8 <= i else { continue }
            let sport = UInt16(file[udp]) << 8 | UInt16(file[udp + 1])
            let dport = UInt16(file[udp + 2]) << 8 | UInt16(file[udp + 3])
            let length = Int(UInt16(file[udp + 4]) << 8 | UInt16(file[udp + 5]))
            let end = min(i, udp + max(8, length))
            out.append(Datagram(source: sport, destination: dport, payload: Array(file[(udp + 8)..<end])))
        }
        return out
    }

    @Test func rtpPacketsOfRealCaptures() throws {
        let folder = Paths.corpus("pcaps/asterisk-testsuite")
        guard TestPaths.requirement("the corpus folder \(folder)", available: listDirectory(folder) != nil),
              let names = listDirectory(folder) else { return }
        var total = 0
        for name in names where name.hasSuffix(".pcap") {
            let file = try #require(readBytes(folder + "/" + name))
            let datagrams = try #require(Self.udpPayloads(file), "\(name) is not a readable pcap")
            struct Flow: Hashable { var source: UInt16; var destination: UInt16 }
            var last: [Flow: RTPPacket] = [:]
            var stats: [Flow: SourceState] = [:]
            var duplicates: [Flow: Int] = [:]
            var perFile = 0
            for d in datagrams where RTPDemultiplexer.classify(d.payload) == .rtp {
                let p = try RTPPacket(parsing: d.payload)
                #expect(p.serialized() == d.payload, "\(name): RTP does not re-serialize byte for byte")
                let flow = Flow(source: d.source, destination: d.destination)
                if let prev = last[flow] {
                    #expect(p.ssrc == prev.ssrc, "\(name): SSRC changed within a flow")
                    let step = p.sequenceNumber &- prev.sequenceNumber
                    if step == 0 {
                        // RFC 4733 §2.5.1.4: the end of a DTMF event is sent three times, same sequence.
                        #expect(p == prev, "\(name): different packets with sequence \(p.sequenceNumber)")
                        duplicates[flow, default: 0] += 1
                    } else {
                        #expect(step < 100, "\(name): sequence \(prev.sequenceNumber) → \(p.sequenceNumber)")
                    }
                }
                last[flow] = p
                if stats[flow] == nil { stats[flow] = SourceState(ssrc: p.ssrc, firstSequence: p.sequenceNumber) }
                stats[flow]!.update(sequence: p.sequenceNumber)
                total += 1
                perFile += 1
            }
            #expect(perFile > 0, "\(name): no RTP packet found")
            for (flow, s) in stats where s.received > 2 {
                #expect(s.isValid)
                #expect(Int(s.cumulativeLost) + duplicates[flow, default: 0] >= 0)
            }
        }
        #expect(total > 100)
    }
}
