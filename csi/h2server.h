/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * h2server: a gRPC server on a unix socket, driven by the event loop.
 *
 * It owns the listening socket and one grpcsrv session per accepted
 * connection, moves bytes between sockets and sessions, and hands every
 * complete request to the handler on the loop thread. The handler answers
 * at once (h2_server_reply) or later: from the loop thread with
 * h2_server_reply, from any other thread with h2_server_reply_async, which
 * copies the answer and hands it to the loop. A connection that goes away
 * with calls unanswered lives on, silent, until each is answered (the
 * answers are dropped), so a handle never dangles. It knows nothing of CSI.
 *
 * Every function runs on the loop thread, except h2_server_reply_async.
 */
#ifndef NODEFS_H2SERVER_H
#define NODEFS_H2SERVER_H

#include <stddef.h>
#include <stdint.h>

struct loop;
struct nerr;
struct h2_server;
struct grpc_srv_call;

/* A request: see grpc_srv_request_fn. The handler must answer call exactly
 * once. msg and path are valid only during the callback. */
typedef void (*h2_server_fn)(void *userdata, struct grpc_srv_call *call, const char *path,
			     const uint8_t *msg, size_t len, uint64_t timeout_ms);

/* Listen on the unix socket at path (a stale socket file there is replaced;
 * anything else is not). 0, -EINVAL (path too long), -EADDRINUSE (a live
 * server answers there), -errno from socket/bind/listen, -ENOMEM. */
int h2_server_new(struct loop *loop, const char *path, h2_server_fn fn, void *userdata,
		  struct h2_server **ret_server, struct nerr *err);

/* Stop listening and close every connection; calls still unanswered must
 * not be answered afterwards (their handles are freed). Removes the socket
 * file. NULL-safe. */
void h2_server_free(struct h2_server *srv);

/* Answer call on the loop thread (see grpc_srv_reply) and flush. */
void h2_server_reply(struct grpc_srv_call *call, int code, const char *message,
		     const void *msg, size_t len);

/* Answer call from any thread: the bytes and message are copied and the
 * answer is sent from the loop. 0, or -ENOMEM (then nothing is queued and
 * the caller may retry). The server must outlive the answer's delivery:
 * stop the threads that answer before h2_server_free. */
int h2_server_reply_async(struct h2_server *srv, struct grpc_srv_call *call, int code,
			  const char *message, const void *msg, size_t len);

/* Connections open now (tests, diagnostics). */
unsigned h2_server_connections(struct h2_server *srv);

#endif
