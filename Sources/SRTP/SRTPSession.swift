import CSRTP
import SDP
import Synchronization

/// What an SRTP session has processed and dropped.
public struct SRTPStatistics: Hashable, Sendable {
    /// Counters for one kind of packet (RTP or RTCP).
    public struct Counters: Hashable, Sendable {
        /// Packets protected or unprotected successfully.
        public var packets: UInt64 = 0
        /// Their bytes before protection / after unprotection.
        public var bytes: UInt64 = 0
        /// Dropped: the authentication tag did not verify.
        public var authenticationFailures: UInt64 = 0
        /// Dropped: replayed or too old for the replay window.
        public var replayed: UInt64 = 0
        /// Dropped: too short, not version 2, or an unknown MKI.
        public var malformed: UInt64 = 0
        /// Dropped for another reason (a libsrtp failure, an exhausted key).
        public var otherFailures: UInt64 = 0

        /// Everything dropped.
        public var dropped: UInt64 { authenticationFailures + replayed + malformed + otherFailures }
    }

    /// SRTP.
    public var rtp = Counters()
    /// SRTCP.
    public var rtcp = Counters()
}

/// One libsrtp session for one direction of one media stream: an outbound session protects
/// the packets we send with our master key(s), an inbound one unprotects the peer's with
/// theirs. Every SSRC in that direction shares the keys (libsrtp's `ssrc_any_*` templates);
/// each SSRC gets its own rollover counter and replay window.
///
/// `Sendable`: calls are serialized by an internal lock, so the media thread can protect while
/// the signalling thread re-keys.
///
/// Buffers: protecting adds up to ``maximumTrailerLength`` bytes after the packet. The array
/// methods grow the array; the buffer methods need that much room after `length`.
public final class SRTPSession: Sendable {
    /// Which way packets go.
    public enum Direction: Hashable, Sendable {
        /// We protect (send).
        case outbound
        /// We unprotect (receive).
        case inbound
    }

    /// The most bytes protection may add: tag, MKI, and the SRTCP index (libsrtp's
    /// `SRTP_MAX_TRAILER_LEN` + 4).
    public static let maximumTrailerLength = 148

    /// The direction.
    public let direction: Direction

    private struct State: Sendable {
        var profile: SRTPProfile
        var keys: [SRTPMasterKey]
        var replayWindow: Int
        var keyUse: [UInt64]
        var statistics = SRTPStatistics()
    }

    /// The libsrtp session; only touched while `state` is locked.
    private nonisolated(unsafe) let session: OpaquePointer
    private let state: Mutex<State>

    /// Creates a session. `keys` holds one key, or up to 16 with MKIs (the packet's MKI then
    /// selects the key on receipt; ``protectRTP(_:mkiIndex:)`` chooses it on sending).
    /// `replayWindow`: 64 to 32768 packets (libsrtp's range); 1024 by default.
    public init(direction: Direction, profile: SRTPProfile, keys: [SRTPMasterKey], replayWindow: Int = 1024) throws(SRTPError) {
        if let error = SRTPLibrary.initialize() { throw error }
        try Self.check(profile: profile, keys: keys, replayWindow: replayWindow)
        var created: srtp_t? = nil
        let status = Self.withKeySpecs(keys) { specs, count in
            csrtp_create(&created, profile.libraryProfile, direction == .outbound ? 1 : 0, specs, count, UInt(replayWindow))
        }
        guard status == srtp_err_status_ok, let created else { throw Self.error(status, "srtp_create") }
        self.session = created
        self.direction = direction
        self.state = Mutex(State(profile: profile, keys: keys, replayWindow: replayWindow, keyUse: Array(repeating: 0, count: keys.count)))
    }

    /// Creates a session from an `a=crypto` line: ours for `.outbound`, the peer's for `.inbound`.
    public convenience init(direction: Direction, crypto: CryptoAttribute, replayWindow: Int = 1024) throws(SRTPError) {
        let parameters = try crypto.srtpParameters()
        try self.init(direction: direction, profile: parameters.profile, keys: parameters.keys, replayWindow: parameters.replayWindow ?? replayWindow)
    }

    deinit { srtp_dealloc(session) }

    /// The profile in use.
    public var profile: SRTPProfile { state.withLock { $0.profile } }

    /// What was processed and dropped so far.
    public var statistics: SRTPStatistics { state.withLock { $0.statistics } }

    // MARK: Re-keying

    /// Replaces the master key(s) (and possibly the profile) without losing any stream's
    /// rollover counter or highest index (libsrtp `srtp_update`): what a re-INVITE with new
    /// `a=crypto` keys needs (RFC 4568 §7.1.4) when the SSRCs stay. The replay window's bitmap
    /// restarts at the re-key; packets sent before it carry the old key and fail authentication.
    public func rekey(profile: SRTPProfile? = nil, keys: [SRTPMasterKey]) throws(SRTPError) {
        try state.withLock { (s: inout State) throws(SRTPError) in
            let newProfile = profile ?? s.profile
            try Self.check(profile: newProfile, keys: keys, replayWindow: s.replayWindow)
            let status = Self.withKeySpecs(keys) { specs, count in
                csrtp_update(session, newProfile.libraryProfile, direction == .outbound ? 1 : 0, specs, count, UInt(s.replayWindow))
            }
            guard status == srtp_err_status_ok else { throw Self.error(status, "srtp_update") }
            s.profile = newProfile
            s.keys = keys
            s.keyUse = Array(repeating: 0, count: keys.count)
        }
    }

    /// Re-keys from an `a=crypto` line (see ``rekey(profile:keys:)``).
    public func rekey(crypto: CryptoAttribute) throws(SRTPError) {
        let parameters = try crypto.srtpParameters()
        try rekey(profile: parameters.profile, keys: parameters.keys)
    }

    /// The rollover counter of the stream with `ssrc`, nil when no packet of it was processed yet.
    public func rolloverCounter(ssrc: UInt32) -> UInt32? {
        state.withLock { _ in
            var roc: UInt32 = 0
            return srtp_get_stream_roc(session, ssrc, &roc) == srtp_err_status_ok ? roc : nil
        }
    }

    /// Sets the rollover counter of an existing inbound stream (for example when joining a
    /// stream whose ROC is signalled out of band); libsrtp applies it when estimating the index
    /// of the next packet received (a ROC of 0 is ignored there). Throws when no packet of the
    /// stream was received yet.
    public func setRolloverCounter(_ roc: UInt32, ssrc: UInt32) throws(SRTPError) {
        let status = state.withLock { _ in srtp_set_stream_roc(session, ssrc, roc) }
        guard status == srtp_err_status_ok else { throw Self.error(status, "srtp_set_stream_roc") }
    }

    // MARK: Protect

    /// Protects an RTP packet in place (the array grows by the tag, and the MKI if any).
    /// `mkiIndex` picks the key when the session has several (with MKIs).
    public func protectRTP(_ packet: inout [UInt8], mkiIndex: Int = 0) throws(SRTPError) {
        try inPlace(&packet) { buffer, length throws(SRTPError) in try protectRTP(buffer: buffer, length: length, mkiIndex: mkiIndex) }
    }

    /// Protects the RTP packet in the first `length` bytes of `buffer`, which must have room for
    /// ``maximumTrailerLength`` more; returns the protected length.
    public func protectRTP(buffer: UnsafeMutableRawBufferPointer, length: Int, mkiIndex: Int = 0) throws(SRTPError) -> Int {
        try process(buffer: buffer, length: length, rtcp: false, protect: true, mkiIndex: mkiIndex)
    }

    /// Protects an RTCP compound packet in place (SRTCP: the E flag and index, then the tag).
    public func protectRTCP(_ packet: inout [UInt8], mkiIndex: Int = 0) throws(SRTPError) {
        try inPlace(&packet) { buffer, length throws(SRTPError) in try protectRTCP(buffer: buffer, length: length, mkiIndex: mkiIndex) }
    }

    /// Protects the RTCP packet in the first `length` bytes of `buffer`; returns the new length.
    public func protectRTCP(buffer: UnsafeMutableRawBufferPointer, length: Int, mkiIndex: Int = 0) throws(SRTPError) -> Int {
        try process(buffer: buffer, length: length, rtcp: true, protect: true, mkiIndex: mkiIndex)
    }

    // MARK: Unprotect

    /// Verifies and decrypts an SRTP packet in place (the array shrinks to the RTP packet).
    /// On any error the packet must be dropped; the failure is counted.
    public func unprotectRTP(_ packet: inout [UInt8]) throws(SRTPError) {
        try inPlace(&packet, grow: false) { buffer, length throws(SRTPError) in try unprotectRTP(buffer: buffer, length: length) }
    }

    /// Verifies and decrypts the SRTP packet in the first `length` bytes of `buffer`; returns
    /// the RTP packet's length.
    public func unprotectRTP(buffer: UnsafeMutableRawBufferPointer, length: Int) throws(SRTPError) -> Int {
        try process(buffer: buffer, length: length, rtcp: false, protect: false, mkiIndex: 0)
    }

    /// Verifies and decrypts an SRTCP packet in place.
    public func unprotectRTCP(_ packet: inout [UInt8]) throws(SRTPError) {
        try inPlace(&packet, grow: false) { buffer, length throws(SRTPError) in try unprotectRTCP(buffer: buffer, length: length) }
    }

    /// Verifies and decrypts the SRTCP packet in the first `length` bytes of `buffer`.
    public func unprotectRTCP(buffer: UnsafeMutableRawBufferPointer, length: Int) throws(SRTPError) -> Int {
        try process(buffer: buffer, length: length, rtcp: true, protect: false, mkiIndex: 0)
    }

    // MARK: Internals

    private func inPlace(
        _ packet: inout [UInt8], grow: Bool = true, _ body: (UnsafeMutableRawBufferPointer, Int) throws(SRTPError) -> Int
    ) throws(SRTPError) {
        let length = packet.count
        if grow { packet.append(contentsOf: repeatElement(0, count: Self.maximumTrailerLength)) }
        var result: Result<Int, SRTPError> = .success(length)
        packet.withUnsafeMutableBytes { buffer in
            result = Result { () throws(SRTPError) in try body(buffer, length) }
        }
        switch result {
        case .success(let newLength): packet.removeSubrange(newLength...)
        case .failure(let error):
            if grow { packet.removeSubrange(length...) }
            throw error
        }
    }

    private func process(
        buffer: UnsafeMutableRawBufferPointer, length: Int, rtcp: Bool, protect: Bool, mkiIndex: Int
    ) throws(SRTPError) -> Int {
        guard (direction == .outbound) == protect else { throw .wrongDirection }
        guard length >= 0, length <= buffer.count, let base = buffer.baseAddress else {
            throw .bufferTooSmall(needed: length, available: buffer.count)
        }
        if protect, buffer.count - length < Self.maximumTrailerLength {
            throw .bufferTooSmall(needed: length + Self.maximumTrailerLength, available: buffer.count)
        }
        guard length <= 0xFFFF else { throw .malformedPacket("\(length) bytes is longer than any datagram") }
        nonisolated(unsafe) let packet = base
        return try state.withLock { (s: inout State) throws(SRTPError) -> Int in
            if let why = Self.headerProblem(UnsafeRawBufferPointer(start: packet, count: length), rtcp: rtcp) {
                Self.count(&s.statistics, rtcp: rtcp, .malformedPacket(why))
                throw .malformedPacket(why)
            }
            if !protect {
                let mki = s.keys.first?.mki.map { Int($0.length) } ?? 0
                let minimum = (rtcp ? 8 + 4 + s.profile.rtcpTagLength : 12 + s.profile.rtpTagLength) + mki
                if length < minimum {
                    let why = "\(length) bytes is shorter than header and tag (\(minimum))"
                    Self.count(&s.statistics, rtcp: rtcp, .malformedPacket(why))
                    throw .malformedPacket(why)
                }
            }
            let useMKI: UInt32 = s.keys.first?.mki != nil ? 1 : 0
            if protect {
                guard mkiIndex >= 0, mkiIndex < s.keys.count else { throw .invalidKey("no key \(mkiIndex)") }
                if s.keyUse[mkiIndex] >= s.keys[mkiIndex].packetLimit(s.profile) {
                    Self.count(&s.statistics, rtcp: rtcp, .keyLifetimeExhausted)
                    throw .keyLifetimeExhausted
                }
            }
            var len = Int32(length)
            let status: srtp_err_status_t
            switch (rtcp, protect) {
            case (false, true): status = srtp_protect_mki(session, packet, &len, useMKI, UInt32(mkiIndex))
            case (true, true): status = srtp_protect_rtcp_mki(session, packet, &len, useMKI, UInt32(mkiIndex))
            case (false, false): status = srtp_unprotect_mki(session, packet, &len, useMKI)
            case (true, false): status = srtp_unprotect_rtcp_mki(session, packet, &len, useMKI)
            }
            guard status == srtp_err_status_ok else {
                let error = Self.error(status, protect ? (rtcp ? "srtp_protect_rtcp" : "srtp_protect") : (rtcp ? "srtp_unprotect_rtcp" : "srtp_unprotect"))
                Self.count(&s.statistics, rtcp: rtcp, error)
                throw error
            }
            if protect { s.keyUse[mkiIndex] += 1 }
            let plainLength = protect ? length : Int(len)
            if rtcp {
                s.statistics.rtcp.packets += 1
                s.statistics.rtcp.bytes += UInt64(plainLength)
            } else {
                s.statistics.rtp.packets += 1
                s.statistics.rtp.bytes += UInt64(plainLength)
            }
            return Int(len)
        }
    }

    /// Checks what libsrtp reads before authenticating: RTP version 2 with its CSRCs and
    /// extension header inside the packet; RTCP version 2 with a whole first header.
    private static func headerProblem(_ p: UnsafeRawBufferPointer, rtcp: Bool) -> String? {
        if rtcp {
            guard p.count >= 8 else { return "RTCP shorter than 8 bytes" }
            guard p[0] >> 6 == 2 else { return "RTCP version \(p[0] >> 6)" }
            return nil
        }
        guard p.count >= 12 else { return "RTP shorter than 12 bytes" }
        guard p[0] >> 6 == 2 else { return "RTP version \(p[0] >> 6)" }
        var header = 12 + 4 * Int(p[0] & 0x0F)
        guard header <= p.count else { return "CSRC list beyond the packet" }
        if p[0] & 0x10 != 0 {
            guard header + 4 <= p.count else { return "extension header beyond the packet" }
            header += 4 + 4 * (Int(p[header + 2]) << 8 | Int(p[header + 3]))
            guard header <= p.count else { return "extension beyond the packet" }
        }
        return nil
    }

    private static func count(_ statistics: inout SRTPStatistics, rtcp: Bool, _ error: SRTPError) {
        func bump(_ c: inout SRTPStatistics.Counters) {
            switch error {
            case .authenticationFailed: c.authenticationFailures += 1
            case .replayed: c.replayed += 1
            case .malformedPacket, .unknownMKI: c.malformed += 1
            default: c.otherFailures += 1
            }
        }
        if rtcp { bump(&statistics.rtcp) } else { bump(&statistics.rtp) }
    }

    private static func error(_ status: srtp_err_status_t, _ operation: String) -> SRTPError {
        switch status {
        case srtp_err_status_auth_fail: return .authenticationFailed
        case srtp_err_status_replay_fail, srtp_err_status_replay_old: return .replayed
        case srtp_err_status_bad_mki: return .unknownMKI
        case srtp_err_status_key_expired: return .keyLifetimeExhausted
        // What libsrtp reports for packets inconsistent with the session on receipt (an SRTCP
        // packet whose E flag disagrees with the policy, a header it cannot parse).
        case srtp_err_status_cant_check where operation.hasPrefix("srtp_unprotect"),
            srtp_err_status_parse_err where operation.hasPrefix("srtp_unprotect"),
            srtp_err_status_bad_param where operation.hasPrefix("srtp_unprotect"):
            return .malformedPacket("\(operation): srtp_err_status \(status.rawValue)")
        default: return .library(operation: operation, status: Int32(status.rawValue))
        }
    }

    private static func check(profile: SRTPProfile, keys: [SRTPMasterKey], replayWindow: Int) throws(SRTPError) {
        guard profile.isAvailable else { throw .unsupportedSuite(profile.suite) }
        guard (64...32768).contains(replayWindow) else { throw .invalidKey("replay window \(replayWindow) outside 64 to 32768") }
        guard !keys.isEmpty, keys.count <= 16 else { throw .invalidKey("\(keys.count) keys (1 to 16)") }
        for key in keys {
            guard key.key.count == profile.keyLength, key.salt.count == profile.saltLength else {
                throw .invalidKey("\(key.key.count)+\(key.salt.count) bytes of key+salt; \(profile) needs \(profile.keyLength)+\(profile.saltLength)")
            }
        }
        if keys.count > 1 || keys[0].mki != nil {
            guard keys.allSatisfy({ $0.mki != nil }) else { throw .invalidKey("every key needs an MKI when one has one") }
            let lengths = Set(keys.map { $0.mki!.length })
            guard lengths.count == 1 else { throw .invalidKey("MKIs of different lengths") }
            guard Set(keys.map { $0.mki!.value }).count == keys.count else { throw .invalidKey("repeated MKI") }
        }
    }

    /// Calls `body` with libsrtp key specs pointing into copies of the keys that live until it returns.
    private static func withKeySpecs(_ keys: [SRTPMasterKey], _ body: (UnsafePointer<csrtp_key>, UInt32) -> srtp_err_status_t) -> srtp_err_status_t {
        let material = keys.map(\.keySalt)
        let mkis = keys.map { $0.mkiBytes ?? [] }
        var specs: [csrtp_key] = []
        specs.reserveCapacity(keys.count)
        // Pointers into `material` and `mkis` stay valid while the arrays are alive and unchanged.
        func build(_ i: Int) -> srtp_err_status_t {
            if i == keys.count { return specs.withUnsafeBufferPointer { body($0.baseAddress!, UInt32(keys.count)) } }
            return material[i].withUnsafeBufferPointer { k in
                mkis[i].withUnsafeBufferPointer { m in
                    specs.append(csrtp_key(key_salt: k.baseAddress, mki: m.isEmpty ? nil : m.baseAddress, mki_size: UInt32(m.count)))
                    return build(i + 1)
                }
            }
        }
        return build(0)
    }
}
