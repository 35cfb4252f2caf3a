/*
 * CSRTP: the system libsrtp2 (libsrtp2-dev) for Swift, plus a few helpers so that Swift never
 * builds an srtp_policy_t (a linked list of structs with pointer arrays) itself: csrtp_create
 * and csrtp_update fill one wildcard policy (SSRC_ANY_INBOUND or SSRC_ANY_OUTBOUND) from a
 * profile and one or more master keys (key||salt, optionally with an MKI).
 *
 * Every decision is made in Swift (Sources/SRTP); these only translate.
 */
#ifndef SWITCHBOARD_CSRTP_H
#define SWITCHBOARD_CSRTP_H

#include <stddef.h>
#include <stdint.h>
#include <srtp2/srtp.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most bytes srtp_protect/srtp_protect_rtcp may add (tag, MKI, and the SRTCP index). */
#define CSRTP_MAX_TRAILER (SRTP_MAX_TRAILER_LEN + 4)

/* One master key: key||salt (length per profile) and an optional MKI (mki_size 0: none). */
typedef struct {
    const unsigned char *key_salt;
    const unsigned char *mki;
    unsigned int mki_size;
} csrtp_key;

/* Fills `buf` with `len` bytes from the kernel's CSPRNG (getrandom(2) on Linux, arc4random_buf
 * elsewhere), retrying on EINTR and short reads. Returns 0, or -1 with errno set. */
int csrtp_random(void *buf, size_t len);

/* srtp_init() with logging silenced (the library never prints). Call once. */
srtp_err_status_t csrtp_init(void);

/* Replaces libsrtp2's AES counter mode (128 and 256 bits), AES-GCM (128 and 256) and HMAC-SHA1
 * with implementations on OpenSSL's libcrypto that keep one context per stream (crypto_openssl.c
 * explains why). Call once, after csrtp_init and before the first srtp_create; each replacement
 * passes libsrtp2's self-test first, and one that fails leaves the library's own in place (the
 * first failure is returned). srtp_err_status_no_such_op when libcrypto is older than 3.0. */
srtp_err_status_t csrtp_install_openssl_crypto(void);

/* Creates a session for one direction (outbound != 0: SSRC_ANY_OUTBOUND, else SSRC_ANY_INBOUND)
 * with `count` keys (1 to SRTP_MAX_NUM_MASTER_KEYS; more than one requires MKIs), a replay
 * window of `window_size` packets (64 to 32768) and no repeated transmissions. */
srtp_err_status_t csrtp_create(srtp_t *session, int profile, int outbound, const csrtp_key *keys,
                               unsigned int count, unsigned long window_size);

/* srtp_update with the same kind of policy: new keys, same streams (their rollover counters
 * and replay windows are kept by libsrtp). */
srtp_err_status_t csrtp_update(srtp_t session, int profile, int outbound, const csrtp_key *keys,
                               unsigned int count, unsigned long window_size);

#ifdef __cplusplus
}
#endif
#endif
