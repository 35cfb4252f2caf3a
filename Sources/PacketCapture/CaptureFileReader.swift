#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CMapGuard

/// Reads frames from a classic pcap or a pcapng capture, in chunks.
///
/// Memory is bounded by the block being read (at most ``maxRecordLength`` plus a mapped window
/// or a read chunk of a few MiB), not by the file size; unknown pcapng blocks are skipped without being buffered. On a
/// truncated or corrupt file, every good frame is returned first and then ``nextFrame()``
/// throws a ``CaptureFileError`` saying where and why (and keeps throwing it).
///
/// The reader owns an open file, so it is not `Sendable`: use it from one task.
///
/// - Important: A regular file is read through memory-mapped windows. So that a file truncated
///   by another process while it is read ends the reading with an error instead of killing the
///   process, the first reader opened on a mapped file installs a **process-wide SIGBUS
///   handler** (`sigaction`, once for the process's lifetime, never removed). It handles only a
///   fault inside a window a reader has registered (it maps zero pages over the rest of the
///   window and flags it); any other SIGBUS is passed on to the handler that was installed
///   before it (chained: Swift's backtracer, the application's own, or the default action).
///   An application that installs its own SIGBUS handler after opening a reader should chain
///   to the previous one likewise.
public final class CaptureFileReader {
    /// The container format of the file.
    public enum Format: Sendable, Hashable {
        /// Classic libpcap, with the byte order and timestamp precision of its magic number.
        case pcap(bigEndian: Bool, nanosecond: Bool)
        /// pcapng.
        case pcapng
    }

    /// The largest captured length or block accepted (default 16 MiB).
    public let maxRecordLength: Int
    /// The detected format.
    public let format: Format

    private let input: ByteInput
    private var failure: CaptureFileError?
    private var frameNumber = 0
    private var recordNumber = 0
    // Classic pcap.
    private var bigEndian = false
    private var nanosecond = false
    private var snapLength = 0
    private var pcapLinkType = LinkType.ethernet
    // pcapng: the current section's interfaces.
    private struct Interface {
        var linkType: LinkType
        var snapLength: Int
        var unitsPerSecond: UInt64
        var offsetSeconds: Int64
    }
    private var interfaces: [Interface] = []

    /// Opens the file at `path` and reads its header.
    /// - Throws: ``CaptureFileError`` when the file cannot be opened or its header is unreadable
    ///   (NetMon files are refused with ``CaptureFileError/Rule/netMonFormat``).
    public convenience init(path: String, maxRecordLength: Int = 16 << 20) throws(CaptureFileError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw CaptureFileError(offset: 0, record: 0, rule: .io, detail: "cannot open \(path): errno \(errno)")
        }
        try self.init(input: ByteInput(fd: fd), maxRecordLength: maxRecordLength)
    }

    /// Reads a capture held in memory (for tests and synthetic captures).
    public convenience init(bytes: [UInt8], maxRecordLength: Int = 16 << 20) throws(CaptureFileError) {
        try self.init(input: ByteInput(bytes: bytes), maxRecordLength: maxRecordLength)
    }

    private init(input: ByteInput, maxRecordLength: Int) throws(CaptureFileError) {
        self.input = input
        self.maxRecordLength = maxRecordLength
        guard input.ensure(4) else {
            throw CaptureFileError(offset: 0, record: 0, rule: .truncatedHeader, detail: "file holds \(input.available) bytes, no magic number")
        }
        let m = input.u32(0, bigEndian: true)
        switch m {
        case 0xA1B2_C3D4: format = .pcap(bigEndian: true, nanosecond: false)
        case 0xD4C3_B2A1: format = .pcap(bigEndian: false, nanosecond: false)
        case 0xA1B2_3C4D: format = .pcap(bigEndian: true, nanosecond: true)
        case 0x4D3C_B2A1: format = .pcap(bigEndian: false, nanosecond: true)
        case 0x0A0D_0D0A: format = .pcapng
        case 0x474D_4255:  // "GMBU"
            throw CaptureFileError(offset: 0, record: 0, rule: .netMonFormat, detail: "Microsoft Network Monitor capture (magic \"GMBU\"); convert it to pcap or pcapng first")
        default:
            throw CaptureFileError(offset: 0, record: 0, rule: .unknownFormat, detail: "magic 0x\(String(m, radix: 16)) is neither pcap nor pcapng")
        }
        if case .pcap(let be, let ns) = format {
            bigEndian = be
            nanosecond = ns
            guard input.ensure(24) else {
                throw CaptureFileError(offset: 0, record: 0, rule: .truncatedHeader, detail: "pcap global header needs 24 bytes, file holds \(input.available)")
            }
            let major = input.u16(4, bigEndian: be)
            guard major == 2 else {
                throw CaptureFileError(offset: 4, record: 0, rule: .unsupportedVersion, detail: "pcap version \(major).\(input.u16(6, bigEndian: be))")
            }
            snapLength = Int(input.u32(16, bigEndian: be))
            pcapLinkType = LinkType(rawValue: input.u32(20, bigEndian: be) & 0xFFFF)
            guard LinkType.supported.contains(pcapLinkType) else {
                throw CaptureFileError(offset: 20, record: 0, rule: .unsupportedLinkType, detail: "link type \(pcapLinkType.rawValue) is not supported")
            }
            input.skip(24)
        }
    }

    /// The next frame, or `nil` at the clean end of the file.
    /// - Throws: ``CaptureFileError`` at the first truncated or corrupt record (and again on every later call).
    public func nextFrame() throws(CaptureFileError) -> CaptureFrame? {
        guard let (frame, bytes) = try nextFrameInPlace() else { return nil }
        var f = frame
        f.data = Array(bytes)
        return f
    }

    /// The next frame with empty ``CaptureFrame/data`` and its bytes as a slice of the read
    /// buffer, valid until the next call (the streaming reader decodes it without a copy).
    func nextFrameInPlace() throws(CaptureFileError) -> (CaptureFrame, ArraySlice<UInt8>)? {
        if let f = failure { throw f }
        do throws(CaptureFileError) {
            try checkNotShrunk()
            let next: (CaptureFrame, ArraySlice<UInt8>)?
            switch format {
            case .pcap: next = try nextPcapRecord()
            case .pcapng: next = try nextPcapngPacket()
            }
            // A record read from a window the file shrank under may hold zeros: not handed on.
            try checkNotShrunk()
            return next
        } catch {
            // An error met because the file shrank is told as that (a cut inside a page reads
            // as zeros there, without a fault: the size is checked now).
            input.recheckSize()
            let reported = shrinkError() ?? error
            failure = reported
            throw reported
        }
    }

    /// Throws when another process truncated the file under the reading (``ByteInput/shrunkTo``).
    private func checkNotShrunk() throws(CaptureFileError) {
        if let e = shrinkError() { throw e }
    }

    private func shrinkError() -> CaptureFileError? {
        guard input.shrank, let size = input.shrunkTo else { return nil }
        return CaptureFileError(offset: size, record: recordNumber, rule: .truncatedRecord,
                                detail: "the file was truncated to \(size) bytes by another process while it was read")
    }

    /// What ``scanFrames(_:)`` tells of a frame besides its bytes.
    struct FrameHeader {
        var number: Int
        var timestamp: CaptureTimestamp
        var linkType: LinkType
        var originalLength: Int
    }

    /// The fast path: hands the next frames to `body` in place (their bytes lent from the read
    /// buffer for the call, no ``CaptureFrame`` and no copy), reading more of the file as
    /// needed, until `body` declines one (returns `false`), or the next record is anything but
    /// a packet (a classic pcap record, a pcapng enhanced packet block) that follows every rule
    /// ``nextFrameInPlace()`` checks, or the file ends. Whatever stopped the scan is left for
    /// ``nextFrameInPlace()``, which returns it or reports its error as usual; frame and record
    /// numbers run on across both. Returns the number of frames taken.
    func scanFrames(_ body: (FrameHeader, UnsafeRawBufferPointer) -> Bool) -> Int {
        guard failure == nil, !input.shrank else { return 0 }
        var taken = 0
        var frame = frameNumber, record = recordNumber
        defer { frameNumber = frame; recordNumber = record }
        let be = bigEndian, nano = nanosecond, link = pcapLinkType, snap = snapLength, limit = maxRecordLength
        let ifaces = interfaces
        let classic: Bool
        switch format {
        case .pcap: classic = true
        case .pcapng: classic = false
        }
        @inline(__always) func word(_ b: UnsafeRawBufferPointer, _ at: Int) -> UInt32 {
            let v = b.loadUnaligned(fromByteOffset: at, as: UInt32.self)
            return be ? UInt32(bigEndian: v) : UInt32(littleEndian: v)
        }
        while true {
            var need = 0
            var stop = false
            // The mapped window's guard: a record is handed on only while the file has not
            // shrunk under it (its bytes could be the guard's zeros).
            let slot = input.guardSlot
            let consumed = input.withBuffered { b -> Int in
                var off = 0
                let n = b.count
                while true {
                    if classic {
                        guard n - off >= 16 else { need = 16; break }
                        let capLen = Int(word(b, off + 8))
                        if capLen > limit || (snap > 0 && capLen > snap) || capLen == 0 { stop = true; break }
                        guard n - off >= 16 + capLen else { need = 16 + capLen; break }
                        let frac = Int64(word(b, off + 4))
                        let header = FrameHeader(number: frame + 1,
                                                 timestamp: CaptureTimestamp(seconds: Int64(word(b, off)), nanoseconds: nano ? frac : frac * 1000),
                                                 linkType: link, originalLength: Int(word(b, off + 12)))
                        if slot >= 0 && mg_hit(slot) != 0 { stop = true; break }
                        guard body(header, UnsafeRawBufferPointer(rebasing: b[(off + 16)..<(off + 16 + capLen)])) else { stop = true; break }
                        off += 16 + capLen
                    } else {
                        guard n - off >= 8 else { need = 8; break }
                        // Only enhanced packet blocks; the section header's type reads the same in both orders.
                        guard word(b, off) == 6 else { stop = true; break }
                        let length = Int(word(b, off + 4))
                        guard length % 4 == 0, length >= 32, length <= limit + 64 else { stop = true; break }
                        guard n - off >= length else { need = length; break }
                        guard Int(word(b, off + length - 4)) == length else { stop = true; break }
                        let ifIndex = Int(word(b, off + 8))
                        let capLen = Int(word(b, off + 20))
                        guard ifIndex < ifaces.count, capLen <= length - 32 else { stop = true; break }
                        let raw = UInt64(word(b, off + 12)) << 32 | UInt64(word(b, off + 16))
                        let iface = ifaces[ifIndex]
                        let header = FrameHeader(number: frame + 1, timestamp: Self.timestamp(raw, unitsPerSecond: iface.unitsPerSecond, offsetSeconds: iface.offsetSeconds),
                                                 linkType: iface.linkType, originalLength: Int(word(b, off + 24)))
                        if slot >= 0 && mg_hit(slot) != 0 { stop = true; break }
                        guard body(header, UnsafeRawBufferPointer(rebasing: b[(off + 28)..<(off + 28 + capLen)])) else { stop = true; break }
                        off += length
                    }
                    frame += 1
                    record += 1
                    taken += 1
                }
                return off
            }
            input.skip(consumed)
            if stop || !input.ensure(need) { return taken }
        }
    }

    // MARK: classic pcap

    private func nextPcapRecord() throws(CaptureFileError) -> (CaptureFrame, ArraySlice<UInt8>)? {
        let start = input.offset
        guard input.ensure(16) else {
            if input.available == 0 { return nil }
            throw CaptureFileError(offset: start, record: recordNumber + 1, rule: .truncatedRecord, detail: "record header needs 16 bytes, \(input.available) left")
        }
        recordNumber += 1
        let sec = input.u32(0, bigEndian: bigEndian)
        let frac = input.u32(4, bigEndian: bigEndian)
        let capLen = Int(input.u32(8, bigEndian: bigEndian))
        let origLen = Int(input.u32(12, bigEndian: bigEndian))
        if sec == 0 && frac == 0 && capLen == 0 {
            // What a page past a file's new end reads as (no fault in the page of the end): is it?
            input.recheckSize()
            try checkNotShrunk()
        }
        if capLen > maxRecordLength || (snapLength > 0 && capLen > snapLength) {
            throw CaptureFileError(offset: start + 8, record: recordNumber, rule: .recordTooLong, detail: "captured length \(capLen) exceeds the snapshot length \(snapLength) or the limit \(maxRecordLength)")
        }
        guard input.ensure(16 + capLen) else {
            throw CaptureFileError(offset: start, record: recordNumber, rule: .truncatedRecord, detail: "record holds \(capLen) bytes, \(input.available - 16) left in the file")
        }
        let data = input.slice(16, capLen)
        input.skip(16 + capLen)
        frameNumber += 1
        let ts = CaptureTimestamp(seconds: Int64(sec), nanoseconds: nanosecond ? Int64(frac) : Int64(frac) * 1000)
        return (CaptureFrame(number: frameNumber, timestamp: ts, linkType: pcapLinkType, interfaceIndex: 0, originalLength: origLen, data: []), data)
    }

    // MARK: pcapng

    private func nextPcapngPacket() throws(CaptureFileError) -> (CaptureFrame, ArraySlice<UInt8>)? {
        while true {
            let start = input.offset
            guard input.ensure(8) else {
                if input.available == 0 && recordNumber > 0 { return nil }
                throw CaptureFileError(offset: start, record: recordNumber + 1, rule: recordNumber == 0 ? .truncatedHeader : .truncatedRecord,
                                       detail: "block header needs 8 bytes, \(input.available) left")
            }
            recordNumber += 1
            let record = recordNumber
            var type = input.u32(0, bigEndian: bigEndian)
            if input.u32(0, bigEndian: true) == 0x0A0D_0D0A {
                // A section header: its byte-order magic sets the order for the section.
                guard input.ensure(12) else {
                    throw CaptureFileError(offset: start, record: record, rule: .truncatedHeader, detail: "section header block cut short")
                }
                switch input.u32(8, bigEndian: true) {
                case 0x1A2B_3C4D: bigEndian = true
                case 0x4D3C_2B1A: bigEndian = false
                default:
                    throw CaptureFileError(offset: start + 8, record: record, rule: .badSectionHeader, detail: "byte-order magic 0x\(String(input.u32(8, bigEndian: true), radix: 16))")
                }
                type = 0x0A0D_0D0A
            }
            let length = Int(input.u32(4, bigEndian: bigEndian))
            let minimum = type == 0x0A0D_0D0A ? 28 : 12
            guard length % 4 == 0, length >= minimum else {
                throw CaptureFileError(offset: start + 4, record: record, rule: .badBlockLength, detail: "block type 0x\(String(type, radix: 16)) has length \(length) (must be a multiple of 4, at least \(minimum))")
            }
            switch type {
            case 0x0A0D_0D0A, 1, 2, 3, 6:
                guard length <= maxRecordLength + 64 else {
                    throw CaptureFileError(offset: start + 4, record: record, rule: .badBlockLength, detail: "block length \(length) exceeds the limit \(maxRecordLength)")
                }
                guard input.ensure(length) else {
                    throw CaptureFileError(offset: start, record: record, rule: type == 0x0A0D_0D0A ? .truncatedHeader : .truncatedRecord, detail: "block of \(length) bytes, \(input.available) left in the file")
                }
                let trailer = Int(input.u32(length - 4, bigEndian: bigEndian))
                guard trailer == length else {
                    throw CaptureFileError(offset: start + Int64(length) - 4, record: record, rule: .badBlockLength, detail: "trailing block length \(trailer) differs from leading \(length)")
                }
                // Parsed in place; only the frame's bytes are copied out.
                let frame = try parseBlock(type: type, input.slice(0, length), start: start, record: record)
                input.skip(length)
                if let frame { return frame }
            default:
                // Unknown or uninteresting block: skip without buffering it whole.
                input.skip(length - 4)
                guard input.ensure(4) else {
                    throw CaptureFileError(offset: start, record: record, rule: .truncatedRecord, detail: "block of \(length) bytes runs past the end of the file")
                }
                let trailer = Int(input.u32(0, bigEndian: bigEndian))
                guard trailer == length else {
                    throw CaptureFileError(offset: start + Int64(length) - 4, record: record, rule: .badBlockLength, detail: "trailing block length \(trailer) differs from leading \(length)")
                }
                input.skip(4)
            }
        }
    }

    private func parseBlock(type: UInt32, _ b: ArraySlice<UInt8>, start: Int64, record: Int) throws(CaptureFileError) -> (CaptureFrame, ArraySlice<UInt8>)? {
        let be = bigEndian, b0 = b.startIndex
        switch type {
        case 0x0A0D_0D0A:
            let major = b.u16(12, bigEndian: be)
            guard major == 1 else {
                throw CaptureFileError(offset: start + 12, record: record, rule: .badSectionHeader, detail: "pcapng major version \(major)")
            }
            interfaces.removeAll()
            return nil
        case 1:
            guard b.count >= 20 else {
                throw CaptureFileError(offset: start + 4, record: record, rule: .badBlockLength, detail: "interface description block of \(b.count) bytes")
            }
            var iface = Interface(linkType: LinkType(rawValue: UInt32(b.u16(8, bigEndian: be))), snapLength: Int(b.u32(12, bigEndian: be)), unitsPerSecond: 1_000_000, offsetSeconds: 0)
            var p = 16
            while p + 4 <= b.count - 4 {
                let code = b.u16(p, bigEndian: be), len = Int(b.u16(p + 2, bigEndian: be))
                if code == 0 { break }
                guard p + 4 + len <= b.count - 4 else {
                    throw CaptureFileError(offset: start + Int64(p), record: record, rule: .badOption, detail: "option \(code) of \(len) bytes overruns the block")
                }
                if code == 9, len >= 1 {
                    let v = b[b0 + p + 4]
                    if v & 0x80 != 0 {
                        let e = Int(v & 0x7F)
                        guard e <= 63 else { throw CaptureFileError(offset: start + Int64(p + 4), record: record, rule: .badOption, detail: "if_tsresol 2^-\(e)") }
                        iface.unitsPerSecond = 1 << UInt64(e)
                    } else {
                        guard v <= 19 else { throw CaptureFileError(offset: start + Int64(p + 4), record: record, rule: .badOption, detail: "if_tsresol 10^-\(v)") }
                        var u: UInt64 = 1
                        for _ in 0..<v { u *= 10 }
                        iface.unitsPerSecond = u
                    }
                } else if code == 14, len == 8 {
                    iface.offsetSeconds = Int64(bitPattern: b.u64(p + 4, bigEndian: be))
                }
                p += 4 + ((len + 3) & ~3)
            }
            interfaces.append(iface)
            return nil
        case 6, 2:
            guard b.count >= 32 else {
                throw CaptureFileError(offset: start + 4, record: record, rule: .badBlockLength, detail: "packet block of \(b.count) bytes")
            }
            let ifIndex = type == 6 ? Int(b.u32(8, bigEndian: be)) : Int(b.u16(8, bigEndian: be))
            guard ifIndex < interfaces.count else {
                throw CaptureFileError(offset: start + 8, record: record, rule: .unknownInterface, detail: "interface \(ifIndex) not described (\(interfaces.count) known)")
            }
            let iface = interfaces[ifIndex]
            let raw = UInt64(b.u32(12, bigEndian: be)) << 32 | UInt64(b.u32(16, bigEndian: be))
            let capLen = Int(b.u32(20, bigEndian: be)), origLen = Int(b.u32(24, bigEndian: be))
            guard capLen <= b.count - 32 else {
                throw CaptureFileError(offset: start + 20, record: record, rule: .badCapturedLength, detail: "captured length \(capLen) does not fit a block of \(b.count) bytes")
            }
            frameNumber += 1
            return (CaptureFrame(number: frameNumber, timestamp: timestamp(raw, iface), linkType: iface.linkType, interfaceIndex: ifIndex, originalLength: origLen, data: []),
                    b[(b0 + 28)..<(b0 + 28 + capLen)])
        case 3:
            guard let iface = interfaces.first else {
                throw CaptureFileError(offset: start, record: record, rule: .unknownInterface, detail: "simple packet block before any interface description")
            }
            guard b.count >= 16 else {
                throw CaptureFileError(offset: start + 4, record: record, rule: .badBlockLength, detail: "simple packet block of \(b.count) bytes")
            }
            let origLen = Int(b.u32(8, bigEndian: be))
            var capLen = min(origLen, b.count - 16)
            if iface.snapLength > 0 { capLen = min(capLen, iface.snapLength) }
            frameNumber += 1
            // A simple packet block has no timestamp.
            return (CaptureFrame(number: frameNumber, timestamp: CaptureTimestamp(seconds: 0, nanoseconds: 0), linkType: iface.linkType, interfaceIndex: 0, originalLength: origLen, data: []),
                    b[(b0 + 12)..<(b0 + 12 + capLen)])
        default:
            return nil
        }
    }

    private func timestamp(_ raw: UInt64, _ iface: Interface) -> CaptureTimestamp {
        Self.timestamp(raw, unitsPerSecond: iface.unitsPerSecond, offsetSeconds: iface.offsetSeconds)
    }

    @inline(__always)
    private static func timestamp(_ raw: UInt64, unitsPerSecond ups: UInt64, offsetSeconds: Int64) -> CaptureTimestamp {
        let seconds = raw / ups, frac = raw % ups
        let nanos: UInt64
        if ups == 1_000_000 {
            nanos = frac * 1000  // the usual microseconds, without a wide division
        } else {
            let wide = frac.multipliedFullWidth(by: 1_000_000_000)
            nanos = ups.dividingFullWidth(wide).quotient
        }
        return CaptureTimestamp(seconds: Int64(clamping: seconds) &+ offsetSeconds, nanoseconds: Int64(nanos))
    }
}

/// A sequential byte source that holds only what the current record needs.
///
/// A regular file is mapped in memory a window at a time (``window`` bytes, the next one
/// mapped, the last one unmapped, as the reading moves on), so its bytes are read in place
/// with no copy and the resident memory stays about one window. Anything that cannot be
/// mapped (a pipe, a special file, a failed `mmap`) is read with `read(2)` into one buffer
/// that is reused.
///
/// Another process may change the file while it is read. A file that grows (a live capture
/// written by tcpdump) is read on: each window is mapped only as far as the file reaches when
/// it is mapped (`fstat`), and the next one sees what was appended since. A file that shrinks
/// under a mapped window would raise SIGBUS when the lost pages are touched: each window is
/// registered with the CMapGuard handler, which answers such a fault with zero pages and
/// raises the window's flag; the reader tests it before it hands a record on, and then stops
/// (``shrunkTo``): the reading ends with an error saying the file was truncated.
///
/// The general path's records (``slice(_:_:)``) are copied into a reused array; the fast
/// path (``withBuffered(_:)``) reads them where they are.
final class ByteInput {
    private var fd: Int32 = -1
    /// The bytes are `base[start ..< end]`; `base` is the mapped window or the read buffer.
    private var base: UnsafeMutableRawPointer?
    private var start = 0
    private var end = 0
    /// File offset of `base[start]`.
    private(set) var offset: Int64 = 0
    private var eof = false
    /// Whether the file is read through mapped windows.
    private var mapped = false
    private var windowLength = 0
    /// The read buffer (when not mapped) and its size.
    private var buffer: UnsafeMutableRawPointer?
    private var capacity = 0
    /// The general path's copy of the current record.
    private var scratch: [UInt8] = []
    /// The CMapGuard slot of the mapped window (-1: none).
    private(set) var guardSlot: Int32 = -1
    /// The file's size when it was found to have shrunk under the reading; nothing more is read.
    private(set) var shrunkTo: Int64?
    private static let chunk = 1 << 20
    private static let window = 4 << 20

    init(fd: Int32) {
        self.fd = fd
        var st = stat()
        mapped = fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
    }

    init(bytes: [UInt8]) {
        capacity = max(bytes.count, 1)
        buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        bytes.withUnsafeBytes { if let b = $0.baseAddress { buffer!.copyMemory(from: b, byteCount: bytes.count) } }
        base = buffer
        end = bytes.count
        eof = true
    }

    deinit {
        unmap()
        buffer?.deallocate()
        if fd >= 0 { _ = close(fd) }
    }

    var available: Int { end - start }

    /// Makes at least `n` bytes available if the file holds them.
    func ensure(_ n: Int) -> Bool {
        if shrunkTo != nil || truncatedUnderWindow { return false }
        if available >= n { return true }
        if mapped {
            mapWindow(n)
            if mapped { return available >= n }
        }
        while available < n && !eof {
            let have = available
            if start > 0 {
                if have > 0 { buffer!.copyMemory(from: buffer! + start, byteCount: have) }
                start = 0
                end = have
            }
            let room = max(Self.chunk, n)
            if capacity < room {
                let bigger = UnsafeMutableRawPointer.allocate(byteCount: room, alignment: 16)
                if have > 0 { bigger.copyMemory(from: buffer!, byteCount: have) }
                buffer?.deallocate()
                buffer = bigger
                capacity = room
            }
            base = buffer
            var got: Int
            repeat { got = read(fd, buffer! + end, capacity - end) } while got < 0 && errno == EINTR
            if got <= 0 { eof = true } else { end += got }
        }
        return available >= n
    }

    /// Maps the window that starts at the page holding ``offset`` and holds `n` bytes from it
    /// (more, up to ``window``, when the file has them); falls back to reading if `mmap` fails.
    private func mapWindow(_ n: Int) {
        unmap()
        var st = stat()
        guard fstat(fd, &st) == 0 else { return fallBack() }
        if Int64(st.st_size) < offset {
            // Shrunk below where the reading is: another process truncated it.
            shrunkTo = Int64(st.st_size)
            return
        }
        let page = Int64(sysconf(Int32(_SC_PAGESIZE)))
        let from = offset - offset % page
        let delta = Int(offset - from)
        let length = Int(min(Int64(st.st_size) - from, Int64(max(Self.window, delta + n))))
        guard length > delta else { return }  // the end of the file
        guard let p = mmap(nil, length, PROT_READ, MAP_PRIVATE, fd, off_t(from)), p != UnsafeMutableRawPointer(bitPattern: -1) else { return fallBack() }
        guardSlot = mg_register(p, length)
        guard guardSlot >= 0 else {
            // No guard for this window: read instead of mapping.
            _ = munmap(p, length)
            return fallBack()
        }
        _ = madvise(p, length, MADV_SEQUENTIAL)
        base = p
        windowLength = length
        start = delta
        end = length
    }

    private func unmap() {
        if guardSlot >= 0 {
            _ = truncatedUnderWindow  // noted before the flag goes with the window
            mg_unregister(guardSlot)
            guardSlot = -1
        }
        if mapped, let b = base, windowLength > 0 { _ = munmap(b, windowLength) }
        if mapped { base = nil }
        windowLength = 0
        start = 0
        end = 0
    }

    /// Whether the file shrank under the mapped window (a load in it was answered with zeros);
    /// once it has, ``shrunkTo`` holds the file's size and nothing more is available.
    var truncatedUnderWindow: Bool {
        guard guardSlot >= 0, mg_hit(guardSlot) != 0 else { return false }
        if shrunkTo == nil {
            var st = stat()
            shrunkTo = fstat(fd, &st) == 0 ? Int64(st.st_size) : offset
        }
        start = end
        return true
    }

    /// Compares the file's size with the end of the mapped window and notes a shrinkage (bytes
    /// past a new end inside its last page read as zeros without a fault). A system call: for
    /// the rare records that look like such zeros, and on errors.
    func recheckSize() {
        guard mapped, shrunkTo == nil, windowLength > 0 else { return }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return }
        if Int64(st.st_size) < offset + Int64(available) {
            shrunkTo = Int64(st.st_size)
            start = end
        }
    }

    /// Whether the file was found to have shrunk under the reading (tested before a record read
    /// from a mapped window is trusted).
    var shrank: Bool { shrunkTo != nil || truncatedUnderWindow }

    /// Reads from ``offset`` on with `read(2)`.
    private func fallBack() {
        mapped = false
        if lseek(fd, off_t(offset), SEEK_SET) < 0 { eof = true }
    }

    /// Consumes `n` bytes, reading and dropping past the buffer if needed.
    func skip(_ n: Int) {
        let here = min(n, available)
        start += here
        offset += Int64(here)
        var left = n - here
        if left > 0 && mapped {
            // Past the window: the next one is mapped where the reading goes on.
            unmap()
            offset += Int64(left)
            left = 0
        }
        while left > 0, ensure(1) {
            let k = min(left, available)
            start += k
            offset += Int64(k)
            left -= k
        }
        if start == end && !mapped { start = 0; end = 0 }
    }

    /// The available bytes, lent to `body` (which must not keep the pointer).
    func withBuffered<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        body(UnsafeRawBufferPointer(start: base.map { UnsafeRawPointer($0 + start) }, count: available))
    }

    /// A copy of the bytes `at ..< at + n` (valid until the next call; a slice still held then
    /// keeps its bytes, the array being copied on write).
    func slice(_ at: Int, _ n: Int) -> ArraySlice<UInt8> {
        scratch.removeAll(keepingCapacity: true)
        if n > 0 { scratch.append(contentsOf: UnsafeBufferPointer(start: (base! + start + at).assumingMemoryBound(to: UInt8.self), count: n)) }
        return scratch[...]
    }

    func u16(_ at: Int, bigEndian: Bool) -> UInt16 {
        let v = UnsafeRawPointer(base!).loadUnaligned(fromByteOffset: start + at, as: UInt16.self)
        return bigEndian ? UInt16(bigEndian: v) : UInt16(littleEndian: v)
    }

    func u32(_ at: Int, bigEndian: Bool) -> UInt32 {
        let v = UnsafeRawPointer(base!).loadUnaligned(fromByteOffset: start + at, as: UInt32.self)
        return bigEndian ? UInt32(bigEndian: v) : UInt32(littleEndian: v)
    }
}

/// Integer reads at offsets from the start of the bytes (an array or a slice of one).
extension RandomAccessCollection where Element == UInt8, Index == Int {
    @inline(__always)
    func u16(_ i: Int, bigEndian: Bool) -> UInt16 {
        let a = UInt16(self[startIndex + i]), b = UInt16(self[startIndex + i + 1])
        return bigEndian ? a << 8 | b : b << 8 | a
    }
    func u32(_ i: Int, bigEndian: Bool) -> UInt32 {
        let a = UInt32(u16(i, bigEndian: bigEndian)), b = UInt32(u16(i + 2, bigEndian: bigEndian))
        return bigEndian ? a << 16 | b : b << 16 | a
    }
    func u64(_ i: Int, bigEndian: Bool) -> UInt64 {
        let a = UInt64(u32(i, bigEndian: bigEndian)), b = UInt64(u32(i + 4, bigEndian: bigEndian))
        return bigEndian ? a << 32 | b : b << 32 | a
    }
}
