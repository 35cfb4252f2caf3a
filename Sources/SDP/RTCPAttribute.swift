/// `a=rtcp:<port> [<nettype> <addrtype> <connection-address>]` (RFC 3605):
/// the RTCP port, and optionally address, when it is not RTP port + 1.
public struct RTCPAttribute: SDPTypedAttribute, CustomStringConvertible {
    /// `rtcp`
    public static let attributeName = SDPAttributeName.rtcp

    /// The RTCP port.
    public var port: UInt16
    /// The RTCP address, when given.
    public var connection: Connection?

    /// Creates an rtcp attribute.
    public init(port: UInt16, connection: Connection? = nil) {
        self.port = port
        self.connection = connection
    }

    /// Parses the value of an `a=rtcp` line; nil when malformed.
    public init?(attributeValue: String) {
        guard let parsed = try? Self.parse(ArraySlice(attributeValue.utf8)) else { return nil }
        self = parsed
    }

    /// For example `53020` or `53020 IN IP4 126.16.64.4`.
    public var attributeValue: String {
        guard let connection else { return String(port) }
        return "\(port) \(connection)"
    }

    /// The same as ``attributeValue``.
    public var description: String { attributeValue }

    static func parse(_ value: ArraySlice<UInt8>) throws(FieldError) -> RTCPAttribute {
        let fields = Syntax.fields(value)
        guard let first = fields.first else { throw FieldError(.rtcp, "missing port", at: value.startIndex) }
        let port: UInt16 = try Syntax.number(first, "port", rule: .rtcp)
        guard fields.count == 1 || fields.count == 4 else {
            throw FieldError(.rtcp, "expected a port, optionally followed by nettype, addrtype and address", at: value.startIndex)
        }
        var attribute = RTCPAttribute(port: port)
        if fields.count == 4 {
            attribute.connection = try Connection.parse(fields: fields[1...], rule: .rtcp)
        }
        return attribute
    }
}
