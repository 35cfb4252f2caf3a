/// The `<proto>` field of an `m=` line: slash-separated tokens such as
/// `RTP/AVP` or `UDP/TLS/RTP/SAVPF`. Unknown protocols are kept as written.
public struct TransportProtocol: SDPToken {
    /// The protocol as it appears on the wire.
    public var rawValue: String

    /// Wraps a protocol string.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// `RTP/AVP` (RFC 3551).
    public static let rtpAVP = TransportProtocol(rawValue: "RTP/AVP")
    /// `RTP/SAVP`: SRTP (RFC 3711), keyed for example with `a=crypto`.
    public static let rtpSAVP = TransportProtocol(rawValue: "RTP/SAVP")
    /// `RTP/AVPF`: RTP with RTCP feedback (RFC 4585).
    public static let rtpAVPF = TransportProtocol(rawValue: "RTP/AVPF")
    /// `RTP/SAVPF`: SRTP with RTCP feedback (RFC 5124).
    public static let rtpSAVPF = TransportProtocol(rawValue: "RTP/SAVPF")
    /// `UDP/TLS/RTP/SAVP`: DTLS-SRTP (RFC 5764).
    public static let udpTLSRTPSAVP = TransportProtocol(rawValue: "UDP/TLS/RTP/SAVP")
    /// `UDP/TLS/RTP/SAVPF`: DTLS-SRTP with feedback (RFC 5764), as used by WebRTC.
    public static let udpTLSRTPSAVPF = TransportProtocol(rawValue: "UDP/TLS/RTP/SAVPF")
    /// `udp`: an unspecified protocol over UDP.
    public static let udp = TransportProtocol(rawValue: "udp")
    /// `udptl`: T.38 fax over UDPTL.
    public static let udptl = TransportProtocol(rawValue: "udptl")

    /// The slash-separated parts, for example `["UDP", "TLS", "RTP", "SAVPF"]`.
    public var components: [Substring] {
        rawValue.split(separator: "/", omittingEmptySubsequences: false)
    }

    /// True when the protocol carries RTP, so that the formats are RTP payload types.
    public var isRTP: Bool {
        // On the bytes, component by component: no array of substrings for a question asked
        // for every format of every m= line.
        let bytes = rawValue.utf8
        var start = bytes.startIndex
        while true {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "/")) ?? bytes.endIndex
            if bytes[start..<end].elementsEqual("RTP".utf8) { return true }
            guard end < bytes.endIndex else { return false }
            start = bytes.index(after: end)
        }
    }

    /// True for the secure RTP profiles (`SAVP`, `SAVPF`).
    public var isSecureRTP: Bool {
        guard isRTP else { return false }
        let bytes = rawValue.utf8
        let last = bytes.lastIndex(of: UInt8(ascii: "/")).map { bytes[bytes.index(after: $0)...] } ?? bytes[...]
        return last.elementsEqual("SAVP".utf8) || last.elementsEqual("SAVPF".utf8)
    }
}
