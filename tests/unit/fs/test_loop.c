/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of fs/fs-loop.c's stop signals on a real mount (root and
 * /dev/fuse; a skip, exit 77, otherwise): a SIGTERM ends fs_serve when the
 * thread waiting in it takes the signal, and when another thread does.
 * The daemon's container actions run with no signal blocked (liblxc and
 * Docker's children inherit their mask), so a process-directed SIGTERM may
 * be taken there: libfuse 3.14's handler then only marked the session
 * ended, the waiting thread slept on and the leader stayed in read(); the
 * daemon never stopped (containers-podman-2, once in some hundred runs).
 */
#define FUSE_USE_VERSION 312

#include <criterion/criterion.h>
#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs-internal.h"

static bool never_waits(void *ctx, const void *mem, size_t len)
{
	(void)ctx;
	(void)mem;
	(void)len;
	return false;
}

static void getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st = { .st_ino = ino, .st_mode = S_IFDIR | 0755, .st_nlink = 2 };

	(void)fi;
	fuse_reply_attr(req, &st, 1.0);
}

static const struct fuse_lowlevel_ops ops = { .getattr = getattr };

struct mount {
	char dir[64];
	struct fuse_session *se;
};

/* A session of ops mounted on a fresh directory; skips without root or
 * /dev/fuse (CI runs as root, where a skip fails the run). */
static void mount_or_skip(struct mount *m)
{
	char *argv[] = { "test_loop", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(1, argv);

	if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) != 0) {
		fprintf(stderr, "SKIP: needs root and /dev/fuse\n");
		exit(77);
	}
	snprintf(m->dir, sizeof(m->dir), "/tmp/nodefs-test-loop.XXXXXX");
	cr_assert_not_null(mkdtemp(m->dir));
	m->se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	fuse_opt_free_args(&args);
	cr_assert_not_null(m->se);
	cr_assert_eq(fuse_session_mount(m->se, m->dir), 0, "cannot mount on %s", m->dir);
	cr_assert_eq(fs_serve_signals(m->se), 0);
}

static void unmount(struct mount *m)
{
	fs_serve_signals_remove();
	fuse_session_unmount(m->se);
	fuse_session_destroy(m->se);
	rmdir(m->dir);
}

static pthread_mutex_t served_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t served_cond = PTHREAD_COND_INITIALIZER;
static bool served;

static void serve_returned(void)
{
	pthread_mutex_lock(&served_lock);
	served = true;
	pthread_cond_broadcast(&served_cond);
	pthread_mutex_unlock(&served_lock);
}

/* Once the loop answers, SIGTERM; a loop still serving 20 s later fails
 * the case, and its mount is detached first (the process's end then
 * closes the connection) so no dead mount is left behind. */
static void *stat_then_kill(void *arg)
{
	struct mount *m = arg;
	struct timespec t;
	struct stat st;
	bool done;

	cr_assert_eq(stat(m->dir, &st), 0, "stat of the mount: %s", strerror(errno));
	kill(getpid(), SIGTERM);
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += 20;
	pthread_mutex_lock(&served_lock);
	while (!served && pthread_cond_timedwait(&served_cond, &served_lock, &t) == 0)
		;
	done = served;
	pthread_mutex_unlock(&served_lock);
	if (!done) {
		fprintf(stderr, "fs_serve still serving 20 s after SIGTERM\n");
		umount2(m->dir, MNT_DETACH);
		rmdir(m->dir);
		_exit(1);
	}
	return NULL;
}

/* Sleeps with nothing blocked, as a container action does: the only
 * thread that may take a process-directed SIGTERM. */
static void *taker(void *arg)
{
	sigset_t none;

	(void)arg;
	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, NULL);
	for (;;)
		pause();
	return NULL;
}

static void block_stop_signals(void)
{
	sigset_t block;

	sigemptyset(&block);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, NULL);
}

static void unblock_stop_signals(void)
{
	sigset_t none;

	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, NULL);
}

Test(loop, sigterm_to_the_waiting_thread_ends_the_session)
{
	struct mount m;
	pthread_t k;

	mount_or_skip(&m);
	block_stop_signals();	/* the killer */
	cr_assert_eq(pthread_create(&k, NULL, stat_then_kill, &m), 0);
	unblock_stop_signals();	/* the thread that waits in fs_serve */
	cr_assert_eq(fs_serve(m.se, never_waits, NULL, 4, 2), 0);
	serve_returned();
	pthread_join(k, NULL);
	unmount(&m);
}

Test(loop, sigterm_taken_by_another_thread_ends_the_session)
{
	struct mount m;
	pthread_t t, k;

	mount_or_skip(&m);
	/* this thread, the killer and the loop's workers block the stop
	 * signals: only the taker can take SIGTERM */
	block_stop_signals();
	cr_assert_eq(pthread_create(&t, NULL, taker, NULL), 0);
	cr_assert_eq(pthread_create(&k, NULL, stat_then_kill, &m), 0);
	cr_assert_eq(fs_serve(m.se, never_waits, NULL, 4, 2), 0);
	serve_returned();
	pthread_join(k, NULL);
	pthread_cancel(t);
	pthread_join(t, NULL);
	unmount(&m);
}
