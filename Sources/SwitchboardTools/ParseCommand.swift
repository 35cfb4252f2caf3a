import SIPMessage
import SDP
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `switchboard parse`: read files holding one SIP message each, summarize or explain each.
public enum ParseCommand {
    /// One file's outcome.
    public struct Outcome: Sendable {
        public var path: String
        /// The message, when it parsed.
        public var message: SIPMessage?
        /// The first error: reading, parsing, or (when asked) validating.
        public var error: SIPParseError?
        /// Why the file could not be read.
        public var readError: String?
        /// Whether re-serializing the parsed message gave back its bytes, and its canonical
        /// form re-parsed to the same headers.
        public var roundTrips: Bool?
    }

    /// All files' outcomes and their renderings.
    public struct Report: Sendable {
        public var outcomes: [Outcome]
        /// Whether every file was read, parsed (and validated, when asked).
        public var allParsed: Bool { outcomes.allSatisfy { $0.error == nil && $0.readError == nil } }
        public var text: String { outcomes.map(ParseCommand.text).joined() }
        public var json: String { JSONValue.array(outcomes.map(ParseCommand.json)).rendered() + "\n" }
    }

    /// Parses each file (and validates it unless `validate` is false).
    public static func run(paths: [String], validate: Bool = true, limits: SIPParserLimits = .default) -> Report {
        Report(outcomes: paths.map { outcome(path: $0, validate: validate, limits: limits) })
    }

    static func outcome(path: String, validate: Bool, limits: SIPParserLimits) -> Outcome {
        var o = Outcome(path: path)
        guard let bytes = readFile(path, limit: limits.maxMessageSize * 4) else {
            o.readError = "cannot read \(path)"
            return o
        }
        do {
            let m = try SIPMessage(bytes: bytes, limits: limits)
            o.message = m
            o.roundTrips = roundTrips(m)
            if validate { try m.validate() }
        } catch {
            o.error = error
        }
        return o
    }

    /// Reads a whole file, refusing files larger than `limit`.
    public static func readFile(_ path: String, limit: Int) -> [UInt8]? {
        guard let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&chunk, 1, chunk.count, f)
            if n <= 0 { break }
            out.append(contentsOf: chunk[0..<n])
            if out.count > limit { return nil }
        }
        return ferror(f) == 0 ? out : nil
    }

    /// Writes (creates or truncates) a whole file; whether it worked.
    public static func writeFile(_ path: String, _ bytes: [UInt8]) -> Bool {
        guard let f = fopen(path, "wb") else { return false }
        let ok = fwrite(bytes, 1, bytes.count, f) == bytes.count
        return fclose(f) == 0 && ok
    }

    /// Whether the message serializes back to its own bytes and its canonical form re-parses to
    /// the same start line, header values and body.
    public static func roundTrips(_ m: SIPMessage) -> Bool {
        guard let again = try? SIPMessage(bytes: m.serialized()), again.serialized() == m.serialized() else { return false }
        guard let canon = try? SIPMessage(bytes: m.serializedCanonically()) else { return false }
        let strip: (SIPMessage) -> [String] = { msg in
            msg.headerFields.filter { $0.known != .contentLength }.map { "\($0.known?.canonicalName ?? $0.name.lowercased()): \($0.value)" }
        }
        return canon.startLine == m.startLine && strip(canon) == strip(m) && Array(canon.body) == Array(m.body)
            && canon.serializedCanonically() == canon.serialized()
    }

    static func summary(_ m: SIPMessage) -> [(String, JSONValue)] {
        var out: [(String, JSONValue)] = []
        switch m.startLine {
        case .request(let method, let uri, _):
            out.append(("kind", .string("request")))
            out.append(("method", .string(method.token)))
            out.append(("requestURI", .string(uri)))
        case .response(_, let code, let reason):
            out.append(("kind", .string("response")))
            out.append(("status", .int(code)))
            out.append(("reason", .string(reason)))
        }
        out.append(("callID", m.callID.map(JSONValue.string) ?? .null))
        out.append(("cseq", (try? m.cseq()).map { .string($0.description) } ?? .null))
        out.append(("from", (try? m.from()).map { .string($0.uri.description) } ?? .null))
        out.append(("fromTag", m.fromTag.map(JSONValue.string) ?? .null))
        out.append(("to", (try? m.to()).map { .string($0.uri.description) } ?? .null))
        out.append(("toTag", m.toTag.map(JSONValue.string) ?? .null))
        if let v = try? m.topVia() {
            out.append(("via", .string("\(v.transport) \(v.host)\(v.port.map { ":\($0)" } ?? "")")))
            out.append(("branch", v.branch.map(JSONValue.string) ?? .null))
        }
        out.append(("headers", .int(m.headerCount)))
        out.append(("bodyBytes", .int(m.body.count)))
        if let ct = try? m.contentType() { out.append(("contentType", .string(ct.essence))) }
        if let sdp = sdpBody(m) {
            switch sdp {
            case .success(let s): out.append(("sdp", .array(s.media.map { .string(mediaSummary($0, in: s)) })))
            case .failure(let e): out.append(("sdpError", .string(e.description)))
            }
        }
        return out
    }

    /// The SDP in the body (directly, or as a multipart part), decoded.
    static func sdpBody(_ m: SIPMessage) -> Result<SessionDescription, SDPParseError>? {
        guard let ct = try? m.contentType() else { return nil }
        var bytes: [UInt8]? = nil
        if ct.essence == "application/sdp" {
            bytes = Array(m.body)
        } else if ct.type == "multipart", let parts = try? m.multipartParts() {
            bytes = parts.first { $0.contentType?.essence == "application/sdp" }?.body
        }
        guard let b = bytes else { return nil }
        do { return .success(try SessionDescription.parse(b)) } catch { return .failure(error) }
    }

    /// `audio 10580 RTP/SAVP [opus/48000/2 PCMU/8000 telephone-event/8000] sendrecv crypto AES_CM_128_HMAC_SHA1_80 @127.0.0.1`.
    static func mediaSummary(_ md: MediaDescription, in s: SessionDescription) -> String {
        let codecs = md.payloadTypes.map { pt in md.codec(forPayloadType: pt).map { "\($0.encodingName)/\($0.clockRate)" + ($0.channels.map { "/\($0)" } ?? "") } ?? "pt\(pt)" }
        var text = "\(md.media.rawValue) \(md.port) \(md.proto.rawValue) [\(codecs.joined(separator: " "))] \(s.effectiveDirection(for: md).rawValue)"
        if let c = md.cryptos.first { text += " crypto \(c.suite.rawValue)" }
        if let conn = s.connection(for: md) { text += " @\(conn.address)" }
        return text
    }

    static func json(_ o: Outcome) -> JSONValue {
        var fields: [(String, JSONValue)] = [("file", .string(o.path))]
        if let r = o.readError {
            fields.append(("ok", .bool(false)))
            fields.append(("error", .object([("rule", .string("read")), ("detail", .string(r))])))
            return .object(fields)
        }
        fields.append(("ok", .bool(o.error == nil)))
        if let m = o.message { fields.append(("message", .object(summary(m)))) }
        if let rt = o.roundTrips { fields.append(("roundTrips", .bool(rt))) }
        if let e = o.error {
            fields.append(("error", .object([("rule", .string(e.rule.rawValue)), ("offset", .int(e.offset)),
                                             ("detail", .string(e.detail)), ("suggestedStatus", .int(e.suggestedStatusCode))])))
        }
        return .object(fields)
    }

    static func text(_ o: Outcome) -> String {
        if let r = o.readError { return "\(o.path): error: \(r)\n" }
        var s = "\(o.path): "
        if let m = o.message {
            switch m.startLine {
            case .request(let method, let uri, _): s += "\(method.token) \(uri)"
            case .response(_, let code, let reason): s += "\(code) \(reason)"
            }
            s += "\n"
            for (k, v) in summary(m).dropFirst(m.isRequest ? 3 : 3) {
                switch v {
                case .string(let x): s += "  \(k): \(x)\n"
                case .int(let x): s += "  \(k): \(x)\n"
                case .array(let items): for case .string(let x) in items { s += "  \(k): \(x)\n" }
                default: break
                }
            }
            if let rt = o.roundTrips { s += "  round-trip: \(rt ? "ok" : "FAILED")\n" }
        }
        if let e = o.error {
            if o.message == nil { s += "\n" }
            s += "  error: \(e.rule.rawValue) at byte \(e.offset): \(e.detail) (a server answers \(e.suggestedStatusCode))\n"
        }
        return s
    }
}
