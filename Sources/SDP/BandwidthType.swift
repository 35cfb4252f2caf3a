/// The `<bwtype>` of a `b=` line. Unknown types are kept as written.
public struct BandwidthType: SDPToken {
    /// The token as it appears on the wire, for example `AS`.
    public var rawValue: String

    /// Wraps a bandwidth type token.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// `CT`: conference total, in kilobits per second (RFC 8866).
    public static let conferenceTotal = BandwidthType(rawValue: "CT")
    /// `AS`: application specific maximum, in kilobits per second (RFC 8866).
    public static let applicationSpecific = BandwidthType(rawValue: "AS")
    /// `TIAS`: transport independent application specific maximum, in bits per second (RFC 3890).
    public static let transportIndependent = BandwidthType(rawValue: "TIAS")
    /// `RS`: RTCP bandwidth allocated to active senders, in bits per second (RFC 3556).
    public static let rtcpSenders = BandwidthType(rawValue: "RS")
    /// `RR`: RTCP bandwidth allocated to other participants, in bits per second (RFC 3556).
    public static let rtcpReceivers = BandwidthType(rawValue: "RR")
}
