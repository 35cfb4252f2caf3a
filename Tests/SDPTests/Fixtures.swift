#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import SDP
import Testing

/// Access to the SDP fixtures in `Fixtures/sdp`, located relative to this
/// source file so the tests work from any checkout (and through symlinks).
enum Fixtures {
    /// `<package root>/Fixtures/sdp`, derived from this file's path
    /// (`<package root>/Tests/SDPTests/Fixtures.swift`).
    static let directory: String = {
        var components = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        components.removeLast(3)
        return components.joined(separator: "/") + "/Fixtures/sdp"
    }()

    /// The names of all `.sdp` fixtures, sorted.
    static var names: [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return entries.filter { $0.hasSuffix(".sdp") }.sorted()
    }

    /// The bytes of one fixture.
    static func bytes(_ name: String) throws -> [UInt8] {
        let data = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
        return [UInt8](data)
    }

    /// Parses one fixture.
    static func parse(_ name: String) throws -> SessionDescription {
        try SessionDescription.parse(bytes(name))
    }

    /// True when every line ending is CRLF and the input ends with one.
    static func isCRLF(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 2, bytes.suffix(2) == [0x0D, 0x0A] else { return false }
        for (i, b) in bytes.enumerated() where b == 0x0A {
            if i == 0 || bytes[i - 1] != 0x0D { return false }
        }
        return true
    }

    /// Converts LF line endings to CRLF (CRLF stays CRLF) and ensures a final line ending.
    static func toCRLF(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        for (i, b) in bytes.enumerated() {
            if b == 0x0A, i == 0 || bytes[i - 1] != 0x0D { out.append(0x0D) }
            out.append(b)
        }
        if out.suffix(2) != [0x0D, 0x0A] { out += [0x0D, 0x0A] }
        return out
    }
}

/// Joins lines with CRLF and adds a final CRLF.
func sdp(_ lines: String...) -> String {
    lines.map { $0 + "\r\n" }.joined()
}

/// Joins lines with CRLF and adds a final CRLF.
func sdp(_ lines: [String]) -> String {
    lines.map { $0 + "\r\n" }.joined()
}

/// A minimal valid offer used as a base by many tests.
let minimalLines = [
    "v=0",
    "o=- 1 1 IN IP4 192.0.2.1",
    "s=-",
    "c=IN IP4 192.0.2.1",
    "t=0 0",
    "m=audio 5000 RTP/AVP 0",
    "a=rtpmap:0 PCMU/8000",
]

/// Parses, expecting success.
func parseOK(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> SessionDescription {
    do {
        return try SessionDescription.parse(text)
    } catch {
        Issue.record("unexpected parse error: \(error)", sourceLocation: sourceLocation)
        throw error
    }
}

/// Parses, expecting failure, and returns the error.
func parseError(_ text: String, limits: SDPLimits = .default) -> SDPParseError? {
    parseError(Array(text.utf8), limits: limits)
}

/// Parses, expecting failure, and returns the error.
func parseError(_ bytes: [UInt8], limits: SDPLimits = .default) -> SDPParseError? {
    do {
        _ = try SessionDescription.parse(bytes, limits: limits)
        return nil
    } catch {
        return error
    }
}
