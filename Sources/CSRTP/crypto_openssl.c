/*
 * AES counter mode (RFC 3711 §4.1.1), AES-GCM (RFC 7714) and HMAC-SHA1 (RFC 3711 §4.2.1) for
 * libsrtp2, on OpenSSL's libcrypto, installed through libsrtp2's public extension point
 * (srtp_replace_cipher_type, srtp_replace_auth_type). libsrtp2 keeps doing SRTP itself (key
 * derivation, indices, nonces, rollover counters, replay windows, tag checks); only these
 * primitives change.
 *
 * Why: Debian's libsrtp2 is built on NSS, whose AES-CM, AES-GCM and HMAC create and destroy a
 * PKCS#11 context for every packet, under the soft token's locks. Two media workers in one
 * process then wait on each other, and one protect + unprotect pair cost ~4x what it costs a
 * process alone. Here each stream keeps one OpenSSL context for its lifetime; a packet only sets
 * the counter (AES-CM) or the nonce (AES-GCM), or resets the keyed state (HMAC), none of which
 * takes a lock.
 */
#include "CSRTP.h"
#include <srtp2/auth.h>
#include <srtp2/cipher.h>
#include <openssl/opensslv.h>
#include <stdlib.h>
#include <string.h>

#if OPENSSL_VERSION_NUMBER >= 0x30000000L
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#define SALT_OCTETS 14
#define SHA1_OCTETS 20

/* Fetched once by csrtp_install_openssl_crypto, before any stream exists; read-only after. */
static EVP_CIPHER *aes128_ctr, *aes256_ctr, *aes128_gcm, *aes256_gcm;
static EVP_MAC *hmac;

/* ---- AES: one state for counter mode and GCM ------------------------------------------- */

typedef struct {
    EVP_CIPHER_CTX *ctx;
    const EVP_CIPHER *evp;
    int key_octets;               /* 16 or 32: the AES key; the salt follows it in the key */
    unsigned char salt[16];       /* AES-CM: the 112-bit salt, then two zero octets (RFC 3711 §4.1.1) */
    int tag_octets;               /* AES-GCM: 16, or 8 for libsrtp2's short-tag variants */
    srtp_cipher_direction_t direction;  /* AES-GCM: set by set_iv */
} csrtp_aes;

/* A cipher of `type` whose key is key_octets of AES key and salt_octets of salt. */
static srtp_err_status_t aes_alloc(srtp_cipher_pointer_t *cp, int key_len, const srtp_cipher_type_t *type,
                                   const EVP_CIPHER *evp, int key_octets, int salt_octets, int algorithm, int tag_len) {
    if (key_len != key_octets + salt_octets) return srtp_err_status_bad_param;
    srtp_cipher_t *cipher = calloc(1, sizeof *cipher);
    csrtp_aes *state = calloc(1, sizeof *state);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (cipher == NULL || state == NULL || ctx == NULL) {
        free(cipher);
        free(state);
        EVP_CIPHER_CTX_free(ctx);
        return srtp_err_status_alloc_fail;
    }
    state->ctx = ctx;
    state->evp = evp;
    state->key_octets = key_octets;
    state->tag_octets = tag_len;
    state->direction = srtp_direction_any;
    cipher->type = type;
    cipher->state = state;
    cipher->key_len = key_len;
    cipher->algorithm = algorithm;
    *cp = cipher;
    return srtp_err_status_ok;
}

static srtp_err_status_t aes_dealloc(srtp_cipher_pointer_t cipher) {
    if (cipher == NULL) return srtp_err_status_bad_param;
    csrtp_aes *state = cipher->state;
    if (state != NULL) {
        EVP_CIPHER_CTX_free(state->ctx);
        OPENSSL_cleanse(state, sizeof *state);
        free(state);
    }
    OPENSSL_cleanse(cipher, sizeof *cipher);
    free(cipher);
    return srtp_err_status_ok;
}

/* Runs `octets` octets of buffer through the context in place, in the direction it was set up
 * for (counter mode: always encryption, which is its own inverse; GCM: per packet). */
static int update_in_place(EVP_CIPHER_CTX *ctx, uint8_t *buffer, int octets) {
    int written = 0;
    return EVP_CipherUpdate(ctx, buffer, &written, buffer, octets) == 1 && written == octets;
}

/* ---- AES counter mode ------------------------------------------------------------------ */

static const srtp_cipher_type_t csrtp_icm128_type, csrtp_icm256_type;

static srtp_err_status_t icm128_alloc(srtp_cipher_pointer_t *cp, int key_len, int tag_len) {
    (void)tag_len;
    return aes_alloc(cp, key_len, &csrtp_icm128_type, aes128_ctr, 16, SALT_OCTETS, SRTP_AES_ICM_128, 0);
}

static srtp_err_status_t icm256_alloc(srtp_cipher_pointer_t *cp, int key_len, int tag_len) {
    (void)tag_len;
    return aes_alloc(cp, key_len, &csrtp_icm256_type, aes256_ctr, 32, SALT_OCTETS, SRTP_AES_ICM_256, 0);
}

/* key: the AES key followed by the 14-octet salt. */
static srtp_err_status_t icm_init(void *opaque, const uint8_t *key) {
    csrtp_aes *state = opaque;
    memset(state->salt, 0, sizeof state->salt);
    memcpy(state->salt, key + state->key_octets, SALT_OCTETS);
    if (EVP_EncryptInit_ex(state->ctx, state->evp, NULL, key, NULL) != 1) return srtp_err_status_init_fail;
    return srtp_err_status_ok;
}

/* The packet's counter block: salt XOR iv (libsrtp2 builds iv from the SSRC and the index). */
static srtp_err_status_t icm_set_iv(void *opaque, uint8_t *iv, srtp_cipher_direction_t direction) {
    (void)direction;
    csrtp_aes *state = opaque;
    unsigned char counter[16];
    for (int i = 0; i < 16; i++) counter[i] = state->salt[i] ^ iv[i];
    if (EVP_EncryptInit_ex(state->ctx, NULL, NULL, NULL, counter) != 1) return srtp_err_status_cipher_fail;
    return srtp_err_status_ok;
}

/* XORs the key stream into the buffer, continuing where the last call stopped. */
static srtp_err_status_t icm_crypt(void *opaque, uint8_t *buffer, unsigned int *octets) {
    csrtp_aes *state = opaque;
    if (*octets > (unsigned int)INT32_MAX) return srtp_err_status_bad_param;
    if (!update_in_place(state->ctx, buffer, (int)*octets)) return srtp_err_status_cipher_fail;
    return srtp_err_status_ok;
}

/* RFC 3711 B.2: session key and salt, counter at index 0, three key-stream blocks. */
static const uint8_t icm128_key[30] = {
    0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c,
    0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd};
static uint8_t icm128_iv[16];
static const uint8_t icm128_zeros[48];
static const uint8_t icm128_stream[48] = {
    0xe0, 0x3e, 0xad, 0x09, 0x35, 0xc9, 0x5e, 0x80, 0xe1, 0x66, 0xb1, 0x6d, 0xd9, 0x2b, 0x4e, 0xb4,
    0xd2, 0x35, 0x13, 0x16, 0x2b, 0x02, 0xd0, 0xf7, 0x2a, 0x43, 0xa2, 0xfe, 0x4a, 0x5f, 0x97, 0xab,
    0x41, 0xe9, 0x5b, 0x3b, 0xb0, 0xa2, 0xe8, 0xdd, 0x47, 0x79, 0x01, 0xe4, 0xfc, 0xa8, 0x94, 0xc0};
static const srtp_cipher_test_case_t icm128_test = {
    30, icm128_key, icm128_iv, 48, icm128_zeros, 48, icm128_stream, 0, NULL, 0, NULL};

/* AES-256 counter mode with a non-zero iv, so that the salt XOR iv is exercised (computed with
 * `openssl enc -aes-256-ctr`, the counter being the salt XOR the iv). */
static const uint8_t icm256_key[46] = {
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
    0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad};
static uint8_t icm256_iv[16] = {
    0x00, 0x00, 0x00, 0x00, 0xc0, 0xc1, 0xc2, 0xc3, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xe2, 0x40};
static const uint8_t icm256_plain[40] = "The SRTP test payload, 40 octets long!!!";
static const uint8_t icm256_cipher[40] = {
    0x13, 0xec, 0xfb, 0x17, 0x68, 0x24, 0x85, 0x5d, 0x38, 0x1c, 0x7d, 0x38, 0x0c, 0x5c, 0x21, 0x95,
    0xdb, 0xfc, 0xf8, 0xed, 0x95, 0x72, 0xa8, 0x06, 0xc9, 0xbe, 0xdf, 0x2c, 0x34, 0xf3, 0xa3, 0x23,
    0x8c, 0x88, 0xf8, 0xd1, 0xf5, 0xa6, 0x99, 0xed};
static const srtp_cipher_test_case_t icm256_test = {
    46, icm256_key, icm256_iv, 40, icm256_plain, 40, icm256_cipher, 0, NULL, 0, NULL};

static const srtp_cipher_type_t csrtp_icm128_type = {
    icm128_alloc, aes_dealloc, icm_init, NULL, icm_crypt, icm_crypt, icm_set_iv, NULL,
    "AES-128 counter mode (Switchboard, OpenSSL)", &icm128_test, SRTP_AES_ICM_128};
static const srtp_cipher_type_t csrtp_icm256_type = {
    icm256_alloc, aes_dealloc, icm_init, NULL, icm_crypt, icm_crypt, icm_set_iv, NULL,
    "AES-256 counter mode (Switchboard, OpenSSL)", &icm256_test, SRTP_AES_ICM_256};

/* ---- AES-GCM (RFC 7714) ------------------------------------------------------------------ */

#define GCM_SALT_OCTETS 12

static const srtp_cipher_type_t csrtp_gcm128_type, csrtp_gcm256_type;

/* libsrtp2 keeps the 96-bit salt for the nonce; the tag is 16 octets, or 8 (short-tag variants). */
static srtp_err_status_t gcm_alloc(srtp_cipher_pointer_t *cp, int key_len, int tag_len, const srtp_cipher_type_t *type,
                                   const EVP_CIPHER *evp, int key_octets, int algorithm) {
    if (tag_len != 16 && tag_len != 8) return srtp_err_status_bad_param;
    return aes_alloc(cp, key_len, type, evp, key_octets, GCM_SALT_OCTETS, algorithm, tag_len);
}

static srtp_err_status_t gcm128_alloc(srtp_cipher_pointer_t *cp, int key_len, int tag_len) {
    return gcm_alloc(cp, key_len, tag_len, &csrtp_gcm128_type, aes128_gcm, 16, SRTP_AES_GCM_128);
}

static srtp_err_status_t gcm256_alloc(srtp_cipher_pointer_t *cp, int key_len, int tag_len) {
    return gcm_alloc(cp, key_len, tag_len, &csrtp_gcm256_type, aes256_gcm, 32, SRTP_AES_GCM_256);
}

/* key: the AES key (the salt after it is libsrtp2's, for the nonce). */
static srtp_err_status_t gcm_init(void *opaque, const uint8_t *key) {
    csrtp_aes *state = opaque;
    state->direction = srtp_direction_any;
    if (EVP_CipherInit_ex(state->ctx, state->evp, NULL, key, NULL, 1) != 1) return srtp_err_status_init_fail;
    return srtp_err_status_ok;
}

/* A packet's 96-bit nonce (libsrtp2 has XORed the salt in) and its direction. */
static srtp_err_status_t gcm_set_iv(void *opaque, uint8_t *iv, srtp_cipher_direction_t direction) {
    csrtp_aes *state = opaque;
    if (direction != srtp_direction_encrypt && direction != srtp_direction_decrypt) return srtp_err_status_bad_param;
    state->direction = direction;
    if (EVP_CipherInit_ex(state->ctx, NULL, NULL, NULL, iv, direction == srtp_direction_encrypt ? 1 : 0) != 1)
        return srtp_err_status_init_fail;
    return srtp_err_status_ok;
}

/* Authenticated, not encrypted octets (libsrtp2 may call it more than once per packet). */
static srtp_err_status_t gcm_set_aad(void *opaque, const uint8_t *aad, uint32_t aad_len) {
    csrtp_aes *state = opaque;
    if (state->direction == srtp_direction_any) return srtp_err_status_bad_param;
    if (aad_len == 0) return srtp_err_status_ok;
    if (aad_len > (uint32_t)INT32_MAX) return srtp_err_status_bad_param;
    int written = 0;
    if (EVP_CipherUpdate(state->ctx, NULL, &written, aad, (int)aad_len) != 1) return srtp_err_status_algo_fail;
    return srtp_err_status_ok;
}

static srtp_err_status_t gcm_encrypt(void *opaque, uint8_t *buffer, unsigned int *octets) {
    csrtp_aes *state = opaque;
    if (state->direction != srtp_direction_encrypt) return srtp_err_status_bad_param;
    if (*octets > (unsigned int)INT32_MAX) return srtp_err_status_bad_param;
    if (*octets == 0) return srtp_err_status_ok;
    if (!update_in_place(state->ctx, buffer, (int)*octets)) return srtp_err_status_cipher_fail;
    return srtp_err_status_ok;
}

/* After encrypt: finishes the message and writes the tag. */
static srtp_err_status_t gcm_get_tag(void *opaque, uint8_t *tag, uint32_t *len) {
    csrtp_aes *state = opaque;
    if (state->direction != srtp_direction_encrypt) return srtp_err_status_bad_param;
    unsigned char none[16];
    int written = 0;
    if (EVP_CipherFinal_ex(state->ctx, none, &written) != 1) return srtp_err_status_algo_fail;
    if (EVP_CIPHER_CTX_ctrl(state->ctx, EVP_CTRL_AEAD_GET_TAG, state->tag_octets, tag) != 1) return srtp_err_status_algo_fail;
    *len = (uint32_t)state->tag_octets;
    return srtp_err_status_ok;
}

/* The buffer ends with the tag: decrypts what precedes it, checks the tag (a mismatch is an
 * authentication failure) and leaves *octets without the tag. */
static srtp_err_status_t gcm_decrypt(void *opaque, uint8_t *buffer, unsigned int *octets) {
    csrtp_aes *state = opaque;
    if (state->direction != srtp_direction_decrypt) return srtp_err_status_bad_param;
    if (*octets < (unsigned int)state->tag_octets || *octets > (unsigned int)INT32_MAX) return srtp_err_status_bad_param;
    int body = (int)*octets - state->tag_octets;
    if (EVP_CIPHER_CTX_ctrl(state->ctx, EVP_CTRL_AEAD_SET_TAG, state->tag_octets, buffer + body) != 1)
        return srtp_err_status_auth_fail;
    if (body > 0 && !update_in_place(state->ctx, buffer, body)) return srtp_err_status_cipher_fail;
    int written = 0;
    unsigned char none[16];
    if (EVP_CipherFinal_ex(state->ctx, none, &written) != 1) return srtp_err_status_auth_fail;
    *octets = (unsigned int)body;
    return srtp_err_status_ok;
}

/* The GCM specification's test cases 4 (AES-128) and 16 (AES-256): 60 octets of plaintext,
 * 20 of AAD, nonce cafebabefacedbaddecaf888; the ciphertext is followed by its 16-octet tag.
 * The keys are followed by a 12-octet salt, which the cipher does not use. */
static const uint8_t gcm_plain[60] = {
    0xd9, 0x31, 0x32, 0x25, 0xf8, 0x84, 0x06, 0xe5, 0xa5, 0x59, 0x09, 0xc5, 0xaf, 0xf5, 0x26, 0x9a,
    0x86, 0xa7, 0xa9, 0x53, 0x15, 0x34, 0xf7, 0xda, 0x2e, 0x4c, 0x30, 0x3d, 0x8a, 0x31, 0x8a, 0x72,
    0x1c, 0x3c, 0x0c, 0x95, 0x95, 0x68, 0x09, 0x53, 0x2f, 0xcf, 0x0e, 0x24, 0x49, 0xa6, 0xb5, 0x25,
    0xb1, 0x6a, 0xed, 0xf5, 0xaa, 0x0d, 0xe6, 0x57, 0xba, 0x63, 0x7b, 0x39};
static const uint8_t gcm_aad[20] = {
    0xfe, 0xed, 0xfa, 0xce, 0xde, 0xad, 0xbe, 0xef, 0xfe, 0xed, 0xfa, 0xce, 0xde, 0xad, 0xbe, 0xef,
    0xab, 0xad, 0xda, 0xd2};
static uint8_t gcm_iv[12] = {0xca, 0xfe, 0xba, 0xbe, 0xfa, 0xce, 0xdb, 0xad, 0xde, 0xca, 0xf8, 0x88};
static const uint8_t gcm128_key[28] = {
    0xfe, 0xff, 0xe9, 0x92, 0x86, 0x65, 0x73, 0x1c, 0x6d, 0x6a, 0x8f, 0x94, 0x67, 0x30, 0x83, 0x08,
    0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xcb};
static const uint8_t gcm128_cipher[76] = {
    0x42, 0x83, 0x1e, 0xc2, 0x21, 0x77, 0x74, 0x24, 0x4b, 0x72, 0x21, 0xb7, 0x84, 0xd0, 0xd4, 0x9c,
    0xe3, 0xaa, 0x21, 0x2f, 0x2c, 0x02, 0xa4, 0xe0, 0x35, 0xc1, 0x7e, 0x23, 0x29, 0xac, 0xa1, 0x2e,
    0x21, 0xd5, 0x14, 0xb2, 0x54, 0x66, 0x93, 0x1c, 0x7d, 0x8f, 0x6a, 0x5a, 0xac, 0x84, 0xaa, 0x05,
    0x1b, 0xa3, 0x0b, 0x39, 0x6a, 0x0a, 0xac, 0x97, 0x3d, 0x58, 0xe0, 0x91,
    0x5b, 0xc9, 0x4f, 0xbc, 0x32, 0x21, 0xa5, 0xdb, 0x94, 0xfa, 0xe9, 0x5a, 0xe7, 0x12, 0x1a, 0x47};
static const srtp_cipher_test_case_t gcm128_test = {
    28, gcm128_key, gcm_iv, 60, gcm_plain, 76, gcm128_cipher, 20, gcm_aad, 16, NULL};
static const uint8_t gcm256_key[44] = {
    0xfe, 0xff, 0xe9, 0x92, 0x86, 0x65, 0x73, 0x1c, 0x6d, 0x6a, 0x8f, 0x94, 0x67, 0x30, 0x83, 0x08,
    0xfe, 0xff, 0xe9, 0x92, 0x86, 0x65, 0x73, 0x1c, 0x6d, 0x6a, 0x8f, 0x94, 0x67, 0x30, 0x83, 0x08,
    0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xcb};
static const uint8_t gcm256_cipher[76] = {
    0x52, 0x2d, 0xc1, 0xf0, 0x99, 0x56, 0x7d, 0x07, 0xf4, 0x7f, 0x37, 0xa3, 0x2a, 0x84, 0x42, 0x7d,
    0x64, 0x3a, 0x8c, 0xdc, 0xbf, 0xe5, 0xc0, 0xc9, 0x75, 0x98, 0xa2, 0xbd, 0x25, 0x55, 0xd1, 0xaa,
    0x8c, 0xb0, 0x8e, 0x48, 0x59, 0x0d, 0xbb, 0x3d, 0xa7, 0xb0, 0x8b, 0x10, 0x56, 0x82, 0x88, 0x38,
    0xc5, 0xf6, 0x1e, 0x63, 0x93, 0xba, 0x7a, 0x0a, 0xbc, 0xc9, 0xf6, 0x62,
    0x76, 0xfc, 0x6e, 0xce, 0x0f, 0x4e, 0x17, 0x68, 0xcd, 0xdf, 0x88, 0x53, 0xbb, 0x2d, 0x55, 0x1b};
static const srtp_cipher_test_case_t gcm256_test = {
    44, gcm256_key, gcm_iv, 60, gcm_plain, 76, gcm256_cipher, 20, gcm_aad, 16, NULL};

static const srtp_cipher_type_t csrtp_gcm128_type = {
    gcm128_alloc, aes_dealloc, gcm_init, gcm_set_aad, gcm_encrypt, gcm_decrypt, gcm_set_iv, gcm_get_tag,
    "AES-128 GCM (Switchboard, OpenSSL)", &gcm128_test, SRTP_AES_GCM_128};
static const srtp_cipher_type_t csrtp_gcm256_type = {
    gcm256_alloc, aes_dealloc, gcm_init, gcm_set_aad, gcm_encrypt, gcm_decrypt, gcm_set_iv, gcm_get_tag,
    "AES-256 GCM (Switchboard, OpenSSL)", &gcm256_test, SRTP_AES_GCM_256};

/* ---- HMAC-SHA1 --------------------------------------------------------------------------- */

typedef struct {
    EVP_MAC_CTX *ctx;
} csrtp_hmac;

static const srtp_auth_type_t csrtp_hmac_type;

static srtp_err_status_t hmac_alloc(srtp_auth_pointer_t *ap, int key_len, int out_len) {
    if (key_len < 0 || key_len > SHA1_OCTETS || out_len < 0 || out_len > SHA1_OCTETS) return srtp_err_status_bad_param;
    srtp_auth_t *auth = calloc(1, sizeof *auth);
    csrtp_hmac *state = calloc(1, sizeof *state);
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(hmac);
    if (auth == NULL || state == NULL || ctx == NULL) {
        free(auth);
        free(state);
        EVP_MAC_CTX_free(ctx);
        return srtp_err_status_alloc_fail;
    }
    state->ctx = ctx;
    auth->type = &csrtp_hmac_type;
    auth->state = state;
    auth->out_len = out_len;
    auth->key_len = key_len;
    auth->prefix_len = 0;
    *ap = auth;
    return srtp_err_status_ok;
}

static srtp_err_status_t hmac_dealloc(srtp_auth_pointer_t auth) {
    if (auth == NULL) return srtp_err_status_bad_param;
    csrtp_hmac *state = auth->state;
    if (state != NULL) {
        EVP_MAC_CTX_free(state->ctx);
        free(state);
    }
    OPENSSL_cleanse(auth, sizeof *auth);
    free(auth);
    return srtp_err_status_ok;
}

/* Keys the context (OpenSSL keeps the keyed inner and outer states) and starts a message. */
static srtp_err_status_t hmac_init(void *opaque, const uint8_t *key, int key_len) {
    csrtp_hmac *state = opaque;
    char digest[] = "SHA1";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_construct_end()};
    if (EVP_MAC_init(state->ctx, key, (size_t)key_len, params) != 1) return srtp_err_status_auth_fail;
    return srtp_err_status_ok;
}

/* A new message under the same key: no key schedule, no lookup, no lock. */
static srtp_err_status_t hmac_start(void *opaque) {
    csrtp_hmac *state = opaque;
    if (EVP_MAC_init(state->ctx, NULL, 0, NULL) != 1) return srtp_err_status_auth_fail;
    return srtp_err_status_ok;
}

static srtp_err_status_t hmac_update(void *opaque, const uint8_t *buffer, int octets) {
    csrtp_hmac *state = opaque;
    if (octets < 0) return srtp_err_status_bad_param;
    if (EVP_MAC_update(state->ctx, buffer, (size_t)octets) != 1) return srtp_err_status_auth_fail;
    return srtp_err_status_ok;
}

/* The last octets, then the tag: the first tag_len octets of the digest. */
static srtp_err_status_t hmac_compute(void *opaque, const uint8_t *buffer, int octets, int tag_len, uint8_t *tag) {
    csrtp_hmac *state = opaque;
    if (octets < 0 || tag_len < 0 || tag_len > SHA1_OCTETS) return srtp_err_status_bad_param;
    unsigned char digest[SHA1_OCTETS];
    size_t length = 0;
    if (EVP_MAC_update(state->ctx, buffer, (size_t)octets) != 1) return srtp_err_status_auth_fail;
    if (EVP_MAC_final(state->ctx, digest, &length, sizeof digest) != 1 || length != SHA1_OCTETS)
        return srtp_err_status_auth_fail;
    memcpy(tag, digest, (size_t)tag_len);
    return srtp_err_status_ok;
}

/* RFC 2202 §3, test case 2 (a key shorter than the block, an ASCII message). */
static const uint8_t hmac_key[4] = {'J', 'e', 'f', 'e'};
static const uint8_t hmac_data[28] = "what do ya want for nothing?";
static const uint8_t hmac_tag[20] = {
    0xef, 0xfc, 0xdf, 0x6a, 0xe5, 0xeb, 0x2f, 0xa2, 0xd2, 0x74,
    0x16, 0xd5, 0xf1, 0x84, 0xdf, 0x9c, 0x25, 0x9a, 0x7c, 0x79};
static const srtp_auth_test_case_t hmac_test = {4, hmac_key, 28, hmac_data, 20, hmac_tag, NULL};

static const srtp_auth_type_t csrtp_hmac_type = {
    hmac_alloc, hmac_dealloc, hmac_init, hmac_compute, hmac_update, hmac_start,
    "HMAC-SHA1 (Switchboard, OpenSSL)", &hmac_test, SRTP_HMAC_SHA1};

srtp_err_status_t csrtp_install_openssl_crypto(void) {
    aes128_ctr = EVP_CIPHER_fetch(NULL, "AES-128-CTR", NULL);
    aes256_ctr = EVP_CIPHER_fetch(NULL, "AES-256-CTR", NULL);
    aes128_gcm = EVP_CIPHER_fetch(NULL, "AES-128-GCM", NULL);
    aes256_gcm = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
    hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (aes128_ctr == NULL || aes256_ctr == NULL || aes128_gcm == NULL || aes256_gcm == NULL || hmac == NULL)
        return srtp_err_status_init_fail;
    /* Each replacement first passes libsrtp2's self-test with the vectors above; one that
     * fails is not installed (the library's own stays) and the others still are. */
    srtp_err_status_t first = srtp_err_status_ok, status;
    status = srtp_replace_cipher_type(&csrtp_icm128_type, SRTP_AES_ICM_128);
    if (first == srtp_err_status_ok) first = status;
    status = srtp_replace_cipher_type(&csrtp_icm256_type, SRTP_AES_ICM_256);
    if (first == srtp_err_status_ok) first = status;
    status = srtp_replace_cipher_type(&csrtp_gcm128_type, SRTP_AES_GCM_128);
    if (first == srtp_err_status_ok) first = status;
    status = srtp_replace_cipher_type(&csrtp_gcm256_type, SRTP_AES_GCM_256);
    if (first == srtp_err_status_ok) first = status;
    status = srtp_replace_auth_type(&csrtp_hmac_type, SRTP_HMAC_SHA1);
    if (first == srtp_err_status_ok) first = status;
    return first;
}

#else

srtp_err_status_t csrtp_install_openssl_crypto(void) { return srtp_err_status_no_such_op; }

#endif
