/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lxc-run: the LXC driver's calls on a container that exists: start (the
 * binds checked again, init's pidfd held before the command's gate opens,
 * the watch begun), stop, kill, pause and resume (cgroup v1's freezer
 * driven with a time bound), update of the limits, and exec.
 *
 * Must not know: how a container is made (lxc-create.c) or listed
 * (lxc.c), nor anything of backend/ or fs/.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <lxc/attach_options.h>
#include <lxc/lxccontainer.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lxc-internal.h"
#include "macro.h"
#include "nerr.h"
#include "nodefs-config.h"
#include "sbuf.h"

#define RT_LXC_EXEC_ENV_MAX 256
#define ATTACH_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static int pidfd_send_signal_(int pidfd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* ---- lifecycle ---------------------------------------------------------- */

/* Keep the console log bounded across runs: past console_size, the last
 * runs' output becomes console.log.1 (replacing the one before). */
static void rotate_console_log(struct rt_lxc *h, const char *id)
{
	char path[PATH_MAX], old[PATH_MAX + 8];
	struct stat st;

	if (rt_lxc_dir(h, id, RT_LXC_CONSOLE_LOG, path, sizeof(path)) < 0 ||
	    stat(path, &st) < 0 || (uint64_t)st.st_size <= h->console_size)
		return;
	snprintf(old, sizeof(old), "%s.1", path);
	(void)rename(path, old);
}

/* Open the gate a command container's script waits on before it execs
 * the command, and put a line in it: the script goes on only once we hold
 * init's pidfd, so even a command that exits at once leaves its status to
 * us. The fd stays open (in the watch) until init dies, so the line is not
 * lost if the script reaches the gate after we return. -1 if no gate. */
int rt_lxc_open_gate(struct rt_lxc *h, const char *id)
{
	char path[PATH_MAX];
	int fd;

	if (rt_lxc_dir(h, id, RT_LXC_GATE_FILE, path, sizeof(path)) < 0)
		return -1;
	/* O_RDWR: never blocks and never waits for a reader. */
	fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (write(fd, "\n", 1) != 1) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * mount(2) follows symlinks, and a bind source is mounted anew at every
 * start from the config, where create wrote it with its links resolved and
 * listed it in nodefs-binds (the template's own entries, busybox's /lib,
 * are not ours to judge). A source that no longer resolves to itself has
 * had a link put on its way since (a directory swapped for a link to
 * /etc): refuse to start rather than mount what it now leads to.
 */
static int binds_unchanged(struct rt_lxc *h, const char *id, struct nerr *err)
{
	_cleanup_free_ char *buf = NULL;
	char path[PATH_MAX], real[PATH_MAX];
	char *save = NULL;
	int n;

	if (rt_lxc_dir(h, id, RT_LXC_BINDS_FILE, path, sizeof(path)) < 0)
		return nerr_set(err, ENAMETOOLONG, "lxc %s: path too long", id);
	buf = malloc(RT_LXC_BINDS_CAP);
	if (!buf)
		return nerr_set(err, ENOMEM, "lxc: out of memory");
	n = rt_lxc_read_file(path, buf, RT_LXC_BINDS_CAP);
	if (n == -ENOENT)
		return 0;	/* no binds */
	if (n < 0)
		return nerr_set(err, -n, "lxc %s: %s: %s", id, path, strerror(-n));
	for (char *src = strtok_r(buf, "\n", &save); src; src = strtok_r(NULL, "\n", &save)) {
		if (!realpath(src, real))
			return nerr_set(err, errno == ENOENT ? ENOENT : EIO,
					"lxc %s: bind source %.200s: %s; not started", id, src,
					strerror(errno));
		if (strcmp(real, src) != 0)
			return nerr_set(err, EPERM,
					"lxc %s: bind source %.100s now leads to %.100s through a "
					"symlink; not started", id, src, real);
	}
	return 0;
}

/*
 * An rshared bind (a node plugin's staging and publish roots): liblxc makes
 * every mount of the container's namespace a slave before its binds, so
 * lxc.mount.entry's "rshared" leaves them slaves of the host's (what the
 * container mounts under them would never show on the host). Each such
 * bind is therefore stacked again once init runs and before the command's
 * gate opens: a clone of the host's mount (open_tree, a peer of it) moved
 * onto the target inside (move_mount, from a child that entered init's
 * mount namespace: setns needs a single thread). RT_LXC_SHARED_FILE lists
 * them, source and target lines in pairs.
 */
static int share_binds(struct rt_lxc *h, const char *id, pid_t pid, struct nerr *err)
{
	char path[PATH_MAX], ns[64], *save = NULL, *src, *dst;
	_cleanup_free_ char *buf = malloc(RT_LXC_BINDS_CAP);
	int n;

	if (!buf)
		return nerr_set(err, ENOMEM, "lxc: out of memory");
	if (rt_lxc_dir(h, id, RT_LXC_SHARED_FILE, path, sizeof(path)) < 0)
		return nerr_set(err, ENAMETOOLONG, "lxc %s: path too long", id);
	n = rt_lxc_read_file(path, buf, RT_LXC_BINDS_CAP);
	if (n == -ENOENT)
		return 0;
	if (n < 0)
		return nerr_set(err, -n, "lxc %s: cannot read %s: %s", id, path, strerror(-n));
	snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)pid);
	for (src = strtok_r(buf, "\n", &save); src && (dst = strtok_r(NULL, "\n", &save));
	     src = strtok_r(NULL, "\n", &save)) {
		int fd = open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
		int nsfd = open(ns, O_RDONLY | O_CLOEXEC), status = 0;
		pid_t child;

		if (fd < 0 || nsfd < 0) {
			int e = errno;

			if (fd >= 0)
				close(fd);
			if (nsfd >= 0)
				close(nsfd);
			return nerr_set(err, e, "lxc %s: cannot share %.100s: %s", id, src, strerror(e));
		}
		child = fork();
		if (child == 0) {
			if (setns(nsfd, CLONE_NEWNS) < 0)
				_exit(errno & 0xff);
			if (move_mount(fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
				_exit(errno & 0xff);
			_exit(0);
		}
		close(fd);
		close(nsfd);
		if (child < 0)
			return nerr_set(err, errno, "lxc %s: fork: %s", id, strerror(errno));
		while (waitpid(child, &status, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			return nerr_set(err, WIFEXITED(status) ? WEXITSTATUS(status) : EIO,
					"lxc %s: cannot share %.100s at %.100s: %s", id, src, dst,
					WIFEXITED(status) ? strerror(WEXITSTATUS(status)) : "killed");
	}
	return 0;
}

/* A command run as a user (user=, lxc.init.uid) writes its output to the
 * console the script finds writable after the gate: liblxc leaves it
 * root's, so it is handed to that user before the gate opens, or the logs
 * of such a container would stay empty. Best effort. */
static void console_to_init_user(struct lxc_container *c, pid_t pid)
{
	char uid[24] = "", gid[24] = "", path[64];

	if (pid <= 0 || c->get_config_item(c, "lxc.init.uid", uid, sizeof(uid)) <= 0 ||
	    strcmp(uid, "0") == 0 || !uid[0])
		return;
	if (c->get_config_item(c, "lxc.init.gid", gid, sizeof(gid)) <= 0)
		snprintf(gid, sizeof(gid), "0");
	snprintf(path, sizeof(path), "/proc/%d/root/dev/console", (int)pid);
	(void)fchownat(AT_FDCWD, path, (uid_t)strtoul(uid, NULL, 10), (gid_t)strtoul(gid, NULL, 10),
		       AT_SYMLINK_NOFOLLOW);
}

int rt_lxc_start(void *hv, const char *id, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	pid_t pid = 0;
	int r, fd, gate;

	r = rt_lxc_open_ours(h, id, &c, NULL, err);
	if (r < 0)
		return r;
	if (c->is_running(c))
		return rt_lxc_fail(h, c, id, LF_RUNNING, err);
	r = binds_unchanged(h, id, err);
	if (r < 0)
		return r;
	rotate_console_log(h, id);
	/* the last run's monitor cgroup, so liblxc does not make NAME-1 */
	(void)rt_lxc_cg_remove_leftovers(&h->home, id);
	/* A stale watch from the last run must not see this one. */
	rt_lxc_watch_del(h->watch, id);
	if (runtime_helper()) {
		/* liblxc forks lxc's monitor with no exec: from a process of
		 * one thread (lxc-helper.c). Returns once RUNNING or failed. */
		r = rt_lxc_start_in_helper(h, id);
		if (r < 0)
			return nerr_set(err, -r, "lxc %s: cannot run %s: %s", id, runtime_helper(),
					strerror(-r));
		if (r == 0)
			return rt_lxc_fail(h, c, id, LF_START, err);
	} else {
		c->want_daemonize(c, true);
		c->want_close_all_fds(c, true);
		bool started = c->start(c, 0, NULL);

		/* liblxc entered the caller into the monitor's cgroup: back
		 * home, so the monitor's own teardown can remove that cgroup */
		(void)rt_lxc_cg_go_home(&h->home);
		if (!started)
			return rt_lxc_fail(h, c, id, LF_START, err);
	}
	/* The pidfd first, the shared binds, then the gate that lets a
	 * command run. */
	fd = rt_lxc_init_pidfd(c, &pid);
	if (fd >= 0 && (r = share_binds(h, id, pid, err)) < 0) {
		c->stop(c);
		rt_lxc_wait_down(h, c, id, fd, 5000);
		close(fd);
		return r;
	}
	console_to_init_user(c, pid);
	gate = rt_lxc_open_gate(h, id);
	(void)rt_lxc_meta_started(h, id, time(NULL));
	if (fd < 0) {
		if (gate >= 0)
			close(gate);
		/* A system init gone already (there is no gate for it):
		 * its status went to lxc's monitor alone. Started, then
		 * exited, code unknown. */
		(void)rt_lxc_meta_finished(h, id, time(NULL), -1, false);
		rt_lxc_watch_post(h->watch, RT_EV_START, id, 0);
		rt_lxc_watch_post(h->watch, RT_EV_DIE, id, -1);
		return 0;
	}
	r = rt_lxc_watch_add(h->watch, id, fd, pid, gate);
	if (r < 0)
		return nerr_set(err, -r, "lxc %s: cannot watch init: %s", id, strerror(-r));
	rt_lxc_watch_post(h->watch, RT_EV_START, id, 0);
	return 0;
}

/*
 * On cgroup v1, liblxc's freeze writes FROZEN to freezer.state once and
 * then polls, a second apart and with no time limit, until it reads
 * FROZEN; a task caught mid-fork can keep the cgroup at FREEZING for good
 * (the kernel retries only on the next write) and the worker would hang
 * there. So on v1 the driver freezes (or thaws) first itself, writing
 * again on every look and giving up after timeout_ms; liblxc's call then
 * finds the state reached, returns at once and tells lxc's monitor, whose
 * state c->state() reports. 0 (reached, or not v1: liblxc alone then),
 * -ESRCH (init or its cgroup gone), -ETIMEDOUT (a freeze is undone).
 */
static int v1_freezer(struct rt_lxc *h, struct lxc_container *c, bool freeze, int timeout_ms)
{
	struct rt_lxc_cgpaths p;
	pid_t pid;
	int r;

	if (h->cg.mode != RT_LXC_CG_V1 || !h->cg.freezer[0])
		return 0;
	pid = c->init_pid(c);
	if (pid <= 0)
		return -ESRCH;
	r = rt_lxc_cg_paths(&h->cg, pid, &p);
	if (r < 0 || !p.freezer[0])
		return r == -ENOENT || r == -ESRCH ? -ESRCH : 0;
	r = rt_lxc_cg_freeze(&p, freeze, timeout_ms);
	return r == -ENOTSUP ? 0 : r;
}

/* Wait for the container to be down and its exit recorded. */
void rt_lxc_wait_down(struct rt_lxc *h, struct lxc_container *c, const char *id, int pidfd,
		      int timeout_ms)
{
	if (pidfd >= 0) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };

		(void)poll(&p, 1, timeout_ms);
	}
	/* The watcher writes the record right after the reap. */
	(void)rt_lxc_watch_wait(h->watch, id, timeout_ms);
}

int rt_lxc_stop(void *hv, const char *id, int timeout_s, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	_cleanup_close_ int pidfd = -1;
	int r;

	r = rt_lxc_open_ours(h, id, &c, NULL, err);
	if (r < 0)
		return r;
	if (!c->is_running(c))
		return 0;
	if (timeout_s < 0)
		timeout_s = h->stop_timeout;
	pidfd = rt_lxc_init_pidfd(c, NULL);
	if (rt_lxc_state_of(c, NULL) == RT_STATE_PAUSED)
		(void)v1_freezer(h, c, false, 5000);
	if (rt_lxc_state_of(c, NULL) == RT_STATE_PAUSED && !c->unfreeze(c)) {
		/*
		 * Killed while frozen, it dies as it thaws and its monitor
		 * removes the cgroup liblxc watches for THAWED: the unfreeze
		 * "fails" on a container that is going down, which is what a
		 * stop asks. Only one still running after that is an error.
		 */
		rt_lxc_wait_down(h, c, id, pidfd, 2000);
		if (c->is_running(c))
			return rt_lxc_fail(h, c, id, LF_UNFREEZE, err);
		return 0;
	}
	/* shutdown() sends lxc.signal.halt and waits on init's pidfd. */
	rt_lxc_watch_halting(h->watch, id, timeout_s > 0);
	if (timeout_s == 0 || !c->shutdown(c, timeout_s)) {
		rt_lxc_watch_halting(h->watch, id, false);
		if (c->is_running(c) && !c->stop(c) && c->is_running(c))
			return rt_lxc_fail(h, c, id, LF_STOP, err);
	}
	rt_lxc_wait_down(h, c, id, pidfd, 5000);
	return 0;
}

/* Whether c's init is gone, or going (an attach that failed because it
 * could not open the init's namespaces: the container exited meanwhile,
 * before liblxc's monitor says so). */
static bool init_gone(struct lxc_container *c)
{
	pid_t pid = c->init_pid(c);
	char ns[64];

	if (pid <= 0 || rt_lxc_state_of(c, NULL) != RT_STATE_RUNNING)
		return true;
	/* exited and not yet reaped, its namespaces are gone already */
	snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)pid);
	return access(ns, F_OK) < 0 && (errno == ENOENT || errno == ESRCH);
}

/* A handle on one of our containers that runs: ENOENT, or EBUSY when it
 * does not run. *ret is set (the caller's to put) once it is open. */
static int open_running(struct rt_lxc *h, const char *id, struct lxc_container **ret,
			struct nerr *err)
{
	int r = rt_lxc_open_ours(h, id, ret, NULL, err);

	if (r < 0)
		return r;
	if (!(*ret)->is_running(*ret))
		return rt_lxc_fail(h, *ret, id, LF_NOT_RUNNING, err);
	return 0;
}

int rt_lxc_kill(void *hv, const char *id, int sig, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	_cleanup_close_ int pidfd = -1;
	int r;

	if (sig <= 0 || sig > SIGRTMAX)
		return nerr_set(err, EINVAL, "lxc: bad signal %d", sig);
	r = open_running(h, id, &c, err);
	if (r < 0)
		return r;
	/* Through a pidfd: a pid can be reused, a pidfd cannot. */
	pidfd = rt_lxc_init_pidfd(c, NULL);
	if (pidfd < 0)
		return rt_lxc_fail(h, c, id, LF_NOT_RUNNING, err);
	rt_lxc_watch_halting(h->watch, id, false);
	if (pidfd_send_signal_(pidfd, sig) < 0) {
		int e = errno;

		/* ESRCH: init died since is_running said otherwise */
		if (e == ESRCH)
			return rt_lxc_fail(h, NULL, id, LF_NOT_RUNNING, err);
		return rt_lxc_failf(h, NULL, id, LF_SIGNAL, err, "signal %d: %s", sig, strerror(e));
	}
	return 0;
}

int rt_lxc_pause(void *hv, const char *id, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	int r = open_running(h, id, &c, err);

	if (r < 0)
		return r;
	if (rt_lxc_state_of(c, NULL) == RT_STATE_PAUSED)
		return 0;
	r = v1_freezer(h, c, true, 10000);
	if (r == -ETIMEDOUT)
		return nerr_set(err, EBUSY, "lxc %s: not frozen after 10 s (a task would not "
			       "stop); left running", id);
	if (r < 0 || !c->freeze(c))
		return rt_lxc_fail(h, c, id, c->is_running(c) ? LF_FREEZE : LF_NOT_RUNNING, err);
	rt_lxc_watch_post(h->watch, RT_EV_PAUSE, id, 0);
	return 0;
}

int rt_lxc_resume(void *hv, const char *id, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	int r = open_running(h, id, &c, err);

	if (r < 0)
		return r;
	if (rt_lxc_state_of(c, NULL) != RT_STATE_PAUSED)
		return 0;
	/*
	 * A container killed while frozen dies as soon as it thaws, and its
	 * monitor removes the cgroup liblxc is still watching for THAWED: the
	 * unfreeze "fails" on a container that is no longer running. That is
	 * the EBUSY of a resume of a stopped container, not an I/O error.
	 */
	(void)v1_freezer(h, c, false, 10000);
	if (!c->unfreeze(c))
		return rt_lxc_fail(h, c, id, c->is_running(c) ? LF_UNFREEZE : LF_NOT_RUNNING, err);
	rt_lxc_watch_post(h->watch, RT_EV_UNPAUSE, id, 0);
	return 0;
}

int rt_lxc_update(void *hv, const char *id, const struct rt_limits *lim, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	struct rt_lxc_item items[RT_LXC_LIMIT_ITEMS_MAX], cfg[RT_LXC_LIMIT_ITEMS_MAX];
	bool done[RT_LXC_LIMIT_ITEMS_MAX] = { false };
	int n, r;

	n = rt_lxc_cg_items(&h->cg, lim, false, items, ARRAY_SIZE(items), err);
	if (n < 0)
		return n;
	(void)rt_lxc_cg_items(&h->cg, lim, true, cfg, ARRAY_SIZE(cfg), NULL);
	r = rt_lxc_open_ours(h, id, &c, NULL, err);
	if (r < 0)
		return r;
	if (c->is_running(c)) {
		/* v1 wants memory.limit <= memsw.limit at every step, so
		 * the order depends on the direction: retry what failed
		 * once the rest went in. */
		for (int pass = 0; pass < 2; pass++)
			for (int i = 0; i < n; i++)
				if (!done[i])
					done[i] = c->set_cgroup_item(c, items[i].key, items[i].val);
		for (int i = 0; i < n; i++)
			if (!done[i])
				return rt_lxc_failf(h, c, id, LF_CGROUP, err, "%s = %s", items[i].key,
						 items[i].val);
	}
	/* Keep the limits for the next start too. */
	for (int i = 0; i < n; i++) {
		c->clear_config_item(c, cfg[i].key);
		if (!c->set_config_item(c, cfg[i].key, cfg[i].val))
			return rt_lxc_failf(h, c, id, LF_CONFIG, err, "%s = %s", cfg[i].key, cfg[i].val);
	}
	if (!c->save_config(c, NULL))
		return rt_lxc_failf(h, c, id, LF_CONFIG, err, "cannot save the config");
	return 0;
}

/* ---- exec --------------------------------------------------------------- */

int rt_lxc_exec(void *hv, const char *id, char *const argv[], struct sbuf *out,
		int *ret_exit_code, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	_cleanup_close_ int rd = -1, wr = -1, null = -1;
	int fds[2], status, r;
	pid_t pid = -1;
	size_t base, total = 0;
	bool over = false;
	char *env[RT_LXC_EXEC_ENV_MAX + 3];
	char envbuf[16384];
	size_t nenv = 0;
	lxc_attach_options_t opts = LXC_ATTACH_OPTIONS_DEFAULT;
	lxc_attach_command_t cmd;

	if (!argv || !argv[0] || !argv[0][0])
		return nerr_set(err, EINVAL, "lxc: exec needs a command");
	r = open_running(h, id, &c, err);
	if (r < 0)
		return r;
	if (rt_lxc_state_of(c, NULL) == RT_STATE_PAUSED)
		return rt_lxc_fail(h, c, id, LF_PAUSED, err);
	/* CLOEXEC: attach dup2()s them onto 0-2 in its child, and no other
	 * thread's fork may keep the write end open. */
	if (pipe2(fds, O_CLOEXEC) < 0)
		return nerr_set(err, errno, "lxc: pipe: %s", strerror(errno));
	rd = fds[0];
	wr = fds[1];
	null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null < 0)
		return nerr_set(err, errno, "lxc: /dev/null: %s", strerror(errno));
	/* A clean environment: PATH, TERM and the container's own
	 * (lxc.environment, as its init got), never the daemon's. */
	env[nenv++] = (char *)ATTACH_PATH;
	env[nenv++] = (char *)"TERM=dumb";
	if (c->get_config_item(c, "lxc.environment", envbuf, sizeof(envbuf)) > 0) {
		char *save = NULL;

		for (char *p = strtok_r(envbuf, "\n", &save); p && nenv < RT_LXC_EXEC_ENV_MAX + 2;
		     p = strtok_r(NULL, "\n", &save))
			if (strchr(p, '='))
				env[nenv++] = p;
	}
	env[nenv] = NULL;
	opts.env_policy = LXC_ATTACH_CLEAR_ENV;
	opts.extra_env_vars = env;
	opts.stdin_fd = null;
	opts.stdout_fd = wr;
	opts.stderr_fd = wr;
	cmd.program = argv[0];
	cmd.argv = (char **)argv;
	/* attach() rather than attach_run_wait(): the output must be drained
	 * while the command runs, or it blocks on a full pipe. */
	if (c->attach(c, lxc_attach_run_command, &cmd, &opts, &pid) < 0 || pid <= 0)
		return rt_lxc_fail(h, c, id, init_gone(c) ? LF_NOT_RUNNING : LF_ATTACH, err);
	close(wr);
	wr = -1;
	base = out->len;
	for (;;) {
		char buf[16384];
		ssize_t n = read(rd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		total += (size_t)n;
		if (over || total > RT_LXC_EXEC_CAP || sbuf_add(out, buf, (size_t)n) < 0)
			over = true;	/* keep draining so the command can finish */
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return nerr_set(err, errno, "lxc %s: waitpid: %s", id, strerror(errno));
	}
	if (over) {
		out->len = base;
		if (out->buf)
			out->buf[base] = '\0';
		return nerr_set(err, E2BIG, "lxc %s: exec output exceeds %u bytes", id, RT_LXC_EXEC_CAP);
	}
	*ret_exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	return 0;
}

