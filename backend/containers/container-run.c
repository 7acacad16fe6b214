/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container-run: the container state machine's steps. A command becomes an
 * action (struct cact) on the container's queue; run on the worker pool,
 * each step calls the engine, follows with a look at what the engine says
 * and checkpoints the outcome before the command is acknowledged.
 *
 * It must not know how commands are written (container-ctl.c parses them),
 * what the files show, or recovery: it is handed a kind and its arguments.
 */
#include "container-internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nodefs-config.h"


/* The id of the operation whose command x runs (NULL: a sync's look). */
static const char *opid(const struct cact *x)
{
	return x->a.op ? x->a.op->id : NULL;
}

void cact_free(struct action *a)
{
	struct cact *x = (struct cact *)a;

	strv_free(x->argv);
	bnode_unref(x->node);
	free(x);
}

static int do_create(struct cact *x, struct nerr *err)
{
	struct container *c = x->c;
	struct rt_spec spec = {
		.name = c->name, .engine_name = c->engine_name[0] ? c->engine_name : NULL,
		.instance = c->b->instance, .image = c->spec.image, .argv = c->spec.argv,
		.env = c->spec.env.v, .nenv = c->spec.env.n, .cpus = c->spec.cpus,
		.memory = c->spec.memory, .pids = c->spec.pids, .mounts = c->spec.mounts.v,
		.nmounts = c->spec.mounts.n, .template_name = c->spec.template_name,
		.distro = c->spec.distro, .release = c->spec.release, .arch = c->spec.arch,
		.image_variant = c->spec.image_variant, .image_server = c->spec.image_server,
		.template_args = c->spec.template_args, .flush_cache = c->spec.flush_cache,
		.force_cache = c->spec.force_cache, .disable_gpg = c->spec.disable_gpg,
		.user = c->spec.user, .workdir = c->spec.workdir, .entrypoint = c->spec.entrypoint,
		.hostname = c->spec.hostname, .labels = c->spec.labels.v,
		.nlabels = c->spec.labels.n, .force_pull = c->spec.force_pull,
		.network = c->spec.network, .ip = c->spec.ip, .gateway = c->spec.gateway,
		.ports = c->spec.ports.v, .nports = c->spec.ports.n,
	};
	struct rt_health eh = { .test = c->spec.health.argv, .interval_ms = c->spec.health.interval_ms,
				.timeout_ms = c->spec.health.timeout_ms,
				.start_period_ms = c->spec.health.start_period_ms,
				.retries = c->spec.health.retries };
	_cleanup_engine_ struct engine_ref *h = NULL;
	_cleanup_free_ struct rt_mount *mounts = NULL;
	long uid = -1, gid = -1;
	char *id = NULL;
	enum cstate was;
	int r;

	/* a Docker cmd check is the engine's own Healthcheck; every other
	 * check nodefs makes (container-health.c) */
	if (c->spec.health.kind == SVC_HEALTH_CMD && strcmp(c->eng->ops->name, "docker") == 0)
		spec.health = &eh;
	r = engine_take(c->eng, &h, err);
	if (r < 0)
		goto fail;
	/* the sandbox before the create: the engine mounts it */
	r = container_sandbox_make(c, err);
	if (r < 0)
		goto fail;
	r = container_sandbox_mounts(c, &mounts, &spec.nmounts);
	if (r < 0) {
		nerr_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	spec.mounts = mounts;
	spec.ret_uid = &uid;
	spec.ret_gid = &gid;
	r = c->eng->ops->create(h->h, &spec, &c->prog, &id, err);
	if (r < 0)
		goto fail;
	container_sandbox_own(c, uid, gid);
	pthread_mutex_lock(&c->lock);
	c->id = id;
	c->progress[0] = '\0';
	was = c->state;
	c->state = C_CREATED;
	pthread_mutex_unlock(&c->lock);
	r = container_checkpoint(c, err);
	if (r < 0) {
		/* unacknowledged: take back what the engine made */
		struct nerr e2 = { 0 };
		c->eng->ops->destroy(h->h, id, &e2);
		goto fail;
	}
	bnode_changed(c->node);	/* before the event: its reader sees the new files */
	op_events_emit(c->b, "container", c->name, cstate_to_string(was), "CREATED", opid(x), NULL);
	return 0;
fail:
	container_sandbox_drop(c, false);	/* a failed create leaves nothing */
	if (r == -ECANCELED)
		nerr_set(err, ECANCELED, "create of %s cancelled by destroy", c->name);
	/* a destroy is queued behind a cancelled create: it takes the
	 * container away, PULLING to DESTROYING to DESTROYED, each once */
	if (!c->prog.cancel)
		container_forget(c, opid(x));
	return r;
}

/* The launch's fetch stage (container-fetch.c), FETCHING while it runs:
 * back to CREATED after (or the state it was in), the error with it. */
static int fetch_stage(struct container *c, const char *op_id, struct nerr *err)
{
	enum cstate was;
	int r;

	if (!container_fetch_pending(c))
		return 0;
	was = container_state_of(c);
	container_set_state(c, C_FETCHING, op_id, NULL);
	r = container_fetch_run(c, err);
	container_set_state(c, was == C_FETCHING ? C_CREATED : was, op_id, r < 0 ? err->msg : NULL);
	return r;
}

static int do_start(struct cact *x, struct nerr *err)
{
	struct container *c = x->c;
	_cleanup_engine_ struct engine_ref *h = NULL;
	enum cstate old;
	char id[256];
	int r;

	if (!container_current_id(c, id, sizeof(id)))
		return nerr_set(err, ENOENT, "container %s has no engine container", c->name);
	r = engine_take(c->eng, &h, err);
	if (r < 0)
		return r;
	char note[80] = "";
	bool void_start = false;

	pthread_mutex_lock(&c->lock);
	old = c->state;
	if (x->by_policy) {
		/* the user stopped it, started it, or destroys it meanwhile */
		void_start = c->restart_gen != x->gen || !c->rs.due_ms || old != C_EXITED;
		if (!void_start) {
			char pol[32];

			restart_policy_format(&c->spec.restart, pol, sizeof(pol));
			snprintf(note, sizeof(note), "restart %u (restart=%s)", c->rs.count, pol);
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (void_start)
		return 0;
	if (old == C_RUNNING || old == C_PAUSED)
		return nerr_set(err, EBUSY, "container %s is already %s", c->name,
				cstate_to_string(old));
	if (!x->by_policy)
		container_policy_user_start(c);
	/* nothing starts before its fetches are all done */
	r = fetch_stage(c, opid(x), err);
	if (r < 0)
		return r;
	container_set_state(c, C_STARTING, opid(x), note[0] ? note : NULL);
	pthread_mutex_lock(&c->lock);
	c->rs.due_ms = 0;	/* made: wait follows the new run */
	c->has_exit = false;
	c->oom_killed = false;
	c->finished_at = 0;
	pthread_mutex_unlock(&c->lock);
	r = c->eng->ops->start(h->h, id, err);
	if (r < 0) {
		container_set_state(c, old, opid(x), err->msg);
		if (x->by_policy)
			container_policy_start_failed(c, err->msg);
		return r;
	}

	r = container_refresh(c, true, opid(x), err);
	if (r < 0)
		return r;
	return container_checkpoint(c, err);
}

static int run_action_masked(struct action *a, struct nerr *err);

/*
 * Processes an engine call spawns here inherit this thread's signal mask:
 * liblxc gives a container's init (and attach_run_wait an exec'd command)
 * the mask of the thread that called start(), and a worker started from a
 * FUSE thread has SIGHUP, SIGINT, SIGQUIT and SIGTERM blocked (libfuse
 * blocks them in its workers). A command whose TERM stays blocked can never
 * stop gracefully and never sees `kill HUP`. So actions run with nothing
 * blocked. The kernel hands a process-directed signal to the main thread
 * first when it does not block it (complete_signal), but not always: one
 * may land here. The stop signals' handler wakes the main thread wherever
 * it runs (fs_serve_signals, fs/fs-loop.c).
 */
int container_run_action(struct action *a, struct nerr *err)
{
	struct cact *x = (struct cact *)a;
	struct container *c = x->c;
	sigset_t none, old;
	bool pending;
	int r;

	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, &old);
	/* what runs, for the engine's events it causes (container-sync.c) */
	pthread_mutex_lock(&c->lock);
	c->running_kind = x->kind;
	snprintf(c->running_op, sizeof(c->running_op), "%s", opid(x) ? opid(x) : "");
	pthread_mutex_unlock(&c->lock);
	r = run_action_masked(a, err);
	pthread_mutex_lock(&c->lock);
	c->running_op[0] = '\0';
	pthread_mutex_unlock(&c->lock);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (x->kind != CA_SYNC)
		return r;
	/* the sync an exit event queued could not ask the engine (down, or
	 * the container removed meanwhile): the event's word is the last */
	pthread_mutex_lock(&c->lock);
	pending = c->exit_pending;
	c->exit_pending = false;
	pthread_mutex_unlock(&c->lock);
	if (pending && container_state_of(c) != C_EXITED && container_state_of(c) != C_DESTROYING) {
		char msg[160], note[96] = "";
		int64_t due;

		pthread_mutex_lock(&c->lock);
		c->has_exit = true;
		c->pid = 0;
		char t[16];

		due = container_policy_exit_locked(c, note, sizeof(note));
		snprintf(msg, sizeof(msg), "exit_code=%s%s%s", container_exit_text(c->exit_code, t, sizeof(t)),
			 note[0] ? "; " : "", note);
		pthread_mutex_unlock(&c->lock);
		container_set_state(c, C_EXITED, NULL, msg);
		container_checkpoint(c, &(struct nerr){ 0 });
		if (due >= 0)
			container_policy_arm(c, (uint64_t)due);
	}
	return r;
}

#if NODEFS_TEST_HOOKS
/* Test builds: NODEFS_TEST_SLOW_DESTROY=MS waits MS milliseconds between
 * the engine's answer to a destroy and the record's delete, the window in
 * which the engine's events of that destroy come in. */
static void slow_destroy_hook(void)
{
	const char *ms = getenv("NODEFS_TEST_SLOW_DESTROY");

	if (ms && *ms)
		usleep((useconds_t)atoi(ms) * 1000);
}
#endif

static int run_action_masked(struct action *a, struct nerr *err)
{
	struct cact *x = (struct cact *)a;
	struct container *c = x->c;
	_cleanup_engine_ struct engine_ref *h = NULL;
	char id[256];
	int r = 0;

	if (x->kind == CA_CREATE) {
		r = do_create(x, err);
		/* the launch's fetch stage, then the start (do_start runs what
		 * a failed or cut stage left) */
		if (r >= 0)
			r = fetch_stage(c, opid(x), err);
		if (r >= 0 && x->then_start)
			r = do_start(x, err);
		return r;
	}
	if (x->kind == CA_START)
		return do_start(x, err);
	if (x->kind == CA_DESTROY) {
		bool gone;

		pthread_mutex_lock(&c->lock);
		gone = c->removed;
		pthread_mutex_unlock(&c->lock);
		if (gone)
			return 0;	/* a create that failed took it away first */
		container_set_state(c, C_DESTROYING, opid(x), NULL);
		if (container_current_id(c, id, sizeof(id))) {
			r = engine_take(c->eng, &h, err);
			if (r >= 0)
				r = c->eng->ops->destroy(h->h, id, err);
			if (r < 0) {
				container_refresh(c, true, opid(x), &(struct nerr){ 0 });
				return r;
			}
		}
#if NODEFS_TEST_HOOKS
		slow_destroy_hook();
#endif
		container_sandbox_drop(c, true);
		container_forget(c, opid(x));
		return 0;
	}
	if (!container_current_id(c, id, sizeof(id)))
		return nerr_set(err, ENOENT, "container %s has no engine container", c->name);
	r = engine_take(c->eng, &h, err);
	if (r < 0)
		return r;
	switch (x->kind) {
	case CA_STOP: {
		enum cstate old;
		/* the user's stop ends the restart policy until the next start;
		 * one between two restarts only cancels the start due */
		if (x->a.op && container_policy_user_stop(c))
			return container_checkpoint(c, err);
		pthread_mutex_lock(&c->lock);
		old = c->state;
		pthread_mutex_unlock(&c->lock);
		if (old != C_RUNNING && old != C_PAUSED)
			return nerr_set(err, EINVAL, "container %s is not running (%s)", c->name,
					cstate_to_string(old));
		container_set_state(c, C_STOPPING, opid(x), NULL);
		r = c->eng->ops->stop(h->h, id, x->timeout_s, err);
		break;
	}
	case CA_KILL:
		if (x->a.op && container_policy_user_stop(c))
			return container_checkpoint(c, err);
		if (!x->a.op) {		/* health_restart: an unhealthy run ends as a failure */
			pthread_mutex_lock(&c->lock);
			c->unhealthy_kill = true;
			pthread_mutex_unlock(&c->lock);
		}
		r = c->eng->ops->kill(h->h, id, x->sig, err);
		break;
	case CA_PAUSE:
		r = c->eng->ops->pause(h->h, id, err);
		break;
	case CA_RESUME:
		r = c->eng->ops->resume(h->h, id, err);
		break;
	case CA_UPDATE:
		r = c->eng->ops->update(h->h, id, &x->lim, err);
		if (r >= 0) {
			pthread_mutex_lock(&c->lock);
			if (x->lim.set & RT_LIMIT_CPUS)
				c->spec.cpus = x->lim.cpus;
			if (x->lim.set & RT_LIMIT_MEMORY)
				c->spec.memory = x->lim.memory;
			if (x->lim.set & RT_LIMIT_PIDS)
				c->spec.pids = x->lim.pids;
			pthread_mutex_unlock(&c->lock);
			/* limits and stats show them: a shared stats render
			 * made before is not served again (fs's BATTR_AGED) */
			bnode_changed(c->node);
		}
		break;
	case CA_EXEC: {
		struct sbuf out = SBUF_INIT(EXEC_OUT_CAP);
		int code = -1;
		r = c->eng->ops->exec(h->h, id, x->argv, &out, &code, err);
		if (r >= 0) {
			pthread_mutex_lock(&c->lock);
			sbuf_free(&c->exec_out);
			c->exec_out = out;
			c->has_exec = true;
			c->exec_exit = code;
			pthread_mutex_unlock(&c->lock);
			if (a->rq) {
				sbuf_add(&a->rq->reply, out.buf ? out.buf : "", out.len < 3000 ? out.len : 3000);
				sbuf_printf(&a->rq->reply, "exit_code=%d\n", code);
			}
			bnode_changed(c->node);
		} else {
			sbuf_free(&out);
		}
		return r;
	}
	case CA_SYNC:
		break;
	}
	/* what the engine says now, whatever the call did */
	{
		struct nerr e2 = { 0 };
		int rr = container_refresh(c, x->kind != CA_SYNC, opid(x), &e2);
		if (rr == -ENOENT && x->kind == CA_SYNC) {
			/* an event's or reconciliation's look: the engine
			 * container is gone, which is news to take in */
			container_mark_gone(c, NULL, "the engine container was removed outside nodefs");
			return container_checkpoint(c, err);
		}
		if (r >= 0 && rr == -ENOENT) {
			*err = e2;
			return rr;
		}
	}
	if (r >= 0)
		r = container_checkpoint(c, err);
	/* a create a crash cut in its fetch stage: the stage goes on */
	if (r >= 0 && x->kind == CA_SYNC && x->then_fetch)
		r = fetch_stage(c, opid(x), err);
	return r;
}

int container_submit(struct container *c, int kind, const char *cmdline, struct breq *rq,
		  struct cact *tmpl)
{
	struct cact *x = calloc(1, sizeof(*x));
	static const char *const types[] = {
		"container.create", "container.start", "container.stop", "container.kill",
		"container.pause", "container.resume", "container.update", "container.exec",
		"container.destroy", "container.sync",
	};
	char object[80];
	int r;

	if (!x)
		return nerr_set(rq ? &rq->err : NULL, ENOMEM, "out of memory");
	if (tmpl)
		*x = *tmpl;
	if (rq && rq->nonblock && actq_cmd_busy(&c->q)) {
		strv_free(x->argv);
		free(x);
		return nerr_set(&rq->err, EBUSY, "container %s has a command in flight", c->name);
	}
	x->c = c;
	x->node = bnode_ref(c->node);
	x->kind = kind;
	x->a.b = c->b;
	x->a.rq = rq;
	x->a.run = container_run_action;
	x->a.free = cact_free;
	if (rq) {
		snprintf(object, sizeof(object), "containers/%s", c->name);
		char intent[256] = "";

		/* what a create would make, on record before it is sent: a
		 * crash that loses the answer leaves it for uncertain.c */
		if (kind == CA_CREATE)
			snprintf(intent, sizeof(intent), "runtime=%s name=%s engine_name=%s instance=%s",
				 c->eng->ops->name, c->name, c->engine_name[0] ? c->engine_name : "-",
				 c->b->instance);
		r = op_begin_intent(c->b, types[kind], object, cmdline, rq, intent[0] ? intent : NULL,
				    &x->a.op, &rq->err);
		if (r < 0) {
			cact_free(&x->a);
			return r;
		}
	}
	/* a new container's first word, with the operation that makes it, before
	 * the create can run and move it (a fresh queue never answers EBUSY) */
	if (kind == CA_CREATE)
		op_events_emit(c->b, "container", c->name, NULL, cstate_to_string(container_state_of(c)),
			    opid(x), NULL);
	r = actq_submit(&c->q, &x->a);
	if (r == -EBUSY) {
		op_drop(x->a.op, "the container had a command in flight");
		op_unref(x->a.op);
		cact_free(&x->a);
		return nerr_set(&rq->err, EBUSY, "container %s has a command in flight", c->name);
	}
	return r;
}
