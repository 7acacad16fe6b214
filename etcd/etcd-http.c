/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * etcd-http: HTTP/1.1 to a plain http:// etcd member (etcd-http.h): a
 * response parser that sees only bytes, and a transport on one
 * kept-alive TCP connection per client: blocking, or read by the caller. Knows HTTP, not etcd's JSON and
 * not what the calls are for.
 */
#include "etcd-http.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "nerr.h"

/* ---- the response parser (sans I/O) ---- */

void ehttp_resp_init(struct ehttp_resp *r)
{
	memset(r, 0, sizeof(*r));
	r->st = EHTTP_STATUS;
}

/* Take bytes of p up to and with a '\n' into r->line (cut past its size,
 * '\r' and '\n' dropped). 1: a line is complete; 0: all of p taken. */
static int take_line(struct ehttp_resp *r, const char *p, size_t n, size_t *i)
{
	while (*i < n) {
		char ch = p[(*i)++];

		r->hbytes++;
		if (ch == '\n') {
			if (r->llen && r->line[r->llen - 1] == '\r')
				r->llen--;
			r->line[r->llen] = '\0';
			return 1;
		}
		if (r->llen < sizeof(r->line) - 1)
			r->line[r->llen++] = ch;
	}
	return 0;
}

static int on_status(struct ehttp_resp *r, struct nerr *err)
{
	const char *l = r->line;

	if (strncmp(l, "HTTP/1.", 7) != 0 || (l[7] != '0' && l[7] != '1') || l[8] != ' ' ||
	    l[9] < '1' || l[9] > '5' || l[10] < '0' || l[10] > '9' || l[11] < '0' || l[11] > '9' ||
	    (l[12] != ' ' && l[12] != '\0'))
		return nerr_set(err, EPROTO, "not an HTTP/1.x status line: '%.40s'", l);
	r->status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
	r->close = l[7] == '0';
	r->st = EHTTP_HEADER;
	return 0;
}

static bool hname(const char *l, const char *name, const char **ret_val)
{
	size_t k = strlen(name);

	if (strncasecmp(l, name, k) != 0 || l[k] != ':')
		return false;
	l += k + 1;
	while (*l == ' ' || *l == '\t')
		l++;
	*ret_val = l;
	return true;
}

static int on_header(struct ehttp_resp *r, struct nerr *err)
{
	const char *v;

	if (!r->line[0]) {
		/* the end of the headers */
		if (r->status < 200) {
			ehttp_resp_init(r);	/* 100 Continue and the like: the
						 * real answer follows */
			return 0;
		}
		if (r->status == 204 || r->status == 304)
			r->st = EHTTP_DONE;
		else if (r->chunked)
			r->st = EHTTP_CHUNK_SIZE;
		else if (r->has_len)
			r->st = r->left ? EHTTP_BODY : EHTTP_DONE;
		else {
			r->st = EHTTP_UNTIL_CLOSE;
			r->close = true;
		}
		return 0;
	}
	if (r->line[0] == ' ' || r->line[0] == '\t' || !strchr(r->line, ':'))
		return nerr_set(err, EPROTO, "not an HTTP header: '%.40s'", r->line);
	if (hname(r->line, "Content-Length", &v)) {
		char *end;
		if (*v < '0' || *v > '9')
			return nerr_set(err, EPROTO, "bad Content-Length '%.20s'", v);
		errno = 0;
		unsigned long long len = strtoull(v, &end, 10);
		while (*end == ' ' || *end == '\t')
			end++;
		if (errno || *end || (r->has_len && r->left != len))
			return nerr_set(err, EPROTO, "bad Content-Length '%.20s'", v);
		r->has_len = true;
		r->left = len;
	} else if (hname(r->line, "Transfer-Encoding", &v)) {
		if (strcasestr(v, "chunked"))
			r->chunked = true;
		else
			return nerr_set(err, EPROTO, "unknown Transfer-Encoding '%.20s'", v);
	} else if (hname(r->line, "Connection", &v)) {
		if (strcasestr(v, "close"))
			r->close = true;
		else if (strcasestr(v, "keep-alive"))
			r->close = false;
	}
	return 0;
}

static int on_chunk_size(struct ehttp_resp *r, struct nerr *err)
{
	uint64_t v = 0;
	const char *l = r->line;
	size_t digits = 0;

	for (; *l; l++, digits++) {
		int d = *l >= '0' && *l <= '9' ? *l - '0' : *l >= 'a' && *l <= 'f' ? *l - 'a' + 10 :
			*l >= 'A' && *l <= 'F' ? *l - 'A' + 10 : -1;
		if (d < 0)
			break;
		if (v >> 60)
			return nerr_set(err, EPROTO, "chunk size too large");
		v = v << 4 | (uint64_t)d;
	}
	while (*l == ' ' || *l == '\t')
		l++;
	if (!digits || (*l && *l != ';'))
		return nerr_set(err, EPROTO, "bad chunk size '%.20s'", r->line);
	r->left = v;
	r->st = v ? EHTTP_CHUNK_DATA : EHTTP_TRAILER;
	return 0;
}

int ehttp_feed(struct ehttp_resp *r, const char *p, size_t n, size_t *used, ehttp_body_fn on_body,
	       void *ctx, struct nerr *err)
{
	size_t i = 0;
	int rc = 0;

	while (rc == 0 && r->st != EHTTP_DONE && i < n) {
		switch (r->st) {
		case EHTTP_STATUS:
		case EHTTP_HEADER:
		case EHTTP_CHUNK_SIZE:
		case EHTTP_CHUNK_END:
		case EHTTP_TRAILER:
			if (!take_line(r, p, n, &i))
				break;
			r->llen = 0;
			if (r->st == EHTTP_STATUS)
				rc = on_status(r, err);
			else if (r->st == EHTTP_HEADER)
				rc = on_header(r, err);
			else if (r->st == EHTTP_CHUNK_SIZE)
				rc = on_chunk_size(r, err);
			else if (r->st == EHTTP_CHUNK_END) {
				if (r->line[0])
					rc = nerr_set(err, EPROTO, "no CRLF after a chunk");
				r->st = EHTTP_CHUNK_SIZE;
			} else if (!r->line[0])
				r->st = EHTTP_DONE;	/* the trailers' end */
			break;
		case EHTTP_BODY:
		case EHTTP_CHUNK_DATA:
		case EHTTP_UNTIL_CLOSE: {
			size_t k = n - i;
			if (r->st != EHTTP_UNTIL_CLOSE && k > r->left)
				k = (size_t)r->left;
			if (r->st != EHTTP_UNTIL_CLOSE)
				r->left -= k;
			if (on_body)
				rc = on_body(ctx, p + i, k);
			i += k;
			if (r->st != EHTTP_UNTIL_CLOSE && !r->left)
				r->st = r->st == EHTTP_BODY ? EHTTP_DONE : EHTTP_CHUNK_END;
			break;
		}
		case EHTTP_DONE:
			break;
		}
		if (rc == 0 && r->hbytes > EHTTP_HEADERS_MAX)
			rc = nerr_set(err, E2BIG, "response headers over %u bytes", EHTTP_HEADERS_MAX);
	}
	*used = i;
	if (rc > 0)
		return 2;	/* on_body asked to stop */
	if (rc < 0)
		return rc;
	return r->st == EHTTP_DONE ? 1 : 0;
}

int ehttp_eof(struct ehttp_resp *r)
{
	if (r->st == EHTTP_UNTIL_CLOSE) {
		r->st = EHTTP_DONE;
		return 1;
	}
	return r->st == EHTTP_DONE ? 1 : -ECONNRESET;
}

/* ---- the transport ---- */

void ehttp_conn_init(struct ehttp_conn *c)
{
	c->fd = -1;
	c->url[0] = '\0';
}

void ehttp_conn_close(struct ehttp_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->url[0] = '\0';
}

/* http://HOST[:PORT] (HOST a name, an IPv4 address or [IPv6]) into host
 * and port; false when it is not that. */
static bool split_url(const char *url, char *host, size_t hlen, char *port, size_t plen)
{
	const char *h, *e, *pp;

	if (strncmp(url, "http://", 7) != 0)
		return false;
	h = url + 7;
	if (*h == '[') {
		e = strchr(h, ']');
		if (!e)
			return false;
		pp = e + 1;
		h++;
	} else {
		e = h + strcspn(h, ":/");
		pp = e;
	}
	if (e == h || (size_t)(e - h) >= hlen)
		return false;
	snprintf(host, hlen, "%.*s", (int)(e - h), h);
	if (*pp == ':') {
		pp++;
		size_t k = strspn(pp, "0123456789");
		if (!k || k > 5 || pp[k] || k >= plen || atoi(pp) > 65535)
			return false;
		snprintf(port, plen, "%s", pp);
	} else if (*pp == '\0')
		snprintf(port, plen, "80");
	else
		return false;
	return true;
}

bool ehttp_url_ok(const char *url)
{
	char host[256], port[8];

	return strlen(url) < sizeof(((struct ehttp_conn *)0)->url) &&
	       split_url(url, host, sizeof(host), port, sizeof(port));
}

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* ms left until deadline (0: none, then INT32_MAX-ish). */
static long left_ms(int64_t deadline)
{
	if (!deadline)
		return 1L << 30;
	int64_t l = deadline - now_ms();
	return l > 0 ? (long)l : 0;
}

static int conn_open(struct ehttp_conn *c, const char *url, long connect_ms, int64_t deadline,
		     struct nerr *err)
{
	char host[256], port[8];
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *a;
	int r, fd = -1, last = ECONNREFUSED;
	bool timed_out = false;

	ehttp_conn_close(c);
	if (!split_url(url, host, sizeof(host), port, sizeof(port)))
		return nerr_set(err, EINVAL, "%s: not an http://HOST[:PORT] URL", url);
	r = getaddrinfo(host, port, &hints, &res);
	if (r)
		return nerr_set(err, EHOSTUNREACH, "%s: cannot resolve %s: %s", url, host,
				gai_strerror(r));
	for (a = res; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    a->ai_protocol);
		if (fd < 0) {
			last = errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
			break;
		if (errno == EINPROGRESS) {
			long w = left_ms(deadline);
			struct pollfd pf = { .fd = fd, .events = POLLOUT };
			int soe = 0;
			socklen_t sl = sizeof(soe);

			if (w > connect_ms)
				w = connect_ms;
			int pr = poll(&pf, 1, (int)w);
			if (pr == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soe, &sl) == 0 && !soe)
				break;
			if (pr == 0) {
				timed_out = true;
				last = ETIMEDOUT;
			} else
				last = soe ? soe : errno;
		} else
			last = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		if (timed_out)
			return nerr_set(err, ETIMEDOUT, "%s: connection timed out after %ld ms", url,
					connect_ms);
		return nerr_set(err, EHOSTUNREACH, "%s: failed to connect to %s port %s: %s", url,
				host, port, strerror(last));
	}
	int one = 1, idle = 2, intvl = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* a watch with nothing to say for a while is still alive; a dead
	 * peer is found by TCP keepalive */
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	c->fd = fd;
	snprintf(c->url, sizeof(c->url), "%s", url);
	return 0;
}

static int send_all(struct ehttp_conn *c, const struct ehttp_call *call, int64_t deadline,
		    struct nerr *err)
{
	char head[1024];
	char host[256], port[8];
	int hl;

	split_url(call->url, host, sizeof(host), port, sizeof(port));
	hl = snprintf(head, sizeof(head),
		      "POST %s HTTP/1.1\r\nHost: %s%s%s:%s\r\nContent-Type: application/json\r\n"
		      "Content-Length: %zu\r\n\r\n", call->path, strchr(host, ':') ? "[" : "",
		      host, strchr(host, ':') ? "]" : "", port, call->blen);
	if (hl < 0 || (size_t)hl >= sizeof(head))
		return nerr_set(err, EINVAL, "request path too long");
	struct iovec iov[2] = { { head, (size_t)hl }, { (void *)call->body, call->blen } };
	size_t total = (size_t)hl + call->blen, sent = 0;
	while (sent < total) {
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
		ssize_t k = sendmsg(c->fd, &mh, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd pf = { .fd = c->fd, .events = POLLOUT };
			long w = left_ms(deadline);
			if (!w || poll(&pf, 1, (int)w) == 0)
				return nerr_set(err, ETIMEDOUT, "%s: sending timed out", call->url);
			continue;
		}
		if (k < 0)
			return nerr_set(err, ECONNRESET, "%s: send: %s", call->url, strerror(errno));
		sent += (size_t)k;
		for (int v = 0; v < 2 && k > 0; v++) {
			size_t t = (size_t)k < iov[v].iov_len ? (size_t)k : iov[v].iov_len;
			iov[v].iov_base = (char *)iov[v].iov_base + t;
			iov[v].iov_len -= t;
			k -= (ssize_t)t;
		}
	}
	return 0;
}

/* One recv on c and the parse of what came. Returns 0 (wants more, or
 * nothing to read yet), 1 (the answer is complete), 2 (on_body stopped
 * it), or < 0: the connection ended (-ECONNRESET; *got says whether any
 * byte had come) or the parse failed; err says what. */
static int read_some(struct ehttp_conn *c, struct ehttp_resp *resp, const struct ehttp_call *call,
		     bool *got, struct nerr *err)
{
	/* on the stack of every thread that reads a watch: what it touches
	 * stays resident, so a page */
	char buf[4096];
	ssize_t k = recv(c->fd, buf, sizeof(buf), 0);
	size_t used = 0;
	int r;

	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (k <= 0) {
		int e = k < 0 ? errno : 0;
		if (k == 0 && ehttp_eof(resp) == 1) {
			ehttp_conn_close(c);
			return 1;
		}
		return nerr_set(err, ECONNRESET, "%s: %s", call->url,
				e ? strerror(e) : *got ? "the connection ended mid-answer"
						       : "the connection was closed");
	}
	*got = true;
	r = ehttp_feed(resp, buf, (size_t)k, &used, call->on_body, call->ctx, err);
	if (r == 1 && (resp->close || used != (size_t)k))
		ehttp_conn_close(c);
	return r;
}

/* One attempt on c. *ret_nothing: the connection ended before any byte
 * of an answer came (a kept-alive one the server had closed). */
static int post_once(struct ehttp_conn *c, const struct ehttp_call *call, int64_t deadline,
		     bool *ret_nothing, struct nerr *err)
{
	struct ehttp_resp resp;
	bool got = false;
	int r;

	*ret_nothing = false;
	r = send_all(c, call, deadline, err);
	if (r == -ECONNRESET) {
		*ret_nothing = true;
		return r;
	}
	if (r < 0)
		return r;
	ehttp_resp_init(&resp);
	for (;;) {
		long w = left_ms(deadline);
		if (call->stop && call->poll_ms && w > call->poll_ms)
			w = call->poll_ms;
		if (deadline && !w)
			return nerr_set(err, ETIMEDOUT, "%s: operation timed out after %ld milliseconds",
					call->url, call->timeout_ms);
		struct pollfd pf = { .fd = c->fd, .events = POLLIN };
		int pr = poll(&pf, 1, (int)w);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0) {
			if (call->stop && call->stop(call->ctx))
				return 0;
			continue;
		}
		r = read_some(c, &resp, call, &got, err);
		if (r == -ECONNRESET)
			*ret_nothing = !got;
		if (r < 0)
			return r;
		if (r == 2)
			return 0;	/* stopped */
		if (r == 1)
			return resp.status;
		if (call->stop && call->stop(call->ctx))
			return 0;
	}
}

int ehttp_start(struct ehttp_conn *c, struct ehttp_resp *resp, const struct ehttp_call *call,
		struct nerr *err)
{
	int64_t deadline = now_ms() + (call->connect_ms > 0 ? call->connect_ms : 1000);
	int r = conn_open(c, call->url, call->connect_ms > 0 ? call->connect_ms : 1000, deadline,
			  err);

	if (r == 0)
		r = send_all(c, call, deadline, err);
	if (r < 0) {
		ehttp_conn_close(c);
		return r;
	}
	ehttp_resp_init(resp);
	return 0;
}

int ehttp_read(struct ehttp_conn *c, struct ehttp_resp *resp, const struct ehttp_call *call,
	       struct nerr *err)
{
	bool got = true;
	int r = c->fd < 0 ? nerr_set(err, ECONNRESET, "%s: not connected", call->url)
			  : read_some(c, resp, call, &got, err);

	if (r < 0 || r == 2)
		ehttp_conn_close(c);
	return r;
}

int ehttp_post(struct ehttp_conn *c, const struct ehttp_call *call, struct nerr *err)
{
	int64_t deadline = call->timeout_ms ? now_ms() + call->timeout_ms : 0;
	long cms = call->connect_ms > 0 ? call->connect_ms : 1000;

	for (int attempt = 0; attempt < 2; attempt++) {
		bool reused = c->fd >= 0 && strcmp(c->url, call->url) == 0, nothing = false;
		int r;

		if (!reused) {
			r = conn_open(c, call->url, cms, deadline, err);
			if (r < 0)
				return r;
		}
		r = post_once(c, call, deadline, &nothing, err);
		if (r <= 0 || c->fd < 0) {
			/* anything but a complete answer on an open connection
			 * leaves the connection in an unknown place */
			if (r <= 0)
				ehttp_conn_close(c);
		}
		if (r == -ECONNRESET && reused && nothing)
			continue;	/* closed while idle: once more, anew */
		return r;
	}
	return -ECONNRESET;
}
