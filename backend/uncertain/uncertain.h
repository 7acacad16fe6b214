/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * uncertain: creates whose outcome a crash left unknown. A create's
 * operation records, before the call is sent, what it would make (its
 * intent); when a restart finds the operation PENDING and no record of
 * what it made, the engine may still be making it. Such a create is
 * watched here until it is settled: what turns up carrying this instance's
 * marks and the create's name is removed (an event, a line in the
 * operation's outcome), and after uncertain_timeout one that never showed
 * up is closed with its reason. Both are counted in
 * nodefs_uncertain_outcomes_total{kind,result}.
 */
#ifndef NODEFS_UNCERTAIN_H
#define NODEFS_UNCERTAIN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct backend;
struct engine;
struct operation;
struct sbuf;

/* Watch for the container a create cut short may still make on e under
 * the nodefs name name (engine_name: what the engine calls it, for the
 * messages; may be ""). op (may be NULL) is referenced until settled.
 * Looks at once, then after 1 s, 2 s, 4 s ... up to reconcile_interval,
 * until found or uncertain_timeout. Any thread. -ENOMEM. */
int uncertain_watch_container(struct backend *b, struct engine *e, const char *name,
			      const char *engine_name, struct operation *op);
/* A call whose answer never came (a CSI call that timed out or that a
 * crash cut) is repeated by its owner: fn(b, ctx) runs once on the
 * watcher thread after delay_ms and takes ctx (it repeats the call, and
 * hands ctx back here while the answer stays unknown); drop(ctx) frees ctx
 * when the watcher stops first. name names the object for the messages.
 * During a stop ctx is dropped at once (the next start resumes). Any
 * thread. -ENOMEM (ctx not taken). */
int uncertain_watch_call(struct backend *b, const char *name, uint64_t delay_ms,
			 void (*fn)(struct backend *, void *), void (*drop)(void *), void *ctx);
/* An uncertain outcome settled (result: a word), by its owner or here: a
 * count in nodefs_uncertain_outcomes_total{kind,result}, an "uncertain"
 * event, line in op's outcome (op may be NULL) and a log line. kind is
 * "docker.create", "csi.CreateVolume"... Any thread. */
void uncertain_settled(struct backend *b, const char *kind, const char *name,
		       struct operation *op, const char *result, const char *line);
/* Whether a listing's container of e named name is one being watched (so
 * reconciliation does not also report it as an orphan). */
bool uncertain_claims(struct backend *b, struct engine *e, const char *name);
/* Stop the watcher thread and drop what is still watched (left for the
 * next start: the operations keep their intents). */
void uncertain_stop(struct backend *b);
/* The nodefs_uncertain_outcomes_total family. */
int uncertain_render_metrics(struct backend *b, struct sbuf *out);

#endif
