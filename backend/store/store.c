/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * store: the state dir's records; see store.h for the contract.
 *
 * Owns: struct store's lifecycle, the kinds' directories, the records'
 * files (written, removed, read back, counted, kept aside when corrupt),
 * the write calls' rendering of a record's text, and the figures.
 * Durability is the journal's (store-journal.c): every write goes through
 * store_queue_write, which calls back store_apply_put/_del once the
 * record's entry is durable.
 * Must not know: the objects whose records it keeps (kinds are names).
 */
#include "store-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jw.h"
#include "nerr.h"

const char *const store_kinds[STORE_NKINDS] = { "volumes", "containers", "operations", "plugins",
						    "snapshots" };

const double store_bucket_le[STORE_BUCKETS] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
						0.01, 0.05, 0.25, 1 };

int store_kind_index(const char *kind)
{
	for (size_t i = 0; i < STORE_NKINDS; i++)
		if (strcmp(store_kinds[i], kind) == 0)
			return (int)i;
	return -1;
}

const char *store_dir(const struct store *s)
{
	return s->dir;
}

/* ---- the files ---- */

int store_apply_put(struct store *s, int k, const char *name, const char *text, size_t len,
		    char *msg, size_t msz)
{
	char tmp[300], dst[300];
	size_t off = 0;
	int fd, r = 0;

	snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
	snprintf(dst, sizeof(dst), "%s.json", name);
	fd = openat(s->kfd[k], tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = -errno;
		goto fail;
	}
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		off += (size_t)n;
	}
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && renameat(s->kfd[k], tmp, s->kfd[k], dst) < 0)
		r = -errno;
	if (r == 0)
		return 0;
	unlinkat(s->kfd[k], tmp, 0);
fail:
	snprintf(msg, msz, "checkpoint %s/%s/%s: %s", s->dir, store_kinds[k], dst, strerror(-r));
	return r;
}

int store_apply_del(struct store *s, int k, const char *name, char *msg, size_t msz)
{
	char dst[300];

	snprintf(dst, sizeof(dst), "%s.json", name);
	if (unlinkat(s->kfd[k], dst, 0) < 0 && errno != ENOENT) {
		int r = -errno;

		snprintf(msg, msz, "checkpoint %s/%s/%s: %s", s->dir, store_kinds[k], dst, strerror(-r));
		return r;
	}
	atomic_fetch_add_explicit(&s->st[k].removals, 1, memory_order_relaxed);
	return 0;
}

/* A journal entry's name: one path component, no leading dot. */
bool store_name_ok(const char *name)
{
	return name[0] && name[0] != '.' && !strchr(name, '/');
}

/* ---- writes ---- */

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

int store_put(struct store *s, const char *kind, const char *name, json_t *obj, unsigned flags,
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
	r = store_queue_write(s, kind, name, text, len, flags, err);
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

int store_put_record(struct store *s, const char *kind, const char *name, struct jw *w,
		     unsigned flags, struct nerr *err)
{
	int r;

	jw_obj_end(w);
	r = jw_end(w);
	if (r == 0)
		r = sbuf_addc(w->out, '\n');
	if (r < 0)
		return nerr_set(err, -r, "checkpoint %s/%s: %s", kind, name, strerror(-r));
	return store_queue_write(s, kind, name, w->out->buf, w->out->len, flags, err);
}

int store_del(struct store *s, const char *kind, const char *name, unsigned flags,
	      struct nerr *err)
{
	return store_queue_write(s, kind, name, NULL, 0, flags, err);
}

int store_drop(struct store *s, const char *kind, const char *name, struct nerr *err)
{
	return store_queue_write(s, kind, name, NULL, 0, STORE_LAZY, err);
}
/* ---- open and close ---- */

int store_open(const char *state_dir, struct store **ret, struct nerr *err)
{
	struct store *s = calloc(1, sizeof(*s));
	char p[4200];
	int r;

	if (!s)
		return nerr_set(err, ENOMEM, "out of memory");
	s->dfd = -1;
	for (size_t k = 0; k < STORE_NKINDS; k++)
		s->kfd[k] = -1;
	s->dir = strdup(state_dir);
	if (!s->dir) {
		free(s);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	s->dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dfd < 0) {
		r = nerr_set(err, errno, "cannot open %s: %s", state_dir, strerror(errno));
		goto fail;
	}
	for (size_t k = 0; k < STORE_NKINDS; k++) {
		snprintf(p, sizeof(p), "%s/%s", state_dir, store_kinds[k]);
		if (mkdir(p, 0700) < 0 && errno != EEXIST) {
			r = nerr_set(err, errno, "cannot create %s: %s", p, strerror(errno));
			goto fail;
		}
		s->kfd[k] = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (s->kfd[k] < 0) {
			r = nerr_set(err, errno, "cannot open %s: %s", p, strerror(errno));
			goto fail;
		}
	}
	r = store_journal_open(s, err);
	if (r < 0)
		goto fail_journal;
	*ret = s;
	return 0;
fail_journal:
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->apply_lock);
	pthread_cond_destroy(&s->cond);
fail:
	for (size_t k = 0; k < STORE_NKINDS; k++)
		if (s->kfd[k] >= 0)
			close(s->kfd[k]);
	if (s->dfd >= 0)
		close(s->dfd);
	free(s->dir);
	free(s);
	return r;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	store_journal_close(s);
	for (size_t k = 0; k < STORE_NKINDS; k++)
		close(s->kfd[k]);
	close(s->dfd);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->apply_lock);
	pthread_cond_destroy(&s->cond);
	free(s->dir);
	free(s);
}

/* ---- figures ---- */

int store_stats(struct store *s, struct store_kind_stats *ret, size_t n)
{
	size_t got = 0;

	for (size_t k = 0; k < STORE_NKINDS && got < n; k++, got++) {
		ret[got].kind = store_kinds[k];
		ret[got].write = &s->st[k].write;
		ret[got].errors = atomic_load(&s->st[k].errors);
		ret[got].removals = atomic_load(&s->st[k].removals);
	}
	return (int)got;
}

void store_io_stats(struct store *s, struct store_io *ret)
{
	ret->flushes = atomic_load(&s->flushes);
	ret->records = atomic_load(&s->records);
	ret->syncfs = atomic_load(&s->syncfs);
	ret->replayed = atomic_load(&s->replayed);
}

/* ---- reading back ---- */

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

int store_load(struct store *s, const char *kind, store_load_fn fn, store_bad_fn bad, void *ctx)
{
	char dir[4096], path[4400];
	struct entry *v = NULL;
	size_t n = 0, a = 0;
	struct dirent *de;
	int k = store_kind_index(kind);
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/%s", s->dir, kind);
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		struct stat st;

		if (de->d_name[0] == '.' || l < 6 || strcmp(de->d_name + l - 5, ".json") != 0 ||
		    l - 5 >= sizeof(v->name))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, 0) < 0)
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

		if (k >= 0)
			atomic_fetch_add_explicit(&s->st[k].loaded, 1, memory_order_relaxed);
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

unsigned long long store_count(struct store *s)
{
	unsigned long long n = 0;
	char dir[4200];

	for (size_t k = 0; k < STORE_NKINDS; k++) {
		struct dirent *de;
		DIR *d;

		snprintf(dir, sizeof(dir), "%s/%s", s->dir, store_kinds[k]);
		d = opendir(dir);
		if (!d)
			continue;
		while ((de = readdir(d)))
			n += is_record(de->d_name);
		closedir(d);
	}
	return n;
}

unsigned long long store_loaded(struct store *s)
{
	unsigned long long n = 0;

	for (size_t k = 0; k < STORE_NKINDS; k++)
		n += atomic_load_explicit(&s->st[k].loaded, memory_order_relaxed);
	return n;
}
