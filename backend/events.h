/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * events: the daemon's event stream (the `events` file).
 *
 * A bounded ring of JSON lines with rising sequence numbers. Each reader
 * keeps its own position, starting at "now" when it opens; a reader that
 * falls behind the ring loses the oldest lines and is told so with one
 * {"lost":N} line. Emitting never blocks on readers and memory never grows
 * past the ring. Thread-safe.
 */
#ifndef NODEFS_EVENTS_H
#define NODEFS_EVENTS_H

#include <stddef.h>
#include <stdint.h>

struct bnode;
struct sbuf;
struct events;

/* cap: lines kept. wake: the node whose change wakes parked readers. */
struct events *events_new(size_t cap, struct bnode *wake);
void events_free(struct events *ev);

/* Emit one event. kind: "volume", "container", "operation", "plugin",
 * "runtime", "daemon". old_state/new_state/op/msg may be NULL. */
void events_emit(struct events *ev, const char *kind, const char *name,
		 const char *old_state, const char *new_state, const char *op,
		 const char *msg);

/* The next sequence number (a new reader's starting point). */
uint64_t events_head(struct events *ev);
/* Append whole lines from *pos on (at most max bytes, at least one line);
 * advance *pos. Returns bytes appended, 0 when nothing is new. */
int events_read(struct events *ev, uint64_t *pos, struct sbuf *out, size_t max);

#endif
