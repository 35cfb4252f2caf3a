/// Writes a ``SessionDescription`` in canonical form: the RFC 8866 section 5
/// line order, CRLF line endings, single spaces between fields, attributes
/// and extension lines in their stored order.
enum SDPSerializer {
    static func serialize(_ session: SessionDescription) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512 + 256 * session.media.count)

        func line(_ type: Unicode.Scalar, _ value: String) {
            out.append(UInt8(ascii: type))
            out.append(ASCII.equals)
            out.append(contentsOf: value.utf8)
            out.append(ASCII.cr)
            out.append(ASCII.lf)
        }

        line("v", "0")
        line("o", session.origin.description)
        line("s", session.sessionName)
        if let information = session.information { line("i", information) }
        if let uri = session.uri { line("u", uri) }
        for email in session.emails { line("e", email) }
        for phone in session.phones { line("p", phone) }
        if let connection = session.connection { line("c", connection.description) }
        for bandwidth in session.bandwidths { line("b", bandwidth.description) }
        for timing in session.timing {
            line("t", timing.description)
            for repeatTimes in timing.repeats { line("r", repeatTimes) }
        }
        if let zones = session.timeZones { line("z", zones) }
        if let key = session.key { line("k", key) }
        for attribute in session.attributes { line("a", attribute.description) }
        for extra in session.extensionLines { out.append(contentsOf: "\(extra)\r\n".utf8) }

        for media in session.media {
            var port = String(media.port)
            if let count = media.portCount { port += "/\(count)" }
            var mline = "\(media.media.rawValue) \(port) \(media.proto.rawValue)"
            for format in media.formats { mline += " \(format)" }
            line("m", mline)
            if let information = media.information { line("i", information) }
            for connection in media.connections { line("c", connection.description) }
            for bandwidth in media.bandwidths { line("b", bandwidth.description) }
            if let key = media.key { line("k", key) }
            for attribute in media.attributes { line("a", attribute.description) }
            for extra in media.extensionLines { out.append(contentsOf: "\(extra)\r\n".utf8) }
        }
        return out
    }
}
