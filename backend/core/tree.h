/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tree: the object tree the filesystem shows.
 *
 * Every directory of the mount is a struct bnode: the root, the collections
 * (volumes/, containers/, ...) and the objects in them (volumes/db/). Its
 * files are data, as Plan 9's Dirtab and configfs attributes: each bnode
 * type (struct btype) exports a table of struct battr {name, mode, show,
 * store}, and fs/ derives lookup, readdir, getattr, open, read and write from
 * those tables. This header is all fs/ knows of the backend: no CSI, Docker
 * or LXC type appears here.
 *
 * Locking: each tree (made with its root, bnode_new_root) has an rwlock
 * that guards its structure (children lists, dead flags); each node's own
 * mutex guards its error line. Trees share nothing: no state is global. Nodes are refcounted; removal
 * marks a node dead, and an old handle then gets ENOENT (configfs).
 *
 * Change notification: the backend calls bnode_changed() whenever what a
 * node's files show changes; the tree forwards it to the notifier fs
 * registered, which wakes pollers and parked readers from its own thread.
 */
#ifndef NODEFS_TREE_H
#define NODEFS_TREE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/types.h>

#include "hmap.h"
#include "nerr.h"
#include "sbuf.h"

struct bnode;
struct tree;

/*
 * A request handed from fs to the backend: a ctl write, a mkdir or an rmdir.
 * A handler either finishes at once (returns >= 0, or -errno with err set)
 * or returns -EINPROGRESS after arranging for breq_complete() to be called
 * exactly once, from any thread, when the action has finished (or, for a
 * nonblock request, as soon as it is checkpointed).
 */
struct breq {
	bool nonblock;		/* opened O_NONBLOCK: complete once checkpointed */
	bool dry_run;		/* check the line's arguments only: act on nothing */
	uid_t uid;		/* the caller */
	gid_t gid;
	pid_t pid;
	/* who, as operations and their events record it:
	 * "uid=0 gid=0 pid=1234 comm=bash" (comm from /proc/PID/comm) */
	char by[96];
	/* the cluster command this line came as (cluster.c: the inbox record's
	 * id), NULL for a local write; its operation's checkpoint carries it */
	const char *cluster_cmd;
	struct sbuf reply;	/* what a later read of the same fd returns (op id) */
	struct nerr err;	/* filled on failure before completion */
	void (*done)(struct breq *rq, int result);	/* set by fs */
	void *fs_ctx;
};

/* Finish an -EINPROGRESS request: result >= 0 or -errno (rq->err set). */
void breq_complete(struct breq *rq, int result);

typedef int (*battr_show_fn)(struct bnode *n, struct sbuf *out);
typedef int (*battr_store_fn)(struct bnode *n, const char *line, size_t len,
			      struct breq *rq);

/* A file whose reads wait for data (events, wait). */
struct bstream_ops {
	/* Make per-open state (*ret_st). -errno. */
	int (*open)(struct bnode *n, void **ret_st);
	/* Append what is ready (at most max bytes, whole lines) to out. Returns
	 * > 0 when something was appended, -EAGAIN when nothing is ready yet
	 * (fs parks the read and retries after the node changes), 0 at end. */
	int (*read)(struct bnode *n, void *st, struct sbuf *out, size_t max);
	/* 1 when a read would return data at once (poll). */
	int (*ready)(struct bnode *n, void *st);
	void (*close)(struct bnode *n, void *st);
};

enum {
	BATTR_CTL = 1u << 0,	/* a ctl file: writable per ctl policy */
	BATTR_POLL = 1u << 1,	/* poll() wakes when the node changes */
	/* sensitive (environment values, logs, what a plugin returned): root
	 * and the read group only, mode 0440 (0400 without a read group) */
	BATTR_PRIV = 1u << 2,
	/* what it shows changes only with a bnode_changed() of its node: the
	 * kernel may keep it in the page cache until fs invalidates it */
	BATTR_CACHE = 1u << 3,
	/* what it shows changes only with a bnode_changed() of its node, but
	 * its length may (a state): fs serves it direct and lets the readers of
	 * one version share one render */
	BATTR_VERSIONED = 1u << 4,
	/* what it shows changes with time as well as with its node (stats):
	 * fs serves it direct and lets its readers share one render for at most
	 * the mount's cache_max_age, ended early by a bnode_changed() */
	BATTR_AGED = 1u << 5,
};

struct battr {
	const char *name;
	unsigned flags;
	battr_show_fn show;	/* NULL for stream files */
	battr_store_fn store;	/* ctl files only */
	/* ctl files: one line's syntax, arity and every argument's value,
	 * without acting (a write of several lines is checked whole before
	 * its first line runs); what depends on the objects' states (a name
	 * taken, a volume busy) is the store's to find when the line runs */
	int (*check)(struct bnode *n, const char *line, size_t len, struct nerr *err);
	const struct bstream_ops *stream;
};

struct btype {
	const char *name;
	const struct battr *attrs;
	size_t nattrs;
	bool can_mkdir;		/* children can be made and removed by mkdir/rmdir */
	int (*mkdir)(struct bnode *dir, const char *name, struct breq *rq);
	int (*rmdir)(struct bnode *dir, struct bnode *child, struct breq *rq);
	void (*free)(struct bnode *n);	/* release n->priv */
	/* A directory whose children are kept on demand (cluster/'s other
	 * nodes' objects): fs calls it on a lookup in n and before a listing
	 * of n, from a FUSE thread, before it looks at the children; it may
	 * block for about one backend round trip. NULL for most. */
	void (*touch)(struct bnode *n);
};

/* An error line: a time, the command line that failed, the message. */
#define BNODE_ERROR_MAX (NERR_MSG_MAX + 128)
/* A node's name: longer ones are cut to this many characters. */
#define BNODE_NAME_MAX 64

struct bnode {
	atomic_uint ref;
	atomic_bool dead;
	bool queued;		/* in the notifier's queue, linked by qnext */
	bool pooled;		/* its block is from a pool (bnode_new_priv) */
	const struct btype *type;
	struct bnode *parent;	/* holds a reference while attached */
	uint64_t serial;	/* unique within the daemon's life, rising */
	atomic_uint_fast64_t version;	/* bumped by bnode_changed() */
	/* the version whose change the notifier has made visible (kernel
	 * caches invalidated); pollers wake on it, never on version */
	atomic_uint_fast64_t flushed;
	struct bnode *qnext;	/* (queued and qnext under the notifier's own lock) */
	struct bnode *bnext;	/* in the batch it flushes (its thread) */
	void *priv;
	void *owner;		/* the backend; inherited from the parent on add */
	struct tree *tree;	/* the tree it was added to (referenced); NULL before */

	/* children, under the tree lock; NULL until the first is added, so a
	 * leaf (most nodes: volumes, operations) carries no table */
	struct bkids *kids;

	/* the last error line, under the tree's error lock (a node's own
	 * before it is in a tree, when no other thread sees it); NULL until
	 * one is set (most nodes never have one) */
	char *error;
	char name[];		/* at most 64 characters, allocated to its length */
};

/* Make a detached node with one reference. NULL on OOM. Its serial is
 * given when it is added to a tree. */
struct bnode *bnode_new(const struct btype *type, const char *name, void *priv);
/* The same, with its priv (size bytes, zeroed) in the node's own block:
 * one allocation for an object of which thousands live (an operation), so
 * it does not pin two pages of the heap; from pool when not NULL (then
 * the block must fit POOL_BLOCK_MAX). The type's free must not free priv;
 * it goes with the node. NULL on OOM. */
struct pool;
struct bnode *bnode_new_priv(const struct btype *type, const char *name, size_t size,
			     struct pool *pool);
/* Make the root of a new tree (serial 1): its lock, serials and notifier
 * go with it, and live as long as any node of it. NULL on OOM. */
struct bnode *bnode_new_root(const struct btype *type, const char *name, void *priv);
struct bnode *bnode_ref(struct bnode *n);
void bnode_unref(struct bnode *n);

/* Attach child under dir (takes its own reference). -EEXIST, -ENOENT if dir
 * is dead, -ENOMEM, -EINVAL if dir is in no tree or child in another. */
int bnode_add(struct bnode *dir, struct bnode *child);
/* Detach and mark dead; children are detached first. Idempotent. */
void bnode_remove(struct bnode *n);
/* A referenced child by name, or NULL. */
struct bnode *bnode_lookup(struct bnode *dir, const char *name);
/* The first child whose serial is > after (for readdir), referenced; NULL at end. */
struct bnode *bnode_next_child(struct bnode *dir, uint64_t after);
size_t bnode_count(struct bnode *dir);
/* Snapshot of the children, referenced, in insertion order; free with
 * bnode_list_free(). */
int bnode_list(struct bnode *dir, struct bnode ***ret, size_t *ret_n);
void bnode_list_free(struct bnode **v, size_t n);

const struct battr *bnode_attr(const struct bnode *n, const char *name, size_t *ret_idx);

/* Set the node's error file to one line: the time now (RFC 3339, UTC,
 * seconds) and msg, which names what failed (fs gives the command line).
 * Truncated at BNODE_ERROR_MAX. */
void bnode_set_error(struct bnode *n, const char *msg);
void bnode_get_error(struct bnode *n, char *buf, size_t len);

/* The node's files show something new: bump version, give the change the
 * tree's next change number, tell the notifier. */
void bnode_changed(struct bnode *n);
/*
 * Change numbers order every bnode_changed() of a tree. The notifier
 * reports, with tree_set_flushed(), the number through which kernel caches
 * have been invalidated; what is published after a change (an event line)
 * is stamped with tree_seq_now() and shown only once tree_seq_flushed()
 * reaches its stamp, so whoever reads it then reads the new files. With no
 * notifier every change counts as flushed at once.
 */
uint64_t tree_seq_now(const struct bnode *any);
uint64_t tree_seq_flushed(const struct bnode *any);
void tree_set_flushed(struct bnode *any, uint64_t seq);
/* The version of n made visible (see flushed above). */
static inline uint64_t bnode_flushed(const struct bnode *n)
{
	return atomic_load(&((struct bnode *)n)->flushed);
}
/* Raise n's flushed version to at least v (the notifier). */
void bnode_set_flushed(struct bnode *n, uint64_t v);
/* What the tree calls on change and removal; fs registers it. Called
 * without tree locks held, from any thread; must not block. changed() is
 * called under the tree's change lock, in change-number order: it may
 * only queue. */
struct tree_notifier {
	void (*changed)(void *ctx, struct bnode *n, uint64_t seq);
	/* n, detached from parent (dead; its name, serial and type stay) */
	void (*removed)(void *ctx, struct bnode *parent, struct bnode *n);
	void *ctx;
};
/* The notifier of root's tree (root from bnode_new_root). */
void tree_set_notifier(struct bnode *root, const struct tree_notifier *nt);
/* One more listener of every bnode_changed() of root's tree, for the
 * backend's own use (cluster.c wakes its publisher with it): called under
 * the tree's change lock, so it may only take a leaf lock and queue. After
 * tree_set_watcher(root, NULL, NULL) returns no call is in progress. */
typedef void (*tree_watch_fn)(void *ctx, struct bnode *n);
void tree_set_watcher(struct bnode *root, tree_watch_fn fn, void *ctx);

/* The show function every directory's "error" file uses. */
int battr_show_error(struct bnode *n, struct sbuf *out);

/*
 * A wait file: a stream that blocks until its object has settled, then
 * gives one line and end of file, at once when it has settled already.
 * settled(n) says whether it has; line(n, out) appends the line (or returns
 * -errno). BWAIT_STREAM(name, settled, line) defines `name`, the
 * struct bstream_ops of such a file, over the bwait_* functions.
 */
typedef bool (*bwait_settled_fn)(struct bnode *n);
typedef int (*bwait_line_fn)(struct bnode *n, struct sbuf *out);
int bwait_open(void **ret_st);
int bwait_read(struct bnode *n, void *st, struct sbuf *out, bwait_settled_fn settled,
	       bwait_line_fn line);
int bwait_ready(struct bnode *n, void *st, bwait_settled_fn settled);
void bwait_close(struct bnode *n, void *st);

#define BWAIT_STREAM(name, settled, line)					\
	static int name##_open(struct bnode *n, void **st)			\
	{									\
		return bwait_open(st);						\
	}									\
	static int name##_read(struct bnode *n, void *st, struct sbuf *out,	\
			       size_t max)					\
	{									\
		return bwait_read(n, st, out, settled, line);			\
	}									\
	static int name##_ready(struct bnode *n, void *st)			\
	{									\
		return bwait_ready(n, st, settled);				\
	}									\
	static const struct bstream_ops name = {				\
		.open = name##_open, .read = name##_read,			\
		.ready = name##_ready, .close = bwait_close,			\
	}

#endif
