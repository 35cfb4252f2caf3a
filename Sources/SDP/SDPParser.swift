/// The line-oriented SDP parser behind ``SessionDescription/parse(_:limits:)``.
///
/// It checks limits and byte-level validity line by line, enforces the
/// RFC 8866 section 5 line order, parses structured lines into typed values
/// and validates the attributes that have typed views, keeping every
/// attribute's text verbatim.
struct SDPParser {
    private let bytes: [UInt8]
    private let limits: SDPLimits

    /// 1-based number of the line being parsed.
    private var lineNumber = 0
    /// Offset of the first byte of the line being parsed.
    private var lineStart = 0

    private var session = SessionDescription(
        origin: Origin(sessionID: 0, sessionVersion: 0, address: ""), sessionName: "", timing: [])
    /// Position reached in the session-level order (see `Rank`).
    private var sessionRank = Rank.start
    private var sessionAttributeCount = 0
    /// The media section being parsed, flushed into `session.media` at the next `m=` or the end.
    private var current: MediaDescription? = nil
    private var mediaRank = 0
    private var mediaAttributeCount = 0

    /// Positions in the session-level line order of RFC 8866 section 5.
    private enum Rank {
        static let start = 0
        static let version = 1
        static let origin = 2
        static let name = 3
        static let information = 4
        static let uri = 5
        static let email = 6
        static let phone = 7
        static let connection = 8
        static let bandwidth = 9
        static let timing = 10
        static let zone = 11
        static let key = 12
        static let attribute = 13
    }

    /// Positions in the media-level line order.
    private enum MediaRank {
        static let media = 1
        static let information = 2
        static let connection = 3
        static let bandwidth = 4
        static let key = 5
        static let attribute = 6
    }

    private init(bytes: [UInt8], limits: SDPLimits) {
        self.bytes = bytes
        self.limits = limits
    }

    static func parse(_ input: some Collection<UInt8>, limits: SDPLimits) throws(SDPParseError) -> SessionDescription {
        let maxBytes = max(0, limits.maxTotalBytes)
        let keep = maxBytes == Int.max ? maxBytes : maxBytes + 1
        // Contiguous input (an array or a slice of one: every message body) is copied in one
        // step, not element by element through the generic collection.
        let bytes = input.withContiguousStorageIfAvailable { Array($0.prefix(keep)) } ?? Array(input.prefix(keep))
        if bytes.count > maxBytes {
            var line = 1
            for b in bytes[0..<maxBytes] where b == ASCII.lf { line += 1 }
            throw SDPParseError(
                offset: maxBytes, line: line, rule: .limitExceeded,
                detail: "input is longer than the limit of \(maxBytes) bytes")
        }
        var parser = SDPParser(bytes: bytes, limits: limits)
        return try parser.run()
    }

    private func error(_ rule: SDPParseError.Rule, _ detail: String, at offset: Int? = nil) -> SDPParseError {
        SDPParseError(offset: offset ?? lineStart, line: lineNumber, rule: rule, detail: detail)
    }

    private mutating func run() throws(SDPParseError) -> SessionDescription {
        let n = bytes.count
        var pos = 0
        // Where the content ends: the input length, or the start of trailing empty lines.
        var contentLimit = n
        while pos < n {
            var end = pos
            while end < n, bytes[end] != ASCII.lf { end += 1 }
            let next = end < n ? end + 1 : n
            var contentEnd = end
            if contentEnd > pos, bytes[contentEnd - 1] == ASCII.cr { contentEnd -= 1 }
            lineNumber += 1
            lineStart = pos

            if contentEnd == pos {
                // Only trailing empty lines are tolerated.
                if bytes[pos..<n].allSatisfy({ $0 == ASCII.cr || $0 == ASCII.lf }) {
                    lineNumber -= 1
                    contentLimit = pos
                    break
                }
                throw error(.lineSyntax, "empty line")
            }
            if lineNumber > limits.maxLines {
                throw error(.limitExceeded, "more than \(limits.maxLines) lines")
            }
            if contentEnd - pos > limits.maxLineLength {
                throw error(.limitExceeded, "line is \(contentEnd - pos) bytes long, more than the limit of \(limits.maxLineLength)")
            }
            for i in pos..<contentEnd {
                let b = bytes[i]
                if b == ASCII.nul { throw error(.invalidCharacter, "NUL byte", at: i) }
                if b == ASCII.cr { throw error(.invalidCharacter, "carriage return inside a line", at: i) }
            }
            if let bad = Syntax.firstInvalidUTF8(bytes[pos..<contentEnd]) {
                throw error(.invalidUTF8, "invalid UTF-8 sequence", at: bad)
            }

            let type = bytes[pos]
            guard contentEnd - pos >= 2, bytes[pos + 1] == ASCII.equals else {
                throw error(.lineSyntax, "expected <type>=<value>")
            }
            guard ASCII.isLowercaseLetter(type) else {
                let shown = type < 0x80 ? "'\(Character(Unicode.Scalar(type)))'" : "a non-ASCII byte"
                throw error(.lineSyntax, "line type must be a lowercase letter, found \(shown)")
            }
            let value = bytes[(pos + 2)..<contentEnd]
            do throws(FieldError) {
                try handle(type: type, value: value)
            } catch {
                throw self.error(error.rule, error.detail, at: error.at)
            }
            pos = next
        }

        lineNumber += 1
        lineStart = contentLimit
        if sessionRank < Rank.version { throw error(.missingLine("v"), "empty session description") }
        if sessionRank < Rank.origin { throw error(.missingLine("o"), "missing o= line") }
        if sessionRank < Rank.name { throw error(.missingLine("s"), "missing s= line") }
        if session.timing.isEmpty { throw error(.missingLine("t"), "missing t= line") }
        if let current {
            session.media.append(current)
        }
        return session
    }

    // MARK: Lines

    private mutating func handle(type: UInt8, value: ArraySlice<UInt8>) throws(FieldError) {
        switch sessionRank {
        case Rank.start:
            guard type == UInt8(ascii: "v") else {
                throw FieldError(.missingLine("v"), "a session description must start with v=")
            }
            let version = Syntax.trimmed(value)
            guard version.elementsEqual([0x30]) else {
                throw FieldError(.version, "unsupported protocol version \"\(Syntax.string(version))\"; only 0 is defined", at: value.startIndex)
            }
            sessionRank = Rank.version
            return
        case Rank.version:
            guard type == UInt8(ascii: "o") else { throw FieldError(.missingLine("o"), "v= must be followed by o=") }
            session.origin = try Origin.parse(value)
            sessionRank = Rank.origin
            return
        case Rank.origin:
            guard type == UInt8(ascii: "s") else { throw FieldError(.missingLine("s"), "o= must be followed by s=") }
            session.sessionName = Syntax.string(value)
            sessionRank = Rank.name
            return
        default:
            break
        }

        if current != nil, type != UInt8(ascii: "m") {
            try handleMediaLine(type: type, value: value)
            return
        }

        switch type {
        case UInt8(ascii: "v"), UInt8(ascii: "o"), UInt8(ascii: "s"):
            throw FieldError(.unexpectedLine, "duplicate \(Self.character(type))= line")
        case UInt8(ascii: "i"):
            try advance(to: Rank.information, type, single: true)
            session.information = Syntax.string(value)
        case UInt8(ascii: "u"):
            try advance(to: Rank.uri, type, single: true)
            session.uri = Syntax.string(value)
        case UInt8(ascii: "e"):
            try advance(to: Rank.email, type, single: false)
            session.emails.append(Syntax.string(value))
        case UInt8(ascii: "p"):
            try advance(to: Rank.phone, type, single: false)
            session.phones.append(Syntax.string(value))
        case UInt8(ascii: "c"):
            try advance(to: Rank.connection, type, single: true)
            session.connection = try Connection.parse(fields: Syntax.fields(value)[...], rule: .connection)
        case UInt8(ascii: "b"):
            try advance(to: Rank.bandwidth, type, single: false)
            session.bandwidths.append(try Bandwidth.parse(value))
        case UInt8(ascii: "t"):
            try advance(to: Rank.timing, type, single: false)
            session.timing.append(try Timing.parse(value))
        case UInt8(ascii: "r"):
            guard sessionRank == Rank.timing, !session.timing.isEmpty else {
                throw FieldError(.unexpectedLine, "r= must follow a t= line")
            }
            try Timing.validateRepeat(value)
            session.timing[session.timing.count - 1].repeats.append(Syntax.string(value))
        case UInt8(ascii: "z"):
            try requireTiming()
            try advance(to: Rank.zone, type, single: true)
            try Timing.validateZones(value)
            session.timeZones = Syntax.string(value)
        case UInt8(ascii: "k"):
            try requireTiming()
            try advance(to: Rank.key, type, single: true)
            session.key = Syntax.string(value)
        case UInt8(ascii: "a"):
            try requireTiming()
            try advance(to: Rank.attribute, type, single: false)
            sessionAttributeCount += 1
            guard sessionAttributeCount <= limits.maxAttributesPerSection else {
                throw FieldError(.limitExceeded, "more than \(limits.maxAttributesPerSection) session-level attributes")
            }
            session.attributes.append(try parseAttribute(value))
        case UInt8(ascii: "m"):
            try requireTiming()
            if let current {
                session.media.append(current)
                self.current = nil
            }
            guard session.media.count < limits.maxMediaSections else {
                throw FieldError(.limitExceeded, "more than \(limits.maxMediaSections) media sections")
            }
            current = try Self.parseMedia(value)
            mediaRank = MediaRank.media
            mediaAttributeCount = 0
        default:
            session.extensionLines.append(SDPExtensionLine(type: Self.character(type), value: Syntax.string(value)))
        }
    }

    private mutating func handleMediaLine(type: UInt8, value: ArraySlice<UInt8>) throws(FieldError) {
        switch type {
        case UInt8(ascii: "i"):
            try advanceMedia(to: MediaRank.information, type, single: true)
            current?.information = Syntax.string(value)
        case UInt8(ascii: "c"):
            try advanceMedia(to: MediaRank.connection, type, single: false)
            let connection = try Connection.parse(fields: Syntax.fields(value)[...], rule: .connection)
            current?.connections.append(connection)
        case UInt8(ascii: "b"):
            try advanceMedia(to: MediaRank.bandwidth, type, single: false)
            let bandwidth = try Bandwidth.parse(value)
            current?.bandwidths.append(bandwidth)
        case UInt8(ascii: "k"):
            try advanceMedia(to: MediaRank.key, type, single: true)
            current?.key = Syntax.string(value)
        case UInt8(ascii: "a"):
            try advanceMedia(to: MediaRank.attribute, type, single: false)
            mediaAttributeCount += 1
            guard mediaAttributeCount <= limits.maxAttributesPerSection else {
                throw FieldError(.limitExceeded, "more than \(limits.maxAttributesPerSection) attributes in a media section")
            }
            let attribute = try parseAttribute(value)
            current?.attributes.append(attribute)
        case UInt8(ascii: "v"), UInt8(ascii: "o"), UInt8(ascii: "s"), UInt8(ascii: "u"), UInt8(ascii: "e"), UInt8(ascii: "p"), UInt8(ascii: "t"), UInt8(ascii: "r"), UInt8(ascii: "z"):
            throw FieldError(.unexpectedLine, "\(Self.character(type))= is not allowed in a media section")
        default:
            current?.extensionLines.append(SDPExtensionLine(type: Self.character(type), value: Syntax.string(value)))
        }
    }

    /// A line's type letter (a lowercase ASCII letter, checked before) as a `Character`, for
    /// messages and extension lines; the parser itself switches on the byte.
    private static func character(_ type: UInt8) -> Character { Character(Unicode.Scalar(type)) }

    private mutating func advance(to rank: Int, _ type: UInt8, single: Bool) throws(FieldError) {
        if rank < sessionRank {
            throw FieldError(.unexpectedLine, "\(Self.character(type))= line out of order")
        }
        if rank == sessionRank, single {
            throw FieldError(.unexpectedLine, "duplicate \(Self.character(type))= line")
        }
        sessionRank = rank
    }

    private mutating func advanceMedia(to rank: Int, _ type: UInt8, single: Bool) throws(FieldError) {
        if rank < mediaRank {
            throw FieldError(.unexpectedLine, "\(Self.character(type))= line out of order in media section")
        }
        if rank == mediaRank, single {
            throw FieldError(.unexpectedLine, "duplicate \(Self.character(type))= line in media section")
        }
        mediaRank = rank
    }

    private func requireTiming() throws(FieldError) {
        if session.timing.isEmpty {
            throw FieldError(.missingLine("t"), "at least one t= line must precede z=, k=, a= and m= lines")
        }
    }

    // MARK: Fields

    private func parseAttribute(_ value: ArraySlice<UInt8>) throws(FieldError) -> SDPAttribute {
        let (rawName, attributeValue) = Syntax.splitOnce(value, on: ASCII.colon)
        // Tolerate trailing whitespace after a property attribute (`a=sendrecv `).
        let name = attributeValue == nil ? Syntax.trailingTrimmed(rawName) : rawName
        let nameString = Syntax.string(name)
        guard Syntax.isToken(name) else {
            throw FieldError(
                .attribute(nameString), name.isEmpty ? "missing attribute name" : "invalid attribute name",
                at: value.startIndex)
        }
        try SDPAttribute.validate(name: nameString, value: attributeValue)
        return SDPAttribute(name: nameString, value: attributeValue.map(Syntax.string))
    }

    private static func parseMedia(_ value: ArraySlice<UInt8>) throws(FieldError) -> MediaDescription {
        let fields = Syntax.fields(value)
        guard fields.count >= 3 else {
            throw FieldError(.media, "expected <media> <port> <proto> <fmt> ..., found \(fields.count) fields")
        }
        guard fields.count >= 4 else {
            throw FieldError(.media, "no media formats", at: fields[2].endIndex)
        }
        guard Syntax.isToken(fields[0]) else {
            throw FieldError(.media, "invalid media type", at: fields[0].startIndex)
        }
        let portParts = Syntax.split(fields[1], on: ASCII.slash)
        guard portParts.count <= 2 else {
            throw FieldError(.media, "invalid port \"\(Syntax.string(fields[1]))\"", at: fields[1].startIndex)
        }
        let port: UInt16 = try Syntax.number(portParts[0], "port", rule: .media)
        var portCount: UInt16? = nil
        if portParts.count == 2 {
            portCount = try Syntax.number(portParts[1], "number of ports", rule: .media)
        }
        guard Syntax.split(fields[2], on: ASCII.slash).allSatisfy(Syntax.isToken) else {
            throw FieldError(.media, "invalid transport protocol", at: fields[2].startIndex)
        }
        let proto = TransportProtocol(rawValue: Syntax.string(fields[2]))
        var formats: [String] = []
        formats.reserveCapacity(fields.count - 3)
        let rtp = proto.isRTP
        for format in fields[3...] {
            if rtp {
                let _: UInt8 = try Syntax.number(format, "RTP payload type", rule: .media, max: 127)
            } else if !Syntax.isToken(format) {
                throw FieldError(.media, "invalid format \"\(Syntax.string(format))\"", at: format.startIndex)
            }
            formats.append(Syntax.string(format))
        }
        return MediaDescription(
            media: MediaType(rawValue: Syntax.string(fields[0])), port: port, portCount: portCount, proto: proto,
            formats: formats)
    }
}
