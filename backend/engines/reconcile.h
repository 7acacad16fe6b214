/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * reconcile: what nodefs believes about its containers against what each
 * runtime lists, on the reconcile_interval timer. engines.c runs the timer,
 * calls the reconcile hook of the containers' kind (kind.h), keeps each
 * runtime's last findings for runtimes/NAME/reconcile and the metric, and
 * emits the events; container-sync.c compares. Differences are shown, never silently fixed: only what is plainly observed (an exit or a
 * removal an event did not bring) is taken in, as the event path would
 * have; an orphan is never removed.
 */
#ifndef NODEFS_RECONCILE_H
#define NODEFS_RECONCILE_H

#include <stddef.h>

struct backend;
struct engine;
struct nerr;
struct sbuf;

enum drift_kind {
	DRIFT_MISSING,		/* nodefs has containers/NAME, the runtime not its container */
	DRIFT_STATE,		/* both have it, in different states */
	DRIFT_ORPHAN,		/* the runtime has one with nodefs's marks nodefs does not know */
	DRIFT_KINDS,
};

struct drift {
	enum drift_kind kind;
	char name[65];		/* the nodefs name (an orphan's: from its mark) */
	char id[72];		/* the engine id, "" when none */
	char nodefs[16];	/* nodefs's state, "" for an orphan */
	char runtime[16];	/* the runtime's state, GONE for missing */
	char note[160];		/* what was done or why, for the file and the event */
};

struct drift_report {
	struct drift *v;	/* malloc'd */
	size_t n;
	size_t listed;		/* containers the runtime listed */
};

const char *drift_kind_to_string(enum drift_kind k);
void drift_report_free(struct drift_report *r);

/* containers_kind.reconcile (container-sync.c): compare e's listing with the containers nodefs has on e and
 * fill ret (written only on success). Confirms each difference with a fresh
 * look at the engine before reporting it, and queues the take-in of a
 * state or missing difference on the container's action queue. Blocks on
 * the engine: the monitor thread calls it, never a FUSE thread. -errno with
 * err when the runtime cannot be listed. */
int containers_reconcile(struct backend *b, struct engine *e, struct drift_report *ret,
			 struct nerr *err);

#endif
