/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * h2server: a gRPC server on a unix socket over the event loop (see
 * h2server.h). It accepts connections, moves bytes between each socket and
 * its sans-IO grpcsrv session, and carries answers made on other threads
 * back to the loop. It knows nothing of CSI.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "grpcsrv.h"
#include "h2server.h"
#include "loop.h"
#include "nerr.h"
#include "sbuf.h"

#define OUT_CAP (64u << 20)	/* queued output per connection */
#define READ_CHUNK (64u << 10)

struct h2_sconn {
	struct h2_server *srv;
	struct h2_sconn *prev, *next;
	int fd;			/* -1 once closed */
	struct grpc_srv *sess;
	struct sbuf out;
	size_t out_off;
	unsigned watching;	/* LOOP_READ|LOOP_WRITE registered */
	bool in_recv;		/* handlers run inside on_conn: it flushes after */
};

struct h2_server {
	struct loop *loop;
	char *path;
	int lfd;
	h2_server_fn fn;
	void *userdata;
	struct h2_sconn *conns;		/* open connections */
	struct h2_sconn *zombies;	/* closed, calls still unanswered */
	unsigned nconns;
	atomic_uint queued;		/* async answers not yet delivered */
	atomic_bool freed;		/* h2_server_free ran: a zombie itself */
};

static void conn_unlink(struct h2_sconn **head, struct h2_sconn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		*head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
}

static void conn_push(struct h2_sconn **head, struct h2_sconn *c)
{
	c->next = *head;
	if (*head)
		(*head)->prev = c;
	*head = c;
}

static void conn_destroy(struct h2_sconn *c)
{
	grpc_srv_free(c->sess);
	sbuf_free(&c->out);
	free(c);
}

/* Close the socket; keep the session while the owner holds calls of it. */
static void conn_close(struct h2_sconn *c)
{
	struct h2_server *srv = c->srv;

	if (c->fd >= 0) {
		loop_del_fd(srv->loop, c->fd);
		close(c->fd);
		c->fd = -1;
		conn_unlink(&srv->conns, c);
		srv->nconns--;
		if (grpc_srv_pending(c->sess)) {
			conn_push(&srv->zombies, c);
			return;
		}
	} else if (grpc_srv_pending(c->sess)) {
		return;
	} else {
		conn_unlink(&srv->zombies, c);
	}
	conn_destroy(c);
}

static void conn_watch(struct h2_sconn *c, unsigned ev)
{
	if (c->fd >= 0 && ev != c->watching && loop_mod_fd(c->srv->loop, c->fd, ev) == 0)
		c->watching = ev;
}

/* Move what the session wants to send to the socket; watch for writable
 * while some is left. Closes the connection when it is over, and then
 * returns 1 (c may be gone); 0 otherwise. */
static int conn_flush(struct h2_sconn *c)
{
	if (c->fd < 0)
		return 1;
	if (grpc_srv_output(c->sess, &c->out) < 0) {
		conn_close(c);
		return 1;
	}
	while (c->out_off < c->out.len) {
		ssize_t n = send(c->fd, c->out.buf + c->out_off, c->out.len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			conn_close(c);
			return 1;
		}
		c->out_off += (size_t)n;
	}
	if (c->out_off == c->out.len) {
		sbuf_reset(&c->out);
		c->out_off = 0;
		if (grpc_srv_done(c->sess)) {
			conn_close(c);
			return 1;
		}
		conn_watch(c, LOOP_READ);
	} else {
		conn_watch(c, LOOP_READ | LOOP_WRITE);
	}
	return 0;
}

static void on_conn(struct loop *l, int fd, unsigned events, void *ud)
{
	struct h2_sconn *c = ud;
	uint8_t buf[READ_CHUNK];

	if (events & LOOP_READ || events & LOOP_ERROR) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR && errno != EWOULDBLOCK)) {
			conn_close(c);
			return;
		}
		c->in_recv = true;
		int r = n > 0 ? grpc_srv_recv(c->sess, buf, (size_t)n) : 0;
		c->in_recv = false;
		if (r < 0) {
			/* Flush the GOAWAY (best effort), then close. */
			if (conn_flush(c) == 0)
				conn_close(c);
			return;
		}
	}
	conn_flush(c);
}

static void on_request(void *ud, struct grpc_srv_call *call, const char *path,
		       const uint8_t *msg, size_t len, uint64_t timeout_ms)
{
	struct h2_server *srv = ud;

	srv->fn(srv->userdata, call, path, msg, len, timeout_ms);
}

static void on_accept(struct loop *l, int fd, unsigned events, void *ud)
{
	struct h2_server *srv = ud;

	for (;;) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd < 0)
			return;	/* EAGAIN, or EMFILE: try at the next wake-up */
		struct h2_sconn *c = calloc(1, sizeof(*c));
		if (!c || grpc_srv_new(0, on_request, srv, &c->sess) < 0) {
			free(c);
			close(cfd);
			continue;
		}
		grpc_srv_set_owner(c->sess, c);
		c->srv = srv;
		c->fd = cfd;
		sbuf_init(&c->out, OUT_CAP);
		if (loop_add_fd(srv->loop, cfd, LOOP_READ, on_conn, c) < 0) {
			close(cfd);
			conn_destroy(c);
			continue;
		}
		c->watching = LOOP_READ;
		conn_push(&srv->conns, c);
		srv->nconns++;
		conn_flush(c);	/* our SETTINGS */
	}
}

int h2_server_new(struct loop *loop, const char *path, h2_server_fn fn, void *userdata,
		  struct h2_server **ret_server, struct nerr *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return nerr_set(err, EINVAL, "socket path too long (%zu bytes, at most %zu)",
				strlen(path), sizeof(sa.sun_path) - 1);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return nerr_set(err, errno, "socket: %s", strerror(errno));
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			close(fd);
			return nerr_set(err, EEXIST, "%s exists and is not a socket", path);
		}
		/* Stale if nobody answers there. */
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(probe);
			close(fd);
			return nerr_set(err, EADDRINUSE, "a server already listens on %s", path);
		}
		if (probe >= 0)
			close(probe);
		unlink(path);
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
		r = errno;
		close(fd);
		return nerr_set(err, r, "listen on %s: %s", path, strerror(r));
	}
	struct h2_server *srv = calloc(1, sizeof(*srv));
	if (!srv || !(srv->path = strdup(path))) {
		free(srv);
		close(fd);
		unlink(path);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	srv->loop = loop;
	srv->lfd = fd;
	srv->fn = fn;
	srv->userdata = userdata;
	r = loop_add_fd(loop, fd, LOOP_READ, on_accept, srv);
	if (r < 0) {
		close(fd);
		unlink(path);
		free(srv->path);
		free(srv);
		return nerr_set(err, -r, "watch the listening socket: %s", strerror(-r));
	}
	*ret_server = srv;
	return 0;
}

void h2_server_free(struct h2_server *srv)
{
	if (!srv)
		return;
	loop_del_fd(srv->loop, srv->lfd);
	close(srv->lfd);
	unlink(srv->path);
	free(srv->path);
	while (srv->conns) {
		struct h2_sconn *c = srv->conns;

		loop_del_fd(srv->loop, c->fd);
		close(c->fd);
		conn_unlink(&srv->conns, c);
		conn_destroy(c);
	}
	while (srv->zombies) {
		struct h2_sconn *c = srv->zombies;

		conn_unlink(&srv->zombies, c);
		conn_destroy(c);
	}
	/* Answers still queued on the loop find the server freed and drop
	 * themselves; the last one frees it. */
	atomic_store(&srv->freed, true);
	if (atomic_load(&srv->queued) == 0)
		free(srv);
}

void h2_server_reply(struct grpc_srv_call *call, int code, const char *message,
		     const void *msg, size_t len)
{
	struct grpc_srv *s = grpc_srv_call_session(call);
	struct h2_sconn *c = grpc_srv_owner(s);

	grpc_srv_reply(s, call, code, message, msg, len);
	if (c->in_recv)
		return;	/* on_conn flushes once the bytes read are consumed */
	if (c->fd >= 0)
		conn_flush(c);
	else
		conn_close(c);	/* a zombie whose last call this was goes */
}

struct async_reply {
	struct h2_server *srv;
	struct grpc_srv_call *call;
	int code;
	size_t len;
	char *message;
	uint8_t msg[];
};

static void deliver(struct loop *l, void *ud)
{
	struct async_reply *a = ud;
	struct h2_server *srv = a->srv;

	if (!atomic_load(&srv->freed))
		h2_server_reply(a->call, a->code, a->message, a->msg, a->len);
	free(a->message);
	free(a);
	if (atomic_fetch_sub(&srv->queued, 1) == 1 && atomic_load(&srv->freed))
		free(srv);
}

int h2_server_reply_async(struct h2_server *srv, struct grpc_srv_call *call, int code,
			  const char *message, const void *msg, size_t len)
{
	struct async_reply *a = malloc(sizeof(*a) + len);

	if (!a)
		return -ENOMEM;
	a->srv = srv;
	a->call = call;
	a->code = code;
	a->len = len;
	a->message = message ? strdup(message) : NULL;
	if (message && !a->message) {
		free(a);
		return -ENOMEM;
	}
	if (len)
		memcpy(a->msg, msg, len);
	atomic_fetch_add(&srv->queued, 1);
	if (loop_submit(srv->loop, deliver, a) < 0) {
		atomic_fetch_sub(&srv->queued, 1);
		free(a->message);
		free(a);
		return -ENOMEM;
	}
	return 0;
}

unsigned h2_server_connections(struct h2_server *srv)
{
	return srv->nconns;
}
