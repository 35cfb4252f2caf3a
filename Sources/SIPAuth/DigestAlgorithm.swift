import COpenSSL

/// A Digest algorithm (RFC 7616 §3.3, RFC 8760): the hash and whether it is a session
/// (`-sess`) variant.
public enum DigestAlgorithm: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// MD5 (RFC 2617; kept for compatibility, RFC 8760 §2.1).
    case md5 = "MD5"
    /// MD5 with the session HA1.
    case md5Sess = "MD5-sess"
    /// SHA-256 (RFC 7616, RFC 8760).
    case sha256 = "SHA-256"
    /// SHA-256 with the session HA1.
    case sha256Sess = "SHA-256-sess"
    /// SHA-512/256 (RFC 7616, RFC 8760).
    case sha512_256 = "SHA-512-256"
    /// SHA-512/256 with the session HA1.
    case sha512_256Sess = "SHA-512-256-sess"

    /// Parses an `algorithm` token, case-insensitively; `nil` for unknown algorithms.
    public init?(token: String) {
        let l = token.lowercased()
        guard let a = DigestAlgorithm.allCases.first(where: { $0.rawValue.lowercased() == l }) else { return nil }
        self = a
    }

    /// The token written in headers.
    public var token: String { rawValue }
    /// The token, as written in headers.
    public var description: String { rawValue }

    /// Whether this is a `-sess` variant (HA1 mixes in the nonce and cnonce).
    public var isSession: Bool {
        switch self {
        case .md5Sess, .sha256Sess, .sha512_256Sess: return true
        case .md5, .sha256, .sha512_256: return false
        }
    }

    /// The variant without `-sess`.
    public var base: DigestAlgorithm {
        switch self {
        case .md5, .md5Sess: return .md5
        case .sha256, .sha256Sess: return .sha256
        case .sha512_256, .sha512_256Sess: return .sha512_256
        }
    }

    /// Preference when several challenges are offered: SHA-512-256 > SHA-256 > MD5.
    public var strength: Int {
        switch base {
        case .sha512_256: return 3
        case .sha256: return 2
        default: return 1
        }
    }

    var openSSLName: String {
        switch base {
        case .sha512_256: return "SHA512-256"
        case .sha256: return "SHA256"
        default: return "MD5"
        }
    }

    /// The lower-case hex digest of `bytes` under this algorithm's hash.
    public func hash(_ bytes: [UInt8]) -> String {
        var out = [UInt8](repeating: 0, count: 64)
        var n: UInt32 = 0
        let ok = openSSLName.withCString { name in
            bytes.withUnsafeBufferPointer { b in
                out.withUnsafeMutableBufferPointer { o in
                    co_digest(name, b.baseAddress, b.count, o.baseAddress, &n)
                }
            }
        }
        // MD5, SHA-256 and SHA-512/256 are built into every OpenSSL 3 default provider.
        precondition(ok == 1, "OpenSSL digest \(openSSLName) unavailable")
        return hexString(out[0..<Int(n)])
    }

    /// The lower-case hex digest of a string's UTF-8 bytes.
    public func hash(_ text: String) -> String { hash(Array(text.utf8)) }
}

/// A quality of protection (RFC 7616 §3.3).
public enum DigestQOP: String, Sendable, Hashable, CaseIterable {
    /// Authentication only.
    case auth = "auth"
    /// Authentication with integrity protection of the body.
    case authInt = "auth-int"
}

/// The Digest computations of RFC 7616 §3.4.1–§3.4.3 (RFC 2617 §3.2.2 when `qop` is absent).
public enum DigestComputation {
    /// HA1 without the session step: `H(username ":" realm ":" password)`.
    public static func baseHA1(_ algorithm: DigestAlgorithm, username: String, realm: String, password: String) -> String {
        algorithm.hash("\(username):\(realm):\(password)")
    }

    /// HA1 for `algorithm` from the base HA1: for `-sess`, `H(baseHA1 ":" nonce ":" cnonce)`.
    public static func ha1(_ algorithm: DigestAlgorithm, baseHA1: String, nonce: String, cnonce: String?) -> String {
        guard algorithm.isSession else { return baseHA1 }
        return algorithm.hash("\(baseHA1):\(nonce):\(cnonce ?? "")")
    }

    /// HA2: `H(method ":" uri)`, or `H(method ":" uri ":" H(body))` for `auth-int`.
    public static func ha2(_ algorithm: DigestAlgorithm, method: String, uri: String, qop: DigestQOP?, body: [UInt8]) -> String {
        if qop == .authInt { return algorithm.hash("\(method):\(uri):\(algorithm.hash(body))") }
        return algorithm.hash("\(method):\(uri)")
    }

    /// The response: `H(HA1 ":" nonce ":" nc ":" cnonce ":" qop ":" HA2)`, or
    /// `H(HA1 ":" nonce ":" HA2)` without qop (RFC 2069 compatibility).
    public static func response(_ algorithm: DigestAlgorithm, ha1: String, nonce: String, nc: String?, cnonce: String?, qop: DigestQOP?, ha2: String) -> String {
        guard let q = qop else { return algorithm.hash("\(ha1):\(nonce):\(ha2)") }
        return algorithm.hash("\(ha1):\(nonce):\(nc ?? ""):\(cnonce ?? ""):\(q.rawValue):\(ha2)")
    }

    /// The hashed username of RFC 7616 §3.4.4: `H(username ":" realm)`.
    public static func userhash(_ algorithm: DigestAlgorithm, username: String, realm: String) -> String {
        algorithm.hash("\(username):\(realm)")
    }

    /// The nonce count as written: eight lower-case hex digits.
    public static func nonceCountText(_ nc: UInt32) -> String {
        let h = String(nc, radix: 16)
        return String(repeating: "0", count: max(0, 8 - h.utf8.count)) + h
    }
}

let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

func hexString<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count * 2)
    for b in bytes {
        out.append(hexDigits[Int(b >> 4)])
        out.append(hexDigits[Int(b & 0x0F)])
    }
    return String(decoding: out, as: UTF8.self)
}

/// Decodes lower- or upper-case hex; `nil` on odd length or a non-hex byte.
func hexBytes(_ text: String) -> [UInt8]? {
    let u = Array(text.utf8)
    guard u.count % 2 == 0 else { return nil }
    var out: [UInt8] = []
    out.reserveCapacity(u.count / 2)
    var i = 0
    while i < u.count {
        guard let hi = hexValue(u[i]), let lo = hexValue(u[i + 1]) else { return nil }
        out.append(hi << 4 | lo)
        i += 2
    }
    return out
}

func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
    default: return nil
    }
}

/// Compares two byte strings in time that depends only on their lengths.
func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var diff: UInt8 = 0
    for i in 0..<a.count { diff |= a[i] ^ b[i] }
    return diff == 0
}

func hmacSHA256(key: [UInt8], data: [UInt8]) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: 32)
    let ok = key.withUnsafeBufferPointer { k in
        data.withUnsafeBufferPointer { d in
            out.withUnsafeMutableBufferPointer { o in
                co_hmac_sha256(k.baseAddress, k.count, d.baseAddress, d.count, o.baseAddress)
            }
        }
    }
    precondition(ok == 1, "OpenSSL HMAC-SHA-256 failed")
    return out
}

func randomHex<R: RandomNumberGenerator>(bytes count: Int, using rng: inout R) -> String {
    var b: [UInt8] = []
    b.reserveCapacity(count)
    while b.count < count {
        var w = rng.next()
        for _ in 0..<8 where b.count < count {
            b.append(UInt8(truncatingIfNeeded: w))
            w >>= 8
        }
    }
    return hexString(b)
}
