/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fs-write: the requests fs hands to the backend: ctl writes (checked
 * whole, then run line by line; a short count when a later line fails),
 * mkdir and rmdir, their answers from whatever thread completes them
 * (a write's once the notifier has flushed what it changed; EINTR at once
 * when a signal interrupts its writer, the command going on), the error
 * line naming what failed, and the list of requests still held at a stop
 * (fs_pending_detach). Knows nothing of reads, renders or how the kernel's
 * caches are invalidated.
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

#include "ctl.h"
#include "log.h"
#include "redact.h"

/* ---- requests handed to the backend (ctl writes, mkdir, rmdir) ---- */


struct fs_pending *fs_pending_new(void)
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
void fs_pending_unref_unlock(struct fs_pending *p)
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
	fs_pending_unref_unlock(p);
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

/*
 * Interrupts. A ctl write waits on its command, which may take long (a
 * stop's timeout, a plugin's create, a remote node's answer), and the
 * kernel waits for the answer even through a SIGKILL of the writer. So an
 * INTERRUPT answers the write EINTR at once; the command goes on, its
 * operation showing how it ends, and no later line of the write runs.
 *
 * Whoever answers first wins, under pending->lock: write_interrupted
 * clears r->req, or req_take (or a stop) takes it. The interrupt function
 * finds its write by the request in the pending list rather than through
 * a pointer it was given, so a write answered and freed meanwhile is
 * simply not found (libfuse keeps the request itself alive, and its
 * address unused, while the function runs).
 */
static void write_interrupted(fuse_req_t req, void *data)
{
	struct fs *f = fuse_req_userdata(req);
	struct fs_pending *p = f->pending;

	(void)data;
	pthread_mutex_lock(&p->lock);
	for (struct fs_req *r = p->head; r; r = r->pnext)
		if (r->req == req && r->kind == FSR_WRITE) {
			r->req = NULL;
			r->interrupted = true;
			fuse_reply_err(req, EINTR);
			break;
		}
	pthread_mutex_unlock(&p->lock);
}

/* The request to answer, now r's own answer is being made; NULL when an
 * interrupt (or a stop) answered it already. */
static fuse_req_t req_take(struct fs_req *r)
{
	struct fs_pending *p = r->pending;
	fuse_req_t req;

	pthread_mutex_lock(&p->lock);
	req = r->req;
	r->req = NULL;
	pthread_mutex_unlock(&p->lock);
	return req;
}

static bool req_interrupted(struct fs_req *r)
{
	bool i;

	pthread_mutex_lock(&r->pending->lock);
	i = r->interrupted;
	pthread_mutex_unlock(&r->pending->lock);
	return i;
}

static void fs_req_fail(struct fs_req *r, int result)
{
	const char *msg = r->rq.err.msg[0] ? r->rq.err.msg : strerror(-result);
	fuse_req_t req;

	fs_req_set_error(r, msg);
	req = req_take(r);
	if (req)
		fuse_reply_err(req, -result);
	fs_req_free(r);
}

static void write_continue(struct fs_req *r);
static void fs_req_answer(struct fs_req *r, int result);

/*
 * Answer a write whose lines ran (all, or some before one failed) with
 * count bytes, once what they changed is visible: the kernel's cached
 * pages, sizes and listings of it invalidated (cache.h). So a read or an
 * ls after the write returns shows the change, as after a write to any
 * filesystem. Until then the write waits in fs->flushq, answered by the
 * notifier thread after its round; no thread blocks. The writer holds only
 * the ctl file's inode lock, which no invalidation takes.
 */
static void write_answer(fuse_req_t req, size_t count, int ferr)
{
	if (ferr)
		fuse_reply_err(req, ferr);
	else
		fuse_reply_write(req, count);
}

/* The same for a write whose first line failed (ferr, an errno): what the
 * failed command changed (its operation, FAILED; the error file; a state
 * put back) is visible when the writer reads its errno. */
static void write_reply_as(struct fs_req *r, size_t count, int ferr)
{
	struct fs *f = r->fs;
	uint64_t seq = tree_seq_now(r->node);
	fuse_req_t req = req_take(r);

	r->done = count;
	if (!req) {	/* interrupted: the writer has its EINTR */
		fs_req_free(r);
		return;
	}
	pthread_mutex_lock(&f->wlock);
	if (!f->stop && tree_seq_flushed(r->node) < seq) {
		r->fseq = seq;
		r->fcount = count;
		r->ferr = ferr;
		r->freq = req;
		r->fnext = f->flushq;
		f->flushq = r;
		pthread_mutex_unlock(&f->wlock);
		return;
	}
	pthread_mutex_unlock(&f->wlock);
	write_answer(req, count, ferr);
	fs_req_free(r);
}

static void write_reply(struct fs_req *r, size_t count)
{
	write_reply_as(r, count, 0);
}

/* The notifier, after a round, holding f->wlock: answer the writes whose
 * changes are flushed now (every one when all: the notifier stops). */
void fs_write_answer_flushed(struct fs *f, bool all)
{
	struct fs_req **pp = &f->flushq;

	while (*pp) {
		struct fs_req *r = *pp;

		if (!all && tree_seq_flushed(r->node) < r->fseq) {
			pp = &r->fnext;
			continue;
		}
		*pp = r->fnext;
		write_answer(r->freq, r->fcount, r->ferr);
		fs_req_free(r);
	}
}

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
	fs_req_set_error(r, r->rq.err.msg);
	write_reply_as(r, r->done, r->done ? 0 : -result);
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

/* What the backend answered a write's line (an operation id, exec
 * output): the file's reply, which its next reads return. */
static void keep_reply(struct fs_req *r)
{
	struct fs_pending *p = r->pending;

	if (!r->rq.reply.len)
		return;
	/* the writer, not interrupted, still waits in write(2): the file is
	 * open; interrupted, it may be closed and gone */
	pthread_mutex_lock(&p->lock);
	if (!r->interrupted && r->file) {
		pthread_mutex_lock(&r->file->lock);
		sbuf_reset(&r->file->reply);
		r->file->reply_pos = 0;
		sbuf_add(&r->file->reply, r->rq.reply.buf, r->rq.reply.len);
		pthread_mutex_unlock(&r->file->lock);
	}
	pthread_mutex_unlock(&p->lock);
	sbuf_reset(&r->rq.reply);
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
		keep_reply(r);
		write_continue(r);
		return;
	case FSR_MKDIR: {
		struct bnode *kid = bnode_lookup(r->node, r->name);
		fuse_req_t req = req_take(r);
		struct fs_inode *i;
		int e;

		if (!req) {
			/* answered at a stop */
		} else if (!kid) {
			fuse_reply_err(req, ENOENT);
		} else if ((e = inode_lookup(r->fs->inodes, kid, -1, &i)) < 0) {
			fuse_reply_err(req, -e);
		} else {
			fs_reply_entry(req, r->fs, i);
		}
		bnode_unref(kid);
		break;
	}
	case FSR_RMDIR: {
		fuse_req_t req = req_take(r);

		if (req)
			fuse_reply_err(req, 0);
		break;
	}
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
	const struct battr *a = r->attr;
	const char *line;
	size_t llen;
	int k;

	while ((k = next_cmd_line(r->buf, r->len, &r->pos, &line, &llen)) > 0) {
		if (req_interrupted(r)) {
			/* the writer has its EINTR: the rest does not run */
			r->line++;
			r->cur = line;
			r->cur_len = llen;
			fs_req_set_error(r, "not run: the write was interrupted");
			fs_req_free(r);
			return;
		}
		r->line++;
		r->cur = line;
		r->cur_len = llen;
		nerr_clear(&r->rq.err);
		int res = a->store(r->node, line, llen, &r->rq);
		if (res == -EINPROGRESS)
			return;
		if (res < 0) {
			write_fail(r, res);
			return;
		}
		r->done = r->pos;
		keep_reply(r);
	}
	if (k < 0) {
		nerr_set(&r->rq.err, EINVAL, "command line longer than %d bytes", CTL_LINE_MAX);
		r->cur = "";
		r->cur_len = 0;
		write_fail(r, -EINVAL);
		return;
	}
	write_reply(r, r->size);
}

/* Check every line before the first runs: a write whose lines do not all
 * parse and match changes nothing. (A line can still fail when it runs:
 * write_fail.) */
static int write_check(struct fs_req *r)
{
	const struct battr *a = r->attr;
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
		int res = a->check ? a->check(r->node, line, llen, &r->rq.err) : 0;

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

	p = fs_live_dir(f, parent, &err);
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

void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	FS_OP(req, FSOP_MKDIR);
	dir_request(req, parent, name, FSR_MKDIR);
}

void fs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	FS_OP(req, FSOP_RMDIR);
	dir_request(req, parent, name, FSR_RMDIR);
}


void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
		     off_t off, struct fuse_file_info *fi)
{
	FS_OP(req, FSOP_WRITE);
	struct fs_file *h = fs_file_of(fi);
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
	r->attr = h->attr;
	r->rq.nonblock = h->nonblock || (fi->flags & O_NONBLOCK);
	pthread_mutex_lock(&h->lock);
	sbuf_reset(&h->reply);
	h->reply_pos = 0;
	pthread_mutex_unlock(&h->lock);
	/* the action may end, and req, r and h be gone, before write_continue
	 * returns: the slot is found now */
	atomic_uint *slot = fs_slow_slot(fuse_req_userdata(req), h->attr);
	struct timespec t1;

#if NODEFS_TEST_HOOKS
	fs_slow_render_hook(h->attr);
#endif
	int res = write_check(r);
	if (res < 0) {
		fs_req_fail(r, res);
		return;
	}
	/* called at once if the writer was interrupted already: then no line
	 * runs (write_continue) */
	fuse_req_interrupt_func(req, write_interrupted, NULL);
	write_continue(r);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fs_took(slot, &_fs_timer_.t0, &t1);
}


/*
 * The session is about to go: answer what the backend still holds
 * (ESHUTDOWN: the daemon stopped before the action finished) and detach it,
 * so its completion, whenever it comes, touches nothing of the session or
 * the open files. Waits for completions answering right now.
 */
void fs_pending_detach(struct fs *f)
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

