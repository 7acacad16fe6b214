/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * store-journal: STATE_DIR/journal and its group commit; see store.h for
 * the contract.
 *
 * A write is queued (its journal entry encoded by the writer's thread).
 * Whoever needs durability and finds no flush running becomes the leader:
 * it takes the whole queue, appends it to the journal in one pwritev, calls
 * fdatasync once, then replaces the records' files in queue order
 * (temporary file, rename; the journal covers them until the next syncfs)
 * and wakes the writers its flush carried. Writers that arrive meanwhile
 * queue behind it and share the next flush, whose append and fdatasync may
 * run while this one replaces its files; files are replaced by one leader
 * at a time, in journal order (wait_flushed). A record's file changes only
 * after its entry is durable: a crash can leave a file behind its journal
 * entry (replayed at open), never ahead of it.
 *
 * Owns: the queue, the flush, the journal file (made, replayed, emptied)
 * and the crash test hooks, in struct store's journal fields.
 * Must not know: records' contents (but the crash hook's "state"), the
 * objects whose records it keeps, how a file is written (store.c) or how an
 * entry is encoded (store-jentry.c).
 */
#include "store-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "log.h"
#include "nerr.h"

/* The journal is emptied (files made durable by one syncfs) once it is
 * this long; lazy writes flush themselves once this much is queued. */
#define STORE_JOURNAL_MAX (1u << 20)
#define STORE_LAZY_MAX (256u << 10)
/* The journal's length, zero-filled (journal_reset): the most a journal
 * holds before it is emptied, a lazy queue's worth past it. */
#define STORE_JOURNAL_PREALLOC ((off_t)(STORE_JOURNAL_MAX + 2 * STORE_LAZY_MAX))

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

#if NODEFS_TEST_HOOKS
/*
 * Crash tests (test builds only, -Dtest_hooks=true): NODEFS_CRASH_AT=
 * "KIND:STATE[:N]" kills the daemon with SIGKILL right after the flush that
 * made the Nth (default first) record of KIND (volumes, containers,
 * operations) whose "state" is STATE durable has replaced its files: the
 * moment a real crash would lose the most. "group:N": in the Nth flush
 * that carried the records of two or more operations (two commands' records
 * in one fdatasync), right after the first of its files was replaced and
 * before the others: a crash between grouped records, which only the
 * journal's replay can repair.
 */
static void crash_setup(struct store *s)
{
	const char *spec = getenv("NODEFS_CRASH_AT");
	char want[128], *c2, *c3;

	if (!spec)
		return;
	snprintf(want, sizeof(want), "%s", spec);
	c2 = strchr(want, ':');
	if (!c2)
		return;
	*c2++ = '\0';
	if (strcmp(want, "group") == 0) {
		s->group_nth = atoi(c2) > 0 ? atoi(c2) : 1;
		return;
	}
	c3 = strchr(c2, ':');
	if (c3)
		*c3++ = '\0';
	snprintf(s->crash_kind, sizeof(s->crash_kind), "%.31s", want);
	snprintf(s->crash_state, sizeof(s->crash_state), "%.63s", c2);
	s->crash_nth = c3 ? atoi(c3) : 1;
}

static bool crash_matches(struct store *s, int k, const char *text, size_t len)
{
	const char *state;
	json_t *obj;
	bool m;

	if (!s->crash_kind[0] || strcmp(s->crash_kind, store_kinds[k]) != 0)
		return false;
	obj = json_loadb(text, len, 0, NULL);
	state = json_string_value(json_object_get(obj, "state"));
	m = state && strcmp(state, s->crash_state) == 0;
	json_decref(obj);
	return m;
}

static void crash_now(const char *what)
{
	fprintf(stderr, "nodefs: test hook: crashing %s\n", what);
	kill(getpid(), SIGKILL);
	pause();
}
#endif

/* Apply every entry of the journal file, in order, to the files. The
 * count applied, or -errno. The leader's, or store_open's. */
static long replay(struct store *s, char *msg, size_t msz)
{
	int fd = open(s->jpath, O_RDONLY | O_CLOEXEC);
	struct stat st;
	unsigned char *buf;
	size_t len = 0, pos = 0;
	struct store_jentry e;
	unsigned long long prev = 0;
	long n = 0;
	int r = 0;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st) < 0 || st.st_size == 0) {
		close(fd);
		return 0;
	}
	buf = malloc((size_t)st.st_size);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (len < (size_t)st.st_size) {
		ssize_t k = pread(fd, buf + len, (size_t)st.st_size - len, (off_t)len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		len += (size_t)k;
	}
	close(fd);
	while (store_jentry_next(buf, len, &pos, &e) == 1) {
		int k = store_kind_index(e.kind);

		if (n && e.seq != prev + 1)
			break;	/* bytes of an older, failed append: the end */
		prev = e.seq;
		n++;
		if (k < 0 || !store_name_ok(e.name))
			continue;
		r = e.op == 'P' ? store_apply_put(s, k, e.name, e.text, e.len, msg, msz)
				: store_apply_del(s, k, e.name, msg, msz);
		if (r < 0)
			break;
	}
	free(buf);
	return r < 0 ? r : n;
}

/*
 * Empty the journal open as fd, and give it its length: a replay stops at
 * the first entry that is not whole, so zeroing the first header empties
 * it (the bytes after are older entries, whose sequence numbers would end
 * a replay too). The file keeps STORE_JOURNAL_PREALLOC bytes, zeros written
 * once (as databases make their log segments): a flush then overwrites
 * blocks that exist in a file whose size does not change, and its
 * fdatasync writes the data alone, without committing the file system's
 * metadata (ext4 on a loop device here: 210 us instead of 630 us a flush).
 * Durable when it returns 0.
 */
static int journal_reset(int fd)
{
	static const char zeros[64 << 10];
	struct statvfs vfs;
	struct stat st;
	bool grew = false;

	if (fstat(fd, &st) < 0)
		return -errno;
	/* shorter than a header, it holds no entry: nothing to clear (and
	 * nothing to allocate on a full disk) */
	if (st.st_size >= STORE_JHDR && pwrite(fd, zeros, STORE_JHDR, 0) != STORE_JHDR)
		return errno ? -errno : -EIO;
	/* only where the length is a small part of what is free: a state dir
	 * short of space keeps its space for the records */
	if (st.st_size < STORE_JOURNAL_PREALLOC && fstatvfs(fd, &vfs) == 0 &&
	    (unsigned long long)vfs.f_bavail * vfs.f_frsize >= 16ull * STORE_JOURNAL_PREALLOC) {
		for (off_t at = st.st_size; at < STORE_JOURNAL_PREALLOC; grew = true) {
			size_t n = STORE_JOURNAL_PREALLOC - at < (off_t)sizeof(zeros)
					   ? (size_t)(STORE_JOURNAL_PREALLOC - at) : sizeof(zeros);
			ssize_t w = pwrite(fd, zeros, n, at);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				/* give the space back; the journal works as it was */
				if (ftruncate(fd, st.st_size) < 0) {
					/* zeros past the end read as no entry */
				}
				break;
			}
			at += w;
		}
	}
	/* a size that changed is metadata: fsync */
	if ((grew ? fsync(fd) : fdatasync(fd)) < 0)
		return -errno;
	return 0;
}

/* Make the files durable and empty the journal: the leader's. */
static int journal_empty(struct store *s, char *msg, size_t msz)
{
	if (s->pinned) {
		long n = replay(s, msg, msz);

		if (n < 0)
			return (int)n;
		s->pinned = false;
	}
	int fd = -1, r = 0;

	if (syncfs(s->dfd) < 0 || (fd = open(s->jpath, O_WRONLY | O_CLOEXEC)) < 0)
		r = -errno;
	else
		r = journal_reset(fd);
	if (fd >= 0)
		close(fd);
	if (r < 0) {
		snprintf(msg, msz, "checkpoint %.300s: %s", s->jpath, strerror(-r));
		return r;
	}
	atomic_fetch_add_explicit(&s->syncfs, 1, memory_order_relaxed);
	s->jend = 0;
	s->written = false;
	return 0;
}

/* ---- the flush ---- */

static void batch_fail(struct store *s, struct qent *batch, int r, const char *msg)
{
	for (struct qent *e = batch; e; e = e->next) {
		if (e->kind < 0)
			continue;
		e->result = r;
		snprintf(e->msg, sizeof(e->msg), "%.250s", msg);
		atomic_fetch_add_explicit(&s->st[e->kind].errors, 1, memory_order_relaxed);
	}
}

/* A later entry of the batch writes the same file: this one's file would
 * be replaced at once. */
static bool superseded(const struct qent *e)
{
	for (const struct qent *l = e->next; l; l = l->next)
		if (l->kind == e->kind && strcmp(l->name, e->name) == 0)
			return true;
	return false;
}

#if NODEFS_TEST_HOOKS
static bool batch_is_group(const struct qent *batch)
{
	int ops = store_kind_index("operations");
	const char *first = NULL;

	for (const struct qent *e = batch; e; e = e->next) {
		if (e->kind != ops)
			continue;
		if (!first)
			first = e->name;
		else if (strcmp(first, e->name) != 0)
			return true;
	}
	return false;
}
#endif

/* The leader's first half, flushing set: the batch appended to the journal
 * and made durable. false when nothing was (every entry's result then set). */
static bool journal_append(struct store *s, struct qent *batch)
{
	struct iovec iov[64];
	size_t total = 0, n = 0, records = 0;
	char msg[512];

	for (struct qent *e = batch; e; e = e->next)
		if (e->kind >= 0) {
			total += e->bytes.len;
			records++;
		}
	if (!records)
		return false;
	/* the whole batch at the journal's end, 64 entries a call */
	off_t at = s->jend;
	struct qent *e = batch;
	size_t skip = 0;	/* bytes of e already written */
	int jfd = open(s->jpath, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);

	if (jfd < 0) {
		int r = -errno;

		snprintf(msg, sizeof(msg), "checkpoint %.300s: %s", s->jpath, strerror(-r));
		batch_fail(s, batch, r, msg);
		return false;
	}

	while (e) {
		ssize_t w;

		n = 0;
		for (struct qent *x = e; x && n < 64; x = x->next) {
			if (x->kind < 0)
				continue;
			iov[n].iov_base = x->bytes.buf + (n == 0 ? skip : 0);
			iov[n].iov_len = x->bytes.len - (n == 0 ? skip : 0);
			n++;
		}
		if (!n)
			break;
		w = pwritev(jfd, iov, (int)n, at);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int r = w < 0 ? -errno : -EIO;

			snprintf(msg, sizeof(msg), "checkpoint %.300s: %s", s->jpath, strerror(-r));
			if (ftruncate(jfd, s->jend) < 0) {
				/* what follows jend is stale: its sequence numbers end a replay */
			}
			close(jfd);
			batch_fail(s, batch, r, msg);
			return false;
		}
		at += w;
		/* move e and skip past the bytes written */
		while (e && w > 0) {
			if (e->kind < 0) {
				e = e->next;
				continue;
			}
			size_t left = e->bytes.len - skip;

			if ((size_t)w >= left) {
				w -= (ssize_t)left;
				skip = 0;
				e = e->next;
			} else {
				skip += (size_t)w;
				w = 0;
			}
		}
		while (e && e->kind < 0)
			e = e->next;
	}
	if (fdatasync(jfd) < 0) {
		int r = -errno;

		snprintf(msg, sizeof(msg), "checkpoint %.300s: fdatasync: %s", s->jpath, strerror(-r));
		if (ftruncate(jfd, s->jend) < 0) {
			/* as above */
		}
		close(jfd);
		batch_fail(s, batch, r, msg);
		return false;
	}
	close(jfd);
	s->jend = at;
	s->written = true;
	atomic_fetch_add_explicit(&s->flushes, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->records, records, memory_order_relaxed);
	return true;
}

/* The leader's second half, apply_lock held: the records' files replaced
 * in the batch's order, and the journal emptied when empty is set (the
 * leader then still holds flushing too). */
static void apply_batch(struct store *s, struct qent *batch, bool empty)
{
	char msg[512];
	bool group = false, crash = false;

#if NODEFS_TEST_HOOKS
	group = s->group_nth && batch_is_group(batch) && ++s->group_seen == s->group_nth;
#endif
	for (struct qent *e = batch; e; e = e->next) {
		int r;

		if (e->kind < 0 || superseded(e))
			continue;
		r = e->op == 'P' ? store_apply_put(s, e->kind, e->name, e->bytes.buf + e->toff, e->tlen,
					     e->msg, sizeof(e->msg))
				 : store_apply_del(s, e->kind, e->name, e->msg, sizeof(e->msg));
		if (r < 0) {
			/* durable in the journal, which stays until a replay
			 * has written it (journal_empty) */
			e->result = r;
			s->pinned = true;
			atomic_fetch_add_explicit(&s->st[e->kind].errors, 1, memory_order_relaxed);
		}
#if NODEFS_TEST_HOOKS
		if (group)
			crash_now("between the grouped records of two operations");
		if (e->crash_match && ++s->crash_seen == s->crash_nth)
			crash = true;
#endif
	}
	(void)group;
#if NODEFS_TEST_HOOKS
	if (crash) {
		char what[160];

		snprintf(what, sizeof(what), "after checkpoint %s state %s", s->crash_kind,
			 s->crash_state);
		crash_now(what);
	}
#endif
	(void)crash;
	if (empty && journal_empty(s, msg, sizeof(msg)) < 0)
		log_warn("%s (the journal keeps the records)", msg);
}

static void qent_free(struct qent *e)
{
	if (!e)
		return;
	sbuf_free(&e->bytes);
	free(e);
}

/*
 * Wait until e (queued, waited) is flushed, leading flushes while none
 * runs. Called and returns with s->lock held.
 *
 * A leader's flush is two halves: the journal's append and fdatasync
 * (flushing set), then the records' files (apply_lock held). It takes
 * apply_lock before it lets go of flushing, so the next leader's append
 * and fdatasync overlap this one's files while the files still change in
 * journal order. A flush that fills the journal keeps flushing through its
 * files: emptying the journal may not meet an append.
 */
static void wait_flushed(struct store *s, struct qent *e)
{
	while (!e->done) {
		struct qent *batch, *next, *gone = NULL;
		bool appended, empty;

		if (s->flushing || e->taken) {
			pthread_cond_wait(&s->cond, &s->lock);
			continue;
		}
		s->flushing = true;
		batch = s->head;
		s->head = NULL;
		s->tail = &s->head;
		s->qbytes = 0;
		for (struct qent *x = batch; x; x = x->next)
			x->taken = true;
		pthread_mutex_unlock(&s->lock);
		appended = journal_append(s, batch);
		empty = appended && s->jend >= STORE_JOURNAL_MAX;
		/* taken even with nothing to apply: a barrier (store_sync) or a
		 * failed append is done only after the files before it */
		pthread_mutex_lock(&s->apply_lock);
		pthread_mutex_lock(&s->lock);
		s->applying++;
		if (!empty) {
			s->flushing = false;
			pthread_cond_broadcast(&s->cond);
		}
		pthread_mutex_unlock(&s->lock);
		if (appended)
			apply_batch(s, batch, empty);
		pthread_mutex_unlock(&s->apply_lock);
		for (struct qent *x = batch; x; x = x->next)
			if (x->kind >= 0 && x->result == 0)
				hist_observe(&s->st[x->kind].write, store_bucket_le, STORE_BUCKETS,
					     now_ns() - x->t0);
		pthread_mutex_lock(&s->lock);
		for (struct qent *x = batch; x; x = next) {
			next = x->next;
			if (x->waited) {
				x->done = true;	/* its writer frees it */
			} else {
				x->next = gone;
				gone = x;
			}
		}
		if (empty)
			s->flushing = false;
		s->applying--;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		for (struct qent *x = gone; x; x = next) {
			next = x->next;
			qent_free(x);
		}
		pthread_mutex_lock(&s->lock);
	}
}

/* Queue e; wait for its flush unless lazy. Takes e. */
static int submit(struct store *s, struct qent *e, bool lazy, struct nerr *err)
{
	int r;

	if (lazy) {
		bool full;

		pthread_mutex_lock(&s->lock);
		store_jentry_seal((unsigned char *)e->bytes.buf, s->next_seq++);
		*s->tail = e;
		s->tail = &e->next;
		s->qbytes += e->bytes.len;
		full = s->qbytes >= STORE_LAZY_MAX;
		pthread_mutex_unlock(&s->lock);
		return full ? store_sync(s, err) : 0;
	}
	e->waited = true;
	pthread_mutex_lock(&s->lock);
	if (e->kind >= 0)
		store_jentry_seal((unsigned char *)e->bytes.buf, s->next_seq++);
	*s->tail = e;
	s->tail = &e->next;
	s->qbytes += e->bytes.len;
	wait_flushed(s, e);
	pthread_mutex_unlock(&s->lock);
	r = e->result;
	if (r < 0)
		nerr_set(err, -r, "%s", e->msg);
	qent_free(e);
	return r;
}

int store_sync(struct store *s, struct nerr *err)
{
	struct qent *e;

	pthread_mutex_lock(&s->lock);
	if (!s->head && !s->flushing && !s->applying) {
		pthread_mutex_unlock(&s->lock);
		return 0;	/* nothing queued: everything is durable, in its file */
	}
	pthread_mutex_unlock(&s->lock);
	e = calloc(1, sizeof(*e));
	if (!e)
		return nerr_set(err, ENOMEM, "checkpoint: out of memory");
	e->kind = -1;
	sbuf_init(&e->bytes, 0);
	return submit(s, e, false, err);
}

/* A queued write of KIND/NAME: a put of text, or a removal (text NULL). */
int store_queue_write(struct store *s, const char *kind, const char *name, const char *text,
		      size_t len, unsigned flags, struct nerr *err)
{
	int k = store_kind_index(kind), r;
	struct qent *e;

	if (k < 0 || !store_name_ok(name) || strlen(name) >= sizeof(e->name))
		return nerr_set(err, EINVAL, "checkpoint %s/%s: not a record's name", kind, name);
	if (text && len > STORE_RECORD_MAX)
		return nerr_set(err, EFBIG, "checkpoint %s/%s: record larger than %u bytes", kind,
				name, STORE_RECORD_MAX);
	e = calloc(1, sizeof(*e));
	if (!e)
		return nerr_set(err, ENOMEM, "checkpoint %s/%s: out of memory", kind, name);
	e->kind = k;
	e->op = text ? 'P' : 'D';
	e->t0 = now_ns();
	snprintf(e->name, sizeof(e->name), "%s", name);
	sbuf_init(&e->bytes, STORE_JENTRY_MAX + STORE_JHDR);
	r = store_jentry_encode(&e->bytes, e->op, kind, name, text, len, 0);
	if (r < 0) {
		qent_free(e);
		atomic_fetch_add_explicit(&s->st[k].errors, 1, memory_order_relaxed);
		return nerr_set(err, -r, "checkpoint %s/%s: %s", kind, name, strerror(-r));
	}
	e->tlen = text ? len : 0;
	e->toff = e->bytes.len - e->tlen;
#if NODEFS_TEST_HOOKS
	e->crash_match = text && crash_matches(s, k, text, len);
#endif
	return submit(s, e, flags & STORE_LAZY, err);
}

/* ---- open and close ---- */

int store_journal_open(struct store *s, struct nerr *err)
{
	char msg[512] = "";
	long n;
	int r;

	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->apply_lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->tail = &s->head;
	snprintf(s->jpath, sizeof(s->jpath), "%s/journal", s->dir);
	if (access(s->jpath, F_OK) < 0) {
		/* made once, its name durable before a flush relies on it */
		int fd = open(s->jpath, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);

		if (fd >= 0) {
			close(fd);
			fsync(s->dfd);
		} else if (errno != EROFS) {
			return nerr_set(err, errno, "cannot create %s: %s", s->jpath, strerror(errno));
		}
	}
	/* what a crash left in the journal reaches the files before any read */
	n = replay(s, msg, sizeof(msg));
	if (n < 0)
		return nerr_set(err, (int)-n, "cannot replay %s: %s", s->jpath,
				msg[0] ? msg : strerror((int)-n));
	if (n > 0) {
		atomic_store(&s->replayed, (unsigned long long)n);
		log_info("checkpoint journal: %ld records replayed into %s", n, s->dir);
		s->written = true;
	}
	if (s->written && (r = journal_empty(s, msg, sizeof(msg))) < 0)
		return nerr_set(err, -r, "%s", msg);
	if (!s->written) {
		/* empty: made, or left by a clean stop, or by a build that
		 * truncated it; give it its length (best effort: without it
		 * flushes only cost more) */
		struct stat st;
		int fd;

		if (stat(s->jpath, &st) == 0 && st.st_size < STORE_JOURNAL_PREALLOC &&
		    (fd = open(s->jpath, O_WRONLY | O_CLOEXEC)) >= 0) {
			if ((r = journal_reset(fd)) < 0)
				log_warn("checkpoint %s: %s", s->jpath, strerror(-r));
			close(fd);
		}
	}
	/* sequence numbers grow across starts too */
	{
		struct timespec t;

		clock_gettime(CLOCK_REALTIME, &t);
		s->next_seq = (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
	}
#if NODEFS_TEST_HOOKS
	crash_setup(s);
#endif
	return 0;
}

void store_journal_close(struct store *s)
{
	struct nerr err = { 0 };
	char msg[512];

	if (store_sync(s, &err) < 0)
		log_err("%s", err.msg);
	if (s->written && journal_empty(s, msg, sizeof(msg)) < 0)
		log_err("%s (replayed at the next start)", msg);
}
