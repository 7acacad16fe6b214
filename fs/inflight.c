/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * inflight: requests in flight that hold a kernel lock; see inflight.h.
 * A hash of entries by the request's unique number, chained, entries
 * recycled through a free list (no allocation once warm). Requests that
 * hold no lock (getattr, open, release, forget...) are not kept, so most
 * reads of the device cost a switch on the opcode only.
 *
 * Must not know: the tree, the backend.
 */
#include "inflight.h"

#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "loop.h"

#define BUCKETS 256

struct entry {
	uint64_t unique, nodeid;
	unsigned what;
	struct entry *next;
};

struct inflight {
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* an entry went, or closed */
	struct entry *bucket[BUCKETS];
	struct entry *free;
	size_t count;
	unsigned waiters;
	bool closed;
};

struct inflight *inflight_new(void)
{
	struct inflight *t = calloc(1, sizeof(*t));
	pthread_condattr_t ca;

	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cond, &ca);
	pthread_condattr_destroy(&ca);
	return t;
}

static void entries_free(struct entry *e)
{
	while (e) {
		struct entry *next = e->next;

		free(e);
		e = next;
	}
}

void inflight_free(struct inflight *t)
{
	if (!t)
		return;
	for (size_t k = 0; k < BUCKETS; k++)
		entries_free(t->bucket[k]);
	entries_free(t->free);
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/*
 * The kernel's locks a request holds until its answer (Linux fs/namei.c,
 * fs/readdir.c, fs/fuse/): a lookup, readdir or directory operation holds
 * its directory's i_rwsem (shared or exclusive); a write, setattr
 * (truncate, chmod), fallocate or xattr change its file's; a READ of a
 * keep_cache file holds the locks of the pages it fills.
 */
static unsigned what_of(uint32_t opcode)
{
	switch (opcode) {
	case FUSE_LOOKUP:
	case FUSE_READDIR:
	case FUSE_READDIRPLUS:
	case FUSE_MKDIR:
	case FUSE_RMDIR:
	case FUSE_MKNOD:
	case FUSE_CREATE:
	case FUSE_SYMLINK:
	case FUSE_LINK:
	case FUSE_UNLINK:
	case FUSE_RENAME:
	case FUSE_RENAME2:
	case FUSE_TMPFILE:
	case FUSE_SETATTR:
	case FUSE_WRITE:
	case FUSE_FALLOCATE:
	case FUSE_COPY_FILE_RANGE:
	case FUSE_SETXATTR:
	case FUSE_REMOVEXATTR:
		return INFL_RWSEM;
	case FUSE_READ:
		return INFL_PAGES;
	default:
		return 0;
	}
}

void inflight_received(struct inflight *t, const void *mem, size_t len)
{
	const struct fuse_in_header *in = mem;
	struct entry *e;
	unsigned what;

	if (!t || len < sizeof(*in) || !(what = what_of(in->opcode)))
		return;
	pthread_mutex_lock(&t->lock);
	e = t->free;
	if (e)
		t->free = e->next;
	else
		e = malloc(sizeof(*e));
	if (e) {
		size_t k = in->unique % BUCKETS;

		e->unique = in->unique;
		e->nodeid = in->nodeid;
		e->what = what;
		e->next = t->bucket[k];
		t->bucket[k] = e;
		t->count++;
	}
	/* out of memory: not kept; a notification may then wait in the
	 * kernel for it, as before, until it is answered */
	pthread_mutex_unlock(&t->lock);
}

void inflight_answered(struct inflight *t, uint64_t unique)
{
	struct entry **pp;

	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	for (pp = &t->bucket[unique % BUCKETS]; *pp; pp = &(*pp)->next) {
		struct entry *e = *pp;

		if (e->unique != unique)
			continue;
		*pp = e->next;
		e->next = t->free;
		t->free = e;
		t->count--;
		if (t->waiters)
			pthread_cond_broadcast(&t->cond);
		break;
	}
	pthread_mutex_unlock(&t->lock);
}

void inflight_close(struct inflight *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	t->closed = true;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

/* t->lock held */
static bool held(struct inflight *t, const uint64_t *inos, size_t n, unsigned what)
{
	if (!t->count)
		return false;
	for (size_t k = 0; k < BUCKETS; k++)
		for (struct entry *e = t->bucket[k]; e; e = e->next) {
			if (!(e->what & what))
				continue;
			for (size_t j = 0; j < n; j++)
				if (inos[j] && inos[j] == e->nodeid)
					return true;
		}
	return false;
}

bool inflight_wait_clear(struct inflight *t, const uint64_t *inos, size_t n, unsigned what,
			 int timeout_ms)
{
	struct timespec until;
	bool clear;

	if (!t)
		return true;
	if (timeout_ms >= 0)
		until = ts_after_ms(CLOCK_MONOTONIC, (uint64_t)timeout_ms);
	pthread_mutex_lock(&t->lock);
	t->waiters++;
	while (!(clear = !held(t, inos, n, what)) && !t->closed) {
		if (timeout_ms < 0)
			pthread_cond_wait(&t->cond, &t->lock);
		else if (pthread_cond_timedwait(&t->cond, &t->lock, &until) == ETIMEDOUT)
			break;
	}
	if (!clear)
		clear = !held(t, inos, n, what);
	t->waiters--;
	if (t->closed)
		clear = false;
	pthread_mutex_unlock(&t->lock);
	return clear;
}

size_t inflight_count(struct inflight *t)
{
	size_t n;

	if (!t)
		return 0;
	pthread_mutex_lock(&t->lock);
	n = t->count;
	pthread_mutex_unlock(&t->lock);
	return n;
}
