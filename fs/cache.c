/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cache: the queue of changes between bnode_changed() and the kernel's
 * caches, and their flush by the notifier thread; see cache.h. A node is
 * queued once however often it changes before a flush (its queued flag);
 * the queue is linked through the nodes themselves, so queueing never
 * allocates and never fails. Knows the inode table and FUSE's notify
 * calls; nothing of the backend beyond tree.h.
 */
#define FUSE_USE_VERSION 312

#include "cache.h"

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "inode.h"
#include "sbuf.h"
#include "tree.h"

#define TOLD_LOCKS 64

struct told {
	uint64_t version;	/* of the node, loaded before the render */
	size_t len;
	char buf[];
};

struct fs_cache {
	pthread_mutex_t told_lock[TOLD_LOCKS];	/* by inode number */
	pthread_mutex_t lock;
	struct bnode *head, **tail;	/* queued nodes, referenced */
	uint64_t seq;			/* the last change number queued */
};

struct fs_cache *cache_new(void)
{
	struct fs_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	for (int k = 0; k < TOLD_LOCKS; k++)
		pthread_mutex_init(&c->told_lock[k], NULL);
	c->tail = &c->head;
	return c;
}

static void batch_release(struct bnode *n)
{
	while (n) {
		struct bnode *next = n->bnext;
		n->bnext = NULL;
		bnode_unref(n);
		n = next;
	}
}

void cache_free(struct fs_cache *c)
{
	struct cache_batch b;

	if (!c)
		return;
	cache_take(c, &b);
	batch_release(b.head);
	for (int k = 0; k < TOLD_LOCKS; k++)
		pthread_mutex_destroy(&c->told_lock[k]);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void cache_changed(struct fs_cache *c, struct bnode *n, uint64_t seq)
{
	pthread_mutex_lock(&c->lock);
	if (!n->queued) {
		n->queued = true;
		n->qnext = NULL;
		*c->tail = bnode_ref(n);
		c->tail = &n->qnext;
	}
	c->seq = seq;
	pthread_mutex_unlock(&c->lock);
}

bool cache_pending(struct fs_cache *c)
{
	bool r;

	pthread_mutex_lock(&c->lock);
	r = c->head != NULL;
	pthread_mutex_unlock(&c->lock);
	return r;
}

void cache_take(struct fs_cache *c, struct cache_batch *b)
{
	pthread_mutex_lock(&c->lock);
	b->head = c->head;
	b->seq = c->seq;
	/* off the queue now: a change from here on queues the node again
	 * (linked by qnext) and is flushed by the next batch; this batch is
	 * linked by bnext */
	for (struct bnode *n = c->head; n; n = n->qnext) {
		n->queued = false;
		n->bnext = n->qnext;
	}
	c->head = NULL;
	c->tail = &c->head;
	pthread_mutex_unlock(&c->lock);
}

void cache_flush(struct cache_batch *b, struct fuse_session *se, struct inode_table *t)
{
	for (struct bnode *n = b->head; n; n = n->bnext) {
		/* every change of n numbered up to b->seq bumped its version
		 * before it was queued: this version is covered */
		uint64_t v = atomic_load(&n->version);
		uint64_t ino;

		if (se) {
			/* the directory: its kept listing (cache_readdir) */
			ino = inode_of(t, n->serial, -1);
			if (ino)
				fuse_lowlevel_notify_inval_inode(se, ino, 0, 0);
			for (size_t k = 0; k < n->type->nattrs; k++) {
				if (!(n->type->attrs[k].flags & BATTR_CACHE))
					continue;
				ino = inode_of(t, n->serial, (int)k);
				if (ino)
					fuse_lowlevel_notify_inval_inode(se, ino, 0, 0);
			}
		}
		bnode_set_flushed(n, v);
	}
	/* every node changed up to b->seq is in this batch or an earlier one */
	if (b->head)
		tree_set_flushed(b->head, b->seq);
	batch_release(b->head);
	b->head = NULL;
}

void cache_told_set(struct fs_cache *c, struct fs_inode *i, uint64_t version, const char *buf,
		    size_t len)
{
	pthread_mutex_t *l = &c->told_lock[i->ino % TOLD_LOCKS];
	struct told *t = malloc(sizeof(*t) + (len ? len : 1));
	struct told *old;

	if (t) {
		t->version = version;
		t->len = len;
		if (len)	/* an empty render may come with no buffer */
			memcpy(t->buf, buf, len);
	}
	pthread_mutex_lock(l);
	old = i->told;
	i->told = t;	/* on OOM none: a READ then serves its fresh render */
	pthread_mutex_unlock(l);
	free(old);
}

void cache_told_fit(struct fs_cache *c, struct fs_inode *i, struct sbuf *snap, uint64_t *version)
{
	pthread_mutex_t *l = &c->told_lock[i->ino % TOLD_LOCKS];
	struct told *t;

	pthread_mutex_lock(l);
	t = i->told;
	if (t && t->len != snap->len) {
		sbuf_reset(snap);
		if (sbuf_add(snap, t->buf, t->len) < 0)
			sbuf_reset(snap);
		if (t->version < *version)
			*version = t->version;
	}
	pthread_mutex_unlock(l);
}
