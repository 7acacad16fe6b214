/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * quota: a `dir` volume's own capacity. The bytes and inodes it uses are
 * counted over its tree (never following a symlink nor crossing a mount),
 * and its size is enforced with a project quota where the filesystem under
 * BASE/data keeps them (xfs mounted with prjquota; ext4 with the project
 * feature and prjquota): the directory gets a project id of its own,
 * inherited by what is made in it, and a hard block limit of its size.
 * Where the filesystem keeps none, the size is only reported.
 *
 * Must not know: records, locks, the wire.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <linux/quota.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "plugin.h"

#ifndef SYS_quotactl_fd
#define SYS_quotactl_fd 443
#endif

/* The project id of volume id ("vol-" + 16 hex): its low 31 bits, never 0
 * (project 0 is the default every file has). */
uint32_t quota_project(const char *id)
{
	const char *hex = strchr(id, '-');
	uint64_t x = 0;

	for (hex = hex ? hex + 1 : id; *hex; hex++) {
		char c = *hex;
		unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
			: c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : (unsigned)c % 16;
		x = x << 4 | d;
	}
	x &= 0x7fffffff;
	return x ? (uint32_t)x : 1;
}

static int qctl(int fd, int cmd, uint32_t id, void *addr)
{
	/* QCMD's int shift overflows for the Q_* commands (0x8000xx << 8) */
	unsigned qcmd = ((unsigned)cmd << SUBCMDSHIFT) | (PRJQUOTA & SUBCMDMASK);

	return (int)syscall(SYS_quotactl_fd, (unsigned)fd, qcmd, id, addr);
}

int quota_set(const char *dir, const char *id, int64_t bytes, char *err, size_t errsz)
{
	struct if_dqinfo info;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return snprintf(err, errsz, "open %s: %s", dir, strerror(errno)), -errno;
	/* No project quota here (not enabled, not kept, no quotactl_fd):
	 * the size is reported, not enforced. */
	if (qctl(fd, Q_GETINFO, 0, &info) < 0) {
		close(fd);
		return 0;
	}
	struct fsxattr fsx;
	if (ioctl(fd, FS_IOC_FSGETXATTR, &fsx) < 0)
		goto fail;
	fsx.fsx_projid = quota_project(id);
	fsx.fsx_xflags |= FS_XFLAG_PROJINHERIT;
	if (ioctl(fd, FS_IOC_FSSETXATTR, &fsx) < 0)
		goto fail;
	struct if_dqblk q = {
		.dqb_bhardlimit = (uint64_t)(bytes + 1023) / 1024,	/* 1 KiB blocks */
		.dqb_bsoftlimit = (uint64_t)(bytes + 1023) / 1024,
		.dqb_valid = QIF_BLIMITS,
	};
	if (qctl(fd, Q_SETQUOTA, fsx.fsx_projid, &q) < 0)
		goto fail;
	close(fd);
	return 1;
fail:
	snprintf(err, errsz, "project quota on %s: %s", dir, strerror(errno));
	int r = -errno;
	close(fd);
	return r;
}

int quota_enforced(const char *dir, const char *id)
{
	struct fsxattr fsx;
	struct if_dqblk q;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = 0;

	if (fd < 0)
		return 0;
	if (ioctl(fd, FS_IOC_FSGETXATTR, &fsx) == 0 && fsx.fsx_projid == quota_project(id)
	    && qctl(fd, Q_GETQUOTA, fsx.fsx_projid, &q) == 0 && q.dqb_bhardlimit)
		r = 1;
	close(fd);
	return r;
}

/* The walk's sums (nftw has no user pointer: one walk at a time per
 * thread, so thread-local). */
static _Thread_local int64_t walk_bytes, walk_inodes;

static int count_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path, (void)flag, (void)ftw;
	walk_bytes += (int64_t)st->st_blocks * 512;
	walk_inodes++;
	return 0;
}

int quota_usage(const char *dir, int64_t *ret_bytes, int64_t *ret_inodes)
{
	walk_bytes = walk_inodes = 0;
	if (nftw(dir, count_one, 16, FTW_PHYS | FTW_MOUNT) != 0)
		return errno ? -errno : -EIO;
	*ret_bytes = walk_bytes;
	*ret_inodes = walk_inodes;
	return 0;
}
