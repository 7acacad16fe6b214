/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * store-internal: what store.c (the records' files, the write calls,
 * reading back), store-journal.c (the queue, group commit, replay) and
 * store-jentry.c (a journal entry's bytes) share. See store.h.
 * Must not know: the backend (store/ uses common/ only) or what a
 * record's JSON means.
 */
#ifndef NODEFS_STORE_INTERNAL_H
#define NODEFS_STORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hist.h"
#include "sbuf.h"
#include "store.h"
#include "nodefs-config.h"

#define STORE_JHDR 24
/* A record is at most STORE_RECORD_MAX bytes; its entry adds the names. */
#define STORE_RECORD_MAX (4u << 20)
#define STORE_JENTRY_MAX (STORE_RECORD_MAX + 600u)

/* The kinds' names, in the order of struct store's arrays (store.c). */
#define STORE_NKINDS 5
extern const char *const store_kinds[STORE_NKINDS];

struct kind_stats {
	struct hist write;
	atomic_ullong errors, removals;
	atomic_ullong loaded;	/* records store_load has read (recovery's progress) */
};

/* A queued write, or a barrier (kind -1) a store_sync waits on. */
struct qent {
	struct qent *next;
	int kind;
	char op;
	char name[256];
	struct sbuf bytes;	/* the journal entry; empty for a barrier */
	size_t toff, tlen;	/* the record's text within bytes */
	uint64_t t0;
	bool waited;		/* a writer waits on it and frees it */
	bool taken;		/* in a leader's batch */
	bool done;
	bool crash_match;	/* test hooks: matches NODEFS_CRASH_AT's KIND:STATE */
	int result;
	char msg[256];
};

struct store {
	char *dir;
	int dfd, kfd[STORE_NKINDS];
	char jpath[4200];	/* STATE_DIR/journal, opened per flush: an fd open for
				 * writing would keep the state dir from being
				 * remounted read-only */
	struct kind_stats st[STORE_NKINDS];
	/* the journal's (store-journal.c): */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* held while a flush replaces its records' files (wait_flushed) */
	pthread_mutex_t apply_lock;
	unsigned applying;	/* flushes past their append, not yet done (lock) */
	struct qent *head, **tail;
	size_t qbytes;
	unsigned long long next_seq;
	bool flushing;
	/* the leader's alone (flushing set): */
	off_t jend;
	bool pinned;		/* a file could not be written: the journal is ahead */
	bool written;		/* flushed since the journal was last emptied */
	atomic_ullong flushes, records, syncfs, replayed;
#if NODEFS_TEST_HOOKS
	char crash_kind[32], crash_state[64];
	int crash_nth, crash_seen, group_nth, group_seen;
#endif
};

/* store.c: the kind's index, or -1. */
int store_kind_index(const char *kind);
/* store.c: a record's name is one path component with no leading dot. */
bool store_name_ok(const char *name);
/* store.c: replace KIND/NAME.json with text (temporary file, rename, no
 * fsync), or remove it. -errno with the message in msg. */
int store_apply_put(struct store *s, int k, const char *name, const char *text, size_t len,
		    char *msg, size_t msz);
int store_apply_del(struct store *s, int k, const char *name, char *msg, size_t msz);

/* store-journal.c: make STATE_DIR/journal, replay it into the files and
 * empty it (store_open, after the kinds' directories are open). -errno with
 * err. */
int store_journal_open(struct store *s, struct nerr *err);
/* store-journal.c: flush what is queued and empty the journal
 * (store_close). */
void store_journal_close(struct store *s);
/* store-journal.c: queue a put of text (copied), or a removal (text
 * NULL), of KIND/NAME; wait for its flush unless flags has STORE_LAZY. */
int store_queue_write(struct store *s, const char *kind, const char *name, const char *text,
		      size_t len, unsigned flags, struct nerr *err);

/* store-jentry.c */
uint32_t store_crc32c(const void *p, size_t n);
/* Write seq into an encoded entry's header and seal the header's CRC. */
void store_jentry_seal(unsigned char *hdr, unsigned long long seq);

#endif
