/// Why a scenario file was refused: what is malformed, or what this runner does not support
/// (refused up front, never skipped), with the line and the element it is in.
public struct SIPpScenarioError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: Sendable, Hashable {
        /// The file is not well-formed XML (the reason).
        case malformedXML(String)
        /// An element SIPp knows (or not) that this runner does not support.
        case unsupportedElement(String)
        /// An attribute this runner does not support on its element.
        case unsupportedAttribute(String)
        /// A `[keyword]` in a message or value that this runner does not substitute.
        case unsupportedKeyword(String)
        /// An attribute the element needs is missing.
        case missingAttribute(String)
        /// An attribute's value is not valid (attribute, value, why).
        case invalidValue(attribute: String, value: String, reason: String)
        /// A `next`, `ontimeout` or jump names no label.
        case unknownLabel(String)
        /// The scenario as a whole cannot run (empty, no root `<scenario>`, …).
        case invalidScenario(String)
    }

    /// The line (1-based) of the offending element or markup.
    public var line: Int
    /// The element it is in, when known.
    public var element: String?
    /// What went wrong.
    public var kind: Kind

    /// Creates an error.
    public init(line: Int, element: String?, kind: Kind) {
        self.line = line
        self.element = element
        self.kind = kind
    }

    /// The line, the element and what is wrong, in one sentence.
    public var description: String {
        let place = element.map { "line \(line), <\($0)>" } ?? "line \(line)"
        switch kind {
        case .malformedXML(let why): return "\(place): malformed XML: \(why)"
        case .unsupportedElement(let name):
            let later = name == "exec" ? " (running commands, int_cmd, play_pcap_audio and rtp_stream come later)" : ""
            return "\(place): element <\(name)> is not supported\(later)"
        case .unsupportedAttribute(let name): return "\(place): attribute \"\(name)\" is not supported"
        case .unsupportedKeyword(let k): return "\(place): keyword [\(k)] is not supported"
        case .missingAttribute(let name): return "\(place): attribute \"\(name)\" is required"
        case .invalidValue(let a, let v, let why): return "\(place): attribute \"\(a)\"=\"\(v)\": \(why)"
        case .unknownLabel(let l): return "\(place): no label \"\(l)\""
        case .invalidScenario(let why): return "\(place): \(why)"
        }
    }
}
