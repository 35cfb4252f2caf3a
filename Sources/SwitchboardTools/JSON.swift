import CaptureAnalysis

/// A small JSON value for the tools' `--json` output (no Foundation needed).
public indirect enum JSONValue: Sendable, Equatable {
    case string(String)
    case number(Double)
    case int(Int)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([(String, JSONValue)])

    public static func == (a: JSONValue, b: JSONValue) -> Bool { a.rendered() == b.rendered() }

    /// The value as JSON text, pretty-printed with two-space indentation.
    public func rendered(indent: Int = 0) -> String {
        let pad = String(repeating: "  ", count: indent + 1), close = String(repeating: "  ", count: indent)
        switch self {
        case .string(let s): return JSONValue.quote(s)
        case .number(let d): return d.isFinite ? "\(d)" : "null"
        case .int(let i): return "\(i)"
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        case .array(let a):
            if a.isEmpty { return "[]" }
            return "[\n" + a.map { pad + $0.rendered(indent: indent + 1) }.joined(separator: ",\n") + "\n\(close)]"
        case .object(let o):
            if o.isEmpty { return "{}" }
            return "{\n" + o.map { pad + JSONValue.quote($0.0) + ": " + $0.1.rendered(indent: indent + 1) }.joined(separator: ",\n") + "\n\(close)}"
        }
    }

    static func quote(_ s: String) -> String {
        let body = s.replacingScalars { u in
            switch u {
            case "\"": return "\\\""
            case "\\": return "\\\\"
            case "\n": return "\\n"
            case "\r": return "\\r"
            case "\t": return "\\t"
            case _ where u.value < 0x20 || u.value == 0x7F:
                let h = String(u.value, radix: 16)
                return "\\u" + String(repeating: "0", count: 4 - h.count) + h
            default: return nil
            }
        }
        return "\"" + body + "\""
    }
}
