/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * inode: the inode table; see inode.h. One hash map, by number: a number
 * is made of (node serial, attr), so lookups, readdirplus and invalidation
 * probe the same map as every request does. One mutex: every operation is
 * a map probe. Must not know: FUSE.
 */
#include "inode.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "hmap.h"
#include "tree.h"

struct inode_table {
	pthread_mutex_t lock;
	struct hmap by_ino;
	uint64_t generation;
};

_Static_assert(sizeof(struct fs_inode) <= 40, "an entry per file the kernel holds: keep it small");

/* (serial, attr) -> number; the root's directory is INODE_ROOT */
static uint64_t number(uint64_t serial, int attr)
{
	if (serial == 1 && attr < 0)
		return INODE_ROOT;
	return serial * (INODE_MAX_ATTRS + 1) + (uint64_t)(attr + 1);
}

uint64_t inode_number(uint64_t serial, int attr)
{
	return number(serial, attr);
}

static bool ino_eq(const void *val, const void *key)
{
	return ((const struct fs_inode *)val)->ino == *(const uint64_t *)key;
}

static void entry_free(struct fs_inode *i)
{
	struct fs_inode_ext *x = atomic_load(&i->ext);

	if (x) {
		free(x->told);
		free(x->prev);
		free(x->shared);
		free(x);
	}
	free(i);
}

int inode_table_new(struct bnode *root, uint64_t generation, struct inode_table **ret)
{
	struct inode_table *t = calloc(1, sizeof(*t));
	struct fs_inode *ri = calloc(1, sizeof(*ri));

	if (!t || !ri)
		goto oom;
	pthread_mutex_init(&t->lock, NULL);
	hmap_init(&t->by_ino);
	t->generation = generation;
	ri->ino = INODE_ROOT;
	ri->node = bnode_ref(root);
	ri->attr = -1;
	ri->nlookup = 1;
	if (hmap_put(&t->by_ino, hmap_hash_u64(ri->ino), ri) < 0) {
		bnode_unref(ri->node);
		hmap_free(&t->by_ino);
		pthread_mutex_destroy(&t->lock);
		goto oom;
	}
	*ret = t;
	return 0;
oom:
	free(ri);
	free(t);
	return -ENOMEM;
}

void inode_table_free(struct inode_table *t)
{
	size_t pos = 0;

	if (!t)
		return;
	for (struct fs_inode *i; (i = hmap_next(&t->by_ino, &pos));) {
		bnode_unref(i->node);
		entry_free(i);
	}
	hmap_free(&t->by_ino);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

uint64_t inode_generation(const struct inode_table *t)
{
	return t->generation;
}

struct fs_inode_ext *inode_ext(struct fs_inode *i)
{
	struct fs_inode_ext *x = atomic_load(&i->ext), *none = NULL;

	if (x)
		return x;
	x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	if (!atomic_compare_exchange_strong(&i->ext, &none, x)) {
		free(x);	/* another thread made it first */
		return none;
	}
	return x;
}

/* Under the lock. */
static struct fs_inode *get_locked(struct inode_table *t, uint64_t ino)
{
	return hmap_get(&t->by_ino, hmap_hash_u64(ino), &ino, ino_eq);
}

struct fs_inode *inode_get(struct inode_table *t, uint64_t ino)
{
	struct fs_inode *i;

	pthread_mutex_lock(&t->lock);
	i = get_locked(t, ino);
	pthread_mutex_unlock(&t->lock);
	return i;
}

int inode_lookup(struct inode_table *t, struct bnode *node, int attr, struct fs_inode **ret)
{
	uint64_t ino = number(node->serial, attr);
	struct fs_inode *i;
	int r = 0;

	if (attr >= INODE_MAX_ATTRS)
		return -EOVERFLOW;
	pthread_mutex_lock(&t->lock);
	i = get_locked(t, ino);
	if (!i) {
		i = calloc(1, sizeof(*i));
		if (!i) {
			r = -ENOMEM;
			goto out;
		}
		i->ino = ino;
		i->node = node;
		i->attr = attr;
		if ((r = hmap_put(&t->by_ino, hmap_hash_u64(ino), i)) < 0) {
			free(i);
			goto out;
		}
		bnode_ref(node);
	}
	i->nlookup++;
	*ret = i;
out:
	pthread_mutex_unlock(&t->lock);
	return r;
}

void inode_forget(struct inode_table *t, uint64_t ino, uint64_t n)
{
	struct fs_inode *i;
	struct bnode *drop = NULL;

	if (ino == INODE_ROOT)
		return;
	pthread_mutex_lock(&t->lock);
	i = get_locked(t, ino);
	if (i)
		i->nlookup -= n < i->nlookup ? n : i->nlookup;
	if (i && i->nlookup == 0) {
		hmap_del(&t->by_ino, hmap_hash_u64(ino), &ino, ino_eq);
		if (i->pins) {
			i->gone = true;	/* the last inode_unpin frees it */
		} else {
			drop = i->node;
			entry_free(i);
		}
	}
	pthread_mutex_unlock(&t->lock);
	/* outside the lock: the last reference frees the node, and its
	 * type's free hook may take other locks */
	bnode_unref(drop);
}

uint64_t inode_of_dir(struct inode_table *t, uint64_t serial)
{
	return inode_of(t, serial, -1);
}

uint64_t inode_of(struct inode_table *t, uint64_t serial, int attr)
{
	uint64_t ino = number(serial, attr);
	bool held;

	pthread_mutex_lock(&t->lock);
	held = get_locked(t, ino) != NULL;
	pthread_mutex_unlock(&t->lock);
	return held ? ino : 0;
}

struct fs_inode *inode_pin(struct inode_table *t, uint64_t serial, int attr)
{
	struct fs_inode *i;

	pthread_mutex_lock(&t->lock);
	i = get_locked(t, number(serial, attr));
	if (i)
		i->pins++;
	pthread_mutex_unlock(&t->lock);
	return i;
}

void inode_unpin(struct inode_table *t, struct fs_inode *i)
{
	struct bnode *drop = NULL;

	pthread_mutex_lock(&t->lock);
	if (--i->pins == 0 && i->gone) {
		drop = i->node;
		entry_free(i);
	}
	pthread_mutex_unlock(&t->lock);
	bnode_unref(drop);
}

size_t inode_count(struct inode_table *t)
{
	size_t n;

	pthread_mutex_lock(&t->lock);
	n = t->by_ino.len;
	pthread_mutex_unlock(&t->lock);
	return n;
}
