/// A DNS message (RFC 1035 §4): the header, then the question, answer, authority and
/// additional sections.
///
/// Build a query with ``query(id:name:type:recursionDesired:)`` and turn it into bytes with
/// ``encoded(compressNames:)``; read a response with ``init(bytes:limits:)``. Neither does
/// any I/O.
///
/// ```swift
/// let query = DNSMessage.query(id: 0x1234, name: try DNSName("_sip._udp.example.com"), type: .srv)
/// let wire = try query.encoded()
/// // … send, receive `reply` …
/// let response = try DNSMessage(bytes: reply)
/// ```
public struct DNSMessage: Sendable, Hashable {
    /// The identifier copied from query to response.
    public var id: UInt16
    /// QR: whether this is a response.
    public var isResponse: Bool
    /// OPCODE (0 is a standard query), four bits.
    public var opcode: UInt8
    /// AA: whether the answer comes from an authoritative server.
    public var isAuthoritative: Bool
    /// TC: whether the message was truncated to fit the transport (retry over TCP).
    public var isTruncated: Bool
    /// RD: whether the query asks for recursion.
    public var recursionDesired: Bool
    /// RA: whether the server offers recursion.
    public var recursionAvailable: Bool
    /// RCODE.
    public var responseCode: DNSResponseCode
    /// The question section.
    public var questions: [DNSQuestion]
    /// The answer section.
    public var answers: [DNSRecord]
    /// The authority section.
    public var authorities: [DNSRecord]
    /// The additional section.
    public var additionals: [DNSRecord]

    /// Creates a message.
    public init(id: UInt16, isResponse: Bool = false, opcode: UInt8 = 0, isAuthoritative: Bool = false, isTruncated: Bool = false,
                recursionDesired: Bool = true, recursionAvailable: Bool = false, responseCode: DNSResponseCode = .noError,
                questions: [DNSQuestion] = [], answers: [DNSRecord] = [], authorities: [DNSRecord] = [], additionals: [DNSRecord] = []) {
        self.id = id
        self.isResponse = isResponse
        self.opcode = opcode & 0x0F
        self.isAuthoritative = isAuthoritative
        self.isTruncated = isTruncated
        self.recursionDesired = recursionDesired
        self.recursionAvailable = recursionAvailable
        self.responseCode = responseCode
        self.questions = questions
        self.answers = answers
        self.authorities = authorities
        self.additionals = additionals
    }

    /// A standard query with one question of class IN.
    public static func query(id: UInt16, name: DNSName, type: DNSRecordType, recursionDesired: Bool = true) -> DNSMessage {
        DNSMessage(id: id, recursionDesired: recursionDesired, questions: [DNSQuestion(name: name, type: type)])
    }

    /// The 16 flag bits of the header (QR, OPCODE, AA, TC, RD, RA, Z = 0, RCODE).
    var flags: UInt16 {
        var f: UInt16 = 0
        if isResponse { f |= 0x8000 }
        f |= UInt16(opcode & 0x0F) << 11
        if isAuthoritative { f |= 0x0400 }
        if isTruncated { f |= 0x0200 }
        if recursionDesired { f |= 0x0100 }
        if recursionAvailable { f |= 0x0080 }
        f |= UInt16(responseCode.rawValue & 0x0F)
        return f
    }
}
