import CSRTP
import Foundation
import SDP

/// The SRTP protection profiles Switchboard offers: the SDES crypto suites of RFC 4568 and
/// RFC 7714 that libsrtp implements.
public enum SRTPProfile: String, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    /// `AES_CM_128_HMAC_SHA1_80`: AES-128 counter mode, 80-bit HMAC-SHA1 tag.
    case aesCM128HMACSHA1_80 = "AES_CM_128_HMAC_SHA1_80"
    /// `AES_CM_128_HMAC_SHA1_32`: the same with a 32-bit tag on SRTP (SRTCP keeps 80 bits).
    case aesCM128HMACSHA1_32 = "AES_CM_128_HMAC_SHA1_32"
    /// `AEAD_AES_128_GCM` (RFC 7714): AES-128-GCM, 16-byte tag.
    case aeadAES128GCM = "AEAD_AES_128_GCM"
    /// `AEAD_AES_256_GCM` (RFC 7714): AES-256-GCM, 16-byte tag.
    case aeadAES256GCM = "AEAD_AES_256_GCM"

    /// The profile for an SDP crypto suite, nil when unknown.
    public init?(suite: CryptoSuite) {
        self.init(rawValue: suite.rawValue)
    }

    /// The SDP crypto suite.
    public var suite: CryptoSuite { CryptoSuite(rawValue: rawValue) }

    /// Master key length in bytes.
    public var keyLength: Int { self == .aeadAES256GCM ? 32 : 16 }
    /// Master salt length in bytes (14, or 12 for the GCM suites).
    public var saltLength: Int { isAEAD ? 12 : 14 }
    /// `key||salt` length in bytes, the length of an `inline:` key.
    public var keySaltLength: Int { keyLength + saltLength }
    /// The bytes of authentication tag SRTP adds (10, 4, or 16).
    public var rtpTagLength: Int {
        switch self {
        case .aesCM128HMACSHA1_80: return 10
        case .aesCM128HMACSHA1_32: return 4
        case .aeadAES128GCM, .aeadAES256GCM: return 16
        }
    }
    /// The bytes of authentication tag SRTCP adds (10, or 16), not counting the 4-byte index.
    public var rtcpTagLength: Int { isAEAD ? 16 : 10 }
    /// True for the AEAD (GCM) suites.
    public var isAEAD: Bool { self == .aeadAES128GCM || self == .aeadAES256GCM }
    /// The largest key lifetime the suite allows: 2^48 packets for SRTP (RFC 4568 §6.2,
    /// RFC 7714 §12 tightens GCM to 2^48 as well).
    public var maximumLifetime: UInt64 { 1 << 48 }

    /// libsrtp's `srtp_profile_t`.
    var libraryProfile: Int32 {
        switch self {
        case .aesCM128HMACSHA1_80: return 1
        case .aesCM128HMACSHA1_32: return 2
        case .aeadAES128GCM: return 7
        case .aeadAES256GCM: return 8
        }
    }

    /// Whether the system's libsrtp implements this profile (the GCM suites need libsrtp built
    /// with a crypto library; Debian's uses NSS). Probed once by creating a session.
    public var isAvailable: Bool { Self.available.contains(self) }

    /// The profiles this machine's libsrtp implements, strongest-first order of ``allCases``
    /// kept (`AES_CM_128_HMAC_SHA1_80` first, the RFC 4568 mandatory one).
    public static let available: [SRTPProfile] = {
        guard SRTPLibrary.initialize() == nil else { return [] }
        return allCases.filter { profile in
            let key = [UInt8](repeating: 0x42, count: profile.keySaltLength)
            var session: srtp_t? = nil
            let status = key.withUnsafeBufferPointer { k -> srtp_err_status_t in
                var spec = csrtp_key(key_salt: k.baseAddress, mki: nil, mki_size: 0)
                return csrtp_create(&session, profile.libraryProfile, 1, &spec, 1, 1024)
            }
            if let session { srtp_dealloc(session) }
            return status == srtp_err_status_ok
        }
    }()

    /// The suite name.
    public var description: String { rawValue }
}

/// libsrtp's one-time global initialization.
enum SRTPLibrary {
    /// `srtp_init` runs once (Swift initializes globals exactly once, thread-safely), then
    /// AES-CM, AES-GCM and HMAC-SHA1 on OpenSSL replace the library's own (see `crypto`).
    private static let state: (status: srtp_err_status_t, crypto: SRTPCrypto) = {
        let status = csrtp_init()
        guard status == srtp_err_status_ok else { return (status, .library) }
        if ProcessInfo.processInfo.environment["SWITCHBOARD_SRTP_CRYPTO"] == "libsrtp" { return (status, .library) }
        // .openSSL when every replacement is in; one that fails its self-test is not installed
        // (the library's own stays for that primitive) and this reports .library.
        return (status, csrtp_install_openssl_crypto() == srtp_err_status_ok ? .openSSL : .library)
    }()

    /// nil when libsrtp is initialized, else the error.
    static func initialize() -> SRTPError? {
        state.status == srtp_err_status_ok ? nil : .library(operation: "srtp_init", status: Int32(state.status.rawValue))
    }

    /// Whose AES-CM, AES-GCM and HMAC-SHA1 the SRTP sessions use.
    static var crypto: SRTPCrypto { state.crypto }

    /// The library version, for example `libsrtp2 2.5.0`.
    static var version: String { String(cString: srtp_get_version_string()) }
}

/// Whose AES counter mode, AES-GCM and HMAC-SHA1 protect and check the packets. libsrtp2 does
/// SRTP itself either way (key derivation, indices, nonces, rollover counters, replay windows).
public enum SRTPCrypto: String, Sendable {
    /// OpenSSL's libcrypto, one context per stream kept for its lifetime: the default. (Debian's
    /// libsrtp2 is built on NSS, which creates a PKCS#11 context per packet under the soft token's
    /// locks, so two media workers in one process wait on each other.)
    case openSSL = "openssl"
    /// libsrtp2's own (its build's crypto: NSS on Debian). Chosen by setting the environment
    /// variable `SWITCHBOARD_SRTP_CRYPTO=libsrtp` before the first SRTP session, to compare the two.
    case library = "libsrtp"

    /// The implementation in use (initializes libsrtp2 if no session has yet).
    public static var current: SRTPCrypto {
        _ = SRTPLibrary.initialize()
        return SRTPLibrary.crypto
    }
}
