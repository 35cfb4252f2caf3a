import SIPMessage
import PacketCapture
import NetworkIO

/// Which party of a captured call: the one that sent its first INVITE, the one it went to, or
/// a host named by address and port.
public enum CaptureParty: Sendable, Hashable, CustomStringConvertible {
    /// The sender of the call's first INVITE (its UAC).
    case caller
    /// The receiver of the call's first INVITE (its UAS, or the first proxy).
    case callee
    /// The host with this address and port.
    case endpoint(CaptureEndpoint)

    /// `caller`, `callee` or `HOST:PORT` (an IPv6 address in brackets).
    /// - Throws: ``CaptureSideError/badParty(_:)`` for anything else.
    public init(parsing text: String) throws(CaptureSideError) {
        switch text.lowercased() {
        case "caller", "uac": self = .caller
        case "callee", "uas": self = .callee
        default:
            guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
                throw .badParty(text)
            }
            guard let address = IPAddress(String(text[..<colon])) else { throw .badParty(text) }
            self = .endpoint(CaptureEndpoint(address: address, port: port))
        }
    }

    public var description: String {
        switch self {
        case .caller: return "caller"
        case .callee: return "callee"
        case .endpoint(let e): return e.description
        }
    }
}

/// Why one side of a captured call cannot be taken.
public enum CaptureSideError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The capture file could not be read (it is unreadable before the call was complete).
    case file(CaptureFileError)
    /// No call (a Call-ID with an INVITE) matches the selection: its number or Call-ID.
    case noCall(String)
    /// The party is neither `caller`, `callee` nor `HOST:PORT`.
    case badParty(String)
    /// The party named by address sent and received nothing in the call.
    case partyNotInCall(String)
    /// The party sent nothing in the call (nothing to send in its place).
    case nothingSent(String)

    public var description: String {
        switch self {
        case .file(let e): return "\(e)"
        case .noCall(let s): return "no call \(s) in the capture (a number counts the Call-IDs with an INVITE from 1, or give a Call-ID)"
        case .badParty(let s): return "party '\(s)': caller, callee or HOST:PORT expected"
        case .partyNotInCall(let s): return "\(s) sent and received nothing in the call"
        case .nothingSent(let s): return "\(s) sent nothing in the call"
        }
    }
}

/// The messages of one captured call (one Call-ID with an INVITE), retransmissions removed,
/// with its caller and callee: what ``SIPpScenarioExport`` and the replay take a side of.
public struct CapturedCall: Sendable {
    /// The call's Call-ID.
    public var callID: String
    /// Its number among the capture's Call-IDs with an INVITE (from 1, in order of their INVITEs).
    public var number: Int
    /// Its messages in capture order, each sent once (a message whose bytes the same source
    /// already sent, a retransmission, is left out).
    public var messages: [CapturedSIPMessage]
    /// The sender of its first INVITE.
    public var caller: CaptureEndpoint
    /// The receiver of its first INVITE.
    public var callee: CaptureEndpoint

    /// Reads the call `selection` (a number from 1, or a Call-ID; the first call when `nil`)
    /// from the capture at `path`, keeping only the messages of the calls that may be it.
    /// - Throws: ``CaptureSideError/file(_:)`` when the file cannot be opened or breaks before
    ///   the end (a call read whole before the break is still returned), ``CaptureSideError/noCall(_:)``.
    public static func load(path: String, call selection: String? = nil) throws(CaptureSideError) -> CapturedCall {
        let reader: SIPCaptureReader
        do { reader = try SIPCaptureReader(path: path) } catch { throw .file(error) }
        var selector = Selector(selection: selection)
        var failure: CaptureFileError?
        do throws(CaptureFileError) {
            var events: [CaptureEvent] = []
            while try reader.nextEvents(into: &events) {
                for case .message(let m) in events { selector.add(m) }
            }
        } catch {
            failure = error
        }
        guard let call = selector.result() else {
            if let failure { throw .file(failure) }
            throw .noCall(selection ?? "1")
        }
        return call
    }

    /// Makes the call from messages already read (in capture order): the first Call-ID with an
    /// INVITE, or the one `selection` names.
    public static func from(_ messages: [CapturedSIPMessage], call selection: String? = nil) throws(CaptureSideError) -> CapturedCall {
        var selector = Selector(selection: selection)
        for m in messages { selector.add(m) }
        guard let call = selector.result() else { throw .noCall(selection ?? "1") }
        return call
    }

    /// The endpoint `party` stands for in this call.
    /// - Throws: ``CaptureSideError/partyNotInCall(_:)``, ``CaptureSideError/nothingSent(_:)``.
    public func endpoint(of party: CaptureParty) throws(CaptureSideError) -> CaptureEndpoint {
        let e: CaptureEndpoint
        switch party {
        case .caller: e = caller
        case .callee: e = callee
        case .endpoint(let x): e = x
        }
        guard messages.contains(where: { $0.source == e || $0.destination == e }) else { throw .partyNotInCall(e.description) }
        guard messages.contains(where: { $0.source == e }) else { throw .nothingSent(e.description) }
        return e
    }

    /// Collects the selected call while the capture is read.
    struct Selector {
        let selection: String?
        let wantedNumber: Int?
        /// Call-IDs with an INVITE seen before the chosen one's, in order, and the chosen one's number.
        var numbered: [String] = []
        var numberedSet: Set<String> = []
        var number = 0
        var kept: [String: [CapturedSIPMessage]] = [:]
        var seen: [String: Set<[UInt8]>] = [:]
        var chosen: String?

        init(selection: String?) {
            self.selection = selection
            if let s = selection, let n = Int(s), n >= 1 { wantedNumber = n } else { wantedNumber = selection == nil ? 1 : nil }
        }

        mutating func add(_ m: CapturedSIPMessage) {
            guard let id = m.message.callID else { return }
            if let chosen, chosen != id { return }
            if chosen == nil {
                if m.message.method == .invite, m.message.toTag == nil, numberedSet.insert(id).inserted {
                    numbered.append(id)
                    if numbered.count == wantedNumber || (wantedNumber == nil && id == selection) {
                        chosen = id
                        number = numbered.count
                        kept = kept.filter { $0.key == id }
                        numbered = []
                        numberedSet = []
                    }
                }
                if chosen == nil {
                    if let wanted = wantedNumber {
                        // Messages before a Call-ID's INVITE are kept only while it may be the one.
                        if !numberedSet.contains(id) && numbered.count >= wanted { return }
                    } else if id != selection {
                        return
                    }
                }
            }
            let bytes = m.message.serialized() + Array("\(m.source)".utf8)
            if seen[id, default: []].insert(bytes).inserted { kept[id, default: []].append(m) }
        }

        func result() -> CapturedCall? {
            guard let id = chosen, let messages = kept[id],
                  let invite = messages.first(where: { $0.message.method == .invite && $0.message.toTag == nil }) else { return nil }
            return CapturedCall(callID: id, number: number, messages: messages, caller: invite.source, callee: invite.destination)
        }
    }
}

/// A SIP message as lines of text, for rewriting one side of a captured call: the start line,
/// the header lines (name as written, value) and the body.
package struct SIPTextMessage: Sendable {
    package var startLine: String
    package var headers: [(name: String, value: String)]
    package var body: String

    package init(_ m: SIPMessage) {
        let bytes = m.serialized()
        var end = 0
        while end + 1 < bytes.count, !(bytes[end] == 13 && bytes[end + 1] == 10) { end += 1 }
        startLine = String(decoding: bytes[0..<min(end, bytes.count)], as: UTF8.self)
        headers = m.headerFields.map { ($0.name, $0.value) }
        body = String(decoding: m.body, as: UTF8.self)
    }

    /// A body alone, with its Content-Type.
    package init(body: String, contentType: String?) {
        startLine = ""
        headers = contentType.map { [("Content-Type", $0)] } ?? []
        self.body = body
    }

    /// The compact forms of RFC 3261 §7.3.3 (and RFC 3515, 3891, 4028 …) to their full names, lowercased.
    static let compact: [String: String] = [
        "i": "call-id", "m": "contact", "e": "content-encoding", "l": "content-length", "c": "content-type",
        "f": "from", "s": "subject", "k": "supported", "t": "to", "v": "via", "r": "refer-to", "b": "referred-by",
        "o": "event", "x": "session-expires", "u": "allow-events",
    ]

    /// The lowercased full name of a header name as written.
    package static func canonical(_ name: String) -> String {
        let l = name.lowercased()
        return compact[l] ?? l
    }

    /// The first value of the header with this (lowercased, full) name.
    package func value(_ name: String) -> String? { headers.first { Self.canonical($0.name) == name }?.value }

    /// Whether a header with this (lowercased, full) name is present.
    package func has(_ name: String) -> Bool { headers.contains { Self.canonical($0.name) == name } }
}

extension String {
    /// The string with every occurrence of `target` replaced by `replacement`.
    package func replacingAll(_ target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var out = "", rest = Substring(self)
        while let r = rest.firstRange(of: target) {
            out += rest[..<r.lowerBound]
            out += replacement
            rest = rest[r.upperBound...]
        }
        return out + rest
    }

    /// The value of the `;tag=` parameter of a From/To value, if any.
    package var tagParameter: String? {
        guard let r = firstRange(of: ";tag=") else { return nil }
        return String(self[r.upperBound...].prefix { $0 != ";" && $0 != " " && $0 != ">" && $0 != "," })
    }

    /// The value with its `;tag=…` parameter replaced by `replacement` (which includes `;tag=`
    /// or is empty), or appended when it had none.
    package func replacingTag(with replacement: String) -> String {
        guard let r = firstRange(of: ";tag=") else { return self + replacement }
        let after = self[r.upperBound...]
        let end = after.firstIndex { $0 == ";" || $0 == " " || $0 == ">" || $0 == "," } ?? endIndex
        return String(self[..<r.lowerBound]) + replacement + String(self[end...])
    }
}
