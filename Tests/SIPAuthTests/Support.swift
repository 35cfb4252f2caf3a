import SIPAuth
import SIPMessage

/// A seeded generator so tests are reproducible.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

let testKey: [UInt8] = Array(0..<32)

func makeServer(
    realm: String = "example.com", lifetime: Int64 = 300, cacheSize: Int = 16,
    algorithms: [DigestAlgorithm] = [.sha256, .md5], qop: [DigestQOP] = [.auth], userhash: Bool = false,
    users: [String: String] = ["alice": "wonderland", "bob": "builder"]
) -> DigestServer {
    DigestServer(
        configuration: .init(realm: realm, key: testKey, nonceLifetime: lifetime, replayCacheSize: cacheSize,
                             algorithms: algorithms, qop: qop, opaque: "op4que", userhash: userhash),
        store: DigestPasswordTable(users)
    )
}

/// Replaces (or adds) one parameter of a header.
func replacing(_ h: AuthenticationHeader, _ name: String, with value: String?, quoted: Bool = false) -> AuthenticationHeader {
    var p = h.parameters.filter { $0.name.lowercased() != name.lowercased() }
    if let v = value { p.append(SIPParameter(name: name, value: v, quoted: quoted)) }
    return AuthenticationHeader(scheme: h.scheme, parameters: p)
}
