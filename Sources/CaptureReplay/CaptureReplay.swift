import SIPMessage
import SIPTransport
import PacketCapture
import NetworkIO
import CaptureAnalysis
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a captured call's side is replayed against a live device.
public struct CaptureReplayOptions: Sendable {
    /// The device: its SIP URI, with an IP address for host (the port defaults to 5060); the
    /// Request-URI and To of the replayed call's first request.
    public var target: SIPURI
    /// Our address (port 0: any; for TCP and TLS the listener's, the device's connection to us
    /// reused for its requests); `nil`: the address the system routes to the device from, any
    /// port. The callee's side needs one with a port: the device calls it.
    public var local: SocketAddress?
    /// The transport to the device; `nil`: the target's `transport` parameter (`sips:` is TLS),
    /// UDP when it has none. Over TCP and TLS nothing is retransmitted (RFC 3261 §17.1.1.2,
    /// §17.1.2.2: the timers A and E run over unreliable transports only; the 2xx of the
    /// callee's side neither) and the transactions still end at 64·T1.
    public var transport: TransportKind?
    /// TLS settings: the certificate the callee's side listens with (the device connects to
    /// it) and how the device's certificate is checked when the caller's side connects
    /// (``TLSConfiguration/trustedCertificates``, ``TLSConfiguration/verifyPeer``); also the
    /// connection settings for TCP.
    public var tls: TLSConfiguration = .init()
    /// RFC 3261 T1 (retransmission start, 64·T1 the transaction timeout).
    public var t1: Duration = .milliseconds(500)
    /// RFC 3261 T2 (the longest non-INVITE retransmission interval).
    public var t2: Duration = .seconds(4)
    /// How long a request the capture had from the other party (a BYE, a re-INVITE) is waited for.
    public var requestTimeout: Duration = .seconds(10)
    /// The callee's side: how long the device's INVITE is waited for (at ``local``).
    public var callWait: Duration = .seconds(30)
    /// Pauses between the party's messages are replayed as captured, up to this long.
    public var maxPause: Duration = .seconds(10)
    /// After the last step, how long late messages (retransmissions, extra requests) are awaited.
    public var linger: Duration = .milliseconds(500)
    /// Where each message sent and received is logged (`debug`); silent by default.
    public var logger: Logger = .disabled

    /// Options replaying towards `target`.
    public init(target: SIPURI) { self.target = target }
}

/// Why a replay could not run.
public enum CaptureReplayError: Error, Sendable, CustomStringConvertible {
    /// The call or party cannot be taken from the capture.
    case side(CaptureSideError)
    /// The target URI's host is not an IP address (the replay resolves no names).
    case targetNotAnAddress(String)
    /// The party neither starts the call nor answers its INVITE.
    case partyDoesNotStart(String)
    /// The callee's side is replayed without an address (IP and port) for the device to call.
    case listenAddressNeeded
    /// The socket could not be opened.
    case socket(String)
    /// The target names a transport the replay does not speak (`transport=sctp`).
    case unsupportedTransport(String)
    /// The callee's side over TLS listens without a certificate.
    case certificateNeeded

    public var description: String {
        switch self {
        case .side(let e): return "\(e)"
        case .targetNotAnAddress(let s): return "--to \(s): the host must be an IP address"
        case .partyDoesNotStart(let s): return "\(s) neither sends the call's first request nor answers its INVITE: there is no side of it to replay"
        case .listenAddressNeeded: return "the callee's side waits for the device to call: give the address to listen on (--listen IP:PORT, a port other than 0)"
        case .socket(let s): return "socket: \(s)"
        case .unsupportedTransport(let s): return "transport \(s) is not supported (udp, tcp, tls)"
        case .certificateNeeded: return "the callee's side over TLS is called by the device: give the certificate and key to listen with (--tls-cert, --tls-key)"
        }
    }
}

/// One party's side of a captured call re-sent to a live device over UDP, TCP or TLS (``run(_:party:options:)``):
/// fresh Call-ID, tags, branches, CSeq numbers, Contact and SDP addresses, acting as a UA
/// (retransmissions on RFC 3261's timers, the ACK of a 2xx built from the live dialog, the ACK
/// of a non-2xx by the transaction), and the device's answers matched to the captured ones.
///
/// The caller's side calls the device. The callee's side waits at ``CaptureReplayOptions/local``
/// for the device to call (the user makes it dial that address), takes the Call-ID, tags,
/// Contact and Record-Route of its INVITE, and answers as the capture did (its 2xx retransmitted
/// until the ACK), sending the callee's own requests (a BYE) in that dialog; the device's INVITE
/// counts as "step 0", so a call that never comes is a difference too.
public enum CaptureReplay {
    /// What differs between the capture and the live answers.
    public struct Difference: Sendable, Hashable, CustomStringConvertible {
        /// The kind of difference.
        public enum Kind: String, Sendable, Hashable {
            /// A final response with another status code than captured.
            case statusDiffers
            /// A message the capture had from the other party that did not come.
            case missing
            /// A message from the device the capture did not have.
            case extra
            /// A header the captured message had and the live one lacks.
            case headerMissing
            /// A step of the party that could not be sent (what it answers or builds on did not come).
            case notSent
        }
        /// The kind.
        public var kind: Kind
        /// The step (from 1) of the party's message the difference follows.
        public var step: Int
        /// The captured message (`200 INVITE`, `BYE`), if any.
        public var captured: String?
        /// The live message, if any.
        public var live: String?
        /// The header, for ``Kind/headerMissing``.
        public var header: String?

        /// A sentence.
        public var description: String {
            switch kind {
            case .statusDiffers: return "step \(step): the device answered \(live ?? "?") where the capture has \(captured ?? "?")"
            case .missing: return "step \(step): \(captured ?? "?") did not come (the capture has it)"
            case .extra: return "step \(step): the device sent \(live ?? "?"), which the capture does not have"
            case .headerMissing: return "step \(step): \(live ?? "?") has no \(header ?? "?") header (the captured \(captured ?? "?") has one)"
            case .notSent: return "step \(step): \(captured ?? "?") not sent (what it answers did not come)"
            }
        }
    }

    /// One message of the party and the answers to it.
    public struct Step: Sendable {
        /// The party's captured message (`INVITE`, `ACK`, `200 BYE`).
        public var sent: String
        /// Whether it was sent live.
        public var wasSent: Bool
        /// The captured messages of the other party that followed it, in order.
        public var captured: [String]
        /// The live messages of the device that followed it, in order (retransmissions left out).
        public var live: [String]
    }

    /// The outcome of a replay.
    public struct Report: Sendable {
        /// The captured call's Call-ID.
        public var capturedCallID: String
        /// The replayed call's fresh Call-ID.
        public var callID: String
        /// The party replayed (as captured).
        public var party: CaptureEndpoint
        /// The device.
        public var device: SocketAddress
        /// Our address.
        public var local: SocketAddress
        /// The party's messages in order, with the answers.
        public var steps: [Step]
        /// Every difference found, in order.
        public var differences: [Difference]
        /// Datagrams sent, retransmissions included (over TCP and TLS: messages sent).
        public var datagramsSent: Int
        /// The transport the replay used.
        public var transport: TransportKind
    }

    /// The headers compared: when a captured message of the other party has one and its live
    /// counterpart does not, that is a ``Difference/Kind/headerMissing``.
    public static let comparedHeaders = ["contact", "record-route", "require", "rseq", "content-type", "session-expires", "allow", "supported"]

    /// Replays `party`'s side of `call` against `options.target`.
    /// - Throws: ``CaptureReplayError``.
    public static func run(_ call: CapturedCall, party: CaptureParty, options: CaptureReplayOptions) async throws(CaptureReplayError) -> Report {
        let me: CaptureEndpoint
        do { me = try call.endpoint(of: party) } catch { throw .side(error) }
        let relevant = call.messages.filter { $0.source == me || $0.destination == me }
        guard let first = relevant.first else { throw .partyDoesNotStart(me.description) }
        let starts = first.source == me && first.message.isRequest
        let answers = first.destination == me && first.message.method == .invite && first.message.toTag == nil
            && relevant.contains { $0.source == me }
        guard starts || answers else { throw .partyDoesNotStart(me.description) }
        if answers { guard let l = options.local, l.port != 0 else { throw .listenAddressNeeded } }
        let kind = try transport(of: options)
        if answers && kind == .tls && (options.tls.certificateChain == nil || options.tls.privateKey == nil) { throw .certificateNeeded }
        let host = options.target.host
        guard case let h = host.description.trimmingBrackets, let ip = IPAddress(h) else { throw .targetNotAnAddress(options.target.description) }
        let device = SocketAddress(ip, port: options.target.port ?? kind.defaultPort)
        let bindTo: SocketAddress
        if let l = options.local { bindTo = l } else { bindTo = try sourceAddress(towards: device) }
        let engine = try Engine(call: call, me: me, relevant: relevant, device: device, bindTo: bindTo, kind: kind, options: options)
        defer { engine.close() }
        await engine.run()
        return engine.report()
    }

    /// The transport of the replay: the option, else the target's `transport` parameter
    /// (`sips:` is TLS), else UDP.
    static func transport(of options: CaptureReplayOptions) throws(CaptureReplayError) -> TransportKind {
        if let t = options.transport { return t }
        if let name = options.target.transport {
            guard let t = TransportKind(rawValue: name) else { throw .unsupportedTransport(name) }
            return t
        }
        return options.target.secure ? .tls : .udp
    }

    /// The local address the system would send to `device` from (a connected UDP socket's name), port 0.
    static func sourceAddress(towards device: SocketAddress) throws(CaptureReplayError) -> SocketAddress {
        let fd = socket(device.family, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw .socket("socket: errno \(errno)") }
        defer { close(fd) }
        let ok = device.withSockaddr { connect(fd, $0, $1) } == 0
        guard ok else { throw .socket("no route to \(device): errno \(errno)") }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        } == 0
        guard named, let a = SocketAddress(storage: storage, length: length) else { throw .socket("getsockname: errno \(errno)") }
        return a.withPort(0)
    }
}

extension String {
    var trimmingBrackets: String { hasPrefix("[") && hasSuffix("]") ? String(dropFirst().dropLast()) : self }
}

/// Messages received on the replay's socket, and connections closed (TCP, TLS), taken by the
/// engine as it polls.
final class Inbox: Sendable {
    let queue = Mutex<[InboundMessage]>([])
    let closed = Mutex<[ConnectionID]>([])
    func take() -> [InboundMessage] { queue.withLock { q in defer { q.removeAll() }; return q } }
    func takeClosed() -> [ConnectionID] { closed.withLock { q in defer { q.removeAll() }; return q } }
}
