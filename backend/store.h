/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * store: checkpoints under the state dir, one JSON record per object.
 *
 * STATE_DIR/KIND/NAME.json, written atomically (temporary file, fsync,
 * rename, fsync of the directory) so a crash leaves the old record or the
 * new one, never a torn one. Every record carries "version": a reader knows
 * which format it holds. Called from worker threads; records of one object
 * are written by one thread at a time (the object's action queue).
 */
#ifndef NODEFS_STORE_H
#define NODEFS_STORE_H

#include <jansson.h>

struct backend;
struct hist;
struct jw;
struct nerr;
struct sbuf;

#define STORE_VERSION 1

/* Make STATE_DIR/KIND for each kind. */
int store_init(const char *state_dir, struct nerr *err);
/* Write obj (a "version" key is added) as KIND/NAME.json. -errno with err
 * (ENOSPC, EROFS, EIO...): the caller must not acknowledge the action. */
int store_put(const char *state_dir, const char *kind, const char *name, json_t *obj,
	      struct nerr *err);
/* The same, for a record written with jw (the fast path, for the records
 * written on every step): store_record_begin starts the object and its
 * "version" in sb; the caller adds its members; store_put_record closes
 * the object and writes it. The caller owns sb. */
void store_record_begin(struct jw *w, struct sbuf *sb);
int store_put_record(const char *state_dir, const char *kind, const char *name, struct jw *w,
		     struct nerr *err);
/* Remove KIND/NAME.json; 0 if it was not there. */
int store_del(const char *state_dir, const char *kind, const char *name, struct nerr *err);
/* The same without the fsync of the directory, for a record whose return
 * after a crash is harmless: an ended operation trimmed past
 * operations_keep comes back at the front of the ended FIFO and is trimmed
 * again when the next operation ends. Saves a disk flush per command once
 * operations_keep is reached. */
int store_drop(const char *state_dir, const char *kind, const char *name, struct nerr *err);

/* Figures of the checkpoints written under a state dir since store_init,
 * per kind: the time each record write took, create to directory fsync
 * (a histogram with bounds store_bucket_le, seconds; it lives as long as
 * the process), writes that failed, records removed. store_stats fills up
 * to n and returns how many (0 for a state dir store_init never saw). Any
 * thread. */
#define STORE_BUCKETS 10
extern const double store_bucket_le[STORE_BUCKETS];
struct store_kind_stats {
	const char *kind;
	const struct hist *write;
	unsigned long long errors, removals;
};
int store_stats(const char *state_dir, struct store_kind_stats *ret, size_t n);

/* A record's text to its object: JSON, an object, a known version. NULL
 * with the reason in why (at most n bytes) otherwise. */
json_t *store_decode(const char *text, size_t len, char *why, size_t n);

/* Call fn for every record of KIND, oldest file first. A record that does
 * not parse, or whose version is unknown, is renamed to KIND/NAME.corrupt
 * (kept for the operator; never read again), reported through bad (name
 * and reason) and skipped. */
typedef void (*store_load_fn)(void *ctx, const char *name, json_t *obj);
typedef void (*store_bad_fn)(void *ctx, const char *name, const char *reason);
int store_load(const char *state_dir, const char *kind, store_load_fn fn, store_bad_fn bad,
	       void *ctx);

/* Recovery's progress: how many records the kinds' directories hold now,
 * and how many store_load has read under state_dir since the start (good
 * or not). Any thread. */
unsigned long long store_count(const char *state_dir);
unsigned long long store_loaded(const char *state_dir);

#endif
