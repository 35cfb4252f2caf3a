/* COpenSSL: see include/COpenSSL.h. */
#include "COpenSSL.h"

#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

int cs_tls_ctx_set_min_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

void cs_tls_ctx_set_defaults(SSL_CTX *ctx) {
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
}

int cs_tls_ctx_add_chain_cert(SSL_CTX *ctx, X509 *cert) {
    return (int)SSL_CTX_add1_chain_cert(ctx, cert);
}

int cs_tls_set_server_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

void cs_bio_set_mem_eof_return(BIO *bio, int value) {
    (void)BIO_set_mem_eof_return(bio, value);
}

int cs_tls_error_text(char *buf, size_t buflen) {
    if (buflen == 0) return 0;
    buf[0] = '\0';
    size_t used = 0;
    int count = 0;
    unsigned long code;
    while ((code = ERR_get_error()) != 0) {
        char line[256];
        ERR_error_string_n(code, line, sizeof line);
        size_t need = strlen(line) + (count > 0 ? 2 : 0);
        if (used + need < buflen) {
            if (count > 0) {
                memcpy(buf + used, "; ", 2);
                used += 2;
            }
            memcpy(buf + used, line, strlen(line));
            used += strlen(line);
            buf[used] = '\0';
        }
        count++;
    }
    return count;
}

int cs_x509_san_count(X509 *cert) {
    GENERAL_NAMES *names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    if (names == NULL) return -1;
    int n = sk_GENERAL_NAME_num(names);
    GENERAL_NAMES_free(names);
    return n;
}

/* Copies `len` bytes into buf as a C string; -1 when they do not fit or hold a NUL. */
static int copy_text(const unsigned char *data, int len, char *buf, size_t buflen) {
    if (data == NULL || len < 0 || (size_t)len >= buflen) return -1;
    if (memchr(data, 0, (size_t)len) != NULL) return -1;
    memcpy(buf, data, (size_t)len);
    buf[len] = '\0';
    return len;
}

int cs_x509_san_entry(X509 *cert, int index, char *buf, size_t buflen) {
    GENERAL_NAMES *names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    if (names == NULL) return -1;
    int result = -1;
    if (index >= 0 && index < sk_GENERAL_NAME_num(names)) {
        const GENERAL_NAME *name = sk_GENERAL_NAME_value(names, index);
        switch (name->type) {
        case GEN_DNS:
            if (copy_text(ASN1_STRING_get0_data(name->d.dNSName), ASN1_STRING_length(name->d.dNSName), buf, buflen) >= 0)
                result = CS_SAN_DNS;
            break;
        case GEN_URI:
            if (copy_text(ASN1_STRING_get0_data(name->d.uniformResourceIdentifier),
                          ASN1_STRING_length(name->d.uniformResourceIdentifier), buf, buflen) >= 0)
                result = CS_SAN_URI;
            break;
        case GEN_IPADD: {
            int len = ASN1_STRING_length(name->d.iPAddress);
            const unsigned char *bytes = ASN1_STRING_get0_data(name->d.iPAddress);
            int family = len == 4 ? AF_INET : len == 16 ? AF_INET6 : -1;
            if (family >= 0 && buflen <= (size_t)0x7fffffff &&
                inet_ntop(family, bytes, buf, (socklen_t)buflen) != NULL)
                result = CS_SAN_IP;
            break;
        }
        default:
            if (buflen > 0) buf[0] = '\0';
            result = CS_SAN_OTHER;
            break;
        }
    }
    GENERAL_NAMES_free(names);
    return result;
}

int cs_x509_common_name(X509 *cert, int index, char *buf, size_t buflen) {
    X509_NAME *subject = X509_get_subject_name(cert);
    if (subject == NULL || index < 0) return -1;
    int position = -1;
    for (int i = 0; i <= index; i++) {
        position = X509_NAME_get_index_by_NID(subject, NID_commonName, position);
        if (position < 0) return -1;
    }
    X509_NAME_ENTRY *entry = X509_NAME_get_entry(subject, position);
    unsigned char *utf8 = NULL;
    int len = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(entry));
    if (len < 0) return -1;
    int result = copy_text(utf8, len, buf, buflen);
    OPENSSL_free(utf8);
    return result;
}

int co_digest(const char *name, const uint8_t *data, size_t len, uint8_t *out, unsigned *outlen) {
    const EVP_MD *md = EVP_get_digestbyname(name);
    if (md == NULL) return 0;
    unsigned int n = 0;
    if (EVP_Digest(data, len, out, &n, md, NULL) != 1) return 0;
    *outlen = n;
    return 1;
}

int co_hmac_sha256(const uint8_t *key, size_t keylen, const uint8_t *data, size_t len, uint8_t *out) {
    static const uint8_t empty = 0;
    unsigned int n = 0;
    if (HMAC(EVP_sha256(), keylen > 0 ? key : &empty, (int)keylen, len > 0 ? data : &empty, len, out, &n) == NULL) return 0;
    return n == 32 ? 1 : 0;
}
