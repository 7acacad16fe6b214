/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lxc_test: the fixture the LXC driver's tests share (test_lxc_*.c, one
 * program, test_lxc_driver): rt_lxc_ops against real liblxc, as root, in a
 * private lxcpath under one temporary root per run. Each test gets its own
 * lxcpath and driver handle, with the driver's events recorded; main()
 * exits 77 when liblxc cannot start a container here, and removes every
 * container and directory the run made even when a test crashed. liblxc's
 * create and start run in nodefs's helper process ($NODEFS_BIN, as nodefs
 * runs them). Knows no test.
 */
#include <criterion/criterion.h>
#include <criterion/options.h>
#include <dirent.h>
#include <errno.h>
#include <lxc/lxccontainer.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lxc_test.h"

/* liblxc 5.0.2 leaks a short string in every c->create(); not ours to fix.
 * Read by LeakSanitizer in sanitizer builds, unused otherwise. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:liblxc.so\n";
}

static char run_root[256];	/* /tmp/nodefs-lxc-test.XXXXXX, made by main */

/* ---- per-test fixture: its own lxcpath and driver handle ---------------- */

char lxcpath[512];
void *H;
const struct runtime_ops *const ops = &rt_lxc_ops;

struct lxc_test_events evs = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER };

void on_event(void *ctx, const struct rt_event *ev)
{
	pthread_mutex_lock(&evs.lock);
	if (evs.n < EV_MAX) {
		evs.ev[evs.n] = *ev;
		snprintf(evs.id[evs.n], sizeof(evs.id[0]), "%s", ev->id ? ev->id : "");
		evs.ev[evs.n].id = evs.id[evs.n];
		clock_gettime(CLOCK_MONOTONIC, &evs.at[evs.n]);
		evs.n++;
	}
	pthread_cond_broadcast(&evs.cond);
	pthread_mutex_unlock(&evs.lock);
}

double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Wait for an event of kind for id; returns its index or -1. */
int wait_event(enum rt_event_kind kind, const char *id, double timeout_s)
{
	double end = now_s() + SCALED(timeout_s);
	int r = -1;

	pthread_mutex_lock(&evs.lock);
	for (;;) {
		for (int i = 0; i < evs.n; i++)
			if (evs.ev[i].kind == kind && strcmp(evs.id[i], id) == 0) {
				r = i;
				break;
			}
		if (r >= 0 || now_s() >= end)
			break;
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 20 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&evs.cond, &evs.lock, &ts);
	}
	pthread_mutex_unlock(&evs.lock);
	return r;
}

int run_cmd(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Stop and destroy every container under path, then remove it. */
static void wipe_lxcpath(const char *path)
{
	char **names = NULL;
	struct lxc_container **cs = NULL;
	int n = list_all_containers(path, &names, &cs);

	for (int i = 0; i < n; i++) {
		if (cs[i]->is_running(cs[i]))
			cs[i]->stop(cs[i]);
		cs[i]->destroy(cs[i]);
		lxc_container_put(cs[i]);
		free(names[i]);
	}
	free(names);
	free(cs);
	run_cmd("rm -rf --one-file-system '%s'", path);
}

/* The run's template dir (tests/fixtures/lxc-templates.sh: lxc-busybox
 * makes its links in one process), else the installed one. */
char *templates(void)
{
	const char *d = getenv("NODEFS_TEST_LXC_TEMPLATES");

	return (char *)(d && *d ? d : "/usr/share/lxc/templates");
}

static void setup(void)
{
	struct nerr err = { 0 };
	static int seq;
	struct rt_kv kv[] = {
		{ (char *)"lxcpath", lxcpath },
		{ (char *)"stop_timeout", (char *)"10s" },
		{ (char *)"template_dir", templates() },
	};
	struct rt_config cfg = { kv, 3 };

	/* liblxc's create and start run in the helper process nodefs uses
	 * (lxc-helper.c): nodefs itself, exec'd as nodefs-lxc-create or
	 * nodefs-lxc-start (criterion's workers are this program under its own
	 * name, so it cannot be its own helper). The driver's calls then never
	 * fork liblxc code from a process of many threads, as ten_in_parallel's
	 * creates did */
	if (getenv("NODEFS_BIN"))
		runtime_set_helper(getenv("NODEFS_BIN"));
	/* criterion runs each test in a process of its own, exec'd anew:
	 * main's run_root reaches it through the environment */
	if (!run_root[0] && getenv("NODEFS_LXC_TEST_ROOT"))
		snprintf(run_root, sizeof(run_root), "%s", getenv("NODEFS_LXC_TEST_ROOT"));
	cr_assert(run_root[0], "no run root");
	snprintf(lxcpath, sizeof(lxcpath), "%s/t%d-%d", run_root, (int)getpid(), seq++);
	cr_assert_eq(mkdir(lxcpath, 0755), 0);
	evs.n = 0;
	cr_assert_eq(ops->open(&cfg, &H, &err), 0, "open: %s", err.msg);
	cr_assert_eq(ops->watch(H, on_event, NULL, &err), 0, "watch: %s", err.msg);
}

static void teardown(void)
{
	if (H)
		ops->close(H);
	H = NULL;
	wipe_lxcpath(lxcpath);
}

TestSuite(lxc, .init = setup, .fini = teardown, .timeout = 120);

/* ---- helpers ------------------------------------------------------------ */

void spec_init(struct rt_spec *s, const char *name)
{
	memset(s, 0, sizeof(*s));
	s->name = name;
	s->template_name = "busybox";
}

void make(const struct rt_spec *s)
{
	struct nerr err = { 0 };
	char *id = NULL;

	cr_assert_eq(ops->create(H, s, NULL, &id, &err), 0, "create %s: %s", s->name, err.msg);
	cr_assert_str_eq(id, s->name);
	free(id);
}

void make_start(const struct rt_spec *s)
{
	struct nerr err = { 0 };

	make(s);
	cr_assert_eq(ops->start(H, s->name, &err), 0, "start %s: %s", s->name, err.msg);
}

struct rt_status status_of(const char *id)
{
	struct rt_status st;
	struct nerr err = { 0 };

	cr_assert_eq(ops->inspect(H, id, &st, &err), 0, "inspect %s: %s", id, err.msg);
	return st;
}

int exec_in(const char *id, char *const argv[], struct sbuf *out)
{
	struct nerr err = { 0 };
	int code = -1;

	sbuf_reset(out);
	cr_assert_eq(ops->exec(H, id, argv, out, &code, &err), 0, "exec: %s", err.msg);
	return code;
}

int count_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* ---- main: skip probe and run-wide cleanup ------------------------------ */

static int can_run_containers(void)
{
	char path[512];
	struct lxc_container *c;
	bool ok;

	if (geteuid() != 0) {
		fprintf(stderr, "skip: needs root\n");
		return 0;
	}
	if (access("/usr/share/lxc/templates/lxc-busybox", X_OK) != 0 ||
	    run_cmd("command -v busybox >/dev/null") != 0) {
		fprintf(stderr, "skip: no busybox template or busybox\n");
		return 0;
	}
	snprintf(path, sizeof(path), "%s/probe", run_root);
	mkdir(path, 0755);
	if (run_cmd("lxc-create -q -P '%s' -n probe -t '%s/lxc-busybox' >/dev/null 2>&1", path,
		    templates()) != 0) {
		fprintf(stderr, "skip: lxc-create fails here\n");
		wipe_lxcpath(path);
		return 0;
	}
	c = lxc_container_new("probe", path);
	ok = c && c->set_config_item(c, "lxc.net.0.type", "none") &&
	     c->set_config_item(c, "lxc.apparmor.profile", "unconfined") &&
	     c->set_config_item(c, "lxc.init.cmd", "/bin/sleep 60");
	if (ok) {
		c->clear_config_item(c, "lxc.net");
		c->set_config_item(c, "lxc.net.0.type", "none");
		c->want_daemonize(c, true);
		ok = c->start(c, 0, NULL);
		if (ok)
			c->stop(c);
	}
	if (c)
		lxc_container_put(c);
	wipe_lxcpath(path);
	if (!ok)
		fprintf(stderr, "skip: liblxc cannot start a container here\n");
	return ok;
}

int main(int argc, char *argv[])
{
	struct criterion_test_set *tests;
	int result;

	snprintf(run_root, sizeof(run_root), "/tmp/nodefs-lxc-test.XXXXXX");
	if (!mkdtemp(run_root)) {
		perror("mkdtemp");
		return 1;
	}
	if (!can_run_containers()) {
		run_cmd("rm -rf --one-file-system '%s'", run_root);
		return 77;
	}
	setenv("NODEFS_LXC_TEST_ROOT", run_root, 1);
	tests = criterion_initialize();
	result = 0;
	if (criterion_handle_args(argc, argv, true))
		result = !criterion_run_all_tests(tests);
	criterion_finalize(tests);

	/* Whatever a crashed test left: every lxcpath under the root. */
	DIR *d = opendir(run_root);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char p[700];

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", run_root, de->d_name);
		wipe_lxcpath(p);
	}
	if (d)
		closedir(d);
	run_cmd("rm -rf --one-file-system '%s'", run_root);
	return result;
}
