// Helpers shared by the test targets (a plain library target, not a test target).
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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

    /// Whether a file or folder under the corpora can be read.
    public static func corporaHas(_ relative: String) -> Bool { access(corpora + "/" + relative, R_OK) == 0 }

    /// CI always has the corpora and the peers: there, missing ones fail instead of skipping.
    public static var isCI: Bool { getenv("CI") != nil }
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
