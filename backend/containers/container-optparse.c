/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container-optparse: the passes over the option table
 * (container-options.c): a create line's options into a struct cspec, each
 * checked against its row (runtime, repeat, value), the spec to and from a
 * record, its usage lines; and the kinds of value the rows name (string,
 * words, bool, size, cpus, int, K=V, mount).
 *
 * Pure apart from volume= (the backend's links, when not a dry run) and
 * bind= (the host's symlinks, resolved). It must not know engines, files or
 * the container object.
 */
#include "container-options.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "backend-internal.h"
#include "ctl.h"
#include "jw.h"
#include "links.h"
#include "nerr.h"
#include "redact.h"
#include "sbuf.h"
#include "units.h"
#include "valid.h"

#define FIELD(T, f) ((T *)(f))

static const char *json_key(const struct copt *o)
{
	return o->json ? o->json : o->name;
}

static void strv_free_(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* ---- none: runtime=, read by the caller ---- */

static int none_parse(const struct copt *o, const char *key, const char *val, void *f,
		      const struct copt_ctx *x, struct nerr *err)
{
	return 0;
}

static void none_write(const struct copt *o, const void *f, struct jw *w, bool redact)
{
}

static void none_read(const struct copt *o, json_t *rec, void *f)
{
}

static void none_free(void *f)
{
}

const struct copt_kind copt_none = { none_parse, none_write, none_read, none_free };

/* ---- string ---- */

static int string_parse(const struct copt *o, const char *key, const char *val, void *f,
			const struct copt_ctx *x, struct nerr *err)
{
	char **p = f;

	if (!val[0])
		return nerr_set(err, EINVAL, "%s=: empty", key);
	free(*p);
	*p = strdup(val);
	return *p ? 0 : nerr_set(err, ENOMEM, "out of memory");
}

static void string_write(const struct copt *o, const void *f, struct jw *w, bool redact)
{
	const char *s = *FIELD(char *const, f);

	if (s)
		jw_kstr(w, json_key(o), s);
}

static void string_read(const struct copt *o, json_t *rec, void *f)
{
	const char *s = json_string_value(json_object_get(rec, json_key(o)));

	if (s && s[0])
		*FIELD(char *, f) = strdup(s);
}

static void string_free(void *f)
{
	free(*FIELD(char *, f));
}

const struct copt_kind copt_string = { string_parse, string_write, string_read, string_free };

/* ---- words: 'ARGV ...' ---- */

static int words_parse(const struct copt *o, const char *key, const char *val, void *f,
		       const struct copt_ctx *x, struct nerr *err)
{
	char ***p = f;
	char **v = NULL;
	int r = ctl_split_words(val, &v, err);

	if (r < 0) {
		nerr_prefix(err, "%s", key);
		return r;
	}
	if (r < o->min) {
		strv_free_(v);
		return nerr_set(err, EINVAL, "%s: at least %lld word%s", key, o->min,
				o->min == 1 ? "" : "s");
	}
	strv_free_(*p);
	*p = v;
	return 0;
}

static void words_write(const struct copt *o, const void *f, struct jw *w, bool redact)
{
	jw_kstrv(w, json_key(o), *FIELD(char **const, f));
}

static void words_read(const struct copt *o, json_t *rec, void *f)
{
	json_t *a = json_object_get(rec, json_key(o)), *v;
	char **r;
	size_t i;

	if (!json_array_size(a))
		return;
	r = calloc(json_array_size(a) + 1, sizeof(char *));
	if (!r)
		return;
	json_array_foreach(a, i, v)
		r[i] = strdup(json_string_value(v) ? json_string_value(v) : "");
	*FIELD(char **, f) = r;
}

static void words_free(void *f)
{
	strv_free_(*FIELD(char **, f));
}

const struct copt_kind copt_words = { words_parse, words_write, words_read, words_free };

/* ---- bool ---- */

static int bool_parse(const struct copt *o, const char *key, const char *val, void *f,
		      const struct copt_ctx *x, struct nerr *err)
{
	if (parse_bool(val, f, err) < 0) {
		nerr_prefix(err, "%s", key);
		return -EINVAL;
	}
	return 0;
}

static void bool_write(const struct copt *o, const void *f, struct jw *w, bool redact)
{
	jw_kbool(w, json_key(o), *FIELD(const bool, f));
}

static void bool_read(const struct copt *o, json_t *rec, void *f)
{
	*FIELD(bool, f) = json_is_true(json_object_get(rec, json_key(o)));
}

const struct copt_kind copt_bool = { bool_parse, bool_write, bool_read, none_free };

static int nbool_parse(const struct copt *o, const char *key, const char *val, void *f,
		       const struct copt_ctx *x, struct nerr *err)
{
	bool v;

	if (parse_bool(val, &v, err) < 0) {
		nerr_prefix(err, "%s", key);
		return -EINVAL;
	}
	*FIELD(bool, f) = !v;
	return 0;
}

static void nbool_write(const struct copt *o, const void *f, struct jw *w, bool redact)
{
	jw_kbool(w, json_key(o), !*FIELD(const bool, f));
}

static void nbool_read(const struct copt *o, json_t *rec, void *f)
{
	json_t *v = json_object_get(rec, json_key(o));

	*FIELD(bool, f) = v && json_is_false(v);	/* absent (an older record): yes */
}

const struct copt_kind copt_nbool = { nbool_parse, nbool_write, nbool_read, none_free };

/* ---- size, cpus, int ---- */

static int size_parse(const struct copt *o, const char *key, const char *val, void *f,
		      const struct copt_ctx *x, struct nerr *err)
{
	uint64_t v;
	char lo[32];

	if (parse_size(val, &v, err) < 0) {
		nerr_prefix(err, "%s", key);
		return -EINVAL;
	}
	if (o->min && v < (uint64_t)o->min) {
		format_size((uint64_t)o->min, lo, sizeof(lo));
		return nerr_set(err, EINVAL, "%s=%s: at least %s", key, val, lo);
	}
	*FIELD(uint64_t, f) = v;
	return 0;
}

static void u64_write(const struct copt *o, const void *f, struct jw *w, bool redact)
{
	jw_kint(w, json_key(o), (long long)*FIELD(const uint64_t, f));
}

static void u64_read(const struct copt *o, json_t *rec, void *f)
{
	*FIELD(uint64_t, f) = (uint64_t)json_integer_value(json_object_get(rec, json_key(o)));
}

const struct copt_kind copt_size = { size_parse, u64_write, u64_read, none_free };

static int cpus_parse(const struct copt *o, const char *key, const char *val, void *f,
		      const struct copt_ctx *x, struct nerr *err)
{
	if (parse_cpus(val, f, err) < 0) {
		nerr_prefix(err, "%s", key);
		return -EINVAL;
	}
	return 0;
}

static void real_write(const struct copt *o, const void *f, struct jw *w, bool redact)
{
	jw_kreal(w, json_key(o), *FIELD(const double, f));
}

static void real_read(const struct copt *o, json_t *rec, void *f)
{
	*FIELD(double, f) = json_number_value(json_object_get(rec, json_key(o)));
}

const struct copt_kind copt_cpus = { cpus_parse, real_write, real_read, none_free };

static int int_parse(const struct copt *o, const char *key, const char *val, void *f,
		     const struct copt_ctx *x, struct nerr *err)
{
	long long v;

	if (parse_int(val, o->min, o->max, &v, err) < 0) {
		nerr_prefix(err, "%s", key);
		return -EINVAL;
	}
	*FIELD(int64_t, f) = v;
	return 0;
}

static void i64_write(const struct copt *o, const void *f, struct jw *w, bool redact)
{
	jw_kint(w, json_key(o), (long long)*FIELD(const int64_t, f));
}

static void i64_read(const struct copt *o, json_t *rec, void *f)
{
	*FIELD(int64_t, f) = json_integer_value(json_object_get(rec, json_key(o)));
}

const struct copt_kind copt_int = { int_parse, i64_write, i64_read, none_free };

/* ---- K=V under a prefix: env.K=V ---- */

static int kv_add(struct ckv *kv, const char *k, const char *v)
{
	struct rt_kv *n = realloc(kv->v, (kv->n + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	kv->v = n;
	n[kv->n].key = strdup(k);
	n[kv->n].val = strdup(v);
	kv->n++;
	return n[kv->n - 1].key && n[kv->n - 1].val ? 0 : -ENOMEM;
}

static int kv_parse(const struct copt *o, const char *key, const char *val, void *f,
		    const struct copt_ctx *x, struct nerr *err)
{
	const char *k = key + strlen(o->name);

	if (!k[0])
		return nerr_set(err, EINVAL, "%s: empty name", o->name);
	if (kv_add(f, k, val) < 0)
		return nerr_set(err, ENOMEM, "out of memory");
	return 0;
}

static void kv_write(const struct copt *o, const void *f, struct jw *w, bool redact)
{
	const struct ckv *kv = f;

	jw_key(w, json_key(o));
	jw_obj(w);
	for (size_t i = 0; i < kv->n; i++) {
		/* a key given twice is one member, where it came first, with the
		 * value it came with last (as a JSON object keeps it) */
		size_t last = i;
		bool seen = false;

		for (size_t k = 0; k < i && !seen; k++)
			seen = strcmp(kv->v[k].key, kv->v[i].key) == 0;
		if (seen)
			continue;
		for (size_t k = i + 1; k < kv->n; k++)
			if (strcmp(kv->v[k].key, kv->v[i].key) == 0)
				last = k;
		jw_kstr(w, kv->v[i].key,
			redact && (o->flags & COPT_SECRET) ? REDACTED : kv->v[last].val);
	}
	jw_obj_end(w);
}

static void kv_read(const struct copt *o, json_t *rec, void *f)
{
	json_t *a = json_object_get(rec, json_key(o)), *v;
	const char *k;

	json_object_foreach(a, k, v)
		if (kv_add(f, k, json_string_value(v) ? json_string_value(v) : "") < 0)
			break;
}

static void kv_free(void *f)
{
	struct ckv *kv = f;

	for (size_t i = 0; i < kv->n; i++) {
		free(kv->v[i].key);
		free(kv->v[i].val);
	}
	free(kv->v);
}

const struct copt_kind copt_kv = { kv_parse, kv_write, kv_read, kv_free };

/* ---- mount: volume=VOLNAME:/path[:ro], bind=/host:/path[:ro] ---- */

/* path with its symlinks resolved, as far as it exists (the rest, which
 * the engine may create, appended as written): what mount(2) would reach.
 * A dangling symlink on the way is refused: what it will lead to is not
 * known yet. */
static int resolve_existing(const char *path, char *ret, size_t size, struct nerr *err)
{
	char buf[PATH_MAX], real[PATH_MAX];
	size_t cut = strlen(path);
	struct stat st;

	if (cut >= sizeof(buf))
		return nerr_set(err, ENAMETOOLONG, "path too long");
	memcpy(buf, path, cut + 1);
	for (;;) {
		char *slash;

		if (realpath(buf, real)) {
			const char *rest = path + cut;

			if ((size_t)snprintf(ret, size, "%s%s", strcmp(real, "/") == 0 && *rest ? "" : real,
					     rest) >= size)
				return nerr_set(err, ENAMETOOLONG, "path too long");
			return 0;
		}
		if (errno != ENOENT)
			return nerr_set(err, errno, "%s: %s", buf, strerror(errno));
		if (lstat(buf, &st) == 0 && S_ISLNK(st.st_mode))
			return nerr_set(err, EPERM, "%s is a dangling symlink", buf);
		slash = strrchr(buf, '/');
		if (!slash || slash == buf) {
			snprintf(ret, size, "%s", path);	/* nothing of it exists */
			return 0;
		}
		*slash = '\0';
		cut = (size_t)(slash - buf);
	}
}

/* A bind source after its symlinks must still lie under allowed_targets
 * (or under what an allowed prefix itself resolves to): mount(2) follows
 * links, and a text check alone lets a link under an allowed prefix lead to
 * /etc. The resolved path, not the link, is what the engine gets. */
static int resolve_bind_source(const char *spec, const char *src, const char *const *allowed,
			       size_t n, char **ret, struct nerr *err)
{
	char real[PATH_MAX], ra[PATH_MAX];
	const char **both;
	int r;

	r = resolve_existing(src, real, sizeof(real), err);
	if (r < 0) {
		nerr_prefix(err, "bind '%s': host path", spec);
		return r;
	}
	if (n && strcmp(real, src) != 0) {
		/* each prefix as written, then as it resolves (NULL: the same) */
		both = calloc(2 * n, sizeof(*both));
		if (!both)
			return nerr_set(err, ENOMEM, "out of memory");
		for (size_t i = 0; i < n; i++) {
			both[2 * i] = allowed[i];
			if (realpath(allowed[i], ra) && strcmp(ra, allowed[i]) != 0)
				both[2 * i + 1] = strdup(ra);
		}
		r = valid_path(real, both, 2 * n, NULL);
		for (size_t i = 0; i < n; i++)
			free((char *)both[2 * i + 1]);
		free(both);
		if (r < 0)
			return nerr_set(err, EPERM, "bind '%s': host path %s resolves to %s, outside the "
					"allowed targets", spec, src, real);
	}
	*ret = strdup(real);
	return *ret ? 0 : nerr_set(err, ENOMEM, "out of memory");
}

/* VOLNAME:/path[:ro] or /host:/path[:ro] into m; for a volume, the source
 * is where the volume is published (dry_run: the spec alone, the volume is
 * looked at when the line runs). */
static int parse_mount(const struct copt_ctx *x, const char *key, const char *spec,
		       struct rt_mount *m, char **ret_vol, struct nerr *err)
{
	char buf[4200], *src, *dst, *mode;
	int r;

	if (snprintf(buf, sizeof(buf), "%s", spec) >= (int)sizeof(buf))
		return nerr_set(err, EINVAL, "%s: '%.40s...' is too long", key, spec);
	src = buf;
	dst = strchr(buf, ':');
	if (!dst)
		return nerr_set(err, EINVAL, "%s '%s': expected %s:/path[:ro]", key, spec,
				strcmp(key, "bind") == 0 ? "/host" : "VOLNAME");
	*dst++ = '\0';
	mode = strchr(dst, ':');
	if (mode) {
		*mode++ = '\0';
		if (strcmp(mode, "ro") != 0 && strcmp(mode, "rw") != 0)
			return nerr_set(err, EINVAL, "%s '%s': mode '%s' is not ro or rw", key, spec, mode);
	}
	r = valid_path(dst, NULL, 0, err);
	if (r < 0) {
		nerr_prefix(err, "%s '%s': container path", key, spec);
		return -EINVAL;
	}
	m->ro = mode && strcmp(mode, "ro") == 0;
	if (strcmp(key, "bind") == 0) {
		const char *const *allowed = x->allowed_targets;
		size_t n = 0;

		while (allowed && allowed[n])
			n++;
		r = valid_path(src, allowed, n, err);
		if (r < 0) {
			nerr_prefix(err, "bind '%s': host path", spec);
			return r;
		}
		r = resolve_bind_source(spec, src, allowed, n, &m->source, err);
		if (r < 0)
			return r;
	} else {
		r = valid_name(src, err);
		if (r < 0) {
			nerr_prefix(err, "volume '%s'", spec);
			return -EINVAL;
		}
		if (x->dry_run)
			return 0;
		r = x->b && x->b->links && x->b->links->volume_mount_source ?
			x->b->links->volume_mount_source(x->b, src, &m->source, err) :
			nerr_set(err, ENOENT, "no volume '%s'", src);
		if (r < 0)
			return r;
		*ret_vol = strdup(src);
		if (!*ret_vol)
			return -ENOMEM;
	}
	m->target = strdup(dst);
	if (!m->source || !m->target)
		return nerr_set(err, ENOMEM, "out of memory");
	return 0;
}

static int mount_parse(const struct copt *o, const char *key, const char *val, void *f,
		       const struct copt_ctx *x, struct nerr *err)
{
	struct cmounts *ms = f;
	struct rt_mount *nm = realloc(ms->v, (ms->n + 1) * sizeof(*nm));
	char *vol = NULL;
	size_t nvol = 0;
	int r;

	if (!nm)
		return nerr_set(err, ENOMEM, "out of memory");
	ms->v = nm;
	memset(&ms->v[ms->n], 0, sizeof(*nm));
	ms->n++;
	r = parse_mount(x, key, val, &ms->v[ms->n - 1], &vol, err);
	if (r < 0 || !vol)
		return r;
	while (ms->volumes && ms->volumes[nvol])
		nvol++;
	char **nv = realloc(ms->volumes, (nvol + 2) * sizeof(*nv));
	if (!nv) {
		free(vol);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	ms->volumes = nv;
	nv[nvol++] = vol;
	nv[nvol] = NULL;
	return 0;
}

static void mount_write(const struct copt *o, const void *f, struct jw *w, bool redact)
{
	const struct cmounts *ms = f;

	jw_key(w, json_key(o));
	jw_arr(w);
	for (size_t i = 0; i < ms->n; i++) {
		jw_obj(w);
		jw_kstr(w, "source", ms->v[i].source ? ms->v[i].source : "");
		jw_kstr(w, "target", ms->v[i].target ? ms->v[i].target : "");
		jw_kbool(w, "ro", ms->v[i].ro);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_kstrv(w, "volumes", ms->volumes);
}

static void mount_read(const struct copt *o, json_t *rec, void *f)
{
	struct cmounts *ms = f;
	json_t *a = json_object_get(rec, json_key(o)), *v;
	size_t i;

	ms->v = calloc(json_array_size(a) + 1, sizeof(*ms->v));
	json_array_foreach(a, i, v) {
		if (!ms->v)
			break;
		ms->v[i].source = strdup(json_string_value(json_object_get(v, "source")) ?: "");
		ms->v[i].target = strdup(json_string_value(json_object_get(v, "target")) ?: "");
		ms->v[i].ro = json_is_true(json_object_get(v, "ro"));
		ms->n++;
	}
	a = json_object_get(rec, "volumes");
	ms->volumes = calloc(json_array_size(a) + 1, sizeof(char *));
	json_array_foreach(a, i, v)
		if (ms->volumes)
			ms->volumes[i] = strdup(json_string_value(v) ?: "");
}

static void mount_free(void *f)
{
	struct cmounts *ms = f;

	for (size_t i = 0; i < ms->n; i++) {
		free(ms->v[i].source);
		free(ms->v[i].target);
	}
	free(ms->v);
	strv_free_(ms->volumes);
}

const struct copt_kind copt_mount = { mount_parse, mount_write, mount_read, mount_free };

/* ---- fetch= ---- */

static int fetch_parse(const struct copt *o, const char *key, const char *val, void *f,
		       const struct copt_ctx *x, struct nerr *err)
{
	struct cfetches *fs = f;
	struct fetch_spec s = { 0 }, *nv;
	int r = fetch_spec_parse(val, &s, err);

	if (r < 0)
		return r;
	if (strncmp(s.uri, "file://", 7) == 0) {
		/* the daemon reads it as root: only where bind= may reach */
		const char *path = s.uri + 7 + (strncmp(s.uri + 7, "localhost/", 10) == 0 ? 9 : 0);
		size_t n = 0;

		while (x->allowed_targets && x->allowed_targets[n])
			n++;
		if (valid_path(path, x->allowed_targets, n, NULL) < 0) {
			r = nerr_set(err, EPERM, "fetch %.200s: a file:// path must lie under "
				     "allowed_targets", s.uri);
			fetch_spec_free(&s);
			return r;
		}
	}
	nv = realloc(fs->v, (fs->n + 1) * sizeof(*nv));
	if (!nv) {
		fetch_spec_free(&s);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	fs->v = nv;
	nv[fs->n++] = s;
	return 0;
}

static void fetch_write(const struct copt *o, const void *f, struct jw *w, bool redact)
{
	const struct cfetches *fs = f;

	jw_key(w, json_key(o));
	jw_arr(w);
	for (size_t i = 0; i < fs->n; i++) {
		jw_obj(w);
		jw_kstr(w, "uri", fs->v[i].uri);
		if (fs->v[i].sha256[0])
			jw_kstr(w, "sha256", fs->v[i].sha256);
		jw_kbool(w, "extract", fs->v[i].extract);
		jw_kbool(w, "executable", fs->v[i].executable);
		if (fs->v[i].dest)
			jw_kstr(w, "dest", fs->v[i].dest);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

static void fetch_read(const struct copt *o, json_t *rec, void *f)
{
	struct cfetches *fs = f;
	json_t *a = json_object_get(rec, json_key(o)), *v;
	size_t i;

	if (!json_array_size(a) || !(fs->v = calloc(json_array_size(a), sizeof(*fs->v))))
		return;
	json_array_foreach(a, i, v) {
		struct fetch_spec *s = &fs->v[fs->n];
		const char *u = json_string_value(json_object_get(v, "uri"));
		const char *h = json_string_value(json_object_get(v, "sha256"));
		const char *d = json_string_value(json_object_get(v, "dest"));

		if (!u || !(s->uri = strdup(u)))
			continue;
		snprintf(s->sha256, sizeof(s->sha256), "%s", h && strlen(h) == 64 ? h : "");
		s->extract = json_is_true(json_object_get(v, "extract"));
		s->executable = json_is_true(json_object_get(v, "executable"));
		s->dest = d ? strdup(d) : NULL;
		fs->n++;
	}
}

static void fetch_free(void *f)
{
	struct cfetches *fs = f;

	for (size_t i = 0; i < fs->n; i++)
		fetch_spec_free(&fs->v[i]);
	free(fs->v);
}

const struct copt_kind copt_fetch = { fetch_parse, fetch_write, fetch_read, fetch_free };

/* ---- the checks rows name ---- */

int copt_check_user(const char *key, const char *val, struct nerr *err)
{
	return rt_user_valid(val, err);
}

int copt_check_abspath(const char *key, const char *val, struct nerr *err)
{
	if (valid_path(val, NULL, 0, err) < 0) {
		nerr_prefix(err, "%s", key);
		return -EINVAL;
	}
	return 0;
}

/* RFC 1123: dot-separated labels of letters, digits and '-', none
 * starting or ending with '-', 63 bytes in all (what a UTS name holds
 * and Docker takes). */
int copt_check_hostname(const char *key, const char *val, struct nerr *err)
{
	size_t n = strlen(val), lab = 0;

	if (!n || n > 63)
		goto bad;
	for (size_t i = 0; i <= n; i++) {
		char ch = val[i];

		if (ch == '.' || ch == '\0') {
			if (!lab || val[i - 1] == '-')
				goto bad;
			lab = 0;
		} else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			   (ch >= '0' && ch <= '9') || (ch == '-' && lab)) {
			lab++;
		} else {
			goto bad;
		}
	}
	return 0;
bad:
	return nerr_set(err, EINVAL, "%s=%.70s: not a host name (RFC 1123 labels, up to 63 bytes)",
			key, val);
}

int copt_check_label(const char *key, const char *val, struct nerr *err)
{
	const char *k = strchr(key, '.') + 1;

	if (strncmp(k, "io.nodefs.", 10) == 0 || strcmp(k, "io.nodefs") == 0)
		return nerr_set(err, EINVAL, "%s: keys under io.nodefs. are reserved", key);
	if (strlen(k) > 128 || strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				       "0123456789._-/") != strlen(k))
		return nerr_set(err, EINVAL, "%s: a label key is up to 128 of [A-Za-z0-9._/-]", key);
	return 0;
}

/* ---- the passes ---- */

static bool is_prefix(const struct copt *o)
{
	size_t n = strlen(o->name);

	return n && o->name[n - 1] == '.';
}

const struct copt *copt_find(const char *key)
{
	for (size_t i = 0; i < container_noptions; i++) {
		const struct copt *o = &container_options[i];
		size_t n = strlen(o->name);

		if (is_prefix(o) ? strncmp(key, o->name, n) == 0 && key[n] : strcmp(key, o->name) == 0)
			return o;
	}
	return NULL;
}

bool copt_known(const char *key)
{
	return copt_find(key) != NULL;
}

unsigned copt_runtime_bit(const char *name)
{
	if (!name)
		return 0;
	if (strcmp(name, "docker") == 0)
		return COPT_DOCKER;
	if (strcmp(name, "lxc") == 0)
		return COPT_LXC;
	return 0;
}

/* The row that first fills o's field: it alone writes, reads and frees
 * it (volume= and bind= share mounts). */
static bool owns_field(const struct copt *o)
{
	if (o->flags & COPT_NOFIELD)
		return false;
	for (const struct copt *p = container_options; p < o; p++)
		if (!(p->flags & COPT_NOFIELD) && p->off == o->off)
			return false;
	return true;
}

int copts_parse(const struct ctl_cmd *cmd, const struct copt_ctx *x, struct cspec *s,
		struct nerr *err)
{
	bool seen[container_noptions];
	int r;

	memset(seen, 0, sizeof(seen));
	for (size_t i = 0; i < cmd->nopts; i++) {
		const char *key = cmd->opts[i].key;
		const struct copt *o = copt_find(key);
		size_t k;

		if (!o)
			return nerr_set(err, EINVAL, "unknown option '%s'", key);
		k = (size_t)(o - container_options);
		if (!(o->runtimes & x->runtime))
			return nerr_set(err, ENOTSUP, "%s=: not supported by runtime %s (only %s)",
					o->name, x->runtime_name,
					o->runtimes == COPT_DOCKER ? "docker" : "lxc");
		if (seen[k] && !(o->flags & COPT_REPEAT))
			return nerr_set(err, EINVAL, "%s=: given twice (it is not repeatable)", o->name);
		seen[k] = true;
		if (o->check && (r = o->check(key, cmd->opts[i].val, err)) < 0)
			return r;
		r = o->kind->parse(o, key, cmd->opts[i].val, (char *)s + o->off, x, err);
		if (r < 0)
			return r;
	}
	for (size_t k = 0; k < container_noptions; k++) {
		const struct copt *o = &container_options[k];

		if ((o->required & x->runtime) && !seen[k])
			return nerr_set(err, EINVAL, "%s: %s=%s is required for runtime=%s",
					cmd->argv[0], o->name, o->syntax,
					x->runtime_name ? x->runtime_name : "?");
	}
	return 0;
}

void copts_write(const struct cspec *s, struct jw *w, bool redact)
{
	for (size_t k = 0; k < container_noptions; k++) {
		const struct copt *o = &container_options[k];

		if (owns_field(o))
			o->kind->write(o, (const char *)s + o->off, w, redact);
	}
}

void copts_read(json_t *rec, struct cspec *s)
{
	for (size_t k = 0; k < container_noptions; k++) {
		const struct copt *o = &container_options[k];

		if (owns_field(o))
			o->kind->read(o, rec, (char *)s + o->off);
	}
}

void cspec_free(struct cspec *s)
{
	if (!s)
		return;
	for (size_t k = 0; k < container_noptions; k++) {
		const struct copt *o = &container_options[k];

		if (owns_field(o))
			o->kind->free((char *)s + o->off);
	}
	memset(s, 0, sizeof(*s));
}

int copts_usage(struct sbuf *out)
{
	int r = 0;

	for (size_t k = 0; r >= 0 && k < container_noptions; k++) {
		const struct copt *o = &container_options[k];
		char opt[64];

		snprintf(opt, sizeof(opt), "%s%s%s%s", o->name, is_prefix(o) ? "" : "=", o->syntax,
			 o->flags & COPT_REPEAT ? " ..." : "");
		r = sbuf_printf(out, "  %-30s %-10s %s%s\n", opt,
				o->runtimes == COPT_ALL ? "all" : o->runtimes == COPT_DOCKER ? "docker" : "lxc",
				o->help, o->required == COPT_ALL ? " (required)" :
				o->required ? " (required for this runtime)" : "");
	}
	return r;
}
