/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fs: FUSE low-level operations derived from the backend's attribute tables.
 *
 * Inodes: the inode table (inode.h) maps ino -> {node, attr, nlookup,
 * generation}. A directory is a tree node (attr -1); a file is a node and
 * the index of one of its attributes. Inode numbers are never reused within
 * a mount, so a recreated volumes/db is a new inode (Plan 9's qid.vers).
 *
 * Reads serve a snapshot taken at offset 0 and continued at later offsets
 * (sysfs); stream files (events) park the read until data arrives. Writes
 * carry whole command lines; each is handed to the attribute's store and
 * the reply goes out when the backend completes it, from whatever thread.
 *
 * Kernel notifications (poll wake-ups, entry invalidation) and parked reads
 * are served by a notifier thread, never from inside a FUSE handler.
 *
 * Must not know: CSI, Docker, LXC, the config.
 */
#define FUSE_USE_VERSION 312

#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>	/* the request header, for fs_may_wait */
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "ctl.h"
#include "fs-internal.h"
#include "hist.h"
#include "inode.h"
#include "log.h"
#include "nerr.h"
#include "nodefs-config.h"
#include "redact.h"
#include "sbuf.h"
#include "tree.h"

#define FILE_SNAPSHOT_CAP (16u << 20)
#define STREAM_WINDOW (256u << 10)	/* stream bytes kept for seeks back */
#define DIR_OFF_ATTRS 3			/* 1 ".", 2 "..", then attributes */
#define DIR_OFF_KIDS (1ull << 40)	/* children: base + serial */
#define SLOW_SLOTS 256
#define SLOW_RENDER_NS 250000		/* a render this long may call out */
#define SLOW_RENDER_TIMES 32		/* hand over that many renders after it */

/* ---- request metrics ---- */

enum fs_op {
	FSOP_LOOKUP, FSOP_FORGET, FSOP_GETATTR, FSOP_SETATTR, FSOP_MKDIR, FSOP_RMDIR, FSOP_OPEN,
	FSOP_READ, FSOP_WRITE, FSOP_RELEASE, FSOP_OPENDIR, FSOP_READDIR, FSOP_READDIRPLUS,
	FSOP_STATFS, FSOP_POLL, FSOP_MAX,
};

static const char *const fs_op_names[FSOP_MAX] = {
	"lookup", "forget", "getattr", "setattr", "mkdir", "rmdir", "open", "read", "write",
	"release", "opendir", "readdir", "readdirplus", "statfs", "poll",
};

/* seconds; a handler's own time (an action a ctl write starts is timed by
 * its operation) */
static const double fs_buckets[] = {
	0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1,
};
#define FS_NBUCKETS (sizeof(fs_buckets) / sizeof(fs_buckets[0]))

struct fs_opstat {
	struct hist h;
};

struct fs_optimer {
	struct fs_opstat *st;
	struct timespec t0;
};

static void fs_optimer_done(struct fs_optimer *t)
{
	struct timespec t1;
	uint64_t ns;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	ns = (uint64_t)(t1.tv_sec - t->t0.tv_sec) * 1000000000u + (uint64_t)(t1.tv_nsec - t->t0.tv_nsec);
	hist_observe(&t->st->h, fs_buckets, FS_NBUCKETS, ns);
}

/* Time the rest of the handler: the timer stops when the scope ends. */
#define FS_OP(req, op)								\
	struct fs_optimer _fs_timer_ __attribute__((cleanup(fs_optimer_done))) = { \
		.st = &((struct fs *)fuse_req_userdata(req))->opstat[op] };	\
	clock_gettime(CLOCK_MONOTONIC, &_fs_timer_.t0)

struct fs_file;
struct fs_req;

/*
 * The requests handed to the backend (ctl writes, mkdir, rmdir) that it
 * has not completed yet. At a stop the backend may still hold some when
 * the session must go: fs_free answers them (ESHUTDOWN) and detaches them,
 * so a late breq_complete only frees its request. The list outlives the
 * struct fs while a request is in it.
 */
struct fs_pending {
	pthread_mutex_t lock;
	pthread_cond_t idle;		/* completing dropped to 0 */
	unsigned ref;			/* the fs's, and one per request */
	unsigned completing;		/* completions answering now */
	bool detached;
	struct fs_req *head;
};

struct fs_removal {
	uint64_t parent_serial, serial;
	char name[65];
	struct fs_removal *next;
};

struct fs {
	struct fuse_session *se;
	struct fs_opts opts;	/* opts.redact points at redact */
	/* writes and sensitive reads refused for permission (fs enforces the
	 * modes: the mount has no default_permissions) */
	atomic_ullong denied_writes, denied_reads;
	char **redact;
	struct bnode *root;
	time_t mount_time;
	bool mounted;
	bool signals;		/* SIGTERM, SIGINT, SIGHUP end the session */

	struct inode_table *inodes;

	/* the notifier: watched files (pollers, parked readers) and removals */
	pthread_mutex_t wlock;
	pthread_cond_t wcond;
	struct fs_file *watchers;	/* doubly linked */
	struct fs_removal *removals;
	struct fs_cache *cache;		/* changes to flush (cache.h) */
	bool dirty;
	bool stop;
	pthread_t notifier;
	bool notifier_running;
	struct fs_opstat opstat[FSOP_MAX];
	/* renders still to hand over per attribute (hashed; a collision only
	 * hands over more), see fs_may_wait */
	atomic_uint slow[SLOW_SLOTS];
	pthread_mutex_t flock;	/* files */
	struct fs_file *files;	/* open files, freed at unmount if still open */
	struct fs_pending *pending;
};

struct fs_file {
	struct fs *fs;
	struct bnode *node;	/* referenced */
	const struct battr *attr;
	bool nonblock;

	pthread_mutex_t lock;	/* snapshot and reply */
	struct sbuf snap;
	bool snapped;
	uint64_t snap_version;
	struct sbuf reply;	/* what a nonblock ctl write answered */
	size_t reply_pos;	/* how much of it reads have taken */
	struct sbuf pending;	/* stream bytes read from the backend, not yet taken */
	uint64_t pending_base;	/* file offset of pending.buf[0] */
	struct fs_inode *inode;	/* held by the kernel while the file is open */
	uint64_t open_flushed;	/* bnode_flushed() at open (cached files) */
	uint64_t told;		/* the flushed version POLLPRI last reported */
	struct fs_file *next, *prev;	/* fs->files, under fs->flock */
	void *stream;		/* stream state */

	/* under fs->wlock */
	struct fuse_pollhandle *ph;
	bool poll_armed;	/* told "nothing new": notify on change */
	fuse_req_t parked;	/* a stream read waiting for data */
	size_t parked_size;
	off_t parked_off;
	bool watching;
	struct fs_file *wprev, *wnext;
};

static void file_free(struct fs *f, struct fs_file *h);

/* ---- attributes ---- */

static mode_t file_mode(struct fs *f, const struct battr *a)
{
	if (a->flags & BATTR_CTL)
		return S_IFREG | (f->opts.has_ctl_gid ? 0220 : 0200);
	if (a->flags & BATTR_PRIV)
		return S_IFREG | (f->opts.has_read_gid ? 0440 : 0400);
	return S_IFREG | 0444;
}

static atomic_uint *slow_slot(void *ctx_fs, const struct battr *a)
{
	struct fs *f = ctx_fs;

	return &f->slow[((uintptr_t)a / sizeof(*a)) % SLOW_SLOTS];
}

#if NODEFS_TEST_HOOKS
/* Test builds: NODEFS_TEST_SLOW_RENDER="NAME:MS" makes each render of a
 * file called NAME, and each write of a ctl file called NAME, take MS
 * milliseconds longer, as a render that calls out to a hung plugin or a
 * write whose operation checkpoint waits for a slow disk would. */
static void slow_render_hook(const struct battr *a)
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
static void took(atomic_uint *slot, const struct timespec *t0, const struct timespec *t1)
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
static int render(struct fs *f, const struct battr *a, struct bnode *n, struct sbuf *out)
{
	atomic_uint *slot = slow_slot(f, a);
	struct timespec t0, t1;
	int r;

	if (!a->show)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
#if NODEFS_TEST_HOOKS
	slow_render_hook(a);
#endif
	r = a->show(n, out);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	took(slot, &t0, &t1);
	return r;
}

static int cache_render(void *ctx, struct bnode *n, const struct battr *a, struct sbuf *out)
{
	return render(ctx, a, n, out);
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
	if (a->flags & BATTR_CACHE) {
		size_t len;

		if (cache_size(f->cache, i, &len) == 0)
			st->st_size = (off_t)len;
	}
}

static void reply_entry(fuse_req_t req, struct fs *f, struct fs_inode *i)
{
	struct fuse_entry_param e = { 0 };

	e.ino = i->ino;
	e.generation = i->generation;
	e.attr_timeout = f->opts.attr_timeout;
	e.entry_timeout = f->opts.entry_timeout;
	fill_stat(f, i, &e.attr);
	if (fuse_reply_entry(req, &e) == -ENOENT)	/* lookup aborted */
		inode_forget(f->inodes, i->ino, 1);
}

static struct fs_inode *live_dir(struct fs *f, fuse_ino_t ino, int *err)
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

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	FS_OP(req, FSOP_LOOKUP);
	struct fs *f = fuse_req_userdata(req);
	struct fs_inode *p, *i;
	struct bnode *kid;
	size_t idx;
	int err, r;

	p = live_dir(f, parent, &err);
	if (!p) {
		fuse_reply_err(req, err);
		return;
	}
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
	reply_entry(req, f, i);
}

static void fs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	FS_OP(req, FSOP_FORGET);
	inode_forget(((struct fs *)fuse_req_userdata(req))->inodes, ino, nlookup);
	fuse_reply_none(req);
}

static void fs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *v)
{
	FS_OP(req, FSOP_FORGET);
	struct fs *f = fuse_req_userdata(req);

	for (size_t k = 0; k < count; k++)
		inode_forget(f->inodes, v[k].ino, v[k].nlookup);
	fuse_reply_none(req);
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_GETATTR);
	struct fs *f = fuse_req_userdata(req);
	struct fs_inode *i = inode_get(f->inodes, ino);
	struct stat st;

	if (!i || atomic_load(&i->node->dead)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_stat(f, i, &st);
	fuse_reply_attr(req, &st, f->opts.attr_timeout);
}

static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_SETATTR);
	struct fs *f = fuse_req_userdata(req);
	struct fs_inode *i = inode_get(f->inodes, ino);
	struct stat st;

	if (!i || atomic_load(&i->node->dead)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
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

static void fs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_OPENDIR);
	struct fs *f = fuse_req_userdata(req);
	int err;

	if (!live_dir(f, ino, &err)) {
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

	i = live_dir(f, ino, &err);
	if (!i) {
		fuse_reply_err(req, err);
		return;
	}
	n = i->node;
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
			/* readdirplus hands the kernel an entry: a lookup, except
			 * for "." and ".." which it does not keep */
			if (o >= 2 && inode_lookup(f->inodes, kid ? kid : n, kid ? -1 : attr, &ei) == 0) {
				e.ino = ei->ino;
				e.generation = i->generation;
				e.attr_timeout = f->opts.attr_timeout;
				e.entry_timeout = f->opts.entry_timeout;
				fill_stat(f, ei, &e.attr);
			}
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

static void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_READDIR);
	readdir_common(req, ino, size, off, false);
}

static void fs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_READDIRPLUS);
	readdir_common(req, ino, size, off, true);
}

/* ---- requests handed to the backend (ctl writes, mkdir, rmdir) ---- */

enum fs_req_kind { FSR_WRITE, FSR_MKDIR, FSR_RMDIR };

struct fs_req {
	struct breq rq;
	enum fs_req_kind kind;
	fuse_req_t req;
	struct fs *fs;
	struct fs_pending *pending;	/* referenced; the list r is in */
	struct fs_req *pprev, *pnext;	/* under pending->lock */
	struct bnode *node;	/* the ctl's directory, or the parent */
	struct fs_file *file;	/* writes */
	char *buf;		/* writes: the lines */
	size_t len, pos, size;
	size_t done;		/* writes: the bytes of the lines that have run */
	unsigned nlines;	/* writes: command lines in all */
	unsigned line;		/* writes: the one running (1-based) */
	const char *cur;	/* writes: its text, in buf */
	size_t cur_len;
	char name[65];		/* mkdir */
};

static struct fs_pending *pending_new(void)
{
	struct fs_pending *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->idle, NULL);
	p->ref = 1;
	return p;
}

/* Drop a reference; p->lock held, and released here. */
static void pending_unref_unlock(struct fs_pending *p)
{
	bool last = --p->ref == 0;

	pthread_mutex_unlock(&p->lock);
	if (last) {
		pthread_cond_destroy(&p->idle);
		pthread_mutex_destroy(&p->lock);
		free(p);
	}
}

static void fs_req_free(struct fs_req *r)
{
	struct fs_pending *p = r->pending;

	pthread_mutex_lock(&p->lock);
	if (r->pprev)
		r->pprev->pnext = r->pnext;
	else
		p->head = r->pnext;
	if (r->pnext)
		r->pnext->pprev = r->pprev;
	pending_unref_unlock(p);
	sbuf_free(&r->rq.reply);
	bnode_unref(r->node);
	free(r->buf);
	free(r);
}

/* A command line as the error file shows it: up to 48 bytes, or 45 and
 * "..."; control bytes and every byte past ASCII as \xHH, so the error line
 * stays one line of valid UTF-8 whatever was written. */
static void cmd_excerpt(const char *s, size_t len, char *out, size_t outlen)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, o = 0, take = len > 48 ? 45 : len;

	for (i = 0; i < take && o + 8 < outlen; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c >= 0x7f) {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		} else {
			out[o++] = (char)c;
		}
	}
	if (i < len && o + 4 <= outlen) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
}

/* What failed, as the error file names it: the command line (its first 48
 * bytes, escaped), "line N" first in a write of several; mkdir and rmdir as
 * such. */
static void fs_req_set_error(struct fs_req *r, const char *msg)
{
	char line[BNODE_ERROR_MAX], cmd[48 * 4 + 8];
	size_t len = r->cur_len;
	struct sbuf red = SBUF_INIT(0);
	const char *cur = r->cur;

	/* the error file is world-readable: option values it must not show
	 * (environment values, named parameters) are hidden first */
	if (cur && len && redact_line(cur, len, r->fs->opts.redact, &red) == 0) {
		cur = red.buf;
		len = red.len;
	}

	if (r->kind == FSR_MKDIR || r->kind == FSR_RMDIR) {
		cmd_excerpt(r->name, strlen(r->name), cmd, sizeof(cmd));
		snprintf(line, sizeof(line), "'%s %s': %s", r->kind == FSR_MKDIR ? "mkdir" : "rmdir",
			 cmd, msg);
	} else if (!r->cur || !len) {
		snprintf(line, sizeof(line), "%s", msg);
	} else {
		cmd_excerpt(cur, len, cmd, sizeof(cmd));
		if (r->nlines > 1)
			snprintf(line, sizeof(line), "line %u '%s': %s", r->line, cmd, msg);
		else
			snprintf(line, sizeof(line), "'%s': %s", cmd, msg);
	}
	sbuf_free(&red);
	bnode_set_error(r->node, line);
}

static void fs_req_fail(struct fs_req *r, int result)
{
	const char *msg = r->rq.err.msg[0] ? r->rq.err.msg : strerror(-result);

	fs_req_set_error(r, msg);
	fuse_reply_err(r->req, -result);
	fs_req_free(r);
}

static void write_continue(struct fs_req *r);
static void fs_req_answer(struct fs_req *r, int result);

/*
 * A line of a write failed. When earlier lines have run, the write returns
 * the count of their bytes, a short write, rather than -1 with something
 * done: the writer sees what happened, and one that writes the rest again
 * (stdio, a shell) gets the failing line's errno then. The error file
 * names the line either way.
 */
static void write_fail(struct fs_req *r, int result)
{
	if (!r->rq.err.msg[0])
		nerr_set(&r->rq.err, -result, "%s", strerror(-result));
	if (!r->done) {
		fs_req_fail(r, result);
		return;
	}
	fs_req_set_error(r, r->rq.err.msg);
	fuse_reply_write(r->req, r->done);
	fs_req_free(r);
}

/* breq_complete lands here, on any thread: answer the kernel, unless fs
 * has stopped and answered the request already (fs_pending_detach). */
static void fs_req_done(struct breq *rq, int result)
{
	struct fs_req *r = (struct fs_req *)rq;
	struct fs_pending *p = r->pending;

	pthread_mutex_lock(&p->lock);
	if (p->detached) {
		pthread_mutex_unlock(&p->lock);
		fs_req_free(r);
		return;
	}
	/* fs_free waits for this answer before the session and files go */
	p->completing++;
	pthread_mutex_unlock(&p->lock);
	fs_req_answer(r, result);
	pthread_mutex_lock(&p->lock);
	if (--p->completing == 0)
		pthread_cond_broadcast(&p->idle);
	pthread_mutex_unlock(&p->lock);
}

static void fs_req_answer(struct fs_req *r, int result)
{
	if (result < 0 && r->kind == FSR_WRITE) {
		write_fail(r, result);
		return;
	}
	if (result < 0) {
		fs_req_fail(r, result);
		return;
	}
	switch (r->kind) {
	case FSR_WRITE:
		r->done = r->pos;	/* the line the backend finished */
		if (r->rq.reply.len) {
			pthread_mutex_lock(&r->file->lock);
			sbuf_reset(&r->file->reply);
			r->file->reply_pos = 0;
			sbuf_add(&r->file->reply, r->rq.reply.buf, r->rq.reply.len);
			pthread_mutex_unlock(&r->file->lock);
			sbuf_reset(&r->rq.reply);
		}
		write_continue(r);
		return;
	case FSR_MKDIR: {
		struct bnode *kid = bnode_lookup(r->node, r->name);
		struct fs_inode *i;
		int e;

		if (!kid) {
			fuse_reply_err(r->req, ENOENT);
		} else if ((e = inode_lookup(r->fs->inodes, kid, -1, &i)) < 0) {
			fuse_reply_err(r->req, -e);
		} else {
			reply_entry(r->req, r->fs, i);
		}
		bnode_unref(kid);
		break;
	}
	case FSR_RMDIR:
		fuse_reply_err(r->req, 0);
		break;
	}
	fs_req_free(r);
}

/* The next non-blank command line of a write from *pos: 1 with the line
 * (blanks trimmed), 0 at the end, -EINVAL for a line over CTL_LINE_MAX. */
static int next_cmd_line(const char *buf, size_t len, size_t *pos, const char **ret_line,
			 size_t *ret_len)
{
	while (*pos < len) {
		const char *line = buf + *pos;
		size_t rest = len - *pos, llen, used, lead = 0;
		int k = ctl_next_line(line, rest, &llen, &used);

		if (k < 0)
			return -EINVAL;
		if (k == 0) {	/* a last line without its newline is whole too */
			if (rest > CTL_LINE_MAX)
				return -EINVAL;
			llen = used = rest;
		}
		*pos += used;
		while (llen && (line[llen - 1] == '\r' || line[llen - 1] == ' ' || line[llen - 1] == '\t'))
			llen--;
		while (lead < llen && (line[lead] == ' ' || line[lead] == '\t'))
			lead++;
		if (lead == llen)
			continue;	/* blank lines (echo > ctl) do nothing */
		*ret_line = line + lead;
		*ret_len = llen - lead;
		return 1;
	}
	return 0;
}

/* Run the lines of a write one after another; a line the backend finishes
 * later continues from fs_req_done on the completing thread. */
static void write_continue(struct fs_req *r)
{
	const struct battr *a = r->file->attr;
	const char *line;
	size_t llen;
	int k;

	while ((k = next_cmd_line(r->buf, r->len, &r->pos, &line, &llen)) > 0) {
		r->line++;
		r->cur = line;
		r->cur_len = llen;
		nerr_clear(&r->rq.err);
		int res = a->store(r->file->node, line, llen, &r->rq);
		if (res == -EINPROGRESS)
			return;
		if (res < 0) {
			write_fail(r, res);
			return;
		}
		r->done = r->pos;
		if (r->rq.reply.len) {
			pthread_mutex_lock(&r->file->lock);
			sbuf_reset(&r->file->reply);
			r->file->reply_pos = 0;
			sbuf_add(&r->file->reply, r->rq.reply.buf, r->rq.reply.len);
			pthread_mutex_unlock(&r->file->lock);
			sbuf_reset(&r->rq.reply);
		}
	}
	if (k < 0) {
		nerr_set(&r->rq.err, EINVAL, "command line longer than %d bytes", CTL_LINE_MAX);
		r->cur = "";
		r->cur_len = 0;
		write_fail(r, -EINVAL);
		return;
	}
	fuse_reply_write(r->req, r->size);
	fs_req_free(r);
}

/* Check every line before the first runs: a write whose lines do not all
 * parse and match changes nothing. (A line can still fail when it runs:
 * write_fail.) */
static int write_check(struct fs_req *r)
{
	const struct battr *a = r->file->attr;
	size_t pos = 0;
	const char *line;
	size_t llen;
	int k;

	unsigned n = 0;

	while ((k = next_cmd_line(r->buf, r->len, &pos, &line, &llen)) > 0)
		r->nlines++;
	if (k < 0)
		return nerr_set(&r->rq.err, EINVAL, "command line longer than %d bytes", CTL_LINE_MAX);
	for (pos = 0; next_cmd_line(r->buf, r->len, &pos, &line, &llen) > 0;) {
		int res = a->check ? a->check(r->file->node, line, llen, &r->rq.err) : 0;

		n++;
		if (res < 0) {
			r->line = n;	/* the error file names it */
			r->cur = line;
			r->cur_len = llen;
			return res;
		}
	}
	return 0;
}

static struct fs_req *fs_req_new(fuse_req_t req, enum fs_req_kind kind, struct bnode *node)
{
	struct fs_req *r = calloc(1, sizeof(*r));
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fs_pending *p;

	if (!r)
		return NULL;
	r->kind = kind;
	r->req = req;
	r->fs = fuse_req_userdata(req);
	p = r->pending = r->fs->pending;
	pthread_mutex_lock(&p->lock);
	p->ref++;
	r->pnext = p->head;
	if (p->head)
		p->head->pprev = r;
	p->head = r;
	pthread_mutex_unlock(&p->lock);
	r->node = bnode_ref(node);
	r->rq.uid = ctx->uid;
	r->rq.gid = ctx->gid;
	r->rq.pid = ctx->pid;
	fs_req_who(req, r->rq.by, sizeof(r->rq.by));
	r->rq.done = fs_req_done;
	sbuf_init(&r->rq.reply, 4096);
	return r;
}

static void dir_request(fuse_req_t req, fuse_ino_t parent, const char *name,
			enum fs_req_kind kind)
{
	struct fs *f = fuse_req_userdata(req);
	struct fs_inode *p;
	struct fs_req *r;
	struct bnode *kid = NULL;
	int err, res;

	p = live_dir(f, parent, &err);
	if (!p) {
		fuse_reply_err(req, err);
		return;
	}
	if (!p->node->type->can_mkdir) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (fs_req_may(req, f->opts.has_ctl_gid, f->opts.ctl_gid) < 0) {
		atomic_fetch_add(&f->denied_writes, 1);
		fuse_reply_err(req, EACCES);
		return;
	}
	if (kind == FSR_RMDIR) {
		kid = bnode_lookup(p->node, name);
		if (!kid) {
			fuse_reply_err(req, bnode_attr(p->node, name, NULL) ? ENOTDIR : ENOENT);
			return;
		}
	} else if (bnode_attr(p->node, name, NULL)) {
		fuse_reply_err(req, EEXIST);
		return;
	}
	r = fs_req_new(req, kind, p->node);
	if (!r) {
		bnode_unref(kid);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	snprintf(r->name, sizeof(r->name), "%s", name);
	if (strlen(name) >= sizeof(r->name)) {
		nerr_set(&r->rq.err, EINVAL, "name '%.70s...' is longer than 64 characters", name);
		fs_req_fail(r, -EINVAL);
		return;
	}
	if (kind == FSR_MKDIR)
		res = p->node->type->mkdir(p->node, r->name, &r->rq);
	else
		res = p->node->type->rmdir(p->node, kid, &r->rq);
	bnode_unref(kid);
	if (res != -EINPROGRESS)
		fs_req_done(&r->rq, res);
}

static void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	FS_OP(req, FSOP_MKDIR);
	dir_request(req, parent, name, FSR_MKDIR);
}

static void fs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	FS_OP(req, FSOP_RMDIR);
	dir_request(req, parent, name, FSR_RMDIR);
}

/* ---- files ---- */

static void watch_add_locked(struct fs *f, struct fs_file *h)
{
	if (h->watching)
		return;
	h->watching = true;
	h->wprev = NULL;
	h->wnext = f->watchers;
	if (f->watchers)
		f->watchers->wprev = h;
	f->watchers = h;
}

static void watch_del_locked(struct fs *f, struct fs_file *h)
{
	if (!h->watching)
		return;
	if (h->wprev)
		h->wprev->wnext = h->wnext;
	else
		f->watchers = h->wnext;
	if (h->wnext)
		h->wnext->wprev = h->wprev;
	h->watching = false;
}

/*
 * The version this descriptor has seen, for poll's POLLPRI. A READ that
 * reaches us renders (snap_version); a cached file may also be read from
 * the kernel's pages, which nodefs never sees: at open those hold at least
 * the flushed version, and after a POLLPRI (which came with an
 * invalidation) pages filled again hold what the poller was told of, which
 * it is taken to have read, as the poll protocol says (POLLPRI, then read
 * from offset 0). wlock held.
 */
static uint64_t file_seen(const struct fs_file *h)
{
	uint64_t seen = h->snapped ? h->snap_version : 0;

	if (!(h->attr->flags & BATTR_CACHE))
		return h->snapped ? seen : UINT64_MAX;	/* never read: nothing to tell */
	if (h->open_flushed > seen)
		seen = h->open_flushed;
	if (h->told > seen && atomic_load(&h->inode->filled) >= h->told)
		seen = h->told;
	return seen;
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_OPEN);
	struct fs *f = fuse_req_userdata(req);
	struct fs_inode *i = inode_get(f->inodes, ino);
	const struct battr *a;
	struct fs_file *h;
	int acc = fi->flags & O_ACCMODE;

	if (!i || atomic_load(&i->node->dead)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (i->attr < 0) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	a = &i->node->type->attrs[i->attr];
	/* a ctl file is its writers' (they read the reply); the rest are
	 * read-only to all */
	if ((acc != O_RDONLY && !(a->flags & BATTR_CTL)) ||
	    ((a->flags & BATTR_CTL) && fs_req_may(req, f->opts.has_ctl_gid, f->opts.ctl_gid) < 0)) {
		atomic_fetch_add(&f->denied_writes, 1);
		fuse_reply_err(req, EACCES);
		return;
	}
	if ((a->flags & BATTR_PRIV) &&
	    fs_req_may(req, f->opts.has_read_gid, f->opts.read_gid) < 0) {
		atomic_fetch_add(&f->denied_reads, 1);
		fuse_reply_err(req, EACCES);
		return;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	h->fs = f;
	h->node = bnode_ref(i->node);
	h->attr = a;
	h->inode = i;
	h->open_flushed = bnode_flushed(i->node);
	h->nonblock = fi->flags & O_NONBLOCK;
	pthread_mutex_init(&h->lock, NULL);
	sbuf_init(&h->snap, FILE_SNAPSHOT_CAP);
	sbuf_init(&h->reply, 4096);
	sbuf_init(&h->pending, FILE_SNAPSHOT_CAP);
	if (a->stream) {
		int r = a->stream->open(h->node, &h->stream);
		if (r < 0) {
			bnode_unref(h->node);
			free(h);
			fuse_reply_err(req, -r);
			return;
		}
	}
	if ((a->flags & BATTR_CACHE) && !a->stream) {
		/* served from the page cache, invalidated on change (cache.h) */
		fi->keep_cache = 1;
	} else {
		fi->direct_io = 1;	/* made by each read: never from the page cache */
	}
	fi->noflush = 1;	/* nothing to flush: close costs no round trip */
	fi->fh = (uint64_t)(uintptr_t)h;
	pthread_mutex_lock(&f->flock);
	h->next = f->files;
	if (f->files)
		f->files->prev = h;
	f->files = h;
	pthread_mutex_unlock(&f->flock);
	if (fuse_reply_open(req, fi) == -ENOENT)	/* open interrupted */
		file_free(f, h);
}

static struct fs_file *file_of(struct fuse_file_info *fi)
{
	return (struct fs_file *)(uintptr_t)fi->fh;
}

/* Free an open file's state; it is off the watch list already. */
static void file_free(struct fs *f, struct fs_file *h)
{
	pthread_mutex_lock(&f->flock);
	if (h->prev)
		h->prev->next = h->next;
	else
		f->files = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&f->flock);
	if (h->ph)
		fuse_pollhandle_destroy(h->ph);
	if (h->attr->stream)
		h->attr->stream->close(h->node, h->stream);
	sbuf_free(&h->snap);
	sbuf_free(&h->reply);
	sbuf_free(&h->pending);
	pthread_mutex_destroy(&h->lock);
	bnode_unref(h->node);
	free(h);
}

static void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_RELEASE);
	struct fs *f = fuse_req_userdata(req);
	struct fs_file *h = file_of(fi);

	pthread_mutex_lock(&f->wlock);
	watch_del_locked(f, h);
	pthread_mutex_unlock(&f->wlock);
	file_free(f, h);
	fuse_reply_err(req, 0);
}

static void read_interrupted(fuse_req_t req, void *data)
{
	struct fs_file *h = data;
	struct fs *f = h->fs;

	pthread_mutex_lock(&f->wlock);
	if (h->parked == req) {
		h->parked = NULL;
		if (!h->ph)
			watch_del_locked(f, h);
		fuse_reply_err(req, EINTR);
	}
	pthread_mutex_unlock(&f->wlock);
}

/* Try a stream read; 1 when the request was answered. wlock held or not
 * needed (the caller serialises). */
static int stream_try(struct fs_file *h, fuse_req_t req, size_t size, off_t off)
{
	struct sbuf out = SBUF_INIT(FILE_SNAPSHOT_CAP);
	uint64_t o = off < 0 ? 0 : (uint64_t)off;
	size_t n = 0;
	int r = 1;
	/* A removed object's stream may still have its last word (the wait
	 * line of a destroyed container): that, then end of file; a stream
	 * with nothing more to say gets ENOENT, as every other file does. */
	bool dead = atomic_load(&h->node->dead);

	/*
	 * The stream's bytes get file offsets: the last STREAM_WINDOW of them
	 * are kept, so a reader that takes part of a line (bash's read) or
	 * seeks back to a line's end (head, bash) reads on from there.
	 */
	pthread_mutex_lock(&h->lock);
	if (o < h->pending_base) {
		pthread_mutex_unlock(&h->lock);
		fuse_reply_err(req, ESPIPE);	/* before the kept window */
		return 1;
	}
	if (o >= h->pending_base + h->pending.len) {
		if (h->pending.len > STREAM_WINDOW) {
			size_t drop = h->pending.len - STREAM_WINDOW / 2;
			memmove(h->pending.buf, h->pending.buf + drop, h->pending.len - drop);
			h->pending.len -= drop;
			h->pending_base += drop;
		}
		r = h->attr->stream->read(h->node, h->stream, &h->pending, size > 65536 ? size : 65536);
		if (o > h->pending_base + h->pending.len)
			o = h->pending_base + h->pending.len;	/* a seek past the end */
	}
	if (dead && (r < 0 || h->pending_base + h->pending.len == 0)) {
		pthread_mutex_unlock(&h->lock);
		fuse_reply_err(req, ENOENT);
		return 1;
	}
	if (r == -EAGAIN) {
		pthread_mutex_unlock(&h->lock);
		return 0;
	}
	if (r >= 0) {
		n = (size_t)(h->pending_base + h->pending.len - o);
		if (n > size)
			n = size;
		if (n && sbuf_add(&out, h->pending.buf + (o - h->pending_base), n) < 0)
			r = -ENOMEM;
	}
	pthread_mutex_unlock(&h->lock);
	/* h may be released once the reply is out */
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_buf(req, out.buf, out.len);
	sbuf_free(&out);
	return 1;
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_READ);
	struct fs *f = fuse_req_userdata(req);
	struct fs_file *h = file_of(fi);
	int r = 0;

	if (h->attr->stream) {
		if (stream_try(h, req, size, off))
			return;
		if (h->nonblock || (fi->flags & O_NONBLOCK)) {
			fuse_reply_err(req, EAGAIN);
			return;
		}
		/* park: the notifier answers when the node changes */
		fuse_req_interrupt_func(req, read_interrupted, h);
		pthread_mutex_lock(&f->wlock);
		if (fuse_req_interrupted(req)) {
			pthread_mutex_unlock(&f->wlock);
			fuse_reply_err(req, EINTR);
			return;
		}
		/* data may have come between the try and parking */
		if (stream_try(h, req, size, off)) {
			pthread_mutex_unlock(&f->wlock);
			return;
		}
		h->parked = req;
		h->parked_size = size;
		h->parked_off = off;
		watch_add_locked(f, h);
		pthread_mutex_unlock(&f->wlock);
		return;
	}

	pthread_mutex_lock(&h->lock);
	if (h->reply.len) {
		/* a ctl write left its answer (the operation id, exec output):
		 * read from where the last read of it stopped, whatever the file
		 * offset the write moved (read() after write() on one fd) */
		size_t n = h->reply.len - h->reply_pos;
		char small[4096];

		n = n < size ? n : size;
		n = n < sizeof(small) ? n : sizeof(small);
		memcpy(small, h->reply.buf + h->reply_pos, n);
		h->reply_pos += n;
		pthread_mutex_unlock(&h->lock);
		fuse_reply_buf(req, small, n);
		return;
	}
	if (off == 0 || !h->snapped || (h->attr->flags & BATTR_CACHE)) {
		if (atomic_load(&h->node->dead)) {
			pthread_mutex_unlock(&h->lock);
			fuse_reply_err(req, ENOENT);
			return;
		}
		if (h->attr->flags & BATTR_CACHE) {
			/* the text whose size the kernel holds, at every offset
			 * (cache.h): never a fresh render cut to an old size */
			r = cache_read(f->cache, h->inode, &h->snap, &h->snap_version);
			h->snapped = r >= 0;
			/* what the kernel's pages now hold */
			uint64_t cur = atomic_load(&h->inode->filled);
			while (h->snapped && cur < h->snap_version &&
			       !atomic_compare_exchange_weak(&h->inode->filled, &cur, h->snap_version))
				;
		} else {
			sbuf_reset(&h->snap);
			h->snap_version = atomic_load(&h->node->version);
			r = render(f, h->attr, h->node, &h->snap);
			h->snapped = r >= 0;
		}
	}
	if (r < 0) {
		pthread_mutex_unlock(&h->lock);
		fuse_reply_err(req, r == -E2BIG ? EFBIG : -r);
		return;
	}
	if (h->attr->flags & BATTR_POLL) {
		pthread_mutex_lock(&f->wlock);
		h->poll_armed = false;
		pthread_mutex_unlock(&f->wlock);
	}
	/* h may be released as soon as the reply is out: copy, unlock, reply
	 * (from the stack for the usual small file) */
	size_t n = (size_t)off >= h->snap.len ? 0 : h->snap.len - (size_t)off;
	char small[4096];
	char *data = small;

	n = n < size ? n : size;
	if (n > sizeof(small) && !(data = malloc(n))) {
		pthread_mutex_unlock(&h->lock);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (n)
		memcpy(data, h->snap.buf + off, n);
	pthread_mutex_unlock(&h->lock);
	fuse_reply_buf(req, data, n);
	if (data != small)
		free(data);
}

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
		     off_t off, struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_WRITE);
	struct fs_file *h = file_of(fi);
	struct fs_req *r;

	if (!(h->attr->flags & BATTR_CTL) || !h->attr->store) {
		fuse_reply_err(req, EACCES);
		return;
	}
	if (atomic_load(&h->node->dead)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	r = fs_req_new(req, FSR_WRITE, h->node);
	if (!r || !(r->buf = malloc(size ? size : 1))) {
		if (r)
			fs_req_free(r);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(r->buf, buf, size);
	r->len = r->size = size;
	r->file = h;
	r->rq.nonblock = h->nonblock || (fi->flags & O_NONBLOCK);
	pthread_mutex_lock(&h->lock);
	sbuf_reset(&h->reply);
	h->reply_pos = 0;
	pthread_mutex_unlock(&h->lock);
	/* the action may end, and req, r and h be gone, before write_continue
	 * returns: the slot is found now */
	atomic_uint *slot = slow_slot(fuse_req_userdata(req), h->attr);
	struct timespec t1;

#if NODEFS_TEST_HOOKS
	slow_render_hook(h->attr);
#endif
	int res = write_check(r);
	if (res < 0) {
		fs_req_fail(r, res);
		return;
	}
	write_continue(r);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	took(slot, &_fs_timer_.t0, &t1);
}

static void fs_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		    struct fuse_pollhandle *ph)
{
	FS_OP(req, FSOP_POLL);
	struct fs *f = fuse_req_userdata(req);
	struct fs_file *h = file_of(fi);
	unsigned revents = 0;

	pthread_mutex_lock(&f->wlock);
	if (ph) {
		if (h->ph)
			fuse_pollhandle_destroy(h->ph);
		h->ph = ph;
		watch_add_locked(f, h);
	}
	if (atomic_load(&h->node->dead)) {
		revents = POLLERR | POLLHUP;
	} else if (h->attr->stream) {
		/* readable when a read would not park */
		if (h->attr->stream->ready(h->node, h->stream))
			revents = POLLIN | POLLRDNORM;
		h->poll_armed = true;
	} else if (h->attr->flags & BATTR_POLL) {
		/* sysfs semantics: readable at once, and POLLPRI once the value
		 * changed after this descriptor last read it */
		revents = POLLIN | POLLRDNORM;
		uint64_t fl = bnode_flushed(h->node);
		if (fl > file_seen(h)) {
			revents |= POLLPRI | POLLERR;
			h->told = fl;
		}
		h->poll_armed = true;
	} else {
		revents = POLLIN | POLLRDNORM;
	}
	pthread_mutex_unlock(&f->wlock);
	fuse_reply_poll(req, revents);
}

static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	FS_OP(req, FSOP_STATFS);
	struct statvfs st = { 0 };

	st.f_bsize = 4096;
	st.f_frsize = 4096;
	st.f_namemax = 64;
	fuse_reply_statfs(req, &st);
}

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	/* no page cache for our files: their size is not known in advance */
	conn->want &= ~FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* a read refreshes attributes an invalidation dropped, whatever its
	 * length: a cached file's reader then gets the new text (cache.h) */
	if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
}

static const struct fuse_lowlevel_ops fs_ops = {
	.init = fs_init,
	.lookup = fs_lookup,
	.forget = fs_forget,
	.forget_multi = fs_forget_multi,
	.getattr = fs_getattr,
	.setattr = fs_setattr,
	.mkdir = fs_mkdir,
	.rmdir = fs_rmdir,
	.open = fs_open,
	.read = fs_read,
	.write = fs_write,
	.release = fs_release,
	.opendir = fs_opendir,
	.readdir = fs_readdir,
	.readdirplus = fs_readdirplus,
	.statfs = fs_statfs,
	.poll = fs_poll,
};

/* ---- the notifier ---- */

/* Under the tree's change lock (tree.h): queue only. */
static void notify_changed(void *ctx, struct bnode *n, uint64_t seq)
{
	struct fs *f = ctx;

	cache_changed(f->cache, n, seq);
	pthread_mutex_lock(&f->wlock);
	f->dirty = true;
	pthread_cond_signal(&f->wcond);
	pthread_mutex_unlock(&f->wlock);
}

static void notify_removed(void *ctx, struct bnode *parent, const char *name, uint64_t serial)
{
	struct fs *f = ctx;
	struct fs_removal *rm = calloc(1, sizeof(*rm));

	if (!rm)
		return;
	rm->parent_serial = parent->serial;
	rm->serial = serial;
	snprintf(rm->name, sizeof(rm->name), "%s", name);
	pthread_mutex_lock(&f->wlock);
	rm->next = f->removals;
	f->removals = rm;
	pthread_cond_signal(&f->wcond);
	pthread_mutex_unlock(&f->wlock);
}

/*
 * A removed directory: delete (not only invalidate) its files' entries
 * and its own, so the kernel drops the inodes (nlink cleared) and FORGETs
 * them at once; an invalidated entry's inode would stay in the kernel's
 * cache, and its table entry keep the removed object in memory, until
 * memory pressure evicted it. A delete the kernel refuses (a file still
 * open) falls back to invalidation.
 */
static void notify_gone(struct fs *f, fuse_ino_t pino, const struct fs_removal *rm)
{
	fuse_ino_t dino = inode_of_dir(f->inodes, rm->serial);
	uint64_t inos[64];
	const char *names[64];
	size_t n;

	if (dino) {
		n = inode_files_of(f->inodes, rm->serial, inos, names, 64);
		for (size_t i = 0; i < n; i++)
			fuse_lowlevel_notify_delete(f->se, dino, inos[i], names[i], strlen(names[i]));
		if (fuse_lowlevel_notify_delete(f->se, pino, dino, rm->name, strlen(rm->name)) == 0)
			return;
	}
	fuse_lowlevel_notify_inval_entry(f->se, pino, rm->name, strlen(rm->name));
}

/*
 * One round: take the queued changes, then the removals (a removal is
 * queued before its parent's change is numbered, so every removal a taken
 * change follows is taken too), tell the kernel (entries, then pages and
 * attributes), mark the changes flushed, and only then wake pollers and
 * parked readers, which look at flushed versions and flushed events.
 */
static void *notifier_main(void *arg)
{
	struct fs *f = arg;

	pthread_setname_np(pthread_self(), "nodefs-notify");
	pthread_mutex_lock(&f->wlock);
	while (!f->stop) {
		struct fs_removal *rm;
		struct cache_batch b;

		while (!f->stop && !f->dirty && !f->removals)
			pthread_cond_wait(&f->wcond, &f->wlock);
		if (f->stop)
			break;
		f->dirty = false;
		pthread_mutex_unlock(&f->wlock);
		cache_take(f->cache, &b);
		pthread_mutex_lock(&f->wlock);
		rm = f->removals;
		f->removals = NULL;
		pthread_mutex_unlock(&f->wlock);
		while (rm) {
			struct fs_removal *next = rm->next;
			fuse_ino_t pino = inode_of_dir(f->inodes, rm->parent_serial);
			if (pino)
				notify_gone(f, pino, rm);
			free(rm);
			rm = next;
		}
		cache_flush(f->cache, &b, f->se, f->inodes);
		pthread_mutex_lock(&f->wlock);
		for (struct fs_file *h = f->watchers, *next; h; h = next) {
			next = h->wnext;
			if (h->parked && stream_try(h, h->parked, h->parked_size, h->parked_off)) {
				h->parked = NULL;
			}
			if (h->ph && h->poll_armed) {
				bool wake = atomic_load(&h->node->dead);
				if (h->attr->stream)
					wake = h->attr->stream->ready(h->node, h->stream);
				else if (bnode_flushed(h->node) > file_seen(h))
					wake = true;
				if (wake) {
					h->poll_armed = false;
					fuse_lowlevel_notify_poll(h->ph);
				}
			}
			if (!h->parked && !h->ph)
				watch_del_locked(f, h);
		}
	}
	pthread_mutex_unlock(&f->wlock);
	return NULL;
}

/* ---- which requests may wait (fs-loop.c) ---- */

/*
 * Lookups, attributes (st_size needs no render), open and release,
 * directories, poll, stream reads (they park rather than wait) and reads
 * that continue a snapshot are answered from memory. Most renders are too
 * (a container's stats: four preads of cgroup files), but some call out (a
 * volume's stats, a Docker container's logs): a file whose last render took
 * over SLOW_RENDER_NS is handed to another thread for its next
 * SLOW_RENDER_TIMES renders, and the loop's watchdog catches the first one.
 * A ctl write, mkdir, rmdir and anything unknown are handed over. The
 * READ's fh is an open file of ours: the kernel holds the file until the
 * reply.
 */
static bool fs_may_wait(void *ctx_fs, const void *mem, size_t len)
{
	const struct fuse_in_header *in = mem;

	if (len < sizeof(*in))
		return true;
	switch (in->opcode) {
	case FUSE_LOOKUP:
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_GETATTR:
	case FUSE_SETATTR:
	case FUSE_OPEN:
	case FUSE_RELEASE:
	case FUSE_FLUSH:
	case FUSE_OPENDIR:
	case FUSE_READDIR:
	case FUSE_READDIRPLUS:
	case FUSE_RELEASEDIR:
	case FUSE_STATFS:
	case FUSE_POLL:
	case FUSE_INTERRUPT:
	case FUSE_ACCESS:
	case FUSE_GETXATTR:
	case FUSE_LISTXATTR:
	case FUSE_INIT:
	case FUSE_DESTROY:
		return false;
	case FUSE_READ: {
		const struct fuse_read_in *rd = (const void *)(in + 1);
		struct fs_file *h;
		bool from_memory;

		if (len < sizeof(*in) + sizeof(*rd))
			return true;
		h = (struct fs_file *)(uintptr_t)rd->fh;
		if (h->attr->stream)
			return false;
		/* held: another read of this descriptor renders, maybe slowly */
		if (pthread_mutex_trylock(&h->lock) != 0)
			return true;
		from_memory = h->reply.len || (rd->offset > 0 && h->snapped);
		pthread_mutex_unlock(&h->lock);
		return !from_memory && atomic_load(slow_slot(ctx_fs, h->attr)) > 0;
	}
	case FUSE_WRITE: {
		/* a ctl write hands its command to a worker and returns; the
		 * leader keeps the device unless this file's last writes took
		 * long (a state dir on a slow disk: the operation's checkpoint
		 * is written before the action is queued) */
		const struct fuse_write_in *wr = (const void *)(in + 1);
		struct fs_file *h;

		if (len < sizeof(*in) + sizeof(*wr))
			return true;
		h = (struct fs_file *)(uintptr_t)wr->fh;
		return atomic_load(slow_slot(ctx_fs, h->attr)) > 0;
	}
	default:
		return true;
	}
}

/* ---- life cycle ---- */

int fs_new(struct bnode *root, const struct fs_opts *o, struct fuse_args *args,
	   struct fs **ret, struct nerr *err)
{
	struct fs *f = calloc(1, sizeof(*f));
	struct tree_notifier nt;
	struct timespec now;

	if (!f)
		return nerr_set(err, ENOMEM, "out of memory");
	f->opts = *o;
	f->redact = redact_names_dup(o->redact);
	if (o->redact && !f->redact) {
		free(f);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	f->opts.redact = (const char *const *)f->redact;
	f->root = bnode_ref(root);
	f->mount_time = time(NULL);
	pthread_mutex_init(&f->wlock, NULL);
	pthread_mutex_init(&f->flock, NULL);
	pthread_cond_init(&f->wcond, NULL);
	f->pending = pending_new();
	f->cache = cache_new();
	if (!f->pending || !f->cache)
		goto oom;
	cache_set_render(f->cache, cache_render, f);
	/* the generation tells this mount's inodes from an earlier mount's
	 * (NFS export handles); numbers are unique within one mount */
	clock_gettime(CLOCK_REALTIME, &now);
	if (inode_table_new(root, (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec,
			    &f->inodes) < 0)
		goto oom;

	f->se = fuse_session_new(args, &fs_ops, sizeof(fs_ops), f);
	if (!f->se) {
		fs_free(f);
		return nerr_set(err, EINVAL, "cannot create the FUSE session (bad -o option?)");
	}
	nt.changed = notify_changed;
	nt.removed = notify_removed;
	nt.ctx = f;
	tree_set_notifier(root, &nt);
	*ret = f;
	return 0;
oom:
	fs_free(f);
	return nerr_set(err, ENOMEM, "out of memory");
}

int fs_mount(struct fs *f, const char *mnt, struct nerr *err)
{
	if (fuse_session_mount(f->se, mnt) != 0)
		return nerr_set(err, EIO, "cannot mount on %s", mnt);
	f->mounted = true;
	/* from now on a signal must unmount, even before fs_loop: it ends the
	 * session, and fs_loop then returns at once */
	if (fuse_set_signal_handlers(f->se) == 0)
		f->signals = true;
	return 0;
}

int fs_loop(struct fs *f)
{
	sigset_t block, old;
	int r;

	if (!f->signals) {
		if (fuse_set_signal_handlers(f->se) != 0)
			return -EIO;
		f->signals = true;
	}
	/* the signals go to the thread that waits in fs_serve */
	sigemptyset(&block);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	r = pthread_create(&f->notifier, NULL, notifier_main, f);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0)
		return -EAGAIN;
	f->notifier_running = true;
	/* renders that call out and ctl writes may wait: many may run at once;
	 * the handlers stay until fs_free, so a second SIGTERM while the
	 * backend stops does not kill the daemon and leave a dead mount */
	r = fs_serve(f->se, fs_may_wait, f, 256, 8);
	pthread_mutex_lock(&f->wlock);
	/* reads parked on streams get an answer, so libfuse frees them */
	for (struct fs_file *h = f->watchers; h; h = h->wnext)
		if (h->parked) {
			fuse_reply_err(h->parked, EINTR);
			h->parked = NULL;
		}
	f->stop = true;
	pthread_cond_broadcast(&f->wcond);
	pthread_mutex_unlock(&f->wlock);
	pthread_join(f->notifier, NULL);
	f->notifier_running = false;
	return r < 0 ? r : 0;
}

/*
 * The session is about to go: answer what the backend still holds
 * (ESHUTDOWN: the daemon stopped before the action finished) and detach it,
 * so its completion, whenever it comes, touches nothing of the session or
 * the open files. Waits for completions answering right now.
 */
static void fs_pending_detach(struct fs *f)
{
	struct fs_pending *p = f->pending;
	unsigned n = 0;

	pthread_mutex_lock(&p->lock);
	p->detached = true;
	while (p->completing)
		pthread_cond_wait(&p->idle, &p->lock);
	for (struct fs_req *r = p->head; r; r = r->pnext) {
		if (!r->req)
			continue;
		if (r->kind == FSR_WRITE && r->done)
			fuse_reply_write(r->req, r->done);	/* as write_fail */
		else
			fuse_reply_err(r->req, ESHUTDOWN);
		r->req = NULL;
		r->file = NULL;
		n++;
	}
	pthread_mutex_unlock(&p->lock);
	if (n)
		log_warn("stopping: %u requests still waiting on their actions were answered "
			 "ESHUTDOWN", n);
}

void fs_free(struct fs *f)
{
	struct tree_notifier none = { 0 };

	if (!f)
		return;
	if (f->root)
		tree_set_notifier(f->root, &none);	/* flushes all: none is left */
	if (f->pending)
		fs_pending_detach(f);
	if (f->signals)
		fuse_remove_signal_handlers(f->se);
	if (f->se) {
		if (f->mounted)
			fuse_session_unmount(f->se);
		fuse_session_destroy(f->se);
	}
	cache_free(f->cache);
	inode_table_free(f->inodes);
	while (f->files)	/* open when the session ended: no RELEASE will come */
		file_free(f, f->files);
	while (f->removals) {
		struct fs_removal *n = f->removals->next;
		free(f->removals);
		f->removals = n;
	}
	if (f->pending) {
		pthread_mutex_lock(&f->pending->lock);
		pending_unref_unlock(f->pending);
	}
	bnode_unref(f->root);
	pthread_mutex_destroy(&f->wlock);
	pthread_mutex_destroy(&f->flock);
	pthread_cond_destroy(&f->wcond);
	redact_names_free(f->redact);
	free(f);
}

int fs_render_metrics(void *ctx, struct sbuf *out)
{
	struct fs *f = ctx;
	int r;

	r = sbuf_adds(out, "# HELP nodefs_fuse_requests_total FUSE requests served, by operation.\n"
			   "# TYPE nodefs_fuse_requests_total counter\n");
	for (int op = 0; r >= 0 && op < FSOP_MAX; op++)
		r = sbuf_printf(out, "nodefs_fuse_requests_total{op=\"%s\"} %llu\n", fs_op_names[op],
				(unsigned long long)atomic_load(&f->opstat[op].h.count));
	if (r >= 0)
		r = sbuf_adds(out, "# HELP nodefs_fuse_request_duration_seconds Time a FUSE request spent in its handler.\n"
				   "# TYPE nodefs_fuse_request_duration_seconds histogram\n");
	for (int op = 0; r >= 0 && op < FSOP_MAX; op++) {
		char labels[32];

		snprintf(labels, sizeof(labels), "op=\"%s\"", fs_op_names[op]);
		r = hist_render(out, "nodefs_fuse_request_duration_seconds", labels, fs_buckets,
				FS_NBUCKETS, &f->opstat[op].h);
	}
	if (r >= 0)
		r = sbuf_printf(out, "# HELP nodefs_ctl_denied_total Writes (open, truncate, mkdir, rmdir) refused for permission.\n"
				"# TYPE nodefs_ctl_denied_total counter\n"
				"nodefs_ctl_denied_total %llu\n"
				"# HELP nodefs_read_denied_total Opens of a sensitive file refused for permission.\n"
				"# TYPE nodefs_read_denied_total counter\n"
				"nodefs_read_denied_total %llu\n",
				(unsigned long long)atomic_load(&f->denied_writes),
				(unsigned long long)atomic_load(&f->denied_reads));
	return r;
}
