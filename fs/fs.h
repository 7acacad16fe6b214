/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fs: the backend's tree as a FUSE filesystem (libfuse3 low-level API).
 *
 * fs knows files, modes, reads and writes: directories are tree nodes, files
 * are their attribute tables (backend/tree.h). It knows nothing of CSI,
 * Docker or LXC.
 */
#ifndef NODEFS_FS_H
#define NODEFS_FS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct bnode;
struct fs;
struct fuse_args;
struct nerr;

struct fs_opts {
	bool has_ctl_gid;	/* ctl files writable by this group too */
	gid_t ctl_gid;
	bool has_read_gid;	/* BATTR_PRIV files readable by this group too */
	gid_t read_gid;
	/* option keys whose values error lines hide (common/redact.h); the
	 * caller keeps the list alive while fs runs */
	const char *const *redact;
	double entry_timeout;	/* seconds the kernel may cache names */
	double attr_timeout;	/* seconds the kernel may cache attributes */
	/* bytes the open files of one uid other than 0 may hold (snapshots,
	 * stream buffers, a fixed cost per open); past it opens fail with
	 * EMFILE. 0: unbounded */
	uint64_t reader_memory;
	/* milliseconds the readers of a time-varying file (BATTR_AGED) share
	 * one render; 0: each read renders */
	uint64_t cache_max_age_ms;
};

/* Make the session from args (fuse options; consumed). -errno. */
int fs_new(struct bnode *root, const struct fs_opts *o, struct fuse_args *args,
	   struct fs **ret, struct nerr *err);
/* Mount at mnt, and from then on SIGTERM, SIGINT and SIGHUP end the
 * session (fs_loop returns at once if it came before). -errno with err. */
int fs_mount(struct fs *f, const char *mnt, struct nerr *err);
/* Serve requests until unmounted or a signal (SIGTERM, SIGINT, SIGHUP).
 * Returns 0 on a clean exit. Runs the notifier thread meanwhile. The
 * signal handlers stay until fs_free: a repeated signal while the daemon
 * stops only ends the (ended) session again. */
int fs_loop(struct fs *f);
/* Render the FUSE request figures (Prometheus text) for metrics/nodefs.prom;
 * ctx is the struct fs. Any thread. */
struct sbuf;
int fs_render_metrics(void *ctx, struct sbuf *out);

/* Unmount (if mounted) and free. Requests the backend still holds (ctl
 * writes, mkdir, rmdir; see backend_stop) are answered ESHUTDOWN first and
 * detached: their breq_complete may still come, from any thread, and only
 * frees them. NULL-safe. */
void fs_free(struct fs *f);

#endif
