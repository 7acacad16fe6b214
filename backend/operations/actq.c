/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * actq: per-object action queues (operation.h): one worker at a time runs
 * an object's actions in order, each under its operation (ended here with
 * op_end), the store flushed before its writer is answered. An action not
 * started when nodefs stops is left PENDING for the next start.
 * Must not know: what an action does (its run), which kind owns the
 * queue, or FUSE (a writer is a breq).
 */
#include "backend-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nodefs-config.h"	/* NODEFS_TEST_HOOKS */
#include "operation.h"
#include "store.h"

void actq_init(struct actq *q)
{
	pthread_mutex_init(&q->lock, NULL);
	q->busy = false;
	q->cmds = 0;
	q->head = q->tail = NULL;
}

bool actq_cmd_busy(struct actq *q)
{
	bool b;

	pthread_mutex_lock(&q->lock);
	b = q->cmds > 0;
	pthread_mutex_unlock(&q->lock);
	return b;
}

bool actq_busy(struct actq *q)
{
	bool b;

	pthread_mutex_lock(&q->lock);
	b = q->busy;
	pthread_mutex_unlock(&q->lock);
	return b;
}

static void actq_run(void *arg);

static void action_finish(struct action *a, int r)
{
	struct nerr serr = { 0 };

	if (a->op)
		op_end(a->op, r, &a->err);
	/* one flush for what the command left queued (its stable state, its
	 * operation's end): the writer is answered only once it is durable */
	if (store_sync(a->b->store, &serr) < 0 && r >= 0) {
		r = -serr.code;
		a->err = serr;
	}
	if (a->done)
		a->done(a, r);
	if (a->rq) {
		if (r < 0)
			a->rq->err = a->err;
		breq_complete(a->rq, r);
		a->rq = NULL;
	}
	op_unref(a->op);
	a->op = NULL;
	/* a->free runs in actq_run, once the queue is no longer touched */
}

/* nodefs is stopping and a has not started: it is not run. Its operation
 * stays PENDING on disk, where the next start finds it and drives it to an
 * end (ops_drop_orphans), and its writer is told so. */
static void action_leave(struct action *a)
{
	if (a->op)
		nerr_set(&a->err, ESHUTDOWN, "nodefs stopped before operation %s started: "
			 "it stays PENDING and is resumed at the next start", a->op->id);
	else
		nerr_set(&a->err, ESHUTDOWN, "nodefs stopped before the action started");
	if (a->done)
		a->done(a, -ESHUTDOWN);
	if (a->rq) {
		a->rq->err = a->err;
		breq_complete(a->rq, -ESHUTDOWN);
		a->rq = NULL;
	}
	op_unref(a->op);
	a->op = NULL;
}

#if NODEFS_TEST_HOOKS
/* Test builds: NODEFS_TEST_SLOW_ACTION=MS makes every action take MS
 * milliseconds longer on its worker before it runs, as one blocked on a
 * slow plugin or engine would. */
static void slow_action_hook(void)
{
	const char *ms = getenv("NODEFS_TEST_SLOW_ACTION");

	if (ms && *ms)
		usleep((useconds_t)atoi(ms) * 1000);
}
#endif

static void actq_run(void *arg)
{
	struct actq *q = arg;

	for (;;) {
		struct action *a;
		int r = 0;
		bool last, leave;

		pthread_mutex_lock(&q->lock);
		a = q->head;
		if (!a) {
			q->busy = false;
			pthread_mutex_unlock(&q->lock);
			return;
		}
		q->head = a->next;
		if (!q->head)
			q->tail = NULL;
		pthread_mutex_unlock(&q->lock);
		/* a stop does not wait for a queue: what has not started is
		 * left to the next start (backend_stop) */
		leave = atomic_load(&a->b->state) == BACKEND_STOPPING;
		if (!leave) {
			nerr_clear(&a->err);
#if NODEFS_TEST_HOOKS
			slow_action_hook();
#endif
			if (!a->self_sync)
				r = store_sync(a->b->store, &a->err);
			if (r >= 0)
				r = a->run(a, &a->err);
			if (r < 0 && !a->err.msg[0])
				nerr_set(&a->err, -r, "%s", strerror(-r));
		}
		/* the queue is free before the writer is answered, so its next
		 * command (even O_NONBLOCK) is taken; the calls are done */
		pthread_mutex_lock(&q->lock);
		last = !q->head;
		if (last)
			q->busy = false;
		if (a->cmd)
			q->cmds--;
		pthread_mutex_unlock(&q->lock);
		if (leave)
			action_leave(a);
		else
			action_finish(a, r);
		/* a may hold the last reference to the object that owns q: after
		 * freeing it, q is touched only if a next action (holding its own
		 * reference) was queued */
		a->free(a);
		if (last)
			return;
	}
}

int actq_submit(struct actq *q, struct action *a)
{
	bool start;

	a->q = q;
	a->next = NULL;
	a->cmd = a->op != NULL;
	pthread_mutex_lock(&q->lock);
	if (a->rq && a->rq->nonblock && q->cmds > 0) {
		pthread_mutex_unlock(&q->lock);
		return -EBUSY;
	}
	if (a->cmd)
		q->cmds++;
	if (q->tail)
		q->tail->next = a;
	else
		q->head = a;
	q->tail = a;
	start = !q->busy;
	q->busy = true;
	pthread_mutex_unlock(&q->lock);

	if (a->rq && a->rq->nonblock) {
		/* checkpointed already (op_begin): answer with the id now */
		struct breq *rq = a->rq;
		int sr = store_sync(a->b->store, &rq->err);

		a->rq = NULL;
		if (a->op && sr >= 0)
			sbuf_printf(&rq->reply, "%s\n", a->op->id);
		breq_complete(rq, sr < 0 ? sr : 0);
	}
	if (start && work_submit(a->b->work, actq_run, q) < 0)
		actq_run(q);	/* no worker could start: run here rather than lose it */
	return -EINPROGRESS;
}
