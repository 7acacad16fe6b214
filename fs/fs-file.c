/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fs-file: open files. Open (modes and the opener checked, keep_cache or
 * direct_io), release, read (a snapshot at offset 0, a cached file's
 * told text, a ctl write's answer, or a stream's bytes, parked until they
 * come), poll (sysfs POLLPRI, streams' POLLIN) and the watch list the
 * notifier wakes. Knows nothing of ctl commands or of the inode table's
 * insides.
 *
 * Must not know: CSI, Docker, LXC, the config.
 */
#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
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
#include "snap.h"
#include "tree.h"

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

void fs_watch_del_locked(struct fs *f, struct fs_file *h)
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
uint64_t fs_file_seen(const struct fs_file *h)
{
	uint64_t seen = h->snapped ? h->snap_version : 0;

	if (!(h->attr->flags & BATTR_CACHE))
		return h->snapped ? seen : UINT64_MAX;	/* never read: nothing to tell */
	if (h->open_flushed > seen)
		seen = h->open_flushed;
	if (h->told > seen && atomic_load(&h->ix->filled) >= h->told)
		seen = h->told;
	return seen;
}

/*
 * Charge h's uid for what h holds now, and remember its snapshot's size as
 * what the next open of the file is charged before it reads. h->lock held.
 */
static void file_recharge(struct fs_file *h)
{
	size_t held = h->shared ? h->shared->alloc : h->snap.alloc;
	size_t now = BUDGET_OPEN_COST + held + h->reply.alloc + h->pending.alloc;

	/* a shared render is charged whole to each holder: the bound stays
	 * what it was, though the memory is held once */
	if (held)
		atomic_store(&h->ix->snap_hint, held);
	budget_adjust(&h->fs->budget, h->uid, h->charged, now);
	h->charged = now;
}

/*
 * What an open of attribute a of i is charged before its first read: the
 * fixed cost, and the buffer its snapshot will take, known from the last
 * snapshot of it or measured now by a render (once per file). A stream's
 * bytes are charged as they come.
 */
static size_t open_cost(struct fs *f, struct fs_inode *i, struct fs_inode_ext *x,
			const struct battr *a)
{
	size_t hint;

	if (a->stream || (a->flags & BATTR_CTL))
		return BUDGET_OPEN_COST;
	hint = atomic_load(&x->snap_hint);
	if (!hint) {
		struct sbuf tmp = SBUF_INIT(FILE_SNAPSHOT_CAP);

		if (fs_render(f, a, i->node, &tmp) >= 0)
			hint = tmp.alloc;
		sbuf_free(&tmp);
		if (hint)
			atomic_store(&x->snap_hint, hint);
	}
	return BUDGET_OPEN_COST + hint;
}

/* Whether readers of h's file share renders for a time (BATTR_AGED, with
 * a cache_max_age), the inode then holding the last one itself. */
static bool share_aged(const struct fs *f, const struct battr *a)
{
	return (a->flags & BATTR_AGED) && f->opts.cache_max_age_ms;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Let go of h's shared render; the last holder frees it and clears the
 * inode's pointer (fs-ops.h). */
static void share_drop(struct fs *f, struct fs_file *h)
{
	struct fs_snap *s = h->shared;
	pthread_mutex_t *l;

	if (!s)
		return;
	h->shared = NULL;
	l = &f->share_lock[h->inode->ino % SHARE_LOCKS];
	pthread_mutex_lock(l);
	if (--s->ref == 0) {
		if (h->ix->shared == s)
			h->ix->shared = NULL;
		free(s);
	}
	pthread_mutex_unlock(l);
}

/*
 * What a READ at offset 0 of a BATTR_VERSIONED or BATTR_AGED file serves:
 * the inode's shared render if the node has not changed since it was made
 * (and, aged, it is younger than cache_max_age: snap.h), else a new one,
 * which becomes the shared one unless a newer one got there first. The
 * version and the time are taken before the render, so a render never
 * says it is newer than what it shows. An aged file's inode holds its
 * render itself (a reference, freed with the entry or the next render), so
 * readers one after another share it too. h->lock held. -errno of the
 * render.
 */
static int share_read(struct fs *f, struct fs_file *h)
{
	struct fs_inode_ext *x = h->ix;
	pthread_mutex_t *l = &f->share_lock[h->inode->ino % SHARE_LOCKS];
	bool aged = share_aged(f, h->attr);
	uint64_t age = aged ? f->opts.cache_max_age_ms * 1000000u : 0;
	uint64_t v = atomic_load(&h->node->version);
	uint64_t t0 = now_ns();
	struct sbuf out = SBUF_INIT(FILE_SNAPSHOT_CAP);
	struct fs_snap *s, *old = NULL;
	int r;

	pthread_mutex_lock(l);
	s = x->shared;
	if (s && snap_serves(s->version, s->made, v, t0, age)) {
		if (s != h->shared) {
			s->ref++;
			atomic_fetch_add(aged ? &f->aged_shared : &f->shared_reads, 1);
			pthread_mutex_unlock(l);
			share_drop(f, h);
			h->shared = s;
		} else {
			pthread_mutex_unlock(l);
		}
		h->snap_version = v;
		return 0;
	}
	pthread_mutex_unlock(l);
	atomic_fetch_add(aged ? &f->aged_renders : &f->versioned_renders, 1);
	r = fs_render(f, h->attr, h->node, &out);
	if (r < 0) {
		sbuf_free(&out);
		return r;
	}
	s = malloc(sizeof(*s) + (out.len ? out.len : 1));
	if (!s) {
		sbuf_free(&out);
		return -ENOMEM;
	}
	s->ref = 1;
	s->version = v;
	s->made = t0;
	s->len = out.len;
	s->alloc = sizeof(*s) + out.len;
	if (out.len)	/* an empty render may come with no buffer */
		memcpy(s->buf, out.buf, out.len);
	sbuf_free(&out);
	share_drop(f, h);
	pthread_mutex_lock(l);
	struct fs_snap *cur = x->shared;
	if (!cur || snap_newer(v, t0, cur->version, cur->made)) {
		x->shared = s;
		if (aged) {
			s->ref++;	/* the inode's */
			if (cur && --cur->ref == 0)
				old = cur;	/* nobody else held it */
		}
	}
	pthread_mutex_unlock(l);
	free(old);
	h->shared = s;
	h->snap_version = v;
	return 0;
}

/*
 * Whether a READ at offset 0 of h would be answered by the render its
 * readers share (the node unchanged since, and an aged one still young):
 * then it is a copy, never a render, and the leader answers it itself
 * (fs_may_wait). The caller holds h->lock.
 */
bool fs_file_shared_serves(struct fs *f, struct fs_file *h)
{
	pthread_mutex_t *l = &f->share_lock[h->inode->ino % SHARE_LOCKS];
	bool aged = share_aged(f, h->attr);
	uint64_t age = aged ? f->opts.cache_max_age_ms * 1000000u : 0;
	struct fs_snap *s;
	bool serves;

	if (!(h->attr->flags & BATTR_VERSIONED) && !aged)
		return false;
	pthread_mutex_lock(l);
	s = h->ix->shared;
	serves = s && snap_serves(s->version, s->made, atomic_load(&h->node->version), now_ns(), age);
	pthread_mutex_unlock(l);
	return serves;
}

/*
 * A ctl file's writers run in parallel: the kernel holds a FUSE file's
 * inode lock alone across each write unless the open says
 * FOPEN_PARALLEL_DIRECT_WRITES (and the write stays within the size it
 * knows: a ctl file's is its usage's length, fs-attr.c), so sixteen writers of
 * `create` on volumes/ctl would wait for each other's CSI calls and never
 * share a checkpoint flush. libfuse 3.14 has no field for the flag: the
 * answer is built here as fuse_reply_open would build it, plus the flag.
 */
static int reply_open(fuse_req_t req, struct fuse_file_info *fi, const struct battr *a)
{
	struct fuse_open_out o = { .fh = fi->fh };

	if (!(a->flags & BATTR_CTL) || a->stream)
		return fuse_reply_open(req, fi);
	o.open_flags = FOPEN_DIRECT_IO | FOPEN_NOFLUSH | FOPEN_PARALLEL_DIRECT_WRITES;
	return fuse_reply_buf(req, (const char *)&o, sizeof(o));
}

void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_OPEN);
	struct fs *f = fuse_req_userdata(req);
	struct fs_inode *i = inode_get(f->inodes, ino);
	struct fs_inode_ext *x;
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
	if (!(x = inode_ext(i))) {
		fuse_reply_err(req, ENOMEM);
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
	/* root is never bounded (nor charged: no render to measure) */
	uid_t uid = fuse_req_ctx(req)->uid;
	size_t cost = uid && f->budget.limit ? open_cost(f, i, x, a) : BUDGET_OPEN_COST;
	int br = budget_take(&f->budget, uid, cost);

	if (br < 0) {
		fuse_reply_err(req, -br);
		return;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		budget_adjust(&f->budget, uid, cost, 0);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	h->fs = f;
	h->uid = uid;
	h->charged = cost;
	h->node = bnode_ref(i->node);
	h->attr = a;
	h->inode = i;
	h->ix = x;
	h->open_flushed = bnode_flushed(i->node);
	h->nonblock = fi->flags & O_NONBLOCK;
	pthread_mutex_init(&h->lock, NULL);
	sbuf_init(&h->snap, FILE_SNAPSHOT_CAP);
	sbuf_init(&h->reply, 4096);
	sbuf_init(&h->pending, FILE_SNAPSHOT_CAP);
	if (a->stream) {
		int r = a->stream->open(h->node, &h->stream);
		if (r < 0) {
			budget_adjust(&f->budget, uid, cost, 0);
			sbuf_free(&h->snap);
			sbuf_free(&h->reply);
			sbuf_free(&h->pending);
			pthread_mutex_destroy(&h->lock);
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
	if (reply_open(req, fi, a) == -ENOENT)	/* open interrupted */
		fs_file_free(f, h);
}

struct fs_file *fs_file_of(struct fuse_file_info *fi)
{
	return (struct fs_file *)(uintptr_t)fi->fh;
}

/* Free an open file's state; it is off the watch list already. */
void fs_file_free(struct fs *f, struct fs_file *h)
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
	share_drop(f, h);
	sbuf_free(&h->snap);
	sbuf_free(&h->reply);
	sbuf_free(&h->pending);
	pthread_mutex_destroy(&h->lock);
	budget_adjust(&f->budget, h->uid, h->charged, 0);
	bnode_unref(h->node);
	free(h);
}

void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_RELEASE);
	struct fs *f = fuse_req_userdata(req);
	struct fs_file *h = fs_file_of(fi);

	pthread_mutex_lock(&f->wlock);
	fs_watch_del_locked(f, h);
	pthread_mutex_unlock(&f->wlock);
	fs_file_free(f, h);
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
			fs_watch_del_locked(f, h);
		fuse_reply_err(req, EINTR);
	}
	pthread_mutex_unlock(&f->wlock);
}

/* Try a stream read; 1 when the request was answered. wlock held or not
 * needed (the caller serialises). */
int fs_stream_try(struct fs_file *h, fuse_req_t req, size_t size, off_t off)
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
	file_recharge(h);
	pthread_mutex_unlock(&h->lock);
	/* h may be released once the reply is out */
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_buf(req, out.buf, out.len);
	sbuf_free(&out);
	return 1;
}

void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_READ);
	struct fs *f = fuse_req_userdata(req);
	struct fs_file *h = fs_file_of(fi);
	int r = 0;

	if (h->attr->stream) {
		if (fs_stream_try(h, req, size, off))
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
		if (fs_stream_try(h, req, size, off)) {
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
			uint64_t cur = atomic_load(&h->ix->filled);
			while (h->snapped && cur < h->snap_version &&
			       !atomic_compare_exchange_weak(&h->ix->filled, &cur, h->snap_version))
				;
		} else if ((h->attr->flags & BATTR_VERSIONED) || share_aged(f, h->attr)) {
			r = share_read(f, h);
			h->snapped = r >= 0;
		} else {
			sbuf_reset(&h->snap);
			h->snap_version = atomic_load(&h->node->version);
			r = fs_render(f, h->attr, h->node, &h->snap);
			h->snapped = r >= 0;
		}
	}
	file_recharge(h);
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
	const char *src = h->shared ? h->shared->buf : h->snap.buf;
	size_t len = h->shared ? h->shared->len : h->snap.len;
	size_t n = (size_t)off >= len ? 0 : len - (size_t)off;
	char small[4096];
	char *data = small;

	n = n < size ? n : size;
	if (n > sizeof(small) && !(data = malloc(n))) {
		pthread_mutex_unlock(&h->lock);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (n)
		memcpy(data, src + off, n);
	pthread_mutex_unlock(&h->lock);
	fuse_reply_buf(req, data, n);
	if (data != small)
		free(data);
}


void fs_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		    struct fuse_pollhandle *ph)
{
	FS_OP(req, FSOP_POLL);
	struct fs *f = fuse_req_userdata(req);
	struct fs_file *h = fs_file_of(fi);
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
		if (fl > fs_file_seen(h)) {
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

