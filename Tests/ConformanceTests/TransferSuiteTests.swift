import Foundation
import Testing
import SIPMessage
import SIPRuntime
import SIPTransport
import NetworkIO
import Switchboard
import SwitchboardTestSupport
@testable import Conformance

/// The `transfer`, `forward` and `forward-uas` suites over UDP on 127.0.0.1 against our own
/// phone (what `switchboard answer` and `switchboard call` run), clean, set to refuse, and with
/// each transfer and redirection fault.
@Suite("Conformance transfer and forward suites", .serialized)
struct TransferSuiteTests {
    /// An answering phone like `switchboard answer`'s (rings 300 ms), with `fault`, accepting
    /// REFERs or not, forwarding to `forwardTo` when given.
    static func phone(_ fault: Misbehaviour? = nil, accepts: Bool = true, forwardTo: [SIPURI] = [], tcp: Bool = false) throws -> Phone {
        let any = try SocketAddress(ip: "127.0.0.1", port: 0)
        var endpoint = SIPEndpoint.Configuration(listen: [tcp ? .tcp(any) : .udp(any)])
        endpoint.outboundRewrite = fault?.rewriter()
        let config = SIPUserAgent.Configuration(endpoint: endpoint, identity: try SIPURI("sip:dut@127.0.0.1"), transport: tcp ? .tcp : .udp)
        return try Phone(name: "dut", configuration: config, autoAnswer: .milliseconds(300), forwardTo: forwardTo,
                         referDecision: { _, _ in accepts })
    }

    static func run(_ suite: String, against phone: Phone, only: Set<String>? = nil, transport: ConformanceTransport = .udp) async throws -> ConformanceReport {
        let port = phone.agent.endpoint.localAddresses[0].address.port
        let runner = ConformanceRunner(target: try SIPURI("sip:dut@127.0.0.1:\(port)"), transport: transport, testTimeLimit: .seconds(20), responseTimeout: .seconds(2))
        return try await runner.run(suite: suite, only: only)
    }

    static func describe(_ r: ConformanceReport) -> String { ConformanceRunTests.describe(r) + "\n" + UACSuiteTests.ladder(r) }

    static let accepting: Set<String> = ["blind-transferee", "attended-transferee", "refer-answered"]

    @Test(.timeLimit(.minutes(1)))
    func theTransferSuitePassesAgainstOurPhone() async throws {
        let phone = try Self.phone()
        defer { phone.close() }
        let report = try await Self.run("transfer", against: phone)
        #expect(report.results.map(\.name) == TransferSuite.tests.map(\.name))
        #expect(report.allPassed, "\(Self.describe(report))")
        #expect(report.results.allSatisfy { $0.findings.isEmpty }, "\(Self.describe(report))")
        // The blind transfer: the DUT's INVITE to the target carried Referred-By, and NOTIFYs came.
        let blind = try #require(report.results.first { $0.name == "blind-transferee" })
        #expect(blind.messages.contains { $0.direction == .received && $0.summary.hasPrefix("INVITE sip:target-") && $0.text.contains("Referred-By:") })
        #expect(blind.messages.filter { $0.direction == .received && $0.summary.hasPrefix("NOTIFY") }.count >= 2)
    }

    @Test(.timeLimit(.minutes(1)))
    func aPhoneThatRefusesREFERIsInconclusiveWhereAcceptanceIsTested() async throws {
        let phone = try Self.phone(accepts: false)
        defer { phone.close() }
        let report = try await Self.run("transfer", against: phone, only: Self.accepting)
        let verdicts = Dictionary(uniqueKeysWithValues: report.results.map { ($0.name, $0.verdict) })
        #expect(verdicts == ["blind-transferee": .inconclusive, "attended-transferee": .inconclusive, "refer-answered": .pass], "\(Self.describe(report))")
        #expect(report.results.first { $0.name == "blind-transferee" }?.reason?.contains("603") == true)
    }

    /// Each transfer fault against a phone of its own, the three runs at once (each on its own
    /// sockets; one after the other they took ~23 s, mostly waiting for NOTIFYs that never come).
    @Test(.timeLimit(.minutes(1)))
    func eachTransferFaultFailsTheTransfersNamingItsRule() async throws {
        let faults = Misbehaviour.allCases.filter { $0.suite == "transfer" }
        #expect(faults.count == 3)
        let reports = try await withThrowingTaskGroup(of: (Misbehaviour, ConformanceReport).self) { group in
            for fault in faults {
                group.addTask {
                    let phone = try Self.phone(fault)
                    defer { phone.close() }
                    return (fault, try await Self.run("transfer", against: phone))
                }
            }
            return try await group.reduce(into: [(Misbehaviour, ConformanceReport)]()) { $0.append($1) }
        }
        #expect(Set(reports.map(\.0)) == Set(faults))
        for (fault, report) in reports {
            let failed = Set(report.results.filter { $0.verdict != .pass }.map(\.name))
            #expect(failed == Self.accepting, "\(fault): \(Self.describe(report))")
            let rules = Set(report.results.flatMap(\.findings).map(\.rule))
            switch fault {
            case .noNotifyAfterRefer:
                // No rule of the checker sees a message that never came: the scenario names §2.4.4.
                #expect(rules.isEmpty, "\(fault): \(Self.describe(report))")
                for r in report.results where r.verdict == .fail { #expect(r.reason?.contains("NOTIFY") == true, "\(fault) \(r.name): \(r.reason ?? "")") }
            default:
                #expect(rules == [fault.brokenRule], "\(fault): \(Self.describe(report))")
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func theForwardUASSuiteAgainstOurForwardingPhone() async throws {
        let targets = [try SIPURI("sip:alice@127.0.0.1:5999"), try SIPURI("sip:bob@127.0.0.1:5998")]
        let clean = try Self.phone(forwardTo: targets)
        defer { clean.close() }
        let report = try await Self.run("forward-uas", against: clean)
        #expect(report.allPassed && report.results.allSatisfy { $0.findings.isEmpty }, "\(Self.describe(report))")
        let faulty = try Self.phone(.noContactIn3xx, forwardTo: targets)
        defer { faulty.close() }
        let bad = try await Self.run("forward-uas", against: faulty)
        #expect(bad.results.map(\.verdict) == [.fail], "\(Self.describe(bad))")
        #expect(Set(bad.results.flatMap(\.findings).map(\.rule)) == [.contactIn3xx])
        // A phone that answers instead of forwarding: inconclusive.
        let answering = try Self.phone()
        defer { answering.close() }
        #expect(try await Self.run("forward-uas", against: answering).results.map(\.verdict) == [.inconclusive])
    }

    @Test(.timeLimit(.minutes(1)))
    func theForwardUASSuiteOverTCP() async throws {
        let targets = [try SIPURI("sip:alice@127.0.0.1:5999;transport=tcp")]
        let clean = try Self.phone(forwardTo: targets, tcp: true)
        defer { clean.close() }
        let report = try await Self.run("forward-uas", against: clean, transport: .tcp)
        #expect(report.allPassed && report.results.allSatisfy { $0.findings.isEmpty }, "\(Self.describe(report))")
        // The INVITE went on a connection: its Via says TCP.
        #expect(report.results[0].messages.contains { $0.direction == .sent && $0.summary.hasPrefix("INVITE") && $0.text.contains("SIP/2.0/TCP") })
        let faulty = try Self.phone(.noContactIn3xx, forwardTo: targets, tcp: true)
        defer { faulty.close() }
        let bad = try await Self.run("forward-uas", against: faulty, transport: .tcp)
        #expect(bad.results.map(\.verdict) == [.fail], "\(Self.describe(bad))")
        #expect(Set(bad.results.flatMap(\.findings).map(\.rule)) == [.contactIn3xx])
    }

    @Test(.timeLimit(.minutes(1)))
    func theForwardSuitePassesAgainstOurCallingPhone() async throws {
        let phone = try UACSuiteTests.callingPhone()
        defer { phone.close() }
        let port = try UACSuiteTests.freePort()
        let target = try SIPURI("sip:conform@127.0.0.1:\(port)")
        let runner = ConformanceRunner(target: target, responseTimeout: .seconds(3))
        async let pending = runner.run(suite: "forward")
        try await Task.sleep(for: .milliseconds(100))
        await UACSuiteTests.drive(phone, to: target, count: ForwardSuite.uacTests.count, talk: .milliseconds(300))
        let report = try await pending
        #expect(report.results.map(\.name) == ForwardSuite.uacTests.map(\.name))
        #expect(report.allPassed, "\(Self.describe(report))")
        #expect(report.results.allSatisfy { $0.findings.isEmpty }, "\(Self.describe(report))")
    }

    @Test(.timeLimit(.minutes(1)))
    func aPhoneThatDoesNotFollowRedirectsIsInconclusiveWhereRecursionIsTested() async throws {
        let endpoint = SIPEndpoint.Configuration(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])
        var config = SIPUserAgent.Configuration(endpoint: endpoint, identity: try SIPURI("sip:dut@127.0.0.1"), transport: .udp)
        config.redirects.mode = .fail
        let phone = try Phone(name: "dut", configuration: config)
        defer { phone.close() }
        let target = try SIPURI("sip:conform@127.0.0.1:\(try UACSuiteTests.freePort())")
        let runner = ConformanceRunner(target: target, responseTimeout: .seconds(2))
        async let pending = runner.run(suite: "forward")
        try await Task.sleep(for: .milliseconds(100))
        await UACSuiteTests.drive(phone, to: target, count: ForwardSuite.uacTests.count, talk: .milliseconds(300))
        let report = try await pending
        let verdicts = report.results.map(\.verdict)
        #expect(verdicts == [.inconclusive, .inconclusive, .pass, .pass], "\(Self.describe(report))")
        #expect(report.results.allSatisfy { $0.findings.isEmpty }, "\(Self.describe(report))")
    }

    /// Our calling phone as transferor (what `switchboard call --transfer-to` does): it calls
    /// `target`, holds the call and transfers it to carol (the call is hung up on success);
    /// then waits for the call's end.
    static func transferOnce(_ phone: Phone, to target: SIPURI) async throws -> Bool {
        let call = await phone.dial(target)
        guard (try? await call.waitUntil("answer", timeout: .seconds(8)) { $0.isEstablished })?.isEstablished == true else { return false }
        try? await call.setHeld(true)
        let outcome = try? await call.transfer(to: try SIPURI("sip:carol@127.0.0.1:5999"), notifyTimeout: .seconds(8))
        _ = try? await call.waitUntil("end", timeout: .seconds(8)) { $0.isEnded }
        return outcome?.isSuccess == true
    }

    /// Our calling phone as attended transferor (what `switchboard call --consult` does): it
    /// calls `target`, holds the call, calls `consult@` the runner and, once that is answered,
    /// transfers the first call to it (REFER with Replaces); then waits for the first call's end.
    static func transferAttendedOnce(_ phone: Phone, to target: SIPURI) async throws -> Bool {
        let call = await phone.dial(target)
        guard (try? await call.waitUntil("answer", timeout: .seconds(8)) { $0.isEstablished })?.isEstablished == true else { return false }
        try? await call.setHeld(true)
        let consult = try SIPURI("sip:\(TransferSuite.consultUser)@\(target.host.address):\(target.port ?? 5060)")
        let consultation = await phone.dial(consult)
        guard (try? await consultation.waitUntil("consult", timeout: .seconds(8)) { $0.isEstablished })?.isEstablished == true else { return false }
        let outcome = try? await call.attendedTransfer(to: consultation, notifyTimeout: .seconds(8))
        _ = try? await call.waitUntil("end", timeout: .seconds(8)) { $0.isEnded }
        _ = try? await consultation.waitUntil("end", timeout: .seconds(8)) { $0.isEnded }
        return outcome?.isSuccess == true
    }

    /// Runs the `transfer-uac` test `test` listening at `target` while `drive` has `phone` call
    /// it and transfer the call; the report and what `drive` returned.
    static func transferor(_ test: String, at target: SIPURI, _ phone: Phone,
                           _ drive: (Phone, SIPURI) async throws -> Bool) async throws -> (ConformanceReport, Bool) {
        let runner = ConformanceRunner(target: target, responseTimeout: .seconds(2))
        async let pending = runner.run(suite: "transfer-uac", only: [test])
        try await Task.sleep(for: .milliseconds(100))
        let done = try await drive(phone, target)
        return (try await pending, done)
    }

    @Test(.timeLimit(.minutes(1)))
    func theAttendedTransferorTestAgainstOurCallingPhone() async throws {
        let phone = try UACSuiteTests.callingPhone()
        defer { phone.close() }
        let target = try SIPURI("sip:conform@127.0.0.1:\(try UACSuiteTests.freePort())")
        let (report, transferred) = try await Self.transferor("transferor-attended", at: target, phone, Self.transferAttendedOnce)
        #expect(transferred)
        #expect(report.results.map(\.verdict) == [.pass], "\(Self.describe(report))")
        #expect(report.results.allSatisfy { $0.findings.isEmpty }, "\(Self.describe(report))")
        let messages = report.results[0].messages
        let refer = try #require(messages.first { $0.direction == .received && $0.summary.hasPrefix("REFER") })
        #expect(refer.text.contains("Replaces="), "\(refer.text)")
        #expect(messages.contains { $0.direction == .received && $0.summary.hasPrefix("INVITE sip:\(TransferSuite.consultUser)@") })
        // A transferor naming the consultation dialog with its tags the wrong way round
        // (`call --consult … --misbehave wrong-replaces-tags`) fails, saying so, and the checker
        // names exactly the fault's rule, on the REFER.
        let fault = Misbehaviour.wrongReplacesTags
        #expect(fault.suite == "transfer-uac")
        let swapped = try UACSuiteTests.callingPhone(fault.rewriter())
        defer { swapped.close() }
        let (bad, _) = try await Self.transferor("transferor-attended", at: target, swapped, Self.transferAttendedOnce)
        #expect(bad.results.map(\.verdict) == [.fail], "\(Self.describe(bad))")
        #expect(bad.results[0].reason?.contains("wrong way round") == true, "\(Self.describe(bad))")
        let findings = bad.results.flatMap(\.findings)
        #expect(Set(findings.map(\.rule)) == [fault.brokenRule], "\(Self.describe(bad))")
        if let at = findings.first?.messageIndex, at < bad.results[0].messages.count {
            #expect(bad.results[0].messages[at].summary.hasPrefix("REFER"), "\(Self.describe(bad))")
        }
        #expect(bad.junitXML.contains(fault.brokenRule.reference))
        // The suite's other test, a blind transfer (no Replaces), is untouched by the fault.
        let (blind, blindDone) = try await Self.transferor("transferor-blind", at: target, swapped, Self.transferOnce)
        #expect(blindDone)
        #expect(blind.allPassed && blind.results.allSatisfy { $0.findings.isEmpty }, "\(Self.describe(blind))")
    }

    @Test(.timeLimit(.minutes(1)))
    func theTransferorSuiteAgainstOurCallingPhone() async throws {
        let phone = try UACSuiteTests.callingPhone()
        defer { phone.close() }
        let target = try SIPURI("sip:conform@127.0.0.1:\(try UACSuiteTests.freePort())")
        let (report, transferred) = try await Self.transferor("transferor-blind", at: target, phone, Self.transferOnce)
        #expect(transferred)
        #expect(report.allPassed && report.results.allSatisfy { $0.findings.isEmpty }, "\(Self.describe(report))")
        let messages = report.results[0].messages
        #expect(messages.contains { $0.direction == .received && $0.summary.hasPrefix("REFER") })
        #expect(messages.filter { $0.direction == .sent && $0.summary.hasPrefix("NOTIFY") }.count == 2)
        // A transferor whose BYE is lost (dropped on the way out) fails, naming the missing BYE.
        let mute = try UACSuiteTests.callingPhone { $0.method == .bye ? nil : $0 }
        defer { mute.close() }
        let (kept, _) = try await Self.transferor("transferor-blind", at: target, mute, Self.transferOnce)
        #expect(kept.results.map(\.verdict) == [.fail], "\(Self.describe(kept))")
        #expect(kept.results[0].reason?.contains("BYE") == true, "\(Self.describe(kept))")
    }

    @Test func theTransferSuiteIsRefusedOverTCPUpFront() async throws {
        let runner = ConformanceRunner(target: try SIPURI("sip:dut@127.0.0.1:9"), transport: .tcp)
        await #expect(throws: ConformanceError.suiteTransport(suite: "transfer", .tcp)) { try await runner.run(suite: "transfer") }
    }
}
