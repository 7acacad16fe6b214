/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * inode: the inode table of the mount.
 *
 * An inode number stands for (node, attr): a directory is a tree node
 * (attr -1), a file a node and the index of one of its attributes. The
 * number is made of the two, serial * 64 + attr + 1 (the root's directory
 * is INODE_ROOT), so it needs no map of its own, and as serials rise and
 * are never reused, one number stands for one file for the table's life: a
 * recreated volumes/db (a new node, with a new serial) is a new inode even
 * while the kernel still holds the old one (Plan 9's qid.vers), and a file
 * the kernel forgot and looks up again gets its number back. Each entry
 * counts the kernel's lookups; forgetting the last one drops the entry and
 * its node reference. Every inode carries the table's generation, fixed
 * when the table is made (one per mount), so (ino, generation) never
 * repeats across mounts either.
 *
 * An entry is small (40 bytes: after a walk the kernel holds one for
 * every file of every object); what only a file that is opened, read or
 * cached needs is in its ext, made on first need.
 *
 * Thread-safe: FUSE threads and the notifier share one table. Must not
 * know: FUSE (fs.c maps its requests onto this), CSI, Docker, LXC.
 */
#ifndef NODEFS_INODE_H
#define NODEFS_INODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define INODE_ROOT 1	/* FUSE_ROOT_ID */

struct bnode;
struct inode_table;

/* Most types have a dozen files; a number leaves room for 63. */
#define INODE_MAX_ATTRS 63

/* What a file that is opened, read or cached needs beside its entry. */
struct fs_inode_ext {
	/* a cached file: the node version the last READ served, which is
	 * what the kernel's pages hold (fs.c's poll) */
	_Atomic uint64_t filled;
	/* a cached file: the text whose size the kernel was told, and the one
	 * told before the last invalidation (malloc'd blocks of fs/cache.c's,
	 * under its locks; freed with the entry) */
	void *told, *prev;
	/* the buffer the last snapshot of this file took, what an open is
	 * charged for it before its first read (fs/budget.h); 0: unknown */
	_Atomic size_t snap_hint;
	/* a BATTR_VERSIONED file: the render its open files share (struct
	 * fs_snap of fs-ops.h), NULL when none holds one; under fs's share
	 * lock of the inode, no reference of its own. A BATTR_AGED file's
	 * holds a reference of its own, the last while no file is open:
	 * freed with the entry (a malloc'd block) */
	void *shared;
};

struct fs_inode {
	uint64_t ino;
	struct bnode *node;	/* referenced */
	uint64_t nlookup;	/* under the table's lock */
	/* NULL until inode_ext; then fixed for the entry's life */
	struct fs_inode_ext *_Atomic ext;
	int32_t attr;		/* -1: the directory itself */
	/* under the table's lock: holders outside a request (the notifier);
	 * a forgotten entry with pins is freed by the last unpin */
	uint16_t pins;
	bool gone;
};

/* A table holding root as INODE_ROOT (one lookup that is never forgotten),
 * whose inodes carry generation. -ENOMEM. */
int inode_table_new(struct bnode *root, uint64_t generation, struct inode_table **ret);
/* Drop every entry and its node reference. NULL-safe. */
void inode_table_free(struct inode_table *t);
/* The number of (node serial, attr), attr -1 for the directory, whether
 * or not the table holds it. */
uint64_t inode_number(uint64_t serial, int attr);
/* The generation every inode of t carries. */
uint64_t inode_generation(const struct inode_table *t);
/* i's ext, made now if it has none: NULL on OOM. Any thread holding i. */
struct fs_inode_ext *inode_ext(struct fs_inode *i);

/* The entry of ino, or NULL. It stays valid while the kernel holds ino
 * (its lookups are not all forgotten): the kernel sends no request for an
 * inode after its FORGET, so a request may use its own inode's entry. */
struct fs_inode *inode_get(struct inode_table *t, uint64_t ino);
/* Find or make the inode of (node, attr) and count one lookup: 0 with
 * *ret, -ENOMEM, -EOVERFLOW for an attr of INODE_MAX_ATTRS or more. A new
 * entry takes a node reference. */
int inode_lookup(struct inode_table *t, struct bnode *node, int attr, struct fs_inode **ret);
/* Forget n lookups of ino (FORGET); at zero the entry and its node
 * reference go. The root and unknown numbers are left alone. */
void inode_forget(struct inode_table *t, uint64_t ino, uint64_t n);
/* The inode of the directory node with this serial, 0 if there is none
 * (the kernel holds no entry of it: nothing to invalidate). */
uint64_t inode_of_dir(struct inode_table *t, uint64_t serial);
/* The inode of (node serial, attr), attr -1 for the directory; 0 if none. */
uint64_t inode_of(struct inode_table *t, uint64_t serial, int attr);
/* The entry of (node serial, attr), pinned: it stays valid, though the
 * kernel may forget it meanwhile, until inode_unpin. NULL if none. For a
 * thread that is not answering a request of that inode (the notifier). */
struct fs_inode *inode_pin(struct inode_table *t, uint64_t serial, int attr);
void inode_unpin(struct inode_table *t, struct fs_inode *i);
/* How many entries the table holds, the root included. */
size_t inode_count(struct inode_table *t);

#endif
