import Testing
@testable import SIPRuntime

/// Tags and Call-IDs come from ``BufferedSystemRandom``: words read from the system in blocks.
@Suite("BufferedSystemRandom")
struct BufferedSystemRandomTests {
    @Test("words across several refills are all different, and every bit varies")
    func distinct() {
        // 512 words a refill: 2,000 words take four.
        let words = (0..<2_000).map { _ in BufferedSystemRandom.word() }
        #expect(Set(words).count == words.count)
        let ored = words.reduce(UInt64(0)) { $0 | $1 }, anded = words.reduce(UInt64.max) { $0 & $1 }
        #expect(ored == .max)
        #expect(anded == 0)
    }
}
