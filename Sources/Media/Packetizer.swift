import RTP

/// Maps a monotonic clock to a stream's RTP timestamps: `timestamp(at:)` is the base timestamp
/// plus the elapsed time in clock units (wrapping at 2³²). Used to stamp frames from a capture
/// device and to pair RTP and NTP times in sender reports.
public struct MediaClock: Sendable, Hashable {
    /// The RTP clock rate.
    public let clockRate: Int
    /// The monotonic time of ``baseTimestamp``.
    public let start: Duration
    /// The RTP timestamp at ``start``.
    public let baseTimestamp: UInt32

    /// A clock whose timestamp is `baseTimestamp` at `start`.
    public init(clockRate: Int, start: Duration, baseTimestamp: UInt32) {
        self.clockRate = max(1, clockRate)
        self.start = start
        self.baseTimestamp = baseTimestamp
    }

    /// The RTP timestamp at `time` (rounded down to a whole clock unit).
    public func timestamp(at time: Duration) -> UInt32 {
        let elapsed = time - start
        let c = elapsed.components
        let units = c.seconds &* Int64(clockRate) &+ Int64((Double(c.attoseconds) * 1e-18 * Double(clockRate)).rounded(.down))
        return baseTimestamp &+ UInt32(truncatingIfNeeded: units)
    }

    /// The monotonic time of an RTP timestamp, taken as the nearest (within ±2³¹ units) to `start`.
    public func time(of timestamp: UInt32) -> Duration {
        let delta = Int64(Int32(bitPattern: timestamp &- baseTimestamp))
        return start + .nanoseconds(delta * 1_000_000_000 / Int64(clockRate))  // |delta| < 2³¹: no overflow
    }
}

/// Builds the outgoing RTP packets of one audio stream: sequence numbers, timestamps and the
/// SSRC, with the RFC 3550 §5.1 random starting values (from the system CSPRNG by default), the
/// marker bit on the first packet of each talkspurt (RFC 3551 §4.1), and timestamps that keep
/// advancing through silence that is not sent (DTX, silence suppression, hold).
public struct RTPPacketizer: Sendable {
    /// The payload type of audio frames.
    public let payloadType: UInt8
    /// The RTP clock rate of the codec.
    public let clockRate: Int
    /// Clock units per frame (ptime × clock rate).
    public let samplesPerFrame: UInt32
    /// The synchronization source.
    public private(set) var ssrc: UInt32
    /// The sequence number of the next packet.
    public private(set) var nextSequenceNumber: UInt16
    /// The timestamp of the next frame.
    public private(set) var nextTimestamp: UInt32
    /// Packets built.
    public private(set) var packetsSent: UInt64 = 0
    /// Payload bytes in them.
    public private(set) var bytesSent: UInt64 = 0
    private var talkspurt = false

    /// A packetizer with random SSRC, first sequence number and first timestamp from
    /// `SystemRandomNumberGenerator` (the operating system's CSPRNG).
    public init(payloadType: UInt8, clockRate: Int, frameDuration: Duration) {
        var rng = SystemRandomNumberGenerator()
        self.init(payloadType: payloadType, clockRate: clockRate, frameDuration: frameDuration, using: &rng)
    }

    /// A packetizer with the random starting values drawn from `rng`.
    public init(payloadType: UInt8, clockRate: Int, frameDuration: Duration, using rng: inout some RandomNumberGenerator) {
        self.init(payloadType: payloadType, clockRate: clockRate, frameDuration: frameDuration,
                  ssrc: UInt32.random(in: .min ... .max, using: &rng), firstSequenceNumber: UInt16.random(in: .min ... .max, using: &rng),
                  firstTimestamp: UInt32.random(in: .min ... .max, using: &rng))
    }

    /// A packetizer with given starting values (tests, or an SSRC chosen elsewhere after a collision).
    public init(payloadType: UInt8, clockRate: Int, frameDuration: Duration, ssrc: UInt32, firstSequenceNumber: UInt16, firstTimestamp: UInt32) {
        self.payloadType = payloadType & 0x7F
        self.clockRate = max(1, clockRate)
        let units = (JitterBuffer.seconds(frameDuration) * Double(self.clockRate)).rounded()
        samplesPerFrame = UInt32(clamping: JitterBuffer.clamped(max(1, units)))
        self.ssrc = ssrc
        nextSequenceNumber = firstSequenceNumber
        nextTimestamp = firstTimestamp
    }

    /// The packet for the next frame; the marker is set on the first packet of the stream and
    /// on the first after ``skip(frames:)``.
    public mutating func packetize(_ payload: [UInt8]) -> RTPPacket {
        let p = RTPPacket(marker: !talkspurt, payloadType: payloadType, sequenceNumber: nextSequenceNumber, timestamp: nextTimestamp,
                          ssrc: ssrc, payload: payload[...])
        talkspurt = true
        nextSequenceNumber &+= 1
        nextTimestamp &+= samplesPerFrame
        packetsSent += 1
        bytesSent += UInt64(payload.count)
        return p
    }

    /// Frames of silence that are not sent: the timestamp advances, the sequence number does
    /// not (RFC 3550 §5.1), and the next packet starts a talkspurt.
    public mutating func skip(frames: Int = 1) {
        guard frames > 0 else { return }
        nextTimestamp &+= samplesPerFrame &* UInt32(truncatingIfNeeded: frames)
        talkspurt = false
    }

    /// A packet of another payload type in the same stream (an RFC 4733 telephone event, comfort
    /// noise) with its own timestamp and marker; it takes the next sequence number and does not
    /// move the audio timestamp.
    public mutating func packet(payloadType: UInt8, payload: [UInt8], timestamp: UInt32, marker: Bool) -> RTPPacket {
        let p = RTPPacket(marker: marker, payloadType: payloadType & 0x7F, sequenceNumber: nextSequenceNumber, timestamp: timestamp,
                          ssrc: ssrc, payload: payload[...])
        nextSequenceNumber &+= 1
        packetsSent += 1
        bytesSent += UInt64(payload.count)
        return p
    }

    /// Sends a DTMF schedule's packet in this stream: its timestamp is relative to
    /// `timestampBase` (normally ``nextTimestamp`` when the digits start).
    public mutating func packet(_ dtmf: DTMFPacket, payloadType: UInt8, timestampBase: UInt32) -> RTPPacket {
        packet(payloadType: payloadType, payload: dtmf.event.serialized(), timestamp: timestampBase &+ dtmf.timestampOffset, marker: dtmf.marker)
    }

    /// Takes a new random SSRC (after a collision, RFC 3550 §8.2); sequence and timestamp continue.
    public mutating func changeSSRC(using rng: inout some RandomNumberGenerator) {
        var new = ssrc
        while new == ssrc { new = UInt32.random(in: .min ... .max, using: &rng) }
        ssrc = new
        talkspurt = false
    }
}

/// Symmetric RTP (RFC 4961) without sockets: decides where to send media by learning the peer's
/// source address from the packets it sends, for peers behind NAT whose SDP address is not the
/// one their packets come from.
///
/// Policy: until latched, media goes to the address from SDP. A source is latched after
/// ``requiredPackets`` consecutive valid packets from it (valid: an accepted payload type and,
/// when the SDP gave one, the expected SSRC), with the same SSRC and consecutive sequence
/// numbers, so one stray or spoofed packet cannot redirect the stream. Once latched, packets
/// from other addresses are refused, unless the latched source has been silent for
/// ``relatchAfter``: then another source can be latched the same way (a NAT rebinding, or the
/// peer moving). Refused packets are counted.
public struct SymmetricRTPLatch<Address: Hashable & Sendable>: Sendable {
    /// What ``observe(from:ssrc:sequenceNumber:payloadType:at:)`` decided for a packet.
    public enum Decision: Sendable, Hashable {
        /// From the latched source (or from a candidate before latching): deliver it.
        case accept
        /// This packet latched its source; media goes there from now on.
        case latched(Address)
        /// Not from the latched source, or invalid: drop it.
        case refuse
    }

    private struct Candidate: Sendable {
        var address: Address
        var ssrc: UInt32
        var lastSequence: UInt16
        var count: Int
    }

    /// The address from SDP, used until a source is latched.
    public var signalledAddress: Address?
    /// Payload types accepted (the negotiated ones).
    public let payloadTypes: Set<UInt8>
    /// The SSRC announced in SDP (`a=ssrc`), when there was one.
    public let expectedSSRC: UInt32?
    /// Consecutive packets needed to latch.
    public let requiredPackets: Int
    /// Silence of the latched source after which another source may be latched.
    public let relatchAfter: Duration
    /// The latched source.
    public private(set) var latchedAddress: Address?
    /// Packets refused.
    public private(set) var refused = 0
    private var candidate: Candidate?
    private var lastFromLatched: Duration = .zero

    /// A latch; `requiredPackets` is at least 1.
    public init(signalledAddress: Address?, payloadTypes: Set<UInt8>, expectedSSRC: UInt32? = nil, requiredPackets: Int = 2,
                relatchAfter: Duration = .seconds(2)) {
        self.signalledAddress = signalledAddress
        self.payloadTypes = payloadTypes
        self.expectedSSRC = expectedSSRC
        self.requiredPackets = max(1, requiredPackets)
        self.relatchAfter = relatchAfter
    }

    /// Where to send media now: the latched source, else the SDP address.
    public var destination: Address? { latchedAddress ?? signalledAddress }

    /// Looks at one received packet.
    public mutating func observe(from source: Address, ssrc: UInt32, sequenceNumber: UInt16, payloadType: UInt8, at time: Duration) -> Decision {
        let valid = payloadTypes.contains(payloadType) && (expectedSSRC == nil || expectedSSRC == ssrc)
        if let latched = latchedAddress {
            if source == latched {
                guard valid else { refused += 1; return .refuse }
                lastFromLatched = time
                candidate = nil
                return .accept
            }
            guard valid, time - lastFromLatched >= relatchAfter else {
                refused += 1
                return .refuse
            }
        }
        guard valid else { refused += 1; return .refuse }
        if var c = candidate, c.address == source, c.ssrc == ssrc, sequenceNumber == c.lastSequence &+ 1 {
            c.count += 1
            c.lastSequence = sequenceNumber
            candidate = c
        } else {
            candidate = Candidate(address: source, ssrc: ssrc, lastSequence: sequenceNumber, count: 1)
        }
        if candidate!.count >= requiredPackets {
            latchedAddress = source
            lastFromLatched = time
            candidate = nil
            return .latched(source)
        }
        // Before the first latch, candidates' packets are delivered; a challenger to a latched
        // source is not, until it wins.
        if latchedAddress == nil { return .accept }
        refused += 1
        return .refuse
    }

    /// Looks at one received RTP packet.
    public mutating func observe(_ packet: RTPPacket, from source: Address, at time: Duration) -> Decision {
        observe(from: source, ssrc: packet.ssrc, sequenceNumber: packet.sequenceNumber, payloadType: packet.payloadType, at: time)
    }
}
