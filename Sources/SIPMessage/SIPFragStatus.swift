/// The status line a `message/sipfrag` body (RFC 3420) carries in the NOTIFYs of a REFER's
/// implicit subscription (RFC 3515 §2.4.5): how the referred request is going, e.g.
/// `SIP/2.0 180 Ringing` or `SIP/2.0 200 OK`.
///
/// Parsing is tolerant where deployed peers are sloppy and strict where it matters: leading
/// blank lines are skipped, the line may end in CRLF, LF or the end of the body, header lines
/// after it are ignored, and the reason phrase may be missing (`SIP/2.0 200`); the version must
/// be `SIP/2.0` and the code three digits from 100 to 699. Anything else (a request line, plain
/// text, an empty body) is a ``SIPParseError`` naming the byte and the rule.
public struct SIPFragStatus: Sendable, Hashable, CustomStringConvertible {
    /// The status code, 100–699.
    public var statusCode: Int
    /// The reason phrase as written (empty when the peer left it out).
    public var reasonPhrase: String

    /// The longest body read; a sipfrag for REFER is one line, a few dozen bytes.
    public static let maximumLength = 8192

    /// A status line to send.
    public init(statusCode: Int, reasonPhrase: String) {
        self.statusCode = statusCode
        self.reasonPhrase = reasonPhrase
    }

    /// A status line with RFC 3261 §21's reason phrase for `statusCode`
    /// (``SIPMessage/defaultReasonPhrase(_:)``): the Status-Line grammar requires a space after
    /// the code, and strict peers reject a line without a phrase.
    public init(statusCode: Int) {
        self.statusCode = statusCode
        self.reasonPhrase = SIPMessage.defaultReasonPhrase(statusCode)
    }

    /// Reads the status line at the start of a sipfrag body.
    public init(parsing bytes: [UInt8]) throws(SIPParseError) {
        guard bytes.count <= Self.maximumLength else {
            throw SIPParseError(offset: Self.maximumLength, rule: .messageTooLarge, detail: "a sipfrag body over \(Self.maximumLength) bytes")
        }
        var i = 0
        while i < bytes.count, bytes[i] == 13 || bytes[i] == 10 || bytes[i] == 32 || bytes[i] == 9 { i += 1 }
        guard i < bytes.count else { throw SIPParseError(offset: i, rule: .emptyMessage, detail: "the sipfrag body has no status line") }
        var end = i
        while end < bytes.count, bytes[end] != 13, bytes[end] != 10 { end += 1 }
        let line = bytes[i..<end]
        let version = Array("SIP/2.0 ".utf8)
        guard line.count >= version.count + 3, line.prefix(version.count).elementsEqual(version, by: { Self.upper($0) == $1 }) else {
            throw SIPParseError(offset: i, rule: .statusLine, detail: "a sipfrag must start with a SIP/2.0 status line")
        }
        let codeStart = i + version.count
        var code = 0
        for k in codeStart..<(codeStart + 3) {
            let b = bytes[k]
            guard b >= 48, b <= 57 else { throw SIPParseError(offset: k, rule: .statusCode, detail: "the status code must be three digits") }
            code = code * 10 + Int(b - 48)
        }
        guard (100...699).contains(code) else { throw SIPParseError(offset: codeStart, rule: .statusCode, detail: "status code \(code) is not 100-699") }
        var rest = codeStart + 3
        if rest < end {
            guard bytes[rest] == 32 || bytes[rest] == 9 else {
                throw SIPParseError(offset: rest, rule: .statusLine, detail: "expected a space after the status code")
            }
            rest += 1
        }
        statusCode = code
        reasonPhrase = String(decoding: bytes[rest..<end], as: UTF8.self)
    }

    /// Whether the referred request has ended (a final status, 200–699).
    public var isFinal: Bool { statusCode >= 200 }

    /// `SIP/2.0 200 OK` (without the line end).
    public var description: String { reasonPhrase.isEmpty ? "SIP/2.0 \(statusCode)" : "SIP/2.0 \(statusCode) \(reasonPhrase)" }

    /// The body to send: the status line and CRLF.
    public var bytes: [UInt8] { Array((description + "\r\n").utf8) }

    private static func upper(_ b: UInt8) -> UInt8 { b >= 97 && b <= 122 ? b - 32 : b }
}
