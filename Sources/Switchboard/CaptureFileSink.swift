import NetworkIO
import PacketCapture
import SIPRuntime
import SIPTransport
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A ``SIPTrafficSink`` that records an endpoint's traffic into a pcapng file
/// (`switchboard serve|dial --capture FILE.pcapng`), through ``CaptureWriter``.
///
/// UDP records become UDP datagrams; TCP and TLS records become segments of a TCP stream between
/// the two addresses (TLS: the plaintext, on the TLS port, so Wireshark shows the SIP that went
/// through the TLS session). Each SIP message is written as its own segment; a closed connection
/// is forgotten, so a later one between the same addresses starts with a new handshake.
///
/// Records are written in timestamp order: the runtime stamps a message before its write and
/// reports it after (a stream write, a TLS handshake on a new connection, can take a while under
/// load), so reports can arrive out of order. The sink holds them for ``reorderWindow`` (or at
/// most ``reorderLimit`` records) and writes them sorted by time; ``close()`` writes the rest.
public final class CaptureFileSink: SIPTrafficSink {
    /// The writer (for its counters and error).
    public let writer: CaptureWriter
    /// How long records wait for earlier-stamped ones reported late.
    public let reorderWindow: Duration
    /// The most records held back (the oldest are written when more arrive).
    public let reorderLimit: Int

    private enum Item {
        case record(SIPTrafficRecord)
        case closed(ConnectionInfo)
    }

    /// Held items sorted by (time, arrival); `head` is the first not yet written.
    private struct Pending {
        var items: [(time: Duration, order: Int, item: Item)] = []
        var head = 0
        var newest: Duration = .zero
        var count = 0
    }

    private let pending = Mutex(Pending())

    /// Creates (or truncates) the capture file at `path`.
    public init(path: String, reorderWindow: Duration = .milliseconds(500), reorderLimit: Int = 10_000) throws(CaptureWriteError) {
        writer = try CaptureWriter(path: path)
        self.reorderWindow = reorderWindow
        self.reorderLimit = max(1, reorderLimit)
    }

    public func record(_ r: SIPTrafficRecord) {
        hold(.record(r), at: r.time)
    }

    public func connectionClosed(_ connection: ConnectionInfo) {
        hold(.closed(connection), at: SIPTrafficRecord.now())
    }

    /// Flushes the held records in time order and closes the file.
    public func close() {
        pending.withLock { p in
            for entry in p.items[p.head...] { write(entry.item) }
            p.items = []
            p.head = 0
        }
        writer.close()
    }

    /// Holds an item in time order (reports are nearly in order: the insertion walks back a
    /// step or two); writes those stamped more than the window before the newest, or over the
    /// limit. Writing happens under the lock, so two threads cannot interleave out of order.
    private func hold(_ item: Item, at time: Duration) {
        pending.withLock { p in
            p.count += 1
            p.items.append((time, p.count, item))
            var i = p.items.count - 1
            while i > p.head, p.items[i - 1].time > time {
                p.items.swapAt(i - 1, i)
                i -= 1
            }
            p.newest = max(p.newest, time)
            let horizon = p.newest - reorderWindow
            while p.head < p.items.count, p.items[p.head].time < horizon || p.items.count - p.head > reorderLimit {
                write(p.items[p.head].item)
                p.head += 1
            }
            if p.head > 1024 && p.head * 2 > p.items.count {
                p.items.removeFirst(p.head)
                p.head = 0
            }
        }
    }

    private func write(_ item: Item) {
        switch item {
        case .record(let r): writeRecord(r)
        case .closed(let c): writer.forgetTCP(Self.endpoint(c.local), Self.endpoint(c.remote))
        }
    }

    private func writeRecord(_ r: SIPTrafficRecord) {
        let local = Self.endpoint(r.local), remote = Self.endpoint(r.remote)
        let (from, to) = r.direction == .sent ? (local, remote) : (remote, local)
        let seconds = r.time.components.seconds, ns = r.time.components.attoseconds / 1_000_000_000
        let time = CaptureTimestamp(seconds: seconds, nanoseconds: ns)
        if r.transport == .udp {
            writer.writeUDP(from: from, to: to, payload: r.bytes, time: time)
        } else {
            writer.writeTCP(from: from, to: to, payload: r.bytes, time: time)
        }
    }


    /// A socket address as a capture endpoint (the IPv6 scope is dropped).
    public static func endpoint(_ a: SocketAddress) -> CaptureEndpoint {
        CaptureEndpoint(address: a.ip, port: a.port)
    }
}
