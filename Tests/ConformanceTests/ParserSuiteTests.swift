import Foundation
import Testing
import Synchronization
import SIPMessage
import SIPTransport
import NetworkIO
import SwitchboardTestSupport
import Switchboard
@testable import Conformance

/// The `parser` suite against a deliberately weak device: it answers 200 to every request that
/// parses (without checking it further) and stops answering anything once it has read two
/// Content-Length values (RFC 4475 §3.3.9), as a device that died would.
@Suite("Conformance parser suite", .serialized)
struct ParserSuiteTests {
    final class FragileDevice: Sendable {
        let dead = Atomic<Bool>(false)
        let transport: Mutex<UDPTransport?> = Mutex(nil)

        init() throws {
            let t = try UDPTransport(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0)) { [weak self] event in self?.handle(event) }
            transport.withLock { $0 = t }
        }

        var port: UInt16 { transport.withLock { $0?.localAddress.port ?? 0 } }

        func handle(_ event: TransportEvent) {
            guard !dead.load(ordering: .acquiring) else { return }
            switch event {
            case .message(let inbound):
                guard inbound.message.isRequest, inbound.message.method != .ack else { return }
                var r = SIPMessage(responseTo: inbound.message, statusCode: 200, toTag: "fragile")
                try? r.append(.contentLength, "0")
                _ = transport.withLock { try? $0?.send(r.serialized(), to: inbound.source) }
            case .malformed(let bytes, _, _):
                if String(decoding: bytes, as: UTF8.self).contains("Call-ID: mcl01.") { dead.store(true, ordering: .releasing) }
            default:
                break
            }
        }

        func close() { transport.withLock { $0?.close(); $0 = nil } }
    }

    @Test(.timeLimit(.minutes(1)))
    func aDeviceThatDiesFailsWithTheMessageThatKilledIt() async throws {
        guard TestPaths.requireCorpus("rfc4475/application/mcl01.dat") else { return }
        let device = try FragileDevice()
        defer { device.close() }
        let runner = ConformanceRunner(target: try SIPURI("sip:dut@127.0.0.1:\(device.port)"), responseTimeout: .milliseconds(700), corpus: TestPaths.corpora)
        let report = try await runner.run(suite: "parser", only: ["4475-wsinv", "4475-mismatch01", "4475-mcl01", "4475-inv2543"])
        let byName = Dictionary(uniqueKeysWithValues: report.results.map { ($0.name, $0) })
        // A valid message answered 200: fine.
        #expect(byName["4475-wsinv"]?.verdict == .pass, "\(byName["4475-wsinv"]?.reason ?? "")")
        // A start line and CSeq method that disagree must be rejected: the 200 reaching the
        // runner (the message's Via names another host; this device answers its source) fails it.
        let mismatch = try #require(byName["4475-mismatch01"])
        #expect(mismatch.verdict == .fail && mismatch.reason?.contains("was accepted with 200") == true, "\(mismatch.reason ?? "")")
        // Two Content-Length values kill it: the failure names the file and the RFC section.
        let mcl = try #require(byName["4475-mcl01"])
        #expect(mcl.verdict == .fail)
        #expect(mcl.reason?.contains("rfc4475/application/mcl01.dat") == true && mcl.reason?.contains("RFC 4475 §3.3.9") == true, "\(mcl.reason ?? "")")
        // After that (the tests run in the suite's order) its liveness cannot be checked.
        #expect(report.results.map(\.name) == ["4475-wsinv", "4475-mismatch01", "4475-mcl01", "4475-inv2543"])
        #expect(byName["4475-inv2543"]?.verdict == .inconclusive)
        // The torture messages themselves and the answers to them are not held against the rule checker.
        #expect(report.results.allSatisfy { $0.findings.isEmpty }, "\(report.results.flatMap(\.findings))")
    }

    /// Our answering phone (what `switchboard answer` runs) answers or drops every message and
    /// stays alive.
    @Test(.timeLimit(.minutes(1)))
    func theSuitePassesAgainstOurAnsweringPhone() async throws {
        guard TestPaths.requireCorpus("rfc4475/EXPECTATIONS.tsv"), TestPaths.requireCorpus("rfc5118/EXPECTATIONS.tsv") else { return }
        let phone = try ConformanceRunTests.answeringPhone(nil)
        defer { phone.close() }
        let port = phone.agent.endpoint.localAddresses[0].address.port
        let runner = ConformanceRunner(target: try SIPURI("sip:dut@127.0.0.1:\(port)"), responseTimeout: .seconds(1), corpus: TestPaths.corpora)
        let report = try await runner.run(suite: "parser")
        #expect(report.results.map(\.name) == ParserSuite.messages.map(\.name))
        let failed = report.results.filter { $0.verdict != .pass }.map { "\($0.name): \($0.verdict) \($0.reason ?? "")" }
        #expect(failed.isEmpty, "\(failed)")
    }

    @Test func aMissingCorpusStopsTheRunUpFront() async throws {
        let runner = ConformanceRunner(target: try SIPURI("sip:dut@127.0.0.1:9"), corpus: "/nonexistent-corpus")
        await #expect(throws: ConformanceError.self) { _ = try await runner.run(suite: "parser") }
        let tcp = ConformanceRunner(target: try SIPURI("sip:dut@127.0.0.1:9"), transport: .tcp, corpus: TestPaths.corpora)
        await #expect(throws: ConformanceError.suiteTransport(suite: "parser", .tcp)) { _ = try await tcp.run(suite: "parser") }
    }
}
