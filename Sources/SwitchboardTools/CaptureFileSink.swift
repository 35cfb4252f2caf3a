import PacketCapture
import SIPRuntime
import SIPTransport
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
public final class CaptureFileSink: SIPTrafficSink {
    /// The writer (for its counters and error).
    public let writer: CaptureWriter

    /// Creates (or truncates) the capture file at `path`.
    public init(path: String) throws(CaptureWriteError) {
        writer = try CaptureWriter(path: path)
    }

    public func record(_ r: SIPTrafficRecord) {
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

    public func connectionClosed(_ connection: ConnectionInfo) {
        writer.forgetTCP(Self.endpoint(connection.local), Self.endpoint(connection.remote))
    }

    /// Flushes and closes the file.
    public func close() { writer.close() }

    /// A socket address as a capture endpoint (the IPv6 scope is dropped).
    public static func endpoint(_ a: SocketAddress) -> CaptureEndpoint {
        var text = a.ipString
        if let percent = text.firstIndex(of: "%") { text = String(text[..<percent]) }
        var bytes = [UInt8](repeating: 0, count: a.isIPv6 ? 16 : 4)
        _ = bytes.withUnsafeMutableBytes { inet_pton(a.isIPv6 ? AF_INET6 : AF_INET, text, $0.baseAddress) }
        return CaptureEndpoint(address: IPAddress(bytes: bytes), port: a.port)
    }
}
