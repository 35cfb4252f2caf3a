/// One element of a scenario file: its name, attributes, children and text, with the line each
/// starts on.
struct XMLElement: Sendable, Hashable {
    /// One attribute, in the order written.
    struct Attribute: Sendable, Hashable {
        /// The attribute's name.
        var name: String
        /// Its value, with entity references replaced.
        var value: String
    }
    /// The element's name.
    var name: String
    /// The attributes in the order written.
    var attributes: [Attribute]
    /// The child elements in order.
    var children: [XMLElement]
    /// The character data (text and CDATA sections) directly inside the element, concatenated.
    var text: String
    /// The line (1-based) of the element's `<`.
    var line: Int

    /// The value of attribute `name`, if present.
    subscript(_ name: String) -> String? { attributes.first { $0.name == name }?.value }
}

/// A small XML reader for scenario files: elements, attributes, text, CDATA, comments, the XML
/// declaration and a DOCTYPE (skipped). Namespaces, processing instructions other than the
/// declaration and entities other than the five predefined ones and character references are
/// refused with the line.
enum XMLReader {
    static func parse(_ text: String) throws(SIPpScenarioError) -> XMLElement {
        var r = Reader(bytes: Array(text.utf8))
        return try r.document()
    }

    private struct Reader {
        let bytes: [UInt8]
        var i = 0
        var line = 1
        var depth = 0
        /// Scenarios are three or four levels deep; deeper input is refused, not recursed into.
        static let maxDepth = 32

        init(bytes: [UInt8]) { self.bytes = bytes }

        func fail(_ what: String, at line: Int? = nil) -> SIPpScenarioError {
            SIPpScenarioError(line: line ?? self.line, element: nil, kind: .malformedXML(what))
        }

        var atEnd: Bool { i >= bytes.count }

        mutating func advance(_ n: Int = 1) {
            for _ in 0..<n where i < bytes.count {
                if bytes[i] == 0x0A { line += 1 }
                i += 1
            }
        }

        func starts(with s: String) -> Bool {
            let u = Array(s.utf8)
            guard i + u.count <= bytes.count else { return false }
            return bytes[i..<(i + u.count)].elementsEqual(u)
        }

        /// Advances past `s`, returning the bytes before it.
        mutating func until(_ s: String, what: String) throws(SIPpScenarioError) -> [UInt8] {
            let start = i, startLine = line
            while !atEnd {
                if starts(with: s) {
                    let out = Array(bytes[start..<i])
                    advance(s.utf8.count)
                    return out
                }
                advance()
            }
            throw fail("\(what) is not closed (missing \"\(s)\")", at: startLine)
        }

        mutating func skipSpace() {
            while !atEnd, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { advance() }
        }

        static func isNameByte(_ b: UInt8) -> Bool {
            (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) || (b >= 0x30 && b <= 0x39) || b == 0x5F || b == 0x2D || b == 0x2E || b == 0x3A || b >= 0x80
        }

        mutating func name() throws(SIPpScenarioError) -> String {
            let start = i
            while !atEnd, Self.isNameByte(bytes[i]) { advance() }
            guard i > start else {
                throw fail(atEnd ? "unexpected end of file, a name was expected" : "a name was expected, found \"\(Character(Unicode.Scalar(bytes[i])))\"")
            }
            return String(decoding: bytes[start..<i], as: UTF8.self)
        }

        /// Skips comments, processing instructions (`<?xml …?>` only) and DOCTYPE between elements.
        mutating func misc(allowDoctype: Bool) throws(SIPpScenarioError) {
            while true {
                skipSpace()
                if starts(with: "<!--") {
                    advance(4); _ = try until("-->", what: "a comment")
                } else if starts(with: "<?") {
                    let l = line
                    advance(2)
                    let target = try name()
                    guard target.lowercased() == "xml" else { throw fail("processing instruction <?\(target)?> is not supported", at: l) }
                    _ = try until("?>", what: "the XML declaration")
                } else if starts(with: "<!DOCTYPE") {
                    guard allowDoctype else { throw fail("DOCTYPE after the root element") }
                    let l = line
                    advance(9)
                    var depth = 0
                    while true {
                        guard !atEnd else { throw fail("DOCTYPE is not closed", at: l) }
                        let b = bytes[i]
                        advance()
                        if b == UInt8(ascii: "[") { depth += 1 } else if b == UInt8(ascii: "]") { depth -= 1 } else if b == UInt8(ascii: ">") && depth == 0 { break }
                    }
                } else {
                    return
                }
            }
        }

        mutating func document() throws(SIPpScenarioError) -> XMLElement {
            if starts(with: "\u{FEFF}") { advance(3) }
            try misc(allowDoctype: true)
            guard !atEnd else { throw fail("the file holds no element") }
            guard bytes[i] == UInt8(ascii: "<") else { throw fail("text before the root element") }
            let root = try element()
            try misc(allowDoctype: false)
            guard atEnd else { throw fail("content after the root element </\(root.name)>") }
            return root
        }

        mutating func decode(_ raw: [UInt8], line l: Int) throws(SIPpScenarioError) -> String {
            guard raw.contains(UInt8(ascii: "&")) else { return String(decoding: raw, as: UTF8.self) }
            var out: [UInt8] = []
            var k = 0
            while k < raw.count {
                if raw[k] != UInt8(ascii: "&") { out.append(raw[k]); k += 1; continue }
                guard let semi = raw[k...].firstIndex(of: UInt8(ascii: ";")), semi - k <= 12 else { throw fail("\"&\" starts no entity reference (write &amp;)", at: l) }
                let ref = String(decoding: raw[(k + 1)..<semi], as: UTF8.self)
                var scalar: Unicode.Scalar?
                switch ref {
                case "lt": scalar = "<"
                case "gt": scalar = ">"
                case "amp": scalar = "&"
                case "quot": scalar = "\""
                case "apos": scalar = "'"
                default:
                    if ref.hasPrefix("#x") || ref.hasPrefix("#X") { scalar = UInt32(ref.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init) }
                    else if ref.hasPrefix("#") { scalar = UInt32(ref.dropFirst(1)).flatMap(Unicode.Scalar.init) }
                    guard scalar != nil else { throw fail("entity reference &\(ref); is not supported", at: l) }
                }
                out.append(contentsOf: Array(String(Character(scalar!)).utf8))
                k = semi + 1
            }
            return String(decoding: out, as: UTF8.self)
        }

        mutating func element() throws(SIPpScenarioError) -> XMLElement {
            let startLine = line
            depth += 1
            defer { depth -= 1 }
            guard depth <= Self.maxDepth else { throw fail("elements nested more than \(Self.maxDepth) deep") }
            advance() // <
            let elementName = try name()
            var attributes: [XMLElement.Attribute] = []
            while true {
                let hadSpace = !atEnd && (bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D)
                skipSpace()
                guard !atEnd else { throw fail("element <\(elementName)> is not closed", at: startLine) }
                if starts(with: "/>") {
                    advance(2)
                    return XMLElement(name: elementName, attributes: attributes, children: [], text: "", line: startLine)
                }
                if bytes[i] == UInt8(ascii: ">") { advance(); break }
                guard hadSpace else { throw fail("white space expected before an attribute of <\(elementName)>") }
                let l = line
                let attr = try name()
                skipSpace()
                guard !atEnd, bytes[i] == UInt8(ascii: "=") else { throw fail("attribute \"\(attr)\" of <\(elementName)> has no \"=\"") }
                advance()
                skipSpace()
                guard !atEnd, bytes[i] == UInt8(ascii: "\"") || bytes[i] == UInt8(ascii: "'") else { throw fail("the value of attribute \"\(attr)\" is not quoted") }
                let quote = bytes[i]
                advance()
                let start = i
                while !atEnd, bytes[i] != quote {
                    if bytes[i] == UInt8(ascii: "<") { throw fail("\"<\" inside the value of attribute \"\(attr)\"") }
                    advance()
                }
                guard !atEnd else { throw fail("the value of attribute \"\(attr)\" is not closed", at: l) }
                let raw = Array(bytes[start..<i])
                advance()
                guard !attributes.contains(where: { $0.name == attr }) else { throw fail("attribute \"\(attr)\" appears twice in <\(elementName)>", at: l) }
                attributes.append(.init(name: attr, value: try decode(raw, line: l)))
            }
            var children: [XMLElement] = []
            var text = ""
            while true {
                guard !atEnd else { throw fail("element <\(elementName)> is not closed (missing </\(elementName)>)", at: startLine) }
                if starts(with: "<![CDATA[") {
                    advance(9)
                    text += String(decoding: try until("]]>", what: "a CDATA section"), as: UTF8.self)
                } else if starts(with: "<!--") {
                    advance(4); _ = try until("-->", what: "a comment")
                } else if starts(with: "</") {
                    let l = line
                    advance(2)
                    let closing = try name()
                    skipSpace()
                    guard !atEnd, bytes[i] == UInt8(ascii: ">") else { throw fail("end tag </\(closing)> is not closed", at: l) }
                    advance()
                    guard closing == elementName else { throw fail("end tag </\(closing)> does not match <\(elementName)> (line \(startLine))", at: l) }
                    return XMLElement(name: elementName, attributes: attributes, children: children, text: text, line: startLine)
                } else if starts(with: "<?") || starts(with: "<!") {
                    throw fail("markup \"\(starts(with: "<?") ? "<?" : "<!")\" is not supported inside <\(elementName)>")
                } else if bytes[i] == UInt8(ascii: "<") {
                    children.append(try element())
                } else {
                    let l = line, start = i
                    while !atEnd, bytes[i] != UInt8(ascii: "<") { advance() }
                    text += try decode(Array(bytes[start..<i]), line: l)
                }
            }
        }
    }
}
