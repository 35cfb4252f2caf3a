import Foundation
import Testing
import PacketCapture
#if canImport(Glibc)
import Glibc
#endif

/// The file reader over a mapped file (4 MiB windows moved along it) and over a pipe (`read(2)`
/// into a reused buffer): the same frames, in the same order, with the same error, as the same
/// bytes read from memory; and the RTP fast path of ``SIPCaptureReader`` over both, the same
/// datagrams as the general path.
struct MappedReaderTests {
    /// A capture of `count` UDP frames of 60 to ~1,500 bytes (RTP-looking payloads, and every
    /// 11th one not), about 15 MB for 20,000 frames: records straddle every window boundary.
    static func frames(_ count: Int) -> [[UInt8]] {
        (0..<count).map { i in
            let size = 12 + (i * 7919) % 1400
            var payload = [UInt8](repeating: UInt8(truncatingIfNeeded: i), count: size)
            payload[0] = i % 11 == 0 ? 0x17 : 0x80
            payload[1] = 0
            payload[2] = UInt8(truncatingIfNeeded: i >> 8)
            payload[3] = UInt8(truncatingIfNeeded: i)
            return Build.ethernet(Build.ipv4(proto: 17, Build.udp(4000 + i % 5, 6000, payload)), vlans: i % 3 == 0 ? [7] : [])
        }
    }

    static func write(_ bytes: [UInt8], _ name: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("mapped-\(getpid())-\(name)").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Reads through a FIFO that a thread fills with `bytes` (so the reader cannot map it).
    static func throughPipe<T: Sendable>(_ bytes: [UInt8], _ body: (String) throws -> T) throws -> T {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("mapped-\(getpid())-fifo-\(UInt32.random(in: 0...UInt32.max))").path
        guard mkfifo(path, 0o600) == 0 else { throw CocoaError(.fileWriteUnknown) }
        defer { unlink(path) }
        let writer = Thread {
            let fd = open(path, O_WRONLY)
            guard fd >= 0 else { return }
            bytes.withUnsafeBytes { b in
                var done = 0
                while done < b.count {
                    let n = Glibc.write(fd, b.baseAddress! + done, min(65536, b.count - done))
                    if n <= 0 { break }
                    done += n
                }
            }
            close(fd)
        }
        writer.start()
        return try body(path)
    }

    static func same(_ a: ([CaptureFrame], CaptureFileError?), _ b: ([CaptureFrame], CaptureFileError?)) -> Bool {
        a.0.count == b.0.count && a.1 == b.1 && zip(a.0, b.0).allSatisfy { $0 == $1 }
    }

    @Test("a pcap of ~15 MB read mapped, through a pipe and from memory: the same frames; cut short, the same error")
    func pcapAcrossWindows() throws {
        let file = Build.pcap(Self.frames(20_000))
        #expect(file.count > 12 << 20)
        for bytes in [file, Array(file.dropLast(5))] {
            let path = try Self.write(bytes, "big.pcap")
            defer { unlink(path) }
            let memory = readAll(try CaptureFileReader(bytes: bytes))
            let mapped = readAll(try CaptureFileReader(path: path))
            let piped = try Self.throughPipe(bytes) { readAll(try CaptureFileReader(path: $0)) }
            #expect(memory.0.count >= 19_999)
            #expect(Self.same(mapped, memory), "mapped: \(mapped.0.count) frames, \(String(describing: mapped.1))")
            #expect(Self.same(piped, memory), "piped: \(piped.0.count) frames, \(String(describing: piped.1))")
        }
    }

    @Test("pcapng with a 5 MiB unknown block skipped past the mapped window: the same frames as from memory")
    func pcapngSkipsPastTheWindow() throws {
        let big = false
        var file = Build.shb(big) + Build.idb(linkType: 1, tsresol: 9, big)
        let frames = Self.frames(3000)
        for (i, f) in frames.enumerated() {
            file += Build.epb(interface: 0, ts: 1_700_000_000_000_000_000 + UInt64(i) * 20_000_000, f, big)
            if i == 1000 { file += Build.block(0x0BAD, [UInt8](repeating: 0x42, count: 5 << 20), big) }
        }
        let path = try Self.write(file, "skip.pcapng")
        defer { unlink(path) }
        let memory = readAll(try CaptureFileReader(bytes: file))
        let mapped = readAll(try CaptureFileReader(path: path))
        let piped = try Self.throughPipe(file) { readAll(try CaptureFileReader(path: $0)) }
        #expect(memory.0.count == 3000 && memory.1 == nil)
        #expect(Self.same(mapped, memory))
        #expect(Self.same(piped, memory))
    }

    /// Every datagram event and lent datagram, in order, and the counters.
    static func datagrams(_ path: String, fast: Bool) throws -> ([String], CaptureCounters, Int) {
        let reader = try SIPCaptureReader(path: path, datagrams: true, payloads: true)
        var seen: [String] = []
        var lent = 0
        var events: [CaptureEvent] = []
        func note(_ e: CaptureEvent) {
            if case .datagram(let d) = e { seen.append("\(d.frameNumber) \(d.timestamp) \(d.source) \(d.destination) \(d.kind) \(d.payload.count) \(d.payload.last ?? 0)") }
        }
        if fast {
            while try reader.nextEvents(into: &events, rtp: { d in
                lent += 1
                seen.append("\(d.frameNumber) \(d.timestamp) \(d.source) \(d.destination) rtp \(d.payload.count) \(d.payload.last ?? 0)")
            }) { events.forEach(note) }
        } else {
            while try reader.nextEvents(into: &events) { events.forEach(note) }
        }
        return (seen, reader.counters, lent)
    }

    @Test("the RTP fast path over mapped windows and over a pipe: the same datagrams as the general path")
    func fastPathAcrossWindows() throws {
        let file = Build.pcap(Self.frames(20_000))
        let path = try Self.write(file, "fast.pcap")
        defer { unlink(path) }
        let general = try Self.datagrams(path, fast: false)
        let fast = try Self.datagrams(path, fast: true)
        let piped = try Self.throughPipe(file) { try Self.datagrams($0, fast: true) }
        #expect(general.0.count == 20_000 && general.2 == 0)
        #expect(fast.2 == 20_000 - 1819, "lent \(fast.2)")
        #expect(fast.0 == general.0 && fast.1 == general.1)
        #expect(piped.0 == general.0 && piped.1 == general.1 && piped.2 == fast.2)
    }
}
