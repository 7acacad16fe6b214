// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * access: the caller checks fs makes itself, beyond the modes the kernel
 * enforces (default_permissions): who may open a sensitive file. It knows
 * a request's credentials, not what a file holds.
 */
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <errno.h>
#include <stdlib.h>

#include "fs-internal.h"

int fs_may_read_priv(fuse_req_t req, bool has_read_gid, gid_t read_gid)
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
