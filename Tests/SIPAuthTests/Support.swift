@_exported import SwitchboardTestSupport
import SIPAuth
import SIPMessage

typealias SplitMix64 = TestRandom

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
