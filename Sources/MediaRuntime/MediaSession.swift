import CSocket
import Glibc
import Media
import MediaCodecs
import NetworkIO
import RTP
import SDP
import SRTP
import Synchronization
import Logging

/// The media of one call: an RTP socket (and RTCP on the next port), the codec, SRTP, the
/// jitter buffer, DTMF and the statistics, run by a ``MediaEngine`` worker thread.
///
/// Life cycle: create it before the offer/answer (it binds its ports), put
/// ``streamCapabilities()`` into the `OfferAnswer` capabilities, then ``apply(_:)`` every
/// `NegotiatedMedia` the engine produces (the first starts the media; later ones update codec,
/// ptime, address, direction and SRTP keys), and ``stop()`` when the call ends.
///
/// Work: every ptime, on absolute monotonic deadlines, the engine's worker ticks the session:
/// it reads the RTP socket (recvmmsg batches; arrival times are the kernel's stamps, so reading
/// once per ptime loses no timing, but events such as DTMF and latching are reported up to a
/// ptime after their packet), unprotects SRTP, latches the peer's address (symmetric RTP, RFC
/// 4961), feeds the jitter buffer and the DTMF receiver, then: one frame encoded from the source (or due DTMF events sent), one frame decoded from
/// the jitter buffer (PLC or Opus FEC for a missing one) into the sink, and RTCP SR/RR every
/// ``MediaSessionConfiguration/rtcpInterval``. The session's state sits behind one lock held
/// for a packet's worth of work; no actor hop, no thread per session, no allocation growth:
/// the jitter buffer and the DTMF queue are bounded. The engine keeps the session alive once
/// media was applied: call ``stop()`` when the call ends.
public final class MediaSession: Sendable {
    /// The configuration given at creation.
    public let configuration: MediaSessionConfiguration
    /// The local RTP port (even); RTCP is on `localPort + 1` unless rtcp-mux was negotiated.
    public let localPort: UInt16
    /// Our SDES keys, one per configured profile, fixed for the session (so re-offers do not re-key).
    public let localKeys: [SRTPKey]

    private let rtp: MediaSocket
    private let rtcp: MediaSocket
    private let state: Mutex<SessionState>
    private let running = Atomic<Bool>(true)
    /// The worker running the session and the session's identifier there, once started.
    private let attachment = Mutex<(worker: MediaWorker, id: UInt64)?>(nil)
    /// Held across a tick or a read and the delivery of its events, so that a session's events
    /// come one at a time and in order even when a helping worker runs a late tick while the
    /// session's own worker reads its RTCP port.
    private let work = Mutex<Void>(())
    private let events: @Sendable (MediaSessionEvent) -> Void
    private let origin: MonotonicClock.Instant

    /// Binds the sockets and prepares the audio ends; no media flows until ``apply(_:)``.
    /// - Parameters:
    ///   - configuration: address, port range, codecs, SRTP policy.
    ///   - input: what to send.
    ///   - output: where received audio goes.
    ///   - events: called on an engine worker (the session's own, or one running its late
    ///     tick) with DTMF, latching and quality events, one at a time and in order; it must
    ///     return quickly.
    public init(
        configuration: MediaSessionConfiguration = MediaSessionConfiguration(), input: MediaAudioInput = .silence,
        output: MediaAudioOutput = .discard, events: @escaping @Sendable (MediaSessionEvent) -> Void = { _ in }
    ) throws(MediaSessionError) {
        self.configuration = configuration
        self.events = events
        origin = MonotonicClock.now
        // An even port pair from a random starting point of the range.
        let low = configuration.portRange.lowerBound &+ (configuration.portRange.lowerBound & 1)
        let high = configuration.portRange.upperBound
        guard low < high else { throw .noFreePort(configuration.portRange) }
        let pairs = Int(high - low) / 2
        guard pairs > 0 else { throw .noFreePort(configuration.portRange) }
        let first = Int.random(in: 0..<pairs)
        var bound: (MediaSocket, MediaSocket)?
        for i in 0..<min(pairs, 200) {
            let port = low + UInt16(((first + i) % pairs) * 2)
            guard let r = try MediaSocket.bind(ip: configuration.localAddress, port: port) else { continue }
            guard let c = try MediaSocket.bind(ip: configuration.localAddress, port: port + 1) else {
                r.close()
                continue
            }
            bound = (r, c)
            break
        }
        guard let (r, c) = bound else { throw .noFreePort(configuration.portRange) }
        rtp = r
        rtcp = c
        localPort = r.port
        localKeys = configuration.srtpProfiles.filter(\.isAvailable).map { profile in
            let key = SRTPMasterKey.random(for: profile)
            return SRTPKey(suite: profile.suite, keySaltBytes: key.key + key.salt)
        }
        let source: any AudioSource
        do throws(MediaSessionError) {
            switch input {
            case .silence: source = SilenceSource(sampleRate: 8000)
            case .tone(let f, let a): source = ToneGenerator(frequency: f, amplitude: a, sampleRate: 48000)
            case .wav(let path, let loops):
                do throws(WAVError) {
                    let file = try WAVFile(path: path)
                    source = try SamplesSource(file, sampleRate: file.sampleRate, loops: loops)
                } catch { throw .wav(error) }
            case .source(let s): source = s
            case .echo: source = SilenceSource(sampleRate: 8000)
            }
        } catch {
            r.close()
            c.close()
            throw error
        }
        let sink: Sink
        switch output {
        case .discard: sink = .discard
        case .callback(let rate, let f): sink = .callback(rate, f)
        case .wav(let path, let rate):
            do throws(WAVError) {
                sink = .wav(try WAVStreamWriter(path: path, sampleRate: rate))
            } catch {
                r.close()
                c.close()
                throw .wav(error)
            }
        }
        var initial = SessionState(source: source, sink: sink, ssrcSeed: UInt32.random(in: .min ... .max))
        initial.monitor = QualityMonitor(thresholds: configuration.qualityThresholds)
        if case .echo = input { initial.echo = true }
        state = Mutex(initial)
    }

    /// The audio stream's capabilities for `OfferAnswer`: our port, codecs, ptime, rtcp-mux and
    /// the SRTP policy with this session's keys.
    public func streamCapabilities(direction: MediaDirection = .sendrecv) -> StreamCapabilities {
        StreamCapabilities(
            mediaType: .audio, port: localPort, codecs: configuration.codecs, ptime: configuration.ptime,
            rtcpMux: configuration.rtcpMux,
            srtp: SRTPCapabilities(policy: configuration.srtpPolicy, keys: configuration.srtpPolicy == .off ? [] : localKeys),
            direction: direction)
    }

    /// Starts or updates the media with the outcome of an offer/answer exchange.
    /// - Throws: ``MediaSessionError`` when the codec or the SRTP keys cannot be used; the
    ///   previous settings then stay in force.
    public func apply(_ media: NegotiatedMedia) throws(MediaSessionError) {
        guard running.load(ordering: .sequentiallyConsistent) else { throw .notStarted }
        let ptimeMS = max(10, min(120, Int((media.ptime ?? Double(configuration.ptime)).rounded())))
        let ptime = Duration.milliseconds(ptimeMS)
        // Codec objects and SRTP are built before taking the lock.
        let send = try CodecFactory.encoder(for: media.sendCodec, ptimeMS: ptimeMS, opusComplexity: configuration.opusComplexity,
                                              opusBitrate: configuration.opusBitrate)
        guard let remote = try? SocketAddress(ip: media.remoteAddress, port: media.remoteRTPPort) else {
            throw .invalidAddress(media.remoteAddress)
        }
        let remoteRTCP = media.rtcpMux ? remote : ((try? SocketAddress(ip: media.remoteRTCPAddress, port: media.remoteRTCPPort)) ?? remote.withPort(remote.port &+ 1))
        let previous = state.withLock { $0.negotiated }
        var srtp: SRTPContext? = state.withLock { $0.srtp }
        if let negotiated = media.srtp {
            let local = CryptoAttribute(tag: negotiated.tag, suite: negotiated.suite, keyParameters: negotiated.localKeys)
            let remoteCrypto = CryptoAttribute(tag: negotiated.tag, suite: negotiated.suite, keyParameters: negotiated.remoteKeys)
            do throws(SRTPError) {
                if let context = srtp, let old = previous?.srtp {
                    try context.rekey(
                        local: local, remote: remoteCrypto,
                        previousLocal: CryptoAttribute(tag: old.tag, suite: old.suite, keyParameters: old.localKeys),
                        previousRemote: CryptoAttribute(tag: old.tag, suite: old.suite, keyParameters: old.remoteKeys))
                } else {
                    srtp = try SRTPContext(local: local, remote: remoteCrypto)
                }
            } catch { throw .srtp(error) }
        } else {
            srtp = nil
        }
        let now = MonotonicClock.now - origin
        let startThreads = state.withLock { s -> Bool in
            let first = s.negotiated == nil
            s.configure(media: media, encoder: send, ptime: ptime, remote: remote, remoteRTCP: remoteRTCP, srtp: srtp,
                        configuration: configuration, now: now)
            return first
        }
        if startThreads { try start() }
        configuration.logger.debug("media \(startThreads ? "started" : "updated"): \(media.sendCodec.name)/\(media.sendCodec.clockRate) to \(remote)\(srtp == nil ? "" : " (SRTP)")",
                                   metadata: ["media.local_port": "\(localPort)"])
    }

    /// Mutes (sends silence, keeping the packet flow) or unmutes.
    public func setMuted(_ muted: Bool) {
        state.withLock { $0.muted = muted }
    }

    /// Replaces what is sent (tone, file, silence) without interrupting the stream.
    public func setInput(_ source: any AudioSource) {
        state.withLock { $0.setSource(source) }
    }

    /// Sends digits as RFC 4733 events (`0-9 * # A-D`, `w`/`W`/`,` pause 500 ms, `!` flash);
    /// audio is paused while they are sent.
    /// - Throws: ``MediaSessionError/dtmfUnavailable(_:)`` without a negotiated telephone-event
    ///   or while not sending; ``MediaSessionError/dtmf(_:)`` for invalid digits.
    public func sendDigits(_ digits: String) throws(MediaSessionError) {
        let now = MonotonicClock.now - origin
        try state.withLock { s throws(MediaSessionError) in try s.queueDigits(digits, now: now) }
    }

    /// The counters now.
    public func stats() -> MediaSessionStatistics {
        state.withLock { $0.statistics() }
    }

    /// The digits received so far (ended events, in order).
    public var receivedDigits: String { state.withLock { $0.digits } }

    /// Stops the media, sends an RTCP BYE, closes the sockets and the recording. Idempotent.
    /// When it returns, no more of the session's events will be delivered. Called from an event
    /// callback (the session's own or another's), it does not wait: the sockets close a moment
    /// later, when the tick or read running the callback ends.
    public func stop() {
        guard running.exchange(false, ordering: .sequentiallyConsistent) else { return }
        let now = MonotonicClock.now - origin
        let wall = WallTime.now()
        // Ticks and receives check `running` under the lock: none runs after this one.
        let bye = state.withLock { s -> ([UInt8], SocketAddress, Bool)? in
            defer { s.closeSink() }
            return s.byePacket(now: now, wallClock: wall)
        }
        if let (bytes, destination, mux) = bye {
            (mux ? rtp : rtcp).send(bytes, to: destination)
        }
        if configuration.logger.logLevel <= .debug {
            configuration.logger.debug("media stopped: \(stats())", metadata: ["media.local_port": "\(localPort)"])
        }
        if let (worker, id) = attachment.withLock({ $0 }) {
            worker.detach(id, closing: [rtp.fd, rtcp.fd])
        } else {
            rtp.close()
            rtcp.close()
        }
    }

    // MARK: the engine's side

    var isRunning: Bool { running.load(ordering: .relaxed) }

    var socketDescriptors: (rtp: Int32, rtcp: Int32) { (rtp.fd, rtcp.fd) }

    private func start() throws(MediaSessionError) {
        // Datagrams queued before the media was negotiated (early media while the answer was on
        // its way) are stale: read in a burst they would distort the jitter estimate.
        var scratch = [UInt8](repeating: 0, count: 2048)
        for fd in [rtp.fd, rtcp.fd] {
            for _ in 0..<1024 {
                let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if n < 0 { break }
            }
        }
        let worker = try configuration.engine.worker()
        // Attached under the lock that stop() reads it with: a stop() racing this either sees
        // the attachment, or comes first and the worker then drops the stopped session.
        attachment.withLock { $0 = (worker, worker.attach(self)) }
    }

    /// Whether the kernel stamps this session's RTP datagrams with their arrival time; when it
    /// does not, the engine reads the RTP socket as datagrams come (epoll) instead of at the tick.
    var rtpStamped: Bool { rtp.stamped }

    /// Reads what is queued on one socket: at most `batches` recvmmsg batches of 8, so one busy
    /// session does not hold up the others (what is left waits for the next tick or round; a
    /// flood beyond that fills the socket's buffer and the kernel drops the excess). Returns
    /// the number of datagrams read.
    func receive(onRTCPSocket: Bool, scratch: ReceiveScratch, batches: Int = 2) -> Int {
        work.withLock { _ in receiveLocked(onRTCPSocket: onRTCPSocket, scratch: scratch, batches: batches) }
    }

    private func receiveLocked(onRTCPSocket: Bool, scratch: ReceiveScratch, batches: Int) -> Int {
        let fd = onRTCPSocket ? rtcp.fd : rtp.fd
        let slot = ReceiveScratch.slot
        let batch = ReceiveScratch.batch
        var total = 0
        for _ in 0..<max(1, batches) {
            guard running.load(ordering: .relaxed) else { break }
            for i in 0..<batch { scratch.lengths[i] = socklen_t(MemoryLayout<sockaddr_storage>.size) }
            let count = scratch.buffer.withUnsafeMutableBufferPointer { b in
                cs_recv_batch_stamped(fd, b.baseAddress, slot, Int32(batch), &scratch.addresses, &scratch.lengths, &scratch.sizes,
                                      &scratch.stamps, Int32(MSG_DONTWAIT))
            }
            guard count > 0 else { break }
            total += Int(count)
            // Datagrams are read when the session ticks, up to a ptime after they came: their
            // arrival is the kernel's stamp (wall clock), carried over to the monotonic clock
            // (never in the future, never more than a second back). A step of the wall clock
            // (the offset between the clocks moved by over 1 ms since the worker's last batch)
            // makes this batch's stamps meaningless: it counts as arriving now.
            let monotonic = MonotonicClock.now
            let now = monotonic - origin
            let wall = WallTime.now()
            let offset = wall - monotonic.sinceOrigin
            let stepped = scratch.clockOffset.map { $0 - offset > .milliseconds(1) || offset - $0 > .milliseconds(1) } ?? false
            scratch.clockOffset = offset
            for i in 0..<Int(count) {
                guard let source = SocketAddress(storage: scratch.addresses[i], length: scratch.lengths[i]) else { continue }
                let stamp = scratch.stamps[i]
                let age = stamp > 0 && !stepped ? min(max(.zero, wall - .nanoseconds(stamp)), .seconds(1)) : .zero
                let datagram = Array(scratch.buffer[(i * slot)..<(i * slot + min(scratch.sizes[i], slot))])
                handle(datagram, from: source, onRTCPPort: onRTCPSocket, arrival: now - age, wallArrival: wall - age)
            }
            if count < batch { break }
        }
        return total
    }

    private func handle(_ datagram: consuming [UInt8], from source: SocketAddress, onRTCPPort: Bool, arrival: Duration, wallArrival: Duration) {
        // Moved, not copied: unprotecting in place then needs no second buffer.
        let size = datagram.count
        var bytes = consume datagram
        let kind = RTPDemultiplexer.classify(bytes)
        let isRTCP = onRTCPPort || kind == .rtcp
        guard onRTCPPort || kind != .other else { return }
        let srtp = state.withLock { $0.srtp }
        if let srtp {
            do throws(SRTPError) {
                if isRTCP { try srtp.unprotectRTCP(&bytes) } else { try srtp.unprotectRTP(&bytes) }
            } catch {
                state.withLock { $0.srtpDropped += 1 }
                return
            }
        }
        var output: [MediaSessionEvent] = []
        if isRTCP {
            guard let compound = try? RTCPCompoundPacket(parsing: bytes, requireLeadingReport: false) else { return }
            // The round trip ends when the report arrived, not when the tick read it (rtcp-mux).
            output = state.withLock { s in
                running.load(ordering: .relaxed) ? s.receiveRTCP(compound, from: source, arrival: arrival, wallClock: wallArrival) : []
            }
        } else {
            guard let packet = try? RTPPacket(parsing: bytes) else {
                state.withLock { $0.refused += 1 }
                return
            }
            output = state.withLock { s in
                running.load(ordering: .relaxed) ? s.receiveRTP(packet, from: source, size: size, arrival: arrival) : []
            }
        }
        deliver(output)
    }

    /// One ptime tick at the monotonic time `now`, `lateness` nanoseconds after its deadline;
    /// returns the ptime until the next.
    func tick(at now: Duration, lateness: Int64) -> Duration {
        work.withLock { _ in tickLocked(at: now, lateness: lateness) }
    }

    private func tickLocked(at now: Duration, lateness: Int64) -> Duration {
        let elapsed = now - origin.sinceOrigin
        let wall = WallTime.now()
        var out: [(bytes: [UInt8], destination: SocketAddress, rtcp: Bool)] = []
        let (output, ptime) = state.withLock { s -> ([MediaSessionEvent], Duration) in
            guard running.load(ordering: .relaxed) else { return ([], s.ptime) }
            s.recordLateness(nanoseconds: lateness)
            return (s.tick(at: elapsed, wallClock: wall, outgoing: &out), s.ptime)
        }
        for packet in out {
            (packet.rtcp ? rtcp : rtp).send(packet.bytes, to: packet.destination)
        }
        deliver(output)
        return ptime
    }

    private func deliver(_ output: [MediaSessionEvent]) {
        for event in output where running.load(ordering: .relaxed) { events(event) }
    }
}
