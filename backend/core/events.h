/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * events: what happened in the daemon, as a stream and as counters.
 *
 * The stream (the `events` file) is a bounded ring of JSON lines with
 * rising sequence numbers. Each reader keeps its own position, starting at
 * "now" when it opens; a reader that falls behind the ring loses the oldest
 * lines and is told so with one {"lost":N} line. Emitting never blocks on
 * readers and memory never grows past the ring.
 *
 * Beside it, tallies: named Prometheus series that modules add to as things
 * happen (operations ended, by type and outcome) and that outlive the
 * objects they count; metrics.c renders them. Bounded too.
 *
 * Thread-safe; any thread may call any function. Must not know: fs, CSI,
 * Docker, LXC.
 */
#ifndef NODEFS_EVENTS_H
#define NODEFS_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct bnode;
struct sbuf;
struct events;

/* Lines kept for readers behind the head (events_new's cap is at most this). */
#define EVENTS_RING_MAX CONFIG_EVENTS_KEEP_MAX
/* Distinct tally series kept; past that a new series is not made. */
#define EVENTS_TALLIES_MAX 1024
/* An event's message is cut to this many bytes (whole UTF-8 characters). */
#define EVENTS_MSG_MAX 512

/* cap: lines kept (1..EVENTS_RING_MAX). wake: the node whose change wakes
 * parked readers (its bnode_changed is called after each emit). NULL on OOM
 * or a bad cap. */
struct events *events_new(size_t cap, struct bnode *wake);
void events_free(struct events *ev);

/*
 * Emit one event: one JSON object on one line,
 *   {"time":"2026-11-29T18:00:00.123456Z","seq":N,"kind":K,"name":N,
 *    "old":O,"new":S,"operation":ID,"message":M,"by":B}
 * with every key present (null when not given). kind: "volume",
 * "container", "operation", "plugin", "runtime", "daemon", "drift". Never blocks on
 * readers; drops the event only on OOM.
 */
void events_emit(struct events *ev, const char *kind, const char *name,
		 const char *old_state, const char *new_state, const char *op,
		 const char *msg);
/* The same with "by" (who wrote the command: breq.by), as an operation's
 * events carry it; events_emit gives null. */
void events_emit_by(struct events *ev, const char *kind, const char *name,
		    const char *old_state, const char *new_state, const char *op,
		    const char *msg, const char *by);

/* The next sequence number. */
uint64_t events_head(struct events *ev);
/* A new reader: returns its starting point (the head). Lines are made only
 * while at least one reader is attached; events_detach when it goes. */
uint64_t events_attach(struct events *ev);
void events_detach(struct events *ev);
/*
 * Append whole lines from *pos on (at most max bytes, but at least one
 * line) and advance *pos. A reader the ring has overtaken first gets
 * {"lost":N} and moves to the oldest line kept. Returns bytes appended,
 * 0 when nothing is new, -E2BIG/-ENOMEM from out.
 */
int events_read(struct events *ev, uint64_t *pos, struct sbuf *out, size_t max);
/* Whether events_read from pos would append something now. */
bool events_readable(struct events *ev, uint64_t pos);

/*
 * Add delta to the tally named series: a whole Prometheus series name,
 * "family{label=\"value\",...}" with label values already escaped
 * (backslash, double quote and newline), or a bare family name. A series is made on first use;
 * past EVENTS_TALLIES_MAX series the delta is lost (-ENOSPC), -ENOMEM,
 * -EINVAL for a series longer than 255 bytes.
 */
int events_tally(struct events *ev, const char *series, int64_t delta);
/* Append "series value\n" for every tally whose family (the series up to
 * '{') is family, in the order they were made. -E2BIG/-ENOMEM from out. */
int events_render_tallies(struct events *ev, const char *family, struct sbuf *out);

#endif
