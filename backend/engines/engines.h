/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engines: what the rooms above (supervise/, containers/, uncertain/, the
 * registry) may ask of the runtimes: an engine by name, its health, a held
 * driver handle to call through, its events, a reload of its section (the
 * runtimes' reload hook uses it); and the monitor's poke. struct engine and the runtimes'
 * state (the engines, the monitor thread) are this room's: the hub keeps
 * the state in the kind's slot (kind_state), engines_of finds it.
 * Must not know: containers, volumes or plugins (the monitor ticks and
 * reconciles the kinds through their tables).
 */
#ifndef NODEFS_ENGINES_H
#define NODEFS_ENGINES_H

#include <stdbool.h>

#include "backend-internal.h"
#include "runtime.h"

struct kind_ops;

/* A driver handle, shared by the calls made on it: a reload of the
 * runtime's section puts a new one in place, and the old one is closed
 * once the last call on it has finished (engine_put). */
struct engine_ref {
	atomic_uint refs;
	const struct runtime_ops *ops;
	void *h;
};

/* A container engine as the tree shows it (runtimes/NAME/). */
struct engine {
	struct backend *b;
	const struct runtime_ops *ops;
	struct bnode *node;
	pthread_mutex_t lock;	/* guards the fields below */
	struct engine_ref *cur;	/* the handle calls take; NULL when open failed */
	const struct config *cfg;	/* whose [runtime] section cur was opened with */
	rt_event_fn watch_fn;	/* who is told of the engine's events (engine_watch) */
	void *watch_ctx;
	bool healthy;
	char reason[256];	/* why unhealthy */
	char version[128];
	time_t since;
};

/* The runtimes' state (kind_state of runtimes_kind). */
struct engines_state {
	struct engine *v;	/* one per driver this build has */
	size_t n;
	bool inited;		/* mlock and mcond are */
	pthread_t monitor;	/* engine health, the kinds' ticks, reconciliation */
	bool monitor_running;
	pthread_mutex_t mlock;	/* guards stopping and poked */
	pthread_cond_t mcond;
	bool stopping;
	bool poked;		/* a plugin's health changed: tick the kinds now */
};

/* b's runtimes (never NULL in a backend the registry made). */
struct engines_state *engines_of(struct backend *b);

/* runtimes/: the kind's table and its directory's type (engines.c). */
extern const struct kind_ops runtimes_kind;
extern const struct btype runtimes_type;

struct engine *engine_find(struct backend *b, const char *name);
/* 0 when e is healthy and open; -EHOSTDOWN with the reason otherwise. */
int engine_ready(struct engine *e, struct nerr *err);
/* The handle to make a call on, held until engine_put: NULL when the
 * driver failed to open. Any thread; never blocks but on e->lock. */
struct engine_ref *engine_hold(struct engine *e);
/* Whether e's driver opened (it has a handle), healthy or not. */
bool engine_opened(struct engine *e);
/* engine_ready, then the handle held into *ret (the caller puts it). */
int engine_take(struct engine *e, struct engine_ref **ret, struct nerr *err);
/* NULL-safe; the last put of a handle a reload replaced closes it. */
void engine_put(struct engine_ref *r);
static inline void engine_putp(struct engine_ref **r)
{
	engine_put(*r);
}
#define _cleanup_engine_ __attribute__((cleanup(engine_putp)))
/* Deliver e's events to fn from now on, and from every handle a reload
 * puts in place; -errno from the driver's watch. */
int engine_watch(struct engine *e, rt_event_fn fn, void *ctx, struct nerr *err);
/* A reload: e's [runtime] section as nc has it, applied (1), unchanged
 * (0), or refused with the reason in err, the old handle kept (-errno: a
 * bad value, a driver that does not open, or a key that says where the
 * containers live changed while e has some: in_use). Calls in flight
 * finish on the old handle. */
int engine_reload(struct engine *e, const struct config *nc, bool in_use, struct nerr *err);
/* Wake the monitor to run the kinds' tick now (any thread, no lock held
 * but maybe a CSI connection's: it only sets a flag and signals). */
void engines_poke_plugins(struct backend *b);

#endif
