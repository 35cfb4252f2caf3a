#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a WAV file was refused: where, and which rule.
public typealias WAVError = MediaFormatError<WAVRule>

/// The rules a WAV file is checked against (``WAVError``).
public enum WAVRule: String, MediaFormatRule {
    /// Not a `RIFF` file, or its form type is not `WAVE`.
    case notWAVE
    /// A chunk header or body runs past the end of the file.
    case truncatedChunk
    /// No `fmt ` chunk before the `data` chunk, or a `fmt ` chunk under 16 bytes.
    case missingFormat
    /// No `data` chunk.
    case missingData
    /// A format tag other than PCM (1), A-law (6), µ-law (7), or extensible with one of those.
    case unsupportedFormat
    /// PCM with other than 16 bits per sample, or G.711 with other than 8.
    case unsupportedBits
    /// Channels outside 1…8, a sample rate outside 1…384000, or a block align or byte rate
    /// that does not match.
    case badParameters
    /// A data chunk whose length is not a whole number of frames.
    case partialFrame
    /// A file or data chunk larger than the limit.
    case tooLarge
    /// The file could not be opened, read or written (the detail says why).
    case io
    /// Samples that do not fit the format when writing (e.g. a count not a multiple of channels).
    case badSamples

    /// `WAV error at byte`.
    public static var errorLabel: String { "WAV error at byte" }
}

/// Audio of a WAV file: 16-bit linear PCM samples, or G.711 bytes as stored.
public enum WAVSamples: Sendable, Hashable {
    /// Signed 16-bit samples, interleaved by channel.
    case pcm16([Int16])
    /// G.711 µ-law bytes (format tag 7), interleaved.
    case muLaw([UInt8])
    /// G.711 A-law bytes (format tag 6), interleaved.
    case aLaw([UInt8])

    /// Samples in all channels together.
    public var count: Int {
        switch self {
        case .pcm16(let s): s.count
        case .muLaw(let b), .aLaw(let b): b.count
        }
    }
}

/// A RIFF/WAVE file: 16-bit PCM (mono, stereo, any channel count up to 8, any rate) read and
/// written; 8-bit µ-law and A-law (format tags 7 and 6, plain or `WAVE_FORMAT_EXTENSIBLE`) read
/// and written as raw bytes (decoding them is the G.711 codec's job).
///
/// Policy: chunks other than `fmt ` and `data` are skipped (their pad byte too); the RIFF size
/// is not trusted (streaming writers leave it 0 or wrong), chunk sizes are: a chunk running past
/// the end of the file is an error, as is a `data` chunk that is not whole frames. Sizes are
/// bounded by `maxDataBytes`.
public struct WAVFile: Sendable, Hashable {
    /// The default bound on the data chunk (and on files read): 256 MiB.
    public static let defaultMaxDataBytes = 256 << 20

    /// Samples per second (per channel).
    public var sampleRate: Int
    /// Interleaved channels.
    public var channels: Int
    /// The audio.
    public var samples: WAVSamples

    /// Creates a file; `samples.count` must be a multiple of `channels` when written.
    public init(sampleRate: Int, channels: Int = 1, samples: WAVSamples) {
        self.sampleRate = sampleRate
        self.channels = channels
        self.samples = samples
    }

    /// Frames (samples per channel).
    public var frameCount: Int { channels > 0 ? samples.count / channels : 0 }

    /// The duration of the audio.
    public var duration: Duration {
        sampleRate > 0 ? .nanoseconds(Int64(frameCount) * 1_000_000_000 / Int64(sampleRate)) : .zero
    }

    /// Parses a whole file.
    public init(parsing bytes: [UInt8], maxDataBytes: Int = WAVFile.defaultMaxDataBytes) throws(WAVError) {
        func u32(_ i: Int) -> Int { Int(bytes[i]) | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2]) << 16 | Int(bytes[i + 3]) << 24 }
        func u16(_ i: Int) -> Int { Int(bytes[i]) | Int(bytes[i + 1]) << 8 }
        func tag(_ i: Int) -> String { String(decoding: bytes[i..<i + 4], as: UTF8.self) }
        guard bytes.count >= 12, tag(0) == "RIFF", tag(8) == "WAVE" else {
            throw WAVError(offset: 0, rule: .notWAVE, detail: "no RIFF/WAVE header")
        }
        var format: (tag: Int, channels: Int, rate: Int, byteRate: Int, align: Int, bits: Int)?
        var i = 12
        while i + 8 <= bytes.count {
            let id = tag(i)
            let size = u32(i + 4)
            let body = i + 8
            if id == "data" {
                guard let f = format else { throw WAVError(offset: i, rule: .missingFormat, detail: "data chunk before fmt") }
                guard size <= maxDataBytes else { throw WAVError(offset: i + 4, rule: .tooLarge, detail: "data chunk of \(size) bytes, limit \(maxDataBytes)") }
                guard body + size <= bytes.count else {
                    throw WAVError(offset: i + 4, rule: .truncatedChunk, detail: "data chunk of \(size) bytes, \(bytes.count - body) in the file")
                }
                guard size % f.align == 0 else { throw WAVError(offset: i + 4, rule: .partialFrame, detail: "\(size) bytes, frames of \(f.align)") }
                sampleRate = f.rate
                channels = f.channels
                let data = bytes[body..<body + size]
                switch f.tag {
                case 1:
                    var s = [Int16](repeating: 0, count: size / 2)
                    var k = body
                    for n in s.indices {
                        s[n] = Int16(bitPattern: UInt16(bytes[k]) | UInt16(bytes[k + 1]) << 8)
                        k += 2
                    }
                    samples = .pcm16(s)
                case 6: samples = .aLaw(Array(data))
                default: samples = .muLaw(Array(data))
                }
                return
            }
            guard body + size <= bytes.count else {
                throw WAVError(offset: i + 4, rule: .truncatedChunk, detail: "\(id) chunk of \(size) bytes, \(bytes.count - body) in the file")
            }
            if id == "fmt " {
                guard size >= 16 else { throw WAVError(offset: i + 4, rule: .missingFormat, detail: "fmt chunk of \(size) bytes") }
                var t = u16(body)
                if t == 0xFFFE {
                    // WAVE_FORMAT_EXTENSIBLE: the real tag is the first two bytes of the subformat GUID.
                    guard size >= 40 else { throw WAVError(offset: i + 4, rule: .missingFormat, detail: "extensible fmt chunk of \(size) bytes") }
                    t = u16(body + 24)
                }
                let f = (tag: t, channels: u16(body + 2), rate: u32(body + 4), byteRate: u32(body + 8), align: u16(body + 12), bits: u16(body + 14))
                guard [1, 6, 7].contains(f.tag) else { throw WAVError(offset: body, rule: .unsupportedFormat, detail: "format tag \(f.tag)") }
                guard (f.tag == 1 && f.bits == 16) || (f.tag != 1 && f.bits == 8) else {
                    throw WAVError(offset: body + 14, rule: .unsupportedBits, detail: "\(f.bits) bits for format tag \(f.tag)")
                }
                guard (1...8).contains(f.channels), (1...384_000).contains(f.rate) else {
                    throw WAVError(offset: body + 2, rule: .badParameters, detail: "\(f.channels) channels at \(f.rate) Hz")
                }
                guard f.align == f.channels * f.bits / 8, f.byteRate == f.align * f.rate else {
                    throw WAVError(offset: body + 8, rule: .badParameters, detail: "block align \(f.align), byte rate \(f.byteRate)")
                }
                format = f
            }
            i = body + size + (size & 1)
        }
        throw WAVError(offset: bytes.count, rule: format == nil ? .missingFormat : .missingData)
    }

    /// Reads a file; files larger than `maxDataBytes` plus 64 KiB of other chunks are refused unread.
    public init(path: String, maxDataBytes: Int = WAVFile.defaultMaxDataBytes) throws(WAVError) {
        guard let f = fopen(path, "rb") else { throw WAVError(offset: 0, rule: .io, detail: "cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { fclose(f) }
        let limit = maxDataBytes + 65536
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&chunk, 1, chunk.count, f)
            if n <= 0 { break }
            guard bytes.count + n <= limit else { throw WAVError(offset: limit, rule: .tooLarge, detail: "\(path) is larger than \(limit) bytes") }
            bytes.append(contentsOf: chunk[0..<n])
        }
        guard ferror(f) == 0 else { throw WAVError(offset: bytes.count, rule: .io, detail: "read error on \(path)") }
        try self.init(parsing: bytes, maxDataBytes: maxDataBytes)
    }

    /// The file's bytes: `RIFF`, a `fmt ` chunk (16 bytes for PCM; 18 with `cbSize` 0 plus a
    /// `fact` chunk for G.711), and `data`.
    public func serialized() throws(WAVError) -> [UInt8] {
        guard (1...8).contains(channels), (1...384_000).contains(sampleRate) else {
            throw WAVError(offset: 0, rule: .badParameters, detail: "\(channels) channels at \(sampleRate) Hz")
        }
        guard samples.count % channels == 0 else { throw WAVError(offset: 0, rule: .badSamples, detail: "\(samples.count) samples for \(channels) channels") }
        let (tag, bits): (Int, Int)
        var data: [UInt8]
        switch samples {
        case .pcm16(let s):
            (tag, bits) = (1, 16)
            data = [UInt8](repeating: 0, count: s.count * 2)
            for (n, v) in s.enumerated() {
                let u = UInt16(bitPattern: v)
                data[2 * n] = UInt8(u & 0xFF)
                data[2 * n + 1] = UInt8(u >> 8)
            }
        case .aLaw(let b): (tag, bits, data) = (6, 8, b)
        case .muLaw(let b): (tag, bits, data) = (7, 8, b)
        }
        guard data.count <= Int(UInt32.max) - 64 else { throw WAVError(offset: 0, rule: .tooLarge, detail: "\(data.count) bytes of data") }
        func le32(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24 & 0xFF)] }
        func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }
        let align = channels * bits / 8
        var fmt = le16(tag) + le16(channels) + le32(sampleRate) + le32(sampleRate * align) + le16(align) + le16(bits)
        var extra: [UInt8] = []
        if tag != 1 {
            fmt += le16(0)
            extra = Array("fact".utf8) + le32(4) + le32(data.count / channels)
        }
        var out = Array("RIFF".utf8) + le32(0) + Array("WAVE".utf8)
        out += Array("fmt ".utf8) + le32(fmt.count) + fmt + extra
        out += Array("data".utf8) + le32(data.count)
        out += data
        if data.count & 1 == 1 { out.append(0) }
        let riff = le32(out.count - 8)
        out.replaceSubrange(4..<8, with: riff)
        return out
    }

    /// Writes the file (replacing it).
    public func write(path: String) throws(WAVError) {
        let bytes = try serialized()
        guard let f = fopen(path, "wb") else { throw WAVError(offset: 0, rule: .io, detail: "cannot create \(path): \(String(cString: strerror(errno)))") }
        let n = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
        let closed = fclose(f)
        guard n == bytes.count, closed == 0 else { throw WAVError(offset: n, rule: .io, detail: "short write to \(path)") }
    }
}

/// Writes a WAV file as audio comes, for recordings of unknown length: the header is written
/// first with zero sizes and patched by ``close()``, so memory stays constant whatever the
/// length. One owner writes; it is not meant to be shared between threads.
public final class WAVStreamWriter {
    /// The sample encoding written.
    public enum Encoding: Sendable, Hashable {
        /// 16-bit linear PCM.
        case pcm16
        /// G.711 µ-law bytes (format tag 7).
        case muLaw
        /// G.711 A-law bytes (format tag 6).
        case aLaw
    }

    /// The largest data chunk a RIFF file can describe (its sizes are 32-bit), less the header.
    public static let maxDataBytes = Int(UInt32.max) - 64

    /// Samples per second.
    public let sampleRate: Int
    /// Interleaved channels.
    public let channels: Int
    /// The encoding.
    public let encoding: Encoding
    /// Data bytes written so far.
    public private(set) var dataBytes = 0
    private var file: UnsafeMutablePointer<FILE>?
    private let path: String
    private let dataSizeOffset: Int
    private let factOffset: Int?

    /// Creates (or replaces) the file and writes the header.
    public init(path: String, sampleRate: Int, channels: Int = 1, encoding: Encoding = .pcm16) throws(WAVError) {
        guard (1...8).contains(channels), (1...384_000).contains(sampleRate) else {
            throw WAVError(offset: 0, rule: .badParameters, detail: "\(channels) channels at \(sampleRate) Hz")
        }
        self.path = path
        self.sampleRate = sampleRate
        self.channels = channels
        self.encoding = encoding
        // The header of an empty file of this format: the sizes are patched at close.
        let samples: WAVSamples = switch encoding {
        case .pcm16: .pcm16([])
        case .muLaw: .muLaw([])
        case .aLaw: .aLaw([])
        }
        let header = try WAVFile(sampleRate: sampleRate, channels: channels, samples: samples).serialized()
        dataSizeOffset = header.count - 4
        factOffset = encoding == .pcm16 ? nil : 12 + 8 + 18 + 8  // RIFF header, fmt chunk (18), fact header
        guard let f = fopen(path, "wb") else { throw WAVError(offset: 0, rule: .io, detail: "cannot create \(path): \(String(cString: strerror(errno)))") }
        file = f
        try put(header)
    }

    deinit {
        if file != nil { try? close() }
    }

    /// Appends 16-bit samples (interleaved when there are several channels); only for ``Encoding/pcm16``.
    public func write(_ samples: [Int16]) throws(WAVError) {
        guard encoding == .pcm16 else { throw WAVError(offset: 44 + dataBytes, rule: .badSamples, detail: "PCM samples for a G.711 file") }
        var bytes = [UInt8](repeating: 0, count: samples.count * 2)
        for (n, v) in samples.enumerated() {
            let u = UInt16(bitPattern: v)
            bytes[2 * n] = UInt8(u & 0xFF)
            bytes[2 * n + 1] = UInt8(u >> 8)
        }
        try append(bytes)
    }

    /// Appends G.711 bytes; only for ``Encoding/muLaw`` and ``Encoding/aLaw``.
    public func write(encoded bytes: [UInt8]) throws(WAVError) {
        guard encoding != .pcm16 else { throw WAVError(offset: 44 + dataBytes, rule: .badSamples, detail: "G.711 bytes for a PCM file") }
        try append(bytes)
    }

    /// Pads the data to whole frames and an even length, patches the sizes and closes the file.
    /// Calling it again does nothing.
    public func close() throws(WAVError) {
        guard let f = file else { return }
        let frameBytes = channels * (encoding == .pcm16 ? 2 : 1)
        let partial = dataBytes % frameBytes
        if partial != 0 { try append([UInt8](repeating: encoding == .pcm16 ? 0 : (encoding == .muLaw ? 0xFF : 0xD5), count: frameBytes - partial)) }
        if dataBytes & 1 == 1 { try put([0]) }
        func le32(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24 & 0xFF)] }
        let total = dataSizeOffset + 4 + dataBytes + (dataBytes & 1)
        var patches: [(Int, [UInt8])] = [(4, le32(total - 8)), (dataSizeOffset, le32(dataBytes))]
        if let fact = factOffset { patches.append((fact, le32(dataBytes / channels))) }
        for (offset, bytes) in patches {
            guard fseek(f, offset, SEEK_SET) == 0 else { throw finish(WAVError(offset: offset, rule: .io, detail: "seek failed in \(path)")) }
            try put(bytes)
        }
        file = nil
        guard fclose(f) == 0 else { throw WAVError(offset: total, rule: .io, detail: "close failed for \(path)") }
    }

    private func append(_ bytes: [UInt8]) throws(WAVError) {
        guard dataBytes + bytes.count <= Self.maxDataBytes else {
            throw WAVError(offset: dataSizeOffset + 4 + dataBytes, rule: .tooLarge, detail: "a WAV file holds at most \(Self.maxDataBytes) bytes of audio")
        }
        try put(bytes)
        dataBytes += bytes.count
    }

    private func put(_ bytes: [UInt8]) throws(WAVError) {
        guard let f = file else { throw WAVError(offset: dataBytes, rule: .io, detail: "\(path) is closed") }
        let n = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
        guard n == bytes.count else { throw finish(WAVError(offset: dataBytes, rule: .io, detail: "short write to \(path)")) }
    }

    private func finish(_ error: WAVError) -> WAVError {
        if let f = file { fclose(f) }
        file = nil
        return error
    }
}
