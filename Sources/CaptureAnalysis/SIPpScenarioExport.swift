import SIPMessage
import PacketCapture

/// One party's side of a captured call as a SIPp scenario (`sipp -sf FILE`): what the party
/// sent as `<send>`, what it received as `<recv>`, the pauses between them as `<pause>`, with
/// SIPp's keywords in place of every per-call field, so that SIPp plays that party again
/// against a live device.
///
/// In a request the party sent: `[call_id]`, a Via of `[local_ip]:[local_port]` with `[branch]`
/// (`[last_Via:]` for a CANCEL and for the ACK of a non-2xx, which keep the INVITE's branch),
/// its own tag as `[pid]SIPpTag00[call_number]` (`…01…` for a callee), the peer's tag as
/// `[peer_tag_param]` (a callee takes it from the caller's From with an `ereg` action into
/// `$peertag`, since SIPp's peer tag is the To tag of responses), `[next_url]` and `[routes]`
/// for in-dialog requests (from a `recv` with `rrs="true"`), the captured CSeq numbers
/// literally. In a response: `[last_Via:]`, `[last_From:]`, `[last_To:]` (with the party's tag
/// appended when the request had none), `[last_Call-ID:]`, `[last_CSeq:]`,
/// `[last_Record-Route:]`. In both: the host and port of Contact as
/// `[local_ip]:[local_port]`, `Content-Length: [len]`, and in SDP the `o=`/`c=` addresses as
/// `[media_ip]` (`IP[media_ip_type]`) and the first `m=` port as `[media_port]`.
/// Provisional responses received are optional. Requests retransmit (`retrans="500"`) over UDP,
/// as does a 2xx to INVITE.
public enum SIPpScenarioExport {
    /// Pauses shorter than this are left out (milliseconds).
    public static let minimumPause: Int64 = 50

    /// The scenario of `party`'s side of `call`; `source` names the capture in a comment.
    /// - Throws: ``CaptureSideError/partyNotInCall(_:)``, ``CaptureSideError/nothingSent(_:)``.
    public static func scenario(_ call: CapturedCall, party: CaptureParty, source: String = "") throws(CaptureSideError) -> String {
        let me = try call.endpoint(of: party)
        let relevant = call.messages.filter { $0.source == me || $0.destination == me }
        // The party's own dialog tag and the peer's, as captured.
        let initial = relevant.first { $0.message.method == .invite && $0.message.toTag == nil }
        let isCaller = initial?.source == me
        let callerTag = initial?.message.fromTag
        let calleeTag = relevant.first { !$0.message.isRequest && $0.message.toTag != nil && $0.message.fromTag == callerTag }?.message.toTag
        let myTag = isCaller ? callerTag : calleeTag
        let peerTag = isCaller ? calleeTag : callerTag
        let myTagKeyword = isCaller ? "[pid]SIPpTag00[call_number]" : "[pid]SIPpTag01[call_number]"
        let peerTagKeyword = isCaller ? "[peer_tag_param]" : "[$peertag]"
        // A callee that sends requests of its own needs the caller's tag from its From.
        let calleeSendsRequests = !isCaller && relevant.contains { $0.source == me && $0.message.isRequest && $0.message.method != .ack }

        var out = "<?xml version=\"1.0\" encoding=\"UTF-8\" ?>\n<!DOCTYPE scenario SYSTEM \"sipp.dtd\">\n"
        let about = "\(party) \(me) of call \(call.number) (Call-ID \(call.callID))\(source.isEmpty ? "" : " in \(source)")"
        out += "<!-- Made by switchboard capture --sipp-scenario: the side of \(comment(about)). -->\n"
        out += "<scenario name=\"\(attribute("switchboard capture: " + about))\">\n"
        // Reliable provisionals the party PRACKs: their RSeq is taken into `$rseqN` (and their
        // recv is not optional). Requests answered after another request came: their Via and
        // CSeq are taken into `$viaN`/`$cseqN` (SIPp's [last_…] are of the last message).
        var rseqVariable: [Int: String] = [:], rseqByValue: [String: String] = [:]
        var savedRequest: [Int: String] = [:]
        var answers: [Int: Int] = [:]
        for (j, m) in relevant.enumerated() where m.source == me {
            let t = SIPTextMessage(m.message)
            if m.message.method == .prack, let rack = t.value("rack")?.split(separator: " ").first.map(String.init),
               let i = relevant[..<j].lastIndex(where: { $0.source != me && !$0.message.isRequest && SIPTextMessage($0.message).value("rseq")?.trimmedSpaces == rack }) {
                rseqVariable[i] = "rseq\(i)"
                rseqByValue[rack] = "rseq\(i)"
            }
            if !m.message.isRequest, let cseq = t.value("cseq").map(normalized),
               let r = relevant[..<j].lastIndex(where: { $0.source != me && $0.message.isRequest && SIPTextMessage($0.message).value("cseq").map(normalized) == cseq }) {
                answers[j] = r
                if relevant[(r + 1)..<j].contains(where: { $0.source != me && $0.message.isRequest }) { savedRequest[r] = "\(r)" }
            }
        }
        var previous: CaptureTimestamp?
        var routeRecorded = false
        for (index, m) in relevant.enumerated() {
            let text = SIPTextMessage(m.message)
            if m.source == me {
                if let p = previous {
                    let ms = (m.timestamp.totalNanoseconds - p.totalNanoseconds) / 1_000_000
                    if ms >= minimumPause { out += "  <pause milliseconds=\"\(ms)\"/>\n" }
                }
                let lines: [String]
                var retransmits = m.transport == .udp
                if m.message.isRequest {
                    let method = m.message.method
                    let keepsBranch = method == .cancel || (method == .ack && ackOfNon2xx(relevant, before: index, cseq: text.value("cseq")))
                    if method == .ack { retransmits = false }
                    lines = requestLines(text, me: me, destination: m.destination, keepsBranch: keepsBranch,
                                         inDialog: text.value("to")?.tagParameter != nil && !keepsBranch && routeRecorded,
                                         tags: (myTag, myTagKeyword, peerTag, peerTagKeyword), rseq: rseqByValue)
                } else {
                    let code = m.message.statusCode ?? 0
                    retransmits = retransmits && (200...299).contains(code) && text.value("cseq")?.hasSuffix("INVITE") == true
                    // The party's tag goes after [last_To:] when the last request received had none.
                    let last = relevant[..<index].last { $0.source != me && $0.message.isRequest }
                    let addTag = last.map { $0.message.toTag == nil } ?? false && m.message.toTag != nil
                    lines = responseLines(text, me: me, appendTag: addTag ? ";tag=" + myTagKeyword : "", saved: answers[index].flatMap { savedRequest[$0] })
                }
                out += "  <send\(retransmits ? " retrans=\"500\"" : "")>\n    <![CDATA[\n"
                for l in lines { out += "      " + cdata(l) + "\n" }
                out += "    ]]>\n  </send>\n"
            } else if m.message.isRequest {
                let method = m.message.method.map { "\($0)" } ?? "?"
                let creates = !isCaller && m.message.toTag == nil && m.message.method == .invite
                if creates { routeRecorded = true }
                var actions: [String] = []
                if creates && calleeSendsRequests {
                    actions.append("<ereg regexp=\";tag=[^;&gt; ]*\" search_in=\"hdr\" header=\"From:\" assign_to=\"peertag\"/>")
                }
                if let n = savedRequest[index] {
                    actions.append("<ereg regexp=\"SIP/2\\.0/.*\" search_in=\"hdr\" header=\"Via:\" assign_to=\"via\(n)\"/>")
                    actions.append("<ereg regexp=\"[0-9]+ [A-Za-z]+\" search_in=\"hdr\" header=\"CSeq:\" assign_to=\"cseq\(n)\"/>")
                }
                out += "  <recv request=\"\(attribute(method))\"\(creates ? " rrs=\"true\"" : "")" + actionsXML(actions)
            } else {
                let code = m.message.statusCode ?? 0
                let invite = text.value("cseq")?.hasSuffix("INVITE") == true
                let records = isCaller && invite && (200...299).contains(code)
                if records { routeRecorded = true }
                let rseq = rseqVariable[index]
                var actions: [String] = []
                if let v = rseq { actions.append("<ereg regexp=\"[0-9]+\" search_in=\"hdr\" header=\"RSeq:\" assign_to=\"\(v)\"/>") }
                let optional = (100...199).contains(code) && rseq == nil
                out += "  <recv response=\"\(code)\"\(optional ? " optional=\"true\"" : "")\(records ? " rrs=\"true\"" : "")" + actionsXML(actions)
            }
            previous = m.timestamp
        }
        out += "</scenario>\n"
        return out
    }

    /// The end of a recv element: `/>`, or its actions and the closing tag.
    static func actionsXML(_ actions: [String]) -> String {
        guard !actions.isEmpty else { return "/>\n" }
        return ">\n    <action>\n" + actions.map { "      " + $0 + "\n" }.joined() + "    </action>\n  </recv>\n"
    }

    /// A CSeq value with single spaces.
    static func normalized(_ cseq: String) -> String { cseq.split(separator: " ").joined(separator: " ") }

    /// Whether the ACK with this CSeq value answers a non-2xx final response (the last final
    /// response with its CSeq number before it).
    static func ackOfNon2xx(_ messages: [CapturedSIPMessage], before index: Int, cseq: String?) -> Bool {
        guard let number = cseq?.split(separator: " ").first else { return false }
        let final = messages[..<index].last {
            !$0.message.isRequest && ($0.message.statusCode ?? 0) >= 200
                && SIPTextMessage($0.message).value("cseq")?.split(separator: " ").first == number
        }
        return (final?.message.statusCode ?? 0) >= 300
    }

    typealias Tags = (mine: String?, myKeyword: String, peer: String?, peerKeyword: String)

    /// A From or To value with the captured tags replaced by their keywords.
    static func retag(_ value: String, _ tags: Tags) -> String {
        guard let tag = value.tagParameter else { return value }
        if tag == tags.mine { return value.replacingTag(with: ";tag=" + tags.myKeyword) }
        if tag == tags.peer { return value.replacingTag(with: tags.peerKeyword) }
        return value
    }

    static func hostPort(_ e: CaptureEndpoint) -> String { e.description }

    static func requestLines(_ t: SIPTextMessage, me: CaptureEndpoint, destination: CaptureEndpoint, keepsBranch: Bool, inDialog: Bool,
                             tags: Tags, rseq: [String: String]) -> [String] {
        var lines: [String] = []
        let parts = t.startLine.split(separator: " ", maxSplits: 2).map(String.init)
        if parts.count == 3 {
            var uri = parts[1]
            if inDialog {
                uri = "[next_url]"
            } else if uri.contains(hostPort(destination)) {
                uri = uri.replacingAll(hostPort(destination), with: "[remote_ip]:[remote_port]")
            } else {
                uri = uri.replacingAll("\(destination.address)", with: "[remote_ip]")
            }
            lines.append("\(parts[0]) \(uri) \(parts[2])")
        } else {
            lines.append(t.startLine)
        }
        var viaDone = false, routesDone = false
        for (name, value) in t.headers {
            switch SIPTextMessage.canonical(name) {
            case "via" where !viaDone:
                viaDone = true
                if keepsBranch {
                    lines.append("[last_Via:]")
                } else {
                    lines.append("Via: " + via(value))
                }
            case "from", "to": lines.append("\(name): \(retag(value, tags))")
            case "call-id": lines.append("Call-ID: [call_id]")
            case "contact": lines.append("\(name): \(value.replacingAll(hostPort(me), with: "[local_ip]:[local_port]"))")
            case "content-length": lines.append("Content-Length: [len]")
            case "rack":
                let f = value.split(separator: " ").map(String.init)
                if let v = f.first.flatMap({ rseq[$0] }) {
                    lines.append("\(name): [$\(v)] " + f.dropFirst().joined(separator: " "))
                } else {
                    lines.append("\(name): \(value)")
                }
            case "route" where inDialog:
                if !routesDone { lines.append("[routes]") }
                routesDone = true
            default: lines.append("\(name): \(value)")
            }
        }
        return lines + [""] + bodyLines(t)
    }

    /// A Via value of the party: its sent-by and branch as keywords, the other parameters kept
    /// (`rport` without the value a peer filled in, no `received`).
    static func via(_ value: String) -> String {
        var params: [String] = []
        for p in value.split(separator: ";").dropFirst() {
            let name = p.split(separator: "=").first.map { $0.trimmingSpaces.lowercased() } ?? ""
            switch name {
            case "branch", "received": continue
            case "rport": params.append("rport")
            default: params.append(p.trimmingSpaces)
            }
        }
        return "SIP/2.0/[transport] [local_ip]:[local_port]" + params.map { ";" + $0 }.joined() + ";branch=[branch]"
    }

    static func responseLines(_ t: SIPTextMessage, me: CaptureEndpoint, appendTag: String, saved: String?) -> [String] {
        var lines = [t.startLine]
        var done: Set<String> = []
        for (name, value) in t.headers {
            let c = SIPTextMessage.canonical(name)
            switch c {
            case "via" where saved != nil:
                if done.insert(c).inserted { lines.append("Via: [$via\(saved!)]") }
            case "cseq" where saved != nil:
                lines.append("CSeq: [$cseq\(saved!)]")
            case "via", "from", "call-id", "cseq", "record-route":
                guard !done.contains(c) else { continue }
                done.insert(c)
                let full = ["via": "Via", "from": "From", "call-id": "Call-ID", "cseq": "CSeq", "record-route": "Record-Route"][c]!
                lines.append("[last_\(full):]")
            case "to": lines.append("[last_To:]" + appendTag)
            case "contact": lines.append("\(name): \(value.replacingAll(hostPort(me), with: "[local_ip]:[local_port]"))")
            case "content-length": lines.append("Content-Length: [len]")
            default: lines.append("\(name): \(value)")
            }
        }
        return lines + [""] + bodyLines(t)
    }

    /// The body's lines; an SDP's addresses and first media port as keywords.
    static func bodyLines(_ t: SIPTextMessage) -> [String] {
        guard !t.body.isEmpty else { return [] }
        var lines = t.body.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false).map {
            String(String.UnicodeScalarView($0.last == "\r" ? $0.dropLast() : $0))
        }
        if lines.last == "" { lines.removeLast() }
        guard t.value("content-type")?.lowercased().hasPrefix("application/sdp") == true else { return lines }
        var portDone = false
        return lines.map { line -> String in
            if line.hasPrefix("c=") || line.hasPrefix("o=") {
                var f = line.split(separator: " ").map(String.init)
                if f.count >= 3, f[f.count - 3].hasSuffix("IN"), f[f.count - 2].hasPrefix("IP") {
                    f[f.count - 2] = "IP[media_ip_type]"
                    f[f.count - 1] = "[media_ip]"
                    return f.joined(separator: " ")
                }
            } else if line.hasPrefix("m=audio "), !portDone {
                portDone = true
                var f = line.split(separator: " ").map(String.init)
                if f.count >= 2 { f[1] = "[media_port]"; return f.joined(separator: " ") }
            }
            return line
        }
    }

    static func comment(_ s: String) -> String { s.replacingAll("--", with: "- -") }

    static func attribute(_ s: String) -> String {
        s.replacingScalars {
            switch $0 {
            case "&": return "&amp;"
            case "<": return "&lt;"
            case ">": return "&gt;"
            case "\"": return "&quot;"
            default: return nil
            }
        }
    }

    /// A line inside CDATA: a `]]>` in it split over two sections.
    static func cdata(_ s: String) -> String { s.replacingAll("]]>", with: "]]]]><![CDATA[>") }
}

extension String {
    fileprivate var trimmedSpaces: String { Substring(self).trimmingSpaces }
}

extension Substring {
    fileprivate var trimmingSpaces: String {
        var s = self
        while s.first == " " || s.first == "\t" { s.removeFirst() }
        while s.last == " " || s.last == "\t" { s.removeLast() }
        return String(s)
    }
}
