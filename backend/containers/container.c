/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container: containers/ and containers/NAME/, containers on the engines of
 * runtimes/ (Docker, LXC) and their lifecycle.
 *
 * What the Mesos Docker containerizer and Nomad's LXC driver do, as files:
 * create (pulling the image or building the rootfs), start, stop with a
 * timeout, kill, pause, resume, update, exec, destroy (which cancels a pull
 * in progress), usage (stats), logs, wait, and recovery after a restart.
 *
 * Every command is an operation run on the container's action queue, on the
 * worker pool: engine calls block, so they never run on a FUSE thread. State
 * follows the engine's event stream (driver watch()), not polling. Each
 * stable state is checkpointed under STATE_DIR/containers before the command
 * is acknowledged.
 *
 * This file owns the object: its allocation and end, its state and the
 * events its moves emit, its checkpoint record, and taking in what the
 * engine reports (container-internal.h lists the module's other files). It
 * must not know ctl syntax, file names or recovery's order: those sit in
 * the files above it.
 */
#include "container-internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jw.h"
#include "reconcile.h"
#include "store.h"

const char *const cstate_names[] = {
	"CREATED", "PULLING", "STARTING", "RUNNING", "PAUSED", "STOPPING", "EXITED",
	"DESTROYING", "CREATING", "FETCHING",
};

const char *const exit_reasons[5] = { "completed", "error", "signal", "oom", "lost" };
_Static_assert(ARRAY_SIZE(exit_reasons) == ARRAY_SIZE(((struct container *)0)->exits),
	       "one exit counter per reason");

const char *cstate_to_string(enum cstate s)
{
	return s <= C_LAST ? cstate_names[s] : "UNKNOWN";
}

int cstate_from_string(const char *s)
{
	for (int i = 0; i <= C_LAST; i++)
		if (s && strcmp(s, cstate_names[i]) == 0)
			return i;
	return -1;
}

/* Lock held. */
static int exit_reason_locked(const struct container *c)
{
	if (c->oom_killed)
		return 3;
	if (!c->has_exit || c->exit_code < 0)
		return 4;	/* gone from the engine, removed outside nodefs */
	if (c->exit_code == 0)
		return 0;
	return c->exit_code > 128 ? 2 : 1;
}

void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

char **strv_dup(char *const *v)
{
	size_t n = 0;
	char **r;

	while (v && v[n])
		n++;
	r = calloc(n + 1, sizeof(*r));
	if (!r)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!(r[i] = strdup(v[i]))) {
			strv_free(r);
			return NULL;
		}
	return r;
}

void container_free(struct container *c)
{
	if (!c)
		return;
	cspec_free(&c->spec);
	free(c->sandbox);
	free(c->fst);
	free(c->id);
	free(c->ports_seen);
	sbuf_free(&c->exec_out);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->ckpt_lock);
	free(c);
}

static void progress_update(void *ctx, const char *line)
{
	struct container *c = ctx;

	pthread_mutex_lock(&c->lock);
	snprintf(c->progress, sizeof(c->progress), "%s", line);
	pthread_mutex_unlock(&c->lock);
	bnode_changed(c->node);
}

/* The create fetches an image, or makes the container: its state says
 * which, as the create's operation's doing. */
static void progress_pulling(void *ctx, bool on)
{
	struct container *c = ctx;
	char op[32];

	container_set_state(c, on ? C_PULLING : C_CREATING, container_running_op(c, CA_CREATE, op),
			    NULL);
}

struct container *container_alloc(struct backend *b, struct engine *e, const char *name)
{
	struct container *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->b = b;
	c->eng = e;
	snprintf(c->name, sizeof(c->name), "%s", name);
	if (e->ops->engine_names)
		snprintf(c->engine_name, sizeof(c->engine_name), "%s%s", b->name_prefix, name);
	actq_init(&c->q);
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->ckpt_lock, NULL);
	sbuf_init(&c->exec_out, EXEC_OUT_CAP);
	c->prog.update = progress_update;
	c->prog.pulling = progress_pulling;
	c->prog.ctx = c;
	return c;
}

void container_unmake(struct container *c)
{
	struct bnode *n = bnode_ref(c->node);

	pthread_mutex_lock(&c->ckpt_lock);
	pthread_mutex_lock(&c->lock);
	c->removed = true;
	pthread_mutex_unlock(&c->lock);
	store_del(c->b->store, "containers", c->name, STORE_DURABLE, NULL);
	pthread_mutex_unlock(&c->ckpt_lock);
	bnode_remove(n);
	bnode_unref(n);
}

void container_forget(struct container *c, const char *op_id)
{
	enum cstate last;
	struct bnode *n = bnode_ref(c->node);	/* c lives until the event is out */

	/* under ckpt_lock: a checkpoint under way lands before the delete,
	 * and any later one sees removed (an exit event's sync, an engine
	 * event that came late, a refresh) */
	pthread_mutex_lock(&c->ckpt_lock);
	pthread_mutex_lock(&c->lock);
	c->removed = true;
	last = c->state;
	pthread_mutex_unlock(&c->lock);
	store_del(c->b->store, "containers", c->name, STORE_DURABLE, NULL);
	pthread_mutex_unlock(&c->ckpt_lock);
	bnode_remove(n);
	/* the stream's last word on it: containers/NAME is gone */
	op_events_emit(c->b, "container", c->name, cstate_to_string(last), "DESTROYED",
		    op_id, NULL);
	bnode_unref(n);
}

/* ---- state, checkpoints, events ---- */

void container_write_locked(struct container *c, struct jw *w, bool redact)
{
	char t[64];

	jw_kstr(w, "name", c->name);
	jw_kstr(w, "runtime", c->eng->ops->name);
	if (c->id)
		jw_kstr(w, "id", c->id);
	if (c->engine_name[0])
		jw_kstr(w, "engine_name", c->engine_name);
	jw_kstr(w, "state", cstate_to_string(c->state));
	copts_write(&c->spec, w, redact);
	container_service_write_locked(c, w);	/* container-restart.c: the policy's state */
	if (c->sandbox)
		jw_kstr(w, "sandbox_dir", c->sandbox);
	jw_kint(w, "pid", c->pid);
	if (c->has_exit)
		jw_kint(w, "exit_code", c->exit_code);
	jw_kbool(w, "oom_killed", c->oom_killed);
	jw_kint(w, "started_unix", (long long)c->started_at);
	jw_kint(w, "finished_unix", (long long)c->finished_at);
	fmt_time(c->started_at, t, sizeof(t));
	jw_kstr(w, "started_at", t);
	fmt_time(c->finished_at, t, sizeof(t));
	jw_kstr(w, "finished_at", t);
}

int container_checkpoint(struct container *c, struct nerr *err)
{
	struct sbuf sb = SBUF_INIT(0);
	struct jw w;
	bool gone;
	int r = 0;

	store_record_begin(&w, &sb);
	pthread_mutex_lock(&c->ckpt_lock);
	pthread_mutex_lock(&c->lock);
	gone = c->removed;
	if (!gone)
		container_write_locked(c, &w, false);
	pthread_mutex_unlock(&c->lock);
	/* destroyed: its record is deleted for good, nothing to keep */
	if (!gone)
		r = store_put_record(c->b->store, "containers", c->name, &w, STORE_DURABLE, err);
	pthread_mutex_unlock(&c->ckpt_lock);
	sbuf_free(&sb);
	return r;
}

void container_set_state(struct container *c, enum cstate s, const char *op_id,
			 const char *msg)
{
	enum cstate old;

	bool gone;

	pthread_mutex_lock(&c->lock);
	old = c->state;
	gone = c->removed;
	if (!gone) {
		if (old != s)
			c->state_ns = rt_now_ns();
		c->state = s;
		if (s == C_RUNNING && old != C_PAUSED) {
			c->run_start_ms = loop_now_ms();	/* the restart policy's run length */
			container_ports_new_run_locked(c);
		}
		if (s == C_EXITED && old != C_EXITED)
			c->exits[exit_reason_locked(c)]++;
	}
	pthread_mutex_unlock(&c->lock);
	/* DESTROYED was its last word: a late event or sync moves nothing */
	if (old == s || gone)
		return;
	bnode_changed(c->node);
	op_events_emit(c->b, "container", c->name, cstate_to_string(old),
		    cstate_to_string(s), op_id, msg);
	if (s == C_RUNNING && old != C_PAUSED)
		container_health_run(c);	/* a new run: its checks start over */
	else if (s == C_RUNNING)
		container_health_resume(c);	/* resumed: its checks go on */
}

const char *container_running_op(struct container *c, int kind, char *buf)
{
	bool yes;

	pthread_mutex_lock(&c->lock);
	yes = c->running_op[0] && c->running_kind == kind;
	if (yes)
		memcpy(buf, c->running_op, sizeof(c->running_op));
	pthread_mutex_unlock(&c->lock);
	return yes ? buf : NULL;
}

enum cstate container_state_of(struct container *c)
{
	enum cstate s;

	pthread_mutex_lock(&c->lock);
	s = c->state;
	pthread_mutex_unlock(&c->lock);
	return s;
}

/* Take what the engine reports. */
/* Take what the engine reports. An exit whose code the engine does not
 * know yet (-1: LXC's watcher records it when it sees init die, just after
 * liblxc already says STOPPED) is not taken from a command's own look: the
 * exit event follows with the code, and its sync takes it (defer false). */
static int apply_status(struct container *c, const struct rt_status *st, bool defer,
			const char *op_id)
{
	char msg[160] = "", note[96] = "";
	int64_t due = -1;
	int code = st->exit_code;
	enum cstate s;

	pthread_mutex_lock(&c->lock);
	s = c->state;
	if (st->state == RT_STATE_EXITED && code < 0 && s != C_EXITED) {
		if (defer && !c->exit_pending) {
			pthread_mutex_unlock(&c->lock);
			return 1;
		}
		if (c->exit_pending)
			code = c->exit_code;	/* the event knew what the record lacks */
	}
	c->exit_pending = false;	/* the engine's word now, whatever an event said */
	if (st->has_health && c->spec.health.kind == SVC_HEALTH_CMD) {
		/* the engine's own check: its streak and last output */
		c->hstreak = st->health_streak;
		snprintf(c->hout, sizeof(c->hout), "%s", st->health_output);
	}
	c->pid = st->pid;
	if (st->started_at)
		c->started_at = st->started_at;
	if (st->state == RT_STATE_RUNNING || st->state == RT_STATE_PAUSED) {
		/* running again (started by the engine: a restart policy, a
		 * system container that rebooted): the last end is history */
		c->has_exit = false;
		c->oom_killed = false;
		c->finished_at = 0;
	}
	if (st->state == RT_STATE_EXITED) {
		c->has_exit = true;
		c->exit_code = code;
		/* the engine's flag, or the OOM event that came before */
		c->oom_killed = c->oom_killed || st->oom_killed;
		c->finished_at = st->finished_at ? st->finished_at : time(NULL);
		c->pid = 0;
		char t[16];

		/* the restart policy judges the exit before EXITED shows, so a
		 * waiter never takes an exit that is restarted for the last */
		if (s != C_EXITED && !c->removed)
			due = container_policy_exit_locked(c, note, sizeof(note));
		snprintf(msg, sizeof(msg), "exit_code=%s%s%s", container_exit_text(code, t, sizeof(t)),
			 note[0] ? "; " : "", note);
	}
	pthread_mutex_unlock(&c->lock);
	switch (st->state) {
	case RT_STATE_CREATED: s = C_CREATED; break;
	case RT_STATE_RUNNING: s = C_RUNNING; break;
	case RT_STATE_PAUSED: s = C_PAUSED; break;
	case RT_STATE_EXITED: s = C_EXITED; break;
	default: break;
	}
	container_set_state(c, s, op_id, msg[0] ? msg : NULL);
	/* the engine's own check: where it stands (Podman's events carry no
	 * word of it, their sync brings it here) */
	if (st->state == RT_STATE_RUNNING && st->health_status[0] &&
	    c->spec.health.kind == SVC_HEALTH_CMD)
		container_health_engine(c, st->health_status);
	if (due >= 0)
		container_policy_arm(c, (uint64_t)due);
	return 0;
}

/* defer: a command's own look after its call (see apply_status). Then an
 * exit whose code is still unknown waits, up to a second, for the engine's
 * exit event that brings it, so the command returns with the container
 * EXITED rather than STOPPING. */
int container_refresh(struct container *c, bool defer, const char *op_id, struct nerr *err)
{
	_cleanup_engine_ struct engine_ref *h = engine_hold(c->eng);
	struct rt_status st = { 0 };
	char id[256];
	int r;

	if (!h)
		return engine_ready(c->eng, err);
	/* a copy: an event's container_mark_gone may free c->id meanwhile */
	if (!container_current_id(c, id, sizeof(id)))
		return nerr_set(err, ENOENT, "container %s has no engine container", c->name);
	r = c->eng->ops->inspect(h->h, id, &st, err);
	if (r < 0)
		return r;
	if (apply_status(c, &st, defer, op_id) == 0) {
		container_ports_learn(c, h->h, id);
		return 0;
	}
	for (int i = 0; i < 1000; i++) {
		bool news;

		pthread_mutex_lock(&c->lock);
		news = c->exit_pending;
		pthread_mutex_unlock(&c->lock);
		if (news)
			break;
		usleep(1000);
	}
	r = c->eng->ops->inspect(h->h, id, &st, err);
	if (r < 0)
		return r;
	apply_status(c, &st, false, op_id);
	container_ports_learn(c, h->h, id);
	return 0;
}

/* The engine no longer has c's container (removed outside nodefs, seen by
 * an event, an inspect or reconciliation): EXITED with the reason, and no
 * id, until destroyed. Returns whether c had an engine container. */
bool container_mark_gone(struct container *c, const char *op_id, const char *why)
{
	bool had;

	pthread_mutex_lock(&c->lock);
	had = c->id != NULL;
	free(c->id);
	c->id = NULL;
	c->pid = 0;
	if (!c->has_exit) {
		c->has_exit = true;
		c->exit_code = -1;
	}
	pthread_mutex_unlock(&c->lock);
	bnode_set_error(c->node, why);
	container_set_state(c, C_EXITED, op_id, "removed outside nodefs");
	return had;
}

void containers_limits(struct backend *b,
		       void (*fn)(void *ctx, const char *runtime, double cpus, uint64_t memory),
		       void *ctx)
{
	struct bnode **v;
	size_t n;

	if (!containers_dir(b) || bnode_list(containers_dir(b), &v, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct container *c = cof(v[i]);

		pthread_mutex_lock(&c->lock);
		bool running = c->state == C_RUNNING || c->state == C_PAUSED;
		double cpus = c->spec.cpus;
		uint64_t mem = c->spec.memory;
		pthread_mutex_unlock(&c->lock);
		if (running)
			fn(ctx, c->eng && c->eng->ops ? c->eng->ops->name : "?", cpus, mem);
	}
	bnode_list_free(v, n);
}

size_t containers_using_volume(struct backend *b, const char *vol, char *buf, size_t len)
{
	struct bnode **v;
	size_t n, users = 0, off = 0;

	buf[0] = '\0';
	if (!containers_dir(b) || bnode_list(containers_dir(b), &v, &n) < 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		struct container *c = cof(v[i]);

		/* volumes is the spec's: set at create, never changed */
		for (size_t k = 0; c->spec.mounts.volumes && c->spec.mounts.volumes[k]; k++) {
			if (strcmp(c->spec.mounts.volumes[k], vol) != 0)
				continue;
			if (off < len)
				off += (size_t)snprintf(buf + off, len - off, "%s%s", users ? ", " : "",
							c->name);
			users++;
			break;
		}
	}
	bnode_list_free(v, n);
	return users;
}

const char *container_exit_text(int code, char *buf, size_t len)
{
	if (code < 0)
		return "unknown";
	snprintf(buf, len, "%d", code);
	return buf;
}

/* The engine id, or 0 when the container has none yet. */
int container_current_id(struct container *c, char *buf, size_t len)
{
	int r = 0;

	pthread_mutex_lock(&c->lock);
	if (c->id && !c->removed) {
		snprintf(buf, len, "%s", c->id);
		r = 1;
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

struct container *container_find_by_id(struct backend *b, struct engine *e, const char *id,
				    struct bnode **ret_node)
{
	struct bnode **v;
	size_t n;
	struct container *found = NULL;

	if (bnode_list(containers_dir(b), &v, &n) < 0)
		return NULL;
	for (size_t i = 0; i < n && !found; i++) {
		struct container *c = cof(v[i]);
		pthread_mutex_lock(&c->lock);
		if (c->eng == e && c->id && strcmp(c->id, id) == 0) {
			found = c;
			*ret_node = bnode_ref(v[i]);
		}
		pthread_mutex_unlock(&c->lock);
	}
	bnode_list_free(v, n);
	return found;
}

/* A container of e named name whose create is under way (its engine id is
 * not known yet). */
bool container_creating_now(struct backend *b, struct engine *e, const char *name)
{
	struct bnode *k = name ? bnode_lookup(containers_dir(b), name) : NULL;
	bool yes = false;

	if (!k)
		return false;
	if (cof(k)->eng == e) {
		pthread_mutex_lock(&cof(k)->lock);
		yes = cstate_making(cof(k)->state) && !cof(k)->id;
		pthread_mutex_unlock(&cof(k)->lock);
	}
	bnode_unref(k);
	return yes;
}
