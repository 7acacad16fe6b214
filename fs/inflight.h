/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * inflight: the requests nodefs has read from /dev/fuse and not answered
 * yet, as far as they hold a kernel lock that a reverse notification
 * (notify_delete, notify_inval_entry, notify_inval_inode with pages) also
 * takes. The session's read and writev go through here (libfuse's custom
 * io), so every request and every answer is seen once, whatever thread
 * makes it.
 *
 * Why: a notification that waits in the kernel for a lock whose holder
 * waits for nodefs's answer cannot be ended by a SIGKILL of nodefs (the
 * notifying thread keeps /dev/fuse, so the kernel never fails the
 * holder's request). A thread that waits here instead, in user space,
 * dies with the process. See docs/design.md, "Reverse notifications and
 * the kernel's locks".
 *
 * Must not know: the tree, the backend; only the FUSE wire header.
 */
#ifndef NODEFS_FS_INFLIGHT_H
#define NODEFS_FS_INFLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct inflight;

/* What a request in flight holds in the kernel, by its opcode. */
enum {
	INFL_RWSEM = 1,	/* the i_rwsem of its nodeid (a lookup's or readdir's
			 * directory, a write's or setattr's file...) */
	INFL_PAGES = 2,	/* page locks of its nodeid (a READ filling the
			 * page cache of a keep_cache file) */
};

/* NULL on OOM. */
struct inflight *inflight_new(void);
/* NULL-safe. Nothing may wait in it any more. */
void inflight_free(struct inflight *t);

/* A request read from /dev/fuse (mem, len bytes, the wire header first):
 * kept when it holds a lock (above). Any thread; never blocks long. */
void inflight_received(struct inflight *t, const void *mem, size_t len);
/* The answer to request unique went to the kernel (or failed to). */
void inflight_answered(struct inflight *t, uint64_t unique);
/* The session ended: waiters return at once, false. */
void inflight_close(struct inflight *t);

/*
 * Wait, in user space, until no request in flight holds a lock of a kind
 * in what (INFL_*) on any of inos[0..n) (zeros ignored). true when none
 * does; false after timeout_ms (< 0: no limit) or once closed. Any thread
 * but the ones that answer requests.
 */
bool inflight_wait_clear(struct inflight *t, const uint64_t *inos, size_t n, unsigned what,
			 int timeout_ms);

/* Requests in flight that hold a lock (tests, metrics). */
size_t inflight_count(struct inflight *t);

#endif
