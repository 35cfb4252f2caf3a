import COpenSSL

/// A self-signed certificate and its key, made for one run of `-t l1`/`ln` without
/// `-tls_cert`/`-tls_key` (a P-256 key, SHA-256 signature, valid 30 days), in PEM.
struct SelfSignedCertificate {
    /// Why the pair could not be made: the OpenSSL call that failed.
    struct Failure: Error, CustomStringConvertible {
        var call: String
        var description: String { "\(call) failed" }
    }

    /// The certificate, PEM.
    var certificate: [UInt8]
    /// The private key, PEM (PKCS #8).
    var key: [UInt8]

    static func generate(commonName: String) throws(Failure) -> SelfSignedCertificate {
        guard let ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nil) else { throw Failure(call: "EVP_PKEY_CTX_new_id") }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_keygen_init(ctx) == 1 else { throw Failure(call: "EVP_PKEY_keygen_init") }
        guard EVP_PKEY_CTX_set_ec_paramgen_curve_nid(ctx, NID_X9_62_prime256v1) == 1 else { throw Failure(call: "EVP_PKEY_CTX_set_ec_paramgen_curve_nid") }
        var pkey: OpaquePointer?
        guard EVP_PKEY_keygen(ctx, &pkey) == 1, let pkey else { throw Failure(call: "EVP_PKEY_keygen") }
        defer { EVP_PKEY_free(pkey) }

        guard let x = X509_new() else { throw Failure(call: "X509_new") }
        defer { X509_free(x) }
        guard X509_set_version(x, 2) == 1,
              ASN1_INTEGER_set(X509_get_serialNumber(x), Int.random(in: 1...Int(Int32.max))) == 1,
              X509_gmtime_adj(X509_getm_notBefore(x), -3600) != nil,
              X509_gmtime_adj(X509_getm_notAfter(x), 30 * 86_400) != nil,
              X509_set_pubkey(x, pkey) == 1 else { throw Failure(call: "X509_set_*") }
        guard let name = X509_get_subject_name(x) else { throw Failure(call: "X509_get_subject_name") }
        let cn = Array(commonName.utf8)
        // MBSTRING_ASC = MBSTRING_FLAG | 1.
        guard X509_NAME_add_entry_by_txt(name, "CN", 0x1001, cn, Int32(cn.count), -1, 0) == 1,
              X509_set_issuer_name(x, name) == 1 else { throw Failure(call: "X509_NAME_add_entry_by_txt") }
        guard X509_sign(x, pkey, EVP_sha256()) > 0 else { throw Failure(call: "X509_sign") }

        func pem(_ write: (OpaquePointer) -> Int32) throws(Failure) -> [UInt8] {
            guard let bio = BIO_new(BIO_s_mem()) else { throw Failure(call: "BIO_new") }
            defer { BIO_free(bio) }
            guard write(bio) == 1 else { throw Failure(call: "PEM_write_bio") }
            let n = Int(BIO_ctrl_pending(bio))
            var out = [UInt8](repeating: 0, count: n)
            let read = out.withUnsafeMutableBytes { BIO_read(bio, $0.baseAddress, Int32(n)) }
            guard read == Int32(n) else { throw Failure(call: "BIO_read") }
            return out
        }
        let certificate = try pem { PEM_write_bio_X509($0, x) }
        let key = try pem { PEM_write_bio_PrivateKey($0, pkey, nil, nil, 0, nil, nil) }
        return SelfSignedCertificate(certificate: certificate, key: key)
    }
}
