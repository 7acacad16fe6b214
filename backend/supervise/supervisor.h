/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * supervisor: the one supervisor thread (`nodefs-superv`, its own
 * common/loop) that both the plugins nodefs starts (plugin-proc.c) and the
 * containers whose restart policy nodefs keeps (containers/) run their
 * timers on. Made at first use, ended at the daemon's stop.
 *
 * Must not know plugins or containers: it runs what it is handed, when due.
 */
#ifndef NODEFS_SUPERVISOR_H
#define NODEFS_SUPERVISOR_H

#include <stdint.h>

struct backend;
struct nerr;

typedef void (*supervisor_fn)(struct backend *b, void *ctx);

/* Run fn(b, ctx) on the supervisor thread after ms milliseconds. ctx is
 * malloc'd and taken over: freed with free() after fn returns, or at the
 * daemon's stop when fn never ran. fn must not block (hand blocking work
 * to the worker pool). -ENOMEM, -ESHUTDOWN (the daemon stops: ctx freed).
 * Any thread. */
int supervisor_after(struct backend *b, uint64_t ms, supervisor_fn fn, void *ctx,
		     struct nerr *err);

/* End the thread and free what is still due (ctx's freed, fn not run).
 * Idempotent; the plugins' stop (plugins_proc_stop) calls it once its
 * processes are ended, and containers' stop again as a backstop. Main
 * thread, the daemon stopping. */
void supervisor_stop(struct backend *b);

#endif
