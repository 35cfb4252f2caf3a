import SIPMessage
import SIPRules

/// The side the runner plays against the device under test (DUT).
public enum ConformanceRole: String, Sendable, Hashable, Codable {
    /// The runner calls: the DUT answers (a phone, a PBX's extension, a UAS).
    case uac
    /// The runner answers: the DUT calls.
    case uas
    /// The runner plays both ends through the DUT (a proxy): it calls itself at its own
    /// address, and answers the requests the DUT forwards to it.
    case proxy
}

/// The transport a run uses to reach the DUT.
public enum ConformanceTransport: String, Sendable, Hashable, Codable, CaseIterable {
    /// UDP: the runner's own socket.
    case udp
    /// TCP: a connection from the runner to the DUT (the DUT's requests may come on its own).
    case tcp
    /// TLS: a connection from the runner to the DUT, as TCP (the `uas` suite in this version).
    case tls
}

// The rule catalogue, the finding and the checker live in SIPRules, shared with the capture
// check (CaptureAnalysis); these names keep Conformance's API as it was.

/// A rule of an RFC that a device can break (``SIPRules/ConformanceRule``).
public typealias ConformanceRule = SIPRules.ConformanceRule
/// A rule broken by the DUT, at a message of the exchange (``SIPRules/ConformanceFinding``).
public typealias ConformanceFinding = SIPRules.ConformanceFinding
/// The checker naming the rules a DUT broke in an exchange (``SIPRules/RuleChecker``).
public typealias RuleChecker = SIPRules.RuleChecker

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
    /// How long the run keeps collecting late copies (retransmissions) after the scenario ends.
    var settle: Duration = .milliseconds(200)
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
