import SIPMessage

/// What a transferee accepts in a REFER (RFC 3515): the application's policy and the safety
/// bounds every REFER is checked against before the application is asked.
public struct ReferPolicy: Sendable, Hashable {
    /// Whether a REFER outside any dialog is taken (RFC 3515 allows it; a phone usually does
    /// not): refused with 403 unless this is on or its `Target-Dialog` (RFC 4538) names a dialog
    /// of ours.
    public var allowsOutOfDialog: Bool
    /// REFERs one dialog may carry; the next is refused with 403.
    public var maximumPerDialog: Int
    /// Refer subscriptions open at once in one user agent; the next REFER is refused with 503.
    public var maximumSubscriptions: Int
    /// Whether a `Refer-Sub: false` request (RFC 4488) is granted: answered with
    /// `Refer-Sub: false` and no NOTIFY.
    public var grantsNoSubscription: Bool
    /// The Refer-To schemes followed; anything else (`http:`, `mailto:`, …) is refused with 403,
    /// so that a REFER never makes us fetch anything.
    public var schemes: Set<String>

    /// Defaults: in-dialog only, 8 REFERs per dialog, 64 subscriptions, `norefersub` granted,
    /// sip/sips/tel.
    public init(allowsOutOfDialog: Bool = false, maximumPerDialog: Int = 8, maximumSubscriptions: Int = 64,
                grantsNoSubscription: Bool = true, schemes: Set<String> = ["sip", "sips", "tel"]) {
        self.allowsOutOfDialog = allowsOutOfDialog
        self.maximumPerDialog = maximumPerDialog
        self.maximumSubscriptions = maximumSubscriptions
        self.grantsNoSubscription = grantsNoSubscription
        self.schemes = schemes
    }
}

/// A REFER's refusal: the status to answer with and why (for a `Warning` and the logs).
public struct ReferRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// 400, 403, 481 or 503.
    public var statusCode: Int
    /// Why, in a few words.
    public var reason: String

    public init(statusCode: Int, reason: String) {
        self.statusCode = statusCode
        self.reason = reason
    }

    public var description: String { "\(statusCode): \(reason)" }
}

/// A REFER as the transferee reads it (RFC 3515, 3892, 3891, 4488, 4538), checked against a
/// ``ReferPolicy``.
public struct ReferRequest: Sendable, Hashable {
    /// The Refer-To value as written (with its embedded headers, e.g. `?Replaces=…`).
    public var referTo: NameAddress
    /// Where to send the new INVITE: the Refer-To URI without its embedded headers.
    public var target: URI
    /// The `Replaces` embedded in the Refer-To URI (attended transfer): the new INVITE carries it.
    public var replaces: Replaces?
    /// `Referred-By` (RFC 3892): the new INVITE carries it.
    public var referredBy: NameAddress?
    /// The REFER asked for no subscription (`Refer-Sub: false`, RFC 4488).
    public var asksNoSubscription: Bool
    /// `Target-Dialog` (RFC 4538) of a REFER outside a dialog: the dialog it names, its
    /// `local-tag` being our tag there (the recipient's point of view).
    public var targetDialog: TargetDialog?
    /// The REFER's CSeq number (the NOTIFYs' `Event: refer;id=`).
    public var cseq: UInt32

    /// Reads and checks a REFER.
    /// - Parameters:
    ///   - inDialog: whether it arrived in one of our dialogs.
    ///   - targetDialogKnown: for an out-of-dialog REFER, whether its `Target-Dialog` names one
    ///     of our dialogs (the caller looks it up in ``targetDialog``).
    ///   - refersInDialog: REFERs the dialog carried before this one.
    ///   - openSubscriptions: refer subscriptions open now.
    public static func read(_ refer: SIPMessage, policy: ReferPolicy, inDialog: Bool, targetDialogKnown: Bool = false,
                            refersInDialog: Int = 0, openSubscriptions: Int = 0) -> Result<ReferRequest, ReferRefusal> {
        guard refer.method == .refer, let cseq = try? refer.cseq().sequence else {
            return .failure(ReferRefusal(statusCode: 400, reason: "not a REFER"))
        }
        let referTo: NameAddress
        do throws(SIPParseError) {
            guard let r = try refer.referTo() else { return .failure(ReferRefusal(statusCode: 400, reason: "no Refer-To")) }
            referTo = r
        } catch {
            let why = error.rule == .duplicateHeader ? "more than one Refer-To" : "Refer-To: \(error.rule.rawValue) at byte \(error.offset)"
            return .failure(ReferRefusal(statusCode: 400, reason: why))
        }
        let scheme = referTo.uri.scheme
        guard policy.schemes.contains(scheme) else {
            return .failure(ReferRefusal(statusCode: 403, reason: "Refer-To scheme \(scheme) is not followed"))
        }
        let replaces: Replaces?
        do throws(SIPParseError) { replaces = try refer.referToReplaces() } catch {
            return .failure(ReferRefusal(statusCode: 400, reason: "Replaces in Refer-To: \(error.detail)"))
        }
        if let method = referTo.sipURI?.parameters["method"] ?? nil, method.uppercased() != "INVITE" {
            return .failure(ReferRefusal(statusCode: 403, reason: "Refer-To method \(method) is not performed"))
        }
        var targetDialog: TargetDialog?
        if !inDialog {
            // Only a REFER outside a dialog is authorized by it; inside one it is not read.
            do throws(SIPParseError) { targetDialog = try TargetDialog.read(refer) } catch {
                return .failure(ReferRefusal(statusCode: 400, reason: "Target-Dialog: \(error)"))
            }
        }
        if !inDialog && !policy.allowsOutOfDialog && !(targetDialog != nil && targetDialogKnown) {
            return .failure(ReferRefusal(statusCode: 403, reason: "REFER outside a dialog"))
        }
        if refersInDialog >= policy.maximumPerDialog {
            return .failure(ReferRefusal(statusCode: 403, reason: "too many REFERs in this dialog"))
        }
        if openSubscriptions >= policy.maximumSubscriptions {
            return .failure(ReferRefusal(statusCode: 503, reason: "too many transfers at once"))
        }
        let referredBy: NameAddress?
        do throws(SIPParseError) { referredBy = try refer.referredBy() } catch {
            return .failure(ReferRefusal(statusCode: 400, reason: "Referred-By: \(error.rule.rawValue) at byte \(error.offset)"))
        }
        var target = referTo.uri
        if case .sip(var u) = target {
            u.headers = []
            u.parameters.remove("method")
            target = .sip(u)
        }
        let noSub = refer.values(SIPHeaderName("Refer-Sub")).first.map { $0.trimmed.lowercased() == "false" } ?? false
        return .success(ReferRequest(referTo: referTo, target: target, replaces: replaces, referredBy: referredBy,
                                     asksNoSubscription: noSub, targetDialog: targetDialog, cseq: cseq))
    }

    /// Whether the REFER's answer grants no subscription (`Refer-Sub: false` asked and granted).
    public func grantsNoSubscription(_ policy: ReferPolicy) -> Bool { asksNoSubscription && policy.grantsNoSubscription }

    public static func == (a: ReferRequest, b: ReferRequest) -> Bool {
        a.referTo == b.referTo && a.target == b.target && a.replaces == b.replaces && a.referredBy == b.referredBy
            && a.asksNoSubscription == b.asksNoSubscription && a.cseq == b.cseq
            && a.targetDialog == b.targetDialog
    }

    public func hash(into h: inout Hasher) {
        h.combine(referTo)
        h.combine(cseq)
    }
}

/// RFC 3891 §3: what an INVITE carrying `Replaces` does to the dialog it names.
public enum ReplacesDecision: Sendable, Hashable {
    /// Accept the new INVITE and end the named dialog: with BYE (it was confirmed) or CANCEL
    /// (an early dialog we placed).
    case replace(SessionKey, endWith: SIPMethod)
    /// Refuse the new INVITE: 400 (several Replaces, or one that does not parse), 481 (no such
    /// dialog, not an INVITE dialog, or an early dialog we did not place), 486 (`early-only` and
    /// the dialog is confirmed), 603 (the dialog already ended).
    case refuse(Int)
}

/// A dialog as far as Replaces matching needs it.
public struct ReplaceableDialog: Sendable, Hashable {
    /// The session's key (Call-ID and our tag).
    public var key: SessionKey
    /// The peer's tag; nil while none is known (an INVITE of ours without a tagged response).
    public var remoteTag: String?
    /// Where the dialog stands.
    public var phase: Phase
    /// Whether we placed the call (we sent the INVITE).
    public var placedByUs: Bool
    /// Whether an INVITE created it (a SUBSCRIBE or REFER dialog cannot be replaced).
    public var createdByInvite: Bool

    /// The dialog's phase.
    public enum Phase: Sendable, Hashable { case early, confirmed, terminated }

    public init(key: SessionKey, remoteTag: String?, phase: Phase, placedByUs: Bool, createdByInvite: Bool = true) {
        self.key = key
        self.remoteTag = remoteTag
        self.phase = phase
        self.placedByUs = placedByUs
        self.createdByInvite = createdByInvite
    }

    /// The dialogs of one INVITE session a Replaces may name: its dialog once it has one, else
    /// (a call we placed that still rings) one early dialog per tagged provisional response.
    public static func dialogs(of session: InviteSession, key: SessionKey) -> [ReplaceableDialog] {
        let phase: Phase = session.isTerminated ? .terminated : session.state == .confirmed ? .confirmed : .early
        if let d = session.dialog {
            return [ReplaceableDialog(key: key, remoteTag: d.id.remoteTag, phase: phase, placedByUs: d.isUAC)]
        }
        return session.earlyDialogList.map { ReplaceableDialog(key: key, remoteTag: $0.id.remoteTag, phase: phase, placedByUs: true) }
    }
}

extension ReplacesDecision {
    /// The decision for an INVITE (its `Replaces` header read here) among our dialogs; nil when
    /// the INVITE carries no Replaces. The Replaces `to-tag` is our tag, its `from-tag` the peer's.
    public static func decide(for invite: SIPMessage, among dialogs: [ReplaceableDialog]) -> ReplacesDecision? {
        guard !invite.values(.replaces).isEmpty else { return nil }
        guard invite.method == .invite else { return .refuse(400) }
        let replaces: Replaces
        do throws(SIPParseError) {
            guard let r = try invite.replaces() else { return nil }
            replaces = r
        } catch { return .refuse(400) }
        return decide(replaces, among: dialogs)
    }

    /// The decision for a parsed `Replaces` among our dialogs.
    public static func decide(_ replaces: Replaces, among dialogs: [ReplaceableDialog]) -> ReplacesDecision {
        guard let d = dialogs.first(where: {
            $0.key.callID == replaces.callID && $0.key.localTag == replaces.toTag && $0.remoteTag == replaces.fromTag
        }) else { return .refuse(481) }
        guard d.createdByInvite else { return .refuse(481) }
        switch d.phase {
        case .terminated: return .refuse(603)
        case .confirmed: return replaces.earlyOnly ? .refuse(486) : .replace(d.key, endWith: .bye)
        case .early: return d.placedByUs ? .replace(d.key, endWith: .cancel) : .refuse(481)
        }
    }
}

extension ReferRequest {
    /// The `Replaces` an attended transfer embeds for its consultation dialog (RFC 5589 §7): the
    /// transfer target matches `to-tag` against its own tag and `from-tag` against ours, so the
    /// tags come from the dialog as *we* hold it — our local tag is the `from-tag` whether we
    /// placed the consultation call or the target called us (taking From/To of the INVITE
    /// instead swaps them for an incoming consultation call).
    public static func replaces(forConsultation dialog: SessionKey, remoteTag: String, earlyOnly: Bool = false) -> Replaces {
        Replaces(callID: dialog.callID, toTag: remoteTag, fromTag: dialog.localTag, earlyOnly: earlyOnly)
    }

    /// The Refer-To of an attended transfer: the target's Contact (its device, never its address
    /// of record, which may fork elsewhere) with `replaces` embedded as an escaped URI header.
    public static func referTo(contact: SIPURI, replaces: Replaces) -> NameAddress {
        var uri = contact
        uri.headers.removeAll { $0.name.lowercased() == "replaces" }
        uri.headers.append(SIPParameter(name: "Replaces", value: replaces.description))
        return NameAddress(uri: uri)
    }
}

/// Whether an INVITE carrying `Replaces` may take over the dialog it names (RFC 3891 §6: the
/// target must only replace a dialog for a party it trusts to). Matching the tags (see
/// ``ReplacesDecision``) proves only that the sender knows the dialog's identifiers; this asks
/// who sent it. The default grounds, either of which is enough:
///
/// - ``Grounds/referredByPeer``: its `Referred-By` (RFC 3892) names the replaced dialog's peer
///   — an attended transfer, where that peer (the transferor) referred the sender to us;
/// - ``Grounds/fromPeer``: its `From` is the replaced dialog's peer itself (the same party
///   moving its call, e.g. from another of its devices).
///
/// "Names" compares identities, not devices: the user part exactly and the host
/// case-insensitively (ports, parameters and display names are ignored: peers write their
/// address of record without the port they call from), for `tel:` the digits; the peer is known
/// by the dialog's remote URI (its From or To) and by its Contact. Without digest authentication
/// or an RFC 3893 token these headers are the sender's claims: an application that needs more
/// decides with its own hook and may refuse what the default grants, or grant what it refuses.
public enum ReplacesAuthorization {
    /// Why a Replaces is authorized by default.
    public enum Grounds: Sendable, Hashable {
        /// `Referred-By` names the replaced dialog's peer.
        case referredByPeer
        /// `From` is the replaced dialog's peer.
        case fromPeer
    }

    /// The default grounds for `invite` to replace a dialog whose peer is known as `peer` (the
    /// dialog's remote URI) and `peerContact` (its remote target); nil: not authorized (403).
    public static func grounds(for invite: SIPMessage, peer: URI, peerContact: URI?) -> Grounds? {
        let known = [peer] + (peerContact.map { [$0] } ?? [])
        if let by = (try? invite.referredBy()) ?? nil, known.contains(where: { sameParty(by.uri, $0) }) { return .referredByPeer }
        if let from = try? invite.from(), known.contains(where: { sameParty(from.uri, $0) }) { return .fromPeer }
        return nil
    }

    /// Whether two URIs name the same party: sip/sips by user (exact) and host (case-insensitive),
    /// tel by its digits; a URI without user part only matches one without.
    public static func sameParty(_ a: URI, _ b: URI) -> Bool {
        switch (a, b) {
        case (.sip(let x), .sip(let y)):
            return x.user == y.user && x.host.description.lowercased() == y.host.description.lowercased()
        case (.tel(let x), .tel(let y)):
            let digits = { (s: String) in s.filter { $0.isNumber || $0 == "+" } }
            return !digits(x.number).isEmpty && digits(x.number) == digits(y.number)
        default:
            return false
        }
    }
}
