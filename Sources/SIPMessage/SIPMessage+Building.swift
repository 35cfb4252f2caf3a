/// Building and changing messages, and writing them out.
extension SIPMessage {
    /// Creates a request with a start line and no headers; add headers with ``append(_:_:)``.
    /// - Throws: ``SIPParseError`` (`method` or `requestLine`) when the method is not a token or
    ///   the URI's text holds white space or control bytes (a host built from unchecked text).
    public init(method: SIPMethod, uri: URI) throws(SIPParseError) {
        try self.init(method: method, requestURI: uri.description)
    }

    /// Creates a request with a SIP URI.
    public init(method: SIPMethod, uri: SIPURI) throws(SIPParseError) {
        try self.init(method: method, requestURI: uri.description)
    }

    init(method: SIPMethod, uriText: String) {
        // The method's token and a space first: an extension method is read back from them.
        let token = method.token.utf8
        var bytes: [UInt8] = []
        bytes.reserveCapacity(token.count + 1 + uriText.utf8.count)
        bytes.append(contentsOf: token)
        bytes.append(0x20)
        let uriStart = bytes.count
        bytes.append(contentsOf: uriText.utf8)
        self.init(storage: bytes, entries: [], startIndex: .request(method: method, uri: uriStart..<bytes.count, version: .sip20),
                  bodyRange: bytes.count..<bytes.count, pristineRange: nil)
    }

    /// Creates a response with a status code (100-699) and a reason phrase.
    /// - Precondition: `statusCode` is in 100...699 and the reason phrase holds no line break.
    public init(statusCode: Int, reasonPhrase: String? = nil) {
        self.init(statusCode: statusCode, reasonPhrase: reasonPhrase, capacity: 0, headers: 0)
    }

    /// A response with room for `capacity` more bytes and `headers` header lines, so that
    /// filling it in does not grow its buffers (one allocation each).
    init(statusCode: Int, reasonPhrase: String?, capacity: Int, headers: Int) {
        precondition((100...699).contains(statusCode), "status code must be 100-699")
        let text = SIPMessage.oneLine(reasonPhrase ?? SIPMessage.defaultReasonPhrase(statusCode))
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count + capacity)
        bytes.append(contentsOf: text.utf8)
        var entries: [HeaderEntry] = []
        entries.reserveCapacity(headers)
        self.init(storage: bytes, entries: entries, startIndex: .response(version: .sip20, code: statusCode, reason: 0..<bytes.count),
                  bodyRange: bytes.count..<bytes.count, pristineRange: nil)
    }

    /// Drops control characters other than HTAB, so that text cannot break out of its line or
    /// make the line unparseable.
    static func oneLine(_ s: String) -> String {
        if allUTF8(s, { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) { return s }
        var out = String.UnicodeScalarView()
        for u in s.unicodeScalars where u == "\t" || (u.value >= 0x20 && u.value != 0x7F) { out.append(u) }
        return String(out)
    }

    /// Checks that a header value can be written on one line.
    static func checkValue(_ value: String) throws(SIPParseError) {
        // One pass over the contiguous UTF-8 (an enumerated `utf8` view cost more than the
        // rest of building a header line).
        var text = value
        let bad = text.withUTF8 { bytes -> Int? in
            for k in bytes.indices {
                let b = bytes[k]
                if b <= 0x0D, b == 0x0D || b == 0x0A || b == 0 { return k }
            }
            return nil
        }
        if let k = bad {
            throw SIPParseError(offset: k, rule: .headerValue, detail: "a header value cannot hold CR, LF or NUL")
        }
    }

    /// Appends a header line.
    /// - Throws: ``SIPParseError`` with rule `headerValue` when the value holds CR, LF or NUL,
    ///   or `headerName` when an extension name is not a token.
    public mutating func append(_ name: SIPHeaderName, _ value: String) throws(SIPParseError) {
        try SIPMessage.checkValue(value)
        if let first = value.utf8.first, isWS(first) { throw SIPParseError(offset: 0, rule: .headerValue, detail: "a header value cannot start with white space") }
        if let last = value.utf8.last, isWS(last) { throw SIPParseError(offset: value.utf8.count - 1, rule: .headerValue, detail: "a header value cannot end with white space") }
        if name.known == nil {
            guard !name.spelling.isEmpty, allUTF8(name.spelling, isTokenByte) else {
                throw SIPParseError(offset: 0, rule: .headerName, detail: "header name must be a token")
            }
        }
        appendUnchecked(name, value)
    }

    /// Appends a header line checked once beforehand (see ``PreparedHeader``): one copy of its
    /// bytes, no check and no conversion.
    public mutating func append(_ header: PreparedHeader) {
        let ns = storage.count
        storage.append(contentsOf: header.line)
        let vs = ns + header.nameCount
        entries.append(HeaderEntry(known: header.known, nameStart: UInt32(ns), nameEnd: UInt32(vs), valueStart: UInt32(vs), valueEnd: UInt32(storage.count)))
        pristineRange = nil
    }

    /// Appends a header whose value is a typed value, written through its `description`.
    /// - Throws: ``SIPParseError`` when the written value would break the line (CR, LF, NUL
    ///   from unchecked text inside the value) or an extension name is not a token.
    public mutating func append(_ name: SIPHeaderName, _ value: some CustomStringConvertible & Sendable) throws(SIPParseError) {
        try append(name, value.description)
    }

    mutating func appendUnchecked(_ name: SIPHeaderName, _ value: String) {
        let ns = storage.count
        appendText(name.spelling)
        let vs = storage.count
        appendText(value)
        entries.append(HeaderEntry(known: name.known?.rawValue ?? 0, nameStart: UInt32(ns), nameEnd: UInt32(vs), valueStart: UInt32(vs), valueEnd: UInt32(storage.count)))
        pristineRange = nil
    }

    /// Appends a string's UTF-8 bytes to the storage as one block copy (appending its
    /// `utf8` view goes byte by byte through the generic path).
    @inline(__always)
    mutating func appendText(_ text: String) {
        var t = text
        t.withUTF8 { storage.append(contentsOf: $0) }
    }

    /// Inserts a header line before every other line of the same name (a proxy adding its Via).
    public mutating func prepend(_ name: SIPHeaderName, _ value: String) throws(SIPParseError) {
        try append(name, value)
        let e = entries.removeLast()
        let at = entries.firstIndex { matches($0, name) } ?? entries.count
        entries.insert(e, at: at)
    }

    /// Replaces every line of a header with one line holding `value`, at the first line's place.
    public mutating func set(_ name: SIPHeaderName, _ value: String) throws(SIPParseError) {
        try append(name, value)
        let e = entries.removeLast()
        if let at = entries.firstIndex(where: { matches($0, name) }) {
            entries[at] = e
            var k = entries.count - 1
            while k > at { if matches(entries[k], name) { entries.remove(at: k) }; k -= 1 }
        } else {
            entries.append(e)
        }
    }

    /// Removes every line of a header.
    public mutating func remove(_ name: SIPHeaderName) {
        let before = entries.count
        let keep = entries.filter { !matches($0, name) }
        entries = keep
        if entries.count != before { pristineRange = nil }
    }

    /// Removes the first element of a header (the top Via of a response a proxy forwards):
    /// the first element of the first line, or the whole line when it holds one element.
    public mutating func removeFirstElement(_ name: SIPHeaderName) {
        guard let at = entries.firstIndex(where: { matches($0, name) }) else { return }
        // Only the second element's start matters: the walk stops there, nothing is collected.
        var second: Int?, seen = 0
        forEachListElement(storage[entries[at].valueRange]) { el in
            seen += 1
            if seen == 2 { second = el.startIndex; return false }
            return true
        }
        pristineRange = nil
        if let start = second {
            entries[at].valueStart = UInt32(start)
        } else {
            entries.remove(at: at)
        }
    }

    /// Replaces the first element of a header (a proxy or server stamping `received` and
    /// `rport` into the top Via), keeping the other elements of that line.
    public mutating func replaceFirstElement(_ name: SIPHeaderName, with value: String) {
        guard let at = entries.firstIndex(where: { matches($0, name) }) else { return }
        let els = splitHeaderList(storage[entries[at].valueRange])
        var text = Array(SIPMessage.oneLine(value).utf8)
        if els.count > 1 {
            text.append(contentsOf: ", ".utf8)
            text.append(contentsOf: storage[els[1].startIndex..<entries[at].valueRange.upperBound])
        }
        let start = storage.count
        storage.append(contentsOf: text)
        entries[at].valueStart = UInt32(start)
        entries[at].valueEnd = UInt32(storage.count)
        pristineRange = nil
    }

    /// Sets the body; Content-Length follows it when the message is written.
    public mutating func setBody(_ bytes: [UInt8], contentType: MediaType? = nil) {
        let s = storage.count
        let type = contentType?.description
        // One growth at most, for the body and the Content-Type line together.
        storage.reserveCapacity(s + bytes.count + (type.map { $0.utf8.count + 12 } ?? 0))
        storage.append(contentsOf: bytes)
        bodyRange = s..<storage.count
        if let type { appendUncheckedReplacing(.contentType, type) }
        pristineRange = nil
    }

    mutating func appendUncheckedReplacing(_ name: SIPHeaderName, _ value: String) {
        // In place: filtering into a new array grew it line by line, then again for the append.
        var kept = 0
        for k in entries.indices where !matches(entries[k], name) {
            entries[kept] = entries[k]
            kept += 1
        }
        if kept < entries.count { entries.removeLast(entries.count - kept) }
        appendUnchecked(name, value)
    }

    // MARK: Writing

    /// The message's bytes: the original bytes for an unmodified parsed message, otherwise the
    /// canonical form with a Content-Length matching the body.
    public func serialized() -> [UInt8] {
        if let r = pristineRange { return Array(storage[r]) }
        // Two passes over the header index: the exact length, then one copy of each piece
        // into an array of that size (appending piece by piece cost several times more).
        let sip20 = "SIP/2.0"
        var total = 2
        switch startIndex {
        case .request(let m, let uri, let v):
            total += m.token.utf8.count + 1 + uri.count + 1 + (v == .sip20 ? sip20.utf8.count : v.description.utf8.count)
        case .response(let v, let c, let reason):
            total += (v == .sip20 ? sip20.utf8.count : v.description.utf8.count) + 1 + SIPMessage.decimalCount(c) + 1 + reason.count
        }
        let lengthName = KnownHeader.contentLength.canonicalName
        let lengthLine = lengthName.utf8.count + 2 + SIPMessage.decimalCount(bodyRange.count) + 2
        var wroteLength = false
        // Known names come from the table of canonical names (one copy each, no String).
        let names = CanonicalNames.table
        for e in entries {
            if e.known == KnownHeader.contentLength.rawValue {
                if !wroteLength { total += lengthLine }
                wroteLength = true
                continue
            }
            let known = names.range(e.known).count
            let name = known > 0 ? known : Int(e.nameEnd - e.nameStart)
            total += name + 2 + Int(e.valueEnd - e.valueStart) + 2
        }
        if !wroteLength { total += lengthLine }
        total += 2 + bodyRange.count
        return storage.withUnsafeBufferPointer { src in names.bytes.withUnsafeBufferPointer { nameBytes in
            makeArray(capacity: total) { out in
                var w = ByteWriter(out.baseAddress!)
                switch startIndex {
                case .request(let m, let uri, let v):
                    w.put(m.token); w.put(0x20)
                    w.put(src, uri); w.put(0x20)
                    w.put(v == .sip20 ? sip20 : v.description)
                case .response(let v, let c, let reason):
                    w.put(v == .sip20 ? sip20 : v.description); w.put(0x20)
                    w.putDecimal(c); w.put(0x20)
                    w.put(src, reason)
                }
                w.put(0x0D); w.put(0x0A)
                var wroteLength = false
                func lengthHeader(_ w: inout ByteWriter) {
                    w.put(lengthName); w.put(0x3A); w.put(0x20)
                    w.putDecimal(bodyRange.count); w.put(0x0D); w.put(0x0A)
                }
                for e in entries {
                    if e.known == KnownHeader.contentLength.rawValue {
                        if !wroteLength { lengthHeader(&w) }
                        wroteLength = true
                        continue
                    }
                    let known = names.range(e.known)
                    if known.isEmpty { w.put(src, e.nameRange) } else { w.put(nameBytes, known) }
                    w.put(0x3A); w.put(0x20)
                    w.put(src, e.valueRange)
                    w.put(0x0D); w.put(0x0A)
                }
                if !wroteLength { lengthHeader(&w) }
                w.put(0x0D); w.put(0x0A)
                w.put(src, bodyRange)
                assert(w.count == total, "serialized length")
                return w.count
            }
        } }
    }

    /// The number of characters of `n` in decimal (a minus sign counted).
    static func decimalCount(_ n: Int) -> Int { (n < 0 ? 1 : 0) + digitCount(n.magnitude) }

    /// The number of decimal digits of `v`.
    static func digitCount(_ v: UInt) -> Int {
        var v = v, digits = 1
        while v >= 10 { v /= 10; digits += 1 }
        return digits
    }

    /// The canonical form even for an unmodified parsed message (canonical header names,
    /// `": "`, CRLF, folding removed, Content-Length matching the body).
    public func serializedCanonically() -> [UInt8] {
        var copy = self
        copy.pristineRange = nil
        return copy.serialized()
    }

    /// The message as text (the serialized bytes decoded as UTF-8).
    public var text: String { String(decoding: serialized(), as: UTF8.self) }

    /// The reason phrase RFC 3261 §21 gives a status code.
    public static func defaultReasonPhrase(_ code: Int) -> String {
        switch code {
        case 100: return "Trying"
        case 180: return "Ringing"
        case 181: return "Call Is Being Forwarded"
        case 182: return "Queued"
        case 183: return "Session Progress"
        case 199: return "Early Dialog Terminated"
        case 200: return "OK"
        case 202: return "Accepted"
        case 204: return "No Notification"
        case 300: return "Multiple Choices"
        case 301: return "Moved Permanently"
        case 302: return "Moved Temporarily"
        case 305: return "Use Proxy"
        case 380: return "Alternative Service"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 402: return "Payment Required"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 406: return "Not Acceptable"
        case 407: return "Proxy Authentication Required"
        case 408: return "Request Timeout"
        case 410: return "Gone"
        case 412: return "Conditional Request Failed"
        case 413: return "Request Entity Too Large"
        case 414: return "Request-URI Too Long"
        case 415: return "Unsupported Media Type"
        case 416: return "Unsupported URI Scheme"
        case 420: return "Bad Extension"
        case 421: return "Extension Required"
        case 422: return "Session Interval Too Small"
        case 423: return "Interval Too Brief"
        case 480: return "Temporarily Unavailable"
        case 481: return "Call/Transaction Does Not Exist"
        case 482: return "Loop Detected"
        case 483: return "Too Many Hops"
        case 484: return "Address Incomplete"
        case 485: return "Ambiguous"
        case 486: return "Busy Here"
        case 487: return "Request Terminated"
        case 488: return "Not Acceptable Here"
        case 489: return "Bad Event"
        case 491: return "Request Pending"
        case 493: return "Undecipherable"
        case 500: return "Server Internal Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Server Time-out"
        case 505: return "Version Not Supported"
        case 513: return "Message Too Large"
        case 600: return "Busy Everywhere"
        case 603: return "Decline"
        case 604: return "Does Not Exist Anywhere"
        case 606: return "Not Acceptable"
        default:
            switch code / 100 {
            case 1: return "Progress"
            case 2: return "Success"
            case 3: return "Redirection"
            case 4: return "Client Error"
            case 5: return "Server Error"
            default: return "Global Failure"
            }
        }
    }
}

/// Writes bytes into memory sized beforehand (``SIPMessage/serialized()``).
struct ByteWriter {
    let base: UnsafeMutablePointer<UInt8>
    var count = 0

    init(_ base: UnsafeMutablePointer<UInt8>) { self.base = base }

    mutating func put(_ b: UInt8) {
        base[count] = b
        count += 1
    }

    mutating func put(_ src: UnsafeBufferPointer<UInt8>, _ r: Range<Int>) {
        guard !r.isEmpty else { return }
        (base + count).update(from: src.baseAddress! + r.lowerBound, count: r.count)
        count += r.count
    }

    mutating func put(_ s: String) {
        var s = s
        s.withUTF8 { u in
            guard let p = u.baseAddress, u.count > 0 else { return }
            (base + count).update(from: p, count: u.count)
            count += u.count
        }
    }

    /// `n` in decimal.
    mutating func putDecimal(_ n: Int) {
        if n < 0 { put(UInt8(ascii: "-")) }
        var v = n.magnitude
        let digits = SIPMessage.digitCount(v)
        var i = count + digits - 1
        repeat {
            base[i] = UInt8(truncatingIfNeeded: v % 10) + 0x30
            v /= 10
            i -= 1
        } while v > 0
        count += digits
    }
}

/// A header line checked once and kept as the bytes a message stores, for a header a program
/// adds to many messages (its Contact, Allow, Supported, Server): `SIPMessage.append(_:)`
/// copies them, where `SIPMessage.append(_:_:)` checks the value and converts it on every
/// message.
public struct PreparedHeader: Sendable, Hashable {
    @usableFromInline let known: UInt8
    @usableFromInline let nameCount: Int
    /// The name as a message stores it (nothing for a known header) and the value, in one array.
    @usableFromInline let line: [UInt8]

    /// Checks `value` as `SIPMessage.append(_:_:)` does.
    /// - Throws: ``SIPParseError`` when that append would.
    public init(_ name: SIPHeaderName, _ value: String) throws(SIPParseError) {
        var probe = SIPMessage(statusCode: 200)
        try probe.append(name, value)
        let e = probe.entries[probe.entries.count - 1]
        known = e.known
        nameCount = Int(e.nameEnd - e.nameStart)
        line = Array(probe.storage[Int(e.nameStart)..<Int(e.valueEnd)])
    }

    /// The header's value.
    public var value: String { String(decoding: line[nameCount...], as: UTF8.self) }
}
