/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_docker_driver: every op of rt_docker_ops against the real dockerd the
 * fixture (tests/fixtures/dockerd.sh) started, reached through
 * NODEFS_TEST_DOCKER_HOST; exits 77 when it is unset. Containers made by a
 * test are destroyed by its fini, even when an assertion failed; the
 * dockerd-restart test starts and removes a second dockerd of its own.
 * Knows the driver only through runtime.h.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../test_time.h"
#include "nerr.h"
#include "runtime.h"
#include "sbuf.h"

#define IMAGE "nodefs-test/busybox:latest"

static const struct runtime_ops *ops = &rt_docker_ops;
static void *H;
static char *ids[64];
static size_t nids;
static bool cgparent_made;	/* /nodefs-cgp-PID cgroups to remove at teardown */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *open_endpoint(const char *endpoint)
{
	struct rt_kv kv[] = { { "endpoint", (char *)endpoint }, { "stop_timeout", "5s" } };
	struct rt_config cfg = { kv, 2 };
	struct nerr err = { 0 };
	void *h = NULL;

	cr_assert_eq(ops->open(&cfg, &h, &err), 0, "open: %s", err.msg);
	return h;
}

static void setup(void)
{
	H = open_endpoint(getenv("NODEFS_TEST_DOCKER_HOST"));
}

static void teardown(void)
{
	struct nerr err;

	for (size_t i = 0; i < nids; i++) {
		ops->destroy(H, ids[i], &err);
		free(ids[i]);
	}
	nids = 0;
	ops->close(H);
	H = NULL;
	if (cgparent_made) {
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "for d in /sys/fs/cgroup/*/nodefs-cgp-%d /sys/fs/cgroup/nodefs-cgp-%d; do "
			 "[ -d $d ] && rmdir $d; done; true", (int)getpid(), (int)getpid());
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove the nodefs-cgp-%d cgroups\n", (int)getpid());
	}
}

static void name_of(char *buf, size_t n, const char *tag)
{
	snprintf(buf, n, "t%d-%s", (int)getpid(), tag);
}

/* create (and start when asked); the id is destroyed by teardown */
static char *make(const char *tag, struct rt_spec *spec, bool start)
{
	char name[80];
	struct nerr err = { 0 };
	char *id = NULL;
	int r;

	name_of(name, sizeof(name), tag);
	spec->name = name;
	if (!spec->image)
		spec->image = IMAGE;
	r = ops->create(H, spec, NULL, &id, &err);
	cr_assert_eq(r, 0, "create %s: %d %s", name, r, err.msg);
	ids[nids++] = id;
	if (start) {
		r = ops->start(H, id, &err);
		cr_assert_eq(r, 0, "start %s: %d %s", name, r, err.msg);
	}
	return id;
}

static char *sleeper(const char *tag)
{
	static char *argv[] = { "sleep", "1000", NULL };
	struct rt_spec spec = { .argv = argv };

	return make(tag, &spec, true);
}

static struct rt_status inspect(const char *id)
{
	struct rt_status st;
	struct nerr err = { 0 };
	int r = ops->inspect(H, id, &st, &err);

	cr_assert_eq(r, 0, "inspect: %d %s", r, err.msg);
	return st;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

static uint64_t cg_u64(const char *ctrl, const char *id, const char *file)
{
	char path[512];
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/fs/cgroup/%s/docker/%s/%s", ctrl, id, file);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

static bool cgroup_v1(void)
{
	return access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK) == 0 ||
	       access("/sys/fs/cgroup/memory/docker", F_OK) == 0;
}

TestSuite(docker, .init = setup, .fini = teardown, .timeout = 120);

Test(docker, health)
{
	struct sbuf v = SBUF_INIT(64);
	struct nerr err = { 0 };
	int r = ops->health(H, &v, &err);

	cr_assert_eq(r, 0, "health: %s", err.msg);
	cr_assert(v.len > 2 && strncmp(v.buf, "1.", 2) == 0, "version '%s'", v.buf);
	sbuf_free(&v);
}

Test(docker, absent_engine_fails_fast)
{
	void *h = open_endpoint("unix:///nonexistent/nodefs-docker.sock");
	struct sbuf v = SBUF_INIT(64);
	struct nerr err = { 0 };
	struct rt_status st;
	double t0 = now();
	int r = ops->health(h, &v, &err);

	cr_assert_eq(r, -EHOSTDOWN, "health: %d %s", r, err.msg);
	cr_assert(strstr(err.msg, "unreachable") != NULL, "msg: %s", err.msg);
	cr_assert(strstr(err.msg, "No such file or directory") != NULL, "msg: %s", err.msg);
	r = ops->inspect(h, "abc", &st, &err);
	cr_assert_eq(r, -EHOSTDOWN);
	cr_assert_lt(now() - t0, SCALED(1.0));
	sbuf_free(&v);
	ops->close(h);
}

Test(docker, bad_config)
{
	struct rt_kv kv[] = { { "stop_timeout", "soon" } };
	struct rt_config cfg = { kv, 1 };
	struct rt_kv kv2[] = { { "endpoint", "tcp://1.2.3.4:2375" } };
	struct rt_config cfg2 = { kv2, 1 };
	struct nerr err = { 0 };
	void *h = NULL;

	cr_assert_eq(ops->open(&cfg, &h, &err), -EINVAL);
	cr_assert_eq(ops->open(&cfg2, &h, &err), -EINVAL);
}

Test(docker, run_env_cmd_exec)
{
	static char *argv[] = { "sleep", "1000", NULL };
	struct rt_kv env[] = { { "MODE", "test" } };
	struct rt_spec spec = { .argv = argv, .env = env, .nenv = 1 };
	char *id = make("envcmd", &spec, true);
	struct rt_status st = inspect(id);
	struct sbuf out = SBUF_INIT(1 << 20);
	struct nerr err = { 0 };
	char *pe[] = { "printenv", "MODE", NULL };
	char *ex[] = { "sh", "-c", "echo to-out; echo to-err >&2; exit 3", NULL };
	char *ps[] = { "cat", "/proc/1/cmdline", NULL };
	int code = -1, r;

	cr_assert_eq(st.state, RT_STATE_RUNNING);
	cr_assert_gt(st.pid, 0);
	cr_assert_gt(st.started_at, time(NULL) - 60);
	cr_assert_eq(st.finished_at, 0);
	cr_assert_eq(kill(st.pid, 0), 0, "pid %d is not a live host process", st.pid);

	r = ops->exec(H, id, pe, &out, &code, &err);
	cr_assert_eq(r, 0, "exec: %d %s", r, err.msg);
	cr_assert_eq(code, 0, "printenv MODE: exit %d, output '%s'", code, out.buf);
	cr_assert_str_eq(out.buf, "test\n");

	sbuf_reset(&out);
	r = ops->exec(H, id, ex, &out, &code, &err);
	cr_assert_eq(r, 0, "exec: %s", err.msg);
	cr_assert_eq(code, 3);
	cr_assert(strstr(out.buf, "to-out\n") && strstr(out.buf, "to-err\n"), "out: %s", out.buf);

	sbuf_reset(&out);
	r = ops->exec(H, id, ps, &out, &code, &err);
	cr_assert_eq(r, 0);
	cr_assert_eq(memcmp(out.buf, "sleep\0" "1000", 10), 0, "cmd not honoured");

	/* output past the 1 MiB cap is an error, not a silent cut; the
	 * driver stays usable */
	char *big[] = { "head", "-c", "2000000", "/dev/zero", NULL };
	sbuf_reset(&out);
	r = ops->exec(H, id, big, &out, &code, &err);
	cr_assert_eq(r, -E2BIG, "exec of 2 MB output: %d %s", r, err.msg);
	cr_assert_eq(out.len, 0);
	r = ops->exec(H, id, pe, &out, &code, &err);
	cr_assert_eq(r, 0);
	cr_assert_str_eq(out.buf, "test\n");

	/* a command that does not exist: the engine reports 126/127 */
	char *bad[] = { "/no/such/program", NULL };
	sbuf_reset(&out);
	r = ops->exec(H, id, bad, &out, &code, &err);
	cr_assert(r < 0 || code != 0, "exec of a missing program succeeded");
	sbuf_free(&out);
}

Test(docker, limits_stats_update)
{
	static char *argv[] = { "sleep", "1000", NULL };
	struct rt_spec spec = { .argv = argv, .memory = 64u << 20, .cpus = 0.5, .pids = 100 };
	char *id = make("limits", &spec, true);
	struct rt_limits lim = { .memory = 128u << 20, .cpus = 1, .pids = 200,
				 .set = RT_LIMIT_MEMORY | RT_LIMIT_CPUS | RT_LIMIT_PIDS };
	struct rt_stats s;
	struct nerr err = { 0 };
	int r;

	if (cgroup_v1()) {
		cr_assert_eq(cg_u64("memory", id, "memory.limit_in_bytes"), 64u << 20);
		cr_assert_eq(cg_u64("cpu", id, "cpu.cfs_quota_us"),
			     cg_u64("cpu", id, "cpu.cfs_period_us") / 2);
		cr_assert_eq(cg_u64("pids", id, "pids.max"), 100);
	}
	r = ops->stats(H, id, &s, &err);
	cr_assert_eq(r, 0, "stats: %d %s", r, err.msg);
	cr_assert_eq(s.memory_limit_bytes, 64u << 20);
	cr_assert_gt(s.memory_bytes, 0);
	cr_assert_lt(s.memory_bytes, 64u << 20);
	cr_assert_geq(s.pids, 1);
	cr_assert_lt(s.pids, 10);
	cr_assert_geq(s.cpu_user_seconds, 0);
	cr_assert_lt(s.cpu_user_seconds + s.cpu_system_seconds, 10);

	r = ops->update(H, id, &lim, &err);
	cr_assert_eq(r, 0, "update: %d %s", r, err.msg);
	cr_assert_eq(inspect(id).state, RT_STATE_RUNNING);
	r = ops->stats(H, id, &s, &err);
	cr_assert_eq(r, 0);
	cr_assert_eq(s.memory_limit_bytes, 128u << 20);
	if (cgroup_v1()) {
		cr_assert_eq(cg_u64("cpu", id, "cpu.cfs_quota_us"),
			     cg_u64("cpu", id, "cpu.cfs_period_us"));
		cr_assert_eq(cg_u64("pids", id, "pids.max"), 200);
	}

	/* timing of the hot path: the cgroup files, no engine round trip */
	double t0 = now();
	for (int i = 0; i < 10000; i++)
		cr_assert_eq(ops->stats(H, id, &s, &err), 0);
	fprintf(stderr, "stats: %.2f us per call\n", (now() - t0) / 10000 * 1e6);

	/* a bad update changes nothing */
	struct rt_limits bad = { .memory = 1024, .set = RT_LIMIT_MEMORY };
	r = ops->update(H, id, &bad, &err);
	cr_assert_eq(r, -EINVAL, "update memory=1K: %d %s", r, err.msg);
	r = ops->stats(H, id, &s, &err);
	cr_assert_eq(s.memory_limit_bytes, 128u << 20);
}

/* A socket that takes connections and never answers: an engine that hangs. */
static int stalled_socket(char *path, size_t n)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(path, n, "/tmp/nodefs-stalled-%d.sock", (int)getpid());
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	unlink(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 64), 0);
	return fd;
}

/* An engine may put containers under another cgroup parent: stats then
 * uses the cgroups a worker learnt from /proc/PID/cgroup of the
 * container's init (at start, at an inspect); stats itself, on a FUSE
 * thread, never calls the engine, even when it does not know them. */
Test(docker, stats_other_cgroup_parent)
{
	char name[80], cmd[512], id[128] = "";
	struct rt_stats s;
	struct nerr err = { 0 };
	FILE *p;
	int r;

	name_of(name, sizeof(name), "cgparent");
	snprintf(cmd, sizeof(cmd), "docker run -d --name %s --cgroup-parent /nodefs-cgp-%d -m 48m %s sleep 1000",
		 name, (int)getpid(), IMAGE);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	if (!fgets(id, sizeof(id), p))
		id[0] = '\0';
	pclose(p);
	id[strcspn(id, "\n")] = '\0';
	ids[nids++] = strdup(id);	/* teardown removes it, then its parent */
	cgparent_made = true;
	cr_assert_eq(strlen(id), 64, "docker run gave '%s'", id);

	char sock[108], ep[120];
	int lfd = stalled_socket(sock, sizeof(sock));
	snprintf(ep, sizeof(ep), "unix://%s", sock);
	void *hung = open_endpoint(ep);
	double t0 = now();
	r = ops->stats(hung, id, &s, &err);
	cr_assert_eq(r, -EBUSY, "stats on an unknown layout: %d %s", r, err.msg);
	cr_assert_lt(now() - t0, 1.0, "stats waited on the engine");
	ops->close(hung);
	close(lfd);
	unlink(sock);

	struct rt_status st;
	cr_assert_eq(ops->inspect(H, id, &st, &err), 0, "inspect: %s", err.msg);
	r = ops->stats(H, id, &s, &err);
	cr_assert_eq(r, 0, "stats: %d %s", r, err.msg);
	cr_assert_eq(s.memory_limit_bytes, 48u << 20);
	cr_assert_geq(s.pids, 1);
}

Test(docker, stop_waits_then_kills)
{
	/* pid 1 ignores SIGTERM without a handler; trap makes it explicit */
	static char *argv[] = { "sh", "-c", "trap '' TERM; while :; do sleep 1; done", NULL };
	struct rt_spec spec = { .argv = argv };
	char *id = make("stop", &spec, true);
	struct nerr err = { 0 };
	double t0 = now(), dt;
	int r;

	r = ops->stop(H, id, 2, &err);
	dt = now() - t0;
	cr_assert_eq(r, 0, "stop: %d %s", r, err.msg);
	fprintf(stderr, "stop t=2 took %.2f s\n", dt);
	cr_assert_geq(dt, 1.9);
	cr_assert_lt(dt, SCALED(10));	/* t + kill + exit, on a loaded machine */
	struct rt_status st = inspect(id);
	cr_assert_eq(st.state, RT_STATE_EXITED);
	cr_assert_eq(st.exit_code, 137);
	cr_assert_eq(st.pid, 0);
	cr_assert_geq(st.finished_at, st.started_at);
	/* stopping a stopped container is not an error (304) */
	cr_assert_eq(ops->stop(H, id, 1, &err), 0, "%s", err.msg);
	/* neither is starting a started one */
	cr_assert_eq(ops->start(H, id, &err), 0);
	cr_assert_eq(ops->start(H, id, &err), 0);
}

Test(docker, kill_pause_resume)
{
	char *id = sleeper("kill");
	struct nerr err = { 0 };
	int r;

	r = ops->pause(H, id, &err);
	cr_assert_eq(r, 0, "pause: %s", err.msg);
	cr_assert_eq(inspect(id).state, RT_STATE_PAUSED);
	r = ops->pause(H, id, &err);
	cr_assert_eq(r, -EBUSY, "pause twice: %d %s", r, err.msg);
	r = ops->resume(H, id, &err);
	cr_assert_eq(r, 0, "resume: %s", err.msg);
	cr_assert_eq(inspect(id).state, RT_STATE_RUNNING);
	/* the engine answers 500 here; the wrong state is EBUSY, as for pause */
	r = ops->resume(H, id, &err);
	cr_assert_eq(r, -EBUSY, "resume of a running container: %d %s", r, err.msg);

	r = ops->kill(H, id, SIGKILL, &err);
	cr_assert_eq(r, 0, "kill: %s", err.msg);
	for (int i = 0; i < 100 && inspect(id).state != RT_STATE_EXITED; i++)
		usleep(20000);
	struct rt_status st = inspect(id);
	cr_assert_eq(st.state, RT_STATE_EXITED);
	cr_assert_eq(st.exit_code, 137);
	cr_assert_not(st.oom_killed);
	r = ops->kill(H, id, SIGKILL, &err);
	cr_assert_eq(r, -EBUSY, "kill of an exited container: %d %s", r, err.msg);
	cr_assert(strlen(err.msg) > 0);
	r = ops->pause(H, id, &err);
	cr_assert_eq(r, -EBUSY, "pause of an exited container: %d %s", r, err.msg);
	r = ops->resume(H, id, &err);
	cr_assert_eq(r, -EBUSY, "resume of an exited container: %d %s", r, err.msg);
	/* the engine answers an exec with a bare 500 (the load test met it on
	 * a container that had just stopped; an update in the middle of the
	 * stop gets one too, but an exited container's limits can be set) */
	static char *echo[] = { "echo", "x", NULL };
	struct sbuf out = SBUF_INIT(4096);
	int code = -1;
	r = ops->exec(H, id, echo, &out, &code, &err);
	cr_assert_eq(r, -EBUSY, "exec in an exited container: %d %s", r, err.msg);
	sbuf_free(&out);
}

Test(docker, logs)
{
	static char *argv[] = { "sh", "-c", "echo hello-out; echo hello-err >&2; sleep 0.5; seq 1 2000", NULL };
	struct rt_spec spec = { .argv = argv };
	char *id = make("logs", &spec, true);
	struct sbuf out = SBUF_INIT(1 << 20);
	struct nerr err = { 0 };
	int r;

	for (int i = 0; i < 200 && inspect(id).state != RT_STATE_EXITED; i++)
		usleep(20000);
	r = ops->logs(H, id, 1 << 20, &out, &err);
	cr_assert_eq(r, 0, "logs: %d %s", r, err.msg);
	cr_assert(strstr(out.buf, "hello-out\n"), "%s", out.buf);
	cr_assert(strstr(out.buf, "hello-err\n"));
	cr_assert(strstr(out.buf, "\n2000\n"));
	/* the last 10 bytes only (the engine orders stdout and stderr lines as
	 * its copiers read them: the sleep keeps hello-err before the seq) */
	sbuf_reset(&out);
	r = ops->logs(H, id, 10, &out, &err);
	cr_assert_eq(r, 0);
	cr_assert_eq(out.len, 10);
	cr_assert_str_eq(out.buf, "1999\n2000\n");
	sbuf_free(&out);
}

Test(docker, destroy_twice)
{
	char *id = sleeper("destroy");
	struct nerr err = { 0 };
	struct rt_status st;

	cr_assert_eq(ops->destroy(H, id, &err), 0, "%s", err.msg);
	cr_assert_eq(ops->destroy(H, id, &err), 0, "%s", err.msg);
	cr_assert_eq(ops->inspect(H, id, &st, &err), -ENOENT);
	cr_assert_eq(ops->start(H, id, &err), -ENOENT);
	struct rt_stats s;
	cr_assert(ops->stats(H, id, &s, &err) < 0);
}

Test(docker, list_only_ours)
{
	char foreign[80], name[80];
	char *id = sleeper("listed");
	struct rt_listing *l = NULL;
	struct nerr err = { 0 };
	size_t n = 0;
	bool found = false;
	int r;

	name_of(foreign, sizeof(foreign), "foreign");
	name_of(name, sizeof(name), "listed");
	cr_assert_eq(sh("docker run -d --name %s %s sleep 1000 >/dev/null", foreign, IMAGE), 0);
	r = ops->list(H, &l, &n, &err);
	for (size_t i = 0; r == 0 && i < n; i++) {
		cr_expect_str_neq(l[i].name, foreign);
		if (strcmp(l[i].id, id) == 0) {
			found = true;
			cr_expect_str_eq(l[i].name, name);
			cr_expect_eq(l[i].status.state, RT_STATE_RUNNING);
		}
	}
	rt_listing_free(l, n);
	/* the foreign container is still there, untouched */
	int still = sh("docker inspect -f '{{.State.Running}}' %s | grep -q true", foreign);
	sh("docker rm -f %s >/dev/null 2>&1", foreign);
	cr_assert_eq(r, 0, "list: %s", err.msg);
	cr_assert(found, "our container is not listed");
	cr_assert_eq(still, 0, "foreign container was touched");
}

/* --- events --------------------------------------------------------------- */

struct evlog {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct {
		enum rt_event_kind kind;
		char id[80];
		int exit_code;
		double at;
	} ev[256];
	size_t n;
};

static void on_event(void *ctx, const struct rt_event *ev)
{
	struct evlog *l = ctx;

	pthread_mutex_lock(&l->lock);
	if (l->n < 256) {
		l->ev[l->n].kind = ev->kind;
		snprintf(l->ev[l->n].id, sizeof(l->ev[0].id), "%s", ev->id ? ev->id : "");
		l->ev[l->n].exit_code = ev->exit_code;
		l->ev[l->n].at = now();
		l->n++;
	}
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

static void evlog_init(struct evlog *l)
{
	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
}

/* index of the first event of kind (for id, if non-NULL) at or after from,
 * waiting up to timeout seconds; -1 if none */
static int evlog_wait(struct evlog *l, size_t from, enum rt_event_kind kind, const char *id,
		      double timeout)
{
	double end = now() + SCALED(timeout);
	int found = -1;

	pthread_mutex_lock(&l->lock);
	while (found < 0) {
		for (size_t i = from; i < l->n && found < 0; i++)
			if (l->ev[i].kind == kind && (!id || strcmp(l->ev[i].id, id) == 0))
				found = (int)i;
		if (found >= 0 || now() >= end)
			break;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 20000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&l->cond, &l->lock, &ts);
	}
	pthread_mutex_unlock(&l->lock);
	return found;
}

Test(docker, watch_outside_kill)
{
	static struct evlog l;
	struct nerr err = { 0 };
	int i;

	evlog_init(&l);
	cr_assert_eq(ops->watch(H, on_event, &l, &err), 0, "%s", err.msg);
	cr_assert_geq(evlog_wait(&l, 0, RT_EV_ENGINE_UP, NULL, 5), 0, "no ENGINE_UP");
	char *id = sleeper("watched");
	cr_assert_geq(evlog_wait(&l, 0, RT_EV_START, id, 5), 0, "no START");
	cr_assert_eq(sh("docker kill -s KILL %s >/dev/null", id), 0);
	double killed = now();
	i = evlog_wait(&l, 0, RT_EV_DIE, id, 5);
	cr_assert_geq(i, 0, "no DIE");
	fprintf(stderr, "DIE delivered %.3f s after docker kill returned\n", l.ev[i].at - killed);
	cr_assert_lt(l.ev[i].at - killed, SCALED(1.0));
	cr_assert_eq(l.ev[i].exit_code, 137);
	/* pause/unpause/destroy come through too */
	char *id2 = sleeper("watched2");
	cr_assert_eq(ops->pause(H, id2, &err), 0);
	cr_assert_eq(ops->resume(H, id2, &err), 0);
	cr_assert_eq(ops->destroy(H, id2, &err), 0);
	cr_assert_geq(evlog_wait(&l, 0, RT_EV_PAUSE, id2, 5), 0);
	cr_assert_geq(evlog_wait(&l, 0, RT_EV_UNPAUSE, id2, 5), 0);
	cr_assert_geq(evlog_wait(&l, 0, RT_EV_DESTROY, id2, 5), 0);
	/* a foreign container's events are never delivered (other tests'
	 * containers, ours too, may show up meanwhile) */
	char foreign[80], cmd[256], fid[128] = "";
	name_of(foreign, sizeof(foreign), "foreign-ev");
	snprintf(cmd, sizeof(cmd), "docker run -d --name %s %s true", foreign, IMAGE);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	if (!fgets(fid, sizeof(fid), p))
		fid[0] = '\0';
	pclose(p);
	fid[strcspn(fid, "\n")] = '\0';
	usleep(300000);
	sh("docker rm -f %s >/dev/null 2>&1", foreign);
	usleep(100000);
	cr_assert(strlen(fid) == 64, "docker run -d gave '%s'", fid);
	pthread_mutex_lock(&l.lock);
	for (size_t k = 0; k < l.n; k++)
		cr_expect_str_neq(l.ev[k].id, fid, "event for a foreign container");
	pthread_mutex_unlock(&l.lock);
	double t0 = now();
	ops->close(H);
	H = open_endpoint(getenv("NODEFS_TEST_DOCKER_HOST"));
	cr_assert_lt(now() - t0, SCALED(0.5), "close() did not stop the watcher promptly");
}

Test(docker, oom_kill)
{
	/* dd allocates and fills a 64 MiB buffer: far over 8M. It waits a
	 * moment first: containerd arms its OOM watch just after the task
	 * starts, and an OOM before that is lost by the engine (no oom event,
	 * OOMKilled false), which no client can recover. */
	static char *argv[] = { "sh", "-c", "sleep 0.5; dd if=/dev/zero of=/dev/null bs=64M count=1",
				NULL };
	static struct evlog l;
	struct rt_spec spec = { .argv = argv, .memory = 8u << 20 };
	struct nerr err = { 0 };
	char *id;
	int i;

	evlog_init(&l);
	cr_assert_eq(ops->watch(H, on_event, &l, &err), 0);
	cr_assert_geq(evlog_wait(&l, 0, RT_EV_ENGINE_UP, NULL, 5), 0);
	id = make("oom", &spec, true);
	i = evlog_wait(&l, 0, RT_EV_DIE, id, 20);
	cr_assert_geq(i, 0, "no DIE");
	cr_assert_eq(l.ev[i].exit_code, 137);
	/* the engine's oom event comes from containerd's eventfd: it may
	 * trail the die under load (and 20.10 then loses OOMKilled, which
	 * the driver restores from the event) */
	cr_assert_geq(evlog_wait(&l, 0, RT_EV_OOM, id, 10), 0, "no OOM event");
	struct rt_status st = inspect(id);
	cr_assert_eq(st.state, RT_STATE_EXITED);
	cr_assert(st.oom_killed);
	cr_assert_eq(st.exit_code, 137);
}

/* An OOM at once, before containerd has armed its watch: the engine may
 * report neither the event nor OOMKilled; the kernel's log still names the
 * container, and inspect says oom_killed without any watch running. */
Test(docker, oom_at_once)
{
	static char *argv[] = { "dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1", NULL };
	struct rt_spec spec = { .argv = argv, .memory = 8u << 20 };
	struct rt_status st = { 0 };
	char *id;

	cr_assert_eq(access("/dev/kmsg", R_OK), 0, "root reads /dev/kmsg");
	id = make("oomnow", &spec, true);
	for (int i = 0; i < 500 && (st = inspect(id)).state != RT_STATE_EXITED; i++)
		usleep(20000);
	cr_assert_eq(st.state, RT_STATE_EXITED);
	cr_assert_eq(st.exit_code, 137);
	cr_assert(st.oom_killed);
}

struct par {
	int i;
	char *id;
	int r;
	char msg[NERR_MSG_MAX];
};

static void *par_main(void *arg)
{
	static char *argv[] = { "sleep", "1000", NULL };
	struct par *p = arg;
	char name[80], tag[16];
	struct rt_spec spec = { .argv = argv, .image = IMAGE, .memory = 32u << 20 };
	struct nerr err = { 0 };

	snprintf(tag, sizeof(tag), "par%d", p->i);
	name_of(name, sizeof(name), tag);
	spec.name = name;
	p->r = ops->create(H, &spec, NULL, &p->id, &err);
	if (p->r == 0)
		p->r = ops->start(H, p->id, &err);
	snprintf(p->msg, sizeof(p->msg), "%s", err.msg);
	return NULL;
}

Test(docker, twenty_in_parallel, .timeout = 240)
{
	struct par p[20];
	pthread_t t[20];
	double t0 = now();

	for (int i = 0; i < 20; i++) {
		p[i] = (struct par){ .i = i };
		cr_assert_eq(pthread_create(&t[i], NULL, par_main, &p[i]), 0);
	}
	for (int i = 0; i < 20; i++) {
		pthread_join(t[i], NULL);
		if (p[i].id)
			ids[nids++] = p[i].id;
	}
	fprintf(stderr, "20 containers created and started in %.2f s\n", now() - t0);
	for (int i = 0; i < 20; i++) {
		cr_assert_eq(p[i].r, 0, "container %d: %d %s", i, p[i].r, p[i].msg);
		struct rt_status st = inspect(p[i].id);
		cr_assert_eq(st.state, RT_STATE_RUNNING);
		cr_assert_gt(st.pid, 0);
	}
}

static bool listed(const char *name)
{
	struct rt_listing *l = NULL;
	struct nerr err;
	size_t n = 0;
	bool found = false;

	cr_assert_eq(ops->list(H, &l, &n, &err), 0);
	for (size_t i = 0; i < n; i++)
		found |= strcmp(l[i].name, name) == 0;
	rt_listing_free(l, n);
	return found;
}

Test(docker, bad_input_leaves_nothing)
{
	struct nerr err = { 0 };
	char name[80];
	char *id = NULL;
	int r;

	/* a missing image on an unreachable local registry: no pull possible,
	 * and nothing leaves this machine */
	name_of(name, sizeof(name), "noimage");
	struct rt_spec s1 = { .name = name, .image = "127.0.0.1:1/nodefs/missing:latest" };
	double t0 = now();
	r = ops->create(H, &s1, NULL, &id, &err);
	cr_assert_eq(r, -ENOENT, "missing image: %d %s", r, err.msg);
	cr_assert(strstr(err.msg, "127.0.0.1:1/nodefs/missing") != NULL, "msg: %s", err.msg);
	/* the engine's reason is kept */
	cr_assert(strstr(err.msg, "connection refused") != NULL, "msg: %s", err.msg);
	cr_assert_lt(now() - t0, SCALED(10));
	cr_assert_not(listed(name));

	/* a cancelled create makes nothing either */
	struct rt_progress prog = { .cancel = 1 };
	r = ops->create(H, &s1, &prog, &id, &err);
	cr_assert_eq(r, -ECANCELED, "%d %s", r, err.msg);

	/* name taken */
	char *first = sleeper("taken");
	name_of(name, sizeof(name), "taken");
	struct rt_spec s2 = { .name = name, .image = IMAGE };
	r = ops->create(H, &s2, NULL, &id, &err);
	cr_assert_eq(r, -EEXIST, "name taken: %d %s", r, err.msg);
	cr_assert_eq(inspect(first).state, RT_STATE_RUNNING);

	/* memory below the engine's minimum */
	name_of(name, sizeof(name), "badmem");
	struct rt_spec s3 = { .name = name, .image = IMAGE, .memory = 1024 };
	r = ops->create(H, &s3, NULL, &id, &err);
	cr_assert_eq(r, -EINVAL, "memory=1K: %d %s", r, err.msg);
	cr_assert(strlen(err.msg) > 0);
	cr_assert_not(listed(name));

	/* a bind the engine cannot express */
	name_of(name, sizeof(name), "badbind");
	struct rt_mount m = { "/tmp/a:b", "/mnt", false };
	struct rt_spec s4 = { .name = name, .image = IMAGE, .mounts = &m, .nmounts = 1 };
	r = ops->create(H, &s4, NULL, &id, &err);
	cr_assert_eq(r, -EINVAL);
	cr_assert_not(listed(name));

	/* ids that would escape the URL path */
	struct rt_status st;
	cr_assert_eq(ops->inspect(H, "../../version", &st, &err), -EINVAL);
	cr_assert_eq(ops->inspect(H, "nosuchcontainer", &st, &err), -ENOENT);
}

/* A registry that accepts connections and never answers: the engine's pull
 * hangs on it, so only closing our transfer can end the create. */
struct blackhole {
	int lfd;
	int fds[16];
	int n;
	volatile int stop;
};

static void *blackhole_main(void *arg)
{
	struct blackhole *b = arg;

	while (!b->stop) {
		int fd = accept(b->lfd, NULL, NULL);

		if (fd < 0)
			break;
		if (b->n < 16)
			b->fds[b->n++] = fd;
		else
			close(fd);
	}
	return NULL;
}

struct cancel_ctx {
	struct rt_progress *prog;
	int lines;
	double cancelled_at;
};

static void on_progress(void *ctx, const char *line)
{
	struct cancel_ctx *c = ctx;

	c->lines++;
}

static void *cancel_later(void *arg)
{
	struct cancel_ctx *c = arg;

	usleep(500000);
	c->cancelled_at = now();
	c->prog->cancel = 1;
	return NULL;
}

Test(docker, pull_cancel_closes_transfer)
{
	struct blackhole b = { .lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) };
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	struct rt_progress prog = { .update = on_progress };
	struct cancel_ctx cc = { .prog = &prog };
	struct nerr err = { 0 };
	char image[128], name[80];
	pthread_t acc, canc;
	char *id = NULL;
	int r;

	cr_assert_geq(b.lfd, 0);
	cr_assert_eq(bind(b.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(b.lfd, 16), 0);
	cr_assert_eq(getsockname(b.lfd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(image, sizeof(image), "127.0.0.1:%d/nodefs/slow:latest", ntohs(sa.sin_port));
	pthread_create(&acc, NULL, blackhole_main, &b);
	prog.ctx = &cc;
	pthread_create(&canc, NULL, cancel_later, &cc);

	name_of(name, sizeof(name), "cancel");
	struct rt_spec spec = { .name = name, .image = image };
	r = ops->create(H, &spec, &prog, &id, &err);
	double done = now();
	pthread_join(canc, NULL);
	b.stop = 1;
	shutdown(b.lfd, SHUT_RDWR);
	pthread_join(acc, NULL);
	int accepted = b.n;
	for (int i = 0; i < b.n; i++)
		close(b.fds[i]);
	close(b.lfd);

	cr_assert_eq(r, -ECANCELED, "create: %d %s", r, err.msg);
	cr_assert_null(id);
	cr_assert_geq(cc.lines, 1, "no progress line");
	cr_assert_gt(accepted, 0, "the engine never tried the registry");
	fprintf(stderr, "pull cancelled %.3f s after cancel was set\n", done - cc.cancelled_at);
	cr_assert_lt(done - cc.cancelled_at, SCALED(0.5));
	cr_assert_not(listed(name));
}

Test(docker, bind_mount)
{
	char dir[] = "/tmp/nodefs-bind-XXXXXX", path[64];
	static char *argv[] = { "cat", "/data/hello", NULL };
	struct rt_mount m = { dir, "/data", true };
	struct rt_spec spec = { .argv = argv, .mounts = &m, .nmounts = 1 };
	struct sbuf out = SBUF_INIT(4096);
	struct nerr err = { 0 };
	FILE *f;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/hello", dir);
	f = fopen(path, "w");
	fputs("from-host\n", f);
	fclose(f);
	char *id = make("bind", &spec, true);
	for (int i = 0; i < 200 && inspect(id).state != RT_STATE_EXITED; i++)
		usleep(20000);
	int r = ops->logs(H, id, 4096, &out, &err);
	unlink(path);
	rmdir(dir);
	cr_assert_eq(r, 0);
	cr_assert_str_eq(out.buf, "from-host\n");
	cr_assert_eq(inspect(id).exit_code, 0);
	sbuf_free(&out);
}

Test(docker, engine_down_and_up, .timeout = 180)
{
	static struct evlog l;
	char dir[64], cmd[512], ep[128];
	const char *src = getenv("NODEFS_SRC");
	struct nerr err = { 0 };
	struct sbuf v = SBUF_INIT(64);
	void *h2;
	int up, down, up2;

	cr_assert_not_null(src, "NODEFS_SRC unset");
	snprintf(dir, sizeof(dir), "/tmp/nfdk2.%d", (int)getpid());
	snprintf(cmd, sizeof(cmd), "%s/tests/fixtures/dockerd.sh start %s >/dev/null", src, dir);
	cr_assert_eq(system(cmd), 0, "second dockerd did not start");
	snprintf(ep, sizeof(ep), "unix://%s/docker.sock", dir);
	h2 = open_endpoint(ep);
	evlog_init(&l);
	cr_assert_eq(ops->watch(h2, on_event, &l, &err), 0);
	up = evlog_wait(&l, 0, RT_EV_ENGINE_UP, NULL, 5);

	snprintf(cmd, sizeof(cmd), "%s/tests/fixtures/dockerd.sh stop %s", src, dir);
	int stopped = system(cmd);
	down = evlog_wait(&l, 0, RT_EV_ENGINE_DOWN, NULL, 10);
	double t0 = now();
	int hr = ops->health(h2, &v, &err);
	double dt = now() - t0;

	snprintf(cmd, sizeof(cmd), "%s/tests/fixtures/dockerd.sh start %s >/dev/null", src, dir);
	int restarted = system(cmd);
	up2 = down >= 0 ? evlog_wait(&l, (size_t)down, RT_EV_ENGINE_UP, NULL, 10) : -1;
	sbuf_reset(&v);
	int hr2 = ops->health(h2, &v, &err);

	ops->close(h2);
	snprintf(cmd, sizeof(cmd), "%s/tests/fixtures/dockerd.sh stop %s", src, dir);
	system(cmd);
	sbuf_free(&v);

	cr_assert_geq(up, 0, "no ENGINE_UP at first");
	cr_assert_eq(stopped, 0);
	cr_assert_geq(down, 0, "no ENGINE_DOWN");
	cr_assert_eq(hr, -EHOSTDOWN, "health with dockerd stopped: %d", hr);
	cr_assert_lt(dt, SCALED(1.0));
	cr_assert_eq(restarted, 0);
	cr_assert_geq(up2, 0, "no ENGINE_UP after the restart");
	cr_assert_eq(hr2, 0, "health after the restart");
}

int main(int argc, char *argv[])
{
	struct criterion_test_set *tests;
	int r;

	if (!getenv("NODEFS_TEST_DOCKER_HOST") || !*getenv("NODEFS_TEST_DOCKER_HOST")) {
		fprintf(stderr, "NODEFS_TEST_DOCKER_HOST unset: start tests/fixtures/dockerd.sh\n");
		return 77;
	}
	/* the docker CLI the tests use from outside talks to the same engine */
	setenv("DOCKER_HOST", getenv("NODEFS_TEST_DOCKER_HOST"), 1);
	tests = criterion_initialize();
	criterion_options.jobs = 2;
	/* 0: exit now (--help and the like) */
	r = criterion_handle_args(argc, argv, true);
	if (r)
		r = !criterion_run_all_tests(tests);
	criterion_finalize(tests);
	return r;
}
