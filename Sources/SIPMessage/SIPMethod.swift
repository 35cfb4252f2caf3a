/// A SIP request method. Methods are case-sensitive tokens (RFC 3261 §7.1); the well-known ones
/// have their own cases, anything else is an ``extension(_:)``.
public enum SIPMethod: Sendable, Hashable, CustomStringConvertible {
    case invite, ack, bye, cancel, register, options, info, update, prack
    case subscribe, notify, refer, message, publish
    /// A method the stack does not know (still a valid token).
    case `extension`(String)

    /// Creates a method from its token, which must be non-empty and hold only token bytes.
    public init?(_ token: String) {
        var t = token
        guard let m = t.withUTF8({ SIPMethod(bytes: UnsafeRawBufferPointer($0)) }) else { return nil }
        self = m
    }

    /// Creates a method from token bytes; `nil` when empty or not a token.
    public init?(bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return nil }
        for b in bytes where !isTokenByte(b) { return nil }
        if let known = SIPMethod.known(bytes) { self = known } else { self = .extension(String(sipBytes: bytes)) }
    }

    @inline(__always)
    static func known(_ b: UnsafeRawBufferPointer) -> SIPMethod? {
        @inline(__always) func eq(_ s: StaticString) -> Bool {
            guard b.count == s.utf8CodeUnitCount else { return false }
            return memcmpBytes(b.baseAddress!, s.utf8Start, b.count)
        }
        switch b.count {
        case 3: if eq("BYE") { return .bye }; if eq("ACK") { return .ack }
        case 4: if eq("INFO") { return .info }
        case 5: if eq("PRACK") { return .prack }; if eq("REFER") { return .refer }
        case 6: if eq("INVITE") { return .invite }; if eq("CANCEL") { return .cancel }; if eq("UPDATE") { return .update }; if eq("NOTIFY") { return .notify }
        case 7: if eq("OPTIONS") { return .options }; if eq("MESSAGE") { return .message }; if eq("PUBLISH") { return .publish }
        case 8: if eq("REGISTER") { return .register }
        case 9: if eq("SUBSCRIBE") { return .subscribe }
        default: break
        }
        return nil
    }

    /// The method's token as written on the wire.
    public var token: String {
        switch self {
        case .invite: return "INVITE"
        case .ack: return "ACK"
        case .bye: return "BYE"
        case .cancel: return "CANCEL"
        case .register: return "REGISTER"
        case .options: return "OPTIONS"
        case .info: return "INFO"
        case .update: return "UPDATE"
        case .prack: return "PRACK"
        case .subscribe: return "SUBSCRIBE"
        case .notify: return "NOTIFY"
        case .refer: return "REFER"
        case .message: return "MESSAGE"
        case .publish: return "PUBLISH"
        case .extension(let s): return s
        }
    }

    public var description: String { token }

    /// A number for each known method (1…14) and 0 for an extension method: how a message
    /// keeps its method in one word.
    @inlinable package var code: UInt8 {
        switch self {
        case .invite: return 1
        case .ack: return 2
        case .bye: return 3
        case .cancel: return 4
        case .register: return 5
        case .options: return 6
        case .info: return 7
        case .update: return 8
        case .prack: return 9
        case .subscribe: return 10
        case .notify: return 11
        case .refer: return 12
        case .message: return 13
        case .publish: return 14
        case .extension: return 0
        }
    }

    /// The known method of a ``code``; `nil` for 0 (an extension method) and unused codes.
    @inlinable init?(code: Int) {
        switch code {
        case 1: self = .invite
        case 2: self = .ack
        case 3: self = .bye
        case 4: self = .cancel
        case 5: self = .register
        case 6: self = .options
        case 7: self = .info
        case 8: self = .update
        case 9: self = .prack
        case 10: self = .subscribe
        case 11: self = .notify
        case 12: self = .refer
        case 13: self = .message
        case 14: self = .publish
        default: return nil
        }
    }

    /// The length of a known method's token, by ``code``; 0 for an extension method.
    @inlinable static func tokenLength(code: Int) -> Int {
        // INVITE ACK BYE CANCEL REGISTER OPTIONS INFO UPDATE PRACK SUBSCRIBE NOTIFY REFER MESSAGE PUBLISH
        switch code {
        case 1: return 6
        case 2, 3: return 3
        case 4: return 6
        case 5: return 8
        case 6: return 7
        case 7: return 4
        case 8: return 6
        case 9: return 5
        case 10: return 9
        case 11: return 6
        case 12: return 5
        case 13, 14: return 7
        default: return 0
        }
    }
}

@inline(__always)
func memcmpBytes(_ a: UnsafeRawPointer, _ b: UnsafePointer<UInt8>, _ n: Int) -> Bool {
    var i = 0
    while i < n {
        if a.load(fromByteOffset: i, as: UInt8.self) != b[i] { return false }
        i += 1
    }
    return true
}
