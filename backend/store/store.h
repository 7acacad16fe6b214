/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * store: checkpoints under the state dir, one JSON record per object, made
 * durable through a journal with group commit.
 *
 * STATE_DIR/KIND/NAME.json holds each object's last record; recovery reads
 * only those files (store_load). A write goes first to STATE_DIR/journal:
 * the records queued by every thread since the last flush are appended in
 * one write and made durable by one fdatasync (group commit: concurrent
 * commands share a flush), and only then are their files replaced
 * (temporary file and rename, no fsync). A crash therefore leaves every
 * record that reached the journal; store_open replays the journal into the
 * files before anything reads them. Once the journal passes
 * STORE_JOURNAL_MAX, a flush makes the files durable with one syncfs and
 * empties it. Every record carries "version": a reader knows which format
 * it holds.
 *
 * Lazy writes (STORE_LAZY) are queued and become durable (and reach their
 * file) at the next flush anyone asks for: a command queues the records it
 * writes and asks for one flush before its next outside call and one before
 * its writer is answered (store_sync).
 *
 * Must not know: the objects whose records it keeps (kinds are names).
 * Any thread; the writes of one object come from one thread at a time.
 */
#ifndef NODEFS_STORE_H
#define NODEFS_STORE_H

#include <jansson.h>
#include <stddef.h>

struct hist;
struct jw;
struct nerr;
struct sbuf;
struct store;

#define STORE_VERSION 1

/* A write's durability: durable before the call returns, or at the next
 * flush (store_sync, a durable write, or store_close). */
#define STORE_DURABLE 0u
#define STORE_LAZY 1u

/* Make STATE_DIR/KIND for each kind, replay STATE_DIR/journal into the
 * record files (records of a crash that had not reached their files) and
 * open the store. -errno with err. */
int store_open(const char *state_dir, struct store **ret, struct nerr *err);
/* Flush what is queued, make the files durable and empty the journal, and
 * free. NULL-safe. No write may run concurrently. */
void store_close(struct store *s);
const char *store_dir(const struct store *s);

/* Write obj (a "version" key is added) as KIND/NAME.json. -errno with err
 * (ENOSPC, EROFS, EIO...): the caller must not acknowledge the action. A
 * lazy write fails only on memory; its flush reports the rest. */
int store_put(struct store *s, const char *kind, const char *name, json_t *obj, unsigned flags,
	      struct nerr *err);
/* The same, for a record written with jw (the records written on every
 * step): store_record_begin starts the object and its "version" in sb; the
 * caller adds its members; store_put_record closes the object and queues
 * it (the text is copied). The caller owns sb. */
void store_record_begin(struct jw *w, struct sbuf *sb);
int store_put_record(struct store *s, const char *kind, const char *name, struct jw *w,
		     unsigned flags, struct nerr *err);
/* Remove KIND/NAME.json; 0 if it was not there. */
int store_del(struct store *s, const char *kind, const char *name, unsigned flags,
	      struct nerr *err);
/* A lazy removal, for a record whose return after a crash is harmless (an
 * ended operation trimmed past operations_keep comes back at the front of
 * the ended FIFO and is trimmed again when the next operation ends). */
int store_drop(struct store *s, const char *kind, const char *name, struct nerr *err);
/* Every write queued before the call is durable and in its file when it
 * returns 0 (at once when nothing is queued). -errno with err when the
 * flush that carried them failed. */
int store_sync(struct store *s, struct nerr *err);

/* Figures since store_open, per kind: the time each record write took,
 * queued to durable (a histogram with bounds store_bucket_le,
 * seconds), writes that failed, records removed. store_stats fills up to n
 * and returns how many. Any thread. */
#define STORE_BUCKETS 10
extern const double store_bucket_le[STORE_BUCKETS];
struct store_kind_stats {
	const char *kind;
	const struct hist *write;
	unsigned long long errors, removals;
};
int store_stats(struct store *s, struct store_kind_stats *ret, size_t n);
/* The journal's work: flushes (each one fdatasync), records and removals
 * they carried, syncfs calls that emptied it, and records replayed at
 * open. */
struct store_io {
	unsigned long long flushes, records, syncfs, replayed;
};
void store_io_stats(struct store *s, struct store_io *ret);

/* A record's text to its object: JSON, an object, a known version. NULL
 * with the reason in why (at most n bytes) otherwise. */
json_t *store_decode(const char *text, size_t len, char *why, size_t n);

/* Call fn for every record of KIND, oldest file first. A record that does
 * not parse, or whose version is unknown, is renamed to KIND/NAME.corrupt
 * (kept for the operator; never read again), reported through bad (name
 * and reason) and skipped. */
typedef void (*store_load_fn)(void *ctx, const char *name, json_t *obj);
typedef void (*store_bad_fn)(void *ctx, const char *name, const char *reason);
int store_load(struct store *s, const char *kind, store_load_fn fn, store_bad_fn bad, void *ctx);

/* Recovery's progress: how many records the kinds' directories hold now,
 * and how many store_load has read since store_open (good or not). Any
 * thread. */
unsigned long long store_count(struct store *s);
unsigned long long store_loaded(struct store *s);

/* The journal's entries (store-jentry.c), exported for recovery and the
 * fuzz target: a put carries the record's text, a removal none. */
struct store_jentry {
	char op;			/* 'P' put, 'D' removal */
	char kind[16];
	char name[256];
	const char *text;		/* into the decoded buffer; put only */
	size_t len;
	unsigned long long seq;
};
/* The entry at *pos of buf (len bytes): 1 with *ret filled and *pos moved
 * past it, 0 at the end or at the first bytes that are not a whole, intact
 * entry (a torn tail). Pure. */
int store_jentry_next(const unsigned char *buf, size_t len, size_t *pos,
		      struct store_jentry *ret);
/* An entry's bytes in out (appended): header and payload. -ENOMEM, -EINVAL
 * for a kind or name too long. */
int store_jentry_encode(struct sbuf *out, char op, const char *kind, const char *name,
			const char *text, size_t len, unsigned long long seq);

#endif
