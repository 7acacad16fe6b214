/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container-internal: what the container module's files share, and no one
 * else sees: struct container, its states, the action a command queues, and
 * the core functions of container.c that the other container-*.c files use.
 *
 * The module is split by concern, each file saying what it owns:
 *   container.c            the object: its life, state, checkpoint record,
 *                          the engine's status taken in
 *   container-run.c        the state machine's steps: the actions a command
 *                          queues and what each does with the engine
 *   container-ctl.c        containers/ctl and containers/NAME/ctl: parsing and
 *                          checking commands, then queueing them
 *   container-files.c      the files of containers/NAME/ and the metrics
 *   container-sync.c       the engines' word: their event stream and
 *                          reconciliation against their listings
 *   container-recover.c    recovery after a restart: checkpoints back into
 *                          the tree, half-made containers taken back, PENDING
 *                          operations resumed
 *   container-kind.c       the kind's table of hooks for the hub
 * Must not know: volumes/ (a volume= mount asks links.h), plugins/, the
 * drivers' wire formats (runtimes/ behind struct runtime_ops).
 */
#ifndef NODEFS_CONTAINER_INTERNAL_H
#define NODEFS_CONTAINER_INTERNAL_H

#include "backend-internal.h"
#include "containers.h"
#include "engines.h"
#include "links.h"

#include <stdbool.h>
#include <stdint.h>

#include "macro.h"
#include "operation.h"
#include "sbuf.h"

enum cstate {
	C_CREATED, C_PULLING, C_STARTING, C_RUNNING, C_PAUSED, C_STOPPING, C_EXITED,
	C_DESTROYING, C_CREATING,
};

/* Being made: the engine has no container for it yet (CREATING: the
 * engine makes it, an LXC template runs; PULLING: Docker fetches its
 * image). */
static inline bool cstate_making(enum cstate s)
{
	return s == C_CREATING || s == C_PULLING;
}

extern const char *const cstate_names[];	/* by enum cstate, as in records and events */
const char *cstate_to_string(enum cstate s);
int cstate_from_string(const char *s);

#define EXEC_OUT_CAP (1u << 20)
#define LOGS_MAX (1u << 20)

struct container {
	struct backend *b;
	struct bnode *node;		/* borrowed: the node owns the container */
	struct engine *eng;
	char name[65];
	/* The name its engine knows it by when the driver names containers
	 * (runtime_ops.engine_names): name_prefix + name, made once and kept in
	 * the record; "" for a record of an older nodefs (the driver's own
	 * "nodefs-NAME") or a driver that does not. */
	char engine_name[112];
	struct actq q;

	/* the spec, as created; immutable after create except the limits */
	char *image;
	char **argv;
	struct rt_kv *env;
	size_t nenv;
	struct rt_mount *mounts;
	size_t nmounts;
	char **volumes;			/* VOLNAME of each volume= mount, NULL-terminated */
	char *template_name, *distro, *release, *arch, *image_variant, *image_server;
	char **template_args;
	bool flush_cache, force_cache, disable_gpg;

	/* Held across a checkpoint's put and across the destroy's delete with
	 * the marking of removed: a put either lands before the delete or sees
	 * removed and writes nothing, so no record comes back after a destroy
	 * (container_checkpoint, container_forget). Taken before lock. */
	pthread_mutex_t ckpt_lock;
	pthread_mutex_t lock;		/* everything below */
	double cpus;
	uint64_t memory;
	int64_t pids;
	char *id;			/* engine id, NULL until created */
	enum cstate state;
	pid_t pid;
	bool has_exit;
	int exit_code;
	bool oom_killed;
	time_t started_at, finished_at;
	/* when state last changed (rt_now_ns): a pause or unpause event that
	 * happened before it is history the state already holds */
	int64_t state_ns;
	char progress[512];
	struct sbuf exec_out;
	bool has_exec;
	int exec_exit;
	struct rt_progress prog;	/* cancel is set by destroy */
	bool removed;			/* destroyed: no record, no state change after */
	/* An exit event is taken as news, not as the state: the inspect it
	 * queues moves the container to EXITED with the engine's final word
	 * (exit code and OOM flag together), so a waiter woken by EXITED never
	 * reads an OOM flag that is still on its way. */
	bool exit_pending;
	uint64_t exits[5];		/* nodefs_container_exits_total, by exit_reasons[] */
	/* the action running now (container_run_action): its kind and its
	 * operation's id ("" for none) */
	int running_kind;
	char running_op[32];
};


/* Why a container reached EXITED, for nodefs_container_exits_total. */
extern const char *const exit_reasons[5];

static inline struct container *cof(struct bnode *n)
{
	return n->priv;
}

struct cact {
	struct action a;
	struct container *c;
	struct bnode *node;		/* keeps c alive */
	int kind;
	int timeout_s;
	int sig;
	struct rt_limits lim;
	char **argv;
	bool then_start;
};

enum { CA_CREATE, CA_START, CA_STOP, CA_KILL, CA_PAUSE, CA_RESUME, CA_UPDATE, CA_EXEC,
       CA_DESTROY, CA_SYNC };

/* ---- container.c ---- */

void strv_free(char **v);
char **strv_dup(char *const *v);		/* NULL on OOM */

/* A new container of engine e, state CREATED, no node yet. NULL on OOM. */
struct container *container_alloc(struct backend *b, struct engine *e, const char *name);
/* Free c and what it owns (the node's free, or a container never added). */
void container_free(struct container *c);
/* An exit code as the files and events show it: "N", or "unknown" when
 * the engine does not know it (below 0); buf holds at least 16 bytes. */
const char *container_exit_text(int code, char *buf, size_t len);

/* containers/NAME goes: record deleted, node removed, DESTROYED emitted
 * with op_id, the operation that made it go (NULL: none did). */
void container_forget(struct container *c, const char *op_id);
/* containers/NAME goes without a word on the event stream: a create
 * refused before it was queued, whose container was never announced. */
void container_unmake(struct container *c);

/* Write c's checkpoint record (STATE_DIR/containers/NAME). -errno. */
int container_checkpoint(struct container *c, struct nerr *err);
/* c's record's members into w (lock held): the checkpoint and info.json,
 * written with common/jw.c as every record is (jansson reads them back). */
struct jw;
void container_write_locked(struct container *c, struct jw *w, bool redact);
/* Move to s, telling the tree and the event stream (op_id: the operation
 * whose command moved it, NULL for the engine's or nodefs's own doing; msg:
 * the event's note). */
void container_set_state(struct container *c, enum cstate s, const char *op_id,
			 const char *msg);
/* The id of the operation of kind (CA_*) running on c now into buf (32
 * bytes), or NULL: an engine event that a command of that kind causes
 * (pause, resume, start) is that operation's. */
const char *container_running_op(struct container *c, int kind, char *buf);
enum cstate container_state_of(struct container *c);
/* Inspect c on its engine and take the answer in; defer: a command's own
 * look, which waits up to a second for an exit's code; op_id: that
 * command's operation, which the state events carry. -errno. */
int container_refresh(struct container *c, bool defer, const char *op_id, struct nerr *err);
/* The engine no longer has c's container: EXITED with why in error.
 * Returns whether c had one. */
bool container_mark_gone(struct container *c, const char *op_id, const char *why);
/* Copy c's engine id into buf: 1, or 0 when it has none (yet, or any more). */
int container_current_id(struct container *c, char *buf, size_t len);
/* The container of e whose engine id is id (its node referenced in
 * *ret_node), or NULL. */
struct container *container_find_by_id(struct backend *b, struct engine *e, const char *id,
				       struct bnode **ret_node);
/* Whether e's container name is being created (its engine id not known yet). */
bool container_creating_now(struct backend *b, struct engine *e, const char *name);

/* ---- container-run.c ---- */

/* Queue an action of kind on c (tmpl: its arguments, taken over). With rq,
 * an operation records it and rq completes when it ends; without, it runs
 * unrecorded (a sync). -EBUSY when a nonblock rq finds a command in flight. */
int container_submit(struct container *c, int kind, const char *cmdline, struct breq *rq,
		     struct cact *tmpl);
int container_run_action(struct action *a, struct nerr *err);
void cact_free(struct action *a);

/* ---- container-ctl.c ---- */

extern const struct bctl_table container_ctl;	/* containers/NAME/ctl */
extern const struct bctl_table containers_ctl;	/* containers/ctl */

/* ---- container-files.c ---- */

extern const struct btype container_type;	/* containers/NAME/ */
extern const struct btype containers_type;	/* containers/ */
int containers_render_metrics(struct backend *b, struct sbuf *out);

/* ---- container-sync.c ---- */

/* Start each engine's event stream (after recovery). */
int containers_watch(struct backend *b);
/* containers_reconcile: reconcile.h */

/* ---- container-recover.c ---- */

/* The checkpoints back as containers/NAME, each checked with its engine,
 * cut creates taken back. -errno when the records cannot be read. */
int containers_recover(struct backend *b, struct nerr *err);
/* Resume a PENDING container operation (kind.h resume). */
int container_resume(struct backend *b, struct operation *op);

#endif
