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

    /// With `keep` false the Via is only checked, its values on the bytes (no allocation).
    static func parse(_ b: ArraySlice<UInt8>, keep: Bool = true) throws(SIPParseError) -> Via {
        var c = Cursor(b)
        c.skipWS()
        let nameBytes = c.token()
        guard !nameBytes.isEmpty else { throw c.error(.via, "expected the protocol name (SIP)") }
        try c.expect(UInt8(ascii: "/"), .via, "'/' after the protocol name")
        let versionBytes = c.token()
        guard !versionBytes.isEmpty else { throw c.error(.via, "expected the protocol version") }
        try c.expect(UInt8(ascii: "/"), .via, "'/' after the protocol version")
        let transportBytes = c.token()
        guard !transportBytes.isEmpty else { throw c.error(.via, "expected the transport") }
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
        let host = try SIPHost.parse(b[hs..<c.i], keep: keep)
        var port: UInt16? = nil
        if c.consume(UInt8(ascii: ":")) {
            port = UInt16(try c.number(max: 65535, .port, "the sent-by port"))
        }
        let params = try c.parameters(.via, keep: keep) { (name, value, at) throws(SIPParseError) in
            let fail = { (why: String) in SIPParseError(offset: at, rule: .via, detail: why) }
            if equalsLowercased(name, "ttl") {
                guard let v = value, Self.decimal(v, max: 255) else { throw fail("ttl must be 0-255") }
            } else if equalsLowercased(name, "received") {
                guard let v = value else { throw fail("received needs a value") }
                _ = try SIPHost.parse(v, allowBareIPv6: true, keep: false)
            } else if equalsLowercased(name, "rport") {
                if let v = value { guard Self.decimal(v, max: 65535) else { throw fail("rport must be a port") } }
            } else if equalsLowercased(name, "branch") {
                guard let v = value, !v.isEmpty else { throw fail("branch needs a value") }
            }
        }
        try c.requireEnd(.via, "after the Via parameters")
        guard keep else { return Via(transport: "", host: host, port: port, parameters: params) }
        var v = Via(transport: String(sipBytes: transportBytes), host: host, port: port, parameters: params)
        v.protocolName = String(sipBytes: nameBytes)
        v.protocolVersion = String(sipBytes: versionBytes)
        return v
    }

    /// A non-empty run of decimal digits whose value is at most `max`.
    private static func decimal(_ v: ArraySlice<UInt8>, max: Int) -> Bool {
        var n = 0
        for d in v {
            guard isDigit(d) else { return false }
            n = n * 10 + Int(d - 0x30)
            if n > max { return false }
        }
        return !v.isEmpty
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
        if let cseq = b.withUnsafeBufferPointer(quick) { return cseq }
        return try decode(b)
    }

    /// The CSeq read with a cursor: any shape, and the errors.
    static func decode(_ b: ArraySlice<UInt8>) throws(SIPParseError) -> CSeq {
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

    /// The usual CSeq on the buffer: digits (at most 2³²−1), SP or HTAB, a well-known method,
    /// nothing after. `nil` for anything else, which ``decode(_:)`` then reads (and rejects):
    /// every value accepted here, it accepts the same.
    static func quick(_ p: UnsafeBufferPointer<UInt8>) -> CSeq? {
        let end = p.count
        var i = 0
        var n: UInt64 = 0
        while i < end, isDigit(p[i]) {
            n = n &* 10 &+ UInt64(p[i] &- 0x30)
            guard n <= UInt64(UInt32.max) else { return nil }
            i &+= 1
        }
        guard i > 0, i < end, isWS(p[i]) else { return nil }
        repeat { i &+= 1 } while i < end && isWS(p[i])
        let ms = i
        while i < end, isTokenByte(p[i]) { i &+= 1 }
        guard i == end, i > ms, let m = SIPMethod.known(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: p[ms..<end]))) else { return nil }
        return CSeq(UInt32(n), m)
    }
}
