/// One header line's place in a message's byte storage.
@usableFromInline
struct HeaderEntry: Sendable, BitwiseCopyable {
    /// ``KnownHeader`` raw value, or 0 for an extension header.
    @usableFromInline var known: UInt8
    @usableFromInline var nameStart: UInt32
    @usableFromInline var nameEnd: UInt32
    /// The value, without leading and trailing white space; for folded lines, an unfolded copy.
    @usableFromInline var valueStart: UInt32
    @usableFromInline var valueEnd: UInt32

    @inlinable var valueRange: Range<Int> { Int(valueStart)..<Int(valueEnd) }
    @inlinable var nameRange: Range<Int> { Int(nameStart)..<Int(nameEnd) }
}

/// The first line of a message.
public enum SIPStartLine: Sendable, Hashable {
    /// `Method SP Request-URI SP SIP-Version`.
    case request(method: SIPMethod, uri: String, version: SIPVersion)
    /// `SIP-Version SP Status-Code SP Reason-Phrase`.
    case response(version: SIPVersion, statusCode: Int, reasonPhrase: String)
}

@usableFromInline
enum StartLineIndex: Sendable {
    case request(method: SIPMethod, uri: Range<Int>, version: SIPVersion)
    case response(version: SIPVersion, code: Int, reason: Range<Int>)
}

/// A SIP request or response.
///
/// A parsed message keeps the bytes it arrived in and an index of its start line and header
/// lines, built in one pass; a header's structure is decoded only when asked for (``via()``,
/// ``cseq()``, ``from()``, …). An unmodified parsed message serializes to exactly the bytes it
/// was parsed from; a built or modified message serializes in canonical form (canonical header
/// names, `": "` separators, CRLF line ends, a Content-Length that matches the body).
public struct SIPMessage: Sendable {
    @usableFromInline var storage: [UInt8]
    @usableFromInline var entries: [HeaderEntry]
    @usableFromInline var startIndex: StartLineIndex
    @usableFromInline var bodyRange: Range<Int>
    /// The bytes the message was parsed from, while it has not been modified.
    @usableFromInline var pristineRange: Range<Int>?

    @usableFromInline
    init(storage: [UInt8], entries: [HeaderEntry], startIndex: StartLineIndex, bodyRange: Range<Int>, pristineRange: Range<Int>?) {
        self.storage = storage
        self.entries = entries
        self.startIndex = startIndex
        self.bodyRange = bodyRange
        self.pristineRange = pristineRange
    }

    // MARK: Start line

    /// Whether the message is a request.
    @inlinable public var isRequest: Bool {
        if case .request = startIndex { return true }
        return false
    }

    /// The request method, or `nil` for a response.
    @inlinable public var method: SIPMethod? {
        if case .request(let m, _, _) = startIndex { return m }
        return nil
    }

    /// The status code, or `nil` for a request.
    @inlinable public var statusCode: Int? {
        if case .response(_, let c, _) = startIndex { return c }
        return nil
    }

    /// The reason phrase of a response.
    public var reasonPhrase: String? {
        if case .response(_, _, let r) = startIndex { return String(sipBytes: storage[r]) }
        return nil
    }

    /// The SIP version of the start line.
    public var version: SIPVersion {
        switch startIndex {
        case .request(_, _, let v), .response(let v, _, _): return v
        }
    }

    /// The Request-URI exactly as written, for a request.
    public var requestURIText: String? {
        if case .request(_, let r, _) = startIndex { return String(sipBytes: storage[r]) }
        return nil
    }

    /// The Request-URI's bytes, for a request.
    public var requestURIBytes: ArraySlice<UInt8>? {
        if case .request(_, let r, _) = startIndex { return storage[r] }
        return nil
    }

    /// The decoded start line.
    public var startLine: SIPStartLine {
        switch startIndex {
        case .request(let m, let r, let v): return .request(method: m, uri: String(sipBytes: storage[r]), version: v)
        case .response(let v, let c, let r): return .response(version: v, statusCode: c, reasonPhrase: String(sipBytes: storage[r]))
        }
    }

    // MARK: Headers

    /// The number of header lines (a line holding a comma-separated list counts once).
    public var headerCount: Int { entries.count }

    /// A header line: its name as written and its value (unfolded, trimmed).
    public struct HeaderField: Sendable, Hashable {
        /// The name as written (compact forms stay compact).
        public var name: String
        /// The known header this names, if any.
        public var known: KnownHeader?
        /// The value, with folding replaced by single spaces and outer white space trimmed.
        public var value: String
    }

    /// Every header line, in order.
    public var headerFields: [HeaderField] {
        entries.map { e in
            HeaderField(name: String(sipBytes: storage[e.nameRange]), known: KnownHeader(rawValue: e.known), value: String(sipBytes: storage[e.valueRange]))
        }
    }

    func matches(_ e: HeaderEntry, _ name: SIPHeaderName) -> Bool {
        if let k = name.known { return e.known == k.rawValue }
        guard e.known == 0 else { return false }
        return storage[e.nameRange].lazy.map(lowerASCII).elementsEqual(name.extensionLowercased.utf8)
    }

    /// The first line's value bytes for a known header, without copying.
    @inlinable public func firstValueBytes(_ known: KnownHeader) -> ArraySlice<UInt8>? {
        // On the index's buffer: no iterator, no bounds check per entry.
        let k = known.rawValue
        let found: Range<Int>? = entries.withUnsafeBufferPointer { es in
            for e in es where e.known == k { return e.valueRange }
            return nil
        }
        guard let r = found else { return nil }
        return storage[r]
    }

    /// The value bytes of every line of a header, in order, without copying.
    public func valueBytes(_ name: SIPHeaderName) -> [ArraySlice<UInt8>] {
        entries.lazy.filter { self.matches($0, name) }.map { self.storage[$0.valueRange] }
    }

    /// The first value of a header, as text (the whole line for list headers).
    public subscript(_ name: SIPHeaderName) -> String? {
        for e in entries where matches(e, name) { return String(sipBytes: storage[e.valueRange]) }
        return nil
    }

    /// Every line's value of a header, as text, in order.
    public func values(_ name: SIPHeaderName) -> [String] {
        valueBytes(name).map { String(sipBytes: $0) }
    }

    /// Every element of a header, splitting each line of a list header at commas that are not
    /// inside quotes or angle brackets.
    public func elements(_ name: SIPHeaderName) -> [String] {
        elementBytes(name).map { String(sipBytes: $0) }
    }

    /// Like ``elements(_:)`` but returns byte slices of the storage.
    public func elementBytes(_ name: SIPHeaderName) -> [ArraySlice<UInt8>] {
        var out: [ArraySlice<UInt8>] = []
        let split = name.known?.isList ?? false
        for e in entries where matches(e, name) {
            if split { out.append(contentsOf: splitHeaderList(storage[e.valueRange])) } else { out.append(storage[e.valueRange]) }
        }
        return out
    }

    /// Whether any line of the header is present.
    public func contains(_ name: SIPHeaderName) -> Bool { entries.contains { matches($0, name) } }

    /// The number of lines of a header.
    public func count(of name: SIPHeaderName) -> Int { entries.reduce(0) { $0 + (matches($1, name) ? 1 : 0) } }

    // MARK: Body

    /// The body bytes (framed by Content-Length, or the rest of a datagram without one).
    public var body: ArraySlice<UInt8> { storage[bodyRange] }

    /// Whether the message is exactly as parsed (serialization returns the original bytes).
    public var isPristine: Bool { pristineRange != nil }
}
