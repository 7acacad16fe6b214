/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * docker-watch: the Docker driver's /events watcher (dk_watch): a thread
 * subscribed to the engine's container events for what carries nodefs's
 * label, over a curl multi handle so close() can wake it; a stream that
 * ends or cannot be parsed reports ENGINE_DOWN, then ENGINE_UP once
 * subscribed again, so the backend resynchronises. It also remembers which
 * containers had an "oom" event since their last start (dk_oom_killed):
 * the engine's OOMKilled flag loses a race with the exit on 20.10, and the
 * event may come after the exit's. Before waiting for that event it asks
 * the kernel's log (rt-oomlog.h): Podman on cgroup v2 often reports neither.
 *
 * Must not know: the calls on containers (docker.c), the backend, FUSE or
 * checkpoints.
 */
#include <ctype.h>
#include "lazycurl.h"	/* libcurl, loaded on first need */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "docker-driver-internal.h"
#include "macro.h"
#include "nerr.h"
#include "rt-oomlog.h"
#include "runtime.h"
#include "sbuf.h"

/* --- oom events ---------------------------------------------------------- */

/* The note for id, d->lock held; a new one (the oldest slot) when make. id
 * and a note match when one is a prefix of the other. */
static struct dk_note *note_of(struct docker *d, const char *id, bool make)
{
	size_t n = strlen(id);

	for (size_t i = 0; i < DK_OOM_MAX; i++) {
		struct dk_note *t = &d->note[i];
		size_t m = strlen(t->id);

		if (m && strncmp(t->id, id, n < m ? n : m) == 0)
			return t;
	}
	if (!make)
		return NULL;
	struct dk_note *t = &d->note[d->note_next];

	d->note_next = (d->note_next + 1) % DK_OOM_MAX;
	*t = (struct dk_note){ 0 };
	snprintf(t->id, sizeof(t->id), "%s", id);
	return t;
}

bool dk_oom_killed(struct docker *d, const char *id, const struct rt_status *st)
{
	struct dk_note *t;
	bool oom;

	if (st->oom_killed)
		return true;
	if (st->exit_code == 128 + 9 && st->memory_limited && rt_oomlog_find(id, st->started_at) == 1) {
		pthread_mutex_lock(&d->lock);
		note_of(d, id, true)->oom = true;	/* the next inspect need not read the log */
		pthread_mutex_unlock(&d->lock);
		return true;
	}
	pthread_mutex_lock(&d->lock);
	t = note_of(d, id, false);
	oom = t && t->oom;
	if (!oom && st->exit_code == 128 + 9 && st->memory_limited && !(t && (t->asked || t->waited))) {
		struct timespec until;

		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += DK_OOM_GRACE_MS % 1000 * 1000000L;
		until.tv_sec += DK_OOM_GRACE_MS / 1000 + until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		for (;;) {
			t = note_of(d, id, false);
			if ((t && t->oom) ||
			    pthread_cond_timedwait(&d->oomcond, &d->lock, &until) == ETIMEDOUT)
				break;
		}
		t = note_of(d, id, true);
		t->waited = true;
		oom = t->oom;
	}
	pthread_mutex_unlock(&d->lock);
	return oom;
}

void dk_oom_note(struct docker *d, const struct rt_event *ev)
{
	struct dk_note *t;

	pthread_mutex_lock(&d->lock);
	t = note_of(d, ev->id, ev->kind == RT_EV_OOM);
	if (t && ev->kind == RT_EV_OOM) {
		t->oom = true;
		pthread_cond_broadcast(&d->oomcond);
	} else if (t) {
		*t = (struct dk_note){ 0 };	/* a new run, or gone */
	}
	pthread_mutex_unlock(&d->lock);
}

void dk_oom_asked(struct docker *d, const char *id)
{
	pthread_mutex_lock(&d->lock);
	note_of(d, id, true)->asked = true;
	pthread_mutex_unlock(&d->lock);
}

/* --- the /events watcher -------------------------------------------------- */

struct watch_ctx {
	struct docker *d;
	int *up;		/* -1 unknown, 0 down, 1 up */
	bool connected;
	char line[DOCKER_LINE_CAP];
	size_t len;
};

static void emit(struct docker *d, enum rt_event_kind kind)
{
	struct rt_event ev = { .kind = kind, .time = time(NULL) };

	d->fn(d->fn_ctx, &ev);
}

static size_t watch_header(char *p, size_t sz, size_t nm, void *ctx)
{
	struct watch_ctx *wc = ctx;
	size_t n = sz * nm;

	if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		const char *sp = memchr(p, ' ', n);

		wc->connected = sp && strtol(sp + 1, NULL, 10) == 200;
	} else if ((n == 2 && p[0] == '\r') || (n == 1 && p[0] == '\n')) {
		/* end of headers of a 200: the engine is subscribed and up */
		if (wc->connected && *wc->up != 1) {
			*wc->up = 1;
			emit(wc->d, RT_EV_ENGINE_UP);
		}
	}
	return n;
}

/* Events arrive one JSON object per line. A line past its cap or one that
 * does not parse means an event may be lost: the transfer is ended, so the
 * watcher reconnects and reports ENGINE_DOWN then ENGINE_UP, and the backend
 * resynchronises; nothing is silently dropped. */
static size_t watch_write(char *p, size_t sz, size_t nm, void *ctx)
{
	struct watch_ctx *wc = ctx;
	size_t n = sz * nm;

	if (!wc->connected)
		return n;
	for (size_t i = 0; i < n; i++) {
		struct rt_event ev;
		char id[128];
		int r;

		if (p[i] != '\n') {
			if (wc->len + 1 >= sizeof(wc->line))
				return 0;
			wc->line[wc->len++] = p[i];
			continue;
		}
		r = wc->len ? docker_json_parse_event(wc->line, wc->len, &ev, id, sizeof(id)) : 0;
		wc->len = 0;
		if (r < 0)
			return 0;
		if (r == 1) {
			if (ev.kind == RT_EV_OOM || ev.kind == RT_EV_START || ev.kind == RT_EV_DESTROY)
				dk_oom_note(wc->d, &ev);
			wc->d->fn(wc->d->fn_ctx, &ev);
		}
	}
	return n;
}

static bool stopping(struct docker *d)
{
	bool s;

	pthread_mutex_lock(&d->wlock);
	s = d->stopping;
	pthread_mutex_unlock(&d->wlock);
	return s;
}

/* One subscription: returns when the stream ends, fails, or close() asks. */
static void watch_once(struct docker *d, int *up)
{
	/* filters={"label":["io.nodefs.managed=1"],"type":["container"]} */
	static const char url[] = "http://docker/events?filters="
		"%7B%22label%22%3A%5B%22" RT_OWNER_LABEL "%3D1%22%5D%2C"
		"%22type%22%3A%5B%22container%22%5D%7D";
	struct watch_ctx *wc;
	CURL *c;
	int running = 1;

	/* an engine not there yet ends this subscription at once, without
	 * loading libcurl; its multi handle is made with the first one */
	if (dk_curl_ready(d, &(struct nerr){ 0 }) < 0)
		return;
	pthread_mutex_lock(&d->wlock);
	if (!d->wmulti && !d->stopping)
		d->wmulti = curl_multi_init();
	pthread_mutex_unlock(&d->wlock);
	if (!d->wmulti || stopping(d))
		return;
	wc = calloc(1, sizeof(*wc));
	c = curl_easy_init();
	if (!wc || !c)
		goto out;
	wc->d = d;
	wc->up = up;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, d->sock);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, DK_CONNECT_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, watch_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, wc);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, watch_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, wc);
	if (curl_multi_add_handle(d->wmulti, c) != CURLM_OK)
		goto out;
	while (running && !stopping(d)) {
		if (curl_multi_perform(d->wmulti, &running) != CURLM_OK)
			break;
		if (running)
			curl_multi_poll(d->wmulti, NULL, 0, 1000, NULL);
	}
	curl_multi_remove_handle(d->wmulti, c);
out:
	curl_easy_cleanup(c);
	free(wc);
}

static void *watch_main(void *arg)
{
	struct docker *d = arg;
	long backoff_ms = 100;
	int up = -1;

	pthread_setname_np(pthread_self(), "nodefs-dockerev");
	while (!stopping(d)) {
		int was = up;
		struct timespec ts;

		watch_once(d, &up);
		if (stopping(d))
			break;
		/* the stream ended: events may have been missed, so the engine
		 * counts as down until a new subscription says it is up */
		if (up != 0) {
			up = 0;
			dk_forget_version(d);
			emit(d, RT_EV_ENGINE_DOWN);
		}
		backoff_ms = was == 1 ? 100 : (backoff_ms * 2 > 2000 ? 2000 : backoff_ms * 2);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += (backoff_ms % 1000) * 1000000L;
		ts.tv_sec += backoff_ms / 1000 + ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_mutex_lock(&d->wlock);
		while (!d->stopping &&
		       pthread_cond_timedwait(&d->wcond, &d->wlock, &ts) != ETIMEDOUT)
			;
		pthread_mutex_unlock(&d->wlock);
	}
	return NULL;
}

int dk_watch(void *h, rt_event_fn fn, void *ctx, struct nerr *err)
{
	struct docker *d = h;
	int r;

	if (!fn)
		return nerr_set(err, EINVAL, "watch: no callback");
	pthread_mutex_lock(&d->wlock);
	if (d->watching) {
		pthread_mutex_unlock(&d->wlock);
		return nerr_set(err, EBUSY, "docker events are already watched");
	}
	d->fn = fn;
	d->fn_ctx = ctx;
	r = pthread_create(&d->watcher, NULL, watch_main, d);
	if (r) {
		pthread_mutex_unlock(&d->wlock);
		return nerr_set(err, r, "cannot start the docker events thread");
	}
	d->watching = true;
	pthread_mutex_unlock(&d->wlock);
	return 0;
}
