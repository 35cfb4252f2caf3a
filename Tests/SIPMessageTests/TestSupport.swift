@_exported import SwitchboardTestSupport
import Testing
@testable import SIPMessage
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Paths of the project's own fixtures and of the shared corpora beside the repository.
enum Paths {
    static let repoRoot = TestPaths.repoRoot
    static let fixtures = repoRoot + "/Fixtures/sip"
    static let corpora = TestPaths.corpora
    static var corporaAvailable: Bool { TestPaths.corporaHas("rfc4475/EXPECTATIONS.tsv") }
    /// CI always has the corpora: there a missing folder fails instead of skipping.
    static var isCI: Bool { TestPaths.isCI }
}


func listDirectory(_ path: String) -> [String] {
    guard let d = opendir(path) else { return [] }
    defer { closedir(d) }
    var names: [String] = []
    while let e = readdir(d) {
        let name = withUnsafeBytes(of: e.pointee.d_name) { raw in String(cString: raw.bindMemory(to: CChar.self).baseAddress!) }
        if name != "." && name != ".." { names.append(name) }
    }
    return names.sorted()
}

func fixture(_ name: String) throws -> [UInt8] {
    try #require(readBytes(Paths.fixtures + "/" + name), "missing fixture \(name)")
}

func crlf(_ s: String) -> [UInt8] { Array(s.replacingOccurrences("\n", "\r\n").utf8) }

extension String {
    func replacingOccurrences(_ a: String, _ b: String) -> String {
        var out = ""
        var rest = self[...]
        while let r = rest.range(of: a) {
            out += rest[..<r.lowerBound] + b
            rest = rest[r.upperBound...]
        }
        return out + rest
    }
}

extension Substring {
    func range(of s: String) -> Range<Substring.Index>? {
        guard !s.isEmpty else { return nil }
        var i = startIndex
        while i < endIndex {
            if self[i...].hasPrefix(s) { return i..<index(i, offsetBy: s.count) }
            i = index(after: i)
        }
        return nil
    }
}

/// Expects `body` to throw a SIPParseError with `rule`, returning it.
@discardableResult
func expectParseError(_ rule: SIPParseError.Rule, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) -> SIPParseError? {
    do {
        try body()
        Issue.record("expected \(rule) error, got success", sourceLocation: sourceLocation)
    } catch let e as SIPParseError {
        #expect(e.rule == rule, "got \(e)", sourceLocation: sourceLocation)
        return e
    } catch {
        Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
    }
    return nil
}
