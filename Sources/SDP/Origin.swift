/// The `o=` line: who created the session and which version of the
/// description this is (RFC 8866 section 5.2).
///
/// RFC 3264 requires the session version to increase by one in every new
/// offer or answer that changes anything; use
/// ``SessionDescription/incrementVersion()``.
public struct Origin: Hashable, Sendable, CustomStringConvertible {
    /// The user's login on the originating host, or `-`.
    public var username: String
    /// A numeric session identifier. Parsed values must be decimal digits that fit in 64 bits.
    public var sessionID: UInt64
    /// The version number of this session description.
    public var sessionVersion: UInt64
    /// The network type, normally ``NetworkType/internet``.
    public var networkType: NetworkType
    /// The address type, ``AddressType/ip4`` or ``AddressType/ip6``.
    public var addressType: AddressType
    /// The originating host's address or domain name.
    public var address: String

    /// Creates an origin. `username` defaults to `-`, the network type to `IN` and the address type to `IP4`.
    public init(
        username: String = "-",
        sessionID: UInt64,
        sessionVersion: UInt64,
        networkType: NetworkType = .internet,
        addressType: AddressType = .ip4,
        address: String
    ) {
        self.username = username
        self.sessionID = sessionID
        self.sessionVersion = sessionVersion
        self.networkType = networkType
        self.addressType = addressType
        self.address = address
    }

    /// The field value as written after `o=`.
    public var description: String {
        "\(username) \(sessionID) \(sessionVersion) \(networkType.rawValue) \(addressType.rawValue) \(address)"
    }

    /// Parses the value of an `o=` line.
    static func parse(_ value: ArraySlice<UInt8>) throws(FieldError) -> Origin {
        let fields = Syntax.fields(value)
        guard fields.count == 6 else {
            throw FieldError(.origin, "expected 6 fields (username, session id, version, nettype, addrtype, address), found \(fields.count)")
        }
        guard Syntax.isNonWhitespaceString(fields[0]) else {
            throw FieldError(.origin, "username contains a control character", at: fields[0].startIndex)
        }
        let id: UInt64 = try Syntax.number(fields[1], "session id", rule: .origin)
        let version: UInt64 = try Syntax.number(fields[2], "session version", rule: .origin)
        guard Syntax.isToken(fields[3]) else {
            throw FieldError(.origin, "invalid network type", at: fields[3].startIndex)
        }
        guard Syntax.isToken(fields[4]) else {
            throw FieldError(.origin, "invalid address type", at: fields[4].startIndex)
        }
        let addressType = AddressType(rawValue: Syntax.string(fields[4]))
        if let problem = AddressSyntax.problem(with: fields[5], type: addressType) {
            throw FieldError(.origin, problem, at: fields[5].startIndex)
        }
        return Origin(
            username: Syntax.string(fields[0]),
            sessionID: id,
            sessionVersion: version,
            networkType: NetworkType(rawValue: Syntax.string(fields[3])),
            addressType: addressType,
            address: Syntax.string(fields[5]))
    }
}
