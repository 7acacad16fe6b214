/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * supervisor: the supervisor thread and its loop, made at first use, and
 * the one-shot jobs other rooms hand it (supervisor_after); see
 * supervisor.h. The plugins' state machine lives in plugin-proc.c and the
 * restart policy both share in restart.c; this file only owns the thread,
 * the loop and the jobs still due, and the hub's kind of it (supervise_kind:
 * no directory; its state holds the supervisor, its metrics the plugins'
 * tallies).
 */
#include "supervisor.h"

#include <unistd.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "backend-internal.h"
#include "events.h"
#include "kind.h"
#include "nerr.h"
#include "sbuf.h"

#include "plugin-proc.h"
#include "plugin-proc-internal.h"

struct sup_job {
	struct plugin_sup *s;
	struct sup_job *next, **pprev;	/* s->jobs while armed */
	struct loop_timer *timer;
	uint64_t ms;
	supervisor_fn fn;
	void *ctx;
};

/* The supervisor of b, kept in the kind's slot (kind_state). */
struct supervise_state {
	pthread_mutex_t lock;	/* guards sup */
	bool inited;
	struct plugin_sup *sup;	/* made at first use */
};

static struct supervise_state *sv_of(struct backend *b)
{
	return kind_state(b, &supervise_kind);
}

struct plugin_sup *supervisor_peek(struct backend *b)
{
	struct supervise_state *sv = sv_of(b);
	struct plugin_sup *s;

	pthread_mutex_lock(&sv->lock);
	s = sv->sup;
	pthread_mutex_unlock(&sv->lock);
	return s;
}

static void *sup_main(void *arg)
{
	struct plugin_sup *s = arg;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_setname_np(pthread_self(), "nodefs-superv");
	loop_run(s->loop);
	return NULL;
}

struct plugin_sup *supervisor_get(struct backend *b, struct nerr *err)
{
	struct supervise_state *sv = sv_of(b);
	struct plugin_sup *s;
	sigset_t all, old;
	int r;

	pthread_mutex_lock(&sv->lock);
	s = sv->sup;
	if (s) {
		pthread_mutex_unlock(&sv->lock);
		return s;
	}
	if (atomic_load(&b->state) == BACKEND_STOPPING) {
		pthread_mutex_unlock(&sv->lock);
		nerr_set(err, ESHUTDOWN, "the daemon is stopping");
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s || loop_new(&s->loop) < 0) {
		pthread_mutex_unlock(&sv->lock);
		free(s);
		nerr_set(err, ENOMEM, "cannot make the supervisor's loop");
		return NULL;
	}
	s->b = b;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	r = pthread_create(&s->thread, NULL, sup_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		pthread_mutex_unlock(&sv->lock);
		loop_free(s->loop);
		free(s);
		nerr_set(err, r, "cannot start the supervisor thread");
		return NULL;
	}
	sv->sup = s;
	pthread_mutex_unlock(&sv->lock);
	return s;
}

static void job_unlink(struct sup_job *j)
{
	if (j->pprev) {
		*j->pprev = j->next;
		if (j->next)
			j->next->pprev = j->pprev;
		j->pprev = NULL;
	}
}

static void job_due(struct loop *l, struct loop_timer *t, void *ud)
{
	struct sup_job *j = ud;

	job_unlink(j);
	j->fn(j->s->b, j->ctx);
	free(j->ctx);
	free(j);
}

/* On the loop thread: arm it (the jobs list is the loop thread's). */
static void job_arm(struct loop *l, void *ud)
{
	struct sup_job *j = ud;
	struct plugin_sup *s = j->s;

	if (s->closed || !(j->timer = loop_add_timer(l, j->ms, job_due, j))) {
		free(j->ctx);
		free(j);
		return;
	}
	j->next = s->jobs;
	if (j->next)
		j->next->pprev = &j->next;
	j->pprev = &s->jobs;
	s->jobs = j;
}

int supervisor_after(struct backend *b, uint64_t ms, supervisor_fn fn, void *ctx,
		     struct nerr *err)
{
	struct plugin_sup *s = supervisor_get(b, err);
	struct sup_job *j;
	int r;

	if (!s) {
		free(ctx);
		return -err->code;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		free(ctx);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	*j = (struct sup_job){ .s = s, .ms = ms, .fn = fn, .ctx = ctx };
	/* under the lock: supervisor_stop takes sup away under it first */
	pthread_mutex_lock(&sv_of(b)->lock);
	r = sv_of(b)->sup == s ? loop_submit(s->loop, job_arm, j) : -ESHUTDOWN;
	pthread_mutex_unlock(&sv_of(b)->lock);
	if (r < 0) {
		free(ctx);
		free(j);
		return nerr_set(err, -r, r == -ESHUTDOWN ? "the daemon is stopping" : "out of memory");
	}
	return 0;
}

void supervisor_stop(struct backend *b)
{
	supervisor_stop_with(b, NULL);
}

void supervisor_stop_with(struct backend *b, void (*release)(struct plugin_sup *s))
{
	struct supervise_state *sv = sv_of(b);
	struct plugin_sup *s;

	if (!sv->inited)
		return;
	pthread_mutex_lock(&sv->lock);
	s = sv->sup;
	sv->sup = NULL;
	pthread_mutex_unlock(&sv->lock);
	if (!s)
		return;
	loop_stop(s->loop);
	pthread_join(s->thread, NULL);
	s->closed = true;	/* an arm still queued frees its job (loop_free runs it) */
	if (release)
		release(s);	/* the plugins' leftovers, their timers on this loop */
	while (s->jobs) {
		struct sup_job *j = s->jobs;

		job_unlink(j);
		loop_del_timer(s->loop, j->timer);
		free(j->ctx);
		free(j);
	}
	loop_free(s->loop);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}

/* ---- the hub's kind ---- */

/* The plugins nodefs starts: tallied as they end and start again (a
 * series is made, at 0, when a plugin is first started). */
static int supervise_render_metrics(struct backend *b, struct sbuf *out)
{
	static const struct {
		const char *name, *help;
	} fam[] = {
		{ "nodefs_csi_plugin_terminations_total",
		  "Exits of the plugin processes nodefs started (crashes, kills, stops), by plugin." },
		{ "nodefs_csi_plugin_restarts_total",
		  "Starts of a plugin process after the first (after an exit, a hang or a failed "
		  "exec), by plugin." },
	};
	int r = 0;

	for (size_t i = 0; r >= 0 && i < sizeof(fam) / sizeof(fam[0]); i++) {
		r = sbuf_printf(out, "# HELP %s %s\n# TYPE %s counter\n", fam[i].name, fam[i].help,
				fam[i].name);
		if (r >= 0)
			r = events_render_tallies(b->events, fam[i].name, out);
	}
	return r;
}

static int supervise_init(struct backend *b, struct nerr *err)
{
	struct supervise_state *sv = sv_of(b);

	(void)err;
	pthread_mutex_init(&sv->lock, NULL);
	sv->inited = true;
	return 0;
}

static void supervise_free(struct backend *b)
{
	struct supervise_state *sv = sv_of(b);

	if (sv->inited)
		pthread_mutex_destroy(&sv->lock);
}

/* No directory of its own (the plugins' show each process): the hub keeps
 * its state and renders its metrics, after every other kind's. Its stop,
 * the last kind's, ends the thread when the plugins' stop did not (no
 * plugins/), so the containers' jobs end with the daemon. */
const struct kind_ops supervise_kind = {
	.name = "supervise",
	.state_size = sizeof(struct supervise_state),
	.init = supervise_init,
	.render_metrics = supervise_render_metrics,
	.stop = supervisor_stop,
	.free = supervise_free,
};
