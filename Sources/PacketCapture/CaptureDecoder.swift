import NetworkIO
import SIPMessage

/// An IP address and a transport port.
public struct CaptureEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// The IP address.
    public var address: IPAddress
    /// The UDP or TCP port.
    public var port: UInt16
    /// An endpoint.
    public init(address: IPAddress, port: UInt16) {
        self.address = address
        self.port = port
    }
    /// `a.b.c.d:port` or `[v6]:port`.
    public var description: String { address.byteCount == 16 ? "[\(address)]:\(port)" : "\(address):\(port)" }
}

/// The transport a captured SIP message travelled over.
public enum CaptureTransport: String, Sendable, Hashable {
    /// UDP (possibly reassembled from IP fragments).
    case udp
    /// TCP, cut from the reassembled stream.
    case tcp
}

/// A SIP message found in a capture.
public struct CapturedSIPMessage: Sendable {
    /// The capture time of the frame that carried (for TCP: completed) the message.
    public var timestamp: CaptureTimestamp
    /// Sender.
    public var source: CaptureEndpoint
    /// Receiver.
    public var destination: CaptureEndpoint
    /// UDP or TCP.
    public var transport: CaptureTransport
    /// The frame number (for TCP: of the segment that completed the message; for fragmented
    /// datagrams: of the last fragment).
    public var frameNumber: Int
    /// The parsed message.
    public var message: SIPMessage
}

/// Something unusual met while decoding a capture; decoding goes on.
public struct CaptureAnomaly: Sendable, CustomStringConvertible {
    /// What was unusual.
    public enum Kind: Sendable {
        /// A frame of a link type the decoder does not understand.
        case unsupportedLinkType(UInt32)
        /// A header cut short (by the snapshot length or a corrupt length field), at the named layer.
        case truncated(String)
        /// A malformed header at the named layer.
        case malformed(String)
        /// Fragments overlapping bytes already received; `discarded` when the datagram was dropped (IPv6).
        case overlappingFragments(identical: Bool, discarded: Bool)
        /// Inconsistent fragment offsets or lengths; the datagram was dropped.
        case badFragment(String)
        /// Pending fragments dropped to stay within the limits.
        case fragmentsEvicted
        /// Pending fragments dropped because the datagram was not complete within the timeout.
        case fragmentTimeout(count: Int)
        /// Missing bytes in a TCP stream, skipped (`bytes` is the size of the hole when known;
        /// `discardedPartial` the bytes of a partial message that were thrown away with it).
        case tcpGap(source: CaptureEndpoint, destination: CaptureEndpoint, bytes: Int, discardedPartial: Int)
        /// A TCP flow dropped to stay within the flow limit.
        case tcpFlowEvicted(source: CaptureEndpoint, destination: CaptureEndpoint)
        /// A stream closed (FIN, RST or end of capture) with an incomplete message buffered.
        case tcpIncompleteMessage(source: CaptureEndpoint, destination: CaptureEndpoint, bytes: Int)
        /// A payload that looked like SIP but did not parse, or stream bytes the framer skipped.
        case sipParseError(SIPParseError)
    }

    /// The frame being decoded when the anomaly was seen (0 for end of capture).
    public var frameNumber: Int
    /// What happened.
    public var kind: Kind

    /// `frame n: kind`.
    public var description: String { "frame \(frameNumber): \(kind)" }
}

/// What the decoder produces.
public enum CaptureEvent: Sendable {
    /// A SIP message.
    case message(CapturedSIPMessage)
    /// A non-fatal anomaly.
    case anomaly(CaptureAnomaly)
    /// A SIP message's digest, from a decoder made with `digests: true` (in place of ``message(_:)``).
    case digest(CapturedSIPDigest)
    /// A UDP datagram that carried no SIP, from a decoder made with `datagrams: true`.
    case datagram(CapturedDatagram)
}

/// A UDP datagram that carried no SIP: where it went and whether it looks like RTP or RTCP.
public struct CapturedDatagram: Sendable, Hashable {
    /// What the payload looks like.
    public enum Kind: Sendable, Hashable {
        /// RTP: version 2, at least 12 bytes, second byte outside 192–223.
        case rtp
        /// RTCP: version 2, at least 8 bytes, second byte (packet type) 192–223.
        case rtcp
        /// Anything else.
        case other
    }
    /// The capture time.
    public var timestamp: CaptureTimestamp
    /// Sender.
    public var source: CaptureEndpoint
    /// Receiver.
    public var destination: CaptureEndpoint
    /// The frame number (of the last fragment, for a reassembled datagram).
    public var frameNumber: Int
    /// The UDP payload's length.
    public var length: Int
    /// RTP, RTCP or other.
    public var kind: Kind
    /// The UDP payload, from a decoder made with `payloads: true` (empty otherwise): a slice
    /// of the reader's buffer, lent while the event is handled (copy what must be kept, or the
    /// reader's next read copies its buffer).
    public var payload: ArraySlice<UInt8> = []

    /// A datagram's description (its payload, when given, as a slice).
    public init(timestamp: CaptureTimestamp, source: CaptureEndpoint, destination: CaptureEndpoint, frameNumber: Int, length: Int, kind: Kind,
                payload: ArraySlice<UInt8> = []) {
        self.timestamp = timestamp
        self.source = source
        self.destination = destination
        self.frameNumber = frameNumber
        self.length = length
        self.kind = kind
        self.payload = payload
    }

    /// Tells RTP from RTCP as RFC 5761 §4 does for a multiplexed port: both have version 2 in
    /// the first two bits; RTCP packet types 192–223 (200–204 in use) fall where RTP payload
    /// types 64–95 with the marker bit would, which RTP must not use.
    public static func classify(_ payload: ArraySlice<UInt8>) -> Kind {
        guard payload.count >= 8, payload[payload.startIndex] >> 6 == 2 else { return .other }
        let second = payload[payload.startIndex + 1]
        if (192...223).contains(second) { return .rtcp }
        return payload.count >= 12 ? .rtp : .other
    }
}

/// An RTP datagram handed over in place by ``SIPCaptureReader/nextEvents(into:rtp:)``: the
/// same facts as a ``CapturedDatagram`` of kind ``CapturedDatagram/Kind/rtp``, with its payload
/// lent from the reader's buffer rather than held in an event.
///
/// Not `Sendable`, and valid only during the call it is handed to: ``payload`` points into the
/// reader's buffer, which the next read reuses. Copy what must be kept (``datagram``).
public struct BorrowedDatagram {
    /// The capture time.
    public var timestamp: CaptureTimestamp
    /// Sender.
    public var source: CaptureEndpoint
    /// Receiver.
    public var destination: CaptureEndpoint
    /// The frame number.
    public var frameNumber: Int
    /// The UDP payload, lent for the call.
    public var payload: UnsafeRawBufferPointer

    /// A datagram lent in place.
    public init(timestamp: CaptureTimestamp, source: CaptureEndpoint, destination: CaptureEndpoint, frameNumber: Int, payload: UnsafeRawBufferPointer) {
        self.timestamp = timestamp
        self.source = source
        self.destination = destination
        self.frameNumber = frameNumber
        self.payload = payload
    }

    /// The datagram as the general path reports it, its payload copied.
    public var datagram: CapturedDatagram {
        let bytes = [UInt8](payload)
        return CapturedDatagram(timestamp: timestamp, source: source, destination: destination, frameNumber: frameNumber, length: bytes.count,
                                kind: CapturedDatagram.classify(bytes[...]), payload: bytes[...])
    }

    /// Whether a UDP payload is one the fast path hands over: what ``CapturedDatagram/classify(_:)``
    /// calls RTP (version 2, at least 12 bytes, second byte outside 192–223). Its first byte
    /// (0x80–0xBF) is neither CR, LF nor a token byte, so it can never start a SIP message.
    @inline(__always)
    static func isRTP(_ p: UnsafeRawBufferPointer) -> Bool {
        guard p.count >= 12, p[0] >> 6 == 2 else { return false }
        return !(192...223).contains(p[1])
    }
}

/// A SIP message found in a capture, as its ``SIPMessageDigest`` (what a summary counts).
public struct CapturedSIPDigest: Sendable {
    /// The capture time of the frame that carried (for TCP: completed) the message.
    public var timestamp: CaptureTimestamp
    /// Sender.
    public var source: CaptureEndpoint
    /// Receiver.
    public var destination: CaptureEndpoint
    /// UDP or TCP.
    public var transport: CaptureTransport
    /// The frame number (as in ``CapturedSIPMessage/frameNumber``).
    public var frameNumber: Int
    /// The digest. Its reason phrase is filled only for the first response of each status code
    /// the decoder reports.
    public var digest: SIPMessageDigest
}

/// Counts of what a ``CaptureDecoder`` has seen.
public struct CaptureCounters: Sendable, Hashable {
    /// Frames decoded.
    public var frames = 0
    /// Frames carrying neither IPv4 nor IPv6 (ARP, LLC, …).
    public var nonIPFrames = 0
    /// IPv4 packets (fragments included).
    public var ipv4Packets = 0
    /// IPv6 packets (fragments included).
    public var ipv6Packets = 0
    /// IP fragments received.
    public var fragments = 0
    /// Datagrams reassembled from fragments.
    public var datagramsReassembled = 0
    /// UDP datagrams.
    public var udpDatagrams = 0
    /// TCP segments.
    public var tcpSegments = 0
    /// TCP segments (or parts) dropped as retransmissions or duplicates.
    public var tcpRetransmissions = 0
    /// Holes skipped in TCP streams.
    public var tcpGaps = 0
    /// SIP messages produced.
    public var sipMessages = 0
    /// UDP datagrams and TCP segments that did not carry SIP (other transports not counted).
    public var nonSIPPayloads = 0
    /// SIP-looking payloads that failed to parse, and stream bytes the framer skipped.
    public var parseErrors = 0
    /// Anomalies reported.
    public var anomalies = 0
    /// The first frame's capture time (what tshark's relative times count from).
    public var firstFrameTime: CaptureTimestamp?
    /// All zero.
    public init() {}
}

/// Turns captured frames into SIP messages: link layer (Ethernet with VLAN tags and PPPoE, Linux
/// cooked v1/v2, raw IP, loopback), IPv4/IPv6 with reassembly, UDP, and
/// per-direction TCP stream reassembly feeding a resynchronizing ``SIPStreamFramer``.
///
/// A pure value: feed frames with ``decode(_:)`` in capture order and call ``finish()`` at the
/// end; nothing here reads files or clocks (time is the frames' timestamps), so the same
/// decoder serves file reading, tests and replay. SIP is recognized by content on any port.
public struct CaptureDecoder: Sendable {
    /// Bounds on the decoder's memory.
    public struct Limits: Sendable, Hashable {
        /// IP datagrams being reassembled at once.
        public var maxPendingDatagrams = 256
        /// Bytes held for datagrams being reassembled.
        public var maxPendingFragmentBytes = 4 << 20
        /// Capture time after which an incomplete datagram is dropped (seconds).
        public var fragmentTimeoutSeconds: Int64 = 30
        /// TCP directions tracked at once.
        public var maxTCPFlows = 4096
        /// Out-of-order bytes buffered per TCP direction before the hole is skipped.
        public var maxBufferedBytesPerFlow = 1 << 20
        /// The defaults.
        public init() {}
    }

    /// The limits in force.
    public let limits: Limits
    /// What has been seen so far.
    public private(set) var counters = CaptureCounters()

    private var reassembler: FragmentReassembler
    private var flows: [FlowKey: TCPDirection] = [:]
    private var out: [CaptureEvent] = []

    /// Present when the decoder reports digests (``CaptureEvent/digest(_:)``) instead of messages.
    private var scanner: SIPDigestScanner?
    /// Whether non-SIP UDP datagrams are reported.
    private let datagrams: Bool
    /// Whether their payloads come with them.
    private let payloads: Bool
    /// Status codes (100–699) whose reason phrase a digest has already carried.
    private var reasonReported = [UInt64](repeating: 0, count: 11)

    /// A decoder with the given limits. With `digests`, SIP messages are reported as
    /// ``CaptureEvent/digest(_:)`` (UDP datagrams scanned in place by a ``SIPDigestScanner``,
    /// never copied nor indexed into a ``SIPMessage``); the same datagrams are accepted or
    /// refused as without it.
    ///
    /// With `datagrams`, UDP datagrams that carry no SIP are reported too
    /// (``CaptureEvent/datagram(_:)``, classified RTP, RTCP or other; their bytes are not kept).
    /// With `payloads` as well, each carries its payload as a slice lent for the event
    /// (``CapturedDatagram/payload``; for RTP analysis).
    public init(limits: Limits = Limits(), digests: Bool = false, datagrams: Bool = false, payloads: Bool = false) {
        self.limits = limits
        self.datagrams = datagrams
        self.payloads = payloads
        if digests { scanner = SIPDigestScanner() }
        reassembler = FragmentReassembler(maxDatagrams: limits.maxPendingDatagrams, maxBytes: limits.maxPendingFragmentBytes,
                                          timeoutNanoseconds: limits.fragmentTimeoutSeconds * 1_000_000_000)
    }

    /// Decodes one frame; returns the SIP messages and anomalies it produced, in order.
    public mutating func decode(_ frame: CaptureFrame) -> [CaptureEvent] {
        counters.frames += 1
        if counters.firstFrameTime == nil { counters.firstFrameTime = frame.timestamp }
        let expired = reassembler.expire(now: frame.timestamp)
        if expired > 0 { anomaly(frame.number, .fragmentTimeout(count: expired)) }
        decodeLink(frame, frame.data[...])
        return takeEvents()
    }

    /// Decodes one frame, appending its events to `events` (a buffer the caller reuses, so the
    /// streaming reader allocates no array per frame).
    public mutating func decode(_ frame: CaptureFrame, into events: inout [CaptureEvent]) {
        decode(frame, bytes: frame.data[...], into: &events)
    }

    /// Decodes a frame whose bytes are `bytes` rather than `frame.data` (the file reader's
    /// buffer, lent for the call: nothing here keeps a slice of it).
    mutating func decode(_ frame: CaptureFrame, bytes: ArraySlice<UInt8>, into events: inout [CaptureEvent]) {
        swap(&out, &events)
        counters.frames += 1
        if counters.firstFrameTime == nil { counters.firstFrameTime = frame.timestamp }
        let expired = reassembler.expire(now: frame.timestamp)
        if expired > 0 { anomaly(frame.number, .fragmentTimeout(count: expired)) }
        decodeLink(frame, bytes)
        swap(&out, &events)
    }

    // MARK: fast path

    /// Where a frame's UDP payload lies, when the frame is a plain UDP datagram: Ethernet
    /// (with VLAN tags), Linux cooked v1/v2, raw IP or loopback; IPv4 without fragmentation,
    /// or IPv6 with UDP as its first next header; every length as ``decode(_:into:)`` checks
    /// it. `nil` for any other frame (which ``decode(_:into:)`` then decodes).
    struct PlainUDP {
        var source: CaptureEndpoint
        var destination: CaptureEndpoint
        var v6: Bool
        var payload: Range<Int>
    }

    /// Whether frames may go by the fast path (``plainUDP(_:_:)``): non-SIP datagrams are
    /// reported, and no fragment waits for reassembly (whose timeout every frame would check).
    var fastPathOpen: Bool { datagrams && reassembler.pending.isEmpty }

    @inline(__always)
    static func plainUDP(_ link: LinkType, _ d: UnsafeRawBufferPointer) -> PlainUDP? {
        @inline(__always) func be16(_ at: Int) -> UInt16 { UInt16(d[at]) << 8 | UInt16(d[at + 1]) }
        @inline(__always) func be32(_ at: Int) -> UInt32 { UInt32(bigEndian: d.loadUnaligned(fromByteOffset: at, as: UInt32.self)) }
        var etherType: UInt16
        var off: Int
        switch link {
        case .raw:
            guard d.count >= 1 else { return nil }
            etherType = d[0] >> 4 == 6 ? 0x86DD : d[0] >> 4 == 4 ? 0x0800 : 0
            off = 0
        case .ethernet:
            guard d.count >= 14 else { return nil }
            etherType = be16(12)
            off = 14
            while etherType == 0x8100 || etherType == 0x88A8 || etherType == 0x9100 {
                guard d.count >= off + 4 else { return nil }
                etherType = be16(off + 2)
                off += 4
            }
        case .linuxSLL:
            guard d.count >= 16 else { return nil }
            etherType = be16(14)
            off = 16
        case .linuxSLL2:
            guard d.count >= 20 else { return nil }
            etherType = be16(0)
            off = 20
        case .ipv4: etherType = 0x0800; off = 0
        case .ipv6: etherType = 0x86DD; off = 0
        case .null, .loop:
            guard d.count >= 4 else { return nil }
            let be = be32(0), le = be.byteSwapped
            let family = link == .loop ? be : (be < 0x10000 ? be : le)
            etherType = family == 2 ? 0x0800 : [10, 24, 28, 30].contains(family) ? 0x86DD : 0
            off = 4
        default:
            return nil
        }
        let n = d.count - off
        let src: IPAddress, dst: IPAddress, udp: Int, udpEnd: Int
        switch etherType {
        case 0x0800:
            guard n >= 20, d[off] >> 4 == 4 else { return nil }
            let ihl = Int(d[off] & 0x0F) * 4, total = Int(be16(off + 2))
            guard ihl >= 20, total >= ihl, n >= total, d[off + 9] == 17, be16(off + 6) & 0x3FFF == 0 else { return nil }
            src = .v4(IPv4Address(be32(off + 12)))
            dst = .v4(IPv4Address(be32(off + 16)))
            udp = off + ihl
            udpEnd = off + total
        case 0x86DD:
            guard n >= 40, d[off] >> 4 == 6, d[off + 6] == 17 else { return nil }
            let length = Int(be16(off + 4))
            guard length > 0, n >= 40 + length else { return nil }
            src = .v6(IPv6Address(high: UInt64(be32(off + 8)) << 32 | UInt64(be32(off + 12)), low: UInt64(be32(off + 16)) << 32 | UInt64(be32(off + 20))))
            dst = .v6(IPv6Address(high: UInt64(be32(off + 24)) << 32 | UInt64(be32(off + 28)), low: UInt64(be32(off + 32)) << 32 | UInt64(be32(off + 36))))
            udp = off + 40
            udpEnd = off + 40 + length
        default:
            return nil
        }
        guard udpEnd - udp >= 8 else { return nil }
        let len = Int(be16(udp + 4))
        guard len >= 8, len <= udpEnd - udp else { return nil }
        return PlainUDP(source: CaptureEndpoint(address: src, port: be16(udp)), destination: CaptureEndpoint(address: dst, port: be16(udp + 2)),
                        v6: etherType == 0x86DD, payload: (udp + 8)..<(udp + len))
    }

    /// Counts what the fast path took: `frames` frames, each a UDP datagram carrying no SIP,
    /// `v6` of them over IPv6; `first` is the first one's time.
    mutating func countFastPath(frames: Int, v6: Int, first: CaptureTimestamp?) {
        guard frames > 0 else { return }
        counters.frames += frames
        if counters.firstFrameTime == nil { counters.firstFrameTime = first }
        counters.ipv4Packets += frames - v6
        counters.ipv6Packets += v6
        counters.udpDatagrams += frames
        counters.nonSIPPayloads += frames
    }

    /// Ends the capture: skips the holes of TCP streams still waiting for missing bytes and
    /// reports partial messages left in them.
    public mutating func finish() -> [CaptureEvent] {
        let keys = flows.keys.sorted { ($0.source.description, $0.destination.description) < ($1.source.description, $1.destination.description) }
        for k in keys {
            guard var d = flows.removeValue(forKey: k) else { continue }
            close(&d, key: k, frameNumber: 0, time: d.lastSeen)
        }
        let n = reassembler.pending.count
        if n > 0 { anomaly(0, .fragmentTimeout(count: n)) }
        return takeEvents()
    }

    private mutating func takeEvents() -> [CaptureEvent] {
        defer { out.removeAll(keepingCapacity: true) }
        return out
    }

    private mutating func anomaly(_ frame: Int, _ kind: CaptureAnomaly.Kind) {
        counters.anomalies += 1
        out.append(.anomaly(CaptureAnomaly(frameNumber: frame, kind: kind)))
    }

    // MARK: link layer

    private mutating func decodeLink(_ f: CaptureFrame, _ d: ArraySlice<UInt8>) {
        var etherType: UInt16
        var off: Int
        switch f.linkType {
        case .ethernet:
            guard d.count >= 14 else { return anomaly(f.number, .truncated("Ethernet")) }
            etherType = d.u16(12, bigEndian: true)
            off = 14
            // 802.1Q, 802.1ad and the old QinQ tag type: 4 bytes each.
            while etherType == 0x8100 || etherType == 0x88A8 || etherType == 0x9100 {
                guard d.count >= off + 4 else { return anomaly(f.number, .truncated("VLAN tag")) }
                etherType = d.u16(off + 2, bigEndian: true)
                off += 4
            }
            // PPPoE session (RFC 2516): 6-byte header, then the PPP protocol number.
            if etherType == 0x8864 {
                guard d.count >= off + 8 else { return anomaly(f.number, .truncated("PPPoE header")) }
                let ppp = d.u16(off + 6, bigEndian: true)
                etherType = ppp == 0x0021 ? 0x0800 : ppp == 0x0057 ? 0x86DD : 0
                off += 8
            }
        case .linuxSLL:
            guard d.count >= 16 else { return anomaly(f.number, .truncated("Linux cooked header")) }
            etherType = d.u16(14, bigEndian: true)
            off = 16
        case .linuxSLL2:
            guard d.count >= 20 else { return anomaly(f.number, .truncated("Linux cooked v2 header")) }
            etherType = d.u16(0, bigEndian: true)
            off = 20
        case .raw:
            guard let first = d.first else { return anomaly(f.number, .truncated("raw IP")) }
            etherType = first >> 4 == 6 ? 0x86DD : first >> 4 == 4 ? 0x0800 : 0
            off = 0
        case .ipv4: etherType = 0x0800; off = 0
        case .ipv6: etherType = 0x86DD; off = 0
        case .null, .loop:
            guard d.count >= 4 else { return anomaly(f.number, .truncated("loopback header")) }
            // The family is in the capturing host's order for NULL: accept either.
            let be = d.u32(0, bigEndian: true), le = d.u32(0, bigEndian: false)
            let family = f.linkType == .loop ? be : (be < 0x10000 ? be : le)
            etherType = family == 2 ? 0x0800 : [10, 24, 28, 30].contains(family) ? 0x86DD : 0
            off = 4
        default:
            return anomaly(f.number, .unsupportedLinkType(f.linkType.rawValue))
        }
        switch etherType {
        case 0x0800: decodeIPv4(d[(d.startIndex + off)...], f)
        case 0x86DD: decodeIPv6(d[(d.startIndex + off)...], f)
        default: counters.nonIPFrames += 1
        }
    }

    // MARK: IP

    private mutating func decodeIPv4(_ p: ArraySlice<UInt8>, _ f: CaptureFrame) {
        let s = p.startIndex
        guard p.count >= 20 else { return anomaly(f.number, .truncated("IPv4 header")) }
        guard p[s] >> 4 == 4 else { return anomaly(f.number, .malformed("IPv4 version \(p[s] >> 4)")) }
        let ihl = Int(p[s] & 0x0F) * 4
        let total = Int(UInt16(p[s + 2]) << 8 | UInt16(p[s + 3]))
        guard ihl >= 20, total >= ihl else { return anomaly(f.number, .malformed("IPv4 header length \(ihl), total length \(total)")) }
        guard p.count >= total else { return anomaly(f.number, .truncated("IPv4 datagram of \(total) bytes, \(p.count) captured")) }
        counters.ipv4Packets += 1
        let proto = p[s + 9]
        let id = UInt32(p[s + 4]) << 8 | UInt32(p[s + 5])
        let flagsOffset = Int(p[s + 6]) << 8 | Int(p[s + 7])
        let more = flagsOffset & 0x2000 != 0
        let fragOffset = (flagsOffset & 0x1FFF) * 8
        let src = IPAddress.v4(IPv4Address(p, at: s + 12)), dst = IPAddress.v4(IPv4Address(p, at: s + 16))
        let payload = p[(s + ihl)..<(s + total)]
        if more || fragOffset != 0 {
            counters.fragments += 1
            var problems: [CaptureAnomaly.Kind] = []
            let key = FragmentKey(version: 4, source: src.bytes, destination: dst.bytes, identification: id, protocolNumber: proto)
            let outcome = reassembler.add(key: key, offset: fragOffset, payload: payload, more: more, nextHeader: proto,
                                          at: f.timestamp, discardOnOverlap: false, anomalies: &problems)
            for k in problems { anomaly(f.number, k) }
            guard case .complete(let whole, _, _) = outcome else { return }
            counters.datagramsReassembled += 1
            decodeTransport(proto, whole[...], src, dst, f)
        } else {
            decodeTransport(proto, payload, src, dst, f)
        }
    }

    private mutating func decodeIPv6(_ p: ArraySlice<UInt8>, _ f: CaptureFrame) {
        let s = p.startIndex
        guard p.count >= 40 else { return anomaly(f.number, .truncated("IPv6 header")) }
        guard p[s] >> 4 == 6 else { return anomaly(f.number, .malformed("IPv6 version \(p[s] >> 4)")) }
        let length = Int(p[s + 4]) << 8 | Int(p[s + 5])
        guard length > 0 else { return anomaly(f.number, .malformed("IPv6 jumbogram (payload length 0) not supported")) }
        guard p.count >= 40 + length else { return anomaly(f.number, .truncated("IPv6 payload of \(length) bytes, \(p.count - 40) captured")) }
        counters.ipv6Packets += 1
        let src = IPAddress.v6(IPv6Address(p, at: s + 8)), dst = IPAddress.v6(IPv6Address(p, at: s + 24))
        walkIPv6(next: p[s + 6], p[(s + 40)..<(s + 40 + length)], src, dst, f, reassembled: false)
    }

    /// Follows the extension header chain (RFC 8200 §4) to the upper-layer header.
    private mutating func walkIPv6(next first: UInt8, _ p: ArraySlice<UInt8>, _ src: IPAddress, _ dst: IPAddress, _ f: CaptureFrame, reassembled: Bool) {
        var next = first
        var i = p.startIndex
        while true {
            switch next {
            case 0, 43, 60, 51:  // hop-by-hop, routing, destination options, AH
                guard p.endIndex - i >= 2 else { return anomaly(f.number, .truncated("IPv6 extension header \(next)")) }
                if next == 0 && i != p.startIndex { return anomaly(f.number, .malformed("hop-by-hop options not first")) }
                let len = next == 51 ? (Int(p[i + 1]) + 2) * 4 : (Int(p[i + 1]) + 1) * 8
                guard p.endIndex - i >= len else { return anomaly(f.number, .truncated("IPv6 extension header \(next)")) }
                next = p[i]
                i += len
            case 44:
                guard p.endIndex - i >= 8 else { return anomaly(f.number, .truncated("IPv6 fragment header")) }
                guard !reassembled else { return anomaly(f.number, .malformed("fragment header inside a reassembled datagram")) }
                counters.fragments += 1
                let word = Int(p[i + 2]) << 8 | Int(p[i + 3])
                let id = UInt32(p[i + 4]) << 24 | UInt32(p[i + 5]) << 16 | UInt32(p[i + 6]) << 8 | UInt32(p[i + 7])
                let key = FragmentKey(version: 6, source: src.bytes, destination: dst.bytes, identification: id, protocolNumber: 0)
                var problems: [CaptureAnomaly.Kind] = []
                let outcome = reassembler.add(key: key, offset: word & 0xFFF8, payload: p[(i + 8)...], more: word & 1 != 0, nextHeader: p[i],
                                              at: f.timestamp, discardOnOverlap: true, anomalies: &problems)
                for k in problems { anomaly(f.number, k) }
                guard case .complete(let whole, let nh, _) = outcome else { return }
                counters.datagramsReassembled += 1
                return walkIPv6(next: nh, whole[...], src, dst, f, reassembled: true)
            case 59:
                return
            default:
                return decodeTransport(next, p[i...], src, dst, f)
            }
        }
    }

    // MARK: UDP and TCP

    private mutating func decodeTransport(_ proto: UInt8, _ p: ArraySlice<UInt8>, _ src: IPAddress, _ dst: IPAddress, _ f: CaptureFrame) {
        let s = p.startIndex
        switch proto {
        case 17:
            guard p.count >= 8 else { return anomaly(f.number, .truncated("UDP header")) }
            let len = Int(p[s + 4]) << 8 | Int(p[s + 5])
            guard len >= 8 else { return anomaly(f.number, .malformed("UDP length \(len)")) }
            guard len <= p.count else { return anomaly(f.number, .truncated("UDP datagram of \(len) bytes, \(p.count) present")) }
            counters.udpDatagrams += 1
            let source = CaptureEndpoint(address: src, port: UInt16(p[s]) << 8 | UInt16(p[s + 1]))
            let destination = CaptureEndpoint(address: dst, port: UInt16(p[s + 2]) << 8 | UInt16(p[s + 3]))
            let payload = p[(s + 8)..<(s + len)]
            guard SIPDetector.startsWithStartLine(payload) else {
                counters.nonSIPPayloads += 1
                if datagrams {
                    out.append(.datagram(CapturedDatagram(timestamp: f.timestamp, source: source, destination: destination, frameNumber: f.number,
                                                          length: payload.count, kind: CapturedDatagram.classify(payload),
                                                          payload: payloads ? payload : [])))
                }
                return
            }
            do throws(SIPParseError) {
                if var sc = scanner.take() {
                    defer { scanner = sc }
                    let d = try sc.digest(datagram: payload) { code in firstReason(code) }
                    counters.sipMessages += 1
                    out.append(.digest(CapturedSIPDigest(timestamp: f.timestamp, source: source, destination: destination, transport: .udp,
                                                         frameNumber: f.number, digest: d)))
                    return
                }
                let m = try SIPMessage(bytes: Array(payload))
                emit(CapturedSIPMessage(timestamp: f.timestamp, source: source, destination: destination, transport: .udp, frameNumber: f.number, message: m))
            } catch {
                counters.parseErrors += 1
                anomaly(f.number, .sipParseError(error))
            }
        case 6:
            guard p.count >= 20 else { return anomaly(f.number, .truncated("TCP header")) }
            let hl = Int(p[s + 12] >> 4) * 4
            guard hl >= 20, hl <= p.count else { return anomaly(f.number, .malformed("TCP data offset \(hl)")) }
            counters.tcpSegments += 1
            let key = FlowKey(source: CaptureEndpoint(address: src, port: UInt16(p[s]) << 8 | UInt16(p[s + 1])),
                              destination: CaptureEndpoint(address: dst, port: UInt16(p[s + 2]) << 8 | UInt16(p[s + 3])))
            let seq = UInt32(p[s + 4]) << 24 | UInt32(p[s + 5]) << 16 | UInt32(p[s + 6]) << 8 | UInt32(p[s + 7])
            tcpSegment(key, seq: seq, flags: p[s + 13], payload: p[(s + hl)...], f)
        default:
            break
        }
    }

    private mutating func emit(_ m: CapturedSIPMessage) {
        counters.sipMessages += 1
        if scanner != nil {
            let d = SIPMessageDigest(m.message, reasonPhrase: m.message.statusCode.map { firstReason($0) } ?? false)
            out.append(.digest(CapturedSIPDigest(timestamp: m.timestamp, source: m.source, destination: m.destination, transport: m.transport,
                                                 frameNumber: m.frameNumber, digest: d)))
        } else {
            out.append(.message(m))
        }
    }

    /// Whether `code`'s reason phrase is yet to be reported (and notes that it now is).
    private mutating func firstReason(_ code: Int) -> Bool {
        let bit = code - 100
        guard bit >= 0, bit < 64 * reasonReported.count else { return false }
        let mask: UInt64 = 1 << UInt64(bit % 64)
        if reasonReported[bit / 64] & mask != 0 { return false }
        reasonReported[bit / 64] |= mask
        return true
    }

    // MARK: TCP stream reassembly (RFC 9293 §3.4, §3.10.7)

    private mutating func tcpSegment(_ key: FlowKey, seq: UInt32, flags: UInt8, payload: ArraySlice<UInt8>, _ f: CaptureFrame) {
        let fin = flags & 0x01 != 0, syn = flags & 0x02 != 0, rst = flags & 0x04 != 0
        var d: TCPDirection
        if let existing = flows.removeValue(forKey: key) {
            d = existing
        } else {
            if flows.count >= limits.maxTCPFlows, let victim = flows.min(by: { $0.value.lastSeen < $1.value.lastSeen })?.key {
                flows[victim] = nil
                anomaly(f.number, .tcpFlowEvicted(source: victim.source, destination: victim.destination))
            }
            d = TCPDirection(lastSeen: f.timestamp)
        }
        d.lastSeen = f.timestamp
        if d.closed && !syn {
            // After FIN or RST: late retransmissions are not new data.
            if !payload.isEmpty { counters.tcpRetransmissions += 1 }
            flows[key] = d
            return
        }
        if rst {
            close(&d, key: key, frameNumber: f.number, time: f.timestamp)
            flows[key] = d
            return
        }
        var dataSeq = seq
        if syn {
            // A SYN starts (or restarts) the stream: data begins after it.
            if let n = d.nextSeq, n == seq &+ 1 {
                // Retransmitted SYN.
            } else {
                if d.nextSeq != nil { close(&d, key: key, frameNumber: f.number, time: f.timestamp) }
                d = TCPDirection(lastSeen: f.timestamp)
                d.nextSeq = seq &+ 1
            }
            dataSeq = seq &+ 1
        }
        if d.nextSeq == nil { d.nextSeq = dataSeq }  // capture started mid-stream
        if fin { d.finSeq = dataSeq &+ UInt32(payload.count) }
        if !payload.isEmpty {
            let rel = Int(Int32(bitPattern: dataSeq &- d.nextSeq!))
            if rel + payload.count <= 0 {
                counters.tcpRetransmissions += 1
            } else if rel <= 0 {
                if rel < 0 { counters.tcpRetransmissions += 1 }
                deliver(&d, key: key, payload.dropFirst(-rel), f.number, f.timestamp)
                d.nextSeq = d.nextSeq! &+ UInt32(payload.count + rel)
            } else if let held = d.pending[dataSeq], held.count >= payload.count {
                counters.tcpRetransmissions += 1
            } else {
                d.pendingBytes += payload.count - (d.pending[dataSeq]?.count ?? 0)
                d.pending[dataSeq] = Array(payload)
            }
        }
        drain(&d, key: key, f.number, f.timestamp)
        while d.pendingBytes > limits.maxBufferedBytesPerFlow { skipGap(&d, key: key, f.number, f.timestamp) }
        if let finSeq = d.finSeq, finSeq == d.nextSeq {
            close(&d, key: key, frameNumber: f.number, time: f.timestamp)
        }
        flows[key] = d
    }

    /// Delivers buffered segments that have become in order.
    private mutating func drain(_ d: inout TCPDirection, key: FlowKey, _ frame: Int, _ time: CaptureTimestamp) {
        while !d.pending.isEmpty, let next = d.nextSeq {
            var progressed = false
            for (seq, bytes) in d.pending {
                let rel = Int(Int32(bitPattern: seq &- next))
                guard rel <= 0 else { continue }
                d.pending[seq] = nil
                d.pendingBytes -= bytes.count
                if rel + bytes.count <= 0 {
                    counters.tcpRetransmissions += 1
                } else {
                    if rel < 0 { counters.tcpRetransmissions += 1 }
                    deliver(&d, key: key, bytes[(-rel)...], frame, time)
                    d.nextSeq = next &+ UInt32(bytes.count + rel)
                }
                progressed = true
                break
            }
            if !progressed { break }
        }
    }

    /// Skips the hole before the lowest buffered segment.
    private mutating func skipGap(_ d: inout TCPDirection, key: FlowKey, _ frame: Int, _ time: CaptureTimestamp) {
        guard let next = d.nextSeq,
              let lowest = d.pending.keys.min(by: { Int32(bitPattern: $0 &- next) < Int32(bitPattern: $1 &- next) }) else { return }
        let hole = Int(Int32(bitPattern: lowest &- next))
        var partial = d.undetected.count
        d.undetected = []
        if d.framer != nil {
            partial = d.framer!.bufferedByteCount
            d.framer = SIPStreamFramer(mode: .resynchronizing)
        }
        counters.tcpGaps += 1
        anomaly(frame, .tcpGap(source: key.source, destination: key.destination, bytes: hole, discardedPartial: partial))
        d.nextSeq = lowest
        drain(&d, key: key, frame, time)
    }

    /// Ends a direction: skips remaining holes and reports an unfinished message.
    private mutating func close(_ d: inout TCPDirection, key: FlowKey, frameNumber: Int, time: CaptureTimestamp) {
        while !d.pending.isEmpty { skipGap(&d, key: key, frameNumber, time) }
        if let fr = d.framer, fr.bufferedByteCount > 0, fr.pendingBytes.contains(where: { $0 != 0x0D && $0 != 0x0A }) {
            anomaly(frameNumber, .tcpIncompleteMessage(source: key.source, destination: key.destination, bytes: fr.bufferedByteCount))
        }
        d.framer = nil
        d.undetected = []
        d.closed = true
    }

    private mutating func deliver(_ d: inout TCPDirection, key: FlowKey, _ bytes: ArraySlice<UInt8>, _ frame: Int, _ time: CaptureTimestamp) {
        guard !bytes.isEmpty else { return }
        if d.framer == nil {
            // Until the direction shows SIP, its latest bytes are held (bounded), so a start
            // line split across segments ("I" then "NVITE sip:… SIP/2.0") is not cut.
            d.undetected.append(contentsOf: bytes)
            guard SIPDetector.mayHoldSIP(d.undetected[...]) else {
                counters.nonSIPPayloads += 1
                if d.undetected.count > TCPDirection.maxUndetectedBytes {
                    d.undetected.removeFirst(d.undetected.count - TCPDirection.maxUndetectedBytes)
                }
                return
            }
            d.framer = SIPStreamFramer(mode: .resynchronizing)
            d.framer!.append(d.undetected[...])
            d.undetected = []
        } else {
            d.framer!.append(bytes)
        }
        while true {
            let event: SIPStreamEvent?
            do throws(SIPParseError) {
                event = try d.framer!.next()
            } catch {
                counters.parseErrors += 1
                anomaly(frame, .sipParseError(error))
                d.framer = SIPStreamFramer(mode: .resynchronizing)
                return
            }
            guard let event else { return }
            switch event {
            case .message(let m):
                emit(CapturedSIPMessage(timestamp: time, source: key.source, destination: key.destination, transport: .tcp, frameNumber: frame, message: m))
            case .discarded(_, let e):
                counters.parseErrors += 1
                anomaly(frame, .sipParseError(e))
            case .keepAlivePing, .keepAlivePong:
                break
            }
        }
    }
}

struct FlowKey: Hashable, Sendable {
    var source: CaptureEndpoint
    var destination: CaptureEndpoint
}

/// One direction of a TCP connection.
struct TCPDirection: Sendable {
    /// The sequence number of the next byte to deliver (nil before any segment).
    var nextSeq: UInt32?
    /// Out-of-order segments by sequence number.
    var pending: [UInt32: [UInt8]] = [:]
    var pendingBytes = 0
    var finSeq: UInt32?
    /// Set after FIN (once every byte before it arrived) or RST; only a new SYN reopens it.
    var closed = false
    /// Present once the stream is known to carry SIP.
    var framer: SIPStreamFramer?
    /// Before that: the direction's latest bytes, at most ``maxUndetectedBytes``.
    var undetected: [UInt8] = []
    static let maxUndetectedBytes = 4096
    var lastSeen: CaptureTimestamp

    init(lastSeen: CaptureTimestamp) { self.lastSeen = lastSeen }
}

/// Recognizes SIP by content.
enum SIPDetector {
    private static let version = Array("SIP/2.0".utf8)

    /// Whether the bytes begin (after optional CR/LF) with a SIP request or status line:
    /// `token SP non-space… SP SIP/2.0 CRLF` or `SIP/2.0 SP 3DIGIT SP`.
    static func startsWithStartLine(_ b: ArraySlice<UInt8>) -> Bool {
        b.withUnsafeBufferPointer { startsWithStartLine($0) }
    }

    /// The same over a buffer (scanned without slicing: this runs on every UDP payload and TCP segment).
    static func startsWithStartLine(_ p: UnsafeBufferPointer<UInt8>) -> Bool {
        let end = p.count
        var i = 0
        while i < end, p[i] == 0x0D || p[i] == 0x0A { i += 1 }
        // Both start lines begin with a token byte (a method, or the `S` of `SIP/2.0`): RTP,
        // RTCP, STUN and DTLS (first byte 0x00–0x3F or 0x80–0xBF) are refused at once.
        guard i < end, isTokenByte(p[i]) else { return false }
        let limit = min(end, i + 1024)
        var lineEnd = i
        while lineEnd < limit, p[lineEnd] != 0x0A { lineEnd += 1 }
        if lineEnd < end, p[lineEnd] != 0x0A { lineEnd = limit }
        var e = lineEnd
        if e > i, p[e - 1] == 0x0D { e -= 1 }
        let n = version.count
        @inline(__always) func versionAt(_ k: Int) -> Bool {
            guard k >= 0, k + n <= e else { return false }
            for t in 0..<n where p[k + t] != version[t] { return false }
            return true
        }
        if versionAt(i) {
            // SIP/2.0 SP 3DIGIT, then the end or SP.
            let r = i + n
            guard e - r >= 4, p[r] == 0x20 else { return false }
            for t in 1...3 where !(0x30...0x39).contains(p[r + t]) { return false }
            return e - r == 4 || p[r + 4] == 0x20
        }
        // token SP uri SP SIP/2.0, exactly two spaces.
        guard e - i > n + 3, versionAt(e - n) else { return false }
        var sp1 = i
        while sp1 < e, p[sp1] != 0x20 { sp1 += 1 }
        guard sp1 < e, sp1 > i else { return false }
        let sp2 = e - n - 1
        guard p[sp2] == 0x20, sp2 > sp1 + 1 else { return false }
        for k in (sp1 + 1)..<sp2 where p[k] == 0x20 { return false }
        for k in i..<sp1 where !isTokenByte(p[k]) { return false }
        return true
    }

    /// Whether stream bytes start with a SIP start line or hold "SIP/2.0" (a capture begun
    /// mid-message, which the resynchronizing framer skips to the next start line).
    static func mayHoldSIP(_ b: ArraySlice<UInt8>) -> Bool {
        if startsWithStartLine(b) { return true }
        guard b.count >= version.count else { return false }
        var i = b.startIndex
        while let k = b[i...].firstIndex(of: 0x53), k + version.count <= b.endIndex {  // 'S'
            if b[k..<(k + version.count)].elementsEqual(version) { return true }
            i = k + 1
        }
        return false
    }

    private static func isTokenByte(_ c: UInt8) -> Bool {
        switch c {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "!"), UInt8(ascii: "%"), UInt8(ascii: "*"), UInt8(ascii: "_"),
             UInt8(ascii: "+"), UInt8(ascii: "`"), UInt8(ascii: "'"), UInt8(ascii: "~"): return true
        default: return false
        }
    }
}

extension IPv4Address {
    /// The address in the four bytes of `p` from `offset` (the caller checked the length).
    init(_ p: ArraySlice<UInt8>, at offset: Int) {
        self.init(p[offset], p[offset + 1], p[offset + 2], p[offset + 3])
    }
}

extension IPv6Address {
    /// The address in the sixteen bytes of `p` from `offset` (the caller checked the length).
    init(_ p: ArraySlice<UInt8>, at offset: Int) {
        var high: UInt64 = 0, low: UInt64 = 0
        for i in 0..<8 { high = high << 8 | UInt64(p[offset + i]) }
        for i in 8..<16 { low = low << 8 | UInt64(p[offset + i]) }
        self.init(high: high, low: low)
    }
}
