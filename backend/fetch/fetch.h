/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fetch: the fetcher, a stage of a container's launch owned by the backend
 * and the same for every runtime: each fetch= of a container downloaded
 * (libcurl: http, https, file), checked (sha256), unpacked (libarchive,
 * tar, tar.gz, tar.xz, zip, with the secure flags and links kept inside)
 * into its sandbox, through a cache shared by all containers
 * ([nodefs] fetch_cache, fetch_cache_size).
 *
 * The cache keeps its state in its directory only (no daemon-wide memory):
 *   objects/KEY.data, KEY.json   an entry: the bytes of a URI and what the
 *                                server said of them (ETag, Last-Modified,
 *                                sha256, size, mtime)
 *   partial/KEY.part, KEY.json   a download under way, or cut by a crash:
 *                                resumed with a Range request
 *   locks/KEY.lock               flock'ed while KEY is fetched: a second
 *                                fetch of the same URI waits, then finds
 *                                the entry (one download)
 * KEY is the sha256 of the URI. The least recently used entries go once
 * the objects pass fetch_cache_size.
 *
 * Threads: fetch_run blocks (network, disk) and runs on a worker of the
 * pool, never on a FUSE thread or the loop. The parsers are pure.
 * Must not know: containers, engines, files of the tree.
 */
#ifndef NODEFS_FETCH_H
#define NODEFS_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct nerr;

/* ---- sha256 (sha256.c) ---- */
struct sha256 {
	uint32_t h[8];
	uint64_t len;
	unsigned char buf[64];
	size_t n;
	bool shani;	/* the CPU's SHA extensions do the blocks */
};
void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
/* The digest as 64 lowercase hex digits; s is spent. */
void sha256_hex(struct sha256 *s, char out[65]);

/* ---- one fetch= (fetch-spec.c) ---- */
struct fetch_spec {
	char *uri;
	char sha256[65];	/* "" when not given */
	bool extract, executable;
	char *dest;		/* relative to the sandbox; NULL: the URI's last
				 * element (extract: the sandbox itself) */
};

/* 'URI [sha256=HEX] [extract] [executable] [dest=RELPATH]' into *ret.
 * -EINVAL naming what is wrong: a scheme not http, https or file, no host
 * (http, https), a file:// path not absolute, a sha256 not 64 hex digits,
 * a dest that leaves the sandbox (absolute, '..', not normalized), no
 * name to take a dest from, an unknown word; -ENOMEM. Pure. */
int fetch_spec_parse(const char *s, struct fetch_spec *ret, struct nerr *err);
void fetch_spec_free(struct fetch_spec *f);
/* Where the fetch lands, relative to the sandbox ("." for an extract
 * into it). */
const char *fetch_spec_dest(const struct fetch_spec *f, char *buf, size_t size);
/* An archive entry's name is safe to extract under a root: relative, no
 * '..' element, and (link target, for a symlink: relative to the entry's
 * directory) not leading out. Pure. */
bool fetch_path_inside(const char *entry, const char *link_target, bool symlink);

/* ---- running a fetch (fetch.c) ---- */
enum fetch_state { FETCH_WAITING, FETCH_DOWNLOADING, FETCH_CHECKING, FETCH_EXTRACTING,
		   FETCH_DONE, FETCH_FAILED };
enum fetch_served { FETCH_SERVED_NONE, FETCH_SERVED_DOWNLOADED, FETCH_SERVED_CACHE,
		    FETCH_SERVED_REVALIDATED };
const char *fetch_state_to_string(enum fetch_state s);
const char *fetch_served_to_string(enum fetch_served s);

struct fetch_status {
	enum fetch_state state;
	uint64_t bytes, total;	/* total 0: not known */
	enum fetch_served served;
	char sha256[65];
	/* the fetch's own time (CLOCK_MONOTONIC ns): from fetch_run's entry
	 * (the wait for another fetch of the same URI included) to its last
	 * word; end_ns 0 while it runs, start_ns 0 before */
	uint64_t start_ns, end_ns;
};

/* The seconds st took, or has taken so far (now_ns: CLOCK_MONOTONIC),
 * 0 before it began. Pure. */
double fetch_status_seconds(const struct fetch_status *st, uint64_t now_ns);
uint64_t fetch_now_ns(void);

struct fetch_env {
	const char *cache_dir;
	uint64_t cache_size;	/* 0: keep nothing */
	const char *sandbox;	/* the host directory fetches land in */
	uid_t uid;		/* what extracted files belong to (-1: root's) */
	gid_t gid;
	uint64_t sandbox_limit;	/* 0: none; past it EFBIG */
	/* progress: called with the status as it changes (throttled) */
	void (*progress)(void *ctx, const struct fetch_status *st);
	void *ctx;
	volatile int *cancel;	/* set: the fetch ends with ECANCELED */
};

/* Fetch f into env->sandbox, st updated as it goes (its final word too).
 * -EIO (a status, a cut, a digest mismatch, an entry that would leave the
 * sandbox: the message names the URI and why), -EFBIG (past
 * sandbox_limit), -ECANCELED, -ENOMEM, -errno of the file system.
 * Blocking: a worker thread. */
int fetch_run(const struct fetch_env *env, const struct fetch_spec *f, struct fetch_status *st,
	      struct nerr *err);

/* Before a sandbox is removed: the file fetch f linked into it from the
 * cache at cache_dir (not an extract) is unlinked under the key's lock,
 * and the entry's stamp renewed, when the stamp held just before (the
 * unlink moves the object's ctime): a destroy then costs the next hit no
 * rehash. Anything else is left for the caller's removal. Best effort;
 * blocking (a worker). */
void fetch_unlink(const char *cache_dir, const char *sandbox, const struct fetch_spec *f);

#endif
