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

    // MARK: A file changed by another process while it is read

    /// The offset where each record of `Build.pcap(frames)` ends.
    static func recordEnds(_ frames: [[UInt8]]) -> [Int] {
        var at = 24
        return frames.map { at += 16 + $0.count; return at }
    }

    /// Frames read from a mapped file the test truncates (another descriptor, as another
    /// process would) while a window is mapped and half read: without the guard, touching the
    /// lost pages kills the process with SIGBUS; with it, the frames wholly before the new end,
    /// then an error naming the truncation.
    @Test("a mapped file truncated under the window being read: the frames before the cut, then an error, no SIGBUS")
    func truncatedUnderTheWindow() throws {
        let frames = Self.frames(20_000)
        let file = Build.pcap(frames)
        let path = try Self.write(file, "shrinks.pcap")
        defer { unlink(path) }
        let ends = Self.recordEnds(frames)
        let memory = readAll(try CaptureFileReader(bytes: file)).0
        // Cut inside the first window (4 MiB) after 1,000 frames, and past it after 8,000 (the
        // second window), each time to about 1 MiB above where the reading is.
        for readFirst in [1000, 8000] {
            try Data(file).write(to: URL(fileURLWithPath: path))
            let reader = try CaptureFileReader(path: path)
            var got: [CaptureFrame] = []
            for _ in 0..<readFirst { if let f = try reader.nextFrame() { got.append(f) } }
            // On a page boundary: every byte past the cut is in a page the truncation took away,
            // so the reading faults (and the guard answers) rather than reading the zeros the
            // page holding the new end has past it.
            let cut = (ends[readFirst - 1] + (1 << 20)) & ~4095
            #expect(truncate(path, off_t(cut)) == 0)
            var failure: CaptureFileError?
            do throws(CaptureFileError) {
                while let f = try reader.nextFrame() { got.append(f) }
            } catch { failure = error }
            // Every frame wholly before the cut, and at most the one across it (its lost bytes
            // read as zeros: the page of the new end does not fault).
            let whole = ends.firstIndex { $0 > cut } ?? ends.count
            #expect(got.count >= whole && got.count <= whole + 1, "\(got.count) frames, \(whole) whole before the cut")
            #expect(zip(got.prefix(whole), memory).allSatisfy { $0 == $1 })
            #expect(failure?.rule == .truncatedRecord && failure?.detail.contains("truncated to \(cut) bytes") == true, "\(String(describing: failure))")
        }
    }

    /// The same through the RTP fast path, the file cut from inside the datagram callback (the
    /// scan is in the middle of a mapped window): the datagrams before the cut, then the error.
    @Test("the RTP fast path over a file truncated mid-window: no SIGBUS, the datagrams before the cut, then an error")
    func fastPathOverATruncatedFile() throws {
        let frames = Self.frames(20_000)
        let file = Build.pcap(frames)
        let path = try Self.write(file, "fast-shrinks.pcap")
        defer { unlink(path) }
        let general = try Self.datagrams(path, fast: false).0
        let ends = Self.recordEnds(frames)
        let reader = try SIPCaptureReader(path: path, datagrams: true, payloads: true)
        var seen: [String] = [], events: [CaptureEvent] = []
        var cut = 0
        var failure: CaptureFileError?
        do throws(CaptureFileError) {
            while try reader.nextEvents(into: &events, rtp: { d in
                seen.append("\(d.frameNumber) \(d.timestamp) \(d.source) \(d.destination) rtp \(d.payload.count) \(d.payload.last ?? 0)")
                if seen.count == 3000 {
                    cut = (ends[d.frameNumber - 1] + 300_000) & ~4095
                    _ = truncate(path, off_t(cut))
                }
            }) {
                for e in events { if case .datagram(let d) = e { seen.append("\(d.frameNumber) \(d.timestamp) \(d.source) \(d.destination) \(d.kind) \(d.payload.count) \(d.payload.last ?? 0)") } }
            }
        } catch { failure = error }
        let whole = ends.firstIndex { $0 > cut } ?? ends.count
        #expect(cut > 0)
        #expect(seen.count >= 3000 && seen.count <= whole + 1, "\(seen.count) datagrams, \(whole) whole before the cut")
        // The same datagrams as the general path, up to the one across the cut.
        #expect(seen.dropLast() == general.prefix(seen.count - 1))
        #expect(failure?.rule == .truncatedRecord && failure?.detail.contains("truncated to \(cut) bytes") == true, "\(String(describing: failure))")
    }

    /// A capture still being written (tcpdump's buffered writes end mid-record): what the file
    /// holds when the reading gets there is read, appended records included, up to its last
    /// whole record; the half record at the end is reported as such.
    @Test("a file appended to while read: the appended records are read, up to the last whole one")
    func growingFile() throws {
        let frames = Self.frames(12_000)
        let file = Build.pcap(frames)
        let ends = Self.recordEnds(frames)
        let path = try Self.write(Array(file[..<(ends[1999] + 10)]), "grows.pcap")
        defer { unlink(path) }
        let reader = try CaptureFileReader(path: path)
        var got: [CaptureFrame] = []
        for _ in 0..<1500 { if let f = try reader.nextFrame() { got.append(f) } }
        // The writer goes on: the rest of frame 2,001, then up to half of frame 11,001 (past the first window).
        let fd = open(path, O_WRONLY | O_APPEND)
        #expect(fd >= 0)
        let more = Array(file[(ends[1999] + 10)..<(ends[10_999] + 40)])
        #expect(more.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } == more.count)
        close(fd)
        var failure: CaptureFileError?
        do throws(CaptureFileError) {
            while let f = try reader.nextFrame() { got.append(f) }
        } catch { failure = error }
        let memory = readAll(try CaptureFileReader(bytes: file)).0
        #expect(got.count == 11_000, "\(got.count) frames")
        #expect(zip(got, memory).allSatisfy { $0 == $1 })
        #expect(failure?.rule == .truncatedRecord && failure?.offset == Int64(ends[10_999]), "\(String(describing: failure))")
    }
}
