/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * backend: the daemon's objects and what they do.
 *
 * The backend owns the tree (tree.h) of the kinds of object the registry
 * gives it, their state machines, checkpoints and events. It reaches CSI plugins through csi/ and container engines through
 * runtimes/, and is driven by fs/ only through the tree's attribute tables.
 * backend_new is the registry's (backend/registry.c: the kinds and the
 * links between rooms); the rest is core's (core/backend.c).
 * Must not know (what includes this): FUSE, CSI's or Docker's types.
 */
#ifndef NODEFS_BACKEND_H
#define NODEFS_BACKEND_H

#include <stdbool.h>

struct backend;
struct bnode;
struct config;
struct nerr;

/* Build the tree from cfg (the backend takes ownership of cfg) and make
 * the state dir. -errno with err on failure (bad state dir, OOM). */
int backend_new(struct config *cfg, struct backend **ret, struct nerr *err);
/* Start the threads (event loop, plugins' connections, engine monitor)
 * and the recovery of the checkpointed objects, which runs on its own
 * thread while the mount serves: status says RECOVERING, objects appear as
 * their records are read, and commands wait (backend_admit_*); then READY.
 * Call after the mount is up. -errno with err when a thread cannot start. */
int backend_start(struct backend *b, struct nerr *err);
/* fn(ctx) is called, from the recovery thread, when recovery fails (the
 * checkpoints cannot be read): the caller should stop. Before
 * backend_start. */
void backend_set_failed_hook(struct backend *b, void (*fn)(void *ctx), void *ctx);
/* Whether recovery failed (the daemon should exit non-zero). */
bool backend_failed(struct backend *b);
/* Stop taking work: status STOPPING, ctl commands refused (-ESHUTDOWN),
 * commands waiting for recovery answered -ESHUTDOWN, recovery ended at
 * its next step (PENDING operations are left for the next start).
 * Actions queued but not started are not run: their operations stay
 * PENDING on disk, the next start resumes them, and their writers get
 * -ESHUTDOWN at once. Running actions (and recovery) get up to grace_ms to
 * finish, and their writers their real answer. Returns how many are still
 * running then: their requests may complete later, from another thread,
 * until backend_free. Main thread, before backend_free; idempotent. */
size_t backend_stop(struct backend *b, unsigned grace_ms);
/* Stop (backend_stop with no grace, if not stopped yet), let the running
 * actions end (a CSI call by its deadline), join the threads and free
 * everything. NULL-safe. */
void backend_free(struct backend *b);

struct bnode *backend_root(struct backend *b);

/* What the daemon does, for systemd's STATUS= and READY=1. */
struct backend_progress {
	bool recovering, stopping;	/* neither: READY */
	unsigned long long records;	/* checkpoint records recovery found */
	unsigned long long records_read;	/* of them, read so far */
};
void backend_progress(struct backend *b, struct backend_progress *ret);
/* The objects in the collection directory named name ("volumes"): 0 when
 * no kind has that name. Any thread. */
#include <stddef.h>
size_t backend_count(struct backend *b, const char *name);
/* A reload (SIGHUP): nc, a config just read (taken: the backend keeps or
 * frees it), against the running one. Applies the [profile] sections
 * (profiles added, removed, changed) and logs every other difference as
 * needing a restart, changing nothing of it; logs what it did. -ENOENT
 * with err when a new or changed profile names a plugin nodefs does not
 * run (then nothing is applied), -ENOMEM. The thread that serves reloads;
 * not concurrently with itself. */
int backend_reload(struct backend *b, struct config *nc, struct nerr *err);
/* The worker pool's heartbeat: false when work waited in its queue and no
 * worker took any since the last call (one caller: the watchdog). */
bool backend_moving(struct backend *b);

/* Figures another layer renders itself (fs: FUSE requests), appended to
 * metrics/nodefs.prom. Set once before backend_start. */
struct sbuf;
void backend_set_metrics_hook(struct backend *b, int (*fn)(void *ctx, struct sbuf *out), void *ctx);


#endif
