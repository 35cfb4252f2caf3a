extension DNSMessage {
    /// The message in wire form (RFC 1035 §4.1).
    ///
    /// With `compressNames`, owner and question names and the names inside CNAME, NS, PTR and
    /// SOA data are compressed with pointers to earlier occurrences (§4.1.4). SRV targets and
    /// NAPTR replacements are never compressed (RFC 2782, RFC 3403 §4.1). Header counts are
    /// taken from the sections; the Z bits are written as zero.
    public func encoded(compressNames: Bool = true) throws(DNSEncodingError) -> [UInt8] {
        var w = DNSWriter(compress: compressNames)
        guard questions.count <= 0xFFFF, answers.count <= 0xFFFF, authorities.count <= 0xFFFF, additionals.count <= 0xFFFF else {
            throw .tooManyRecords
        }
        w.u16(id)
        w.u16(flags)
        w.u16(UInt16(questions.count))
        w.u16(UInt16(answers.count))
        w.u16(UInt16(authorities.count))
        w.u16(UInt16(additionals.count))
        for q in questions {
            w.name(q.name, compressible: true)
            w.u16(q.type.rawValue)
            w.u16(q.questionClass.rawValue)
        }
        for section in [answers, authorities, additionals] {
            for r in section { try w.record(r) }
        }
        guard w.out.count <= 0xFFFF else { throw .messageTooLarge }
        return w.out
    }
}

/// Appends wire-format fields, remembering where names were written for compression.
struct DNSWriter {
    var out = [UInt8]()
    let compress: Bool
    /// Offsets of name suffixes already written (lower-cased labels → offset).
    var offsets = [[[UInt8]]: Int]()

    init(compress: Bool) {
        self.compress = compress
        out.reserveCapacity(512)
    }

    mutating func u16(_ v: UInt16) {
        out.append(UInt8(truncatingIfNeeded: v >> 8))
        out.append(UInt8(truncatingIfNeeded: v))
    }

    mutating func u32(_ v: UInt32) {
        u16(UInt16(truncatingIfNeeded: v >> 16))
        u16(UInt16(truncatingIfNeeded: v))
    }

    /// Writes a name; a compressible one may end in a pointer to an earlier suffix and is
    /// itself remembered as a target for later names.
    mutating func name(_ n: DNSName, compressible: Bool) {
        let useCompression = compress && compressible
        let canonical = useCompression ? n.canonicalLabels : []
        for i in 0..<n.labels.count {
            if useCompression {
                let suffix = Array(canonical[i...])
                if let offset = offsets[suffix] {
                    u16(0xC000 | UInt16(offset))
                    return
                }
                // A pointer holds 14 bits of offset.
                if out.count < 0x4000 { offsets[suffix] = out.count }
            }
            let label = n.labels[i]
            out.append(UInt8(label.count))
            out.append(contentsOf: label)
        }
        out.append(0)
    }

    mutating func characterString(_ s: [UInt8]) throws(DNSEncodingError) {
        guard s.count <= 255 else { throw .characterStringTooLong }
        out.append(UInt8(s.count))
        out.append(contentsOf: s)
    }

    mutating func record(_ r: DNSRecord) throws(DNSEncodingError) {
        name(r.name, compressible: true)
        u16(r.type.rawValue)
        u16(r.recordClass.rawValue)
        u32(r.ttl)
        let lengthAt = out.count
        u16(0)
        switch r.data {
        case .a(let a): out.append(contentsOf: a.bytes)
        case .aaaa(let a): out.append(contentsOf: a.bytes)
        case .cname(let n), .ns(let n), .ptr(let n): name(n, compressible: true)
        case .soa(let s):
            name(s.primaryServer, compressible: true)
            name(s.responsibleMailbox, compressible: true)
            u32(s.serial); u32(s.refresh); u32(s.retry); u32(s.expire); u32(s.minimum)
        case .txt(let strings):
            for s in strings { try characterString(s) }
        case .srv(let s):
            u16(s.priority); u16(s.weight); u16(s.port)
            name(s.target, compressible: false)
        case .naptr(let n):
            u16(n.order); u16(n.preference)
            try characterString(Array(n.flags.utf8))
            try characterString(Array(n.services.utf8))
            try characterString(Array(n.regexp.utf8))
            name(n.replacement, compressible: false)
        case .unknown(_, let data):
            out.append(contentsOf: data)
        }
        let length = out.count - lengthAt - 2
        guard length <= 0xFFFF else { throw .recordDataTooLong }
        out[lengthAt] = UInt8(truncatingIfNeeded: length >> 8)
        out[lengthAt + 1] = UInt8(truncatingIfNeeded: length)
        guard out.count <= 0xFFFF + 0xFFFF else { throw .messageTooLarge }
    }
}
