import SDP
import Testing

/// One malformed input and the error it must produce.
struct BadInput: Sendable, CustomTestStringConvertible {
    let name: String
    let bytes: [UInt8]
    let rule: SDPParseError.Rule
    /// Expected 1-based line number.
    let line: Int
    /// Exact expected offset; when nil the offset must fall inside the expected line.
    let offset: Int?
    let limits: SDPLimits

    init(_ name: String, _ bytes: [UInt8], _ rule: SDPParseError.Rule, line: Int, offset: Int? = nil, limits: SDPLimits = .default) {
        self.name = name
        self.bytes = bytes
        self.rule = rule
        self.line = line
        self.offset = offset
        self.limits = limits
    }

    init(_ name: String, _ text: String, _ rule: SDPParseError.Rule, line: Int, offset: Int? = nil, limits: SDPLimits = .default) {
        self.init(name, Array(text.utf8), rule, line: line, offset: offset, limits: limits)
    }

    var testDescription: String { name }
}

/// The minimal offer with an edit applied.
private func edited(_ edit: (inout [String]) -> Void) -> String {
    var lines = minimalLines
    edit(&lines)
    return sdp(lines)
}

/// The minimal offer with `line` appended.
private func appending(_ extra: String...) -> String {
    sdp(minimalLines + extra)
}

private let goodKey = "WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz"
private let cryptoPrefix = "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:"

/// Offset of the first byte of 1-based `line` in `bytes` (or the input length past the end).
private func lineStart(_ line: Int, in bytes: [UInt8]) -> Int {
    var current = 1
    var i = 0
    while current < line, i < bytes.count {
        if bytes[i] == 0x0A { current += 1 }
        i += 1
    }
    return i
}

/// Offset just past the content of 1-based `line` (at its line ending, or the input end).
private func lineEnd(_ line: Int, in bytes: [UInt8]) -> Int {
    var i = lineStart(line, in: bytes)
    while i < bytes.count, bytes[i] != 0x0A { i += 1 }
    return i
}

@Suite("Malformed input")
struct ParseErrorTests {
    static let cases: [BadInput] = [
        BadInput("missing v=", edited { $0.removeFirst() }, .missingLine("v"), line: 1, offset: 0),
        BadInput("empty input", "", .missingLine("v"), line: 1, offset: 0),
        BadInput("only a blank line", "\r\n", .missingLine("v"), line: 1),
        BadInput("v=1", edited { $0[0] = "v=1" }, .version, line: 1),
        BadInput("missing o=", edited { $0.remove(at: 1) }, .missingLine("o"), line: 2, offset: 5),
        BadInput("o= with five fields", edited { $0[1] = "o=- 1 IN IP4 192.0.2.1" }, .origin, line: 2),
        BadInput("o= with non-digit session id", edited { $0[1] = "o=- 12a4 1 IN IP4 192.0.2.1" }, .origin, line: 2, offset: 9),
        BadInput("o= session id overflows UInt64", edited { $0[1] = "o=- 18446744073709551616 1 IN IP4 192.0.2.1" }, .origin, line: 2, offset: 9),
        BadInput("o= negative version", edited { $0[1] = "o=- 1 -1 IN IP4 192.0.2.1" }, .origin, line: 2),
        BadInput("o= garbage address", edited { $0[1] = "o=- 1 1 IN IP4 192.0.2.1.5" }, .origin, line: 2),
        BadInput("missing s=", edited { $0.remove(at: 2) }, .missingLine("s"), line: 3),
        BadInput("missing t=", edited { $0.remove(at: 4) }, .missingLine("t"), line: 5),
        BadInput("missing t= without media", sdp(Array(minimalLines.prefix(4))), .missingLine("t"), line: 5),
        BadInput("non-numeric port", edited { $0[5] = "m=audio 50x0 RTP/AVP 0" }, .media, line: 6, offset: 71),
        BadInput("port above 65535", edited { $0[5] = "m=audio 65536 RTP/AVP 0" }, .media, line: 6),
        BadInput("port overflows UInt64", edited { $0[5] = "m=audio 99999999999999999999999 RTP/AVP 0" }, .media, line: 6),
        BadInput("m= without formats", edited { $0[5] = "m=audio 5000 RTP/AVP" }, .media, line: 6),
        BadInput("m= with only a media type", edited { $0[5] = "m=audio" }, .media, line: 6),
        BadInput("RTP format that is not a payload type", edited { $0[5] = "m=audio 5000 RTP/AVP PCMU" }, .media, line: 6),
        BadInput("RTP payload type above 127", edited { $0[5] = "m=audio 5000 RTP/AVP 0 200" }, .media, line: 6),
        BadInput("rtpmap without clock rate", edited { $0[6] = "a=rtpmap:0 PCMU" }, .rtpmap, line: 7),
        BadInput("rtpmap without encoding", edited { $0[6] = "a=rtpmap:0" }, .rtpmap, line: 7),
        BadInput("rtpmap payload type 128", edited { $0[6] = "a=rtpmap:128 PCMU/8000" }, .rtpmap, line: 7),
        BadInput("rtpmap clock rate overflow", edited { $0[6] = "a=rtpmap:0 PCMU/4294967296" }, .rtpmap, line: 7),
        BadInput("rtpmap non-numeric channels", edited { $0[6] = "a=rtpmap:0 PCMU/8000/two" }, .rtpmap, line: 7),
        BadInput("fmtp without format", appending("a=fmtp: 0-15"), .fmtp, line: 8),
        BadInput("fmtp without value", appending("a=fmtp"), .fmtp, line: 8),
        BadInput("crypto with bad base64", appending(cryptoPrefix + "not*base64!"), .crypto, line: 8),
        BadInput("crypto with impossible base64 length", appending(cryptoPrefix + "QUJDR"), .crypto, line: 8),
        BadInput("crypto with bad lifetime", appending(cryptoPrefix + goodKey + "|2^x"), .crypto, line: 8),
        BadInput("crypto with lifetime 2^64", appending(cryptoPrefix + goodKey + "|2^64"), .crypto, line: 8),
        BadInput("crypto with empty lifetime", appending(cryptoPrefix + goodKey + "||1:4"), .crypto, line: 8),
        BadInput("crypto with MKI length 0", appending(cryptoPrefix + goodKey + "|2^20|1:0"), .crypto, line: 8),
        BadInput("crypto with MKI length 129", appending(cryptoPrefix + goodKey + "|2^20|1:129"), .crypto, line: 8),
        BadInput("crypto without key params", appending("a=crypto:1 AES_CM_128_HMAC_SHA1_80"), .crypto, line: 8),
        BadInput("crypto with non-numeric tag", appending("a=crypto:x AES_CM_128_HMAC_SHA1_80 inline:" + goodKey), .crypto, line: 8),
        BadInput("crypto with bad KDR", appending(cryptoPrefix + goodKey + " KDR=25"), .crypto, line: 8),
        BadInput("crypto with WSH below 64", appending(cryptoPrefix + goodKey + " WSH=32"), .crypto, line: 8),
        BadInput("line without '='", appending("hello"), .lineSyntax, line: 8),
        BadInput("uppercase type letter", appending("A=sendrecv"), .lineSyntax, line: 8),
        BadInput("uppercase V on the first line", edited { $0[0] = "V=0" }, .lineSyntax, line: 1, offset: 0),
        BadInput("space before '='", appending("a =sendrecv"), .lineSyntax, line: 8),
        BadInput("embedded NUL", edited { $0[2] = "s=a\u{0}b" }, .invalidCharacter, line: 3, offset: 34),
        BadInput("carriage return inside a line", edited { $0[2] = "s=a\rb" }, .invalidCharacter, line: 3, offset: 34),
        BadInput(
            "invalid UTF-8 in s=",
            Array(sdp(Array(minimalLines[0..<2])).utf8) + [0x73, 0x3D, 0x41, 0xC3, 0x28, 0x0D, 0x0A]
                + Array(sdp(Array(minimalLines[3...])).utf8),
            .invalidUTF8, line: 3, offset: 34),
        BadInput(
            "overlong UTF-8 in a=",
            Array(appending("a=x:").utf8.dropLast(2)) + [0xC0, 0xAF, 0x0D, 0x0A], .invalidUTF8, line: 8),
        BadInput(
            "UTF-8 surrogate in i=",
            Array(sdp(Array(minimalLines[0..<3])).utf8) + [0x69, 0x3D, 0xED, 0xA0, 0x80, 0x0D, 0x0A]
                + Array(sdp(Array(minimalLines[3...])).utf8),
            .invalidUTF8, line: 4, offset: 38),
        BadInput("empty line in the middle", edited { $0.insert("", at: 3) }, .lineSyntax, line: 4),
        BadInput("over-limit line count", sdp(minimalLines), .limitExceeded, line: 6, limits: SDPLimits(maxLines: 5)),
        BadInput("line too long", appending("a=x-long:" + String(repeating: "a", count: 5000)), .limitExceeded, line: 8),
        BadInput("input larger than the byte limit", sdp(minimalLines), .limitExceeded, line: 4, offset: 50, limits: SDPLimits(maxTotalBytes: 50)),
        BadInput("too many media sections", appending("m=audio 5002 RTP/AVP 8"), .limitExceeded, line: 8, limits: SDPLimits(maxMediaSections: 1)),
        BadInput("too many attributes", appending("a=ptime:20", "a=sendrecv"), .limitExceeded, line: 9, limits: SDPLimits(maxAttributesPerSection: 2)),
        BadInput("bandwidth overflow", edited { $0.insert("b=AS:99999999999999999999999", at: 4) }, .bandwidth, line: 5, offset: 61),
        BadInput("bandwidth without colon", edited { $0.insert("b=AS64", at: 4) }, .bandwidth, line: 5),
        BadInput("bandwidth not a number", edited { $0.insert("b=AS:fast", at: 4) }, .bandwidth, line: 5),
        BadInput("c= with a bad IPv4 address", edited { $0[3] = "c=IN IP4 999.1.1.1" }, .connection, line: 4),
        BadInput("c= without an address", edited { $0[3] = "c=IN IP4" }, .connection, line: 4),
        BadInput("c= with a bad IPv6 address", edited { $0[3] = "c=IN IP6 2001:db8:::1" }, .connection, line: 4),
        BadInput("c= with too many IPv6 groups", edited { $0[3] = "c=IN IP6 1:2:3:4:5:6:7:8:9" }, .connection, line: 4),
        BadInput("c= with IPv6 address under IP4", edited { $0[3] = "c=IN IP4 2001:db8::1" }, .connection, line: 4),
        BadInput("c= with garbage host name", edited { $0[3] = "c=IN IP4 exa$mple.com" }, .connection, line: 4),
        BadInput("c= with TTL above 255", edited { $0[3] = "c=IN IP4 224.2.1.1/256" }, .connection, line: 4),
        BadInput("c= with TTL on IPv6", edited { $0[3] = "c=IN IP6 ff15::101/127/3" }, .connection, line: 4),
        BadInput("t= not numeric", edited { $0[4] = "t=0 x" }, .timing, line: 5),
        BadInput("t= with one field", edited { $0[4] = "t=0" }, .timing, line: 5),
        BadInput("c= after t=", edited { $0.swapAt(3, 4) }, .unexpectedLine, line: 5),
        BadInput("duplicate s=", edited { $0.insert("s=again", at: 3) }, .unexpectedLine, line: 4),
        BadInput("duplicate v=", edited { $0.insert("v=0", at: 3) }, .unexpectedLine, line: 4),
        BadInput("o= inside a media section", appending("o=- 1 1 IN IP4 192.0.2.1"), .unexpectedLine, line: 8),
        BadInput("t= inside a media section", appending("t=0 0"), .unexpectedLine, line: 8),
        BadInput("i= after a= in a media section", appending("i=late"), .unexpectedLine, line: 8),
        BadInput("r= before any t=", edited { $0.insert("r=7d 1h 0", at: 4) }, .unexpectedLine, line: 5),
        BadInput("a= before t=", edited { $0.insert("a=tool:x", at: 4) }, .missingLine("t"), line: 5),
        BadInput("malformed r=", edited { $0.insert("r=7x 1h 0", at: 5) }, .repeatTimes, line: 6),
        BadInput("malformed z=", edited { $0.insert("z=2882844526", at: 5) }, .timeZones, line: 6),
        BadInput("direction attribute with a value", appending("a=sendonly:yes"), .attribute("sendonly"), line: 8),
        BadInput("rtcp-mux with a value", appending("a=rtcp-mux:1"), .attribute("rtcp-mux"), line: 8),
        BadInput("ptime not a number", appending("a=ptime:twenty"), .attribute("ptime"), line: 8),
        BadInput("ptime zero", appending("a=ptime:0"), .attribute("ptime"), line: 8),
        BadInput("maxptime without value", appending("a=maxptime"), .attribute("maxptime"), line: 8),
        BadInput("rtcp port not a number", appending("a=rtcp:abc"), .rtcp, line: 8),
        BadInput("rtcp port overflow", appending("a=rtcp:70000"), .rtcp, line: 8),
        BadInput("rtcp with partial address", appending("a=rtcp:5001 IN IP4"), .rtcp, line: 8),
        BadInput("ssrc without source attribute", appending("a=ssrc:12345"), .ssrc, line: 8),
        BadInput("ssrc id overflow", appending("a=ssrc:4294967296 cname:x"), .ssrc, line: 8),
        BadInput("attribute without name", appending("a=:value"), .attribute(""), line: 8),
        BadInput("attribute name with a space", appending("a=bad name:value"), .attribute("bad name"), line: 8),
        BadInput("mid that is not a token", appending("a=mid:a b"), .attribute("mid"), line: 8),
    ]

    @Test(arguments: cases)
    func malformedInputIsRejected(_ bad: BadInput) throws {
        let error = try #require(parseError(bad.bytes, limits: bad.limits), "expected \(bad.name) to fail")
        #expect(error.rule == bad.rule, "\(error)")
        #expect(error.line == bad.line, "\(error)")
        if let offset = bad.offset {
            #expect(error.offset == offset, "\(error)")
        } else {
            let start = lineStart(bad.line, in: bad.bytes)
            let end = lineEnd(bad.line, in: bad.bytes)
            #expect(error.offset >= start && error.offset <= end, "offset \(error.offset) outside line \(start)..<\(end): \(error)")
        }
        #expect(!error.detail.isEmpty)
        #expect(error.description.hasPrefix("SDP line \(error.line) (offset \(error.offset)): \(error.rule): "))
    }

    @Test func caseCountCoversTheRequiredTable() {
        #expect(Self.cases.count >= 25)
        #expect(Set(Self.cases.map(\.name)).count == Self.cases.count)
    }

    @Test func descriptionNamesLineOffsetRuleAndDetail() throws {
        let text = sdp(
            "v=0", "o=- 1 1 IN IP4 192.0.2.1", "s=-", "c=IN IP4 192.0.2.1", "t=0 0", "m=audio 5000 RTP/AVP 0",
            "a=rtpmap:0 PCMU")
        let error = try #require(parseError(text))
        #expect(error.line == 7)
        #expect(error.offset == 98)
        #expect(error.description == "SDP line 7 (offset 98): rtpmap: missing clock rate")
        #expect(SDPParseError.Rule.missingLine("t").description == "missing t= line")
        #expect(SDPParseError.Rule.attribute("ptime").description == "ptime")
    }

    @Test func errorsAreValuesThatCompareEqual() throws {
        let text = appending("a=rtpmap:0 PCMU")
        let first = try #require(parseError(text))
        let second = try #require(parseError(Array(text.utf8)))
        #expect(first == second)
        let constructed = SDPParseError(offset: first.offset, line: first.line, rule: .rtpmap, detail: first.detail)
        #expect(constructed == first)
    }

    @Test func typedThrowsCarrySDPParseError() {
        do {
            _ = try SessionDescription.parse("s=-\r\n")
            Issue.record("expected an error")
        } catch {
            // `error` is statically an SDPParseError thanks to typed throws.
            #expect(error.rule == .missingLine("v"))
        }
    }
}
