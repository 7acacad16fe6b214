/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * inode: the inode table; see inode.h. Two hash maps over the same
 * entries: by number (every request) and by (node serial, attr) (lookups,
 * readdirplus, invalidation). One mutex: every operation is a map probe.
 * Must not know: FUSE.
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
	struct hmap by_key;
	uint64_t next_ino;
	uint64_t generation;
};

struct inode_key {
	uint64_t serial;
	int attr;
};

static bool ino_eq(const void *val, const void *key)
{
	return ((const struct fs_inode *)val)->ino == *(const uint64_t *)key;
}

static bool key_eq(const void *val, const void *key)
{
	const struct fs_inode *i = val;
	const struct inode_key *k = key;

	return i->node->serial == k->serial && i->attr == k->attr;
}

static uint64_t key_hash(uint64_t serial, int attr)
{
	return hmap_hash_u64(serial * 131 + (uint64_t)(attr + 1));
}

int inode_table_new(struct bnode *root, uint64_t generation, struct inode_table **ret)
{
	struct inode_table *t = calloc(1, sizeof(*t));
	struct fs_inode *ri = calloc(1, sizeof(*ri));

	if (!t || !ri)
		goto oom;
	pthread_mutex_init(&t->lock, NULL);
	hmap_init(&t->by_ino);
	hmap_init(&t->by_key);
	t->next_ino = INODE_ROOT + 1;
	t->generation = generation;
	ri->ino = INODE_ROOT;
	ri->generation = generation;
	ri->node = bnode_ref(root);
	ri->attr = -1;
	ri->nlookup = 1;
	if (hmap_put(&t->by_ino, hmap_hash_u64(ri->ino), ri) < 0)
		goto oom_root;
	if (hmap_put(&t->by_key, key_hash(root->serial, -1), ri) < 0) {
		hmap_del(&t->by_ino, hmap_hash_u64(ri->ino), &ri->ino, ino_eq);
		goto oom_root;
	}
	*ret = t;
	return 0;
oom_root:
	bnode_unref(ri->node);
	hmap_free(&t->by_ino);
	hmap_free(&t->by_key);
	pthread_mutex_destroy(&t->lock);
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
		free(i->told);
		free(i->prev);
		free(i->shared);
		free(i);
	}
	hmap_free(&t->by_ino);
	hmap_free(&t->by_key);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

struct fs_inode *inode_get(struct inode_table *t, uint64_t ino)
{
	struct fs_inode *i;

	pthread_mutex_lock(&t->lock);
	i = hmap_get(&t->by_ino, hmap_hash_u64(ino), &ino, ino_eq);
	pthread_mutex_unlock(&t->lock);
	return i;
}

int inode_lookup(struct inode_table *t, struct bnode *node, int attr, struct fs_inode **ret)
{
	struct inode_key k = { node->serial, attr };
	uint64_t kh = key_hash(node->serial, attr);
	struct fs_inode *i;
	int r = 0;

	pthread_mutex_lock(&t->lock);
	i = hmap_get(&t->by_key, kh, &k, key_eq);
	if (!i) {
		i = calloc(1, sizeof(*i));
		if (!i) {
			r = -ENOMEM;
			goto out;
		}
		i->ino = t->next_ino;
		i->generation = t->generation;
		i->node = node;
		i->attr = attr;
		if ((r = hmap_put(&t->by_key, kh, i)) < 0) {
			free(i);
			goto out;
		}
		if ((r = hmap_put(&t->by_ino, hmap_hash_u64(i->ino), i)) < 0) {
			hmap_del(&t->by_key, kh, &k, key_eq);
			free(i);
			goto out;
		}
		/* a number is spent only once the entry is in: never reused */
		t->next_ino++;
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
	i = hmap_get(&t->by_ino, hmap_hash_u64(ino), &ino, ino_eq);
	if (i)
		i->nlookup -= n < i->nlookup ? n : i->nlookup;
	if (i && i->nlookup == 0) {
		struct inode_key k = { i->node->serial, i->attr };

		hmap_del(&t->by_ino, hmap_hash_u64(ino), &ino, ino_eq);
		hmap_del(&t->by_key, key_hash(k.serial, k.attr), &k, key_eq);
		if (i->pins) {
			i->gone = true;	/* the last inode_unpin frees it */
		} else {
			drop = i->node;
			free(i->told);
			free(i->prev);
			free(i->shared);
			free(i);
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
	struct inode_key k = { serial, attr };
	struct fs_inode *i;
	uint64_t ino = 0;

	pthread_mutex_lock(&t->lock);
	i = hmap_get(&t->by_key, key_hash(serial, attr), &k, key_eq);
	if (i)
		ino = i->ino;
	pthread_mutex_unlock(&t->lock);
	return ino;
}

struct fs_inode *inode_pin(struct inode_table *t, uint64_t serial, int attr)
{
	struct inode_key k = { serial, attr };
	struct fs_inode *i;

	pthread_mutex_lock(&t->lock);
	i = hmap_get(&t->by_key, key_hash(serial, attr), &k, key_eq);
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
		free(i->told);
		free(i->prev);
		free(i->shared);
		free(i);
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
