/// A compound RTCP packet: one datagram holding several RTCP packets (RFC 3550 §6.1).
///
/// Parsing checks the rules of RFC 3550 A.2: version 2 on every packet, padding only on the
/// last, lengths that add up to the datagram, and (unless `requireLeadingReport` is false, for
/// reduced-size RTCP, RFC 5506) a first packet that is an SR or RR without padding.
///
/// Policy: the padding count of an RTCP packet must be a multiple of 4, since every RTCP
/// packet's content is itself 32-bit aligned (the BYE reason and SDES chunks carry their own
/// null padding); a count of 1–3 would cut into that content.
public struct RTCPCompoundPacket: Sendable, Hashable {
    /// The packets, in order.
    public var packets: [RTCPPacket]
    /// Padding bytes after the last packet, including the count byte (0 = none).
    public var paddingCount: UInt8

    /// Creates a compound packet.
    public init(packets: [RTCPPacket], paddingCount: UInt8 = 0) {
        self.packets = packets
        self.paddingCount = paddingCount
    }

    /// Parses a datagram from an array.
    public init(parsing bytes: [UInt8], requireLeadingReport: Bool = true) throws(RTPParseError) {
        try self.init(parsing: bytes[...], requireLeadingReport: requireLeadingReport)
    }

    /// Parses a datagram from raw memory (copied once).
    public init(parsing buffer: UnsafeRawBufferPointer, requireLeadingReport: Bool = true) throws(RTPParseError) {
        try self.init(parsing: [UInt8](buffer)[...], requireLeadingReport: requireLeadingReport)
    }

    /// Parses a datagram; offsets in errors count from `bytes.startIndex`.
    public init(parsing bytes: ArraySlice<UInt8>, requireLeadingReport: Bool = true) throws(RTPParseError) {
        let s = bytes.startIndex
        let end = bytes.endIndex
        guard !bytes.isEmpty else { throw RTPParseError(offset: 0, rule: .empty) }
        var i = s
        var result: [RTCPPacket] = []
        var padding: UInt8 = 0
        while i < end {
            guard end - i >= 4 else { throw RTPParseError(offset: i - s, rule: .truncatedHeader) }
            let b0 = bytes[i]
            guard b0 >> 6 == 2 else { throw RTPParseError(offset: i - s, rule: .version) }
            let hasPadding = b0 & 0x20 != 0
            let count = b0 & 0x1F
            let pt = bytes[i + 1]
            let total = (Int(bytes.be16(i + 2)) + 1) * 4
            guard end - i >= total else { throw RTPParseError(offset: i + 2 - s, rule: .rtcpLength) }
            if result.isEmpty && requireLeadingReport {
                guard pt == RTCPPacket.PacketType.senderReport || pt == RTCPPacket.PacketType.receiverReport else {
                    throw RTPParseError(offset: i + 1 - s, rule: .compoundFirstPacket)
                }
                guard !hasPadding else { throw RTPParseError(offset: i - s, rule: .rtcpPaddingNotLast) }
            }
            var bodyEnd = i + total
            if hasPadding {
                guard i + total == end else { throw RTPParseError(offset: i - s, rule: .rtcpPaddingNotLast) }
                let p = bytes[end - 1]
                guard p > 0, p % 4 == 0, Int(p) <= total - 4 else { throw RTPParseError(offset: end - 1 - s, rule: .padding) }
                padding = p
                bodyEnd -= Int(p)
            }
            let body = bytes[(i + 4)..<bodyEnd]
            result.append(try Self.parsePacket(type: pt, count: count, body: body, base: s, headerAt: i))
            i += total
        }
        packets = result
        paddingCount = padding
    }

    private static func parsePacket(
        type pt: UInt8, count: UInt8, body b: ArraySlice<UInt8>, base: Int, headerAt h: Int
    ) throws(RTPParseError) -> RTCPPacket {
        let i = b.startIndex
        let end = b.endIndex
        func fail(_ at: Int, _ rule: RTPParseError.Rule) -> RTPParseError { RTPParseError(offset: at - base, rule: rule) }
        switch pt {
        case RTCPPacket.PacketType.senderReport, RTCPPacket.PacketType.receiverReport:
            let isSR = pt == RTCPPacket.PacketType.senderReport
            let fixed = isSR ? 24 : 4
            guard b.count >= fixed + Int(count) * RTCPReportBlock.size else { throw fail(h, .reportCount) }
            var reports: [RTCPReportBlock] = []
            reports.reserveCapacity(Int(count))
            var j = i + fixed
            for _ in 0..<count {
                reports.append(RTCPReportBlock(b, at: j))
                j += RTCPReportBlock.size
            }
            let ext = Array(b[j..<end])
            if isSR {
                return .senderReport(RTCPSenderReport(
                    ssrc: b.be32(i), ntpTimestamp: NTPTimestamp(seconds: b.be32(i + 4), fraction: b.be32(i + 8)),
                    rtpTimestamp: b.be32(i + 12), packetCount: b.be32(i + 16), octetCount: b.be32(i + 20),
                    reports: reports, profileExtension: ext))
            }
            return .receiverReport(RTCPReceiverReport(ssrc: b.be32(i), reports: reports, profileExtension: ext))

        case RTCPPacket.PacketType.sourceDescription:
            var chunks: [RTCPSDESChunk] = []
            var j = i
            for _ in 0..<count {
                guard end - j >= 4 else { throw fail(j, .sdes) }
                let ssrc = b.be32(j)
                j += 4
                var items: [RTCPSDESItem] = []
                while true {
                    guard j < end else { throw fail(j, .sdes) }
                    let type = b[j]
                    if type == SDESItemType.end {
                        // Null octets up to the next 32-bit boundary (chunks start aligned).
                        let next = i + ((j - i) / 4 + 1) * 4
                        guard next <= end else { throw fail(j, .sdes) }
                        j = next
                        break
                    }
                    guard end - j >= 2, end - (j + 2) >= Int(b[j + 1]) else { throw fail(j, .sdes) }
                    let len = Int(b[j + 1])
                    items.append(RTCPSDESItem(type: type, value: Array(b[(j + 2)..<(j + 2 + len)])))
                    j += 2 + len
                }
                chunks.append(RTCPSDESChunk(ssrc: ssrc, items: items))
            }
            return .sourceDescription(RTCPSourceDescription(chunks: chunks))

        case RTCPPacket.PacketType.bye:
            guard b.count >= Int(count) * 4 else { throw fail(h, .bye) }
            var ssrcs: [UInt32] = []
            var j = i
            for _ in 0..<count {
                ssrcs.append(b.be32(j))
                j += 4
            }
            var reason: [UInt8]? = nil
            if j < end {
                let len = Int(b[j])
                guard end - (j + 1) >= len else { throw fail(j, .bye) }
                reason = Array(b[(j + 1)..<(j + 1 + len)])
            }
            return .bye(RTCPBye(ssrcs: ssrcs, reason: reason))

        case RTCPPacket.PacketType.app:
            guard b.count >= 8 else { throw fail(h, .app) }
            return .app(RTCPApp(subtype: count, ssrc: b.be32(i), name: Array(b[(i + 4)..<(i + 8)]), data: Array(b[(i + 8)..<end])))

        case RTCPPacket.PacketType.extendedReport:
            guard b.count >= 4 else { throw fail(h, .extendedReport) }
            var blocks: [XRBlock] = []
            var j = i + 4
            while j < end {
                guard end - j >= 4 else { throw fail(j, .extendedReport) }
                let bt = b[j]
                let specific = b[j + 1]
                let size = (Int(b.be16(j + 2)) + 1) * 4
                guard end - j >= size else { throw fail(j + 2, .extendedReport) }
                if bt == XRVoIPMetrics.blockType {
                    guard size == 4 + XRVoIPMetrics.bodySize else { throw fail(j + 2, .extendedReport) }
                    blocks.append(.voipMetrics(XRVoIPMetrics(b, at: j + 4)))
                } else {
                    blocks.append(.unknown(blockType: bt, typeSpecific: specific, content: Array(b[(j + 4)..<(j + size)])))
                }
                j += size
            }
            return .extendedReport(RTCPExtendedReport(ssrc: b.be32(i), blocks: blocks))

        default:
            return .unknown(RTCPUnknownPacket(packetType: pt, count: count, body: Array(b)))
        }
    }

    /// Serializes the datagram. Returns nil when a packet cannot be encoded: more than 31 report
    /// blocks, chunks or SSRCs, an SDES item or BYE reason over 255 bytes, an SDES item of type 0,
    /// an APP name not 4 bytes or subtype over 31, a profile extension, APP data, XR block or
    /// or raw body not a multiple of 4 bytes,
    /// a packet over 2^18 bytes, or a padding count that is not a multiple of 4.
    public func serialized() -> [UInt8]? {
        guard paddingCount % 4 == 0 else { return nil }
        var out: [UInt8] = []
        for (n, packet) in packets.enumerated() {
            let pad = n == packets.count - 1 ? Int(paddingCount) : 0
            guard Self.write(packet, padding: pad, to: &out) else { return nil }
        }
        if packets.isEmpty && paddingCount > 0 { return nil }
        return out
    }

    /// Appends the report blocks and the profile extension that end an SR or RR; returns the
    /// report count for the header, or nil when there are more than 31 blocks.
    private static func writeReports(_ reports: [RTCPReportBlock], _ profileExtension: [UInt8], to out: inout [UInt8]) -> UInt8? {
        guard reports.count <= 31 else { return nil }
        for r in reports { r.write(to: &out) }
        out += profileExtension
        return UInt8(reports.count)
    }

    private static func write(_ packet: RTCPPacket, padding: Int, to out: inout [UInt8]) -> Bool {
        let h = out.count
        var count: UInt8 = 0
        out += [0, packet.packetType, 0, 0]
        switch packet {
        case .senderReport(let sr):
            out.appendBE32(sr.ssrc)
            out.appendBE32(sr.ntpTimestamp.seconds)
            out.appendBE32(sr.ntpTimestamp.fraction)
            out.appendBE32(sr.rtpTimestamp)
            out.appendBE32(sr.packetCount)
            out.appendBE32(sr.octetCount)
            guard let n = writeReports(sr.reports, sr.profileExtension, to: &out) else { return false }
            count = n
        case .receiverReport(let rr):
            out.appendBE32(rr.ssrc)
            guard let n = writeReports(rr.reports, rr.profileExtension, to: &out) else { return false }
            count = n
        case .sourceDescription(let sdes):
            guard sdes.chunks.count <= 31 else { return false }
            count = UInt8(sdes.chunks.count)
            for c in sdes.chunks {
                out.appendBE32(c.ssrc)
                for item in c.items {
                    guard item.type != 0, item.value.count <= 255 else { return false }
                    out.append(item.type)
                    out.append(UInt8(item.value.count))
                    out += item.value
                }
                out.append(0)
                while (out.count - h) % 4 != 0 { out.append(0) }
            }
        case .bye(let bye):
            guard bye.ssrcs.count <= 31 else { return false }
            count = UInt8(bye.ssrcs.count)
            for s in bye.ssrcs { out.appendBE32(s) }
            if let reason = bye.reason {
                guard reason.count <= 255 else { return false }
                out.append(UInt8(reason.count))
                out += reason
                while (out.count - h) % 4 != 0 { out.append(0) }
            }
        case .app(let app):
            guard app.subtype <= 31, app.name.count == 4 else { return false }
            count = app.subtype
            out.appendBE32(app.ssrc)
            out += app.name
            out += app.data
        case .extendedReport(let xr):
            out.appendBE32(xr.ssrc)
            for block in xr.blocks {
                switch block {
                case .voipMetrics(let m):
                    out += [XRVoIPMetrics.blockType, 0]
                    out.appendBE16(UInt16(XRVoIPMetrics.bodySize / 4))
                    m.write(to: &out)
                case .unknown(let bt, let specific, let content):
                    guard content.count % 4 == 0, content.count / 4 <= 0xFFFF else { return false }
                    out += [bt, specific]
                    out.appendBE16(UInt16(content.count / 4))
                    out += content
                }
            }
        case .unknown(let u):
            guard u.count <= 31 else { return false }
            count = u.count
            out += u.body
        }
        if padding > 0 {
            out += repeatElement(0, count: padding - 1)
            out.append(UInt8(padding))
        }
        let total = out.count - h
        guard total % 4 == 0, total / 4 - 1 <= 0xFFFF else { return false }
        out[h] = 0x80 | (padding > 0 ? 0x20 : 0) | count
        out.setBE16(UInt16(total / 4 - 1), at: h + 2)
        return true
    }
}
