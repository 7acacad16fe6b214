/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* store: atomic JSON checkpoints; see store.h. */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hist.h"
#include "jw.h"
#include "nerr.h"
#include "sbuf.h"
#include "nodefs-config.h"

#if NODEFS_TEST_HOOKS
/*
 * Crash tests (test builds only, -Dtest_hooks=true): NODEFS_CRASH_AT=
 * "KIND:STATE[:N]" kills the daemon with SIGKILL right after the Nth (default
 * first) checkpoint of a KIND record (volumes, containers, operations) whose
 * "state" is STATE has reached the disk: the moment a real crash would lose
 * the most.
 */
static const char *crash_spec;
static pthread_once_t crash_once = PTHREAD_ONCE_INIT;

static void crash_spec_read(void)
{
	crash_spec = getenv("NODEFS_CRASH_AT");
}

static void crash_hook(const char *kind, const char *name, const char *text, size_t len)
{
	static atomic_int seen;
	const char *spec, *state;
	json_t *obj;

	pthread_once(&crash_once, crash_spec_read);
	spec = crash_spec;
	if (!spec)
		return;
	obj = json_loadb(text, len, 0, NULL);
	state = json_string_value(json_object_get(obj, "state"));
	char want[128];
	int nth = 1;
	char *c2;

	if (!state) {
		json_decref(obj);
		return;
	}
	snprintf(want, sizeof(want), "%s", spec);
	c2 = strchr(want, ':');
	if (!c2) {
		json_decref(obj);
		return;
	}
	*c2++ = '\0';
	char *c3 = strchr(c2, ':');
	if (c3) {
		*c3++ = '\0';
		nth = atoi(c3);
	}
	if (strcmp(want, kind) == 0 && strcmp(c2, state) == 0 &&
	    atomic_fetch_add(&seen, 1) + 1 == nth) {
		fprintf(stderr, "nodefs: test hook: crashing after checkpoint %s/%s state %s\n",
			kind, name, state);
		kill(getpid(), SIGKILL);
	}
	json_decref(obj);
}
#endif

static const char *const kinds[] = { "volumes", "containers", "operations", "plugins" };
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

/*
 * The kinds' directories stay open (one state dir per daemon; a few in unit
 * tests): a checkpoint is then openat, write, fsync, close, renameat and an
 * fsync of the open directory, with no path walks. store_init (re)opens
 * them; a state dir it never saw falls back to paths.
 */
#define DIRS_MAX 8
const double store_bucket_le[STORE_BUCKETS] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
						0.01, 0.05, 0.25, 1 };
struct kind_stats {
	struct hist write;
	atomic_ullong errors, removals;
	atomic_ullong loaded;	/* records store_load has read (recovery's progress) */
};
static struct {
	char path[4096];
	int fd[NKINDS];
	struct kind_stats st[NKINDS];
} dirs[DIRS_MAX];
static size_t ndirs;
static pthread_mutex_t dirs_lock = PTHREAD_MUTEX_INITIALIZER;

static int kind_index(const char *kind)
{
	for (size_t i = 0; i < NKINDS; i++)
		if (strcmp(kinds[i], kind) == 0)
			return (int)i;
	return -1;
}

/* The open directory of kind under state_dir, or -1; its figures in
 * *ret_st (NULL for a state dir store_init never saw). Slots are never
 * freed: the pointer stays valid. */
static int kind_fd(const char *state_dir, const char *kind, struct kind_stats **ret_st)
{
	int k = kind_index(kind), fd = -1;

	*ret_st = NULL;
	if (k < 0)
		return -1;
	pthread_mutex_lock(&dirs_lock);
	for (size_t i = 0; i < ndirs; i++)
		if (strcmp(dirs[i].path, state_dir) == 0) {
			fd = dirs[i].fd[k];
			*ret_st = &dirs[i].st[k];
			break;
		}
	pthread_mutex_unlock(&dirs_lock);
	return fd;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void count_write(struct kind_stats *st, uint64_t t0, int r)
{
	if (!st)
		return;
	if (r < 0)
		atomic_fetch_add_explicit(&st->errors, 1, memory_order_relaxed);
	else
		hist_observe(&st->write, store_bucket_le, STORE_BUCKETS, now_ns() - t0);
}

int store_stats(const char *state_dir, struct store_kind_stats *ret, size_t n)
{
	size_t got = 0;

	pthread_mutex_lock(&dirs_lock);
	for (size_t i = 0; i < ndirs; i++) {
		if (strcmp(dirs[i].path, state_dir) != 0)
			continue;
		for (size_t k = 0; k < NKINDS && got < n; k++, got++) {
			struct kind_stats *st = &dirs[i].st[k];

			ret[got].kind = kinds[k];
			ret[got].write = &st->write;
			ret[got].errors = atomic_load(&st->errors);
			ret[got].removals = atomic_load(&st->removals);
		}
		break;
	}
	pthread_mutex_unlock(&dirs_lock);
	return (int)got;
}

static void dirs_open(const char *state_dir)
{
	size_t slot;

	if (strlen(state_dir) >= sizeof(dirs[0].path))
		return;
	pthread_mutex_lock(&dirs_lock);
	for (slot = 0; slot < ndirs; slot++)
		if (strcmp(dirs[slot].path, state_dir) == 0)
			break;
	if (slot == ndirs) {
		if (ndirs == DIRS_MAX) {
			pthread_mutex_unlock(&dirs_lock);
			return;
		}
		snprintf(dirs[slot].path, sizeof(dirs[slot].path), "%s", state_dir);
		for (size_t k = 0; k < NKINDS; k++)
			dirs[slot].fd[k] = -1;
		ndirs++;
	}
	for (size_t k = 0; k < NKINDS; k++) {
		char p[4200];
		int fd;

		snprintf(p, sizeof(p), "%s/%s", state_dir, kinds[k]);
		fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		/* the old descriptor stays open: a put in flight may hold it */
		if (fd >= 0)
			dirs[slot].fd[k] = fd;
	}
	pthread_mutex_unlock(&dirs_lock);
}

int store_init(const char *state_dir, struct nerr *err)
{
	char p[4096];

	for (size_t i = 0; i < NKINDS; i++) {
		snprintf(p, sizeof(p), "%s/%s", state_dir, kinds[i]);
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			return nerr_set(err, errno, "cannot create %s: %s", p, strerror(errno));
	}
	dirs_open(state_dir);
	return 0;
}

static int fsync_dir(int dfd, const char *dir)
{
	int fd = dfd >= 0 ? dfd : open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		r = -errno;
	if (fd != dfd)
		close(fd);
	return r;
}

/* A record's text: compact JSON and a newline, in buf when it fits. */
static char *record_text(json_t *obj, char *buf, size_t size, size_t *len)
{
	const size_t flags = JSON_COMPACT;	/* jansson keeps insertion order */
	size_t n = json_dumpb(obj, buf, size - 1, flags);
	char *t = buf;

	if (n == 0)
		return NULL;
	if (n > size - 1) {
		t = malloc(n + 1);
		if (!t || json_dumpb(obj, t, n, flags) != n) {
			free(t);
			return NULL;
		}
	}
	t[n] = '\n';
	*len = n + 1;
	return t;
}

/* Write text (a whole record and its newline) as KIND/NAME.json. */
static int put_text(const char *state_dir, const char *kind, const char *name, const char *text,
		    size_t len, struct nerr *err)
{
	char dir[4096], tmp[4200], dst[4200];
	struct kind_stats *st;
	int dfd = kind_fd(state_dir, kind, &st);
	uint64_t t0 = now_ns();
	size_t off = 0;
	int fd, r = 0;

	snprintf(dir, sizeof(dir), "%s/%s", state_dir, kind);
	if (dfd >= 0) {
		snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
		snprintf(dst, sizeof(dst), "%s.json", name);
	} else {
		snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
		snprintf(dst, sizeof(dst), "%s/%s.json", dir, name);
	}
	fd = openat(dfd >= 0 ? dfd : AT_FDCWD, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = nerr_set(err, errno, "checkpoint %s/%s: %s", dir, tmp, strerror(errno));
		count_write(st, t0, r);
		return r;
	}
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = nerr_set(err, errno, "checkpoint %s/%s: %s", dir, tmp, strerror(errno));
			break;
		}
		off += (size_t)n;
	}
	if (r == 0 && fsync(fd) < 0)
		r = nerr_set(err, errno, "checkpoint %s/%s: %s", dir, tmp, strerror(errno));
	close(fd);
	if (r == 0 && renameat(dfd >= 0 ? dfd : AT_FDCWD, tmp, dfd >= 0 ? dfd : AT_FDCWD, dst) < 0)
		r = nerr_set(err, errno, "checkpoint %s/%s: %s", dir, dst, strerror(errno));
	if (r == 0 && (r = fsync_dir(dfd, dir)) < 0)
		nerr_set(err, -r, "checkpoint %s: fsync: %s", dir, strerror(-r));
	count_write(st, t0, r);
	if (r < 0)
		unlinkat(dfd >= 0 ? dfd : AT_FDCWD, tmp, 0);
#if NODEFS_TEST_HOOKS
	else
		crash_hook(kind, name, text, len);
#endif
	return r;
}

int store_put(const char *state_dir, const char *kind, const char *name, json_t *obj,
	      struct nerr *err)
{
	char buf[8192];
	char *text;
	size_t len;
	int r;

	json_object_set_new(obj, "version", json_integer(STORE_VERSION));
	text = record_text(obj, buf, sizeof(buf), &len);
	if (!text)
		return nerr_set(err, ENOMEM, "checkpoint %s/%s: out of memory", kind, name);
	r = put_text(state_dir, kind, name, text, len, err);
	if (text != buf)
		free(text);
	return r;
}

void store_record_begin(struct jw *w, struct sbuf *sb)
{
	sbuf_reserve(sb, 1024);	/* a volume's record in one allocation; jw sees a failure */
	jw_init(w, sb, 0);
	jw_obj(w);
	jw_kint(w, "version", STORE_VERSION);
}

int store_put_record(const char *state_dir, const char *kind, const char *name, struct jw *w,
		     struct nerr *err)
{
	int r;

	jw_obj_end(w);
	r = jw_end(w);
	if (r == 0)
		r = sbuf_addc(w->out, '\n');
	if (r < 0)
		return nerr_set(err, -r, "checkpoint %s/%s: %s", kind, name, strerror(-r));
	return put_text(state_dir, kind, name, w->out->buf, w->out->len, err);
}

static int remove_record(const char *state_dir, const char *kind, const char *name, bool durable,
			 struct nerr *err)
{
	char dir[4096], dst[4200];
	struct kind_stats *st;
	int dfd = kind_fd(state_dir, kind, &st);

	snprintf(dir, sizeof(dir), "%s/%s", state_dir, kind);
	if (dfd >= 0)
		snprintf(dst, sizeof(dst), "%s.json", name);
	else
		snprintf(dst, sizeof(dst), "%s/%s.json", dir, name);
	if (unlinkat(dfd >= 0 ? dfd : AT_FDCWD, dst, 0) < 0 && errno != ENOENT)
		return nerr_set(err, errno, "checkpoint %s/%s.json: %s", dir, name, strerror(errno));
	if (durable)
		fsync_dir(dfd, dir);
	if (st)
		atomic_fetch_add_explicit(&st->removals, 1, memory_order_relaxed);
	return 0;
}

int store_del(const char *state_dir, const char *kind, const char *name, struct nerr *err)
{
	return remove_record(state_dir, kind, name, true, err);
}

int store_drop(const char *state_dir, const char *kind, const char *name, struct nerr *err)
{
	return remove_record(state_dir, kind, name, false, err);
}

struct entry {
	char name[256];
	struct timespec mtime;
};

json_t *store_decode(const char *text, size_t len, char *why, size_t n)
{
	json_error_t je;
	json_t *obj = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	json_int_t ver;

	if (!obj) {
		snprintf(why, n, "line %d: %s", je.line, je.text);
		return NULL;
	}
	if (!json_is_object(obj)) {
		snprintf(why, n, "not an object");
		json_decref(obj);
		return NULL;
	}
	ver = json_integer_value(json_object_get(obj, "version"));
	if (ver != STORE_VERSION) {
		snprintf(why, n, "unknown record version %lld", (long long)ver);
		json_decref(obj);
		return NULL;
	}
	return obj;
}

/* A record file's bytes (records are small: at most STORE_RECORD_MAX). */
#define STORE_RECORD_MAX (4u << 20)

static char *read_record(const char *path, size_t *len, char *why, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *buf;
	size_t off = 0;

	if (fd < 0) {
		snprintf(why, n, "%s", strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0) {
		snprintf(why, n, "%s", strerror(errno));
		close(fd);
		return NULL;
	}
	if (st.st_size < 0 || (size_t)st.st_size > STORE_RECORD_MAX) {
		snprintf(why, n, "record larger than %u bytes", STORE_RECORD_MAX);
		close(fd);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		snprintf(why, n, "out of memory");
		close(fd);
		return NULL;
	}
	while (off < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + off, (size_t)st.st_size - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		off += (size_t)k;
	}
	close(fd);
	*len = off;
	return buf;
}

static int by_age(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	return strcmp(x->name, y->name);
}

int store_load(const char *state_dir, const char *kind, store_load_fn fn, store_bad_fn bad,
	       void *ctx)
{
	char dir[4096], path[4400];
	struct entry *v = NULL;
	size_t n = 0, a = 0;
	struct dirent *de;
	DIR *d;

	struct kind_stats *ks;

	(void)kind_fd(state_dir, kind, &ks);
	snprintf(dir, sizeof(dir), "%s/%s", state_dir, kind);
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		struct stat st;

		if (de->d_name[0] == '.' || l < 6 || strcmp(de->d_name + l - 5, ".json") != 0 ||
		    l - 5 >= sizeof(v->name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (stat(path, &st) < 0)
			continue;
		if (n == a) {
			size_t na = a ? a * 2 : 64;
			struct entry *nv = realloc(v, na * sizeof(*nv));
			if (!nv) {
				closedir(d);
				free(v);
				return -ENOMEM;
			}
			v = nv;
			a = na;
		}
		memcpy(v[n].name, de->d_name, l - 5);
		v[n].name[l - 5] = '\0';
		v[n].mtime = st.st_mtim;
		n++;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), by_age);
	for (size_t i = 0; i < n; i++) {
		char why[1400], inner[500];
		json_t *obj = NULL;
		size_t len = 0;
		char *text;

		if (ks)
			atomic_fetch_add_explicit(&ks->loaded, 1, memory_order_relaxed);
		snprintf(path, sizeof(path), "%s/%s.json", dir, v[i].name);
		text = read_record(path, &len, inner, sizeof(inner));
		if (text)
			obj = store_decode(text, len, inner, sizeof(inner));
		free(text);
		if (!obj) {
			/* kept aside for the operator, out of the next start's way */
			char aside[4400];

			snprintf(aside, sizeof(aside), "%s/%s.corrupt", dir, v[i].name);
			if (rename(path, aside) == 0)
				snprintf(why, sizeof(why), "%.400s: %s; kept as %s.corrupt", path, inner,
					 v[i].name);
			else
				snprintf(why, sizeof(why), "%.400s: %s", path, inner);
			if (bad)
				bad(ctx, v[i].name, why);
			continue;
		}
		fn(ctx, v[i].name, obj);
		json_decref(obj);
	}
	free(v);
	return 0;
}

/* A record's file name: NAME.json, no leading dot (temporary files). */
static bool is_record(const char *name)
{
	size_t l = strlen(name);

	return name[0] != '.' && l >= 6 && strcmp(name + l - 5, ".json") == 0;
}

unsigned long long store_count(const char *state_dir)
{
	unsigned long long n = 0;
	char dir[4200];

	for (size_t k = 0; k < NKINDS; k++) {
		struct dirent *de;
		DIR *d;

		snprintf(dir, sizeof(dir), "%s/%s", state_dir, kinds[k]);
		d = opendir(dir);
		if (!d)
			continue;
		while ((de = readdir(d)))
			n += is_record(de->d_name);
		closedir(d);
	}
	return n;
}

unsigned long long store_loaded(const char *state_dir)
{
	unsigned long long n = 0;

	pthread_mutex_lock(&dirs_lock);
	for (size_t i = 0; i < ndirs; i++) {
		if (strcmp(dirs[i].path, state_dir) != 0)
			continue;
		for (size_t k = 0; k < NKINDS; k++)
			n += atomic_load_explicit(&dirs[i].st[k].loaded, memory_order_relaxed);
		break;
	}
	pthread_mutex_unlock(&dirs_lock);
	return n;
}
