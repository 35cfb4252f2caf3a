import Foundation
import Testing
import PacketCapture
import SwitchboardTestSupport
@testable import SwitchboardTools
@testable import CaptureAnalysis
import NetworkIO

/// Chromium (Debian package `chromium`, installed by scripts/test), run headless with a time
/// limit and a private profile.
enum Chromium {
    static let path: String? = ExternalTool.find(["/usr/bin/chromium", "/usr/bin/chromium-browser"])
    static var available: Bool { path != nil }

    static func run(_ page: String, _ extra: [String], dir: String) async -> ExternalTool.Run {
        await ExternalTool.run(path!, ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
                                 "--user-data-dir=\(dir)/profile", "--window-size=1400,1800"] + extra + ["file://\(page)"], timeout: 90)
    }
}

@Suite("HTML ladder")
struct HTMLLadderTests {
    /// What a page must not hold: anything that loads from elsewhere.
    static func externalReferences(_ html: String) -> [String] {
        var found: [String] = []
        for needle in ["http://", "https://", "src=", "href=", "@import", "//cdn", "xlink:"] where html.contains(needle) { found.append(needle) }
        // url(...) only to a fragment of this document (the arrow-head markers).
        var rest = html[...]
        while let r = rest.range(of: "url(") {
            if !rest[r.upperBound...].hasPrefix("#") { found.append("url(" + rest[r.upperBound...].prefix(20)) }
            rest = rest[r.upperBound...]
        }
        return found
    }

    static func count(_ needle: String, in s: String) -> Int { s.components(separatedBy: needle).count - 1 }

    @Test func messagesAndLabelsAreEscaped() {
        let a = CaptureEndpoint(address: IPAddress(bytes: [127, 0, 0, 1])!, port: 5060)
        let b = CaptureEndpoint(address: IPAddress(bytes: [127, 0, 0, 2])!, port: 5060)
        let t = CaptureTimestamp(seconds: 1, nanoseconds: 0)
        let arrow = CaptureAnalyzer.Arrow(time: t, source: a, destination: b, label: "<b>INVITE</b>", frameNumber: 1, retransmission: false,
                                          text: "INVITE sip:x SIP/2.0\r\nSubject: </pre><script>alert(1)</script> & \"q\"\r\n\r\n")
        let call = CaptureAnalyzer.Call(callID: "<id>", first: t, last: t, from: nil, to: nil, outcome: .noAnswer, setupTime: nil, answerTime: nil,
                                        duration: nil, messageCount: 1, retransmissions: 0, transactions: [], rtp: [], linked: [], arrows: [arrow])
        let html = HTMLLadder.render([call], title: "x<y>.pcap")
        #expect(!html.contains("<script>alert"))
        #expect(!html.contains("<b>INVITE"))
        #expect(html.contains("&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;q&quot;"))
        #expect(html.contains("Call-ID &lt;id&gt;"))
        #expect(html.contains("x&lt;y&gt;.pcap"))
        #expect(Self.count("<script>", in: html) == 1)
        #expect(Self.externalReferences(html).isEmpty)
    }

    @Test("escape: the five markup characters and NUL replaced, the rest kept")
    func escapeTable() {
        #expect(HTMLLadder.escape("a<b>&\"c'\0é\r\n") == "a&lt;b&gt;&amp;&quot;c&#39;\u{FFFD}é\r\n")
        #expect(HTMLLadder.escape("") == "")
    }

    @Test func corpusPageHasOneArrowPerMessageAndNoExternalResources() throws {
        guard CaptureCorpus.required() else { return }
        let all = CaptureCommand.run(path: CaptureCorpus.path("sip-capture/sip-tcp.pcap"), view: .html(nil))
        #expect(all.exitCode == 0)
        let html = all.html
        #expect(Self.count("<g class=\"arrow", in: html) == 30)
        #expect(Self.count("<pre class=\"message\"", in: html) == 30)
        #expect(Self.count("<section class=\"call\"", in: html) == 5)
        #expect(html.contains("INVITE sip:") && html.contains("SIP/2.0 180 Ringing"))
        #expect(Self.externalReferences(html).isEmpty, "\(Self.externalReferences(html))")
        #expect(all.text == "ladder of 5 calls, 30 arrows\n")

        let one = CaptureCommand.run(path: CaptureCorpus.path("sip-capture/sip-tcp.pcap"), view: .html("2-2550@127.0.0.1"))
        #expect(Self.count("<g class=\"arrow", in: one.html) == 6)
        let none = CaptureCommand.run(path: CaptureCorpus.path("sip-capture/sip-tcp.pcap"), view: .html("nope"))
        #expect(none.exitCode == 1)
    }

    /// The page renders in headless Chromium: a PNG of real size, and after its script ran, the
    /// DOM holds every arrow and the first message is shown.
    @Test(.timeLimit(.minutes(3)))
    func rendersInHeadlessChromium() async throws {
        guard CaptureCorpus.required(), TestPaths.requirement("chromium", available: Chromium.available) else { return }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ladder-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let page = dir + "/ladder.html"
        let report = CaptureCommand.run(path: CaptureCorpus.path("wireshark-samplecaptures/SIP_CALL_RTP_G711"), view: .html(nil))
        let arrows = report.analysis.calls.reduce(0) { $0 + $1.arrows.count }
        #expect(arrows == 14)
        #expect(Self.externalReferences(report.html).isEmpty, "\(Self.externalReferences(report.html))")
        #expect(ParseCommand.writeFile(page, Array(report.html.utf8)))

        let shot = await Chromium.run(page, ["--screenshot=\(dir)/ladder.png"], dir: dir)
        #expect(shot.ok, "chromium --screenshot: status \(shot.status), timed out \(shot.timedOut)")
        let png = try #require(FileManager.default.contents(atPath: dir + "/ladder.png"), "no screenshot")
        #expect(Array(png.prefix(8)) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        // IHDR: width and height as asked; a blank page compresses to a few hundred bytes.
        let width = png[16..<20].reduce(0) { $0 << 8 | Int($1) }, height = png[20..<24].reduce(0) { $0 << 8 | Int($1) }
        #expect(width == 1400 && height == 1800, "\(width)x\(height)")
        #expect(png.count > 20_000, "screenshot of \(png.count) bytes")

        let dom = await Chromium.run(page, ["--dump-dom"], dir: dir)
        #expect(dom.ok, "chromium --dump-dom: status \(dom.status), timed out \(dom.timedOut)")
        #expect(dom.output.contains("data-arrows=\"\(arrows)\""), "the page script did not count \(arrows) arrows")
        #expect(Self.count("<g class=\"arrow", in: dom.output) == arrows)
        // The script selected the first arrow and put its message in the detail panel.
        #expect(dom.output.contains("class=\"arrow selected\""))
        #expect(dom.output.range(of: "<pre id=\"detail\">INVITE sip:") != nil)
        // Each RTP stream's plots (jitter, loss, level over time) follow the ladder, in the page Chromium built.
        let streams = report.analysis.rtp?.streams ?? []
        #expect(streams.count >= 2 && streams.allSatisfy { !$0.timeline.isEmpty }, "\(streams.map(\.timeline.count))")
        #expect(Self.count("<figure class=\"stream\"", in: dom.output) == streams.count)
        #expect(Self.count("<svg class=\"plot\"", in: dom.output) == streams.count)
        #expect(Self.count("<polyline class=\"jitter\"", in: dom.output) >= streams.count)
        #expect(Self.count("<polyline class=\"level\"", in: dom.output) >= streams.count)
    }
}
