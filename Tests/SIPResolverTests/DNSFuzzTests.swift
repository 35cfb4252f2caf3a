import Testing
@testable import SIPResolver
import NetworkIO

/// Seeded mutation tests: the parser must throw or succeed on any input, never trap, and what
/// it accepts must survive encode → parse unchanged.
@Suite("DNS parser robustness")
struct DNSFuzzTests {
    static func seeds() throws -> [[UInt8]] {
        let n = try DNSName("_sips._tcp.example.com")
        let t = try DNSName("sip1.example.com")
        let m = DNSMessage(
            id: 0x1234, isResponse: true, recursionAvailable: true,
            questions: [DNSQuestion(name: n, type: .srv)],
            answers: [
                DNSRecord(name: n, ttl: 60, data: .srv(DNSSRVRecord(priority: 10, weight: 5, port: 5061, target: t))),
                DNSRecord(name: try DNSName("example.com"), ttl: 60, data: .naptr(DNSNAPTRRecord(order: 1, preference: 2, flags: "s", services: "SIPS+D2T", replacement: n))),
                DNSRecord(name: try DNSName("alias.example.com"), ttl: 60, data: .cname(t)),
            ],
            authorities: [DNSRecord(name: try DNSName("example.com"), ttl: 60, data: .soa(DNSSOARecord(
                primaryServer: try DNSName("ns.example.com"), responsibleMailbox: try DNSName("h.example.com"),
                serial: 1, refresh: 2, retry: 3, expire: 4, minimum: 5)))],
            additionals: [DNSRecord(name: t, ttl: 60, data: .a(IPv4Address(192, 0, 2, 1))),
                          DNSRecord(name: t, ttl: 60, data: .aaaa(IPv6Address("2001:db8::1")!)),
                          DNSRecord(name: t, ttl: 60, data: .txt([[1, 2], [3]]))])
        return [try m.encoded(), try m.encoded(compressNames: false),
                try DNSMessage.query(id: 9, name: n, type: .naptr).encoded()]
    }

    /// Parses `bytes`; when it parses, checks encode → parse is the identity.
    static func check(_ bytes: [UInt8]) {
        guard let m = try? DNSMessage(bytes: bytes) else { return }
        for compress in [true, false] {
            guard let wire = try? m.encoded(compressNames: compress) else { continue }
            do {
                let again = try DNSMessage(bytes: wire)
                #expect(again == m)
            } catch {
                Issue.record("re-encoded message does not parse: \(error)")
            }
        }
        _ = m.answers.map(\.description)
    }

    // The loops yield now and then, so that the loopback tests running alongside are not kept
    // off the cooperative threads (two on this machine) and their timings stay meaningful.

    @Test func mutatedMessagesNeverTrap() async throws {
        var rng = SeededGenerator(seed: 0xD15EA5E)
        let seeds = try Self.seeds()
        for i in 0..<10_000 {
            if i % 50 == 0 { await Task.yield() }
            var b = seeds[i % seeds.count]
            let edits = Int.random(in: 1...6, using: &rng)
            for _ in 0..<edits {
                switch Int.random(in: 0..<6, using: &rng) {
                case 0: b[Int.random(in: 0..<b.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                case 1: b[Int.random(in: 0..<b.count, using: &rng)] ^= 1 << UInt8.random(in: 0..<8, using: &rng)
                case 2: b[Int.random(in: 0..<b.count, using: &rng)] = [0xC0, 0x3F, 0x40, 0x80, 0, 63, 255].randomElement(using: &rng)!
                case 3: if b.count > 13 { b.removeLast(Int.random(in: 1...min(20, b.count - 12), using: &rng)) }
                case 4: b.insert(UInt8.random(in: 0...255, using: &rng), at: Int.random(in: 0...b.count, using: &rng))
                default:
                    // A compression pointer to a random offset.
                    let at = Int.random(in: 12..<max(13, b.count - 1), using: &rng)
                    if at + 1 < b.count {
                        b[at] = 0xC0 | UInt8.random(in: 0...1, using: &rng)
                        b[at + 1] = UInt8.random(in: 0...255, using: &rng)
                    }
                }
                if b.isEmpty { break }
            }
            Self.check(b)
        }
    }

    @Test func randomBytesNeverTrap() async {
        var rng = SeededGenerator(seed: 42)
        for i in 0..<8_000 {
            if i % 50 == 0 { await Task.yield() }
            let count = Int.random(in: 0..<300, using: &rng)
            var b = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
            // Plausible header counts make the parser go deeper.
            if b.count >= 12 {
                for k in stride(from: 4, to: 12, by: 2) { b[k] = 0; b[k + 1] = UInt8.random(in: 0...3, using: &rng) }
            }
            Self.check(b)
        }
    }

    @Test func namesFromArbitraryTextNeverTrap() async {
        var rng = SeededGenerator(seed: 7)
        let alphabet = Array("ab.\\0129-_ .".unicodeScalars)
        for i in 0..<8_000 {
            if i % 50 == 0 { await Task.yield() }
            let count = Int.random(in: 0..<80, using: &rng)
            let text = String(String.UnicodeScalarView((0..<count).map { _ in alphabet.randomElement(using: &rng)! }))
            if let n = try? DNSName(text) {
                #expect((try? DNSName(n.description)) == n)
            }
            _ = IPv6Address(text)
            _ = IPv4Address(text)
        }
    }
}
