/// A parsed or hand-built SDP session description (RFC 8866).
///
/// Parse with `SessionDescription.parse(_:limits:)` (from bytes or a
/// string), serialize with ``serialized()`` or
/// ``description``. Serialization writes the RFC 8866 field order with CRLF
/// line endings; attributes and unknown lines keep their order, so a
/// canonical input re-serializes byte for byte and `parse(serialized())`
/// always gives back an equal value.
///
/// ```swift
/// let offer = try SessionDescription.parse(body)
/// for media in offer.media where !media.isRejected {
///     let address = offer.connection(for: media)?.address
///     let direction = offer.effectiveDirection(for: media)
///     let codecs = media.codecs
/// }
/// ```
public struct SessionDescription: Hashable, Sendable, SDPAttributeContainer, CustomStringConvertible {
    /// The protocol version: always 0 (`v=0`).
    public var version: Int { 0 }
    /// The `o=` line.
    public var origin: Origin
    /// The `s=` line (may be empty when parsed from lenient peers; `-` or a space is customary).
    public var sessionName: String
    /// The `i=` line.
    public var information: String?
    /// The `u=` line, verbatim.
    public var uri: String?
    /// The `e=` lines, verbatim.
    public var emails: [String]
    /// The `p=` lines, verbatim.
    public var phones: [String]
    /// The session-level `c=` line, used by media sections without their own.
    public var connection: Connection?
    /// The session-level `b=` lines.
    public var bandwidths: [Bandwidth]
    /// The time descriptions (`t=` with its `r=` lines); at least one is
    /// required when serializing, so the initializer defaults to `t=0 0`.
    public var timing: [Timing]
    /// The `z=` line, verbatim.
    public var timeZones: String?
    /// The session-level `k=` line, verbatim (obsolete in RFC 8866).
    public var key: String?
    /// The session-level `a=` lines, in order.
    public var attributes: [SDPAttribute]
    /// Session-level lines with unknown type letters, in order; serialized
    /// after the session-level attributes.
    public var extensionLines: [SDPExtensionLine]
    /// The media sections, in order.
    public var media: [MediaDescription]

    /// Creates a session description.
    public init(
        origin: Origin,
        sessionName: String = "-",
        information: String? = nil,
        uri: String? = nil,
        emails: [String] = [],
        phones: [String] = [],
        connection: Connection? = nil,
        bandwidths: [Bandwidth] = [],
        timing: [Timing] = [Timing()],
        timeZones: String? = nil,
        key: String? = nil,
        attributes: [SDPAttribute] = [],
        extensionLines: [SDPExtensionLine] = [],
        media: [MediaDescription] = []
    ) {
        self.origin = origin
        self.sessionName = sessionName
        self.information = information
        self.uri = uri
        self.emails = emails
        self.phones = phones
        self.connection = connection
        self.bandwidths = bandwidths
        self.timing = timing
        self.timeZones = timeZones
        self.key = key
        self.attributes = attributes
        self.extensionLines = extensionLines
        self.media = media
    }

    // MARK: Parsing and serialization

    /// Parses a session description from bytes (UTF-8, CRLF or LF line endings).
    ///
    /// - Throws: ``SDPParseError`` describing the first problem found,
    ///   including when a limit in `limits` is exceeded.
    public static func parse(
        _ bytes: some Collection<UInt8>, limits: SDPLimits = .default
    ) throws(SDPParseError) -> SessionDescription {
        try SDPParser.parse(bytes, limits: limits)
    }

    /// Parses a session description from a string.
    ///
    /// - Throws: ``SDPParseError`` describing the first problem found.
    public static func parse(_ string: String, limits: SDPLimits = .default) throws(SDPParseError) -> SessionDescription {
        try SDPParser.parse(string.utf8, limits: limits)
    }

    /// The canonical wire form: RFC 8866 field order, CRLF line endings.
    public func serialized() -> [UInt8] {
        SDPSerializer.serialize(self)
    }

    /// The canonical wire form as a string (the same bytes as ``serialized()``).
    public var description: String {
        String(decoding: serialized(), as: UTF8.self)
    }

    // MARK: Queries

    /// True when the description contains lines with type letters this
    /// library does not know. RFC 8866 says such a description should be
    /// ignored; callers who want that strictness can check this.
    public var hasExtensionLines: Bool {
        !extensionLines.isEmpty || media.contains { !$0.extensionLines.isEmpty }
    }

    /// The connection that applies to `media`: its first `c=` line, else the
    /// session-level one.
    public func connection(for media: MediaDescription) -> Connection? {
        media.connections.first ?? connection
    }

    /// The direction that applies to `media`: its own direction attribute,
    /// else the session-level one, else `sendrecv` (RFC 3264 section 5.1).
    public func effectiveDirection(for media: MediaDescription) -> MediaDirection {
        media.direction ?? direction ?? .sendrecv
    }

    /// The media sections of the given type, in order.
    public func media(ofType type: MediaType) -> [MediaDescription] {
        media.filter { $0.media == type }
    }

    // MARK: Building

    /// Appends a media section.
    public mutating func addMedia(_ media: MediaDescription) {
        self.media.append(media)
    }

    /// Increments the session version in `o=`, as RFC 3264 section 8 requires
    /// for every changed offer or answer; wraps to 0 after `UInt64.max`.
    public mutating func incrementVersion() {
        origin.sessionVersion &+= 1
    }
}
