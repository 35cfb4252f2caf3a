import Foundation
import Testing
import SIPMessage
import SIPTransport
import NetworkIO
@testable import SwitchboardTools

enum ToolPaths {
    static let repoRoot: String = {
        var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/")
    }()
    static func fixture(_ name: String) -> String { repoRoot + "/Fixtures/sip/" + name }
    static func temp(_ name: String, _ bytes: [UInt8]) throws -> String {
        let path = NSTemporaryDirectory() + "switchboard-tools-\(getpid())-" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }
}

@Suite("switchboard parse and frame")
struct ToolsTests {
    @Test func parseSummarizesEveryFixture() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: ToolPaths.repoRoot + "/Fixtures/sip").filter { $0.hasSuffix(".sip") }.sorted()
        let report = ParseCommand.run(paths: names.map(ToolPaths.fixture))
        #expect(report.allParsed)
        #expect(report.outcomes.count == names.count)
        #expect(report.outcomes.allSatisfy { $0.roundTrips == true })
        #expect(report.text.contains("INVITE sip:bob@127.0.0.1:5070"))
        #expect(report.text.contains("callID: 8c2f6d1e9b3a4c57"))
        #expect(report.text.contains("round-trip: ok"))
    }

    @Test func parseReportsErrorsWithOffsetAndRule() throws {
        let bad = try ToolPaths.temp("bad.sip", Array("INVITE sip:a@b SIP/2.0\r\nContent-Length: x\r\n\r\n".utf8))
        let report = ParseCommand.run(paths: [ToolPaths.fixture("prack.sip"), bad, "/nonexistent/x.sip"])
        #expect(!report.allParsed)
        #expect(report.outcomes[0].error == nil)
        #expect(report.outcomes[1].error?.rule == .contentLength)
        #expect(report.outcomes[1].error?.offset == 40)
        #expect(report.outcomes[2].readError != nil)
        #expect(report.text.contains("error: contentLength at byte 40"))
    }

    @Test func jsonIsValidAndComplete() throws {
        let bad = try ToolPaths.temp("bad2.sip", Array("SIP/2.0 999 Nope\r\n\r\n".utf8))
        let report = ParseCommand.run(paths: [ToolPaths.fixture("asterisk-200-ok.sip"), bad])
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(report.json.utf8)) as? [[String: Any]])
        #expect(parsed.count == 2)
        #expect(parsed[0]["ok"] as? Bool == true)
        let msg = try #require(parsed[0]["message"] as? [String: Any])
        #expect(msg["status"] as? Int == 200)
        #expect(msg["toTag"] as? String == "as4f2a6b1c")
        #expect(msg["branch"] as? String == "z9hG4bKPj0f8a1e4c-2d7b-4f3a-9e1c-5b6d7a8f9e0d")
        #expect(parsed[1]["ok"] as? Bool == false)
        let err = try #require(parsed[1]["error"] as? [String: Any])
        #expect(err["rule"] as? String == "statusCode")
        #expect(err["offset"] as? Int == 8)
    }

    @Test func validationCanBeSkipped() throws {
        let f = try ToolPaths.temp("noval.sip", Array("OPTIONS sip:a@b SIP/2.0\r\nCSeq: 1 INVITE\r\n\r\n".utf8))
        #expect(!ParseCommand.run(paths: [f]).allParsed)
        #expect(ParseCommand.run(paths: [f], validate: false).allParsed)
    }

    @Test func jsonEscapesControlCharacters() {
        #expect(JSONValue.string("a\"b\\c\n\u{1}").rendered() == "\"a\\\"b\\\\c\\n\\u0001\"")
        // Tab, CR and DEL as well; other text (multi-byte included) unchanged.
        #expect(JSONValue.string("\t\r\u{7F}é€").rendered() == "\"\\t\\r\\u007fé€\"")
        #expect(JSONValue.object([("k", .array([.int(1), .bool(true), .null]))]).rendered() == "{\n  \"k\": [\n    1,\n    true,\n    null\n  ]\n}")
    }

    @Test func frameCutsAStreamAcrossReads() throws {
        var stream: [UInt8] = Array("\r\n\r\n".utf8)
        for n in ["prack.sip", "asterisk-200-ok.sip", "bye-reason.sip"] {
            stream += try #require(FileManager.default.contents(atPath: ToolPaths.fixture(n))).map { $0 }
        }
        for chunk in [1, 100, 5000] {
            let r = FrameCommand.run(bytes: stream, chunkSize: chunk)
            #expect(r.messageCount == 3)
            #expect(r.error == nil)
            // A ping split across reads is seen as two pongs (see SIPStreamFramer's notes).
            #expect(r.lines.first == (chunk >= 4 ? "keep-alive ping (CRLFCRLF)" : "keep-alive pong (CRLF)"))
        }
        let broken = FrameCommand.run(bytes: stream + Array("garbage\r\n\r\n".utf8))
        #expect(broken.messageCount == 3)
        #expect(broken.error != nil)
        let resync = FrameCommand.run(bytes: Array("junk\r\n".utf8) + stream, mode: .resynchronizing)
        #expect(resync.messageCount == 3)
        #expect(resync.lines.contains { $0.hasPrefix("discarded 10 bytes") })
    }
}

@Suite("listen points")
struct ListenPointTests {
    @Test("a listen point's transport and address, for each transport")
    func transportAndAddress() throws {
        for (text, kind) in [("udp:127.0.0.1:5070", TransportKind.udp), ("tcp:127.0.0.1:5071", .tcp), ("tls:[::1]:5072", .tls)] {
            let point = try ListenSpec.parse(text)
            #expect(point.transport == kind)
            #expect(point.address == (try SocketAddress(String(text.dropFirst(4)))))
        }
    }
}
