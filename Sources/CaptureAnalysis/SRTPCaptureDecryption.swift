#if canImport(SRTP)
import SDP
import SRTP
import PacketCapture

/// The SRTP side of ``RTPStreamAnalyzer``: which key protects which sender's packets, and one
/// inbound libsrtp session per (stream, candidate key). Made only when a capture's SDP
/// announces secure RTP or keys are given, so plain captures pay nothing per packet.
struct SRTPCaptureDecryption: Sendable {
    enum Outcome {
        /// Not an SRTP flow: analyse the datagram as it is.
        case plain
        /// Decrypted and authenticated: the clear packet is in ``scratch``.
        case decrypted
        /// Not decrypted (no key, authentication failed, or replayed): header only.
        case opaque
        /// Kept until a key is announced (see ``held``): analyse nothing now.
        case held
    }

    /// What an RTP packet's unprotection counts in its stream's status (``SRTPStreamStatus``),
    /// once the packet counts in a stream (a packet the RTP heuristic tries and drops does not).
    enum Tally: UInt8, Sendable {
        case none, decrypted, failed, replayed
    }

    /// Packets of an SRTP stream held before any key for it is known (an answerer's media
    /// often precedes its answer in the capture), per stream at most this many.
    static let maximumHeld = 512
    /// And at most this many in all (beyond, packets without a key count from their header).
    static let maximumHeldTotal = 65536

    /// One sender's packets to one receiver (an RTP stream, or an RTCP flow).
    struct Decryptor: Sendable {
        var candidates: [(crypto: CryptoAttribute, source: SRTPStreamStatus.KeySource, session: SRTPSession)] = []
        var chosen: Int?
        var decrypted = 0
        var failures = 0
        var replayed = 0
        /// The announcements seen when the candidates were chosen.
        var version = 0
        /// Datagrams (their payload copied) waiting for a key.
        var held: [CapturedDatagram] = []

        var status: SRTPStreamStatus {
            let c = chosen.map { candidates[$0] } ?? candidates.first
            return SRTPStreamStatus(suite: c.map { $0.crypto.suite.rawValue }, keySource: c?.source, decrypted: decrypted,
                                    authenticationFailures: failures, replayed: replayed)
        }
    }

    let options: SRTPCaptureOptions
    /// The `a=crypto` keys each sender announced, by its RTP and RTCP addresses.
    private var sdpKeys: [CaptureEndpoint: [CryptoAttribute]] = [:]
    /// RTP and RTCP addresses announced on an SRTP profile or with keys.
    private var secure: Set<CaptureEndpoint> = []
    /// Announced RTCP addresses → their stream's RTP address (a `--srtp-key` names the latter).
    private var rtcpOf: [CaptureEndpoint: CaptureEndpoint] = [:]
    private var decryptors: [Decryptor] = []
    /// Counts announcements: a stream without a key looks for one again after each.
    private var version = 0
    /// Packets held now, all streams together.
    private var heldTotal = 0
    /// RTP stream → decryptor position, -1 for a plain stream.
    private var rtpStreams: [RTPStreamAnalyzer.StreamKey: Int] = [:]
    /// RTCP (source, destination) → decryptor position, -1 for plain RTCP.
    private var rtcpFlows: [RTPStreamAnalyzer.StreamKey: Int] = [:]
    /// The packet being decrypted (reused).
    private(set) var scratch: [UInt8] = []
    /// What the last RTP packet unprotected counts, for ``tally(_:_:)``.
    private(set) var lastTally: Tally = .none
    /// SRTCP packets decrypted, and those dropped (no key, failed authentication, replayed).
    private(set) var rtcpDecrypted = 0
    private(set) var rtcpDropped = 0

    init(options: SRTPCaptureOptions) {
        self.options = options
    }

    /// Notes a stream an SDP announced: on an SRTP profile or with `a=crypto` keys, its RTP
    /// and RTCP addresses are SRTP senders and receivers, and its keys protect what it sends.
    mutating func announce(_ media: CaptureAnalyzer.MediaStream, rtp: CaptureEndpoint, rtcp: CaptureEndpoint?) {
        guard media.secure || !media.crypto.isEmpty else { return }
        version += 1
        if let rtcp { rtcpOf[rtcp] = rtp }
        for e in [rtp] + (rtcp.map { [$0] } ?? []) {
            secure.insert(e)
            if options.useSDPKeys && !media.crypto.isEmpty { sdpKeys[e] = media.crypto }
        }
        // A later offer/answer may re-key: streams take the keys known at their first packet.
    }

    /// The keys to try for a sender's packets: a command-line key for that sender, else its
    /// SDP keys, else (when the flow is SRTP) the command-line keys without a sender. `nil` when
    /// the flow is not SRTP.
    /// For RTCP, a key given for the sender's RTP address counts for its RTCP address (the one
    /// its SDP announced, else the next port).
    private func decryptor(source: CaptureEndpoint, destination: CaptureEndpoint, rtcp: Bool = false) -> Decryptor? {
        let rtpSource = rtcp ? rtcpOf[source] ?? CaptureEndpoint(address: source.address, port: source.port &- 1) : source
        var list: [(CryptoAttribute, SRTPStreamStatus.KeySource)] = options.keys.filter { $0.source == source || $0.source == rtpSource }
            .map { ($0.crypto, .commandLine) }
        if list.isEmpty, let keys = sdpKeys[source] { list = keys.map { ($0, .sdp) } }
        let isSRTP = secure.contains(source) || secure.contains(destination)
        if list.isEmpty, isSRTP { list = options.keys.filter { $0.source == nil }.map { ($0.crypto, .commandLine) } }
        guard isSRTP || !list.isEmpty else { return nil }
        var d = Decryptor(version: version)
        for (crypto, origin) in list {
            // A key libsrtp refuses (unknown suite, bad length) cannot decrypt anything.
            guard let session = try? SRTPSession(direction: .inbound, crypto: crypto, replayWindow: 16384) else { continue }
            d.candidates.append((crypto, origin, session))
        }
        return d
    }

    /// For a stream of SRTP without a key, looks for one again when SDP was announced since;
    /// true when it now has one and holds packets to be analysed first (``takeHeld(_:)``).
    mutating func refresh(_ key: RTPStreamAnalyzer.StreamKey) -> Bool {
        guard let i = rtpStreams[key], i >= 0 else { return false }
        return refresh(decryptor: i, source: key.source, destination: key.destination) && !decryptors[i].held.isEmpty
    }

    private mutating func refresh(decryptor i: Int, source: CaptureEndpoint, destination: CaptureEndpoint, rtcp: Bool = false) -> Bool {
        guard decryptors[i].candidates.isEmpty, decryptors[i].version != version else { return false }
        decryptors[i].version = version
        decryptors[i].candidates = decryptor(source: source, destination: destination, rtcp: rtcp)?.candidates ?? []
        return !decryptors[i].candidates.isEmpty
    }

    /// The packets held for a stream (in capture order), no longer held.
    mutating func takeHeld(_ key: RTPStreamAnalyzer.StreamKey) -> [CapturedDatagram] {
        guard let i = rtpStreams[key], i >= 0 else { return [] }
        defer {
            heldTotal -= decryptors[i].held.count
            decryptors[i].held = []
        }
        return decryptors[i].held
    }

    /// At the end: every packet still held (no key was ever announced), by stream.
    mutating func takeAllHeld() -> [CapturedDatagram] {
        var out: [CapturedDatagram] = []
        for i in decryptors.indices where !decryptors[i].held.isEmpty {
            out += decryptors[i].held
            decryptors[i].held = []
        }
        heldTotal = 0
        return out
    }

    /// Unprotects an RTP datagram's payload of the stream `key` into ``scratch``; a packet of
    /// an SRTP stream without a key yet is held (copied) when `hold` is set.
    mutating func unprotectRTP(_ d: CapturedDatagram, key: RTPStreamAnalyzer.StreamKey, hold: Bool = true) -> Outcome {
        let payload = d.payload
        guard let i = decryptorIndex(key, in: \.rtpStreams, rtcp: false) else { return .plain }
        if hold, self.hold(d, decryptor: i) { return .held }
        return unprotect(payload, decryptor: i, rtcp: false)
    }

    /// Holds (copies) `d` for decryptor `i` while it has no key, within the limits; false when
    /// it has a key or the limits are reached.
    private mutating func hold(_ d: CapturedDatagram, decryptor i: Int) -> Bool {
        guard decryptors[i].candidates.isEmpty, decryptors[i].held.count < Self.maximumHeld, heldTotal < Self.maximumHeldTotal else { return false }
        var copy = d
        copy.payload = Array(d.payload)[...]
        decryptors[i].held.append(copy)
        heldTotal += 1
        return true
    }

    /// Counts a packet's outcome in the status of its stream.
    mutating func tally(_ key: RTPStreamAnalyzer.StreamKey, _ t: Tally) {
        guard t != .none, let i = rtpStreams[key], i >= 0 else { return }
        switch t {
        case .decrypted: decryptors[i].decrypted += 1
        case .failed: decryptors[i].failures += 1
        case .replayed: decryptors[i].replayed += 1
        case .none: break
        }
    }

    /// Unprotects an RTCP datagram's payload into ``scratch``.
    ///
    /// SRTCP of a flow without a key yet (sent before the SDP that carries it reached the
    /// capture: an answerer's early RTCP, say) is held (copied) when `hold` is set, like RTP,
    /// and taken back by ``takeReadyRTCP(source:destination:)`` once the key is known.
    mutating func unprotectRTCP(_ d: CapturedDatagram, hold: Bool = true) -> Outcome {
        let key = RTPStreamAnalyzer.StreamKey(source: d.source, destination: d.destination, ssrc: 0)
        guard let i = decryptorIndex(key, in: \.rtcpFlows, rtcp: true) else { return .plain }
        _ = refresh(decryptor: i, source: d.source, destination: d.destination, rtcp: true)
        if hold, self.hold(d, decryptor: i) { return .held }
        let outcome = unprotect(d.payload, decryptor: i, rtcp: true)
        if outcome == .decrypted { rtcpDecrypted += 1 } else { rtcpDropped += 1 }
        return outcome
    }

    /// The SRTCP held for the flow from `source` to `destination` (in capture order), once a key
    /// for it was announced since; empty while there is none.
    mutating func takeReadyRTCP(source: CaptureEndpoint, destination: CaptureEndpoint) -> [CapturedDatagram] {
        let key = RTPStreamAnalyzer.StreamKey(source: source, destination: destination, ssrc: 0)
        guard let i = rtcpFlows[key], i >= 0, !decryptors[i].held.isEmpty else { return [] }
        _ = refresh(decryptor: i, source: source, destination: destination, rtcp: true)
        guard !decryptors[i].candidates.isEmpty else { return [] }
        defer {
            heldTotal -= decryptors[i].held.count
            decryptors[i].held = []
        }
        return decryptors[i].held
    }

    /// The decryptor of the RTP stream or RTCP flow `key`, as `table` records it: made when the
    /// stream is first seen, nil when no key can exist for it (remembered as -1).
    private mutating func decryptorIndex(_ key: RTPStreamAnalyzer.StreamKey, in table: WritableKeyPath<Self, [RTPStreamAnalyzer.StreamKey: Int]>,
                                         rtcp: Bool) -> Int? {
        if let known = self[keyPath: table][key] { return known >= 0 ? known : nil }
        var i = -1
        if let d = decryptor(source: key.source, destination: key.destination, rtcp: rtcp) {
            i = decryptors.count
            decryptors.append(d)
        }
        self[keyPath: table][key] = i
        return i >= 0 ? i : nil
    }

    /// Tries the key that worked before, then the others (an offerer's several `a=crypto`
    /// lines: the answer chose one); a session whose tag does not verify keeps no state.
    private mutating func unprotect(_ payload: ArraySlice<UInt8>, decryptor i: Int, rtcp: Bool) -> Outcome {
        let count = decryptors[i].candidates.count
        lastTally = .none
        guard count > 0 else { return .opaque }
        let first = decryptors[i].chosen ?? 0
        for step in 0..<count {
            let k = (first + step) % count
            scratch.removeAll(keepingCapacity: true)
            scratch.append(contentsOf: payload)
            let session = decryptors[i].candidates[k].session
            do throws(SRTPError) {
                if rtcp { try session.unprotectRTCP(&scratch) } else { try session.unprotectRTP(&scratch) }
                decryptors[i].chosen = k
                // RTP counts when its packet counts in a stream (``tally(_:_:)``); RTCP at once.
                if rtcp { decryptors[i].decrypted += 1 } else { lastTally = .decrypted }
                return .decrypted
            } catch .replayed {
                if rtcp { decryptors[i].replayed += 1 } else { lastTally = .replayed }
                return .opaque
            } catch {
                continue
            }
        }
        if rtcp { decryptors[i].failures += 1 } else { lastTally = .failed }
        return .opaque
    }

    /// The status of an RTP stream, `nil` when it was plain RTP.
    func status(_ key: RTPStreamAnalyzer.StreamKey) -> SRTPStreamStatus? {
        guard let i = rtpStreams[key], i >= 0 else { return nil }
        return decryptors[i].status
    }
}

extension SRTPCaptureKey {
    /// Why the suite or key cannot be used (unknown or unavailable suite, wrong length, an
    /// unsupported parameter); `nil` when it can.
    public var problem: String? {
        do throws(SRTPError) {
            _ = try crypto.srtpParameters()
            return nil
        } catch {
            return error.description
        }
    }
}
#endif
