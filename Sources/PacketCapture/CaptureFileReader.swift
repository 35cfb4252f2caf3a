#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads frames from a classic pcap or a pcapng capture, in chunks.
///
/// Memory is bounded by the block being read (at most ``maxRecordLength`` plus a read chunk),
/// not by the file size; unknown pcapng blocks are skipped without being buffered. On a
/// truncated or corrupt file, every good frame is returned first and then ``nextFrame()``
/// throws a ``CaptureFileError`` saying where and why (and keeps throwing it).
///
/// The reader owns an open file, so it is not `Sendable`: use it from one task.
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
        guard let f = fopen(path, "rb") else {
            throw CaptureFileError(offset: 0, record: 0, rule: .io, detail: "cannot open \(path): errno \(errno)")
        }
        try self.init(input: ByteInput(file: f), maxRecordLength: maxRecordLength)
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
            switch format {
            case .pcap: return try nextPcapRecord()
            case .pcapng: return try nextPcapngPacket()
            }
        } catch {
            failure = error
            throw error
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
        let ups = iface.unitsPerSecond
        let seconds = raw / ups, frac = raw % ups
        let wide = frac.multipliedFullWidth(by: 1_000_000_000)
        let nanos = ups.dividingFullWidth(wide).quotient
        return CaptureTimestamp(seconds: Int64(clamping: seconds) &+ iface.offsetSeconds, nanoseconds: Int64(nanos))
    }
}

/// A sequential byte source that buffers only what the current record needs.
final class ByteInput {
    private var file: UnsafeMutablePointer<FILE>?
    private var buffer: [UInt8]
    private var start = 0
    /// File offset of `buffer[start]`.
    private(set) var offset: Int64 = 0
    private var eof: Bool
    private static let chunk = 64 * 1024

    init(file: UnsafeMutablePointer<FILE>) {
        self.file = file
        buffer = []
        eof = false
    }

    init(bytes: [UInt8]) {
        buffer = bytes
        eof = true
    }

    deinit { if let f = file { fclose(f) } }

    var available: Int { buffer.count - start }

    /// Makes at least `n` bytes available if the file holds them.
    func ensure(_ n: Int) -> Bool {
        while available < n && !eof {
            if start > 0 {
                buffer.removeFirst(start)
                start = 0
            }
            let want = max(Self.chunk, n - available)
            let old = buffer.count
            buffer.append(contentsOf: repeatElement(0, count: want))
            let got = buffer.withUnsafeMutableBufferPointer { p in fread(p.baseAddress! + old, 1, want, file!) }
            buffer.removeLast(want - got)
            if got == 0 { eof = true }
        }
        return available >= n
    }

    /// Consumes `n` bytes, reading and dropping past the buffer if needed.
    func skip(_ n: Int) {
        var left = n
        let here = min(left, available)
        start += here
        offset += Int64(here)
        left -= here
        while left > 0, ensure(1) {
            let k = min(left, available)
            start += k
            offset += Int64(k)
            left -= k
        }
        if start == buffer.count { buffer.removeAll(keepingCapacity: true); start = 0 }
    }

    /// The buffered bytes `at ..< at + n` (valid until the next ``ensure(_:)`` or ``skip(_:)``).
    func slice(_ at: Int, _ n: Int) -> ArraySlice<UInt8> { buffer[(start + at)..<(start + at + n)] }
    func u16(_ at: Int, bigEndian: Bool) -> UInt16 { buffer.u16(start + at, bigEndian: bigEndian) }
    func u32(_ at: Int, bigEndian: Bool) -> UInt32 { buffer.u32(start + at, bigEndian: bigEndian) }
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
