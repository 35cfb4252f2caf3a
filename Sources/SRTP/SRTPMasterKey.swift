import SDP

/// One SRTP master key as SDES carries it (RFC 4568 §6.1): key and salt, an optional
/// lifetime and an optional MKI. ``description`` never shows the key.
public struct SRTPMasterKey: Hashable, Sendable, CustomStringConvertible {
    /// The master key.
    public var key: [UInt8]
    /// The master salt.
    public var salt: [UInt8]
    /// How many packets the key may protect; nil: the suite's maximum.
    public var lifetime: CryptoAttribute.Lifetime?
    /// The master key identifier carried in each packet, when several keys are in use.
    public var mki: CryptoAttribute.MKI?

    /// Creates a key; the lengths are checked when a session uses it.
    public init(key: [UInt8], salt: [UInt8], lifetime: CryptoAttribute.Lifetime? = nil, mki: CryptoAttribute.MKI? = nil) {
        self.key = key
        self.salt = salt
        self.lifetime = lifetime
        self.mki = mki
    }

    /// A fresh key and salt for `profile` from the system CSPRNG.
    public static func random(
        for profile: SRTPProfile, lifetime: CryptoAttribute.Lifetime? = nil, mki: CryptoAttribute.MKI? = nil
    ) -> SRTPMasterKey {
        let bytes = SecureRandom.bytes(profile.keySaltLength)
        return SRTPMasterKey(
            key: Array(bytes[0..<profile.keyLength]), salt: Array(bytes[profile.keyLength...]), lifetime: lifetime, mki: mki)
    }

    /// Reads an `inline:` key parameter for `profile`: base64 `key||salt` of the suite's
    /// length, with its lifetime and MKI.
    public init(_ parameter: CryptoAttribute.KeyParameter, profile: SRTPProfile) throws(SRTPError) {
        guard parameter.isInline else { throw .invalidKey("key method \(parameter.method) (only inline is supported)") }
        guard let bytes = parameter.keySaltBytes else { throw .invalidKey("inline key is not base64") }
        guard bytes.count == profile.keySaltLength else {
            throw .invalidKey("inline key||salt is \(bytes.count) bytes; \(profile) needs \(profile.keySaltLength)")
        }
        if let mki = parameter.mki, mki.length < 8, mki.value >> (UInt64(mki.length) * 8) != 0 {
            throw .invalidKey("MKI value \(mki.value) does not fit in \(mki.length) bytes")
        }
        if let lifetime = parameter.lifetime, lifetime.packetCount == 0 || lifetime.packetCount > profile.maximumLifetime {
            throw .invalidKey("key lifetime \(lifetime) outside 1 to 2^48 packets")
        }
        self.init(
            key: Array(bytes[0..<profile.keyLength]), salt: Array(bytes[profile.keyLength...]), lifetime: parameter.lifetime,
            mki: parameter.mki)
    }

    /// The `inline:<base64 key||salt>[|lifetime][|mki:length]` key parameter.
    public var keyParameter: CryptoAttribute.KeyParameter {
        CryptoAttribute.KeyParameter(keySaltBytes: key + salt, lifetime: lifetime, mki: mki)
    }

    /// `key||salt`, as libsrtp takes it.
    var keySalt: [UInt8] { key + salt }

    /// The MKI as the bytes carried in packets (big-endian, ``CryptoAttribute/MKI/length`` bytes).
    public var mkiBytes: [UInt8]? {
        guard let mki else { return nil }
        return (0..<Int(mki.length)).map { i in
            let shift = (Int(mki.length) - 1 - i) * 8
            return shift >= 64 ? 0 : UInt8(truncatingIfNeeded: mki.value >> UInt64(shift))
        }
    }

    /// The packet limit: the lifetime, or the suite's maximum.
    func packetLimit(_ profile: SRTPProfile) -> UInt64 { min(lifetime?.packetCount ?? .max, profile.maximumLifetime) }

    /// Lengths, lifetime and MKI, never the key.
    public var description: String {
        var text = "SRTPMasterKey(\(key.count)+\(salt.count) bytes"
        if let lifetime { text += ", lifetime \(lifetime)" }
        if let mki { text += ", MKI \(mki)" }
        return text + ")"
    }
}

extension CryptoAttribute {
    /// An `a=crypto` line offering `keys` with `profile` under `tag`.
    public init(tag: UInt32, profile: SRTPProfile, keys: [SRTPMasterKey], sessionParameters: [SessionParameter] = []) {
        self.init(tag: tag, suite: profile.suite, keyParameters: keys.map(\.keyParameter), sessionParameters: sessionParameters)
    }

    /// The SRTP profile, key(s) and replay window this line describes; throws when the suite,
    /// a key or a session parameter is not supported.
    ///
    /// Session parameters: `KDR=0` and `WSH` (the replay window) are honoured; `UNENCRYPTED_*`,
    /// `UNAUTHENTICATED_SRTP`, `FEC_*`, a non-zero `KDR` and unknown ones are refused (RFC 4568
    /// §6.3 lets an answerer refuse a line whose parameters it does not support).
    public func srtpParameters() throws(SRTPError) -> (profile: SRTPProfile, keys: [SRTPMasterKey], replayWindow: Int?) {
        guard let profile = SRTPProfile(suite: suite), profile.isAvailable else { throw .unsupportedSuite(suite) }
        guard !keyParameters.isEmpty else { throw .invalidKey("no key parameter") }
        var keys: [SRTPMasterKey] = []
        for parameter in keyParameters { keys.append(try SRTPMasterKey(parameter, profile: profile)) }
        if keys.count > 1 {
            guard keys.allSatisfy({ $0.mki != nil }) else { throw .invalidKey("several keys need an MKI each") }
            guard Set(keys.map { $0.mki!.length }).count == 1 else { throw .invalidKey("MKIs of different lengths") }
            guard Set(keys.map { $0.mki!.value }).count == keys.count else { throw .invalidKey("repeated MKI") }
            guard keys.count <= 16 else { throw .invalidKey("more than 16 keys") }
        }
        var window: Int? = nil
        for parameter in sessionParameters {
            switch parameter {
            case .keyDerivationRate(0): continue
            case .windowSizeHint(let n): window = Int(min(n, 32768))
            default: throw .unsupportedSessionParameter(parameter.description)
            }
        }
        return (profile, keys, window)
    }
}
