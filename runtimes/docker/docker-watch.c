/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * docker-watch: the Docker driver's /events watcher (dk_watch): a thread
 * subscribed to the engine's container events for what carries nodefs's
 * label, over a curl multi handle so close() can wake it; a stream that
 * ends or cannot be parsed reports ENGINE_DOWN, then ENGINE_UP once
 * subscribed again, so the backend resynchronises. It also remembers which
 * containers had an "oom" event since their last start (dk_oom_seen): the
 * engine's OOMKilled flag loses a race with the exit on 20.10.
 *
 * Must not know: the calls on containers (docker.c), the backend, FUSE or
 * checkpoints.
 */
#include <ctype.h>
#include <curl/curl.h>
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
#include "runtime.h"
#include "sbuf.h"

/* --- oom events ---------------------------------------------------------- */

/* id may be a prefix of the full id the events carry */
bool dk_oom_seen(struct docker *d, const char *id)
{
	size_t n = strlen(id);
	bool seen = false;

	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < DK_OOM_MAX && !seen; i++)
		seen = d->oom[i][0] && strncmp(d->oom[i], id, n) == 0;
	pthread_mutex_unlock(&d->lock);
	return seen;
}

void dk_oom_note(struct docker *d, const struct rt_event *ev)
{
	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < DK_OOM_MAX; i++)
		if (strcmp(d->oom[i], ev->id) == 0)
			d->oom[i][0] = '\0';
	if (ev->kind == RT_EV_OOM) {
		snprintf(d->oom[d->oom_next], sizeof(d->oom[0]), "%s", ev->id);
		d->oom_next = (d->oom_next + 1) % DK_OOM_MAX;
	}
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
	struct watch_ctx *wc = calloc(1, sizeof(*wc));
	CURL *c = curl_easy_init();
	int running = 1;

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
	d->wmulti = curl_multi_init();
	if (!d->wmulti) {
		pthread_mutex_unlock(&d->wlock);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	d->fn = fn;
	d->fn_ctx = ctx;
	r = pthread_create(&d->watcher, NULL, watch_main, d);
	if (r) {
		curl_multi_cleanup(d->wmulti);
		d->wmulti = NULL;
		pthread_mutex_unlock(&d->wlock);
		return nerr_set(err, r, "cannot start the docker events thread");
	}
	d->watching = true;
	pthread_mutex_unlock(&d->wlock);
	return 0;
}
