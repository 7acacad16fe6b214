/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * notify: the sd_notify datagram protocol and the thread that speaks it;
 * see notify.h. Knows systemd's environment variables and message keys,
 * nothing of what the daemon does beyond its hooks' answers.
 */
#include "notify.h"
#include "nerr.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define STATUS_MAX 256
#define MSG_MAX 1024

struct notify {
	struct notify_hooks h;
	int sock;			/* -1: not under systemd */
	struct sockaddr_un addr;
	socklen_t addrlen;
	uint64_t watchdog_usec;		/* 0: no watchdog for us */
	int efd;			/* wakes the thread: reload or stop */
	atomic_bool reload_asked;
	atomic_bool stop;
	atomic_bool stopping;		/* notify_stopping was called */
	pthread_t thread;
	bool running;
};

bool notify_enabled(const struct notify *n)
{
	return n && n->sock >= 0;
}

uint64_t notify_watchdog_usec(const struct notify *n)
{
	return n ? n->watchdog_usec : 0;
}

/* The watchdog settings of the environment, for this process. */
static uint64_t watchdog_from_env(void)
{
	const char *us = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	unsigned long long v;
	char *end;

	if (!us || !*us)
		return 0;
	if (pid && *pid) {
		errno = 0;
		v = strtoull(pid, &end, 10);
		if (errno || *end || v != (unsigned long long)getpid())
			return 0;	/* for another process */
	}
	errno = 0;
	v = strtoull(us, &end, 10);
	if (errno || *end || v == 0)
		return 0;
	return v;
}

int notify_new(const struct notify_hooks *h, struct notify **ret, struct nerr *err)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct notify *n = calloc(1, sizeof(*n));
	size_t l;

	if (!n)
		return nerr_set(err, ENOMEM, "out of memory");
	n->h = *h;
	n->sock = -1;
	n->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (n->efd < 0) {
		int e = errno;

		free(n);
		return nerr_set(err, e, "eventfd: %s", strerror(e));
	}
	if (path && *path) {
		l = strlen(path);
		if ((path[0] != '/' && path[0] != '@') || l >= sizeof(n->addr.sun_path)) {
			notify_free(n);
			return nerr_set(err, EINVAL, "NOTIFY_SOCKET=%s: not a unix socket path "
					"(absolute, or @abstract)", path);
		}
		n->addr.sun_family = AF_UNIX;
		memcpy(n->addr.sun_path, path, l);
		if (path[0] == '@')
			n->addr.sun_path[0] = '\0';	/* the abstract namespace */
		/* an abstract name is exactly its bytes: no trailing NUL */
		n->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + l +
					 (path[0] == '@' ? 0 : 1));
		n->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (n->sock < 0) {
			int e = errno;

			notify_free(n);
			return nerr_set(err, e, "notify socket: %s", strerror(e));
		}
		n->watchdog_usec = watchdog_from_env();
	}
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	*ret = n;
	return 0;
}

static int send_text(struct notify *n, const char *text, size_t len)
{
	ssize_t w;

	if (!n || n->sock < 0)
		return 0;
	do
		w = sendto(n->sock, text, len, MSG_NOSIGNAL, (const struct sockaddr *)&n->addr,
			   n->addrlen);
	while (w < 0 && errno == EINTR);
	return w < 0 ? -errno : 0;
}

int notify_send(struct notify *n, const char *fmt, ...)
{
	char msg[MSG_MAX];
	va_list ap;
	int l;

	if (!n || n->sock < 0)
		return 0;
	va_start(ap, fmt);
	l = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (l < 0)
		return -EINVAL;
	if ((size_t)l >= sizeof(msg))
		l = sizeof(msg) - 1;	/* a STATUS= text cut short, still one line */
	return send_text(n, msg, (size_t)l);
}

static void wake(struct notify *n)
{
	uint64_t one = 1;
	ssize_t w = write(n->efd, &one, sizeof(one));

	(void)w;	/* a full counter already wakes the thread */
}

void notify_stopping(struct notify *n, const char *status)
{
	if (!n)
		return;
	atomic_store(&n->stopping, true);
	notify_send(n, "STOPPING=1\nSTATUS=%s", status);
	wake(n);
}

void notify_reload(struct notify *n)
{
	if (!n)
		return;
	atomic_store(&n->reload_asked, true);
	wake(n);
}

static uint64_t now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static void *notify_main(void *arg)
{
	struct notify *n = arg;
	char status[STATUS_MAX], sent[STATUS_MAX] = "";
	uint64_t period = n->watchdog_usec / 2, next_ping = 0, progress, last_progress = UINT64_MAX;
	bool ready_sent = false;

	pthread_setname_np(pthread_self(), "nodefs-sd");
	if (period)
		next_ping = now_us();	/* the first ping as soon as the daemon is alive */
	while (!atomic_load(&n->stop)) {
		enum notify_phase ph = NOTIFY_STOPPING;
		struct pollfd pfd = { .fd = n->efd, .events = POLLIN };
		int timeout = -1;
		uint64_t now;

		if (atomic_exchange(&n->reload_asked, false) && n->h.reload &&
		    !atomic_load(&n->stopping)) {
			/* systemd shows the unit reloading until READY=1 again */
			notify_send(n, "RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long)now_us());
			n->h.reload(n->h.ctx);
			if (ready_sent)
				notify_send(n, "READY=1");
		}
		if (!atomic_load(&n->stopping)) {
			status[0] = '\0';
			progress = 0;
			ph = n->h.phase(n->h.ctx, status, sizeof(status), &progress);
		}
		if (ph == NOTIFY_STARTING) {
			if (strcmp(status, sent) != 0) {
				notify_send(n, "STATUS=%s", status);
				snprintf(sent, sizeof(sent), "%s", status);
			}
			if (progress != last_progress) {
				/* only a start that moves is given more time */
				notify_send(n, "EXTEND_TIMEOUT_USEC=%llu",
					    (unsigned long long)NOTIFY_EXTEND_USEC);
				last_progress = progress;
			}
			timeout = NOTIFY_START_TICK_MS;
		} else if (ph == NOTIFY_READY && (!ready_sent || strcmp(status, sent) != 0)) {
			/* READY=1 once the daemon answers: the mount serves */
			if (ready_sent || n->h.alive(n->h.ctx)) {
				notify_send(n, "%sSTATUS=%s", ready_sent ? "" : "READY=1\n", status);
				snprintf(sent, sizeof(sent), "%s", status);
				ready_sent = true;
			} else {
				timeout = NOTIFY_START_TICK_MS;	/* look again soon */
			}
		}
		now = now_us();
		if (period && now >= next_ping && !atomic_load(&n->stop)) {
			/* while it stops the daemon is not asked: the FUSE loop
			 * has ended on purpose, and the stop is bounded */
			if (atomic_load(&n->stopping) || n->h.alive(n->h.ctx))
				notify_send(n, "WATCHDOG=1");
			now = now_us();
			next_ping += period;
			if (next_ping <= now)
				next_ping = now + period;
		}
		if (period) {
			uint64_t ms = next_ping > now ? (next_ping - now + 999) / 1000 : 0;

			if (timeout < 0 || ms < (uint64_t)timeout)
				timeout = (int)ms;
		}
		if (poll(&pfd, 1, timeout) > 0) {
			uint64_t v;
			ssize_t r = read(n->efd, &v, sizeof(v));

			(void)r;
		}
	}
	return NULL;
}

int notify_start(struct notify *n, struct nerr *err)
{
	sigset_t block, old;
	int r;

	/* the stop and reload signals go to the main thread */
	sigemptyset(&block);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGQUIT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	r = pthread_create(&n->thread, NULL, notify_main, n);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0)
		return nerr_set(err, r, "cannot start the notify thread: %s", strerror(r));
	n->running = true;
	return 0;
}

void notify_free(struct notify *n)
{
	if (!n)
		return;
	if (n->running) {
		atomic_store(&n->stop, true);
		wake(n);
		pthread_join(n->thread, NULL);
	}
	if (n->sock >= 0)
		close(n->sock);
	close(n->efd);
	free(n);
}
