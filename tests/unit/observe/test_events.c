/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of backend/core/events.c: the ring of event lines (positions,
 * whole lines, the {"lost":N} marker, the read size), the JSON shape of an
 * event (every key, null when absent, malformed UTF-8 made valid, long
 * messages cut) and the tallies metrics.c renders. No root, no mount.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "events.h"
#include "sbuf.h"

static json_t *line_json(const char *s, size_t len)
{
	json_error_t e;
	json_t *j = json_loadb(s, len, 0, &e);

	cr_assert(j, "not JSON (%s): %.*s", e.text, (int)len, s);
	return j;
}

Test(events, keys_in_order_null_when_absent)
{
	struct events *ev = events_new(8, NULL);
	struct sbuf out = SBUF_INIT(0);
	uint64_t pos = events_attach(ev);
	static const char *const keys[] = { "time", "seq", "kind", "name", "old", "new",
					    "operation", "message", "by" };

	events_emit(ev, "volume", "db", "NODE_PUBLISH", "PUBLISHED", NULL, NULL);
	cr_assert_gt(events_read(ev, &pos, &out, 4096), 0);
	cr_assert_eq(out.buf[out.len - 1], '\n');
	json_t *j = line_json(out.buf, out.len - 1);
	const char *k;
	json_t *v;
	size_t i = 0;
	json_object_foreach(j, k, v) {
		cr_assert_lt(i, 9);
		cr_assert_str_eq(k, keys[i]);
		i++;
	}
	cr_assert_eq(i, 9);
	cr_assert(json_is_null(json_object_get(j, "operation")));
	cr_assert(json_is_null(json_object_get(j, "message")));
	cr_assert_str_eq(json_string_value(json_object_get(j, "new")), "PUBLISHED");
	cr_assert_eq(json_integer_value(json_object_get(j, "seq")), 1);
	json_decref(j);
	sbuf_free(&out);
	events_free(ev);
}

Test(events, open_at_head_sees_only_later)
{
	struct events *ev = events_new(8, NULL);
	struct sbuf out = SBUF_INIT(0);

	events_emit(ev, "plugin", "before", NULL, "added", NULL, NULL);
	uint64_t pos = events_attach(ev);
	cr_assert_eq(events_read(ev, &pos, &out, 4096), 0, "nothing new yet");
	events_emit(ev, "plugin", "after", NULL, "added", NULL, NULL);
	cr_assert_gt(events_read(ev, &pos, &out, 4096), 0);
	cr_assert_null(strstr(out.buf, "before"));
	cr_assert_not_null(strstr(out.buf, "\"after\""));
	sbuf_free(&out);
	events_free(ev);
}

Test(events, lost_marker_counts_exactly)
{
	struct events *ev = events_new(4, NULL);
	struct sbuf out = SBUF_INIT(0);
	uint64_t pos = events_attach(ev);
	char name[16];

	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		events_emit(ev, "plugin", name, NULL, "added", NULL, NULL);
	}
	cr_assert_gt(events_read(ev, &pos, &out, 1 << 20), 0);
	cr_assert(strncmp(out.buf, "{\"lost\":6}\n", 11) == 0, "got %s", out.buf);
	/* then the four kept, n6..n9, whole lines */
	int lines = 0;
	for (char *p = out.buf; (p = strchr(p, '\n')); p++)
		lines++;
	cr_assert_eq(lines, 5);
	cr_assert_not_null(strstr(out.buf, "\"n6\""));
	cr_assert_not_null(strstr(out.buf, "\"n9\""));
	cr_assert_eq(pos, events_head(ev));
	sbuf_free(&out);
	events_free(ev);
}

Test(events, max_gives_whole_lines_at_least_one)
{
	struct events *ev = events_new(16, NULL);
	struct sbuf out = SBUF_INIT(0);
	uint64_t pos = events_attach(ev);

	for (int i = 0; i < 3; i++)
		events_emit(ev, "daemon", NULL, NULL, "READY", NULL, "x");
	/* a max smaller than one line still gives that line, whole */
	int n = events_read(ev, &pos, &out, 1);
	cr_assert_gt(n, 1);
	cr_assert_eq(strchr(out.buf, '\n') - out.buf + 1, n, "exactly one line");
	/* a max of two lines gives two */
	sbuf_reset(&out);
	n = events_read(ev, &pos, &out, 2 * (size_t)n);
	cr_assert_gt(n, 0);
	cr_assert_eq(pos, events_head(ev));
	sbuf_free(&out);
	events_free(ev);
}

Test(events, malformed_utf8_and_long_message)
{
	struct events *ev = events_new(4, NULL);
	struct sbuf out = SBUF_INIT(0);
	uint64_t pos = events_attach(ev);
	char msg[2000];

	memset(msg, 'a', sizeof(msg) - 1);
	msg[sizeof(msg) - 1] = '\0';
	msg[3] = '\xff';
	events_emit(ev, "container", "c\"1", NULL, "EXITED", NULL, msg);
	cr_assert_gt(events_read(ev, &pos, &out, 1 << 20), 0);
	json_t *j = line_json(out.buf, out.len - 1);
	const char *m = json_string_value(json_object_get(j, "message"));
	cr_assert_not_null(m, "message dropped");
	cr_assert(strncmp(m, "aaa\xef\xbf\xbd" "a", 7) == 0, "got %.10s", m);
	cr_assert_leq(strlen(m), EVENTS_MSG_MAX + 3);
	cr_assert_str_eq(json_string_value(json_object_get(j, "name")), "c\"1");
	json_decref(j);
	sbuf_free(&out);
	events_free(ev);
}

static void *emitter(void *arg)
{
	for (int i = 0; i < 2000; i++)
		events_emit(arg, "plugin", "p", NULL, "added", NULL, NULL);
	return NULL;
}

Test(events, concurrent_emitters_rising_seq)
{
	struct events *ev = events_new(16384, NULL);
	struct sbuf out = SBUF_INIT(0);
	uint64_t pos = events_attach(ev);
	pthread_t t[4];

	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, emitter, ev);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	cr_assert_gt(events_read(ev, &pos, &out, 1 << 22), 0);
	long long want = 1;
	for (char *p = out.buf, *nl; (nl = strchr(p, '\n')); p = nl + 1) {
		json_t *j = line_json(p, (size_t)(nl - p));
		cr_assert_eq(json_integer_value(json_object_get(j, "seq")), want);
		want++;
		json_decref(j);
	}
	cr_assert_eq(want, 8001);
	sbuf_free(&out);
	events_free(ev);
}

Test(events, lines_only_while_a_reader_is_attached)
{
	struct events *ev = events_new(8, NULL);
	struct sbuf out = SBUF_INIT(0);

	for (int i = 0; i < 20; i++)	/* nobody reads: only seq advances */
		events_emit(ev, "plugin", "early", NULL, "added", NULL, NULL);
	uint64_t pos = events_attach(ev);
	cr_assert_eq(pos, 21);
	events_emit(ev, "plugin", "late", NULL, "added", NULL, NULL);
	cr_assert_gt(events_read(ev, &pos, &out, 4096), 0);
	json_t *j = line_json(out.buf, out.len - 1);
	cr_assert_str_eq(json_string_value(json_object_get(j, "name")), "late");
	cr_assert_eq(json_integer_value(json_object_get(j, "seq")), 21);
	json_decref(j);
	cr_assert_eq(pos, events_head(ev));
	events_detach(ev);
	sbuf_free(&out);
	events_free(ev);
}

Test(events, tallies_by_family)
{
	struct events *ev = events_new(4, NULL);
	struct sbuf out = SBUF_INIT(0);

	cr_assert_eq(events_tally(ev, "fam_total{a=\"1\"}", 2), 0);
	cr_assert_eq(events_tally(ev, "fam_total{a=\"2\"}", 1), 0);
	cr_assert_eq(events_tally(ev, "fam_total{a=\"1\"}", 3), 0);
	cr_assert_eq(events_tally(ev, "fam_totalx{a=\"1\"}", 7), 0);
	cr_assert_eq(events_tally(ev, "gauge", -1), 0);
	cr_assert_eq(events_render_tallies(ev, "fam_total", &out), 0);
	cr_assert_str_eq(out.buf, "fam_total{a=\"1\"} 5\nfam_total{a=\"2\"} 1\n");
	sbuf_reset(&out);
	cr_assert_eq(events_render_tallies(ev, "gauge", &out), 0);
	cr_assert_str_eq(out.buf, "gauge -1\n");
	cr_assert_eq(events_tally(ev, "", 1), -EINVAL);
	sbuf_free(&out);
	events_free(ev);
}

Test(events, tallies_are_capped)
{
	struct events *ev = events_new(4, NULL);
	char s[64];
	int r = 0;

	for (int i = 0; i < EVENTS_TALLIES_MAX && r == 0; i++) {
		snprintf(s, sizeof(s), "f{i=\"%d\"}", i);
		r = events_tally(ev, s, 1);
	}
	cr_assert_eq(r, 0);
	cr_assert_eq(events_tally(ev, "f{i=\"new\"}", 1), -ENOSPC);
	cr_assert_eq(events_tally(ev, "f{i=\"0\"}", 1), 0, "existing series still count");
	events_free(ev);
}

Test(events, bad_cap)
{
	cr_assert_null(events_new(0, NULL));
	cr_assert_null(events_new(EVENTS_RING_MAX + 1, NULL));
}
