import SIPMessage
import SIPDialog

/// Key-value data carried with a call, as contact-centre SDKs use it (Diyalog's queue and
/// representative calls: the customer's id, the queue, the reason for calling): attached to an
/// outgoing call's INVITE and readable by the callee (``Call/attachedData``), or sent during a
/// call as a message (``Call/send(data:timeout:)``, received as ``CallEvent/data(_:)``).
///
/// On the wire the pairs are `application/x-www-form-urlencoded` text (`key=value&…`, UTF-8,
/// percent-escaped): in the INVITE as a `User-to-User` header (RFC 7433) with
/// `encoding=hex;purpose=call-data`, during the call as the body of a SIP INFO (RFC 6086 legacy
/// usage) with that content type. Keys are unique; order is kept.
public struct CallData: Sendable, Hashable, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    /// The pairs, in order.
    public private(set) var pairs: [(key: String, value: String)]

    /// At most this many bytes of encoded data are sent or accepted (a `User-to-User` header
    /// stays well within a UDP datagram).
    public static let maximumEncodedSize = 2048

    public init(_ pairs: [(String, String)]) {
        self.pairs = []
        for (k, v) in pairs { self[k] = v }
    }

    public init(dictionaryLiteral elements: (String, String)...) { self.init(elements) }

    public var isEmpty: Bool { pairs.isEmpty }

    /// The value of `key`; setting nil removes it.
    public subscript(key: String) -> String? {
        get { pairs.first { $0.key == key }?.value }
        set {
            if let i = pairs.firstIndex(where: { $0.key == key }) {
                if let newValue { pairs[i].value = newValue } else { pairs.remove(at: i) }
            } else if let newValue {
                pairs.append((key, newValue))
            }
        }
    }

    public var description: String { pairs.map { "\($0.key)=\($0.value)" }.joined(separator: ", ") }

    public static func == (a: CallData, b: CallData) -> Bool {
        a.pairs.count == b.pairs.count && zip(a.pairs, b.pairs).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        for p in pairs {
            hasher.combine(p.key)
            hasher.combine(p.value)
        }
    }

    // MARK: Encoding

    /// The form-encoded text (`a=1&b=x%20y`).
    public var encoded: String {
        pairs.map { Self.escape($0.key) + "=" + Self.escape($0.value) }.joined(separator: "&")
    }

    /// Parses form-encoded text; a pair without `=` has an empty value, `+` is a space.
    /// - Throws: ``CallDataError`` for bad escapes, text that is not UTF-8, or too much of it.
    public init(encoded text: String) throws(CallDataError) {
        guard text.utf8.count <= Self.maximumEncodedSize else { throw .tooLarge(text.utf8.count) }
        var pairs: [(String, String)] = []
        for part in text.split(separator: "&", omittingEmptySubsequences: true) {
            let eq = part.firstIndex(of: "=")
            let key = try Self.unescape(eq.map { part[..<$0] } ?? part[...])
            var value = ""
            if let eq { value = try Self.unescape(part[part.index(after: eq)...]) }
            guard !key.isEmpty else { throw .malformed("a pair without a key") }
            pairs.append((key, value))
        }
        self.init(pairs)
    }

    /// The `User-to-User` header value (RFC 7433): the encoded text in hex.
    public var userToUserValue: String {
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for b in encoded.utf8 {
            out.append(hex[Int(b >> 4)])
            out.append(hex[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self) + ";encoding=hex;purpose=\(Self.purpose)"
    }

    /// The `purpose` parameter (RFC 7434) our `User-to-User` headers carry.
    public static let purpose = "call-data"

    /// The data of a `User-to-User` header value written by ``userToUserValue``; nil when the
    /// header is for another purpose.
    public init?(userToUser value: String) throws(CallDataError) {
        let parts = value.split(separator: ";").map(Self.trimmed)
        guard let data = parts.first else { return nil }
        var encoding: String? = nil, purpose: String? = nil
        for p in parts.dropFirst() {
            let kv = p.split(separator: "=", maxSplits: 1)
            guard kv.count == 2 else { continue }
            switch kv[0].lowercased() {
            case "encoding": encoding = kv[1].lowercased()
            case "purpose": purpose = String(kv[1])
            default: break
            }
        }
        guard purpose == Self.purpose else { return nil }
        guard encoding == "hex" else { throw .malformed("User-to-User call data must be hex-encoded") }
        var bytes = [UInt8]()
        let digits = Array(data.utf8)
        guard digits.count % 2 == 0 else { throw .malformed("odd number of hex digits") }
        guard digits.count / 2 <= Self.maximumEncodedSize else { throw .tooLarge(digits.count / 2) }
        var i = 0
        while i < digits.count {
            guard let h = Self.hexValue(digits[i]), let l = Self.hexValue(digits[i + 1]) else {
                throw .malformed("byte \(i) of the User-to-User value is not a hex digit")
            }
            bytes.append(h << 4 | l)
            i += 2
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw .malformed("call data is not UTF-8") }
        try self.init(encoded: text)
    }

    private static func trimmed(_ s: Substring) -> String {
        var t = s
        while let f = t.first, f == " " || f == "\t" { t.removeFirst() }
        while let l = t.last, l == " " || l == "\t" { t.removeLast() }
        return String(t)
    }

    static let contentType = MediaType(type: "application", subtype: "x-www-form-urlencoded")

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    private static func escape(_ s: String) -> String {
        var out: [UInt8] = []
        let hex = Array("0123456789ABCDEF".utf8)
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(b)
            default:
                out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func unescape(_ s: Substring) throws(CallDataError) -> String {
        let bytes = Array(s.utf8)
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            switch bytes[i] {
            case UInt8(ascii: "+"):
                out.append(UInt8(ascii: " "))
                i += 1
            case UInt8(ascii: "%"):
                guard i + 2 < bytes.count, let h = hexValue(bytes[i + 1]), let l = hexValue(bytes[i + 2]) else {
                    throw .malformed("bad escape at byte \(i) of \"\(s)\"")
                }
                out.append(h << 4 | l)
                i += 3
            default:
                out.append(bytes[i])
                i += 1
            }
        }
        guard let text = String(validating: out, as: UTF8.self) else { throw .malformed("call data is not UTF-8") }
        return text
    }
}

/// Why call data could not be read or sent.
public enum CallDataError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Not form-encoded text, bad escapes or hex, or not UTF-8.
    case malformed(String)
    /// More than ``CallData/maximumEncodedSize`` bytes.
    case tooLarge(Int)
    /// The call was not placed: its phone is gone (an ``Account`` kept after its phone was released).
    case phoneClosed

    public var description: String {
        switch self {
        case .malformed(let why): return "malformed call data: \(why)"
        case .tooLarge(let n): return "call data of \(n) bytes is over \(CallData.maximumEncodedSize)"
        case .phoneClosed: return "the phone is closed"
        }
    }
}

extension SIPHeaderName {
    /// RFC 7433.
    static let userToUser = SIPHeaderName("User-to-User")
}
