/// The RTCP transmission interval of RFC 3550 §6.3.1 and A.7, as pure functions.
public enum RTCPInterval {
    /// The fraction of the RTCP bandwidth given to senders (RFC 3550: 1/4).
    public static let senderBandwidthFraction = 0.25
    /// The fraction given to receivers (3/4).
    public static let receiverBandwidthFraction = 0.75
    /// e − 3/2, dividing the randomized interval to compensate for timer reconsideration.
    public static let compensation = 2.71828 - 1.5

    /// The deterministic interval `Td` in seconds (A.7 before randomization):
    /// `avgRTCPSize · n / rtcpBandwidth`, at least `minimumInterval` (halved when `initial`).
    ///
    /// - Parameters:
    ///   - members: the current estimate of session members (including us).
    ///   - senders: members that sent RTP since our second-to-last report.
    ///   - rtcpBandwidth: the RTCP bandwidth in octets per second (5% of the session bandwidth).
    ///   - weSent: whether we sent data since our second-to-last report.
    ///   - averageRTCPSize: the average compound RTCP packet size in octets (with lower layers).
    ///   - initial: true before our first RTCP packet.
    ///   - minimumInterval: `Tmin`, 5 s by default.
    public static func deterministicInterval(
        members: Int, senders: Int, rtcpBandwidth: Double, weSent: Bool, averageRTCPSize: Double,
        initial: Bool, minimumInterval: Double = 5
    ) -> Double {
        let minTime = initial ? minimumInterval / 2 : minimumInterval
        var bandwidth = rtcpBandwidth
        var n = members
        if Double(senders) <= Double(members) * senderBandwidthFraction {
            if weSent {
                bandwidth *= senderBandwidthFraction
                n = senders
            } else {
                bandwidth *= receiverBandwidthFraction
                n -= senders
            }
        }
        guard bandwidth > 0 else { return minTime }
        let t = averageRTCPSize * Double(n) / bandwidth
        return t < minTime ? minTime : t
    }

    /// The calculated interval `T` in seconds: `Td` times a factor drawn uniformly from
    /// [0.5, 1.5), divided by e − 3/2 (A.7).
    public static func interval<R: RandomNumberGenerator>(
        members: Int, senders: Int, rtcpBandwidth: Double, weSent: Bool, averageRTCPSize: Double,
        initial: Bool, minimumInterval: Double = 5, using rng: inout R
    ) -> Double {
        let td = deterministicInterval(
            members: members, senders: senders, rtcpBandwidth: rtcpBandwidth, weSent: weSent,
            averageRTCPSize: averageRTCPSize, initial: initial, minimumInterval: minimumInterval)
        return randomize(td, using: &rng)
    }

    /// `td · U[0.5, 1.5) / (e − 3/2)`.
    public static func randomize<R: RandomNumberGenerator>(_ td: Double, using rng: inout R) -> Double {
        td * Double.random(in: 0.5..<1.5, using: &rng) / compensation
    }

    /// The interval as a `Duration` (nanosecond precision).
    public static func duration(seconds: Double) -> Duration {
        .nanoseconds(Int64((seconds * 1e9).rounded()))
    }

    /// RFC 3550 §6.3.3: the running average of compound RTCP packet sizes,
    /// `avg = size/16 + 15/16 · avg`.
    public static func updatedAverageSize(_ average: Double, packetSize: Int) -> Double {
        Double(packetSize) / 16 + average * 15 / 16
    }
}
