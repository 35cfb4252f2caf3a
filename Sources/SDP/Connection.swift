/// Connection data: a `c=` line (RFC 8866 section 5.7), also used for the
/// address part of `a=rtcp` (RFC 3605).
///
/// For multicast, IPv4 addresses may carry a TTL and a number of addresses
/// (`224.2.1.1/127/3`); IPv6 addresses may carry only a number of addresses
/// (`ff15::101/3`). Addresses of other address types are kept exactly as written.
public struct Connection: Hashable, Sendable, CustomStringConvertible {
    /// The network type, normally ``NetworkType/internet``.
    public var networkType: NetworkType
    /// The address type, ``AddressType/ip4`` or ``AddressType/ip6``.
    public var addressType: AddressType
    /// The address or domain name, without any `/ttl` or `/count` suffix.
    public var address: String
    /// The multicast TTL (IPv4 only). Serialized only for ``AddressType/ip4``.
    public var ttl: UInt8?
    /// The number of consecutive multicast addresses. For ``AddressType/ip4``
    /// it is serialized only together with ``ttl``, as the grammar requires.
    public var numberOfAddresses: UInt32?

    /// Creates connection data. The network type defaults to `IN`.
    public init(
        networkType: NetworkType = .internet,
        addressType: AddressType,
        address: String,
        ttl: UInt8? = nil,
        numberOfAddresses: UInt32? = nil
    ) {
        self.networkType = networkType
        self.addressType = addressType
        self.address = address
        self.ttl = ttl
        self.numberOfAddresses = numberOfAddresses
    }

    /// `IN IP4 <address>`.
    public static func ip4(_ address: String) -> Connection {
        Connection(addressType: .ip4, address: address)
    }

    /// `IN IP6 <address>`.
    public static func ip6(_ address: String) -> Connection {
        Connection(addressType: .ip6, address: address)
    }

    /// True for the unspecified address `0.0.0.0` (or `::`), which RFC 2543
    /// era endpoints use in re-offers to put a call on hold (see RFC 3264
    /// section 8.4).
    public var isUnspecified: Bool {
        (addressType == .ip4 && address == "0.0.0.0") || (addressType == .ip6 && address == "::")
    }

    /// The address with its multicast suffixes, as written in the third field.
    public var connectionAddress: String {
        switch addressType {
        case .ip4:
            guard let ttl else { return address }
            if let numberOfAddresses { return "\(address)/\(ttl)/\(numberOfAddresses)" }
            return "\(address)/\(ttl)"
        case .ip6:
            if let numberOfAddresses { return "\(address)/\(numberOfAddresses)" }
            return address
        default:
            return address
        }
    }

    /// The field value as written after `c=`, for example `IN IP4 192.0.2.1`.
    public var description: String {
        "\(networkType.rawValue) \(addressType.rawValue) \(connectionAddress)"
    }

    /// Parses `<nettype> <addrtype> <connection-address>` from three fields.
    static func parse(fields: ArraySlice<ArraySlice<UInt8>>, rule: SDPParseError.Rule) throws(FieldError) -> Connection {
        guard fields.count == 3 else {
            throw FieldError(rule, "expected nettype, addrtype and address, found \(fields.count) fields")
        }
        let net = fields[fields.startIndex]
        let type = fields[fields.startIndex + 1]
        let addr = fields[fields.startIndex + 2]
        guard Syntax.isToken(net) else { throw FieldError(rule, "invalid network type", at: net.startIndex) }
        guard Syntax.isToken(type) else { throw FieldError(rule, "invalid address type", at: type.startIndex) }
        let addressType = AddressType(rawValue: Syntax.string(type))
        var connection = Connection(
            networkType: NetworkType(rawValue: Syntax.string(net)), addressType: addressType, address: "")
        switch addressType {
        case .ip4, .ip6:
            let parts = Syntax.split(addr, on: ASCII.slash)
            let maxParts = addressType == .ip4 ? 3 : 2
            guard parts.count <= maxParts else {
                throw FieldError(rule, "too many '/' suffixes in address", at: addr.startIndex)
            }
            if let problem = AddressSyntax.problem(with: parts[0], type: addressType) {
                throw FieldError(rule, problem, at: addr.startIndex)
            }
            connection.address = Syntax.string(parts[0])
            if addressType == .ip4 {
                if parts.count > 1 { connection.ttl = try Syntax.number(parts[1], "TTL", rule: rule) }
                if parts.count > 2 {
                    connection.numberOfAddresses = try Syntax.number(parts[2], "number of addresses", rule: rule)
                }
            } else if parts.count > 1 {
                connection.numberOfAddresses = try Syntax.number(parts[1], "number of addresses", rule: rule)
            }
        default:
            guard Syntax.isNonWhitespaceString(addr) else {
                throw FieldError(rule, "invalid address", at: addr.startIndex)
            }
            connection.address = Syntax.string(addr)
        }
        return connection
    }
}
