/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * backend: the hub. The root of the tree, the daemon status, the threads
 * the objects share, and the daemon's life: make, start, recover, stop.
 *
 * It knows the kinds of object only through their tables (kind.h), handed
 * from above, as Plan 9's kernel knows its devices through devtab[]: it
 * makes each kind's collection and state, calls its init and start, runs
 * recovery in rounds over all kinds, lets each render its lines of the
 * status file, and stops and frees them. It must not name a kind.
 */
#include "backend-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "instance.h"
#include "kind.h"
#include "links.h"
#include "log.h"
#include "macro.h"
#include "store.h"
#include "nodefs-config.h"
#include "loop.h"

const char *backend_state_to_string(enum backend_state s)
{
	switch (s) {
	case BACKEND_RECOVERING: return "RECOVERING";
	case BACKEND_READY: return "READY";
	case BACKEND_STOPPING: return "STOPPING";
	}
	return "UNKNOWN";
}

/* ---- root ---- */

static int show_status(struct bnode *n, struct sbuf *out)
{
	struct backend *b = node_backend(n);
	struct timespec now;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &now);
	r = sbuf_printf(out,
		"state: %s\n"
		"version: %s\n"
		"uptime_seconds: %lld\n"
		"state_dir: %s\n"
		"instance: %s\n"
		"name_prefix: %s\n",
		backend_state_to_string(atomic_load(&b->state)), NODEFS_VERSION,
		(long long)(now.tv_sec - b->started_mono.tv_sec),
		b->cfg->state_dir, b->instance, b->name_prefix);
	/* each kind with a collection: its count, then what it adds */
	for (size_t i = 0; r >= 0 && i < b->nkinds; i++) {
		const struct kind_ops *k = b->kinds[i];

		if (k->type)
			r = sbuf_printf(out, "%s: %zu\n", k->name, bnode_count(b->dirs[i]));
		if (r >= 0 && k->status)
			r = k->status(b, out);
	}
	if (r >= 0)
		r = sbuf_printf(out, "checkpoint_errors: %u\n", atomic_load(&b->bad_records));
	return r;
}

/* ---- the kinds' slots ---- */

static ssize_t kind_index(struct backend *b, const struct kind_ops *k)
{
	for (size_t i = 0; i < b->nkinds; i++)
		if (b->kinds[i] == k)
			return (ssize_t)i;
	return -1;
}

struct bnode *kind_dir(struct backend *b, const struct kind_ops *k)
{
	ssize_t i = kind_index(b, k);

	return i < 0 || !b->dirs ? NULL : b->dirs[i];
}

void kind_set_dir(struct backend *b, const struct kind_ops *k, struct bnode *dir)
{
	ssize_t i = kind_index(b, k);

	if (i >= 0 && b->dirs) {
		bnode_unref(b->dirs[i]);
		b->dirs[i] = dir;
	} else
		bnode_unref(dir);
}

void *kind_state(struct backend *b, const struct kind_ops *k)
{
	ssize_t i = kind_index(b, k);

	return i < 0 || !b->states ? NULL : b->states[i];
}

struct bnode *kind_dir_named(struct backend *b, const char *name)
{
	for (size_t i = 0; i < b->nkinds; i++)
		if (strcmp(b->kinds[i]->name, name) == 0)
			return b->dirs ? b->dirs[i] : NULL;
	return NULL;
}

void *kind_state_named(struct backend *b, const char *name)
{
	for (size_t i = 0; i < b->nkinds; i++)
		if (strcmp(b->kinds[i]->name, name) == 0)
			return b->states ? b->states[i] : NULL;
	return NULL;
}

size_t backend_count(struct backend *b, const char *name)
{
	struct bnode *d = kind_dir_named(b, name);

	return d ? bnode_count(d) : 0;
}

struct events_reader {
	uint64_t pos;
};

static int events_open(struct bnode *n, void **ret_st)
{
	struct events_reader *r = malloc(sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->pos = events_attach(node_backend(n)->events);
	*ret_st = r;
	return 0;
}

static int events_stream_read(struct bnode *n, void *st, struct sbuf *out, size_t max)
{
	struct events_reader *r = st;
	int k = events_read(node_backend(n)->events, &r->pos, out, max);

	return k == 0 ? -EAGAIN : k;
}

static int events_ready(struct bnode *n, void *st)
{
	struct events_reader *r = st;

	return events_readable(node_backend(n)->events, r->pos);
}

static void events_close(struct bnode *n, void *st)
{
	events_detach(node_backend(n)->events);
	free(st);
}

static const struct bstream_ops events_stream = {
	.open = events_open,
	.read = events_stream_read,
	.ready = events_ready,
	.close = events_close,
};

/* resources, resources.json: resources/ through links.h (empty when it
 * is not linked in) */
static int show_resources_how(struct bnode *n, struct sbuf *out, int how)
{
	struct backend *b = node_backend(n);

	return b->links && b->links->resources_show ? b->links->resources_show(b, out, how) : 0;
}

static int show_resources(struct bnode *n, struct sbuf *out)
{
	return show_resources_how(n, out, 0);
}

static int show_resources_json(struct bnode *n, struct sbuf *out)
{
	return show_resources_how(n, out, 1);
}

static const struct battr root_attrs[] = {
	{ .name = "status", .flags = BATTR_POLL, .show = show_status },
	{ .name = "events", .stream = &events_stream },
	{ .name = "resources", .show = show_resources },
	{ .name = "resources.json", .show = show_resources_json },
};

static const struct btype root_type = {
	.name = "root", .attrs = root_attrs, .nattrs = sizeof(root_attrs) / sizeof(root_attrs[0]),
};

/* ---- metrics/ ---- */

static int show_prom(struct bnode *n, struct sbuf *out)
{
	return metrics_render(node_backend(n), out);
}

static const struct battr metrics_attrs[] = {
	{ .name = "nodefs.prom", .show = show_prom },
};

static const struct btype metrics_type = {
	.name = "metrics", .attrs = metrics_attrs, .nattrs = 1,
};

static int add_dir(struct bnode *root, const struct btype *t, const char *name,
		   struct bnode **ret)
{
	struct bnode *n = bnode_new(t, name, NULL);
	int r;

	if (!n)
		return -ENOMEM;
	r = bnode_add(root, n);
	if (r < 0) {
		bnode_unref(n);
		return r;
	}
	*ret = n;	/* the backend keeps this reference */
	return 0;
}

static int mkdir_p(const char *path, struct nerr *err)
{
	char buf[4096];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return nerr_set(err, ENAMETOOLONG, "state dir path too long");
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return nerr_set(err, errno, "cannot create %s: %s", buf, strerror(errno));
		*p = '/';
	}
	if (mkdir(buf, 0700) < 0 && errno != EEXIST)
		return nerr_set(err, errno, "cannot create %s: %s", buf, strerror(errno));
	return 0;
}

int backend_new_with(struct config *cfg, const struct kind_ops *const *kinds, size_t nkinds,
		     const struct backend_links *links, struct backend **ret, struct nerr *err)
{
	struct backend *b = calloc(1, sizeof(*b));
	pthread_condattr_t ca;
	int r;

	if (!b) {
		config_free(cfg);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	b->cfg = cfg;
	b->kinds = kinds;
	b->nkinds = nkinds;
	b->links = links;
	atomic_init(&b->state, BACKEND_RECOVERING);
	clock_gettime(CLOCK_MONOTONIC, &b->started_mono);
	b->started = time(NULL);
	intern_init(&b->names);
	pthread_mutex_init(&b->dlock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&b->dcond, &ca);
	pthread_condattr_destroy(&ca);
	b->parked_tail = &b->parked;
	b->lock_fd = -1;
	b->dirs = calloc(nkinds ? nkinds : 1, sizeof(*b->dirs));
	b->states = calloc(nkinds ? nkinds : 1, sizeof(*b->states));
	if (!b->dirs || !b->states) {
		r = nerr_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < nkinds; i++)
		if (kinds[i]->state_size && !(b->states[i] = calloc(1, kinds[i]->state_size))) {
			r = nerr_set(err, ENOMEM, "out of memory");
			goto fail;
		}

	r = mkdir_p(cfg->state_dir, err);
	if (r < 0)
		goto fail;
	if (access(cfg->state_dir, W_OK) < 0) {
		r = nerr_set(err, errno, "state dir %s is not writable: %s",
			     cfg->state_dir, strerror(errno));
		goto fail;
	}
	/* One daemon per state dir: two would write the same records. The
	 * lock goes with the daemon (flock: its open file, kept across the
	 * fork of daemonizing), so a crashed one never leaves it held. Open
	 * read-only: a file open for writing would keep the state dir's
	 * filesystem from being remounted read-only under a running daemon. */
	char lock[4096];
	snprintf(lock, sizeof(lock), "%s/lock", cfg->state_dir);
	b->lock_fd = open(lock, O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
	if (b->lock_fd < 0) {
		r = nerr_set(err, errno, "cannot open %s: %s", lock, strerror(errno));
		goto fail;
	}
	if (flock(b->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		r = errno == EWOULDBLOCK
			? nerr_set(err, EBUSY, "state dir %s is in use by another nodefs (it holds %s)",
				   cfg->state_dir, lock)
			: nerr_set(err, errno, "cannot lock %s: %s", lock, strerror(errno));
		goto fail;
	}
	r = store_open(cfg->state_dir, &b->store, err);
	if (r < 0)
		goto fail;
	r = instance_load(cfg->state_dir, b->instance, err);
	if (r < 0)
		goto fail;
	if (cfg->name_prefix)
		snprintf(b->name_prefix, sizeof(b->name_prefix), "%s", cfg->name_prefix);
	else
		instance_default_prefix(b->instance, b->name_prefix, sizeof(b->name_prefix));

	r = -ENOMEM;
	b->root = bnode_new_root(&root_type, "", b);
	if (!b->root)
		goto oom;
	b->root->owner = b;
	b->work = work_pool_new(64);
	if (!b->work)
		goto oom;
	b->events = events_new(b->cfg->events_keep, b->root);
	if (!b->events)
		goto oom;
	if ((r = add_dir(b->root, &metrics_type, "metrics", &b->metrics)) < 0)
		goto oom;
	for (size_t i = 0; i < b->nkinds; i++) {
		const struct kind_ops *k = b->kinds[i];

		if (!k->type)
			continue;	/* makes its own directory, when configured */
		r = add_dir(b->root, k->type, k->name, &b->dirs[i]);
		if (r < 0)
			goto oom;
	}
	for (size_t i = 0; i < b->nkinds; i++)
		if (b->kinds[i]->init && (r = b->kinds[i]->init(b, err)) < 0)
			goto fail;
	*ret = b;
	return 0;
oom:
	nerr_set(err, ENOMEM, "out of memory");
fail:
	backend_free(b);
	return r;
}

/* Did the node reboot since the state dir was last used? The kernel's boot
 * id changes with every boot; the last one seen is kept beside the
 * checkpoints. */
static bool check_reboot(struct backend *b)
{
	char now[64] = "", then[64] = "", path[4200];
	FILE *fp;
	bool rebooted;

	fp = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!fp)
		return false;
	if (!fgets(now, sizeof(now), fp))
		now[0] = '\0';
	fclose(fp);
#if NODEFS_TEST_HOOKS
	/* test builds: NODEFS_TEST_BOOT_ID stands for the kernel's, a reboot
	 * without one */
	if (getenv("NODEFS_TEST_BOOT_ID"))
		snprintf(now, sizeof(now), "%s\n", getenv("NODEFS_TEST_BOOT_ID"));
#endif
	snprintf(path, sizeof(path), "%s/boot_id", b->cfg->state_dir);
	fp = fopen(path, "re");
	if (fp) {
		if (!fgets(then, sizeof(then), fp))
			then[0] = '\0';
		fclose(fp);
	}
	rebooted = then[0] && strcmp(now, then) != 0;
	fp = fopen(path, "we");
	if (fp) {
		fputs(now, fp);
		fflush(fp);
		fsync(fileno(fp));
		fclose(fp);
	}
	return rebooted;
}

static void *loop_main(void *arg)
{
	struct backend *b = arg;

	pthread_setname_np(pthread_self(), "nodefs-loop");
	loop_run(b->loop);
	return NULL;
}

/* ---- recovery ---- */

static bool stopping(struct backend *b)
{
	return atomic_load(&b->state) == BACKEND_STOPPING;
}

#if NODEFS_TEST_HOOKS
/* Test builds: NODEFS_TEST_SLOW_RECOVERY=MS makes recovery take MS
 * milliseconds longer (before it reads the checkpoints), as thousands of
 * records or a slow engine would; a stop cuts the wait short. */
static void slow_recovery_hook(struct backend *b)
{
	const char *s = getenv("NODEFS_TEST_SLOW_RECOVERY");
	struct timespec t;
	long ms;

	if (!s || !*s)
		return;
	ms = atol(s);
	t = ts_after_ms(CLOCK_MONOTONIC, ms);
	pthread_mutex_lock(&b->dlock);
	while (!stopping(b) && pthread_cond_timedwait(&b->dcond, &b->dlock, &t) == 0)
		;
	pthread_mutex_unlock(&b->dlock);
}
#endif

/* Read the checkpoints back and take up what was in flight, in rounds over
 * the kinds (kind.h): every kind's records that need no one (load), then
 * every kind's checked against the world (recover), then their event
 * streams (watch), then what is left (settle: each PENDING operation
 * resumed by its kind, or dropped). A stop between the steps ends it early:
 * PENDING operations are then left as they are (not dropped) for the next
 * start. */
static int recover(struct backend *b, struct nerr *err)
{
	int r;

#if NODEFS_TEST_HOOKS
	slow_recovery_hook(b);
#endif
	for (size_t i = 0; i < b->nkinds; i++)
		if (!stopping(b) && b->kinds[i]->load && (r = b->kinds[i]->load(b, err)) < 0)
			return r;
	for (size_t i = 0; i < b->nkinds; i++)
		if (!stopping(b) && b->kinds[i]->recover && (r = b->kinds[i]->recover(b, err)) < 0)
			return r;
	for (size_t i = 0; i < b->nkinds; i++)
		if (!stopping(b) && b->kinds[i]->watch)
			b->kinds[i]->watch(b);
	for (size_t i = 0; i < b->nkinds; i++)
		if (!stopping(b) && b->kinds[i]->settle)
			b->kinds[i]->settle(b);
	return 0;
}

static void *recovery_main(void *arg)
{
	struct backend *b = arg;
	struct nerr err = { 0 };
	struct parked *parked = NULL;
	int expect = BACKEND_RECOVERING;
	bool ready = false;
	int r;

	pthread_setname_np(pthread_self(), "nodefs-recover");
	r = recover(b, &err);
	pthread_mutex_lock(&b->dlock);
	if (r >= 0)
		ready = atomic_compare_exchange_strong(&b->state, &expect, BACKEND_READY);
	if (ready)
		parked = backend_parked_take_locked(b);
	b->recovered = true;
	pthread_cond_broadcast(&b->dcond);
	pthread_mutex_unlock(&b->dlock);
	if (r < 0) {
		/* nothing may act on a tree that is not whole: the daemon stops
		 * (the parked commands get ESHUTDOWN from backend_stop) */
		log_err("recovery failed: %s", err.msg);
		atomic_store(&b->failed, true);
		if (b->failed_hook)
			b->failed_hook(b->failed_hook_ctx);
		return NULL;
	}
	if (!ready)
		return NULL;	/* stopping */
	bnode_changed(b->root);
	events_emit(b->events, "daemon", NULL, "RECOVERING", "READY", NULL, NULL);
	{
		/* "ready: 1 plugins, 0 profiles, 2 runtimes": what the config made */
		char what[256] = "";
		size_t len = 0;

		for (size_t i = 0; i < b->nkinds && len < sizeof(what); i++)
			if (b->kinds[i]->ready_count)
				len += snprintf(what + len, sizeof(what) - len, "%s%zu %s",
						len ? ", " : "", bnode_count(b->dirs[i]),
						b->kinds[i]->name);
		log_info("ready: %s", what);
	}
	backend_parked_finish(parked, true);
	return NULL;
}

int backend_start(struct backend *b, struct nerr *err)
{
	int r;

	events_emit(b->events, "daemon", NULL, NULL, "RECOVERING", NULL, "nodefs starting");
	r = loop_new(&b->loop);
	if (r < 0)
		return nerr_set(err, -r, "cannot make the event loop: %s", strerror(-r));
	if (pthread_create(&b->loop_thread, NULL, loop_main, b) != 0)
		return nerr_set(err, EAGAIN, "cannot start the event loop thread");
	b->loop_running = true;
	for (size_t i = 0; i < b->nkinds; i++)
		if (b->kinds[i]->start && (r = b->kinds[i]->start(b, err)) < 0)
			return r;
	b->rebooted = check_reboot(b);
	if (b->rebooted)
		log_warn("the node rebooted since the last run (a new boot id): each kind's recovery "
			 "puts back what the reboot undid");
	/* recovery's progress (backend_progress): what there is to read */
	atomic_store(&b->records_base, store_loaded(b->store));
	atomic_store(&b->records, store_count(b->store));
	if (pthread_create(&b->recovery, NULL, recovery_main, b) != 0)
		return nerr_set(err, EAGAIN, "cannot start the recovery thread");
	b->recovery_running = true;
	return 0;
}

void backend_set_failed_hook(struct backend *b, void (*fn)(void *ctx), void *ctx)
{
	b->failed_hook = fn;
	b->failed_hook_ctx = ctx;
}

bool backend_failed(struct backend *b)
{
	return atomic_load(&b->failed);
}

size_t backend_stop(struct backend *b, unsigned grace_ms)
{
	struct parked *parked;
	uint64_t t0 = loop_now_ms(), spent;
	struct timespec t;
	bool was, recovering;

	t = ts_after_ms(CLOCK_MONOTONIC, grace_ms);
	pthread_mutex_lock(&b->dlock);
	was = atomic_exchange(&b->state, BACKEND_STOPPING) == BACKEND_STOPPING;
	parked = backend_parked_take_locked(b);
	pthread_cond_broadcast(&b->dcond);
	/* recovery stops at its next step; it may still be in one */
	while (b->recovery_running && !b->recovered &&
	       pthread_cond_timedwait(&b->dcond, &b->dlock, &t) == 0)
		;
	recovering = b->recovery_running && !b->recovered;
	pthread_mutex_unlock(&b->dlock);
	backend_parked_finish(parked, false);
	if (!was && b->root)
		bnode_changed(b->root);
	/* no new work: no reconciliation, no new command (bctl), and the
	 * queues run nothing more (actq_run) */
	for (size_t i = 0; i < b->nkinds; i++)
		if (b->kinds[i]->quiesce)
			b->kinds[i]->quiesce(b);
	spent = loop_now_ms() - t0;
	return (b->work ? work_pool_stop(b->work, spent < grace_ms ? (unsigned)(grace_ms - spent) : 0) : 0) +
	       recovering;
}

/* The configs a reload (reload.c) brought: kept alive until backend_free,
 * since a kind's object or a reader that looked one up a moment ago may
 * still point into one. */
static void backend_reload_free(struct backend *b)
{
	for (size_t i = 0; i < b->nold_cfgs; i++)
		config_free(b->old_cfgs[i]);
	free(b->old_cfgs);
	b->old_cfgs = NULL;
	b->nold_cfgs = 0;
}

void backend_free(struct backend *b)
{
	if (!b)
		return;
	backend_stop(b, 0);
	if (b->recovery_running)
		pthread_join(b->recovery, NULL);
	/*
	 * No worker, then the kinds in order (no plugin, then no engine), then
	 * no loop. The grace is over (backend_stop): a call still in flight
	 * is cancelled now (each kind's cancel: CSI calls are not left to
	 * their deadline, csi_timeout), and the action's next calls fail at
	 * once; the handles stay valid until the workers are gone.
	 */
	for (size_t i = 0; i < b->nkinds; i++)
		if (b->kinds[i]->cancel)
			b->kinds[i]->cancel(b);
	/* no worker from here on; the pool itself stays until the kinds have
	 * stopped, for an engine's event stream still submits (-ESHUTDOWN)
	 * until its runtime's stop closes it */
	work_pool_join(b->work);
	for (size_t i = 0; i < b->nkinds; i++)
		if (b->kinds[i]->stop)
			b->kinds[i]->stop(b);
	work_pool_free(b->work);
	if (b->loop_running) {
		loop_stop(b->loop);
		pthread_join(b->loop_thread, NULL);
	}
	loop_free(b->loop);
	if (b->root)
		bnode_remove(b->root);
	bnode_unref(b->metrics);
	for (size_t i = 0; b->dirs && i < b->nkinds; i++)
		bnode_unref(b->dirs[i]);
	bnode_unref(b->root);
	events_free(b->events);
	for (size_t i = 0; i < b->nkinds; i++)
		if (b->kinds[i]->free)
			b->kinds[i]->free(b);
	for (size_t i = 0; b->states && i < b->nkinds; i++)
		free(b->states[i]);
	free(b->states);
	free(b->dirs);
	backend_reload_free(b);
	store_close(b->store);
	config_free(b->cfg);
	pthread_mutex_destroy(&b->dlock);
	pthread_cond_destroy(&b->dcond);
	if (b->lock_fd >= 0)
		close(b->lock_fd);	/* last: nothing of ours writes the dir now */
	intern_fini(&b->names);	/* after the tree: its objects hold names */
	free(b);
}

struct bnode *backend_root(struct backend *b)
{
	return b->root;
}

void backend_progress(struct backend *b, struct backend_progress *ret)
{
	int st = atomic_load(&b->state);
	unsigned long long total = atomic_load(&b->records);
	unsigned long long read = store_loaded(b->store) - atomic_load(&b->records_base);

	*ret = (struct backend_progress){
		.recovering = st == BACKEND_RECOVERING, .stopping = st == BACKEND_STOPPING,
		.records = total, .records_read = read < total ? read : total,
	};
}

bool backend_moving(struct backend *b)
{
	return work_pool_moving(b->work, &b->work_seen);
}

void backend_set_metrics_hook(struct backend *b, int (*fn)(void *ctx, struct sbuf *out), void *ctx)
{
	b->metrics_hook = fn;
	b->metrics_hook_ctx = ctx;
}
