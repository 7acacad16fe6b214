/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pool: blocks bumped out of 64 KiB chunks aligned to their size, so a
 * block finds its chunk, and the chunk its pool, from its address alone;
 * see pool.h. Knows nothing of what it holds.
 */
#include "pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Under AddressSanitizer blocks are its own (calloc and free), so a use
 * after free of a pooled object is still caught; the pool then only
 * counts its blocks. */
#if defined(__SANITIZE_ADDRESS__)
#define POOL_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_MALLOC 1
#endif
#endif

#define CHUNK ((size_t)64 << 10)
#define ALIGN _Alignof(max_align_t)

struct chunk {
	struct pool *p;
	size_t live;		/* blocks handed out and not freed, under p->lock */
	size_t used;		/* bytes from the chunk's start handed out */
};

struct pool {
	pthread_mutex_t lock;
	struct chunk *cur;	/* the chunk blocks come from; NULL before one */
	size_t nchunks;		/* (under AddressSanitizer: blocks) */
	bool closed;
};

#define HEAD ((sizeof(struct chunk) + ALIGN - 1) & ~(ALIGN - 1))

struct pool *pool_new(void)
{
	struct pool *p = calloc(1, sizeof(*p));

	if (p)
		pthread_mutex_init(&p->lock, NULL);
	return p;
}

/* Drop p's lock; free p if it is closed and holds no chunk (no block)
 * any more: the last of pool_close and the frees ends it. */
static void unlock_or_end(struct pool *p)
{
	bool gone = p->closed && !p->nchunks;

	pthread_mutex_unlock(&p->lock);
	if (gone) {
		pthread_mutex_destroy(&p->lock);
		free(p);
	}
}

#ifdef POOL_MALLOC
/* a block: its pool before it, aligned as malloc aligns */
#define BHEAD ((sizeof(struct pool *) + ALIGN - 1) & ~(ALIGN - 1))

void *pool_alloc(struct pool *p, size_t size)
{
	char *b;

	if (!size || size > POOL_BLOCK_MAX)
		return NULL;
	b = calloc(1, BHEAD + size);
	if (!b)
		return NULL;
	*(struct pool **)b = p;
	pthread_mutex_lock(&p->lock);
	p->nchunks++;	/* here: blocks */
	pthread_mutex_unlock(&p->lock);
	return b + BHEAD;
}

void pool_free(void *block)
{
	char *b = block ? (char *)block - BHEAD : NULL;
	struct pool *p;

	if (!b)
		return;
	p = *(struct pool **)b;
	free(b);
	pthread_mutex_lock(&p->lock);
	p->nchunks--;
	unlock_or_end(p);
}
#else
/* A chunk aligned to CHUNK: twice that mapped, the ends cut off. */
static struct chunk *chunk_new(struct pool *p)
{
	char *m = mmap(NULL, 2 * CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uintptr_t a;
	struct chunk *c;

	if (m == MAP_FAILED)
		return NULL;
	a = ((uintptr_t)m + CHUNK - 1) & ~(uintptr_t)(CHUNK - 1);
	if (a > (uintptr_t)m)
		munmap(m, a - (uintptr_t)m);
	munmap((char *)a + CHUNK, (uintptr_t)m + CHUNK - a);
	c = (struct chunk *)a;
	c->p = p;
	c->used = HEAD;
	p->nchunks++;
	return c;
}

static void chunk_drop(struct pool *p, struct chunk *c)
{
	munmap(c, CHUNK);
	p->nchunks--;
}

void *pool_alloc(struct pool *p, size_t size)
{
	size_t sz = (size + ALIGN - 1) & ~(ALIGN - 1);
	struct chunk *c;
	void *r;

	if (!size || size > POOL_BLOCK_MAX)
		return NULL;
	pthread_mutex_lock(&p->lock);
	c = p->cur;
	if (!c || c->used + sz > CHUNK) {
		struct chunk *n = chunk_new(p);

		if (!n) {
			pthread_mutex_unlock(&p->lock);
			return NULL;
		}
		/* the old chunk goes with its last block */
		if (c && !c->live)
			chunk_drop(p, c);
		p->cur = c = n;
	}
	r = (char *)c + c->used;
	c->used += sz;
	c->live++;
	pthread_mutex_unlock(&p->lock);
	memset(r, 0, size);	/* a chunk started again holds old blocks' bytes */
	return r;
}

void pool_free(void *block)
{
	struct chunk *c;
	struct pool *p;

	if (!block)
		return;
	c = (struct chunk *)((uintptr_t)block & ~(uintptr_t)(CHUNK - 1));
	p = c->p;
	pthread_mutex_lock(&p->lock);
	if (--c->live == 0) {
		if (c == p->cur && !p->closed) {
			/* empty: start it again (its pages stay: at most one
			 * chunk, reused at once) */
			c->used = HEAD;
		} else {
			if (c == p->cur)
				p->cur = NULL;
			chunk_drop(p, c);
		}
	}
	unlock_or_end(p);
}

#endif

void pool_close(struct pool *p)
{

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->closed = true;
#ifndef POOL_MALLOC
	if (p->cur && !p->cur->live)
		chunk_drop(p, p->cur);
	p->cur = NULL;
#endif
	unlock_or_end(p);
}
