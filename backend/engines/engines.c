/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engines: runtimes/NAME/, one per container driver this build has.
 *
 * A runtime is always present; an engine that does not answer makes it
 * unhealthy with the reason in its status file, never a failed mount. A
 * monitor thread probes each engine's health (health() may block, so it is
 * never called from a FUSE thread) and the files show the last result.
 *
 * The same thread ticks the kinds that ask for it (their tick hook: the
 * plugins' refresh) and reconciles, every reconcile_interval (0: never):
 * each healthy runtime's listing against the objects of the kind that runs
 * on runtimes (its reconcile hook: containers, see reconcile.h). It knows
 * the kinds only through b->kinds (kind.h). runtimes/NAME/reconcile shows the last pass,
 * a difference seen for the first time is an event of kind "drift", and
 * nodefs_reconcile_drift{runtime,kind} counts them.
 */
#include "engines.h"

#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kind.h"
#include "links.h"
#include "log.h"
#include "reconcile.h"
#include "sbuf.h"
#include "loop.h"

#define ENGINE_PROBE_SECONDS 5

static const char *const engine_names[] = { "docker", "lxc" };

/* What runtimes/NAME/ shows beyond struct engine: the last reconciliation.
 * Its node's priv; freed with the node. */
struct engine_view {
	struct engine *e;
	pthread_mutex_t lock;		/* the fields below */
	time_t last_run;		/* 0: no pass yet */
	char error[256];		/* why the last pass did not run, "" if it did */
	struct drift_report rep;	/* what the last pass that ran found */
};

static struct engine_view *view(struct bnode *n)
{
	return n->priv;
}

static struct engine *eng(struct bnode *n)
{
	return view(n)->e;
}

static const char *const drift_kind_names[] = { "missing", "state", "orphan" };

const char *drift_kind_to_string(enum drift_kind k)
{
	return k < DRIFT_KINDS ? drift_kind_names[k] : "unknown";
}

void drift_report_free(struct drift_report *r)
{
	free(r->v);
	*r = (struct drift_report){ 0 };
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

static int show_reconcile(struct bnode *n, struct sbuf *out)
{
	struct engine_view *w = view(n);
	struct backend *b = w->e->b;
	uint64_t every = b->cfg->reconcile_interval_ms;
	char t[64];
	int r;

	pthread_mutex_lock(&w->lock);
	fmt_time(w->last_run, t, sizeof(t));
	r = sbuf_printf(out, "last_run: %s\n", every == 0 ? "off (reconcile_interval = 0)" :
			t[0] ? t : "never");
	if (r >= 0)
		r = sbuf_printf(out, "interval_seconds: %g\nlisted: %zu\ndrift: %zu\n",
				(double)every / 1000.0, w->rep.listed, w->rep.n);
	if (r >= 0 && w->error[0])
		r = sbuf_printf(out, "error: %s\n", w->error);
	for (size_t i = 0; r >= 0 && i < w->rep.n; i++) {
		const struct drift *d = &w->rep.v[i];

		r = sbuf_printf(out, "%s %s id=%s nodefs=%s runtime=%s: %s\n",
				drift_kind_to_string(d->kind), d->name, d->id[0] ? d->id : "-",
				d->nodefs[0] ? d->nodefs : "-", d->runtime[0] ? d->runtime : "-",
				d->note);
	}
	pthread_mutex_unlock(&w->lock);
	return r;
}

static const struct battr engine_attrs[] = {
	{ .name = "status", .flags = BATTR_POLL, .show = show_status },
	{ .name = "version", .show = show_version },
	{ .name = "reconcile", .flags = BATTR_POLL, .show = show_reconcile },
};

static void engine_view_free(struct bnode *n)
{
	struct engine_view *w = n->priv;

	if (!w)
		return;
	drift_report_free(&w->rep);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

static const struct btype engine_type = {
	.name = "runtime",
	.attrs = engine_attrs,
	.nattrs = sizeof(engine_attrs) / sizeof(engine_attrs[0]),
	.free = engine_view_free,
};

const struct btype runtimes_type = { .name = "runtimes" };

static void engine_probe(struct engine *e)
{
	struct sbuf ver = SBUF_INIT(256);
	struct nerr err = { 0 };
	struct engine_ref *h = engine_hold(e);
	bool was, changed;
	int r;

	if (!h || !e->ops->health) {
		r = -ENOTSUP;
		nerr_set(&err, ENOTSUP, "%s", h ? "driver has no health probe" : "driver failed to open");
	} else {
		r = e->ops->health(h->h, &ver, &err);
	}
	engine_put(h);
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
			log_warn("runtime %s: unhealthy: %s", e->ops->name, err.msg);
		else
			log_info("runtime %s: healthy (%s)", e->ops->name, e->version);
		bnode_changed(e->node);
	}
}

static bool drift_same(const struct drift *a, const struct drift *b)
{
	/* an orphan is its engine container; the others are nodefs's
	 * container, whatever its id became when the difference was taken in */
	return a->kind == b->kind && strcmp(a->name, b->name) == 0 &&
	       (a->kind != DRIFT_ORPHAN || strcmp(a->id, b->id) == 0);
}

/* The kind whose objects run on runtimes (its reconcile hook), or NULL. */
static const struct kind_ops *reconciler(struct backend *b)
{
	for (size_t i = 0; i < b->nkinds; i++)
		if (b->kinds[i]->reconcile)
			return b->kinds[i];
	return NULL;
}

static void tick_kinds(struct backend *b)
{
	for (size_t i = 0; i < b->nkinds; i++)
		if (b->kinds[i]->tick)
			b->kinds[i]->tick(b);
}

/* One pass for e: compare, keep the findings, tell what is new. */
static void engine_reconcile(struct engine *e)
{
	struct engine_view *w = view(e->node);
	struct drift_report rep = { 0 }, old;
	struct nerr err = { 0 };
	bool healthy, changed;
	char why[256];
	int r;

	pthread_mutex_lock(&e->lock);
	healthy = e->healthy && e->cur;
	snprintf(why, sizeof(why), "%s", e->reason);
	pthread_mutex_unlock(&e->lock);
	if (!healthy) {
		r = nerr_set(&err, EHOSTDOWN, "not run: the runtime is unhealthy: %s",
			     why[0] ? why : "not probed yet");
	} else {
		r = reconciler(e->b)->reconcile(e->b, e, &rep, &err);
	}
	pthread_mutex_lock(&w->lock);
	changed = strcmp(w->error, r < 0 ? err.msg : "") != 0;
	snprintf(w->error, sizeof(w->error), "%s", r < 0 ? err.msg : "");
	if (r < 0) {
		pthread_mutex_unlock(&w->lock);
		if (changed) {
			log_warn("runtime %s: reconciliation %s", e->ops->name, err.msg);
			bnode_changed(e->node);
		}
		return;
	}
	old = w->rep;
	w->rep = rep;
	w->last_run = time(NULL);
	pthread_mutex_unlock(&w->lock);
	/* w->rep is this thread's alone to replace: rep stays readable */
	changed = changed || old.n != rep.n;
	for (size_t i = 0; i < rep.n; i++) {
		const struct drift *d = &rep.v[i];
		bool known = false;
		char msg[300];

		for (size_t k = 0; k < old.n && !known; k++)
			known = drift_same(d, &old.v[k]);
		if (known)
			continue;
		changed = true;
		snprintf(msg, sizeof(msg), "%s %s%s%s: %s", e->ops->name, drift_kind_to_string(d->kind),
			 d->id[0] ? " " : "", d->id, d->note);
		events_emit(e->b->events, "drift", d->name, d->nodefs[0] ? d->nodefs : NULL,
			    d->runtime[0] ? d->runtime : NULL, NULL, msg);
		log_warn("container %s: drift: %s", d->name, msg);
	}
	drift_report_free(&old);
	if (changed)
		bnode_changed(e->node);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void engines_poke_plugins(struct backend *b)
{
	struct engines_state *es = engines_of(b);

	if (!es->inited)
		return;
	pthread_mutex_lock(&es->mlock);
	es->poked = true;
	pthread_cond_signal(&es->mcond);
	pthread_mutex_unlock(&es->mlock);
}

/* Memory back to the kernel after objects went (a mass destroy, trimmed
 * operations, or objects the kernel held until it forgot their inodes,
 * which no removal counts): once per probe period in which some were
 * removed, or in which the heap's free bytes grew past TRIM_FREE since
 * the last trim, malloc_trim returns the heap's free pages. */
#define TRIM_FREE (256u << 10)

static void trim_memory(struct backend *b, unsigned long long *seen, size_t *free_after)
{
	unsigned long long f = atomic_load(&b->freed);
	struct mallinfo2 mi = mallinfo2();

	if (f == *seen && mi.fordblks < *free_after + TRIM_FREE)
		return;
	*seen = f;
	malloc_trim(0);
	*free_after = mallinfo2().fordblks;
}

static void *monitor_main(void *arg)
{
	unsigned long long trimmed = 0;
	size_t free_after = 0;
	struct backend *b = arg;
	struct engines_state *es = engines_of(b);
	uint64_t every = b->cfg->reconcile_interval_ms;
	uint64_t next_probe = 0, next_rec = mono_ms() + every;

	pthread_setname_np(pthread_self(), "nodefs-monitor");
	pthread_mutex_lock(&es->mlock);
	while (!es->stopping) {
		struct timespec ts;
		uint64_t now = mono_ms(), until;
		bool poked = es->poked;

		es->poked = false;
		pthread_mutex_unlock(&es->mlock);
		if (now >= next_probe) {
			for (size_t i = 0; i < es->n; i++)
				engine_probe(&es->v[i]);
			tick_kinds(b);
			trim_memory(b, &trimmed, &free_after);
			next_probe = now + ENGINE_PROBE_SECONDS * 1000;
		} else if (poked)
			tick_kinds(b);	/* a plugin's health changed */
		/* not while recovery still sets containers straight */
		if (every && now >= next_rec && atomic_load(&b->state) == BACKEND_READY &&
		    reconciler(b)) {
			for (size_t i = 0; i < es->n; i++)
				engine_reconcile(&es->v[i]);
			next_rec = mono_ms() + every;
		}
		now = mono_ms();
		until = next_probe;
		if (every && next_rec < until)
			until = next_rec;
		until = until > now ? until - now : 1;
		pthread_mutex_lock(&es->mlock);
		ts = ts_after_ms(CLOCK_REALTIME, until);
		while (!es->stopping && !es->poked
		       && pthread_cond_timedwait(&es->mcond, &es->mlock, &ts) == 0)
			;
	}
	pthread_mutex_unlock(&es->mlock);
	return NULL;
}

static int engines_render_metrics(struct backend *b, struct sbuf *out)
{
	struct engines_state *es = engines_of(b);
	int r = sbuf_printf(out, "# HELP nodefs_reconcile_drift Differences between nodefs's "
			    "containers and the runtime's listing at the last reconciliation, by kind "
			    "(missing, state, orphan).\n# TYPE nodefs_reconcile_drift gauge\n");

	for (size_t i = 0; r >= 0 && i < es->n; i++) {
		struct engine *e = &es->v[i];
		struct engine_view *w = e->node ? view(e->node) : NULL;
		size_t count[DRIFT_KINDS] = { 0 };

		if (!w)
			continue;
		pthread_mutex_lock(&w->lock);
		for (size_t k = 0; k < w->rep.n; k++)
			if (w->rep.v[k].kind < DRIFT_KINDS)
				count[w->rep.v[k].kind]++;
		pthread_mutex_unlock(&w->lock);
		for (int k = 0; r >= 0 && k < DRIFT_KINDS; k++)
			r = sbuf_printf(out, "nodefs_reconcile_drift{runtime=\"%s\",kind=\"%s\"} %zu\n",
					e->ops->name, drift_kind_names[k], count[k]);
	}
	return r;
}

static struct engine_ref *ref_new(const struct runtime_ops *ops, void *h)
{
	struct engine_ref *r = calloc(1, sizeof(*r));

	if (!r) {
		ops->close(h);
		return NULL;
	}
	atomic_init(&r->refs, 1);
	r->ops = ops;
	r->h = h;
	return r;
}

struct engine_ref *engine_hold(struct engine *e)
{
	struct engine_ref *r;

	pthread_mutex_lock(&e->lock);
	r = e->cur;
	if (r)
		atomic_fetch_add(&r->refs, 1);
	pthread_mutex_unlock(&e->lock);
	return r;
}

void engine_put(struct engine_ref *r)
{
	if (r && atomic_fetch_sub(&r->refs, 1) == 1) {
		if (r->ops->close)
			r->ops->close(r->h);
		free(r);
	}
}

/* Put r in place of e's handle; the old one goes with its last call. */
static void engine_swap(struct engine *e, struct engine_ref *r)
{
	struct engine_ref *old;

	pthread_mutex_lock(&e->lock);
	old = e->cur;
	e->cur = r;
	pthread_mutex_unlock(&e->lock);
	engine_put(old);
}

/* Open e's driver with its [runtime NAME] section of cfg into *ret.
 * -EINVAL is a config error (with FILE:LINE); any other -errno says why the
 * driver could not open (at start that leaves the runtime present and
 * unhealthy). */
static int engine_open_with(struct engine *e, const struct config *cfg,
			    struct engine_ref **ret, struct nerr *err)
{
	const struct config_section *s = config_section_find(cfg, "runtime", e->ops->name);
	struct rt_config rc = { .instance = e->b->instance };
	struct nerr oerr = { 0 };
	struct rt_kv *kv = NULL;
	void *h = NULL;
	int r;

	*ret = NULL;
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
	r = e->ops->open ? e->ops->open(&rc, &h, &oerr) : -ENOTSUP;
	free(kv);
	if (r == -EINVAL)
		return nerr_set(err, EINVAL, "%s:%d: [runtime %s]: %s",
				cfg->path ? cfg->path : "config", s ? s->line : 0,
				e->ops->name, oerr.msg);
	if (r < 0)
		return nerr_set(err, -r, "%s", oerr.msg[0] ? oerr.msg : strerror(-r));
	*ret = ref_new(e->ops, h);
	if (!*ret)
		return nerr_set(err, ENOMEM, "out of memory");
	return 0;
}

static int engine_open(struct engine *e, struct nerr *err)
{
	struct engine_ref *r;
	int rc = engine_open_with(e, e->b->cfg, &r, err);

	if (rc == -EINVAL || rc == -ENOMEM)
		return rc;
	if (rc < 0) {
		pthread_mutex_lock(&e->lock);
		snprintf(e->reason, sizeof(e->reason), "%s", err->msg);
		pthread_mutex_unlock(&e->lock);
		nerr_clear(err);
	}
	engine_swap(e, r);
	pthread_mutex_lock(&e->lock);
	e->cfg = e->b->cfg;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

int engine_watch(struct engine *e, rt_event_fn fn, void *ctx, struct nerr *err)
{
	_cleanup_engine_ struct engine_ref *r = NULL;

	pthread_mutex_lock(&e->lock);
	e->watch_fn = fn;
	e->watch_ctx = ctx;
	pthread_mutex_unlock(&e->lock);
	r = engine_hold(e);
	if (!r || !e->ops->watch)
		return 0;
	return e->ops->watch(r->h, fn, ctx, err);
}

/* Whether e's section differs between the configs, and whether one of
 * the keys that say where the containers live (runtime_ops.home_keys) does. */
static bool section_changed(const struct engine *e, const struct config *a,
			    const struct config *b, bool *ret_home)
{
	const struct config_section *x = config_section_find(a, "runtime", e->ops->name);
	const struct config_section *y = config_section_find(b, "runtime", e->ops->name);
	bool changed = false;

	*ret_home = false;
	for (int pass = 0; pass < 2; pass++) {
		const struct config_section *s = pass ? y : x, *o = pass ? x : y;

		for (size_t k = 0; s && k < s->nkv; k++) {
			const char *v = o ? config_section_get(o, s->kv[k].key) : NULL;

			if (v && s->kv[k].val && strcmp(v, s->kv[k].val) == 0)
				continue;
			changed = true;
			for (const char *const *h = e->ops->home_keys; h && *h; h++)
				if (strcmp(*h, s->kv[k].key) == 0)
					*ret_home = true;
		}
	}
	return changed;
}

int engine_reload(struct engine *e, const struct config *nc, bool in_use, struct nerr *err)
{
	struct engine_ref *r;
	const struct config *oc;
	rt_event_fn fn;
	void *ctx;
	bool home;
	int rc;

	pthread_mutex_lock(&e->lock);
	oc = e->cfg ? e->cfg : e->b->cfg;
	pthread_mutex_unlock(&e->lock);
	if (!section_changed(e, oc, nc, &home))
		return 0;
	if (home && in_use)
		return nerr_set(err, EBUSY, "[runtime %s]: where its containers live changed while "
				"it has some: needs a restart (not applied)", e->ops->name);
	rc = engine_open_with(e, nc, &r, err);
	if (rc < 0 && rc != -EINVAL) {
		char why[NERR_MSG_MAX];

		snprintf(why, sizeof(why), "%s", err->msg);
		return nerr_set(err, -rc, "[runtime %s]: the driver did not open with the new "
				"section: %.200s", e->ops->name, why);
	}
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&e->lock);
	fn = e->watch_fn;
	ctx = e->watch_ctx;
	pthread_mutex_unlock(&e->lock);
	/* the new handle watches before it takes calls: no event falls
	 * between the two (the old one watches until its last call ends) */
	if (fn && e->ops->watch) {
		struct nerr werr = { 0 };

		if (e->ops->watch(r->h, fn, ctx, &werr) < 0)
			log_warn("runtime %s: no event stream: %s", e->ops->name, werr.msg);
	}
	engine_swap(e, r);
	pthread_mutex_lock(&e->lock);
	e->cfg = nc;	/* alive until backend_free, as every config a reload read */
	pthread_mutex_unlock(&e->lock);
	engine_probe(e);
	return 1;
}

static int engines_init(struct backend *b, struct nerr *err)
{
	struct engines_state *es = engines_of(b);
	size_t n = sizeof(engine_names) / sizeof(engine_names[0]);

	pthread_mutex_init(&es->mlock, NULL);
	pthread_cond_init(&es->mcond, NULL);
	es->inited = true;
	es->v = calloc(n, sizeof(*es->v));
	if (!es->v)
		return nerr_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		struct engine *e = &es->v[es->n];
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
		engine_swap(e, NULL);
		{
			struct engine_view *w = calloc(1, sizeof(*w));

			if (!w)
				return nerr_set(err, ENOMEM, "out of memory");
			w->e = e;
			pthread_mutex_init(&w->lock, NULL);
			e->node = bnode_new(&engine_type, engine_names[i], w);
			if (!e->node) {
				pthread_mutex_destroy(&w->lock);
				free(w);
				return nerr_set(err, ENOMEM, "out of memory");
			}
		}
		es->n++;
		r = bnode_add(kind_dir(b, &runtimes_kind), e->node);
		if (r < 0)
			return nerr_set(err, -r, "runtime %s: %s", engine_names[i], strerror(-r));
	}
	return 0;
}

static int engines_start(struct backend *b, struct nerr *err)
{
	struct engines_state *es = engines_of(b);

	for (size_t i = 0; i < es->n; i++) {
		int r = engine_open(&es->v[i], err);
		if (r < 0)
			return r;
	}
	/* a first probe before anything asks an engine for work */
	for (size_t i = 0; i < es->n; i++)
		engine_probe(&es->v[i]);
	if (pthread_create(&es->monitor, NULL, monitor_main, b) != 0)
		return nerr_set(err, EAGAIN, "cannot start the runtime monitor thread");
	es->monitor_running = true;
	return 0;
}

static void engines_stop_monitor(struct backend *b)
{
	struct engines_state *es = engines_of(b);

	if (es->inited) {	/* not when an earlier kind's init failed */
		pthread_mutex_lock(&es->mlock);
		es->stopping = true;
		pthread_cond_broadcast(&es->mcond);
		pthread_mutex_unlock(&es->mlock);
	}
	if (es->monitor_running)
		pthread_join(es->monitor, NULL);
	es->monitor_running = false;
	/* the watcher of uncertain creates looks through the engines */
	if (b->links && b->links->uncertain_stop)
		b->links->uncertain_stop(b);
}

static void engines_stop(struct backend *b)
{
	struct engines_state *es = engines_of(b);

	engines_stop_monitor(b);
	for (size_t i = 0; i < es->n; i++) {
		struct engine *e = &es->v[i];

		engine_swap(e, NULL);
		bnode_unref(e->node);
		e->node = NULL;
		pthread_mutex_destroy(&e->lock);
	}
	free(es->v);
	es->v = NULL;
	es->n = 0;
}

/* A reload's second round (kind.h): each [runtime] section that changed
 * gets a new driver handle, keeping nc (e->cfg); calls in flight finish on
 * the old one, closed with the last of them. One that moves where the
 * containers live is refused while the runtime has some (links.h). */
static void engines_reload_finish(struct backend *b, struct config *nc, struct reload_tally *t)
{
	struct engines_state *es = engines_of(b);

	for (size_t i = 0; i < es->n; i++) {
		struct engine *e = &es->v[i];
		struct nerr e2 = { 0 };
		bool in_use = b->links && b->links->containers_on_engine &&
			      b->links->containers_on_engine(b, e);
		int r = engine_reload(e, nc, in_use, &e2);

		if (r < 0) {
			log_err("reload: runtime %s: %s", e->ops->name, e2.msg);
			t->refused++;
		} else if (r > 0) {
			log_info("reload: runtime %s: changed (calls under way finish with the old "
				 "settings)", e->ops->name);
			t->applied++;
		}
	}
}

static void engines_free(struct backend *b)
{
	struct engines_state *es = engines_of(b);

	if (!es->inited)
		return;
	pthread_mutex_destroy(&es->mlock);
	pthread_cond_destroy(&es->mcond);
}

struct engines_state *engines_of(struct backend *b)
{
	return kind_state(b, &runtimes_kind);
}

/* The root's status file: how many runtimes answer. */
static int engines_status(struct backend *b, struct sbuf *out)
{
	struct engines_state *es = engines_of(b);
	size_t healthy = 0;

	for (size_t i = 0; i < es->n; i++) {
		pthread_mutex_lock(&es->v[i].lock);
		healthy += es->v[i].healthy;
		pthread_mutex_unlock(&es->v[i].lock);
	}
	return sbuf_printf(out, "runtimes_healthy: %zu\n", healthy);
}

/* nodefs_runtime_up, in the daemon's part of the metrics. */
static int engines_render_up(struct backend *b, struct sbuf *out)
{
	struct engines_state *es = engines_of(b);
	int r = sbuf_printf(out, "# HELP nodefs_runtime_up 1 when the container runtime answers.\n"
			    "# TYPE nodefs_runtime_up gauge\n");

	for (size_t i = 0; r >= 0 && i < es->n; i++) {
		struct engine *e = &es->v[i];
		bool up;

		pthread_mutex_lock(&e->lock);
		up = e->healthy;
		pthread_mutex_unlock(&e->lock);
		/* runtime names are the drivers' own ([a-z]): no escaping */
		r = sbuf_printf(out, "nodefs_runtime_up{runtime=\"%s\"} %d\n", e->ops->name, up);
	}
	return r;
}

/* An engine that is down answers nothing: say so at once. */
int engine_ready(struct engine *e, struct nerr *err)
{
	bool ok;
	char why[256];

	pthread_mutex_lock(&e->lock);
	ok = e->healthy && e->cur;
	snprintf(why, sizeof(why), "%s", e->reason);
	pthread_mutex_unlock(&e->lock);
	if (!ok)
		return nerr_set(err, EHOSTDOWN, "runtime %s is unhealthy: %s", e->ops->name,
				why[0] ? why : "not probed yet");
	return 0;
}

bool engine_opened(struct engine *e)
{
	bool ok;

	pthread_mutex_lock(&e->lock);
	ok = e->cur != NULL;
	pthread_mutex_unlock(&e->lock);
	return ok;
}

int engine_take(struct engine *e, struct engine_ref **ret, struct nerr *err)
{
	int r = engine_ready(e, err);

	if (r < 0)
		return r;
	*ret = engine_hold(e);
	if (!*ret)
		return nerr_set(err, EHOSTDOWN, "runtime %s: its driver did not open", e->ops->name);
	return 0;
}

struct engine *engine_find(struct backend *b, const char *name)
{
	struct engines_state *es = engines_of(b);

	for (size_t i = 0; i < es->n; i++)
		if (strcmp(es->v[i].ops->name, name) == 0)
			return &es->v[i];
	return NULL;
}

const struct kind_ops runtimes_kind = {
	.name = "runtimes",
	.type = &runtimes_type,
	.state_size = sizeof(struct engines_state),
	.ready_count = true,
	.init = engines_init,
	.start = engines_start,
	.status = engines_status,
	.render_metrics_first = engines_render_up,
	.render_metrics = engines_render_metrics,
	.reload_finish = engines_reload_finish,
	.reload_noun = "runtime",
	.reload_quiet = true,
	.quiesce = engines_stop_monitor,
	.stop = engines_stop,
	.free = engines_free,
};
