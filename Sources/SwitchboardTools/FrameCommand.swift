import SIPMessage

/// `switchboard frame`: cut the SIP messages out of a byte stream (a TCP payload dump) the way
/// a connection-oriented transport does, and summarize each.
public enum FrameCommand {
    public struct Report: Sendable {
        public var lines: [String]
        public var messageCount: Int
        public var error: SIPParseError?
        public var leftoverBytes: Int
        public var text: String { lines.joined(separator: "\n") + "\n" }
    }

    /// Frames `bytes` in `chunkSize`-byte reads (as a socket would deliver them).
    public static func run(bytes: [UInt8], mode: SIPStreamFramer.Mode = .strict, chunkSize: Int = 1460) -> Report {
        var framer = SIPStreamFramer(mode: mode)
        var report = Report(lines: [], messageCount: 0, error: nil, leftoverBytes: 0)
        var offset = 0
        outer: while offset < bytes.count || offset == 0 {
            let end = min(bytes.count, offset + max(1, chunkSize))
            framer.append(bytes[offset..<end])
            offset = end
            do {
                while let event = try framer.next() {
                    switch event {
                    case .message(let m):
                        report.messageCount += 1
                        let first: String
                        switch m.startLine {
                        case .request(let method, let uri, _): first = "\(method.token) \(uri)"
                        case .response(_, let code, let reason): first = "\(code) \(reason)"
                        }
                        report.lines.append("message \(report.messageCount): \(first) (\(m.serialized().count) bytes, Call-ID \(m.callID ?? "-"))")
                    case .keepAlivePing: report.lines.append("keep-alive ping (CRLFCRLF)")
                    case .keepAlivePong: report.lines.append("keep-alive pong (CRLF)")
                    case .discarded(let b, let e): report.lines.append("discarded \(b.count) bytes: \(e)")
                    }
                }
            } catch {
                report.error = error
                report.lines.append("stream failed: \(error)")
                break outer
            }
            if offset >= bytes.count { break }
        }
        report.leftoverBytes = framer.bufferedByteCount
        if report.error == nil && report.leftoverBytes > 0 {
            report.lines.append("\(report.leftoverBytes) bytes wait for the rest of a message")
        }
        report.lines.append("\(report.messageCount) messages framed")
        return report
    }
}
