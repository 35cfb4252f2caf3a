import PacketCapture
import NetworkIO
import RTP
import Media
#if canImport(SRTP)
import SRTP
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An RTP payload format: what a payload type stands for (RFC 3551's static table, or an SDP
/// `a=rtpmap`).
public struct RTPPayloadFormat: Sendable, Hashable {
    /// The payload type, 0–127.
    public var payloadType: UInt8
    /// The name as `tshark -z rtp,streams` prints it: `g711U`, `g711A`, `g722`, … for static
    /// types, the SDP encoding name (`opus`, `telephone-event`) for dynamic ones.
    public var name: String
    /// The RTP clock rate in Hz (0 when unknown).
    public var clockRate: Int
    /// Channels (1 unless the SDP says otherwise).
    public var channels: Int

    /// A payload format.
    public init(payloadType: UInt8, name: String, clockRate: Int, channels: Int = 1) {
        self.payloadType = payloadType
        self.name = name
        self.clockRate = clockRate
        self.channels = channels
    }

    /// The RFC 3551 static payload types (names as Wireshark prints them), `nil` for the
    /// dynamic and unassigned ones.
    public static func staticFormat(_ pt: UInt8) -> RTPPayloadFormat? {
        let entry: (String, Int)
        switch pt {
        case 0: entry = ("g711U", 8000)
        case 1: entry = ("fs-1016", 8000)
        case 2: entry = ("g721", 8000)
        case 3: entry = ("GSM", 8000)
        case 4: entry = ("g723", 8000)
        case 5: entry = ("DVI4 8k", 8000)
        case 6: entry = ("DVI4 16k", 16000)
        case 7: entry = ("Exp. from Xerox PARC", 8000)
        case 8: entry = ("g711A", 8000)
        case 9: entry = ("g722", 8000)
        case 10, 11: entry = ("16-bit audio, big-endian", 44100)
        case 12: entry = ("QCELP", 8000)
        case 13: entry = ("CN", 8000)
        case 14: entry = ("MPEG-I/II Audio", 90000)
        case 15: entry = ("g728", 8000)
        case 16: entry = ("DVI4 11k", 11025)
        case 17: entry = ("DVI4 22k", 22050)
        case 18: entry = ("g729", 8000)
        case 19: entry = ("CN(old)", 8000)
        case 25: entry = ("CelB", 90000)
        case 26: entry = ("JPEG", 90000)
        case 28: entry = ("NV", 90000)
        case 31: entry = ("h261", 90000)
        case 32: entry = ("MPEG-I/II Video", 90000)
        case 33: entry = ("MPEG-II streams", 90000)
        case 34: entry = ("h263", 90000)
        default: return nil
        }
        return RTPPayloadFormat(payloadType: pt, name: entry.0, clockRate: entry.1)
    }

    /// A dynamic payload type no SDP described, named as Wireshark's defaults name it: 101 is
    /// taken for RFC 4733 events (`rtpevent`, Wireshark's default telephone-event type), 99 for
    /// RFC 2198 redundancy (`rtp.rfc2198`), any other `RTPType-N`; no clock rate.
    public static func unannounced(_ pt: UInt8) -> RTPPayloadFormat {
        switch pt {
        case 101: return RTPPayloadFormat(payloadType: pt, name: "rtpevent", clockRate: 0)
        case 99: return RTPPayloadFormat(payloadType: pt, name: "rtp.rfc2198", clockRate: 0)
        default: return RTPPayloadFormat(payloadType: pt, name: "RTPType-\(pt)", clockRate: 0)
        }
    }

    /// Whether the format is comfort noise (RFC 3389, payload 13, or the old 19).
    var isComfortNoise: Bool { payloadType == 13 || payloadType == 19 || name.lowercased() == "cn" }
    /// Whether the format is RFC 4733 telephone events (by its SDP name, or the unannounced 101).
    var isTelephoneEvent: Bool { name.lowercased() == "telephone-event" || name == "rtpevent" }
}

/// A DTMF digit found in an RTP stream (RFC 4733 telephone events): one per event, however
/// many packets (and retransmitted end packets) carried it.
public struct RTPDTMFDigit: Sendable, Hashable {
    /// The digit (`0`–`9`, `*`, `#`, `A`–`D`), or `?` for another event code.
    public var digit: Character
    /// The event code (RFC 4733 §3.2).
    public var event: UInt8
    /// When its first packet was captured.
    public var time: CaptureTimestamp
    /// Its duration in timestamp units from the last packet seen (the end packet's when present).
    public var duration: UInt16
    /// Whether an end packet was seen.
    public var ended: Bool
    /// The RTP timestamp that identifies the event.
    public var rtpTimestamp: UInt32
}

/// An RTCP report block about a stream, as its receiver sent it (RFC 3550 §6.4).
public struct RTPReceiverReport: Sendable, Hashable {
    /// When the RTCP packet was captured.
    public var time: CaptureTimestamp
    /// Who sent it (the stream's receiver).
    public var reporter: CaptureEndpoint
    /// The reporter's SSRC.
    public var reporterSSRC: UInt32
    /// The fraction lost since the previous report, 0–1.
    public var fractionLost: Double
    /// The cumulative number of packets lost (may be negative with duplicates).
    public var cumulativeLost: Int32
    /// The interarrival jitter in timestamp units.
    public var jitter: UInt32
    /// The jitter in milliseconds (`nil` when the stream's clock rate is unknown).
    public var jitterMilliseconds: Double?
    /// Whether the block came in a sender report (else a receiver report).
    public var inSenderReport: Bool
}

/// RTP stream analysis of a capture, as `tshark -q -z rtp,streams` gives it, plus what tshark
/// does not: sequence errors, an E-model MOS estimate, RTCP reports matched to their streams,
/// silent streams, DTMF digits, and (optionally) the payloads for audio export.
///
/// Feed it UDP datagrams with their payloads in capture order (``add(_:)``), the media the
/// calls' SDP announces (``announce(_:callID:)``), then call ``finish()``.
///
/// **Which datagrams are RTP.** A datagram classified RTP (version 2, 12 bytes at least,
/// second byte outside 192–223, RFC 5761 §4) with a valid header (CSRC list, extension and
/// padding within the datagram) is taken when its source or destination is an RTP address an
/// SDP announced, or when its (source, destination, SSRC) already is a stream. Other flows
/// are taken heuristically, and conservatively: after ``heuristicPackets`` datagrams in a row
/// from the same source to the same destination with one SSRC, one payload type and sequence
/// numbers moving forward by 1–100 each (the earlier ones are then counted too).
///
/// **Streams** are identified by (source, destination, SSRC), as tshark does.
///
/// **Statistics** follow what Wireshark's RTP analysis computes (learned from its
/// documentation and checked number for number against `tshark -z rtp,streams`):
/// - arrival times in milliseconds; for each packet after the first, the delta from the
///   previous packet, and the RFC 3550 §6.4.1 / A.8 jitter
///   `J += (|D| − J) / 16`, where `D` is the difference between the arrival spacing and the RTP
///   timestamp spacing (timestamps taken relative to the stream's first, modulo 2³², divided by
///   the packet's clock rate; no jitter when the clock rate is unknown);
/// - min, mean and max delta and jitter over the *regular* packets only: not the first, not
///   one with the marker bit, not comfort noise nor the packet after comfort noise; jitter only
///   over those with a clock rate, which telephone events do not get (their timestamp is the
///   event's start, RFC 4733 §2.5.1.2);
/// - mean delta and mean jitter are the means over those packets. (On streams carrying
///   telephone events tshark's mean jitter and mean delta differ from these in the third
///   decimal, and on streams with marker bits after the first packet its mean delta does;
///   everything else agrees.)
/// - sequence numbers are compared modulo 2¹⁶: a forward step of 1 is in order, a forward step
///   of 2 to 2¹⁵ − 1 a gap, anything else a late or duplicate packet; moving forward past 65535
///   counts a wrap;
/// - expected packets = the last packet's sequence number + 65536 × wraps − the first's + 1
///   (so a late packet at the very end counts one less, as in tshark); lost = expected −
///   received (negative with duplicates);
/// - a *sequence error* is a gap, a late or a duplicate packet; any makes the stream a problem
///   (tshark's `X`).
///
/// **MOS** (ITU-T G.107 simplified, ``EModel``): `R = 93.2 − Idd(Ta) − Ie,eff`, with
/// `Ie,eff = Ie + (95 − Ie) · Ppl / (Ppl + Bpl)`, Ppl the stream's loss in percent (lost ÷
/// expected, not below 0), Ie/Bpl from the codec (G.711 with PLC: 0/25.1; Opus by its
/// bitrate, ``CodecImpairment/opus(bitrate:)``; G.729 11/19, GSM 20/10, G.723 15/16.1 after
/// G.113 Appendix I; any other as G.711), and the mouth-to-ear delay
/// `Ta = packetization + 2 × max jitter` (a jitter buffer sized to twice the worst jitter seen)
/// — the network delay itself is not known from one capture point. MOS from R by G.107 Annex B.
///
/// **Silent stream**: a G.711 stream whose every sample stays under ``silenceThreshold``.
///
/// **Memory**: one small record per stream (a table grown by doubling), the heuristic's
/// candidate flows (bounded), and the DTMF digits and RTCP reports; no allocation per
/// packet, unless payloads are kept for audio (``keepPayloads``).
/// One interval of a stream's timeline (``RTPStreamAnalyzer/keepsTimelines``): what arrived in
/// it, for the plots of the HTML view.
public struct RTPTimelineBucket: Sendable, Hashable {
    /// Its start, in seconds after the stream's first packet.
    public var start: Double
    /// Its length in seconds (1, doubled as often as needed to keep at most
    /// ``RTPStreamAnalyzer/maxTimelineBuckets``).
    public var length: Double
    /// Packets that arrived in it.
    public var packets = 0
    /// Packets missing in the sequence gaps that ended in it (RFC 3550 sequence numbers).
    public var lost = 0
    /// The highest RFC 3550 interarrival jitter (ms) after a packet of it; `nil` without a clock rate.
    public var maxJitter: Double?
    /// Decoded G.711 samples in it, and the sum of their squares (full scale 1).
    public var samples = 0
    public var power = 0.0

    /// The loss in percent of the packets expected in it.
    public var lossPercent: Double { packets + lost > 0 ? Double(lost) * 100 / Double(packets + lost) : 0 }
    /// The mean level in dBov (ITU-T G.100.1: 0 dBov is a full-scale square wave), floored at
    /// −100; `nil` when nothing was decoded (not G.711, SRTP not decrypted, no packet).
    public var level: Double? {
        guard samples > 0 else { return nil }
        return max(-100, 10 * log10(max(power / Double(samples), 1e-10)))
    }

    mutating func merge(_ o: RTPTimelineBucket) {
        packets += o.packets
        lost += o.lost
        if let j = o.maxJitter { maxJitter = max(maxJitter ?? j, j) }
        samples += o.samples
        power += o.power
    }
}

public struct RTPStreamAnalyzer: Sendable {
    /// A stream's identity.
    public struct StreamKey: Sendable, Hashable {
        /// The sender.
        public var source: CaptureEndpoint
        /// The receiver.
        public var destination: CaptureEndpoint
        /// The synchronization source.
        public var ssrc: UInt32
        /// A stream key.
        public init(source: CaptureEndpoint, destination: CaptureEndpoint, ssrc: UInt32) {
            self.source = source
            self.destination = destination
            self.ssrc = ssrc
        }

        /// One word mixed from every field, hashed once (a lookup per packet: the default
        /// hashing of the two endpoints' enums costs more than the rest of the analysis).
        public func hash(into hasher: inout Hasher) {
            func word(_ e: CaptureEndpoint) -> UInt64 {
                let a: UInt64
                switch e.address {
                case .v4(let v): a = UInt64(v.value)
                case .v6(let v): a = v.high ^ (v.low &* 0x9E37_79B9_7F4A_7C15)
                }
                return a << 16 | UInt64(e.port)
            }
            hasher.combine(word(source) &* 0xBF58_476D_1CE4_E5B9 ^ word(destination) &* 0x94D0_49BB_1331_11EB ^ UInt64(ssrc))
        }
    }

    /// One RTP stream's statistics (complete after ``RTPStreamAnalyzer/finish()``).
    public struct Stream: Sendable {
        /// Sender, receiver and SSRC.
        public var key: StreamKey
        /// The payload formats seen, in order of first appearance.
        public var formats: [RTPPayloadFormat]
        /// Whether an SDP announced the stream's source or destination (else found by heuristic).
        public var announced: Bool
        /// The Call-ID whose SDP announced it.
        public var callID: String?
        /// The first packet's capture time and frame.
        public var first: CaptureTimestamp
        /// The frame of the first packet.
        public var firstFrame: Int
        /// The last packet's capture time.
        public var last: CaptureTimestamp
        /// Packets received.
        public var packets: Int
        /// Payload bytes received.
        public var payloadBytes: Int
        /// Packets expected from the sequence numbers (see ``RTPStreamAnalyzer``).
        public var expected: Int
        /// Expected minus received (negative with duplicates).
        public var lost: Int { expected - packets }
        /// ``lost`` as a percentage of ``expected``.
        public var lostPercent: Double { expected > 0 ? Double(lost) * 100 / Double(expected) : 0 }
        /// Gaps, late and duplicate packets.
        public var sequenceErrors: Int
        /// Packets with the marker bit.
        public var markers: Int
        /// Min, mean and max delta between regular packets (ms); `nil` without two packets.
        public var minDelta: Double?
        /// Mean delta (ms).
        public var meanDelta: Double?
        /// Max delta (ms).
        public var maxDelta: Double?
        /// The frame that ended the longest delta.
        public var maxDeltaFrame: Int?
        /// Min jitter (ms); `nil` when never computed (no regular packet, or unknown clock rate).
        public var minJitter: Double?
        /// Mean jitter (ms), tshark's running mean.
        public var meanJitter: Double?
        /// Max jitter (ms).
        public var maxJitter: Double?
        /// Whether tshark would flag the stream (`X`): a sequence error.
        public var problem: Bool { sequenceErrors > 0 }
        /// The E-model MOS estimate (`nil` for non-audio or telephone-event-only streams).
        public var mos: Double?
        /// Whether every sample of a G.711 stream stayed under the silence threshold (`nil` for
        /// other codecs).
        public var silent: Bool?
        /// DTMF digits (RFC 4733) carried by the stream.
        public var dtmf: [RTPDTMFDigit]
        /// RTCP report blocks about this stream, from its receiver(s).
        public var reports: [RTPReceiverReport]
        /// RTCP sender reports the stream's source sent.
        public var senderReports: Int
        /// For a stream on an SRTP profile (or whose sender announced or was given keys): its
        /// key and how many packets decrypted or failed; `nil` for plain RTP.
        public var srtp: SRTPStreamStatus? = nil
        /// Jitter, loss and level over time (``RTPStreamAnalyzer/keepsTimelines``; empty otherwise).
        public var timeline: [RTPTimelineBucket] = []
        /// Packets that failed SRTP authentication (0 for plain RTP).
        public var srtpFailures: Int { srtp?.authenticationFailures ?? 0 }

        /// The payload names joined as tshark prints them (`g711A, telephone-event`).
        public var payloadNames: String { formats.map(\.name).joined(separator: ", ") }
    }

    /// A call's media directions.
    public struct CallMedia: Sendable, Hashable {
        /// The Call-ID.
        public var callID: String
        /// RTP addresses announced by the call's SDP, by announcer.
        public var announced: [CaptureEndpoint]
        /// Positions in ``RTPStreamAnalyzer/streams`` of the call's streams.
        public var streams: [Int]
        /// Whether media flowed one way only: RTP towards some announced address of the call
        /// and none towards another (two sides announced), or packets from one side only.
        public var oneWay: Bool
    }

    /// One packet kept for audio export (``keepPayloads``).
    public struct PayloadPacket: Sendable {
        /// Capture time.
        public var time: CaptureTimestamp
        /// Sequence number extended by the wraps seen.
        public var sequence: Int64
        /// The RTP timestamp.
        public var timestamp: UInt32
        /// The payload type.
        public var payloadType: UInt8
        /// The payload (padding removed).
        public var payload: [UInt8]
    }

    /// Datagrams in a row an unannounced flow needs to be taken as RTP.
    public var heuristicPackets = 3
    /// The G.711 sample magnitude under which a stream counts as silent (≈ −50 dBFS).
    public var silenceThreshold: Int16 = 104
    /// Whether payloads are kept (``payloads``), for audio export.
    public let keepPayloads: Bool
    /// Whether each stream keeps its ``Stream/timeline`` (G.711 payloads decoded for the level).
    public let keepsTimelines: Bool
    /// The most buckets a timeline keeps: past it, neighbours merge and the interval doubles.
    public static let maxTimelineBuckets = 600

    /// The streams, in order of their first packet (complete after ``finish()``).
    public private(set) var streams: [Stream] = []
    /// The calls' media (after ``finish()``).
    public private(set) var calls: [CallMedia] = []
    /// The kept payloads, by stream position (``keepPayloads``).
    public private(set) var payloads: [[PayloadPacket]] = []
    /// RTCP packets seen, and those whose report blocks named no known stream.
    public private(set) var rtcpPackets = 0
    /// RTCP report blocks that matched no stream.
    public private(set) var unmatchedReportBlocks = 0

    private var states: [StreamState] = []
    private var index: [StreamKey: Int] = [:]
    /// The IPv4 streams again, by their key packed in two words (the fast path's lookup).
    private var packedIndex = PackedStreamIndex()
    private var lastKey: StreamKey?
    private var lastIndex = 0
    /// Announced RTP endpoints → (format table position, call).
    private var announcedEndpoints: [CaptureEndpoint: Int] = [:]
    private var announcements: [(formats: [UInt8: RTPPayloadFormat], callID: String?, endpoint: CaptureEndpoint)] = []
    private var candidates: [FlowKey: Candidate] = [:]
    private static let maxCandidates = 65536
    /// How SRTP is decrypted.
    public let srtpOptions: SRTPCaptureOptions
    #if canImport(SRTP)
    /// Made at the first SRTP announcement or key: `nil` keeps plain captures at no cost.
    private var decryption: SRTPCaptureDecryption?
    #endif
    /// The SRTP outcome of the packet being added (``SRTPCaptureDecryption/Tally``), kept with
    /// it by the heuristic.
    private var pendingTally: UInt8 = 0
    /// SRTCP packets decrypted.
    public private(set) var srtcpDecrypted = 0
    /// SRTCP packets that could not be decrypted (no key, failed authentication or replayed):
    /// not analysed.
    public private(set) var srtcpDropped = 0

    /// An empty analysis. SRTP streams (an SDP's `RTP/SAVP` or `a=crypto`, or any stream a
    /// key of `srtp` names) are decrypted with the keys of the capture's SDP (the key a side
    /// announces protects what that side sends) or those of `srtp`.
    public init(keepPayloads: Bool = false, srtp: SRTPCaptureOptions = SRTPCaptureOptions(), timelines: Bool = false) {
        self.keepPayloads = keepPayloads
        self.keepsTimelines = timelines
        self.srtpOptions = srtp
        #if canImport(SRTP)
        if !srtp.keys.isEmpty { decryption = SRTPCaptureDecryption(options: srtp) }
        #endif
    }

    /// Registers an RTP address announced in SDP, with its payload formats.
    public mutating func announce(_ media: CaptureAnalyzer.MediaStream, callID: String?) {
        guard let a = MediaCounter.ipAddress(media.address) else { return }
        let endpoint = CaptureEndpoint(address: a, port: media.port)
        var table: [UInt8: RTPPayloadFormat] = [:]
        for f in media.formats { table[f.payloadType] = f }
        announcedEndpoints[endpoint] = announcements.count
        announcements.append((table, callID, endpoint))
        #if canImport(SRTP)
        if media.secure || !media.crypto.isEmpty {
            if decryption == nil { decryption = SRTPCaptureDecryption(options: srtpOptions) }
            let rtcp = MediaCounter.ipAddress(media.rtcpAddress).map { CaptureEndpoint(address: $0, port: media.rtcpPort) }
            decryption!.announce(media, rtp: endpoint, rtcp: rtcp)
        }
        #endif
    }

    /// Takes in a UDP datagram (with its payload) in capture order; returns the position of the
    /// stream it was counted in, if it was RTP.
    @discardableResult
    public mutating func add(_ d: CapturedDatagram) -> Int? {
        #if canImport(SRTP)
        if decryption != nil { return addSecure(d) }
        #endif
        switch d.kind {
        case .rtp: return addRTP(d)
        case .rtcp: addRTCP(d); return nil
        case .other: return nil
        }
    }

    #if canImport(SRTP)
    /// A datagram when SRTP is in play: SRTP and SRTCP are decrypted first; a packet that
    /// cannot be counts in its stream from its clear header, its payload unused; SRTCP that
    /// cannot be is dropped.
    private mutating func addSecure(_ d: CapturedDatagram) -> Int? {
        switch d.kind {
        case .rtp:
            guard let h = RTPHeaderView(d.payload) else { return nil }
            let key = StreamKey(source: d.source, destination: d.destination, ssrc: h.ssrc)
            if decryption!.refresh(key) {
                for held in decryption!.takeHeld(key) { _ = addDecrypting(held, key: key, hold: false) }
            }
            return addDecrypting(d, key: key, hold: true)
        case .rtcp:
            for held in decryption!.takeReadyRTCP(source: d.source, destination: d.destination) { addSecureRTCP(held, hold: false) }
            addSecureRTCP(d, hold: true)
            return nil
        case .other: return nil
        }
    }

    /// An SRTCP datagram: decrypted and analysed, held for a key not announced yet, or dropped.
    private mutating func addSecureRTCP(_ d: CapturedDatagram, hold: Bool) {
        switch decryption!.unprotectRTCP(d, hold: hold) {
        case .plain: addRTCP(d)
        case .decrypted:
            srtcpDecrypted += 1
            var clear = d
            clear.payload = decryption!.scratch[...]
            addRTCP(clear)
        case .held: break
        case .opaque: srtcpDropped += 1
        }
    }

    private mutating func addDecrypting(_ d: CapturedDatagram, key: StreamKey, hold: Bool) -> Int? {
        let outcome = decryption!.unprotectRTP(d, key: key, hold: hold)
        // The outcome counts in the stream's SRTP status only if the packet counts in the
        // stream: one the heuristic holds counts when (if) its stream is found.
        pendingTally = decryption!.lastTally.rawValue
        defer { pendingTally = 0 }
        let i: Int?
        switch outcome {
        case .plain: i = addRTP(d)
        case .decrypted:
            var clear = d
            clear.payload = decryption!.scratch[...]
            i = addRTP(clear)
        case .opaque: i = addRTP(d, opaque: true)
        case .held: return nil
        }
        if i != nil, let t = SRTPCaptureDecryption.Tally(rawValue: pendingTally) { decryption!.tally(key, t) }
        return i
    }
    #endif

    /// Takes in an RTP datagram lent in place by ``SIPCaptureReader/nextEvents(into:rtp:)``:
    /// the same as ``add(_:)-(CapturedDatagram)`` with its ``BorrowedDatagram/datagram``, but a
    /// packet of a stream already known is counted from the lent bytes (its stream found by its
    /// addresses, ports and SSRC packed in two words), with no copy and no allocation. A packet
    /// that starts a stream or that the heuristic holds, and every packet when SRTP is in play,
    /// goes the general way (copied).
    @discardableResult
    public mutating func add(_ d: BorrowedDatagram) -> Int? {
        #if canImport(SRTP)
        if decryption != nil { return add(d.datagram) }
        #endif
        guard let h = RTPHeaderView(d.payload) else { return nil }
        let found: Int?
        if let packed = PackedStreamIndex.Key(source: d.source, destination: d.destination, ssrc: h.ssrc) {
            found = packedIndex.find(packed)
        } else {
            found = index[StreamKey(source: d.source, destination: d.destination, ssrc: h.ssrc)]
        }
        guard let i = found else { return add(d.datagram) }
        update(i, h, time: d.timestamp, frame: d.frameNumber, payload: h.payload(of: d.payload), opaque: false, payloadCount: h.payloadLength)
        return i
    }

    // MARK: RTP

    private mutating func addRTP(_ d: CapturedDatagram, opaque: Bool = false) -> Int? {
        guard let h = RTPHeaderView(d.payload) else { return nil }
        let key = StreamKey(source: d.source, destination: d.destination, ssrc: h.ssrc)
        if let lk = lastKey, lk == key {
            update(lastIndex, h, d, opaque: opaque)
            return lastIndex
        }
        if let i = index[key] {
            lastKey = key
            lastIndex = i
            update(i, h, d, opaque: opaque)
            return i
        }
        if let a = announcedEndpoints[d.destination] ?? announcedEndpoints[d.source] {
            let i = newStream(key, announcement: a, d)
            update(i, h, d, opaque: opaque)
            return i
        }
        return heuristic(h, d, opaque: opaque)
    }

    private mutating func newStream(_ key: StreamKey, announcement: Int?, _ d: CapturedDatagram) -> Int {
        let i = states.count
        states.append(StreamState(key: key, announcement: announcement, firstTime: d.timestamp, firstFrame: d.frameNumber))
        index[key] = i
        if let packed = PackedStreamIndex.Key(source: key.source, destination: key.destination, ssrc: key.ssrc) { packedIndex.insert(packed, i) }
        if keepPayloads { payloads.append([]) }
        lastKey = key
        lastIndex = i
        return i
    }

    private mutating func heuristic(_ h: RTPHeaderView, _ d: CapturedDatagram, opaque: Bool) -> Int? {
        let flow = FlowKey(source: d.source, destination: d.destination)
        let packet = Candidate.Packet(header: h, time: d.timestamp, frame: d.frameNumber,
                                      payload: keepPayloads && !opaque ? Array(h.payload(of: d.payload)) : [], opaque: opaque,
                                      payloadCount: h.payloadLength, tally: pendingTally)
        if var c = candidates[flow] {
            let step = h.sequence &- c.lastSequence
            if c.ssrc == h.ssrc, c.payloadType == h.payloadType, step >= 1, step <= 100 {
                c.lastSequence = h.sequence
                if c.packets.count + 1 >= heuristicPackets {
                    candidates[flow] = nil
                    let key = StreamKey(source: d.source, destination: d.destination, ssrc: h.ssrc)
                    let i = newStream(key, announcement: nil, d)
                    states[i].firstTime = c.packets.first?.time ?? d.timestamp
                    states[i].firstFrame = c.packets.first?.frame ?? d.frameNumber
                    for p in c.packets {
                        #if canImport(SRTP)
                        if p.tally != 0, let t = SRTPCaptureDecryption.Tally(rawValue: p.tally) { decryption?.tally(key, t) }
                        #endif
                        p.payload.withUnsafeBytes { b in
                            update(i, p.header, time: p.time, frame: p.frame, payload: b, opaque: p.opaque, payloadCount: p.payloadCount)
                        }
                    }
                    update(i, h, d, opaque: opaque)
                    return i
                }
                c.packets.append(packet)
                candidates[flow] = c
                return nil
            }
        }
        if candidates.count >= Self.maxCandidates { candidates.removeAll() }
        candidates[flow] = Candidate(ssrc: h.ssrc, payloadType: h.payloadType, lastSequence: h.sequence, packets: [packet])
        return nil
    }

    private func format(_ pt: UInt8, announcement: Int?) -> RTPPayloadFormat? {
        // Static types keep their RFC 3551 meaning (and Wireshark's names) whatever the SDP says.
        if let f = RTPPayloadFormat.staticFormat(pt) { return f }
        if let a = announcement { return announcements[a].formats[pt] }
        return nil
    }

    private mutating func update(_ i: Int, _ h: RTPHeaderView, _ d: CapturedDatagram, opaque: Bool = false) {
        d.payload.withUnsafeBytes { b in
            update(i, h, time: d.timestamp, frame: d.frameNumber, payload: opaque ? RTPHeaderView.empty : h.payload(of: b), opaque: opaque,
                   payloadCount: h.payloadLength)
        }
    }

    /// The per-packet statistics (see the type's documentation for the rules). An `opaque`
    /// packet (SRTP not decrypted) counts by its header only.
    private mutating func update(_ i: Int, _ h: RTPHeaderView, time: CaptureTimestamp, frame: Int, payload: UnsafeRawBufferPointer, opaque: Bool,
                                 payloadCount: Int) {
        let pt = h.payloadType
        if pt != states[i].lastFormat.payloadType || states[i].packets == 0 {
            let fmt = format(pt, announcement: states[i].announcement) ?? RTPPayloadFormat.unannounced(pt)
            states[i].lastFormat = fmt
            states[i].lastIsEvent = fmt.isTelephoneEvent
            states[i].lastIsCN = fmt.isComfortNoise
            if !states[i].formats.contains(where: { $0.payloadType == pt }) { states[i].formats.append(fmt) }
        }
        // One access to the stream's state for the whole packet.
        states[i].packet(h, time: time, frame: frame, payload: payload, opaque: opaque, payloadCount: payloadCount, timeline: keepsTimelines,
                         silenceThreshold: silenceThreshold)
        if keepPayloads && !opaque {
            payloads[i].append(PayloadPacket(time: time, sequence: states[i].extendedSequence, timestamp: h.timestamp, payloadType: pt,
                                             payload: Array(payload)))
        }
    }

    // MARK: RTCP

    private mutating func addRTCP(_ d: CapturedDatagram) {
        guard let compound = try? RTCPCompoundPacket(parsing: d.payload, requireLeadingReport: false) else { return }
        rtcpPackets += 1
        for p in compound.packets {
            switch p {
            case .senderReport(let sr):
                for i in states.indices where states[i].key.ssrc == sr.ssrc && states[i].key.source.address == d.source.address {
                    states[i].senderReports += 1
                }
                match(sr.reports, from: d, reporter: sr.ssrc, inSR: true)
            case .receiverReport(let rr):
                match(rr.reports, from: d, reporter: rr.ssrc, inSR: false)
            default:
                break
            }
        }
    }

    /// Attaches report blocks to the stream they describe: the stream with the block's SSRC
    /// sent to the reporter's address, else the only stream with that SSRC.
    private mutating func match(_ blocks: [RTCPReportBlock], from d: CapturedDatagram, reporter: UInt32, inSR: Bool) {
        for b in blocks {
            var found: Int?
            var bySSRC: [Int] = []
            for i in states.indices where states[i].key.ssrc == b.ssrc {
                bySSRC.append(i)
                if states[i].key.destination.address == d.source.address { found = i }
            }
            if found == nil, bySSRC.count == 1 { found = bySSRC[0] }
            guard let i = found else { unmatchedReportBlocks += 1; continue }
            let rate = states[i].lastFormat.clockRate
            states[i].reports.append(RTPReceiverReport(time: d.timestamp, reporter: d.source, reporterSSRC: reporter,
                                                       fractionLost: Double(b.fractionLost) / 256, cumulativeLost: b.cumulativeLost,
                                                       jitter: b.jitter, jitterMilliseconds: rate > 0 ? Double(b.jitter) * 1000 / Double(rate) : nil,
                                                       inSenderReport: inSR))
        }
    }

    // MARK: Results

    /// Ends the analysis: fills ``streams`` (ordered by first packet) and ``calls``.
    public mutating func finish() {
        #if canImport(SRTP)
        // Packets held whose flow saw no later packet: decrypted if a key came since; else RTP
        // counts from its headers and SRTCP is dropped.
        if decryption != nil {
            for d in decryption!.takeAllHeld() {
                if d.kind == .rtcp {
                    addSecureRTCP(d, hold: false)
                } else if let h = RTPHeaderView(d.payload) {
                    _ = addDecrypting(d, key: StreamKey(source: d.source, destination: d.destination, ssrc: h.ssrc), hold: false)
                }
            }
        }
        #endif
        var order = Array(states.indices)
        order.sort { (states[$0].firstTime, states[$0].firstFrame) < (states[$1].firstTime, states[$1].firstFrame) }
        streams = order.map { states[$0].stream(callID: states[$0].announcement.flatMap { announcements[$0].callID }) }
        #if canImport(SRTP)
        if let decryption {
            for i in streams.indices { streams[i].srtp = decryption.status(streams[i].key) }
        }
        #endif
        if keepPayloads { payloads = order.map { payloads[$0] } }
        // Calls: the streams touching each call's announced addresses.
        var byCall: [String: CallMedia] = [:]
        var callOrder: [String] = []
        for a in announcements {
            guard let id = a.callID else { continue }
            if byCall[id] == nil { byCall[id] = CallMedia(callID: id, announced: [], streams: [], oneWay: false); callOrder.append(id) }
            if !byCall[id]!.announced.contains(a.endpoint) { byCall[id]!.announced.append(a.endpoint) }
        }
        for (i, s) in streams.enumerated() {
            for id in callOrder where byCall[id]!.announced.contains(s.key.destination) || byCall[id]!.announced.contains(s.key.source) {
                if !byCall[id]!.streams.contains(i) { byCall[id]!.streams.append(i) }
            }
        }
        calls = callOrder.map { id in
            var c = byCall[id]!
            let audio = c.streams.filter { streams[$0].packets > 0 }
            let towards = Set(c.announced.filter { ep in audio.contains { streams[$0].key.destination == ep } })
            let senders = Set(audio.map { streams[$0].key.source.address })
            c.oneWay = !audio.isEmpty && ((c.announced.count >= 2 && towards.count == 1) || (senders.count == 1 && c.announced.count >= 2
                && Set(c.announced.map(\.address)).count >= 2))
            return c
        }
    }

    /// The stream with this key, if any (after ``finish()``).
    public func stream(_ key: StreamKey) -> Stream? { streams.first { $0.key == key } }
}

/// Stream positions by IPv4 source, destination and SSRC packed in two words: open addressing
/// with linear probing in a power-of-two table kept at most half full (no hashing of
/// endpoint enums, no allocation per lookup).
struct PackedStreamIndex: Sendable {
    /// Source and destination addresses; source port, destination port and SSRC.
    struct Key: Sendable, Equatable {
        var addresses: UInt64
        var portsAndSSRC: UInt64

        /// `nil` unless both addresses are IPv4.
        @inline(__always)
        init?(source: CaptureEndpoint, destination: CaptureEndpoint, ssrc: UInt32) {
            guard case .v4(let a) = source.address, case .v4(let b) = destination.address else { return nil }
            addresses = UInt64(a.value) << 32 | UInt64(b.value)
            portsAndSSRC = UInt64(source.port) << 48 | UInt64(destination.port) << 32 | UInt64(ssrc)
        }

        @inline(__always)
        var hash: UInt64 {
            let h = (addresses &* 0x9E37_79B9_7F4A_7C15) ^ (portsAndSSRC &* 0xBF58_476D_1CE4_E5B9)
            return h ^ (h >> 29)
        }
    }

    private var keys: [Key] = []
    /// Position + 1 in the streams; 0 for an empty slot.
    private var slots: [Int32] = []
    private var count = 0

    @inline(__always)
    func find(_ key: Key) -> Int? {
        let mask = slots.count - 1
        guard mask > 0 else { return nil }
        return slots.withUnsafeBufferPointer { s in
            keys.withUnsafeBufferPointer { k in
                var j = Int(truncatingIfNeeded: key.hash) & mask
                while true {
                    let v = s[j]
                    if v == 0 { return nil }
                    if k[j] == key { return Int(v) - 1 }
                    j = (j + 1) & mask
                }
            }
        }
    }

    mutating func insert(_ key: Key, _ position: Int) {
        guard position < Int(Int32.max) else { return }  // past that, found through the dictionary
        if (count + 1) * 2 > slots.count {
            let old = zip(keys, slots).filter { $0.1 != 0 }
            let size = max(64, slots.count * 2)
            keys = Array(repeating: key, count: size)
            slots = Array(repeating: 0, count: size)
            count = 0
            for (k, v) in old { place(k, v) }
        }
        place(key, Int32(position + 1))
    }

    private mutating func place(_ key: Key, _ value: Int32) {
        let mask = slots.count - 1
        var j = Int(truncatingIfNeeded: key.hash) & mask
        while slots[j] != 0 {
            if keys[j] == key { slots[j] = value; return }
            j = (j + 1) & mask
        }
        keys[j] = key
        slots[j] = value
        count += 1
    }
}

/// A stream direction without SSRC (the heuristic's candidates).
private struct FlowKey: Hashable, Sendable {
    var source: CaptureEndpoint
    var destination: CaptureEndpoint
}

/// An unannounced flow being watched by the heuristic.
private struct Candidate: Sendable {
    struct Packet: Sendable {
        var header: RTPHeaderView
        var time: CaptureTimestamp
        var frame: Int
        var payload: [UInt8]
        var opaque: Bool
        var payloadCount: Int
        /// What its SRTP unprotection counts once it counts in a stream (``SRTPCaptureDecryption/Tally``).
        var tally: UInt8 = 0
    }
    var ssrc: UInt32
    var payloadType: UInt8
    var lastSequence: UInt16
    var packets: [Packet]
}

/// The fixed RTP header read in place (RFC 3550 §5.1), checked against the datagram's length.
struct RTPHeaderView: Sendable {
    var marker: Bool
    var payloadType: UInt8
    var sequence: UInt16
    var timestamp: UInt32
    var ssrc: UInt32
    /// Offset of the payload and its length (padding removed), relative to the datagram start.
    var payloadOffset: Int
    var payloadLength: Int

    /// No payload (an opaque packet's).
    static var empty: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: nil, count: 0) }

    /// `nil` unless version 2 with the CSRC list, the extension and the padding inside the datagram.
    init?(_ b: ArraySlice<UInt8>) {
        guard let h = b.withUnsafeBytes({ RTPHeaderView($0) }) else { return nil }
        self = h
    }

    /// The same over bytes in place.
    @inline(__always)
    init?(_ b: UnsafeRawBufferPointer) {
        let n = b.count
        guard n >= 12 else { return nil }
        let s = 0
        let first = b[s]
        guard first >> 6 == 2 else { return nil }
        marker = b[s + 1] & 0x80 != 0
        payloadType = b[s + 1] & 0x7F
        sequence = UInt16(b[s + 2]) << 8 | UInt16(b[s + 3])
        timestamp = UInt32(b[s + 4]) << 24 | UInt32(b[s + 5]) << 16 | UInt32(b[s + 6]) << 8 | UInt32(b[s + 7])
        ssrc = UInt32(b[s + 8]) << 24 | UInt32(b[s + 9]) << 16 | UInt32(b[s + 10]) << 8 | UInt32(b[s + 11])
        var off = 12 + Int(first & 0x0F) * 4
        guard off <= n else { return nil }
        if first & 0x10 != 0 {
            guard off + 4 <= n else { return nil }
            off += 4 + (Int(b[s + off + 2]) << 8 | Int(b[s + off + 3])) * 4
            guard off <= n else { return nil }
        }
        var end = n
        if first & 0x20 != 0 {
            let pad = Int(b[s + n - 1])
            guard pad >= 1, off + pad <= n else { return nil }
            end -= pad
        }
        payloadOffset = off
        payloadLength = end - off
    }

    func payload(of b: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        let s = b.startIndex + payloadOffset
        return b[s..<(s + payloadLength)]
    }

    func payload(of b: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: b[payloadOffset..<(payloadOffset + payloadLength)])
    }
}

/// One stream's running state.
struct StreamState: Sendable {
    var key: RTPStreamAnalyzer.StreamKey
    var announcement: Int?
    var firstTime: CaptureTimestamp
    var firstFrame: Int
    var lastTime = CaptureTimestamp(seconds: 0, nanoseconds: 0)
    var formats: [RTPPayloadFormat] = []
    var lastFormat = RTPPayloadFormat(payloadType: 255, name: "", clockRate: 0)
    /// What ``lastFormat`` is (kept apart: the names are compared once per format change).
    var lastIsEvent = false
    var lastIsCN = false
    var packets = 0
    var payloadBytes = 0
    var markers = 0
    // Sequence numbers (tshark's model for expected/lost, ours for errors).
    var startSequence: UInt16 = 0
    var stopSequence: UInt16 = 0
    var highest: UInt16 = 0
    var cycles = 0
    var sequenceErrors = 0
    // Timing, ms relative to the first packet.
    var firstRTPTimestamp: UInt32 = 0
    var lastArrival = 0.0
    var lastNominal = 0.0
    var jitter = 0.0
    var regular = 0
    var deltaSum = 0.0
    var minDelta = Double.infinity, maxDelta = -Double.infinity
    var maxDeltaFrame = 0
    var minJitter = Double.infinity, maxJitter = -Double.infinity
    var jitterSum = 0.0
    var jitterCount = 0
    var previousWasCN = false
    // Content.
    var stillSilent = true
    var g711Only = true
    var dtmf: [RTPDTMFDigit] = []
    var reports: [RTPReceiverReport] = []
    var senderReports = 0
    /// Packets counted by their header only (SRTP not decrypted).
    var opaque = 0
    /// Packets missing in the gap the last packet ended (0 when in order).
    var lastGap = 0
    var timeline: [RTPTimelineBucket] = []
    var bucketNanoseconds: Int64 = 1_000_000_000

    init(key: RTPStreamAnalyzer.StreamKey, announcement: Int?, firstTime: CaptureTimestamp, firstFrame: Int) {
        self.key = key
        self.announcement = announcement
        self.firstTime = firstTime
        self.firstFrame = firstFrame
    }

    /// The last packet's sequence number extended by the wraps before it.
    var extendedSequence: Int64 { lastExtended }
    var lastExtended: Int64 = 0

    /// One packet of the stream (its format already noted in ``lastFormat``): the statistics,
    /// the timeline, and the content (DTMF events, silence), unless `opaque`.
    @inline(__always)
    mutating func packet(_ h: RTPHeaderView, time: CaptureTimestamp, frame: Int, payload: UnsafeRawBufferPointer, opaque: Bool, payloadCount: Int,
                         timeline keepTimeline: Bool, silenceThreshold: Int16) {
        let pt = h.payloadType
        let clockRate = lastFormat.clockRate
        take(h, time: time, frame: frame, clockRate: clockRate, payloadCount: payloadCount)
        if keepTimeline {
            let g711 = !opaque && !lastIsEvent && !lastIsCN && (pt == 0 || pt == 8)
            noteTimeline(time: time, payload: g711 ? payload : RTPHeaderView.empty, aLaw: pt == 8, clocked: clockRate > 0 && !lastIsEvent)
        }
        if opaque {
            self.opaque += 1
            return
        }
        if lastIsEvent {
            noteEvent(payload, timestamp: h.timestamp, time: time)
        } else if stillSilent, !lastIsCN {
            if pt == 0 || pt == 8 {
                checkSilence(payload, aLaw: pt == 8, threshold: silenceThreshold)
            } else {
                stillSilent = false
                g711Only = false
            }
        }
    }

    mutating func take(_ h: RTPHeaderView, time: CaptureTimestamp, frame: Int, clockRate: Int, payloadCount: Int) {
        payloadBytes += payloadCount
        if h.marker { markers += 1 }
        lastTime = time
        let arrival = Double(time.totalNanoseconds &- firstTime.totalNanoseconds) / 1e6
        let isCN = lastIsCN
        if packets == 0 {
            startSequence = h.sequence
            stopSequence = h.sequence
            highest = h.sequence
            firstRTPTimestamp = h.timestamp
            lastExtended = Int64(h.sequence)
            lastArrival = arrival
            lastNominal = 0
            packets = 1
            previousWasCN = isCN
            return
        }
        let followsCN = previousWasCN && !isCN
        previousWasCN = isCN
        // Telephone events keep their start timestamp for the whole event (RFC 4733 §2.5.1.2):
        // no jitter is computed on them (Wireshark gives them no clock rate either).
        let clock = lastIsEvent ? 0 : clockRate
        let delta = arrival - lastArrival
        if clock > 0 {
            let nominal = Double(h.timestamp &- firstRTPTimestamp)
            let expectedArrival = lastArrival + (nominal - lastNominal) / Double(clock) * 1000
            let d = abs(arrival - expectedArrival)
            jitter = (15 * jitter + d) / 16
            lastNominal = nominal
        }
        if !h.marker && !isCN && !followsCN {
            regular += 1
            deltaSum += delta
            if delta > maxDelta { maxDelta = delta; maxDeltaFrame = frame }
            if delta < minDelta { minDelta = delta }
            if clock > 0 {
                if jitter > maxJitter { maxJitter = jitter }
                if jitter < minJitter { minJitter = jitter }
                jitterSum += jitter
                jitterCount += 1
            }
        }
        lastArrival = arrival
        stopSequence = h.sequence
        packets += 1
        // Sequence numbers modulo 2¹⁶: a step of 1 is in order; a forward step under 2¹⁵ is a
        // gap; anything else (0, or backwards) a late or duplicate packet. Moving forward past
        // 65535 counts a wrap.
        let step = h.sequence &- highest
        lastGap = step > 1 && step < 0x8000 ? Int(step) - 1 : 0
        if step != 0 && step < 0x8000 {
            if step != 1 { sequenceErrors += 1 }
            if h.sequence < highest { cycles += 1 }
            highest = h.sequence
            lastExtended = Int64(cycles) << 16 | Int64(h.sequence)
        } else {
            sequenceErrors += 1
            lastExtended = Int64(cycles) << 16 | Int64(h.sequence)
            if h.sequence > highest { lastExtended -= 0x10000 }
        }
    }

    /// The packet just taken into its timeline bucket: a packet, the gap it ended, the jitter
    /// after it (`clocked`), and the power of its G.711 samples (`payload`, empty when none).
    mutating func noteTimeline(time: CaptureTimestamp, payload: UnsafeRawBufferPointer, aLaw: Bool, clocked: Bool) {
        let offset = max(0, time.totalNanoseconds &- firstTime.totalNanoseconds)
        var k = Int(offset / bucketNanoseconds)
        while k >= RTPStreamAnalyzer.maxTimelineBuckets {
            // Twice the interval: neighbours merge.
            bucketNanoseconds *= 2
            var merged: [RTPTimelineBucket] = []
            for pair in stride(from: 0, to: timeline.count, by: 2) {
                var b = timeline[pair]
                b.length = Double(bucketNanoseconds) / 1e9
                if pair + 1 < timeline.count { b.merge(timeline[pair + 1]) }
                merged.append(b)
            }
            timeline = merged
            k = Int(offset / bucketNanoseconds)
        }
        while timeline.count <= k {
            let length = Double(bucketNanoseconds) / 1e9
            timeline.append(RTPTimelineBucket(start: Double(timeline.count) * length, length: length))
        }
        timeline[k].packets += 1
        timeline[k].lost += packets > 1 ? lastGap : 0
        if clocked && packets > 1 { timeline[k].maxJitter = max(timeline[k].maxJitter ?? jitter, jitter) }
        if !payload.isEmpty {
            var sum = 0.0
            for c in payload {
                let v = Double(aLaw ? Self.aLaw(c) : Self.muLaw(c)) / 32768
                sum += v * v
            }
            timeline[k].samples += payload.count
            timeline[k].power += sum
        }
    }

    /// An RFC 4733 event packet: a new digit when its RTP timestamp is new.
    mutating func noteEvent(_ payload: UnsafeRawBufferPointer, timestamp: UInt32, time: CaptureTimestamp) {
        guard payload.count >= 4 else { return }
        let s = 0
        let event = payload[s], end = payload[s + 1] & 0x80 != 0
        let duration = UInt16(payload[s + 2]) << 8 | UInt16(payload[s + 3])
        if let k = dtmf.indices.last, dtmf[k].rtpTimestamp == timestamp, dtmf[k].event == event {
            if !dtmf[k].ended || end { dtmf[k].duration = max(dtmf[k].duration, duration) }
            if end { dtmf[k].ended = true }
            return
        }
        // A late packet of an earlier event is not a new digit.
        if dtmf.suffix(4).contains(where: { $0.rtpTimestamp == timestamp && $0.event == event }) { return }
        dtmf.append(RTPDTMFDigit(digit: DTMF.character(for: event) ?? "?", event: event, time: time, duration: duration, ended: end,
                                 rtpTimestamp: timestamp))
    }

    mutating func checkSilence(_ payload: UnsafeRawBufferPointer, aLaw: Bool, threshold: Int16) {
        for c in payload {
            let v = aLaw ? Self.aLaw(c) : Self.muLaw(c)
            if v > threshold || v < -threshold { stillSilent = false; return }
        }
    }

    /// G.711 µ-law expansion (ITU-T G.711 §2; 14-bit magnitude scaled to 16 bits), here so that
    /// the analysis needs no codec module.
    @inline(__always) static func muLaw(_ code: UInt8) -> Int16 {
        let c = ~code
        let t = ((Int(c & 0x0F) << 3) + 0x84) << Int((c & 0x70) >> 4)
        return Int16(c & 0x80 != 0 ? 0x84 - t : t - 0x84)
    }

    /// G.711 A-law expansion (ITU-T G.711 §3; even bits inverted).
    @inline(__always) static func aLaw(_ code: UInt8) -> Int16 {
        let c = code ^ 0x55
        var t = Int(c & 0x0F) << 4
        let segment = Int((c & 0x70) >> 4)
        switch segment {
        case 0: t += 8
        case 1: t += 0x108
        default: t = (t + 0x108) << (segment - 1)
        }
        return Int16(c & 0x80 != 0 ? t : -t)
    }

    func stream(callID: String?) -> RTPStreamAnalyzer.Stream {
        let expected = packets == 0 ? 0 : Int(stopSequence) + cycles * 0x10000 - Int(startSequence) + 1
        var s = RTPStreamAnalyzer.Stream(
            key: key, formats: formats, announced: announcement != nil, callID: callID, first: firstTime, firstFrame: firstFrame, last: lastTime,
            packets: packets, payloadBytes: payloadBytes, expected: expected, sequenceErrors: sequenceErrors, markers: markers,
            minDelta: regular > 0 ? minDelta : nil, meanDelta: regular > 0 ? deltaSum / Double(regular) : nil,
            maxDelta: regular > 0 ? maxDelta : nil, maxDeltaFrame: regular > 0 ? maxDeltaFrame : nil,
            minJitter: jitterCount > 0 ? minJitter : nil, meanJitter: jitterCount > 0 ? jitterSum / Double(jitterCount) : nil,
            maxJitter: jitterCount > 0 ? maxJitter : nil,
            mos: nil, silent: nil, dtmf: dtmf, reports: reports, senderReports: senderReports)
        s.timeline = timeline
        let audio = formats.filter { !$0.isTelephoneEvent && !$0.isComfortNoise }
        if opaque == 0, g711Only, !audio.isEmpty, audio.allSatisfy({ $0.payloadType == 0 || $0.payloadType == 8 }) { s.silent = stillSilent }
        if let codec = audio.first {
            let seconds = Double(lastTime.totalNanoseconds - firstTime.totalNanoseconds) / 1e9
            let bitrate = seconds > 0 ? Int(Double(payloadBytes) * 8 / seconds) : 0
            let impairment = Self.impairment(codec, bitrate: bitrate)
            let packetization = packets > 1 && seconds > 0 ? min(seconds / Double(packets - 1), 0.2) : 0.02
            let delay = packetization + 2 * (s.maxJitter ?? 0) / 1000
            s.mos = EModel.mos(oneWayDelay: .nanoseconds(Int64(delay * 1e9)), codec: impairment, packetLossPercent: max(0, s.lostPercent))
        }
        return s
    }

    /// Ie and Bpl for a codec (G.113 Appendix I where it gives them).
    static func impairment(_ f: RTPPayloadFormat, bitrate: Int) -> CodecImpairment {
        switch f.name.lowercased() {
        case "opus": return .opus(bitrate: bitrate)
        case "g729": return CodecImpairment(ie: 11, bpl: 19)
        case "gsm": return CodecImpairment(ie: 20, bpl: 10)
        case "g723": return CodecImpairment(ie: 15, bpl: 16.1)
        default: return .g711WithPLC
        }
    }
}
