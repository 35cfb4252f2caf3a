import Synchronization

/// The random part of the branches the proxy writes into its Via (RFC 3261 §8.1.1.7, §16.6
/// step 8): unique and unpredictable, without a system call per request. A 128-bit key is
/// drawn once from the system's random source; each branch is SipHash-2-4 (a pseudorandom
/// function) of that key and a counter, so no two branches of a process repeat a counter
/// (they collide only as 64 random bits would) and none can be guessed from the others
/// without the key.
struct BranchSource: ~Copyable, Sendable {
    private let k0: UInt64
    private let k1: UInt64
    private let counter = Atomic<UInt64>(0)

    /// A source keyed from the system's random source.
    init() {
        var rng = SystemRandomNumberGenerator()
        self.init(k0: rng.next(), k1: rng.next())
    }

    /// A source with the given key (tests).
    init(k0: UInt64, k1: UInt64) {
        (self.k0, self.k1) = (k0, k1)
    }

    /// The next 64 bits (thread-safe: the counter advances atomically).
    func next() -> UInt64 {
        Self.sipHash24(k0: k0, k1: k1, word: counter.wrappingAdd(1, ordering: .relaxed).oldValue)
    }

    /// SipHash-2-4 of the 8-byte message `word` (little-endian) under the key `k0`, `k1`.
    static func sipHash24(k0: UInt64, k1: UInt64, word m: UInt64) -> UInt64 {
        var v0 = k0 ^ 0x736F_6D65_7073_6575, v1 = k1 ^ 0x646F_7261_6E64_6F6D
        var v2 = k0 ^ 0x6C79_6765_6E65_7261, v3 = k1 ^ 0x7465_6462_7974_6573
        func round() {
            v0 &+= v1; v1 = v1.rotatedLeft(13); v1 ^= v0; v0 = v0.rotatedLeft(32)
            v2 &+= v3; v3 = v3.rotatedLeft(16); v3 ^= v2
            v0 &+= v3; v3 = v3.rotatedLeft(21); v3 ^= v0
            v2 &+= v1; v1 = v1.rotatedLeft(17); v1 ^= v2; v2 = v2.rotatedLeft(32)
        }
        // The message block, then the last block: the length (8) in the top byte, no bytes left.
        v3 ^= m
        round(); round()
        v0 ^= m
        let last: UInt64 = 8 << 56
        v3 ^= last
        round(); round()
        v0 ^= last
        v2 ^= 0xFF
        round(); round(); round(); round()
        return v0 ^ v1 ^ v2 ^ v3
    }
}

extension UInt64 {
    fileprivate func rotatedLeft(_ n: UInt64) -> UInt64 { (self << n) | (self >> (64 - n)) }
}
