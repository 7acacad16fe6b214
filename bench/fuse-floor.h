/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuse-floor.h: the FUSE floor, the cost of FUSE alone on this machine: a
 * minimal low-level FUSE file system in a process of its own (as nodefs is:
 * a thread of the benchmark would save the address-space switch of each
 * round trip) serving one file, DIR/f, of given bytes, one thread, with the
 * open flags nodefs gives that kind of file: direct_io (a volume's state,
 * status, a container's stats: made by each read) or keep_cache with the
 * real size (ids: served from the page cache); noflush either way. A
 * benchmark reads it beside the nodefs file of the same bytes and a tmpfs
 * copy, in the same run, so the part of a read no FUSE file system can skip
 * is a figure, not a guess.
 *
 * Beside it, the two measures such a comparison takes: a whole-file read as
 * cat does it, and the FUSE requests a nodefs mount counted (its
 * metrics/nodefs.prom), so a reader sees the round trips behind a read.
 * It knows nodefs only through the metrics file's text.
 */
#ifndef NODEFS_BENCH_FUSE_FLOOR_H
#define NODEFS_BENCH_FUSE_FLOOR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct fuse_floor;

/* The most bytes a floor serves. */
#define FUSE_FLOOR_MAX (64 << 10)

struct fuse_floor_opts {
	bool keep_cache;	/* keep_cache and st_size = len; else direct_io, st_size 0 */
	double timeout;		/* entry and attribute timeouts, seconds */
};

/* Mounts a floor on DIR (made if missing; the caller removes it) serving
 * DIR/f with bytes[0..len), and returns once DIR/f answers a stat. Forks:
 * call it before starting threads of your own. Root (or fusermount3).
 * -E2BIG beyond FUSE_FLOOR_MAX, -ENOMEM, -EIO when the floor did not mount
 * (the child's libfuse says why on stderr), -errno of mkdir or fork. The
 * floor is the caller's, to fuse_floor_stop(). */
int fuse_floor_start(const char *dir, const void *bytes, size_t len, const struct fuse_floor_opts *o,
		     struct fuse_floor **ret);

/* The path of the floor's file, DIR/f; the floor owns it. */
const char *fuse_floor_file(const struct fuse_floor *fl);

/* Stops the floor (SIGTERM; it unmounts), detaches DIR if it is still
 * mounted, and frees fl. NULL-safe. */
void fuse_floor_stop(struct fuse_floor *fl);

/* A whole-file read: open, an fstat if with_fstat (as cat does), read into
 * a 128 KiB buffer until EOF, close. The length read, or -errno. */
ssize_t fuse_floor_read_all(const char *path, bool with_fstat);

/* The FUSE requests the nodefs mounted on MNT has served so far for each of
 * ops[0..n) (names as in nodefs_fuse_requests_total{op="..."}; one absent
 * from the metrics counts 0), into ret[0..n). A read of metrics/nodefs.prom,
 * itself an open, reads and a release. -errno of the read, -ENOMEM, -EFBIG
 * beyond 64 MiB. */
int fuse_floor_requests(const char *mnt, const char *const *ops, int n, unsigned long long *ret);

#endif
