/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * grpcsrv: the sans-IO gRPC unary server core (see grpcsrv.h). It drives
 * an nghttp2 server session purely in memory (nghttp2_session_mem_recv in,
 * nghttp2_session_mem_send out), as grpc.c does for the client, whose
 * framing and percent-coding helpers it shares. It must not know about
 * sockets, the event loop, threads, clocks or CSI.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "grpcsrv.h"
#include "macro.h"
#include "sbuf.h"

enum call_state {
	CALL_RECEIVING,		/* request still coming in */
	CALL_REJECTED,		/* answered by us while receiving: ignore the rest */
	CALL_DISPATCHED,	/* the owner holds it until grpc_srv_reply */
	CALL_ANSWERED,		/* the answer is queued or on the wire */
};

struct grpc_srv_call {
	struct grpc_srv *s;
	struct grpc_srv_call *prev, *next;
	int32_t stream_id;	/* 0 once the stream closed */
	enum call_state state;
	char *path;
	bool post, ct_ok, ct_seen;
	uint64_t timeout_ms;
	size_t hdr_bytes;
	struct sbuf body;	/* prefix + message as received */
	uint8_t *resp;		/* prefix + message being sent */
	size_t resp_len, resp_off;
	char status_msg[GRPC_MAX_STATUS_MSG];	/* encoded, for the trailers */
	int code;
};

struct grpc_srv {
	nghttp2_session *h2;
	grpc_srv_request_fn fn;
	void *userdata;
	void *owner;
	struct grpc_srv_call *calls;	/* every call not yet freed */
	unsigned pending;		/* dispatched, not yet answered */
	bool dead;			/* protocol error: flush GOAWAY only */
};

/* ---- calls ---- */

static void call_free(struct grpc_srv_call *c)
{
	struct grpc_srv *s = c->s;

	if (c->prev)
		c->prev->next = c->next;
	else
		s->calls = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c->path);
	sbuf_free(&c->body);
	free(c->resp);
	free(c);
}

static ssize_t read_response(nghttp2_session *h2, int32_t stream_id, uint8_t *buf, size_t length,
			     uint32_t *data_flags, nghttp2_data_source *source, void *ud)
{
	struct grpc_srv_call *c = source->ptr;
	size_t n = grpc_copy_out(buf, length, c->resp, c->resp_len, &c->resp_off);

	if (c->resp_off == c->resp_len) {
		const nghttp2_nv tr[] = {
			{ (uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1, NGHTTP2_NV_FLAG_NONE },
		};

		*data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
		if (nghttp2_submit_trailer(h2, stream_id, tr, ARRAY_SIZE(tr)) != 0)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	return (ssize_t)n;
}

#define NV(n, v) { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE }

/* Queue the answer on the wire: headers + message + trailers for OK, one
 * HEADERS frame with END_STREAM otherwise. */
static int call_send(struct grpc_srv_call *c, int code, const char *message,
		     const void *msg, size_t len)
{
	struct grpc_srv *s = c->s;
	char st[8];

	c->state = CALL_ANSWERED;
	if (code == GRPC_OK) {
		c->resp_len = len + 5;
		c->resp = grpc_frame(msg, len);
		if (!c->resp) {
			nghttp2_submit_rst_stream(s->h2, NGHTTP2_FLAG_NONE, c->stream_id, NGHTTP2_INTERNAL_ERROR);
			return -ENOMEM;
		}
		const nghttp2_nv hd[] = {
			NV(":status", "200"),
			NV("content-type", "application/grpc"),
		};
		nghttp2_data_provider dp = { .source.ptr = c, .read_callback = read_response };
		if (nghttp2_submit_response(s->h2, c->stream_id, hd, ARRAY_SIZE(hd), &dp) != 0) {
			nghttp2_submit_rst_stream(s->h2, NGHTTP2_FLAG_NONE, c->stream_id, NGHTTP2_INTERNAL_ERROR);
			return -ENOMEM;
		}
		return 0;
	}
	snprintf(st, sizeof(st), "%d", code);
	grpc_percent_encode(message ? message : "", message ? strlen(message) : 0,
			    c->status_msg, sizeof(c->status_msg));
	const nghttp2_nv hd[] = {
		NV(":status", "200"),
		NV("content-type", "application/grpc"),
		NV("grpc-status", st),
		NV("grpc-message", c->status_msg),
	};
	if (nghttp2_submit_response(s->h2, c->stream_id, hd, c->status_msg[0] ? 4 : 3, NULL) != 0) {
		nghttp2_submit_rst_stream(s->h2, NGHTTP2_FLAG_NONE, c->stream_id, NGHTTP2_INTERNAL_ERROR);
		return -ENOMEM;
	}
	return 0;
}

/* Answer a request we refuse ourselves (the owner never sees it). */
static void call_reject(struct grpc_srv_call *c, int code, const char *message)
{
	call_send(c, code, message, NULL, 0);
	c->state = CALL_REJECTED;
	sbuf_free(&c->body);
}

/* The request is complete: check it and hand it over. */
static void call_dispatch(struct grpc_srv_call *c)
{
	struct grpc_srv *s = c->s;
	const uint8_t *b = (const uint8_t *)c->body.buf;
	size_t n = c->body.len;
	char msg[128];

	if (!c->ct_seen || !c->ct_ok) {
		/* gRPC's answer to a non-gRPC request: 415, no grpc-status. */
		const nghttp2_nv hd[] = { NV(":status", "415") };

		c->state = CALL_REJECTED;
		nghttp2_submit_response(s->h2, c->stream_id, hd, ARRAY_SIZE(hd), NULL);
		return;
	}
	if (!c->post || !c->path || c->path[0] != '/') {
		call_reject(c, GRPC_INTERNAL, "request is not a POST with a :path");
		return;
	}
	if (n < 5) {
		call_reject(c, GRPC_INTERNAL, n ? "request message prefix truncated" : "request carried no message");
		return;
	}
	if (b[0] == 1) {
		call_reject(c, GRPC_UNIMPLEMENTED, "compressed requests are not supported");
		return;
	}
	if (b[0] != 0) {
		call_reject(c, GRPC_INTERNAL, "request message has an unknown flag");
		return;
	}
	uint32_t mlen = grpc_prefix_len(b);
	if ((size_t)mlen + 5 != n) {
		snprintf(msg, sizeof(msg), "unary request framing: prefix says %" PRIu32 " bytes, got %zu",
			 mlen, n - 5);
		call_reject(c, GRPC_INTERNAL, msg);
		return;
	}
	c->state = CALL_DISPATCHED;
	s->pending++;
	s->fn(s->userdata, c, c->path, b + 5, mlen, c->timeout_ms);
}

/* ---- nghttp2 callbacks ---- */

static struct grpc_srv_call *call_of(struct grpc_srv *s, int32_t stream_id)
{
	return nghttp2_session_get_stream_user_data(s->h2, stream_id);
}

static int on_begin_headers(nghttp2_session *h2, const nghttp2_frame *frame, void *ud)
{
	struct grpc_srv *s = ud;

	if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	struct grpc_srv_call *c = calloc(1, sizeof(*c));
	if (!c)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;	/* resets the stream */
	c->s = s;
	c->stream_id = frame->hd.stream_id;
	c->code = -1;
	sbuf_init(&c->body, GRPC_MAX_MESSAGE + 5);
	c->next = s->calls;
	if (s->calls)
		s->calls->prev = c;
	s->calls = c;
	nghttp2_session_set_stream_user_data(h2, c->stream_id, c);
	return 0;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
		     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
	struct grpc_srv *s = ud;
	struct grpc_srv_call *c;

	if (frame->hd.type != NGHTTP2_HEADERS)
		return 0;
	c = call_of(s, frame->hd.stream_id);
	if (!c || c->state != CALL_RECEIVING)
		return 0;
	/* RFC 7541's entry size: name + value + 32. */
	c->hdr_bytes += namelen + valuelen + 32;
	if (c->hdr_bytes > GRPC_MAX_HEADERS) {
		call_reject(c, GRPC_RESOURCE_EXHAUSTED, "request headers exceed 16 KiB");
		return 0;
	}
	if (frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;	/* trailers: nothing we use */
#define IS(lit) (namelen == sizeof(lit) - 1 && memcmp(name, lit, namelen) == 0)
	if (IS(":method")) {
		c->post = valuelen == 4 && memcmp(value, "POST", 4) == 0;
	} else if (IS(":path")) {
		free(c->path);
		c->path = strndup((const char *)value, valuelen);
		if (!c->path)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	} else if (IS("content-type")) {
		c->ct_seen = true;
		c->ct_ok = valuelen >= 16 && memcmp(value, "application/grpc", 16) == 0
			&& (valuelen == 16 || value[16] == '+' || value[16] == ';');
	} else if (IS("grpc-timeout")) {
		uint64_t ms;

		if (grpc_timeout_parse((const char *)value, valuelen, &ms) == 0)
			c->timeout_ms = ms ? ms : 1;
	} else if (IS("grpc-encoding")) {
		/* identity is the only encoding we accept; a compressed
		 * message is refused at dispatch by its flag. */
	}
#undef IS
	return 0;
}

static int on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t stream_id,
			 const uint8_t *data, size_t len, void *ud)
{
	struct grpc_srv *s = ud;
	struct grpc_srv_call *c = call_of(s, stream_id);

	if (!c || c->state != CALL_RECEIVING)
		return 0;
	if (grpc_body_add(&c->body, data, len) < 0)
		call_reject(c, GRPC_RESOURCE_EXHAUSTED, "request message exceeds 4 MiB");
	return 0;
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *frame, void *ud)
{
	struct grpc_srv *s = ud;

	if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
	    || !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	struct grpc_srv_call *c = call_of(s, frame->hd.stream_id);
	if (c && c->state == CALL_RECEIVING)
		call_dispatch(c);
	return 0;
}

static int on_stream_close(nghttp2_session *h2, int32_t stream_id, uint32_t error_code, void *ud)
{
	struct grpc_srv *s = ud;
	struct grpc_srv_call *c = call_of(s, stream_id);

	if (!c)
		return 0;
	nghttp2_session_set_stream_user_data(h2, stream_id, NULL);
	c->stream_id = 0;
	if (c->state == CALL_DISPATCHED)
		return 0;	/* the owner still holds it: freed at its reply */
	call_free(c);
	return 0;
}

/* ---- session ---- */

int grpc_srv_new(unsigned max_streams, grpc_srv_request_fn fn, void *userdata,
		 struct grpc_srv **ret_srv)
{
	nghttp2_session_callbacks *cbs = NULL;
	struct grpc_srv *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->fn = fn;
	s->userdata = userdata;
	if (nghttp2_session_callbacks_new(&cbs) != 0)
		goto fail;
	nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
	if (nghttp2_session_server_new(&s->h2, cbs, s) != 0)
		goto fail;
	nghttp2_session_callbacks_del(cbs);
	cbs = NULL;
	if (grpc_h2_settings(s->h2, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, max_streams ? max_streams : 128) < 0)
		goto fail;
	*ret_srv = s;
	return 0;

fail:
	nghttp2_session_callbacks_del(cbs);
	if (s->h2)
		nghttp2_session_del(s->h2);
	free(s);
	return -ENOMEM;
}

void grpc_srv_free(struct grpc_srv *s)
{
	if (!s)
		return;
	/* nghttp2_session_del runs no stream-close callbacks: free by hand. */
	nghttp2_session_del(s->h2);
	while (s->calls)
		call_free(s->calls);
	free(s);
}

int grpc_srv_recv(struct grpc_srv *s, const uint8_t *data, size_t len)
{
	if (s->dead)
		return -EPROTO;
	ssize_t n = nghttp2_session_mem_recv(s->h2, data, len);
	if (n < 0) {
		s->dead = true;
		/* Tell the client why before closing, if nghttp2 has not. */
		nghttp2_session_terminate_session(s->h2, NGHTTP2_PROTOCOL_ERROR);
		return -EPROTO;
	}
	return 0;
}

int grpc_srv_output(struct grpc_srv *s, struct sbuf *out)
{
	int r = grpc_h2_send(s->h2, out, &s->dead);

	/* A session nghttp2 gave up on has nothing more to say. */
	return r == -EPROTO ? 0 : r;
}

bool grpc_srv_want_write(struct grpc_srv *s)
{
	return nghttp2_session_want_write(s->h2) != 0;
}

bool grpc_srv_done(struct grpc_srv *s)
{
	return !nghttp2_session_want_read(s->h2) && !nghttp2_session_want_write(s->h2);
}

unsigned grpc_srv_pending(struct grpc_srv *s)
{
	return s->pending;
}

void grpc_srv_shutdown(struct grpc_srv *s)
{
	nghttp2_session_terminate_session(s->h2, NGHTTP2_NO_ERROR);
}

int grpc_srv_reply(struct grpc_srv *s, struct grpc_srv_call *c, int code,
		   const char *message, const void *msg, size_t len)
{
	int r = 0;

	if (c->state != CALL_DISPATCHED)
		return -EINVAL;	/* not ours to answer: a bug of the caller */
	s->pending--;
	if (c->stream_id == 0 || s->dead) {
		c->state = CALL_ANSWERED;
		call_free(c);
		return -ENOTCONN;
	}
	if (code == GRPC_OK && len > GRPC_MAX_MESSAGE) {
		code = GRPC_RESOURCE_EXHAUSTED;
		message = "response message exceeds 4 MiB";
		r = -E2BIG;
	}
	int q = call_send(c, code, message, msg, len);
	return q < 0 ? q : r;
}

struct grpc_srv *grpc_srv_call_session(struct grpc_srv_call *call)
{
	return call->s;
}

void grpc_srv_set_owner(struct grpc_srv *s, void *owner)
{
	s->owner = owner;
}

void *grpc_srv_owner(struct grpc_srv *s)
{
	return s->owner;
}
