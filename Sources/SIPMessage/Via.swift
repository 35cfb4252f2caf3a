/// One Via header value (RFC 3261 §20.42, RFC 3581 rport, RFC 5118 IPv6).
public struct Via: Sendable, Hashable, CustomStringConvertible {
    /// The protocol name, `SIP`.
    public var protocolName: String
    /// The protocol version, `2.0`.
    public var protocolVersion: String
    /// The transport, upper-cased as written (`UDP`, `TCP`, `TLS`, `SCTP`, `WS`, …).
    public var transport: String
    /// The sent-by host.
    public var host: SIPHost
    /// The sent-by port, when written.
    public var port: UInt16?
    /// The parameters in order (`branch`, `received`, `rport`, `maddr`, `ttl`, others).
    public var parameters: SIPParameters

    /// The RFC 3261 magic cookie that starts a compliant branch.
    public static let magicCookie = "z9hG4bK"

    /// Creates a Via.
    public init(transport: String, host: SIPHost, port: UInt16? = nil, parameters: SIPParameters = []) {
        protocolName = "SIP"
        protocolVersion = "2.0"
        self.transport = transport
        self.host = host
        self.port = port
        self.parameters = parameters
    }

    /// Parses one Via value.
    public init(_ text: String) throws(SIPParseError) {
        self = try Via.parse(ArraySlice(text.utf8))
    }

    /// Parses one Via value from message bytes (an element of ``SIPMessage/elementBytes(_:)``);
    /// error offsets are the slice's indices.
    public init(bytes: ArraySlice<UInt8>) throws(SIPParseError) {
        self = try Via.parse(bytes)
    }

    /// The branch parameter.
    public var branch: String? {
        get { parameters["branch"] ?? nil }
        set { if let v = newValue { parameters.set("branch", v) } else { parameters.remove("branch") } }
    }

    /// Whether the branch starts with the RFC 3261 magic cookie.
    public var hasRFC3261Branch: Bool { branch?.hasPrefix(Via.magicCookie) ?? false }

    /// The `received` parameter (an IPv4 or IPv6 address, with or without brackets).
    public var received: String? { parameters["received"] ?? nil }

    /// The `rport` parameter: `nil` when absent, `.some(nil)` when present without a value.
    public var rport: UInt16?? {
        guard let v = parameters["rport"] else { return nil }
        guard let s = v else { return .some(nil) }
        return .some(UInt16(s))
    }

    /// The `maddr` parameter.
    public var maddr: String? { parameters["maddr"] ?? nil }

    /// The `ttl` parameter.
    public var ttl: UInt8? { (parameters["ttl"] ?? nil).flatMap { UInt8($0) } }

    public var description: String {
        "\(protocolName)/\(protocolVersion)/\(transport) \(host)" + (port.map { ":\($0)" } ?? "") + parameters.text
    }

    static func parse(_ b: ArraySlice<UInt8>) throws(SIPParseError) -> Via {
        var c = Cursor(b)
        c.skipWS()
        let name = try c.requireToken(.via, "the protocol name (SIP)")
        try c.expect(UInt8(ascii: "/"), .via, "'/' after the protocol name")
        let version = try c.requireToken(.via, "the protocol version")
        try c.expect(UInt8(ascii: "/"), .via, "'/' after the protocol version")
        let transport = try c.requireToken(.via, "the transport")
        let ws = c.i
        c.skipWS()
        guard c.i > ws else { throw c.error(.via, "expected white space before sent-by") }
        let hs = c.i
        if c.peek == UInt8(ascii: "[") {
            guard let close = b[c.i...].firstIndex(of: UInt8(ascii: "]")) else { throw c.error(.host, "unterminated IPv6 reference") }
            c.i = close + 1
        } else {
            _ = c.take { ByteClass.test($0, ByteClass.hostChar) || $0 == UInt8(ascii: "_") }
        }
        guard c.i > hs else { throw c.error(.via, "expected the sent-by host") }
        let host = try SIPHost.parse(b[hs..<c.i])
        var port: UInt16? = nil
        if c.consume(UInt8(ascii: ":")) {
            port = UInt16(try c.number(max: 65535, .port, "the sent-by port"))
        }
        let params = try c.parameters(.via)
        for p in params {
            switch p.name.lowercased() {
            case "ttl":
                guard let v = p.value, !v.isEmpty, v.utf8.allSatisfy(isDigit), let t = Int(v), (0...255).contains(t) else { throw c.error(.via, "ttl must be 0-255") }
            case "received":
                guard let v = p.value else { throw c.error(.via, "received needs a value") }
                _ = try SIPHost.parse(v, allowBareIPv6: true)
            case "rport":
                if let v = p.value { guard !v.isEmpty, v.utf8.allSatisfy(isDigit), let n = Int(v), (0...65535).contains(n) else { throw c.error(.via, "rport must be a port") } }
            case "branch":
                guard let v = p.value, !v.isEmpty else { throw c.error(.via, "branch needs a value") }
            default: break
            }
        }
        try c.requireEnd(.via, "after the Via parameters")
        var v = Via(transport: transport, host: host, port: port, parameters: params)
        v.protocolName = name
        v.protocolVersion = version
        return v
    }
}

/// A CSeq header value: a sequence number and a method.
public struct CSeq: Sendable, Hashable, CustomStringConvertible {
    /// The sequence number, at most 2³¹−1 when generated, 2³²−1 when parsed (RFC 3261 §8.1.1.5).
    public var sequence: UInt32
    /// The method.
    public var method: SIPMethod

    public init(_ sequence: UInt32, _ method: SIPMethod) {
        self.sequence = sequence
        self.method = method
    }

    public var description: String { "\(sequence) \(method.token)" }

    static func parse(_ b: ArraySlice<UInt8>) throws(SIPParseError) -> CSeq {
        var c = Cursor(b)
        c.skipWS()
        let n = try c.number(max: UInt64(UInt32.max), .cseq, "the CSeq number")
        let ws = c.i
        c.skipWS()
        guard c.i > ws else { throw c.error(.cseq, "expected white space after the CSeq number") }
        let t = c.token()
        guard !t.isEmpty, let m = t.withUnsafeBytes({ SIPMethod(bytes: $0) }) else { throw c.error(.cseq, "expected the CSeq method") }
        try c.requireEnd(.cseq, "after the CSeq method")
        return CSeq(UInt32(n), m)
    }
}
