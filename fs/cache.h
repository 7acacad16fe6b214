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
 * that file is being answered: it runs on the notifier thread, never in a
 * FUSE handler, holding only the file's attribute lock, which no READ
 * takes. It first waits, in user space, for the READs of that file that
 * nodefs has read and not answered (inflight.h, bounded): a SIGKILL then
 * finds the notifier outside the kernel.
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
struct inflight;
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

/* Cached files a flush left in the kernel's cache, their text unchanged. */
uint64_t cache_kept(struct fs_cache *c);

/* Changes taken off the queue, to flush. */
struct cache_batch {
	struct bnode *head;	/* referenced, linked by bnext */
	uint64_t seq;		/* the last change number in it */
};
void cache_take(struct fs_cache *c, struct cache_batch *b);
/* Invalidate what the kernel holds of the batch's nodes (inodes it knows
 * of, in t) and drop their cached files' told texts (a cached file whose
 * text a render shows unchanged keeps both), then mark their changes flushed and release them. The
 * notifier thread only, holding no lock. se may be NULL (not mounted). */
void cache_flush(struct fs_cache *c, struct cache_batch *b, struct fuse_session *se,
		 struct inode_table *t, struct inflight *inf);

/*
 * The text of a cached file, as the kernel sees it. The kernel takes a
 * file's size from every reply that carries attributes (lookup, getattr,
 * readdirplus) and cuts the pages a READ fills to it; so every such reply
 * and every READ serve one text, the inode's told text, until the
 * notifier's flush of a change drops it:
 *
 *   attribute lock; notify_inval_inode; told -> prev; unlock
 *
 * An attribute reply computed before the flush took the lock answers a
 * request the kernel sent before the invalidation, which makes the kernel
 * drop it (its attr_version is older); one computed after renders the new
 * text. A READ never waits for the attribute lock (the invalidation waits
 * for the page lock a READ in flight holds): between the drop and the next
 * attribute reply it serves prev, the text of the size the kernel may
 * still hold (a reader that checked the attributes before the
 * invalidation); a reader that starts after it asks for the attributes
 * again (auto_inval_data: the kernel refreshes invalid attributes at every
 * read) and so gets the new text.
 *
 * Why a file whose length changes (a state) is not BATTR_CACHE but
 * BATTR_VERSIONED (served direct, one render shared per version, fs-ops.h):
 * the kernel (fs/fuse/dir.c, inode.c) reads fc->attr_version before it
 * queues a GETATTR and drops the reply if the inode's attr_version has
 * moved on meanwhile (an invalidation, another accepted reply, a short
 * READ), without a word to us; the reader then copies pages up to the size
 * it had, so a new, longer text is cut ("NODE_STA"). Nothing we can see
 * tells such a request from one sent after the invalidation: a
 * NOTIFY_RETRIEVE marker orders requests by when they were queued, not by
 * when their attr_version was read (before the queueing, with no lock
 * between); the reply is checked in the reader's task after our write
 * returns, so the order of our writes is not the kernel's; a NOTIFY_STORE
 * that grows the size writes i_size before the pages, so a reader between
 * them copies zeros; a READ carries no size. Every scheme that serves the
 * new text through the old inode's pages leaves a reader that can cut it.
 * Only files whose length never changes while cached (ids, names) are
 * BATTR_CACHE; no-open (which would drop OPEN and RELEASE) is mount-wide in
 * the kernel and would take per-open state from ctl answers, snapshots and
 * streams.
 */
struct fs_inode;
struct sbuf;
struct battr;

/* Render a of n into out (fs.c's render: timed, marks slow files). */
typedef int (*cache_render_fn)(void *ctx, struct bnode *n, const struct battr *a,
			       struct sbuf *out);
void cache_set_render(struct fs_cache *c, cache_render_fn render, void *ctx);

/* The size an attribute reply tells of cached file i: its told text's,
 * rendered now when it has none. -errno of the render (the reply then
 * says 0 and tells nothing). A FUSE handler of i. */
int cache_size(struct fs_cache *c, struct fs_inode *i, size_t *ret_len);
/* What a READ of cached file i serves, into snap (reset first): the told
 * text; else prev; else a fresh render, which becomes the told text.
 * *ret_version: the node version the text shows. -errno. A FUSE handler of
 * i; never waits on the attribute lock. */
int cache_read(struct fs_cache *c, struct fs_inode *i, struct sbuf *snap, uint64_t *ret_version);

#endif
