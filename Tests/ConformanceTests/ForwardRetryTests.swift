import Foundation
import Testing
import Synchronization
import SIPMessage
import SIPTransport
import NetworkIO
@testable import Conformance

/// A caller written out message by message that recurses on a 3xx the way RFC 3261 §8.1.3.4
/// allows but our phone does not: the retry to the first Contact takes a new Call-ID (keeping
/// the From tag). It ACKs every final response, ends an answered retry with BYE.
final class NewCallIDCaller: Sendable {
    let transport: UDPTransport
    private let received = Mutex<[SIPMessage]>([])
    private let counter = Atomic<Int>(0)

    init() throws {
        let inbox = Mutex<NewCallIDCaller?>(nil)
        transport = try UDPTransport(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0)) { event in
            if case .message(let inbound) = event { inbox.withLock { $0 }?.received.withLock { $0.append(inbound.message) } }
        }
        inbox.withLock { $0 = self }
    }

    func close() { transport.close() }

    private var hostPort: String { "127.0.0.1:\(transport.localAddress.port)" }
    private func token() -> String { "t\(counter.add(1, ordering: .relaxed).newValue)-\(UInt32.random(in: 0...UInt32.max))" }

    private func request(_ method: String, uri: String, branch: String, tag: String, to: String, callID: String, cseq: Int) -> [UInt8] {
        let text = ["\(method) \(uri) SIP/2.0", "Via: SIP/2.0/UDP \(hostPort);branch=\(branch);rport", "Max-Forwards: 70",
                    "From: <sip:dut@127.0.0.1>;tag=\(tag)", "To: \(to)", "Call-ID: \(callID)", "CSeq: \(cseq) \(method)",
                    "Contact: <sip:dut@\(hostPort)>", "Content-Length: 0"].joined(separator: "\r\n") + "\r\n\r\n"
        return Array(text.utf8)
    }

    /// The first final response on `branch` (up to 5 s).
    private func final(_ branch: String) async -> SIPMessage? {
        for _ in 0..<1000 {
            if let r = received.withLock({ $0.first { !$0.isRequest && ($0.statusCode ?? 0) >= 200 && $0.topViaBranch == branch } }) { return r }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return nil
    }

    /// Sends `method` in a call and waits for its final response; a 3xx-6xx to an INVITE is
    /// ACKed on its branch, a 2xx with an ACK of its own.
    private func send(_ method: String, uri: String, tag: String, to: String, callID: String, cseq: Int, dest: SocketAddress) async -> SIPMessage? {
        let branch = "z9hG4bK-ncid-" + token()
        try? transport.send(request(method, uri: uri, branch: branch, tag: tag, to: to, callID: callID, cseq: cseq), to: dest)
        guard let r = await final(branch) else { return nil }
        guard method == "INVITE" else { return r }
        let answered = r[.to] ?? to
        let ok = (200...299).contains(r.statusCode ?? 0)
        try? transport.send(request("ACK", uri: uri, branch: ok ? "z9hG4bK-ncid-" + token() : branch, tag: tag, to: answered, callID: callID, cseq: cseq), to: dest)
        return r
    }

    /// Calls `target` (at `dest`); on a 3xx calls its Contacts in the order listed (not by q),
    /// each under a new Call-ID, until one answers; an answered call is hung up. Returns the
    /// final status of the last INVITE.
    @discardableResult
    func call(_ target: String, at dest: SocketAddress) async -> Int? {
        let tag = token(), to = "<\(target)>"
        guard let first = await send("INVITE", uri: target, tag: tag, to: to, callID: "first-" + token(), cseq: 1, dest: dest) else { return nil }
        guard (300...399).contains(first.statusCode ?? 0), case .addresses(let list)? = (try? first.contact()) ?? nil else { return first.statusCode }
        var status = first.statusCode
        for next in list {
            let uri = next.uri.description, callID = "retry-" + token()
            guard let r = await send("INVITE", uri: uri, tag: tag, to: to, callID: callID, cseq: 1, dest: dest) else { return nil }
            status = r.statusCode
            if (200...299).contains(r.statusCode ?? 0) {
                try? await Task.sleep(for: .milliseconds(100))
                _ = await send("BYE", uri: uri, tag: tag, to: r[.to] ?? to, callID: callID, cseq: 2, dest: dest)
                break
            }
        }
        return status
    }
}

@Suite("Conformance forward suite: a retry under a new Call-ID", .serialized)
struct ForwardRetryTests {
    /// Runs the `forward` tests `only` listening on a free port while `drive` has a
    /// ``NewCallIDCaller`` call that target (its URI, its address).
    static func run(_ only: Set<String>, _ drive: (NewCallIDCaller, String, SocketAddress) async throws -> Void) async throws -> ConformanceReport {
        let caller = try NewCallIDCaller()
        defer { caller.close() }
        let port = try UACSuiteTests.freePort()
        let target = "sip:conform@127.0.0.1:\(port)"
        let runner = ConformanceRunner(target: try SIPURI(target), responseTimeout: .seconds(2))
        async let pending = runner.run(suite: "forward", only: only)
        try await Task.sleep(for: .milliseconds(100))
        try await drive(caller, target, try SocketAddress(ip: "127.0.0.1", port: port))
        return try await pending
    }

    @Test(.timeLimit(.minutes(1)))
    func aRetryWithANewCallIDIsFollowedAndALoopUnderOneIsCaught() async throws {
        let report = try await Self.run(["redirect-one-target", "redirect-loop"]) { caller, target, dest in
            // The redirected call is answered at the Contact; the loop's retry (the same URI) is refused.
            #expect(await caller.call(target, at: dest) == 200)
            try await Task.sleep(for: .milliseconds(300))
            #expect(await caller.call(target, at: dest) == 486)
        }
        let verdicts = Dictionary(uniqueKeysWithValues: report.results.map { ($0.name, $0.verdict) })
        #expect(verdicts == ["redirect-one-target": .pass, "redirect-loop": .fail], "\(TransferSuiteTests.describe(report))")
        #expect(report.results.allSatisfy { $0.findings.isEmpty }, "\(TransferSuiteTests.describe(report))")
        let one = try #require(report.results.first { $0.name == "redirect-one-target" })
        let invites = one.messages.filter { $0.direction == .received && $0.summary.hasPrefix("INVITE") }
        #expect(invites.count == 2 && invites[1].text.contains("Call-ID: retry-"), "\(invites.map(\.text))")
        let loop = try #require(report.results.first { $0.name == "redirect-loop" })
        #expect(loop.reason?.contains("redirect loop") == true, "\(loop.reason ?? "")")
    }

    /// RFC 3261 §8.1.3.4: "the client MAY generate new requests to the URIs in any order"; q
    /// order is a common mechanism. A caller trying the Contacts as listed is not failed for it.
    @Test(.timeLimit(.minutes(1)))
    func contactsTriedInAnotherOrderThanQAreInconclusiveNotFailed() async throws {
        let report = try await Self.run(["redirect-q-order"]) { caller, target, dest in
            #expect(await caller.call(target, at: dest) == 200)
        }
        #expect(report.results.map(\.verdict) == [.inconclusive], "\(TransferSuiteTests.describe(report))")
        #expect(report.results[0].findings.isEmpty)
        #expect(report.results[0].reason?.contains("any order") == true, "\(report.results[0].reason ?? "")")
    }
}
