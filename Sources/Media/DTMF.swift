import RTP

/// Why DTMF input was refused: where, and which rule.
public typealias DTMFError = MediaFormatError<DTMFRule>

/// The rules DTMF input is checked against (``DTMFError``).
public enum DTMFRule: String, MediaFormatRule {
    /// A telephone-event payload shorter than 4 bytes.
    case payloadTooShort
    /// A character that is not a DTMF digit, `w`, `,` or `!`.
    case invalidDigit
    /// A digit duration under 40 ms, or a packet interval or clock rate out of range.
    case badConfiguration
    /// A dtmf-relay body larger than the limit.
    case bodyTooLarge
    /// A dtmf-relay body without a `Signal` line.
    case missingSignal
    /// A dtmf-relay `Signal` that is not a DTMF digit.
    case badSignal
    /// A dtmf-relay `Duration` that is not a number of milliseconds in 1…60000.
    case badDuration
    /// A dtmf-relay line without `=`.
    case badLine

    /// `DTMF error at offset`.
    public static var errorLabel: String { "DTMF error at offset" }
}

/// The DTMF events of RFC 4733 §3.2 and the characters used for them.
public enum DTMF {
    /// The event code of a digit: `0`–`9` → 0–9, `*` → 10, `#` → 11, `A`–`D` (either case) → 12–15,
    /// `!` → 16 (flash); `nil` for anything else.
    public static func eventCode(for character: Character) -> UInt8? {
        switch character {
        case "0"..."9": return UInt8(character.asciiValue! - 48)
        case "*": return 10
        case "#": return 11
        case "A"..."D": return UInt8(character.asciiValue! - 65 + 12)
        case "a"..."d": return UInt8(character.asciiValue! - 97 + 12)
        case "!": return 16
        default: return nil
        }
    }

    /// The character of an event code (`A`–`D` upper case, flash as `!`); `nil` above 16.
    public static func character(for code: UInt8) -> Character? {
        switch code {
        case 0...9: return Character(Unicode.Scalar(48 + code))
        case 10: return "*"
        case 11: return "#"
        case 12...15: return Character(Unicode.Scalar(65 + code - 12))
        case 16: return "!"
        default: return nil
        }
    }
}

/// The RFC 4733 §2.3 telephone-event payload: event, end bit, volume, duration.
public struct TelephoneEvent: Sendable, Hashable {
    /// The event code (0–15 DTMF, 16 flash, others per the IANA registry).
    public var event: UInt8
    /// The E bit: this packet reports the end of the event (or segment).
    public var end: Bool
    /// The power level in −dBm0, 0–63 (larger is quieter; DTMF is typically 10).
    public var volume: UInt8
    /// The duration so far, in RTP clock units from the event's timestamp.
    public var duration: UInt16

    /// Creates an event; `volume` is masked to 6 bits.
    public init(event: UInt8, end: Bool = false, volume: UInt8 = 10, duration: UInt16) {
        self.event = event
        self.end = end
        self.volume = volume & 0x3F
        self.duration = duration
    }

    /// Decodes the first four bytes of a telephone-event payload (the R bit is ignored, as the
    /// RFC asks; further bytes, e.g. RFC 2198 redundancy handled elsewhere, are not read).
    public init(parsing bytes: some Collection<UInt8>) throws(DTMFError) {
        guard bytes.count >= 4 else { throw DTMFError(offset: bytes.count, rule: .payloadTooShort, detail: "\(bytes.count) bytes, 4 needed") }
        var i = bytes.startIndex
        let b0 = bytes[i]; bytes.formIndex(after: &i)
        let b1 = bytes[i]; bytes.formIndex(after: &i)
        let b2 = bytes[i]; bytes.formIndex(after: &i)
        let b3 = bytes[i]
        self.init(event: b0, end: b1 & 0x80 != 0, volume: b1 & 0x3F, duration: UInt16(b2) << 8 | UInt16(b3))
    }

    /// The four payload bytes (R bit zero).
    public func serialized() -> [UInt8] {
        [event, (end ? 0x80 : 0) | (volume & 0x3F), UInt8(duration >> 8), UInt8(duration & 0xFF)]
    }

    /// The DTMF character, when the event is one.
    public var character: Character? { DTMF.character(for: event) }
}

/// One telephone-event packet to send, relative to the start of the digit string.
public struct DTMFPacket: Sendable, Hashable {
    /// When to send it, from the start of the sequence.
    public var sendOffset: Duration
    /// Its RTP timestamp minus the timestamp of the start of the sequence: the event's (or
    /// segment's) start, the same for all its packets.
    public var timestampOffset: UInt32
    /// The marker bit: set on the first packet of each event.
    public var marker: Bool
    /// The payload.
    public var event: TelephoneEvent

    /// Creates a packet description.
    public init(sendOffset: Duration, timestampOffset: UInt32, marker: Bool, event: TelephoneEvent) {
        self.sendOffset = sendOffset
        self.timestampOffset = timestampOffset
        self.marker = marker
        self.event = event
    }

    /// The RTP packet, given the timestamp at the start of the sequence and the stream's fields.
    public func rtpPacket(sequenceNumber: UInt16, timestampBase: UInt32, ssrc: UInt32, payloadType: UInt8) -> RTPPacket {
        RTPPacket(marker: marker, payloadType: payloadType, sequenceNumber: sequenceNumber, timestamp: timestampBase &+ timestampOffset,
                  ssrc: ssrc, payload: event.serialized()[...])
    }
}

/// Turns a digit string into the RFC 4733 packet schedule.
///
/// Each event gets one timestamp (its start); a packet is sent every ``Configuration/packetInterval``
/// with the duration so far (the first one, with the marker bit, already covers one interval);
/// the last carries the full duration and the E bit and is sent three times in all (§2.5.1.4),
/// with the same duration. Events longer than 65535 clock units are split into segments
/// (§2.5.1.3): a segment ends at duration 65535, its final packet is sent three times without
/// the E bit, and the next segment's timestamp is the previous one plus 65535. The next digit
/// starts after ``Configuration/interDigitGap``, and never before the previous event's
/// retransmissions are out.
///
/// Characters: `0`–`9`, `*`, `#`, `A`–`D` (either case), `!` for flash (event 16); `w`/`W` and
/// `,` are each a ``Configuration/pause`` (500 ms by default, as in the mobile SDKs'
/// `sendDigits`); spaces are ignored. Anything else is an ``DTMFRule/invalidDigit``.
public struct DTMFSender: Sendable {
    /// Timing of the schedule.
    public struct Configuration: Sendable, Hashable {
        /// The telephone-event clock rate (that of the audio codec: 8000, or 48000 with Opus).
        public var clockRate: Int
        /// Time between two updates of an event (normally the audio ptime).
        public var packetInterval: Duration
        /// How long each digit lasts (at least 40 ms).
        public var digitDuration: Duration
        /// Silence between two digits.
        public var interDigitGap: Duration
        /// The length of a `w` or `,`.
        public var pause: Duration
        /// The volume field (−dBm0).
        public var volume: UInt8

        /// A configuration; the defaults are 8 kHz, 20 ms updates, 100 ms digits, 70 ms gaps, 500 ms pauses, −10 dBm0.
        public init(clockRate: Int = 8000, packetInterval: Duration = .milliseconds(20), digitDuration: Duration = .milliseconds(100),
                    interDigitGap: Duration = .milliseconds(70), pause: Duration = .milliseconds(500), volume: UInt8 = 10) {
            self.clockRate = clockRate
            self.packetInterval = packetInterval
            self.digitDuration = digitDuration
            self.interDigitGap = interDigitGap
            self.pause = pause
            self.volume = volume
        }
    }

    /// The timing in force.
    public let configuration: Configuration

    /// A sender; throws ``DTMFRule/badConfiguration`` for a digit outside 40 ms…60 s, an
    /// interval outside 5…1000 ms, a gap or pause outside 0…60 s, or a clock rate outside 1000…192000.
    public init(configuration: Configuration = Configuration()) throws(DTMFError) {
        let c = configuration
        guard c.digitDuration >= .milliseconds(40), c.digitDuration <= .seconds(60) else {
            throw DTMFError(offset: 0, rule: .badConfiguration, detail: "digit duration must be 40 ms…60 s")
        }
        guard c.packetInterval >= .milliseconds(5), c.packetInterval <= .seconds(1) else {
            throw DTMFError(offset: 0, rule: .badConfiguration, detail: "packet interval must be 5…1000 ms")
        }
        guard (1000...192_000).contains(c.clockRate) else {
            throw DTMFError(offset: 0, rule: .badConfiguration, detail: "clock rate must be 1000…192000")
        }
        guard c.interDigitGap >= .zero, c.pause >= .zero, c.interDigitGap <= .seconds(60), c.pause <= .seconds(60) else {
            throw DTMFError(offset: 0, rule: .badConfiguration, detail: "gap and pause must be 0…60 s")
        }
        self.configuration = configuration
    }

    /// The packets for `digits`, in send order.
    public func schedule(_ digits: String) throws(DTMFError) -> [DTMFPacket] {
        let c = configuration
        let rate = Int64(c.clockRate)
        func units(_ d: Duration) -> Int64 {
            let comps = d.components
            return comps.seconds * rate + Int64((Double(comps.attoseconds) * 1e-18 * Double(rate)).rounded())
        }
        let interval = units(c.packetInterval)
        let total = units(c.digitDuration)
        let gap = units(c.interDigitGap)
        let pause = units(c.pause)
        var out: [DTMFPacket] = []
        var start: Int64 = 0  // clock units from the start of the sequence
        var index = 0
        func at(_ u: Int64) -> Duration { .nanoseconds(u * 1_000_000_000 / rate) }
        for ch in digits {
            defer { index += 1 }
            if ch == " " { continue }
            if ch == "w" || ch == "W" || ch == "," {
                start += pause
                continue
            }
            guard let code = DTMF.eventCode(for: ch) else {
                throw DTMFError(offset: index, rule: .invalidDigit, detail: "'\(ch)' is not 0-9 * # A-D ! w ,")
            }
            var segmentStart = start
            var elapsed: Int64 = 0  // of the whole event
            var first = true
            var lastSend: Int64 = start
            while elapsed < total {
                // One segment: at most 65535 units.
                let segmentLength = min(total - elapsed, 65535)
                var d: Int64 = 0
                var k: Int64 = 0
                while d < segmentLength {
                    d = min(d + interval, segmentLength)
                    let isLast = d == segmentLength
                    let isEventEnd = isLast && elapsed + d == total
                    let send = segmentStart + k * interval
                    k += 1
                    let ev = TelephoneEvent(event: code, end: isEventEnd, volume: c.volume, duration: UInt16(d))
                    out.append(DTMFPacket(sendOffset: at(send), timestampOffset: UInt32(truncatingIfNeeded: segmentStart), marker: first, event: ev))
                    first = false
                    lastSend = send
                    if isLast {
                        for k in 1...2 {
                            lastSend = send + Int64(k) * interval
                            out.append(DTMFPacket(sendOffset: at(lastSend), timestampOffset: UInt32(truncatingIfNeeded: segmentStart), marker: false, event: ev))
                        }
                    }
                }
                elapsed += segmentLength
                segmentStart += segmentLength
            }
            start = max(start + total + gap, lastSend + interval)
        }
        return out.enumerated().sorted { ($0.element.sendOffset, $0.offset) < ($1.element.sendOffset, $1.offset) }.map(\.element)
    }
}

/// A digit received as RFC 4733 events.
public struct ReceivedDTMF: Sendable, Hashable {
    /// The event code.
    public var event: UInt8
    /// The RTP timestamp of the event's start (of its first segment).
    public var timestamp: UInt32
    /// The duration so far (all segments), in clock units.
    public var duration: UInt32
    /// The volume of the latest packet.
    public var volume: UInt8
    /// Whether a packet with the E bit was received (false: ended by a timeout or by the next event).
    public var endReceived: Bool

    /// The DTMF character, when the event is one.
    public var character: Character? { DTMF.character(for: event) }
}

/// Turns received telephone-event packets into digit events, each reported exactly once:
/// ``Output/began(_:)`` at the first packet seen of an event and ``Output/ended(_:)`` at its end.
///
/// Events are told apart by their RTP timestamp. Repeated end packets, duplicates and packets of
/// events already ended are ignored (the last 32 ended events are remembered). When the first
/// packets are lost, the event begins at the first one that arrives; when all end packets are
/// lost, the event ends when another event starts or after ``endTimeout`` without a packet
/// (call ``tick(at:)``). Long events (§2.5.1.3) continue across segments: a packet with the same
/// code whose timestamp follows a nearly full segment (≥ 0xF000) by at most 65536 is the same
/// event, and durations add up; late packets of its earlier segments (the three final packets of a
/// segment overlap the next one) are ignored. A duration that falls back by more than half the range within
/// one timestamp (a sender that lets the field wrap) also continues the event.
public struct DTMFReceiver: Sendable {
    /// What the receiver reports.
    public enum Output: Sendable, Hashable {
        /// A new event.
        case began(ReceivedDTMF)
        /// The end of an event (once per event).
        case ended(ReceivedDTMF)
    }

    private struct Current: Sendable {
        var info: ReceivedDTMF
        var segmentTimestamp: UInt32
        var previousSegments: [UInt32] = []
        var segmentBase: UInt32
        var segmentDuration: UInt16
        var lastHeard: Duration
        var ended: Bool
    }

    /// How long an event may go without packets before it is ended.
    public var endTimeout: Duration
    private var current: Current?
    private var recentEnded: [UInt32] = []

    /// A receiver; `endTimeout` ends an event whose end packets were all lost.
    public init(endTimeout: Duration = .milliseconds(250)) {
        self.endTimeout = endTimeout
    }

    /// Whether an event is in progress.
    public var inProgress: ReceivedDTMF? { current.flatMap { $0.ended ? nil : $0.info } }

    /// Takes one telephone-event RTP packet.
    public mutating func receive(_ packet: RTPPacket, arrival: Duration) throws(DTMFError) -> [Output] {
        try receive(payload: packet.payload, timestamp: packet.timestamp, arrival: arrival)
    }

    /// Takes one telephone-event payload with its RTP timestamp.
    public mutating func receive(payload: some Collection<UInt8>, timestamp: UInt32, arrival: Duration) throws(DTMFError) -> [Output] {
        let ev = try TelephoneEvent(parsing: payload)
        var out: [Output] = []
        if var cur = current, cur.segmentTimestamp == timestamp {
            guard !cur.ended else { return [] }
            if ev.duration < cur.segmentDuration {
                if cur.segmentDuration - ev.duration > 0x8000 {
                    cur.segmentBase &+= 0x10000
                    cur.segmentDuration = ev.duration
                }
            } else {
                cur.segmentDuration = ev.duration
            }
            heard(cur, ev, arrival: arrival, into: &out)
            return out
        }
        if recentEnded.contains(timestamp) { return [] }
        if let cur = current, cur.previousSegments.contains(timestamp) { return [] }  // a late packet of an earlier segment
        if var cur = current, !cur.ended {
            let delta = timestamp &- cur.segmentTimestamp
            if ev.event == cur.info.event, cur.segmentDuration >= 0xF000, delta >= UInt32(cur.segmentDuration), delta <= 0x10000 {
                // The next segment of a long event.
                cur.previousSegments.append(cur.segmentTimestamp)
                if cur.previousSegments.count > 8 { cur.previousSegments.removeFirst() }
                cur.segmentBase &+= delta
                cur.segmentTimestamp = timestamp
                cur.segmentDuration = ev.duration
                heard(cur, ev, arrival: arrival, into: &out)
                return out
            }
            cur.ended = true
            remember(cur)
            out.append(.ended(cur.info))
            current = cur
        }
        if let cur = current, cur.ended, cur.segmentTimestamp == timestamp { return out }
        let info = ReceivedDTMF(event: ev.event, timestamp: timestamp, duration: UInt32(ev.duration), volume: ev.volume, endReceived: ev.end)
        var next = Current(info: info, segmentTimestamp: timestamp, segmentBase: 0, segmentDuration: ev.duration, lastHeard: arrival, ended: false)
        out.append(.began(info))
        if ev.end {
            next.ended = true
            remember(timestamp)
            out.append(.ended(info))
        }
        current = next
        return out
    }

    /// Ends an event that has gone ``endTimeout`` without a packet.
    public mutating func tick(at now: Duration) -> [Output] {
        guard var cur = current, !cur.ended, now - cur.lastHeard >= endTimeout else { return [] }
        cur.ended = true
        remember(cur)
        current = cur
        return [.ended(cur.info)]
    }

    /// Takes a packet of the event in progress once its segment fields are up to date: the
    /// duration so far, the volume and the arrival, and the end (reported once) when the packet
    /// has the E bit. `cur` becomes the current event.
    private mutating func heard(_ cur: Current, _ ev: TelephoneEvent, arrival: Duration, into out: inout [Output]) {
        var cur = cur
        cur.info.duration = cur.segmentBase &+ UInt32(cur.segmentDuration)
        cur.info.volume = ev.volume
        cur.lastHeard = arrival
        if ev.end {
            cur.ended = true
            cur.info.endReceived = true
            remember(cur)
            out.append(.ended(cur.info))
        }
        current = cur
    }

    private mutating func remember(_ cur: Current) {
        remember(cur.info.timestamp)
        if cur.segmentTimestamp != cur.info.timestamp { remember(cur.segmentTimestamp) }
    }

    private mutating func remember(_ ts: UInt32) {
        recentEnded.append(ts)
        if recentEnded.count > 32 { recentEnded.removeFirst() }
    }
}

/// The `application/dtmf-relay` body of a SIP INFO (the de-facto format: `Signal=5` and
/// `Duration=160` lines, duration in milliseconds), the fallback when the peer offers no
/// telephone-event.
public struct DTMFRelayBody: Sendable, Hashable {
    /// The largest body accepted.
    public static let maxSize = 1024

    /// The digit: `0`–`9`, `*`, `#`, `A`–`D`, or `!` for flash.
    public var signal: Character
    /// The duration in milliseconds, when given.
    public var duration: Int?

    /// Creates a body; `signal` must be a DTMF character.
    public init(signal: Character, duration: Int? = 160) throws(DTMFError) {
        guard DTMF.eventCode(for: signal) != nil else { throw DTMFError(offset: 0, rule: .badSignal, detail: "'\(signal)'") }
        self.signal = Character(signal.uppercased())
        self.duration = duration
    }

    /// `Signal=5\r\nDuration=160\r\n`.
    public func serialized() -> [UInt8] {
        var s = "Signal=\(signal)\r\n"
        if let d = duration { s += "Duration=\(d)\r\n" }
        return Array(s.utf8)
    }

    /// Parses a body: lines ending in CRLF or LF, `name=value` with names case-insensitive and
    /// white space around either ignored; unknown lines are skipped; `Signal` is required; the
    /// numeric form `Signal=10`…`16` is accepted for `*`, `#`, `A`–`D` and flash.
    public init(parsing bytes: [UInt8]) throws(DTMFError) {
        guard bytes.count <= Self.maxSize else { throw DTMFError(offset: Self.maxSize, rule: .bodyTooLarge, detail: "\(bytes.count) bytes") }
        var signal: Character?
        var duration: Int?
        var lineStart = 0
        while lineStart < bytes.count {
            var end = lineStart
            while end < bytes.count && bytes[end] != 0x0A { end += 1 }
            var line = bytes[lineStart..<end]
            if line.last == 0x0D { line = line.dropLast() }
            let offset = lineStart
            lineStart = end + 1
            let text = String(decoding: line, as: UTF8.self).trimmingWhiteSpace()
            if text.isEmpty { continue }
            guard let eq = text.firstIndex(of: "=") else { throw DTMFError(offset: offset, rule: .badLine, detail: "no '=' in \"\(text)\"") }
            let name = text[..<eq].trimmingWhiteSpace().lowercased()
            let value = text[text.index(after: eq)...].trimmingWhiteSpace()
            switch name {
            case "signal":
                if value.count == 1, let ch = value.first, DTMF.eventCode(for: ch) != nil {
                    signal = Character(ch.uppercased())
                } else if let n = UInt8(value), let ch = DTMF.character(for: n) {
                    signal = ch
                } else {
                    throw DTMFError(offset: offset, rule: .badSignal, detail: "\"\(value)\"")
                }
            case "duration":
                guard let n = Int(value), (1...60_000).contains(n) else { throw DTMFError(offset: offset, rule: .badDuration, detail: "\"\(value)\"") }
                duration = n
            default:
                continue
            }
        }
        guard let s = signal else { throw DTMFError(offset: bytes.count, rule: .missingSignal) }
        self.signal = s
        self.duration = duration
    }
}

extension StringProtocol {
    func trimmingWhiteSpace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { $0 != " " && $0 != "\t" }) else { return "" }
        let last = scalars.lastIndex(where: { $0 != " " && $0 != "\t" })!
        var out = String.UnicodeScalarView()
        out.append(contentsOf: scalars[first...last])
        return String(out)
    }
}
