/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kind: what the hub (backend.c) knows of a kind of object, as Plan 9's
 * kernel knows a device only through its Dev in devtab[]. Each kind
 * (plugins, profiles, runtimes, volumes, operations, containers) exports
 * one const table of hooks; the registry (backend/registry.c) hands the
 * list to backend_new_with, backend.c keeps it in b->kinds, in the order
 * of the root directory, and calls through them: it makes each kind's
 * collection, initialises and starts it, recovers it, and stops it. The
 * monitor (engines.c), the operations' recovery (operation.c) and the
 * metrics (metrics.c) find the kind they need the same way, so no core file
 * names another kind's functions.
 *
 * Every hook is optional (NULL: nothing to do). Designated initializers.
 * Must not know: any kind by name (no table is declared here: each
 * room's header declares its own, for the registry).
 */
#ifndef NODEFS_KIND_H
#define NODEFS_KIND_H

#include <stddef.h>

struct backend;
struct bnode;
struct btype;
struct drift_report;
struct engine;
struct nerr;
struct operation;
struct sbuf;

struct kind_ops {
	const char *name;		/* its collection's directory: "volumes" */
	const struct btype *type;	/* that directory's type */
	size_t dir;			/* offsetof(struct backend, ...): where the hub keeps it;
					 * 0 (type NULL): the room makes and keeps its own */
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

	/* Its families of metrics/nodefs.prom. */
	int (*render_metrics)(struct backend *b, struct sbuf *out);

	/* backend_stop: take no new work (the workers still drain). */
	void (*quiesce)(struct backend *b);
	/* backend_free, the stop's grace over: end the calls in flight now
	 * (the handles stay valid until stop). */
	void (*cancel)(struct backend *b);
	/* backend_free, once no worker runs: release what it holds. */
	void (*stop)(struct backend *b);
};

/* The collection node of kind k in b. */
static inline struct bnode *kind_dir(struct backend *b, const struct kind_ops *k)
{
	return *(struct bnode **)((char *)b + k->dir);
}

/* backend_new (backend.h) with the kinds, in the root directory's order,
 * and the links between rooms (links.h) handed from above: the registry
 * (backend/registry.c) is the one caller that names them; core names no
 * kind. kinds and links must outlive the backend. */
struct backend_links;
struct config;
int backend_new_with(struct config *cfg, const struct kind_ops *const *kinds, size_t nkinds,
		     const struct backend_links *links, struct backend **ret, struct nerr *err);

#endif
