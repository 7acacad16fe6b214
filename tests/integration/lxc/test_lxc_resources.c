/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_lxc_resources: limits, stats, logs and cgroups through the LXC driver:
 * limits set at create and updated (read back from the cgroup files of the
 * container's init, v1 or v2), stats and logs served without liblxc's
 * container lock, the console log rotated at start, and the cgroup item names
 * and stat files of v1 and v2 checked without a v2 host. It reaches the
 * driver only through rt_lxc_ops (and the pure helpers of lxc-internal.h) and
 * the fixture only through lxc_test.h.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>

#include "lxc_test.h"

/* A v1 or v2 cgroup file of the container's init. */
static long long cg_read(pid_t pid, const char *ctrl, const char *file)
{
	char path[512], line[512], buf[128];
	FILE *f;
	long long v = -1;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

		if (!c2)
			continue;
		*c2 = '\0';
		c2[1 + strcspn(c2 + 1, "\n")] = '\0';
		bool v1 = strstr(c1 + 1, ctrl) != NULL;
		bool v2 = c1[1] == '\0' && access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;

		if (!v1 && !v2)
			continue;
		if (v1)
			snprintf(path, sizeof(path), "/sys/fs/cgroup/%s%s/%s", ctrl, c2 + 1, file);
		else
			snprintf(path, sizeof(path), "/sys/fs/cgroup%s/%s", c2 + 1, file);
		FILE *g = fopen(path, "r");

		if (g) {
			if (fgets(buf, sizeof(buf), g))
				v = strncmp(buf, "max", 3) == 0 ? 0 : atoll(buf);
			fclose(g);
			break;
		}
	}
	fclose(f);
	return v;
}

static bool host_v2(void)
{
	return access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
}

Test(lxc, limits_update_and_stats)
{
	struct rt_spec s;
	struct nerr err = { 0 };
	struct rt_stats stt;
	struct rt_limits lim = { .cpus = 0.5, .memory = 96u << 20, .pids = 50,
				 .set = RT_LIMIT_CPUS | RT_LIMIT_MEMORY | RT_LIMIT_PIDS };
	pid_t pid;

	spec_init(&s, "lim");
	s.memory = 64u << 20;
	s.cpus = 1.5;
	s.pids = 100;
	make_start(&s);
	pid = status_of("lim").pid;
	if (host_v2()) {
		cr_assert_eq(cg_read(pid, "memory", "memory.max"), 64ll << 20);
		cr_assert_eq(cg_read(pid, "pids", "pids.max"), 100);
	} else {
		cr_assert_eq(cg_read(pid, "memory", "memory.limit_in_bytes"), 64ll << 20);
		cr_assert_eq(cg_read(pid, "cpu", "cpu.shares"), 1536);
		cr_assert_eq(cg_read(pid, "cpu", "cpu.cfs_quota_us"), 150000);
		cr_assert_eq(cg_read(pid, "pids", "pids.max"), 100);
	}
	cr_assert_eq(ops->stats(H, "lim", &stt, &err), 0, "stats: %s", err.msg);
	cr_assert_gt(stt.memory_bytes, 0);
	cr_assert_lt(stt.memory_bytes, 64ull << 20);
	cr_assert_eq(stt.memory_limit_bytes, 64ull << 20);
	cr_assert_geq(stt.pids, 1);
	cr_assert_lt(stt.pids, 100);
	cr_assert_geq(stt.cpu_user_seconds + stt.cpu_system_seconds, 0);

	/* Up and down, so both v1 memory/memsw orders are exercised. */
	cr_assert_eq(ops->update(H, "lim", &lim, &err), 0, "update: %s", err.msg);
	if (host_v2()) {
		cr_assert_eq(cg_read(pid, "memory", "memory.max"), 96ll << 20);
		cr_assert_eq(cg_read(pid, "pids", "pids.max"), 50);
	} else {
		cr_assert_eq(cg_read(pid, "memory", "memory.limit_in_bytes"), 96ll << 20);
		cr_assert_eq(cg_read(pid, "cpu", "cpu.shares"), 512);
		cr_assert_eq(cg_read(pid, "cpu", "cpu.cfs_quota_us"), 50000);
		cr_assert_eq(cg_read(pid, "pids", "pids.max"), 50);
	}
	lim.memory = 32u << 20;
	lim.set = RT_LIMIT_MEMORY;
	cr_assert_eq(ops->update(H, "lim", &lim, &err), 0, "update down: %s", err.msg);
	cr_assert_eq(cg_read(pid, "memory", host_v2() ? "memory.max" : "memory.limit_in_bytes"),
		     32ll << 20);
	cr_assert_eq(ops->stats(H, "lim", &stt, &err), 0);
	cr_assert_eq(stt.memory_limit_bytes, 32ull << 20);

	lim.memory = 1;
	cr_assert_eq(ops->update(H, "lim", &lim, &err), -EINVAL);
	lim.set = RT_LIMIT_CPUS;
	lim.cpus = -1;
	cr_assert_eq(ops->update(H, "lim", &lim, &err), -EINVAL);

	/* The updated limits survive a restart. */
	cr_assert_eq(ops->stop(H, "lim", 0, &err), 0);
	cr_assert_eq(ops->start(H, "lim", &err), 0, "restart: %s", err.msg);
	pid = status_of("lim").pid;
	cr_assert_eq(cg_read(pid, "memory", host_v2() ? "memory.max" : "memory.limit_in_bytes"),
		     32ll << 20);
	cr_assert_eq(cg_read(pid, "pids", "pids.max"), 50);
}

/* A driver call on another thread, waited for with a deadline. */
struct bg_call {
	pthread_t th;
	const char *id;
	int what;		/* 0 stats, 1 logs, 2 inspect */
	int r;
	struct rt_stats st;
	struct sbuf out;
	struct nerr err;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
};

static void *bg_main(void *arg)
{
	struct bg_call *b = arg;
	struct rt_status st;
	int r;

	if (b->what == 0)
		r = ops->stats(H, b->id, &b->st, &b->err);
	else if (b->what == 1)
		r = ops->logs(H, b->id, 0, &b->out, &b->err);
	else
		r = ops->inspect(H, b->id, &st, &b->err);
	pthread_mutex_lock(&b->lock);
	b->r = r;
	b->done = true;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

static void bg_start(struct bg_call *b, const char *id, int what)
{
	memset(b, 0, sizeof(*b));
	b->id = id;
	b->what = what;
	b->out = (struct sbuf)SBUF_INIT(1u << 20);
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->cond, NULL);
	cr_assert_eq(pthread_create(&b->th, NULL, bg_main, b), 0);
}

/* Has it returned within timeout_ms? */
static bool bg_done(struct bg_call *b, int timeout_ms)
{
	struct timespec ts;
	bool done;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&b->lock);
	while (!b->done && pthread_cond_timedwait(&b->cond, &b->lock, &ts) == 0)
		;
	done = b->done;
	pthread_mutex_unlock(&b->lock);
	return done;
}

static void bg_join(struct bg_call *b)
{
	pthread_join(b->th, NULL);
	sbuf_free(&b->out);
	pthread_mutex_destroy(&b->lock);
	pthread_cond_destroy(&b->cond);
}

/* stats and logs are read on FUSE threads: while another process holds the
 * container's liblxc disk lock (as a destroy or a save_config does), they
 * still answer at once. inspect, which loads the config through liblxc,
 * waits on the same lock: the control that the lock is the right one. */
Test(lxc, stats_and_logs_take_no_liblxc_lock)
{
	struct rt_spec s;
	struct sbuf logs = SBUF_INIT(1u << 20);
	struct nerr err = { 0 };
	struct bg_call st, lg, in;
	char *argv[] = { "/bin/sh", "-c", "echo ready-to-read; exec sleep 1000", NULL };
	struct flock lk = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	char lock[1100];
	double t0;
	int fd;

	spec_init(&s, "locked");
	s.argv = argv;
	s.memory = 64u << 20;
	make_start(&s);
	t0 = now_s();
	do {
		usleep(20000);
		sbuf_reset(&logs);
		cr_assert_eq(ops->logs(H, "locked", 0, &logs, &err), 0, "%s", err.msg);
	} while (!(logs.buf && strstr(logs.buf, "ready-to-read")) && now_s() - t0 < SCALED(10));
	sbuf_free(&logs);

	/* liblxc's lock file: RUNDIR/lxc/lock/LXCPATH/.NAME, an OFD lock */
	snprintf(lock, sizeof(lock), "/run/lxc/lock/%s/.locked", lxcpath);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0, "%s: %s", lock, strerror(errno));
	cr_assert_eq(fcntl(fd, F_OFD_SETLK, &lk), 0, "lock: %s", strerror(errno));

	bg_start(&in, "locked", 2);
	bg_start(&st, "locked", 0);
	bg_start(&lg, "locked", 1);
	bool st_done = bg_done(&st, SCALED(1000)), lg_done = bg_done(&lg, SCALED(1000));
	/* a negative: inspect must still wait on the lock after stats and
	 * logs answered (it would have answered as fast as they did) */
	bool in_done = bg_done(&in, 10);

	lk.l_type = F_UNLCK;
	cr_assert_eq(fcntl(fd, F_OFD_SETLK, &lk), 0);
	close(fd);
	cr_assert(bg_done(&in, SCALED(5000)), "inspect still blocked after the unlock");
	cr_assert(bg_done(&st, SCALED(5000)) && bg_done(&lg, SCALED(5000)));
	cr_assert(st_done, "stats waited on liblxc's container lock");
	cr_assert(lg_done, "logs waited on liblxc's container lock");
	cr_assert_not(in_done, "inspect did not wait on the lock: the test holds the wrong one");
	cr_assert_eq(in.r, 0, "inspect: %s", in.err.msg);
	cr_assert_eq(st.r, 0, "stats: %s", st.err.msg);
	cr_assert_gt(st.st.memory_bytes, 0);
	cr_assert_eq(st.st.memory_limit_bytes, 64u << 20);
	cr_assert_geq(st.st.pids, 1);
	cr_assert_eq(lg.r, 0, "logs: %s", lg.err.msg);
	cr_assert(lg.out.buf && strstr(lg.out.buf, "ready-to-read"), "logs: %s",
		  lg.out.buf ? lg.out.buf : "");
	bg_join(&in);
	bg_join(&st);
	bg_join(&lg);

	/* Not running: zeros; not ours or gone: ENOENT. */
	cr_assert_eq(ops->kill(H, "locked", SIGKILL, &err), 0, "%s", err.msg);
	cr_assert_geq(wait_event(RT_EV_DIE, "locked", 2), 0);
	struct rt_stats z;

	cr_assert_eq(ops->stats(H, "locked", &z, &err), 0, "%s", err.msg);
	cr_assert_eq(z.memory_bytes + z.pids + z.memory_limit_bytes, 0);
	cr_assert_eq(ops->stats(H, "nosuch", &z, &err), -ENOENT);
	cr_assert_eq(ops->logs(H, "nosuch", 0, &logs, &err), -ENOENT);
}

Test(lxc, console_log_rotated_at_start)
{
	struct rt_spec s;
	struct nerr err = { 0 };
	struct sbuf logs = SBUF_INIT(1u << 20);
	struct rt_kv kv[] = { { (char *)"lxcpath", lxcpath }, { (char *)"console_size", (char *)"4K" },
			      { (char *)"template_dir", templates() } };
	struct rt_config cfg = { kv, 3 };
	char *argv[] = { "/bin/sh", "-c", "for i in $(seq 1 3000); do echo line-$i; done", NULL };
	char path[700];
	struct stat st;
	int i;

	ops->close(H);
	H = NULL;
	cr_assert_eq(ops->open(&cfg, &H, &err), 0, "%s", err.msg);
	cr_assert_eq(ops->watch(H, on_event, NULL, &err), 0);
	spec_init(&s, "chatty");
	s.argv = argv;
	make_start(&s);
	cr_assert_geq(wait_event(RT_EV_DIE, "chatty", 10), 0);
	/* One run's output, whole and in order, with plain \n line ends. */
	cr_assert_eq(ops->logs(H, "chatty", 0, &logs, &err), 0, "%s", err.msg);
	cr_assert(strncmp(logs.buf, "line-1\nline-2\n", 14) == 0, "head: %.20s", logs.buf);
	cr_assert(logs.len > 10 && strcmp(logs.buf + logs.len - 10, "line-3000\n") == 0,
		  "tail: %s", logs.buf + (logs.len > 20 ? logs.len - 20 : 0));
	cr_assert_null(strchr(logs.buf, '\r'));

	/* Past 4K: the next start moves it to console.log.1. */
	evs.n = 0;
	cr_assert_eq(ops->start(H, "chatty", &err), 0, "%s", err.msg);
	i = wait_event(RT_EV_DIE, "chatty", 10);
	cr_assert_geq(i, 0);
	snprintf(path, sizeof(path), "%s/chatty/console.log.1", lxcpath);
	cr_assert_eq(stat(path, &st), 0, "no rotated log");
	cr_assert_eq((size_t)st.st_size, logs.len);
	sbuf_reset(&logs);
	cr_assert_eq(ops->logs(H, "chatty", 0, &logs, &err), 0);
	cr_assert_eq(logs.len, 2 * (size_t)st.st_size, "both runs");
	sbuf_reset(&logs);
	cr_assert_eq(ops->logs(H, "chatty", (size_t)st.st_size + 10, &logs, &err), 0);
	cr_assert_eq(logs.len, (size_t)st.st_size + 10, "a tail across both files");
	cr_assert(strncmp(logs.buf, "line-3000\n", 10) == 0);
	sbuf_free(&logs);

	struct rt_kv bad[] = { { (char *)"console_size", (char *)"100" } };
	struct rt_config bcfg = { bad, 1 };
	void *h2 = NULL;

	cr_assert_eq(ops->open(&bcfg, &h2, &err), -EINVAL);
}

/* ---- cgroup v1 and v2 names and files, without a v2 host --------------- */

static const char *item(const struct rt_lxc_item *it, int n, const char *key)
{
	for (int i = 0; i < n; i++)
		if (strcmp(it[i].key, key) == 0)
			return it[i].val;
	return NULL;
}

Test(lxc, cgroup_items_v1_and_v2)
{
	struct rt_lxc_cgroup v1 = { .mode = RT_LXC_CG_V1, .memsw = true };
	struct rt_lxc_cgroup v2 = { .mode = RT_LXC_CG_V2, .swap_max = true };
	struct rt_limits lim = { .cpus = 1.5, .memory = 64u << 20, .pids = 42,
				 .set = RT_LIMIT_CPUS | RT_LIMIT_MEMORY | RT_LIMIT_PIDS };
	struct rt_lxc_item it[RT_LXC_LIMIT_ITEMS_MAX];
	struct nerr err = { 0 };
	int n;

	n = rt_lxc_cg_items(&v1, &lim, true, it, RT_LXC_LIMIT_ITEMS_MAX, &err);
	cr_assert_eq(n, 6, "%s", err.msg);
	cr_assert_str_eq(item(it, n, "lxc.cgroup.memory.limit_in_bytes"), "67108864");
	cr_assert_str_eq(item(it, n, "lxc.cgroup.memory.memsw.limit_in_bytes"), "67108864");
	cr_assert_str_eq(item(it, n, "lxc.cgroup.cpu.shares"), "1536");
	cr_assert_str_eq(item(it, n, "lxc.cgroup.cpu.cfs_quota_us"), "150000");
	cr_assert_str_eq(item(it, n, "lxc.cgroup.cpu.cfs_period_us"), "100000");
	cr_assert_str_eq(item(it, n, "lxc.cgroup.pids.max"), "42");

	n = rt_lxc_cg_items(&v2, &lim, true, it, RT_LXC_LIMIT_ITEMS_MAX, &err);
	cr_assert_eq(n, 5, "%s", err.msg);
	cr_assert_str_eq(item(it, n, "lxc.cgroup2.memory.max"), "67108864");
	cr_assert_str_eq(item(it, n, "lxc.cgroup2.memory.swap.max"), "0");
	/* shares 1536 -> weight 1 + (1536 - 2) * 9999 / 262142 = 59 */
	cr_assert_str_eq(item(it, n, "lxc.cgroup2.cpu.weight"), "59");
	cr_assert_str_eq(item(it, n, "lxc.cgroup2.cpu.max"), "150000 100000");
	cr_assert_str_eq(item(it, n, "lxc.cgroup2.pids.max"), "42");

	/* set_cgroup_item takes the bare names. */
	n = rt_lxc_cg_items(&v2, &lim, false, it, RT_LXC_LIMIT_ITEMS_MAX, &err);
	cr_assert_not_null(item(it, n, "cpu.weight"));
	/* The ends of the weight range. */
	lim.set = RT_LIMIT_CPUS;
	lim.cpus = 0.001;
	n = rt_lxc_cg_items(&v2, &lim, false, it, RT_LXC_LIMIT_ITEMS_MAX, &err);
	cr_assert_str_eq(item(it, n, "cpu.weight"), "1");
	lim.cpus = 512;
	n = rt_lxc_cg_items(&v2, &lim, false, it, RT_LXC_LIMIT_ITEMS_MAX, &err);
	cr_assert_str_eq(item(it, n, "cpu.weight"), "10000");
	lim.set = RT_LIMIT_PIDS;
	lim.pids = 0;
	cr_assert_eq(rt_lxc_cg_items(&v2, &lim, false, it, RT_LXC_LIMIT_ITEMS_MAX, &err), -EINVAL);
}

static void put_file(const char *dir, const char *name, const char *text)
{
	char path[700];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

Test(lxc, cgroup_files_v1_and_v2)
{
	struct rt_lxc_cgroup v1 = { .mode = RT_LXC_CG_V1 }, v2 = { .mode = RT_LXC_CG_V2 };
	struct rt_lxc_cgpaths p = { 0 };
	struct rt_stats st;
	uint64_t kills = 0;
	long hz = sysconf(_SC_CLK_TCK);
	char ticks[128];

	/* v2: one directory with the unified files. */
	snprintf(p.unified, sizeof(p.unified), "%s", lxcpath);
	put_file(lxcpath, "cpu.stat", "usage_usec 3000000\nuser_usec 2500000\nsystem_usec 500000\n");
	put_file(lxcpath, "memory.current", "12345\n");
	put_file(lxcpath, "memory.max", "max\n");
	put_file(lxcpath, "pids.current", "3\n");
	put_file(lxcpath, "memory.events", "low 0\nhigh 0\nmax 4\noom 2\noom_kill 1\n");
	cr_assert_eq(rt_lxc_cg_stats(&v2, &p, &st), 0);
	cr_assert_float_eq(st.cpu_user_seconds, 2.5, 1e-9);
	cr_assert_float_eq(st.cpu_system_seconds, 0.5, 1e-9);
	cr_assert_eq(st.memory_bytes, 12345);
	cr_assert_eq(st.memory_limit_bytes, 0, "max reads as unlimited");
	cr_assert_eq(st.pids, 3);
	cr_assert_eq(rt_lxc_cg_oom_kills(&v2, &p, &kills), 0);
	cr_assert_eq(kills, 1);

	/* v1: a directory per controller (one here), ticks in USER_HZ. */
	memset(&p, 0, sizeof(p));
	snprintf(p.memory, sizeof(p.memory), "%s", lxcpath);
	snprintf(p.cpuacct, sizeof(p.cpuacct), "%s", lxcpath);
	snprintf(p.pids, sizeof(p.pids), "%s", lxcpath);
	snprintf(ticks, sizeof(ticks), "user %ld\nsystem %ld\n", 3 * hz, hz / 2);
	put_file(lxcpath, "cpuacct.stat", ticks);
	put_file(lxcpath, "memory.usage_in_bytes", "4096\n");
	put_file(lxcpath, "memory.limit_in_bytes", "9223372036854771712\n");
	put_file(lxcpath, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
	put_file(lxcpath, "pids.current", "7\n");
	cr_assert_eq(rt_lxc_cg_stats(&v1, &p, &st), 0);
	cr_assert_float_eq(st.cpu_user_seconds, 3.0, 1e-9);
	cr_assert_float_eq(st.cpu_system_seconds, (double)(hz / 2) / (double)hz, 1e-9);
	cr_assert_eq(st.memory_bytes, 4096);
	cr_assert_eq(st.memory_limit_bytes, 0, "v1 unlimited reads as 0");
	cr_assert_eq(st.pids, 7);
	cr_assert_eq(rt_lxc_cg_oom_kills(&v1, &p, &kills), 0);
	cr_assert_eq(kills, 3);
	put_file(lxcpath, "memory.limit_in_bytes", "16777216\n");
	cr_assert_eq(rt_lxc_cg_stats(&v1, &p, &st), 0);
	cr_assert_eq(st.memory_limit_bytes, 16u << 20);
}
