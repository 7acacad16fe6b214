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
 * This file owns the session: the operations table and FUSE_INIT, the
 * notifier thread, which requests may wait (fs-loop.c's hand-over), the
 * life cycle and the request metrics. The operations live in their rooms
 * (fs-ops.h): fs-attr.c, fs-file.c, fs-write.c; this file calls them only
 * through the table and the helpers fs-ops.h declares.
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
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "ctl.h"
#include "fs-internal.h"
#include "fs-ops.h"
#include "hist.h"
#include "inflight.h"
#include "inode.h"
#include "log.h"
#include "nerr.h"
#include "nodefs-config.h"
#include "redact.h"
#include "sbuf.h"
#include "tree.h"


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


void fs_optimer_done(struct fs_optimer *t)
{
	struct timespec t1;
	uint64_t ns;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	ns = (uint64_t)(t1.tv_sec - t->t0.tv_sec) * 1000000000u + (uint64_t)(t1.tv_nsec - t->t0.tv_nsec);
	hist_observe(&t->st->h, fs_buckets, FS_NBUCKETS, ns);
}


static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	FS_OP(req, FSOP_STATFS);
	struct statvfs st = { 0 };

	st.f_bsize = 4096;
	st.f_frsize = 4096;
	st.f_namemax = 64;
#if NODEFS_TEST_HOOKS
	/* test builds: NODEFS_TEST_STATFS_HOLD_MS=N holds each statfs
	 * answer N ms (the request is then "in userspace": a SIGKILL meets
	 * the watchdog probe's statfs unanswered) */
	const char *hold = getenv("NODEFS_TEST_STATFS_HOLD_MS");
	if (hold) {
		log_warn("test hook: statfs answer held %s ms", hold);
		usleep((useconds_t)atoi(hold) * 1000);
	}
#endif
	fuse_reply_statfs(req, &st);
}

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	/* no page cache for our files: their size is not known in advance */
	conn->want &= ~FUSE_CAP_ASYNC_READ;
	/* O_TRUNC comes as a SETATTR, whose answer restores a ctl file's size
	 * (an atomic O_TRUNC would set it to 0 in the kernel: every write
	 * past it then takes the inode's lock alone, fs_open) */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* a read refreshes attributes an invalidation dropped, whatever its
	 * length: a cached file's reader then gets the new text (cache.h) */
	if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
	/* a directory needs no state per open: the kernel opens one itself,
	 * keeping its listing (fs_opendir), which saves a walk two round
	 * trips a directory */
	if (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) {
		conn->want |= FUSE_CAP_NO_OPENDIR_SUPPORT;
		((struct fs *)userdata)->no_opendir = true;
	}
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

static void notify_removed(void *ctx, struct bnode *parent, struct bnode *n)
{
	struct fs *f = ctx;
	struct fs_removal *rm = calloc(1, sizeof(*rm));

	if (!rm)
		return;
	rm->parent_serial = parent->serial;
	rm->serial = n->serial;
	rm->type = n->type;
	snprintf(rm->name, sizeof(rm->name), "%s", n->name);
	pthread_mutex_lock(&f->wlock);
	rm->next = f->removals;
	f->removals = rm;
	pthread_cond_signal(&f->wcond);
	pthread_mutex_unlock(&f->wlock);
}

/* How long the notifier waits, in user space, for the requests holding a
 * lock it is about to take (none of them waits on the notifier: lookups,
 * readdirs, mkdir, rmdir, READs), and how long the reaper waits for a
 * removed node's writers (answered by the notifier's round, or when their
 * action ends) before it leaves that name to the kernel's own reclaim. */
#define NOTIFY_WAIT_MS 2000
#define REAP_WAIT_MS 30000

/*
 * A removed node, in the notifier's round: what the kernel holds of it is
 * invalidated (its directory's and files' attributes, or its name when
 * the kernel has no inode of the directory), so a stat or a walk made
 * after the write that removed it asks again and gets ENOENT. Inodes the
 * kernel holds are then deleted by the reaper (reap_removed). Returns
 * whether rm goes to the reaper.
 *
 * The name's invalidation takes the parent's i_rwsem, which a lookup,
 * readdir, mkdir or rmdir in flight there holds: those are waited for
 * here first, in user space (docs/design.md, the lock table). A file's
 * invalidation takes no lock but the pages of a keep_cache file, which a
 * READ in flight holds; other files are direct_io and have no pages, so
 * only their attributes are invalidated (offset -1: no lock at all).
 */
static bool tell_removed(struct fs *f, const struct fs_removal *rm)
{
	fuse_ino_t pino = inode_of_dir(f->inodes, rm->parent_serial);
	fuse_ino_t dino = inode_of_dir(f->inodes, rm->serial);

	if (!pino)
		return false;	/* the kernel has no name under it */
	if (!dino) {
		uint64_t held = pino;

		inflight_wait_clear(f->inflight, &held, 1, INFL_RWSEM, NOTIFY_WAIT_MS);
		fuse_lowlevel_notify_inval_entry(f->se, pino, rm->name, strlen(rm->name));
		return false;
	}
	/* a directory's pages (its kept listing) are locked only while a
	 * READDIR's answer is copied in, never across the request */
	fuse_lowlevel_notify_inval_inode(f->se, dino, 0, 0);
	for (size_t k = 0; k < rm->type->nattrs && k < INODE_MAX_ATTRS; k++) {
		fuse_ino_t cino = inode_of(f->inodes, rm->serial, (int)k);
		uint64_t held = cino;

		if (!cino)
			continue;
		if (rm->type->attrs[k].flags & BATTR_CACHE) {
			inflight_wait_clear(f->inflight, &held, 1, INFL_PAGES, NOTIFY_WAIT_MS);
			fuse_lowlevel_notify_inval_inode(f->se, cino, 0, 0);
		} else {
			fuse_lowlevel_notify_inval_inode(f->se, cino, -1, 0);
		}
	}
	return true;
}

/*
 * Wait until no request in flight holds the i_rwsem of a or b: false when
 * one still does after REAP_WAIT_MS, or the session ended (the name is
 * then left to the kernel).
 */
static bool reap_may_lock(struct fs *f, fuse_ino_t a, fuse_ino_t b)
{
	uint64_t held[2] = { a, b };

#if NODEFS_TEST_HOOKS
	/* test builds: NODEFS_TEST_REAP_UNSAFE=1 deletes without waiting, as
	 * the reaper once did, so a test can leave a killed nodefs stuck and
	 * see a start (or --abort-stale) end it */
	if (getenv("NODEFS_TEST_REAP_UNSAFE"))
		return true;
#endif
	return inflight_wait_clear(f->inflight, held, 2, INFL_RWSEM, REAP_WAIT_MS);
}

/*
 * The reaper: a removed node's names are deleted from the kernel
 * (notify_delete), files first, then the directory. The kernel then drops
 * each inode once nothing has it open, rather than keeping it cached until
 * memory runs short, and its FORGET frees the entry here and the node it
 * holds. A delete takes the i_rwsem of the directory and of the file; the
 * writer of a ctl file holds the file's until its answer, which comes
 * after the notifier's round (or when its action ends). So before each
 * delete the reaper waits, in user space, until no request nodefs has read
 * holds either lock (inflight.h): were it to wait in the kernel instead, a
 * SIGKILL of nodefs would leave it there for ever, keeping /dev/fuse open,
 * so that nothing would ever fail the writer's request and free the lock
 * (docs/design.md, the lock table). Deletes are made here, on a thread
 * nothing waits on, never by the notifier. A directory that cannot be
 * deleted (a file of it still open, or the kernel dropped its name
 * meanwhile) has its name invalidated.
 */
static void reap_removed(struct fs *f, const struct fs_removal *rm)
{
	fuse_ino_t pino = inode_of_dir(f->inodes, rm->parent_serial);
	fuse_ino_t dino = inode_of_dir(f->inodes, rm->serial);

	if (!pino || !dino)
		return;
	for (size_t k = 0; k < rm->type->nattrs && k < INODE_MAX_ATTRS; k++) {
		fuse_ino_t cino = inode_of(f->inodes, rm->serial, (int)k);
		const char *name = rm->type->attrs[k].name;

		if (!cino)
			continue;
		if (!reap_may_lock(f, dino, cino)) {
			log_debug("%s/%s: a request holding its lock is still unanswered: "
				  "left to the kernel", rm->name, name);
			continue;
		}
		fuse_lowlevel_notify_delete(f->se, dino, cino, name, strlen(name));
	}
	if (!reap_may_lock(f, pino, dino))
		return;
	if (fuse_lowlevel_notify_delete(f->se, pino, dino, rm->name, strlen(rm->name)) != 0)
		fuse_lowlevel_notify_inval_entry(f->se, pino, rm->name, strlen(rm->name));
}

static void removals_free(struct fs_removal *rm)
{
	while (rm) {
		struct fs_removal *next = rm->next;

		free(rm);
		rm = next;
	}
}

static void *reaper_main(void *arg)
{
	struct fs *f = arg;

	pthread_setname_np(pthread_self(), "nodefs-reap");
	pthread_mutex_lock(&f->wlock);
	while (!f->stop) {
		struct fs_removal *rm;

		while (!f->stop && !f->reaps)
			pthread_cond_wait(&f->rcond, &f->wlock);
		if (f->stop)
			break;	/* fs_free frees what is left */
		rm = f->reaps;
		f->reaps = NULL;
		pthread_mutex_unlock(&f->wlock);
		for (struct fs_removal *r = rm; r; r = r->next)
			reap_removed(f, r);
		removals_free(rm);
		pthread_mutex_lock(&f->wlock);
	}
	pthread_mutex_unlock(&f->wlock);
	return NULL;
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
#if NODEFS_TEST_HOOKS
		/* test builds: NODEFS_TEST_SLOW_FLUSH_MS=N makes each round
		 * start N ms late, as on a loaded machine */
		const char *slow = getenv("NODEFS_TEST_SLOW_FLUSH_MS");
		if (slow)
			usleep((useconds_t)atoi(slow) * 1000);
#endif
		cache_take(f->cache, &b);
		pthread_mutex_lock(&f->wlock);
		rm = f->removals;
		f->removals = NULL;
		pthread_mutex_unlock(&f->wlock);
		struct fs_removal *reap = NULL;

		while (rm) {
			struct fs_removal *next = rm->next;

			if (tell_removed(f, rm)) {
				rm->next = reap;
				reap = rm;
			} else {
				free(rm);
			}
			rm = next;
		}
		cache_flush(f->cache, &b, f->se, f->inodes, f->inflight);
		pthread_mutex_lock(&f->wlock);
		if (reap) {	/* after the round's invalidations: see reap_removed */
			struct fs_removal **tail = &reap;

			while (*tail)
				tail = &(*tail)->next;
			*tail = f->reaps;
			f->reaps = reap;
			pthread_cond_signal(&f->rcond);
#if NODEFS_TEST_HOOKS
			/* test builds: NODEFS_TEST_REAP_HOLD_MS=N holds this
			 * round's write answers (a destroy's writer) N ms
			 * while the reaper goes to its deletes: a SIGKILL
			 * then meets the reaper waiting on the writer */
			const char *hold = getenv("NODEFS_TEST_REAP_HOLD_MS");
			if (hold) {
				pthread_mutex_unlock(&f->wlock);
				log_warn("test hook: reaping; write answers held %s ms", hold);
				usleep((useconds_t)atoi(hold) * 1000);
				pthread_mutex_lock(&f->wlock);
			}
#endif
		}
		for (struct fs_file *h = f->watchers, *next; h; h = next) {
			next = h->wnext;
			if (h->parked && fs_stream_try(h, h->parked, h->parked_size, h->parked_off)) {
				h->parked = NULL;
			}
			if (h->ph && h->poll_armed) {
				bool wake = atomic_load(&h->node->dead);
				if (h->attr->stream)
					wake = h->attr->stream->ready(h->node, h->stream);
				else if (bnode_flushed(h->node) > fs_file_seen(h))
					wake = true;
				if (wake) {
					h->poll_armed = false;
					fuse_lowlevel_notify_poll(h->ph);
				}
			}
			if (!h->parked && !h->ph)
				fs_watch_del_locked(f, h);
		}
		fs_write_answer_flushed(f, false);
	}
	fs_write_answer_flushed(f, true);	/* the session ended */
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
		from_memory = h->reply.len || (rd->offset > 0 && h->snapped) ||
			      (rd->offset == 0 && fs_file_shared_serves(ctx_fs, h));
		pthread_mutex_unlock(&h->lock);
		return !from_memory && atomic_load(fs_slow_slot(ctx_fs, h->attr)) > 0;
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
		return atomic_load(fs_slow_slot(ctx_fs, h->attr)) > 0;
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
	pthread_cond_init(&f->rcond, NULL);
	budget_init(&f->budget, o->reader_memory);
	for (int k = 0; k < SHARE_LOCKS; k++)
		pthread_mutex_init(&f->share_lock[k], NULL);
	f->pending = fs_pending_new();
	f->cache = cache_new();
	f->inflight = inflight_new();
	if (!f->pending || !f->cache || !f->inflight)
		goto oom;
	cache_set_render(f->cache, fs_cache_render, f);
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

/* The session's device I/O (libfuse's custom io): every request read and
 * every answer written passes inflight (inflight.h). errno is kept. */
static ssize_t fs_io_read(int fd, void *buf, size_t len, void *userdata)
{
	struct fs *f = userdata;
	ssize_t r = read(fd, buf, len);

	if (r > 0)
		inflight_received(f->inflight, buf, (size_t)r);
	return r;
}

static ssize_t fs_io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct fs *f = userdata;
	ssize_t r = writev(fd, iov, count);
	int e = errno;

	/* after the write: until the kernel has the answer the request holds
	 * its lock; a notification (unique 0) answers nothing */
	if (count > 0 && iov[0].iov_len >= sizeof(struct fuse_out_header)) {
		const struct fuse_out_header *out = iov[0].iov_base;

		if (out->unique)
			inflight_answered(f->inflight, out->unique);
	}
	errno = e;
	return r;
}

int fs_mount(struct fs *f, const char *mnt, struct nerr *err)
{
	static const struct fuse_custom_io io = { .read = fs_io_read, .writev = fs_io_writev };

	if (fuse_session_mount(f->se, mnt) != 0)
		return nerr_set(err, EIO, "cannot mount on %s", mnt);
	f->mounted = true;
	/* the same device, its reads and writes seen (inflight.h) */
	if (fuse_session_custom_io(f->se, &io, fuse_session_fd(f->se)) != 0)
		return nerr_set(err, EIO, "cannot hook the FUSE device of %s", mnt);
	/* from now on a signal must unmount, even before fs_loop: it ends the
	 * session, and fs_loop then returns at once */
	if (fs_serve_signals(f->se) == 0)
		f->signals = true;
	return 0;
}

int fs_loop(struct fs *f)
{
	sigset_t block, old;
	int r;

	if (!f->signals) {
		if (fs_serve_signals(f->se) != 0)
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
	if (r == 0 && (r = pthread_create(&f->reaper, NULL, reaper_main, f)) != 0) {
		pthread_mutex_lock(&f->wlock);
		f->stop = true;
		pthread_cond_broadcast(&f->wcond);
		pthread_mutex_unlock(&f->wlock);
		pthread_join(f->notifier, NULL);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0)
		return -EAGAIN;
	f->notifier_running = true;
	f->reaper_running = true;
	/* renders that call out and ctl writes may wait: many may run at once;
	 * the handlers stay until fs_free, so a second SIGTERM while the
	 * backend stops does not kill the daemon and leave a dead mount */
	r = fs_serve(f->se, fs_may_wait, f, 256, 8);
	inflight_close(f->inflight);	/* nothing waits for answers any more */
	pthread_mutex_lock(&f->wlock);
	/* reads parked on streams get an answer, so libfuse frees them */
	for (struct fs_file *h = f->watchers; h; h = h->wnext)
		if (h->parked) {
			fuse_reply_err(h->parked, EINTR);
			h->parked = NULL;
		}
	f->stop = true;
	pthread_cond_broadcast(&f->wcond);
	pthread_cond_broadcast(&f->rcond);
	pthread_mutex_unlock(&f->wlock);
	pthread_join(f->notifier, NULL);
	f->notifier_running = false;
	return r < 0 ? r : 0;
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
	/* after the pending writes' answers: a delete it makes may wait on a
	 * ctl writer's inode lock (reap_removed) */
	if (f->reaper_running)
		pthread_join(f->reaper, NULL);
	if (f->signals)
		fs_serve_signals_remove();
	if (f->se) {
		if (f->mounted)
			fuse_session_unmount(f->se);
		fuse_session_destroy(f->se);
	}
	cache_free(f->cache);
	inflight_free(f->inflight);
	while (f->files)	/* open when the session ended: no RELEASE will come */
		fs_file_free(f, f->files);	/* before the inodes their renders point from */
	inode_table_free(f->inodes);
	removals_free(f->removals);
	removals_free(f->reaps);
	if (f->pending) {
		pthread_mutex_lock(&f->pending->lock);
		fs_pending_unref_unlock(f->pending);
	}
	bnode_unref(f->root);
	pthread_mutex_destroy(&f->wlock);
	pthread_mutex_destroy(&f->flock);
	pthread_cond_destroy(&f->wcond);
	pthread_cond_destroy(&f->rcond);
	budget_destroy(&f->budget);
	for (int k = 0; k < SHARE_LOCKS; k++)
		pthread_mutex_destroy(&f->share_lock[k]);
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
	if (r >= 0)
		r = sbuf_printf(out, "# HELP nodefs_read_renders_total Renders of files that change only with their object (state), which readers of one version share.\n"
				"# TYPE nodefs_read_renders_total counter\n"
				"nodefs_read_renders_total %llu\n"
				"# HELP nodefs_read_shared_total Reads of such a file served by a render another reader made.\n"
				"# TYPE nodefs_read_shared_total counter\n"
				"nodefs_read_shared_total %llu\n"
				"# HELP nodefs_read_aged_renders_total Renders of time-varying files (stats), which readers share for at most cache_max_age.\n"
				"# TYPE nodefs_read_aged_renders_total counter\n"
				"nodefs_read_aged_renders_total %llu\n"
				"# HELP nodefs_read_aged_shared_total Reads of such a file served by an earlier render.\n"
				"# TYPE nodefs_read_aged_shared_total counter\n"
				"nodefs_read_aged_shared_total %llu\n",
				(unsigned long long)atomic_load(&f->versioned_renders),
				(unsigned long long)atomic_load(&f->shared_reads),
				(unsigned long long)atomic_load(&f->aged_renders),
				(unsigned long long)atomic_load(&f->aged_shared));
	if (r >= 0)
		r = sbuf_printf(out, "# HELP nodefs_read_cache_kept_total Cached files whose object changed but whose text did not, left in the kernel's page cache.\n"
				"# TYPE nodefs_read_cache_kept_total counter\n"
				"nodefs_read_cache_kept_total %llu\n",
				(unsigned long long)cache_kept(f->cache));
	if (r >= 0)
		r = sbuf_printf(out, "# HELP nodefs_fs_inodes Inodes the kernel holds of the mount (an entry of about 56 bytes each in nodefs, holding its object).\n"
				"# TYPE nodefs_fs_inodes gauge\n"
				"nodefs_fs_inodes %zu\n",
				inode_count(f->inodes));
	if (r >= 0)
		r = budget_render(&f->budget, out);
	return r;
}

