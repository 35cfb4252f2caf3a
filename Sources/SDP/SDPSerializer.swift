/// Writes a ``SessionDescription`` in canonical form: the RFC 8866 section 5
/// line order, CRLF line endings, single spaces between fields, attributes
/// and extension lines in their stored order.
///
/// Every field goes straight into the output bytes (numbers as decimal digits, strings by their
/// UTF-8): no intermediate `String` per line, so an answer costs one buffer.
enum SDPSerializer {
    static func serialize(_ session: SessionDescription) -> [UInt8] {
        var out = Writer()
        out.bytes.reserveCapacity(512 + 256 * session.media.count)

        out.line("v", "0")
        out.start("o")
        out.origin(session.origin)
        out.end()
        out.line("s", session.sessionName)
        if let information = session.information { out.line("i", information) }
        if let uri = session.uri { out.line("u", uri) }
        for email in session.emails { out.line("e", email) }
        for phone in session.phones { out.line("p", phone) }
        if let connection = session.connection { out.connection(connection) }
        for bandwidth in session.bandwidths { out.line("b", bandwidth.description) }
        for timing in session.timing {
            out.start("t")
            out.number(timing.start)
            out.space()
            out.number(timing.stop)
            out.end()
            for repeatTimes in timing.repeats { out.line("r", repeatTimes) }
        }
        if let zones = session.timeZones { out.line("z", zones) }
        if let key = session.key { out.line("k", key) }
        for attribute in session.attributes { out.attribute(attribute) }
        for extra in session.extensionLines { out.extensionLine(extra) }

        for media in session.media {
            out.start("m")
            out.text(media.media.rawValue)
            out.space()
            out.number(media.port)
            if let count = media.portCount {
                out.bytes.append(ASCII.slash)
                out.number(count)
            }
            out.space()
            out.text(media.proto.rawValue)
            for format in media.formats {
                out.space()
                out.text(format)
            }
            out.end()
            if let information = media.information { out.line("i", information) }
            for connection in media.connections { out.connection(connection) }
            for bandwidth in media.bandwidths { out.line("b", bandwidth.description) }
            if let key = media.key { out.line("k", key) }
            for attribute in media.attributes { out.attribute(attribute) }
            for extra in media.extensionLines { out.extensionLine(extra) }
        }
        return out.bytes
    }

    /// The output buffer with the pieces lines are made of.
    private struct Writer {
        var bytes: [UInt8] = []

        /// `<type>=`
        mutating func start(_ type: Unicode.Scalar) {
            bytes.append(UInt8(ascii: type))
            bytes.append(ASCII.equals)
        }

        /// CRLF
        mutating func end() {
            bytes.append(ASCII.cr)
            bytes.append(ASCII.lf)
        }

        mutating func space() { bytes.append(ASCII.space) }

        mutating func text(_ s: String) { Syntax.append(s, to: &bytes) }

        /// A whole `<type>=<value>` line.
        mutating func line(_ type: Unicode.Scalar, _ value: String) {
            start(type)
            text(value)
            end()
        }

        /// An unsigned number in decimal, as `String(n)` would write it.
        mutating func number(_ n: some UnsignedInteger & FixedWidthInteger) {
            var value = UInt64(n)
            guard value >= 10 else { return bytes.append(0x30 &+ UInt8(value)) }
            var digits = 0, v = value
            while v > 0 { v /= 10; digits += 1 }
            let first = bytes.count
            bytes.append(contentsOf: repeatElement(0x30, count: digits))
            var i = first + digits - 1
            while value > 0 {
                bytes[i] = 0x30 &+ UInt8(value % 10)
                value /= 10
                i -= 1
            }
        }

        /// The value of an `o=` line (``Origin/description``).
        mutating func origin(_ o: Origin) {
            text(o.username)
            space()
            number(o.sessionID)
            space()
            number(o.sessionVersion)
            space()
            text(o.networkType.rawValue)
            space()
            text(o.addressType.rawValue)
            space()
            text(o.address)
        }

        /// A `c=` line (``Connection/description``).
        mutating func connection(_ c: Connection) {
            start("c")
            text(c.networkType.rawValue)
            space()
            text(c.addressType.rawValue)
            space()
            text(c.connectionAddress)
            end()
        }

        /// An `a=` line (``SDPAttribute/description``).
        mutating func attribute(_ a: SDPAttribute) {
            start("a")
            text(a.name)
            if let value = a.value {
                bytes.append(ASCII.colon)
                text(value)
            }
            end()
        }

        /// An extension line, as ``SDPExtensionLine/description`` writes it.
        mutating func extensionLine(_ e: SDPExtensionLine) {
            text(e.description)
            end()
        }
    }
}
