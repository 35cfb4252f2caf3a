import Glibc
import Media
import MediaCodecs
import NetworkIO
import RTP
import SDP
import SRTP

/// Where decoded audio goes (the WAV writer lives inside the session's lock).
enum Sink {
    case discard
    case wav(WAVStreamWriter)
    case callback(Int, @Sendable ([Int16]) -> Void)

    var sampleRate: Int? {
        switch self {
        case .discard: return nil
        case .wav(let w): return w.sampleRate
        case .callback(let rate, _): return rate
        }
    }
}

/// Encoders and decoders for the negotiated codecs.
enum CodecFactory {
    static func encoder(for codec: NegotiatedCodec, ptimeMS: Int, opusComplexity: Int? = nil, opusBitrate: Int? = nil)
        throws(MediaSessionError) -> any AudioEncoder & Sendable
    {
        let name = codec.name.lowercased()
        do throws(AudioCodecError) {
            switch name {
            case "pcmu": return try G711Encoder(law: .muLaw, frameMilliseconds: ptimeMS)
            case "pcma": return try G711Encoder(law: .aLaw, frameMilliseconds: ptimeMS)
            case "opus":
                let peer = codec.parameters.flatMap { try? OpusParameters(fmtp: $0) } ?? OpusParameters()
                var base = OpusEncoder.Configuration(sampleRate: 48000, channels: 1, application: .voip)
                base.complexity = opusComplexity.map { max(0, min(10, $0)) }
                base.bitrate = opusBitrate.map { max(6000, min(510_000, $0)) }
                base.frameDuration = OpusFrameDuration.atMost(milliseconds: ptimeMS)
                var config = peer.encoderConfiguration(for: peer, base: base)
                if peer.ptime == nil { config.frameDuration = base.frameDuration }
                return try OpusEncoder(config)
            default: break
            }
        } catch {
            throw .codec(error)
        }
        throw .unsupportedCodec(codec.description)
    }

    static func decoder(for codec: NegotiatedCodec, ptimeMS: Int) -> (any AudioDecoder & Sendable)? {
        switch codec.name.lowercased() {
        case "pcmu": return try? G711Decoder(law: .muLaw, frameMilliseconds: ptimeMS)
        case "pcma": return try? G711Decoder(law: .aLaw, frameMilliseconds: ptimeMS)
        case "opus": return try? OpusDecoder(sampleRate: 48000, channels: 1, frameDuration: OpusFrameDuration.atMost(milliseconds: ptimeMS))
        default: return nil
        }
    }

    static func impairment(_ codec: NegotiatedCodec) -> CodecImpairment {
        codec.name.lowercased() == "opus" ? .opus(bitrate: 24000) : .g711WithPLC
    }
}

/// A source resampled to the codec's rate, handing out exact frames.
struct FramedSource {
    var source: any AudioSource
    var resampler: Resampler?
    var pending: [Int16] = []
    var outputRate: Int

    init(_ source: any AudioSource, outputRate: Int) {
        self.source = source
        self.outputRate = outputRate
        resampler = source.sampleRate == outputRate ? nil : Resampler(from: source.sampleRate, to: outputRate)
    }

    mutating func frame(_ count: Int) -> [Int16] {
        let inputCount = max(1, (count * source.sampleRate + outputRate - 1) / outputRate)
        var guardCount = 0
        while pending.count < count && guardCount < 4 {
            guardCount += 1
            guard let input = source.nextFrame(count: inputCount) else { break }
            if resampler != nil {
                pending += resampler!.process(input)
            } else if source.sampleRate == outputRate {
                pending += input
            } else {
                break
            }
        }
        if pending.count < count { pending += [Int16](repeating: 0, count: count - pending.count) }
        let out = Array(pending.prefix(count))
        pending.removeFirst(count)
        return out
    }
}

/// The negotiated facts a tick or a received packet needs.
struct Flow {
    var sends: Bool
    var receives: Bool
    var rtcpMux: Bool
    var telephoneEvent: UInt8?
    var impairment: CodecImpairment
}

/// Everything the engine worker and the API calls share, behind the session's lock.
struct SessionState {
    // Audio ends.
    var input: FramedSource?
    var rawSource: any AudioSource
    var sink: Sink
    var sinkResampler: Resampler?
    var muted = false
    /// Echo mode: played frames (at the receive clock rate) wait here to be sent back.
    var echo = false
    /// Frames played and waiting to go back, oldest first (whole frames: when the send and
    /// receive frames have one size, a frame goes back as it came, without copying).
    var echoFrames: [[Int16]] = []
    /// Samples waiting in ``echoFrames`` (normally a frame or two, never over a second).
    var echoQueued: Int { echoFrames.reduce(0) { $0 + $1.count } }
    var echoResampler: Resampler?

    // Negotiation.
    var negotiated: NegotiatedMedia?
    /// What the ticks and the receive path need of ``negotiated``, without its arrays and
    /// strings (copying those on every packet costs more than the packet's work).
    var flow: Flow?
    var ptime: Duration = .milliseconds(20)
    var srtp: SRTPContext?
    var remoteRTCP: SocketAddress?

    // Sending.
    var encoder: (any AudioEncoder & Sendable)?
    var packetizer: RTPPacketizer?
    var ssrc: UInt32
    var dtmfQueue: [(due: Duration, packet: DTMFPacket, base: UInt32)] = []
    var sentPackets: UInt64 = 0
    var sentBytes: UInt64 = 0
    var lastRTPTimestamp: UInt32 = 0
    var lastSendTime: Duration = .zero

    // Receiving.
    var latch: SymmetricRTPLatch<SocketAddress>?
    var source: SourceState?
    var jitter: JitterBuffer?
    var receiveClockRate = 8000
    var decoders: [UInt8: any AudioDecoder & Sendable] = [:]
    var dtmfReceiver = DTMFReceiver()
    var digits = ""
    var receivedPackets: UInt64 = 0
    var receivedBytes: UInt64 = 0
    var refused: UInt64 = 0
    var srtpDropped: UInt64 = 0
    /// Telephone-event packets received: each takes a sequence number the jitter buffer (audio
    /// only) then sees as missing, which must not count as loss.
    var eventPackets = 0

    // RTCP.
    var nextRTCP: Duration = .zero
    var rtcpInterval: Duration = .seconds(5)
    var lastSR: (middle: UInt32, arrival: Duration)?
    var roundTripTime: Duration?
    var remoteFractionLost: Double?
    var rtcpSent: UInt64 = 0
    var rtcpReceived: UInt64 = 0
    var monitor = QualityMonitor()
    /// Energy and sample count of the unmuted input since the last quality sample (for the
    /// constant-input-level warning).
    var inputEnergy = 0.0
    var inputSamples = 0
    /// Tick lateness in 0.1 ms buckets (the last one: 20 ms or more).
    var lateness = [UInt32](repeating: 0, count: 201)
    var maxLateness: Duration = .zero
    var maxLatenessNanoseconds: Int64 = 0
    var lastSnapshot = CallStatistics()

    // Inactivity (a peer that stopped sending while it should send).
    var inactivityTimeout: Duration?
    /// When a packet last came from the peer, or when listening for it began (the stream
    /// started, or its direction turned to receiving).
    var lastHeard: Duration = .zero
    /// ``MediaSessionEvent/inactive(silentFor:)`` was reported and no packet came since.
    var silent = false

    init(source: any AudioSource, sink: Sink, ssrcSeed: UInt32) {
        rawSource = source
        self.sink = sink
        ssrc = ssrcSeed
    }

    mutating func setSource(_ source: any AudioSource) {
        rawSource = source
        if let rate = encoder?.sampleRate { input = FramedSource(source, outputRate: rate) }
    }

    mutating func configure(media: NegotiatedMedia, encoder newEncoder: any AudioEncoder & Sendable, ptime newPtime: Duration,
                            remote: SocketAddress, remoteRTCP newRemoteRTCP: SocketAddress, srtp newSRTP: SRTPContext?,
                            configuration: MediaSessionConfiguration, now: Duration) {
        let old = negotiated
        negotiated = media
        inactivityTimeout = configuration.inactivityTimeout
        // Listening starts now when the stream starts or turns to receiving.
        if old == nil || flow?.receives != media.receives {
            lastHeard = now
            silent = false
        }
        flow = Flow(sends: media.sends, receives: media.receives, rtcpMux: media.rtcpMux,
                    telephoneEvent: media.telephoneEvent?.payloadType, impairment: CodecFactory.impairment(media.sendCodec))
        srtp = newSRTP
        remoteRTCP = newRemoteRTCP
        rtcpInterval = configuration.rtcpInterval
        let ptimeMS = Int(newPtime.components.seconds * 1000 + newPtime.components.attoseconds / 1_000_000_000_000_000)
        let codecChanged = old?.sendCodec != media.sendCodec || ptime != newPtime || encoder == nil
        ptime = newPtime
        if codecChanged {
            encoder = newEncoder
            let rate = Int(media.sendCodec.clockRate)
            // Keep the SSRC and the sequence across codec changes; restart the timestamps.
            let seq = packetizer?.nextSequenceNumber ?? UInt16.random(in: .min ... .max)
            let ts = packetizer?.nextTimestamp ?? UInt32.random(in: .min ... .max)
            packetizer = RTPPacketizer(payloadType: media.sendCodec.payloadType, clockRate: rate, frameDuration: newPtime,
                                       ssrc: ssrc, firstSequenceNumber: seq, firstTimestamp: ts)
            input = FramedSource(rawSource, outputRate: newEncoder.sampleRate)
            dtmfQueue = []
        }
        // Receiving: the codec we expect is the receive codec of the send codec's kind.
        let expected = media.receiveCodecs.first { $0.name.lowercased() == media.sendCodec.name.lowercased() } ?? media.sendCodec
        let rate = Int(expected.clockRate)
        if jitter == nil || receiveClockRate != rate || old?.ptime != media.ptime {
            if let sinkRate = sink.sampleRate, jitter == nil || receiveClockRate != rate {
                sinkResampler = rate == sinkRate ? nil : Resampler(from: rate, to: sinkRate)
            }
            receiveClockRate = rate
            jitter = JitterBuffer(configuration: JitterBufferConfiguration(
                clockRate: rate, frameDuration: newPtime, minDelay: configuration.minJitterDelay, maxDelay: configuration.maxJitterDelay,
                initialDelay: .milliseconds(60), capacity: 64))
        }
        var newDecoders: [UInt8: any AudioDecoder & Sendable] = [:]
        for codec in media.receiveCodecs where !codec.isTelephoneEvent {
            if let existing = decoders[codec.payloadType], old?.receiveCodec(forPayloadType: codec.payloadType) == codec {
                newDecoders[codec.payloadType] = existing
            } else if let d = CodecFactory.decoder(for: codec, ptimeMS: ptimeMS) {
                newDecoders[codec.payloadType] = d
            }
        }
        decoders = newDecoders
        var payloadTypes = Set(media.receiveCodecs.map(\.payloadType))
        if let te = media.telephoneEvent { payloadTypes.insert(te.payloadType) }
        if latch == nil || latch?.signalledAddress != remote || latch?.payloadTypes != payloadTypes {
            latch = SymmetricRTPLatch(signalledAddress: remote, payloadTypes: payloadTypes)
        }
        if old == nil {
            nextRTCP = now + configuration.rtcpInterval / 2
        }
    }

    mutating func queueDigits(_ digits: String, now: Duration) throws(MediaSessionError) {
        guard let media = negotiated, let te = media.telephoneEvent else {
            throw .dtmfUnavailable("no telephone-event was negotiated")
        }
        guard media.sends, let packetizer else { throw .dtmfUnavailable("the stream is not sending") }
        guard dtmfQueue.count < 4096 else { throw .dtmfUnavailable("too many digits queued") }
        do throws(DTMFError) {
            let sender = try DTMFSender(configuration: .init(clockRate: Int(te.clockRate), packetInterval: ptime))
            let schedule = try sender.schedule(digits)
            let start = max(now, dtmfQueue.last?.due ?? now) + ptime
            // Events after already-queued ones: their timestamps start after the queued schedule.
            let base: UInt32
            if let last = dtmfQueue.last {
                base = last.base &+ last.packet.timestampOffset &+ UInt32(Int(te.clockRate) / 10)
            } else {
                base = packetizer.nextTimestamp
            }
            for p in schedule {
                dtmfQueue.append((start + p.sendOffset, p, base))
            }
        } catch {
            throw .dtmf(error)
        }
    }

    // MARK: receiving

    mutating func receiveRTP(_ packet: RTPPacket, from address: SocketAddress, size: Int, arrival: Duration) -> [MediaSessionEvent] {
        // The latch is observed in place (copying it out and back cost a retain per packet).
        guard let media = flow, let decision = latch?.observe(packet, from: address, at: arrival) else {
            refused += 1
            return []
        }
        var events: [MediaSessionEvent] = []
        switch decision {
        case .refuse:
            refused += 1
            return []
        case .latched(let endpoint):
            events.append(.latched(endpoint))
        case .accept: break
        }
        receivedPackets += 1
        receivedBytes += UInt64(packet.payload.count)
        heard(at: arrival, &events)
        if source?.ssrc != packet.ssrc {
            source = SourceState(ssrc: packet.ssrc, firstSequence: packet.sequenceNumber)
        }
        _ = source?.update(sequence: packet.sequenceNumber)
        let isEvent = media.telephoneEvent == packet.payloadType
        // Events repeat one timestamp per digit: only audio feeds the jitter estimate.
        if !isEvent { source?.updateJitter(timestamp: packet.timestamp, arrival: arrival, clockRate: receiveClockRate) }
        guard media.receives else { return events }
        if isEvent {
            eventPackets += 1
            if let outputs = try? dtmfReceiver.receive(packet, arrival: arrival) {
                events += dtmfEvents(outputs)
            }
        } else if decoders[packet.payloadType] != nil {
            _ = jitter?.insert(JitterBufferPacket(packet), arrival: arrival)
        } else {
            refused += 1
        }
        return events
    }

    mutating func dtmfEvents(_ outputs: [DTMFReceiver.Output]) -> [MediaSessionEvent] {
        outputs.map { output in
            switch output {
            case .began(let d): return .dtmfBegan(d)
            case .ended(let d):
                if let c = d.character, digits.count < 1024 { digits.append(c) }
                return .dtmf(d)
            }
        }
    }

    mutating func receiveRTCP(_ compound: RTCPCompoundPacket, from address: SocketAddress, arrival: Duration, wallClock: Duration) -> [MediaSessionEvent] {
        guard negotiated != nil else { return [] }
        rtcpReceived += 1
        var events: [MediaSessionEvent] = []
        heard(at: arrival, &events)
        let now = NTPTimestamp(sinceUnixEpoch: wallClock)
        for packet in compound.packets {
            var blocks: [RTCPReportBlock] = []
            switch packet {
            case .senderReport(let sr):
                lastSR = (sr.ntpTimestamp.middle32, arrival)
                blocks = sr.reports
            case .receiverReport(let rr):
                blocks = rr.reports
            case .bye:
                events.append(.bye)
            default: break
            }
            for block in blocks where block.ssrc == ssrc {
                remoteFractionLost = Double(block.fractionLost) / 256
                if block.lastSR != 0, let rtt = RTCPTiming.roundTripTime(arrival: now, lastSR: block.lastSR, delaySinceLastSR: block.delaySinceLastSR) {
                    roundTripTime = rtt
                }
            }
        }
        return events
    }

    /// A packet came from the peer: the inactivity clock restarts (and a reported silence ends).
    mutating func heard(at arrival: Duration, _ events: inout [MediaSessionEvent]) {
        if arrival > lastHeard { lastHeard = arrival }
        if silent {
            silent = false
            events.append(.resumed)
        }
    }

    /// Whether the peer has been silent past the timeout while it should send (once per silence).
    mutating func checkInactivity(at now: Duration, receives: Bool) -> MediaSessionEvent? {
        guard let limit = inactivityTimeout, receives, !silent, now - lastHeard >= limit else { return nil }
        silent = true
        return .inactive(silentFor: now - lastHeard)
    }

    // MARK: the tick

    mutating func tick(at now: Duration, wallClock: Duration, outgoing: inout [(bytes: [UInt8], destination: SocketAddress, rtcp: Bool)]) -> [MediaSessionEvent] {
        guard let media = flow else { return [] }
        var events: [MediaSessionEvent] = []
        let destination = latch?.destination
        // Sending: due DTMF events replace audio; otherwise one audio frame. (Everything is
        // mutated in place: copying a codec, the source or the jitter buffer out of `self` and
        // back would copy their buffers on every tick.)
        if media.sends, packetizer != nil, let destination {
            var sentEvent = false
            while let first = dtmfQueue.first, first.due <= now, let te = media.telephoneEvent {
                dtmfQueue.removeFirst()
                let packet = packetizer!.packet(first.packet, payloadType: te, timestampBase: first.base)
                if let bytes = Self.protect(packet, srtp) { outgoing.append((bytes, destination, false)) }
                sentPackets += 1
                sentBytes += UInt64(packet.payload.count)
                sentEvent = true
            }
            if sentEvent || !dtmfQueue.isEmpty {
                packetizer!.skip(frames: 1)
                _ = input?.frame(encoder?.samplesPerFrame ?? 0)
            } else if let n = encoder?.samplesPerFrame, case .some = input {
                var frame: [Int16]
                if echo {
                    frame = takeEcho(n)
                } else {
                    frame = input!.frame(n)
                }
                if !muted { measureInput(frame) }
                if muted { frame = AudioSamples.silence(frame.count) }
                if let payload = try? encoder!.encode(frame) {
                    let packet = packetizer!.packetize(payload)
                    lastRTPTimestamp = packet.timestamp
                    lastSendTime = now
                    if let bytes = Self.protect(packet, srtp) { outgoing.append((bytes, destination, false)) }
                    sentPackets += 1
                    sentBytes += UInt64(payload.count)
                }
            }
        } else if packetizer != nil {
            // Not sending (hold): the clock still runs, so the timestamps stay true to time.
            packetizer!.skip(frames: 1)
            dtmfQueue = []
        }
        // Playing.
        if let frame = jitter?.pull(at: now), media.receives { play(frame) }
        events += dtmfEvents(dtmfReceiver.tick(at: now))
        if let e = checkInactivity(at: now, receives: media.receives) { events.append(e) }
        // RTCP.
        if now >= nextRTCP {
            let jitterFactor = Double.random(in: 0.5...1.5)
            nextRTCP = now + rtcpInterval * jitterFactor
            if let report = rtcpReport(now: now, wallClock: wallClock, bye: false), let target = rtcpDestination() {
                outgoing.append((report, target, !media.rtcpMux))
                rtcpSent += 1
            }
            let snapshot = statistics().call
            let codec = media.impairment
            if snapshot.received.packets > lastSnapshot.received.packets {
                let sample = QualitySample(from: lastSnapshot, to: snapshot, codec: codec, packetization: ptime,
                                           audioInputLevel: takeInputLevel(), muted: muted)
                events += monitor.add(sample).map { .quality($0) }
            }
            lastSnapshot = snapshot
        }
        return events
    }

    mutating func play(_ frame: JitterBufferFrame) {
        let samples = Int(ptime / .milliseconds(1)) * receiveClockRate / 1000
        var pcm: [Int16]?
        switch frame {
        case .audio(let packet):
            pcm = try? decoders[packet.payloadType]?.decode(packet.payload)
        case .missing(let missing):
            let pt = missing.next?.payloadType ?? decoders.keys.first ?? 0
            if let opus = decoders[pt] as? OpusDecoder, let next = missing.next {
                pcm = try? opus.decodeFEC(from: next.payload, samplesPerChannel: samples)
            }
            if pcm == nil { pcm = try? decoders[pt]?.concealLoss(samplesPerChannel: samples) }
        case .stretch:
            if let pt = decoders.keys.first { pcm = try? decoders[pt]?.concealLoss(samplesPerChannel: samples) }
        case .silence:
            pcm = AudioSamples.silence(samples)
        case .empty:
            pcm = nil
        }
        guard var out = pcm else { return }
        if echo, let rate = encoder?.sampleRate {
            var back = out
            if rate != receiveClockRate {
                if echoResampler?.inputRate != receiveClockRate || echoResampler?.outputRate != rate {
                    echoResampler = Resampler(from: receiveClockRate, to: rate)
                }
                if echoResampler != nil { back = echoResampler!.process(back) }
            }
            echoFrames.append(back)
            // At most a second waits; the oldest goes first.
            while echoFrames.count > 1, echoQueued > rate { echoFrames.removeFirst() }
        }
        if sinkResampler != nil { out = sinkResampler!.process(out) }
        switch sink {
        case .discard: break
        case .wav(let writer): try? writer.write(out)
        case .callback(_, let f): f(out)
        }
    }

    static func protect(_ packet: RTPPacket, _ srtp: SRTPContext?) -> [UInt8]? {
        guard var bytes = packet.serialized() else { return nil }
        if let srtp {
            do throws(SRTPError) { try srtp.protectRTP(&bytes) } catch { return nil }
        }
        return bytes
    }

    func rtcpDestination() -> SocketAddress? {
        guard let media = negotiated else { return nil }
        if media.rtcpMux { return latch?.destination }
        if let latched = latch?.latchedAddress { return latched.withPort(latched.port &+ 1) }
        return remoteRTCP
    }

    mutating func rtcpReport(now: Duration, wallClock: Duration, bye: Bool) -> [UInt8]? {
        var blocks: [RTCPReportBlock] = []
        if var s = source, s.isValid {
            var lsr: UInt32 = 0
            var dlsr: UInt32 = 0
            if let last = lastSR {
                lsr = last.middle
                dlsr = RTCPTiming.compactUnits(max(.zero, now - last.arrival))
            }
            blocks.append(s.makeReportBlock(lastSR: lsr, delaySinceLastSR: dlsr))
            source = s
        }
        var packets: [RTCPPacket] = []
        if sentPackets > 0 && now - lastSendTime < rtcpInterval * 2, let packetizer {
            // The RTP timestamp matching the NTP time: the last sent one advanced by the time since.
            let elapsed = max(.zero, now - lastSendTime)
            let ts = lastRTPTimestamp &+ SourceState.timestampUnits(elapsed, clockRate: packetizer.clockRate)
            packets.append(.senderReport(RTCPSenderReport(
                ssrc: ssrc, ntpTimestamp: NTPTimestamp(sinceUnixEpoch: wallClock), rtpTimestamp: ts,
                packetCount: UInt32(truncatingIfNeeded: sentPackets), octetCount: UInt32(truncatingIfNeeded: sentBytes), reports: blocks)))
        } else {
            packets.append(.receiverReport(RTCPReceiverReport(ssrc: ssrc, reports: blocks)))
        }
        packets.append(.sourceDescription(RTCPSourceDescription(chunks: [
            RTCPSDESChunk(ssrc: ssrc, items: [RTCPSDESItem(type: SDESItemType.cname, text: "switchboard-\(String(ssrc, radix: 16))")]),
        ])))
        if bye { packets.append(.bye(RTCPBye(ssrcs: [ssrc]))) }
        guard var bytes = RTCPCompoundPacket(packets: packets).serialized() else { return nil }
        if let srtp {
            do throws(SRTPError) { try srtp.protectRTCP(&bytes) } catch { return nil }
        }
        return bytes
    }

    mutating func byePacket(now: Duration, wallClock: Duration) -> ([UInt8], SocketAddress, Bool)? {
        guard let media = negotiated, let target = rtcpDestination() else { return nil }
        guard let bytes = rtcpReport(now: now, wallClock: wallClock, bye: true) else { return nil }
        return (bytes, target, media.rtcpMux)
    }

    mutating func closeSink() {
        if case .wav(let writer) = sink { try? writer.close() }
        sink = .discard
    }

    /// The next `n` samples to echo: the oldest queued frame as it is when it has that size,
    /// else assembled from the queue (silence when it runs short).
    mutating func takeEcho(_ n: Int) -> [Int16] {
        if echoFrames.first?.count == n { return echoFrames.removeFirst() }
        var out: [Int16] = []
        out.reserveCapacity(n)
        while out.count < n, !echoFrames.isEmpty {
            let need = n - out.count
            if echoFrames[0].count <= need {
                out += echoFrames.removeFirst()
            } else {
                out += echoFrames[0].prefix(need)
                echoFrames[0].removeFirst(need)
            }
        }
        if out.count < n { out += AudioSamples.silence(n - out.count) }
        return out
    }

    /// Adds an unmuted input frame to the interval's level.
    mutating func measureInput(_ frame: [Int16]) {
        // Integer squares (exact; 2^30 per sample, so a frame cannot overflow).
        var sum: Int64 = 0
        for x in frame { sum &+= Int64(x) * Int64(x) }
        inputEnergy += Double(sum)
        inputSamples += frame.count
    }

    /// The input's RMS level over the interval in dBFS (as `AudioSamples.rmsLevel`; −120 for
    /// digital silence), nil when nothing unmuted was sent; starts the next interval.
    mutating func takeInputLevel() -> Double? {
        defer {
            inputEnergy = 0
            inputSamples = 0
        }
        guard inputSamples > 0 else { return nil }
        let meanSquare = inputEnergy / Double(inputSamples)
        guard meanSquare > 0 else { return -120 }
        return max(-120, 10 * log10(meanSquare / (32768.0 * 32768.0)))
    }

    mutating func recordLateness(nanoseconds late: Int64) {
        let tenths = max(0, Int(late / 100_000))
        lateness[min(tenths, lateness.count - 1)] &+= 1
        if late > maxLatenessNanoseconds {
            maxLatenessNanoseconds = late
            maxLateness = .nanoseconds(late)
        }
    }

    /// The `q` quantile of the tick lateness (bucket upper bound), nil before any tick.
    func latenessQuantile(_ q: Double) -> Duration? {
        let total = lateness.reduce(0) { $0 + Int($1) }
        guard total > 0 else { return nil }
        let rank = Int((Double(total) * q).rounded(.up))
        var seen = 0
        for (i, n) in lateness.enumerated() {
            seen += Int(n)
            if seen >= rank { return .microseconds(100 * (i + 1)) }
        }
        return maxLateness
    }

    /// The jitter buffer's counters without the sequence numbers taken by telephone events.
    var audioJitterStatistics: JitterBufferStatistics? {
        guard var stats = jitter?.statistics else { return nil }
        stats.lost = max(0, stats.lost - eventPackets)
        return stats
    }

    func statistics() -> MediaSessionStatistics {
        let lost = Int64(source?.cumulativeLost ?? 0)
        let jitterUnits = source?.jitter ?? 0
        let rate = max(1, receiveClockRate)
        let jitter = Duration.nanoseconds(Int64(jitterUnits) * 1_000_000_000 / Int64(rate))
        var call = CallStatistics(
            sent: .init(packets: sentPackets, bytes: sentBytes), received: .init(packets: receivedPackets, bytes: receivedBytes),
            packetsLost: lost, fractionLost: 0, remoteFractionLost: remoteFractionLost, jitter: jitter,
            roundTripTime: roundTripTime, codec: negotiated?.sendCodec.description ?? "none", mos: nil, jitterBuffer: audioJitterStatistics)
        if let media = negotiated, receivedPackets > 0 {
            call.mos = call.estimatedMOS(codec: CodecFactory.impairment(media.sendCodec), packetization: ptime)
        }
        let dropped = srtp.map { $0.receiver.statistics.rtp.dropped + $0.receiver.statistics.rtcp.dropped } ?? 0
        return MediaSessionStatistics(
            call: call, refused: refused, srtpDropped: max(srtpDropped, dropped), secure: srtp != nil,
            rtcpSent: rtcpSent, rtcpReceived: rtcpReceived, digitsReceived: digits,
            sendLatenessP99: latenessQuantile(0.99), sendLatenessMax: maxLateness)
    }
}
