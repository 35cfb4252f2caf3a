/*
 * cmedia.c - C side of the Switchboard media benchmark: the cost of one 20 ms Opus frame through
 * the send path (opus_encode + RTP header + srtp_protect) and the receive path (srtp_unprotect +
 * opus_decode), calling libopus and libsrtp2 directly. Benchmarks/Sources/MediaBench does the same through
 * Switchboard's Swift wrappers; scripts/bench-media runs both and compares.
 *
 *   cmedia --frames N --rounds R [--complexity 0-10] [--contexts C] [--bitrate B]
 *
 * --bitrate 0 leaves libopus's automatic bitrate (what a MediaSession's encoder uses unless the
 * peer sets maxaveragebitrate: ~54 kbit/s for 48 kHz mono, which costs ~1.4x the 32 kbit/s
 * default here at complexity 0).
 *
 * With --contexts C, the Opus send/receive loop runs C independent calls (encoder, decoder and
 * SRTP pair each) in turn, frame f on call f % C: as many codec states as a media engine
 * carrying C calls keeps, so caches hold what they would hold then (the single-context figure
 * is the warm-cache best case).
 *
 * Output (one line):
 *   c send_ns=<best ns/frame> recv_ns=<best ns/frame> bytes=<payload bytes per round> checksum=<sum>
 *
 * Identical settings and input on both sides (48 kHz mono, 20 ms, VoIP, 32 kbit/s, FEC with 10%
 * expected loss; AES_CM_128_HMAC_SHA1_80 with a fixed key): with the same libopus the encoded
 * packets are bit-identical, which the script checks through `checksum`.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <opus/opus.h>
#include <srtp2/srtp.h>

#define FRAME 960
#define SLOT 1600

/* The benchmark signal: integer-only so that C and Swift (Media.SyntheticSignal) produce the
 * same samples. */
static int16_t sample_at(uint64_t i, uint64_t *lcg) {
    *lcg = *lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    int64_t saw = (int64_t)((i * 523) % 2000) - 1000;          /* ~24 Hz sawtooth, ±1000 */
    int64_t tri = (int64_t)((i * 37) % 400);                     /* ~110 Hz triangle */
    tri = tri < 200 ? tri - 100 : 300 - tri;
    int64_t envelope = (int64_t)((i / 4800) % 10);               /* 100 ms steps */
    int64_t noise = (int64_t)(*lcg >> 54) - 512;
    int64_t v = saw * 6 + tri * 40 * envelope / 5 + noise;
    if (v > 32767) v = 32767;
    if (v < -32768) v = -32768;
    return (int16_t)v;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die(const char *what, int code) {
    fprintf(stderr, "cmedia: %s failed (%d)\n", what, code);
    exit(1);
}

int main(int argc, char **argv) {
    int frames = 3000, rounds = 5, complexity = -1, contexts = 1, bitrate = 32000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--frames")) frames = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--complexity")) complexity = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--contexts")) contexts = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bitrate")) bitrate = atoi(argv[i + 1]);
    }
    if (frames <= 0 || rounds <= 0 || contexts <= 0 || contexts > 100000) die("arguments", 0);

    int16_t *pcm = malloc(sizeof(int16_t) * FRAME * (size_t)frames);
    uint64_t lcg = 1;
    for (uint64_t i = 0; i < (uint64_t)FRAME * (uint64_t)frames; i++) pcm[i] = sample_at(i, &lcg);

    int err = 0;
    OpusEncoder **encs = calloc((size_t)contexts, sizeof *encs);
    OpusDecoder **decs = calloc((size_t)contexts, sizeof *decs);
    for (int c = 0; c < contexts; c++) {
        encs[c] = opus_encoder_create(48000, 1, OPUS_APPLICATION_VOIP, &err);
        if (!encs[c]) die("opus_encoder_create", err);
        opus_encoder_ctl(encs[c], OPUS_SET_BITRATE(bitrate > 0 ? bitrate : OPUS_AUTO));
        opus_encoder_ctl(encs[c], OPUS_SET_INBAND_FEC(1));
        opus_encoder_ctl(encs[c], OPUS_SET_PACKET_LOSS_PERC(10));
        if (complexity >= 0) opus_encoder_ctl(encs[c], OPUS_SET_COMPLEXITY(complexity));
        decs[c] = opus_decoder_create(48000, 1, &err);
        if (!decs[c]) die("opus_decoder_create", err);
    }

    if ((err = srtp_init()) != srtp_err_status_ok) die("srtp_init", err);
    unsigned char key[30];
    for (int i = 0; i < 30; i++) key[i] = (unsigned char)(i * 7 + 1);
    srtp_policy_t policy;
    memset(&policy, 0, sizeof policy);
    srtp_crypto_policy_set_rtp_default(&policy.rtp);
    srtp_crypto_policy_set_rtcp_default(&policy.rtcp);
    policy.key = key;
    policy.window_size = 1024;
    policy.ssrc.type = ssrc_any_outbound;
    srtp_t *txs = calloc((size_t)contexts, sizeof *txs), *rxs = calloc((size_t)contexts, sizeof *rxs);
    for (int c = 0; c < contexts; c++) {
        policy.ssrc.type = ssrc_any_outbound;
        if ((err = srtp_create(&txs[c], &policy)) != srtp_err_status_ok) die("srtp_create", err);
        policy.ssrc.type = ssrc_any_inbound;
        if ((err = srtp_create(&rxs[c], &policy)) != srtp_err_status_ok) die("srtp_create", err);
    }

    unsigned char *slab = malloc((size_t)SLOT * (size_t)frames);
    int *lengths = malloc(sizeof(int) * (size_t)frames);
    int16_t out[FRAME * 6];
    uint16_t *seqs = calloc((size_t)contexts, sizeof *seqs);
    uint32_t *tss = calloc((size_t)contexts, sizeof *tss), ssrc = 0x11223344;
    double best_send = 1e30, best_recv = 1e30;
    uint64_t checksum = 0, bytes = 0;

    for (int r = 0; r < rounds; r++) {
        uint64_t round_sum = 0, round_bytes = 0;
        double t0 = now_ns();
        for (int f = 0; f < frames; f++) {
            int c = f % contexts;
            uint16_t seq = seqs[c];
            uint32_t ts = tss[c];
            unsigned char *p = slab + (size_t)f * SLOT;
            p[0] = 0x80; p[1] = 111;
            p[2] = (unsigned char)(seq >> 8); p[3] = (unsigned char)seq;
            p[4] = (unsigned char)(ts >> 24); p[5] = (unsigned char)(ts >> 16); p[6] = (unsigned char)(ts >> 8); p[7] = (unsigned char)ts;
            p[8] = (unsigned char)(ssrc >> 24); p[9] = (unsigned char)(ssrc >> 16); p[10] = (unsigned char)(ssrc >> 8); p[11] = (unsigned char)ssrc;
            /* Each call encodes consecutive frames of the signal (its own stretch of it). */
            size_t frame = ((size_t)c * (size_t)(frames / contexts) + (size_t)(f / contexts)) % (size_t)frames;
            int n = opus_encode(encs[c], pcm + frame * FRAME, FRAME, p + 12, SLOT - 12 - SRTP_MAX_TRAILER_LEN);
            if (n < 0) die("opus_encode", n);
            int len = 12 + n;
            round_bytes += (uint64_t)n;
            for (int i = 0; i < n; i++) round_sum += p[12 + i];
            if ((err = srtp_protect(txs[c], p, &len)) != srtp_err_status_ok) die("srtp_protect", err);
            lengths[f] = len;
            seqs[c] = seq + 1;
            tss[c] = ts + FRAME;
        }
        double t1 = now_ns();
        for (int f = 0; f < frames; f++) {
            unsigned char *p = slab + (size_t)f * SLOT;
            int len = lengths[f];
            int c = f % contexts;
            if ((err = srtp_unprotect(rxs[c], p, &len)) != srtp_err_status_ok) die("srtp_unprotect", err);
            int n = opus_decode(decs[c], p + 12, len - 12, out, FRAME * 6, 0);
            if (n != FRAME) die("opus_decode", n);
        }
        double t2 = now_ns();
        double s = (t1 - t0) / frames, d = (t2 - t1) / frames;
        if (s < best_send) best_send = s;
        if (d < best_recv) best_recv = d;
        if (r == 0) { checksum = round_sum; bytes = round_bytes; }
    }
    /* SRTP alone, where a wrapper's own cost would show most: protect then unprotect
     * `frames` 172-byte RTP packets (a 20 ms G.711 frame), on a separate session pair. */
    policy.ssrc.type = ssrc_any_outbound;
    srtp_t tx2, rx2;
    if ((err = srtp_create(&tx2, &policy)) != srtp_err_status_ok) die("srtp_create", err);
    policy.ssrc.type = ssrc_any_inbound;
    if ((err = srtp_create(&rx2, &policy)) != srtp_err_status_ok) die("srtp_create", err);
    double best_protect = 1e30, best_unprotect = 1e30;
    uint16_t seq2 = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = now_ns();
        for (int f = 0; f < frames; f++) {
            unsigned char *p = slab + (size_t)f * SLOT;
            memset(p, 0xA5, 172);
            p[0] = 0x80; p[1] = 0;
            p[2] = (unsigned char)(seq2 >> 8); p[3] = (unsigned char)seq2;
            p[8] = 0x55; p[9] = 0x66; p[10] = 0x77; p[11] = 0x88;
            int len = 172;
            if ((err = srtp_protect(tx2, p, &len)) != srtp_err_status_ok) die("srtp_protect", err);
            lengths[f] = len;
            seq2++;
        }
        double t1 = now_ns();
        for (int f = 0; f < frames; f++) {
            int len = lengths[f];
            if ((err = srtp_unprotect(rx2, slab + (size_t)f * SLOT, &len)) != srtp_err_status_ok) die("srtp_unprotect", err);
        }
        double t2 = now_ns();
        if ((t1 - t0) / frames < best_protect) best_protect = (t1 - t0) / frames;
        if ((t2 - t1) / frames < best_unprotect) best_unprotect = (t2 - t1) / frames;
    }
    srtp_dealloc(tx2);
    srtp_dealloc(rx2);
    printf("c send_ns=%.0f recv_ns=%.0f protect_ns=%.0f unprotect_ns=%.0f bytes=%" PRIu64 " checksum=%" PRIu64 "\n",
           best_send, best_recv, best_protect, best_unprotect, bytes, checksum);
    for (int c = 0; c < contexts; c++) {
        srtp_dealloc(txs[c]);
        srtp_dealloc(rxs[c]);
        opus_encoder_destroy(encs[c]);
        opus_decoder_destroy(decs[c]);
    }
    free(encs); free(decs); free(txs); free(rxs); free(seqs); free(tss);
    free(pcm); free(slab); free(lengths);
    return 0;
}
