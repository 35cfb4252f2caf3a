import CSocket
import NetworkIO
import PacketCapture
import SIPMessage
import SIPRuntime
import SIPTransport
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A ``SIPTrafficSink`` that mirrors an endpoint's traffic to a HEP collector (Homer's
/// heplify-server, Kamailio's sipcapture, anything that reads HEP version 3 over UDP):
/// `switchboard serve|call|answer --hep udp:HOST:PORT`, or set it as the endpoint's `capture`.
///
/// Each message becomes one ``HEPPacket`` (its addresses, transport, wall-clock time, the
/// Call-ID as correlation id) sent in one datagram from a socket of its own. The send never
/// blocks the thread that reports the message (the transport's): when the socket's buffer is
/// full the packet is dropped and counted, as a mirror must not slow the calls it watches.
public final class HEPTrafficSink: SIPTrafficSink {
    /// What was sent and what was lost.
    public struct Statistics: Sendable, Hashable {
        /// Packets handed to the kernel.
        public var sent = 0
        /// Packets dropped: the send buffer was full, or the send failed.
        public var dropped = 0
        /// Messages not sent because their packet would be over 65,535 octets.
        public var tooLarge = 0
    }

    /// Where the packets go.
    public let collector: SocketAddress
    /// The capture agent id written in each packet.
    public let agentID: UInt32
    /// The key written in each packet for the collector to check (nil: none).
    public let authKey: String?
    private let fd: Int32
    private let blocking: Bool
    private let stats = Mutex(Statistics())
    private let closed = Atomic<Bool>(false)

    /// Opens a UDP socket towards `collector`. With `blocking`, a send waits for room in the
    /// socket's buffer instead of dropping (for exporting a file, not for mirroring live traffic).
    /// - Throws: ``TransportError`` when no socket can be made.
    public init(collector: SocketAddress, agentID: UInt32 = 2001, authKey: String? = nil, blocking: Bool = false) throws(TransportError) {
        self.collector = collector
        self.agentID = agentID
        self.authKey = authKey
        self.blocking = blocking
        let fd = cs_socket(collector.ip.isIPv6 ? AF_INET6 : AF_INET, CS_KIND_UDP, blocking ? 0 : 1)
        guard fd >= 0 else { throw .system(SystemCallError.current("socket")) }
        self.fd = fd
    }

    deinit { close() }

    /// What was sent so far.
    public var statistics: Statistics { stats.withLock { $0 } }

    /// Closes the socket; later records are dropped.
    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        _ = Glibc.close(fd)
    }

    public func record(_ record: SIPTrafficRecord) {
        guard !closed.load(ordering: .acquiring) else { return }
        let outgoing = record.direction == .sent
        let callID = SIPMessage.peekCallID(in: record.bytes)
        let packet = HEPPacket(source: outgoing ? record.local : record.remote, destination: outgoing ? record.remote : record.local,
                               ipProtocol: record.transport == .udp ? .udp : .tcp, time: record.time, payloadType: .sip, agentID: agentID,
                               authKey: authKey, correlationID: callID, payload: record.bytes)
        send(packet)
    }

    /// Sends one packet (any payload: RTCP reports a caller mirrors, say) without blocking.
    public func send(_ packet: HEPPacket) {
        let bytes: [UInt8]
        do throws(HEPError) {
            bytes = try packet.encoded()
        } catch {
            stats.withLock { $0.tooLarge += 1 }
            return
        }
        var (storage, length) = collector.sockaddr
        let n = bytes.withUnsafeBufferPointer { cs_sendto(fd, $0.baseAddress, $0.count, blocking ? 0 : Int32(MSG_DONTWAIT), &storage, length) }
        stats.withLock { if n == bytes.count { $0.sent += 1 } else { $0.dropped += 1 } }
    }
}

/// A sink that hands every record to several sinks in turn (a pcapng file and a HEP
/// collector, say).
public struct TrafficSinks: SIPTrafficSink {
    /// The sinks, in the order they are called.
    public let sinks: [any SIPTrafficSink]

    public init(_ sinks: [any SIPTrafficSink]) { self.sinks = sinks }

    public func record(_ record: SIPTrafficRecord) {
        for s in sinks { s.record(record) }
    }

    public func connectionClosed(_ connection: ConnectionInfo) {
        for s in sinks { s.connectionClosed(connection) }
    }
}
