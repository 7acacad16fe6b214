/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* events: a bounded ring of JSON event lines; see events.h. */
#include "events.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sbuf.h"
#include "tree.h"

struct events {
	pthread_mutex_t lock;
	char **ring;		/* ring[seq % cap] */
	size_t cap;
	uint64_t head;		/* next seq to emit; first seq is 1 */
	struct bnode *wake;
};

struct events *events_new(size_t cap, struct bnode *wake)
{
	struct events *ev = calloc(1, sizeof(*ev));

	if (!ev)
		return NULL;
	ev->ring = calloc(cap, sizeof(*ev->ring));
	if (!ev->ring) {
		free(ev);
		return NULL;
	}
	ev->cap = cap;
	ev->head = 1;
	ev->wake = wake;
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
	pthread_mutex_destroy(&ev->lock);
	free(ev);
}

static void set_opt(json_t *o, const char *k, const char *v)
{
	if (v)
		json_object_set_new(o, k, json_string(v));
}

void events_emit(struct events *ev, const char *kind, const char *name,
		 const char *old_state, const char *new_state, const char *op,
		 const char *msg)
{
	struct timespec ts;
	char when[64];
	struct tm tm;
	json_t *o;
	char *line;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when + strlen(when), sizeof(when) - strlen(when), ".%06ldZ", ts.tv_nsec / 1000);

	o = json_object();
	if (!o)
		return;
	pthread_mutex_lock(&ev->lock);
	json_object_set_new(o, "time", json_string(when));
	json_object_set_new(o, "seq", json_integer((json_int_t)ev->head));
	set_opt(o, "kind", kind);
	set_opt(o, "name", name);
	set_opt(o, "old", old_state);
	set_opt(o, "new", new_state);
	set_opt(o, "operation", op);
	set_opt(o, "message", msg);
	line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (line) {
		size_t slot = ev->head % ev->cap;
		free(ev->ring[slot]);
		ev->ring[slot] = line;
		ev->head++;
	}
	pthread_mutex_unlock(&ev->lock);
	json_decref(o);
	if (line && ev->wake)
		bnode_changed(ev->wake);
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
	uint64_t oldest;
	int r = 0;

	pthread_mutex_lock(&ev->lock);
	oldest = ev->head > ev->cap ? ev->head - ev->cap : 1;
	if (*pos < oldest) {
		r = sbuf_printf(out, "{\"lost\":%llu}\n", (unsigned long long)(oldest - *pos));
		*pos = oldest;
	}
	while (r >= 0 && *pos < ev->head) {
		const char *l = ev->ring[*pos % ev->cap];
		size_t n = strlen(l) + 1;

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
