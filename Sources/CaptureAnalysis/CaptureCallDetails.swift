import SIPMessage
import SDP
import PacketCapture
import NetworkIO

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension CaptureAnalyzer {
    /// A dialog of a call (RFC 3261 §12): the Call-ID with the tags of its two sides.
    public struct Dialog: Sendable, Hashable, CustomStringConvertible {
        /// Where a dialog stands in the capture.
        public enum State: String, Sendable, Hashable {
            /// Created by a provisional response (101–199) carrying a To tag.
            case early
            /// Created or confirmed by a 2xx.
            case confirmed
            /// Ended: a BYE in it; for an early dialog, a final non-2xx to its INVITE
            /// (RFC 3261 §12.3, §13.2.2.4); for a subscription, a NOTIFY with
            /// `Subscription-State: terminated` (RFC 6665 §4.1.3).
            case terminated
        }

        /// The tag of the side that sent the creating request (its From tag).
        public var localTag: String
        /// The tag of the side that answered it (the To tag of the creating response).
        public var remoteTag: String
        /// The state after the last message of the capture.
        public var state: State
        /// The creating transaction's method (`INVITE`, `SUBSCRIBE`, `REFER`).
        public var method: String
        /// The creating transaction's CSeq number.
        public var cseq: UInt32

        /// A dialog seen in a capture.
        public init(localTag: String, remoteTag: String, state: State, method: String, cseq: UInt32) {
            self.localTag = localTag
            self.remoteTag = remoteTag
            self.state = state
            self.method = method
            self.cseq = cseq
        }

        /// `a73kszlfl8/1410948204 confirmed (INVITE 1)`.
        public var description: String { "\(localTag)/\(remoteTag) \(state.rawValue) (\(method) \(cseq))" }
    }

    /// A media stream announced in SDP, with the RTP and RTCP packets the capture holds for it.
    public struct MediaStream: Sendable, Hashable, CustomStringConvertible {
        /// The media type (`audio`, `video` …).
        public var media: String
        /// The RTP address (the `c=` address) and port (the `m=` port).
        public var address: String
        /// The RTP port.
        public var port: UInt16
        /// The RTCP address: the RTP address, or the one an `a=rtcp:` attribute names.
        public var rtcpAddress: String
        /// The RTCP port: `a=rtcp:` (RFC 3605), else the RTP port with `a=rtcp-mux` (RFC 5761),
        /// else the RTP port + 1 (RFC 3550 §11).
        public var rtcpPort: UInt16
        /// Whether the SDP asked for RTP and RTCP on one port (`a=rtcp-mux`).
        public var rtcpMux: Bool
        /// Who sent the SDP.
        public var announcedBy: CaptureEndpoint
        /// UDP packets to or from the RTP address that classify as RTP (RFC 5761 §4: version
        /// 2, second byte outside 192–223).
        public var rtpPackets: Int
        /// UDP packets to or from the RTCP address that classify as RTCP (version 2, second
        /// byte 192–223).
        public var rtcpPackets: Int
        /// The payload formats the SDP lists (its `a=rtpmap` lines, and the static types it names
        /// without one).
        public var formats: [RTPPayloadFormat] = []
        /// The SDES keys the SDP's `a=crypto` lines give (RFC 4568): they protect what the
        /// announcing side sends.
        public var crypto: [CryptoAttribute] = []
        /// Whether the `m=` line's profile is secure RTP (`RTP/SAVP`, `RTP/SAVPF`).
        public var secure: Bool = false

        /// `audio 10.0.0.1:4000 rtcp 10.0.0.1:4001 (120 RTP, 3 RTCP packets)`.
        public var description: String {
            "\(media) \(Self.show(address, port)) rtcp \(Self.show(rtcpAddress, rtcpPort))\(rtcpMux ? " mux" : "")"
                + " (\(rtpPackets) RTP, \(rtcpPackets) RTCP packets)"
        }

        static func show(_ address: String, _ port: UInt16) -> String { "\(address.contains(":") ? "[\(address)]" : address):\(port)" }

        /// Whether two announcements name the same stream (same media, addresses, ports, announcer).
        func sameStream(as o: MediaStream) -> Bool {
            media == o.media && address == o.address && port == o.port && rtcpAddress == o.rtcpAddress && rtcpPort == o.rtcpPort
                && rtcpMux == o.rtcpMux && announcedBy == o.announcedBy
        }
    }
}

/// Dialog tracking for one call (only when call records or ladders are kept).
struct DialogTracker: Sendable {
    var dialogs: [CaptureAnalyzer.Dialog] = []

    private static let creating: [SIPMethod] = [.invite, .subscribe, .refer]

    private func find(_ a: String, _ b: String) -> Int? {
        dialogs.firstIndex { ($0.localTag == a && $0.remoteTag == b) || ($0.localTag == b && $0.remoteTag == a) }
    }

    /// Takes in a message of the call (retransmissions excluded).
    mutating func note(_ m: SIPMessage) {
        let cseq = try? m.cseq()
        let fromTag = m.fromTag, toTag = m.toTag
        if let code = m.statusCode, let cseq {
            if Self.creating.contains(cseq.method), (101...299).contains(code), let fromTag, let toTag {
                if let i = find(fromTag, toTag) {
                    if code >= 200, dialogs[i].state == .early { dialogs[i].state = .confirmed }
                } else {
                    dialogs.append(.init(localTag: fromTag, remoteTag: toTag, state: code >= 200 ? .confirmed : .early,
                                         method: cseq.method.token, cseq: cseq.sequence))
                }
            } else if cseq.method == .invite, code >= 300 {
                // A failure ends the INVITE's early dialogs (RFC 3261 §13.2.2.4 and §12.3).
                for i in dialogs.indices where dialogs[i].state == .early && dialogs[i].method == "INVITE" && dialogs[i].cseq == cseq.sequence {
                    dialogs[i].state = .terminated
                }
            }
            return
        }
        guard let method = m.method, let fromTag, let toTag, let i = find(fromTag, toTag) else { return }
        if method == .bye {
            dialogs[i].state = .terminated
        } else if method == .notify, dialogs[i].method != "INVITE",
                  let state = m.firstValueBytes(.subscriptionState),
                  String(decoding: state, as: UTF8.self).trimmingWhiteSpace().lowercased().hasPrefix("terminated") {
            dialogs[i].state = .terminated
        }
    }
}

extension String {
    fileprivate func trimmingWhiteSpace() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        return String(s)
    }
}

/// RTP and RTCP packet counts for the streams announced in the calls' SDP: a UDP packet to or
/// from an announced address is counted in that stream when it classifies as the stream's kind.
struct MediaCounter: Sendable {
    /// Every stream announced, in order (a call record lists positions here).
    var streams: [CaptureAnalyzer.MediaStream] = []
    /// Endpoint → the streams whose RTP (`rtcp == false`) or RTCP address it is; the latest
    /// announcement of an address comes last.
    private var byEndpoint: [CaptureEndpoint: [(stream: Int, rtcp: Bool)]] = [:]

    /// Registers a stream; returns its position.
    mutating func add(_ s: CaptureAnalyzer.MediaStream) -> Int {
        let i = streams.count
        streams.append(s)
        if let a = Self.ipAddress(s.address) { byEndpoint[CaptureEndpoint(address: a, port: s.port), default: []].append((i, false)) }
        if let a = Self.ipAddress(s.rtcpAddress) { byEndpoint[CaptureEndpoint(address: a, port: s.rtcpPort), default: []].append((i, true)) }
        return i
    }

    /// Counts one datagram for every stream (once each) whose address it is sent to or from.
    mutating func count(_ d: CapturedDatagram) {
        guard !byEndpoint.isEmpty else { return }
        let kind = d.kind
        guard kind != .other else { return }
        var done: [Int] = []
        for e in [d.source, d.destination] {
            guard let refs = byEndpoint[e] else { continue }
            // The latest announcement of the address (a later call may reuse a port).
            for ref in refs.reversed() {
                let s = streams[ref.stream]
                let matches = kind == .rtp ? !ref.rtcp : (ref.rtcp || (s.rtcpMux && !ref.rtcp))
                guard matches, !done.contains(ref.stream) else { continue }
                done.append(ref.stream)
                if kind == .rtp { streams[ref.stream].rtpPackets += 1 } else { streams[ref.stream].rtcpPackets += 1 }
                break
            }
        }
    }

    /// A textual IPv4 or IPv6 address as an ``IPAddress``.
    static func ipAddress(_ text: String) -> IPAddress? {
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return IPAddress(bytes: withUnsafeBytes(of: &v4) { Array($0) })
        }
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return IPAddress(bytes: withUnsafeBytes(of: &v6) { Array($0) })
        }
        return nil
    }

    /// The streams an SDP body announces (ports 0 skipped).
    static func streams(in sdp: SessionDescription, announcedBy source: CaptureEndpoint) -> [CaptureAnalyzer.MediaStream] {
        var out: [CaptureAnalyzer.MediaStream] = []
        for media in sdp.media where media.port != 0 {
            guard let c = sdp.connection(for: media) else { continue }
            let mux = media.isRTCPMuxed
            let attribute = media.typedAttributes(RTCPAttribute.self).first
            let rtcpPort = attribute?.port ?? (mux ? media.port : media.port &+ 1)
            let rtcpAddress = attribute?.connection?.address ?? c.address
            var formats: [RTPPayloadFormat] = []
            let maps = media.typedAttributes(RTPMap.self)
            for pt in media.payloadTypes {
                if let m = maps.first(where: { $0.payloadType == pt }) {
                    formats.append(RTPPayloadFormat(payloadType: pt, name: m.encodingName, clockRate: Int(m.clockRate), channels: Int(m.channels ?? 1)))
                } else if let f = RTPPayloadFormat.staticFormat(pt) {
                    formats.append(f)
                }
            }
            out.append(.init(media: media.media.rawValue, address: c.address, port: media.port, rtcpAddress: rtcpAddress, rtcpPort: rtcpPort,
                             rtcpMux: mux, announcedBy: source, rtpPackets: 0, rtcpPackets: 0, formats: formats,
                             crypto: media.cryptos, secure: media.proto.isSecureRTP))
        }
        return out
    }
}
