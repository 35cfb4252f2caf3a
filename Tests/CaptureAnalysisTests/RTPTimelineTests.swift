import NetworkIO
import PacketCapture
import Testing

@testable import CaptureAnalysis

/// Per-stream timelines (jitter, loss, level per interval) and their plots in the HTML page.
struct RTPTimelineTests {
    typealias T = RTPStreamAnalyzerTests

    /// Three seconds of 20 ms PCMU: second 0 loud, second 1 missing five packets, second 2
    /// silent with one packet 30 ms late.
    static func threeSeconds() -> RTPStreamAnalyzer.Stream? {
        var r = RTPStreamAnalyzer(timelines: true)
        r.announce(T.media(T.b), callID: "c1")
        for n in 0..<150 where !(60..<65).contains(n) {
            var p = T.P(seq: UInt16(100 + n), ts: UInt32(1000 + n * 160), ms: Double(n * 20))
            if n >= 100 { p.payload = [UInt8](repeating: 0xFF, count: 160) }  // µ-law 0xFF: zero
            if n == 120 { p.ms += 30 }
            r.add(T.datagram(T.bytes(p), ms: p.ms, frame: n + 1))
        }
        r.finish()
        return r.streams.first
    }

    @Test func bucketsCountPacketsLossJitterAndLevelPerSecond() throws {
        let s = try #require(Self.threeSeconds())
        #expect(s.timeline.count == 3)
        #expect(s.timeline.map(\.packets) == [50, 45, 50])
        #expect(s.timeline.map(\.lost) == [0, 5, 0])
        #expect(s.timeline.map(\.start) == [0, 1, 2] && s.timeline.allSatisfy { $0.length == 1 })
        #expect(abs(s.timeline[1].lossPercent - 10) < 1e-9)
        // Regular arrivals: no jitter; the late packet raises it in second 2 (30 ms / 16 at least).
        #expect(s.timeline[0].maxJitter == 0 && s.timeline[1].maxJitter == 0)
        #expect((s.timeline[2].maxJitter ?? 0) >= 30.0 / 16, "\(String(describing: s.timeline[2].maxJitter))")
        // µ-law 0x00 is −32124 of 32768: −0.17 dBov; the silent second is at the floor.
        let loud = try #require(s.timeline[0].level)
        #expect(abs(loud - -0.1724) < 0.01, "\(loud)")
        #expect(s.timeline[2].level == -100)
        #expect(s.timeline.reduce(0) { $0 + $1.packets } == s.packets)
    }

    @Test func longStreamsMergeBucketsToStayBounded() throws {
        var r = RTPStreamAnalyzer(timelines: true)
        r.announce(T.media(T.b), callID: "c1")
        for n in 0..<1301 {
            let p = T.P(seq: UInt16(n), ts: UInt32(n * 8000), ms: Double(n * 1000))
            r.add(T.datagram(T.bytes(p), ms: p.ms, frame: n + 1))
        }
        r.finish()
        let s = try #require(r.streams.first)
        #expect(s.timeline.count <= RTPStreamAnalyzer.maxTimelineBuckets)
        #expect(s.timeline.allSatisfy { $0.length == 4 }, "\(Set(s.timeline.map(\.length)))")
        #expect(s.timeline.count == 326)
        #expect(s.timeline.reduce(0) { $0 + $1.packets } == 1301)
        #expect(s.timeline.enumerated().allSatisfy { $0.element.start == Double($0.offset * 4) })
    }

    @Test func withoutTimelinesNothingIsKept() {
        let r = T.analyze(T.regular(100))
        #expect(r.streams.first?.timeline.isEmpty == true)
    }

    @Test func thePlotsDrawEachPanel() throws {
        let s = try #require(Self.threeSeconds())
        let html = HTMLLadder.render([], title: "plots", streams: [s])
        #expect(html.contains("<figure class=\"stream\" data-stream=\"0x12345678\">"))
        #expect(html.contains("RTP streams of no call drawn"))
        func count(_ needle: String) -> Int { html.ranges(of: needle).count }
        #expect(count("<svg class=\"plot\"") == 1)
        // One loss bar (second 1), one jitter line and one level line over the three seconds.
        #expect(count("<rect class=\"loss\"") == 1)
        #expect(count("<polyline class=\"jitter\"") == 1 && count("<polyline class=\"level\"") == 1)
        #expect(html.contains("1.0 s: 5 lost (10.0%)"))
        // Level: second 0 near the top of its panel (−0.17 dBov), second 2 at its bottom (−100).
        let level = try #require(html.firstRange(of: "<polyline class=\"level\" points=\""))
        let points = html[level.upperBound...].prefix { $0 != "\"" }.split(separator: " ").map { $0.split(separator: ",").compactMap { Double($0) } }
        #expect(points.count == 3)
        #expect(points[0][1] < points[2][1], "\(points)")
    }
}
