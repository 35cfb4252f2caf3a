/// Streams the SIP messages and anomalies of a capture file: a ``CaptureFileReader`` feeding a
/// ``CaptureDecoder``.
///
/// ``next()`` yields events frame by frame; after the last frame it yields what
/// ``CaptureDecoder/finish()`` reports, then `nil`. A corrupt file throws its
/// ``CaptureFileError`` after every event from the frames before the failure.
/// Not `Sendable`: it owns an open file.
public final class SIPCaptureReader {
    private let reader: CaptureFileReader
    /// The decoder, with its counters.
    public private(set) var decoder: CaptureDecoder
    /// Events still to hand out, the next one last (so it is moved out with `popLast`, not copied).
    private var queue: [CaptureEvent] = []
    private var finished = false

    /// Opens the capture at `path`.
    /// - Throws: ``CaptureFileError`` when the file cannot be opened or its header is unreadable.
    /// With `digests`, messages come as ``CaptureEvent/digest(_:)``; with `datagrams`, non-SIP
    /// UDP datagrams come too, with their payloads when `payloads` is set (see
    /// ``CaptureDecoder/init(limits:digests:datagrams:payloads:)``).
    public init(path: String, limits: CaptureDecoder.Limits = .init(), digests: Bool = false, datagrams: Bool = false,
                payloads: Bool = false) throws(CaptureFileError) {
        reader = try CaptureFileReader(path: path)
        decoder = CaptureDecoder(limits: limits, digests: digests, datagrams: datagrams, payloads: payloads)
    }

    /// Reads a capture held in memory (the options as for a file).
    public init(bytes: [UInt8], limits: CaptureDecoder.Limits = .init(), digests: Bool = false, datagrams: Bool = false,
                payloads: Bool = false) throws(CaptureFileError) {
        reader = try CaptureFileReader(bytes: bytes)
        decoder = CaptureDecoder(limits: limits, digests: digests, datagrams: datagrams, payloads: payloads)
    }

    /// The decoder's counters so far.
    public var counters: CaptureCounters { decoder.counters }

    /// The next message or anomaly, or `nil` at the end of the capture.
    public func next() throws(CaptureFileError) -> CaptureEvent? {
        while queue.isEmpty {
            guard try decodeNext(into: &queue) else { return nil }
            if queue.count > 1 { queue.reverse() }
        }
        return queue.popLast()
    }

    /// The events of the next frame (or of the end of the capture) in order, replacing the
    /// contents of `events` (a buffer the caller reuses); `false`, with `events` empty, once
    /// the capture is done. Frames that yield nothing are skipped. For a caller that reads the
    /// events in place: nothing is reversed or moved out one by one. Not to be mixed with
    /// ``next()`` (which may hold events this does not return).
    public func nextEvents(into events: inout [CaptureEvent]) throws(CaptureFileError) -> Bool {
        events.removeAll(keepingCapacity: true)
        while events.isEmpty {
            guard try decodeNext(into: &events) else { return false }
        }
        return true
    }

    /// ``nextEvents(into:)`` with a fast path for RTP: frames that are plain UDP datagrams
    /// (``CaptureDecoder`` would report them as ``CaptureEvent/datagram(_:)`` of kind
    /// ``CapturedDatagram/Kind/rtp``) are decoded in place, in capture order, and handed to
    /// `rtp` as a ``BorrowedDatagram`` — no event, no copy, no allocation — with the decoder's
    /// counters kept as if it had decoded them. Every other frame (SIP, RTCP, TCP, fragments,
    /// anything unusual) comes out as events, as from ``nextEvents(into:)``. The fast path is
    /// taken only when the decoder was made with `datagrams` (and never while IP fragments
    /// wait for reassembly); otherwise every frame comes as events.
    public func nextEvents(into events: inout [CaptureEvent], rtp: (BorrowedDatagram) -> Void) throws(CaptureFileError) -> Bool {
        events.removeAll(keepingCapacity: true)
        while events.isEmpty {
            if !finished && decoder.fastPathOpen { scanRTP(rtp) }
            guard try decodeNext(into: &events) else { return false }
        }
        return true
    }

    /// Hands RTP frames to `rtp` until a frame needs the decoder (or the file ends).
    private func scanRTP(_ rtp: (BorrowedDatagram) -> Void) {
        var frames = 0, v6 = 0
        var first: CaptureTimestamp?
        _ = reader.scanFrames { h, bytes in
            guard let u = CaptureDecoder.plainUDP(h.linkType, bytes) else { return false }
            let payload = UnsafeRawBufferPointer(rebasing: bytes[u.payload])
            guard BorrowedDatagram.isRTP(payload) else { return false }
            if frames == 0 { first = h.timestamp }
            frames += 1
            if u.v6 { v6 += 1 }
            rtp(BorrowedDatagram(timestamp: h.timestamp, source: u.source, destination: u.destination, frameNumber: h.number, payload: payload))
            return true
        }
        decoder.countFastPath(frames: frames, v6: v6, first: first)
    }

    /// Appends the events of the next frame to `events` (empty on entry), or, past the last
    /// frame, those ``CaptureDecoder/finish()`` reports; `false` once that has been done.
    private func decodeNext(into events: inout [CaptureEvent]) throws(CaptureFileError) -> Bool {
        if finished { return false }
        if let (frame, bytes) = try reader.nextFrameInPlace() {
            decoder.decode(frame, bytes: bytes, into: &events)
        } else {
            events = decoder.finish()
            finished = true
        }
        return true
    }
}

/// Everything a capture holds, read at once (for tests and small captures).
public struct CaptureSummary: Sendable {
    /// The SIP messages, in the order they were completed.
    public var messages: [CapturedSIPMessage] = []
    /// Non-fatal anomalies.
    public var anomalies: [CaptureAnomaly] = []
    /// The decoder's counters.
    public var counters = CaptureCounters()
    /// The error that ended the file early, if any (everything before it is included).
    public var fileError: CaptureFileError?

    /// Reads the capture at `path` to its end or its first file error.
    /// - Throws: ``CaptureFileError`` only when the file cannot be opened or its header is unreadable.
    public init(path: String, limits: CaptureDecoder.Limits = .init()) throws(CaptureFileError) {
        try self.init(reader: SIPCaptureReader(path: path, limits: limits))
    }

    /// Reads a capture held in memory.
    public init(bytes: [UInt8], limits: CaptureDecoder.Limits = .init()) throws(CaptureFileError) {
        try self.init(reader: SIPCaptureReader(bytes: bytes, limits: limits))
    }

    private init(reader: SIPCaptureReader) {
        do throws(CaptureFileError) {
            while let e = try reader.next() {
                switch e {
                case .message(let m): messages.append(m)
                case .anomaly(let a): anomalies.append(a)
                case .digest, .datagram: break  // not made by this reader's decoder
                }
            }
        } catch {
            fileError = error
            // Report what the decoder still holds.
            var d = reader.decoder
            for e in d.finish() {
                switch e {
                case .message(let m): messages.append(m)
                case .anomaly(let a): anomalies.append(a)
                case .digest, .datagram: break  // not made by this reader's decoder
                }
            }
            counters = d.counters
            return
        }
        counters = reader.counters
    }
}
