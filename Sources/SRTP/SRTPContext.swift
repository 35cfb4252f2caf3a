import SDP

/// The SRTP state of one media stream negotiated with SDES (RFC 4568): an outbound session
/// keyed with our `a=crypto` key and an inbound one keyed with the peer's.
///
/// `Sendable`; the two sessions lock separately, so a send thread and a receive thread do not
/// contend.
public final class SRTPContext: Sendable {
    /// Protects what we send (our key).
    public let sender: SRTPSession
    /// Unprotects what we receive (the peer's key).
    public let receiver: SRTPSession

    /// Creates both sessions. `local` is the `a=crypto` line we sent (offer or answer), `remote`
    /// the peer's matching line (same tag and suite; RFC 4568 §7.1.3).
    public init(local: CryptoAttribute, remote: CryptoAttribute, replayWindow: Int = 1024) throws(SRTPError) {
        guard local.suite == remote.suite else { throw .unsupportedSuite(remote.suite) }
        sender = try SRTPSession(direction: .outbound, crypto: local, replayWindow: replayWindow)
        receiver = try SRTPSession(direction: .inbound, crypto: remote, replayWindow: replayWindow)
    }

    /// Applies the keys of a new offer/answer (a re-INVITE): each session is re-keyed only when
    /// its line changed, keeping rollover counters and replay windows.
    public func rekey(local: CryptoAttribute, remote: CryptoAttribute, previousLocal: CryptoAttribute? = nil, previousRemote: CryptoAttribute? = nil) throws(SRTPError) {
        guard local.suite == remote.suite else { throw .unsupportedSuite(remote.suite) }
        if previousLocal.map({ $0.keyParameters != local.keyParameters || $0.suite != local.suite }) ?? true {
            try sender.rekey(crypto: local)
        }
        if previousRemote.map({ $0.keyParameters != remote.keyParameters || $0.suite != remote.suite }) ?? true {
            try receiver.rekey(crypto: remote)
        }
    }

    /// Protects an RTP packet we send.
    public func protectRTP(_ packet: inout [UInt8]) throws(SRTPError) { try sender.protectRTP(&packet) }
    /// Protects an RTCP packet we send.
    public func protectRTCP(_ packet: inout [UInt8]) throws(SRTPError) { try sender.protectRTCP(&packet) }
    /// Unprotects an SRTP packet received; drop it on error.
    public func unprotectRTP(_ packet: inout [UInt8]) throws(SRTPError) { try receiver.unprotectRTP(&packet) }
    /// Unprotects an SRTCP packet received; drop it on error.
    public func unprotectRTCP(_ packet: inout [UInt8]) throws(SRTPError) { try receiver.unprotectRTCP(&packet) }
}

/// SDES offer/answer for `a=crypto` (RFC 4568 §7).
public enum SDES {
    /// An offer: one `a=crypto` per profile, tags 1, 2, … in the order given, each with a fresh
    /// key from the CSPRNG (RFC 4568 §7.1.1). Profiles libsrtp lacks here are left out.
    public static func offer(
        profiles: [SRTPProfile] = SRTPProfile.available, lifetime: CryptoAttribute.Lifetime? = nil
    ) -> [CryptoAttribute] {
        profiles.filter(\.isAvailable).enumerated().map { index, profile in
            CryptoAttribute(tag: UInt32(index + 1), profile: profile, keys: [.random(for: profile, lifetime: lifetime)])
        }
    }

    /// The answer: the first offered line (in the offer's order of preference) whose suite is in
    /// `profiles` and whose keys and session parameters are usable; we reply with its tag and
    /// suite and our own fresh key (RFC 4568 §7.1.2). Returns our line and the chosen offered one.
    public static func answer(
        to offers: [CryptoAttribute], profiles: [SRTPProfile] = SRTPProfile.available
    ) throws(SRTPError) -> (local: CryptoAttribute, remote: CryptoAttribute) {
        for offer in offers {
            guard let profile = SRTPProfile(suite: offer.suite), profiles.contains(profile),
                (try? offer.srtpParameters()) != nil
            else { continue }
            let local = CryptoAttribute(tag: offer.tag, profile: profile, keys: [.random(for: profile)])
            return (local, offer)
        }
        throw .noAcceptableCrypto
    }

    /// The offerer's side of the answer: our offered line with the answer's tag (and the same
    /// suite), and the answer. Throws when the answer matches none of our lines.
    public static func accept(
        answer: CryptoAttribute, offered: [CryptoAttribute]
    ) throws(SRTPError) -> (local: CryptoAttribute, remote: CryptoAttribute) {
        guard let ours = offered.first(where: { $0.tag == answer.tag }), ours.suite == answer.suite else {
            throw .noAcceptableCrypto
        }
        _ = try answer.srtpParameters()
        return (ours, answer)
    }
}
