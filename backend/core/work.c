/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * work: a lazily grown worker pool with a FIFO queue; see work.h.
 * Must not know: what the jobs are (any room submits its own).
 */
#include "work.h"
#include "loop.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

struct work_item {
	work_fn fn;
	void *arg;
	struct work_item *next;
};

struct work_pool {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_cond_t gone;	/* a thread left (stopping) */
	struct work_item *head, *tail;
	pthread_t *threads;
	size_t nthreads, max, idle, left;
	uint64_t taken;		/* items a worker took: the pool's heartbeat */
	bool stopping;
	bool joined;		/* work_pool_join ran: the owner's thread only */
};

static void *worker_main(void *arg)
{
	struct work_pool *p = arg;

	pthread_setname_np(pthread_self(), "nodefs-work");
	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct work_item *w;

		while (!p->head && !p->stopping) {
			p->idle++;
			pthread_cond_wait(&p->cond, &p->lock);
			p->idle--;
		}
		if (!p->head)
			break;
		w = p->head;
		p->taken++;
		p->head = w->next;
		if (!p->head)
			p->tail = NULL;
		pthread_mutex_unlock(&p->lock);
		w->fn(w->arg);
		free(w);
		pthread_mutex_lock(&p->lock);
	}
	p->left++;
	pthread_cond_broadcast(&p->gone);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

struct work_pool *work_pool_new(size_t max_threads)
{
	struct work_pool *p = calloc(1, sizeof(*p));
	pthread_condattr_t ca;

	if (!p)
		return NULL;
	p->threads = calloc(max_threads, sizeof(*p->threads));
	if (!p->threads) {
		free(p);
		return NULL;
	}
	p->max = max_threads;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	pthread_cond_init(&p->gone, &ca);
	pthread_condattr_destroy(&ca);
	return p;
}

int work_submit(struct work_pool *p, work_fn fn, void *arg)
{
	struct work_item *w = malloc(sizeof(*w));
	int r = 0;

	if (!w)
		return -ENOMEM;
	w->fn = fn;
	w->arg = arg;
	w->next = NULL;
	pthread_mutex_lock(&p->lock);
	if (p->stopping) {
		pthread_mutex_unlock(&p->lock);
		free(w);
		return -ESHUTDOWN;
	}
	if (p->tail)
		p->tail->next = w;
	else
		p->head = w;
	p->tail = w;
	/* grow while every thread is busy: blocking calls must not queue
	 * behind each other when there is room for another thread */
	if (p->idle == 0 && p->nthreads < p->max) {
		if (pthread_create(&p->threads[p->nthreads], NULL, worker_main, p) == 0)
			p->nthreads++;
		else if (p->nthreads == 0)
			r = -EAGAIN;
	}
	if (r < 0) {
		p->head = p->tail = NULL;
		free(w);
	}
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	return r;
}

size_t work_pool_stop(struct work_pool *p, unsigned timeout_ms)
{
	struct timespec t;
	size_t busy;

	t = ts_after_ms(CLOCK_MONOTONIC, timeout_ms);
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	pthread_cond_broadcast(&p->cond);
	/* idle threads leave at once; busy ones after the queue is empty */
	while (p->left < p->nthreads && pthread_cond_timedwait(&p->gone, &p->lock, &t) == 0)
		;
	busy = p->nthreads - p->left;
	pthread_mutex_unlock(&p->lock);
	return busy;
}

bool work_pool_moving(struct work_pool *p, uint64_t *seen)
{
	bool moving;

	pthread_mutex_lock(&p->lock);
	moving = !p->head || p->taken != *seen;
	*seen = p->taken;
	pthread_mutex_unlock(&p->lock);
	return moving;
}

void work_pool_join(struct work_pool *p)
{
	if (!p || p->joined)
		return;
	work_pool_stop(p, 0);
	/* no thread is made once stopping is set: nthreads holds still */
	for (size_t i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	p->joined = true;
}

void work_pool_free(struct work_pool *p)
{
	if (!p)
		return;
	work_pool_join(p);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	pthread_cond_destroy(&p->gone);
	free(p->threads);
	free(p);
}
