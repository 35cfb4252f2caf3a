import NetworkIO

extension DNSMessage {
    /// Parses a DNS message (RFC 1035 §4.1), following name compression pointers
    /// (§4.1.4) and decoding the RDATA of A, AAAA, CNAME, NS, PTR, SOA, TXT, SRV and NAPTR
    /// records of class IN; other records are kept as raw bytes.
    ///
    /// Every read is bounds-checked and every count is bounded by `limits`, so any input either
    /// parses or throws a ``DNSParseError``: pointer loops, pointers out of bounds, reserved
    /// label types, names over 255 octets, RDLENGTH mismatches and truncation are all reported
    /// with the offset where they were found. Bytes after the last record are ignored.
    ///
    /// A message with the TC bit set may legitimately end in the middle of a section; it is
    /// returned with the entries read before the cut rather than rejected.
    public init(bytes: [UInt8], limits: DNSParserLimits = .default) throws(DNSParseError) {
        var reader = DNSReader(bytes: bytes, limits: limits)
        self = try reader.readMessage()
    }
}

/// A bounds-checked cursor over one message.
struct DNSReader {
    let b: [UInt8]
    let limits: DNSParserLimits
    var pos = 0

    init(bytes: [UInt8], limits: DNSParserLimits) {
        b = bytes
        self.limits = limits
    }

    /// Reads a 16-bit field at `p` that must end by `end`; `short` is the error otherwise.
    func u16(at p: Int, end: Int, short: DNSParseError.Reason = .truncated) throws(DNSParseError) -> UInt16 {
        guard p >= 0, p + 2 <= end else { throw DNSParseError(offset: min(p, b.count), reason: short) }
        return UInt16(b[p]) << 8 | UInt16(b[p + 1])
    }

    /// Reads a 32-bit field at `p` that must end by `end`; `short` is the error otherwise.
    func u32(at p: Int, end: Int, short: DNSParseError.Reason = .truncated) throws(DNSParseError) -> UInt32 {
        guard p >= 0, p + 4 <= end else { throw DNSParseError(offset: min(p, b.count), reason: short) }
        return UInt32(b[p]) << 24 | UInt32(b[p + 1]) << 16 | UInt32(b[p + 2]) << 8 | UInt32(b[p + 3])
    }

    /// Reads the name starting at `start`; returns it and the offset just past it in the
    /// uncompressed stream (after the first pointer, or after the root label).
    func name(at start: Int) throws(DNSParseError) -> (DNSName, Int) {
        var labels = [[UInt8]]()
        var p = start
        var next: Int? = nil
        var wire = 1
        var visited = [Int]()
        while true {
            guard p < b.count else { throw DNSParseError(offset: p, reason: .truncated) }
            let length = b[p]
            switch length & 0xC0 {
            case 0x00:
                if length == 0 {
                    return (DNSName(unchecked: labels), next ?? p + 1)
                }
                let n = Int(length)
                guard p + 1 + n <= b.count else { throw DNSParseError(offset: p, reason: .truncated) }
                wire += n + 1
                guard wire <= 255 else { throw DNSParseError(offset: p, reason: .nameTooLong) }
                labels.append(Array(b[(p + 1)..<(p + 1 + n)]))
                p += 1 + n
            case 0xC0:
                guard p + 1 < b.count else { throw DNSParseError(offset: p, reason: .truncated) }
                let target = Int(length & 0x3F) << 8 | Int(b[p + 1])
                if next == nil { next = p + 2 }
                guard target < b.count else { throw DNSParseError(offset: p, reason: .pointerOutOfBounds) }
                guard !visited.contains(target) else { throw DNSParseError(offset: p, reason: .pointerLoop) }
                guard visited.count < limits.maxCompressionPointers else { throw DNSParseError(offset: p, reason: .tooManyPointers) }
                visited.append(target)
                p = target
            default:
                throw DNSParseError(offset: p, reason: .reservedLabelType)
            }
        }
    }

    mutating func readMessage() throws(DNSParseError) -> DNSMessage {
        guard b.count <= limits.maxMessageSize else { throw DNSParseError(offset: limits.maxMessageSize, reason: .messageTooLarge) }
        guard b.count >= 12 else { throw DNSParseError(offset: b.count, reason: .truncated) }
        let id = try u16(at: 0, end: 12)
        let flags = try u16(at: 2, end: 12)
        let qd = Int(try u16(at: 4, end: 12))
        let an = Int(try u16(at: 6, end: 12))
        let ns = Int(try u16(at: 8, end: 12))
        let ar = Int(try u16(at: 10, end: 12))
        let truncatedFlag = flags & 0x0200 != 0
        guard qd <= limits.maxQuestions else { throw DNSParseError(offset: 4, reason: .tooManyRecords) }
        guard an + ns + ar <= limits.maxRecords else { throw DNSParseError(offset: 6, reason: .tooManyRecords) }
        // A question takes at least 5 octets and a record at least 11: a message too short for
        // its counts is cut short, and is rejected before any parsing.
        if !truncatedFlag, 12 + qd * 5 + (an + ns + ar) * 11 > b.count {
            throw DNSParseError(offset: b.count, reason: .truncated)
        }
        var message = DNSMessage(
            id: id,
            isResponse: flags & 0x8000 != 0,
            opcode: UInt8(truncatingIfNeeded: flags >> 11) & 0x0F,
            isAuthoritative: flags & 0x0400 != 0,
            isTruncated: truncatedFlag,
            recursionDesired: flags & 0x0100 != 0,
            recursionAvailable: flags & 0x0080 != 0,
            responseCode: DNSResponseCode(rawValue: UInt8(truncatingIfNeeded: flags & 0x000F))
        )
        pos = 12
        do throws(DNSParseError) {
            for _ in 0..<qd { message.questions.append(try readQuestion()) }
            for _ in 0..<an { message.answers.append(try readRecord()) }
            for _ in 0..<ns { message.authorities.append(try readRecord()) }
            for _ in 0..<ar { message.additionals.append(try readRecord()) }
        } catch {
            // A truncated response is kept with what arrived before the cut.
            guard truncatedFlag, error.reason == .truncated else { throw error }
        }
        return message
    }

    mutating func readQuestion() throws(DNSParseError) -> DNSQuestion {
        let (name, after) = try name(at: pos)
        let type = try u16(at: after, end: b.count)
        let cls = try u16(at: after + 2, end: b.count)
        pos = after + 4
        return DNSQuestion(name: name, type: DNSRecordType(rawValue: type), questionClass: DNSClass(rawValue: cls))
    }

    mutating func readRecord() throws(DNSParseError) -> DNSRecord {
        let (name, after) = try name(at: pos)
        let type = DNSRecordType(rawValue: try u16(at: after, end: b.count))
        let cls = DNSClass(rawValue: try u16(at: after + 2, end: b.count))
        let ttl = try u32(at: after + 4, end: b.count)
        let length = Int(try u16(at: after + 8, end: b.count))
        let start = after + 10
        let end = start + length
        guard end <= b.count else { throw DNSParseError(offset: after + 8, reason: .truncated) }
        let data = try readData(type: type, recordClass: cls, start: start, end: end)
        pos = end
        return DNSRecord(name: name, recordClass: cls, ttl: ttl, data: data)
    }

    /// Reads a name that must lie inside the RDATA `[p, end)` (its pointers may lead anywhere).
    func name(at p: Int, within end: Int) throws(DNSParseError) -> (DNSName, Int) {
        guard p < end else { throw DNSParseError(offset: p, reason: .recordDataLength) }
        let (n, after) = try name(at: p)
        guard after <= end else { throw DNSParseError(offset: p, reason: .recordDataLength) }
        return (n, after)
    }

    /// Reads a <character-string> (a length octet and that many octets) inside `[p, end)`.
    func characterString(at p: Int, within end: Int) throws(DNSParseError) -> ([UInt8], Int) {
        guard p < end else { throw DNSParseError(offset: p, reason: .recordDataLength) }
        let n = Int(b[p])
        guard p + 1 + n <= end else { throw DNSParseError(offset: p, reason: .recordDataLength) }
        return (Array(b[(p + 1)..<(p + 1 + n)]), p + 1 + n)
    }

    func exactly(_ after: Int, _ end: Int) throws(DNSParseError) {
        guard after == end else { throw DNSParseError(offset: after, reason: .recordDataLength) }
    }

    func readData(type: DNSRecordType, recordClass: DNSClass, start: Int, end: Int) throws(DNSParseError) -> DNSRecordData {
        guard recordClass == .internet else { return .unknown(type: type, data: Array(b[start..<end])) }
        switch type {
        case .a:
            try exactly(start + 4, end)
            return .a(IPv4Address(b[start], b[start + 1], b[start + 2], b[start + 3]))
        case .aaaa:
            try exactly(start + 16, end)
            guard let address = IPv6Address(bytes: b[start..<end]) else { throw DNSParseError(offset: start, reason: .recordDataLength) }
            return .aaaa(address)
        case .cname, .ns, .ptr:
            let (n, after) = try name(at: start, within: end)
            try exactly(after, end)
            switch type {
            case .cname: return .cname(n)
            case .ns: return .ns(n)
            default: return .ptr(n)
            }
        case .soa:
            let (mname, p1) = try name(at: start, within: end)
            let (rname, p2) = try name(at: p1, within: end)
            try exactly(p2 + 20, end)
            return .soa(DNSSOARecord(
                primaryServer: mname, responsibleMailbox: rname,
                serial: try u32(at: p2, end: end, short: .recordDataLength), refresh: try u32(at: p2 + 4, end: end, short: .recordDataLength), retry: try u32(at: p2 + 8, end: end, short: .recordDataLength),
                expire: try u32(at: p2 + 12, end: end, short: .recordDataLength), minimum: try u32(at: p2 + 16, end: end, short: .recordDataLength)))
        case .txt:
            var strings = [[UInt8]]()
            var p = start
            while p < end {
                let (s, after) = try characterString(at: p, within: end)
                strings.append(s)
                p = after
            }
            return .txt(strings)
        case .srv:
            let priority = try u16(at: start, end: end, short: .recordDataLength)
            let weight = try u16(at: start + 2, end: end, short: .recordDataLength)
            let port = try u16(at: start + 4, end: end, short: .recordDataLength)
            let (target, after) = try name(at: start + 6, within: end)
            try exactly(after, end)
            return .srv(DNSSRVRecord(priority: priority, weight: weight, port: port, target: target))
        case .naptr:
            let order = try u16(at: start, end: end, short: .recordDataLength)
            let preference = try u16(at: start + 2, end: end, short: .recordDataLength)
            let (flags, p1) = try characterString(at: start + 4, within: end)
            let (services, p2) = try characterString(at: p1, within: end)
            let (regexp, p3) = try characterString(at: p2, within: end)
            let (replacement, after) = try name(at: p3, within: end)
            try exactly(after, end)
            return .naptr(DNSNAPTRRecord(
                order: order, preference: preference,
                flags: String(decoding: flags, as: UTF8.self), services: String(decoding: services, as: UTF8.self),
                regexp: String(decoding: regexp, as: UTF8.self), replacement: replacement))
        default:
            return .unknown(type: type, data: Array(b[start..<end]))
        }
    }
}
