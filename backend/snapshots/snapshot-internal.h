/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * snapshot-internal: what the snapshot files share (snapshot.c,
 * snapshot-state.c, snapshot-run.c, snapshot-ctl.c, snapshot-files.c,
 * snapshot-kind.c); never seen outside them.
 *
 * A snapshot is snapshots/NAME: a plugin's snapshot of one volume, made
 * (CreateSnapshot), imported (an id the plugin already has) or deleted
 * (DeleteSnapshot) by actions on its own queue, each with its operation
 * (snapshot.create, snapshot.import, snapshot.delete), checkpointed as
 * STATE_DIR/snapshots/NAME.json before and after each call. The room's
 * state (its directory) is the snapshots/ node's own: struct backend
 * holds nothing of it.
 */
#ifndef NODEFS_SNAPSHOT_INTERNAL_H
#define NODEFS_SNAPSHOT_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "backend-internal.h"
#include "links.h"
#include "operation.h"
#include "snapshots.h"

/* ---- snapshot-state.c: the state machine, pure ---- */

enum sstate { S_CREATING, S_READY, S_DELETING, S_FAILED, S_GONE };
enum sevent {
	SE_CREATED,		/* CreateSnapshot (or the import's look) answered */
	SE_CREATE_FAILED,	/* ... failed for certain */
	SE_UNCERTAIN,		/* the answer never came: repeat the call */
	SE_DELETE,		/* a delete starts */
	SE_DELETED,		/* DeleteSnapshot answered (or there was nothing to delete) */
	SE_DELETE_FAILED,	/* ... failed for certain: the snapshot stays */
};
/* "CREATING", ...; "UNKNOWN" out of range. */
const char *sstate_to_string(enum sstate s);
/* The inverse; -1 when unknown. */
int sstate_from_string(const char *s);
/* The state event e leads to from s (S_GONE: the snapshot is no more);
 * -EINVAL when e cannot happen in s. Pure. */
int snapshot_next(enum sstate s, enum sevent e, enum sstate *ret);

struct jw;

/* ---- snapshot.c: the object ---- */

struct snapshot {
	struct backend *b;
	struct bnode *node;		/* borrowed: the node owns the snapshot */
	struct actq q;
	atomic_int inflight;		/* actions submitted and not yet answered */
	bool resumed;			/* recovery: a PENDING operation re-drives it */
	atomic_bool watched;		/* an uncertain call is settled in the background */

	/* what it was made with; immutable after the command */
	char *plugin;
	char *volume;			/* the source volume's name; "" for an import */
	char **params;			/* "k=v" */
	bool imported;

	pthread_mutex_t lock;		/* everything below */
	enum sstate state;
	char *csi_name;			/* CreateSnapshot name: nodefs-NAME-OPID-SALT */
	char *id;			/* the plugin's snapshot id */
	char *volume_id;		/* the source volume's id */
	int64_t size;
	int64_t created_s;
	int32_t created_ns;
	bool ready;
	char name[];
};

static inline struct snapshot *sof(struct bnode *n)
{
	return n->priv;
}

/* The snapshots/ directory (referenced: bnode_unref), NULL when the kind
 * is not in the backend's list. */
struct bnode *snapshots_dir(struct backend *b);
struct snapshot *snapshot_alloc(struct backend *b, const char *name);
void snapshot_free(struct snapshot *s);
enum sstate snapshot_state(struct snapshot *s);
/* Move by event e; a change wakes pollers and emits an event with op_id.
 * -EINVAL (nothing changed) when e cannot happen now. */
int snapshot_apply(struct snapshot *s, enum sevent e, const char *op_id);
/* The record and info.json's members. Lock held. */
void snapshot_write_locked(struct snapshot *s, struct jw *w);
int snapshot_checkpoint(struct snapshot *s, unsigned flags, struct nerr *err);
/* Gone: record, directory, a DELETED event. */
void snapshot_forget(struct snapshot *s, const char *op_id);
/* Recovery: records back into the tree. */
int snapshots_recover(struct backend *b, struct nerr *err);

/* ---- snapshot-run.c: actions ---- */

enum { SA_CREATE, SA_IMPORT, SA_DELETE, SA_SETTLE };

struct sact {
	struct action a;
	struct snapshot *s;
	struct bnode *node;
	int kind;
	/* SA_SETTLE from the background watch: its deadline (0: recovery's
	 * settle, which starts a watch if the answer stays unknown) and the
	 * delay before the next look */
	int64_t deadline_ms;
	uint64_t delay_ms;
	struct operation *uop;		/* the command's, for its outcome; referenced */
};

/* Queue an action of kind for s; with its operation unless SA_SETTLE
 * (rq may then be NULL). -EINPROGRESS, or -errno with rq->err. */
int snapshot_submit(struct snapshot *s, int kind, const char *cmdline, struct breq *rq);
/* Recovery: a PENDING snapshot.* operation driven to its end. */
int snapshot_resume(struct backend *b, struct operation *op);
/* Recovery's last round: snapshots left CREATING or DELETING with no
 * operation resuming them are settled by repeating the call. */
void snapshots_settle(struct backend *b);
/* The plugin asked again for s (ListSnapshots): its readiness and size
 * updated. -errno with err. */
int snapshot_look(struct snapshot *s, struct nerr *err);

/* ---- snapshot-ctl.c, snapshot-files.c: the tree ---- */

extern const struct btype snapshots_type;
extern const struct btype snapshot_type;
extern const struct bctl_table snapshot_ctl_table;
int snapshots_render_metrics(struct backend *b, struct sbuf *out);

#endif
