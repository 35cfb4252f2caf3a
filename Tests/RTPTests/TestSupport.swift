import Testing
@testable import RTP
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Bytes from hex text; spaces and `|` are ignored.
func hex(_ s: String) -> [UInt8] {
    let digits = s.unicodeScalars.filter { $0.properties.isASCIIHexDigit }.map { Character($0) }
    precondition(digits.count % 2 == 0, "odd hex")
    var out: [UInt8] = []
    var i = 0
    while i < digits.count {
        out.append(UInt8(String(digits[i...i + 1]), radix: 16)!)
        i += 2
    }
    return out
}

/// A seeded generator so every run draws the same numbers.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

enum Paths {
    static let repoRoot: String = {
        var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)  // Tests/RTPTests/TestSupport.swift
        return parts.joined(separator: "/")
    }()
    static let corpora: String = {
        if let e = getenv("SWITCHBOARD_CORPORA") { return String(cString: e) }
        return repoRoot + "/../shared/corpora"
    }()
    static var isCI: Bool { getenv("CI") != nil }
}

func readBytes(_ path: String) -> [UInt8]? {
    guard let f = fopen(path, "rb") else { return nil }
    defer { fclose(f) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&chunk, 1, chunk.count, f)
        if n <= 0 { break }
        out.append(contentsOf: chunk[0..<n])
    }
    return out
}

func listDirectory(_ path: String) -> [String]? {
    guard let d = opendir(path) else { return nil }
    defer { closedir(d) }
    var names: [String] = []
    while let e = readdir(d) {
        let name = withUnsafeBytes(of: e.pointee.d_name) { raw in String(cString: raw.bindMemory(to: CChar.self).baseAddress!) }
        if name != "." && name != ".." { names.append(name) }
    }
    return names.sorted()
}

/// Asserts that parsing throws the given rule at the given offset.
func expectRTPError(_ bytes: [UInt8], _ rule: RTPParseError.Rule, at offset: Int, sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        let p = try RTPPacket(parsing: bytes)
        Issue.record("parsed unexpectedly: \(p)", sourceLocation: sourceLocation)
    } catch {
        #expect(error == RTPParseError(offset: offset, rule: rule), sourceLocation: sourceLocation)
    }
}

/// Asserts that compound parsing throws the given rule at the given offset.
func expectRTCPError(_ bytes: [UInt8], _ rule: RTPParseError.Rule, at offset: Int, requireLeadingReport: Bool = true, sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        let p = try RTCPCompoundPacket(parsing: bytes, requireLeadingReport: requireLeadingReport)
        Issue.record("parsed unexpectedly: \(p)", sourceLocation: sourceLocation)
    } catch {
        #expect(error == RTPParseError(offset: offset, rule: rule), sourceLocation: sourceLocation)
    }
}
