/// A typed failure to read SIP bytes: where it happened and which rule was broken.
///
/// Every error from the message layer carries the byte ``offset`` (counted from the first byte
/// handed to the parser) and the ``rule`` that failed, so a log line or a test can say exactly
/// what was wrong with a peer's message.
public struct SIPParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The grammar rule or limit that failed.
    public enum Rule: String, Sendable, Hashable, CaseIterable {
        /// The input ended before the message did (no blank line after the headers yet).
        case incomplete
        /// No start line: the input is empty or holds only line breaks.
        case emptyMessage
        /// The request line is not `Method SP Request-URI SP SIP-Version`.
        case requestLine
        /// The status line is not `SIP-Version SP Status-Code SP Reason-Phrase`.
        case statusLine
        /// The SIP version is not of the form `SIP/digits.digits`.
        case sipVersion
        /// The method is not a token.
        case method
        /// The status code is not three digits between 100 and 699.
        case statusCode
        /// The reason phrase holds bytes that are not UTF-8 text.
        case reasonPhrase
        /// A header line has no name, or the name holds a non-token byte.
        case headerName
        /// A header line has no colon after its name.
        case headerColon
        /// A header value holds a forbidden control byte (NUL, bare CR, …).
        case headerValue
        /// A line is longer than ``SIPParserLimits/maxLineLength``.
        case lineTooLong
        /// More header lines than ``SIPParserLimits/maxHeaderCount``.
        case tooManyHeaders
        /// The message is larger than ``SIPParserLimits/maxMessageSize``.
        case messageTooLarge
        /// The body is larger than ``SIPParserLimits/maxBodySize``.
        case bodyTooLarge
        /// Content-Length is not a non-negative decimal number that fits the limits.
        case contentLength
        /// Content-Length appears more than once.
        case duplicateContentLength
        /// Fewer body bytes are present than Content-Length announces.
        case bodyTruncated
        /// A stream-framed message has no Content-Length (RFC 3261 §18.3 makes it mandatory).
        case missingContentLength
        /// Bytes that cannot start a SIP message were found on a stream.
        case garbage
        /// A SIP, SIPS or TEL URI is malformed.
        case uri
        /// A host (domain, IPv4 address or IPv6 reference) is malformed.
        case host
        /// A port is not a decimal number from 0 to 65535.
        case port
        /// A `%HH` escape is malformed.
        case escape
        /// A quoted string is not terminated, or holds a bad escape.
        case quotedString
        /// A name-addr or addr-spec (From, To, Contact, Route, …) is malformed.
        case nameAddress
        /// A `;name=value` parameter is malformed.
        case parameter
        /// A Via header value is malformed.
        case via
        /// A CSeq header value is malformed or out of range.
        case cseq
        /// A numeric header value is malformed or out of range.
        case number
        /// A token or token list is malformed.
        case token
        /// An authentication header (WWW-Authenticate, Authorization, …) is malformed.
        case authentication
        /// A header that the request or response must carry is missing.
        case missingHeader
        /// A header that may appear once appears several times.
        case duplicateHeader
        /// The CSeq method does not match the request method.
        case cseqMethodMismatch
        /// The SIP version is well-formed but not `SIP/2.0`.
        case unsupportedVersion
        /// A header value has a structure the stack does not accept (Content-Type, Event, …).
        case headerStructure
        /// A multipart body is malformed.
        case multipart
    }

    /// The byte offset, from the start of the parsed input, at which the rule failed.
    public var offset: Int
    /// The rule that failed.
    public var rule: Rule
    /// A short human-readable explanation.
    public var detail: String

    /// Creates an error.
    public init(offset: Int, rule: Rule, detail: String = "") {
        self.offset = offset
        self.rule = rule
        self.detail = detail
    }

    /// The SIP status code a server should answer with when a request fails this way
    /// (400 for syntax errors, 505 for an unsupported version, 513 for an oversized message).
    public var suggestedStatusCode: Int {
        switch rule {
        case .unsupportedVersion: return 505
        case .messageTooLarge, .bodyTooLarge: return 513
        default: return 400
        }
    }

    public var description: String {
        detail.isEmpty ? "\(rule.rawValue) at byte \(offset)" : "\(rule.rawValue) at byte \(offset): \(detail)"
    }
}
