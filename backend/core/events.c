/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * events: a bounded ring of JSON event lines and the tallies kept beside
 * it; see events.h. One mutex guards both; nothing is ever done under it
 * that waits on a reader.
 * Must not know: who emits (the kinds name their events) or FUSE.
 */
#include "events.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hmap.h"
#include "jw.h"
#include "sbuf.h"
#include "tree.h"
#include "valid.h"

#define TALLY_NAME_MAX 255

struct tally {
	char *series;
	size_t family_len;	/* bytes before '{' */
	int64_t value;
};

struct events {
	pthread_mutex_t lock;
	char **ring;		/* ring[seq % cap] */
	/* stamp[seq % cap]: the tree's change number when the line was made;
	 * the line is shown once the tree has flushed through it (tree.h),
	 * so its reader finds the files it speaks of already new */
	uint64_t *stamp;
	size_t cap;
	uint64_t head;		/* next seq to emit; first seq is 1 */
	struct bnode *wake;
	/* Readers attached (events_attach). With none, an event only takes
	 * its sequence number: a reader starts at the head, so no one could
	 * ever read its line. */
	atomic_size_t readers;

	struct hmap tallies_by_name;	/* struct tally *, by series */
	struct tally **tallies;		/* in the order made */
	size_t ntallies;
};

struct events *events_new(size_t cap, struct bnode *wake)
{
	struct events *ev;

	if (cap == 0 || cap > EVENTS_RING_MAX)
		return NULL;
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return NULL;
	ev->ring = calloc(cap, sizeof(*ev->ring));
	ev->stamp = calloc(cap, sizeof(*ev->stamp));
	ev->tallies = calloc(EVENTS_TALLIES_MAX, sizeof(*ev->tallies));
	if (!ev->ring || !ev->stamp || !ev->tallies) {
		free(ev->ring);
		free(ev->stamp);
		free(ev->tallies);
		free(ev);
		return NULL;
	}
	ev->cap = cap;
	ev->head = 1;
	ev->wake = wake;
	hmap_init(&ev->tallies_by_name);
	pthread_mutex_init(&ev->lock, NULL);
	return ev;
}

void events_free(struct events *ev)
{
	if (!ev)
		return;
	for (size_t i = 0; i < ev->cap; i++)
		free(ev->ring[i]);
	free(ev->ring);
	free(ev->stamp);
	for (size_t i = 0; i < ev->ntallies; i++) {
		free(ev->tallies[i]->series);
		free(ev->tallies[i]);
	}
	free(ev->tallies);
	hmap_free(&ev->tallies_by_name);
	pthread_mutex_destroy(&ev->lock);
	free(ev);
}

/* Member k: v as a JSON string (null when NULL), malformed UTF-8 bytes
 * made U+FFFD, cut at a character boundary after max bytes. */
static void put_opt(struct jw *w, const char *k, const char *v, size_t max)
{
	const unsigned char *s = (const unsigned char *)v;
	size_t len = v ? strlen(v) : 0, i = 0;
	struct sbuf sb = SBUF_INIT(3 * max + 8);
	int r = 0;

	jw_key(w, k);
	if (!v || (valid_utf8(v, len) && len <= max)) {
		jw_str(w, v);
		return;
	}
	while (r >= 0 && i < len && sb.len < max) {
		size_t n = valid_utf8_seq(s + i, len - i);

		if (n == 0) {
			r = sbuf_adds(&sb, "\xef\xbf\xbd");
			i++;
		} else {
			r = sbuf_add(&sb, s + i, n);
			i += n;
		}
	}
	if (r >= 0)
		r = sbuf_addc(&sb, '\0');
	if (r < 0)
		w->err = w->err ? w->err : r;
	else
		jw_str(w, sb.buf);
	sbuf_free(&sb);
}

/* An event's line, in two parts around its "seq" (set under the lock):
 * what common/jw.c writes for the object, compact, with seq 0 at
 * *ret_seq, the text after it from *ret_rest. 0 or -ENOMEM. */
static int event_text(struct sbuf *out, const char *kind, const char *name,
		      const char *old_state, const char *new_state, const char *op,
		      const char *msg, const char *by, size_t *ret_seq, size_t *ret_rest)
{
	struct timespec ts;
	char when[64];
	struct tm tm;
	struct jw w;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when + strlen(when), sizeof(when) - strlen(when), ".%06ldZ", ts.tv_nsec / 1000);
	jw_init(&w, out, 0);
	jw_obj(&w);
	jw_kstr(&w, "time", when);
	jw_key(&w, "seq");
	*ret_seq = out->len;
	jw_int(&w, 0);
	*ret_rest = out->len;
	put_opt(&w, "kind", kind, 64);
	put_opt(&w, "name", name, 256);
	put_opt(&w, "old", old_state, 64);
	put_opt(&w, "new", new_state, 64);
	put_opt(&w, "operation", op, 64);
	put_opt(&w, "message", msg, EVENTS_MSG_MAX);
	put_opt(&w, "by", by, 128);
	jw_obj_end(&w);
	return jw_end(&w) < 0 ? -ENOMEM : 0;
}

/* The line with seq in its place: malloc'd, or NULL on OOM. */
static char *event_line(const struct sbuf *t, size_t at, size_t rest, uint64_t seq)
{
	char num[24];
	int n = snprintf(num, sizeof(num), "%llu", (unsigned long long)seq);
	char *line = malloc(t->len - (rest - at) + (size_t)n + 1);

	if (!line)
		return NULL;
	memcpy(line, t->buf, at);
	memcpy(line + at, num, (size_t)n);
	memcpy(line + at + n, t->buf + rest, t->len - rest);
	line[t->len - (rest - at) + (size_t)n] = '\0';
	return line;
}

void events_emit(struct events *ev, const char *kind, const char *name,
		 const char *old_state, const char *new_state, const char *op,
		 const char *msg)
{
	events_emit_by(ev, kind, name, old_state, new_state, op, msg, NULL);
}

void events_emit_by(struct events *ev, const char *kind, const char *name,
		    const char *old_state, const char *new_state, const char *op,
		    const char *msg, const char *by)
{
	struct sbuf t = SBUF_INIT(0);
	size_t at = 0, rest = 0;
	bool have = false, wake = false;
	char *line = NULL;

	/* everything but the sequence number is written outside the lock */
	if (atomic_load(&ev->readers))
		have = event_text(&t, kind, name, old_state, new_state, op, msg, by, &at,
				  &rest) == 0;

	pthread_mutex_lock(&ev->lock);
	if (!have && atomic_load(&ev->readers)) {	/* a reader came meanwhile */
		sbuf_free(&t);
		t = (struct sbuf)SBUF_INIT(0);
		have = event_text(&t, kind, name, old_state, new_state, op, msg, by, &at,
				  &rest) == 0;
	}
	if (have)
		line = event_line(&t, at, rest, ev->head);
	if (line || !have) {
		size_t slot = ev->head % ev->cap;
		free(ev->ring[slot]);
		ev->ring[slot] = line;
		ev->stamp[slot] = ev->wake ? tree_seq_now(ev->wake) : 0;
		ev->head++;
		wake = true;	/* `status` pollers are woken by it too */
	}
	pthread_mutex_unlock(&ev->lock);
	sbuf_free(&t);
	if (wake && ev->wake)
		bnode_changed(ev->wake);
}

uint64_t events_attach(struct events *ev)
{
	uint64_t h;

	pthread_mutex_lock(&ev->lock);
	atomic_fetch_add(&ev->readers, 1);
	h = ev->head;
	pthread_mutex_unlock(&ev->lock);
	return h;
}

void events_detach(struct events *ev)
{
	atomic_fetch_sub(&ev->readers, 1);
}

bool events_readable(struct events *ev, uint64_t pos)
{
	bool r;

	pthread_mutex_lock(&ev->lock);
	r = pos < ev->head &&
	    (pos < (ev->head > ev->cap ? ev->head - ev->cap : 1) ||
	     ev->stamp[pos % ev->cap] <= (ev->wake ? tree_seq_flushed(ev->wake) : 0));
	pthread_mutex_unlock(&ev->lock);
	return r;
}

uint64_t events_head(struct events *ev)
{
	uint64_t h;

	pthread_mutex_lock(&ev->lock);
	h = ev->head;
	pthread_mutex_unlock(&ev->lock);
	return h;
}

int events_read(struct events *ev, uint64_t *pos, struct sbuf *out, size_t max)
{
	size_t start = out->len;
	uint64_t oldest, flushed;
	int r = 0;

	pthread_mutex_lock(&ev->lock);
	flushed = ev->wake ? tree_seq_flushed(ev->wake) : 0;
	oldest = ev->head > ev->cap ? ev->head - ev->cap : 1;
	if (*pos < oldest) {
		r = sbuf_printf(out, "{\"lost\":%llu}\n", (unsigned long long)(oldest - *pos));
		if (r >= 0)
			*pos = oldest;
	}
	while (r >= 0 && *pos < ev->head) {
		const char *l = ev->ring[*pos % ev->cap];
		size_t n;

		if (ev->stamp[*pos % ev->cap] > flushed)
			break;	/* its change is not yet visible in the files */
		if (!l) {	/* emitted while no reader was attached */
			(*pos)++;
			continue;
		}
		n = strlen(l) + 1;

		if (out->len > start && out->len - start + n > max)
			break;
		r = sbuf_add(out, l, n - 1);
		if (r >= 0)
			r = sbuf_addc(out, '\n');
		if (r >= 0)
			(*pos)++;
	}
	pthread_mutex_unlock(&ev->lock);
	if (r < 0)
		return r;
	return (int)(out->len - start);
}

/* ---- tallies ---- */

static bool tally_eq(const void *val, const void *key)
{
	return strcmp(((const struct tally *)val)->series, key) == 0;
}

int events_tally(struct events *ev, const char *series, int64_t delta)
{
	size_t len = strlen(series);
	uint64_t h = hmap_hash_str(series);
	struct tally *t;
	int r = 0;

	if (len == 0 || len > TALLY_NAME_MAX)
		return -EINVAL;
	pthread_mutex_lock(&ev->lock);
	t = hmap_get(&ev->tallies_by_name, h, series, tally_eq);
	if (!t) {
		if (ev->ntallies >= EVENTS_TALLIES_MAX) {
			r = -ENOSPC;
			goto out;
		}
		t = calloc(1, sizeof(*t));
		if (!t || !(t->series = strdup(series))) {
			free(t);
			r = -ENOMEM;
			goto out;
		}
		t->family_len = strcspn(series, "{");
		if ((r = hmap_put(&ev->tallies_by_name, h, t)) < 0) {
			free(t->series);
			free(t);
			goto out;
		}
		ev->tallies[ev->ntallies++] = t;
	}
	t->value += delta;
out:
	pthread_mutex_unlock(&ev->lock);
	return r;
}

int events_render_tallies(struct events *ev, const char *family, struct sbuf *out)
{
	size_t flen = strlen(family);
	int r = 0;

	pthread_mutex_lock(&ev->lock);
	for (size_t i = 0; r >= 0 && i < ev->ntallies; i++) {
		struct tally *t = ev->tallies[i];

		if (t->family_len == flen && memcmp(t->series, family, flen) == 0)
			r = sbuf_printf(out, "%s %lld\n", t->series, (long long)t->value);
	}
	pthread_mutex_unlock(&ev->lock);
	return r;
}
