@_exported import SwitchboardTestSupport
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

typealias SplitMix64 = TestRandom
typealias Paths = TestPaths

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
