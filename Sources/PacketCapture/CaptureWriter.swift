import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Encodes SIP traffic as pcapng blocks: a section header, one interface with link type raw IP
/// (`LINKTYPE_RAW`, 101) and nanosecond timestamps, and one enhanced packet block per packet,
/// each an IPv4 or IPv6 packet with a synthesized UDP or TCP header.
///
/// A pure value (no I/O): ``CaptureWriter`` writes its output to a file. Checksums (IPv4 header,
/// UDP, TCP) are computed, so Wireshark shows none as bad. TCP directions get their own sequence
/// numbers; the first payload between two endpoints is preceded by a synthesized three-way
/// handshake (SYN, SYN-ACK, ACK) opened by its sender, so tools see the stream from its start and
/// reassemble it. Payloads larger than a packet are cut into several segments.
public struct PcapngEncoder: Sendable {
    /// The largest TCP payload put in one segment (the IP total length is a 16-bit field).
    public static let maxSegmentPayload = 65_000

    struct Direction: Sendable {
        var nextSeq: UInt32
    }
    private struct Key: Hashable, Sendable {
        var source: CaptureEndpoint
        var destination: CaptureEndpoint
    }
    private var tcp: [Key: Direction] = [:]
    private var ipID: UInt16 = 0
    /// Packets encoded so far (handshake segments included).
    public private(set) var packets = 0

    /// An encoder with no TCP state.
    public init() {}

    /// The section header block and the interface description block that start the file.
    public func header(application: String = "Switchboard") -> [UInt8] {
        var shb: [UInt8] = []
        shb += le32(0x1A2B_3C4D) + le16(1) + le16(0) + [UInt8](repeating: 0xFF, count: 8)  // unknown section length
        shb += option(4, Array(application.utf8))  // shb_userappl
        shb += le32(0)  // opt_endofopt
        var idb: [UInt8] = le16(UInt16(LinkType.raw.rawValue)) + le16(0) + le32(0)  // snap length 0: none
        idb += option(9, [9])  // if_tsresol: 10^-9 s
        idb += le32(0)
        return block(0x0A0D_0D0A, shb) + block(1, idb)
    }

    /// One UDP datagram; `nil` when the payload does not fit an IP packet (over 65,507 bytes
    /// for IPv4, 65,527 for IPv6), or when the endpoints mix IPv4 and IPv6.
    public mutating func udp(from source: CaptureEndpoint, to destination: CaptureEndpoint, payload: [UInt8], time: CaptureTimestamp) -> [UInt8]? {
        let v6 = source.address.byteCount == 16
        guard source.address.byteCount == destination.address.byteCount, [4, 16].contains(source.address.byteCount),
              payload.count <= (v6 ? 65_527 : 65_507) else { return nil }
        var segment = be16(source.port) + be16(destination.port) + be16(UInt16(8 + payload.count)) + [0, 0] + payload
        var sum = transportChecksum(segment, protocol: 17, source: source.address.bytes, destination: destination.address.bytes)
        if sum == 0 { sum = 0xFFFF }  // RFC 768: zero means "no checksum"
        segment[6] = UInt8(sum >> 8)
        segment[7] = UInt8(sum & 0xFF)
        return packet(ip(protocol: 17, segment, source: source.address.bytes, destination: destination.address.bytes), time: time)
    }

    /// The TCP segments carrying `payload` from `source` to `destination` (preceded by a
    /// handshake the first time the two endpoints are seen); empty when the endpoints mix IPv4
    /// and IPv6.
    public mutating func tcp(from source: CaptureEndpoint, to destination: CaptureEndpoint, payload: [UInt8], time: CaptureTimestamp) -> [UInt8] {
        guard source.address.byteCount == destination.address.byteCount, [4, 16].contains(source.address.byteCount) else { return [] }
        let forward = Key(source: source, destination: destination), backward = Key(source: destination, destination: source)
        var out: [UInt8] = []
        if tcp[forward] == nil {
            // A new connection, opened by this sender: SYN, SYN-ACK, ACK.
            let a = initialSequence(forward), b = initialSequence(backward)
            out += segment(forward, seq: a, ack: 0, flags: 0x02, [], time: time)
            out += segment(backward, seq: b, ack: a &+ 1, flags: 0x12, [], time: time)
            out += segment(forward, seq: a &+ 1, ack: b &+ 1, flags: 0x10, [], time: time)
            tcp[forward] = Direction(nextSeq: a &+ 1)
            if tcp[backward] == nil { tcp[backward] = Direction(nextSeq: b &+ 1) }
        }
        var start = 0
        repeat {
            let end = min(payload.count, start + Self.maxSegmentPayload)
            let seq = tcp[forward]!.nextSeq
            let ack = tcp[backward]?.nextSeq ?? 0
            out += segment(forward, seq: seq, ack: ack, flags: 0x18, Array(payload[start..<end]), time: time)
            tcp[forward]!.nextSeq = seq &+ UInt32(end - start)
            start = end
        } while start < payload.count
        return out
    }

    /// Forgets the TCP state of the connection between two endpoints (after it closed), so a
    /// later connection between them starts with a new handshake.
    public mutating func forgetTCP(_ a: CaptureEndpoint, _ b: CaptureEndpoint) {
        tcp[Key(source: a, destination: b)] = nil
        tcp[Key(source: b, destination: a)] = nil
    }

    // MARK: Encoding

    /// A deterministic initial sequence number per direction (FNV-1a of the endpoints), so two
    /// runs of the same traffic give the same file.
    private func initialSequence(_ k: Key) -> UInt32 {
        var h: UInt32 = 2_166_136_261
        for b in k.source.address.bytes + be16(k.source.port) + k.destination.address.bytes + be16(k.destination.port) {
            h = (h ^ UInt32(b)) &* 16_777_619
        }
        return h
    }

    private mutating func segment(_ k: Key, seq: UInt32, ack: UInt32, flags: UInt8, _ payload: [UInt8], time: CaptureTimestamp) -> [UInt8] {
        var s = be16(k.source.port) + be16(k.destination.port) + be32(seq) + be32(flags & 0x10 != 0 ? ack : 0)
        s += [0x50, flags] + be16(65_535) + [0, 0, 0, 0] + payload
        let sum = transportChecksum(s, protocol: 6, source: k.source.address.bytes, destination: k.destination.address.bytes)
        s[16] = UInt8(sum >> 8)
        s[17] = UInt8(sum & 0xFF)
        return packet(ip(protocol: 6, s, source: k.source.address.bytes, destination: k.destination.address.bytes), time: time)
    }

    private mutating func ip(protocol proto: UInt8, _ payload: [UInt8], source: [UInt8], destination: [UInt8]) -> [UInt8] {
        if source.count == 16 {
            return [0x60, 0, 0, 0] + be16(UInt16(payload.count)) + [proto, 64] + source + destination + payload
        }
        ipID &+= 1
        var h: [UInt8] = [0x45, 0] + be16(UInt16(20 + payload.count)) + be16(ipID) + [0x40, 0, 64, proto, 0, 0] + source + destination
        let sum = ~fold(sum16(h[...], 0))
        h[10] = UInt8(sum >> 8)
        h[11] = UInt8(sum & 0xFF)
        return h + payload
    }

    /// The UDP/TCP checksum over the pseudo-header (RFC 768, RFC 9293 §3.1, RFC 8200 §8.1).
    private func transportChecksum(_ segment: [UInt8], protocol proto: UInt8, source: [UInt8], destination: [UInt8]) -> UInt16 {
        var pseudo = source + destination
        if source.count == 16 {
            pseudo += be32(UInt32(segment.count)) + [0, 0, 0, proto]
        } else {
            pseudo += [0, proto] + be16(UInt16(segment.count))
        }
        return ~fold(sum16(segment[...], sum16(pseudo[...], 0)))
    }

    private func sum16(_ b: ArraySlice<UInt8>, _ initial: UInt32) -> UInt32 {
        var s = initial
        var i = b.startIndex
        while i + 1 < b.endIndex {
            s &+= UInt32(b[i]) << 8 | UInt32(b[i + 1])
            if s > 0xFFFF_0000 { s = (s & 0xFFFF) + (s >> 16) }
            i += 2
        }
        if i < b.endIndex { s &+= UInt32(b[i]) << 8 }
        return s
    }

    private func fold(_ s: UInt32) -> UInt16 {
        var s = s
        while s > 0xFFFF { s = (s & 0xFFFF) + (s >> 16) }
        return UInt16(s)
    }

    /// An enhanced packet block on interface 0.
    private mutating func packet(_ data: [UInt8], time: CaptureTimestamp) -> [UInt8] {
        packets += 1
        let ns = UInt64(bitPattern: max(0, time.totalNanoseconds))
        var body = le32(0) + le32(UInt32(ns >> 32)) + le32(UInt32(ns & 0xFFFF_FFFF))
        body += le32(UInt32(data.count)) + le32(UInt32(data.count)) + data
        body += [UInt8](repeating: 0, count: (4 - data.count % 4) % 4)
        return block(6, body)
    }

    private func block(_ type: UInt32, _ body: [UInt8]) -> [UInt8] {
        let length = le32(UInt32(12 + body.count))
        return le32(type) + length + body + length
    }

    private func option(_ code: UInt16, _ value: [UInt8]) -> [UInt8] {
        le16(code) + le16(UInt16(value.count)) + value + [UInt8](repeating: 0, count: (4 - value.count % 4) % 4)
    }

    private func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
    private func le32(_ v: UInt32) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)] }
    private func be16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }
    private func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
}

/// Why a capture file could not be written.
public struct CaptureWriteError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file's path.
    public var path: String
    /// The system error number.
    public var code: Int32
    /// A write error.
    public init(path: String, code: Int32) {
        self.path = path
        self.code = code
    }
    /// `cannot write PATH: reason`.
    public var description: String { "cannot write \(path): \(String(cString: strerror(code)))" }
}

/// Writes SIP traffic to a pcapng file that Wireshark and tshark open (see ``PcapngEncoder``).
///
/// Safe to call from several threads: writes are serialized by a lock, in call order. Each call
/// writes through to the file (`fflush`), so a capture of a process that is killed is complete
/// up to its last packet. Write errors after opening are remembered (``firstError``) and end the
/// writing; they are not thrown at the caller, which is usually a network thread.
public final class CaptureWriter: Sendable {
    private struct State {
        var encoder = PcapngEncoder()
        var file: UnsafeMutablePointer<FILE>?
        var error: CaptureWriteError?
    }
    private let state: Mutex<State>
    /// The file's path.
    public let path: String

    /// Creates (or truncates) the file at `path` and writes the pcapng header.
    public init(path: String) throws(CaptureWriteError) {
        self.path = path
        guard let f = fopen(path, "wb") else { throw CaptureWriteError(path: path, code: errno) }
        let header = PcapngEncoder().header()
        guard fwrite(header, 1, header.count, f) == header.count, fflush(f) == 0 else {
            let code = errno
            fclose(f)
            throw CaptureWriteError(path: path, code: code)
        }
        state = Mutex(State(file: f))
    }

    /// Appends one UDP datagram. Datagrams too large for an IP packet are left out.
    public func writeUDP(from source: CaptureEndpoint, to destination: CaptureEndpoint, payload: [UInt8], time: CaptureTimestamp) {
        state.withLock { s in
            guard let bytes = s.encoder.udp(from: source, to: destination, payload: payload, time: time) else { return }
            Self.put(bytes, &s, path)
        }
    }

    /// Appends `payload` as the next bytes of the TCP stream from `source` to `destination`.
    public func writeTCP(from source: CaptureEndpoint, to destination: CaptureEndpoint, payload: [UInt8], time: CaptureTimestamp) {
        state.withLock { s in Self.put(s.encoder.tcp(from: source, to: destination, payload: payload, time: time), &s, path) }
    }

    /// Forgets a closed TCP connection (a later one between the same endpoints gets a new handshake).
    public func forgetTCP(_ a: CaptureEndpoint, _ b: CaptureEndpoint) {
        state.withLock { $0.encoder.forgetTCP(a, b) }
    }

    /// Packets written so far.
    public var packets: Int { state.withLock { $0.encoder.packets } }

    /// The first write error, if writing stopped.
    public var firstError: CaptureWriteError? { state.withLock { $0.error } }

    /// Closes the file. Idempotent; later writes are ignored.
    public func close() {
        state.withLock { s in
            if let f = s.file { fclose(f) }
            s.file = nil
        }
    }

    deinit { close() }

    private static func put(_ bytes: [UInt8], _ s: inout State, _ path: String) {
        guard let f = s.file, !bytes.isEmpty else { return }
        if fwrite(bytes, 1, bytes.count, f) != bytes.count || fflush(f) != 0 {
            s.error = CaptureWriteError(path: path, code: errno)
            fclose(f)
            s.file = nil
        }
    }
}
