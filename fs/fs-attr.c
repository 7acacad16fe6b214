/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fs-attr: names and attributes. Lookup, forget, getattr and setattr, the
 * directories (opendir, readdir, readdirplus), and the renders every room
 * uses (fs_render: timed, marking files whose renders call out, for the
 * leader to hand over). Owns what a file's mode, owner and size say; a
 * cached file's size comes from cache.c. Knows nothing of open files or
 * of what ctl writes do.
 *
 * Must not know: CSI, Docker, LXC, the config.
 */
#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "fs-internal.h"
#include "fs-ops.h"
#include "inode.h"
#include "nerr.h"
#include "nodefs-config.h"
#include "sbuf.h"
#include "tree.h"

/* ---- attributes ---- */

static mode_t file_mode(struct fs *f, const struct battr *a)
{
	if (a->flags & BATTR_CTL)
		return S_IFREG | (f->opts.has_ctl_gid ? 0220 : 0200);
	if (a->flags & BATTR_PRIV)
		return S_IFREG | (f->opts.has_read_gid ? 0440 : 0400);
	return S_IFREG | 0444;
}

atomic_uint *fs_slow_slot(void *ctx_fs, const struct battr *a)
{
	struct fs *f = ctx_fs;

	return &f->slow[((uintptr_t)a / sizeof(*a)) % SLOW_SLOTS];
}

#if NODEFS_TEST_HOOKS
/* Test builds: NODEFS_TEST_SLOW_RENDER="NAME:MS" makes each render of a
 * file called NAME, and each write of a ctl file called NAME, take MS
 * milliseconds longer, as a render that calls out to a hung plugin or a
 * write whose operation checkpoint waits for a slow disk would. */
void fs_slow_render_hook(const struct battr *a)
{
	const char *spec = getenv("NODEFS_TEST_SLOW_RENDER");
	const char *colon = spec ? strchr(spec, ':') : NULL;

	if (colon && strlen(a->name) == (size_t)(colon - spec) &&
	    strncmp(spec, a->name, (size_t)(colon - spec)) == 0)
		usleep((useconds_t)atoi(colon + 1) * 1000);
}
#endif

/* A render or a ctl write of one attribute took t1 - t0: one over
 * SLOW_RENDER_NS marks the attribute, so the leader hands the device over
 * before the next SLOW_RENDER_TIMES of them (fs_may_wait); each quick one
 * takes a mark off. */
void fs_took(atomic_uint *slot, const struct timespec *t0, const struct timespec *t1)
{
	unsigned k;

	if ((t1->tv_sec - t0->tv_sec) * 1000000000L + (t1->tv_nsec - t0->tv_nsec) > SLOW_RENDER_NS) {
		atomic_store(slot, SLOW_RENDER_TIMES);
	} else {
		k = atomic_load(slot);
		while (k && !atomic_compare_exchange_weak(slot, &k, k - 1))
			;
	}
}

/* Render a's snapshot of n; a render that took long marks a for the next
 * ones to be handed over (fs_may_wait). */
int fs_render(struct fs *f, const struct battr *a, struct bnode *n, struct sbuf *out)
{
	atomic_uint *slot = fs_slow_slot(f, a);
	struct timespec t0, t1;
	int r;

	if (!a->show)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
#if NODEFS_TEST_HOOKS
	fs_slow_render_hook(a);
#endif
	r = a->show(n, out);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fs_took(slot, &t0, &t1);
	return r;
}

int fs_cache_render(void *ctx, struct bnode *n, const struct battr *a, struct sbuf *out)
{
	return fs_render(ctx, a, n, out);
}

static void fill_stat(struct fs *f, struct fs_inode *i, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = i->ino;
	st->st_uid = 0;
	st->st_gid = 0;
	st->st_atime = st->st_mtime = st->st_ctime = f->mount_time;
	st->st_blksize = 4096;
	if (i->attr < 0) {
		st->st_mode = S_IFDIR | 0555;
		if (i->node->type->can_mkdir) {
			st->st_mode = S_IFDIR | (f->opts.has_ctl_gid ? 0775 : 0755);
			st->st_gid = f->opts.has_ctl_gid ? f->opts.ctl_gid : 0;
		}
		st->st_nlink = 2;
		return;
	}
	const struct battr *a = &i->node->type->attrs[i->attr];
	st->st_mode = file_mode(f, a);
	st->st_nlink = 1;
	if (a->flags & BATTR_CTL)
		st->st_gid = f->opts.has_ctl_gid ? f->opts.ctl_gid : 0;
	else if (a->flags & BATTR_PRIV)
		st->st_gid = f->opts.has_read_gid ? f->opts.read_gid : 0;
	/*
	 * A cached file (BATTR_CACHE) has its real size: the kernel serves
	 * reads from the page cache up to it, and asks again only after an
	 * invalidation (cache.h). Any other file has size 0, as procfs says:
	 * its content is made by the read, which runs to EOF (direct_io: the
	 * kernel never clamps a read to st_size), and rendering here would
	 * double the work of every read.
	 */
	st->st_size = 0;
	if ((a->flags & BATTR_CTL) && a->show) {
		/*
		 * A ctl file has the length of what a read of it gives, its
		 * usage (a static text). It is also what lets its writers run
		 * in parallel: the kernel lets a write share the inode only
		 * within the size it knows (fs-file.c, reply_open), and a
		 * command line is shorter than the usage that lists it.
		 */
		struct sbuf u = SBUF_INIT(FILE_SNAPSHOT_CAP);

		if (fs_render(f, a, i->node, &u) >= 0)
			st->st_size = (off_t)u.len;
		sbuf_free(&u);
	}
	if (a->flags & BATTR_CACHE) {
		size_t len;

		if (cache_size(f->cache, i, &len) == 0)
			st->st_size = (off_t)len;
	}
}

void fs_reply_entry(fuse_req_t req, struct fs *f, struct fs_inode *i)
{
	struct fuse_entry_param e = { 0 };

	e.ino = i->ino;
	e.generation = inode_generation(f->inodes);
	e.attr_timeout = f->opts.attr_timeout;
	e.entry_timeout = f->opts.entry_timeout;
	fill_stat(f, i, &e.attr);
	if (fuse_reply_entry(req, &e) == -ENOENT)	/* lookup aborted */
		inode_forget(f->inodes, i->ino, 1);
}

struct fs_inode *fs_live_dir(struct fs *f, fuse_ino_t ino, int *err)
{
	struct fs_inode *i = inode_get(f->inodes, ino);

	if (!i || atomic_load(&i->node->dead)) {
		*err = ENOENT;
		return NULL;
	}
	if (i->attr >= 0) {
		*err = ENOTDIR;
		return NULL;
	}
	return i;
}

void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	FS_OP(req, FSOP_LOOKUP);
	struct fs *f = fuse_req_userdata(req);
	struct fs_inode *p, *i;
	struct bnode *kid;
	size_t idx;
	int err, r;

	p = fs_live_dir(f, parent, &err);
	if (!p) {
		fuse_reply_err(req, err);
		return;
	}
	if (p->node->type->touch)
		p->node->type->touch(p->node);
	if (bnode_attr(p->node, name, &idx)) {
		r = inode_lookup(f->inodes, p->node, (int)idx, &i);
	} else {
		kid = bnode_lookup(p->node, name);
		if (!kid) {
			fuse_reply_err(req, ENOENT);
			return;
		}
		r = inode_lookup(f->inodes, kid, -1, &i);
		bnode_unref(kid);
	}
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	fs_reply_entry(req, f, i);
}

void fs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	FS_OP(req, FSOP_FORGET);
	inode_forget(((struct fs *)fuse_req_userdata(req))->inodes, ino, nlookup);
	fuse_reply_none(req);
}

void fs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *v)
{
	FS_OP(req, FSOP_FORGET);
	struct fs *f = fuse_req_userdata(req);

	for (size_t k = 0; k < count; k++)
		inode_forget(f->inodes, v[k].ino, v[k].nlookup);
	fuse_reply_none(req);
}

/* The inode of ino if its object lives; else ENOENT is answered and NULL
 * returned. */
static struct fs_inode *live_or_reply(fuse_req_t req, struct fs *f, fuse_ino_t ino)
{
	struct fs_inode *i = inode_get(f->inodes, ino);

	if (!i || atomic_load(&i->node->dead)) {
		fuse_reply_err(req, ENOENT);
		return NULL;
	}
	return i;
}

void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_GETATTR);
	struct fs *f = fuse_req_userdata(req);
	struct fs_inode *i = live_or_reply(req, f, ino);
	struct stat st;

	if (!i)
		return;
	fill_stat(f, i, &st);
	fuse_reply_attr(req, &st, f->opts.attr_timeout);
}

void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_SETATTR);
	struct fs *f = fuse_req_userdata(req);
	struct fs_inode *i = live_or_reply(req, f, ino);
	struct stat st;

	if (!i)
		return;
	/* `echo cmd > ctl` truncates first: that succeeds and does nothing.
	 * Times may be touched (touch ctl); nothing else changes. */
	if (to_set & ~(FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
		       FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if ((to_set & FUSE_SET_ATTR_SIZE) &&
	    (i->attr < 0 || !(i->node->type->attrs[i->attr].flags & BATTR_CTL))) {
		fuse_reply_err(req, i->attr < 0 ? EISDIR : EACCES);
		return;
	}
	if (i->attr >= 0 && (i->node->type->attrs[i->attr].flags & BATTR_CTL) &&
	    fs_req_may(req, f->opts.has_ctl_gid, f->opts.ctl_gid) < 0) {
		atomic_fetch_add(&f->denied_writes, 1);
		fuse_reply_err(req, EACCES);
		return;
	}
	fill_stat(f, i, &st);
	fuse_reply_attr(req, &st, f->opts.attr_timeout);
}

/* ---- directories ---- */

void fs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_OPENDIR);
	struct fs *f = fuse_req_userdata(req);
	int err;

	/* the first OPENDIR answered ENOSYS turns them off for the mount: the
	 * kernel then opens directories itself, with the flags below as its
	 * default (keep_cache, cache_readdir), and sends no RELEASEDIR. A
	 * removed directory still open by a process reads ENOENT (readdir) */
	if (f->no_opendir) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if (!fs_live_dir(f, ino, &err)) {
		fuse_reply_err(req, err);
		return;
	}
	/* the kernel keeps the listing until the directory's next change
	 * invalidates it (cache.h) */
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct fs *f = fuse_req_userdata(req);
	struct fs_inode *i;
	struct bnode *n;
	char *buf;
	size_t used = 0;
	uint64_t o = (uint64_t)off;
	int err;

	i = fs_live_dir(f, ino, &err);
	if (!i) {
		fuse_reply_err(req, err);
		return;
	}
	n = i->node;
	if (o == 0 && n->type->touch)
		n->type->touch(n);
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* offsets: 1 ".", 2 "..", 3.. attributes, then DIR_OFF_KIDS + serial */
	for (;;) {
		struct fuse_entry_param e = { 0 };
		struct fs_inode *ei = NULL;
		const char *name;
		uint64_t next;
		struct bnode *kid = NULL;
		int attr = -1;
		size_t len;

		if (o == 0 || o == 1) {
			name = o == 0 ? "." : "..";
			e.attr.st_mode = S_IFDIR;
			next = o + 1;
		} else if (o < DIR_OFF_KIDS && o - 2 < n->type->nattrs) {
			attr = (int)(o - 2);
			name = n->type->attrs[attr].name;
			e.attr.st_mode = file_mode(f, &n->type->attrs[attr]);
			next = o + 1;
		} else {
			uint64_t after = o >= DIR_OFF_KIDS ? o - DIR_OFF_KIDS : 0;
			kid = bnode_next_child(n, after);
			if (!kid)
				break;
			name = kid->name;
			e.attr.st_mode = S_IFDIR;
			next = DIR_OFF_KIDS + kid->serial;
		}
		if (!plus) {
			e.attr.st_ino = 0xffffffff;	/* unused without use_ino */
			len = fuse_add_direntry(req, buf + used, size - used, name, &e.attr, (off_t)next);
		} else {
			/* readdirplus hands the kernel an entry (a lookup) for a
			 * directory, which a walk goes into. A file's entry has
			 * no number, so the kernel keeps only its name and type,
			 * and looks it up when it is opened or stat'ed: a walk
			 * (find) never costs an inode per file, here or in the
			 * kernel. "." and ".." are not kept either. */
			if (kid && inode_lookup(f->inodes, kid, -1, &ei) == 0) {
				e.ino = ei->ino;
				e.generation = inode_generation(f->inodes);
				e.attr_timeout = f->opts.attr_timeout;
				e.entry_timeout = f->opts.entry_timeout;
				fill_stat(f, ei, &e.attr);
			}
			if (!ei)	/* the dirent's own number: never 0 */
				e.attr.st_ino = (ino_t)inode_number(kid ? kid->serial : n->serial,
								    kid ? -1 : attr);
			len = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, (off_t)next);
			if (len > size - used && ei)
				inode_forget(f->inodes, ei->ino, 1);	/* did not fit: not handed over */
		}
		bnode_unref(kid);
		if (len > size - used)
			break;
		used += len;
		o = next;
		if (o == 2 + n->type->nattrs && o < DIR_OFF_KIDS)
			o = DIR_OFF_KIDS;	/* attributes done: children from the first */
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_READDIR);
	readdir_common(req, ino, size, off, false);
}

void fs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_READDIRPLUS);
	readdir_common(req, ino, size, off, true);
}

