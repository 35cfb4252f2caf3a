import Testing
@testable import SIPResolver
import NetworkIO

/// Wire-format vectors built by hand from RFC 1035 §4.1, RFC 2782 and RFC 3403.
@Suite("DNS message codec")
struct DNSMessageCodecTests {
    /// `example.com` as labels.
    static let exampleCom: [UInt8] = [7] + Array("example".utf8) + [3] + Array("com".utf8) + [0]

    static func header(id: UInt16 = 0xABCD, flags: UInt16, qd: UInt16 = 1, an: UInt16 = 0, ns: UInt16 = 0, ar: UInt16 = 0) -> [UInt8] {
        [id, flags, qd, an, ns, ar].flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }

    @Test func queryEncodesToTheRFC1035Layout() throws {
        let query = DNSMessage.query(id: 0xABCD, name: try DNSName("example.com"), type: .a)
        let expected = Self.header(flags: 0x0100) + Self.exampleCom + [0x00, 0x01, 0x00, 0x01]
        #expect(try query.encoded() == expected)
        let naptr = DNSMessage.query(id: 1, name: try DNSName("example.com."), type: .naptr, recursionDesired: false)
        #expect(try naptr.encoded() == Self.header(id: 1, flags: 0) + Self.exampleCom + [0x00, 0x23, 0x00, 0x01])
    }

    @Test func responseWithCompressedNamesParses() throws {
        // Question example.com A; answers: example.com (pointer to 12) A 192.0.2.1,
        // www.example.com (label + pointer) CNAME example.com (pointer), and a AAAA.
        var b = Self.header(flags: 0x8580, an: 3)
        b += Self.exampleCom + [0, 1, 0, 1]
        b += [0xC0, 0x0C, 0, 1, 0, 1, 0, 0, 0x0E, 0x10, 0, 4, 192, 0, 2, 1]
        let wwwAt = b.count
        b += [3] + Array("www".utf8) + [0xC0, 0x0C, 0, 5, 0, 1, 0, 0, 0, 60, 0, 2, 0xC0, 0x0C]
        b += [0xC0, UInt8(wwwAt), 0, 28, 0, 1, 0, 0, 0, 30, 0, 16, 0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 0, count: 11) + [1]
        let m = try DNSMessage(bytes: b)
        #expect(m.id == 0xABCD)
        #expect(m.isResponse && m.isAuthoritative && m.recursionDesired && m.recursionAvailable && !m.isTruncated)
        #expect(m.responseCode == .noError)
        #expect(m.questions == [DNSQuestion(name: try DNSName("example.com"), type: .a)])
        #expect(m.answers.count == 3)
        #expect(m.answers[0] == DNSRecord(name: try DNSName("EXAMPLE.com"), ttl: 3600, data: .a(IPv4Address(192, 0, 2, 1))))
        #expect(m.answers[1].name.description == "www.example.com")
        #expect(m.answers[1].data == .cname(try DNSName("example.com")))
        #expect(m.answers[2].name == (try DNSName("www.example.com")))
        #expect(m.answers[2].data == .aaaa(IPv6Address("2001:db8::1")!))
    }

    @Test func srvAndNAPTRRecordDataParse() throws {
        // RFC 3263 §4.1 example: IN NAPTR 50 50 "s" "SIPS+D2T" "" _sips._tcp.example.com.
        let sipsTCP: [UInt8] = [5] + Array("_sips".utf8) + [4] + Array("_tcp".utf8) + [0xC0, 0x0C]
        var b = Self.header(flags: 0x8180, an: 2)
        b += Self.exampleCom + [0, 35, 0, 1]
        var naptr: [UInt8] = [0, 50, 0, 50, 1, UInt8(ascii: "s"), 8] + Array("SIPS+D2T".utf8) + [0]
        naptr += [5] + Array("_sips".utf8) + [4] + Array("_tcp".utf8) + Self.exampleCom  // uncompressed, as RFC 3403 asks
        b += [0xC0, 0x0C, 0, 35, 0, 1, 0, 0, 1, 0, 0, UInt8(naptr.count)] + naptr
        // _sips._tcp.example.com SRV 0 1 5061 server1.example.com (owner name compressed).
        let srv: [UInt8] = [0, 0, 0, 1, 0x13, 0xC5, 7] + Array("server1".utf8) + Self.exampleCom
        b += sipsTCP + [0, 33, 0, 1, 0, 0, 1, 0, 0, UInt8(srv.count)] + srv
        let m = try DNSMessage(bytes: b)
        #expect(m.answers[0].data == .naptr(DNSNAPTRRecord(order: 50, preference: 50, flags: "s", services: "SIPS+D2T", regexp: "",
                                                           replacement: try DNSName("_sips._tcp.example.com"))))
        #expect(m.answers[1].name == (try DNSName("_SIPS._TCP.example.com")))
        #expect(m.answers[1].data == .srv(DNSSRVRecord(priority: 0, weight: 1, port: 5061, target: try DNSName("server1.example.com"))))
        #expect(m.answers[1].ttl == 256)
    }

    @Test func rcodesAndTheTruncationBit() throws {
        let nx = try DNSMessage(bytes: Self.header(flags: 0x8183) + Self.exampleCom + [0, 1, 0, 1])
        #expect(nx.responseCode == .nameError)
        #expect(nx.responseCode.description == "NXDOMAIN")
        let fail = try DNSMessage(bytes: Self.header(flags: 0x8182) + Self.exampleCom + [0, 1, 0, 1])
        #expect(fail.responseCode == .serverFailure)
        #expect(DNSResponseCode(rawValue: 5) == .refused)
        // TC set and the message cut inside its only answer: kept with what came before the cut.
        let cut = Self.header(flags: 0x8380, an: 5) + Self.exampleCom + [0, 1, 0, 1] + [0xC0, 0x0C, 0, 1, 0, 1, 0]
        let tc = try DNSMessage(bytes: cut)
        #expect(tc.isTruncated)
        #expect(tc.questions.count == 1)
        #expect(tc.answers.isEmpty)
        // The same bytes without TC are an error.
        var noTC = cut
        noTC[2] = 0x81
        #expect(throws: DNSParseError.self) { try DNSMessage(bytes: noTC) }
    }

    // MARK: - Malformed input

    func expectError(_ bytes: [UInt8], _ reason: DNSParseError.Reason, at offset: Int? = nil, limits: DNSParserLimits = .default,
                     sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            let m = try DNSMessage(bytes: bytes, limits: limits)
            Issue.record("parsed unexpectedly: \(m)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.reason == reason, sourceLocation: sourceLocation)
            if let offset { #expect(error.offset == offset, sourceLocation: sourceLocation) }
        }
    }

    @Test func pointerLoopsAreRejected() {
        // A question name that is a pointer to itself.
        expectError(Self.header(flags: 0) + [0xC0, 0x0C, 0, 1, 0, 1], .pointerLoop, at: 12)
        // Two pointers pointing at each other (offset 12 → 14 → 12).
        expectError(Self.header(flags: 0) + [0xC0, 0x0E, 0xC0, 0x0C, 0, 1, 0, 1], .pointerLoop)
        // A label, then a pointer back to the label: www.www.www… would never end.
        expectError(Self.header(flags: 0) + [3, 0x77, 0x77, 0x77, 0xC0, 0x0C, 0, 1, 0, 1], .pointerLoop, at: 16)
    }

    @Test func pointersOutOfBoundsAreRejected() {
        expectError(Self.header(flags: 0) + [0xC0, 0xFF, 0, 1, 0, 1], .pointerOutOfBounds, at: 12)
        expectError(Self.header(flags: 0) + [0xFF, 0xFF, 0, 1, 0, 1], .pointerOutOfBounds, at: 12)
        // A pointer whose second byte is missing.
        expectError(Self.header(flags: 0) + [0xC0], .truncated, at: 13)
        // The same inside a record of a message with enough bytes for its counts.
        expectError(Self.header(flags: 0x8000, an: 1) + Self.exampleCom + [0, 1, 0, 1, 0xC0], .truncated, at: 29)
    }

    @Test func reservedLabelTypesAreRejected() {
        expectError(Self.header(flags: 0) + [0x41, 0, 0, 1, 0, 1], .reservedLabelType, at: 12)
        expectError(Self.header(flags: 0) + [0x80, 0, 0, 1, 0, 1], .reservedLabelType, at: 12)
    }

    @Test func namesOver255OctetsAreRejected() {
        // Five labels of 63 octets: 5 × 64 + 1 = 321 octets.
        let label: [UInt8] = [63] + [UInt8](repeating: 0x61, count: 63)
        let long = Array([[UInt8]](repeating: label, count: 5).joined()) + [0]
        expectError(Self.header(flags: 0) + long + [0, 1, 0, 1], .nameTooLong)
        // Four labels, 257 octets: also too long. Three labels plus 61: exactly 255, accepted.
        let four = Array([[UInt8]](repeating: label, count: 4).joined()) + [0]
        expectError(Self.header(flags: 0) + four + [0, 1, 0, 1], .nameTooLong)
        let max = Array([[UInt8]](repeating: label, count: 3).joined()) + [61] + [UInt8](repeating: 0x62, count: 61) + [0]
        #expect(throws: Never.self) {
            let m = try DNSMessage(bytes: Self.header(flags: 0) + max + [0, 1, 0, 1])
            #expect(m.questions[0].name.wireLength == 255)
        }
        // The same length reached through compression is caught too.
        var viaPointer = Self.header(flags: 0, qd: 2) + max + [0, 1, 0, 1]
        viaPointer += [1, 0x63, 0xC0, 0x0C, 0, 1, 0, 1]
        expectError(viaPointer, .nameTooLong)
    }

    @Test func tooManyPointersInOneName() throws {
        // The question name (offset 12) points at the last of 40 chained pointers, each pointing
        // at the one before, the first at a root label (offset 18): 41 pointers in all.
        var message = Self.header(flags: 0) + [0xC0, 0, 0, 1, 0, 1] + [0]
        var previous = 18
        for _ in 0..<40 {
            let here = message.count
            message += [0xC0, UInt8(previous)]
            previous = here
        }
        message[13] = UInt8(previous)
        expectError(message, .tooManyPointers, at: 35, limits: DNSParserLimits(maxCompressionPointers: 32))
        let m = try DNSMessage(bytes: message, limits: DNSParserLimits(maxCompressionPointers: 64))
        #expect(m.questions[0].name == .root)
    }

    @Test func truncatedInputIsRejected() throws {
        expectError([], .truncated, at: 0)
        expectError([0xAB, 0xCD, 0x81], .truncated, at: 3)
        let full = Self.header(flags: 0x8180, an: 1) + Self.exampleCom + [0, 1, 0, 1] + [0xC0, 0x0C, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]
        #expect(throws: Never.self) { try DNSMessage(bytes: full) }
        for cut in 12..<full.count {
            do {
                _ = try DNSMessage(bytes: Array(full[0..<cut]))
                Issue.record("a message cut at \(cut) parsed")
            } catch {
                #expect(error.reason == .truncated)
            }
        }
    }

    @Test func recordDataLengthMismatches() {
        let q = Self.exampleCom + [0, 1, 0, 1]
        // An A record with five octets of data.
        expectError(Self.header(flags: 0x8180, an: 1) + q + [0xC0, 0x0C, 0, 1, 0, 1, 0, 0, 0, 60, 0, 5, 1, 2, 3, 4, 5], .recordDataLength)
        // An AAAA record with four.
        expectError(Self.header(flags: 0x8180, an: 1) + q + [0xC0, 0x0C, 0, 28, 0, 1, 0, 0, 0, 60, 0, 4, 1, 2, 3, 4], .recordDataLength)
        // An SRV record whose target runs past RDLENGTH.
        let srv: [UInt8] = [0, 1, 0, 1, 0x13, 0xC4] + Self.exampleCom
        expectError(Self.header(flags: 0x8180, an: 1) + q + [0xC0, 0x0C, 0, 33, 0, 1, 0, 0, 0, 60, 0, UInt8(srv.count - 2)] + srv, .recordDataLength)
        // An SRV record with bytes left after its target.
        expectError(Self.header(flags: 0x8180, an: 1) + q + [0xC0, 0x0C, 0, 33, 0, 1, 0, 0, 0, 60, 0, UInt8(srv.count + 1)] + srv + [9], .recordDataLength)
        // A NAPTR record whose services string claims more octets than RDLENGTH holds.
        let naptr: [UInt8] = [0, 1, 0, 1, 1, 0x73, 40, 0x53]
        expectError(Self.header(flags: 0x8180, an: 1) + q + [0xC0, 0x0C, 0, 35, 0, 1, 0, 0, 0, 60, 0, UInt8(naptr.count)] + naptr, .recordDataLength)
        // RDLENGTH running past the end of the message.
        expectError(Self.header(flags: 0x8180, an: 1) + q + [0xC0, 0x0C, 0, 1, 0, 1, 0, 0, 0, 60, 0, 40, 1, 2, 3, 4], .truncated)
    }

    @Test func recordCountsAreBounded() {
        // 65,535 answers announced in a 29-byte message.
        expectError(Self.header(flags: 0x8180, an: 0xFFFF) + Self.exampleCom + [0, 1, 0, 1], .tooManyRecords, at: 6)
        // More questions than the limit.
        expectError(Self.header(flags: 0, qd: 9) + Self.exampleCom + [0, 1, 0, 1], .tooManyRecords, at: 4)
        // Within the configured limits but more than the bytes could hold: cut short.
        expectError(Self.header(flags: 0x8180, an: 3) + Self.exampleCom + [0, 1, 0, 1], .truncated, at: 29)
        // A message over the size limit.
        expectError([UInt8](repeating: 0, count: 600), .messageTooLarge, limits: DNSParserLimits(maxMessageSize: 512))
    }

    @Test func unknownTypesAndOtherClassesAreKeptRaw() throws {
        let q = Self.exampleCom + [0, 99, 0, 1]
        let m = try DNSMessage(bytes: Self.header(flags: 0x8180, an: 2) + q
            + [0xC0, 0x0C, 0, 99, 0, 1, 0, 0, 0, 60, 0, 3, 7, 8, 9]
            + [0xC0, 0x0C, 0, 1, 0, 3, 0, 0, 0, 60, 0, 2, 0xAA, 0xBB])  // an "A" in class CH
        #expect(m.answers[0].data == .unknown(type: DNSRecordType(rawValue: 99), data: [7, 8, 9]))
        #expect(m.answers[0].type.description == "TYPE99")
        #expect(m.answers[1].data == .unknown(type: .a, data: [0xAA, 0xBB]))
        #expect(m.answers[1].recordClass == DNSClass(rawValue: 3))
    }

    // MARK: - Encoding

    @Test func encodingCompressesOwnerNamesButNotSRVTargets() throws {
        let name = try DNSName("_sip._udp.example.com")
        let target = try DNSName("sip1.example.com")
        let response = DNSMessage(
            id: 7, isResponse: true, questions: [DNSQuestion(name: name, type: .srv)],
            answers: [
                DNSRecord(name: name, ttl: 60, data: .srv(DNSSRVRecord(priority: 1, weight: 2, port: 5060, target: target))),
                DNSRecord(name: name, ttl: 60, data: .srv(DNSSRVRecord(priority: 1, weight: 2, port: 5062, target: target))),
            ],
            additionals: [DNSRecord(name: target, ttl: 60, data: .a(IPv4Address(192, 0, 2, 7)))])
        let compressed = try response.encoded()
        let plain = try response.encoded(compressNames: false)
        #expect(compressed.count < plain.count)
        // Owner names of the answers are pointers to the question name at offset 12.
        let questionEnd = 12 + name.wireLength + 4
        #expect(Array(compressed[questionEnd..<(questionEnd + 2)]) == [0xC0, 0x0C])
        // SRV targets are written out in full, both times.
        let full = Array(target.labels.map { [UInt8($0.count)] + $0 }.joined()) + [0]
        #expect(occurrences(of: full, in: compressed) == 2)
        #expect(try DNSMessage(bytes: compressed) == response)
        #expect(try DNSMessage(bytes: plain) == response)
    }

    @Test func everyRecordKindRoundTrips() throws {
        let n = try DNSName("Host.Example.org")
        let records: [DNSRecord] = [
            DNSRecord(name: n, ttl: 1, data: .a(IPv4Address(10, 1, 2, 3))),
            DNSRecord(name: n, ttl: 2, data: .aaaa(IPv6Address("fe80::1:2")!)),
            DNSRecord(name: n, ttl: 3, data: .cname(try DNSName("other.example.org"))),
            DNSRecord(name: n, ttl: 4, data: .ns(try DNSName("ns1.example.org"))),
            DNSRecord(name: n, ttl: 5, data: .ptr(try DNSName("ptr.example.org"))),
            DNSRecord(name: n, ttl: 6, data: .txt([Array("v=1".utf8), [], [0, 255]])),
            DNSRecord(name: n, ttl: 7, data: .naptr(DNSNAPTRRecord(order: 10, preference: 20, flags: "S", services: "SIP+D2U",
                                                                  regexp: "", replacement: try DNSName("_sip._udp.example.org")))),
            DNSRecord(name: n, ttl: 8, data: .unknown(type: DNSRecordType(rawValue: 65280), data: [1, 2, 3])),
            DNSRecord(name: .root, recordClass: DNSClass(rawValue: 1232), ttl: 0, data: .unknown(type: .opt, data: [])),
        ]
        let soa = DNSRecord(name: try DNSName("example.org"), ttl: 9, data: .soa(DNSSOARecord(
            primaryServer: try DNSName("ns1.example.org"), responsibleMailbox: try DNSName("hostmaster.example.org"),
            serial: 2024010101, refresh: 7200, retry: 3600, expire: 1209600, minimum: 300)))
        let m = DNSMessage(id: 0xFFFF, isResponse: true, opcode: 2, isAuthoritative: true, isTruncated: false, recursionDesired: false,
                           recursionAvailable: true, responseCode: .refused, questions: [DNSQuestion(name: n, type: .a)],
                           answers: records, authorities: [soa], additionals: [])
        #expect(try DNSMessage(bytes: try m.encoded()) == m)
        #expect(try DNSMessage(bytes: try m.encoded(compressNames: false)) == m)
    }

    @Test func encodingErrors() throws {
        let n = try DNSName("example.com")
        let longString = DNSRecord(name: n, ttl: 1, data: .txt([[UInt8](repeating: 0x41, count: 256)]))
        #expect(throws: DNSEncodingError.characterStringTooLong) { try DNSMessage(id: 1, answers: [longString]).encoded() }
        let huge = DNSRecord(name: n, ttl: 1, data: .unknown(type: DNSRecordType(rawValue: 300), data: [UInt8](repeating: 0, count: 70_000)))
        #expect(throws: DNSEncodingError.recordDataTooLong) { try DNSMessage(id: 1, answers: [huge]).encoded() }
        let big = DNSRecord(name: n, ttl: 1, data: .unknown(type: DNSRecordType(rawValue: 300), data: [UInt8](repeating: 0, count: 40_000)))
        #expect(throws: DNSEncodingError.messageTooLarge) { try DNSMessage(id: 1, answers: [big, big]).encoded() }
    }

    func occurrences(of needle: [UInt8], in haystack: [UInt8]) -> Int {
        guard needle.count <= haystack.count else { return 0 }
        return (0...(haystack.count - needle.count)).filter { Array(haystack[$0..<($0 + needle.count)]) == needle }.count
    }
}
