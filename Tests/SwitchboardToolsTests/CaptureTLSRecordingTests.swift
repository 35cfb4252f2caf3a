import Foundation
import Testing
import PacketCapture
import SIPMessage
import SIPRuntime
import SIPTransport
import SwitchboardTestSupport
@testable import SwitchboardTools

/// `SIPEndpoint.Configuration.capture` over TLS: the capture holds the plaintext SIP (as TCP
/// segments on the TLS port), which our reader and tshark (decoding that port as SIP) read back
/// with every message of every call in the order of their times, each with its recorded time.
@Suite("capture recording over TLS", .serialized,
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") || TestPaths.isCI,
                "the openssl tool is missing: TLS capture test skipped"),
       .requires("the openssl tool", { FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") }))
struct CaptureTLSRecordingTests {
    /// A message as "Call-ID CSeq-number label" (label: method or status code).
    static func line(_ m: SIPMessage) -> String {
        "\(m.callID ?? "") \((try? m.cseq().sequence).map(String.init) ?? "") \(m.method?.token ?? m.statusCode.map(String.init) ?? "")"
    }

    @Test(.timeLimit(.minutes(1)))
    func tlsTrafficIsRecordedInPlaintextInOrder() async throws {
        let pki = try TestPKI()
        defer { pki.remove() }
        let servePath = CaptureRecordingTests.tempPath("tls-serve"), dialPath = CaptureRecordingTests.tempPath("tls-dial")
        defer { _ = unlink(servePath); _ = unlink(dialPath) }
        let serveSink = try TeeSink(path: servePath), dialSink = try TeeSink(path: dialPath)
        let serve = try ServeCommand(listen: [try ListenSpec.parse("tls:127.0.0.1:0")], answer: 200,
                                     tls: TLSConfiguration(certificateChain: .file(pki.cert), privateKey: .file(pki.key)), capture: serveSink)
        let port = try #require(serve.endpoint.localAddress(.tls)).address.port
        let calls = 4
        let r = try await DialCommand.run(target: "sips:test@127.0.0.1:\(port)", count: calls, rate: 50, listen: try ListenSpec.parse("tls:127.0.0.1:0"),
                                          timeout: .seconds(20), tls: TLSConfiguration(trustedCertificates: [.file(pki.ca)]), capture: dialSink)
        #expect(r.succeeded == calls, "\(r.failures)")
        try await Task.sleep(for: .milliseconds(200))
        serve.endpoint.close()
        serveSink.file.close()
        dialSink.file.close()

        for (name, sink, path) in [("serve", serveSink, servePath), ("dial", dialSink, dialPath)] {
            let records = sink.records.withLock { $0 }
            #expect(records.allSatisfy { $0.transport == .tls }, "\(name)")
            #expect(sink.file.writer.firstError == nil)
            // What the endpoint recorded, per Call-ID in recording order: the plaintext messages.
            let recorded = try records.map { try SIPMessage(bytes: $0.bytes) }
            #expect(recorded.filter { $0.method == .invite }.count == calls && recorded.filter { $0.method == .bye }.count == calls, "\(name)")
            func perCall(_ lines: [String]) -> [String: [String]] {
                Dictionary(grouping: lines, by: { String($0.split(separator: " ")[0]) })
            }
            let expected = perCall(recorded.map(Self.line))
            #expect(expected.count == calls)
            // By their times, each call's messages are causal: INVITE first, the BYE's 200 last
            // (a provisional may precede the 200 to INVITE). The recording order may differ: a
            // sender records its message once its write returned, which can come after the
            // answer was received and recorded; the sink writes the file in time order (the
            // times are taken before each write).
            let inTimeOrder = zip(records, recorded).sorted { $0.0.time < $1.0.time }
            let byTime = perCall(inTimeOrder.map { Self.line($0.1) })
            for (id, seq) in byTime {
                #expect(seq.first?.hasSuffix(" INVITE") == true && seq.contains { $0.hasSuffix(" ACK") } && seq.last?.hasSuffix(" 200") == true,
                        "\(name) \(id): \(seq)")
            }

            // Our reader: TCP segments on the TLS port, the same messages per call in the same order.
            let s = try CaptureSummary(path: path)
            #expect(s.fileError == nil && s.anomalies.isEmpty, "\(name): \(String(describing: s.fileError)) \(s.anomalies)")
            #expect(s.messages.allSatisfy { $0.transport == .tcp && ($0.source.port == port || $0.destination.port == port) })
            #expect(s.messages.map { $0.message.serialized() }.sorted { $0.lexicographicallyPrecedes($1) }
                    == records.map(\.bytes).sorted { $0.lexicographicallyPrecedes($1) })
            #expect(perCall(s.messages.map { Self.line($0.message) }) == byTime, "\(name)")
            // And the frames carry the recorded times, in order.
            #expect(s.messages.map { $0.timestamp.totalNanoseconds } == inTimeOrder.map {
                $0.0.time.components.seconds * 1_000_000_000 + $0.0.time.components.attoseconds / 1_000_000_000
            }, "\(name)")

            // tshark, decoding the TLS port as SIP: the same messages per call in the same order.
            // Without tshark: checked with our reader only (a failure under CI).
            guard TestPaths.requirement("tshark", available: Tshark.available), let tshark = Tshark.path else { continue }
            let t = await ExternalTool.run(tshark, ["-r", path, "-n", "-d", "tcp.port==\(port),sip", "-Y", "sip", "-T", "fields",
                                                    "-E", "occurrence=f", "-e", "sip.Call-ID", "-e", "sip.CSeq.seq", "-e", "sip.Method",
                                                    "-e", "sip.Status-Code"], timeout: 30)
            #expect(t.ok, "\(t.output)")
            let lines = t.output.split(separator: "\n").map { l -> String in
                let f = l.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
                return "\(f[0]) \(f.count > 1 ? f[1] : "") \(f.count > 2 && !f[2].isEmpty ? f[2] : (f.count > 3 ? f[3] : ""))"
            }
            #expect(perCall(lines) == byTime, "\(name): tshark saw \(lines)")
        }
    }
}
