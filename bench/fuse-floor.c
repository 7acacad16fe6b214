/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuse-floor: the cost of FUSE alone. A process of its own serving one file
 * of given bytes through the low-level API, with the open flags given
 * (direct_io as nodefs serves a volume's state, status, a container's
 * stats; keep_cache with the real size as it serves ids), one thread; and
 * the two measures a benchmark sets beside it (a whole-file read, the FUSE
 * requests a nodefs mount counted). See fuse-floor.h. It knows nothing of
 * nodefs but the metrics file's text.
 */
#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuse-floor.h"

struct fuse_floor {
	pid_t pid;
	struct fuse_floor_opts o;
	char dir[256];
	char file[264];
	size_t len;
	char bytes[];
};

/* --- the file system, in the child ----------------------------------------- */

static void floor_stat(const struct fuse_floor *fl, fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = ino == FUSE_ROOT_ID ? S_IFDIR | 0555 : S_IFREG | 0444;
	st->st_nlink = ino == FUSE_ROOT_ID ? 2 : 1;
	/* as nodefs: a file made by each read says 0, a cached one its size */
	if (ino != FUSE_ROOT_ID && fl->o.keep_cache)
		st->st_size = (off_t)fl->len;
}

static void floor_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	const struct fuse_floor *fl = fuse_req_userdata(req);
	struct fuse_entry_param e = { .ino = 2, .attr_timeout = fl->o.timeout,
				      .entry_timeout = fl->o.timeout };

	if (parent != FUSE_ROOT_ID || strcmp(name, "f") != 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	floor_stat(fl, 2, &e.attr);
	fuse_reply_entry(req, &e);
}

static void floor_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct fuse_floor *fl = fuse_req_userdata(req);
	struct stat st;

	floor_stat(fl, ino, &st);
	fuse_reply_attr(req, &st, fl->o.timeout);
}

static void floor_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct fuse_floor *fl = fuse_req_userdata(req);

	if (fl->o.keep_cache)
		fi->keep_cache = 1;
	else
		fi->direct_io = 1;
	fi->noflush = 1;
	fuse_reply_open(req, fi);
}

static void floor_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	const struct fuse_floor *fl = fuse_req_userdata(req);
	size_t n = (size_t)off >= fl->len ? 0 : fl->len - (size_t)off;

	fuse_reply_buf(req, n ? fl->bytes + off : NULL, n < size ? n : size);
}

static void floor_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops floor_ops = {
	.lookup = floor_lookup,
	.getattr = floor_getattr,
	.open = floor_open,
	.read = floor_read,
	.release = floor_release,
};

static void floor_serve(struct fuse_floor *fl)
{
	char *argv[] = { "bench-floor", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(1, argv);
	struct fuse_session *se;

	/* no floor outlives the benchmark that mounted it */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	se = fuse_session_new(&args, &floor_ops, sizeof(floor_ops), fl);
	if (!se || fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, fl->dir) != 0)
		_exit(1);
	fuse_session_loop(se);	/* until SIGTERM */
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	_exit(0);
}

/* --- the benchmark's side ------------------------------------------------ */

int fuse_floor_start(const char *dir, const void *bytes, size_t len, const struct fuse_floor_opts *o,
		     struct fuse_floor **ret)
{
	struct fuse_floor *fl;
	struct stat st;

	if (len > FUSE_FLOOR_MAX)
		return -E2BIG;
	if (strlen(dir) >= sizeof(fl->dir))
		return -ENAMETOOLONG;
	fl = calloc(1, sizeof(*fl) + len);
	if (!fl)
		return -ENOMEM;
	fl->o = *o;
	fl->len = len;
	memcpy(fl->bytes, bytes, len);
	snprintf(fl->dir, sizeof(fl->dir), "%s", dir);
	snprintf(fl->file, sizeof(fl->file), "%s/f", dir);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		int r = -errno;

		free(fl);
		return r;
	}
	fl->pid = fork();
	if (fl->pid == 0)
		floor_serve(fl);
	if (fl->pid < 0) {
		int r = -errno;

		free(fl);
		return r;
	}
	for (int i = 0; i < 500; i++) {
		if (stat(fl->file, &st) == 0 && S_ISREG(st.st_mode)) {
			*ret = fl;
			return 0;
		}
		if (waitpid(fl->pid, NULL, WNOHANG) == fl->pid) {
			fl->pid = 0;
			break;
		}
		usleep(10000);
	}
	fuse_floor_stop(fl);
	return -EIO;
}

const char *fuse_floor_file(const struct fuse_floor *fl)
{
	return fl->file;
}

void fuse_floor_stop(struct fuse_floor *fl)
{
	if (!fl)
		return;
	if (fl->pid > 0) {
		kill(fl->pid, SIGTERM);
		waitpid(fl->pid, NULL, 0);
	}
	/* a floor killed before its unmount leaves the mount behind; EINVAL
	 * when it is gone, as it should be */
	umount2(fl->dir, MNT_DETACH);
	free(fl);
}

ssize_t fuse_floor_read_all(const char *path, bool with_fstat)
{
	char buf[128 << 10];	/* cat's buffer */
	struct stat st;
	ssize_t n, total = 0;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return -errno;
	if (with_fstat && fstat(fd, &st) < 0)
		total = -errno;
	while (total >= 0 && (n = read(fd, buf, sizeof(buf))) != 0)
		total = n < 0 ? -errno : total + n;
	close(fd);
	return total;
}

int fuse_floor_requests(const char *mnt, const char *const *ops, int n, unsigned long long *ret)
{
	size_t cap = 64 << 10, len = 0;
	char path[4096], key[96];
	char *buf = NULL;
	int fd, r = 0;

	snprintf(path, sizeof(path), "%s/metrics/nodefs.prom", mnt);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t k;

		if (!buf || len + 1 == cap) {
			char *nb;

			if (buf)
				cap *= 2;
			if (cap > (64u << 20)) {
				r = -EFBIG;
				break;
			}
			nb = realloc(buf, cap);
			if (!nb) {
				r = -ENOMEM;
				break;
			}
			buf = nb;
		}
		k = read(fd, buf + len, cap - 1 - len);
		if (k < 0) {
			r = -errno;
			break;
		}
		if (k == 0)
			break;
		len += (size_t)k;
	}
	close(fd);
	if (r < 0) {
		free(buf);
		return r;
	}
	buf[len] = '\0';
	for (int i = 0; i < n; i++) {
		const char *p;

		snprintf(key, sizeof(key), "nodefs_fuse_requests_total{op=\"%s\"} ", ops[i]);
		p = strstr(buf, key);
		ret[i] = p ? strtoull(p + strlen(key), NULL, 10) : 0;
	}
	free(buf);
	return 0;
}
