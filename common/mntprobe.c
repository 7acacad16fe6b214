/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * mntprobe: a statfs of a mount made by a child process holding nothing of
 * the daemon's, so that no thread of the daemon makes a request on its own
 * mount; see mntprobe.h.
 *
 * Must not know: FUSE's protocol, the daemon.
 */
#include "mntprobe.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

/* The child: async-signal-safe calls only (the daemon has many threads).
 * It keeps the pipe's write end as fd 0 and closes everything else, so it
 * holds no descriptor of the daemon (its /dev/fuse above all). */
static void child(int wfd, const char *path, long f_type)
{
	struct statfs st;
	char c = '0';

	if (dup2(wfd, 0) < 0 || close_range(1, ~0U, 0) < 0)
		_exit(1);
	if (statfs(path, &st) == 0 && (long)st.f_type == f_type)
		c = '1';
	if (write(0, &c, 1) < 0)
		_exit(1);
	_exit(0);
}

/* Reap the child if it has ended; whether none is left. */
static bool reaped(struct mntprobe *p, bool wait)
{
	pid_t r;

	if (p->pid < 0)
		return true;
	do
		r = waitpid(p->pid, NULL, wait ? 0 : WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return false;
	p->pid = -1;
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	return true;
}

static long ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

bool mntprobe_statfs(struct mntprobe *p, const char *path, long f_type, int timeout_ms)
{
	struct timespec t0;
	int fds[2], r;
	char c = 0;

	if (!reaped(p, false))
		return false;	/* the last one still waits: no answer yet */
	if (pipe2(fds, O_CLOEXEC) < 0) {
		log_warn("watchdog probe: pipe: %s", strerror(errno));
		return false;
	}
	p->pid = fork();
	if (p->pid == 0)
		child(fds[1], path, f_type);
	close(fds[1]);
	if (p->pid < 0) {
		log_warn("watchdog probe: fork: %s", strerror(errno));
		close(fds[0]);
		return false;
	}
	p->fd = fds[0];
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		long left = timeout_ms - ms_since(&t0);
		struct pollfd pfd = { .fd = p->fd, .events = POLLIN };

		if (left <= 0)
			return false;	/* left for the next call to reap */
		r = poll(&pfd, 1, (int)left);
		if (r > 0)
			break;
		if (r < 0 && errno != EINTR)
			return false;
	}
	do
		r = (int)read(p->fd, &c, 1);
	while (r < 0 && errno == EINTR);
	/* it has written (or ended): it exits at once */
	reaped(p, true);
	return r == 1 && c == '1';
}

void mntprobe_end(struct mntprobe *p)
{
	if (p->pid > 0)
		kill(p->pid, SIGKILL);
	reaped(p, true);
}
