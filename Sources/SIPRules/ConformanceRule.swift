import SIPMessage

/// A rule of an RFC that a DUT can break, named by its RFC and section.
public struct ConformanceRule: Sendable, Hashable, Codable, CustomStringConvertible {
    /// A short stable name, e.g. `contact-in-2xx`.
    public var id: String
    /// The RFC and section, e.g. `RFC 3261 §12.1.1`.
    public var reference: String
    /// What the rule requires, in one sentence (our words, not the RFC's).
    public var requirement: String

    /// A rule named `id`, from `reference`, requiring `requirement`.
    public init(id: String, reference: String, requirement: String) {
        self.id = id
        self.reference = reference
        self.requirement = requirement
    }

    /// `RFC 3261 §12.1.1 (contact-in-2xx)`
    public var description: String { "\(reference) (\(id))" }
}

/// The rules the checker knows.
extension ConformanceRule {
    /// A 2xx to an INVITE (it creates a dialog) carries a Contact.
    public static let contactIn2xx = ConformanceRule(id: "contact-in-2xx", reference: "RFC 3261 §12.1.1",
        requirement: "a UAS answering an INVITE with a 2xx must put a Contact header field in it")
    /// The remote tag of a dialog does not change for the dialog's lifetime.
    public static let dialogTagStable = ConformanceRule(id: "dialog-tag-stable", reference: "RFC 3261 §12 / §8.2.6.2",
        requirement: "the To tag of a response to a request inside a dialog (and of every copy of a 2xx) equals the dialog's tag")
    /// CSeq numbers of the DUT's requests in a dialog increase.
    public static let cseqIncreases = ConformanceRule(id: "cseq-increases", reference: "RFC 3261 §12.2.1.1",
        requirement: "each new request in a dialog (other than ACK and CANCEL) has a CSeq number higher than the previous one")
    /// A 2xx to INVITE is retransmitted over UDP until the ACK arrives: T1, doubling, at most T2.
    public static let retransmit2xx = ConformanceRule(id: "2xx-retransmission", reference: "RFC 3261 §13.3.1.4",
        requirement: "over an unreliable transport a UAS retransmits its 2xx to INVITE at T1, doubling up to T2, until the ACK arrives")
    /// The branch of a request starts with the magic cookie and is unique per transaction.
    public static let viaBranch = ConformanceRule(id: "via-branch", reference: "RFC 3261 §8.1.1.7",
        requirement: "the top Via branch starts with z9hG4bK and is not reused by another transaction")
    /// A 2xx to a record-routed INVITE echoes its Record-Route.
    public static let recordRouteEchoed = ConformanceRule(id: "record-route-echoed", reference: "RFC 3261 §12.1.1",
        requirement: "a UAS copies every Record-Route of the INVITE, in order, into its 2xx (and its 1xx with a tag)")
    /// Via, From, Call-ID and CSeq of a response are copied from the request.
    public static let responseCopiesRequest = ConformanceRule(id: "response-copies-request", reference: "RFC 3261 §8.2.6.2",
        requirement: "a response carries the request's Via (all values, in order), From, Call-ID and CSeq")
    /// Every message carries the header fields RFC 3261 makes mandatory.
    public static let mandatoryHeaders = ConformanceRule(id: "mandatory-headers", reference: "RFC 3261 §8.1.1 / §20",
        requirement: "requests carry To, From, CSeq, Call-ID, Max-Forwards and Via; responses carry To, From, CSeq, Call-ID and Via")
    /// The DUT sends only messages that parse.
    public static let wellFormed = ConformanceRule(id: "well-formed", reference: "RFC 3261 §7 / §25",
        requirement: "every message sent follows the SIP grammar")
    /// The DUT as UAC acknowledges each 2xx (and each copy of it) with an ACK of its own.
    public static let ack2xx = ConformanceRule(id: "ack-2xx", reference: "RFC 3261 §13.2.2.4",
        requirement: "a UAC acknowledges every 2xx to its INVITE, and every retransmission of it, with an ACK carrying the INVITE's CSeq number, the 2xx's To tag and a new branch (the ACK is a transaction of its own)")
    /// The DUT as UAC acknowledges a non-2xx final response inside the INVITE's transaction.
    public static let ackNon2xx = ConformanceRule(id: "ack-non-2xx", reference: "RFC 3261 §17.1.1.3",
        requirement: "a UAC acknowledges a non-2xx final response to its INVITE with an ACK on the INVITE's branch, with the INVITE's CSeq number and the response's To tag")
    /// Timer A: the DUT as UAC retransmits its INVITE over UDP until a response arrives.
    public static let inviteRetransmission = ConformanceRule(id: "invite-retransmission", reference: "RFC 3261 §17.1.1.2",
        requirement: "over an unreliable transport a UAC retransmits its INVITE at T1, doubling each time, until a response arrives, and not after it")
    /// A registrar's 2xx to REGISTER gives each binding's expiration interval.
    public static let registerContactExpires = ConformanceRule(id: "register-contact-expires", reference: "RFC 3261 §10.3 step 8",
        requirement: "every Contact of a registrar's 2xx to REGISTER carries an expires parameter: the interval the registrar chose for that binding")
    /// A NOTIFY says what became of the subscription.
    public static let notifySubscriptionState = ConformanceRule(id: "notify-subscription-state", reference: "RFC 6665 §4.2.2, §4.1.3; RFC 3515 §2.4.5",
        requirement: "every NOTIFY carries a Subscription-State header field (active, pending or terminated)")
    /// The NOTIFYs of a REFER's subscription carry the referred request's status as sipfrag.
    public static let referNotifySipfrag = ConformanceRule(id: "refer-notify-sipfrag", reference: "RFC 3515 §2.4.5",
        requirement: "a NOTIFY of a REFER's implicit subscription (Event: refer) has a message/sipfrag body starting with a SIP/2.0 status line")
    /// A REFER names one target.
    public static let referToCount = ConformanceRule(id: "refer-to-count", reference: "RFC 3515 §2.4.1",
        requirement: "a REFER carries exactly one Refer-To value; a REFER with none or several is refused (400), not accepted")
    /// An INVITE with Replaces replaces only a dialog the recipient may give up.
    public static let replacesDialog = ConformanceRule(id: "replaces-dialog", reference: "RFC 3891 §3",
        requirement: "an INVITE whose Replaces names no dialog of the recipient, or an early dialog the recipient did not initiate, is refused 481; one with early-only naming a confirmed dialog 486; one naming a dialog already ended is declined (603), never answered 2xx")
    /// A 420 names the extensions the UAS does not understand.
    public static let unsupportedIn420 = ConformanceRule(id: "unsupported-in-420", reference: "RFC 3261 §8.2.2.3",
        requirement: "a 420 (Bad Extension) carries an Unsupported header field listing the option tags of the request's Require that the UAS does not understand")
    /// A second INVITE while the first is pending: 500 with Retry-After.
    public static let retryAfterIn500 = ConformanceRule(id: "retry-after-in-500", reference: "RFC 3261 §14.2",
        requirement: "a UAS answering 500 to an INVITE that arrived before it sent the final response to an earlier INVITE (lower CSeq) of the same dialog includes Retry-After, 0 to 10 seconds")
    /// A reliable provisional response carries Require: 100rel and RSeq.
    public static let reliableProvisional = ConformanceRule(id: "reliable-provisional", reference: "RFC 3262 §3, §7.1",
        requirement: "a provisional response (101-199) to an INVITE whose Require lists 100rel is sent reliably: Require: 100rel and an RSeq header field")
    /// A 422 gives the server's minimum session interval.
    public static let minSEIn422 = ConformanceRule(id: "min-se-in-422", reference: "RFC 4028 §6, §9",
        requirement: "a 422 (Session Interval Too Small) carries a Min-SE header field with the minimum interval, above the Session-Expires of the request")
    /// A 2xx with Session-Expires says who refreshes.
    public static let sessionExpiresRefresher = ConformanceRule(id: "session-expires-refresher", reference: "RFC 4028 §9",
        requirement: "a 2xx to INVITE or UPDATE carrying Session-Expires has a refresher parameter (uac or uas); uac only when the request's Supported or Require listed timer, and then with Require: timer in the 2xx")
    /// A PRACK acknowledges a reliable provisional response that was sent.
    public static let prackRAck = ConformanceRule(id: "prack-rack", reference: "RFC 3262 §7.2, §4",
        requirement: "a PRACK carries an RAck naming the RSeq, CSeq number and method of a reliable provisional response the UAC received in that dialog")
    /// After a 422 the UAC's retry asks for at least the Min-SE it was given.
    public static let sessionExpiresAfter422 = ConformanceRule(id: "session-expires-after-422", reference: "RFC 4028 §7.4",
        requirement: "an INVITE retried after a 422 carries Session-Expires at least the 422's Min-SE, and a Min-SE header field not below it")
    /// After a 420 the UAC's retry no longer requires what the UAS said it does not support.
    public static let requireAfter420 = ConformanceRule(id: "require-after-420", reference: "RFC 3261 §8.1.3.5",
        requirement: "an INVITE retried after a 420 (Bad Extension) omits the extensions the 420's Unsupported header field listed: none of them is in its Require")
    /// An attended transferor's Replaces names the consultation dialog as its target sees it.
    public static let replacesNamesDialog = ConformanceRule(id: "replaces-names-dialog", reference: "RFC 3891 §3; RFC 5589 §7",
        requirement: "a Replaces a UA sends (in a REFER's Refer-To) naming one of its dialogs gives that dialog's Call-ID with to-tag the tag of the peer that will receive the INVITE with Replaces (the target) and from-tag its own")
    /// Every rule the checker reports, in the order of the list above.
    public static let all: [ConformanceRule] = [.contactIn2xx, .dialogTagStable, .cseqIncreases, .retransmit2xx, .viaBranch, .recordRouteEchoed,
                                                .responseCopiesRequest, .mandatoryHeaders, .wellFormed, .ack2xx, .ackNon2xx, .inviteRetransmission,
                                                .registerContactExpires, .notifySubscriptionState, .referNotifySipfrag, .referToCount,
                                                .replacesDialog, .contactIn3xx, .unsupportedIn420, .retryAfterIn500, .reliableProvisional, .minSEIn422,
                                                .sessionExpiresRefresher, .prackRAck, .sessionExpiresAfter422,
                                                .requireAfter420, .replacesNamesDialog]
}

/// A rule broken by the DUT, at a message of the exchange.
public struct ConformanceFinding: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The rule broken.
    public var rule: ConformanceRule
    /// The index of the offending message in the test's exchange (0-based), `nil` when the
    /// finding is about a message that did not come.
    public var messageIndex: Int?
    /// What was seen.
    public var detail: String

    /// A finding of `rule` at message `messageIndex` of the exchange.
    public init(rule: ConformanceRule, messageIndex: Int?, detail: String) {
        self.rule = rule
        self.messageIndex = messageIndex
        self.detail = detail
    }

    /// `RFC 3261 §12.1.1 [contact-in-2xx] at message #2: …`
    public var description: String {
        "\(rule.reference) [\(rule.id)]" + (messageIndex.map { " at message #\($0)" } ?? "") + ": \(detail)"
    }
}

/// The rules only the capture check reports (it also reports several of ``ConformanceRule/all``):
/// they need a whole call seen from outside, both parties and their timing.
extension ConformanceRule {
    /// Timer E: a non-INVITE request is retransmitted over UDP until a response arrives.
    public static let nonInviteRetransmission = ConformanceRule(id: "non-invite-retransmission", reference: "RFC 3261 §17.1.2.2",
        requirement: "over an unreliable transport a UAC retransmits a non-INVITE request at T1, doubling up to T2, until a response arrives")
    /// Once a BYE is answered, the INVITE usage of the dialog is over.
    public static let requestAfterBye = ConformanceRule(id: "request-after-bye", reference: "RFC 3261 §15.1",
        requirement: "once a BYE has been answered 2xx, neither party sends another request of the session (INVITE, UPDATE, INFO, PRACK, BYE) in that dialog")
    /// A 481: a request named a dialog or transaction its receiver does not have.
    public static let unknownDialog = ConformanceRule(id: "481-unknown-dialog", reference: "RFC 3261 §12.2.2",
        requirement: "a request inside a dialog names a dialog its receiver has (a 481 Call/Transaction Does Not Exist says it did not)")
    /// The tags of a dialog do not change for its lifetime, in either direction.
    public static let dialogTags = ConformanceRule(id: "dialog-tags", reference: "RFC 3261 §12.2.1.1",
        requirement: "a request inside a dialog carries the dialog's tags: its sender's tag in From, the peer's tag in To")
    /// Offer and answer (RFC 3264): an answer only to an offer, as many m-lines, a codec in common.
    public static let offerAnswer = ConformanceRule(id: "offer-answer", reference: "RFC 3264 §5, §6",
        requirement: "an answer answers a pending offer, with as many m-lines of the same types and, for each stream accepted, a codec of the offer")
    /// A 3xx names where to go in Contact.
    public static let contactIn3xx = ConformanceRule(id: "contact-in-3xx", reference: "RFC 3261 §21.3 / §8.1.3.4",
        requirement: "a 300, 301, 302 or 305 response gives the alternative locations in Contact header fields")
    /// An accepted REFER makes an implicit subscription that ends with a final NOTIFY.
    public static let referNotify = ConformanceRule(id: "refer-notify", reference: "RFC 3515 §2.4.4 / §2.4.5",
        requirement: "the recipient of a REFER it accepted (2xx) reports the outcome in NOTIFYs, the last one with Subscription-State terminated")
    /// Timer G: a non-2xx final response to INVITE is retransmitted over UDP until the ACK.
    public static let retransmitNon2xx = ConformanceRule(id: "non-2xx-retransmission", reference: "RFC 3261 §17.2.1",
        requirement: "over an unreliable transport a UAS retransmits its 3xx-6xx final response to INVITE at T1, doubling up to T2 (Timer G), until the ACK arrives or Timer H (64·T1) fires")
    /// Recursing on 3xx: each target once.
    public static let redirectLoop = ConformanceRule(id: "redirect-loop", reference: "RFC 3261 §8.1.3.4",
        requirement: "a UAC recursing on 3xx responses tries each target once: a target already tried in the chain is a loop and is not tried again")

    // What only the capture check's machines (our transaction layer, dialog, INVITE session and
    // REFER subscriber playing a party's peer) report.

    /// A response answers a request its receiver sent (RFC 3261 §17.1.3 matching, §18.1.2).
    public static let responseMatchesTransaction = ConformanceRule(id: "response-matches-transaction", reference: "RFC 3261 §17.1.3 / §18.1.2",
        requirement: "a response answers a request its receiver sent: its top Via branch and CSeq method name a client transaction of the receiver")
    /// An ACK acknowledges a final response its sender received (RFC 3261 §17.1.1.3, §13.2.2.4).
    public static let ackAnswersFinal = ConformanceRule(id: "ack-answers-final", reference: "RFC 3261 §17.1.1.3 / §13.2.2.4",
        requirement: "an ACK acknowledges a final response to an INVITE its sender received: it carries that INVITE's CSeq number")
    /// One INVITE transaction at a time in a dialog (RFC 3261 §14.1; the UAS answers 500 or 491, §14.2).
    public static let reinviteWhilePending = ConformanceRule(id: "reinvite-while-pending", reference: "RFC 3261 §14.1 / §14.2",
        requirement: "a UA does not start an INVITE transaction in a dialog while another one is in progress in either direction (its peer answers 500 or 491)")
    /// One offer at a time in a dialog (RFC 3264 §4; RFC 3311 §5.2: an UPDATE with an offer while
    /// one is outstanding gets 491).
    public static let offerWhilePending = ConformanceRule(id: "offer-while-pending", reference: "RFC 3264 §4 / RFC 3311 §5.2",
        requirement: "a UA makes no new offer (in a re-INVITE or an UPDATE) in a dialog while an offer it made or received there is unanswered (its peer answers 491)")
    /// A NOTIFY belongs to a live subscription (RFC 6665 §4.1.3; RFC 3515 §2.4.5).
    public static let notifyInSubscription = ConformanceRule(id: "notify-in-subscription", reference: "RFC 6665 §4.1.3 / RFC 3515 §2.4.5",
        requirement: "a NOTIFY of a REFER's subscription comes while the subscription lives: none after the NOTIFY that terminated it, none for a refused REFER (the subscriber answers 481)")

    /// The rules the capture check reports, in the order of its report.
    public static let captureCheck: [ConformanceRule] = [
        .inviteRetransmission, .nonInviteRetransmission, .retransmit2xx, .retransmitNon2xx, .ack2xx, .ackNon2xx, .requestAfterBye, .unknownDialog,
        .dialogTagStable, .dialogTags, .cseqIncreases, .offerAnswer, .contactIn2xx, .contactIn3xx, .referNotify, .redirectLoop,
        .notifySubscriptionState, .referNotifySipfrag, .referToCount,
        .viaBranch, .responseMatchesTransaction, .ackAnswersFinal, .reinviteWhilePending, .offerWhilePending, .notifyInSubscription,
    ]
}
