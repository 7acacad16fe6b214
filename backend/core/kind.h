/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kind: what the hub (backend.c) knows of a kind of object, as Plan 9's
 * kernel knows a device only through its Dev in devtab[]. Each kind
 * exports one const table of hooks; the registry (backend/registry.c)
 * hands the list to backend_new_with, backend.c keeps it in b->kinds, in
 * the order of the root directory, and calls through them: it makes each
 * kind's collection and its state (kind_dir, kind_state: slots the hub
 * holds opaquely, in the kind's place in the list), initialises and starts
 * it, recovers it, renders its part of status and metrics/nodefs.prom,
 * reloads it (reload.c), and stops and frees it. The monitor (engines/),
 * the operations' recovery and the metrics find the kind they need the
 * same way, so no core file names a kind or its functions.
 *
 * Every hook is optional (NULL: nothing to do). Designated initializers.
 * Must not know: any kind by name (no table is declared here: each
 * room's header declares its own, for the registry).
 */
#ifndef NODEFS_KIND_H
#define NODEFS_KIND_H

#include <stdbool.h>
#include <stddef.h>

struct backend;
struct bnode;
struct btype;
struct config;
struct drift_report;
struct engine;
struct nerr;
struct operation;
struct reload_tally;
struct sbuf;

struct kind_ops {
	const char *name;		/* its collection's directory: "volumes" */
	/* that directory's type; NULL: the hub makes none (the kind makes
	 * its own when configured, kind_set_dir, or has none) */
	const struct btype *type;
	/* The size of its own state: calloc'd by the hub before any init,
	 * found with kind_state, freed after the kind's free hook. 0: none. */
	size_t state_size;
	/* Counted in the log line that says the daemon is ready. */
	bool ready_count;
	/* The prefix of the operation types it resumes ("volume."), or NULL. */
	const char *op_prefix;

	/* backend_new, once every collection exists: set up, read the
	 * config. -errno with err stops the daemon. */
	int (*init)(struct backend *b, struct nerr *err);
	/* backend_start (after daemonizing: threads and connections). */
	int (*start)(struct backend *b, struct nerr *err);

	/* Recovery, on its own thread, in rounds over all kinds: */
	/* 1. records back into the tree, asking no one (operations: the
	 *    others' recovery looks at their PENDING ones) */
	int (*load)(struct backend *b, struct nerr *err);
	/* 2. records back and checked against the outside world */
	int (*recover)(struct backend *b, struct nerr *err);
	/* 3. follow the outside world's events from now on */
	int (*watch)(struct backend *b);
	/* 4. finish what recovery left (operations: each PENDING one is
	 *    resumed by the kind its type names, or dropped) */
	void (*settle)(struct backend *b);
	/* Drive a PENDING operation of op_prefix to an end (from settle):
	 * 0 when taken (op->claimed set), <0 for the caller to drop it. */
	int (*resume)(struct backend *b, struct operation *op);

	/* The monitor thread: every probe interval, and at once when poked
	 * (engines_poke_plugins). Blocking calls are fine there. */
	void (*tick)(struct backend *b);
	/* The monitor thread, every reconcile_interval, per healthy runtime:
	 * compare e's listing with this kind's objects (reconcile.h). */
	int (*reconcile)(struct backend *b, struct engine *e, struct drift_report *ret,
			 struct nerr *err);

	/* Its lines of the root's status file, after "NAME: COUNT" of its
	 * directory (kinds with a type), in the kinds' order. */
	int (*status)(struct backend *b, struct sbuf *out);
	/* Its families of metrics/nodefs.prom: first, in the daemon's part
	 * (before the checkpoints' families); then the rest, after them. */
	int (*render_metrics_first)(struct backend *b, struct sbuf *out);
	int (*render_metrics)(struct backend *b, struct sbuf *out);

	/* A reload (SIGHUP, reload.c), in two rounds over the kinds, each
	 * counting into t what it applied, refused and leaves for a restart.
	 * 1. add and change what nc says; -errno with err refuses the rest
	 *    of the reload (what earlier kinds did stays; nc is kept).
	 * 2. once every kind's round 1 took nc: remove what nc no longer
	 *    names (plugins), and what waits for the others' changes
	 *    (runtimes' new handles). */
	int (*reload)(struct backend *b, struct config *nc, struct reload_tally *t,
		      struct nerr *err);
	void (*reload_finish)(struct backend *b, struct config *nc, struct reload_tally *t);
	/* "N NOUN changes" in the reload's summary line; only when some were
	 * applied if reload_quiet (those come first). NULL: not counted. */
	const char *reload_noun;
	bool reload_quiet;

	/* backend_stop: take no new work (the workers still drain). */
	void (*quiesce)(struct backend *b);
	/* backend_free, the stop's grace over: end the calls in flight now
	 * (the handles stay valid until stop). */
	void (*cancel)(struct backend *b);
	/* backend_free, once no worker runs: release what it holds. */
	void (*stop)(struct backend *b);
	/* backend_free, last, after the tree: what its state holds beyond
	 * its memory (locks). */
	void (*free)(struct backend *b);
};

/* A kind's counts in a reload (reload.c). */
struct reload_tally {
	unsigned applied, refused, restart;
};

/* The collection node of kind k in b (NULL: k is not in b's list, or has
 * no directory). Borrowed. Any thread. */
struct bnode *kind_dir(struct backend *b, const struct kind_ops *k);
/* The same by the kind's name ("volumes"): what a kind's own files use,
 * so that they need not reference its table (whose hooks they define:
 * a circle of files, tests/unit/arch). */
struct bnode *kind_dir_named(struct backend *b, const char *name);
/* A kind that makes its own directory (type NULL) hands the hub its
 * reference, dropped at backend_free. */
void kind_set_dir(struct backend *b, const struct kind_ops *k, struct bnode *dir);
/* k's state (state_size bytes, zeroed before init), or NULL when k is not
 * in b's list. Any thread. */
void *kind_state(struct backend *b, const struct kind_ops *k);
/* The same by the kind's name, for the kind's own files (kind_dir_named). */
void *kind_state_named(struct backend *b, const char *name);

/* backend_new (backend.h) with the kinds, in the root directory's order,
 * and the links between rooms (links.h) handed from above: the registry
 * (backend/registry.c) is the one caller that names them; core names no
 * kind. kinds and links must outlive the backend. */
struct backend_links;
struct config;
int backend_new_with(struct config *cfg, const struct kind_ops *const *kinds, size_t nkinds,
		     const struct backend_links *links, struct backend **ret, struct nerr *err);

#endif
