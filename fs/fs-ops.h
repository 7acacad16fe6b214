/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fs-ops: what the rooms of the FUSE operations share: the mount's state
 * (struct fs), an open file's (struct fs_file), a request handed to the
 * backend (struct fs_req), the request timers, and the helpers one room
 * calls in another. fs.c has the session, the notifier and the life
 * cycle; fs-attr.c names and attributes (lookup, getattr, setattr,
 * readdir) and renders; fs-file.c open files (open, read, poll, release,
 * streams); fs-write.c what goes to the backend (ctl writes, mkdir,
 * rmdir). Private to fs/; include after fuse_lowlevel.h.
 *
 * Must not know: CSI, Docker, LXC, the config.
 */
#ifndef NODEFS_FS_OPS_H
#define NODEFS_FS_OPS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#include "budget.h"
#include "fs.h"
#include "hist.h"
#include "sbuf.h"
#include "tree.h"

struct fs_inode;

#define FILE_SNAPSHOT_CAP (16u << 20)
#define STREAM_WINDOW (256u << 10)	/* stream bytes kept for seeks back */
#define DIR_OFF_ATTRS 3			/* 1 ".", 2 "..", then attributes */
#define DIR_OFF_KIDS (1ull << 40)	/* children: base + serial */
#define SLOW_SLOTS 256
#define SLOW_RENDER_NS 250000		/* a render this long may call out */
#define SLOW_RENDER_TIMES 32		/* hand over that many renders after it */
#define SHARE_LOCKS 64			/* stripes of fs->share_lock, by inode */

/*
 * A render of a BATTR_VERSIONED file (backend/tree.h), shared by the open
 * files that read that version of it: a READ at offset 0 takes the
 * inode's shared render while the node's version is the one loaded before
 * it was made (nothing changed since, so it shows the current value), and
 * renders anew otherwise. The inode points at it without a reference, only
 * while some open file holds it: the last holder's release clears the
 * pointer, so a file nobody has open keeps no text (fs-file.c).
 *
 * A BATTR_AGED file's render (stats) is shared the same way while it is
 * also younger than cache_max_age (snap.h), and its inode holds a
 * reference of its own to the last one, so readers that come one after
 * another (cat in a loop, an agent's scrape) share it too: one small text
 * per such inode the kernel knows, replaced by the next render and freed
 * with the inode's entry (fs/inode.c), which the kernel forgets only once
 * no file of it is open.
 */
struct fs_snap {
	unsigned ref;		/* holders, under the inode's share lock */
	uint64_t version;	/* of the node, loaded before the render */
	uint64_t made;		/* CLOCK_MONOTONIC ns, taken before the render */
	size_t len;
	size_t alloc;		/* what a holder is charged (fs/budget.h) */
	char buf[];
};


enum fs_op {
	FSOP_LOOKUP, FSOP_FORGET, FSOP_GETATTR, FSOP_SETATTR, FSOP_MKDIR, FSOP_RMDIR, FSOP_OPEN,
	FSOP_READ, FSOP_WRITE, FSOP_RELEASE, FSOP_OPENDIR, FSOP_READDIR, FSOP_READDIRPLUS,
	FSOP_STATFS, FSOP_POLL, FSOP_MAX,
};

struct fs_opstat {
	struct hist h;
};

struct fs_optimer {
	struct fs_opstat *st;
	struct timespec t0;
};

void fs_optimer_done(struct fs_optimer *t);

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
	uint64_t parent_serial;
	uint64_t serial;		/* of the removed node */
	const struct btype *type;	/* its files (static) */
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
	bool no_opendir;	/* the kernel opens directories itself (fs_init) */

	struct inode_table *inodes;
	/* requests read and not answered that hold a kernel lock: no
	 * notification that takes that lock is sent meanwhile (inflight.h) */
	struct inflight *inflight;

	/* the notifier: watched files (pollers, parked readers) and removals */
	pthread_mutex_t wlock;
	pthread_cond_t wcond;
	struct fs_file *watchers;	/* doubly linked */
	struct fs_removal *removals;
	/* removals whose inodes the reaper deletes from the kernel (fs.c) */
	struct fs_removal *reaps;
	pthread_cond_t rcond;
	pthread_t reaper;
	bool reaper_running;	/* joined by fs_free */
	/* ctl writes whose lines have run, answered once their changes are
	 * flushed (fs_write_answer_flushed) */
	struct fs_req *flushq;
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
	struct budget budget;	/* memory open files hold, per uid (budget.h) */
	/* shared renders (struct fs_snap): holders and fs_inode.shared */
	pthread_mutex_t share_lock[SHARE_LOCKS];
	atomic_ullong shared_reads;	/* READs served by a render another made */
	atomic_ullong versioned_renders;	/* renders of BATTR_VERSIONED files */
	atomic_ullong aged_renders;	/* renders of BATTR_AGED files (cache_max_age > 0) */
	atomic_ullong aged_shared;	/* READs of those served by an earlier render */
};

struct fs_file {
	struct fs *fs;
	struct bnode *node;	/* referenced */
	const struct battr *attr;
	bool nonblock;

	pthread_mutex_t lock;	/* snapshot and reply */
	struct sbuf snap;
	struct fs_snap *shared;	/* a BATTR_VERSIONED file's render, held */
	bool snapped;
	uint64_t snap_version;
	struct sbuf reply;	/* what a nonblock ctl write answered */
	size_t reply_pos;	/* how much of it reads have taken */
	struct sbuf pending;	/* stream bytes read from the backend, not yet taken */
	uint64_t pending_base;	/* file offset of pending.buf[0] */
	struct fs_inode *inode;	/* held by the kernel while the file is open */
	struct fs_inode_ext *ix;	/* inode's ext, made at open */
	uint64_t open_flushed;	/* bnode_flushed() at open (cached files) */
	uint64_t told;		/* the flushed version POLLPRI last reported */
	struct fs_file *next, *prev;	/* fs->files, under fs->flock */
	void *stream;		/* stream state */
	uid_t uid;		/* the opener's, charged in fs->budget */
	size_t charged;		/* what it is charged now */

	/* under fs->wlock */
	struct fuse_pollhandle *ph;
	bool poll_armed;	/* told "nothing new": notify on change */
	fuse_req_t parked;	/* a stream read waiting for data */
	size_t parked_size;
	off_t parked_off;
	bool watching;
	struct fs_file *wprev, *wnext;
};


enum fs_req_kind { FSR_WRITE, FSR_MKDIR, FSR_RMDIR };

struct fs_req {
	struct breq rq;
	enum fs_req_kind kind;
	fuse_req_t req;
	struct fs *fs;
	struct fs_pending *pending;	/* referenced; the list r is in */
	struct fs_req *pprev, *pnext;	/* under pending->lock */
	struct bnode *node;	/* the ctl's directory, or the parent */
	/* writes: the open file (its reply buffer: keep_reply; valid while the
	 * writer waits, so never touched once interrupted) and its attr */
	struct fs_file *file;
	const struct battr *attr;
	char *buf;		/* writes: the lines */
	size_t len, pos, size;
	size_t done;		/* writes: the bytes of the lines that have run */
	unsigned nlines;	/* writes: command lines in all */
	unsigned line;		/* writes: the one running (1-based) */
	const char *cur;	/* writes: its text, in buf */
	size_t cur_len;
	char name[65];		/* mkdir */
	/* writes waiting in fs->flushq (under fs->wlock): the change number to
	 * see flushed, the byte count to answer, and the request (taken from
	 * req: req_take) */
	struct fs_req *fnext;
	uint64_t fseq;
	size_t fcount;
	int ferr;		/* answered this errno instead (the first line failed) */
	fuse_req_t freq;
	/* writes, under pending->lock: a signal interrupted the writer and
	 * the kernel got EINTR (req is NULL then); no further line runs */
	bool interrupted;
};

int fs_render(struct fs *f, const struct battr *a, struct bnode *n, struct sbuf *out);
void fs_took(atomic_uint *slot, const struct timespec *t0, const struct timespec *t1);
atomic_uint *fs_slow_slot(void *ctx_fs, const struct battr *a);
/* Whether a READ at offset 0 of h is served by its readers' shared render
 * (a copy, not a render). h->lock held. */
bool fs_file_shared_serves(struct fs *f, struct fs_file *h);
void fs_slow_render_hook(const struct battr *a);
void fs_reply_entry(fuse_req_t req, struct fs *f, struct fs_inode *i);
struct fs_inode *fs_live_dir(struct fs *f, fuse_ino_t ino, int *err);
int fs_cache_render(void *ctx, struct bnode *n, const struct battr *a, struct sbuf *out);
void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void fs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *v);
void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi);
void fs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void fs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
struct fs_pending *fs_pending_new(void);
void fs_pending_unref_unlock(struct fs_pending *p);
void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void fs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off, struct fuse_file_info *fi);
void fs_pending_detach(struct fs *f);
void fs_write_answer_flushed(struct fs *f, bool all);
uint64_t fs_file_seen(const struct fs_file *h);
int fs_stream_try(struct fs_file *h, fuse_req_t req, size_t size, off_t off);
void fs_file_free(struct fs *f, struct fs_file *h);
struct fs_file *fs_file_of(struct fuse_file_info *fi);
void fs_watch_del_locked(struct fs *f, struct fs_file *h);
void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void fs_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct fuse_pollhandle *ph);

#endif
