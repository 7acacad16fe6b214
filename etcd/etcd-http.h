/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * etcd-http: the HTTP/1.1 that etcd.c speaks to a plain http:// member,
 * without libcurl (libcurl and the thirty libraries it maps cost a node
 * about 8 MB of its resident memory; docs/design.md). https:// members
 * still go through libcurl, which does TLS.
 *
 * Two halves: a response parser that sees bytes only (sans I/O, fuzzed:
 * fuzz_etcd_http), and a blocking transport over one kept-alive TCP
 * connection (connect with a timeout, a POST, the answer read with poll
 * until the call's deadline), or a call whose answer the caller reads
 * each time its socket is readable, so that one thread can poll many
 * watches. It knows HTTP: a status line, headers,
 * Content-Length or chunked bodies; nothing of etcd's JSON.
 */
#ifndef NODEFS_ETCD_HTTP_H
#define NODEFS_ETCD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nerr;

/* Response headers past this are an error (-E2BIG), as curl's 100 KiB. */
#define EHTTP_HEADERS_MAX (16u << 10)

enum ehttp_state {
	EHTTP_STATUS, EHTTP_HEADER, EHTTP_BODY, EHTTP_CHUNK_SIZE, EHTTP_CHUNK_DATA,
	EHTTP_CHUNK_END, EHTTP_TRAILER, EHTTP_UNTIL_CLOSE, EHTTP_DONE
};

struct ehttp_resp {
	enum ehttp_state st;
	int status;
	bool chunked, has_len, close;	/* close: the server ends the connection */
	uint64_t left;			/* of the body, or of the chunk */
	char line[512];			/* the line being read (longer: cut) */
	size_t llen, hbytes;
};

/* A body's bytes: 0 goes on, > 0 stops the parse (ehttp_feed returns 2),
 * < 0 stops it with that result. */
typedef int (*ehttp_body_fn)(void *ctx, const char *p, size_t n);

void ehttp_resp_init(struct ehttp_resp *r);
/* Feed n bytes of the response. Returns 1 once the response is complete
 * (*used: the bytes of p it took), 0 when it wants more, 2 when on_body
 * asked to stop, -EPROTO on what
 * is not HTTP/1.x (err says what), -E2BIG on headers over
 * EHTTP_HEADERS_MAX, or what on_body returned. */
int ehttp_feed(struct ehttp_resp *r, const char *p, size_t n, size_t *used, ehttp_body_fn on_body,
	       void *ctx, struct nerr *err);
/* The end of the connection: 1 when it completes the response (a body
 * that runs until close), else -ECONNRESET. */
int ehttp_eof(struct ehttp_resp *r);

/* One kept-alive connection to http://HOST[:PORT]. */
struct ehttp_conn {
	int fd;			/* -1: none */
	char url[256];		/* what it is connected to */
};

void ehttp_conn_init(struct ehttp_conn *c);
void ehttp_conn_close(struct ehttp_conn *c);
/* Whether url is one this transport takes (http://HOST[:PORT]). */
bool ehttp_url_ok(const char *url);

struct ehttp_call {
	const char *url;	/* http://HOST[:PORT], no path */
	const char *path;	/* "/v3/kv/put" */
	const char *body;
	size_t blen;
	long connect_ms;
	long timeout_ms;	/* the whole call; 0: none (a watch) */
	ehttp_body_fn on_body;
	void *ctx;
	/* polled every poll_ms while nothing comes (0: never): true ends the
	 * call (result 1) */
	bool (*stop)(void *ctx);
	long poll_ms;
};

/* POST call->body to call->url + call->path on c (reconnected when it is
 * another URL or closed; a kept-alive connection the server had closed
 * is made again once). Returns the HTTP status (> 0), or 0 when stop
 * ended it, or -ETIMEDOUT, -EHOSTUNREACH (cannot connect), -ECONNRESET
 * (the connection ended), -EPROTO, -E2BIG, -ENOMEM, or what on_body
 * returned; err says what. */
int ehttp_post(struct ehttp_conn *c, const struct ehttp_call *call, struct nerr *err);

/* A call whose answer the caller reads itself, for one thread that reads
 * many (a node's watches of other nodes): ehttp_start connects c anew
 * (within call->connect_ms) and sends the request; then, each time c->fd
 * is readable, ehttp_read reads what came and feeds it to call->on_body.
 * ehttp_read returns 0 (more to come), 1 (the answer is complete: its
 * status in resp->status), 2 (on_body stopped it), or < 0 (the connection
 * ended: -ECONNRESET; or the parse failed). Anything but 0 or 1 closes c.
 * call->stop and timeout_ms are not used. */
int ehttp_start(struct ehttp_conn *c, struct ehttp_resp *resp, const struct ehttp_call *call,
		struct nerr *err);
int ehttp_read(struct ehttp_conn *c, struct ehttp_resp *resp, const struct ehttp_call *call,
	       struct nerr *err);

#endif
