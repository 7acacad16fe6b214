/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of etcd/etcd.c's pure half: base64 both ways, the endpoint
 * list's checks, and the watch stream's framing and decoding (events,
 * deletes, a message cut anywhere, compaction, a server's error, bad JSON).
 * Criterion; no etcd, no network.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"
#include "jw.h"
#include "nerr.h"
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

Test(etcd_b64, round_trip)
{
	const char *in[] = { "", "a", "ab", "abc", "/nodefs/nodes/a", "\xff\x00\x01" };
	size_t len[] = { 0, 1, 2, 3, 15, 3 };

	for (size_t i = 0; i < 6; i++) {
		char *e, *d;
		size_t dl;
		cr_assert_not_null(e = b64_of(in[i], len[i]));
		cr_assert(etcd_b64_decode(e, strlen(e), &d, &dl) >= 0);
		cr_assert_eq(dl, len[i]);
		cr_assert(memcmp(d, in[i], dl) == 0);
		free(e);
		free(d);
	}
	char *e;
	e = b64_of("/a", 2);
	cr_assert_str_eq(e, "L2E=");
	free(e);
}

Test(etcd_b64, rejects)
{
	const char *bad[] = { "L2E", "L2E=L2E=", "L=E=", "!!!!", "L2\nE" };
	char *d;
	size_t dl;

	for (size_t i = 0; i < 5; i++)
		cr_assert_eq(etcd_b64_decode(bad[i], strlen(bad[i]), &d, &dl), -EINVAL, "%s", bad[i]);
}

Test(etcd_client, endpoints)
{
	struct etcd *e;
	struct nerr err = { 0 };

	cr_assert_eq(etcd_new("tcp://x", NULL, 100, &e, &err), -EINVAL);
	cr_assert(strstr(err.msg, "http"));
	cr_assert_eq(etcd_new("  ", NULL, 100, &e, &err), -EINVAL);
	cr_assert_eq(etcd_new("http://a:1/ https://b:2", NULL, 100, &e, &err), 0);
	cr_assert_eq(etcd_nendpoints(e), 2);
	cr_assert_str_eq(etcd_endpoint_at(e, 0), "http://a:1");
	etcd_free(e);
}

struct seen {
	int calls, puts, dels;
	int64_t rev;
	char last[64];
};

static void on_ev(void *ctx, const struct etcd_event *ev, size_t n, int64_t rev)
{
	struct seen *s = ctx;

	s->calls++;
	s->rev = rev;
	for (size_t i = 0; i < n; i++) {
		if (ev[i].type == ETCD_EV_DELETE)
			s->dels++;
		else
			s->puts++;
		snprintf(s->last, sizeof(s->last), "%s=%s", ev[i].kv.key, ev[i].kv.val);
	}
}

static bool no_stop(void *ctx)
{
	return false;
}

static const char STREAM[] =
	"{\"result\":{\"header\":{\"revision\":\"2\"},\"created\":true}}\n"
	"{\"result\":{\"header\":{\"revision\":\"3\"},\"events\":[{\"kv\":{\"key\":\"L2E=\","
	"\"mod_revision\":\"3\",\"value\":\"eA==\"}},{\"type\":\"DELETE\",\"kv\":{\"key\":\"L2I=\","
	"\"mod_revision\":\"3\"}}]}}\n";

Test(etcd_watch, any_cut)
{
	for (size_t step = 1; step <= sizeof(STREAM); step++) {
		struct etcd_wparse p = { 0 };
		struct seen s = { 0 };
		struct etcd_watch_cb cb = { on_ev, no_stop, &s };
		struct nerr err = { 0 };
		size_t len = strlen(STREAM);

		for (size_t o = 0; o < len; o += step)
			cr_assert_eq(etcd_wparse_feed(&p, STREAM + o, len - o < step ? len - o : step,
						      &cb, &err), 0, "%s", err.msg);
		cr_assert_eq(s.calls, 2);
		cr_assert_eq(s.puts, 1);
		cr_assert_eq(s.dels, 1);
		cr_assert_eq(s.rev, 3);
		cr_assert_str_eq(s.last, "/b=");
		etcd_wparse_free(&p);
	}
}

static int feed1(const char *text, struct nerr *err, int64_t *compact)
{
	struct etcd_wparse p = { 0 };
	struct seen s = { 0 };
	struct etcd_watch_cb cb = { on_ev, no_stop, &s };
	int r = etcd_wparse_feed(&p, text, strlen(text), &cb, err);

	*compact = p.compact;
	etcd_wparse_free(&p);
	return r;
}

Test(etcd_watch, errors)
{
	struct nerr err = { 0 };
	int64_t c = 0;

	cr_assert_eq(feed1("{\"result\":{\"compact_revision\":\"5\",\"canceled\":true}}\n", &err, &c),
		     -ERANGE);
	cr_assert_eq(c, 5);
	cr_assert_eq(feed1("{\"error\":{\"message\":\"no leader\"}}\n", &err, &c), -ECANCELED);
	cr_assert(strstr(err.msg, "no leader"));
	cr_assert_eq(feed1("{trunc\n", &err, &c), -EPROTO);
	/* a key that is not base64 is skipped, not fatal */
	cr_assert_eq(feed1("{\"result\":{\"events\":[{\"kv\":{\"key\":\"!!\"}}]}}\n", &err, &c), 0);
}
