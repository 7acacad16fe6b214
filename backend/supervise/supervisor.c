/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * supervisor: the supervisor thread and its loop, made at first use, and
 * the one-shot jobs other rooms hand it (supervisor_after); see
 * supervisor.h. The plugins' state machine lives in plugin-proc.c and the
 * restart policy both share in restart.c; this file only owns the thread,
 * the loop and the jobs still due.
 */
#include "supervisor.h"

#include <unistd.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "backend-internal.h"
#include "nerr.h"

#include "plugin-proc-internal.h"

struct sup_job {
	struct plugin_sup *s;
	struct sup_job *next, **pprev;	/* s->jobs while armed */
	struct loop_timer *timer;
	uint64_t ms;
	supervisor_fn fn;
	void *ctx;
};

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
	struct plugin_sup *s;
	sigset_t all, old;
	int r;

	pthread_mutex_lock(&b->mlock);
	s = b->sup;
	if (s) {
		pthread_mutex_unlock(&b->mlock);
		return s;
	}
	if (atomic_load(&b->state) == BACKEND_STOPPING) {
		pthread_mutex_unlock(&b->mlock);
		nerr_set(err, ESHUTDOWN, "the daemon is stopping");
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s || loop_new(&s->loop) < 0) {
		pthread_mutex_unlock(&b->mlock);
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
		pthread_mutex_unlock(&b->mlock);
		loop_free(s->loop);
		free(s);
		nerr_set(err, r, "cannot start the supervisor thread");
		return NULL;
	}
	b->sup = s;
	pthread_mutex_unlock(&b->mlock);
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
	/* under mlock: supervisor_stop takes b->sup away under it first */
	pthread_mutex_lock(&b->mlock);
	r = b->sup == s ? loop_submit(s->loop, job_arm, j) : -ESHUTDOWN;
	pthread_mutex_unlock(&b->mlock);
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
	struct plugin_sup *s;

	pthread_mutex_lock(&b->mlock);
	s = b->sup;
	b->sup = NULL;
	pthread_mutex_unlock(&b->mlock);
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
