/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cluster-watch: the watches that keep cluster-view.c's cache, none of
 * which fans out with the cluster's objects:
 *   - one Watch of summary/ (every node's alive and info records), on a
 *     thread of its own;
 *   - one of this node's inbox (nodes/SELF/inbox/), on a thread of its own;
 *   - one of another node's objects (nodes/NODE/) only while someone reads
 *     them (cluster_detail_touch), dropped after detail_idle without a
 *     read. All of these are read by one thread, "nodefs-cdetail", which
 *     polls their connections (a node reading 100 others would otherwise
 *     keep 100 threads, each a few resident pages of stack: the RSS goal
 *     of docs/design.md's cluster section); with https:// members, which
 *     go through libcurl, each has a thread of its own.
 * Each is resumed from its revision after a reconnect, moved to the
 * leader, rotated off a member that stopped answering, and re-listed when
 * its revision was compacted. Knows the cache and the etcd client; never
 * FUSE.
 */
#include "backend-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cluster-internal.h"
#include "log.h"
#include "macro.h"

static const char *below(struct cluster *c, const char *key)
{
	size_t l = strlen(c->prefix);

	if (strncmp(key, c->prefix, l) != 0 || key[l] != '/')
		return NULL;
	return key + l + 1;
}

enum wkind { W_SUMMARY, W_INBOX, W_DETAIL };

struct wctx {
	struct cluster *c;
	struct etcd *e;
	enum wkind kind;
	struct cdetail *d;	/* W_DETAIL */
	char sub[300];		/* what it watches, below the prefix, '/'-terminated */
	int64_t rev;		/* applied through */
	bool stale;	/* its member stopped answering: watch through another */
	bool move;	/* the leader is another member: watch there */
};

/* Whether key (below the prefix) is one w keeps: a detail watch of
 * nodes/NODE/ leaves the inbox (its own watch's, on that node) out. */
static bool w_keeps(const struct wctx *w, const char *k)
{
	if (strncmp(k, w->sub, strlen(w->sub)) != 0)
		return false;
	if (w->kind == W_DETAIL) {
		const char *r = k + strlen(w->sub);
		return strncmp(r, "volumes/", 8) == 0 || strncmp(r, "containers/", 11) == 0;
	}
	return true;
}

static void w_set_watching_locked(struct wctx *w, bool on)
{
	struct cluster *c = w->c;

	switch (w->kind) {
	case W_SUMMARY:
		if (on && !c->watching) {
			c->sum_ep = etcd_current(w->e);
			clock_gettime(CLOCK_MONOTONIC, &c->sum_live_at);
		}
		if (!on && c->watching)
			clock_gettime(CLOCK_MONOTONIC, &c->sum_live_at);
		c->watching = on;
		break;
	case W_INBOX:
		c->inbox_watching = on;
		break;
	case W_DETAIL:
		w->d->watching = on;
		break;
	}
}

static void on_events(void *ctx, const struct etcd_event *ev, size_t n, int64_t rev)
{
	struct wctx *w = ctx;
	struct cluster *c = w->c;

	pthread_mutex_lock(&c->lock);
	w_set_watching_locked(w, true);
	c->watch_events += n;
	for (size_t i = 0; i < n; i++) {
		const char *k = below(c, ev[i].kv.key);
		if (!k || !w_keeps(w, k))
			continue;
		if (ev[i].type == ETCD_EV_DELETE)
			cluster_view_set_locked(c, k, NULL, 0, ev[i].kv.mod_rev);
		else
			cluster_view_set_locked(c, k, ev[i].kv.val, ev[i].kv.vlen, ev[i].kv.mod_rev);
		if (ev[i].kv.mod_rev > w->rev)
			w->rev = ev[i].kv.mod_rev;
	}
	if (rev > w->rev && n == 0)
		w->rev = rev;
	if (w->kind == W_SUMMARY) {
		c->rev_seen = w->rev;
		if (c->rev_seen > c->rev_store)
			c->rev_store = c->rev_seen;
		bnode_changed(c->dir);
	} else if (w->kind == W_DETAIL)
		w->d->rev = w->rev;
	cluster_unlock_kick(c);
}

static bool detail_idle_locked(struct cluster *c, struct cdetail *d)
{
	return cluster_mono_s() - cluster_ts_s(&d->last_read) >= (double)c->detail_idle_ms / 1000.0;
}

static bool watch_stop(void *ctx)
{
	struct wctx *w = ctx;
	struct cluster *c = w->c;
	size_t i = etcd_current(w->e);
	bool stop, on;

	/* a member that stops answering (SIGSTOP, a hung host) keeps its
	 * connections open, and the stream just goes quiet: the status
	 * thread's look at it decides */
	pthread_mutex_lock(&c->lock);
	stop = c->stopping;
	if (!stop && w->kind == W_DETAIL && detail_idle_locked(c, w->d))
		stop = true;
	if (!stop && i < c->nms && c->ms_bad[i] >= 2)
		stop = w->stale = true;
	/* the leader's watchers see a write first (a follower applies it a
	 * hop later): a remote command's answer arrives sooner there */
	on = w->kind == W_SUMMARY ? c->watching : w->kind == W_INBOX ? c->inbox_watching
								      : w->d->watching;
	if (!stop && c->leader_ep && c->leader_ep - 1 != i && on)
		stop = w->move = true;
	pthread_mutex_unlock(&c->lock);
	return stop;
}

/* List w's range into the cache: what is not listed any more goes. */
static int relist(struct wctx *w, struct nerr *err)
{
	struct cluster *c = w->c;
	struct etcd_kv *kvs = NULL;
	size_t n = 0, pos;
	char pre[512];
	struct centry *ce;
	struct hmap listed;
	int64_t rev = 0;
	int r;

	snprintf(pre, sizeof(pre), "%s/%s", c->prefix, w->sub);
	r = etcd_list(w->e, pre, &kvs, &n, &rev, err);
	if (r < 0)
		return r;
	hmap_init(&listed);
	pthread_mutex_lock(&c->lock);
	if (w->kind == W_INBOX && !c->boot_rev)
		c->boot_rev = rev;	/* what an earlier run may have seen */
	for (size_t i = 0; i < n; i++) {
		const char *k = below(c, kvs[i].key);
		if (!k || !w_keeps(w, k))
			continue;
		cluster_view_set_locked(c, k, kvs[i].val, kvs[i].vlen, kvs[i].mod_rev);
		ce = cluster_cache_get_locked(c, k);
		if (ce)
			hmap_put(&listed, hmap_hash_str(k), ce);
	}
	for (pos = 0; (ce = hmap_next(&c->cache, &pos));)
		if (w_keeps(w, ce->key) &&
		    !hmap_get(&listed, hmap_hash_str(ce->key), ce->key, cluster_centry_eq)) {
			char *k = strdup(ce->key);
			if (k) {
				cluster_view_set_locked(c, k, NULL, 0, 0);
				free(k);
				pos = 0;
			}
		}
	w->rev = rev;
	if (w->kind == W_SUMMARY) {
		c->rev_seen = rev;
		bnode_changed(c->dir);
	} else if (w->kind == W_DETAIL)
		w->d->rev = rev;
	cluster_unlock_kick(c);
	hmap_free(&listed);
	etcd_kvs_free(kvs, n);
	return 0;
}

/* Drop what a detail watch kept (its node's objects); c->lock held. */
static void detail_drop_locked(struct cluster *c, struct wctx *w)
{
	size_t pos;
	struct centry *ce;

	for (pos = 0; (ce = hmap_next(&c->cache, &pos));)
		if (w_keeps(w, ce->key)) {
			char *k = strdup(ce->key);
			if (k) {
				cluster_view_set_locked(c, k, NULL, 0, 0);
				free(k);
				pos = 0;
			}
		}
}

/* A watch's first step, and each after a compaction: list its range
 * (a detail watch's first read waits for this). */
static int watch_before(struct wctx *w, struct nerr *err)
{
	struct cluster *c = w->c;
	int r;

	if (w->rev != 0)
		return 0;
	r = relist(w, err);
	if (w->kind == W_DETAIL) {
		pthread_mutex_lock(&c->lock);
		if (r == 0)
			w->d->listed = true;
		else
			w->d->list_failed = true;
		pthread_cond_broadcast(&c->detail_cond);
		pthread_mutex_unlock(&c->lock);
	}
	return r;
}

enum wnext { WN_DONE, WN_NOW, WN_LATER };

/* What a watch does once its stream ended with r (0: watch_stop said
 * so): done (the daemon stops, or a detail watch went idle: what it kept
 * goes with it), again at once (through another member, or the leader),
 * or again after a pause. */
static enum wnext watch_after(struct wctx *w, int r, const struct nerr *err)
{
	struct cluster *c = w->c;

	pthread_mutex_lock(&c->lock);
	w_set_watching_locked(w, false);
	if (w->kind == W_SUMMARY)
		bnode_changed(c->dir);
	if (w->kind == W_DETAIL && (c->stopping || detail_idle_locked(c, w->d))) {
		/* idle: closed, and what it kept goes with it (the
		 * directories change, so no listing is kept past it) */
		w->d->closing = true;
		detail_drop_locked(c, w);
		struct bnode *nd = bnode_lookup(c->nodes, w->d->node);
		for (size_t k = 0; nd && k < 2; k++) {
			struct bnode *cd = bnode_lookup(nd, k ? "containers" : "volumes");
			if (cd)
				bnode_changed(cd);
			bnode_unref(cd);
		}
		bnode_unref(nd);
		pthread_mutex_unlock(&c->lock);
		return WN_DONE;
	}
	pthread_mutex_unlock(&c->lock);
	if (r == -ERANGE)
		w->rev = 0;	/* compacted: list again */
	if (__atomic_load_n(&c->stopping, __ATOMIC_RELAXED))
		return WN_DONE;
	if (w->stale) {
		log_msg(LOG_LVL_INFO, "cluster: watch of %s: %s stopped answering; resuming "
			"through the next member", w->sub, etcd_endpoint(w->e));
		etcd_rotate(w->e);
		w->stale = false;
		return WN_NOW;
	}
	if (w->move) {
		w->move = false;
		cluster_prefer_leader(c, w->e);
		return WN_NOW;
	}
	if (r < 0 && r != -ERANGE)
		log_msg(LOG_LVL_DEBUG, "cluster: watch of %s: %s", w->sub, err->msg);
	return WN_LATER;
}

#define WATCH_AGAIN_MS 200	/* after a failure */

/* A watch's life on a thread of its own: list, watch from there, resume
 * after a failure, list again after a compaction, until the daemon stops
 * (or, a detail watch, its node is no longer read). */
static void watch_run(struct wctx *w)
{
	struct cluster *c = w->c;
	struct nerr err = { 0 };
	struct etcd_watch_cb cb = { .events = on_events, .stop = watch_stop, .ctx = w };
	char pre[512];

	snprintf(pre, sizeof(pre), "%s/%s", c->prefix, w->sub);
	cluster_prefer_leader(c, w->e);
	while (!__atomic_load_n(&c->stopping, __ATOMIC_RELAXED)) {
		int64_t compact = 0;
		int r;

		nerr_clear(&err);
		r = watch_before(w, &err);
		if (r == 0)
			r = etcd_watch(w->e, pre, w->rev + 1, &cb, &compact, &err);
		enum wnext nx = watch_after(w, r, &err);
		if (nx == WN_DONE)
			break;
		if (nx == WN_NOW)
			continue;
		struct timespec t = ts_after_ms(CLOCK_MONOTONIC, WATCH_AGAIN_MS);
		pthread_mutex_lock(&c->lock);
		if (!c->stopping)
			pthread_cond_timedwait(&c->cond, &c->lock, &t);
		pthread_mutex_unlock(&c->lock);
	}
}

static void *watch_thread(struct wctx *w, const char *name)
{
	struct cluster *c = w->c;
	struct etcd_tls tls = { c->ca, c->cert, c->key };
	struct nerr err = { 0 };

	pthread_setname_np(pthread_self(), name);
	if (etcd_new(c->endpoints, &tls, 1000, &w->e, &err) < 0) {
		if (w->kind == W_DETAIL) {
			pthread_mutex_lock(&c->lock);
			w->d->list_failed = w->d->closing = true;
			pthread_cond_broadcast(&c->detail_cond);
			pthread_mutex_unlock(&c->lock);
		}
		return NULL;
	}
	watch_run(w);
	etcd_free(w->e);
	return NULL;
}

void *cluster_watch_main(void *arg)
{
	struct wctx w = { .c = arg, .kind = W_SUMMARY };

	snprintf(w.sub, sizeof(w.sub), "summary/");
	return watch_thread(&w, "nodefs-cwatch");
}

void *cluster_inbox_watch_main(void *arg)
{
	struct cluster *c = arg;
	struct wctx w = { .c = c, .kind = W_INBOX };

	snprintf(w.sub, sizeof(w.sub), "nodes/%s/inbox/", c->node);
	return watch_thread(&w, "nodefs-cinwatch");
}

/* A detail watch on a thread of its own (https:// members). */
static void *detail_main(void *arg)
{
	struct cdetail *d = arg;
	struct cluster *c = d->c;
	struct wctx w = { .c = c, .kind = W_DETAIL, .d = d };

	snprintf(w.sub, sizeof(w.sub), "nodes/%s/", d->node);
	watch_thread(&w, "nodefs-cdetail");
	pthread_mutex_lock(&c->lock);
	d->closing = d->done = true;
	d->watching = false;
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* ---- the detail thread: every detail watch, on one thread ---- */

/* A detail watch as the detail thread keeps it. */
struct dwatch {
	struct wctx w;
	struct etcd_wstream *s;	/* its stream, while open */
	double again_at;	/* when to open it (again), cluster_mono_s() */
	double looked_at;	/* when watch_stop was last asked */
	bool begun;		/* its client made */
};

#define DW_LOOK_S 0.25	/* watch_stop, as a thread's watch asks it */

/* Done: its client goes, and its cdetail is reaped by the next touch. */
static void dw_finish(struct dwatch *dw)
{
	struct cluster *c = dw->w.c;
	struct cdetail *d = dw->w.d;

	etcd_wstream_close(dw->s);
	etcd_free(dw->w.e);
	pthread_mutex_lock(&c->lock);
	if (!d->listed)
		d->list_failed = true;
	d->closing = d->done = true;
	d->watching = false;
	d->mux = NULL;
	pthread_cond_broadcast(&c->detail_cond);
	pthread_mutex_unlock(&c->lock);
	free(dw);
}

/* Its stream ended with r: done (false: dw is gone), or again. */
static bool dw_end(struct dwatch *dw, int r, const struct nerr *err)
{
	etcd_wstream_close(dw->s);
	dw->s = NULL;
	switch (watch_after(&dw->w, r, err)) {
	case WN_DONE:
		dw_finish(dw);
		return false;
	case WN_NOW:
		dw->again_at = 0;
		break;
	case WN_LATER:
		dw->again_at = cluster_mono_s() + WATCH_AGAIN_MS / 1000.0;
		break;
	}
	return true;
}

/* Open its stream: its client the first time, its range listed when it
 * has no revision, the watch request sent. false: dw is gone. */
static bool dw_open(struct dwatch *dw)
{
	struct cluster *c = dw->w.c;
	struct etcd_tls tls = { c->ca, c->cert, c->key };
	struct nerr err = { 0 };
	char pre[512];
	int r;

	if (!dw->begun) {
		if (etcd_new(c->endpoints, &tls, 1000, &dw->w.e, &err) < 0) {
			dw->w.e = NULL;
			dw_finish(dw);
			return false;
		}
		dw->begun = true;
		cluster_prefer_leader(c, dw->w.e);
	}
	snprintf(pre, sizeof(pre), "%s/%s", c->prefix, dw->w.sub);
	r = watch_before(&dw->w, &err);
	if (r == 0)
		r = etcd_wstream_open(dw->w.e, pre, dw->w.rev + 1, &dw->s, &err);
	if (r < 0) {
		dw->s = NULL;
		return dw_end(dw, r, &err);
	}
	dw->looked_at = cluster_mono_s();
	return true;
}

/* The detail thread: each round opens the watches due, asks each open
 * one's watch_stop every DW_LOOK_S, and polls their streams and its
 * eventfd (a detail added, or the daemon stopping). A range read (a
 * first read's, or after a compaction) is made here, and the others'
 * events wait for it in their sockets. */
static void *detail_thread_main(void *arg)
{
	struct cluster *c = arg;
	struct dwatch **v = NULL;
	struct pollfd *pf = NULL;
	size_t cap = 0;

	pthread_setname_np(pthread_self(), "nodefs-cdetail");
	for (;;) {
		size_t n = 0, np = 1;

		pthread_mutex_lock(&c->lock);
		if (c->stopping) {
			pthread_mutex_unlock(&c->lock);
			break;
		}
		for (struct cdetail *d = c->details; d; d = d->next) {
			if (!d->mux)
				continue;
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 16;
				struct dwatch **nv = realloc(v, nc * sizeof(*v));
				struct pollfd *np2 = nv ? realloc(pf, (nc + 1) * sizeof(*pf)) : NULL;
				if (nv)
					v = nv;
				if (np2)
					pf = np2;
				if (!nv || !np2)
					break;	/* the rest next round */
				cap = nc;
			}
			v[n++] = d->mux;
		}
		pthread_mutex_unlock(&c->lock);
		if (!pf && !(pf = calloc(1, sizeof(*pf)))) {
			usleep(100000);
			continue;
		}
		double now = cluster_mono_s(), next = now + DW_LOOK_S;
		pf[0] = (struct pollfd){ .fd = c->detail_wake, .events = POLLIN };
		for (size_t i = 0; i < n; i++) {
			struct dwatch *dw = v[i];
			if (!dw->s && now >= dw->again_at && !dw_open(dw)) {
				v[i] = NULL;
				continue;
			}
			now = cluster_mono_s();
			if (dw->s && now - dw->looked_at >= DW_LOOK_S) {
				dw->looked_at = now;
				if (watch_stop(&dw->w) && !dw_end(dw, 0, &(struct nerr){ 0 })) {
					v[i] = NULL;
					continue;
				}
			}
			if (dw->s)
				pf[np++] = (struct pollfd){ .fd = etcd_wstream_fd(dw->s),
							    .events = POLLIN };
			else if (dw->again_at < next)
				next = dw->again_at;
			if (dw->s && dw->looked_at + DW_LOOK_S < next)
				next = dw->looked_at + DW_LOOK_S;
		}
		now = cluster_mono_s();
		int ms = !n ? -1 : next > now ? (int)((next - now) * 1000) + 1 : 0;
		if (poll(pf, np, ms) <= 0)
			continue;
		if (pf[0].revents) {
			uint64_t x;
			if (read(c->detail_wake, &x, sizeof(x)) < 0)
				x = 0;
		}
		/* the streams in pf[1..] are v's open ones, in order */
		for (size_t i = 0, k = 1; i < n && k < np; i++) {
			struct dwatch *dw = v[i];
			if (!dw || !dw->s)
				continue;
			short re = pf[k++].revents;
			if (!re)
				continue;
			struct etcd_watch_cb cb = { .events = on_events, .ctx = &dw->w };
			struct nerr err = { 0 };
			int64_t compact = 0;
			int r = etcd_wstream_read(dw->s, &cb, &compact, &err);
			if (r < 0)
				dw_end(dw, r, &err);
		}
	}
	/* stopping: every watch on this thread ends */
	pthread_mutex_lock(&c->lock);
	for (;;) {
		struct cdetail *d = c->details;
		while (d && !d->mux)
			d = d->next;
		if (!d)
			break;
		struct dwatch *dw = d->mux;
		pthread_mutex_unlock(&c->lock);
		dw_finish(dw);
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	free(v);
	free(pf);
	return NULL;
}

/* Whether the detail thread can read c's watches (every member http://),
 * starting it the first time; c->lock held. */
static bool detail_thread_locked(struct cluster *c)
{
	if (c->detail_thread_on)
		return true;
	for (const char *p = c->endpoints; *p;) {
		p += strspn(p, " ,");
		if (*p && strncmp(p, "http://", 7) != 0)
			return false;
		p += strcspn(p, " ,");
	}
	c->detail_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->detail_wake < 0)
		return false;
	if (pthread_create(&c->detail_thread, NULL, detail_thread_main, c) != 0) {
		close(c->detail_wake);
		return false;
	}
	c->detail_thread_on = true;
	return true;
}

static void detail_thread_wake(struct cluster *c)
{
	uint64_t one = 1;

	if (c->detail_thread_on && write(c->detail_wake, &one, sizeof(one)) < 0)
		log_msg(LOG_LVL_DEBUG, "cluster: waking the detail thread: %s", strerror(errno));
}

/* Join and free the details that have ended; c->lock held (an ended
 * thread takes it no more; the detail thread let go of its ones). */
static void details_reap_locked(struct cluster *c)
{
	for (struct cdetail **pp = &c->details; *pp;) {
		struct cdetail *d = *pp;
		if (!d->done) {
			pp = &d->next;
			continue;
		}
		*pp = d->next;
		if (!d->muxed)
			pthread_join(d->th, NULL);
		free(d);
	}
}

#define DETAILS_MAX 4096

/* Someone reads under cluster/nodes/NODE/{volumes,containers}/: keep its
 * detail watch open, or open one and wait for its first range read (at
 * most about one etcd call's timeout). A FUSE thread. */
void cluster_detail_touch(struct cluster *c, const char *node)
{
	struct cdetail *d;
	size_t n = 0;

	pthread_mutex_lock(&c->lock);
	d = cluster_detail_find_locked(c, node);
	if (d) {
		clock_gettime(CLOCK_MONOTONIC, &d->last_read);
		if (d->listed || d->list_failed) {
			pthread_mutex_unlock(&c->lock);
			return;
		}
	} else {
		details_reap_locked(c);
		for (struct cdetail *x = c->details; x; x = x->next)
			n++;
		if (c->stopping || n >= DETAILS_MAX || !(d = calloc(1, sizeof(*d)))) {
			pthread_mutex_unlock(&c->lock);
			return;
		}
		d->c = c;
		snprintf(d->node, sizeof(d->node), "%s", node);
		clock_gettime(CLOCK_MONOTONIC, &d->last_read);
		d->since = time(NULL);
		if (detail_thread_locked(c) && (d->mux = calloc(1, sizeof(*d->mux)))) {
			d->muxed = true;
			d->mux->w = (struct wctx){ .c = c, .kind = W_DETAIL, .d = d };
			snprintf(d->mux->w.sub, sizeof(d->mux->w.sub), "nodes/%s/", d->node);
			detail_thread_wake(c);
		} else if (pthread_create(&d->th, NULL, detail_main, d) != 0) {
			free(d);
			pthread_mutex_unlock(&c->lock);
			return;
		}
		d->next = c->details;
		c->details = d;
		c->details_opened++;
	}
	/* the first read waits for the range read, no longer */
	struct timespec t = ts_after_ms(CLOCK_MONOTONIC, 1500);
	while (!d->listed && !d->list_failed && !c->stopping)
		if (pthread_cond_timedwait(&c->detail_cond, &c->lock, &t) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&c->lock);
}

void cluster_details_stop(struct cluster *c)
{
	pthread_mutex_lock(&c->lock);
	pthread_cond_broadcast(&c->detail_cond);
	bool on = c->detail_thread_on;
	detail_thread_wake(c);
	pthread_mutex_unlock(&c->lock);
	if (on) {
		pthread_join(c->detail_thread, NULL);
		close(c->detail_wake);
		c->detail_thread_on = false;
	}
	pthread_mutex_lock(&c->lock);
	for (;;) {
		struct cdetail *d = c->details;
		if (!d)
			break;
		c->details = d->next;
		pthread_mutex_unlock(&c->lock);
		if (!d->muxed)
			pthread_join(d->th, NULL);
		free(d);
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
}
