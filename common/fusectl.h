/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fusectl: a nodefs's FUSE connection, as recorded in its state dir, and
 * the abort of one that a killed nodefs left stuck.
 *
 * A FUSE connection ends when the last open /dev/fuse of it closes. A
 * nodefs killed while one of its threads sleeps uninterruptibly in the
 * kernel (a reverse notification waiting for an inode lock whose holder
 * waits for nodefs's answer) keeps /dev/fuse open for ever: the process
 * never dies, its mount hangs every user, and it keeps STATE_DIR/lock.
 * Only /sys/fs/fuse/connections/N/abort ends it (N, the minor of the
 * mount's st_dev). So a nodefs records N, its pid and its start time when
 * it mounts; a later start (or `nodefs --abort-stale`) aborts N when that
 * very process is dying but still there, and never otherwise.
 *
 * Must not know: FUSE's protocol, the backend, the tree.
 */
#ifndef NODEFS_FUSECTL_H
#define NODEFS_FUSECTL_H

struct nerr;

/* The record's name in the state dir. */
#define FUSECTL_RECORD "fuse-connection"
/* Where fusectl is mounted. */
#define FUSECTL_DIR "/sys/fs/fuse/connections"

/*
 * Record the connection of the FUSE mount at mnt (its st_dev minor), this
 * process's pid and start time in STATE_DIR/fuse-connection (written
 * whole, then renamed). Call after the mount, in the process that serves
 * it (after daemonizing). 0 or -errno.
 */
int fusectl_record(const char *state_dir, const char *mnt, struct nerr *err);

/*
 * End what a dead nodefs of state_dir left: when its record names a
 * process that is still there but dying (its main thread a zombie, or
 * every live thread with SIGKILL pending) and its connection still
 * exists, write 1 to the connection's abort (mounting fusectl on
 * FUSECTL_DIR if needed), log a warning naming both, and wait up to
 * wait_ms for the process to end. A live nodefs, a process that is gone
 * (the kernel ended its connection when its files closed), a missing or
 * unreadable record: nothing is done. Returns 1 when a connection was
 * aborted, 0 when there was nothing to do, -errno on failure (not root,
 * fusectl cannot be mounted, the abort cannot be written).
 */
int fusectl_abort_stale(const char *state_dir, unsigned wait_ms, struct nerr *err);

#endif
