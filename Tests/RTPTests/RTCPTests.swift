import Testing
@testable import RTP

@Suite struct RTCPTests {
    static let reportBlockHex = "00 00 00 02 | 05 FF FF FE | 00 01 00 10 | 00 00 00 20 | B7 05 20 00 | 00 05 40 00"
    static let reportBlock = RTCPReportBlock(
        ssrc: 2, fractionLost: 5, cumulativeLost: -2, extendedHighestSequence: 0x1_0010, jitter: 32,
        lastSR: 0xB705_2000, delaySinceLastSR: 0x0005_4000)

    static let srHex = "81 C8 00 0C | 00 00 00 01 | 83 AA 7E 80 | 80 00 00 00 | 00 00 A0 00 | 00 00 00 0A | 00 00 06 40 | " + reportBlockHex
    static let rrHex = "81 C9 00 07 | 00 00 00 03 | " + reportBlockHex
    static let sdesHex = "81 CA 00 05 | 00 00 00 01 | 01 07 61 6C 69 63 65 40 68 | 06 02 73 62 | 00 00 00"
    static let byeHex = "81 CB 00 03 | 00 00 00 01 | 04 62 79 65 | 21 00 00 00"
    static let appHex = "85 CC 00 03 | 00 00 00 01 | 54 45 53 54 | 01 02 03 04"
    static let xrHex = "80 CF 00 0D | 00 00 00 01 | 07 00 00 08 | 00 00 00 02 | 0A 14 1E 28 | 00 32 01 F4 | 00 64 00 0A | EC B0 7F 10 | 5D 7F 2A 28 | A5 00 00 28 | 00 50 00 C8 | 04 00 00 02 | 83 AA 7E 80 | 80 00 00 00"
    static let fbHex = "81 CD 00 02 | 00 00 00 01 | 00 00 00 02"

    static let voip = XRVoIPMetrics(
        ssrc: 2, lossRate: 10, discardRate: 20, burstDensity: 30, gapDensity: 40, burstDuration: 50,
        gapDuration: 500, roundTripDelay: 100, endSystemDelay: 10, signalLevel: -20, noiseLevel: -80,
        residualEchoReturnLoss: 127, gmin: 16, rFactor: 93, externalRFactor: 127, mosLQ: 42, mosCQ: 40,
        receiverConfiguration: 0xA5, jitterBufferNominal: 40, jitterBufferMaximum: 80,
        jitterBufferAbsoluteMaximum: 200)

    /// Parses a compound packet that need not start with a report.
    func single(_ h: String) throws -> RTCPPacket {
        let c = try RTCPCompoundPacket(parsing: hex(h), requireLeadingReport: false)
        #expect(c.packets.count == 1)
        #expect(c.serialized() == hex(h))
        return c.packets[0]
    }

    @Test func senderReport() throws {
        let p = try single(Self.srHex)
        #expect(p == .senderReport(RTCPSenderReport(
            ssrc: 1, ntpTimestamp: NTPTimestamp(seconds: 0x83AA_7E80, fraction: 0x8000_0000),
            rtpTimestamp: 0xA000, packetCount: 10, octetCount: 1600, reports: [Self.reportBlock])))
        let bare = try single("80 C8 00 06 | 00 00 00 01 | 83 AA 7E 80 | 80 00 00 00 | 00 00 A0 00 | 00 00 00 0A | 00 00 06 40")
        guard case .senderReport(let sr) = bare else { Issue.record("not an SR"); return }
        #expect(sr.reports.isEmpty)
        #expect(sr.ntpTimestamp.sinceUnixEpoch == .seconds(0x83AA_7E80 - 2_208_988_800) + .milliseconds(500))
    }

    @Test func receiverReportWithProfileExtension() throws {
        #expect(try single(Self.rrHex) == .receiverReport(RTCPReceiverReport(ssrc: 3, reports: [Self.reportBlock])))
        let withExt = try single("81 C9 00 08 | 00 00 00 03 | " + Self.reportBlockHex + " | CA FE BA BE")
        #expect(withExt == .receiverReport(RTCPReceiverReport(ssrc: 3, reports: [Self.reportBlock], profileExtension: [0xCA, 0xFE, 0xBA, 0xBE])))
    }

    @Test func cumulativeLostIs24BitSigned() throws {
        let blocks: [(String, Int32)] = [("7F FF FF", 0x7F_FFFF), ("80 00 00", -0x80_0000), ("00 00 00", 0), ("FF FF FF", -1)]
        for (bytes, value) in blocks {
            let p = try single("81 C9 00 07 | 00 00 00 03 | 00 00 00 02 | 00 \(bytes) | 00 00 00 00 | 00 00 00 00 | 00 00 00 00 | 00 00 00 00")
            guard case .receiverReport(let rr) = p else { Issue.record("not an RR"); return }
            #expect(rr.reports[0].cumulativeLost == value)
        }
        // out-of-range values are clamped on output
        var block = Self.reportBlock
        block.cumulativeLost = 10_000_000
        let bytes = try #require(RTCPCompoundPacket(packets: [.receiverReport(RTCPReceiverReport(ssrc: 1, reports: [block]))]).serialized())
        #expect(Array(bytes[13..<16]) == [0x7F, 0xFF, 0xFF])
    }

    @Test func sourceDescription() throws {
        let p = try single(Self.sdesHex)
        let chunk = RTCPSDESChunk(ssrc: 1, items: [
            RTCPSDESItem(type: SDESItemType.cname, text: "alice@h"), RTCPSDESItem(type: SDESItemType.tool, text: "sb"),
        ])
        #expect(p == .sourceDescription(RTCPSourceDescription(chunks: [chunk])))
        #expect(chunk.cname == "alice@h")
        // a chunk whose items end on a word boundary needs a whole word of nulls; two chunks
        let two = "82 CA 00 05 | 00 00 00 01 | 01 02 61 62 | 00 00 00 00 | 00 00 00 02 | 00 00 00 00"
        #expect(try single(two) == .sourceDescription(RTCPSourceDescription(chunks: [
            RTCPSDESChunk(ssrc: 1, items: [RTCPSDESItem(type: 1, value: [0x61, 0x62])]),
            RTCPSDESChunk(ssrc: 2, items: []),
        ])))
        #expect(RTCPSDESItem(type: 2, value: [0xFF]).text == nil)
    }

    @Test func bye() throws {
        let p = try single(Self.byeHex)
        #expect(p == .bye(RTCPBye(ssrcs: [1], reasonText: "bye!")))
        guard case .bye(let b) = p else { return }
        #expect(b.reasonText == "bye!")
        #expect(try single("82 CB 00 02 | 00 00 00 01 | 00 00 00 02") == .bye(RTCPBye(ssrcs: [1, 2])))
        #expect(try single("80 CB 00 00") == .bye(RTCPBye(ssrcs: [])))
    }

    @Test func app() throws {
        #expect(try single(Self.appHex) == .app(RTCPApp(subtype: 5, ssrc: 1, name: Array("TEST".utf8), data: [1, 2, 3, 4])))
    }

    @Test func extendedReportWithVoIPMetrics() throws {
        let p = try single(Self.xrHex)
        let xr = RTCPExtendedReport(ssrc: 1, blocks: [
            .voipMetrics(Self.voip),
            .unknown(blockType: 4, typeSpecific: 0, content: hex("83 AA 7E 80 80 00 00 00")),
        ])
        #expect(p == .extendedReport(xr))
        #expect(xr.voipMetrics == Self.voip)
        // VoIP Metrics with a wrong block length
        expectRTCPError(hex("80 CF 00 02 | 00 00 00 01 | 07 00 00 00 | 00 00 00 00"), .extendedReport, at: 10, requireLeadingReport: false)
        // block longer than the packet
        expectRTCPError(hex("80 CF 00 02 | 00 00 00 01 | 04 00 00 02 | 00 00 00 00"), .extendedReport, at: 10, requireLeadingReport: false)
    }

    @Test func unknownPacketTypeKeptRaw() throws {
        #expect(try single(Self.fbHex) == .unknown(RTCPUnknownPacket(packetType: 205, count: 1, body: hex("00 00 00 01 00 00 00 02"))))
    }

    @Test func compoundPacket() throws {
        let bytes = hex(Self.srHex + Self.sdesHex + Self.xrHex + Self.byeHex)
        let c = try RTCPCompoundPacket(parsing: bytes)
        #expect(c.packets.map(\.packetType) == [200, 202, 207, 203])
        #expect(c.serialized() == bytes)
        let raw = try bytes.withUnsafeBytes { try RTCPCompoundPacket(parsing: $0) }
        #expect(raw == c)
    }

    @Test func paddingOnTheLastPacket() throws {
        // RR, then a BYE with 4 bytes of padding (length includes it)
        let bytes = hex("80 C9 00 01 | 00 00 00 01 | A1 CB 00 02 | 00 00 00 01 | 00 00 00 04")
        let c = try RTCPCompoundPacket(parsing: bytes)
        #expect(c.paddingCount == 4)
        #expect(c.packets[1] == .bye(RTCPBye(ssrcs: [1])))
        #expect(c.serialized() == bytes)
    }

    @Test func builtCompoundRoundTrips() throws {
        let c = RTCPCompoundPacket(packets: [
            .receiverReport(RTCPReceiverReport(ssrc: 1, reports: Array(repeating: Self.reportBlock, count: 31))),
            .sourceDescription(RTCPSourceDescription(chunks: (0..<3).map { i in
                RTCPSDESChunk(ssrc: UInt32(i), items: (0..<i).map { RTCPSDESItem(type: 8, value: Array(repeating: 1, count: $0 * 50)) })
            })),
            .app(RTCPApp(subtype: 31, ssrc: 2, name: Array("abcd".utf8))),
            .bye(RTCPBye(ssrcs: [1], reason: Array(repeating: 0x41, count: 255))),
        ], paddingCount: 8)
        let bytes = try #require(c.serialized())
        #expect(bytes.count % 4 == 0)
        #expect(try RTCPCompoundPacket(parsing: bytes) == c)
    }

    @Test func senderAndReceiverReportsEndTheSameWay() throws {
        // Report blocks and the profile extension follow the SR's sender info as they follow the
        // RR's SSRC; 31 blocks fit the 5-bit count, 32 do not.
        func sr(_ n: Int) -> RTCPPacket {
            .senderReport(RTCPSenderReport(
                ssrc: 7, ntpTimestamp: NTPTimestamp(seconds: 1, fraction: 2), rtpTimestamp: 3, packetCount: 4, octetCount: 5,
                reports: Array(repeating: Self.reportBlock, count: n), profileExtension: [9, 9, 9, 9]))
        }
        let full = RTCPCompoundPacket(packets: [sr(31), .receiverReport(RTCPReceiverReport(ssrc: 8, reports: [Self.reportBlock], profileExtension: [1, 2, 3, 4]))])
        let bytes = try #require(full.serialized())
        #expect(bytes[0] == 0x80 | 31)
        #expect(bytes.count == (4 + 24 + 31 * 24 + 4) + (4 + 4 + 24 + 4))
        #expect(try RTCPCompoundPacket(parsing: bytes) == full)
        #expect(RTCPCompoundPacket(packets: [sr(32)]).serialized() == nil)
    }

    @Test func unencodableCompoundsAreRefused() {
        #expect(RTCPCompoundPacket(packets: [.receiverReport(RTCPReceiverReport(ssrc: 1, reports: Array(repeating: Self.reportBlock, count: 32)))]).serialized() == nil)
        #expect(RTCPCompoundPacket(packets: [.app(RTCPApp(subtype: 1, ssrc: 1, name: [1, 2, 3]))]).serialized() == nil)
        #expect(RTCPCompoundPacket(packets: [.app(RTCPApp(subtype: 1, ssrc: 1, name: [1, 2, 3, 4], data: [1]))]).serialized() == nil)
        #expect(RTCPCompoundPacket(packets: [.receiverReport(RTCPReceiverReport(ssrc: 1))], paddingCount: 3).serialized() == nil)
        #expect(RTCPCompoundPacket(packets: [.bye(RTCPBye(ssrcs: [], reason: Array(repeating: 0, count: 256)))]).serialized() == nil)
        #expect(RTCPCompoundPacket(packets: [.sourceDescription(RTCPSourceDescription(chunks: [RTCPSDESChunk(ssrc: 1, items: [RTCPSDESItem(type: 0, value: [])])]))]).serialized() == nil)
    }

    @Test func malformedCompounds() {
        let rr = "80 C9 00 01 | 00 00 00 01"
        expectRTCPError([], .empty, at: 0)
        expectRTCPError(hex("80 C9 00"), .truncatedHeader, at: 0)
        expectRTCPError(hex(rr + " 80 C9"), .truncatedHeader, at: 8)
        expectRTCPError(hex("40 C9 00 01 | 00 00 00 01"), .version, at: 0)
        expectRTCPError(hex(rr + " 00 CA 00 00"), .version, at: 8)
        // length says 6 words, 1 present
        expectRTCPError(hex("80 C9 00 05 | 00 00 00 01"), .rtcpLength, at: 2)
        expectRTCPError(hex(rr + " 81 CA 00 05 | 00 00 00 01"), .rtcpLength, at: 10)
        // compound must start with SR or RR
        expectRTCPError(hex(Self.sdesHex + rr), .compoundFirstPacket, at: 1)
        expectRTCPError(hex(Self.byeHex), .compoundFirstPacket, at: 1)
        // padding on a packet that is not last, and on the first packet
        expectRTCPError(hex(rr + " A0 C9 00 01 | 00 00 00 01 | " + rr), .rtcpPaddingNotLast, at: 8)
        expectRTCPError(hex("A0 C9 00 01 | 00 00 00 01"), .rtcpPaddingNotLast, at: 0)
        // padding count larger than the packet, and zero
        expectRTCPError(hex(rr + " A0 CB 00 01 | 00 00 00 09"), .padding, at: 15)
        expectRTCPError(hex(rr + " A0 CB 00 01 | 00 00 00 00"), .padding, at: 15)
        expectRTCPError(hex(rr + " A0 CB 00 01 | 00 00 00 02"), .padding, at: 15)  // not a multiple of 4
        // RC = 1 without a report block
        expectRTCPError(hex("81 C9 00 01 | 00 00 00 01"), .reportCount, at: 0)
        expectRTCPError(hex("80 C8 00 01 | 00 00 00 01"), .reportCount, at: 0)
        // SDES item running past the packet; missing terminator; missing chunk
        expectRTCPError(hex(rr + " 81 CA 00 02 | 00 00 00 01 | 01 09 61 62"), .sdes, at: 16)
        expectRTCPError(hex(rr + " 81 CA 00 02 | 00 00 00 01 | 01 02 61 62"), .sdes, at: 20)
        expectRTCPError(hex(rr + " 82 CA 00 02 | 00 00 00 01 | 00 00 00 00"), .sdes, at: 20)
        // BYE: SC beyond the packet; reason length beyond the packet
        expectRTCPError(hex(rr + " 82 CB 00 01 | 00 00 00 01"), .bye, at: 8)
        expectRTCPError(hex(rr + " 81 CB 00 02 | 00 00 00 01 | 09 61 62 63"), .bye, at: 16)
        // APP shorter than SSRC + name
        expectRTCPError(hex(rr + " 80 CC 00 01 | 00 00 00 01"), .app, at: 8)
    }

    @Test func reducedSizeRTCPWhenAllowed() throws {
        let c = try RTCPCompoundPacket(parsing: hex(Self.fbHex), requireLeadingReport: false)
        #expect(c.packets.count == 1)
    }

    // MARK: - Timing

    @Test func roundTripTimeFromRFCExample() throws {
        // RFC 3550 §6.4.1: A = 0xb710:8000 (46864.500 s), LSR = 0xb705:2000 (46853.125 s),
        // DLSR = 0x0005:4000 (5.250 s) → RTT = 6.125 s.
        #expect(RTCPTiming.roundTripUnits(arrival: 0xB710_8000, lastSR: 0xB705_2000, delaySinceLastSR: 0x0005_4000) == 0x0006_2000)
        let arrival = NTPTimestamp(seconds: 0x0000_B710, fraction: 0x8000_0000)
        #expect(arrival.middle32 == 0xB710_8000)
        #expect(RTCPTiming.roundTripTime(arrival: arrival, lastSR: 0xB705_2000, delaySinceLastSR: 0x0005_4000) == .milliseconds(6125))
        #expect(RTCPTiming.roundTripUnits(arrival: 0xB710_8000, lastSR: 0, delaySinceLastSR: 0) == nil)
        #expect(RTCPTiming.roundTripUnits(arrival: 0xB705_0000, lastSR: 0xB705_2000, delaySinceLastSR: 0) == nil)
        // across the 16-bit seconds wrap
        #expect(RTCPTiming.roundTripUnits(arrival: 0x0001_0000, lastSR: 0xFFFF_0000, delaySinceLastSR: 0x0000_8000) == 0x0001_8000)
    }

    @Test func compactNTPConversions() {
        #expect(RTCPTiming.compactUnits(.milliseconds(5250)) == 0x0005_4000)
        #expect(RTCPTiming.compactUnits(.seconds(-1)) == 0)
        #expect(RTCPTiming.compactUnits(.milliseconds(-300)) == 0)
        #expect(RTCPTiming.compactUnits(.seconds(70000)) == .max)
        #expect(RTCPTiming.duration(compactUnits: 0x0006_2000) == .milliseconds(6125))
    }

    @Test func ntpTimestamps() {
        let epoch = NTPTimestamp(sinceUnixEpoch: .zero)
        #expect(epoch.seconds == 2_208_988_800)
        #expect(epoch.fraction == 0)
        let t = NTPTimestamp(sinceUnixEpoch: .seconds(1_700_000_000) + .milliseconds(250))
        #expect(t.seconds == 3_908_988_800)
        #expect(t.fraction == 0x4000_0000)
        #expect(t.sinceUnixEpoch == .seconds(1_700_000_000) + .milliseconds(250))
        #expect(t.middle32 == UInt32(truncatingIfNeeded: UInt64(3_908_988_800) << 16) | 0x4000)
        #expect(NTPTimestamp(rawValue: t.rawValue) == t)
        #expect(epoch < t)
    }

    // MARK: - Transmission interval

    @Test func deterministicInterval() {
        // small session: minimum applies, halved before the first report
        #expect(RTCPInterval.deterministicInterval(members: 2, senders: 1, rtcpBandwidth: 500, weSent: true, averageRTCPSize: 100, initial: false) == 5)
        #expect(RTCPInterval.deterministicInterval(members: 2, senders: 1, rtcpBandwidth: 500, weSent: true, averageRTCPSize: 100, initial: true) == 2.5)
        // large session: receivers share 3/4 of the bandwidth among members − senders
        #expect(RTCPInterval.deterministicInterval(members: 1000, senders: 10, rtcpBandwidth: 1000, weSent: false, averageRTCPSize: 200, initial: false) == 200 * 990 / 750)
        // senders share 1/4 among senders
        #expect(RTCPInterval.deterministicInterval(members: 1000, senders: 10, rtcpBandwidth: 1000, weSent: true, averageRTCPSize: 200, initial: false) == 8)
        // senders above 1/4 of members: everyone shares the whole bandwidth
        #expect(RTCPInterval.deterministicInterval(members: 100, senders: 50, rtcpBandwidth: 1000, weSent: false, averageRTCPSize: 200, initial: false) == 20)
        // a smaller minimum (RFC 3550 §6.2 allows scaling it)
        #expect(RTCPInterval.deterministicInterval(members: 2, senders: 1, rtcpBandwidth: 500, weSent: true, averageRTCPSize: 100, initial: false, minimumInterval: 0.1) == 0.4)
    }

    @Test func randomizedIntervalBoundsAndSeeding() {
        var rng = SplitMix64(seed: 1)
        var low = Double.infinity, high = 0.0
        for _ in 0..<10_000 {
            let t = RTCPInterval.interval(members: 1000, senders: 10, rtcpBandwidth: 1000, weSent: true, averageRTCPSize: 200, initial: false, using: &rng)
            low = min(low, t)
            high = max(high, t)
        }
        #expect(low >= 8 * 0.5 / RTCPInterval.compensation)
        #expect(high < 8 * 1.5 / RTCPInterval.compensation)
        #expect(low < 8 * 0.52 / RTCPInterval.compensation)
        #expect(high > 8 * 1.48 / RTCPInterval.compensation)
        var a = SplitMix64(seed: 99), b = SplitMix64(seed: 99)
        #expect(RTCPInterval.randomize(5, using: &a) == RTCPInterval.randomize(5, using: &b))
        #expect(RTCPInterval.duration(seconds: 1.5) == .milliseconds(1500))
        #expect(RTCPInterval.updatedAverageSize(100, packetSize: 260) == 110)
    }
}
