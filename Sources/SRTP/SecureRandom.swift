import CSRTP

/// Bytes from the operating system's CSPRNG: `getrandom(2)` on Linux, `arc4random_buf` (the
/// kernel's CSPRNG) on Apple platforms.
public enum SecureRandom {
    /// `count` random bytes. Traps only if the kernel's generator is unusable, which leaves no
    /// safe way to make keys.
    public static func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        let status = out.withUnsafeMutableBytes { buffer -> Int32 in
            guard let base = buffer.baseAddress else { return 0 }
            return csrtp_random(base, count)
        }
        precondition(status == 0, "the kernel's random generator failed")
        return out
    }
}
