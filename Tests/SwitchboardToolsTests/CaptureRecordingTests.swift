import NetworkIO
import Synchronization

#if canImport(Glibc)
import Glibc
#endif
import Testing
import PacketCapture
import SIPMessage
import SIPRuntime
import SIPTransport
import SwitchboardTestSupport
@testable import SwitchboardTools
import Switchboard

/// A sink that writes the capture file and also keeps every record, to compare with the file.
final class TeeSink: SIPTrafficSink {
    let file: CaptureFileSink
    let records = Mutex<[SIPTrafficRecord]>([])
    init(path: String) throws { file = try CaptureFileSink(path: path) }
    func record(_ r: SIPTrafficRecord) {
        records.withLock { $0.append(r) }
        file.record(r)
    }
    func connectionClosed(_ c: ConnectionInfo) { file.connectionClosed(c) }
}

/// `serve`/`dial --capture`: the endpoints mirror their traffic into pcapng files, which our
/// reader and tshark read back.
@Suite("capture recording")
struct CaptureRecordingTests {
    static func tempPath(_ name: String) -> String {
        "/tmp/switchboard-capture-\(name)-\(UInt64.random(in: 0...UInt64.max)).pcapng"
    }

    @Test(.timeLimit(.minutes(1)), arguments: ["udp", "tcp"])
    func loopbackCallsAreRecordedAndReadBack(_ transport: String) async throws {
        let servePath = Self.tempPath("serve"), dialPath = Self.tempPath("dial")
        defer { _ = unlink(servePath); _ = unlink(dialPath) }
        let serveSink = try TeeSink(path: servePath), dialSink = try TeeSink(path: dialPath)
        let serve = try ServeCommand(listen: [try ListenSpec.parse("\(transport):127.0.0.1:0")], answer: 200, capture: serveSink)
        let port = try #require(serve.endpoint.localAddresses.first).address.port
        let calls = 10
        let r = try await DialCommand.run(target: "sip:test@127.0.0.1:\(port)", count: calls, rate: 200,
                                          listen: try ListenSpec.parse("\(transport):127.0.0.1:0"), timeout: .seconds(20), capture: dialSink)
        #expect(r.succeeded == calls, "\(r.failures)")
        // Let the last 200 to BYE reach the dialer's sink, then close everything.
        try await Task.sleep(for: .milliseconds(200))
        serve.endpoint.close()
        serveSink.file.close()
        dialSink.file.close()

        for (name, sink, path) in [("serve", serveSink, servePath), ("dial", dialSink, dialPath)] {
            let records = sink.records.withLock { $0 }
            #expect(records.count >= calls * 5, "\(name): \(records.count) records")
            #expect(records.allSatisfy { $0.transport.viaToken.lowercased() == transport })
            #expect(records.contains { $0.direction == .sent } && records.contains { $0.direction == .received })
            #expect(sink.file.writer.firstError == nil)

            // Our reader: the same messages (bytes, as multisets: threads record concurrently).
            let s = try CaptureSummary(path: path)
            #expect(s.fileError == nil && s.anomalies.isEmpty, "\(name): \(String(describing: s.fileError)) \(s.anomalies)")
            let written = s.messages.map { $0.message.serialized() }.sorted { $0.lexicographicallyPrecedes($1) }
            let recorded = records.map(\.bytes).sorted { $0.lexicographicallyPrecedes($1) }
            #expect(written == recorded, "\(name): \(written.count) messages in the file, \(recorded.count) recorded")
            #expect(s.messages.allSatisfy { $0.transport.rawValue == transport })
            // Addresses: every message is between 127.0.0.1 and the serve port on one side.
            #expect(s.messages.allSatisfy { $0.source.port == port || $0.destination.port == port })
            let invites = s.messages.filter { $0.message.method == .invite }.count
            let byes = s.messages.filter { $0.message.method == .bye }.count
            #expect(invites == calls && byes == calls, "\(name)")

            // tshark opens it and finds the same SIP messages, one per frame.
            // Without tshark: checked with our reader only (a failure under CI).
            if TestPaths.requirement("tshark", available: Tshark.available) {
                let v = try await Tshark.view(of: path).get()
                #expect(v.messages == s.messages.count, "\(name): tshark \(v.messages), ours \(s.messages.count)")
                #expect(v.frames == s.messages.count)
                #expect(v.methods["INVITE"] == calls && v.methods["BYE"] == calls)
            }
        }
    }

    /// Records reported out of order (a stream write or a TLS handshake finishing after a later
    /// message) are written in timestamp order; one reported later than the window is not held.
    @Test func recordsAreWrittenInTimestampOrder() throws {
        let path = Self.tempPath("order")
        defer { _ = unlink(path) }
        let sink = try CaptureFileSink(path: path, reorderWindow: .milliseconds(100))
        let local = try SocketAddress(ip: "127.0.0.1", port: 5060), remote = try SocketAddress(ip: "127.0.0.1", port: 5070)
        func message(_ n: Int) -> [UInt8] {
            Array("OPTIONS sip:x@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bK\(n)\r\nFrom: <sip:a@127.0.0.1>;tag=1\r\nTo: <sip:x@127.0.0.1>\r\nCall-ID: order-\(n)\r\nCSeq: \(n) OPTIONS\r\nContent-Length: 0\r\n\r\n".utf8)
        }
        func record(_ n: Int, at ms: Int) {
            sink.record(SIPTrafficRecord(direction: .sent, transport: .udp, local: local, remote: remote, bytes: message(n), time: .milliseconds(1_000_000 + ms)))
        }
        record(2, at: 20)
        record(1, at: 10)   // stamped first, reported second
        record(4, at: 40)
        record(3, at: 30)
        record(5, at: 300)  // pushes 1-4 past the window: written, in order
        record(0, at: 0)    // later than the window: written at once, out of order
        record(6, at: 310)
        sink.close()
        let s = try CaptureSummary(path: path)
        #expect(s.fileError == nil)
        let order = s.messages.compactMap { $0.message.callID.flatMap { Int($0.dropFirst("order-".count)) } }
        #expect(order == [1, 2, 3, 4, 0, 5, 6], "\(order)")
    }

    @Test func unwritablePathIsATypedError() {
        #expect(throws: CaptureWriteError.self) { try CaptureFileSink(path: "/nonexistent-dir/x.pcapng") }
    }

    @Test func socketAddressesBecomeCaptureEndpoints() throws {
        let v4 = CaptureFileSink.endpoint(try SocketAddress(ip: "192.0.2.7", port: 5061))
        #expect(v4.address.bytes == [192, 0, 2, 7] && v4.port == 5061)
        let v6 = CaptureFileSink.endpoint(try SocketAddress(ip: "2001:db8::1", port: 5060))
        #expect(v6.description == "[2001:db8::1]:5060")
    }
}
