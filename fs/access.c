// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * access: the caller checks fs makes itself (the mount has no
 * default_permissions): who may open a sensitive file or write a ctl file,
 * and who sent a request. It knows a request's credentials, not what a
 * file holds.
 */
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs-internal.h"

int fs_req_may(fuse_req_t req, bool has_read_gid, gid_t read_gid)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t small[64], *list = small;
	int n, r = -EACCES;

	if (ctx->uid == 0)
		return 0;
	if (!has_read_gid)
		return -EACCES;
	if (ctx->gid == read_gid)
		return 0;
	n = fuse_req_getgroups(req, 64, small);
	if (n > 64) {
		list = calloc((size_t)n, sizeof(*list));
		if (!list)
			return -EACCES;
		n = fuse_req_getgroups(req, n, list);
	}
	for (int i = 0; i < n; i++)
		if (list[i] == read_gid) {
			r = 0;
			break;
		}
	if (list != small)
		free(list);
	return r;
}

void fs_req_who(fuse_req_t req, char *by, size_t len)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	char path[64], comm[32] = "?";
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)ctx->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		if (n > 0) {
			comm[n] = '\0';
			comm[strcspn(comm, "\n")] = '\0';
			/* one word: a blank or a control byte would split the field */
			for (char *p = comm; *p; p++)
				if (*p <= ' ' || *p == 0x7f)
					*p = '_';
		} else {
			strcpy(comm, "?");
		}
	}
	snprintf(by, len, "uid=%u gid=%u pid=%d comm=%s", (unsigned)ctx->uid, (unsigned)ctx->gid,
		 (int)ctx->pid, comm[0] ? comm : "?");
}
