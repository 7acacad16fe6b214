/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * grpc: a sans-IO gRPC unary client core on nghttp2.
 *
 * Bytes from the server go in through grpc_session_recv() and bytes for the
 * server come out of grpc_session_output(); the core never sees an fd, a
 * clock or a thread, so tests can script byte sequences and fuzzers can feed
 * it. It frames requests (5-byte prefix, always sent), builds the request
 * headers, and decodes replies: headers + one message + trailers, or a
 * trailers-only reply; grpc-status, percent-encoded grpc-message, the HTTP
 * status mapped when grpc-status is missing, RST_STREAM and GOAWAY. Caps: a
 * message of GRPC_MAX_MESSAGE bytes, GRPC_MAX_HEADERS bytes of headers.
 *
 * Every submitted call's completion callback runs exactly once, from inside
 * grpc_session_recv(), grpc_session_output(), grpc_session_cancel() or
 * grpc_session_fail_all(). The callback must not free the session.
 * A session is single-threaded: the caller serializes all calls on it.
 *
 * It also declares the wire helpers the server core (grpcsrv.h) uses:
 * framing, grpc-message percent-coding and grpc-timeout values.
 */
#ifndef NODEFS_GRPC_H
#define NODEFS_GRPC_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

struct sbuf;

#define GRPC_MAX_MESSAGE (4u << 20)	/* 4 MiB, in either direction */
#define GRPC_MAX_HEADERS (16u << 10)	/* 16 KiB of response header block */
#define GRPC_MAX_STATUS_MSG 1024	/* decoded grpc-message kept */

/* The gRPC status codes (grpc/doc/statuscodes.md). */
enum grpc_code {
	GRPC_OK = 0,
	GRPC_CANCELLED = 1,
	GRPC_UNKNOWN = 2,
	GRPC_INVALID_ARGUMENT = 3,
	GRPC_DEADLINE_EXCEEDED = 4,
	GRPC_NOT_FOUND = 5,
	GRPC_ALREADY_EXISTS = 6,
	GRPC_PERMISSION_DENIED = 7,
	GRPC_RESOURCE_EXHAUSTED = 8,
	GRPC_FAILED_PRECONDITION = 9,
	GRPC_ABORTED = 10,
	GRPC_OUT_OF_RANGE = 11,
	GRPC_UNIMPLEMENTED = 12,
	GRPC_INTERNAL = 13,
	GRPC_UNAVAILABLE = 14,
	GRPC_DATA_LOSS = 15,
	GRPC_UNAUTHENTICATED = 16,
	_GRPC_CODE_MAX = 17,
};

/* "OK", "NOT_FOUND", ...; "UNKNOWN" for codes out of range. */
const char *grpc_code_to_string(int code);
/* Parse a name as above; -EINVAL if unknown. */
int grpc_code_from_string(const char *s);

/* The one gRPC-status-to-errno table (positive errno; 0 for OK):
 * NOT_FOUND ENOENT, ALREADY_EXISTS EEXIST, INVALID_ARGUMENT EINVAL,
 * FAILED_PRECONDITION EBUSY, ABORTED EBUSY, DEADLINE_EXCEEDED ETIMEDOUT,
 * UNAVAILABLE EAGAIN, RESOURCE_EXHAUSTED ENOSPC, PERMISSION_DENIED EACCES,
 * UNAUTHENTICATED EACCES, UNIMPLEMENTED EOPNOTSUPP, CANCELLED ECANCELED,
 * anything else EIO. */
int grpc_code_to_errno(int code);

/* gRPC's table for a reply without grpc-status: 400 INTERNAL,
 * 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 UNIMPLEMENTED,
 * 429/502/503/504 UNAVAILABLE, anything else UNKNOWN. */
int grpc_code_from_http(int http_status);

/* Decode a percent-encoded grpc-message into out (NUL-terminated, truncated
 * to outsz - 1 bytes; malformed escapes are kept literally, as gRPC does).
 * Returns the length written. */
size_t grpc_percent_decode(const char *in, size_t inlen, char *out, size_t outsz);

/* Percent-encode a grpc-message: bytes outside 0x20..0x7e and '%' become
 * %XX. Writes at most outsz - 1 bytes plus a NUL, never splitting an escape;
 * returns the length written. Pure. */
size_t grpc_percent_encode(const char *in, size_t inlen, char *out, size_t outsz);

/* Parse a grpc-timeout value ("250m", "30S", "1H"...) into milliseconds
 * (rounded up; at most 8 digits). -EINVAL when malformed. Pure. */
int grpc_timeout_parse(const char *v, size_t len, uint64_t *ret_ms);

/* Format a grpc-timeout header value ("250m", "30S") for ms milliseconds. */
void grpc_timeout_format(uint64_t ms, char out[16]);

/* Framing shared by client and server. grpc_prefix_len reads the length
 * from a 5-byte message prefix; grpc_frame returns a malloc'd prefix +
 * message (len + 5 bytes) or NULL. grpc_body_add appends received DATA to a
 * message being gathered (an sbuf capped at GRPC_MAX_MESSAGE + 5): -EMSGSIZE
 * once it or its declared length is over the cap. grpc_copy_out copies the
 * next at most length bytes of src from *off on (a data provider's read) and
 * advances *off. grpc_h2_send drains an nghttp2 session's output into out:
 * the bytes added, -ENOMEM, or -EPROTO (then *dead is set).
 * grpc_h2_settings queues a session's first SETTINGS (first_id =
 * first_value, a 1 MiB stream window, GRPC_MAX_HEADERS of headers) and a
 * 16 MiB connection window: 0 or -ENOMEM. */
struct nghttp2_session;
uint32_t grpc_prefix_len(const uint8_t *b);
uint8_t *grpc_frame(const void *msg, size_t len);
int grpc_body_add(struct sbuf *body, const uint8_t *data, size_t len);
size_t grpc_copy_out(uint8_t *buf, size_t length, const uint8_t *src, size_t src_len, size_t *off);
int grpc_h2_send(struct nghttp2_session *h2, struct sbuf *out, bool *dead);
int grpc_h2_settings(struct nghttp2_session *h2, int32_t first_id, uint32_t first_value);

/* The outcome of one call, valid only during the completion callback. */
struct grpc_reply {
	int code;			/* enum grpc_code */
	const char *message;		/* decoded grpc-message or our own words; never NULL */
	const uint8_t *body;		/* the response message (no prefix); OK only */
	size_t body_len;
	int http_status;		/* 0 if no :status was received */
};

typedef void (*grpc_done_fn)(void *userdata, const struct grpc_reply *reply);

struct grpc_session;
struct grpc_call;

/* Create a client session; queues the connection preface and our SETTINGS
 * (first frame: real servers require it). authority may be NULL ("localhost").
 * Returns 0 or -ENOMEM. */
int grpc_session_new(const char *authority, struct grpc_session **ret_session);

/* Free the session. Calls still open complete with CANCELLED first. NULL-safe. */
void grpc_session_free(struct grpc_session *s);

/* Start a unary call: POST path (e.g. "/csi.v1.Identity/Probe") carrying
 * msg (len bytes, may be 0) with grpc-timeout timeout_ms (0 = none).
 * The bytes are copied. On success *ret_call (if non-NULL) is a handle for
 * grpc_session_cancel(), valid until done runs.
 * Returns 0; -E2BIG (message over the cap), -ENOTCONN (the session is going
 * away: GOAWAY received or fatal error), -ENOMEM. On error done never runs. */
int grpc_session_submit(struct grpc_session *s, const char *path, const void *msg, size_t len,
			uint64_t timeout_ms, grpc_done_fn done, void *userdata,
			struct grpc_call **ret_call);

/* Complete call now with code (DEADLINE_EXCEEDED, CANCELLED) and message;
 * queue RST_STREAM(CANCEL) if it is on the wire. No-op if already complete. */
void grpc_session_cancel(struct grpc_session *s, struct grpc_call *call, int code, const char *message);

/* Feed bytes received from the server. Returns 0, or -EPROTO when the peer
 * broke HTTP/2 (the session is then dead: grpc_session_fail_all and close). */
int grpc_session_recv(struct grpc_session *s, const uint8_t *data, size_t len);

/* Append every byte the session wants to send to out. Returns the number of
 * bytes appended, or -EPROTO/-ENOMEM/-E2BIG. */
int grpc_session_output(struct grpc_session *s, struct sbuf *out);

/* True while the session has frames to send. */
bool grpc_session_want_write(struct grpc_session *s);

/* True when the connection can carry no more new calls: GOAWAY received,
 * GOAWAY sent, or a fatal protocol error. */
bool grpc_session_closing(struct grpc_session *s);

/* Number of calls not yet completed. */
unsigned grpc_session_active(struct grpc_session *s);

/* Complete every open call with code and message (connection lost:
 * UNAVAILABLE; shutdown: CANCELLED). The session stays usable only for free. */
void grpc_session_fail_all(struct grpc_session *s, int code, const char *message);

/* grpc_session_cancel for every open call: each completes with code and
 * message and its RST_STREAM(CANCEL) is queued for grpc_session_output, so
 * the server hears of it before the connection closes. */
void grpc_session_cancel_all(struct grpc_session *s, int code, const char *message);

#endif
