/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_lxc_watch: the LXC driver's watcher thread (lxc-watch.c) against a
 * real kernfs file of the cgroup v2 hierarchy, as root. It watches a
 * process in a child cgroup it makes under the cgroup2 mount (the unified
 * root on a v2 host, /sys/fs/cgroup/unified on this hybrid one) with the
 * driver in its v2 mode, and counts how often the watcher thread wakes:
 * a quiet watcher wakes for events only, one that never re-reads the file
 * it polls wakes without end. The file is the child's cgroup.events
 * (NODEFS_LXC_V2_EVENTS_FILE, a test hook: the hybrid mount has no memory
 * controller, hence no memory.events), which kernfs polls exactly as it
 * polls memory.events; freezing and thawing the child changes it.
 * No liblxc call, no container: exit 77 without root, a cgroup2 mount or
 * the test hooks.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../test_time.h"
#include "lxc-internal.h"
#include "nodefs-config.h"

/* A quiet second's wake-ups; a spinning watcher makes hundreds of
 * thousands. Generous: a few stray wake-ups are not the defect. */
#define QUIET_WAKEUPS_MAX 5

static char v2_root[64];
static char cgdir[PATH_MAX];
static pid_t child = -1;
static struct rt_lxc *H;
static struct rt_lxc_watch *W;

static bool is_cgroup2(const char *path)
{
	struct statfs sf;

	return statfs(path, &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
}

static int find_v2_root(void)
{
	if (is_cgroup2("/sys/fs/cgroup"))
		snprintf(v2_root, sizeof(v2_root), "/sys/fs/cgroup");
	else if (is_cgroup2("/sys/fs/cgroup/unified"))
		snprintf(v2_root, sizeof(v2_root), "/sys/fs/cgroup/unified");
	else
		return -ENOENT;
	return 0;
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX + 32];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text), "write %s: %s", path,
		     strerror(errno));
	close(fd);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void setup(void)
{
	char pid[32];
	int pidfd;

	cr_assert_eq(find_v2_root(), 0);
	snprintf(cgdir, sizeof(cgdir), "%s/nodefs-watch-test.%d", v2_root, (int)getpid());
	cr_assert_eq(mkdir(cgdir, 0755), 0, "mkdir %s: %s", cgdir, strerror(errno));
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		for (;;)
			pause();
	}
	snprintf(pid, sizeof(pid), "%d\n", (int)child);
	write_file(cgdir, "cgroup.procs", pid);

	/* The driver's v2 mode on this mount, as rt_lxc_cg_probe sets it on a
	 * v2 host; the paths come from the child's /proc/PID/cgroup. */
	H = calloc(1, sizeof(*H));
	cr_assert_not_null(H);
	H->cg.mode = RT_LXC_CG_V2;
	snprintf(H->cg.v2_root, sizeof(H->cg.v2_root), "%s", v2_root);
	pthread_mutex_init(&H->meta_lock, NULL);
	setenv("NODEFS_LXC_V2_EVENTS_FILE", "cgroup.events", 1);
	cr_assert_eq(rt_lxc_watch_new(H, &W), 0);
	pidfd = (int)syscall(SYS_pidfd_open, child, 0);
	cr_assert_geq(pidfd, 0, "pidfd_open: %s", strerror(errno));
	cr_assert_eq(rt_lxc_watch_add(W, "watched", pidfd, child, -1), 0);
}

static void teardown(void)
{
	if (W) {
		rt_lxc_watch_del(W, "watched");
		rt_lxc_watch_free(W);
		W = NULL;
	}
	if (child > 0) {
		kill(child, SIGKILL);
		if (cgdir[0])
			write_file(cgdir, "cgroup.freeze", "0\n");
		waitpid(child, NULL, 0);
		child = -1;
	}
	if (cgdir[0]) {
		/* the cgroup empties a moment after its last process is reaped */
		for (int i = 0; i < 200 && rmdir(cgdir) < 0 && errno == EBUSY; i++)
			sleep_ms(10);
		cgdir[0] = '\0';
	}
	if (H) {
		pthread_mutex_destroy(&H->meta_lock);
		free(H);
		H = NULL;
	}
}

TestSuite(lxc_watch, .init = setup, .fini = teardown, .timeout = 60);

/* The watcher's wake-ups over one quiet second. */
static uint64_t quiet_second_wakeups(void)
{
	uint64_t before = rt_lxc_watch_wakeups(W);

	sleep_ms(1000);
	return rt_lxc_watch_wakeups(W) - before;
}

/* Wait for the watcher to wake past n: it saw the file change. */
static bool woke_past(uint64_t n)
{
	double end = now_s() + SCALED(5.0);

	while (now_s() < end) {
		if (rt_lxc_watch_wakeups(W) > n)
			return true;
		sleep_ms(5);
	}
	return false;
}

Test(lxc_watch, v2_events_file_wakes_only_on_change)
{
	uint64_t n;

	/* Idle from the start: the descriptor it opened has not read the
	 * file yet, and kernfs counts that as an unseen event. */
	n = quiet_second_wakeups();
	cr_assert_leq(n, QUIET_WAKEUPS_MAX, "idle watcher woke %llu times in a second",
		      (unsigned long long)n);

	/* Each change of cgroup.events wakes it, and it goes quiet again. */
	for (int i = 0; i < 3; i++) {
		n = rt_lxc_watch_wakeups(W);
		write_file(cgdir, "cgroup.freeze", "1\n");
		cr_assert(woke_past(n), "freeze %d: no wake-up", i);
		n = rt_lxc_watch_wakeups(W);
		write_file(cgdir, "cgroup.freeze", "0\n");
		cr_assert(woke_past(n), "thaw %d: no wake-up", i);
	}
	n = quiet_second_wakeups();
	cr_assert_leq(n, QUIET_WAKEUPS_MAX, "watcher woke %llu times in the second after events",
		      (unsigned long long)n);
	/* still watched: no event was taken for a death */
	cr_assert(rt_lxc_watch_has(W, "watched"));
}

int main(int argc, char *argv[])
{
	struct criterion_test_set *tests;
	int result = 0;

	if (!NODEFS_TEST_HOOKS) {
		fprintf(stderr, "skip: built without test hooks (-Dtest_hooks=true)\n");
		return 77;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "skip: needs root\n");
		return 77;
	}
	if (find_v2_root() < 0) {
		fprintf(stderr, "skip: no cgroup2 mount at /sys/fs/cgroup or /sys/fs/cgroup/unified\n");
		return 77;
	}
	tests = criterion_initialize();
	if (criterion_handle_args(argc, argv, true))
		result = !criterion_run_all_tests(tests);
	criterion_finalize(tests);
	return result;
}
