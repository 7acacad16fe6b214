/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fs-internal: what fs.c and fs-loop.c share.
 */
#ifndef NODEFS_FS_INTERNAL_H
#define NODEFS_FS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

struct fuse_session;

/* Whether the request in mem (len bytes, as read from /dev/fuse) may wait
 * (a render that may call out, a ctl write) rather than be answered from
 * memory. Called by the thread that read it, before it is processed. */
typedef bool (*fs_may_wait_fn)(void *ctx, const void *mem, size_t len);

/*
 * Serve se until it exits (unmount, or fuse_session_exit from a signal
 * handler): one thread reads /dev/fuse and answers what may_wait says is
 * quick itself, back to back, so a reader's requests meet a thread that is
 * warm and often on its CPU; before a request that may wait it hands the
 * device to another thread (woken, or made: at most max_threads, at most
 * max_idle kept waiting). 0, or -errno when no thread could be started.
 * Workers block SIGHUP, SIGINT, SIGQUIT and SIGTERM, as libfuse's do; the
 * caller's thread waits for the end and must get those signals.
 */
int fs_serve(struct fuse_session *se, fs_may_wait_fn may_wait, void *ctx, unsigned max_threads,
	     unsigned max_idle);

/*
 * The stop signals (SIGHUP, SIGINT, SIGTERM, each only while at its
 * default, as libfuse's fuse_set_signal_handlers) end se and wake the
 * thread waiting in fs_serve; SIGPIPE is caught and does nothing (the
 * programs nodefs starts get it at its default). 0 or -errno.
 * fs_serve_signals_remove forgets se before it is destroyed; the handlers
 * stay, and a stop signal after that only posts a semaphore nobody waits
 * on: a second SIGTERM while the daemon ends does not kill it (there is no
 * moment at the default between the mount's end and nodefs's SIG_IGN).
 */
int fs_serve_signals(struct fuse_session *se);
void fs_serve_signals_remove(void);

/*
 * Who may open a sensitive (BATTR_PRIV) file for reading or a ctl file for
 * writing (access.c): uid 0, or a caller whose gid or one of whose
 * supplementary groups (fuse_req_getgroups) is gid (read_group,
 * ctl_group). The mount has no default_permissions: these checks are
 * the modes' enforcement. 0 or -EACCES.
 */
#include <sys/types.h>
typedef struct fuse_req *fuse_req_t;
int fs_req_may(fuse_req_t req, bool has_read_gid, gid_t read_gid);
/* Who sent req, as operations record it: "uid=U gid=G pid=P comm=NAME"
 * (comm from /proc/P/comm, "?" when gone), into by[0..len). */
void fs_req_who(fuse_req_t req, char *by, size_t len);

#endif
