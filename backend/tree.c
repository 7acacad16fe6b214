/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tree: refcounted directory nodes, their children and change notification;
 * see tree.h. Knows nothing of FUSE, CSI or container engines.
 */
#include "tree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_rwlock_t tree_lock = PTHREAD_RWLOCK_INITIALIZER;
static atomic_uint_fast64_t tree_serial = 1;	/* 1 is the root's */
static struct tree_notifier notifier;		/* set once before mount */

void tree_set_notifier(const struct tree_notifier *nt)
{
	notifier = *nt;
}

struct bnode *bnode_new(const struct btype *type, const char *name, void *priv)
{
	struct bnode *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	atomic_init(&n->ref, 1);
	n->type = type;
	snprintf(n->name, sizeof(n->name), "%s", name);
	n->serial = atomic_fetch_add(&tree_serial, 1);
	n->priv = priv;
	hmap_init(&n->byname);
	pthread_mutex_init(&n->lock, NULL);
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
	free(n->kids);
	hmap_free(&n->byname);
	pthread_mutex_destroy(&n->lock);
	free(n);
}

static bool byname_eq(const void *val, const void *key)
{
	return strcmp(((const struct bnode *)val)->name, key) == 0;
}

int bnode_add(struct bnode *dir, struct bnode *child)
{
	int r = 0;

	pthread_rwlock_wrlock(&tree_lock);
	if (atomic_load(&dir->dead)) {
		r = -ENOENT;
		goto out;
	}
	if (hmap_get(&dir->byname, hmap_hash_str(child->name), child->name, byname_eq)) {
		r = -EEXIST;
		goto out;
	}
	if (dir->nkids == dir->akids) {
		size_t na = dir->akids ? dir->akids * 2 : 8;
		struct bnode **nk = realloc(dir->kids, na * sizeof(*nk));
		if (!nk) {
			r = -ENOMEM;
			goto out;
		}
		dir->kids = nk;
		dir->akids = na;
	}
	r = hmap_put(&dir->byname, hmap_hash_str(child->name), child);
	if (r < 0)
		goto out;
	/* serials rise, so appending keeps kids[] sorted; a node re-added
	 * later gets a fresh serial first so the order holds */
	if (dir->nkids && dir->kids[dir->nkids - 1]->serial > child->serial)
		child->serial = atomic_fetch_add(&tree_serial, 1);
	dir->kids[dir->nkids++] = bnode_ref(child);
	if (!child->owner)
		child->owner = dir->owner;
	child->parent = bnode_ref(dir);
out:
	pthread_rwlock_unlock(&tree_lock);
	if (r == 0)
		bnode_changed(dir);
	return r;
}

static size_t kid_index(const struct bnode *dir, uint64_t serial)
{
	size_t lo = 0, hi = dir->nkids;	/* first index with serial >= given */

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (dir->kids[mid]->serial < serial)
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
	while (n->nkids)
		detach_locked(n->kids[n->nkids - 1], d);
	if (!p)
		return;
	size_t i = kid_index(p, n->serial);
	if (i < p->nkids && p->kids[i] == n) {
		memmove(&p->kids[i], &p->kids[i + 1], (p->nkids - i - 1) * sizeof(*p->kids));
		p->nkids--;
		hmap_del(&p->byname, hmap_hash_str(n->name), n->name, byname_eq);
		drop_later(d, n);
	}
	n->parent = NULL;
	drop_later(d, p);
}

void bnode_remove(struct bnode *n)
{
	struct droplist d = { 0 };
	struct bnode *p;

	bnode_ref(n);
	pthread_rwlock_wrlock(&tree_lock);
	p = bnode_ref(n->parent);
	detach_locked(n, &d);
	pthread_rwlock_unlock(&tree_lock);
	if (p) {
		if (notifier.removed)
			notifier.removed(notifier.ctx, p, n->name, n->serial);
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

	pthread_rwlock_rdlock(&tree_lock);
	k = bnode_ref(hmap_get(&dir->byname, hmap_hash_str(name), name, byname_eq));
	pthread_rwlock_unlock(&tree_lock);
	return k;
}

struct bnode *bnode_next_child(struct bnode *dir, uint64_t after)
{
	struct bnode *k = NULL;
	size_t i;

	pthread_rwlock_rdlock(&tree_lock);
	i = kid_index(dir, after + 1);
	if (i < dir->nkids)
		k = bnode_ref(dir->kids[i]);
	pthread_rwlock_unlock(&tree_lock);
	return k;
}

size_t bnode_count(struct bnode *dir)
{
	size_t n;

	pthread_rwlock_rdlock(&tree_lock);
	n = dir->nkids;
	pthread_rwlock_unlock(&tree_lock);
	return n;
}

int bnode_list(struct bnode *dir, struct bnode ***ret, size_t *ret_n)
{
	struct bnode **v;
	size_t n;

	pthread_rwlock_rdlock(&tree_lock);
	n = dir->nkids;
	v = malloc((n ? n : 1) * sizeof(*v));
	if (!v) {
		pthread_rwlock_unlock(&tree_lock);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		v[i] = bnode_ref(dir->kids[i]);
	pthread_rwlock_unlock(&tree_lock);
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
	pthread_mutex_lock(&n->lock);
	snprintf(n->error, sizeof(n->error), "%s %s", when, msg);
	pthread_mutex_unlock(&n->lock);
	bnode_changed(n);
}

void bnode_get_error(struct bnode *n, char *buf, size_t len)
{
	pthread_mutex_lock(&n->lock);
	snprintf(buf, len, "%s", n->error);
	pthread_mutex_unlock(&n->lock);
}

int battr_show_error(struct bnode *n, struct sbuf *out)
{
	char e[BNODE_ERROR_MAX];

	bnode_get_error(n, e, sizeof(e));
	return e[0] ? sbuf_printf(out, "%s\n", e) : 0;
}

void bnode_changed(struct bnode *n)
{
	atomic_fetch_add(&n->version, 1);
	if (notifier.changed)
		notifier.changed(notifier.ctx, n);
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
