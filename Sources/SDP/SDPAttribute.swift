/// One `a=` line, kept exactly as parsed: either a property attribute
/// (`a=<name>`) or a value attribute (`a=<name>:<value>`).
///
/// Session and media sections keep their attributes as an ordered list of
/// these, so unknown attributes survive a parse/serialize round trip
/// unchanged. Typed views such as ``RTPMap`` or ``CryptoAttribute`` are
/// computed from this list; see ``SDPAttributeContainer``.
public struct SDPAttribute: Hashable, Sendable, CustomStringConvertible {
    /// The attribute name (an RFC 8866 token), for example `rtpmap`.
    public var name: String
    /// Everything after the first `:`, verbatim; nil for a property
    /// attribute. An empty string means the line was `a=<name>:`.
    public var value: String?

    /// Creates an attribute; omit `value` for a property attribute.
    public init(name: String, value: String? = nil) {
        self.name = name
        self.value = value
    }

    /// Creates the attribute line for a typed attribute.
    public init(_ typed: some SDPTypedAttribute) {
        self.name = type(of: typed).attributeName
        self.value = typed.attributeValue
    }

    /// True when this is a property attribute (no `:` and no value).
    public var isProperty: Bool { value == nil }

    /// The text after `a=`, for example `rtpmap:0 PCMU/8000` or `sendrecv`.
    public var description: String {
        guard let value else { return name }
        return "\(name):\(value)"
    }

    /// Decodes this attribute as the typed attribute `T` if the name matches
    /// and the value is well formed.
    public func decode<T: SDPTypedAttribute>(as type: T.Type) -> T? {
        guard name == T.attributeName, let value else { return nil }
        return T(attributeValue: value)
    }
}

/// Names of attributes this library understands or commonly meets.
public enum SDPAttributeName {
    /// `rtpmap` (RFC 8866 section 6.6)
    public static let rtpmap = "rtpmap"
    /// `fmtp` (RFC 8866 section 6.15)
    public static let fmtp = "fmtp"
    /// `ptime` (RFC 8866 section 6.4)
    public static let ptime = "ptime"
    /// `maxptime` (RFC 8866 section 6.5)
    public static let maxptime = "maxptime"
    /// `rtcp` (RFC 3605)
    public static let rtcp = "rtcp"
    /// `rtcp-mux` (RFC 5761)
    public static let rtcpMux = "rtcp-mux"
    /// `crypto` (RFC 4568)
    public static let crypto = "crypto"
    /// `ssrc` (RFC 5576)
    public static let ssrc = "ssrc"
    /// `mid` (RFC 5888)
    public static let mid = "mid"
    /// `setup` (RFC 4145)
    public static let setup = "setup"
    /// `fingerprint` (RFC 8122)
    public static let fingerprint = "fingerprint"
    /// `ice-ufrag` (RFC 8839)
    public static let iceUfrag = "ice-ufrag"
    /// `ice-pwd` (RFC 8839)
    public static let icePwd = "ice-pwd"
    /// `candidate` (RFC 8839)
    public static let candidate = "candidate"
}

extension SDPAttribute {
    /// Validates the attributes this library gives a typed view, so that a
    /// successfully parsed description always decodes. Other attributes are
    /// accepted as they are.
    static func validate(name: String, value: ArraySlice<UInt8>?) throws(FieldError) {
        switch name {
        case SDPAttributeName.rtpmap:
            _ = try RTPMap.parse(required(value, name, rule: .rtpmap))
        case SDPAttributeName.fmtp:
            _ = try FormatParameters.parse(required(value, name, rule: .fmtp))
        case SDPAttributeName.crypto:
            _ = try CryptoAttribute.parse(required(value, name, rule: .crypto))
        case SDPAttributeName.rtcp:
            _ = try RTCPAttribute.parse(required(value, name, rule: .rtcp))
        case SDPAttributeName.ssrc:
            _ = try SSRCAttribute.parse(required(value, name, rule: .ssrc))
        case SDPAttributeName.ptime, SDPAttributeName.maxptime:
            _ = try packetTime(required(value, name, rule: .attribute(name)), name: name)
        case SDPAttributeName.mid:
            let v = try required(value, name, rule: .attribute(name))
            guard Syntax.isToken(Syntax.trimmed(v)) else {
                throw FieldError(.attribute(name), "identification tag must be a token", at: v.startIndex)
            }
        case SDPAttributeName.rtcpMux, "sendrecv", "sendonly", "recvonly", "inactive":
            if let value {
                throw FieldError(.attribute(name), "\(name) takes no value", at: value.startIndex - 1)
            }
        default:
            break
        }
    }

    private static func required(
        _ value: ArraySlice<UInt8>?, _ name: String, rule: SDPParseError.Rule
    ) throws(FieldError) -> ArraySlice<UInt8> {
        guard let value else { throw FieldError(rule, "\(name) requires a value") }
        return value
    }

    /// Parses a `ptime`/`maxptime` value: a non-zero integer or decimal
    /// number of milliseconds (RFC 8866 `non-zero-int-or-real`).
    static func packetTime(_ value: ArraySlice<UInt8>, name: String) throws(FieldError) -> Double {
        let v = Syntax.trimmed(value)
        let (whole, fraction) = Syntax.splitOnce(v, on: ASCII.dot)
        guard Syntax.isAllDigits(whole), whole.count <= 9,
            fraction.map({ Syntax.isAllDigits($0) && $0.count <= 9 }) ?? true
        else {
            throw FieldError(.attribute(name), "expected a number of milliseconds, found \"\(Syntax.string(v))\"", at: v.startIndex)
        }
        guard let number = Double(Syntax.string(v)), number > 0 else {
            throw FieldError(.attribute(name), "packet time must be greater than zero", at: v.startIndex)
        }
        return number
    }
}
