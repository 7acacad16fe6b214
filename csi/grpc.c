/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * grpc: the sans-IO gRPC unary client core (see grpc.h). It drives an
 * nghttp2 client session purely in memory, as curl's lib/http2.c does:
 * nghttp2_session_mem_recv in, nghttp2_session_mem_send out. It also owns the
 * wire helpers the server core (grpcsrv.c) shares: message framing,
 * grpc-message percent-coding, grpc-timeout values, draining a session into
 * an sbuf. It must not know about sockets, the event loop, clocks or CSI.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "grpc.h"
#include "macro.h"
#include "sbuf.h"

struct grpc_call {
	struct grpc_session *s;
	struct grpc_call *prev, *next;
	int32_t stream_id;
	bool done;		/* completion delivered */
	grpc_done_fn done_fn;
	void *userdata;
	uint8_t *req;		/* prefix + message */
	size_t req_len, req_off;
	struct sbuf body;	/* prefix + message as received */
	size_t hdr_bytes;
	int http_status;
	int grpc_status;	/* -1 until seen */
	bool ct_seen, ct_ok;
	char *grpc_message;	/* decoded, or NULL */
};

struct grpc_session {
	nghttp2_session *h2;
	char *authority;
	struct grpc_call *calls;	/* every call whose stream is not closed */
	unsigned active;		/* calls not yet done */
	bool goaway;			/* received GOAWAY */
	bool dead;			/* fatal protocol error */
};

static const char *const code_names[_GRPC_CODE_MAX] = {
	[GRPC_OK] = "OK",
	[GRPC_CANCELLED] = "CANCELLED",
	[GRPC_UNKNOWN] = "UNKNOWN",
	[GRPC_INVALID_ARGUMENT] = "INVALID_ARGUMENT",
	[GRPC_DEADLINE_EXCEEDED] = "DEADLINE_EXCEEDED",
	[GRPC_NOT_FOUND] = "NOT_FOUND",
	[GRPC_ALREADY_EXISTS] = "ALREADY_EXISTS",
	[GRPC_PERMISSION_DENIED] = "PERMISSION_DENIED",
	[GRPC_RESOURCE_EXHAUSTED] = "RESOURCE_EXHAUSTED",
	[GRPC_FAILED_PRECONDITION] = "FAILED_PRECONDITION",
	[GRPC_ABORTED] = "ABORTED",
	[GRPC_OUT_OF_RANGE] = "OUT_OF_RANGE",
	[GRPC_UNIMPLEMENTED] = "UNIMPLEMENTED",
	[GRPC_INTERNAL] = "INTERNAL",
	[GRPC_UNAVAILABLE] = "UNAVAILABLE",
	[GRPC_DATA_LOSS] = "DATA_LOSS",
	[GRPC_UNAUTHENTICATED] = "UNAUTHENTICATED",
};

const char *grpc_code_to_string(int code)
{
	if (code < 0 || code >= _GRPC_CODE_MAX)
		return "UNKNOWN";
	return code_names[code];
}

int grpc_code_from_string(const char *s)
{
	for (int i = 0; i < _GRPC_CODE_MAX; i++)
		if (strcmp(s, code_names[i]) == 0)
			return i;
	return -EINVAL;
}

int grpc_code_to_errno(int code)
{
	switch (code) {
	case GRPC_OK:			return 0;
	case GRPC_NOT_FOUND:		return ENOENT;
	case GRPC_ALREADY_EXISTS:	return EEXIST;
	case GRPC_INVALID_ARGUMENT:	return EINVAL;
	case GRPC_FAILED_PRECONDITION:	return EBUSY;
	case GRPC_ABORTED:		return EBUSY;
	case GRPC_DEADLINE_EXCEEDED:	return ETIMEDOUT;
	case GRPC_UNAVAILABLE:		return EAGAIN;
	case GRPC_RESOURCE_EXHAUSTED:	return ENOSPC;
	case GRPC_PERMISSION_DENIED:	return EACCES;
	case GRPC_UNAUTHENTICATED:	return EACCES;	/* the secrets sent are not valid */
	case GRPC_UNIMPLEMENTED:	return EOPNOTSUPP;
	case GRPC_CANCELLED:		return ECANCELED;
	default:			return EIO;
	}
}

int grpc_code_from_http(int http_status)
{
	switch (http_status) {
	case 400: return GRPC_INTERNAL;
	case 401: return GRPC_UNAUTHENTICATED;
	case 403: return GRPC_PERMISSION_DENIED;
	case 404: return GRPC_UNIMPLEMENTED;
	case 429: case 502: case 503: case 504: return GRPC_UNAVAILABLE;
	default: return GRPC_UNKNOWN;
	}
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

size_t grpc_percent_decode(const char *in, size_t inlen, char *out, size_t outsz)
{
	size_t o = 0;

	if (!outsz)
		return 0;
	for (size_t i = 0; i < inlen && o + 1 < outsz; i++) {
		int hi, lo;

		if (in[i] == '%' && i + 2 < inlen
		    && (hi = hexval(in[i + 1])) >= 0 && (lo = hexval(in[i + 2])) >= 0) {
			out[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else
			out[o++] = in[i];
	}
	out[o] = '\0';
	return o;
}

size_t grpc_percent_encode(const char *in, size_t inlen, char *out, size_t outsz)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	if (!outsz)
		return 0;
	for (size_t i = 0; i < inlen; i++) {
		unsigned char c = (unsigned char)in[i];

		if (c >= 0x20 && c <= 0x7e && c != '%') {
			if (o + 1 >= outsz)
				break;
			out[o++] = (char)c;
		} else {
			if (o + 3 >= outsz)
				break;
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = '\0';
	return o;
}

int grpc_timeout_parse(const char *v, size_t len, uint64_t *ret_ms)
{
	uint64_t n = 0;

	if (len < 2 || len > 9)
		return -EINVAL;
	for (size_t i = 0; i + 1 < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -EINVAL;
		n = n * 10 + (uint64_t)(v[i] - '0');
	}
	switch (v[len - 1]) {
	case 'H': n *= 3600000u; break;
	case 'M': n *= 60000u; break;
	case 'S': n *= 1000u; break;
	case 'm': break;
	case 'u': n = (n + 999) / 1000; break;
	case 'n': n = (n + 999999) / 1000000; break;
	default: return -EINVAL;
	}
	*ret_ms = n;
	return 0;
}

void grpc_timeout_format(uint64_t ms, char out[16])
{
	/* At most 8 digits (gRPC over HTTP/2 spec). */
	if (ms < 100000000u)
		snprintf(out, 16, "%" PRIu64 "m", ms);
	else if (ms / 1000 < 100000000u)
		snprintf(out, 16, "%" PRIu64 "S", ms / 1000);
	else if (ms / 60000 < 100000000u)
		snprintf(out, 16, "%" PRIu64 "M", ms / 60000);
	else
		snprintf(out, 16, "99999999H");
}

/* ---- framing, shared with the server core (grpcsrv.c) ---- */

uint32_t grpc_prefix_len(const uint8_t *b)
{
	return (uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | b[4];
}

uint8_t *grpc_frame(const void *msg, size_t len)
{
	uint8_t *f = malloc(len + 5);

	if (!f)
		return NULL;
	f[0] = 0;
	f[1] = (uint8_t)(len >> 24);
	f[2] = (uint8_t)(len >> 16);
	f[3] = (uint8_t)(len >> 8);
	f[4] = (uint8_t)len;
	if (len)
		memcpy(f + 5, msg, len);
	return f;
}

int grpc_body_add(struct sbuf *body, const uint8_t *data, size_t len)
{
	size_t before = body->len;

	if (sbuf_add(body, data, len) < 0)
		return -EMSGSIZE;
	/* Judge the declared length as soon as the prefix is complete. */
	if (before < 5 && body->len >= 5 && grpc_prefix_len((const uint8_t *)body->buf) > GRPC_MAX_MESSAGE)
		return -EMSGSIZE;
	return 0;
}

size_t grpc_copy_out(uint8_t *buf, size_t length, const uint8_t *src, size_t src_len, size_t *off)
{
	size_t n = src_len - *off;

	if (n > length)
		n = length;
	memcpy(buf, src + *off, n);
	*off += n;
	return n;
}

int grpc_h2_settings(struct nghttp2_session *h2, int32_t first_id, uint32_t first_value)
{
	const nghttp2_settings_entry iv[] = {
		{ first_id, first_value },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1u << 20 },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, GRPC_MAX_HEADERS },
	};

	if (nghttp2_submit_settings(h2, NGHTTP2_FLAG_NONE, iv, ARRAY_SIZE(iv)) != 0)
		return -ENOMEM;
	/* A connection-level window big enough for a few full messages. */
	if (nghttp2_session_set_local_window_size(h2, NGHTTP2_FLAG_NONE, 0, 16u << 20) != 0)
		return -ENOMEM;
	return 0;
}

int grpc_h2_send(struct nghttp2_session *h2, struct sbuf *out, bool *dead)
{
	int total = 0;

	for (;;) {
		const uint8_t *p;
		ssize_t n = nghttp2_session_mem_send(h2, &p);

		if (n < 0) {
			*dead = true;
			return n == NGHTTP2_ERR_NOMEM ? -ENOMEM : -EPROTO;
		}
		if (n == 0)
			return total;
		int r = sbuf_add(out, p, (size_t)n);
		if (r < 0)
			return r;
		total += (int)n;
	}
}

/* ---- calls ---- */

static void call_free(struct grpc_call *c)
{
	if (!c)
		return;
	free(c->req);
	sbuf_free(&c->body);
	free(c->grpc_message);
	free(c);
}

static void call_unlink(struct grpc_session *s, struct grpc_call *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		s->calls = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
}

static void call_complete(struct grpc_call *c, int code, const char *message,
			  const uint8_t *body, size_t body_len)
{
	if (c->done)
		return;
	c->done = true;
	c->s->active--;
	struct grpc_reply r = {
		.code = code,
		.message = message ? message : "",
		.body = code == GRPC_OK ? body : NULL,
		.body_len = code == GRPC_OK ? body_len : 0,
		.http_status = c->http_status,
	};
	c->done_fn(c->userdata, &r);
}

static struct grpc_call *call_by_stream(struct grpc_session *s, int32_t stream_id)
{
	struct grpc_call *c = nghttp2_session_get_stream_user_data(s->h2, stream_id);

	if (c)
		return c;
	for (c = s->calls; c; c = c->next)
		if (c->stream_id == stream_id)
			return c;
	return NULL;
}

/* Reset a stream we no longer want and complete its call. */
static void call_abort(struct grpc_call *c, int code, const char *message)
{
	if (c->stream_id > 0)
		nghttp2_submit_rst_stream(c->s->h2, NGHTTP2_FLAG_NONE, c->stream_id, NGHTTP2_CANCEL);
	call_complete(c, code, message, NULL, 0);
}

static int code_from_rst(uint32_t error_code)
{
	switch (error_code) {
	case NGHTTP2_REFUSED_STREAM:	return GRPC_UNAVAILABLE;
	case NGHTTP2_CANCEL:		return GRPC_CANCELLED;
	case NGHTTP2_ENHANCE_YOUR_CALM:	return GRPC_RESOURCE_EXHAUSTED;
	case NGHTTP2_INADEQUATE_SECURITY: return GRPC_PERMISSION_DENIED;
	default:			return GRPC_INTERNAL;
	}
}

/* The stream is over: turn what we saw into exactly one outcome. */
static void call_finish(struct grpc_call *c, uint32_t error_code)
{
	char msg[160];

	if (c->done)
		return;
	if (c->grpc_status >= 0) {
		int code = c->grpc_status < _GRPC_CODE_MAX ? c->grpc_status : GRPC_UNKNOWN;

		if (code != GRPC_OK) {
			call_complete(c, code, c->grpc_message, NULL, 0);
			return;
		}
		const uint8_t *b = (const uint8_t *)c->body.buf;
		size_t n = c->body.len;
		if (n < 5) {
			call_complete(c, GRPC_INTERNAL, "OK reply carried no message", NULL, 0);
			return;
		}
		uint32_t mlen = grpc_prefix_len(b);
		if (b[0] != 0) {
			call_complete(c, GRPC_INTERNAL, "compressed reply but no compression was negotiated", NULL, 0);
			return;
		}
		if ((size_t)mlen + 5 != n) {
			snprintf(msg, sizeof(msg), "reply framing: prefix says %" PRIu32 " bytes, got %zu", mlen, n - 5);
			call_complete(c, GRPC_INTERNAL, msg, NULL, 0);
			return;
		}
		call_complete(c, GRPC_OK, c->grpc_message, b + 5, mlen);
		return;
	}
	if (error_code != NGHTTP2_NO_ERROR) {
		snprintf(msg, sizeof(msg), "stream reset by peer: %s", nghttp2_http2_strerror(error_code));
		call_complete(c, code_from_rst(error_code), msg, NULL, 0);
		return;
	}
	if (c->http_status && c->http_status != 200) {
		snprintf(msg, sizeof(msg), "HTTP status %d without grpc-status", c->http_status);
		call_complete(c, grpc_code_from_http(c->http_status), msg, NULL, 0);
		return;
	}
	if (c->ct_seen && !c->ct_ok) {
		call_complete(c, GRPC_UNKNOWN, "reply content-type is not application/grpc", NULL, 0);
		return;
	}
	call_complete(c, GRPC_INTERNAL, "reply ended without grpc-status", NULL, 0);
}

/* ---- nghttp2 callbacks ---- */

static int on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
		     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
	struct grpc_session *s = ud;
	struct grpc_call *c;

	if (frame->hd.type != NGHTTP2_HEADERS)
		return 0;
	c = call_by_stream(s, frame->hd.stream_id);
	if (!c || c->done)
		return 0;
	/* RFC 7541's entry size: name + value + 32. */
	c->hdr_bytes += namelen + valuelen + 32;
	if (c->hdr_bytes > GRPC_MAX_HEADERS) {
		call_abort(c, GRPC_RESOURCE_EXHAUSTED, "reply headers exceed 16 KiB");
		return 0;
	}
#define IS(lit) (namelen == sizeof(lit) - 1 && memcmp(name, lit, namelen) == 0)
	if (IS(":status")) {
		int v = 0;

		for (size_t i = 0; i < valuelen && i < 4; i++)
			v = v * 10 + (value[i] >= '0' && value[i] <= '9' ? value[i] - '0' : 0);
		c->http_status = v;
	} else if (IS("content-type")) {
		c->ct_seen = true;
		c->ct_ok = valuelen >= 16 && memcmp(value, "application/grpc", 16) == 0
			&& (valuelen == 16 || value[16] == '+' || value[16] == ';');
	} else if (IS("grpc-status")) {
		int v = 0;
		bool ok = valuelen > 0 && valuelen <= 3;

		for (size_t i = 0; ok && i < valuelen; i++) {
			if (value[i] < '0' || value[i] > '9')
				ok = false;
			else
				v = v * 10 + (value[i] - '0');
		}
		c->grpc_status = ok ? v : GRPC_UNKNOWN;
	} else if (IS("grpc-message")) {
		size_t cap = valuelen + 1 < GRPC_MAX_STATUS_MSG ? valuelen + 1 : GRPC_MAX_STATUS_MSG;
		char *m = malloc(cap);

		if (!m) {
			call_abort(c, GRPC_RESOURCE_EXHAUSTED, "out of memory decoding grpc-message");
			return 0;
		}
		grpc_percent_decode((const char *)value, valuelen, m, cap);
		free(c->grpc_message);
		c->grpc_message = m;
	}
#undef IS
	return 0;
}

static int on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t stream_id,
			 const uint8_t *data, size_t len, void *ud)
{
	struct grpc_session *s = ud;
	struct grpc_call *c = call_by_stream(s, stream_id);

	if (!c || c->done)
		return 0;
	if (grpc_body_add(&c->body, data, len) < 0)
		call_abort(c, GRPC_RESOURCE_EXHAUSTED, "reply message exceeds 4 MiB");
	return 0;
}

static int on_stream_close(nghttp2_session *h2, int32_t stream_id, uint32_t error_code, void *ud)
{
	struct grpc_session *s = ud;
	struct grpc_call *c = call_by_stream(s, stream_id);

	if (!c)
		return 0;
	call_finish(c, error_code);
	call_unlink(s, c);
	call_free(c);
	return 0;
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *frame, void *ud)
{
	struct grpc_session *s = ud;

	if (frame->hd.type == NGHTTP2_GOAWAY)
		s->goaway = true;
	return 0;
}

static int on_frame_not_send(nghttp2_session *h2, const nghttp2_frame *frame, int lib_error, void *ud)
{
	struct grpc_session *s = ud;
	char msg[128];

	if (frame->hd.type != NGHTTP2_HEADERS)
		return 0;
	struct grpc_call *c = call_by_stream(s, frame->hd.stream_id);
	if (!c)
		return 0;
	snprintf(msg, sizeof(msg), "request not sent: %s", nghttp2_strerror(lib_error));
	call_complete(c, GRPC_UNAVAILABLE, msg, NULL, 0);
	return 0;
}

static ssize_t read_request(nghttp2_session *h2, int32_t stream_id, uint8_t *buf, size_t length,
			    uint32_t *data_flags, nghttp2_data_source *source, void *ud)
{
	struct grpc_call *c = source->ptr;
	size_t n = grpc_copy_out(buf, length, c->req, c->req_len, &c->req_off);

	if (c->req_off == c->req_len)
		*data_flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

/* ---- session ---- */

int grpc_session_new(const char *authority, struct grpc_session **ret_session)
{
	nghttp2_session_callbacks *cbs = NULL;
	nghttp2_option *opt = NULL;
	struct grpc_session *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->authority = strdup(authority ? authority : "localhost");
	if (!s->authority)
		goto fail;
	if (nghttp2_session_callbacks_new(&cbs) != 0)
		goto fail;
	nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
	nghttp2_session_callbacks_set_on_frame_not_send_callback(cbs, on_frame_not_send);
	if (nghttp2_option_new(&opt) != 0)
		goto fail;
	nghttp2_option_set_max_reserved_remote_streams(opt, 0);
	if (nghttp2_session_client_new2(&s->h2, cbs, s, opt) != 0)
		goto fail;
	nghttp2_session_callbacks_del(cbs);
	cbs = NULL;
	nghttp2_option_del(opt);
	opt = NULL;

	/* SETTINGS must be the first frame after the preface (grpc-go closes
	 * the connection otherwise). */
	if (grpc_h2_settings(s->h2, NGHTTP2_SETTINGS_ENABLE_PUSH, 0) < 0)
		goto fail;
	*ret_session = s;
	return 0;

fail:
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cbs);
	if (s->h2)
		nghttp2_session_del(s->h2);
	free(s->authority);
	free(s);
	return -ENOMEM;
}

void grpc_session_fail_all(struct grpc_session *s, int code, const char *message)
{
	/* A completion may submit or cancel other calls: restart the scan. */
	s->dead = true;
	for (;;) {
		struct grpc_call *c;

		for (c = s->calls; c && c->done; c = c->next)
			;
		if (!c)
			break;
		call_complete(c, code, message, NULL, 0);
	}
}

void grpc_session_cancel_all(struct grpc_session *s, int code, const char *message)
{
	/* A completion may submit or cancel other calls: restart the scan. */
	for (;;) {
		struct grpc_call *c;

		for (c = s->calls; c && c->done; c = c->next)
			;
		if (!c)
			break;
		call_abort(c, code, message);
	}
}

void grpc_session_free(struct grpc_session *s)
{
	if (!s)
		return;
	grpc_session_fail_all(s, GRPC_CANCELLED, "session closed");
	nghttp2_session_del(s->h2);
	while (s->calls) {
		struct grpc_call *c = s->calls;

		call_unlink(s, c);
		call_free(c);
	}
	free(s->authority);
	free(s);
}

int grpc_session_submit(struct grpc_session *s, const char *path, const void *msg, size_t len,
			uint64_t timeout_ms, grpc_done_fn done, void *userdata,
			struct grpc_call **ret_call)
{
	char tmo[16];

	if (len > GRPC_MAX_MESSAGE)
		return -E2BIG;
	if (grpc_session_closing(s))
		return -ENOTCONN;
	struct grpc_call *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->s = s;
	c->done_fn = done;
	c->userdata = userdata;
	c->grpc_status = -1;
	sbuf_init(&c->body, GRPC_MAX_MESSAGE + 5);
	/* The 5-byte prefix goes out even for an empty message: a request
	 * whose HEADERS carry END_STREAM with no DATA hangs real servers. */
	c->req_len = len + 5;
	c->req = grpc_frame(msg, len);
	if (!c->req) {
		call_free(c);
		return -ENOMEM;
	}

#define NV(n, v) { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE }
	nghttp2_nv nva[8] = {
		NV(":method", "POST"),
		NV(":scheme", "http"),
		NV(":path", path),
		NV(":authority", s->authority),
		NV("content-type", "application/grpc"),
		NV("te", "trailers"),
		NV("user-agent", "nodefs-grpc/0.1"),
	};
	size_t nvlen = 7;
	if (timeout_ms) {
		grpc_timeout_format(timeout_ms, tmo);
		nva[nvlen++] = (nghttp2_nv)NV("grpc-timeout", tmo);
	}
#undef NV
	nghttp2_data_provider dp = { .source.ptr = c, .read_callback = read_request };
	int32_t id = nghttp2_submit_request(s->h2, NULL, nva, nvlen, &dp, c);
	if (id < 0) {
		call_free(c);
		return id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE ? -ENOTCONN : -ENOMEM;
	}
	c->stream_id = id;
	c->next = s->calls;
	if (s->calls)
		s->calls->prev = c;
	s->calls = c;
	s->active++;
	if (ret_call)
		*ret_call = c;
	return 0;
}

void grpc_session_cancel(struct grpc_session *s, struct grpc_call *call, int code, const char *message)
{
	if (!call || call->done)
		return;
	call_abort(call, code, message);
}

int grpc_session_recv(struct grpc_session *s, const uint8_t *data, size_t len)
{
	if (s->dead)
		return -EPROTO;
	ssize_t n = nghttp2_session_mem_recv(s->h2, data, len);
	if (n < 0) {
		s->dead = true;
		return -EPROTO;
	}
	return 0;
}

int grpc_session_output(struct grpc_session *s, struct sbuf *out)
{
	if (s->dead)
		return 0;
	return grpc_h2_send(s->h2, out, &s->dead);
}

bool grpc_session_want_write(struct grpc_session *s)
{
	return !s->dead && nghttp2_session_want_write(s->h2);
}

bool grpc_session_closing(struct grpc_session *s)
{
	return s->dead || s->goaway
		|| (!nghttp2_session_want_read(s->h2) && !nghttp2_session_want_write(s->h2));
}

unsigned grpc_session_active(struct grpc_session *s)
{
	return s->active;
}
