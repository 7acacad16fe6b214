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
 *   container-options.c    the table of create's options (nothing else);
 *                          container-options.h its rows and struct cspec
 *   container-optparse.c   the kinds of option value and the passes over
 *                          the table (parse, record, usage)
 *   container-files.c      the files of containers/NAME/ and the metrics
 *   container-sandbox.c    the sandbox directory: made, owned, mounted, removed
 *   container-sync.c       the engines' word: their event stream and
 *                          reconciliation against their listings
 *   container-recover.c    recovery after a restart: checkpoints back into
 *                          the tree, half-made containers taken back, PENDING
 *                          operations resumed
 *   container-restart.c    the restart policy (supervise/restart.c's) kept
 *                          for a container: the decision at each exit, the
 *                          due start, the restarts file and its record
 *   container-health.c     health checks: the engine's own (docker cmd) taken
 *                          in, the probes nodefs makes (http, tcp, lxc cmd)
 *   service-spec.c         the syntax of network=, port=, ip=, health=
 *   container-kind.c       the kind's table of hooks for the hub
 * Must not know: volumes/ (a volume= mount asks links.h), plugins/, the
 * drivers' wire formats (runtimes/ behind struct runtime_ops).
 */
#ifndef NODEFS_CONTAINER_INTERNAL_H
#define NODEFS_CONTAINER_INTERNAL_H

#include "backend-internal.h"
#include "containers.h"
#include "container-options.h"
#include "engines.h"
#include "links.h"

#include <stdbool.h>
#include <stdint.h>

#include "hist.h"
#include "macro.h"
#include "operation.h"
#include "restart.h"
#include "sbuf.h"
#include "service-spec.h"

enum cstate {
	C_CREATED, C_PULLING, C_STARTING, C_RUNNING, C_PAUSED, C_STOPPING, C_EXITED,
	C_DESTROYING, C_CREATING, C_FETCHING,
};
#define C_LAST C_FETCHING

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

	/* the spec, as created (container-options.h); immutable after create
	 * except the limits, which change under lock */
	struct cspec spec;
	/* the sandbox's host path (container-sandbox.c), NULL: none (sandbox=no,
	 * or gone); set before the create, under lock after */
	char *sandbox;
	/* each fetch='s status, by spec.fetches (under lock); fetched: all
	 * done, the launch's fetch stage is over */
	struct fetch_status *fst;
	bool fetched;

	/* Held across a checkpoint's put and across the destroy's delete with
	 * the marking of removed: a put either lands before the delete or sees
	 * removed and writes nothing, so no record comes back after a destroy
	 * (container_checkpoint, container_forget). Taken before lock. */
	pthread_mutex_t ckpt_lock;
	pthread_mutex_t lock;		/* everything below, and spec's limits */
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
	/* container-restart.c: where the policy stands (checkpointed), the
	 * backoff, and a generation that voids a due start when the policy is
	 * ended or started over meanwhile */
	struct restart_state rs;
	struct backoff bo;
	unsigned restart_gen;
	uint64_t restart_delay_ms;	/* the wait before the due start */
	uint64_t run_start_ms;		/* monotonic ms it was seen RUNNING; 0: unknown */
	bool has_last_exit;		/* the exit a restart followed */
	int last_exit_code, last_signal;
	bool last_oom, last_unhealthy;
	bool unhealthy_kill;		/* health_restart killed it: a failure */
	/* the bindings the engine made for this run (ports=), as its driver
	 * reported them, learned on a worker (container_ports_learn) and
	 * checkpointed; NULL: not known (the file shows them as asked).
	 * run_gen counts runs; ports_gen is the run they were learned for */
	char *ports_seen;
	unsigned run_gen, ports_gen;
	/* container-health.c */
	int hstate;			/* enum health_state */
	time_t hsince;
	unsigned hstreak;
	char hout[512];			/* the last probe's output, capped */
	unsigned hgen;			/* a probe of another run is void */
	uint64_t hstarted_ms;		/* monotonic: the run's start (start period) */
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
	bool then_fetch;		/* CA_SYNC: a resumed create's fetch stage after */
	bool by_policy;			/* CA_START: the restart policy's */
	unsigned gen;			/* by_policy: c->restart_gen it was made for */
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

/* ---- container-restart.c ---- */

/* c reached EXITED (lock held): decide what its policy does. Returns the
 * delay of the start it makes due, or -1 when this exit is final; msg
 * (64 bytes) gets the event's note ("restart 2 of 3 in 1200 ms"). */
int64_t container_policy_exit_locked(struct container *c, char *msg, size_t len);
/* Arm the start made due (a delay from container_policy_exit_locked, or
 * what a record had left). Any thread. */
void container_policy_arm(struct container *c, uint64_t delay_ms);
/* A user's start (policy starts over) and a user's stop or kill (policy
 * ended until the next start; returns whether a restart was due, which
 * is then cancelled). */
void container_policy_user_start(struct container *c);
bool container_policy_user_stop(struct container *c);
/* Recovery: a start its record had due, or an `always` container stopped
 * by a user before a restart of nodefs, is armed. */
void container_policy_recover(struct container *c);
/* The record's members (lock held) and reading them back. */
struct jw;
void container_service_write_locked(struct container *c, struct jw *w);
struct json_t;
void container_service_read(struct container *c, struct json_t *j);
/* A policy start failed: counted as another failed exit. */
void container_policy_start_failed(struct container *c, const char *why);
int container_show_restarts(struct bnode *n, struct sbuf *out);
int container_show_ports(struct bnode *n, struct sbuf *out);
/* On a worker (an action's or recovery's look, with the engine held as
 * h): ask the engine once a run for the bindings it made, and keep them
 * for the ports file, which never calls the engine. Does nothing without
 * port=, or when c is not running. */
void container_ports_learn(struct container *c, void *h, const char *id);
/* A new run (lock held): what the last run's bindings were is forgotten. */
void container_ports_new_run_locked(struct container *c);
/* Whether wait may answer: EXITED with no restart due, or removed (lock
 * held). */
bool container_final_locked(const struct container *c);

/* ---- container-health.c ---- */

enum health_state { HEALTH_NONE, HEALTH_STARTING, HEALTH_HEALTHY, HEALTH_UNHEALTHY };
extern const char *const health_names[4];
/* c is RUNNING (a new run): checks start over (STARTING), the probes
 * nodefs makes are armed. Any thread. */
void container_health_run(struct container *c);
/* c is RUNNING again after a pause: the probes nodefs makes go on. */
void container_health_resume(struct container *c);
/* The engine's own check said state (docker health_status). */
void container_health_engine(struct container *c, const char *state);
int container_show_health(struct bnode *n, struct sbuf *out);

/* ---- container-ctl.c ---- */

extern const struct bctl_table container_ctl;	/* containers/NAME/ctl */
extern const struct bctl_table containers_ctl;	/* containers/ctl */

/* ---- container-sandbox.c ---- */

/* Make c's sandbox (none with sandbox=no), c->sandbox its path. -errno. */
int container_sandbox_make(struct container *c, struct nerr *err);
/* The sandbox to the user the create resolved (uid < 0: nothing). */
void container_sandbox_own(struct container *c, long uid, long gid);
/* Recovery, after the records are back: the sandboxes under sandbox_dir
 * (NAME-XXXXXXXX directories) that no container has, which a crash
 * between a sandbox's making and its container's first record left, are
 * removed, unless keep_sandboxes. Made since the daemon started: kept.
 * Returns how many went. */
int containers_sandbox_reclaim(struct backend *b);
/* Remove the sandbox (destroyed: unless keep_sandboxes; else always: a
 * create that failed leaves nothing). */
void container_sandbox_drop(struct container *c, bool destroyed);
/* The create's mounts: the spec's, then the sandbox's. *ret is malloc'd,
 * its strings borrowed from c. -ENOMEM. */
int container_sandbox_mounts(struct container *c, struct rt_mount **ret, size_t *ret_n);

/* ---- container-fetch.c ---- */

/* Whether c has a fetch= not done yet. Any thread. */
bool container_fetch_pending(struct container *c);
/* The launch's fetch stage: each fetch= not done yet, in order, into the
 * sandbox (the caller says FETCHING meanwhile: container-run.c). On a
 * worker. -EIO, -EFBIG, -ECANCELED with the URI in err (and c's error). */
int container_fetch_run(struct container *c, struct nerr *err);

/* Before c's sandbox (at sandbox) is removed: the files its fetches
 * linked from the cache are unlinked with the entries' stamps renewed
 * (fetch_unlink). On a worker. */
void container_fetch_release(struct container *c, const char *sandbox);

/* The containers kind's state (kind_state): the fetch stage's times by how
 * each fetch was served (FETCH_SERVED_DOWNLOADED - 1, ...), lock-free. */
struct containers_state {
	struct hist fetch_seconds[3];
};
/* nodefs_fetch_seconds (containers_render_metrics ends with it). */
int container_fetch_render_metrics(struct backend *b, struct sbuf *out);

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
