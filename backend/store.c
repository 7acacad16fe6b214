/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* store: atomic JSON checkpoints; see store.h. */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nerr.h"
#include "nodefs-config.h"

#if NODEFS_TEST_HOOKS
/*
 * Crash tests (test builds only, -Dtest_hooks=true): NODEFS_CRASH_AT=
 * "KIND:STATE[:N]" kills the daemon with SIGKILL right after the Nth (default
 * first) checkpoint of a KIND record (volumes, containers, operations) whose
 * "state" is STATE has reached the disk: the moment a real crash would lose
 * the most.
 */
static void crash_hook(const char *kind, const char *name, json_t *obj)
{
	static atomic_int seen;
	const char *spec = getenv("NODEFS_CRASH_AT");
	const char *state = json_string_value(json_object_get(obj, "state"));
	char want[128];
	int nth = 1;
	char *c2;

	if (!spec || !state)
		return;
	snprintf(want, sizeof(want), "%s", spec);
	c2 = strchr(want, ':');
	if (!c2)
		return;
	*c2++ = '\0';
	char *c3 = strchr(c2, ':');
	if (c3) {
		*c3++ = '\0';
		nth = atoi(c3);
	}
	if (strcmp(want, kind) != 0 || strcmp(c2, state) != 0)
		return;
	if (atomic_fetch_add(&seen, 1) + 1 == nth) {
		fprintf(stderr, "nodefs: test hook: crashing after checkpoint %s/%s state %s\n",
			kind, name, state);
		kill(getpid(), SIGKILL);
	}
}
#endif

static const char *const kinds[] = { "volumes", "containers", "operations" };

int store_init(const char *state_dir, struct nerr *err)
{
	char p[4096];

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", state_dir, kinds[i]);
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			return nerr_set(err, errno, "cannot create %s: %s", p, strerror(errno));
	}
	return 0;
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		r = -errno;
	close(fd);
	return r;
}

int store_put(const char *state_dir, const char *kind, const char *name, json_t *obj,
	      struct nerr *err)
{
	char dir[4096], tmp[4200], dst[4200];
	char *text;
	size_t len, off = 0;
	int fd, r = 0;

	snprintf(dir, sizeof(dir), "%s/%s", state_dir, kind);
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
	snprintf(dst, sizeof(dst), "%s/%s.json", dir, name);
	json_object_set_new(obj, "version", json_integer(STORE_VERSION));
	text = json_dumps(obj, JSON_INDENT(1) | JSON_SORT_KEYS);
	if (!text)
		return nerr_set(err, ENOMEM, "checkpoint %s/%s: out of memory", kind, name);
	len = strlen(text);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = nerr_set(err, errno, "checkpoint %s: %s", tmp, strerror(errno));
		free(text);
		return r;
	}
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = nerr_set(err, errno, "checkpoint %s: %s", tmp, strerror(errno));
			break;
		}
		off += (size_t)n;
	}
	free(text);
	if (r == 0 && (write(fd, "\n", 1) != 1 || fsync(fd) < 0))
		r = nerr_set(err, errno ? errno : EIO, "checkpoint %s: %s", tmp, strerror(errno));
	close(fd);
	if (r == 0 && rename(tmp, dst) < 0)
		r = nerr_set(err, errno, "checkpoint %s: %s", dst, strerror(errno));
	if (r == 0 && (r = fsync_dir(dir)) < 0)
		nerr_set(err, -r, "checkpoint %s: fsync: %s", dir, strerror(-r));
	if (r < 0)
		unlink(tmp);
#if NODEFS_TEST_HOOKS
	else
		crash_hook(kind, name, obj);
#endif
	return r;
}

int store_del(const char *state_dir, const char *kind, const char *name, struct nerr *err)
{
	char dir[4096], dst[4200];

	snprintf(dir, sizeof(dir), "%s/%s", state_dir, kind);
	snprintf(dst, sizeof(dst), "%s/%s.json", dir, name);
	if (unlink(dst) < 0 && errno != ENOENT)
		return nerr_set(err, errno, "checkpoint %s: %s", dst, strerror(errno));
	fsync_dir(dir);
	return 0;
}

struct entry {
	char name[256];
	struct timespec mtime;
};

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
		json_error_t je;
		json_t *obj;

		snprintf(path, sizeof(path), "%s/%s.json", dir, v[i].name);
		obj = json_load_file(path, 0, &je);
		if (!obj || !json_is_object(obj)) {
			char why[600];
			snprintf(why, sizeof(why), "%.400s:%d: %s", path, je.line, obj ? "not an object" : je.text);
			if (bad)
				bad(ctx, v[i].name, why);
		} else if (json_integer_value(json_object_get(obj, "version")) != STORE_VERSION) {
			char why[600];
			snprintf(why, sizeof(why), "%.400s: unknown record version %lld", path,
				 (long long)json_integer_value(json_object_get(obj, "version")));
			if (bad)
				bad(ctx, v[i].name, why);
		} else {
			fn(ctx, v[i].name, obj);
		}
		json_decref(obj);
	}
	free(v);
	return 0;
}
