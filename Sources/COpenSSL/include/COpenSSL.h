/*
 * COpenSSL: the system OpenSSL (libssl, libcrypto) for Swift, plus thin wrappers for what Swift
 * cannot import: function-like macros (SSL_CTX_set_min_proto_version, SSL_set_tlsext_host_name,
 * SSL_CTX_add1_chain_cert, BIO_set_mem_eof_return), the 64-bit SSL_OP_* option bits, the error
 * queue as text, and the subjectAltName entries of a certificate (a GENERAL_NAME union).
 *
 * Every decision (what to verify, how names match) is made in Swift; these only translate.
 * Part of Switchboard's SIPTransport module; written from the OpenSSL 3 manual pages.
 */
#ifndef SWITCHBOARD_COPENSSL_H
#define SWITCHBOARD_COPENSSL_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Types of subjectAltName entries reported by cs_x509_san_entry. */
#define CS_SAN_OTHER 0
#define CS_SAN_DNS 1
#define CS_SAN_URI 2
#define CS_SAN_IP 3

/* SSL_CTX_set_min_proto_version (TLS1_2_VERSION, TLS1_3_VERSION). Returns 1 on success. */
int cs_tls_ctx_set_min_version(SSL_CTX *ctx, int version);

/* Options every Switchboard context gets: no renegotiation, no compression, the server's
 * cipher preference, and SSL_MODE_RELEASE_BUFFERS (idle connections keep no record buffers). */
void cs_tls_ctx_set_defaults(SSL_CTX *ctx);

/* SSL_CTX_add1_chain_cert: adds an intermediate certificate to the context's own chain (the
 * reference count of `cert` is incremented). Returns 1 on success. */
int cs_tls_ctx_add_chain_cert(SSL_CTX *ctx, X509 *cert);

/* SSL_set_tlsext_host_name: the server name sent in the SNI extension. Returns 1 on success. */
int cs_tls_set_server_name(SSL *ssl, const char *name);

/* BIO_set_mem_eof_return: what reading an empty memory BIO returns (-1: "retry", so that
 * SSL_read reports SSL_ERROR_WANT_READ instead of end of stream). */
void cs_bio_set_mem_eof_return(BIO *bio, int value);

/* Drains the calling thread's OpenSSL error queue into `buf` as text (ERR_error_string_n for
 * each error, joined with "; "), always NUL-terminated. Returns the number of errors drained. */
int cs_tls_error_text(char *buf, size_t buflen);

/* The number of subjectAltName entries of `cert`, or -1 when it has no subjectAltName
 * extension at all (RFC 5922 7.1 treats the two cases differently). */
int cs_x509_san_count(X509 *cert);

/* Entry `index` of the subjectAltName: returns its type (CS_SAN_*) and writes its value
 * NUL-terminated into `buf` (the IA5String of a dNSName or URI, the text form of an iPAddress).
 * Returns -1 when the index is out of range, the value does not fit, or it holds a NUL byte. */
int cs_x509_san_entry(X509 *cert, int index, char *buf, size_t buflen);

/* The `index`-th commonName of the subject, as UTF-8, NUL-terminated in `buf`. Returns its
 * length, or -1 when there is no such entry, it does not fit, or it holds a NUL byte. */
int cs_x509_common_name(X509 *cert, int index, char *buf, size_t buflen);

/* One-shot message digest (used by SIPAuth): `name` is an OpenSSL digest name ("MD5", "SHA256",
 * "SHA512-256"). Writes the digest to `out` (room for EVP_MAX_MD_SIZE bytes) and its length to
 * `outlen`. Returns 1 on success, 0 when the digest is unknown or fails. */
int co_digest(const char *name, const uint8_t *data, size_t len, uint8_t *out, unsigned *outlen);

/* One-shot HMAC-SHA-256 of `data` under `key`; writes 32 bytes to `out`. Returns 1 on success. */
int co_hmac_sha256(const uint8_t *key, size_t keylen, const uint8_t *data, size_t len, uint8_t *out);

#ifdef __cplusplus
}
#endif

#endif
