import SIPMessage

/// The rules one message shows by itself about subscriptions (RFC 6665), REFER (RFC 3515) and
/// redirection (RFC 3261 §21.3): shared by the conformance checker (``RuleChecker``) and the
/// capture check, so both judge a NOTIFY or a REFER the same way.
public enum MessageRules {
    /// What is wrong with a NOTIFY: no Subscription-State (RFC 6665 §4.2.2), or, for a REFER's
    /// subscription (`Event: refer`), a body that is not `message/sipfrag` starting with a
    /// status line (RFC 3515 §2.4.5). Empty for any other message.
    public static func notifyProblems(_ m: SIPMessage) -> [(rule: ConformanceRule, detail: String)] {
        guard m.method == .notify else { return [] }
        var out: [(rule: ConformanceRule, detail: String)] = []
        if m.values(.subscriptionState).isEmpty {
            out.append((.notifySubscriptionState, "the NOTIFY has no Subscription-State header field"))
        } else if (try? m.subscriptionState()) == nil {
            out.append((.notifySubscriptionState, "the NOTIFY's Subscription-State \"\(m[.subscriptionState] ?? "")\" does not parse"))
        }
        guard let event = (try? m.event()) ?? nil, event.package.lowercased() == "refer" else { return out }
        let type = ((try? m.contentType()) ?? nil).map { "\($0.type)/\($0.subtype)".lowercased() }
        if m.body.isEmpty {
            out.append((.referNotifySipfrag, "the NOTIFY (Event: refer) has no body; a message/sipfrag status line is due"))
        } else if type != "message/sipfrag" {
            out.append((.referNotifySipfrag, "the NOTIFY (Event: refer) has a body of type \(type ?? "none"), message/sipfrag is due"))
        } else {
            do throws(SIPParseError) {
                _ = try SIPFragStatus(parsing: Array(m.body))
            } catch {
                out.append((.referNotifySipfrag, "the NOTIFY's sipfrag body does not start with a status line (byte \(error.offset)): \(error.detail)"))
            }
        }
        return out
    }

    /// How many Refer-To values a REFER carries (each header line, and each comma-separated
    /// element of a line, counts), `nil` for another message.
    public static func referToCount(_ m: SIPMessage) -> Int? {
        guard m.method == .refer else { return nil }
        return m.values(.referTo).reduce(0) { $0 + topLevelElements($1) }
    }

    /// The comma-separated elements of a header value, commas inside `<…>` or quotes not counting.
    static func topLevelElements(_ value: String) -> Int {
        var count = 0, angle = false, quoted = false, escaped = false, content = false
        for ch in value {
            if escaped { escaped = false; continue }
            if quoted {
                if ch == "\\" { escaped = true } else if ch == "\"" { quoted = false }
                continue
            }
            switch ch {
            case "\"": quoted = true; content = true
            case "<": angle = true; content = true
            case ">": angle = false
            case "," where !angle:
                if content { count += 1 }
                content = false
            case " ", "\t": break
            default: content = true
            }
        }
        return count + (content ? 1 : 0)
    }

    /// Whether `code` is a redirection that must name where to go in Contact (300, 301, 302, 305;
    /// RFC 3261 §21.3: 380 Alternative Service carries a description instead).
    public static func redirectNeedsContact(_ code: Int) -> Bool { [300, 301, 302, 305].contains(code) }
}
