import Foundation
import SwitchboardTestSupport
import Testing
import PacketCapture
@testable import SwitchboardTools
import NetworkIO

/// The summary (`switchboard capture FILE`) reads digests scanned in place; `--calls` reads
/// parsed messages. Both must count the same.
@Suite("switchboard capture: summary path", .enabled(if: CaptureCorpus.available, "../shared/corpora/pcaps is absent: capture corpus tests skipped"),
       .requires("the capture corpus", { CaptureCorpus.present }))
struct CaptureSummaryPathTests {
    static let files: [String] = {
        let root = CaptureCorpus.root
        let names = FileManager.default.enumerator(atPath: root)?.compactMap { $0 as? String } ?? []
        return names.filter { name in
            var dir: ObjCBool = false
            return FileManager.default.fileExists(atPath: root + "/" + name, isDirectory: &dir) && !dir.boolValue
        }.sorted()
    }()

    @Test func everyCorpusCaptureIsListed() {
        #expect(Self.files.count >= 18, "\(Self.files)")
    }

    @Test(arguments: files)
    func summaryEqualsTheFullPath(file: String) {
        let fast = CaptureCommand.run(path: CaptureCorpus.path(file), view: .summary)
        let full = CaptureCommand.run(path: CaptureCorpus.path(file), view: .calls)
        #expect(fast.analysis.summary == full.analysis.summary, "\(file)")
        #expect(fast.error == full.error, "\(file)")
        #expect(CaptureCommand.summaryText(fast.analysis.summary, path: file) == CaptureCommand.summaryText(full.analysis.summary, path: file))
        #expect(CaptureCommand.summaryJSON(fast.analysis.summary).rendered() == CaptureCommand.summaryJSON(full.analysis.summary).rendered())
    }

    /// Retransmissions, forks, reliable provisionals and rejected calls, in a synthetic capture
    /// written with our writer: both paths count them alike (and count them at all).
    @Test func syntheticTrafficCountsAlike() throws {
        let path = NSTemporaryDirectory() + "summary-path-\(getpid()).pcapng"
        defer { unlink(path) }
        let w = try CaptureWriter(path: path)
        let a = CaptureEndpoint(address: IPAddress(bytes: [192, 0, 2, 1])!, port: 5060)
        let b = CaptureEndpoint(address: IPAddress(bytes: [192, 0, 2, 2])!, port: 5060)
        func msg(_ s: String) -> [UInt8] { Array(s.replacingOccurrences(of: "\n", with: "\r\n").utf8) }
        func invite(_ id: String, _ branch: String) -> [UInt8] {
            msg("INVITE sip:b@x SIP/2.0\nVia: SIP/2.0/UDP 192.0.2.1;branch=\(branch)\nFrom: <sip:a@x>;tag=f\nTo: <sip:b@x>\nCall-ID: \(id)\nCSeq: 1 INVITE\nContent-Length: 0\n\n")
        }
        func response(_ id: String, _ branch: String, _ status: String, tag: String, rseq: Int? = nil, method: String = "INVITE") -> [UInt8] {
            msg("SIP/2.0 \(status)\nv: SIP/2.0/UDP 192.0.2.1;branch=\(branch)\nf: <sip:a@x>;tag=f\nt: <sip:b@x>;tag=\(tag)\ni: \(id)\n"
                + (rseq.map { "RSeq: \($0)\n" } ?? "") + "CSeq: 1 \(method)\nl: 0\n\n")
        }
        var t: Int64 = 1_700_000_000_000_000_000
        func send(_ from: CaptureEndpoint, _ to: CaptureEndpoint, _ bytes: [UInt8]) {
            t += 10_000_000
            w.writeUDP(from: from, to: to, payload: bytes, time: CaptureTimestamp(seconds: t / 1_000_000_000, nanoseconds: t % 1_000_000_000))
        }
        // Call 1: INVITE retransmitted, two reliable 183s (distinct RSeq), a fork, 200.
        send(a, b, invite("one", "z9hG4bK1"))
        send(a, b, invite("one", "z9hG4bK1"))
        send(b, a, response("one", "z9hG4bK1", "183 Session Progress", tag: "x", rseq: 1))
        send(b, a, response("one", "z9hG4bK1", "183 Session Progress", tag: "x", rseq: 2))
        send(b, a, response("one", "z9hG4bK1", "183 Session Progress", tag: "x", rseq: 2))
        send(b, a, response("one", "z9hG4bK1", "180 Ringing", tag: "y"))
        send(b, a, response("one", "z9hG4bK1", "200 OK", tag: "x"))
        // Call 2: rejected (486, then its retransmission), folded Call-ID line.
        send(a, b, msg("INVITE sip:b@x SIP/2.0\nVia: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bK2\nCall-ID:\n two\nCSeq: 1 INVITE\n\n"))
        send(b, a, response("two", "z9hG4bK2", "486 Busy Here", tag: "z"))
        send(b, a, response("two", "z9hG4bK2", "486 Busy Here", tag: "z"))
        // An OPTIONS and its answer; then a datagram that is not SIP and one that fails to parse.
        send(a, b, msg("OPTIONS sip:b@x SIP/2.0\nVia: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bK3\nCall-ID: three\nCSeq: 9 OPTIONS\n\n"))
        send(b, a, response("three", "z9hG4bK3", "200 Fine", tag: "o", method: "OPTIONS"))
        send(a, b, Array("hello".utf8))
        send(a, b, msg("INVITE sip:b@x SIP/2.0\nCall-ID: bad\nContent-Length: 99\n\n"))
        w.close()

        let fast = CaptureCommand.run(path: path, view: .summary)
        let full = CaptureCommand.run(path: path, view: .calls)
        #expect(fast.error == nil && full.error == nil)
        let s = fast.analysis.summary
        #expect(s == full.analysis.summary)
        #expect(s.messages == 12 && s.requests == 4 && s.responses == 8)
        #expect(s.retransmissions == 3)
        #expect(s.requestsByMethod == ["INVITE": 3, "OPTIONS": 1])
        #expect(s.responsesByCode == [183: 3, 180: 1, 200: 2, 486: 2])
        #expect(s.reasonPhrases[200] == "OK")
        #expect(s.callsByOutcome == [.answered: 1, .rejected(486): 1, .noInvite: 1] && s.calls == 2)
        #expect(s.anomalies == 1)
    }
}
