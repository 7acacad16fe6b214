/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fetch: one fetch= run into a sandbox, through the cache (see fetch.h for
 * its layout): a hit with a sha256 makes no request; an entry without one
 * is revalidated (If-None-Match, If-Modified-Since: a 304 costs no body);
 * a download goes to partial/ (resumed with Range and If-Range after a
 * crash), is checked, then renamed into objects/ and linked into the
 * sandbox under a temporary name renamed to its dest, so nothing half
 * written is ever used. Must not know: containers, engines, the tree.
 */
#include "fetch.h"
#include "fetch-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "fstree.h"
#include "lazycurl.h"
#include "macro.h"
#include "nerr.h"

#define REDIRECTS_MAX 10

const char *fetch_state_to_string(enum fetch_state s)
{
	static const char *const n[] = { "waiting", "downloading", "checking", "extracting", "done",
					 "failed" };
	return s <= FETCH_FAILED ? n[s] : "unknown";
}

const char *fetch_served_to_string(enum fetch_served s)
{
	static const char *const n[] = { "-", "downloaded", "cache", "revalidated" };
	return s <= FETCH_SERVED_REVALIDATED ? n[s] : "-";
}

uint64_t fetch_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double fetch_status_seconds(const struct fetch_status *st, uint64_t now_ns)
{
	uint64_t end = st->end_ns ? st->end_ns : now_ns;

	if (!st->start_ns || end < st->start_ns)
		return 0;
	return (double)(end - st->start_ns) / 1e9;
}

/* ---- cache paths and records ---- */

/* An entry's record. Its stamp (ino, size, mtime, ctime) is the object's
 * stat when its bytes were last known to hash to sha256: at the download,
 * at a rehash, and again after each change nodefs itself makes to the
 * inode (a link into a sandbox, its mode, a sandbox's link removed at a
 * destroy), each made under the key's lock right after the stamp was
 * found to hold. A write through a sandbox's hard link moves mtime; one
 * that then sets mtime back (utimensat) moves ctime, which no one can set:
 * so a stamp that holds means the bytes are those hashed, and a hit costs
 * a stat. A stamp off only by ctime (a chmod, a link made or removed by
 * someone else) costs a rehash: the entry is kept if the bytes still hash
 * to sha256, else dropped; off by size, mtime or inode: dropped. */
struct centry {
	char etag[256], last_modified[64], sha256[65];
	uint64_t size, ino;
	int64_t mtime_ns, ctime_ns;
};

static void key_of(const char *uri, char key[65])
{
	struct sha256 h;

	sha256_init(&h);
	sha256_update(&h, uri, strlen(uri));
	sha256_hex(&h, key);
}

static int mkdirs(const char *base)
{
	static const char *const sub[] = { "", "/objects", "/partial", "/locks" };
	char p[PATH_MAX];

	for (size_t i = 0; i < ARRAY_SIZE(sub); i++) {
		snprintf(p, sizeof(p), "%s%s", base, sub[i]);
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			return -errno;
	}
	return 0;
}

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static int64_t ctime_ns(const struct stat *st)
{
	return (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

static void stamp_set(struct centry *e, const struct stat *st)
{
	e->size = (uint64_t)st->st_size;
	e->ino = (uint64_t)st->st_ino;
	e->mtime_ns = mtime_ns(st);
	e->ctime_ns = ctime_ns(st);
}

/* 2: the stamp holds; 1: off only by ctime; 0: the bytes may differ. */
static int stamp_check(const struct centry *e, const struct stat *st)
{
	if ((uint64_t)st->st_size != e->size || mtime_ns(st) != e->mtime_ns ||
	    (e->ino && (uint64_t)st->st_ino != e->ino))
		return 0;
	return e->ino && ctime_ns(st) == e->ctime_ns ? 2 : 1;
}

static int rec_read(const char *path, struct centry *e)
{
	json_t *j = json_load_file(path, 0, NULL);
	const char *s;

	memset(e, 0, sizeof(*e));
	if (!j)
		return -ENOENT;
#define STR(k, f) if ((s = json_string_value(json_object_get(j, k)))) snprintf(e->f, sizeof(e->f), "%s", s)
	STR("etag", etag);
	STR("last_modified", last_modified);
	STR("sha256", sha256);
#undef STR
	e->size = (uint64_t)json_integer_value(json_object_get(j, "size"));
	e->mtime_ns = json_integer_value(json_object_get(j, "mtime_ns"));
	e->ino = (uint64_t)json_integer_value(json_object_get(j, "ino"));
	e->ctime_ns = json_integer_value(json_object_get(j, "ctime_ns"));
	json_decref(j);
	return 0;
}

static int rec_write(const char *path, const char *uri, const struct centry *e)
{
	char tmp[PATH_MAX + 8];
	json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I}", "uri", uri, "etag", e->etag,
			      "last_modified", e->last_modified, "sha256", e->sha256,
			      "size", (json_int_t)e->size, "mtime_ns", (json_int_t)e->mtime_ns,
			      "ino", (json_int_t)e->ino, "ctime_ns", (json_int_t)e->ctime_ns);
	int r;

	if (!j)
		return -ENOMEM;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	r = json_dump_file(j, tmp, JSON_COMPACT) == 0 && rename(tmp, path) == 0 ? 0 : -EIO;
	json_decref(j);
	return r;
}

/* The record rewritten in place (no new inode: on a file system busy
 * with deletes, making one is what a hit would wait on). A crash that
 * tears it leaves a record rec_read refuses: the entry is then dropped
 * and fetched again, as a cache may. */
static int rec_update(const char *path, const char *uri, const struct centry *e)
{
	json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I}", "uri", uri, "etag", e->etag,
			      "last_modified", e->last_modified, "sha256", e->sha256,
			      "size", (json_int_t)e->size, "mtime_ns", (json_int_t)e->mtime_ns,
			      "ino", (json_int_t)e->ino, "ctime_ns", (json_int_t)e->ctime_ns);
	char *txt = j ? json_dumps(j, JSON_COMPACT) : NULL;
	size_t n = txt ? strlen(txt) : 0;
	int fd, r = 0;

	json_decref(j);
	if (!txt)
		return -ENOMEM;
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || pwrite(fd, txt, n, 0) != (ssize_t)n || ftruncate(fd, (off_t)n) < 0)
		r = -EIO;
	if (fd >= 0)
		close(fd);
	free(txt);
	return r < 0 ? rec_write(path, uri, e) : 0;
}

/* ---- the download ---- */

struct dl {
	const struct fetch_env *env;
	struct fetch_status *st;
	int fd;
	struct sha256 h;
	uint64_t have;		/* bytes in the file before this transfer */
	uint64_t got;		/* this transfer's */
	uint64_t base;		/* the sandbox's bytes before */
	long status;		/* of the last response (redirects: the last hop) */
	bool restart;		/* a 200 to a Range request: start again */
	bool is_file;		/* file://: no status line */
	bool too_big;
	char etag[256], last_modified[64];
	/* the partial download's record: its validators, written as soon as
	 * a 2xx's headers are in, so a crash mid-body can resume */
	const char *partrec, *uri;
	struct timespec last_note;
	int werr;
};

static void note(struct dl *d, bool force)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (!force && (now.tv_sec - d->last_note.tv_sec) * 1000 +
		      (now.tv_nsec - d->last_note.tv_nsec) / 1000000 < 100)
		return;
	d->last_note = now;
	if (d->env->progress)
		d->env->progress(d->env->ctx, d->st);
}

static void header_value(const char *p, size_t n, char *buf, size_t size)
{
	while (n && (*p == ' ' || *p == '\t'))
		p++, n--;
	while (n && (p[n - 1] == '\r' || p[n - 1] == '\n' || p[n - 1] == ' '))
		n--;
	if (n >= size)
		n = 0;	/* too long to use: as if absent */
	memcpy(buf, p, n);
	buf[n] = '\0';
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ctx)
{
	struct dl *d = ctx;
	size_t n = sz * nm;

	if ((n == 2 && p[0] == '\r') || (n == 1 && p[0] == '\n')) {
		if (d->status / 100 == 2 && (d->etag[0] || d->last_modified[0]) && d->partrec) {
			struct centry pr = { 0 };

			memcpy(pr.etag, d->etag, sizeof(pr.etag));
			memcpy(pr.last_modified, d->last_modified, sizeof(pr.last_modified));
			(void)rec_write(d->partrec, d->uri, &pr);
		}
	} else if (n > 5 && strncmp(p, "HTTP/", 5) == 0) {
		/* a new response (a redirect's next hop): what came before
		 * was another's */
		d->etag[0] = d->last_modified[0] = '\0';
		d->status = strtol(p + (strchr(p, ' ') ? strchr(p, ' ') - p : 0), NULL, 10);
	} else if (n > 5 && strncasecmp(p, "etag:", 5) == 0) {
		header_value(p + 5, n - 5, d->etag, sizeof(d->etag));
	} else if (n > 14 && strncasecmp(p, "last-modified:", 14) == 0) {
		header_value(p + 14, n - 14, d->last_modified, sizeof(d->last_modified));
	} else if (n > 15 && strncasecmp(p, "content-length:", 15) == 0) {
		char v[32];

		header_value(p + 15, n - 15, v, sizeof(v));
		if (d->status / 100 == 2)
			d->st->total = d->have * (d->status == 206) + strtoull(v, NULL, 10);
	}
	return n;
}

static size_t on_body(char *p, size_t sz, size_t nm, void *ctx)
{
	struct dl *d = ctx;
	size_t n = sz * nm;

	if (d->is_file)
		d->status = 200;
	if (d->status == 200 && d->have) {
		/* the server ignored the Range: from the start */
		if (ftruncate(d->fd, 0) < 0 || lseek(d->fd, 0, SEEK_SET) < 0) {
			d->werr = errno;
			return 0;
		}
		sha256_init(&d->h);
		d->have = 0;
		d->restart = true;
	}
	if (d->status / 100 != 2)
		return n;	/* an error page: not the file */
	if (d->env->sandbox_limit && d->base + d->have + d->got + n > d->env->sandbox_limit) {
		d->too_big = true;
		return 0;
	}
	for (size_t off = 0; off < n;) {
		ssize_t k = write(d->fd, p + off, n - off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			d->werr = errno;
			return 0;
		}
		off += (size_t)k;
	}
	sha256_update(&d->h, p, n);
	d->got += n;
	d->st->bytes = d->have + d->got;
	note(d, false);
	return n;
}

static int on_xfer(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct dl *d = ctx;

	return d->env->cancel && *d->env->cancel ? 1 : 0;
}

/* Download uri into the open fd (which holds have bytes already, hashed
 * into d->h: a resume), conditionally on cond (revalidation) or
 * ranged with if_range. Returns 0 (200/206), 1 (304), or -errno. */
static int transfer(struct dl *d, const char *uri, const struct centry *cond, const char *if_range,
		    struct nerr *err)
{
	struct curl_slist *hdr = NULL;
	char line[400], errbuf[CURL_ERROR_SIZE] = "";
	CURLcode cc;
	CURL *c;
	int r;

	r = lazycurl_load(err);
	if (r < 0)
		return r;
	c = curl_easy_init();
	if (!c)
		return nerr_set(err, ENOMEM, "out of memory");
	curl_easy_setopt(c, CURLOPT_URL, uri);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https,file");
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, (long)REDIRECTS_MAX);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, d);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, d);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_xfer);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, d);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "nodefs-fetch");
	curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 256L << 10);
	if (d->have) {
		curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)d->have);
		if (if_range && if_range[0]) {
			snprintf(line, sizeof(line), "If-Range: %s", if_range);
			hdr = curl_slist_append(hdr, line);
		}
	}
	if (cond && cond->etag[0]) {
		snprintf(line, sizeof(line), "If-None-Match: %s", cond->etag);
		hdr = curl_slist_append(hdr, line);
	} else if (cond && cond->last_modified[0]) {
		snprintf(line, sizeof(line), "If-Modified-Since: %s", cond->last_modified);
		hdr = curl_slist_append(hdr, line);
	}
	if (hdr)
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	d->st->state = FETCH_DOWNLOADING;
	note(d, true);
	cc = curl_easy_perform(c);
	long code = 0;

	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	curl_slist_free_all(hdr);
	if (d->too_big)
		return nerr_set(err, EFBIG, "fetch %.200s: past sandbox_size (%" PRIu64 " bytes)", uri,
				d->env->sandbox_limit);
	if (d->env->cancel && *d->env->cancel)
		return nerr_set(err, ECANCELED, "fetch %.200s: cancelled", uri);
	if (d->werr)
		return nerr_set(err, d->werr, "fetch %.200s: writing: %s", uri, strerror(d->werr));
	if (strncmp(uri, "file:", 5) == 0 && cc == CURLE_OK)
		return 0;
	if (cc == CURLE_OK && code == 304 && cond)
		return 1;
	if (cc == CURLE_OK && (code == 200 || code == 206))
		return 0;
	if (cc == CURLE_OK || cc == CURLE_HTTP_RETURNED_ERROR)
		return nerr_set(err, EIO, "fetch %.200s: HTTP status %ld", uri, code);
	if (cc == CURLE_RANGE_ERROR || code == 416)
		return nerr_set(err, EAGAIN, "fetch %.200s: the server refused the range", uri);
	return nerr_set(err, EIO, "fetch %.200s: %s", uri, errbuf[0] ? errbuf : curl_easy_strerror(cc));
}

/* ---- delivery into the sandbox ---- */

/* Make the directories of rel under root (owned as env says). */
static int parents(const struct fetch_env *env, const char *rel)
{
	char p[PATH_MAX];
	int n = snprintf(p, sizeof(p), "%s/%s", env->sandbox, rel);

	if (n < 0 || (size_t)n >= sizeof(p))
		return -ENAMETOOLONG;
	for (char *s = p + strlen(env->sandbox) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		if (mkdir(p, 0755) == 0) {
			if (env->uid != (uid_t)-1)
				(void)lchown(p, env->uid, env->gid);
		} else if (errno != EEXIST) {
			return -errno;
		}
		*s = '/';
	}
	return 0;
}

/* src (a cache object, or a downloaded file) to sandbox/rel: linked (or
 * copied across file systems) to a temporary name, then renamed. */
static int deliver(const struct fetch_env *env, const char *src, const char *rel, bool executable,
		   bool link_ok, struct nerr *err)
{
	char dst[PATH_MAX], tmp[PATH_MAX + 32];
	unsigned char rnd[4] = { 0 };
	int r;

	r = parents(env, rel);
	if (r < 0)
		return nerr_set(err, -r, "fetch: %s/%s: %s", env->sandbox, rel, strerror(-r));
	snprintf(dst, sizeof(dst), "%s/%s", env->sandbox, rel);
	(void)getrandom(rnd, sizeof(rnd), 0);
	snprintf(tmp, sizeof(tmp), "%s.nodefs-%02x%02x%02x%02x", dst, rnd[0], rnd[1], rnd[2], rnd[3]);
	if (!link_ok || link(src, tmp) < 0) {
		r = fetch_copy_file(src, tmp);
		if (r < 0)
			return nerr_set(err, -r, "fetch: copying to %s: %s", dst, strerror(-r));
		if (env->uid != (uid_t)-1)
			(void)lchown(tmp, env->uid, env->gid);
	}
	/* a link shares the cache object's inode: its mode is changed only
	 * when it differs (each change moves the object's ctime) */
	struct stat ls;
	mode_t want = executable ? 0755 : 0644;

	if (((lstat(tmp, &ls) == 0 && (ls.st_mode & 07777) == want) ? 0 : chmod(tmp, want)) < 0 ||
	    rename(tmp, dst) < 0) {
		r = -errno;
		unlink(tmp);
		return nerr_set(err, -r, "fetch: %s: %s", dst, strerror(-r));
	}
	return 0;
}

/* ---- the cache's bound ---- */

struct lru { char key[65]; int64_t used; uint64_t size; };

static int lru_cmp(const void *a, const void *b)
{
	const struct lru *x = a, *y = b;

	return x->used < y->used ? -1 : x->used > y->used;
}

/* The least recently used objects go until they fit in size (keep: the
 * key just fetched, which goes only when it alone is bigger). */
static void cache_trim(const char *base, uint64_t size, const char *keep)
{
	char p[PATH_MAX];
	struct lru *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	DIR *d;
	struct dirent *de;
	int lfd;

	snprintf(p, sizeof(p), "%s/locks/lru.lock", base);
	lfd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lfd < 0)
		return;
	flock(lfd, LOCK_EX);
	snprintf(p, sizeof(p), "%s/objects", base);
	d = opendir(p);
	while (d && (de = readdir(d))) {
		size_t l = strlen(de->d_name);
		struct stat st, js;

		if (l != 69 || strcmp(de->d_name + 64, ".data") != 0)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, 0) < 0)
			continue;
		if (n == cap) {
			struct lru *nv = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));

			if (!nv)
				break;
			v = nv;
		}
		snprintf(v[n].key, sizeof(v[n].key), "%.64s", de->d_name);
		snprintf(p, sizeof(p), "%.64s.json", de->d_name);
		v[n].used = fstatat(dirfd(d), p, &js, 0) == 0 ? mtime_ns(&js) : 0;
		v[n].size = (uint64_t)st.st_size;
		total += v[n].size;
		n++;
	}
	if (d)
		closedir(d);
	qsort(v, n, sizeof(*v), lru_cmp);
	for (size_t i = 0; i < n && total > size; i++) {
		if (keep && strcmp(v[i].key, keep) == 0 && total - v[i].size <= size)
			continue;
		snprintf(p, sizeof(p), "%s/objects/%s.json", base, v[i].key);
		unlink(p);
		snprintf(p, sizeof(p), "%s/objects/%s.data", base, v[i].key);
		unlink(p);
		total -= v[i].size;
	}
	free(v);
	close(lfd);
}

/* ---- fetch_run ---- */

static void touch(const char *path)
{
	(void)utimensat(AT_FDCWD, path, NULL, 0);
}

/* The sha256 of the file at path into out. -errno. */
static int hash_file(const char *path, char out[65])
{
	struct sha256 h;
	char buf[1 << 17];
	ssize_t k;
	int fd = open(path, O_RDONLY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	sha256_init(&h);
	while ((k = read(fd, buf, sizeof(buf))) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r = -errno;
			break;
		}
		sha256_update(&h, buf, (size_t)k);
	}
	close(fd);
	if (r == 0)
		sha256_hex(&h, out);
	return r;
}

/* The object's stamp again after nodefs's own change to its inode (a
 * link, a mode), made under the key's lock with the stamp just found to
 * hold (or just written): the bytes are those hashed if nothing but ctime
 * (and the link count) moved. Also the entry's last use, for the LRU. */
static void restamp(const char *obj, const char *objrec, const char *uri, struct centry *e)
{
	struct stat s;

	if (stat(obj, &s) < 0 || (uint64_t)s.st_size != e->size || mtime_ns(&s) != e->mtime_ns ||
	    (uint64_t)s.st_ino != e->ino)
		return;
	e->ctime_ns = ctime_ns(&s);
	(void)rec_update(objrec, uri, e);
}

int fetch_run(const struct fetch_env *env, const struct fetch_spec *f, struct fetch_status *st,
	      struct nerr *err)
{
	char key[65], obj[PATH_MAX], objrec[PATH_MAX], part[PATH_MAX], partrec[PATH_MAX];
	char lockp[PATH_MAX], name[256], digest[65];
	const char *dest = fetch_spec_dest(f, name, sizeof(name));
	struct centry have = { 0 }, prec = { 0 };
	struct dl d = { .env = env, .st = st, .fd = -1, .is_file = strncmp(f->uri, "file:", 5) == 0 };
	bool entry = false, keep = env->cache_size > 0;
	struct stat s;
	int lfd = -1, r;

	memset(st, 0, sizeof(*st));
	st->state = FETCH_WAITING;
	st->start_ns = fetch_now_ns();
	key_of(f->uri, key);
	r = mkdirs(env->cache_dir);
	if (r < 0)
		return nerr_set(err, -r, "fetch_cache %s: %s", env->cache_dir, strerror(-r));
	snprintf(obj, sizeof(obj), "%s/objects/%s.data", env->cache_dir, key);
	snprintf(objrec, sizeof(objrec), "%s/objects/%s.json", env->cache_dir, key);
	snprintf(part, sizeof(part), "%s/partial/%s.part", env->cache_dir, key);
	snprintf(partrec, sizeof(partrec), "%s/partial/%s.json", env->cache_dir, key);
	snprintf(lockp, sizeof(lockp), "%s/locks/%s.lock", env->cache_dir, key);
	/* one fetch of a URI at a time: a second waits, then uses the entry */
	lfd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lfd < 0 || flock(lfd, LOCK_EX) < 0) {
		r = nerr_set(err, errno, "fetch_cache %s: %s", lockp, strerror(errno));
		goto out;
	}
	/* the sandbox's bytes so far: only a bound needs them (a walk of
	 * the sandbox, which a hit would otherwise pay) */
	if (!env->sandbox_limit || fstree_bytes(env->sandbox, &d.base) < 0)
		d.base = 0;
	/* an entry: good while its stamp holds (see struct centry); off
	 * only by ctime, good if its bytes still hash to its sha256 */
	if (rec_read(objrec, &have) == 0 && stat(obj, &s) == 0 && have.sha256[0]) {
		int k = stamp_check(&have, &s);
		struct stat s2;

		if (k == 2) {
			entry = true;
		} else if (k == 1 && hash_file(obj, digest) == 0 && strcmp(digest, have.sha256) == 0 &&
			   stat(obj, &s2) == 0 && stamp_check(&have, &s2) >= 1 &&
			   ctime_ns(&s2) == ctime_ns(&s)) {
			stamp_set(&have, &s2);
			(void)rec_write(objrec, f->uri, &have);
			entry = true;
		}
	}
	if (!entry && (access(obj, F_OK) == 0 || access(objrec, F_OK) == 0)) {
		unlink(obj);	/* corrupt: dropped, fetched again */
		unlink(objrec);
	}
	if (entry && f->sha256[0] && strcmp(have.sha256, f->sha256) == 0) {
		st->served = FETCH_SERVED_CACHE;
		st->bytes = st->total = have.size;
		memcpy(st->sha256, have.sha256, sizeof(st->sha256));
		goto deliver;
	}
	/* a download: a partial one resumed (its validators must match: If-Range) */
	if (rec_read(partrec, &prec) == 0 && stat(part, &s) == 0 && s.st_size > 0 &&
	    (prec.etag[0] || prec.last_modified[0]))
		d.have = (uint64_t)s.st_size;
	else
		unlink(part);
	d.fd = open(part, O_WRONLY | O_CREAT | O_CLOEXEC | (d.have ? O_APPEND : O_TRUNC), 0600);
	if (d.fd < 0) {
		r = nerr_set(err, errno, "fetch_cache %s: %s", part, strerror(errno));
		goto out;
	}
	d.partrec = partrec;
	d.uri = f->uri;
	sha256_init(&d.h);
	if (d.have) {
		/* the bytes already there are hashed again: the digest covers
		 * the whole file */
		char buf[1 << 16];
		ssize_t k;
		int rfd = open(part, O_RDONLY | O_CLOEXEC);
		uint64_t left = d.have;

		while (rfd >= 0 && left && (k = read(rfd, buf, left < sizeof(buf) ? left : sizeof(buf))) > 0) {
			sha256_update(&d.h, buf, (size_t)k);
			left -= (uint64_t)k;
		}
		if (rfd >= 0)
			close(rfd);
		st->bytes = d.have;
	}
	r = transfer(&d, f->uri, entry && !f->sha256[0] ? &have : NULL,
		     prec.etag[0] ? prec.etag : prec.last_modified, err);
	if (r == -EAGAIN) {
		/* a range the server will not give: from the start */
		d.have = 0;
		if (ftruncate(d.fd, 0) < 0 || lseek(d.fd, 0, SEEK_SET) < 0) {
			r = nerr_set(err, errno, "fetch: %s: %s", part, strerror(errno));
			goto out;
		}
		sha256_init(&d.h);
		nerr_clear(err);
		r = transfer(&d, f->uri, NULL, NULL, err);
	}
	if (r == 1) {
		/* 304: the entry stands */
		close(d.fd);
		d.fd = -1;
		unlink(part);
		st->served = FETCH_SERVED_REVALIDATED;
		st->bytes = st->total = have.size;
		memcpy(st->sha256, have.sha256, sizeof(st->sha256));
		touch(objrec);
		goto deliver;
	}
	if (r < 0) {
		/* what came stays in partial/ for a resume, with its validators
		 * (a cut, a crash); a failure of another kind starts again */
		if (d.etag[0] || d.last_modified[0]) {
			struct centry pr = { 0 };

			snprintf(pr.etag, sizeof(pr.etag), "%s", d.etag);
			snprintf(pr.last_modified, sizeof(pr.last_modified), "%s", d.last_modified);
			rec_write(partrec, f->uri, &pr);
		}
		if (r != -EIO || !(d.etag[0] || d.last_modified[0])) {
			unlink(part);
			unlink(partrec);
		}
		goto out;
	}
	/* no fsync: a crash of nodefs loses nothing of the page cache, and a
	 * power loss that spoils an entry is caught by its record (size and
	 * time) or its sha256; the download is not made to wait on the disk */
	if (close(d.fd) < 0) {
		d.fd = -1;
		r = nerr_set(err, EIO, "fetch %.200s: writing: %s", f->uri, strerror(errno));
		goto out;
	}
	d.fd = -1;
	st->state = FETCH_CHECKING;
	note(&d, true);
	sha256_hex(&d.h, digest);
	memcpy(st->sha256, digest, sizeof(digest));
	st->served = FETCH_SERVED_DOWNLOADED;
	if (f->sha256[0] && strcmp(f->sha256, digest) != 0) {
		unlink(part);
		unlink(partrec);
		r = nerr_set(err, EIO, "fetch %.200s: sha256 mismatch: expected %s, got %s", f->uri,
			     f->sha256, digest);
		goto out;
	}
	/* into the cache: the object, then its record */
	unlink(partrec);
	if (rename(part, obj) < 0) {
		r = nerr_set(err, errno, "fetch_cache %s: %s", obj, strerror(errno));
		goto out;
	}
	chmod(obj, 0444);
	if (stat(obj, &s) == 0) {
		memset(&have, 0, sizeof(have));
		stamp_set(&have, &s);
		snprintf(have.etag, sizeof(have.etag), "%s", d.etag);
		snprintf(have.last_modified, sizeof(have.last_modified), "%s", d.last_modified);
		memcpy(have.sha256, digest, sizeof(digest));
		rec_write(objrec, f->uri, &have);
		st->bytes = st->total = have.size;
	}
deliver:
	if (f->extract) {
		st->state = FETCH_EXTRACTING;
		note(&d, true);
		r = fetch_extract(env, obj, dest, f->uri, d.base, err);
		if (r >= 0 && keep)
			touch(objrec);	/* its last use, for the LRU */
	} else {
		r = deliver(env, obj, dest, f->executable, true, err);
		if (r >= 0 && keep)
			restamp(obj, objrec, f->uri, &have);
	}
	if (r < 0)
		goto out;
	if (!keep) {
		unlink(obj);
		unlink(objrec);
	} else if (st->served == FETCH_SERVED_DOWNLOADED) {
		/* only a download adds to the cache */
		cache_trim(env->cache_dir, env->cache_size, key);
	}
	st->end_ns = fetch_now_ns();
	st->state = FETCH_DONE;
	note(&d, true);
	r = 0;
out:
	if (d.fd >= 0)
		close(d.fd);
	if (r < 0) {
		st->end_ns = fetch_now_ns();
		st->state = FETCH_FAILED;
		note(&d, true);
	}
	if (lfd >= 0)
		close(lfd);
	return r;
}

void fetch_unlink(const char *cache_dir, const char *sandbox, const struct fetch_spec *f)
{
	char key[65], obj[PATH_MAX], objrec[PATH_MAX], lockp[PATH_MAX], name[256], dst[PATH_MAX];
	const char *dest = fetch_spec_dest(f, name, sizeof(name));
	struct centry e;
	struct stat s, ds;
	int lfd;

	if (f->extract)
		return;
	key_of(f->uri, key);
	snprintf(obj, sizeof(obj), "%s/objects/%s.data", cache_dir, key);
	snprintf(objrec, sizeof(objrec), "%s/objects/%s.json", cache_dir, key);
	snprintf(lockp, sizeof(lockp), "%s/locks/%s.lock", cache_dir, key);
	if (snprintf(dst, sizeof(dst), "%s/%s", sandbox, dest) >= (int)sizeof(dst))
		return;
	lfd = open(lockp, O_RDWR | O_CLOEXEC);
	if (lfd < 0)
		return;
	if (flock(lfd, LOCK_EX) == 0 && rec_read(objrec, &e) == 0 && stat(obj, &s) == 0 &&
	    stamp_check(&e, &s) == 2 && lstat(dst, &ds) == 0 && ds.st_ino == s.st_ino &&
	    ds.st_dev == s.st_dev && unlink(dst) == 0)
		restamp(obj, objrec, f->uri, &e);
	close(lfd);
}
