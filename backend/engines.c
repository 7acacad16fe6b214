/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engines: runtimes/NAME/, one per container driver this build has.
 *
 * A runtime is always present; an engine that does not answer makes it
 * unhealthy with the reason in its status file, never a failed mount. A
 * monitor thread probes each engine's health (health() may block, so it is
 * never called from a FUSE thread) and the files show the last result.
 */
#include "backend-internal.h"

#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define ENGINE_PROBE_SECONDS 5

static const char *const engine_names[] = { "docker", "lxc" };

static struct engine *eng(struct bnode *n)
{
	return n->priv;
}

static int show_status(struct bnode *n, struct sbuf *out)
{
	struct engine *e = eng(n);
	int r;

	pthread_mutex_lock(&e->lock);
	if (e->healthy)
		r = sbuf_printf(out, "healthy\n");
	else
		r = sbuf_printf(out, "unhealthy: %s\n", e->reason[0] ? e->reason : "not probed yet");
	pthread_mutex_unlock(&e->lock);
	return r;
}

static int show_version(struct bnode *n, struct sbuf *out)
{
	struct engine *e = eng(n);
	int r = 0;

	pthread_mutex_lock(&e->lock);
	r = sbuf_printf(out, "%s\n", e->version[0] ? e->version : "unknown");
	pthread_mutex_unlock(&e->lock);
	return r;
}

static const struct battr engine_attrs[] = {
	{ .name = "status", .flags = BATTR_POLL, .show = show_status },
	{ .name = "version", .show = show_version },
};

static const struct btype engine_type = {
	.name = "runtime",
	.attrs = engine_attrs,
	.nattrs = sizeof(engine_attrs) / sizeof(engine_attrs[0]),
};

const struct btype runtimes_type = { .name = "runtimes" };

static void engine_probe(struct engine *e)
{
	struct sbuf ver = SBUF_INIT(256);
	struct nerr err = { 0 };
	bool was, changed;
	int r;

	if (!e->h || !e->ops->health) {
		r = -ENOTSUP;
		nerr_set(&err, ENOTSUP, "%s", e->h ? "driver has no health probe" : "driver failed to open");
	} else {
		r = e->ops->health(e->h, &ver, &err);
	}
	pthread_mutex_lock(&e->lock);
	was = e->healthy;
	e->healthy = r >= 0;
	changed = was != e->healthy || (r < 0 && strcmp(e->reason, err.msg) != 0);
	if (r >= 0) {
		e->reason[0] = '\0';
		snprintf(e->version, sizeof(e->version), "%s", ver.buf ? ver.buf : "");
	} else {
		snprintf(e->reason, sizeof(e->reason), "%s", err.msg);
	}
	if (changed)
		e->since = time(NULL);
	pthread_mutex_unlock(&e->lock);
	sbuf_free(&ver);
	if (changed) {
		events_emit(e->b->events, "runtime", e->ops->name, was ? "healthy" : "unhealthy",
			    r >= 0 ? "healthy" : "unhealthy", NULL, r >= 0 ? NULL : err.msg);
		if (r < 0)
			log_warn("runtime %s unhealthy: %s", e->ops->name, err.msg);
		else
			log_info("runtime %s healthy (%s)", e->ops->name, e->version);
		bnode_changed(e->node);
	}
}

static void *monitor_main(void *arg)
{
	struct backend *b = arg;

	pthread_mutex_lock(&b->mlock);
	while (!b->stopping) {
		struct timespec ts;

		pthread_mutex_unlock(&b->mlock);
		for (size_t i = 0; i < b->nengines; i++)
			engine_probe(&b->engines[i]);
		plugins_tick(b);
		pthread_mutex_lock(&b->mlock);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += ENGINE_PROBE_SECONDS;
		while (!b->stopping && pthread_cond_timedwait(&b->mcond, &b->mlock, &ts) == 0)
			;
	}
	pthread_mutex_unlock(&b->mlock);
	return NULL;
}

/* Open e's driver with its [runtime NAME] section. -EINVAL (a config
 * error, with FILE:LINE) is the only failure that stops the daemon; any
 * other leaves the runtime present and unhealthy with the reason. */
static int engine_open(struct engine *e, struct nerr *err)
{
	struct backend *b = e->b;
	const struct config_section *s = config_section_find(b->cfg, "runtime", e->ops->name);
	struct rt_config rc = { 0 };
	struct nerr oerr = { 0 };
	struct rt_kv *kv = NULL;
	int r;

	if (s && s->nkv) {
		kv = calloc(s->nkv, sizeof(*kv));
		if (!kv)
			return nerr_set(err, ENOMEM, "out of memory");
		for (size_t k = 0; k < s->nkv; k++) {
			kv[k].key = s->kv[k].key;
			kv[k].val = s->kv[k].val;
		}
		rc.kv = kv;
		rc.nkv = s->nkv;
	}
	r = e->ops->open ? e->ops->open(&rc, &e->h, &oerr) : -ENOTSUP;
	free(kv);
	if (r == -EINVAL)
		return nerr_set(err, EINVAL, "%s:%d: [runtime %s]: %s",
				b->cfg->path ? b->cfg->path : "config", s ? s->line : 0,
				e->ops->name, oerr.msg);
	if (r < 0) {
		e->h = NULL;
		pthread_mutex_lock(&e->lock);
		snprintf(e->reason, sizeof(e->reason), "%s", oerr.msg[0] ? oerr.msg : strerror(-r));
		pthread_mutex_unlock(&e->lock);
	}
	return 0;
}

int engines_init(struct backend *b, struct nerr *err)
{
	size_t n = sizeof(engine_names) / sizeof(engine_names[0]);

	b->engines = calloc(n, sizeof(*b->engines));
	if (!b->engines)
		return nerr_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		struct engine *e = &b->engines[b->nengines];
		int r;

		e->ops = runtime_find(engine_names[i]);
		if (!e->ops)
			continue;
		e->b = b;
		pthread_mutex_init(&e->lock, NULL);
		/* open once to refuse a bad section before mounting; drivers may
		 * start threads, which do not survive the daemon's fork, so the
		 * handle is made again in engines_start */
		r = engine_open(e, err);
		if (r < 0)
			return r;
		if (e->h)
			e->ops->close(e->h);
		e->h = NULL;
		e->node = bnode_new(&engine_type, engine_names[i], e);
		if (!e->node)
			return nerr_set(err, ENOMEM, "out of memory");
		b->nengines++;
		r = bnode_add(b->runtimes, e->node);
		if (r < 0)
			return nerr_set(err, -r, "runtime %s: %s", engine_names[i], strerror(-r));
	}
	return 0;
}

int engines_start(struct backend *b, struct nerr *err)
{
	for (size_t i = 0; i < b->nengines; i++) {
		int r = engine_open(&b->engines[i], err);
		if (r < 0)
			return r;
	}
	/* a first probe before anything asks an engine for work */
	for (size_t i = 0; i < b->nengines; i++)
		engine_probe(&b->engines[i]);
	if (pthread_create(&b->monitor, NULL, monitor_main, b) != 0)
		return nerr_set(err, EAGAIN, "cannot start the runtime monitor thread");
	b->monitor_running = true;
	return 0;
}

void engines_stop_monitor(struct backend *b)
{
	pthread_mutex_lock(&b->mlock);
	b->stopping = true;
	pthread_cond_broadcast(&b->mcond);
	pthread_mutex_unlock(&b->mlock);
	if (b->monitor_running)
		pthread_join(b->monitor, NULL);
	b->monitor_running = false;
}

void engines_stop(struct backend *b)
{
	engines_stop_monitor(b);
	for (size_t i = 0; i < b->nengines; i++) {
		struct engine *e = &b->engines[i];

		if (e->h && e->ops->close)
			e->ops->close(e->h);
		e->h = NULL;
		bnode_unref(e->node);
		e->node = NULL;
		pthread_mutex_destroy(&e->lock);
	}
	free(b->engines);
	b->engines = NULL;
	b->nengines = 0;
}

struct engine *engine_find(struct backend *b, const char *name)
{
	for (size_t i = 0; i < b->nengines; i++)
		if (strcmp(b->engines[i].ops->name, name) == 0)
			return &b->engines[i];
	return NULL;
}
