/*
 * cparsers.h - shared definitions for the C side of the Switchboard SIP
 * parser benchmark (see ../README.md).
 */
#ifndef SB_CPARSERS_H
#define SB_CPARSERS_H

#include <stddef.h>
#include <stdint.h>

/* One input message, read fully into memory (NUL-terminated copy). */
struct sb_input {
	const char *path;
	char *data;
	size_t len;
	void *prepared; /* parser-specific pre-built input (libre: mbuf) */
};

/* Extracted fields, copied out of the parsed message (verify mode only). */
#define SB_FIELD_MAX 256
struct sb_fields {
	char callid[SB_FIELD_MAX];
	char method[SB_FIELD_MAX];
	char branch[SB_FIELD_MAX];
	char fromtag[SB_FIELD_MAX];
	uint32_t cseq;
};

/*
 * Parses one message fully, extracts Call-ID, CSeq number + method, top
 * Via branch and From tag, frees the parsed message.
 *
 * On success stores the per-message checksum contribution in *value:
 *   strlen(call-id) + strlen(branch) + strlen(from tag)
 *   + cseq number + strlen(cseq method)
 * and, if fields != NULL, copies the extracted values into it.
 * Returns 0 on success, -1 if parsing failed or a field is missing.
 */
typedef int (*sb_parse_fn)(const struct sb_input *in, uint64_t *value,
			   struct sb_fields *fields);

struct sb_parser {
	const char *name;
	int (*init)(void);
	int (*prepare)(struct sb_input *in);   /* may be NULL */
	sb_parse_fn parse;
	void (*release)(struct sb_input *in);  /* may be NULL */
	void (*shutdown)(void);                /* may be NULL */
};

#endif
