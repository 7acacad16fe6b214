/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* backend-internal: what the backend's modules share; never seen by fs/. */
#ifndef NODEFS_BACKEND_INTERNAL_H
#define NODEFS_BACKEND_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "backend.h"
#include "bctl.h"
#include "config.h"
#include "intern.h"
#include "loop.h"
#include "events.h"
#include "storage.h"
#include "tree.h"
#include "work.h"

enum backend_state { BACKEND_RECOVERING, BACKEND_READY, BACKEND_STOPPING };

struct backend_links;
struct kind_ops;

struct backend {
	struct config *cfg;
	struct store *store;	/* store.h: the state dir's records and journal */
	/* instance.h: this instance's id (STATE_DIR/instance-id) and the
	 * prefix of the engine-side names it makes (name_prefix) */
	char instance[33];
	char name_prefix[40];
	struct uncertain *uncertain;	/* uncertain.c: creates a crash left unknown */
	/* The kinds of object, in the root directory's order (kind.h): all
	 * the hub knows of them. */
	const struct kind_ops *const *kinds;
	size_t nkinds;
	/* The narrow interfaces between rooms (links.h), from the same hand. */
	const struct backend_links *links;
	/* Each kind's collection directory and its state, in its place in
	 * kinds (kind_dir, kind_state): the hub holds them, the kind knows
	 * what they are. */
	struct bnode **dirs;
	void **states;
	struct bnode *root, *metrics;
	int (*metrics_hook)(void *ctx, struct sbuf *out);	/* backend_set_metrics_hook */
	void *metrics_hook_ctx;
	struct events *events;
	struct work_pool *work;
	struct loop *loop;		/* the CSI connections; its own thread */
	/* What plugins are reached through: &csi_storage_ops unless set
	 * (before backend_start) to another implementation, e.g. a fake. */
	const struct storage_ops *storage;
	pthread_t loop_thread;
	bool loop_running;
	atomic_int state;
	atomic_uint bad_records;	/* checkpoints that could not be read */
	atomic_ullong freed;		/* objects removed: the monitor trims the heap */
	/* names thousands of objects repeat (operation types, volumes'
	 * plugins, profiles, access modes, fs types), one copy each */
	struct intern names;
	bool rebooted;			/* the boot id changed since the last run */
	struct timespec started_mono;
	time_t started;

	/* Recovery runs on its own thread while fs serves (status says
	 * RECOVERING); commands wait for it in the parked list. dlock guards
	 * the list, recovered and the RECOVERING -> READY/STOPPING moves. */
	pthread_t recovery;
	bool recovery_running;
	int lock_fd;		/* STATE_DIR/lock, flock'ed while we run (-1: none) */
	pthread_mutex_t dlock;
	pthread_cond_t dcond;		/* recovered, or stopping */
	bool recovered;			/* the recovery thread is done */
	atomic_bool failed;		/* recovery failed: the daemon stops */
	atomic_ullong records, records_base;	/* backend_progress */
	uint64_t work_seen;		/* backend_moving */
	/* reload.c: every config a reload brought, kept until backend_free
	 * (objects of the kinds may point into them) */
	struct config **old_cfgs;
	size_t nold_cfgs;
	struct parked *parked, **parked_tail;
	void (*failed_hook)(void *ctx);
	void *failed_hook_ctx;
};

/* The backend a node belongs to: every node's type keeps it reachable. */
static inline struct backend *node_backend(struct bnode *n)
{
	return n->owner;
}

const char *backend_state_to_string(enum backend_state s);

/*
 * Commands wait for recovery (admit.c): a command that acts (a ctl line
 * that parsed and matched, a mkdir, an rmdir) asks first. 0: act now
 * (READY). -EINPROGRESS: RECOVERING, the command is parked and run again
 * once the daemon is READY (rq completes then, or with -ESHUTDOWN if it
 * stops first). -EAGAIN: RECOVERING and rq is nonblock. -ESHUTDOWN:
 * STOPPING. rq->err says why on failure. Any thread. A parked ctl line is
 * run again by redo(t, n, line, len, rq), the dispatcher that asked.
 */
typedef int (*backend_redo_fn)(const struct bctl_table *t, struct bnode *n, const char *line,
			       size_t len, struct breq *rq);
int backend_admit_ctl(const struct bctl_table *t, struct bnode *n, const char *line, size_t len,
		      struct breq *rq, backend_redo_fn redo);
int backend_admit_mkdir(struct bnode *dir, const char *name, struct breq *rq);
int backend_admit_rmdir(struct bnode *dir, struct bnode *child, struct breq *rq);
/* The parked commands: taken (dlock held) when recovery ends or the daemon
 * stops, then run in the order they came (run) or answered -ESHUTDOWN. */
struct parked;
struct parked *backend_parked_take_locked(struct backend *b);
void backend_parked_finish(struct parked *p, bool run);

/* Shared by the object modules (backend.c). */
/* t as 2026-11-29T17:55:07Z; "" for 0. */
void fmt_time(time_t t, char *buf, size_t len);
/* The command line of cmd, for the operation record (cut at len). */
char *cmdline_of(const struct ctl_cmd *cmd, char *buf, size_t len);

/* metrics.c: the Prometheus text of metrics/nodefs.prom. */
int metrics_render(struct backend *b, struct sbuf *out);

#endif
