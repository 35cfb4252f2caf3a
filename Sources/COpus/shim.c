#include "COpus.h"

int copus_encoder_set(OpusEncoder *enc, int request, opus_int32 value) { return opus_encoder_ctl(enc, request, value); }
int copus_encoder_get(OpusEncoder *enc, int request, opus_int32 *value) { return opus_encoder_ctl(enc, request, value); }
int copus_encoder_reset(OpusEncoder *enc) { return opus_encoder_ctl(enc, OPUS_RESET_STATE); }
int copus_decoder_set(OpusDecoder *dec, int request, opus_int32 value) { return opus_decoder_ctl(dec, request, value); }
int copus_decoder_get(OpusDecoder *dec, int request, opus_int32 *value) { return opus_decoder_ctl(dec, request, value); }
int copus_decoder_reset(OpusDecoder *dec) { return opus_decoder_ctl(dec, OPUS_RESET_STATE); }
