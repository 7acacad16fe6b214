/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * volume-internal: what the volume files share (volume.c, volume-steps.c,
 * volume-settle.c, volume-ctl.c, volume-files.c, volume-recover.c); never
 * seen outside them.
 *
 * A volume's states, the object and its action. The state machine
 * (volume-steps.c) calls plugins only through struct storage_ops; the
 * files and commands never call a plugin but through it either.
 */
#ifndef NODEFS_VOLUME_INTERNAL_H
#define NODEFS_VOLUME_INTERNAL_H

#include "backend-internal.h"
#include "links.h"
#include "operation.h"
#include "plugins.h"
#include "profiles.h"
#include "volumes.h"

/* volumes/: the collection's type (volume-ctl.c), its metrics
 * (volume-files.c), its recovery and a PENDING operation's resume
 * (volume-recover.c), a volume's name by its id (volume.c). */
extern const struct btype volumes_type;
int volumes_render_metrics(struct backend *b, struct sbuf *out);
int volumes_recover(struct backend *b, struct nerr *err);
int volume_resume(struct backend *b, struct operation *op);
bool volume_name_by_id(struct backend *b, const char *plugin, const char *id, char *buf, size_t len);

struct jw;
struct operation;

enum vstate {
	V_CREATING, V_CREATED, V_CONTROLLER_PUBLISH, V_NODE_READY, V_NODE_STAGE, V_VOL_READY,
	V_NODE_PUBLISH, V_PUBLISHED, V_NODE_UNPUBLISH, V_NODE_UNSTAGE, V_CONTROLLER_UNPUBLISH,
	V_DELETING,
};

/* A publish-side call (ControllerPublish, NodeStage, NodePublish and their
 * undoing calls), with what it acts on: recorded before it is sent, so an
 * answer that never came can be settled later (volume-settle.c). */
enum vcall_kind {
	VC_NONE, VC_CTL_PUBLISH, VC_STAGE, VC_PUBLISH, VC_UNPUBLISH, VC_UNSTAGE, VC_CTL_UNPUBLISH,
};

struct vcall {
	char *path;			/* target or staging path; NULL for controller calls */
	char *node;			/* node id of a controller call; NULL otherwise */
	/* the operation whose command sent it; "" none (an operation's id
	 * is as long, struct operation) */
	char op_id[24];
	int kind;			/* enum vcall_kind */
	bool told;			/* a late act of it was undone and reported */
};

struct volume {
	struct backend *b;
	struct bnode *node;		/* borrowed: the node owns the volume */
	struct actq q;
	atomic_int inflight;		/* actions submitted and not yet answered */
	/* Its create or import is queued (or it was recovered): other commands
	 * may follow. The node is in the tree before that action is queued
	 * (a name is taken once), and a command slipping in first would run
	 * before the create: a destroy would make and delete the volume, and
	 * the create, running next on the forgotten volume, make it again. */
	atomic_bool queued;

	/* what it was made with; immutable after create. The names are
	 * interned (b->names: 10,000 volumes of one plugin share "local"). */
	const char *plugin;
	const char *profile;
	const char *access_mode;
	const char *fs_type;
	char **mount_flags;
	char **params;			/* "k=v" */
	uint64_t size_req;
	bool imported;
	/* create: the content source, "snapshot:NAME" or "volume:NAME" (NULL:
	 * none), and its id at the plugin (resolved when the command was
	 * written, kept in the record so a repeated CreateVolume names it) */
	char *src;
	char *src_id;
	/* under lock, with the members below (here, they fill a hole) */
	bool ctl_published, staged;
	bool have_stats;		/* NodeGetVolumeStats as last reported */
	bool ro;
	bool last_uncertain;		/* the last call's outcome is unknown */
	bool unc_undo;

	pthread_mutex_t lock;		/* everything below */
	enum vstate state;
	char *csi_name;			/* CreateVolume name: nodefs-OPID */
	char *id;			/* CSI volume id */
	int64_t capacity;
	char **vctx;			/* volume context, "k=v" */
	char **pctx;			/* publish context, "k=v" */
	int64_t node_expand_to;		/* ControllerExpand done, NodeExpand owed */
	long long stats_used, stats_available;
	/* mutable parameters in force (modify; "k=v"), NULL: none */
	char **mparams;
	/* the condition as the plugin last said it (ControllerGetVolume, or
	 * NodeGetVolumeStats): cond_msg NULL until it said */
	bool cond_abnormal;
	char *cond_msg;
	char *target;
	char *staging;			/* NULL until it has an id; VSTAGING */
	/* A CreateVolume or DeleteVolume whose answer never came is being
	 * settled in the background (volume_watch_uncertain): one watch at a
	 * time, for the last command that left it so (unc_op, referenced, may
	 * be NULL; unc_undo, above: that command wanted the volume gone). */
	atomic_bool watched;
	struct operation *unc_op;
	/* The publish-side call in flight (record key "call", cleared when it
	 * ends for certain) and the last one whose answer never came (key
	 * "uncertain", kept until the watch settles it, across a restart). */
	struct vcall call, unc;
	char name[];			/* allocated to its length (at most 64) */
};

/* The staging path, "" when none. */
#define VSTAGING(v) ((v)->staging ? (v)->staging : "")


static inline struct volume *vof(struct bnode *n)
{
	return n->priv;
}

/* An action on a volume: one command, run on the volume's queue. */
enum { VA_CREATE, VA_IMPORT, VA_PUBLISH, VA_STAGE, VA_UNPUBLISH, VA_UNSTAGE, VA_EXPAND,
       VA_DESTROY, VA_MODIFY, VA_SETTLE };

struct vact {
	struct action a;
	struct volume *v;
	struct bnode *node;
	int kind;
	char *target;
	bool ro;
	uint64_t size;
	char **mparams;			/* VA_MODIFY: "k=v" (taken) */
	/* VA_SETTLE: the watch's deadline and next delay */
	int64_t deadline_ms;
	uint64_t delay_ms;
};

/* ---- volume.c: the object, its record, its state ---- */

/* "CREATING", ...; "UNKNOWN" out of range. */
const char *vstate_to_string(enum vstate s);
/* The inverse; -1 when unknown. */
int vstate_from_string(const char *s);
/* Append a copy of s to the NULL-terminated *v; -ENOMEM. */
int volume_strv_push(char ***v, const char *s);
/* A copy of v into *ret: NULL when v is NULL or empty (a volume's flags
 * and parameters are NULL when it has none: most have none, and an empty
 * vector is a 32-byte block each). -ENOMEM. */
int volume_strv_dup(char *const *v, char ***ret);
/* A volume named name, in no tree yet (NULL on OOM). */
struct volume *volume_alloc(struct backend *b, const char *name);
void volume_free(struct volume *v);
/* The members as the record and info.json show them. Lock held. */
void volume_write_locked(struct volume *v, struct jw *w, bool redact);
/* Derive the staging path from the id when not set. Lock held or v not
 * yet shared. */
void volume_staging_locked(struct volume *v);
/* Write the volume's record (store.c). -errno with err. */
int volume_checkpoint(struct volume *v, unsigned flags, struct nerr *err);
enum vstate volume_state(struct volume *v);
/* Set the state; a change wakes pollers and emits an event carrying op_id,
 * the operation whose command moved it (NULL: none did). */
void volume_set_state(struct volume *v, enum vstate s, const char *op_id);
/* The volume is gone: record, directory, and a DELETED event. */
void volume_forget(struct volume *v, const char *op_id);
/* The same without a word on the event stream: a create or import refused
 * before it was queued, whose volume was never announced. */
void volume_unmake(struct volume *v);

/* ---- volume.c: calls ---- */

/* "NodePublishVolume", ...; "" for VC_NONE. */
const char *vcall_name(int kind);
/* The kind named so; VC_NONE when none. */
int vcall_from_name(const char *s);
/* Set c to kind, path and node (copies; NULL allowed), freeing what it held. */
void vcall_set(struct vcall *c, int kind, const char *path, const char *node);
/* Move *from into *to (freeing what *to held); *from is left empty. */
void vcall_move(struct vcall *to, struct vcall *from);
static inline void vcall_clear(struct vcall *c)
{
	vcall_set(c, VC_NONE, NULL, NULL);
}

/* ---- volume-steps.c: the state machine ---- */

/* What one action's calls share (volume_run_action makes it). */
struct vctx {
	struct volume *v;
	struct plugin *p;
	struct bnode *pnode;
	const struct storage_ops *ops;
	void *h;
	struct storage_caps caps;
	struct operation *op;
	unsigned attempts;
	bool dirty;			/* state changed since the last checkpoint */
	char **secrets;			/* the profile's or plugin's, read for this action */
	char node_id[256];
};

/* The action's run hook: one command walked to its end. */
int volume_run_action(struct action *a, struct nerr *err);
/* The steps the settling repeats (volume-steps.c), each one call with
 * its transient state checkpointed before it: CreateVolume (to CREATED),
 * DeleteVolume (1: gone), a walk down to goal (enum down_goal: 1 when
 * deleted), and the publish-side call kind from its transient state to
 * the state it leads to. v->last_uncertain says whether a failure's
 * outcome is unknown. */
enum down_goal { DOWN_UNPUBLISHED, DOWN_CREATED, DOWN_DELETED };
int volume_step_create(struct vctx *x, struct nerr *err);
int volume_step_delete(struct vctx *x, struct nerr *err);
int volume_walk_down(struct vctx *x, enum down_goal goal, struct nerr *err);
int volume_step_call(struct vctx *x, int kind, struct nerr *err);
/* The publish-side call kind on path (target or staging) or node (the
 * controller's), with no change of state: what undoes or redoes a late
 * call. */
int volume_call_raw(struct vctx *x, int kind, const char *path, const char *node,
		    struct nerr *err);

#define HAS_CTL(x, c) STORAGE_CAP((x)->caps.controller, STORAGE_CTL_##c)
#define HAS_NODE(x, c) STORAGE_CAP((x)->caps.node, STORAGE_NODE_##c)

/* ---- volume-call.c: what every call shares ---- */

/* The request naming x's volume: id, capability, parameters, contexts. */
struct storage_req volume_req_of(struct vctx *x);
/* What a call ended with, for the step and the operation. */
struct storage_result;
void volume_note_result(struct vctx *x, const struct storage_result *res);
/* The retry hook of x's calls: the attempts so far, in the operation. */
void volume_retry_note(void *ctx, const struct storage_result *so_far);

/* ---- volume-change.c: changes to a volume in place ---- */

/* expand to size bytes: ControllerExpand, then NodeExpand when needed
 * where the volume is staged or published. */
int volume_expand(struct vctx *x, uint64_t size, struct nerr *err);
/* modify: ControllerModifyVolume with kv (KEY=VALUE, NULL-ended). */
int volume_modify(struct vctx *x, char **kv, struct nerr *err);

/* ---- volume-settle.c: calls whose answer never came ---- */

/* v is left CREATING or DELETING by a call whose answer never came, or
 * holds a publish-side call so left (v->unc): repeat it in the background
 * on v's queue (after 1 s, 2 s, 4 s ... up to reconcile_interval, for
 * uncertain_timeout) until it is answered, then go on (CREATED; gone; the
 * state the call leads to) or undo (a create for a destroy: DeleteVolume;
 * a publish-side call that turns up late after a later command took the
 * volume the other way: its undoing call) as the commands want. Counted,
 * an event and a line in op's outcome (uncertain.h). One watch per volume:
 * a second call only names the command it settles for. undo: op wants the
 * volume gone (op may be NULL). */
void volume_watch_uncertain(struct volume *v, struct operation *op, bool undo);
/* The watch ends (settled, closed, or the look cannot run). */
void volume_watch_end(struct volume *v);
/* The next look, after delay_ms (the watch ends at deadline_ms). */
void volume_watch_arm(struct volume *v, int64_t deadline_ms, uint64_t delay_ms);
/* The settle action's body (VA_SETTLE), on v's queue. */
int volume_settle_run(struct vctx *x, struct vact *act, struct nerr *err);

/* ---- volume-ctl.c: commands ---- */

/* The action's done and free hooks. */
void volume_act_done(struct action *a, int result);
void volume_act_free(struct action *a);
/* Queue an action of kind (VA_*) for v with its operation; t (may be
 * NULL) gives its arguments (t->target is taken, even on failure). */
int volume_submit(struct volume *v, int kind, const char *cmdline, struct breq *rq,
		  struct vact *t);
/* volumes/NAME/ctl's commands. */
extern const struct bctl_table volume_ctl_table;

/* ---- volume-files.c: volumes/NAME/ ---- */

extern const struct btype volume_type;

#endif
