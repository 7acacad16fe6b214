/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * h2conn: one gRPC connection to a unix socket, driven by the event loop.
 *
 * It owns the socket and a grpc_session, multiplexes many calls on it, arms
 * a deadline per call (RST_STREAM + DEADLINE_EXCEEDED on expiry), connects on
 * demand and reconnects with randomized exponential backoff after a loss.
 * Calls are fail-fast: a call that cannot reach the server completes with
 * UNAVAILABLE (connection refused, lost or GOAWAY); retrying is the caller's
 * business. It knows nothing of CSI.
 *
 * Every function here runs on the loop thread only, except h2_conn_ref(),
 * h2_conn_call() and h2_conn_state(). Every call accepted by
 * h2_conn_submit() completes exactly once, always from a later loop callback
 * (never inside h2_conn_submit itself).
 *
 * A direct call (h2_conn_call) is the fast path of a lone caller: when the
 * connection is up and idle, the calling thread submits, writes and reads
 * the socket itself while the loop stops watching it, so a round trip
 * costs no thread hand-off. Calls submitted meanwhile wait and start when
 * it lets go; a loss it meets is handed to the loop, which reconnects.
 */
#ifndef NODEFS_H2CONN_H
#define NODEFS_H2CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc.h"

struct loop;
struct h2_conn;
struct h2_call;

enum h2_state { H2_DOWN, H2_CONNECTING, H2_UP };

/* Called on every transition to H2_UP or H2_DOWN; reason is a short text
 * ("connect: Connection refused"), "" when up. */
typedef void (*h2_state_fn)(void *userdata, enum h2_state state, const char *reason);

struct h2_conn_opts {
	uint64_t backoff_ms;	/* first reconnect delay (before jitter); 0 = 1000 */
	uint64_t backoff_max_ms;	/* cap; 0 = 120000 */
	h2_state_fn on_state;	/* may be NULL */
	void *userdata;
};

/* Create a connection to the unix socket at path (not yet connected: the
 * first call or h2_conn_connect() connects). 0, -EINVAL (path too long for
 * sun_path), -ENOMEM. */
int h2_conn_new(struct loop *loop, const char *path, const struct h2_conn_opts *opts,
		struct h2_conn **ret_conn);

/* Close the socket; every open call completes with CANCELLED first. NULL-safe. */
void h2_conn_free(struct h2_conn *c);

/* Start connecting now if down (cancels a pending backoff wait). */
void h2_conn_connect(struct h2_conn *c);

/* Start a unary call (see grpc_session_submit). timeout_ms 0 = no deadline.
 * The message bytes are copied. 0, -E2BIG, -ENOMEM; on error done never runs.
 * If ret_call is non-NULL it receives a handle valid until done runs. */
int h2_conn_submit(struct h2_conn *c, const char *path, const void *msg, size_t len,
		   uint64_t timeout_ms, grpc_done_fn done, void *userdata, struct h2_call **ret_call);

/* Complete a call now with code (e.g. CANCELLED); RST_STREAM if on the wire. */
void h2_conn_cancel(struct h2_conn *c, struct h2_call *call, int code, const char *message);

/* Any thread. */
enum h2_state h2_conn_state(struct h2_conn *c);

/* Any thread, under whatever lock keeps c alive (the CSI plugin's): keep
 * c from being freed until the h2_conn_call() that must follow returns. */
void h2_conn_ref(struct h2_conn *c);

/* Any thread but the loop's, after h2_conn_ref() (which it drops). If the
 * connection is up with nothing in flight, run the call on this thread and
 * return 0: done runs exactly once (OK, a status, DEADLINE_EXCEEDED,
 * UNAVAILABLE if the connection is lost, CANCELLED if freed meanwhile),
 * here before the return, or, if another call was submitted meanwhile, on
 * the loop thread, to which the call is handed so that the two share the
 * connection. Otherwise -EAGAIN at once and done never runs: use
 * h2_conn_submit() on the loop. */
int h2_conn_call(struct h2_conn *c, const char *path, const void *msg, size_t len,
		 uint64_t timeout_ms, grpc_done_fn done, void *userdata);

/* Randomized exponential backoff: min(max_ms, base_ms * factor^attempt),
 * then multiplied by a uniform jitter in [1 - jitter, 1 + jitter] (and capped
 * at max_ms again). attempt counts from 0. *rng is a caller-owned xorshift
 * state (any non-zero seed). Pure: unit-tested. */
uint64_t h2_backoff_ms(uint64_t base_ms, uint64_t max_ms, double factor, double jitter,
		       unsigned attempt, uint64_t *rng);

#endif
