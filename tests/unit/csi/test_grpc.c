/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The sans-IO gRPC core against scripted server bytes. The bytes come from a
 * real nghttp2 server session in this process (so frames, HPACK and flow
 * control are genuine), and are fed to the client whole, one byte at a time
 * or in odd chunks. Covers request framing and headers, split frames,
 * trailers-only replies, missing grpc-status, percent-encoded messages,
 * RST_STREAM, GOAWAY, PING, oversize messages and headers, cancellation, and
 * that every completion runs exactly once.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <nghttp2/nghttp2.h>

#include "grpc.h"
#include "sbuf.h"

/* ---- a scripted server ---- */

struct srv_stream {
	int32_t id;
	char path[128], te[32], ctype[64], timeout[32], method[16], scheme[16];
	uint8_t body[64];
	size_t body_len;
	bool end_stream;
	uint32_t rst_code;
	bool rst;
};

struct srv {
	nghttp2_session *h2;
	struct srv_stream st[32];
	nghttp2_nv trl[2];
	size_t ntrl;
	int nst;
	bool got_ping_ack;
	/* Response body for the data provider. */
	const uint8_t *resp;
	size_t resp_len, resp_off;
};

static struct srv_stream *srv_stream(struct srv *s, int32_t id)
{
	for (int i = 0; i < s->nst; i++)
		if (s->st[i].id == id)
			return &s->st[i];
	cr_assert_lt(s->nst, 32);
	s->st[s->nst].id = id;
	return &s->st[s->nst++];
}

static int srv_on_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *n, size_t nl,
			 const uint8_t *v, size_t vl, uint8_t flags, void *ud)
{
	struct srv_stream *st = srv_stream(ud, f->hd.stream_id);
	char *dst = NULL;
	size_t cap = 0;

#define H(lit, field) if (nl == sizeof(lit) - 1 && !memcmp(n, lit, nl)) { dst = st->field; cap = sizeof(st->field); }
	H(":path", path) H("te", te) H("content-type", ctype) H("grpc-timeout", timeout)
	H(":method", method) H(":scheme", scheme)
#undef H
	if (dst)
		snprintf(dst, cap, "%.*s", (int)vl, (const char *)v);
	return 0;
}

static int srv_on_data(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *d, size_t len, void *ud)
{
	struct srv_stream *st = srv_stream(ud, id);

	cr_assert_leq(st->body_len + len, sizeof(st->body));
	memcpy(st->body + st->body_len, d, len);
	st->body_len += len;
	return 0;
}

static int srv_on_frame(nghttp2_session *h2, const nghttp2_frame *f, void *ud)
{
	struct srv *s = ud;

	if (f->hd.type == NGHTTP2_PING && (f->hd.flags & NGHTTP2_FLAG_ACK))
		s->got_ping_ack = true;
	if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		srv_stream(s, f->hd.stream_id)->end_stream = true;
	if (f->hd.type == NGHTTP2_RST_STREAM) {
		struct srv_stream *st = srv_stream(s, f->hd.stream_id);
		st->rst = true;
		st->rst_code = f->rst_stream.error_code;
	}
	return 0;
}

static void srv_init(struct srv *s)
{
	nghttp2_session_callbacks *cbs;

	memset(s, 0, sizeof(*s));
	cr_assert(nghttp2_session_callbacks_new(&cbs) == 0);
	nghttp2_session_callbacks_set_on_header_callback(cbs, srv_on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, srv_on_data);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, srv_on_frame);
	cr_assert(nghttp2_session_server_new(&s->h2, cbs, s) == 0);
	nghttp2_session_callbacks_del(cbs);
	nghttp2_settings_entry iv[] = { { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100 } };
	cr_assert(nghttp2_submit_settings(s->h2, NGHTTP2_FLAG_NONE, iv, 1) == 0);
}

static void srv_free(struct srv *s)
{
	nghttp2_session_del(s->h2);
}

/* Client -> server: everything the client has to say. */
static void to_server(struct grpc_session *c, struct srv *s)
{
	struct sbuf out = SBUF_INIT(0);

	cr_assert_geq(grpc_session_output(c, &out), 0);
	if (out.len)
		cr_assert_eq(nghttp2_session_mem_recv(s->h2, (uint8_t *)out.buf, out.len), (ssize_t)out.len);
	sbuf_free(&out);
}

/* Server -> client, in chunks of `chunk` bytes (0 = all at once). */
static int to_client(struct srv *s, struct grpc_session *c, size_t chunk)
{
	struct sbuf in = SBUF_INIT(0);
	const uint8_t *p;
	ssize_t n;
	int r = 0;

	while ((n = nghttp2_session_mem_send(s->h2, &p)) > 0)
		cr_assert(sbuf_add(&in, p, (size_t)n) == 0);
	for (size_t off = 0; off < in.len && r == 0;) {
		size_t k = chunk && chunk < in.len - off ? chunk : in.len - off;

		r = grpc_session_recv(c, (uint8_t *)in.buf + off, k);
		off += k;
	}
	sbuf_free(&in);
	return r;
}

static ssize_t srv_read(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
			nghttp2_data_source *src, void *ud)
{
	struct srv *s = ud;
	size_t n = s->resp_len - s->resp_off;

	if (n > len)
		n = len;
	memcpy(buf, s->resp + s->resp_off, n);
	s->resp_off += n;
	if (s->resp_off == s->resp_len) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		/* Trailers must be submitted from here, or they overtake DATA. */
		if (s->ntrl) {
			*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
			cr_assert(nghttp2_submit_trailer(h2, id, s->trl, s->ntrl) == 0);
			s->ntrl = 0;
		}
	}
	return (ssize_t)n;
}

#define NV(n, v) { (uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE }

/* A normal reply: headers, DATA (prefix + msg), trailers with status. */
static void srv_reply(struct srv *s, int32_t id, const uint8_t *framed, size_t len,
		      const char *status, const char *message)
{
	nghttp2_nv hdr[] = { NV(":status", "200"), NV("content-type", "application/grpc") };
	s->trl[0] = (nghttp2_nv)NV("grpc-status", status);
	s->ntrl = 1;
	if (message)
		s->trl[s->ntrl++] = (nghttp2_nv)NV("grpc-message", message);
	s->resp = framed;
	s->resp_len = len;
	s->resp_off = 0;
	nghttp2_data_provider dp = { .read_callback = srv_read };
	cr_assert(nghttp2_submit_response(s->h2, id, hdr, 2, &dp) == 0);
}

/* A trailers-only reply: one HEADERS frame with END_STREAM. */
static void srv_trailers_only(struct srv *s, int32_t id, const nghttp2_nv *nv, size_t n)
{
	cr_assert(nghttp2_submit_response(s->h2, id, nv, n, NULL) == 0);
}

/* ---- completions ---- */

struct done {
	int calls;
	int code;
	char message[256];
	uint8_t body[64];
	size_t body_len;
	int http_status;
};

static void on_done(void *ud, const struct grpc_reply *r)
{
	struct done *d = ud;

	d->calls++;
	d->code = r->code;
	d->http_status = r->http_status;
	snprintf(d->message, sizeof(d->message), "%s", r->message);
	cr_assert_not_null(r->message);
	d->body_len = r->body_len < sizeof(d->body) ? r->body_len : sizeof(d->body);
	if (r->body)
		memcpy(d->body, r->body, d->body_len);
}

static struct grpc_session *client;
static struct srv server;

static void setup(void)
{
	cr_assert(grpc_session_new(NULL, &client) == 0);
	srv_init(&server);
}

static void teardown(void)
{
	grpc_session_free(client);
	srv_free(&server);
}

TestSuite(grpc, .init = setup, .fini = teardown);

static const uint8_t reply_msg[] = { 0, 0, 0, 0, 4, 0x0a, 0x02, 'o', 'k' };

Test(grpc, request_framing_and_headers)
{
	static struct done d;	/* outlives the test: teardown cancels what is pending */
	d = (struct done){ 0 };

	cr_assert(grpc_session_submit(client, "/csi.v1.Identity/Probe", NULL, 0, 1500, on_done, &d, NULL) == 0);
	to_server(client, &server);
	cr_assert_eq(server.nst, 1);
	struct srv_stream *st = &server.st[0];
	cr_assert_eq(st->id, 1);
	cr_assert_str_eq(st->method, "POST");
	cr_assert_str_eq(st->scheme, "http");
	cr_assert_str_eq(st->path, "/csi.v1.Identity/Probe");
	cr_assert_str_eq(st->ctype, "application/grpc");
	cr_assert_str_eq(st->te, "trailers");
	cr_assert_str_eq(st->timeout, "1500m");
	/* An empty message still goes out as a 5-byte prefix, then END_STREAM. */
	cr_assert_eq(st->body_len, 5);
	cr_assert(!memcmp(st->body, "\0\0\0\0\0", 5));
	cr_assert(st->end_stream);
	cr_assert_eq(d.calls, 0);
}

Test(grpc, request_message_prefixed)
{
	static struct done d;	/* outlives the test: teardown cancels what is pending */
	d = (struct done){ 0 };
	const uint8_t msg[] = { 0x0a, 0x03, 'a', 'b', 'c' };

	cr_assert(grpc_session_submit(client, "/x/Y", msg, sizeof(msg), 0, on_done, &d, NULL) == 0);
	to_server(client, &server);
	struct srv_stream *st = &server.st[0];
	cr_assert_eq(st->body_len, 10);
	cr_assert(!memcmp(st->body, "\0\0\0\0\5", 5));
	cr_assert(!memcmp(st->body + 5, msg, 5));
	cr_assert_str_eq(st->timeout, "");
}

static void ok_reply_in_chunks(size_t chunk)
{
	static struct done d;	/* outlives the test: teardown cancels what is pending */
	d = (struct done){ 0 };

	cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 0, on_done, &d, NULL) == 0);
	to_server(client, &server);
	srv_reply(&server, 1, reply_msg, sizeof(reply_msg), "0", NULL);
	cr_assert(to_client(&server, client, chunk) == 0);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.code, GRPC_OK);
	cr_assert_eq(d.http_status, 200);
	cr_assert_eq(d.body_len, 4);
	cr_assert(!memcmp(d.body, "\x0a\x02ok", 4));
	cr_assert_eq(grpc_session_active(client), 0);
}

Test(grpc, ok_reply_whole) { ok_reply_in_chunks(0); }
Test(grpc, ok_reply_split_every_byte) { ok_reply_in_chunks(1); }
Test(grpc, ok_reply_split_odd_chunks) { ok_reply_in_chunks(7); }

Test(grpc, ok_reply_empty_message)
{
	static struct done d;	/* outlives the test: teardown cancels what is pending */
	d = (struct done){ 0 };
	static const uint8_t empty[] = { 0, 0, 0, 0, 0 };

	cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 0, on_done, &d, NULL) == 0);
	to_server(client, &server);
	srv_reply(&server, 1, empty, 5, "0", NULL);
	cr_assert(to_client(&server, client, 3) == 0);
	cr_assert_eq(d.code, GRPC_OK);
	cr_assert_eq(d.body_len, 0);
}

Test(grpc, trailers_only_with_percent_encoded_message)
{
	static struct done d;	/* outlives the test: teardown cancels what is pending */
	d = (struct done){ 0 };
	nghttp2_nv nv[] = { NV(":status", "200"), NV("content-type", "application/grpc"),
			    NV("grpc-status", "5"), NV("grpc-message", "volume%20%22db%22%20not%20found%3A%20100%25%20%C3%BC%zz") };

	cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 0, on_done, &d, NULL) == 0);
	to_server(client, &server);
	srv_trailers_only(&server, 1, nv, 4);
	cr_assert(to_client(&server, client, 2) == 0);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.code, GRPC_NOT_FOUND);
	/* Malformed escapes stay literal, as gRPC does. */
	cr_assert_str_eq(d.message, "volume \"db\" not found: 100% \xc3\xbc%zz");
}

static void status_without_grpc_status(const char *http, int want)
{
	static struct done d;	/* outlives the test: teardown cancels what is pending */
	d = (struct done){ 0 };
	nghttp2_nv nv[] = { NV(":status", http), NV("content-type", "text/html") };

	cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 0, on_done, &d, NULL) == 0);
	to_server(client, &server);
	srv_trailers_only(&server, 1, nv, 2);
	cr_assert(to_client(&server, client, 0) == 0);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.code, want, "HTTP %s gave %s", http, grpc_code_to_string(d.code));
}

Test(grpc, http_503_is_unavailable) { status_without_grpc_status("503", GRPC_UNAVAILABLE); }
Test(grpc, http_404_is_unimplemented) { status_without_grpc_status("404", GRPC_UNIMPLEMENTED); }
Test(grpc, http_401_is_unauthenticated) { status_without_grpc_status("401", GRPC_UNAUTHENTICATED); }
Test(grpc, http_500_is_unknown) { status_without_grpc_status("500", GRPC_UNKNOWN); }
Test(grpc, http_200_wrong_content_type_is_unknown) { status_without_grpc_status("200", GRPC_UNKNOWN); }

Test(grpc, missing_grpc_status_is_internal)
{
	static struct done d;	/* outlives the test: teardown cancels what is pending */
	d = (struct done){ 0 };
	nghttp2_nv hdr[] = { NV(":status", "200"), NV("content-type", "application/grpc") };

	cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 0, on_done, &d, NULL) == 0);
	to_server(client, &server);
	server.resp = reply_msg;
	server.resp_len = sizeof(reply_msg);
	nghttp2_data_provider dp = { .source.ptr = NULL, .read_callback = srv_read };
	cr_assert(nghttp2_submit_response(server.h2, 1, hdr, 2, &dp) == 0);
	cr_assert(to_client(&server, client, 0) == 0);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.code, GRPC_INTERNAL);
	cr_assert(strstr(d.message, "grpc-status"));
}

Test(grpc, bad_framing_and_compression_are_internal)
{
	static struct done d1, d2;
	d1 = d2 = (struct done){ 0 };
	static const uint8_t short_msg[] = { 0, 0, 0, 0, 10, 1, 2, 3 };
	static const uint8_t compressed[] = { 1, 0, 0, 0, 1, 7 };

	cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 0, on_done, &d1, NULL) == 0);
	to_server(client, &server);
	srv_reply(&server, 1, short_msg, sizeof(short_msg), "0", NULL);
	cr_assert(to_client(&server, client, 0) == 0);
	cr_assert_eq(d1.code, GRPC_INTERNAL);
	cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 0, on_done, &d2, NULL) == 0);
	to_server(client, &server);
	srv_reply(&server, 3, compressed, sizeof(compressed), "0", NULL);
	cr_assert(to_client(&server, client, 0) == 0);
	cr_assert_eq(d2.code, GRPC_INTERNAL);
}

static void rst_gives(uint32_t h2code, int want)
{
	static struct done d;	/* outlives the test: teardown cancels what is pending */
	d = (struct done){ 0 };

	cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 0, on_done, &d, NULL) == 0);
	to_server(client, &server);
	cr_assert(nghttp2_submit_rst_stream(server.h2, NGHTTP2_FLAG_NONE, 1, h2code) == 0);
	cr_assert(to_client(&server, client, 0) == 0);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.code, want);
	cr_assert_eq(grpc_session_active(client), 0);
	cr_assert(!grpc_session_closing(client));
}

Test(grpc, rst_refused_is_unavailable) { rst_gives(NGHTTP2_REFUSED_STREAM, GRPC_UNAVAILABLE); }
Test(grpc, rst_cancel_is_cancelled) { rst_gives(NGHTTP2_CANCEL, GRPC_CANCELLED); }
Test(grpc, rst_internal_is_internal) { rst_gives(NGHTTP2_INTERNAL_ERROR, GRPC_INTERNAL); }
Test(grpc, rst_calm_is_resource_exhausted) { rst_gives(NGHTTP2_ENHANCE_YOUR_CALM, GRPC_RESOURCE_EXHAUSTED); }

Test(grpc, goaway_fails_newer_streams_finishes_older)
{
	static struct done d1, d3, d5;
	d1 = d3 = d5 = (struct done){ 0 };

	cr_assert(grpc_session_submit(client, "/x/A", NULL, 0, 0, on_done, &d1, NULL) == 0);
	cr_assert(grpc_session_submit(client, "/x/B", NULL, 0, 0, on_done, &d3, NULL) == 0);
	to_server(client, &server);
	cr_assert_eq(server.nst, 2);
	cr_assert(nghttp2_submit_goaway(server.h2, NGHTTP2_FLAG_NONE, 1, NGHTTP2_NO_ERROR, NULL, 0) == 0);
	cr_assert(to_client(&server, client, 0) == 0);
	cr_assert_eq(d3.calls, 1);
	cr_assert_eq(d3.code, GRPC_UNAVAILABLE);
	cr_assert_eq(d1.calls, 0);
	cr_assert(grpc_session_closing(client));
	cr_assert_eq(grpc_session_submit(client, "/x/C", NULL, 0, 0, on_done, &d5, NULL), -ENOTCONN);
	srv_reply(&server, 1, reply_msg, sizeof(reply_msg), "0", NULL);
	cr_assert(to_client(&server, client, 0) == 0);
	cr_assert_eq(d1.calls, 1);
	cr_assert_eq(d1.code, GRPC_OK);
	cr_assert_eq(d5.calls, 0);
	cr_assert_eq(grpc_session_active(client), 0);
}

Test(grpc, ping_is_acked)
{
	static struct done d;	/* outlives the test: teardown cancels what is pending */
	d = (struct done){ 0 };

	cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 0, on_done, &d, NULL) == 0);
	to_server(client, &server);
	srv_reply(&server, 1, reply_msg, sizeof(reply_msg), "0", NULL);
	/* Servers PING after replies. */
	cr_assert(nghttp2_submit_ping(server.h2, NGHTTP2_FLAG_NONE, NULL) == 0);
	cr_assert(to_client(&server, client, 5) == 0);
	cr_assert_eq(d.code, GRPC_OK);
	cr_assert(grpc_session_want_write(client));
	to_server(client, &server);
	cr_assert(server.got_ping_ack);
	cr_assert(!grpc_session_closing(client));
}

Test(grpc, oversize_declared_message_is_resource_exhausted)
{
	static struct done d;	/* outlives the test: teardown cancels what is pending */
	d = (struct done){ 0 };
	/* The prefix declares 5 MiB; only the start is sent. */
	static const uint8_t big[] = { 0, 0, 0x50, 0, 0, 1, 2, 3 };

	cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 0, on_done, &d, NULL) == 0);
	to_server(client, &server);
	srv_reply(&server, 1, big, sizeof(big), "0", NULL);
	cr_assert(to_client(&server, client, 0) == 0);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.code, GRPC_RESOURCE_EXHAUSTED);
	to_server(client, &server);
	cr_assert(server.st[0].rst);
	cr_assert_eq(server.st[0].rst_code, NGHTTP2_CANCEL);
}

Test(grpc, oversize_actual_message_is_resource_exhausted)
{
	static struct done d;	/* outlives the test: teardown cancels what is pending */
	d = (struct done){ 0 };
	size_t n = GRPC_MAX_MESSAGE + 6;
	uint8_t *big = calloc(1, n);

	/* The prefix claims 1 byte but the stream carries more than the cap. */
	big[4] = 1;
	cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 0, on_done, &d, NULL) == 0);
	to_server(client, &server);
	srv_reply(&server, 1, big, n, "0", NULL);
	/* Flow control paces the server: pump until the call is done. */
	for (int i = 0; i < 200 && !d.calls; i++) {
		cr_assert(to_client(&server, client, 0) == 0);
		to_server(client, &server);
	}
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.code, GRPC_RESOURCE_EXHAUSTED);
	free(big);
}

Test(grpc, oversize_headers_are_resource_exhausted)
{
	static struct done d;	/* outlives the test: teardown cancels what is pending */
	d = (struct done){ 0 };
	char *v = malloc(17 << 10);

	memset(v, 'a', (17 << 10) - 1);
	v[(17 << 10) - 1] = 0;
	nghttp2_nv nv[] = { NV(":status", "200"), NV("content-type", "application/grpc"),
			    NV("x-big", v), NV("grpc-status", "0") };
	cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 0, on_done, &d, NULL) == 0);
	to_server(client, &server);
	srv_trailers_only(&server, 1, nv, 4);
	to_client(&server, client, 0);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.code, GRPC_RESOURCE_EXHAUSTED);
	free(v);
}

Test(grpc, oversize_request_refused)
{
	static struct done d;	/* outlives the test: teardown cancels what is pending */
	d = (struct done){ 0 };
	uint8_t *big = calloc(1, GRPC_MAX_MESSAGE + 1);

	cr_assert_eq(grpc_session_submit(client, "/x/Y", big, GRPC_MAX_MESSAGE + 1, 0, on_done, &d, NULL), -E2BIG);
	cr_assert_eq(d.calls, 0);
	free(big);
}

Test(grpc, cancel_completes_once_and_resets)
{
	static struct done d;	/* outlives the test: teardown cancels what is pending */
	d = (struct done){ 0 };
	struct grpc_call *call;

	cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 100, on_done, &d, &call) == 0);
	to_server(client, &server);
	grpc_session_cancel(client, call, GRPC_DEADLINE_EXCEEDED, "deadline");
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.code, GRPC_DEADLINE_EXCEEDED);
	to_server(client, &server);
	cr_assert(server.st[0].rst);
	/* A late reply to the reset stream changes nothing. */
	srv_reply(&server, 1, reply_msg, sizeof(reply_msg), "0", NULL);
	to_client(&server, client, 0);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.code, GRPC_DEADLINE_EXCEEDED);
}

Test(grpc, cancel_before_sending)
{
	static struct done d;	/* outlives the test: teardown cancels what is pending */
	d = (struct done){ 0 };
	struct grpc_call *call;

	cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 0, on_done, &d, &call) == 0);
	grpc_session_cancel(client, call, GRPC_CANCELLED, "bye");
	cr_assert_eq(d.calls, 1);
	to_server(client, &server);
	to_client(&server, client, 0);
	cr_assert_eq(d.calls, 1);
}

Test(grpc, fail_all_and_free_complete_each_call_once)
{
	static struct done d[4];
	memset(d, 0, sizeof(d));

	for (int i = 0; i < 4; i++)
		cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 0, on_done, &d[i], NULL) == 0);
	to_server(client, &server);
	srv_reply(&server, 1, reply_msg, sizeof(reply_msg), "0", NULL);
	cr_assert(to_client(&server, client, 0) == 0);
	cr_assert_eq(d[0].code, GRPC_OK);
	grpc_session_fail_all(client, GRPC_UNAVAILABLE, "connection lost");
	for (int i = 0; i < 4; i++)
		cr_assert_eq(d[i].calls, 1, "call %d completed %d times", i, d[i].calls);
	for (int i = 1; i < 4; i++)
		cr_assert_eq(d[i].code, GRPC_UNAVAILABLE);
	grpc_session_free(client);
	client = NULL;
	for (int i = 0; i < 4; i++)
		cr_assert_eq(d[i].calls, 1);
}

Test(grpc, free_cancels_open_calls)
{
	static struct done d;	/* outlives the test: teardown cancels what is pending */
	d = (struct done){ 0 };

	cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 0, on_done, &d, NULL) == 0);
	grpc_session_free(client);
	client = NULL;
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.code, GRPC_CANCELLED);
}

Test(grpc, garbage_is_a_protocol_error)
{
	static struct done d;	/* outlives the test: teardown cancels what is pending */
	d = (struct done){ 0 };
	static const uint8_t junk[] = "HTTP/1.1 400 Bad Request\r\n\r\n";

	cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 0, on_done, &d, NULL) == 0);
	to_server(client, &server);
	int r = grpc_session_recv(client, junk, sizeof(junk) - 1);
	struct sbuf out = SBUF_INIT(0);
	grpc_session_output(client, &out);	/* may carry our GOAWAY */
	sbuf_free(&out);
	cr_assert(r == -EPROTO || grpc_session_closing(client));
	grpc_session_fail_all(client, GRPC_UNAVAILABLE, "protocol error");
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.code, GRPC_UNAVAILABLE);
}

Test(grpc, many_streams_multiplexed)
{
	static struct done d[20];
	memset(d, 0, sizeof(d));

	for (int i = 0; i < 20; i++)
		cr_assert(grpc_session_submit(client, "/x/Y", NULL, 0, 0, on_done, &d[i], NULL) == 0);
	cr_assert_eq(grpc_session_active(client), 20);
	to_server(client, &server);
	/* Answer in reverse order, one stream at a time. */
	for (int i = 19; i >= 0; i--) {
		nghttp2_nv nv[] = { NV(":status", "200"), NV("content-type", "application/grpc"),
				    NV("grpc-status", "14"), NV("grpc-message", "busy") };
		srv_trailers_only(&server, 2 * i + 1, nv, 4);
		cr_assert(to_client(&server, client, 0) == 0);
		cr_assert_eq(d[i].calls, 1);
		cr_assert_eq(d[i].code, GRPC_UNAVAILABLE);
		cr_assert_str_eq(d[i].message, "busy");
	}
	cr_assert_eq(grpc_session_active(client), 0);
}
