/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* fstree: see fstree.h. openat(O_NOFOLLOW) all the way down: a symlink
 * swapped in mid-walk is never followed. */
#include "fstree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEPTH_MAX 256

static int walk(int dfd, dev_t dev, int depth, uint64_t *sum, int remove)
{
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (depth > DEPTH_MAX) {
		close(dfd);
		return -ELOOP;
	}
	d = fdopendir(dfd);
	if (!d) {
		r = -errno;
		close(dfd);
		return r;
	}
	while ((de = readdir(d))) {
		struct stat st;
		int rr = 0;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			if (st.st_dev != dev)
				continue;	/* a mount: not ours to walk */
			int fd = openat(dirfd(d), de->d_name,
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (fd >= 0)
				rr = walk(fd, dev, depth + 1, sum, remove);
			if (remove && unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 && !rr)
				rr = -errno;
		} else {
			if (S_ISREG(st.st_mode) && sum)
				*sum += (uint64_t)st.st_size;
			if (remove && unlinkat(dirfd(d), de->d_name, 0) < 0)
				rr = -errno;
		}
		if (rr < 0 && !r)
			r = rr;
	}
	closedir(d);
	return r;
}

int fstree_bytes(const char *path, uint64_t *ret)
{
	struct stat st;
	uint64_t sum = 0;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), r;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	walk(fd, st.st_dev, 0, &sum, 0);
	*ret = sum;
	return 0;
}

int fstree_remove(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), r;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	r = walk(fd, st.st_dev, 0, NULL, 1);
	if (rmdir(path) < 0 && errno != ENOENT && !r)
		r = -errno;
	return r;
}
