/*
 * cparsers.c - C side of the Switchboard SIP parser benchmark.
 *
 * Parses SIP messages with one of three C SIP stacks from Debian packages
 * and reports throughput, allocations per message and a checksum over the
 * extracted fields, in the same format as the Swift SwitchboardBench tool.
 *
 *   cparsers --parser re|osip|sofia --seconds S FILE...
 *   cparsers --parser re|osip|sofia --verify FILE...
 *
 * Output (one line):
 *   <parser> msgs_per_sec=<float> messages=<N> checksum=<C>
 *            cycle_checksum=<C> [allocs_per_msg=<float>]
 *
 * See ../README.md for what is measured and how.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* libre: match the feature macros its own build uses (share/re/re.mk). */
#ifndef HAVE_INET6
#define HAVE_INET6 1
#endif
#ifndef HAVE_STDBOOL_H
#define HAVE_STDBOOL_H 1
#endif
#ifndef HAVE_INTTYPES_H
#define HAVE_INTTYPES_H 1
#endif
#ifndef RELEASE
#define RELEASE 1
#endif
#include <re.h>
/* libosip2 */
#include <osipparser2/osip_parser.h>
/* Sofia-SIP */
#include <sofia-sip/msg.h>
#include <sofia-sip/sip.h>
#include <sofia-sip/sip_header.h>

#include "cparsers.h"

enum {
	CLOCK_CHECK_EVERY = 1000,   /* messages between clock reads */
	WARMUP_MESSAGES = 20000,
	ALLOC_MESSAGES = 100000,    /* messages measured for allocs/msg */
};

static void copy_field(char *dst, const char *p, size_t n)
{
	if (n >= SB_FIELD_MAX)
		n = SB_FIELD_MAX - 1;
	memcpy(dst, p, n);
	dst[n] = '\0';
}

/* ------------------------------------------------------------------ */
/* libre (baresip/creytiv "re")                                        */
/* ------------------------------------------------------------------ */

static int re_setup(void)
{
	int err = libre_init();
	if (err) {
		fprintf(stderr, "libre_init failed: %d\n", err);
		return -1;
	}
	return 0;
}

/*
 * libre decodes from an mbuf and keeps a reference to it (the parsed
 * message points into the buffer: zero-copy). We build the mbuf once per
 * input file, as a transport would have received the datagram into one,
 * and just rewind it before every decode. sip_msg_decode() only moves
 * mb->pos, it does not modify the buffer contents.
 */
static int re_prepare(struct sb_input *in)
{
	struct mbuf *mb = mbuf_alloc(in->len);
	if (!mb)
		return -1;
	if (mbuf_write_mem(mb, (const uint8_t *)in->data, in->len)) {
		mem_deref(mb);
		return -1;
	}
	in->prepared = mb;
	return 0;
}

static void re_release(struct sb_input *in)
{
	in->prepared = mem_deref(in->prepared);
}

static int re_parse(const struct sb_input *in, uint64_t *value,
		    struct sb_fields *f)
{
	struct mbuf *mb = in->prepared;
	struct sip_msg *msg = NULL;
	int rc = -1;

	mb->pos = 0;
	if (sip_msg_decode(&msg, mb) != 0 || !msg)
		return -1;

	/*
	 * sip_msg_decode() parses the top Via (incl. branch), From/To
	 * (incl. tag), CSeq and caches Call-ID eagerly; nothing else to call.
	 */
	if (!pl_isset(&msg->callid) || !pl_isset(&msg->via.branch) ||
	    !pl_isset(&msg->from.tag) || !pl_isset(&msg->cseq.met))
		goto out;

	*value = (uint64_t)msg->callid.l + msg->via.branch.l +
		 msg->from.tag.l + msg->cseq.num + msg->cseq.met.l;

	if (f) {
		copy_field(f->callid, msg->callid.p, msg->callid.l);
		copy_field(f->method, msg->cseq.met.p, msg->cseq.met.l);
		copy_field(f->branch, msg->via.branch.p, msg->via.branch.l);
		copy_field(f->fromtag, msg->from.tag.p, msg->from.tag.l);
		f->cseq = msg->cseq.num;
	}
	rc = 0;
out:
	mem_deref(msg);
	return rc;
}

/* ------------------------------------------------------------------ */
/* libosip2                                                            */
/* ------------------------------------------------------------------ */

static int osip_setup(void)
{
	if (parser_init() != 0) {
		fprintf(stderr, "osip parser_init failed\n");
		return -1;
	}
	return 0;
}

static int osip_parse(const struct sb_input *in, uint64_t *value,
		      struct sb_fields *f)
{
	osip_message_t *sip = NULL;
	osip_via_t *via = NULL;
	osip_generic_param_t *branch = NULL, *tag = NULL;
	osip_call_id_t *cid;
	osip_cseq_t *cseq;
	osip_from_t *from;
	size_t cid_len;
	unsigned long num;
	char *end;
	int rc = -1;

	if (osip_message_init(&sip) != 0)
		return -1;
	/* Copies the buffer, parses every header into its structure. */
	if (osip_message_parse(sip, in->data, in->len) != 0)
		goto out;

	cid = osip_message_get_call_id(sip);
	cseq = osip_message_get_cseq(sip);
	from = osip_message_get_from(sip);
	if (!cid || !cid->number || !cseq || !cseq->number ||
	    !cseq->method || !from)
		goto out;
	if (osip_message_get_via(sip, 0, &via) < 0 || !via)
		goto out;
	if (osip_via_param_get_byname(via, "branch", &branch) != 0 ||
	    !branch || !branch->gvalue)
		goto out;
	if (osip_from_get_tag(from, &tag) != 0 || !tag || !tag->gvalue)
		goto out;

	/* osip splits Call-ID at '@' into number and host. */
	cid_len = strlen(cid->number);
	if (cid->host)
		cid_len += 1 + strlen(cid->host);

	/* osip keeps the CSeq number as a string. */
	errno = 0;
	num = strtoul(cseq->number, &end, 10);
	if (errno || end == cseq->number || *end || num > UINT32_MAX)
		goto out;

	*value = (uint64_t)cid_len + strlen(branch->gvalue) +
		 strlen(tag->gvalue) + num + strlen(cseq->method);

	if (f) {
		if (cid->host)
			snprintf(f->callid, sizeof(f->callid), "%s@%s",
				 cid->number, cid->host);
		else
			snprintf(f->callid, sizeof(f->callid), "%s",
				 cid->number);
		snprintf(f->method, sizeof(f->method), "%s", cseq->method);
		snprintf(f->branch, sizeof(f->branch), "%s", branch->gvalue);
		snprintf(f->fromtag, sizeof(f->fromtag), "%s", tag->gvalue);
		f->cseq = (uint32_t)num;
	}
	rc = 0;
out:
	osip_message_free(sip);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Sofia-SIP                                                           */
/* ------------------------------------------------------------------ */

static msg_mclass_t const *sofia_mclass;

static int sofia_setup(void)
{
	sofia_mclass = sip_default_mclass();
	return sofia_mclass ? 0 : -1;
}

static int sofia_parse(const struct sb_input *in, uint64_t *value,
		       struct sb_fields *f)
{
	msg_t *msg;
	sip_t *sip;
	int rc = -1;

	/*
	 * msg_make() copies the data into a message buffer and runs
	 * msg_extract(), which parses every header eagerly with its header
	 * class parser (Via params incl. v_branch, From a_tag, CSeq, ...).
	 */
	msg = msg_make(sofia_mclass, 0, in->data, (ssize_t)in->len);
	if (!msg)
		return -1;
	sip = sip_object(msg);
	if (!sip || (sip->sip_flags & MSG_FLG_ERROR) || sip->sip_error)
		goto out;
	if (!sip->sip_call_id || !sip->sip_call_id->i_id ||
	    !sip->sip_cseq || !sip->sip_cseq->cs_method_name ||
	    !sip->sip_via || !sip->sip_via->v_branch ||
	    !sip->sip_from || !sip->sip_from->a_tag)
		goto out;

	*value = (uint64_t)strlen(sip->sip_call_id->i_id) +
		 strlen(sip->sip_via->v_branch) +
		 strlen(sip->sip_from->a_tag) +
		 sip->sip_cseq->cs_seq +
		 strlen(sip->sip_cseq->cs_method_name);

	if (f) {
		snprintf(f->callid, sizeof(f->callid), "%s",
			 sip->sip_call_id->i_id);
		snprintf(f->method, sizeof(f->method), "%s",
			 sip->sip_cseq->cs_method_name);
		snprintf(f->branch, sizeof(f->branch), "%s",
			 sip->sip_via->v_branch);
		snprintf(f->fromtag, sizeof(f->fromtag), "%s",
			 sip->sip_from->a_tag);
		f->cseq = sip->sip_cseq->cs_seq;
	}
	rc = 0;
out:
	msg_destroy(msg);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Driver                                                              */
/* ------------------------------------------------------------------ */

static const struct sb_parser parsers[] = {
	{ "re",    re_setup,    re_prepare, re_parse,    re_release, libre_close },
	{ "osip",  osip_setup,  NULL,       osip_parse,  NULL,       NULL },
	{ "sofia", sofia_setup, NULL,       sofia_parse, NULL,       NULL },
};

static void usage(void)
{
	fprintf(stderr,
		"usage: cparsers --parser re|osip|sofia --seconds S FILE...\n"
		"       cparsers --parser re|osip|sofia --verify FILE...\n");
	exit(64);
}

static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int read_file(const char *path, struct sb_input *in)
{
	FILE *fp = fopen(path, "rb");
	long size;

	if (!fp) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fseek(fp, 0, SEEK_END) != 0 || (size = ftell(fp)) < 0 ||
	    fseek(fp, 0, SEEK_SET) != 0) {
		fprintf(stderr, "%s: cannot determine size\n", path);
		fclose(fp);
		return -1;
	}
	in->path = path;
	in->len = (size_t)size;
	in->data = malloc(in->len + 1);
	if (!in->data || fread(in->data, 1, in->len, fp) != in->len) {
		fprintf(stderr, "%s: read failed\n", path);
		fclose(fp);
		return -1;
	}
	in->data[in->len] = '\0';
	in->prepared = NULL;
	fclose(fp);
	if (in->len == 0) {
		fprintf(stderr, "%s: empty file\n", path);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct sb_parser *p = NULL;
	double seconds = -1;
	int verify = 0;
	int i, nfiles = 0;
	struct sb_input *inputs;
	uint64_t *values;
	uint64_t cycle = 0, checksum = 0, expected = 0, messages = 0;
	uint64_t errors = 0;
	unsigned long long (*alloc_count)(void);
	double allocs_per_msg = -1, t0, t1, elapsed;
	size_t k, n;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--parser") && i + 1 < argc) {
			const char *name = argv[++i];
			for (k = 0; k < sizeof(parsers) / sizeof(*parsers); k++)
				if (!strcmp(parsers[k].name, name))
					p = &parsers[k];
			if (!p) {
				fprintf(stderr, "unknown parser '%s'\n", name);
				usage();
			}
		} else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
			char *end;
			seconds = strtod(argv[++i], &end);
			if (*end || seconds <= 0)
				usage();
		} else if (!strcmp(argv[i], "--verify")) {
			verify = 1;
		} else if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else if (argv[i][0] == '-' && argv[i][1] == '-') {
			usage();
		} else {
			break;
		}
	}
	nfiles = argc - i;
	if (!p || nfiles <= 0 || (!verify && seconds <= 0))
		usage();

	inputs = calloc((size_t)nfiles, sizeof(*inputs));
	values = calloc((size_t)nfiles, sizeof(*values));
	if (!inputs || !values)
		return 1;

	if (p->init() != 0)
		return 1;

	for (k = 0; k < (size_t)nfiles; k++) {
		if (read_file(argv[i + (int)k], &inputs[k]) != 0)
			return 1;
		if (p->prepare && p->prepare(&inputs[k]) != 0) {
			fprintf(stderr, "%s: prepare failed\n",
				inputs[k].path);
			return 1;
		}
	}

	/* One pass: check every file parses, remember its contribution. */
	for (k = 0; k < (size_t)nfiles; k++) {
		struct sb_fields f;
		memset(&f, 0, sizeof(f));
		if (p->parse(&inputs[k], &values[k], &f) != 0) {
			fprintf(stderr, "%s: %s failed to parse or a field "
				"is missing\n", p->name, inputs[k].path);
			return 1;
		}
		cycle += values[k];
		if (verify)
			printf("%s callid=%s cseq=%" PRIu32 " %s branch=%s "
			       "fromtag=%s\n", inputs[k].path, f.callid,
			       f.cseq, f.method, f.branch, f.fromtag);
	}
	if (verify) {
		fprintf(stderr, "%s cycle_checksum=%" PRIu64 "\n", p->name,
			cycle);
		return 0;
	}

	/* Warm-up (caches, branch predictors, allocator free lists). */
	for (n = 0, k = 0; n < WARMUP_MESSAGES; n++) {
		uint64_t v;
		errors += p->parse(&inputs[k], &v, NULL) != 0;
		if (++k == (size_t)nfiles)
			k = 0;
	}

	/* Allocations per message, if malloc_count.so is preloaded. */
	alloc_count = (unsigned long long (*)(void))
		dlsym(RTLD_DEFAULT, "sb_malloc_count");
	if (alloc_count) {
		size_t cycles = (ALLOC_MESSAGES + nfiles - 1) / nfiles;
		size_t total = cycles * (size_t)nfiles;
		unsigned long long before, after;

		before = alloc_count();
		for (n = 0; n < cycles; n++)
			for (k = 0; k < (size_t)nfiles; k++) {
				uint64_t v;
				errors += p->parse(&inputs[k], &v, NULL) != 0;
			}
		after = alloc_count();
		allocs_per_msg = (double)(after - before) / (double)total;
	}

	/* Timed run: round-robin over the files for `seconds`. */
	k = 0;
	t0 = now_seconds();
	for (;;) {
		for (n = 0; n < CLOCK_CHECK_EVERY; n++) {
			uint64_t v = 0;
			errors += p->parse(&inputs[k], &v, NULL) != 0;
			checksum += v;
			if (++k == (size_t)nfiles)
				k = 0;
		}
		messages += CLOCK_CHECK_EVERY;
		t1 = now_seconds();
		if (t1 - t0 >= seconds)
			break;
	}
	elapsed = t1 - t0;

	/* Self-check: every iteration must have extracted the same values. */
	for (n = 0; n < (size_t)nfiles; n++) {
		uint64_t times = messages / (uint64_t)nfiles +
				 (n < messages % (uint64_t)nfiles ? 1 : 0);
		expected += times * values[n];
	}
	if (errors || checksum != expected) {
		fprintf(stderr, "%s: %" PRIu64 " parse errors, checksum %"
			PRIu64 " != expected %" PRIu64 "\n", p->name, errors,
			checksum, expected);
		return 2;
	}

	printf("%s msgs_per_sec=%.1f messages=%" PRIu64 " checksum=%" PRIu64
	       " cycle_checksum=%" PRIu64, p->name,
	       (double)messages / elapsed, messages, checksum, cycle);
	if (allocs_per_msg >= 0)
		printf(" allocs_per_msg=%.2f", allocs_per_msg);
	printf("\n");

	for (k = 0; k < (size_t)nfiles; k++) {
		if (p->release)
			p->release(&inputs[k]);
		free(inputs[k].data);
	}
	free(inputs);
	free(values);
	if (p->shutdown)
		p->shutdown();
	return 0;
}
