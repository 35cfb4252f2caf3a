extension SIPMessage {
    /// The Call-ID of the message in `bytes`, found by scanning the header lines without
    /// parsing the message (for mirrors and routers that only need the call's key on a hot path).
    ///
    /// Header names are matched case-insensitively, the compact form `i` included (RFC 3261
    /// §7.3.3), with optional whitespace before the colon; the scan stops at the blank line
    /// that ends the headers or after `limit` bytes. Nil when there is no Call-ID header or its
    /// value is empty. A folded Call-ID (continuation lines) yields its first line only.
    public static func peekCallID(in bytes: [UInt8], limit: Int = 65_536) -> String? {
        bytes.withUnsafeBufferPointer { peekCallID(in: UnsafeBufferPointer(rebasing: $0[..<min($0.count, limit)])) }
    }

    /// ``peekCallID(in:limit:)`` over raw bytes.
    public static func peekCallID(in b: UnsafeBufferPointer<UInt8>) -> String? {
        let n = b.count
        // Skip the start line.
        var i = 0
        while i < n, b[i] != 0x0A { i += 1 }
        i += 1
        while i < n {
            let lineStart = i
            while i < n, b[i] != 0x0A { i += 1 }
            var lineEnd = i
            i += 1
            if lineEnd > lineStart, b[lineEnd - 1] == 0x0D { lineEnd -= 1 }
            if lineEnd == lineStart { return nil }          // the blank line: headers are over
            guard let value = callIDValue(b, lineStart, lineEnd) else { continue }
            return value
        }
        return nil
    }

    /// The value of the header line `b[start..<end]` when it is a Call-ID header.
    private static func callIDValue(_ b: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> String? {
        var j = start
        while j < end, b[j] != 0x3A, b[j] != 0x20, b[j] != 0x09 { j += 1 }
        let nameEnd = j
        while j < end, b[j] == 0x20 || b[j] == 0x09 { j += 1 }
        guard j < end, b[j] == 0x3A else { return nil }
        let name = nameEnd - start
        let isCallID: Bool
        @inline(__always) func lower(_ c: UInt8) -> UInt8 { c >= 0x41 && c <= 0x5A ? c | 0x20 : c }
        if name == 1 {
            isCallID = lower(b[start]) == 0x69                                    // "i"
        } else if name == 7 {
            isCallID = lower(b[start]) == 0x63 && lower(b[start + 1]) == 0x61     // "ca"
                && lower(b[start + 2]) == 0x6C && lower(b[start + 3]) == 0x6C     // "ll"
                && b[start + 4] == 0x2D                                           // "-"
                && lower(b[start + 5]) == 0x69 && lower(b[start + 6]) == 0x64     // "id"
        } else {
            return nil
        }
        guard isCallID else { return nil }
        j += 1
        var e = end
        while j < e, b[j] == 0x20 || b[j] == 0x09 { j += 1 }
        while e > j, b[e - 1] == 0x20 || b[e - 1] == 0x09 { e -= 1 }
        guard e > j else { return nil }
        return String(decoding: UnsafeBufferPointer(rebasing: b[j..<e]), as: UTF8.self)
    }
}
