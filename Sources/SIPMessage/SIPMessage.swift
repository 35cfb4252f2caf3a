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

/// A range of storage offsets in one word (each bound below 2^32, as ``SIPParserLimits/ceiling``
/// and ``HeaderEntry`` already require), so that ``SIPMessage`` stays small.
@usableFromInline
struct PackedRange: Sendable, BitwiseCopyable, Equatable {
    @usableFromInline var raw: UInt64

    @inlinable init(raw: UInt64) { self.raw = raw }

    @inlinable init(_ r: Range<Int>) {
        precondition(r.upperBound <= Int(UInt32.max) - 1, "a message's offsets must fit in 32 bits")
        raw = UInt64(truncatingIfNeeded: r.lowerBound) << 32 | UInt64(truncatingIfNeeded: r.upperBound)
    }

    /// Stands for `nil` (no real range has its lower bound at 2^32 - 1).
    @usableFromInline static let none = PackedRange(raw: .max)

    @inlinable var lowerBound: Int { Int(truncatingIfNeeded: raw >> 32) }
    @inlinable var upperBound: Int { Int(truncatingIfNeeded: raw & 0xFFFF_FFFF) }
    @inlinable var range: Range<Int> { lowerBound..<upperBound }
    @inlinable var count: Int { upperBound &- lowerBound }
}

/// The start line's scalars in one word: whether it is a request; the method's code
/// (``SIPMethod/code``, 0 for an extension method, whose token is read from storage) or the
/// status code; the version.
@usableFromInline
struct StartWord: Sendable, BitwiseCopyable, Equatable {
    @usableFromInline var raw: UInt64

    @usableFromInline static let requestBit: UInt64 = 1 << 63

    @inlinable init(request code: UInt8, version: SIPVersion) {
        raw = StartWord.requestBit | UInt64(version.major) << 32 | UInt64(version.minor) << 16 | UInt64(code)
    }

    @inlinable init(response code: Int, version: SIPVersion) {
        raw = UInt64(version.major) << 32 | UInt64(version.minor) << 16 | UInt64(UInt16(truncatingIfNeeded: code))
    }

    @inlinable var isRequest: Bool { raw & StartWord.requestBit != 0 }
    /// The method's code (requests) or the status code (responses).
    @inlinable var low: Int { Int(truncatingIfNeeded: raw & 0xFFFF) }
    @inlinable var version: SIPVersion {
        SIPVersion(major: UInt16(truncatingIfNeeded: raw >> 32), minor: UInt16(truncatingIfNeeded: raw >> 16))
    }
}

/// A SIP request or response.
///
/// A parsed message keeps the bytes it arrived in and an index of its start line and header
/// lines, built in one pass; a header's structure is decoded only when asked for (``via()``,
/// ``cseq()``, ``from()``, …). An unmodified parsed message serializes to exactly the bytes it
/// was parsed from; a built or modified message serializes in canonical form (canonical header
/// names, `": "` separators, CRLF line ends, a Content-Length that matches the body).
public struct SIPMessage: Sendable {
    // Six words in all: a struct of more than six scalars that another module copies or
    // destroys goes through its runtime value witnesses (an indirect call and a metadata
    // look-up each time) instead of inline code, and messages are copied on every hop.
    @usableFromInline var storage: [UInt8]
    @usableFromInline var entries: [HeaderEntry]
    @usableFromInline var head: StartWord
    /// A request's method token and Request-URI (`METHOD SP URI`, the URI starting after the
    /// first space); a response's reason phrase.
    @usableFromInline var lineSpan: PackedRange
    @usableFromInline var bodySpan: PackedRange
    /// The bytes the message was parsed from, while it has not been modified (``PackedRange/none``
    /// otherwise).
    @usableFromInline var pristineSpan: PackedRange

    /// `startIndex` of an extension method must find the token right before the URI and a
    /// space, in storage (the parser, the builders and ``forwarded(_:)`` write it there).
    @usableFromInline
    init(storage: [UInt8], entries: [HeaderEntry], startIndex: StartLineIndex, bodyRange: Range<Int>, pristineRange: Range<Int>?) {
        self.storage = storage
        self.entries = entries
        switch startIndex {
        case .request(let m, let uri, let v):
            head = StartWord(request: m.code, version: v)
            let start = uri.lowerBound - 1 - m.token.utf8.count
            assert(start >= 0 && storage[uri.lowerBound - 1] == 0x20, "the method token precedes the Request-URI in storage")
            lineSpan = PackedRange(start..<uri.upperBound)
        case .response(let v, let c, let r):
            head = StartWord(response: c, version: v)
            lineSpan = PackedRange(r)
        }
        bodySpan = PackedRange(bodyRange)
        pristineSpan = pristineRange.map(PackedRange.init) ?? .none
    }

    /// The body's offsets in storage.
    @inlinable var bodyRange: Range<Int> {
        get { bodySpan.range }
        set { bodySpan = PackedRange(newValue) }
    }

    /// The bytes the message was parsed from, while it has not been modified.
    @inlinable var pristineRange: Range<Int>? {
        get { pristineSpan == .none ? nil : pristineSpan.range }
        set { pristineSpan = newValue.map(PackedRange.init) ?? .none }
    }

    /// A request's Request-URI offsets: after the method token and its space.
    @inlinable var uriRange: Range<Int> {
        let lo = lineSpan.lowerBound, hi = lineSpan.upperBound
        let known = SIPMethod.tokenLength(code: head.low)
        if known > 0 { return (lo &+ known &+ 1)..<hi }
        var k = lo
        while k < hi, storage[k] != 0x20 { k &+= 1 }
        return (k &+ 1)..<hi
    }

    /// The start line's index, unpacked.
    var startIndex: StartLineIndex {
        if head.isRequest {
            return .request(method: requestMethod, uri: uriRange, version: head.version)
        }
        return .response(version: head.version, code: head.low, reason: lineSpan.range)
    }

    /// The method of a request (the code's, or the extension token from storage).
    @inlinable var requestMethod: SIPMethod {
        if let m = SIPMethod(code: head.low) { return m }
        return extensionMethod
    }

    @usableFromInline var extensionMethod: SIPMethod {
        .extension(String(sipBytes: storage[lineSpan.lowerBound..<(uriRange.lowerBound &- 1)]))
    }

    // MARK: Start line

    /// Whether the message is a request.
    @inlinable public var isRequest: Bool { head.isRequest }

    /// The request method, or `nil` for a response.
    @inlinable public var method: SIPMethod? {
        head.isRequest ? requestMethod : nil
    }

    /// The status code, or `nil` for a request.
    @inlinable public var statusCode: Int? {
        head.isRequest ? nil : head.low
    }

    /// The reason phrase of a response.
    public var reasonPhrase: String? {
        head.isRequest ? nil : String(sipBytes: storage[lineSpan.range])
    }

    /// The SIP version of the start line.
    public var version: SIPVersion { head.version }

    /// The Request-URI exactly as written, for a request.
    public var requestURIText: String? {
        head.isRequest ? String(sipBytes: storage[uriRange]) : nil
    }

    /// The Request-URI's bytes, for a request.
    public var requestURIBytes: ArraySlice<UInt8>? {
        head.isRequest ? storage[uriRange] : nil
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
