/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tree: refcounted directory nodes, their children and change notification;
 * see tree.h. Each tree is an object of its own (struct tree: its lock, its
 * serials, its notifier), made with its root and kept by every node in it;
 * no state is shared between trees. Knows nothing of FUSE, CSI or
 * container engines.
 */
#include "tree.h"
#include "pool.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct tree {
	atomic_uint ref;		/* one per node in it */
	pthread_rwlock_t lock;		/* the structure: children lists, dead flags */
	atomic_uint_fast64_t serial;	/* the next node's; 1 is the root's */
	struct tree_notifier nt;	/* set once before mount */
	pthread_mutex_t clock;		/* orders changes: seq and nt.changed */
	atomic_uint_fast64_t seq;	/* the last change's number */
	atomic_uint_fast64_t flushed;	/* invalidated through this number */
	tree_watch_fn watch;		/* under clock (tree_set_watcher) */
	void *watch_ctx;
	pthread_mutex_t elock;		/* every node's error line */
};

/* A directory's children: kids[] sorted by serial (insertion order),
 * byname indexes them by name. Made on the first add. */
struct bkids {
	struct bnode **v;
	size_t n, a;
	struct hmap byname;
};

static struct tree *tree_ref(struct tree *t)
{
	atomic_fetch_add(&t->ref, 1);
	return t;
}

static void tree_unref(struct tree *t)
{
	if (!t || atomic_fetch_sub(&t->ref, 1) != 1)
		return;
	pthread_rwlock_destroy(&t->lock);
	pthread_mutex_destroy(&t->clock);
	pthread_mutex_destroy(&t->elock);
	free(t);
}

void tree_set_notifier(struct bnode *root, const struct tree_notifier *nt)
{
	struct tree *t = root->tree;

	if (!t)
		return;
	pthread_mutex_lock(&t->clock);
	t->nt = *nt;
	if (!nt->changed)	/* no one left to flush: all is visible */
		atomic_store(&t->flushed, atomic_load(&t->seq));
	pthread_mutex_unlock(&t->clock);
}

uint64_t tree_seq_now(const struct bnode *any)
{
	return any->tree ? atomic_load(&any->tree->seq) : 0;
}

uint64_t tree_seq_flushed(const struct bnode *any)
{
	return any->tree ? atomic_load(&any->tree->flushed) : 0;
}

void tree_set_flushed(struct bnode *any, uint64_t seq)
{
	struct tree *t = any->tree;
	uint64_t cur;

	if (!t)
		return;
	cur = atomic_load(&t->flushed);
	while (cur < seq && !atomic_compare_exchange_weak(&t->flushed, &cur, seq))
		;
}

void bnode_set_flushed(struct bnode *n, uint64_t v)
{
	uint64_t cur = atomic_load(&n->flushed);

	while (cur < v && !atomic_compare_exchange_weak(&n->flushed, &cur, v))
		;
}

/* A node and size bytes after it (zeroed, aligned as malloc aligns) in
 * one block: the name is allocated to its length. */
static struct bnode *node_alloc(const struct btype *type, const char *name, size_t size,
				struct pool *pool, void **ret_priv)
{
	size_t len = strnlen(name, BNODE_NAME_MAX);
	size_t at = (sizeof(struct bnode) + len + 1 + _Alignof(max_align_t) - 1) &
		    ~(_Alignof(max_align_t) - 1);
	size_t total = size ? at + size : sizeof(struct bnode) + len + 1;
	struct bnode *n = pool ? pool_alloc(pool, total) : calloc(1, total);

	if (!n)
		return NULL;
	n->pooled = pool != NULL;
	atomic_init(&n->ref, 1);
	n->type = type;
	memcpy(n->name, name, len);
	if (ret_priv)
		*ret_priv = (char *)n + at;
	return n;
}

struct bnode *bnode_new(const struct btype *type, const char *name, void *priv)
{
	struct bnode *n = node_alloc(type, name, 0, NULL, NULL);

	if (n)
		n->priv = priv;
	return n;
}

struct bnode *bnode_new_priv(const struct btype *type, const char *name, size_t size,
			     struct pool *pool)
{
	void *priv;
	struct bnode *n = node_alloc(type, name, size ? size : 1, pool, &priv);

	if (n)
		n->priv = priv;
	return n;
}

struct bnode *bnode_new_root(const struct btype *type, const char *name, void *priv)
{
	struct bnode *n = bnode_new(type, name, priv);
	struct tree *t = calloc(1, sizeof(*t));

	if (!n || !t) {
		free(t);
		bnode_unref(n);
		return NULL;
	}
	atomic_init(&t->ref, 1);
	pthread_rwlock_init(&t->lock, NULL);
	pthread_mutex_init(&t->clock, NULL);
	pthread_mutex_init(&t->elock, NULL);
	atomic_init(&t->serial, 2);
	n->tree = t;
	n->serial = 1;
	return n;
}

struct bnode *bnode_ref(struct bnode *n)
{
	if (n)
		atomic_fetch_add(&n->ref, 1);
	return n;
}

void bnode_unref(struct bnode *n)
{
	if (!n || atomic_fetch_sub(&n->ref, 1) != 1)
		return;
	/* last reference: no children remain (remove detaches them) */
	if (n->type->free)
		n->type->free(n);
	if (n->kids) {
		free(n->kids->v);
		hmap_free(&n->kids->byname);
		free(n->kids);
	}
	free(n->error);
	tree_unref(n->tree);
	if (n->pooled)
		pool_free(n);
	else
		free(n);
}

static bool byname_eq(const void *val, const void *key)
{
	return strcmp(((const struct bnode *)val)->name, key) == 0;
}

int bnode_add(struct bnode *dir, struct bnode *child)
{
	struct tree *t = dir->tree;
	struct bkids *k;
	int r = 0;

	if (!t || (child->tree && child->tree != t))
		return -EINVAL;	/* dir is in no tree, or child in another */
	pthread_rwlock_wrlock(&t->lock);
	if (atomic_load(&dir->dead)) {
		r = -ENOENT;
		goto out;
	}
	if (!dir->kids) {
		dir->kids = calloc(1, sizeof(*dir->kids));
		if (!dir->kids) {
			r = -ENOMEM;
			goto out;
		}
		hmap_init(&dir->kids->byname);
	}
	k = dir->kids;
	if (hmap_get(&k->byname, hmap_hash_str(child->name), child->name, byname_eq)) {
		r = -EEXIST;
		goto out;
	}
	if (k->n == k->a) {
		size_t na = k->a ? k->a * 2 : 8;
		struct bnode **nk = realloc(k->v, na * sizeof(*nk));
		if (!nk) {
			r = -ENOMEM;
			goto out;
		}
		k->v = nk;
		k->a = na;
	}
	r = hmap_put(&k->byname, hmap_hash_str(child->name), child);
	if (r < 0)
		goto out;
	/* serials rise, so appending keeps kids[] sorted; a node re-added
	 * later gets a fresh one too, so the order holds */
	child->serial = atomic_fetch_add(&t->serial, 1);
	if (!child->tree)
		child->tree = tree_ref(t);
	k->v[k->n++] = bnode_ref(child);
	if (!child->owner)
		child->owner = dir->owner;
	child->parent = bnode_ref(dir);
out:
	pthread_rwlock_unlock(&t->lock);
	if (r == 0)
		bnode_changed(dir);
	return r;
}

static size_t nkids(const struct bnode *dir)
{
	return dir->kids ? dir->kids->n : 0;
}

static size_t kid_index(const struct bnode *dir, uint64_t serial)
{
	size_t lo = 0, hi = nkids(dir);	/* first index with serial >= given */

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (dir->kids->v[mid]->serial < serial)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* References dropped after the tree lock is released: a node's free hook
 * may take other locks. */
struct droplist {
	struct bnode **v;
	size_t n, a;
};

static void drop_later(struct droplist *d, struct bnode *n)
{
	if (d->n == d->a) {
		size_t na = d->a ? d->a * 2 : 8;
		struct bnode **nv = realloc(d->v, na * sizeof(*nv));
		if (!nv)
			return;	/* leak one reference rather than free under the lock */
		d->v = nv;
		d->a = na;
	}
	d->v[d->n++] = n;
}

/* Detach n (and, first, its children) under the write lock. The two
 * references a link holds (parent->kids[i] and n->parent) go to d. */
static void detach_locked(struct bnode *n, struct droplist *d)
{
	struct bnode *p = n->parent;

	atomic_store(&n->dead, true);
	while (nkids(n))
		detach_locked(n->kids->v[n->kids->n - 1], d);
	if (!p)
		return;
	size_t i = kid_index(p, n->serial);
	struct bkids *k = p->kids;
	if (i < nkids(p) && k->v[i] == n) {
		memmove(&k->v[i], &k->v[i + 1], (k->n - i - 1) * sizeof(*k->v));
		k->n--;
		hmap_del(&k->byname, hmap_hash_str(n->name), n->name, byname_eq);
		drop_later(d, n);
	}
	n->parent = NULL;
	drop_later(d, p);
}

void bnode_remove(struct bnode *n)
{
	struct tree *t = n->tree;
	struct droplist d = { 0 };
	struct bnode *p;

	bnode_ref(n);
	if (t)
		pthread_rwlock_wrlock(&t->lock);
	p = bnode_ref(n->parent);
	detach_locked(n, &d);
	if (t)
		pthread_rwlock_unlock(&t->lock);
	if (p) {
		if (t->nt.removed)
			t->nt.removed(t->nt.ctx, p, n);
		bnode_changed(p);
		bnode_unref(p);
	}
	bnode_changed(n);
	for (size_t i = 0; i < d.n; i++)
		bnode_unref(d.v[i]);
	free(d.v);
	bnode_unref(n);
}

struct bnode *bnode_lookup(struct bnode *dir, const char *name)
{
	struct bnode *k;

	if (!dir->tree)
		return NULL;	/* in no tree: no children */
	pthread_rwlock_rdlock(&dir->tree->lock);
	k = dir->kids ? bnode_ref(hmap_get(&dir->kids->byname, hmap_hash_str(name), name,
					   byname_eq)) : NULL;
	pthread_rwlock_unlock(&dir->tree->lock);
	return k;
}

struct bnode *bnode_next_child(struct bnode *dir, uint64_t after)
{
	struct bnode *k = NULL;
	size_t i;

	if (!dir->tree)
		return NULL;
	pthread_rwlock_rdlock(&dir->tree->lock);
	i = kid_index(dir, after + 1);
	if (i < nkids(dir))
		k = bnode_ref(dir->kids->v[i]);
	pthread_rwlock_unlock(&dir->tree->lock);
	return k;
}

size_t bnode_count(struct bnode *dir)
{
	size_t n;

	if (!dir->tree)
		return 0;
	pthread_rwlock_rdlock(&dir->tree->lock);
	n = nkids(dir);
	pthread_rwlock_unlock(&dir->tree->lock);
	return n;
}

int bnode_list(struct bnode *dir, struct bnode ***ret, size_t *ret_n)
{
	struct tree *t = dir->tree;
	struct bnode **v;
	size_t n = 0;

	if (t)
		pthread_rwlock_rdlock(&t->lock);
	n = t ? nkids(dir) : 0;
	v = malloc((n ? n : 1) * sizeof(*v));
	if (!v) {
		if (t)
			pthread_rwlock_unlock(&t->lock);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		v[i] = bnode_ref(dir->kids->v[i]);
	if (t)
		pthread_rwlock_unlock(&t->lock);
	*ret = v;
	*ret_n = n;
	return 0;
}

void bnode_list_free(struct bnode **v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		bnode_unref(v[i]);
	free(v);
}

const struct battr *bnode_attr(const struct bnode *n, const char *name, size_t *ret_idx)
{
	for (size_t i = 0; i < n->type->nattrs; i++)
		if (strcmp(n->type->attrs[i].name, name) == 0) {
			if (ret_idx)
				*ret_idx = i;
			return &n->type->attrs[i];
		}
	return NULL;
}

void bnode_set_error(struct bnode *n, const char *msg)
{
	struct timespec ts;
	struct tm tm;
	char when[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (n->tree)
		pthread_mutex_lock(&n->tree->elock);
	if (!n->error)
		n->error = malloc(BNODE_ERROR_MAX);
	if (n->error)
		snprintf(n->error, BNODE_ERROR_MAX, "%s %s", when, msg);
	if (n->tree)
		pthread_mutex_unlock(&n->tree->elock);
	bnode_changed(n);
}

void bnode_get_error(struct bnode *n, char *buf, size_t len)
{
	if (n->tree)
		pthread_mutex_lock(&n->tree->elock);
	snprintf(buf, len, "%s", n->error ? n->error : "");
	if (n->tree)
		pthread_mutex_unlock(&n->tree->elock);
}

int battr_show_error(struct bnode *n, struct sbuf *out)
{
	char e[BNODE_ERROR_MAX];

	bnode_get_error(n, e, sizeof(e));
	return e[0] ? sbuf_printf(out, "%s\n", e) : 0;
}

void bnode_changed(struct bnode *n)
{
	struct tree *t = n->tree;
	uint64_t v = atomic_fetch_add(&n->version, 1) + 1;

	if (!t) {
		bnode_set_flushed(n, v);
		return;
	}
	/* numbers are handed out and queued under one lock, so the notifier
	 * sees changes in number order and may flush through the last one */
	pthread_mutex_lock(&t->clock);
	uint64_t seq = atomic_fetch_add(&t->seq, 1) + 1;
	if (t->nt.changed) {
		t->nt.changed(t->nt.ctx, n, seq);
	} else {
		bnode_set_flushed(n, v);
		atomic_store(&t->flushed, seq);
	}
	if (t->watch)
		t->watch(t->watch_ctx, n);
	pthread_mutex_unlock(&t->clock);
}

void tree_set_watcher(struct bnode *root, tree_watch_fn fn, void *ctx)
{
	struct tree *t = root->tree;

	pthread_mutex_lock(&t->clock);
	t->watch = fn;
	t->watch_ctx = ctx;
	pthread_mutex_unlock(&t->clock);
}

void breq_complete(struct breq *rq, int result)
{
	rq->done(rq, result);
}

/* ---- wait files ---- */

struct bwait {
	bool delivered;
};

int bwait_open(void **ret_st)
{
	struct bwait *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	*ret_st = w;
	return 0;
}

int bwait_read(struct bnode *n, void *st, struct sbuf *out, bwait_settled_fn settled,
	       bwait_line_fn line)
{
	struct bwait *w = st;
	size_t start = out->len;
	int r;

	if (w->delivered)
		return 0;
	if (!settled(n))
		return -EAGAIN;
	r = line(n, out);
	if (r < 0)
		return r;
	w->delivered = true;
	return (int)(out->len - start);
}

int bwait_ready(struct bnode *n, void *st, bwait_settled_fn settled)
{
	return ((struct bwait *)st)->delivered || settled(n);
}

void bwait_close(struct bnode *n, void *st)
{
	free(st);
}
