/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cache: what lets the kernel serve nodefs files from its caches, and keeps
 * what it serves exact.
 *
 * Files whose attribute has BATTR_CACHE (a volume's state, an operation's
 * command...) are opened with keep_cache and report their real size;
 * directories keep their listings (cache_readdir). Every bnode_changed()
 * queues its node here, under the tree's change lock and so in change
 * number order; the notifier thread takes the queue, invalidates the
 * kernel's pages and attributes of the node's cached files and of its
 * directory (fuse_lowlevel_notify_inval_inode), and only then marks the
 * change flushed (bnode_set_flushed, tree_set_flushed). Event lines and
 * poll wake-ups wait for that mark, so whoever has read a change's event
 * or seen its wake-up reads the new value.
 *
 * Invalidation may block on the kernel's page locks, held while a READ of
 * that file is being answered: it runs on the notifier thread with no lock
 * of ours held, never in a FUSE handler.
 *
 * Must not know: CSI, Docker, LXC, the config.
 */
#ifndef NODEFS_FS_CACHE_H
#define NODEFS_FS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bnode;
struct fuse_session;
struct inode_table;
struct fs_cache;

/* The queue. NULL on OOM. */
struct fs_cache *cache_new(void);
/* Drop what is still queued (its node references). NULL-safe. */
void cache_free(struct fs_cache *c);

/* Queue n's change number seq (the tree notifier's changed(): under the
 * tree's change lock, any thread; never blocks on the kernel). */
void cache_changed(struct fs_cache *c, struct bnode *n, uint64_t seq);
/* Whether changes wait to be flushed. */
bool cache_pending(struct fs_cache *c);

/* Changes taken off the queue, to flush. */
struct cache_batch {
	struct bnode *head;	/* referenced, linked by bnext */
	uint64_t seq;		/* the last change number in it */
};
void cache_take(struct fs_cache *c, struct cache_batch *b);
/* Invalidate what the kernel holds of the batch's nodes (inodes it knows
 * of, in t), then mark their changes flushed and release them. The
 * notifier thread only, holding no lock. se may be NULL (not mounted). */
void cache_flush(struct cache_batch *b, struct fuse_session *se, struct inode_table *t);

/*
 * The size the kernel holds of a cached file is that of the text last told
 * with it (lookup, getattr, readdirplus); the kernel cuts a page it reads
 * to that size. cache_told_set() records the text a reply's size was
 * taken from; cache_told_fit() makes a READ's fresh render fit: when its
 * length differs from the told text's, the READ serves the told text (a
 * change since is not yet flushed, and its invalidation drops the page),
 * so a read never shows a new value cut to an old length. Any thread.
 */
struct fs_inode;
struct sbuf;
void cache_told_set(struct fs_cache *c, struct fs_inode *i, uint64_t version, const char *buf,
		    size_t len);
/* *version: the node version the snapshot shows (the told one's when it
 * was swapped in). */
void cache_told_fit(struct fs_cache *c, struct fs_inode *i, struct sbuf *snap, uint64_t *version);

#endif
