/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_lxc_lifecycle: a container's life through the LXC driver: create,
 * start, exec (its environment, not the caller's), a clean stop, restart and
 * destroy with their events; pause and resume (and a stop or kill while
 * paused); list() showing only containers nodefs marked, with a foreign
 * container left untouched; a driver reopened over running containers; ten
 * containers made, started and destroyed at once. It reaches the driver only
 * through rt_lxc_ops (and the pure helpers of lxc-internal.h) and the fixture
 * only through lxc_test.h.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/stat.h>

#include "lxc_test.h"

/* The inode of /proc/PID/ns/NAME: which namespace pid is in. */
static ino_t ns_of(pid_t pid, const char *name)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, name);
	cr_assert_eq(stat(path, &st), 0, "stat %s", path);
	return st.st_ino;
}

Test(lxc, lifecycle_exec_stop_destroy)
{
	struct rt_spec s;
	struct sbuf out = SBUF_INIT(1u << 20);
	struct nerr err = { 0 };
	struct rt_status st;
	char *echo[] = { "echo", "hi", NULL };
	char *exit3[] = { "sh", "-c", "exit 3", NULL };
	char *errout[] = { "sh", "-c", "echo oops >&2; exit 0", NULL };
	double t0;
	int i;

	struct rt_kv env[] = { { (char *)"GREETING", (char *)"salut" } };
	char *printenv[] = { "sh", "-c", "echo $GREETING ${NODEFS_SECRET:-clean}", NULL };

	spec_init(&s, "life");
	s.env = env;
	s.nenv = 1;
	make(&s);
	st = status_of("life");
	cr_assert_eq(st.state, RT_STATE_CREATED);
	cr_assert_eq(ops->start(H, "life", &err), 0, "start: %s", err.msg);
	st = status_of("life");
	cr_assert_eq(st.state, RT_STATE_RUNNING);
	cr_assert_gt(st.pid, 0);
	cr_assert_eq(kill(st.pid, 0), 0);
	cr_assert_gt(st.started_at, 0);
	cr_assert_geq(wait_event(RT_EV_START, "life", 2), 0);
	cr_assert_eq(ops->start(H, "life", &err), -EBUSY);
	/* network_type = none (the default): the host's network namespace,
	 * as nodefs(5) says; its own pid namespace */
	cr_assert_eq(ns_of(st.pid, "net"), ns_of(getpid(), "net"));
	cr_assert_neq(ns_of(st.pid, "pid"), ns_of(getpid(), "pid"));

	cr_assert_eq(exec_in("life", echo, &out), 0);
	cr_assert_str_eq(out.buf, "hi\n");
	cr_assert_eq(exec_in("life", exit3, &out), 3);
	/* The container's environment, not the caller's. */
	setenv("NODEFS_SECRET", "leaked", 1);
	cr_assert_eq(exec_in("life", printenv, &out), 0);
	cr_assert_str_eq(out.buf, "salut clean\n");
	cr_assert_eq(exec_in("life", errout, &out), 0);
	cr_assert_str_eq(out.buf, "oops\n");

	/* A clean halt of the busybox init: quick without udhcpc. */
	t0 = now_s();
	cr_assert_eq(ops->stop(H, "life", 10, &err), 0, "stop: %s", err.msg);
	cr_assert_lt(now_s() - t0, SCALED(5.0), "clean stop took %.1f s", now_s() - t0);
	i = wait_event(RT_EV_DIE, "life", 2);
	cr_assert_geq(i, 0);
	st = status_of("life");
	cr_assert_eq(st.state, RT_STATE_EXITED);
	cr_assert_eq(st.pid, 0);
	cr_assert_eq(st.exit_code, evs.ev[i].exit_code);
	/* A halt is SIGINT to init's parent: 128 + 2. */
	cr_assert_eq(st.exit_code, 130, "exit %d after a clean halt", st.exit_code);
	cr_assert_gt(st.finished_at, 0);
	cr_assert_eq(ops->stop(H, "life", 10, &err), 0, "stop of a stopped container");
	cr_assert_eq(ops->exec(H, "life", echo, &out, &i, &err), -EBUSY);

	/* It starts again after a stop. */
	cr_assert_eq(ops->start(H, "life", &err), 0, "restart: %s", err.msg);
	cr_assert_eq(status_of("life").state, RT_STATE_RUNNING);

	cr_assert_eq(ops->destroy(H, "life", &err), 0, "destroy: %s", err.msg);
	cr_assert_geq(wait_event(RT_EV_DESTROY, "life", 2), 0);
	cr_assert_eq(ops->inspect(H, "life", &st, &err), -ENOENT);
	cr_assert_eq(ops->destroy(H, "life", &err), 0, "destroy of a gone container");
	cr_assert_eq(count_entries(lxcpath), 0, "lxcpath not empty after destroy");
	sbuf_free(&out);
}

Test(lxc, pause_resume)
{
	struct rt_spec s;
	struct nerr err = { 0 };
	struct sbuf out = SBUF_INIT(4096);
	char *echo[] = { "echo", "x", NULL };
	int code;

	spec_init(&s, "pz");
	make_start(&s);
	cr_assert_eq(ops->pause(H, "pz", &err), 0, "pause: %s", err.msg);
	cr_assert_eq(status_of("pz").state, RT_STATE_PAUSED);
	cr_assert_geq(wait_event(RT_EV_PAUSE, "pz", 2), 0);
	cr_assert_eq(ops->exec(H, "pz", echo, &out, &code, &err), -EBUSY);
	cr_assert_eq(ops->resume(H, "pz", &err), 0, "resume: %s", err.msg);
	cr_assert_eq(status_of("pz").state, RT_STATE_RUNNING);
	cr_assert_geq(wait_event(RT_EV_UNPAUSE, "pz", 2), 0);
	cr_assert_eq(exec_in("pz", echo, &out), 0);
	/* A paused container still stops. */
	cr_assert_eq(ops->pause(H, "pz", &err), 0);
	cr_assert_eq(ops->stop(H, "pz", 5, &err), 0, "stop paused: %s", err.msg);
	cr_assert_eq(status_of("pz").state, RT_STATE_EXITED);
	/* Killed while paused, it dies as it thaws: a stop then succeeds
	 * (the load test met "unfreeze failed" as EIO here). */
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(ops->start(H, "pz", &err), 0, "start: %s", err.msg);
		cr_assert_eq(ops->pause(H, "pz", &err), 0, "pause: %s", err.msg);
		cr_assert_eq(ops->kill(H, "pz", SIGKILL, &err), 0, "kill: %s", err.msg);
		cr_assert_eq(ops->stop(H, "pz", 0, &err), 0, "stop killed-paused: %s", err.msg);
		cr_assert_eq(status_of("pz").state, RT_STATE_EXITED);
	}
	sbuf_free(&out);
}

Test(lxc, list_only_marked_and_foreign_untouched)
{
	struct rt_spec s;
	struct rt_listing *l = NULL;
	size_t n = 0;
	struct nerr err = { 0 };
	struct rt_status st;
	char *echo[] = { "echo", NULL };
	struct sbuf out = SBUF_INIT(4096);
	int code;

	spec_init(&s, "mine");
	make_start(&s);
	cr_assert_eq(run_cmd("lxc-create -q -P '%s' -n foreign -t '%s/lxc-busybox' >/dev/null 2>&1",
			     lxcpath, templates()), 0);
	cr_assert_eq(ops->list(H, &l, &n, &err), 0, "list: %s", err.msg);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(l[0].id, "mine");
	cr_assert_str_eq(l[0].name, "mine");
	cr_assert_eq(l[0].status.state, RT_STATE_RUNNING);
	rt_listing_free(l, n);

	cr_assert_eq(ops->inspect(H, "foreign", &st, &err), -ENOENT);
	cr_assert(strstr(err.msg, "not managed"), "%s", err.msg);
	cr_assert_eq(ops->start(H, "foreign", &err), -ENOENT);
	cr_assert_eq(ops->exec(H, "foreign", echo, &out, &code, &err), -ENOENT);
	cr_assert_eq(ops->destroy(H, "foreign", &err), -ENOENT);
	cr_assert_eq(ops->create(H, &(struct rt_spec){ .name = "foreign", .template_name = "busybox" },
				 NULL, &(char *){ NULL }, &err), -EEXIST);
	char cfg[700];

	snprintf(cfg, sizeof(cfg), "%s/foreign/config", lxcpath);
	cr_assert_eq(access(cfg, F_OK), 0, "foreign container was touched");
	sbuf_free(&out);
}

#define NPAR 10
static void *par_create_start(void *arg)
{
	long i = (long)arg;
	char name[16];
	struct rt_spec s = { .template_name = "busybox", .name = name };
	struct nerr err = { 0 };
	char *id = NULL;

	snprintf(name, sizeof(name), "par%ld", i);
	if (ops->create(H, &s, NULL, &id, &err) < 0) {
		fprintf(stderr, "create %s: %s\n", name, err.msg);
		return (void *)1;
	}
	free(id);
	if (ops->start(H, name, &err) < 0) {
		fprintf(stderr, "start %s: %s\n", name, err.msg);
		return (void *)1;
	}
	return NULL;
}

static void *par_destroy(void *arg)
{
	char name[16];
	struct nerr err = { 0 };

	snprintf(name, sizeof(name), "par%ld", (long)arg);
	if (ops->destroy(H, name, &err) < 0) {
		fprintf(stderr, "destroy %s: %s\n", name, err.msg);
		return (void *)1;
	}
	return NULL;
}

Test(lxc, ten_in_parallel, .timeout = 300)
{
	pthread_t th[NPAR];
	void *res;
	char name[16];
	struct rt_listing *l = NULL;
	size_t n = 0;
	struct nerr err = { 0 };
	int failed = -1;

	for (long i = 0; i < NPAR; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, par_create_start, (void *)i), 0);
	/* every create joined before any verdict: the teardown's wipe must
	 * not race with creates still under way */
	for (int i = 0; i < NPAR; i++) {
		pthread_join(th[i], &res);
		if (res && failed < 0)
			failed = i;
	}
	cr_assert_eq(failed, -1, "container %d failed", failed);
	for (int i = 0; i < NPAR; i++) {
		struct rt_status st;

		snprintf(name, sizeof(name), "par%d", i);
		st = status_of(name);
		cr_assert_eq(st.state, RT_STATE_RUNNING, "%s not running", name);
		cr_assert_gt(st.pid, 0);
		cr_assert_geq(wait_event(RT_EV_START, name, 1), 0);
	}
	cr_assert_eq(ops->list(H, &l, &n, &err), 0);
	cr_assert_eq(n, NPAR);
	rt_listing_free(l, n);
	for (long i = 0; i < NPAR; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, par_destroy, (void *)i), 0);
	for (int i = 0; i < NPAR; i++) {
		pthread_join(th[i], &res);
		if (res && failed < 0)
			failed = i;
	}
	cr_assert_eq(failed, -1, "destroy %d failed", failed);
	cr_assert_eq(count_entries(lxcpath), 0, "lxcpath not empty after destroying all");
}

Test(lxc, recovery_after_reopen)
{
	struct rt_spec s;
	struct nerr err = { 0 };
	struct rt_kv kv[] = { { (char *)"lxcpath", lxcpath } };
	struct rt_config cfg = { kv, 1 };
	struct rt_listing *l = NULL;
	size_t n = 0;
	int i;

	spec_init(&s, "survivor");
	make_start(&s);
	ops->close(H);
	H = NULL;
	evs.n = 0;
	cr_assert_eq(ops->open(&cfg, &H, &err), 0, "%s", err.msg);
	cr_assert_eq(ops->list(H, &l, &n, &err), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(l[0].status.state, RT_STATE_RUNNING);
	cr_assert_gt(l[0].status.pid, 0);
	rt_listing_free(l, n);
	cr_assert_eq(ops->watch(H, on_event, NULL, &err), 0);
	cr_assert_eq(ops->kill(H, "survivor", SIGKILL, &err), 0, "%s", err.msg);
	i = wait_event(RT_EV_DIE, "survivor", 2);
	cr_assert_geq(i, 0, "the reopened driver missed the death");
	cr_assert_eq(evs.ev[i].exit_code, 137);
}
