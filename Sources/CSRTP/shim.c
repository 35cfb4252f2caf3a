#include "CSRTP.h"
#include <errno.h>
#include <string.h>
#if defined(__linux__)
#include <sys/random.h>
#else
#include <stdlib.h>
#endif

int csrtp_random(void *buf, size_t len) {
#if defined(__linux__)
    size_t filled = 0;
    while (filled < len) {
        ssize_t n = getrandom((unsigned char *)buf + filled, len - filled, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        filled += (size_t)n;
    }
    return 0;
#else
    arc4random_buf(buf, len);
    return 0;
#endif
}

static void csrtp_quiet(srtp_log_level_t level, const char *msg, void *data) {
    (void)level; (void)msg; (void)data;
}

srtp_err_status_t csrtp_init(void) {
    srtp_install_log_handler(csrtp_quiet, NULL);
    return srtp_init();
}

static srtp_err_status_t fill(srtp_policy_t *policy, srtp_master_key_t *storage, srtp_master_key_t **pointers,
                              int profile, int outbound, const csrtp_key *keys, unsigned int count,
                              unsigned long window_size) {
    memset(policy, 0, sizeof *policy);
    if (count == 0 || count > SRTP_MAX_NUM_MASTER_KEYS) return srtp_err_status_bad_param;
    srtp_err_status_t status = srtp_crypto_policy_set_from_profile_for_rtp(&policy->rtp, (srtp_profile_t)profile);
    if (status != srtp_err_status_ok) return status;
    status = srtp_crypto_policy_set_from_profile_for_rtcp(&policy->rtcp, (srtp_profile_t)profile);
    if (status != srtp_err_status_ok) return status;
    policy->ssrc.type = outbound ? ssrc_any_outbound : ssrc_any_inbound;
    policy->window_size = window_size;
    policy->allow_repeat_tx = 0;
    if (count == 1 && keys[0].mki_size == 0) {
        policy->key = (unsigned char *)keys[0].key_salt;
    } else {
        for (unsigned int i = 0; i < count; i++) {
            storage[i].key = (unsigned char *)keys[i].key_salt;
            storage[i].mki_id = (unsigned char *)keys[i].mki;
            storage[i].mki_size = keys[i].mki_size;
            pointers[i] = &storage[i];
        }
        policy->keys = pointers;
        policy->num_master_keys = count;
    }
    policy->next = NULL;
    return srtp_err_status_ok;
}

/* Fills a policy on the stack, then creates a session into *created (create != 0) or updates
 * `existing` with it; the policy only has to live for that call. */
static srtp_err_status_t create_or_update(int create, srtp_t *created, srtp_t existing, int profile, int outbound,
                                          const csrtp_key *keys, unsigned int count, unsigned long window_size) {
    srtp_policy_t policy;
    srtp_master_key_t storage[SRTP_MAX_NUM_MASTER_KEYS];
    srtp_master_key_t *pointers[SRTP_MAX_NUM_MASTER_KEYS];
    srtp_err_status_t status = fill(&policy, storage, pointers, profile, outbound, keys, count, window_size);
    if (status != srtp_err_status_ok) return status;
    return create ? srtp_create(created, &policy) : srtp_update(existing, &policy);
}

srtp_err_status_t csrtp_create(srtp_t *session, int profile, int outbound, const csrtp_key *keys,
                               unsigned int count, unsigned long window_size) {
    return create_or_update(1, session, NULL, profile, outbound, keys, count, window_size);
}

srtp_err_status_t csrtp_update(srtp_t session, int profile, int outbound, const csrtp_key *keys,
                               unsigned int count, unsigned long window_size) {
    return create_or_update(0, NULL, session, profile, outbound, keys, count, window_size);
}
