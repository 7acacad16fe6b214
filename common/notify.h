/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * notify: telling systemd what the daemon does, without libsystemd.
 *
 * The protocol (sd_notify(3)) is one datagram of "KEY=VALUE\n" lines to the
 * AF_UNIX socket named by $NOTIFY_SOCKET (a leading '@' names an abstract
 * socket); the watchdog is armed by $WATCHDOG_USEC, for the process
 * $WATCHDOG_PID names when it is set. This module speaks that, and runs one
 * thread (nodefs-sd) that asks its hooks what the daemon does: STATUS= lines
 * while it starts (EXTEND_TIMEOUT_USEC while the start makes progress),
 * READY=1 once it is ready and alive, WATCHDOG=1 every half period while
 * the alive hook says the daemon still makes progress, and a reload when
 * SIGHUP asks for one. Outside systemd (no $NOTIFY_SOCKET) nothing is sent
 * but the thread still serves reloads.
 *
 * Must not know: what the daemon is (the hooks say), FUSE, the backend.
 */
#ifndef NODEFS_NOTIFY_H
#define NODEFS_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nerr;
struct notify;

enum notify_phase { NOTIFY_STARTING, NOTIFY_READY, NOTIFY_STOPPING };

struct notify_hooks {
	/* The daemon's phase and, in status (len bytes), what it does in
	 * words. *ret_progress is a count that moves while a start makes
	 * progress: each move extends systemd's start timeout. */
	enum notify_phase (*phase)(void *ctx, char *status, size_t len, uint64_t *ret_progress);
	/* Whether the daemon still makes progress. May block (a probe that
	 * hangs means it does not): no READY=1, no WATCHDOG=1 meanwhile. */
	bool (*alive)(void *ctx);
	/* A reload was asked for (notify_reload): re-read what can change.
	 * Runs on the notify thread. May be NULL. */
	void (*reload)(void *ctx);
	void *ctx;
};

/* How often the thread looks while the daemon starts, and how far each
 * EXTEND_TIMEOUT_USEC pushes the start timeout. */
#define NOTIFY_START_TICK_MS 100
#define NOTIFY_EXTEND_USEC (30ull * 1000 * 1000)

/* Read $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID, then unset them
 * (children, a template run by liblxc, must not speak for us). Main thread,
 * before any other thread starts. -ENOMEM, -EINVAL with err for a
 * NOTIFY_SOCKET that is not a unix socket path, -errno of socket(). */
int notify_new(const struct notify_hooks *h, struct notify **ret, struct nerr *err);
/* Start the thread. -errno with err. */
int notify_start(struct notify *n, struct nerr *err);
/* Whether $NOTIFY_SOCKET was set, and the watchdog period in us (0: none
 * for this process). */
bool notify_enabled(const struct notify *n);
uint64_t notify_watchdog_usec(const struct notify *n);
/* Send one message (printf format; lines separated by '\n'). 0 when sent
 * or when not under systemd; -errno of sendto. Any thread. NULL-safe. */
int notify_send(struct notify *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The daemon stops: STOPPING=1 with status, and from now on the phase hook
 * is not asked and the watchdog pings without asking alive (the stop is
 * bounded by its own grace). Any thread. NULL-safe. */
void notify_stopping(struct notify *n, const char *status);
/* Ask the thread to run the reload hook. Async-signal-safe (one write to
 * an eventfd). NULL-safe. */
void notify_reload(struct notify *n);
/* Stop and join the thread (it may be blocked in the alive hook: call this
 * once that hook's probe can no longer block), close the socket. NULL-safe. */
void notify_free(struct notify *n);

#endif
