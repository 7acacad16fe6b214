/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * events: a bounded ring of JSON event lines and the tallies kept beside
 * it; see events.h. One mutex guards both; nothing is ever done under it
 * that waits on a reader.
 */
#include "events.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hmap.h"
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

/* A JSON string of v: malformed UTF-8 bytes become U+FFFD (jansson takes
 * only well-formed text), cut at a character boundary after max bytes. */
static json_t *text(const char *v, size_t max)
{
	const unsigned char *s = (const unsigned char *)v;
	size_t len = strlen(v), i = 0;
	struct sbuf sb = SBUF_INIT(3 * max + 8);
	json_t *j;
	int r = 0;

	if (valid_utf8(v, len) && len <= max)
		return json_stringn(v, len);
	while (r >= 0 && i < len && sb.len < max) {
		size_t k = valid_utf8_seq(s + i, len - i);

		if (k == 0) {
			r = sbuf_adds(&sb, "\xef\xbf\xbd");
			i++;
		} else {
			r = sbuf_add(&sb, s + i, k);
			i += k;
		}
	}
	j = r >= 0 ? json_stringn(sb.buf ? sb.buf : "", sb.len) : NULL;
	sbuf_free(&sb);
	return j;
}

static int set_opt(json_t *o, const char *k, const char *v, size_t max)
{
	json_t *s = v ? text(v, max) : json_null();

	if (!s)
		return -ENOMEM;
	return json_object_set_new(o, k, s) < 0 ? -ENOMEM : 0;
}

/* The event's JSON object, its "seq" to be set; NULL on OOM. */
static json_t *event_object(const char *kind, const char *name, const char *old_state,
			    const char *new_state, const char *op, const char *msg, const char *by,
			    json_t *seq)
{
	struct timespec ts;
	char when[64];
	struct tm tm;
	json_t *o;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when + strlen(when), sizeof(when) - strlen(when), ".%06ldZ", ts.tv_nsec / 1000);
	o = json_object();
	if (!o || json_object_set_new(o, "time", json_string(when)) < 0 ||
	    json_object_set(o, "seq", seq) < 0 ||
	    set_opt(o, "kind", kind, 64) < 0 || set_opt(o, "name", name, 256) < 0 ||
	    set_opt(o, "old", old_state, 64) < 0 || set_opt(o, "new", new_state, 64) < 0 ||
	    set_opt(o, "operation", op, 64) < 0 ||
	    set_opt(o, "message", msg, EVENTS_MSG_MAX) < 0 ||
	    set_opt(o, "by", by, 128) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
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
	json_t *o = NULL, *seq = json_integer(0);
	bool wake = false;
	char *line = NULL;

	if (!seq)
		return;
	/* everything but the sequence number is built outside the lock */
	if (atomic_load(&ev->readers))
		o = event_object(kind, name, old_state, new_state, op, msg, by, seq);

	pthread_mutex_lock(&ev->lock);
	if (!o && atomic_load(&ev->readers))	/* a reader came meanwhile */
		o = event_object(kind, name, old_state, new_state, op, msg, by, seq);
	if (o) {
		json_integer_set(seq, (json_int_t)ev->head);
		line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	}
	if (line || !o) {
		size_t slot = ev->head % ev->cap;
		free(ev->ring[slot]);
		ev->ring[slot] = line;
		ev->stamp[slot] = ev->wake ? tree_seq_now(ev->wake) : 0;
		ev->head++;
		wake = true;	/* `status` pollers are woken by it too */
	}
	pthread_mutex_unlock(&ev->lock);
	json_decref(seq);
	json_decref(o);
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
