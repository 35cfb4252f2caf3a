/*
 * COpus: the system libopus (libopus-dev) for Swift, plus wrappers for what Swift cannot call:
 * opus_encoder_ctl and opus_decoder_ctl are variadic, so each is wrapped once for "set an
 * integer" and once for "get an integer" (the request codes, OPUS_SET_BITRATE_REQUEST and so
 * on, are plain integer macros that Swift imports).
 *
 * Every decision is made in Swift (Sources/MediaCodecs/Opus*.swift); these only translate.
 */
#ifndef SWITCHBOARD_COPUS_H
#define SWITCHBOARD_COPUS_H

#include <opus/opus.h>

#ifdef __cplusplus
extern "C" {
#endif

/* opus_encoder_ctl(enc, request, value) for the SET requests taking an opus_int32. */
int copus_encoder_set(OpusEncoder *enc, int request, opus_int32 value);
/* opus_encoder_ctl(enc, request, &value) for the GET requests returning an opus_int32. */
int copus_encoder_get(OpusEncoder *enc, int request, opus_int32 *value);
/* opus_encoder_ctl(enc, OPUS_RESET_STATE). */
int copus_encoder_reset(OpusEncoder *enc);
/* opus_decoder_ctl(dec, request, value) for the SET requests taking an opus_int32. */
int copus_decoder_set(OpusDecoder *dec, int request, opus_int32 value);
/* opus_decoder_ctl(dec, request, &value) for the GET requests returning an opus_int32. */
int copus_decoder_get(OpusDecoder *dec, int request, opus_int32 *value);
/* opus_decoder_ctl(dec, OPUS_RESET_STATE). */
int copus_decoder_reset(OpusDecoder *dec);

#ifdef __cplusplus
}
#endif
#endif
