/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cache: the queue of changes between bnode_changed() and the kernel's
 * caches, and their flush by the notifier thread; see cache.h. A node is
 * queued once however often it changes before a flush (its queued flag);
 * the queue is linked through the nodes themselves, so queueing never
 * allocates and never fails. Also the told texts of cached files, which
 * READs and attribute replies serve (cache.h). Knows the inode table and
 * FUSE's notify calls; nothing of the backend beyond tree.h.
 */
#define FUSE_USE_VERSION 312

#include "cache.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "inflight.h"
#include "inode.h"
#include "sbuf.h"
#include "tree.h"

#define TOLD_LOCKS 64
#define CACHE_TEXT_CAP (16u << 20)	/* as fs.c's snapshots */
/* how long the notifier waits for the READs of a file it invalidates
 * before it lets the kernel wait for them (a READ never waits on it) */
#define READ_WAIT_MS 2000

struct told {
	uint64_t version;	/* of the node, loaded before the render */
	size_t len;
	char buf[];
};

struct fs_cache {
	/* by inode number: attr_lock serialises attribute replies with a
	 * flush's invalidation; text_lock guards told and prev */
	pthread_mutex_t attr_lock[TOLD_LOCKS];
	pthread_mutex_t text_lock[TOLD_LOCKS];
	cache_render_fn render;
	void *render_ctx;
	pthread_mutex_t lock;
	struct bnode *head, **tail;	/* queued nodes, referenced */
	uint64_t seq;			/* the last change number queued */
	atomic_uint_fast64_t kept;	/* cached files a flush left alone */
};

struct fs_cache *cache_new(void)
{
	struct fs_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	for (int k = 0; k < TOLD_LOCKS; k++) {
		pthread_mutex_init(&c->attr_lock[k], NULL);
		pthread_mutex_init(&c->text_lock[k], NULL);
	}
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
	for (int k = 0; k < TOLD_LOCKS; k++) {
		pthread_mutex_destroy(&c->attr_lock[k]);
		pthread_mutex_destroy(&c->text_lock[k]);
	}
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

static bool same_text(const struct told *a, const struct sbuf *b)
{
	return a->len == b->len && (!a->len || memcmp(a->buf, b->buf, a->len) == 0);
}

/*
 * Whether a flushed change at version v leaves i's text as the kernel may
 * hold it (an id, a name: most changes of a node are of its other files):
 * the told text, and the one before it if a READ may still have filled
 * pages from it, are what a render now gives. Their version then moves to
 * v, as if told again, and the kernel keeps its pages. attr_lock held, so
 * no attribute reply tells a text meanwhile.
 */
static bool text_unchanged(struct fs_cache *c, struct fs_inode *i, struct fs_inode_ext *x,
			   uint64_t v)
{
	size_t k = i->ino % TOLD_LOCKS;
	struct sbuf out = SBUF_INIT(CACHE_TEXT_CAP);
	struct told *t, *p;
	bool same = false;

	if (!x || atomic_load(&i->node->dead) || !c->render)
		return false;
	pthread_mutex_lock(&c->text_lock[k]);
	t = x->told;
	pthread_mutex_unlock(&c->text_lock[k]);
	if (!t || c->render(c->render_ctx, i->node, &i->node->type->attrs[i->attr], &out) < 0)
		goto out;
	pthread_mutex_lock(&c->text_lock[k]);
	t = x->told;
	p = x->prev;
	same = t && same_text(t, &out) && (!p || same_text(p, &out));
	if (same) {
		uint64_t told_v = t->version, cur = atomic_load(&x->filled);

		t->version = v;
		if (p)
			p->version = v;
		/* pages filled from either hold this very text */
		while (cur >= told_v && cur < v &&
		       !atomic_compare_exchange_weak(&x->filled, &cur, v))
			;
	}
	pthread_mutex_unlock(&c->text_lock[k]);
out:
	sbuf_free(&out);
	return same;
}

/* A flushed change of i's node at version v: unless its text is unchanged,
 * the kernel drops what it holds of i, and only then the told text goes
 * (cache.h). The notifier; i pinned. */
static void drop_told(struct fs_cache *c, struct fs_inode *i, struct fuse_session *se,
		      struct inflight *inf, uint64_t v)
{
	size_t k = i->ino % TOLD_LOCKS;
	struct fs_inode_ext *x;
	uint64_t ino = i->ino;

	/* the page locks a READ in flight holds: wait for its answer here,
	 * where a SIGKILL ends the wait, not in the kernel (inflight.h) */
	if (se)
		inflight_wait_clear(inf, &ino, 1, INFL_PAGES, READ_WAIT_MS);

	pthread_mutex_lock(&c->attr_lock[k]);
	if (text_unchanged(c, i, atomic_load(&i->ext), v)) {
		atomic_fetch_add(&c->kept, 1);
		pthread_mutex_unlock(&c->attr_lock[k]);
		return;
	}
	if (se)
		fuse_lowlevel_notify_inval_inode(se, i->ino, 0, 0);
	pthread_mutex_lock(&c->text_lock[k]);
	x = atomic_load(&i->ext);	/* none: nothing was told */
	if (x && x->told) {
		free(x->prev);
		x->prev = x->told;
		x->told = NULL;
	}
	pthread_mutex_unlock(&c->text_lock[k]);
	pthread_mutex_unlock(&c->attr_lock[k]);
}

void cache_flush(struct fs_cache *c, struct cache_batch *b, struct fuse_session *se,
		 struct inode_table *t, struct inflight *inf)
{
	for (struct bnode *n = b->head; n; n = n->bnext) {
		/* every change of n numbered up to b->seq bumped its version
		 * before it was queued: this version is covered */
		uint64_t v = atomic_load(&n->version);
		uint64_t ino;

		/* the directory: its kept listing (cache_readdir) */
		ino = se ? inode_of(t, n->serial, -1) : 0;
		if (ino)
			fuse_lowlevel_notify_inval_inode(se, ino, 0, 0);
		for (size_t k = 0; k < n->type->nattrs; k++) {
			struct fs_inode *i;

			if (!(n->type->attrs[k].flags & BATTR_CACHE))
				continue;
			i = inode_pin(t, n->serial, (int)k);
			if (i) {
				drop_told(c, i, se, inf, v);
				inode_unpin(t, i);
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

uint64_t cache_kept(struct fs_cache *c)
{
	return atomic_load(&c->kept);
}

void cache_set_render(struct fs_cache *c, cache_render_fn render, void *ctx)
{
	c->render = render;
	c->render_ctx = ctx;
}

/* A fresh render of i as a told block: 0 with *ret, or -errno. */
static int render_told(struct fs_cache *c, struct fs_inode *i, struct told **ret)
{
	struct sbuf out = SBUF_INIT(CACHE_TEXT_CAP);
	uint64_t v = atomic_load(&i->node->version);	/* before: never newer than shown */
	struct told *t;
	int r;

	r = c->render(c->render_ctx, i->node, &i->node->type->attrs[i->attr], &out);
	if (r >= 0) {
		t = malloc(sizeof(*t) + (out.len ? out.len : 1));
		if (!t) {
			r = -ENOMEM;
		} else {
			t->version = v;
			t->len = out.len;
			if (out.len)	/* an empty render may come with no buffer */
				memcpy(t->buf, out.buf, out.len);
			*ret = t;
		}
	}
	sbuf_free(&out);
	return r < 0 ? r : 0;
}

int cache_size(struct fs_cache *c, struct fs_inode *i, size_t *ret_len)
{
	size_t k = i->ino % TOLD_LOCKS;
	struct fs_inode_ext *x = inode_ext(i);
	struct told *t = NULL;
	int r = 0;

	if (!x)
		return -ENOMEM;
	pthread_mutex_lock(&c->attr_lock[k]);
	pthread_mutex_lock(&c->text_lock[k]);
	if (x->told) {
		*ret_len = ((struct told *)x->told)->len;
		pthread_mutex_unlock(&c->text_lock[k]);
		pthread_mutex_unlock(&c->attr_lock[k]);
		return 0;
	}
	pthread_mutex_unlock(&c->text_lock[k]);
	/* rendered under the attribute lock only: READs go on meanwhile */
	r = render_told(c, i, &t);
	if (r == 0) {
		pthread_mutex_lock(&c->text_lock[k]);
		if (x->told) {	/* a READ made one meanwhile: the kernel may read it */
			free(t);
		} else {
			x->told = t;
		}
		*ret_len = ((struct told *)x->told)->len;
		pthread_mutex_unlock(&c->text_lock[k]);
	}
	pthread_mutex_unlock(&c->attr_lock[k]);
	return r;
}

/* Serve t into snap; text_lock held. */
static int serve(const struct told *t, struct sbuf *snap, uint64_t *ret_version)
{
	sbuf_reset(snap);
	if (t->len && sbuf_add(snap, t->buf, t->len) < 0)
		return -ENOMEM;
	*ret_version = t->version;
	return 0;
}

int cache_read(struct fs_cache *c, struct fs_inode *i, struct sbuf *snap, uint64_t *ret_version)
{
	size_t k = i->ino % TOLD_LOCKS;
	struct fs_inode_ext *x = inode_ext(i);
	struct told *t = NULL;
	int r;

	if (!x)
		return -ENOMEM;
	pthread_mutex_lock(&c->text_lock[k]);
	if (x->told || x->prev) {
		r = serve(x->told ? x->told : x->prev, snap, ret_version);
		pthread_mutex_unlock(&c->text_lock[k]);
		return r;
	}
	pthread_mutex_unlock(&c->text_lock[k]);
	/* never told (its size reply failed to render): render now */
	r = render_told(c, i, &t);
	if (r < 0)
		return r;
	pthread_mutex_lock(&c->text_lock[k]);
	if (x->told || x->prev) {
		free(t);
	} else {
		x->told = t;
	}
	r = serve(x->told ? x->told : x->prev, snap, ret_version);
	pthread_mutex_unlock(&c->text_lock[k]);
	return r;
}
