/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * store: the plugin's records of volumes and snapshots, in memory (arrays
 * sorted by id, under plugin.mu) and on disk, one small file per object
 * under BASE/state, each written atomically (tmp + fsync + rename), so a
 * kill -9 leaves either the old or the new record. At start it loads them
 * and finishes what a crash left half-done: data with no record (an object
 * being made or deleted) is removed, as is a record not READY.
 * It knows the record format and nothing of CSI messages or mounts.
 *
 * A record is "key value" lines; values are percent-encoded.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "grpc.h"
#include "plugin.h"
#include "macro.h"
#include "sbuf.h"

#define RECORD_CAP (64u << 10)

static const char *const state_names[] = { "creating", "ready", "deleting" };

void vol_free(struct vol *v)
{
	if (!v)
		return;
	free(v->name);
	free(v->params);
	free(v->mparams);
	free(v->staged);
	for (unsigned i = 0; i < v->ntargets; i++)
		free(v->targets[i].path);
	free(v->targets);
	free(v);
}

void snap_free(struct snap *s)
{
	if (!s)
		return;
	free(s->name);
	free(s);
}

void store_new_id(const char *prefix, char out[24])
{
	uint8_t b[8];

	if (getrandom(b, sizeof(b), 0) != sizeof(b)) {
		uint64_t t = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)out;

		memcpy(b, &t, sizeof(b));
	}
	snprintf(out, 24, "%s%02x%02x%02x%02x%02x%02x%02x%02x", prefix,
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]);
}

/* ---- lookups ---- */

#define BSEARCH(arr, n, key, out_idx) do { \
	size_t lo_ = 0, hi_ = (n); \
	while (lo_ < hi_) { \
		size_t mid_ = (lo_ + hi_) / 2; \
		if (strcmp((arr)[mid_]->id, (key)) < 0) lo_ = mid_ + 1; else hi_ = mid_; \
	} \
	(out_idx) = lo_; \
} while (0)

size_t store_vol_index(struct plugin *p, const char *id)
{
	size_t i;

	BSEARCH(p->vols, p->nvols, id, i);
	return i;
}

size_t store_snap_index(struct plugin *p, const char *id)
{
	size_t i;

	BSEARCH(p->snaps, p->nsnaps, id, i);
	return i;
}

struct vol *store_vol(struct plugin *p, const char *id)
{
	size_t i = store_vol_index(p, id);

	return i < p->nvols && strcmp(p->vols[i]->id, id) == 0 ? p->vols[i] : NULL;
}

struct snap *store_snap(struct plugin *p, const char *id)
{
	size_t i = store_snap_index(p, id);

	return i < p->nsnaps && strcmp(p->snaps[i]->id, id) == 0 ? p->snaps[i] : NULL;
}

struct vol *store_vol_by_name(struct plugin *p, const char *name)
{
	for (size_t i = 0; i < p->nvols; i++)
		if (strcmp(p->vols[i]->name, name) == 0)
			return p->vols[i];
	return NULL;
}

struct snap *store_snap_by_name(struct plugin *p, const char *name)
{
	for (size_t i = 0; i < p->nsnaps; i++)
		if (strcmp(p->snaps[i]->name, name) == 0)
			return p->snaps[i];
	return NULL;
}

static int insert(void ***arr, size_t *n, size_t *alloc, size_t at, void *o)
{
	if (*n == *alloc) {
		size_t na = *alloc ? *alloc * 2 : 16;
		void **x = realloc(*arr, na * sizeof(*x));

		if (!x)
			return -ENOMEM;
		*arr = x;
		*alloc = na;
	}
	memmove(*arr + at + 1, *arr + at, (*n - at) * sizeof(**arr));
	(*arr)[at] = o;
	(*n)++;
	return 0;
}

int store_add_vol(struct plugin *p, struct vol *v)
{
	return insert((void ***)&p->vols, &p->nvols, &p->avols, store_vol_index(p, v->id), v);
}

int store_add_snap(struct plugin *p, struct snap *s)
{
	return insert((void ***)&p->snaps, &p->nsnaps, &p->asnaps, store_snap_index(p, s->id), s);
}

/* ---- files ---- */

static int write_atomic(struct plugin *p, const char *id, const struct sbuf *sb)
{
	char path[PATH_CAP + 1], tmp[PATH_CAP + 1];
	int fd, r = 0;

	snprintf(path, sizeof(path), "%s/%s", p->state_dir, id);
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", p->state_dir, id);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	for (size_t off = 0; off < sb->len;) {
		ssize_t n = write(fd, sb->buf + off, sb->len - off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		off += (size_t)n;
	}
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	close(fd);
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	/* No fsync of the directory: a rename lost to a power cut leaves
	 * the old record, which is consistent too. */
	return r;
}

void store_unlink(struct plugin *p, const char *id)
{
	char path[PATH_CAP + 1];

	snprintf(path, sizeof(path), "%s/%s", p->state_dir, id);
	unlink(path);
}

#define KV(key, val) (sbuf_adds(&sb, key " ") < 0 || params_enc(&sb, (val)) < 0 || sbuf_addc(&sb, '\n') < 0)
#define KI(key, val) (sbuf_printf(&sb, key " %" PRId64 "\n", (int64_t)(val)) < 0)

int store_save_vol(struct plugin *p, const struct vol *v)
{
	struct sbuf sb = SBUF_INIT(RECORD_CAP);
	int r = -ENOMEM;

	if (KV("id", v->id) || KV("name", v->name) || KV("state", state_names[v->state])
	    || KV("backing", backing_to_string(v->backing)) || KI("size", v->size)
	    || KI("fs_size", v->fs_size) || KV("fs_type", v->fs_type) || KV("params", v->params)
	    || KV("src", v->src) || KI("access_mode", v->access_mode) || KI("stage_block", v->stage_block)
	    || (v->mparams && KV("mparams", v->mparams)) || KI("quota", v->quota)
	    || (v->staged && KV("staged", v->staged)) || KV("loopdev", v->loopdev))
		goto out;
	for (unsigned i = 0; i < v->ntargets; i++)
		if (sbuf_printf(&sb, "target %d%d ", v->targets[i].readonly, v->targets[i].block) < 0
		    || params_enc(&sb, v->targets[i].path) < 0 || sbuf_addc(&sb, '\n') < 0)
			goto out;
	r = write_atomic(p, v->id, &sb);
out:
	sbuf_free(&sb);
	return r;
}

int store_save_snap(struct plugin *p, const struct snap *s)
{
	struct sbuf sb = SBUF_INIT(RECORD_CAP);
	int r = -ENOMEM;

	if (KV("id", s->id) || KV("name", s->name) || KV("state", state_names[s->state])
	    || KV("backing", backing_to_string(s->backing)) || KV("src", s->src)
	    || KI("size", s->size) || KV("fs_type", s->fs_type) || KI("ctime_s", s->ctime_s)
	    || KI("ctime_ns", s->ctime_ns))
		goto out;
	r = write_atomic(p, s->id, &sb);
out:
	sbuf_free(&sb);
	return r;
}

static void drop(void **arr, size_t *n, size_t i)
{
	memmove(arr + i, arr + i + 1, (*n - i - 1) * sizeof(*arr));
	(*n)--;
}

void store_drop_vol(struct plugin *p, struct vol *v)
{
	size_t i = store_vol_index(p, v->id);

	if (i < p->nvols && p->vols[i] == v)
		drop((void **)p->vols, &p->nvols, i);
	store_unlink(p, v->id);
	vol_free(v);
}

void store_drop_snap(struct plugin *p, struct snap *s)
{
	size_t i = store_snap_index(p, s->id);

	if (i < p->nsnaps && p->snaps[i] == s)
		drop((void **)p->snaps, &p->nsnaps, i);
	store_unlink(p, s->id);
	snap_free(s);
}

/* ---- loading ---- */

static int parse_state(const char *v)
{
	for (int i = 0; i < 3; i++)
		if (strcmp(v, state_names[i]) == 0)
			return i;
	return -1;
}

static void copy_id(char dst[24], const char *v)
{
	snprintf(dst, 24, "%s", v);
}

/* Parse one record into a vol or a snap (by its id's prefix). */
static int load_record(struct plugin *p, const char *file, char *err, size_t errsz)
{
	char path[PATH_CAP + 1], line[PATH_CAP * 3 + 64];
	bool is_vol = strncmp(file, "vol-", 4) == 0;
	struct vol *v = NULL;
	struct snap *s = NULL;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", p->state_dir, file);
	f = fopen(path, "re");
	if (!f)
		return snprintf(err, errsz, "open %s: %s", path, strerror(errno)), -errno;
	if (is_vol)
		v = calloc(1, sizeof(*v));
	else
		s = calloc(1, sizeof(*s));
	if (!v && !s) {
		fclose(f);
		return -ENOMEM;
	}
	int state = -1;
	while (fgets(line, sizeof(line), f)) {
		char *nl = strchr(line, '\n'), *val = strchr(line, ' ');

		if (nl)
			*nl = '\0';
		if (!val)
			continue;
		*val++ = '\0';
		_cleanup_free_ char *d = params_dec(val);
		if (!d)
			goto oom;
		if (strcmp(line, "state") == 0)
			state = parse_state(d);
		else if (v) {
			if (strcmp(line, "id") == 0) copy_id(v->id, d);
			else if (strcmp(line, "name") == 0) { free(v->name); v->name = TAKE_PTR(d); }
			else if (strcmp(line, "backing") == 0) v->backing = strcmp(d, "image") == 0 ? BACKING_IMAGE : BACKING_DIR;
			else if (strcmp(line, "size") == 0) v->size = strtoll(d, NULL, 10);
			else if (strcmp(line, "fs_size") == 0) v->fs_size = strtoll(d, NULL, 10);
			else if (strcmp(line, "fs_type") == 0) snprintf(v->fs_type, sizeof(v->fs_type), "%s", d);
			else if (strcmp(line, "params") == 0) { free(v->params); v->params = TAKE_PTR(d); }
			else if (strcmp(line, "mparams") == 0) { free(v->mparams); v->mparams = TAKE_PTR(d); }
			else if (strcmp(line, "quota") == 0) v->quota = atoi(d) != 0;
			else if (strcmp(line, "src") == 0) copy_id(v->src, d);
			else if (strcmp(line, "access_mode") == 0) v->access_mode = atoi(d);
			else if (strcmp(line, "stage_block") == 0) v->stage_block = atoi(d) != 0;
			else if (strcmp(line, "staged") == 0) { free(v->staged); v->staged = TAKE_PTR(d); }
			else if (strcmp(line, "loopdev") == 0) copy_id(v->loopdev, d);
			else if (strcmp(line, "target") == 0 && strlen(val) > 3) {
				struct target *t = realloc(v->targets, (v->ntargets + 1) * sizeof(*t));

				if (!t)
					goto oom;
				v->targets = t;
				t[v->ntargets].readonly = val[0] == '1';
				t[v->ntargets].block = val[1] == '1';
				t[v->ntargets].path = params_dec(val + 3);
				if (!t[v->ntargets].path)
					goto oom;
				v->ntargets++;
			}
		} else {
			if (strcmp(line, "id") == 0) copy_id(s->id, d);
			else if (strcmp(line, "name") == 0) { free(s->name); s->name = TAKE_PTR(d); }
			else if (strcmp(line, "backing") == 0) s->backing = strcmp(d, "image") == 0 ? BACKING_IMAGE : BACKING_DIR;
			else if (strcmp(line, "src") == 0) copy_id(s->src, d);
			else if (strcmp(line, "size") == 0) s->size = strtoll(d, NULL, 10);
			else if (strcmp(line, "fs_type") == 0) snprintf(s->fs_type, sizeof(s->fs_type), "%s", d);
			else if (strcmp(line, "ctime_s") == 0) s->ctime_s = strtoll(d, NULL, 10);
			else if (strcmp(line, "ctime_ns") == 0) s->ctime_ns = atoi(d);
		}
	}
	fclose(f);
	const char *id = v ? v->id : s->id;
	const char *name = v ? v->name : s->name;
	if (state < 0 || strcmp(id, file) != 0 || !name) {
		snprintf(err, errsz, "record %s is damaged (no state, id or name)", path);
		vol_free(v);
		snap_free(s);
		return -EBADMSG;
	}
	if (state != OBJ_READY) {
		/* A crash in the middle of a create or a delete: the data
		 * may be half made; remove it with the record. */
		fprintf(stderr, "nodefs-csi-local: %s %s was %s at the crash: removed\n",
			v ? "volume" : "snapshot", id, state_names[state]);
		backing_remove(p, id, v ? v->backing : s->backing);
		store_unlink(p, id);
		vol_free(v);
		snap_free(s);
		return 0;
	}
	if (v) {
		v->state = OBJ_READY;
		if (!v->params && !(v->params = strdup("")))
			goto oom2;
		if (store_add_vol(p, v) < 0)
			goto oom2;
	} else {
		s->state = OBJ_READY;
		if (store_add_snap(p, s) < 0)
			goto oom2;
	}
	return 0;
oom:
	fclose(f);
oom2:
	vol_free(v);
	snap_free(s);
	snprintf(err, errsz, "out of memory loading %s", path);
	return -ENOMEM;
}

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_CAP + 1];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *q = buf + 1; *q; q++)
		if (*q == '/') {
			*q = '\0';
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return -errno;
			*q = '/';
		}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int store_open(struct plugin *p, char *err, size_t errsz)
{
	int r;

	if ((r = mkdir_p(p->state_dir, 0700)) < 0 || (r = mkdir_p(p->data_dir, 0755)) < 0) {
		snprintf(err, errsz, "create %s: %s", p->base, strerror(-r));
		return r;
	}
	DIR *d = opendir(p->state_dir);
	if (!d) {
		snprintf(err, errsz, "open %s: %s", p->state_dir, strerror(errno));
		return -errno;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.') {
			if (strstr(de->d_name, ".tmp")) {
				/* a record write cut short: the old one stands */
				char path[PATH_CAP + 1];

				snprintf(path, sizeof(path), "%s/%s", p->state_dir, de->d_name);
				unlink(path);
			}
			continue;
		}
		if (strncmp(de->d_name, "vol-", 4) != 0 && strncmp(de->d_name, "snap-", 5) != 0)
			continue;
		r = load_record(p, de->d_name, err, errsz);
		if (r < 0) {
			closedir(d);
			return r;
		}
	}
	closedir(d);
	/* Data with no record: a crash before the record was first written
	 * cannot leave any (the record goes first), but be thorough. */
	d = opendir(p->data_dir);
	if (d) {
		while ((de = readdir(d))) {
			char id[64];

			if (de->d_name[0] == '.')
				continue;
			snprintf(id, sizeof(id), "%.60s", de->d_name);
			char *dot = strstr(id, ".img");
			if (dot)
				*dot = '\0';
			if ((strncmp(id, "vol-", 4) == 0 && !store_vol(p, id))
			    || (strncmp(id, "snap-", 5) == 0 && !store_snap(p, id))) {
				fprintf(stderr, "nodefs-csi-local: %s has no record: removed\n", de->d_name);
				backing_remove(p, id, dot ? BACKING_IMAGE : BACKING_DIR);
			}
		}
		closedir(d);
	}
	return 0;
}
