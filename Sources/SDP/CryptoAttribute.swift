/// `a=crypto:<tag> <crypto-suite> <key-params> [<session-params>]`: SDP
/// Security Descriptions for SRTP (RFC 4568).
///
/// ```
/// a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:PS1uQCVeeCFCanVmcjkpPywjNWhcYD0mXXtxaVBR|2^20|1:4
/// ```
public struct CryptoAttribute: SDPTypedAttribute, CustomStringConvertible {
    /// `crypto`
    public static let attributeName = SDPAttributeName.crypto

    /// The SRTP packet lifetime of a master key: `2^N` or a decimal count.
    public enum Lifetime: Hashable, Sendable, CustomStringConvertible {
        /// `2^N` packets (N at most 63).
        case powerOfTwo(UInt8)
        /// A decimal number of packets.
        case packets(UInt64)

        /// The number of packets, for example 1048576 for `2^20`.
        public var packetCount: UInt64 {
            switch self {
            case .powerOfTwo(let exponent): return exponent < 64 ? 1 << UInt64(exponent) : .max
            case .packets(let count): return count
            }
        }

        /// `2^N` or the decimal count.
        public var description: String {
            switch self {
            case .powerOfTwo(let exponent): return "2^\(exponent)"
            case .packets(let count): return String(count)
            }
        }
    }

    /// A master key identifier: `<value>:<length in bytes>`.
    public struct MKI: Hashable, Sendable, CustomStringConvertible {
        /// The MKI value.
        public var value: UInt64
        /// The length of the MKI field in SRTP packets, in bytes (1–128).
        public var length: UInt8

        /// Creates an MKI.
        public init(value: UInt64, length: UInt8) {
            self.value = value
            self.length = length
        }

        /// For example `1:4`.
        public var description: String { "\(value):\(length)" }
    }

    /// One key parameter: `inline:<key||salt>[|lifetime][|MKI:length]`, or
    /// another key method with its information kept verbatim.
    public struct KeyParameter: Hashable, Sendable, CustomStringConvertible {
        /// The key method; `inline` is the only one RFC 4568 defines.
        public var method: String
        /// For `inline`: the base64 `key||salt`. For other methods: the whole key information.
        public var keySalt: String
        /// The key lifetime, if given (inline only).
        public var lifetime: Lifetime?
        /// The master key identifier, if given (inline only).
        public var mki: MKI?

        /// Creates a key parameter from already encoded text.
        public init(method: String = "inline", keySalt: String, lifetime: Lifetime? = nil, mki: MKI? = nil) {
            self.method = method
            self.keySalt = keySalt
            self.lifetime = lifetime
            self.mki = mki
        }

        /// Creates an `inline` key parameter, base64-encoding `keySaltBytes`
        /// (the master key followed by the master salt).
        public init(keySaltBytes: [UInt8], lifetime: Lifetime? = nil, mki: MKI? = nil) {
            self.init(method: "inline", keySalt: Base64.encode(keySaltBytes), lifetime: lifetime, mki: mki)
        }

        /// True for the `inline` method.
        public var isInline: Bool { method == "inline" }

        /// The decoded `key||salt` bytes for `inline` keys; nil for other
        /// methods or invalid base64.
        public var keySaltBytes: [UInt8]? {
            guard isInline else { return nil }
            return Base64.decode(keySalt.utf8)
        }

        /// The master key: the first `suite.masterKeyLength` bytes of
        /// ``keySaltBytes``, when the suite is known and the length matches.
        public func masterKey(for suite: CryptoSuite) -> [UInt8]? {
            guard let bytes = keySaltBytes, let keyLength = suite.masterKeyLength,
                bytes.count == suite.keySaltLength
            else { return nil }
            return Array(bytes[0..<keyLength])
        }

        /// The master salt: the bytes after the master key, when the suite is
        /// known and the length matches.
        public func masterSalt(for suite: CryptoSuite) -> [UInt8]? {
            guard let bytes = keySaltBytes, let keyLength = suite.masterKeyLength,
                bytes.count == suite.keySaltLength
            else { return nil }
            return Array(bytes[keyLength...])
        }

        /// For example `inline:<base64>|2^20|1:4`.
        public var description: String {
            var text = "\(method):\(keySalt)"
            if isInline {
                if let lifetime { text += "|\(lifetime)" }
                if let mki { text += "|\(mki)" }
            }
            return text
        }
    }

    /// An SRTP session parameter (RFC 4568 section 6.3).
    public enum SessionParameter: Hashable, Sendable, CustomStringConvertible {
        /// `KDR=n`: key derivation rate 2^n, n from 0 to 24.
        case keyDerivationRate(UInt8)
        /// `UNENCRYPTED_SRTP`
        case unencryptedSRTP
        /// `UNENCRYPTED_SRTCP`
        case unencryptedSRTCP
        /// `UNAUTHENTICATED_SRTP`
        case unauthenticatedSRTP
        /// `FEC_ORDER=FEC_SRTP` or `FEC_ORDER=SRTP_FEC`; the value is kept as written.
        case fecOrder(String)
        /// `FEC_KEY=<key-params>`
        case fecKey([KeyParameter])
        /// `WSH=n`: SRTP window size hint, at least 64.
        case windowSizeHint(UInt64)
        /// Any other (extension) session parameter, verbatim.
        case other(String)

        /// The parameter as written on the wire.
        public var description: String {
            switch self {
            case .keyDerivationRate(let n): return "KDR=\(n)"
            case .unencryptedSRTP: return "UNENCRYPTED_SRTP"
            case .unencryptedSRTCP: return "UNENCRYPTED_SRTCP"
            case .unauthenticatedSRTP: return "UNAUTHENTICATED_SRTP"
            case .fecOrder(let order): return "FEC_ORDER=\(order)"
            case .fecKey(let keys): return "FEC_KEY=" + keys.map(\.description).joined(separator: ";")
            case .windowSizeHint(let n): return "WSH=\(n)"
            case .other(let text): return text
            }
        }
    }

    /// The tag (1 to 9 digits) that identifies this attribute within the media section.
    public var tag: UInt32
    /// The crypto suite.
    public var suite: CryptoSuite
    /// One or more key parameters (separated by `;` on the wire).
    public var keyParameters: [KeyParameter]
    /// Session parameters, in order.
    public var sessionParameters: [SessionParameter]

    /// Creates a crypto attribute.
    public init(
        tag: UInt32, suite: CryptoSuite, keyParameters: [KeyParameter],
        sessionParameters: [SessionParameter] = []
    ) {
        self.tag = tag
        self.suite = suite
        self.keyParameters = keyParameters
        self.sessionParameters = sessionParameters
    }

    /// Parses the value of an `a=crypto` line; nil when malformed.
    public init?(attributeValue: String) {
        guard let parsed = try? Self.parse(ArraySlice(attributeValue.utf8)) else { return nil }
        self = parsed
    }

    /// The first key parameter's decoded `key||salt`, the common case of a
    /// single inline key.
    public var keySaltBytes: [UInt8]? { keyParameters.first?.keySaltBytes }

    /// For example `1 AES_CM_128_HMAC_SHA1_80 inline:<base64>|2^20|1:4`.
    public var attributeValue: String {
        var text = "\(tag) \(suite.rawValue) " + keyParameters.map(\.description).joined(separator: ";")
        for parameter in sessionParameters { text += " \(parameter)" }
        return text
    }

    /// The same as ``attributeValue``.
    public var description: String { attributeValue }

    // MARK: Parsing

    static func parse(_ value: ArraySlice<UInt8>) throws(FieldError) -> CryptoAttribute {
        let fields = Syntax.fields(value, tabs: true)
        guard fields.count >= 3 else {
            throw FieldError(.crypto, "expected <tag> <crypto-suite> <key-params>, found \(fields.count) fields", at: value.startIndex)
        }
        guard fields[0].count <= 9 else { throw FieldError(.crypto, "tag has more than 9 digits", at: fields[0].startIndex) }
        let tag: UInt32 = try Syntax.number(fields[0], "tag", rule: .crypto)
        guard fields[1].allSatisfy({ ASCII.isAlphanumeric($0) || $0 == ASCII.underscore }) else {
            throw FieldError(.crypto, "invalid crypto-suite", at: fields[1].startIndex)
        }
        let keys = try parseKeyParameters(fields[2])
        var session: [SessionParameter] = []
        for field in fields[3...] { session.append(try parseSessionParameter(field)) }
        return CryptoAttribute(
            tag: tag, suite: CryptoSuite(rawValue: Syntax.string(fields[1])), keyParameters: keys,
            sessionParameters: session)
    }

    private static func parseKeyParameters(_ field: ArraySlice<UInt8>) throws(FieldError) -> [KeyParameter] {
        var keys: [KeyParameter] = []
        for item in Syntax.split(field, on: ASCII.semicolon) {
            keys.append(try parseKeyParameter(item))
        }
        return keys
    }

    private static func parseKeyParameter(_ item: ArraySlice<UInt8>) throws(FieldError) -> KeyParameter {
        let (method, info) = Syntax.splitOnce(item, on: ASCII.colon)
        guard let info else { throw FieldError(.crypto, "key parameter needs <method>:<info>", at: item.startIndex) }
        guard !method.isEmpty, method.allSatisfy({ ASCII.isAlphanumeric($0) || $0 == ASCII.underscore }) else {
            throw FieldError(.crypto, "invalid key method", at: item.startIndex)
        }
        let methodName = Syntax.string(method)
        guard methodName == "inline" else {
            guard !info.isEmpty, info.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw FieldError(.crypto, "invalid key information", at: info.startIndex)
            }
            return KeyParameter(method: methodName, keySalt: Syntax.string(info))
        }
        let parts = Syntax.split(info, on: ASCII.pipe)
        let keySalt = parts[0]
        guard !keySalt.isEmpty else { throw FieldError(.crypto, "empty inline key", at: keySalt.startIndex) }
        guard Base64.decode(keySalt) != nil else {
            throw FieldError(.crypto, "inline key is not valid base64", at: keySalt.startIndex)
        }
        var key = KeyParameter(method: methodName, keySalt: Syntax.string(keySalt))
        var index = 1
        if index < parts.count, !parts[index].contains(ASCII.colon) {
            key.lifetime = try parseLifetime(parts[index])
            index += 1
        }
        if index < parts.count {
            key.mki = try parseMKI(parts[index])
            index += 1
        }
        if index < parts.count {
            throw FieldError(.crypto, "unexpected field after MKI", at: parts[index].startIndex)
        }
        return key
    }

    private static func parseLifetime(_ field: ArraySlice<UInt8>) throws(FieldError) -> Lifetime {
        if field.count >= 2, field[field.startIndex] == 0x32, field[field.startIndex + 1] == ASCII.caret {
            let exponent = field.dropFirst(2)
            guard let n = Syntax.decimal(exponent, as: UInt8.self), n <= 63 else {
                throw FieldError(.crypto, "invalid key lifetime \"\(Syntax.string(field))\"", at: field.startIndex)
            }
            return .powerOfTwo(n)
        }
        guard let count = Syntax.decimal(field, as: UInt64.self) else {
            throw FieldError(.crypto, "invalid key lifetime \"\(Syntax.string(field))\"", at: field.startIndex)
        }
        return .packets(count)
    }

    private static func parseMKI(_ field: ArraySlice<UInt8>) throws(FieldError) -> MKI {
        let (value, length) = Syntax.splitOnce(field, on: ASCII.colon)
        guard let length, let v = Syntax.decimal(value, as: UInt64.self), length.count <= 3,
            let l = Syntax.decimal(length, as: UInt8.self), l >= 1, l <= 128
        else {
            throw FieldError(.crypto, "invalid MKI \"\(Syntax.string(field))\"", at: field.startIndex)
        }
        return MKI(value: v, length: l)
    }

    private static func parseSessionParameter(_ field: ArraySlice<UInt8>) throws(FieldError) -> SessionParameter {
        let text = Syntax.string(field)
        switch text {
        case "UNENCRYPTED_SRTP": return .unencryptedSRTP
        case "UNENCRYPTED_SRTCP": return .unencryptedSRTCP
        case "UNAUTHENTICATED_SRTP": return .unauthenticatedSRTP
        default: break
        }
        let (name, value) = Syntax.splitOnce(field, on: ASCII.equals)
        guard let value else { return .other(text) }
        switch Syntax.string(name) {
        case "KDR":
            guard value.count <= 2, let n = Syntax.decimal(value, as: UInt8.self), n <= 24 else {
                throw FieldError(.crypto, "KDR must be a number from 0 to 24", at: field.startIndex)
            }
            return .keyDerivationRate(n)
        case "WSH":
            guard value.count >= 2, let n = Syntax.decimal(value, as: UInt64.self), n >= 64 else {
                throw FieldError(.crypto, "WSH must be a number of at least 64", at: field.startIndex)
            }
            return .windowSizeHint(n)
        case "FEC_ORDER":
            let order = Syntax.string(value)
            guard order == "FEC_SRTP" || order == "SRTP_FEC" else {
                throw FieldError(.crypto, "FEC_ORDER must be FEC_SRTP or SRTP_FEC", at: field.startIndex)
            }
            return .fecOrder(order)
        case "FEC_KEY":
            return .fecKey(try parseKeyParameters(value))
        default:
            return .other(text)
        }
    }
}
