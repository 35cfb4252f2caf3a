/// What a stream framer cut out of the byte stream.
public enum SIPStreamEvent: Sendable {
    /// A complete message.
    case message(SIPMessage)
    /// A double CRLF between messages: an RFC 5626 §4.4.1 keep-alive ping (answer with CRLF).
    case keepAlivePing
    /// A single CRLF between messages: an RFC 5626 keep-alive pong.
    case keepAlivePong
    /// Bytes skipped by a resynchronizing framer, and why (never produced in strict mode).
    case discarded([UInt8], SIPParseError)
}

/// Cuts SIP messages out of a connection's byte stream (TCP, TLS) by Content-Length
/// (RFC 3261 §18.3), skipping CRLF keep-alives and waiting for more bytes on a partial message.
///
/// In ``Mode/strict`` mode (a live connection) garbage, a missing or malformed Content-Length
/// or an oversized message fails the stream with a typed error, after which the connection
/// should be closed. In ``Mode/resynchronizing`` mode (reading captures) bad bytes are reported
/// as ``SIPStreamEvent/discarded(_:_:)`` and the framer skips to the next start line.
///
/// Memory is bounded: at most one message (``SIPParserLimits/maxMessageSize``) is buffered.
///
/// Keep-alives are told apart by what one read delivers: `CRLFCRLF` is a ping, a lone `CRLF`
/// a pong. A ping split across two reads is reported as two pongs; peers send the four bytes
/// in one segment.
public struct SIPStreamFramer: Sendable {
    /// How the framer reacts to bad bytes.
    public enum Mode: Sendable, Hashable {
        /// Fail the stream: the error is thrown by ``SIPStreamFramer/next()`` from then on.
        case strict
        /// Skip bad bytes to the next line that is a valid start line.
        case resynchronizing
    }

    public let limits: SIPParserLimits
    public let mode: Mode
    private var buffer: [UInt8] = []
    private var readIndex = 0
    private var failure: SIPParseError?
    /// Where the search for the end of the headers resumes (bytes before it hold no blank line).
    private var headerSearchFrom = 0
    /// Once a message's headers parsed, the buffer length it needs before it is complete.
    private var neededLength: Int?
    /// Where the last (unterminated) line starts, to catch an overlong line early.
    private var lineStart = 0
    /// How many times the header parser ran (for tests of the linear-time behaviour).
    private(set) var parseAttempts = 0
    /// Bytes consumed before `buffer[0]`, so error offsets count from the stream's start.
    private var consumedBefore = 0

    public init(limits: SIPParserLimits = .default, mode: Mode = .strict) {
        self.limits = limits
        self.mode = mode
    }

    /// The number of bytes received but not yet framed.
    public var bufferedByteCount: Int { buffer.count - readIndex }

    /// The bytes received but not yet framed (a partial message, or junk a resynchronizing
    /// framer is still deciding about).
    public var pendingBytes: ArraySlice<UInt8> { buffer[readIndex...] }

    /// Adds bytes received from the connection.
    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        if readIndex > 0 && readIndex >= buffer.count / 2 {
            buffer.removeFirst(readIndex)
            consumedBefore += readIndex
            headerSearchFrom = max(0, headerSearchFrom - readIndex)
            lineStart = max(0, lineStart - readIndex)
            if let n = neededLength { neededLength = n - readIndex }
            readIndex = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next event, or `nil` when more bytes are needed.
    /// - Throws: in strict mode, the ``SIPParseError`` that failed the stream (every later call
    ///   throws it again).
    public mutating func next() throws(SIPParseError) -> SIPStreamEvent? {
        if let f = failure { throw f }
        while true {
            guard readIndex < buffer.count else { return nil }
            // Keep-alives between messages.
            let b0 = buffer[readIndex]
            if b0 == 0x0D || b0 == 0x0A {
                if hasPrefix("\r\n\r\n") { readIndex += 4; return .keepAlivePing }
                if hasPrefix("\r\n") { readIndex += 2; return .keepAlivePong }
                if b0 == 0x0A { readIndex += 1; continue }
                if buffer.count - readIndex < 2 { return nil }
                readIndex += 1  // a lone CR
                continue
            }
            if mode == .strict, !isTokenByte(b0) {
                return try fail(SIPParseError(offset: consumedBefore + readIndex, rule: .garbage, detail: "byte 0x\(String(b0, radix: 16)) cannot start a SIP message"))
            }
            // Parsing costs a pass over the headers: do it only when it can complete (or must
            // fail), so a peer trickling bytes costs linear, not quadratic, time.
            if let n = neededLength, buffer.count < n { return nil }
            if neededLength == nil, !headersMayBeComplete() { return nil }
            parseAttempts += 1
            let step: ParseStep
            do throws(SIPParseError) {
                step = try SIPMessage.parseLayout(buffer, from: readIndex, mode: .stream, limits: limits)
            } catch {
                var e = error
                e.offset += consumedBefore
                if mode == .strict { return try fail(e) }
                if let discarded = resynchronize(after: error) { return .discarded(discarded, e) }
                return nil
            }
            switch step {
            case .needMore(let total):
                // With the headers complete, Content-Length says how many bytes to wait for.
                neededLength = total
                return nil
            case .complete(let layout):
                let start = layout.messageStart, end = layout.bodyEnd
                let bytes = Array(buffer[start..<end])
                readIndex = end
                neededLength = nil
                headerSearchFrom = end
                return .message(SIPMessage(storage: bytes, layout: layout.shifted(by: -start)))
            }
        }
    }

    /// Whether a blank line (LF CRLF or LF LF) may end the headers, or enough bytes are buffered
    /// that the size limit decides; advances the search position otherwise.
    private mutating func headersMayBeComplete() -> Bool {
        if buffer.count - readIndex > limits.maxMessageSize { return true }
        if lineStart < readIndex { lineStart = readIndex }
        var k = max(readIndex, headerSearchFrom - 2)
        while k < buffer.count {
            if buffer[k] == 0x0A {
                lineStart = k + 1
                if k + 1 < buffer.count, buffer[k + 1] == 0x0A { return true }
                if k + 2 < buffer.count, buffer[k + 1] == 0x0D, buffer[k + 2] == 0x0A { return true }
                if k + 2 >= buffer.count { break }
            }
            k += 1
        }
        headerSearchFrom = max(readIndex, buffer.count - 2)
        // An unterminated line already longer than the limit fails now, not at 64 KiB.
        return buffer.count - lineStart > limits.maxLineLength
    }

    private mutating func fail(_ e: SIPParseError) throws(SIPParseError) -> SIPStreamEvent? {
        failure = e
        throw e
    }

    private func hasPrefix(_ s: StaticString) -> Bool {
        let n = s.utf8CodeUnitCount
        guard buffer.count - readIndex >= n else { return false }
        for k in 0..<n where buffer[readIndex + k] != s.utf8Start[k] { return false }
        return true
    }

    /// Finds where to skip to after a parse error; returns the skipped bytes, or `nil` to wait.
    private mutating func resynchronize(after error: SIPParseError) -> [UInt8]? {
        let lineEnd = lineEnd(from: readIndex)
        let inStartLine: Bool
        switch error.rule {
        case .requestLine, .statusLine, .sipVersion, .method, .statusCode, .reasonPhrase, .garbage, .emptyMessage: inStartLine = true
        default: inStartLine = false
        }
        var skipTo: Int?
        if inStartLine || error.rule == .messageTooLarge || error.rule == .lineTooLong {
            // Skip whole lines until one is a valid start line.
            var k = lineEnd.map { $0 + 1 }
            while let s = k, s < buffer.count {
                guard let le = self.lineEnd(from: s) else { break }
                if isStartLine(s, le) { skipTo = s; break }
                k = le + 1
            }
        } else {
            // The start line was fine: drop the header block, up to its blank line or to a
            // later line that is itself a start line (a message that followed a broken one).
            var k = readIndex
            while let le = self.lineEnd(from: k) {
                let content = le > k && buffer[le - 1] == 0x0D ? le - 1 : le
                if content == k && k > readIndex { skipTo = le + 1; break }
                if k > readIndex, isStartLine(k, le) { skipTo = k; break }
                k = le + 1
            }
        }
        if skipTo == nil, buffer.count - readIndex > limits.maxMessageSize { skipTo = buffer.count }
        guard let to = skipTo else { return nil }
        let skipped = Array(buffer[readIndex..<to])
        readIndex = to
        neededLength = nil
        return skipped
    }

    private func lineEnd(from i: Int) -> Int? {
        var k = i
        while k < buffer.count { if buffer[k] == 0x0A { return k }; k += 1 }
        return nil
    }

    private func isStartLine(_ s: Int, _ le: Int) -> Bool {
        let content = le > s && buffer[le - 1] == 0x0D ? le - 1 : le
        guard content > s else { return false }
        return buffer.withUnsafeBufferPointer { p in
            (try? SIPMessage.parseStartLine(p, s..<content)) != nil
        }
    }
}

extension ParsedLayout {
    func shifted(by d: Int) -> ParsedLayout {
        var copy = self
        for k in copy.entries.indices {
            copy.entries[k].nameStart = UInt32(Int(copy.entries[k].nameStart) + d)
            copy.entries[k].nameEnd = UInt32(Int(copy.entries[k].nameEnd) + d)
            copy.entries[k].valueStart = UInt32(Int(copy.entries[k].valueStart) + d)
            copy.entries[k].valueEnd = UInt32(Int(copy.entries[k].valueEnd) + d)
        }
        switch start {
        case .request(let m, let u, let v): copy.start = .request(method: m, uri: (u.lowerBound + d)..<(u.upperBound + d), version: v)
        case .response(let v, let c, let r): copy.start = .response(version: v, code: c, reason: (r.lowerBound + d)..<(r.upperBound + d))
        }
        copy.messageStart += d
        copy.headerEnd += d
        copy.bodyEnd += d
        return copy
    }
}
