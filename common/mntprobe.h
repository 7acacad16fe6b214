/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * mntprobe: whether a mount answers a statfs, asked from a child process
 * that holds no descriptor of the daemon.
 *
 * No thread of a FUSE daemon may make a request on its own mount: were the
 * daemon killed after its loop read the request and before it answered,
 * the kernel would wait uninterruptibly for the answer (the request is "in
 * userspace"), that thread would keep the daemon's /dev/fuse open, and the
 * connection, and the process, would never end. A child holding only a
 * pipe does not keep the connection: when the daemon dies its /dev/fuse
 * closes, the kernel ends the connection, and the child's statfs fails.
 *
 * One caller thread at a time. Must not know: FUSE's protocol, the daemon.
 */
#ifndef NODEFS_MNTPROBE_H
#define NODEFS_MNTPROBE_H

#include <stdbool.h>
#include <sys/types.h>

struct mntprobe {
	pid_t pid;	/* the child still asking, or -1 */
	int fd;		/* its pipe's read end, or -1 */
};

#define MNTPROBE_INIT { .pid = -1, .fd = -1 }

/* Whether a statfs of path answers within timeout_ms with f_type. A child
 * that has not answered by then is left for the next call, which reaps it
 * if it has ended since and otherwise answers false at once without
 * starting another (at most one child). */
bool mntprobe_statfs(struct mntprobe *p, const char *path, long f_type, int timeout_ms);
/* Kill and reap a child still left. */
void mntprobe_end(struct mntprobe *p);

#endif
