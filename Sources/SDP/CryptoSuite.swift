/// The `<crypto-suite>` of an `a=crypto` attribute (RFC 4568 section 6.2,
/// RFC 6188, RFC 7714). Unknown suites are kept as written.
public struct CryptoSuite: SDPToken {
    /// The suite name as it appears on the wire.
    public var rawValue: String

    /// Wraps a suite name.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// `AES_CM_128_HMAC_SHA1_80` (RFC 4568)
    public static let aesCM128HMACSHA1_80 = CryptoSuite(rawValue: "AES_CM_128_HMAC_SHA1_80")
    /// `AES_CM_128_HMAC_SHA1_32` (RFC 4568)
    public static let aesCM128HMACSHA1_32 = CryptoSuite(rawValue: "AES_CM_128_HMAC_SHA1_32")
    /// `F8_128_HMAC_SHA1_80` (RFC 4568)
    public static let f8_128HMACSHA1_80 = CryptoSuite(rawValue: "F8_128_HMAC_SHA1_80")
    /// `AES_192_CM_HMAC_SHA1_80` (RFC 6188)
    public static let aes192CMHMACSHA1_80 = CryptoSuite(rawValue: "AES_192_CM_HMAC_SHA1_80")
    /// `AES_192_CM_HMAC_SHA1_32` (RFC 6188)
    public static let aes192CMHMACSHA1_32 = CryptoSuite(rawValue: "AES_192_CM_HMAC_SHA1_32")
    /// `AES_256_CM_HMAC_SHA1_80` (RFC 6188)
    public static let aes256CMHMACSHA1_80 = CryptoSuite(rawValue: "AES_256_CM_HMAC_SHA1_80")
    /// `AES_256_CM_HMAC_SHA1_32` (RFC 6188)
    public static let aes256CMHMACSHA1_32 = CryptoSuite(rawValue: "AES_256_CM_HMAC_SHA1_32")
    /// `AEAD_AES_128_GCM` (RFC 7714)
    public static let aeadAES128GCM = CryptoSuite(rawValue: "AEAD_AES_128_GCM")
    /// `AEAD_AES_256_GCM` (RFC 7714)
    public static let aeadAES256GCM = CryptoSuite(rawValue: "AEAD_AES_256_GCM")

    /// Master key length in bytes for the suites listed above; nil for unknown suites.
    public var masterKeyLength: Int? {
        switch self {
        case .aesCM128HMACSHA1_80, .aesCM128HMACSHA1_32, .f8_128HMACSHA1_80, .aeadAES128GCM: return 16
        case .aes192CMHMACSHA1_80, .aes192CMHMACSHA1_32: return 24
        case .aes256CMHMACSHA1_80, .aes256CMHMACSHA1_32, .aeadAES256GCM: return 32
        default: return nil
        }
    }

    /// Master salt length in bytes for the suites listed above; nil for unknown suites.
    public var masterSaltLength: Int? {
        switch self {
        case .aeadAES128GCM, .aeadAES256GCM: return 12
        default: return masterKeyLength == nil ? nil : 14
        }
    }

    /// The length of the inline `key||salt` material in bytes (for example 30
    /// for `AES_CM_128_HMAC_SHA1_80`); nil for unknown suites.
    public var keySaltLength: Int? {
        guard let key = masterKeyLength, let salt = masterSaltLength else { return nil }
        return key + salt
    }
}
