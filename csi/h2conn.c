/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * h2conn: a gRPC connection over a unix socket on the event loop (see
 * h2conn.h). It moves bytes between the socket and the sans-IO grpc core,
 * keeps per-call deadlines and reconnects; it knows nothing of CSI.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "h2conn.h"
#include "loop.h"
#include "sbuf.h"

#define OUT_CAP (64u << 20)	/* queued output: a few full messages */

struct h2_call {
	struct h2_conn *c;
	struct h2_call *prev, *next;	/* on c->calls */
	char *path;
	uint8_t *msg;
	size_t len;
	uint64_t timeout_ms;
	uint64_t deadline_ms;	/* absolute, 0 = none */
	struct grpc_call *gc;	/* set while on the wire */
	struct loop_timer *timer;
	bool started;		/* handed to the session (gc set, or failed) */
	grpc_done_fn done;
	void *userdata;
	bool *finished;		/* a direct call's caller: set when done has run */
};

struct h2_conn {
	/* Everything below is under mu (recursive: a completion may submit).
	 * The loop thread drives the connection; a direct caller (h2_conn_call)
	 * borrows it for one call while it is idle. */
	pthread_mutex_t mu;
	pthread_cond_t cond;		/* held or users dropped (for free) */
	struct loop *loop;
	char *path;
	struct h2_conn_opts opts;
	int fd;
	_Atomic enum h2_state state;
	unsigned interest;		/* LOOP_READ|LOOP_WRITE the loop should watch */
	unsigned armed;			/* what the kernel watches (0 while held) */
	bool held;			/* a direct caller reads the socket */
	bool adopt;			/* a direct call was handed over: arm its deadline */
	int efd;			/* eventfd: a call queued while held */
	bool freeing;
	atomic_uint users;		/* direct callers between h2_conn_ref and return */
	unsigned queued;		/* calls on c->calls not yet on the wire */
	char lost[128];			/* why a direct caller gave the socket up */
	struct grpc_session *sess;
	struct sbuf out;
	size_t out_off;
	struct h2_call *calls;		/* every call not yet completed */
	struct loop_timer *kick;	/* connect now / flush queued (0 ms) */
	struct loop_timer *backoff;	/* reconnect after a loss */
	unsigned attempt;		/* consecutive failed connects */
	uint64_t rng;
	char reason[128];
};

uint64_t h2_backoff_ms(uint64_t base_ms, uint64_t max_ms, double factor, double jitter,
		       unsigned attempt, uint64_t *rng)
{
	double d = (double)base_ms;

	for (unsigned i = 0; i < attempt && d < (double)max_ms; i++)
		d *= factor;
	if (d > (double)max_ms)
		d = (double)max_ms;
	/* xorshift64 */
	uint64_t x = *rng ? *rng : 0x9e3779b97f4a7c15ull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*rng = x;
	double u = (double)(x >> 11) / (double)(1ull << 53);	/* [0, 1) */
	d *= 1.0 - jitter + 2.0 * jitter * u;
	if (d > (double)max_ms)
		d = (double)max_ms;
	return d < 0 ? 0 : (uint64_t)d;
}

static void conn_flush(struct h2_conn *c);
static void conn_close(struct h2_conn *c, int code, const char *reason, bool lost);

/* The kernel watches what the loop wants, or nothing while a direct caller
 * holds the socket (it polls the socket itself). */
static void arm(struct h2_conn *c)
{
	unsigned want = c->held ? 0 : c->interest;

	if (c->fd >= 0 && want != c->armed && loop_arm_fd(c->loop, c->fd, want) == 0)
		c->armed = want;
}

static void set_interest(struct h2_conn *c, unsigned events)
{
	c->interest = events;
	arm(c);
}

static void call_unlink(struct h2_conn *c, struct h2_call *k)
{
	if (k->prev)
		k->prev->next = k->next;
	else
		c->calls = k->next;
	if (k->next)
		k->next->prev = k->prev;
	k->prev = k->next = NULL;
}

/* The one exit of a call: unlink, disarm, report, free. */
static void call_finish(struct h2_call *k, const struct grpc_reply *r)
{
	struct h2_conn *c = k->c;

	call_unlink(c, k);
	if (!k->started)
		c->queued--;
	loop_del_timer(c->loop, k->timer);
	k->timer = NULL;
	k->done(k->userdata, r);
	if (k->finished)
		*k->finished = true;
	free(k->path);
	free(k->msg);
	free(k);
}

static void call_fail(struct h2_call *k, int code, const char *message)
{
	struct grpc_reply r = { .code = code, .message = message ? message : "" };

	call_finish(k, &r);
}

static void on_grpc_done(void *userdata, const struct grpc_reply *r)
{
	call_finish(userdata, r);
}

static void call_start(struct h2_call *k)
{
	struct h2_conn *c = k->c;
	uint64_t tmo = 0;
	int r;

	if (k->deadline_ms) {
		uint64_t now = loop_now_ms();

		tmo = k->deadline_ms > now ? k->deadline_ms - now : 1;
	}
	k->started = true;
	c->queued--;
	r = grpc_session_submit(c->sess, k->path, k->msg, k->len, tmo, on_grpc_done, k, &k->gc);
	if (r < 0)
		call_fail(k, GRPC_UNAVAILABLE, r == -ENOTCONN ? "connection is going away" : "out of memory");
}

static void start_queued(struct h2_conn *c)
{
	if (c->held)
		return;		/* the direct caller's call goes alone */
	/* Completions may unlink other calls: rescan from the head. */
	while (c->queued && c->state == H2_UP && !grpc_session_closing(c->sess)) {
		struct h2_call *k;

		for (k = c->calls; k && k->started; k = k->next)
			;
		if (!k)
			break;
		call_start(k);
	}
	conn_flush(c);
}

static void fail_queued(struct h2_conn *c, int code, const char *reason)
{
	for (;;) {
		struct h2_call *k;

		for (k = c->calls; k && k->started; k = k->next)
			;
		if (!k)
			break;
		call_fail(k, code, reason);
	}
}

static void set_state(struct h2_conn *c, enum h2_state st, const char *reason)
{
	bool changed = c->state != st;

	c->state = st;
	if (changed && st != H2_CONNECTING && c->opts.on_state)
		c->opts.on_state(c->opts.userdata, st, reason ? reason : "");
}

static void on_fd(struct loop *l, int fd, unsigned events, void *ud);
static void on_backoff(struct loop *l, struct loop_timer *t, void *ud);

static void schedule_backoff(struct h2_conn *c)
{
	if (c->backoff || c->kick)
		return;
	uint64_t ms = h2_backoff_ms(c->opts.backoff_ms, c->opts.backoff_max_ms, 1.6, 0.2,
				    c->attempt, &c->rng);
	c->attempt++;
	c->backoff = loop_add_timer(c->loop, ms, on_backoff, c);
}

static void conn_up(struct h2_conn *c)
{
	int r = grpc_session_new("localhost", &c->sess);

	if (r < 0) {
		conn_close(c, GRPC_UNAVAILABLE, "out of memory", true);
		return;
	}
	c->attempt = 0;
	set_interest(c, LOOP_READ | LOOP_WRITE);
	set_state(c, H2_UP, "");
	start_queued(c);
}

static void conn_connect_now(struct h2_conn *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, r;

	if (c->state != H2_DOWN)
		return;
	strncpy(sa.sun_path, c->path, sizeof(sa.sun_path) - 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(c->reason, sizeof(c->reason), "socket: %s", strerror(errno));
		goto fail;
	}
	r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	/* A unix connect completes at once or is refused; EINPROGRESS is rare
	 * and EAGAIN means a full backlog (nothing pending: try again later). */
	if (r < 0 && errno != EINPROGRESS) {
		snprintf(c->reason, sizeof(c->reason), "connect %s: %s", c->path, strerror(errno));
		close(fd);
		goto fail;
	}
	int rr = loop_add_fd(c->loop, fd, r == 0 ? LOOP_READ : LOOP_WRITE, on_fd, c);
	if (rr < 0) {
		snprintf(c->reason, sizeof(c->reason), "loop: %s", strerror(-rr));
		close(fd);
		goto fail;
	}
	c->fd = fd;
	c->interest = c->armed = r == 0 ? LOOP_READ : LOOP_WRITE;
	c->state = H2_CONNECTING;
	if (r == 0)
		conn_up(c);
	return;

fail:
	set_state(c, H2_DOWN, c->reason);
	fail_queued(c, GRPC_UNAVAILABLE, c->reason);
	schedule_backoff(c);
}

static void on_kick(struct loop *l, struct loop_timer *t, void *ud)
{
	struct h2_conn *c = ud;

	pthread_mutex_lock(&c->mu);
	c->kick = NULL;
	if (c->state == H2_DOWN)
		conn_connect_now(c);
	else if (c->state == H2_UP)
		start_queued(c);
	pthread_mutex_unlock(&c->mu);
}

static void on_backoff(struct loop *l, struct loop_timer *t, void *ud)
{
	struct h2_conn *c = ud;

	pthread_mutex_lock(&c->mu);
	c->backoff = NULL;
	conn_connect_now(c);
	pthread_mutex_unlock(&c->mu);
}

static void kick(struct h2_conn *c)
{
	if (c->kick)
		return;
	if (c->backoff) {
		loop_del_timer(c->loop, c->backoff);
		c->backoff = NULL;
	}
	c->kick = loop_add_timer(c->loop, 0, on_kick, c);
}

void h2_conn_connect(struct h2_conn *c)
{
	pthread_mutex_lock(&c->mu);
	if (c->state == H2_DOWN)
		kick(c);
	pthread_mutex_unlock(&c->mu);
}

/* Tear the connection down. lost: unexpected (schedule a reconnect). */
static void conn_close(struct h2_conn *c, int code, const char *reason, bool lost)
{
	struct grpc_session *s = c->sess;

	if (c->fd >= 0) {
		loop_del_fd(c->loop, c->fd);
		close(c->fd);
		c->fd = -1;
	}
	c->interest = c->armed = 0;
	c->sess = NULL;
	sbuf_reset(&c->out);
	c->out_off = 0;
	snprintf(c->reason, sizeof(c->reason), "%s", reason);	/* reason may be c->lost */
	c->lost[0] = 0;
	set_state(c, H2_DOWN, c->reason);
	if (s) {
		/* Calls on the wire: their grpc_call handles die with s. */
		grpc_session_fail_all(s, code, c->reason);
		grpc_session_free(s);
	}
	if (lost) {
		fail_queued(c, code, c->reason);
		schedule_backoff(c);
	} else if (c->calls)
		kick(c);	/* calls queued behind a GOAWAY: new connection */
}

/* Send what the session has for the socket until it is all sent or the
 * socket is full: 0, or -1 with why set. Whoever drives the socket. */
static int sock_send(struct h2_conn *c, char *why, size_t whysz)
{
	for (;;) {
		if (c->out_off == c->out.len) {
			sbuf_reset(&c->out);
			c->out_off = 0;
			int r = grpc_session_output(c->sess, &c->out);
			if (r < 0) {
				snprintf(why, whysz, "HTTP/2 send failed");
				return -1;
			}
			if (r == 0)
				return 0;
		}
		ssize_t n = send(c->fd, c->out.buf + c->out_off, c->out.len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			snprintf(why, whysz, "send: %s", strerror(errno));
			return -1;
		}
		c->out_off += (size_t)n;
	}
}

/* Feed the session what the socket has (up to 1 MiB a turn): 0, or -1
 * with why set (end of stream, error, protocol error). */
static int sock_recv(struct h2_conn *c, char *why, size_t whysz)
{
	uint8_t buf[65536];

	for (int i = 0; i < 16; i++) {
		ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			snprintf(why, whysz, "%s", n == 0 ? "connection closed by peer" : strerror(errno));
			return -1;
		}
		if (grpc_session_recv(c->sess, buf, (size_t)n) < 0) {
			snprintf(why, whysz, "HTTP/2 protocol error from peer");
			return -1;
		}
		if ((size_t)n < sizeof(buf))
			break;
	}
	return 0;
}

static void conn_flush(struct h2_conn *c)
{
	char why[128];

	if (c->state != H2_UP || c->held)
		return;
	if (sock_send(c, why, sizeof(why)) < 0) {
		conn_close(c, GRPC_UNAVAILABLE, why, true);
		return;
	}
	set_interest(c, c->out_off < c->out.len ? LOOP_READ | LOOP_WRITE : LOOP_READ);
	/* A GOAWAY'd or finished session with nothing left open: close it. */
	if (grpc_session_closing(c->sess) && grpc_session_active(c->sess) == 0
	    && c->out_off == c->out.len)
		conn_close(c, GRPC_UNAVAILABLE, "connection closed (GOAWAY)", false);
}

/* Read what the socket has into the session: 0, or -1 after closing the
 * connection (lost) with the reason: a direct caller's if one gave the
 * socket up (c->lost), else what the read met. Loop thread. */
static int conn_read(struct h2_conn *c)
{
	char why[128];

	if (sock_recv(c, why, sizeof(why)) < 0) {
		conn_close(c, GRPC_UNAVAILABLE, c->lost[0] ? c->lost : why, true);
		return -1;
	}
	return c->state == H2_UP ? 0 : -1;
}

static void on_deadline(struct loop *l, struct loop_timer *t, void *ud);

static void on_fd(struct loop *l, int fd, unsigned events, void *ud)
{
	struct h2_conn *c = ud;

	pthread_mutex_lock(&c->mu);
	if (c->held || fd != c->fd)
		goto out;	/* a direct caller reads it; or reported before a close */
	if (c->state == H2_CONNECTING) {
		int err = 0;
		socklen_t el = sizeof(err);

		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
			err = errno;
		if (err) {
			char why[128];
			snprintf(why, sizeof(why), "connect %s: %s", c->path, strerror(err));
			conn_close(c, GRPC_UNAVAILABLE, why, true);
			goto out;
		}
		conn_up(c);
		goto out;
	}
	if (c->state != H2_UP)
		goto out;
	if (c->adopt) {
		/* A direct call handed over: its deadline is ours now. */
		uint64_t now = loop_now_ms();

		c->adopt = false;
		for (struct h2_call *k = c->calls; k; k = k->next)
			if (k->deadline_ms && !k->timer)
				k->timer = loop_add_timer(c->loop, k->deadline_ms > now
							  ? k->deadline_ms - now : 0, on_deadline, k);
	}
	if ((events & LOOP_READ) && conn_read(c) < 0)
		goto out;
	start_queued(c);	/* calls queued behind a direct call; then flush */
out:
	pthread_mutex_unlock(&c->mu);
}

static void on_deadline(struct loop *l, struct loop_timer *t, void *ud)
{
	struct h2_call *k = ud;
	struct h2_conn *c = k->c;
	char msg[96];

	pthread_mutex_lock(&c->mu);
	k->timer = NULL;	/* the loop frees it after we return */
	snprintf(msg, sizeof(msg), "deadline of %" PRIu64 " ms exceeded", k->timeout_ms);
	if (k->gc) {
		grpc_session_cancel(c->sess, k->gc, GRPC_DEADLINE_EXCEEDED, msg);
		conn_flush(c);
	} else
		call_fail(k, GRPC_DEADLINE_EXCEEDED, msg);
	pthread_mutex_unlock(&c->mu);
}

int h2_conn_new(struct loop *loop, const char *path, const struct h2_conn_opts *opts,
		struct h2_conn **ret_conn)
{
	struct sockaddr_un sa;
	struct h2_conn *c;

	if (!path || !*path || strlen(path) >= sizeof(sa.sun_path))
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->path = strdup(path);
	if (!c->path) {
		free(c);
		return -ENOMEM;
	}
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&c->mu, &ma);
	pthread_mutexattr_destroy(&ma);
	pthread_cond_init(&c->cond, NULL);
	c->loop = loop;
	c->fd = -1;
	c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->efd < 0) {
		pthread_cond_destroy(&c->cond);
		pthread_mutex_destroy(&c->mu);
		free(c->path);
		free(c);
		return -errno;
	}
	c->state = H2_DOWN;
	if (opts)
		c->opts = *opts;
	if (!c->opts.backoff_ms)
		c->opts.backoff_ms = 1000;
	if (!c->opts.backoff_max_ms)
		c->opts.backoff_max_ms = 120000;
	sbuf_init(&c->out, OUT_CAP);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	c->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)(uintptr_t)c ^ 0x9e3779b97f4a7c15ull;
	*ret_conn = c;
	return 0;
}

void h2_conn_free(struct h2_conn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	/* A direct caller polling the socket wakes on the shutdown, ends its
	 * call with CANCELLED and lets go; one about to enter sees freeing. */
	c->freeing = true;
	if (c->held && c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR);
	while (c->held || atomic_load(&c->users))
		pthread_cond_wait(&c->cond, &c->mu);
	c->opts.on_state = NULL;
	/* Calls on the wire: the server is told (RST_STREAM(CANCEL), sent if
	 * the socket takes it now) and stops working for nobody. */
	if (c->sess && c->state == H2_UP) {
		grpc_session_cancel_all(c->sess, GRPC_CANCELLED, "connection shut down");
		conn_flush(c);
	}
	if (c->sess || c->fd >= 0)
		conn_close(c, GRPC_CANCELLED, "connection shut down", false);
	/* Queued calls (never on the wire) end here, each exactly once. */
	while (c->calls)
		call_fail(c->calls, GRPC_CANCELLED, "connection shut down");
	loop_del_timer(c->loop, c->kick);
	loop_del_timer(c->loop, c->backoff);
	sbuf_free(&c->out);
	pthread_mutex_unlock(&c->mu);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->mu);
	close(c->efd);
	free(c->path);
	free(c);
}

int h2_conn_submit(struct h2_conn *c, const char *path, const void *msg, size_t len,
		   uint64_t timeout_ms, grpc_done_fn done, void *userdata, struct h2_call **ret_call)
{
	if (len > GRPC_MAX_MESSAGE)
		return -E2BIG;
	struct h2_call *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->c = c;
	k->path = strdup(path);
	k->msg = malloc(len ? len : 1);
	if (!k->path || !k->msg)
		goto oom;
	if (len)
		memcpy(k->msg, msg, len);
	k->len = len;
	k->done = done;
	k->userdata = userdata;
	k->timeout_ms = timeout_ms;
	pthread_mutex_lock(&c->mu);
	if (timeout_ms) {
		k->deadline_ms = loop_now_ms() + timeout_ms;
		k->timer = loop_add_timer(c->loop, timeout_ms, on_deadline, k);
		if (!k->timer) {
			pthread_mutex_unlock(&c->mu);
			goto oom;
		}
	}
	k->next = c->calls;
	if (c->calls)
		c->calls->prev = k;
	c->calls = k;
	c->queued++;
	if (c->held) {
		uint64_t one = 1;	/* the direct caller hands its call over */
		(void)!write(c->efd, &one, sizeof(one));
	}
	/* Never complete inside submit: starting happens from a loop callback. */
	kick(c);
	if (ret_call)
		*ret_call = k;
	pthread_mutex_unlock(&c->mu);
	return 0;
oom:
	free(k->path);
	free(k->msg);
	free(k);
	return -ENOMEM;
}

void h2_conn_cancel(struct h2_conn *c, struct h2_call *k, int code, const char *message)
{
	if (!k)
		return;
	pthread_mutex_lock(&c->mu);
	if (k->gc) {
		grpc_session_cancel(c->sess, k->gc, code, message);
		conn_flush(c);
	} else
		call_fail(k, code, message);
	pthread_mutex_unlock(&c->mu);
}

enum h2_state h2_conn_state(struct h2_conn *c)
{
	return atomic_load(&c->state);
}


/* ---- a direct call: the caller's thread drives one call alone ---- */

void h2_conn_ref(struct h2_conn *c)
{
	atomic_fetch_add(&c->users, 1);
}

int h2_conn_call(struct h2_conn *c, const char *path, const void *msg, size_t len,
		 uint64_t timeout_ms, grpc_done_fn done, void *userdata)
{
	bool finished = false, lost = false;
	struct h2_call *k;
	int r = -EAGAIN;

	pthread_mutex_lock(&c->mu);
	if (c->freeing || c->state != H2_UP || c->held || c->calls || c->out_off != c->out.len
	    || grpc_session_closing(c->sess) || len > GRPC_MAX_MESSAGE)
		goto out;	/* busy, down or going: the loop's path */
	k = calloc(1, sizeof(*k));
	if (!k)
		goto out;
	k->c = c;
	k->done = done;
	k->userdata = userdata;
	k->finished = &finished;
	k->timeout_ms = timeout_ms;
	k->started = true;
	c->calls = k;
	r = 0;
	int s = grpc_session_submit(c->sess, path, msg, len, timeout_ms, on_grpc_done, k, &k->gc);
	if (s < 0) {
		call_fail(k, GRPC_UNAVAILABLE, s == -ENOTCONN ? "connection is going away" : "out of memory");
		goto out;
	}
	/* From here the loop leaves the socket alone: it only queues calls
	 * (started when we let go) and its timers touch nothing of ours. */
	c->held = true;
	arm(c);
	uint64_t deadline = timeout_ms ? loop_now_ms() + timeout_ms : 0;
	bool handover = false;
	lost = sock_send(c, c->lost, sizeof(c->lost)) < 0;
	while (!finished && !lost) {
		struct pollfd pfd[2] = {
			{ .fd = c->fd, .events = POLLIN | (c->out_off < c->out.len ? POLLOUT : 0) },
			{ .fd = c->efd, .events = POLLIN },
		};
		int wait = -1;

		if (c->queued) {
			/* Company: hand the call to the loop, which multiplexes
			 * it with the others; done runs there. */
			uint64_t v;

			(void)!read(c->efd, &v, sizeof(v));
			k->finished = NULL;
			k->deadline_ms = deadline;
			c->adopt = true;
			handover = true;
			break;
		}

		if (deadline) {
			uint64_t now = loop_now_ms();
			char m[96];

			if (now >= deadline) {
				snprintf(m, sizeof(m), "deadline of %" PRIu64 " ms exceeded", timeout_ms);
				grpc_session_cancel(c->sess, k->gc, GRPC_DEADLINE_EXCEEDED, m);
				lost = sock_send(c, c->lost, sizeof(c->lost)) < 0;	/* the RST_STREAM */
				break;
			}
			wait = deadline - now > 60000 ? 60000 : (int)(deadline - now);
		}
		pthread_mutex_unlock(&c->mu);
		int n = poll(pfd, 2, wait);
		pthread_mutex_lock(&c->mu);
		if (c->freeing) {
			grpc_session_cancel(c->sess, k->gc, GRPC_CANCELLED, "connection shut down");
			break;
		}
		if (n <= 0)
			continue;
		if (pfd[1].revents & POLLIN) {
			uint64_t v;	/* looked at on the next turn */

			(void)!read(c->efd, &v, sizeof(v));
		}
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))
			lost = sock_recv(c, c->lost, sizeof(c->lost)) < 0;
		if (!lost)
			lost = sock_send(c, c->lost, sizeof(c->lost)) < 0;	/* acks, window updates */
	}
	if (lost) {
		/* The loop closes the connection: it finds the socket shut and
		 * reports c->lost, then reconnects as after any loss. */
		if (!finished)
			grpc_session_cancel(c->sess, k->gc, GRPC_UNAVAILABLE, c->lost);
		shutdown(c->fd, SHUT_RDWR);
	}
	c->held = false;
	/* Wake the loop if it has work here: calls queued meanwhile, bytes
	 * unsent, a GOAWAY to act on, a lost socket. */
	if (c->queued || c->out_off < c->out.len || grpc_session_closing(c->sess) || lost
	    || handover)
		c->interest |= LOOP_WRITE;
	arm(c);
	if (c->freeing)
		pthread_cond_broadcast(&c->cond);
out:
	if (atomic_fetch_sub(&c->users, 1) == 1 && c->freeing)
		pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->mu);
	return r;
}
