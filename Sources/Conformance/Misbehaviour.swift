import Foundation
import SIPMessage
import Synchronization

/// Faults our own UAS, UAC or registrar can be told to commit (`switchboard answer --misbehave FAULT`,
/// `switchboard call --misbehave FAULT`, `switchboard proxy --misbehave FAULT`), so that
/// tests can show the conformance runner catching each with the right rule. Each fault is a
/// rewrite of outgoing messages, installed as `SIPEndpoint.Configuration.outboundRewrite`; the
/// protocol machines themselves stay correct.
public enum Misbehaviour: String, Sendable, CaseIterable {
    /// Every 2xx to INVITE is sent without its Contact (breaks RFC 3261 §12.1.1).
    case noContactIn2xx = "no-contact-in-2xx"
    /// Once a call is answered, responses to later requests in it carry another To tag
    /// (breaks RFC 3261 §12 / §8.2.6.2).
    case wrongToTag = "wrong-to-tag"
    /// A 2xx to INVITE is sent once and never retransmitted (breaks RFC 3261 §13.3.1.4 over UDP).
    case no2xxRetransmission = "no-2xx-retransmission"
    /// A registrar's 2xx to REGISTER lists the bindings without their `expires` parameters
    /// (breaks RFC 3261 §10.3 step 8).
    case noExpiresInRegister2xx = "no-expires-in-register-2xx"
    /// The NOTIFYs of an accepted REFER's subscription are never sent (breaks RFC 3515 §2.4.4).
    case noNotifyAfterRefer = "no-notify-after-refer"
    /// The NOTIFYs of a REFER's subscription carry their status line as `text/plain`, not
    /// `message/sipfrag` (breaks RFC 3515 §2.4.5).
    case referWithoutSipfrag = "refer-without-sipfrag"
    /// NOTIFYs are sent without Subscription-State (breaks RFC 6665 §4.2.2).
    case notifyWithoutSubscriptionState = "notify-without-subscription-state"
    /// A 3xx is sent without its Contacts (breaks RFC 3261 §21.3; `answer --forward-to`).
    case noContactIn3xx = "no-contact-in-3xx"
    /// A 500 to an INVITE is sent without its Retry-After (breaks RFC 3261 §14.2 when the INVITE
    /// came while an earlier one was pending).
    case noRetryAfterIn500 = "no-retry-after-in-500"
    /// A 420 is sent without its Unsupported (breaks RFC 3261 §8.2.2.3).
    case noUnsupportedIn420 = "no-unsupported-in-420"
    /// A 422 is sent without its Min-SE (breaks RFC 4028 §6, §9).
    case noMinSEIn422 = "no-min-se-in-422"
    /// Provisional responses to INVITE lose their Require: 100rel and RSeq, so a reliable 18x
    /// goes out as an unreliable one (breaks RFC 3262 §3 when the INVITE required 100rel).
    case unreliableProvisional = "unreliable-provisional"
    /// The Session-Expires of a 2xx to INVITE or UPDATE loses its refresher parameter (breaks
    /// RFC 4028 §9).
    case noSessionExpiresRefresher = "no-session-expires-refresher"
    /// Responses to INVITE that make a dialog (1xx with a tag, 2xx) are sent without the
    /// request's Record-Route (breaks RFC 3261 §12.1.1).
    case dropRecordRoute = "drop-record-route"
    /// A caller: the ACK of a 2xx goes on the INVITE's branch instead of a new one (breaks RFC
    /// 3261 §13.2.2.4: a 2xx ACK is a transaction of its own).
    case reuseBranch = "reuse-branch"
    /// A caller: the ACK of a 2xx is sent once; a retransmitted 2xx is not acknowledged again
    /// (breaks RFC 3261 §13.2.2.4).
    case noACKRetransmission = "no-ack-retransmission"
    /// A caller: a non-2xx final response to INVITE is never acknowledged (breaks RFC 3261 §17.1.1.3).
    case noACKOfNon2xx = "no-ack-of-non-2xx"
    /// A caller: an INVITE retried after a 420 (Bad Extension) requires again what its first
    /// INVITE required, the extensions the 420 refused included (breaks RFC 3261 §8.1.3.5; with
    /// `call --100rel required`, whose retry drops `Require: 100rel`).
    case requireAfter420 = "require-after-420"
    /// A caller transferring a call attended (`call --consult`): the Replaces in its REFER's
    /// Refer-To names the consultation dialog with to-tag and from-tag swapped, as the
    /// transferor sees it rather than the target (breaks RFC 3891 §3, RFC 5589 §7).
    case wrongReplacesTags = "wrong-replaces-tags"

    /// The suite whose tests catch this fault: `uas` (a phone answering), `uac` (a phone
    /// calling: `switchboard call --misbehave`), `registrar`, `transfer`, `transfer-uac` (a phone
    /// transferring: `switchboard call --consult`) or `forward-uas`.
    public var suite: String {
        switch self {
        case .noContactIn2xx, .wrongToTag, .no2xxRetransmission, .noRetryAfterIn500, .noUnsupportedIn420, .noMinSEIn422, .unreliableProvisional,
             .noSessionExpiresRefresher, .dropRecordRoute: return "uas"
        case .reuseBranch, .noACKRetransmission, .noACKOfNon2xx: return "uac"
        case .noExpiresInRegister2xx: return "registrar"
        case .noNotifyAfterRefer, .referWithoutSipfrag, .notifyWithoutSubscriptionState: return "transfer"
        case .noContactIn3xx: return "forward-uas"
        case .requireAfter420: return "uac"
        case .wrongReplacesTags: return "transfer-uac"
        }
    }

    /// The rule the runner must report against this fault.
    public var brokenRule: ConformanceRule {
        switch self {
        case .noContactIn2xx: return .contactIn2xx
        case .wrongToTag: return .dialogTagStable
        case .no2xxRetransmission: return .retransmit2xx
        case .noExpiresInRegister2xx: return .registerContactExpires
        case .noNotifyAfterRefer: return .referNotify
        case .referWithoutSipfrag: return .referNotifySipfrag
        case .notifyWithoutSubscriptionState: return .notifySubscriptionState
        case .noContactIn3xx: return .contactIn3xx
        case .noRetryAfterIn500: return .retryAfterIn500
        case .noUnsupportedIn420: return .unsupportedIn420
        case .noMinSEIn422: return .minSEIn422
        case .unreliableProvisional: return .reliableProvisional
        case .noSessionExpiresRefresher: return .sessionExpiresRefresher
        case .dropRecordRoute: return .recordRouteEchoed
        case .reuseBranch, .noACKRetransmission: return .ack2xx
        case .noACKOfNon2xx: return .ackNon2xx
        case .requireAfter420: return .requireAfter420
        case .wrongReplacesTags: return .replacesNamesDialog
        }
    }

    /// A fresh rewrite function committing this fault (it keeps what it needs per call).
    public func rewriter() -> @Sendable (SIPMessage) -> SIPMessage? {
        switch self {
        case .noContactIn2xx:
            return { m in
                guard Self.is2xxToInvite(m) else { return m }
                var out = m
                out.remove(.contact)
                return out
            }
        case .wrongToTag:
            // Call-ID → (the answered INVITE's CSeq, its To tag).
            let answered = Mutex<[String: (UInt32, String)]>([:])
            return { m in
                guard !m.isRequest, let callID = m.callID, let tag = m.toTag, let cseq = try? m.cseq() else { return m }
                if Self.is2xxToInvite(m) {
                    let first = answered.withLock { a -> (UInt32, String) in
                        if let f = a[callID] { return f }
                        a[callID] = (cseq.sequence, tag)
                        return (cseq.sequence, tag)
                    }
                    if first.0 == cseq.sequence { return m }
                } else if answered.withLock({ $0[callID] }) == nil {
                    return m
                }
                guard let value = m[.to], let range = value.range(of: "tag=\(tag)") else { return m }
                var out = m
                try? out.set(.to, value.replacingCharacters(in: range, with: "tag=\(tag)x"))
                return out
            }
        case .no2xxRetransmission:
            let sent = Mutex<Set<String>>([])
            return { m in
                guard Self.is2xxToInvite(m), let callID = m.callID, let cseq = try? m.cseq() else { return m }
                let first = sent.withLock { $0.insert("\(callID) \(cseq.sequence)").inserted }
                return first ? m : nil
            }
        case .noNotifyAfterRefer, .referWithoutSipfrag, .notifyWithoutSubscriptionState, .noContactIn3xx:
            return Self.transferRewrite(self)
        case .noExpiresInRegister2xx:
            return { m in
                guard !m.isRequest, (200...299).contains(m.statusCode ?? 0), (try? m.cseq().method) == .register,
                      case .addresses(let bound)? = try? m.contact(), !bound.isEmpty else { return m }
                var out = m
                out.remove(.contact)
                for var c in bound {
                    c.parameters.remove("expires")
                    try? out.append(.contact, c)
                }
                return out
            }
        case .noRetryAfterIn500: return Self.removing(.retryAfter, from: 500)
        case .noUnsupportedIn420: return Self.removing(.unsupported, from: 420)
        case .noMinSEIn422: return Self.removing(.minSE, from: 422)
        case .unreliableProvisional:
            return { m in
                guard !m.isRequest, (101...199).contains(m.statusCode ?? 0), (try? m.cseq().method) == .invite else { return m }
                var out = m
                out.remove(.rseq)
                out.remove(.require)
                return out
            }
        case .dropRecordRoute:
            return { m in
                guard !m.isRequest, (101...299).contains(m.statusCode ?? 0), (try? m.cseq().method) == .invite else { return m }
                var out = m
                out.remove(.recordRoute)
                return out
            }
        case .reuseBranch:
            let branches = Mutex<[String: String]>([:])   // Call-ID → the INVITE's branch
            return { m in
                guard let callID = m.callID, let branch = m.topViaBranch else { return m }
                if m.method == .invite, m.toTag == nil { branches.withLock { $0[callID] = branch } }
                guard m.method == .ack, let invite = branches.withLock({ $0[callID] }), invite != branch,
                      let via = m[.via], let range = via.range(of: "branch=\(branch)") else { return m }
                var out = m
                try? out.set(.via, via.replacingCharacters(in: range, with: "branch=\(invite)"))
                return out
            }
        case .noACKRetransmission:
            let acked = Mutex<Set<String>>([])   // Call-ID and CSeq of the ACKs sent
            return { m in
                guard m.method == .ack, let callID = m.callID, let cseq = try? m.cseq() else { return m }
                return acked.withLock { $0.insert("\(callID) \(cseq.sequence)").inserted } ? m : nil
            }
        case .noACKOfNon2xx:
            let branches = Mutex<Set<String>>([])   // the INVITEs' branches
            return { m in
                guard let branch = m.topViaBranch else { return m }
                if m.method == .invite { branches.withLock { _ = $0.insert(branch) } }
                // The ACK of a non-2xx is the only one on its INVITE's branch (§17.1.1.3).
                if m.method == .ack, branches.withLock({ $0.contains(branch) }) { return nil }
                return m
            }
        case .requireAfter420:
            let first = Mutex<[String: String]>([:])   // Call-ID → the Require of its first INVITE
            return { m in
                guard m.method == .invite, m.toTag == nil, let callID = m.callID else { return m }
                let require = m[.require]
                guard let original = first.withLock({ f -> String? in
                    if let o = f[callID] { return o }
                    f[callID] = require ?? ""
                    return nil
                }), !original.isEmpty, require != original else { return m }
                var out = m
                try? out.set(.require, original)
                return out
            }
        case .wrongReplacesTags: return Self.swapReplacesTags
        case .noSessionExpiresRefresher:
            return { m in
                guard !m.isRequest, (200...299).contains(m.statusCode ?? 0), let method = try? m.cseq().method, method == .invite || method == .update,
                      let se = try? m.sessionExpires() else { return m }
                var out = m
                try? out.set(.sessionExpires, String(se.seconds))
                return out
            }
        }
    }

    /// A rewrite removing `header` from the responses `code` to any request.
    static func removing(_ header: SIPHeaderName, from code: Int) -> @Sendable (SIPMessage) -> SIPMessage? {
        { m in
            guard !m.isRequest, m.statusCode == code else { return m }
            var out = m
            out.remove(header)
            return out
        }
    }

    /// The rewrites of the transfer and redirection faults.
    static func transferRewrite(_ fault: Misbehaviour) -> @Sendable (SIPMessage) -> SIPMessage? {
        { m in
            let referNotify = m.method == .notify && ((try? m.event()) ?? nil)?.package.lowercased() == "refer"
            switch fault {
            case .noNotifyAfterRefer: return referNotify ? nil : m
            case .referWithoutSipfrag:
                guard referNotify else { return m }
                var out = m
                out.setBody(Array(m.body), contentType: MediaType(type: "text", subtype: "plain"))
                return out
            case .notifyWithoutSubscriptionState:
                guard m.method == .notify else { return m }
                var out = m
                out.remove(.subscriptionState)
                return out
            case .noContactIn3xx:
                guard !m.isRequest, (300...399).contains(m.statusCode ?? 0) else { return m }
                var out = m
                out.remove(.contact)
                return out
            default: return m
            }
        }
    }

    /// Swaps the to-tag and from-tag of the Replaces embedded in a REFER's Refer-To (escaped in
    /// the URI's headers, `to-tag%3D…`, or not): the transferor names the consultation dialog
    /// from its own side, not the target's. Other messages pass unchanged.
    static let swapReplacesTags: @Sendable (SIPMessage) -> SIPMessage? = { m in
        let toPattern = #"(?i)to-tag(%3D|=)[^%>;&?]+"#, fromPattern = #"(?i)from-tag(%3D|=)[^%>;&?]+"#
        guard m.method == .refer, let referTo = m[.referTo],
              let to = referTo.range(of: toPattern, options: .regularExpression),
              let from = referTo.range(of: fromPattern, options: .regularExpression) else { return m }
        func value(_ parameter: Substring) -> Substring {
            let sign = parameter.range(of: "%3D", options: .caseInsensitive) ?? parameter.range(of: "=")!
            return parameter[sign.upperBound...]
        }
        func name(_ parameter: Substring) -> Substring {
            let sign = parameter.range(of: "%3D", options: .caseInsensitive) ?? parameter.range(of: "=")!
            return parameter[..<sign.upperBound]
        }
        let toParameter = referTo[to], fromParameter = referTo[from]
        var swapped = referTo
        // The later one first, so that the earlier range stays valid.
        if to.lowerBound > from.lowerBound {
            swapped.replaceSubrange(to, with: name(toParameter) + value(fromParameter))
            swapped.replaceSubrange(from, with: name(fromParameter) + value(toParameter))
        } else {
            swapped.replaceSubrange(from, with: name(fromParameter) + value(toParameter))
            swapped.replaceSubrange(to, with: name(toParameter) + value(fromParameter))
        }
        var out = m
        try? out.set(.referTo, swapped)
        return out
    }

    static func is2xxToInvite(_ m: SIPMessage) -> Bool {
        !m.isRequest && (200...299).contains(m.statusCode ?? 0) && (try? m.cseq().method) == .invite
    }
}
