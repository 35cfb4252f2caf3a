import SIPMessage

/// A `Target-Dialog` header value (RFC 4538): the dialog a request outside any dialog (an
/// out-of-dialog REFER) claims to know, which the recipient uses to authorize it.
///
/// `Target-Dialog = callid *(SEMI td-param)`, `td-param = remote-param / local-param /
/// generic-param`, `local-param = "local-tag" EQUAL token`, `remote-param = "remote-tag" EQUAL
/// token` (RFC 4538 §7). The tags are written from the point of view of the request's
/// *recipient*: `local-tag` is the recipient's own tag in that dialog, `remote-tag` its peer's
/// — so the peer of the dialog, sending it, writes its own tag as `remote-tag`.
public struct TargetDialog: Sendable, Hashable, CustomStringConvertible {
    /// The dialog's Call-ID.
    public var callID: String
    /// The recipient's tag in the dialog.
    public var localTag: String
    /// The tag of the recipient's peer in the dialog.
    public var remoteTag: String
    /// Other parameters, kept in order (`name`, `value` or nil for a bare name).
    public var parameters: [(name: String, value: String?)]

    /// Longest value read (a Call-ID and two tags fit many times over): longer is refused.
    public static let maximumLength = 1024

    public init(callID: String, localTag: String, remoteTag: String, parameters: [(name: String, value: String?)] = []) {
        self.callID = callID
        self.localTag = localTag
        self.remoteTag = remoteTag
        self.parameters = parameters
    }

    /// The value a party of the dialog writes when it sends a request to its peer about it:
    /// `key` is the sender's side (Call-ID and its tag), `remoteTag` the peer's tag. The peer,
    /// receiving it, finds its own tag in `local-tag`.
    public static func naming(_ key: SessionKey, remoteTag: String) -> TargetDialog {
        TargetDialog(callID: key.callID, localTag: remoteTag, remoteTag: key.localTag)
    }

    /// Whether this names the dialog the recipient holds as `key` (Call-ID and its tag) with
    /// the peer tag `remoteTag`. Call-IDs and tags compare byte for byte (RFC 3261 §19.3).
    public func names(_ key: SessionKey, remoteTag: String?) -> Bool {
        callID == key.callID && localTag == key.localTag && self.remoteTag == remoteTag
    }

    public var description: String {
        var s = "\(callID);local-tag=\(localTag);remote-tag=\(remoteTag)"
        for p in parameters { s += p.value.map { ";\(p.name)=\($0)" } ?? ";\(p.name)" }
        return s
    }

    public static func == (a: TargetDialog, b: TargetDialog) -> Bool {
        a.callID == b.callID && a.localTag == b.localTag && a.remoteTag == b.remoteTag
            && a.parameters.map(\.name) == b.parameters.map(\.name) && a.parameters.map(\.value) == b.parameters.map(\.value)
    }

    public func hash(into h: inout Hasher) {
        h.combine(callID)
        h.combine(localTag)
        h.combine(remoteTag)
    }

    /// Reads a value; a typed error names the rule and the byte (from the start of `text`).
    /// Tolerant of whitespace around `;` and `=` and of parameter names in any case; strict on
    /// the Call-ID (a `word [@ word]`), the tags (tokens, each exactly once) and the length.
    public init(_ text: String) throws(SIPParseError) {
        let b = Array(text.utf8)
        guard b.count <= Self.maximumLength else {
            throw SIPParseError(offset: Self.maximumLength, rule: .lineTooLong, detail: "Target-Dialog longer than \(Self.maximumLength) bytes")
        }
        var i = 0
        func skipWS() { while i < b.count, b[i] == 0x20 || b[i] == 0x09 { i += 1 } }
        func take(_ ok: (UInt8) -> Bool) -> String {
            let start = i
            while i < b.count, ok(b[i]) { i += 1 }
            return String(decoding: b[start..<i], as: UTF8.self)
        }
        skipWS()
        let idStart = i
        let first = take(Self.isWord)
        guard !first.isEmpty else { throw SIPParseError(offset: idStart, rule: .headerStructure, detail: "expected a Call-ID in Target-Dialog") }
        var id = first
        if i < b.count, b[i] == UInt8(ascii: "@") {
            i += 1
            let host = take(Self.isWord)
            guard !host.isEmpty else { throw SIPParseError(offset: i, rule: .headerStructure, detail: "expected a word after @ in the Call-ID") }
            id += "@" + host
        }
        var local: String?, remote: String?
        var params: [(name: String, value: String?)] = []
        skipWS()
        while i < b.count {
            guard b[i] == UInt8(ascii: ";") else {
                throw SIPParseError(offset: i, rule: .headerStructure, detail: "expected ; in Target-Dialog")
            }
            i += 1
            skipWS()
            let nameAt = i
            let name = take(Self.isToken)
            guard !name.isEmpty else { throw SIPParseError(offset: nameAt, rule: .parameter, detail: "empty parameter name in Target-Dialog") }
            skipWS()
            var value: String?
            if i < b.count, b[i] == UInt8(ascii: "=") {
                i += 1
                skipWS()
                let valueAt = i
                if i < b.count, b[i] == UInt8(ascii: "\"") {
                    // A generic-param may be a quoted-string; the tags may not.
                    i += 1
                    while i < b.count, b[i] != UInt8(ascii: "\"") { i += b[i] == UInt8(ascii: "\\") ? 2 : 1 }
                    guard i < b.count else { throw SIPParseError(offset: valueAt, rule: .quotedString, detail: "unterminated quoted string in Target-Dialog") }
                    i += 1
                    value = String(decoding: b[valueAt..<i], as: UTF8.self)
                } else {
                    let v = take { Self.isToken($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "[") || $0 == UInt8(ascii: "]") }
                    guard !v.isEmpty else { throw SIPParseError(offset: valueAt, rule: .parameter, detail: "empty value for \(name) in Target-Dialog") }
                    value = v
                }
                skipWS()
            }
            switch name.lowercased() {
            case "local-tag", "remote-tag":
                let isLocal = name.lowercased() == "local-tag"
                guard let v = value, v.utf8.allSatisfy(Self.isToken) else {
                    throw SIPParseError(offset: nameAt, rule: .token, detail: "\(name.lowercased()) must be a token")
                }
                guard (isLocal ? local : remote) == nil else {
                    throw SIPParseError(offset: nameAt, rule: .parameter, detail: "\(name.lowercased()) given twice")
                }
                if isLocal { local = v } else { remote = v }
            default:
                params.append((name, value))
            }
        }
        guard let local else { throw SIPParseError(offset: b.count, rule: .headerStructure, detail: "Target-Dialog needs local-tag") }
        guard let remote else { throw SIPParseError(offset: b.count, rule: .headerStructure, detail: "Target-Dialog needs remote-tag") }
        self.init(callID: id, localTag: local, remoteTag: remote, parameters: params)
    }

    /// The `Target-Dialog` of a request: nil without one; a typed error when it does not parse
    /// or appears more than once.
    public static func read(_ m: SIPMessage) throws(SIPParseError) -> TargetDialog? {
        let values = m.values(SIPHeaderName("Target-Dialog"))
        guard let v = values.first else { return nil }
        guard values.count == 1 else { throw SIPParseError(offset: 0, rule: .duplicateHeader, detail: "more than one Target-Dialog") }
        return try TargetDialog(v)
    }

    /// RFC 3261 `token` bytes.
    static func isToken(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): return true
        default: return Array("-.!%*_+`'~".utf8).contains(c)
        }
    }

    /// RFC 3261 `word` bytes (the Call-ID's).
    static func isWord(_ c: UInt8) -> Bool {
        isToken(c) || Array("()<>:\\\"/[]?{}".utf8).contains(c)
    }
}
