/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * snap: when a shared render (fs-ops.h's struct fs_snap) may serve a read.
 * A BATTR_VERSIONED file's render serves while its node is at the version
 * loaded before the render; a BATTR_AGED file's (stats) also only while
 * it is younger than the mount's cache_max_age, counted from a time taken
 * before the render, so what a reader gets was sampled at most that long
 * ago. Pure: no locks, no clock, no FUSE (unit-tested, tests/unit/fs).
 *
 * Must not know: FUSE, CSI, Docker, LXC, the config.
 */
#ifndef NODEFS_FS_SNAP_H
#define NODEFS_FS_SNAP_H

#include <stdbool.h>
#include <stdint.h>

/* Whether a render of node version sv, begun at made_ns, serves a read at
 * now_ns of the node at version v. max_age_ns 0: no age bound (a
 * BATTR_VERSIONED file). Times on one monotonic clock. */
static inline bool snap_serves(uint64_t sv, uint64_t made_ns, uint64_t v, uint64_t now_ns,
			       uint64_t max_age_ns)
{
	if (sv != v)
		return false;
	return max_age_ns == 0 || (now_ns >= made_ns && now_ns - made_ns < max_age_ns);
}

/* Whether a render (version nv, begun at nmade) is to replace the one the
 * inode shares (cv, cmade): it shows a newer version, or the same one
 * sampled later. */
static inline bool snap_newer(uint64_t nv, uint64_t nmade, uint64_t cv, uint64_t cmade)
{
	return nv > cv || (nv == cv && nmade > cmade);
}

#endif
