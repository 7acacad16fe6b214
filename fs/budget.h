/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * budget: the memory open files hold, per opener's uid (reader_memory in
 * nodefs(5)). Each open file is charged a fixed cost (its state, a poll
 * handle, a parked read) plus the buffers it keeps: its snapshot, a ctl
 * write's answer, a stream's kept bytes. An open that would take a uid's
 * charge past the bound fails (EMFILE) and is counted; root (uid 0) is
 * never bounded nor charged. Knows uids and byte counts, not files.
 *
 * Must not know: FUSE, CSI, Docker, LXC, the config.
 */
#ifndef NODEFS_FS_BUDGET_H
#define NODEFS_FS_BUDGET_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What an open file costs besides its buffers: struct fs_file, the
 * stream's state, a poll handle, a parked request. */
#define BUDGET_OPEN_COST 1024u

struct budget_uid;
struct sbuf;

struct budget {
	pthread_mutex_t lock;
	uint64_t limit;		/* bytes per uid; 0: unbounded */
	struct budget_uid *uids;
};

void budget_init(struct budget *b, uint64_t limit);
void budget_destroy(struct budget *b);

/* Charge want bytes to uid for a new open: 0, or -EMFILE (counted) when
 * its charge would pass the limit. -ENOMEM. Uid 0 is never charged. */
int budget_take(struct budget *b, uid_t uid, size_t want);
/* Change a charge taken from old to now bytes (a snapshot grew, a file
 * closed: now 0). Never refuses. */
void budget_adjust(struct budget *b, uid_t uid, size_t old, size_t now);
/* nodefs_reader_memory_bytes and nodefs_reader_limit_refused_total, by
 * uid (those charged now or ever refused). */
int budget_render(struct budget *b, struct sbuf *out);

#endif
