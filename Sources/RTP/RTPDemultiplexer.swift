/// What the first bytes of a datagram on an RTP port hold.
public enum RTPDatagramKind: Sendable, Hashable {
    /// An RTP packet.
    case rtp
    /// An RTCP packet (payload type 64–95 with the marker bit, i.e. second byte 192–223).
    case rtcp
    /// Neither (not version 2, or too short): STUN, DTLS or garbage.
    case other
}

/// RFC 5761 §4 demultiplexing of RTP and RTCP on one port (rtcp-mux).
public enum RTPDemultiplexer {
    /// Classifies a datagram by its first two bytes: version 2, and a second byte in 192–223
    /// (RTCP types 192–223) means RTCP; any other second byte means RTP.
    public static func classify(_ bytes: some Collection<UInt8>) -> RTPDatagramKind {
        var it = bytes.makeIterator()
        guard let b0 = it.next(), let b1 = it.next(), b0 >> 6 == 2 else { return .other }
        return (192...223).contains(b1) ? .rtcp : .rtp
    }
}
