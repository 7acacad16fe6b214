/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * grpcsrv: a sans-IO gRPC unary server core on nghttp2, the mirror of
 * grpc.h's client.
 *
 * Bytes from a client go in through grpc_srv_recv() and bytes for it come
 * out of grpc_srv_output(); the core never sees an fd, a clock or a thread,
 * so tests can script byte sequences and fuzzers can feed it. It checks each
 * request (POST, content-type application/grpc, a :path, at most one
 * uncompressed message of at most GRPC_MAX_MESSAGE bytes, GRPC_MAX_HEADERS
 * bytes of headers), hands a complete one to the request callback, and
 * frames the answer: headers + message + trailers for OK, a trailers-only
 * reply otherwise, grpc-message percent-encoded. A request it rejects
 * itself is answered here and never reaches the callback.
 *
 * Every request handed to the callback must be answered exactly once with
 * grpc_srv_reply(), then or later; the call handle stays valid until then,
 * even when the client reset the stream or the session died meanwhile (the
 * answer is then dropped). grpc_srv_free() with calls unanswered frees them
 * too: the owner must not answer them afterwards.
 * A session is single-threaded: the caller serializes all calls on it.
 * It knows nothing of CSI or of what the messages carry.
 */
#ifndef NODEFS_GRPCSRV_H
#define NODEFS_GRPCSRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc.h"

struct sbuf;
struct grpc_srv;
struct grpc_srv_call;

/* A complete request: path is the :path ("/csi.v1.Identity/Probe"), msg the
 * message without its prefix (len may be 0). Both are valid only during the
 * callback. timeout_ms is the client's grpc-timeout (0 = none). */
typedef void (*grpc_srv_request_fn)(void *userdata, struct grpc_srv_call *call, const char *path,
				    const uint8_t *msg, size_t len, uint64_t timeout_ms);

/* Create a server session; queues our SETTINGS. max_streams caps the
 * concurrent streams a client may open (0 = 128). 0 or -ENOMEM. */
int grpc_srv_new(unsigned max_streams, grpc_srv_request_fn fn, void *userdata,
		 struct grpc_srv **ret_srv);

/* Free the session and every call still unanswered. NULL-safe. */
void grpc_srv_free(struct grpc_srv *s);

/* Feed bytes received from the client. Request callbacks run from here.
 * 0, or -EPROTO when the client broke HTTP/2 (the session then only
 * flushes its GOAWAY: send grpc_srv_output() and close). */
int grpc_srv_recv(struct grpc_srv *s, const uint8_t *data, size_t len);

/* Append every byte the session wants to send to out. Returns the number
 * of bytes appended, or -ENOMEM/-E2BIG (out's cap). */
int grpc_srv_output(struct grpc_srv *s, struct sbuf *out);

/* True while the session has frames to send. */
bool grpc_srv_want_write(struct grpc_srv *s);

/* True when the connection is over: nothing more to read nor to write
 * (GOAWAY exchanged, or a protocol error flushed). */
bool grpc_srv_done(struct grpc_srv *s);

/* Calls handed to the callback and not yet answered. */
unsigned grpc_srv_pending(struct grpc_srv *s);

/* Ask the client to go away (GOAWAY NO_ERROR after the last stream seen);
 * calls in flight still get their answers. */
void grpc_srv_shutdown(struct grpc_srv *s);

/* Answer call: code GRPC_OK with msg (len bytes, copied; may be 0), or an
 * error code with message (may be NULL; sent percent-encoded, cut at
 * GRPC_MAX_STATUS_MSG bytes) and no body. The handle is invalid afterwards.
 * Returns 0; -E2BIG (len over GRPC_MAX_MESSAGE: answered RESOURCE_EXHAUSTED
 * instead), -ENOMEM (the stream is reset instead), -ENOTCONN (the stream or
 * session was gone: nothing sent). In every case the call is consumed. */
int grpc_srv_reply(struct grpc_srv *s, struct grpc_srv_call *call, int code,
		   const char *message, const void *msg, size_t len);

/* The session a call belongs to (for owners that keep a session per
 * connection), and the owner's pointer set on it. */
struct grpc_srv *grpc_srv_call_session(struct grpc_srv_call *call);
void grpc_srv_set_owner(struct grpc_srv *s, void *owner);
void *grpc_srv_owner(struct grpc_srv *s);

#endif
