import Testing
import SIPAuth
import SIPMessage

@Suite("Digest test vectors")
struct VectorTests {
    @Test func hashes() {
        #expect(DigestAlgorithm.md5.hash("") == "d41d8cd98f00b204e9800998ecf8427e")
        #expect(DigestAlgorithm.sha256.hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        // FIPS 180-4 example for SHA-512/256.
        #expect(DigestAlgorithm.sha512_256.hash("abc") == "53048e2681941ef99b2e29b76b4c7dabe4c2d0c634fc6d46e0e2f13107e7af23")
        #expect(DigestAlgorithm.sha256Sess.hash("abc") == DigestAlgorithm.sha256.hash("abc"))
    }

    @Test func algorithmTokens() {
        #expect(DigestAlgorithm(token: "md5") == .md5)
        #expect(DigestAlgorithm(token: "SHA-512-256-SESS") == .sha512_256Sess)
        #expect(DigestAlgorithm(token: "SHA-1") == nil)
        #expect(DigestComputation.nonceCountText(1) == "00000001")
        #expect(DigestComputation.nonceCountText(0xABCDEF12) == "abcdef12")
    }

    static func rfc7616Challenge(_ alg: String) -> String {
        """
        Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=\(alg), \
        nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"
        """
    }

    /// RFC 7616 §3.9.1.
    @Test(arguments: [
        ("MD5", "8ca523f5e9506fed4657c9700eebdbec"),
        ("SHA-256", "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1"),
    ])
    func rfc7616Example(algorithm: String, expected: String) throws {
        let c = try AuthenticationHeader(Self.rfc7616Challenge(algorithm))
        let a = try DigestClient.answer(
            challenge: c, username: "Mufasa", password: "Circle of Life", method: "GET", uri: "/dir/index.html",
            cnonce: "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ", nonceCount: 1
        )
        #expect(a.response == expected)
        #expect(a["qop"] == "auth")
        #expect(a.nonceCount == "00000001")
        #expect(a.opaque == "FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS")
        let text = a.description
        #expect(text.contains("algorithm=\(algorithm)"))
        #expect(text.contains("qop=auth,") || text.hasSuffix("qop=auth"))
        #expect(text.contains("nc=00000001"))
        #expect(text.contains("username=\"Mufasa\""))
        #expect(text.contains("response=\"\(expected)\""))
        #expect(text.contains("uri=\"/dir/index.html\""))
    }

    /// RFC 2617 §3.5 (no algorithm parameter: MD5).
    @Test func rfc2617Example() throws {
        let c = try AuthenticationHeader("""
            Digest realm="testrealm@host.com", qop="auth,auth-int", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", \
            opaque="5ccc069c403ebaf9f0171e9517f40e41"
            """)
        let a = try DigestClient.answer(
            challenge: c, username: "Mufasa", password: "Circle Of Life", method: "GET", uri: "/dir/index.html",
            cnonce: "0a4f113b", nonceCount: 1
        )
        #expect(a.response == "6629fae49393a05397450978507c4ef1")
        #expect(a.algorithm == "MD5")
    }

    /// RFC 2069 form (no qop): response = MD5(HA1:nonce:HA2), no cnonce or nc.
    @Test func rfc2069Compatibility() throws {
        let c = try AuthenticationHeader(#"Digest realm="testrealm@host.com", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093""#)
        let a = try DigestClient.answer(
            challenge: c, username: "Mufasa", password: "Circle Of Life", method: "GET", uri: "/dir/index.html",
            cnonce: "unused", nonceCount: 1
        )
        let ha1 = DigestAlgorithm.md5.hash("Mufasa:testrealm@host.com:Circle Of Life")
        let ha2 = DigestAlgorithm.md5.hash("GET:/dir/index.html")
        #expect(a.response == DigestAlgorithm.md5.hash("\(ha1):dcd98b7102dd2f0e8b11d0f600bfb0c093:\(ha2)"))
        #expect(a.cnonce == nil)
        #expect(a.nonceCount == nil)
        #expect(a["qop"] == nil)
    }

    /// -sess: HA1 = H(H(user:realm:pass):nonce:cnonce), checked by hand.
    @Test func sessionHA1() throws {
        let c = try AuthenticationHeader(#"Digest realm="r", nonce="n", qop="auth", algorithm=SHA-256-sess"#)
        let a = try DigestClient.answer(challenge: c, username: "u", password: "p", method: "REGISTER", uri: "sip:r", cnonce: "c", nonceCount: 2)
        let h = DigestAlgorithm.sha256
        let ha1 = h.hash("\(h.hash("u:r:p")):n:c")
        let ha2 = h.hash("REGISTER:sip:r")
        #expect(a.response == h.hash("\(ha1):n:00000002:c:auth:\(ha2)"))
        #expect(a.algorithm == "SHA-256-sess")
    }

    /// auth-int: HA2 = H(method:uri:H(body)).
    @Test func authIntHA2() throws {
        let c = try AuthenticationHeader(#"Digest realm="r", nonce="n", qop="auth-int", algorithm=MD5"#)
        let body = Array("v=0\r\n".utf8)
        let a = try DigestClient.answer(challenge: c, username: "u", password: "p", method: "INVITE", uri: "sip:b@r", body: body, cnonce: "c", nonceCount: 1)
        let h = DigestAlgorithm.md5
        let ha2 = h.hash("INVITE:sip:b@r:\(h.hash(body))")
        #expect(a.response == h.hash("\(h.hash("u:r:p")):n:00000001:c:auth-int:\(ha2)"))
        #expect(a["qop"] == "auth-int")
    }

    @Test func userhashValue() throws {
        let c = try AuthenticationHeader(#"Digest realm="api@example.org", nonce="n", qop="auth", algorithm=SHA-512-256, userhash=true"#)
        let a = try DigestClient.answer(challenge: c, username: "Jäsøn Doe", password: "Secret, or not?", method: "GET", uri: "/doe.json", cnonce: "c", nonceCount: 1)
        #expect(a.username == DigestAlgorithm.sha512_256.hash("Jäsøn Doe:api@example.org"))
        #expect(a.username?.utf8.count == 64)
        #expect(a["userhash"] == "true")
        #expect(a.description.contains("userhash=true"))
    }
}
