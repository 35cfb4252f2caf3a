import SIPMessage

/// The side the runner plays against the device under test (DUT).
public enum ConformanceRole: String, Sendable, Hashable, Codable {
    /// The runner calls: the DUT answers (a phone, a PBX's extension, a UAS).
    case uac
    /// The runner answers: the DUT calls.
    case uas
}

/// The transport a run uses to reach the DUT.
public enum ConformanceTransport: String, Sendable, Hashable, Codable, CaseIterable {
    /// UDP: the runner's own socket.
    case udp
    /// TCP: a connection from the runner to the DUT (the DUT's requests may come on its own).
    case tcp
    /// TLS: not run yet (a later session).
    case tls
}

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
    /// Every rule the checker reports, in the order of the list above.
    public static let all: [ConformanceRule] = [.contactIn2xx, .dialogTagStable, .cseqIncreases, .retransmit2xx, .viaBranch, .recordRouteEchoed,
                                                .responseCopiesRequest, .mandatoryHeaders, .wellFormed, .ack2xx, .ackNon2xx, .inviteRetransmission]
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

/// The outcome of one test.
public enum ConformanceVerdict: String, Sendable, Hashable, Codable {
    /// The scenario ran and the DUT broke no rule.
    case pass
    /// The scenario's expectation failed, or the DUT broke a rule.
    case fail
    /// The scenario could not establish what it tests (a precondition the DUT did not give, e.g.
    /// it answered at once so a CANCEL could not reach a ringing call).
    case inconclusive
}

/// One test of a suite: what it checks and how it is named.
public struct ConformanceTestCase: Sendable {
    /// Our name, unique in the suite (e.g. `basic-call`).
    public var name: String
    /// The ETSI TS 102 027-2 test purpose identifier this test implements, when one matches and
    /// its identifier and meaning could be verified; `nil` otherwise (see ``purposeNote``).
    public var etsiPurpose: String?
    /// What the test checks, in one sentence.
    public var summary: String
    /// The RFC sections the test checks.
    public var reference: String
    /// Why no ETSI identifier is given, or how the test relates to ETSI's purposes.
    public var purposeNote: String?
    /// The side the runner plays.
    public var role: ConformanceRole
    /// The scenario, run against the DUT through a ``ConformanceSession``.
    let run: @Sendable (ConformanceSession) async throws -> ScenarioOutcome

    init(name: String, etsiPurpose: String?, summary: String, reference: String, purposeNote: String? = nil, role: ConformanceRole,
         run: @escaping @Sendable (ConformanceSession) async throws -> ScenarioOutcome) {
        self.name = name
        self.etsiPurpose = etsiPurpose
        self.summary = summary
        self.reference = reference
        self.purposeNote = purposeNote
        self.role = role
        self.run = run
    }

    /// The name used in reports: the ETSI identifier when there is one, else `suite/name`.
    public var displayName: String { etsiPurpose.map { "\($0) (\(name))" } ?? name }
}

/// What a scenario concluded by itself, before the rule checker's findings are added.
enum ScenarioOutcome: Sendable {
    case passed
    case failed(String)
    case inconclusive(String)
}

/// A message of a test's exchange with the DUT.
public struct ExchangedMessage: Sendable, Hashable, Codable {
    /// Which way a message went.
    public enum Direction: String, Sendable, Hashable, Codable {
        /// From the runner to the DUT.
        case sent
        /// From the DUT to the runner.
        case received
    }
    /// Which way it went.
    public var direction: Direction
    /// Seconds since the test started.
    public var time: Double
    /// The start line (`INVITE sip:…`, `200 OK (INVITE)`), or why it did not parse.
    public var summary: String
    /// The message as it went over the wire.
    public var text: String
}

/// The result of one test.
public struct ConformanceTestResult: Sendable, Codable {
    /// The test's name in its suite.
    public var name: String
    /// Its ETSI TS 102 027-2 purpose, when it has one.
    public var etsiPurpose: String?
    /// The RFC sections it checks.
    public var reference: String
    /// Pass, fail or inconclusive.
    public var verdict: ConformanceVerdict
    /// Why the scenario failed or was inconclusive (`nil` when it passed).
    public var reason: String?
    /// The rules the DUT broke.
    public var findings: [ConformanceFinding]
    /// Every message exchanged with the DUT, in order.
    public var messages: [ExchangedMessage]
    /// Seconds the test took.
    public var duration: Double
    /// The runner's address (`127.0.0.1:40312`), for the ladder.
    public var runnerAddress: String
    /// The DUT's address (`127.0.0.1:5090`).
    public var dutAddress: String
}

/// The result of a suite run.
public struct ConformanceReport: Sendable, Codable {
    /// The suite's name.
    public var suite: String
    /// The DUT's URI.
    public var target: String
    /// The transport the run used.
    public var transport: ConformanceTransport
    /// The results, in the order the tests ran.
    public var results: [ConformanceTestResult]

    /// How many tests had each verdict.
    public func count(_ verdict: ConformanceVerdict) -> Int { results.filter { $0.verdict == verdict }.count }
    /// True when every test passed (the command's exit status is 0 only then).
    public var allPassed: Bool { !results.isEmpty && results.allSatisfy { $0.verdict == .pass } }
}
