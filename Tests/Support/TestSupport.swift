// Helpers shared by the test targets (a plain library target, not a test target).
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing

/// Where the repository, its fixtures and the shared corpora are.
public enum TestPaths {
    /// The repository's root (this file is Tests/Support/TestSupport.swift).
    public static let repoRoot: String = {
        var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/")
    }()

    /// `../shared/corpora` beside the repository, or `$SWITCHBOARD_CORPORA`.
    public static let corpora: String = {
        if let e = getenv("SWITCHBOARD_CORPORA") { return String(cString: e) }
        return repoRoot + "/../shared/corpora"
    }()

    /// A file or folder under the corpora (`relative` has no leading slash). Every corpus lookup
    /// of the tests goes through here, so `$SWITCHBOARD_CORPORA` moves all of them.
    public static func corpus(_ relative: String) -> String { corpora + "/" + relative }

    /// Whether a file or folder under the corpora can be read.
    public static func corporaHas(_ relative: String) -> Bool { access(corpus(relative), R_OK) == 0 }

    /// CI always has the corpora and the peers: there, missing ones fail instead of skipping.
    /// `.ci/run` exports `CI=true`; `CI` set to `false`, `0` or nothing counts as not CI.
    public static var isCI: Bool {
        guard let e = getenv("CI") else { return false }
        return !["", "0", "false", "FALSE", "False", "no"].contains(String(cString: e))
    }

    /// The one place a test decides what a missing peer, tool, corpus or oracle means: `true`
    /// when `available`; otherwise, under CI, an issue is recorded (the test fails) and, elsewhere,
    /// a "skipping" line is printed. Either way the caller returns (or continues) on `false`:
    ///
    ///     guard TestPaths.requirement("tshark", available: Tshark.available) else { return }
    @discardableResult
    public static func requirement(_ what: String, available: Bool, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        if available { return true }
        if isCI {
            Issue.record("CI is set but \(what) is missing (scripts/test installs the peers and oracles; the corpora are at \(corpora))",
                         sourceLocation: sourceLocation)
        } else {
            print("skipping: \(what) is missing (not under CI, so this is not a failure)")
        }
        return false
    }

    /// `requirement` for a file or folder under the corpora.
    @discardableResult
    public static func requireCorpus(_ relative: String, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        requirement("the corpus file \(corpus(relative))", available: corporaHas(relative), sourceLocation: sourceLocation)
    }
}

/// A suite or test trait that runs each test only when `available()` holds and otherwise goes
/// through ``TestPaths/requirement(_:available:sourceLocation:)``: under CI every test of the
/// suite fails with the reason; elsewhere it prints "skipping" and returns. Pair it with
/// `.enabled(if: X || TestPaths.isCI, …)` so a developer machine reports the suite as skipped.
public struct RequirementTrait: TestTrait, SuiteTrait, TestScoping {
    public let what: String
    public let available: @Sendable () -> Bool

    public var isRecursive: Bool { true }

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> RequirementTrait? {
        test.isSuite || testCase == nil ? nil : self
    }

    public func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        guard TestPaths.requirement(what, available: available(), sourceLocation: test.sourceLocation) else { return }
        try await function()
    }
}

extension Trait where Self == RequirementTrait {
    /// Each test needs `what` (a peer, a tool, a corpus, an oracle); see ``RequirementTrait``.
    public static func requires(_ what: String, _ available: @escaping @Sendable () -> Bool) -> Self {
        RequirementTrait(what: what, available: available)
    }

    /// Each test needs this file or folder under the corpora.
    public static func requiresCorpus(_ relative: String) -> Self {
        RequirementTrait(what: "the corpus file \(TestPaths.corpus(relative))", available: { TestPaths.corporaHas(relative) })
    }
}

/// Reads a whole file as bytes; `nil` when it cannot be opened.
public func readBytes(_ path: String) -> [UInt8]? {
    guard let f = fopen(path, "rb") else { return nil }
    defer { fclose(f) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&chunk, 1, chunk.count, f)
        if n <= 0 { break }
        out.append(contentsOf: chunk[0..<n])
    }
    return ferror(f) == 0 ? out : nil
}

/// A seeded SplitMix64 generator, so randomized tests are reproducible.
public struct TestRandom: RandomNumberGenerator, Sendable {
    public var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Whether a UDP socket is bound to 127.0.0.1:`port` (a peer started by a test is up), read from
/// /proc/net/udp without binding the port (which would race the peer for it). The table is read
/// to its end: Foundation's `String(contentsOfFile:)` stops after the first 4 KiB of a proc file,
/// so an entry further down (many sockets open) was missed.
public func udpPortIsBound(_ port: UInt16) -> Bool {
    let fd = open("/proc/net/udp", O_RDONLY)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var table: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 16384)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        table.append(contentsOf: chunk[0..<n])
    }
    let hex = String(port, radix: 16, uppercase: true)
    let entry = Array(("0100007F:" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + " ").utf8)
    guard table.count >= entry.count else { return false }
    for i in 0...(table.count - entry.count) where table[i] == entry[0] && table[i..<(i + entry.count)].elementsEqual(entry) {
        return true
    }
    return false
}
