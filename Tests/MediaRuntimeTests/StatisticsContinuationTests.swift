import Testing
import Media
@testable import MediaRuntime

/// A call's media moved to a new session (a network change): its statistics go on from the
/// earlier session's.
@Suite struct StatisticsContinuationTests {
    private func stats(sent: UInt64, received: UInt64, lost: Int64, jitterMs: Int, codec: String, digits: String,
                       lateMax: Int, rtcp: UInt64) -> MediaSessionStatistics {
        MediaSessionStatistics(
            call: CallStatistics(sent: .init(packets: sent, bytes: sent * 160), received: .init(packets: received, bytes: received * 160),
                                 packetsLost: lost, fractionLost: Double(lost) / 100, jitter: .milliseconds(jitterMs), codec: codec),
            refused: 1, srtpDropped: 2, secure: false, rtcpSent: rtcp, rtcpReceived: rtcp + 1, digitsReceived: digits,
            sendLatenessP99: .milliseconds(lateMax / 2), sendLatenessMax: .milliseconds(lateMax))
    }

    @Test func countsAddUpAndThePresentIsTheNewSessions() {
        let earlier = stats(sent: 500, received: 480, lost: 20, jitterMs: 30, codec: "PCMU/8000", digits: "12", lateMax: 9, rtcp: 2)
        let now = stats(sent: 100, received: 99, lost: 1, jitterMs: 4, codec: "PCMA/8000", digits: "#", lateMax: 3, rtcp: 1)
        let c = now.continuing(earlier)
        #expect(c.call.sent.packets == 600 && c.call.sent.bytes == 600 * 160)
        #expect(c.call.received.packets == 579 && c.call.received.bytes == 579 * 160)
        #expect(c.call.packetsLost == 21)
        #expect(c.refused == 2 && c.srtpDropped == 4 && c.rtcpSent == 3 && c.rtcpReceived == 5)
        #expect(c.digitsReceived == "12#")
        #expect(c.sendLatenessMax == .milliseconds(9))
        // What describes the present stays the new session's.
        #expect(c.call.codec == "PCMA/8000" && c.call.jitter == .milliseconds(4) && c.call.fractionLost == 0.01)
        #expect(c.sendLatenessP99 == .milliseconds(1))
    }
}
