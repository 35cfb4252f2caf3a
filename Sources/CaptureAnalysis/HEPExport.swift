import NetworkIO
import PacketCapture
import SDP
import SIPMessage

/// A capture's SIP messages and RTCP packets as HEP version 3 packets, in capture order, for a
/// collector (Homer) to file: `switchboard capture FILE --hep udp:HOST:PORT`.
///
/// Each SIP message keeps its addresses, transport and capture time, with its Call-ID as the
/// correlation id. An RTCP packet (a UDP datagram of version 2 with a packet type 192–223) is
/// filed with the call whose SDP named its source or destination (the RTP port or the one
/// above it, `a=rtcp` aside), so the collector shows the reports with the call; an RTCP packet
/// no SDP explains goes without a correlation id. RTP itself is not exported (collectors take
/// the reports, not the audio).
public enum HEPExport {
    /// What the packets carry besides the capture's own data.
    public struct Options: Sendable {
        /// The capture agent id written in each packet.
        public var agentID: UInt32
        /// A key for the collector to check (nil: none).
        public var authKey: String?
        /// Whether RTCP packets are exported too.
        public var includeRTCP: Bool

        public init(agentID: UInt32 = 2001, authKey: String? = nil, includeRTCP: Bool = true) {
            self.agentID = agentID
            self.authKey = authKey
            self.includeRTCP = includeRTCP
        }
    }

    /// What was exported.
    public struct Summary: Sendable, Hashable {
        /// SIP messages handed over.
        public var sip = 0
        /// RTCP packets handed over…
        public var rtcp = 0
        /// …of which this many were filed with a call.
        public var rtcpCorrelated = 0
        /// Messages left out: their packet would be over 65,535 octets.
        public var tooLarge = 0
    }

    /// Reads the capture at `path` and hands each packet to `send`, in capture order.
    /// - Throws: ``CaptureFileError`` when the file cannot be read (what was sent before stays sent).
    public static func export(path: String, options: Options = Options(), _ send: (HEPPacket) -> Void) throws(CaptureFileError) -> Summary {
        let reader = try SIPCaptureReader(path: path, datagrams: options.includeRTCP, payloads: options.includeRTCP)
        var summary = Summary()
        // Media address:port → the Call-ID of the SDP that named it.
        var media: [CaptureEndpoint: String] = [:]
        var events: [CaptureEvent] = []
        while try reader.nextEvents(into: &events) {
            for event in events {
                switch event {
                case .message(let m):
                    let callID = m.message.callID
                    if let callID, !m.message.body.isEmpty { learnMedia(of: m.message, callID: callID, into: &media) }
                    let packet = HEPPacket(source: address(m.source), destination: address(m.destination), ipProtocol: m.transport == .tcp ? .tcp : .udp,
                                           time: time(m.timestamp), payloadType: .sip, agentID: options.agentID, authKey: options.authKey,
                                           correlationID: callID, payload: m.message.serialized())
                    if fits(packet) { send(packet); summary.sip += 1 } else { summary.tooLarge += 1 }
                case .datagram(let d) where d.kind == .rtcp:
                    let callID = media[d.destination] ?? media[d.source]
                    let packet = HEPPacket(source: address(d.source), destination: address(d.destination), ipProtocol: .udp, time: time(d.timestamp),
                                           payloadType: .rtcp, agentID: options.agentID, authKey: options.authKey, correlationID: callID,
                                           payload: Array(d.payload))
                    if fits(packet) {
                        send(packet)
                        summary.rtcp += 1
                        if callID != nil { summary.rtcpCorrelated += 1 }
                    } else {
                        summary.tooLarge += 1
                    }
                default:
                    break
                }
            }
        }
        return summary
    }

    /// Notes the RTP and RTCP addresses an SDP body names for its call.
    static func learnMedia(of message: SIPMessage, callID: String, into media: inout [CaptureEndpoint: String]) {
        guard let sdp = try? SessionDescription.parse(message.body) else { return }
        for m in sdp.media where m.port != 0 {
            guard let text = (m.connections.first ?? sdp.connection)?.address, let ip = try? SocketAddress(ip: text, port: m.port).ip else { continue }
            media[CaptureEndpoint(address: ip, port: m.port)] = callID
            if m.port < UInt16.max { media[CaptureEndpoint(address: ip, port: m.port + 1)] = callID }
        }
    }

    static func address(_ e: CaptureEndpoint) -> SocketAddress { SocketAddress(e.address, port: e.port) }

    static func time(_ t: CaptureTimestamp) -> Duration { .seconds(t.seconds) + .nanoseconds(Int64(t.nanoseconds)) }

    /// Whether the packet is within HEP's 16-bit length (its addresses are of one family, as a capture's are).
    static func fits(_ p: HEPPacket) -> Bool { p.encodedSize <= HEPPacket.maximumSize }
}
