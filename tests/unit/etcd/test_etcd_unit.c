/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of etcd/etcd.c's pure half: base64 both ways, the endpoint
 * list's checks, and the watch stream's framing and decoding (events,
 * deletes, a message cut anywhere, compaction, a server's error, bad JSON).
 * Criterion; no etcd, no network.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"
#include "jw.h"
#include "nerr.h"
#include "sbuf.h"

/* Base64 as nodefs writes it to etcd: common/jw's jw_b64, without the
 * JSON string's quotes. */
static char *b64_of(const void *in, size_t len)
{
	struct sbuf sb;
	struct jw w;
	char *s;

	sbuf_init(&sb, 1u << 20);
	jw_init(&w, &sb, 0);
	jw_b64(&w, in, len);
	if (jw_end(&w) < 0 || !(s = sbuf_steal(&sb)))
		return NULL;
	memmove(s, s + 1, strlen(s) - 1);
	s[strlen(s) - 2] = '\0';
	return s;
}

Test(etcd_b64, round_trip)
{
	const char *in[] = { "", "a", "ab", "abc", "/nodefs/nodes/a", "\xff\x00\x01" };
	size_t len[] = { 0, 1, 2, 3, 15, 3 };

	for (size_t i = 0; i < 6; i++) {
		char *e, *d;
		size_t dl;
		cr_assert_not_null(e = b64_of(in[i], len[i]));
		cr_assert(etcd_b64_decode(e, strlen(e), &d, &dl) >= 0);
		cr_assert_eq(dl, len[i]);
		cr_assert(memcmp(d, in[i], dl) == 0);
		free(e);
		free(d);
	}
	char *e;
	e = b64_of("/a", 2);
	cr_assert_str_eq(e, "L2E=");
	free(e);
}

Test(etcd_b64, rejects)
{
	const char *bad[] = { "L2E", "L2E=L2E=", "L=E=", "!!!!", "L2\nE" };
	char *d;
	size_t dl;

	for (size_t i = 0; i < 5; i++)
		cr_assert_eq(etcd_b64_decode(bad[i], strlen(bad[i]), &d, &dl), -EINVAL, "%s", bad[i]);
}

Test(etcd_client, endpoints)
{
	struct etcd *e;
	struct nerr err = { 0 };

	cr_assert_eq(etcd_new("tcp://x", NULL, 100, &e, &err), -EINVAL);
	cr_assert(strstr(err.msg, "http"));
	cr_assert_eq(etcd_new("  ", NULL, 100, &e, &err), -EINVAL);
	cr_assert_eq(etcd_new("http://a:1/ https://b:2", NULL, 100, &e, &err), 0);
	cr_assert_eq(etcd_nendpoints(e), 2);
	cr_assert_str_eq(etcd_endpoint_at(e, 0), "http://a:1");
	etcd_free(e);
}

struct seen {
	int calls, puts, dels;
	int64_t rev;
	char last[64];
};

static void on_ev(void *ctx, const struct etcd_event *ev, size_t n, int64_t rev)
{
	struct seen *s = ctx;

	s->calls++;
	s->rev = rev;
	for (size_t i = 0; i < n; i++) {
		if (ev[i].type == ETCD_EV_DELETE)
			s->dels++;
		else
			s->puts++;
		snprintf(s->last, sizeof(s->last), "%s=%s", ev[i].kv.key, ev[i].kv.val);
	}
}

static bool no_stop(void *ctx)
{
	return false;
}

static const char STREAM[] =
	"{\"result\":{\"header\":{\"revision\":\"2\"},\"created\":true}}\n"
	"{\"result\":{\"header\":{\"revision\":\"3\"},\"events\":[{\"kv\":{\"key\":\"L2E=\","
	"\"mod_revision\":\"3\",\"value\":\"eA==\"}},{\"type\":\"DELETE\",\"kv\":{\"key\":\"L2I=\","
	"\"mod_revision\":\"3\"}}]}}\n";

Test(etcd_watch, any_cut)
{
	for (size_t step = 1; step <= sizeof(STREAM); step++) {
		struct etcd_wparse p = { 0 };
		struct seen s = { 0 };
		struct etcd_watch_cb cb = { on_ev, no_stop, &s };
		struct nerr err = { 0 };
		size_t len = strlen(STREAM);

		for (size_t o = 0; o < len; o += step)
			cr_assert_eq(etcd_wparse_feed(&p, STREAM + o, len - o < step ? len - o : step,
						      &cb, &err), 0, "%s", err.msg);
		cr_assert_eq(s.calls, 2);
		cr_assert_eq(s.puts, 1);
		cr_assert_eq(s.dels, 1);
		cr_assert_eq(s.rev, 3);
		cr_assert_str_eq(s.last, "/b=");
		etcd_wparse_free(&p);
	}
}

static int feed1(const char *text, struct nerr *err, int64_t *compact)
{
	struct etcd_wparse p = { 0 };
	struct seen s = { 0 };
	struct etcd_watch_cb cb = { on_ev, no_stop, &s };
	int r = etcd_wparse_feed(&p, text, strlen(text), &cb, err);

	*compact = p.compact;
	etcd_wparse_free(&p);
	return r;
}

Test(etcd_watch, errors)
{
	struct nerr err = { 0 };
	int64_t c = 0;

	cr_assert_eq(feed1("{\"result\":{\"compact_revision\":\"5\",\"canceled\":true}}\n", &err, &c),
		     -ERANGE);
	cr_assert_eq(c, 5);
	cr_assert_eq(feed1("{\"error\":{\"message\":\"no leader\"}}\n", &err, &c), -ECANCELED);
	cr_assert(strstr(err.msg, "no leader"));
	cr_assert_eq(feed1("{trunc\n", &err, &c), -EPROTO);
	/* a key that is not base64 is skipped, not fatal */
	cr_assert_eq(feed1("{\"result\":{\"events\":[{\"kv\":{\"key\":\"!!\"}}]}}\n", &err, &c), 0);
}

/* ---- etcd-http.c: the HTTP/1.1 a plain http:// member is spoken to with ---- */

#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "etcd-http.h"

struct got {
	char buf[4096];
	size_t len;
};

static int got_body(void *ctx, const char *p, size_t n)
{
	struct got *g = ctx;

	cr_assert(g->len + n < sizeof(g->buf));
	memcpy(g->buf + g->len, p, n);
	g->len += n;
	return 0;
}

/* Feed resp cut at one place (and then whole at cut == len): the same
 * result and body whatever the cut. */
static int feed_cut(const char *resp, size_t cut, struct ehttp_resp *r, struct got *g)
{
	struct nerr err = { 0 };
	size_t len = strlen(resp), used = 0, used2 = 0;
	int k;

	ehttp_resp_init(r);
	memset(g, 0, sizeof(*g));
	k = ehttp_feed(r, resp, cut, &used, got_body, g, &err);
	if (k != 0)
		return k;
	cr_assert_eq(used, cut);
	return ehttp_feed(r, resp + cut, len - cut, &used2, got_body, g, &err);
}

Test(etcd_http, content_length_any_cut)
{
	const char *resp = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			   "content-length:  7\r\nGrpc-Metadata-X: y\r\n\r\n{\"a\":1}";
	struct ehttp_resp r;
	struct got g;

	for (size_t cut = 0; cut <= strlen(resp); cut++) {
		cr_assert_eq(feed_cut(resp, cut, &r, &g), 1, "cut %zu", cut);
		cr_assert_eq(r.status, 200);
		cr_assert_not(r.close);
		cr_assert_eq(g.len, 7);
		cr_assert(memcmp(g.buf, "{\"a\":1}", 7) == 0);
	}
}

Test(etcd_http, chunked_any_cut)
{
	/* a watch stream's shape: chunks of JSON lines, an extension, a
	 * trailer; a 100 Continue before the answer */
	const char *resp = "HTTP/1.1 100 Continue\r\n\r\n"
			   "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			   "5\r\nhello\r\n"
			   "A;ext=1\r\n, world\n!!\r\n"
			   "0\r\nX-Trailer: 1\r\n\r\n";
	struct ehttp_resp r;
	struct got g;

	for (size_t cut = 0; cut <= strlen(resp); cut++) {
		cr_assert_eq(feed_cut(resp, cut, &r, &g), 1, "cut %zu", cut);
		cr_assert_eq(r.status, 200);
		cr_assert_eq(g.len, 15);
		cr_assert(memcmp(g.buf, "hello, world\n!!", 15) == 0);
	}
}

Test(etcd_http, close_and_until_close)
{
	struct ehttp_resp r;
	struct got g;
	struct nerr err = { 0 };
	size_t used;
	const char *a = "HTTP/1.0 503 Service Unavailable\r\n\r\nbusy";

	ehttp_resp_init(&r);
	memset(&g, 0, sizeof(g));
	cr_assert_eq(ehttp_feed(&r, a, strlen(a), &used, got_body, &g, &err), 0);
	cr_assert_eq(r.status, 503);
	cr_assert(r.close);
	cr_assert_eq(ehttp_eof(&r), 1);
	cr_assert_eq(g.len, 4);
	/* a cut Content-Length body is a reset connection */
	const char *b = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 9\r\n\r\nabc";
	ehttp_resp_init(&r);
	cr_assert_eq(ehttp_feed(&r, b, strlen(b), &used, got_body, &g, &err), 0);
	cr_assert(r.close);
	cr_assert_eq(ehttp_eof(&r), -ECONNRESET);
	/* bytes past a complete answer are left to the caller */
	const char *c = "HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1";
	ehttp_resp_init(&r);
	cr_assert_eq(ehttp_feed(&r, c, strlen(c), &used, got_body, &g, &err), 1);
	cr_assert_eq(used, strlen(c) - 8);
}

Test(etcd_http, rejects)
{
	const char *bad[] = {
		"HTTP/2 200\r\n\r\n",
		"SSH-2.0-OpenSSH\r\n",
		"HTTP/1.1 20 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n",
	};
	struct ehttp_resp r;
	struct nerr err = { 0 };
	size_t used;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ehttp_resp_init(&r);
		nerr_clear(&err);
		cr_assert_eq(ehttp_feed(&r, bad[i], strlen(bad[i]), &used, NULL, NULL, &err), -EPROTO,
			     "%s", bad[i]);
		cr_assert(err.msg[0]);
	}
	/* headers without end: capped */
	char *big = malloc(EHTTP_HEADERS_MAX + 100);
	strcpy(big, "HTTP/1.1 200 OK\r\n");
	while (strlen(big) < EHTTP_HEADERS_MAX + 20)
		strcat(big, "X-A: b\r\n");
	ehttp_resp_init(&r);
	cr_assert_eq(ehttp_feed(&r, big, strlen(big), &used, NULL, NULL, &err), -E2BIG);
	free(big);
}

Test(etcd_http, urls)
{
	cr_assert(ehttp_url_ok("http://127.0.0.1:2379"));
	cr_assert(ehttp_url_ok("http://localhost"));
	cr_assert(ehttp_url_ok("http://[::1]:2379"));
	cr_assert_not(ehttp_url_ok("http://:2379"));
	cr_assert_not(ehttp_url_ok("http://a:99999"));
	cr_assert_not(ehttp_url_ok("http://a:1/path"));
	cr_assert_not(ehttp_url_ok("https://a:1"));
	cr_assert_not(ehttp_url_ok("http://[::1"));
}

/* A loopback server thread: answers each request on a connection with
 * `answer`, then closes the connection after `per_conn` answers (0: never
 * answers, holds the connection). */
struct srv {
	int lfd, port, per_conn, conns;
	const char *answer;
};

static void *srv_main(void *arg)
{
	struct srv *s = arg;

	for (int c = 0; c < 2; c++) {
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			return NULL;
		s->conns++;
		for (int k = 0; k < s->per_conn || !s->per_conn; k++) {
			char buf[4096];
			size_t have = 0;
			/* one request: headers, then Content-Length bytes */
			for (;;) {
				ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
				if (n <= 0)
					goto next;
				have += (size_t)n;
				buf[have] = '\0';
				char *e = strstr(buf, "\r\n\r\n");
				char *cl = strstr(buf, "Content-Length: ");
				if (e && cl && have >= (size_t)(e + 4 - buf) + (size_t)atoi(cl + 16))
					break;
			}
			if (!s->per_conn) {
				sleep(1);
				break;
			}
			if (write(fd, s->answer, strlen(s->answer)) < 0)
				break;
		}
next:
		close(fd);
		if (!s->per_conn)
			break;
	}
	return NULL;
}

/* Start s on a loopback port; url gets its http://127.0.0.1:PORT. */
static void srv_start(struct srv *s, pthread_t *th, char *url, size_t ulen)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);

	s->lfd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(s->lfd >= 0);
	cr_assert_eq(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(s->lfd, 4), 0);
	getsockname(s->lfd, (struct sockaddr *)&a, &al);
	s->port = ntohs(a.sin_port);
	cr_assert_eq(pthread_create(th, NULL, srv_main, s), 0);
	snprintf(url, ulen, "http://127.0.0.1:%d", s->port);
}

Test(etcd_http, kept_alive_then_closed_by_server)
{
	struct srv s = { .per_conn = 1,
			 .answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" };
	pthread_t th;
	struct ehttp_conn c;
	struct nerr err = { 0 };
	char url[64];

	srv_start(&s, &th, url, sizeof(url));
	ehttp_conn_init(&c);
	for (int i = 0; i < 2; i++) {
		struct got g = { 0 };
		struct ehttp_call call = { .url = url, .path = "/v3/kv/put", .body = "{}", .blen = 2,
					   .connect_ms = 500, .timeout_ms = 5000,
					   .on_body = got_body, .ctx = &g };
		/* the second finds its kept-alive connection closed by the
		 * server, and makes it anew once */
		cr_assert_eq(ehttp_post(&c, &call, &err), 200, "%d: %s", i, err.msg);
		cr_assert_eq(g.len, 2);
	}
	cr_assert_eq(s.conns, 2);
	ehttp_conn_close(&c);
	pthread_join(th, NULL);
	close(s.lfd);
}

Test(etcd_http, timeout_and_refused)
{
	struct srv s = { .per_conn = 0 };
	pthread_t th;
	struct ehttp_conn c;
	struct nerr err = { 0 };
	char url[64];

	srv_start(&s, &th, url, sizeof(url));
	ehttp_conn_init(&c);
	struct ehttp_call call = { .url = url, .path = "/v3/kv/put", .body = "{}", .blen = 2,
				   .connect_ms = 500, .timeout_ms = 100 };
	cr_assert_eq(ehttp_post(&c, &call, &err), -ETIMEDOUT);
	cr_assert_eq(c.fd, -1);
	pthread_join(th, NULL);
	close(s.lfd);
	/* nothing listens there now */
	cr_assert_eq(ehttp_post(&c, &call, &err), -EHOSTUNREACH);
	cr_assert(strstr(err.msg, "refused"), "%s", err.msg);
}

/* Read ehttp_start's answer as the detail thread does: poll the socket,
 * ehttp_read each time it is readable, until it is not 0. */
static int read_polled(struct ehttp_conn *c, struct ehttp_resp *resp,
		       const struct ehttp_call *call, struct nerr *err)
{
	int r = 0;

	while (r == 0) {
		struct pollfd pf = { .fd = c->fd, .events = POLLIN };
		cr_assert_eq(poll(&pf, 1, 5000), 1, "nothing came");
		r = ehttp_read(c, resp, call, err);
	}
	return r;
}

Test(etcd_http, read_by_caller)
{
	const char *answers[] = {
		/* a stream that the server ends mid-answer */
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n",
		/* a complete one */
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
	};
	for (int i = 0; i < 2; i++) {
		struct srv s = { .per_conn = 1, .answer = answers[i] };
		pthread_t th;
		struct ehttp_conn c;
		struct ehttp_resp resp;
		struct nerr err = { 0 };
		struct got g = { 0 };
		char url[64];

		srv_start(&s, &th, url, sizeof(url));
		ehttp_conn_init(&c);
		struct ehttp_call call = { .url = url, .path = "/v3/watch", .body = "{}", .blen = 2,
					   .connect_ms = 500, .on_body = got_body, .ctx = &g };
		cr_assert_eq(ehttp_start(&c, &resp, &call, &err), 0, "%s", err.msg);
		cr_assert(c.fd >= 0);
		int r = read_polled(&c, &resp, &call, &err);
		if (i == 0) {
			cr_assert_eq(r, -ECONNRESET, "%d", r);
			cr_assert(strstr(err.msg, "mid-answer"), "%s", err.msg);
			cr_assert_eq(g.len, 11);
			cr_assert_eq(memcmp(g.buf, "hello world", 11), 0);
			cr_assert_eq(c.fd, -1);
		} else {
			cr_assert_eq(r, 1, "%d: %s", r, err.msg);
			cr_assert_eq(resp.status, 200);
			cr_assert_eq(g.len, 2);
		}
		ehttp_conn_close(&c);
		/* the server takes two connections: the second, empty */
		struct ehttp_resp r2;
		cr_assert_eq(ehttp_start(&c, &r2, &call, &err), 0, "%s", err.msg);
		ehttp_conn_close(&c);
		pthread_join(th, NULL);
		close(s.lfd);
	}
	/* nothing listens: refused at the start */
	struct ehttp_conn c;
	struct ehttp_resp resp;
	struct nerr err = { 0 };
	ehttp_conn_init(&c);
	struct ehttp_call call = { .url = "http://127.0.0.1:1", .path = "/v3/watch", .body = "{}",
				   .blen = 2, .connect_ms = 500 };
	cr_assert_eq(ehttp_start(&c, &resp, &call, &err), -EHOSTUNREACH, "%s", err.msg);
	cr_assert_eq(c.fd, -1);
}
