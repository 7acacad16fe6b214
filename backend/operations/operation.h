/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * operation: operations/ID/, the record of one action on one object.
 *
 * Every ctl command that acts on a volume or container is an operation:
 * PENDING when checkpointed, then FINISHED, FAILED (with the error and the
 * raw remote status) or DROPPED (could not be driven to an end, with the
 * reason). Finished operations are kept up to operations_keep, oldest
 * dropped first; the directory lists them oldest first.
 *
 * The action queue runs the actions of one object strictly in order on the
 * backend's worker pool: a second command waits its turn, or fails with
 * EBUSY when its writer opened the ctl file O_NONBLOCK.
 */
#ifndef NODEFS_OPERATION_H
#define NODEFS_OPERATION_H

#include "kind.h"

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "nerr.h"

struct backend;
struct bnode;
struct breq;
struct json_t;

enum op_state { OP_PENDING, OP_FINISHED, OP_FAILED, OP_DROPPED };

const char *op_state_to_string(enum op_state s);

struct operation {
	struct backend *b;
	struct bnode *node;		/* operations/ID, referenced */
	char id[24];
	/* The strings are never NULL ("" when empty; see op_str_set in
	 * operation.c): each is allocated to its length, cut at the bytes the
	 * comment gives. type is interned (b->names). */
	const char *type;		/* "volume.publish", "container.start"; 31 */
	char *object;			/* "volumes/db"; 79 */
	char *command;			/* the ctl line; 511 */
	char *by;			/* who wrote it (breq.by); 95 */
	pthread_mutex_t lock;		/* the fields below */
	enum op_state state;
	unsigned attempts;
	char *error;			/* NERR_MSG_MAX - 1 */
	char *remote;			/* the raw remote status ("grpc 14 UNAVAILABLE"); 63 */
	time_t created, finished;
	bool claimed;			/* recovery: its object re-drives it */
	/* uncertain/uncertain.c: what the call would make, recorded before it
	 * is sent ("runtime=docker name=web engine_name=... instance=ID"), and
	 * how an outcome a crash left uncertain was settled; 255 and 511 */
	char *intent;
	char *outcome;
	/* the cluster command (breq.cluster_cmd) this operation runs, in its
	 * first checkpoint: a restart after the target took it answers from
	 * here instead of running it again; 127 */
	char *cluster_cmd;
};

/* Make a PENDING operation, show it and checkpoint it; who wrote it and
 * the cluster command it came as are rq's (by, cluster_cmd; rq may be NULL).
 * The caller holds one reference (op_unref). -errno with err when the
 * checkpoint fails: then nothing was shown and the action must not start. */
int op_begin(struct backend *b, const char *type, const char *object, const char *command,
	     const struct breq *rq, struct operation **ret, struct nerr *err);
/* The same, recording intent (what the call would make) in the first
 * checkpoint. */
int op_begin_intent(struct backend *b, const char *type, const char *object, const char *command,
		    const struct breq *rq, const char *intent, struct operation **ret,
		    struct nerr *err);
/* The operation whose checkpoint carries cluster command id (its node
 * referenced: op_unref), or NULL. */
struct operation *op_find_cluster_cmd(struct backend *b, const char *id);
/* Append a line to the operation's outcome (how an uncertain outcome was
 * settled) and checkpoint it, ended or not, unless trimmed meanwhile. */
void op_note_outcome(struct operation *op, const char *line);
void op_set_attempts(struct operation *op, unsigned attempts);
void op_set_remote(struct operation *op, const char *remote);
/* A plugin call's word on op (NULL: none): its attempts and its last
 * status as "CODE NAME", shown as they happen (a call being retried too). */
void op_note_call(struct operation *op, unsigned attempts, int code, const char *code_name);
/* End the operation: FINISHED when result >= 0, else FAILED with err. */
void op_end(struct operation *op, int result, const struct nerr *err);
void op_drop(struct operation *op, const char *reason);
void op_unref(struct operation *op);
/* Release what the ended-operations queue holds (backend_free). */
void ops_ended_free(struct backend *b);

/* Recreate operations from their checkpoints at start (PENDING ones are
 * returned to the owning module through op_recover_pending by the caller). */
int ops_recover(struct backend *b, struct nerr *err);
/* After recovery: drop PENDING operations nobody claimed, with the reason. */
void ops_drop_orphans(struct backend *b);
/* The operation with this id (its node referenced), or NULL. */
struct operation *op_find(struct backend *b, const char *id);
/* An object's state change on the event stream with the operation whose
 * command caused it (op_id, may be NULL) and, from that operation, who
 * wrote the command (`by`). Any thread. */
void op_events_emit(struct backend *b, const char *kind, const char *name, const char *old_state,
		    const char *new_state, const char *op_id, const char *msg);

/* ---- per-object action queues ---- */

struct action;
typedef int (*action_fn)(struct action *a, struct nerr *err);

struct action {
	struct action *next;
	struct actq *q;
	struct backend *b;
	struct operation *op;		/* may be NULL for internal work */
	struct breq *rq;		/* NULL once completed (nonblock) */
	action_fn run;			/* on a worker: may block */
	void (*done)(struct action *a, int result);	/* after run, optional */
	void (*free)(struct action *a);	/* free the enclosing struct */
	/* run flushes the records (its operation's PENDING) itself before
	 * its first outside call; otherwise actq_run flushes first */
	bool self_sync;
	bool cmd;			/* has an operation: counted in q->cmds */
	struct nerr err;
};

struct actq {
	pthread_mutex_t lock;
	bool busy;
	unsigned cmds;			/* queued or running actions with an operation */
	struct action *head, *tail;
};

void actq_init(struct actq *q);
/* Whether anything is queued or running, internal work (a sync) included. */
bool actq_busy(struct actq *q);
/* Whether a command (an action with an operation) is queued or running:
 * what makes a nonblock write EBUSY. An internal sync queued meanwhile (an
 * engine coming up inspects every container) is no command in flight. */
bool actq_cmd_busy(struct actq *q);
/* Queue a (begun with op_begin, or op NULL). Returns -EINPROGRESS: rq is
 * completed when a has run (or at once with the operation id when rq is
 * nonblock); -EBUSY for a nonblock rq while a command is queued or running
 * (actq_cmd_busy; nothing queued).
 * Once the backend is STOPPING an action not yet started is not run: its
 * operation stays PENDING for the next start and rq gets -ESHUTDOWN. */
int actq_submit(struct actq *q, struct action *a);

/* operations/: the kind's table (operation.c), for the registry. */
struct kind_ops;
extern const struct kind_ops operations_kind;
/* operations/: the kind's directory, which the hub keeps (kind_dir_named). */
static inline struct bnode *operations_dir(struct backend *b)
{
	return kind_dir_named(b, "operations");
}

#endif
